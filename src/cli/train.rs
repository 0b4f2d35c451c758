//! `keyslice train --data DIR --out DIR`: supervised training of `keyslice-tiny` on case
//! folders (phantoms or AbdomenAtlas-style cases); see `infer::embedded::train`.

use std::path::PathBuf;

use clap::Args;

use super::CliError;
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
}

/// Runs `train`.
pub fn run(args: &TrainArgs) -> Result<(), CliError> {
    if args.steps == 0 || args.batch == 0 {
        return Err(CliError::Argument(
            "--steps and --batch must be at least 1".into(),
        ));
    }
    let config = match &args.config {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| CliError::Argument(format!("{}: {e}", path.display())))?;
            Some(serde_json::from_str(&text).map_err(|e| {
                CliError::Argument(format!(
                    "{}: not a keyslice-tiny config: {e}",
                    path.display()
                ))
            })?)
        }
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
