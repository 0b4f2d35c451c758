//! `keyslice train --data DIR --out DIR`: supervised training of `keyslice-tiny` on case
//! folders (phantoms or AbdomenAtlas-style cases); see `infer::embedded::train`.

use std::path::PathBuf;

use clap::Args;

use keyslice_workflow::train::{self, Stage, TrainPlan};

use super::CliError;
use crate::scoring::RewardWeights;
use crate::train::finder::MaskSource;

/// Arguments of `train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Folder of case folders (ct.nii.gz + segmentations/, truth.json where known).
    #[arg(
        long,
        required_unless_present = "from_export",
        conflicts_with = "from_export"
    )]
    pub data: Option<PathBuf>,
    /// RL stage: train on a reviewed workspace's `swift` or `verl` export made with
    /// `--volumes` (its train split; the reviewed findings are the truth) instead of --data.
    #[arg(long)]
    pub from_export: Option<PathBuf>,
    /// Where to write config.json and model.safetensors.
    #[arg(long)]
    pub out: PathBuf,
    /// Optimisation steps [default: 1200; 300 for --stage rl].
    #[arg(long)]
    pub steps: Option<usize>,
    /// Slabs (and verifier crops) per step; cases per step for --stage rl [default: 16; 4
    /// for --stage rl].
    #[arg(long)]
    pub batch: Option<usize>,
    /// AdamW learning rate [default: 2e-3; 1e-4 for --stage rl].
    #[arg(long)]
    pub lr: Option<f64>,
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
    /// Print what was written as one JSON line (`out`, `stage`, `model`, `files`); progress
    /// stays on stderr.
    #[arg(long)]
    pub json: bool,
    /// The checkpoint folder the organ and finder stages build on.
    #[arg(long)]
    pub init: Option<PathBuf>,
    /// Finder stage: cases (the last ones in --data) kept out of training to choose the
    /// per-organ thresholds; organ stage: cases kept out to measure Dice on; evidence stage:
    /// cases kept out to measure the reader on.
    #[arg(long, default_value_t = 80)]
    pub calibration: usize,
    /// Organ stage: share of the training windows centred on a lesion voxel (tumors belong
    /// to their organ's mask; without such windows the network draws the organ around them).
    #[arg(long, default_value_t = 0.0)]
    pub lesion_windows: f64,
    /// Finder stage: share of the negatives drawn from the hardest tenth, scored afresh at
    /// 30, 50 and 70 % of the steps (0: uniform negatives throughout).
    #[arg(long, default_value_t = 0.0)]
    pub hard_negatives: f64,
    /// Finder stage: the organ masks its crops stand on: the true ones, or those the organ
    /// network of --init draws (what the finder is given at analysis time).
    #[arg(long, value_enum, default_value_t = FinderMasks::Truth)]
    pub finder_masks: FinderMasks,
    /// Evidence stage: share of the training claims taken from the answers of the --init
    /// model's diagnoser on the training cases (its real and false findings with the
    /// evidence it cites; 0: none).
    #[arg(long, default_value_t = 0.0)]
    pub model_claims: f64,
    /// RL stage: samples per case (GRPO's group size).
    #[arg(long, default_value_t = 8)]
    pub group: usize,
    /// RL stage: KL coefficient of the key-slice choice against the supervised policy.
    #[arg(long, default_value_t = 0.01)]
    pub kl: f64,
    /// RL stage: KL coefficient of the per-organ presence decisions (the key-slice choice
    /// takes --kl); the larger one keeps tumor detection near the supervised model's while
    /// the key slice learns.
    #[arg(long, default_value_t = 1.0)]
    pub presence_kl: f64,
    /// RL stage: clip range of the probability ratio.
    #[arg(long, default_value_t = 0.2)]
    pub clip: f64,
    /// RL stage: optimiser steps per drawn batch (GRPO's μ).
    #[arg(long, default_value_t = 1)]
    pub updates: usize,
    /// RL stage: reward weights, e.g. `format=1,existence=1,attributes=1,localization=1,consistency=1`
    /// (terms left out keep weight 1; 0 drops a term).
    #[arg(long)]
    pub rewards: Option<String>,
    /// RL stage: train only on cases the supervised model gets wrong on attributes (and,
    /// from an export, the cases the reviewer corrected).
    #[arg(long)]
    pub hard_only: bool,
}

/// Says what a stage wrote: a line of text, or with `--json` one JSON line (`out`, `stage`,
/// `model`, `files`).
fn written(args: &TrainArgs, model: &str, files: &str) -> Result<(), CliError> {
    let summary = serde_json::json!({
        "out": args.out,
        "stage": clap::ValueEnum::to_possible_value(&args.stage)
            .map(|value| value.get_name().to_string()),
        "model": model,
        "files": files.split(", ").collect::<Vec<_>>(),
    });
    super::print_summary(args.json, &summary, || {
        format!("{model} written to {} ({files})", args.out.display())
    })
}

/// The finder stage's organ masks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FinderMasks {
    /// The cases' true organ masks.
    Truth,
    /// The masks of the organ network of --init.
    OrganNetwork,
}

/// Runs `train`.
pub fn run(args: &TrainArgs) -> Result<(), CliError> {
    let rl = args.stage == Stage::Rl;
    let steps = args.steps.unwrap_or(if rl { 300 } else { 1200 });
    let batch = args.batch.unwrap_or(if rl { 4 } else { 16 });
    let lr = args.lr.unwrap_or(if rl { 1e-4 } else { 2e-3 });
    let plan = TrainPlan {
        stage: args.stage,
        data: args.data.clone(),
        from_export: args.from_export.clone(),
        out: args.out.clone(),
        init: args.init.clone(),
        config: args.config.clone(),
        steps,
        batch,
        lr,
        seed: args.seed,
        version: args.version.clone(),
        lesion_weight: args.lesion_weight,
        dice_weight: args.dice_weight,
        calibration: args.calibration,
        lesion_windows: args.lesion_windows,
        hard_negatives: args.hard_negatives,
        finder_masks: match args.finder_masks {
            FinderMasks::Truth => MaskSource::Truth,
            FinderMasks::OrganNetwork => MaskSource::OrganNetwork,
        },
        model_claims: args.model_claims,
        group: args.group,
        kl: args.kl,
        presence_kl: args.presence_kl,
        clip: args.clip,
        updates: args.updates,
        rewards: match &args.rewards {
            None => RewardWeights::default(),
            Some(text) => RewardWeights::parse(text)
                .map_err(|error| CliError::Argument(format!("--rewards: {error}")))?,
        },
        hard_only: args.hard_only,
    };
    let trained = train::train_stage(&plan, &|line| eprintln!("{line}"), &|chart| {
        crate::ui::chart::chart_png(chart, [720.0, 420.0], 2.0).map_err(|error| error.to_string())
    })?;
    written(args, trained.model, trained.files)
}
