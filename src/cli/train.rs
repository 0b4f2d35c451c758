//! `keyslice train --data DIR --out DIR`: supervised training of `keyslice-tiny` on case
//! folders (phantoms or AbdomenAtlas-style cases); see `infer::embedded::train`.

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::infer::embedded::TinyConfig;
use crate::infer::embedded::finder_train::{FinderTrainOptions, recalibrate, train_finder};
use crate::infer::embedded::organs_train::{OrgansTrainOptions, train_organs};
use crate::infer::embedded::train::{TrainOptions, train};

/// Arguments of `train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Folder of case folders (ct.nii.gz + segmentations/, truth.json where known).
    #[arg(long)]
    pub data: PathBuf,
    /// Where to write config.json and model.safetensors.
    #[arg(long)]
    pub out: PathBuf,
    /// Optimisation steps.
    #[arg(long, default_value_t = 1200)]
    pub steps: usize,
    /// Slabs (and verifier crops) per step.
    #[arg(long, default_value_t = 16)]
    pub batch: usize,
    /// AdamW learning rate.
    #[arg(long, default_value_t = 2e-3)]
    pub lr: f64,
    /// Seed for initialisation and sampling.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Version recorded in config.json.
    #[arg(long, default_value = "2")]
    pub version: String,
    /// Weight of lesion pixels in the lesion masks' cross-entropy.
    #[arg(long, default_value_t = 5.0)]
    pub lesion_weight: f64,
    /// Weight of the lesion masks' soft Dice term (0: cross-entropy alone).
    #[arg(long, default_value_t = 0.0)]
    pub dice_weight: f64,
    /// A config.json to start from (grid, widths, windows) instead of the built-in one.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// What to train: the diagnoser and verifier networks, or the organ network or the
    /// lesion finder on top of the checkpoint given by --init.
    #[arg(long, value_enum, default_value_t = Stage::Networks)]
    pub stage: Stage,
    /// The checkpoint folder the organ and finder stages build on.
    #[arg(long)]
    pub init: Option<PathBuf>,
    /// Finder stage: cases (the last ones in --data) kept out of training to choose the
    /// per-organ thresholds; organ stage: cases kept out to measure Dice on.
    #[arg(long, default_value_t = 80)]
    pub calibration: usize,
}

/// A training stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Stage {
    /// The diagnoser and verifier (per-pixel organ, lesion and class maps).
    Networks,
    /// The organ network (liver, pancreas and kidney masks on the finder's grid).
    Organs,
    /// The lesion finder (per organ and slab: is there a tumor, and where).
    Finder,
    /// No training: the finder's thresholds of --init chosen afresh on every case in --data.
    Calibrate,
}

/// Runs `train`.
pub fn run(args: &TrainArgs) -> Result<(), CliError> {
    if args.steps == 0 || args.batch == 0 {
        return Err(CliError::Argument(
            "--steps and --batch must be at least 1".into(),
        ));
    }
    if args.stage != Stage::Networks && args.init.is_none() {
        return Err(CliError::Argument(
            "--stage organs, finder and calibrate need --init DIR, the checkpoint they build on (e.g. models/keyslice-tiny)".into(),
        ));
    }
    if let (Stage::Calibrate, Some(init)) = (args.stage, &args.init) {
        recalibrate(init, &args.data, &args.out, &args.version, |line| {
            eprintln!("{line}");
        })?;
        println!(
            "keyslice-tiny with recalibrated finder thresholds written to {} (config.json, model.safetensors)",
            args.out.display()
        );
        return Ok(());
    }
    if let (Stage::Organs, Some(init)) = (args.stage, &args.init) {
        let options = OrgansTrainOptions {
            steps: args.steps,
            batch: args.batch,
            learning_rate: args.lr,
            seed: args.seed,
            version: args.version.clone(),
            held_out: args.calibration,
            start: match &args.config {
                None => None,
                Some(path) => read_config(path)?.organs,
            },
        };
        train_organs(init, &args.data, &args.out, &options, |line| {
            eprintln!("{line}");
        })?;
        println!(
            "keyslice-tiny with its organ network written to {} (config.json, model.safetensors)",
            args.out.display()
        );
        return Ok(());
    }
    if let (Stage::Finder, Some(init)) = (args.stage, &args.init) {
        let options = FinderTrainOptions {
            steps: args.steps,
            batch: args.batch,
            learning_rate: args.lr,
            seed: args.seed,
            version: args.version.clone(),
            calibration: args.calibration,
            start: match &args.config {
                None => None,
                Some(path) => read_config(path)?.finder,
            },
        };
        train_finder(init, &args.data, &args.out, &options, |line| {
            eprintln!("{line}");
        })?;
        println!(
            "keyslice-tiny with its finder written to {} (config.json, model.safetensors)",
            args.out.display()
        );
        return Ok(());
    }
    let config = match &args.config {
        None => None,
        Some(path) => Some(read_config(path)?),
    };
    let options = TrainOptions {
        config,
        lesion_weight: args.lesion_weight,
        dice_weight: args.dice_weight,
        steps: args.steps,
        batch: args.batch,
        learning_rate: args.lr,
        seed: args.seed,
        version: args.version.clone(),
    };
    train(&args.data, &args.out, &options, |line| eprintln!("{line}"))?;
    println!(
        "keyslice-tiny written to {} (config.json, model.safetensors)",
        args.out.display()
    );
    Ok(())
}

/// A keyslice-tiny `config.json`.
fn read_config(path: &std::path::Path) -> Result<TinyConfig, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::Argument(format!("{}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| {
        CliError::Argument(format!(
            "{}: not a keyslice-tiny config: {e}",
            path.display()
        ))
    })
}
