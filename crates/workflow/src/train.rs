//! Training keyslice-tiny, one stage at a time: the networks from scratch, or a stage on top
//! of a checkpoint (organs, finder, calibrate, domain, evidence, RL). Progress lines go to a
//! callback; what was written is returned.

use std::path::{Path, PathBuf};

use keyslice_core::chart::Chart;
use keyslice_core::scoring::RewardWeights;
use keyslice_infer::embedded::TinyConfig;
use keyslice_train::domain::calibrate_domain;
use keyslice_train::evidence::{EvidenceTrainOptions, train_evidence};
use keyslice_train::finder::{FinderTrainOptions, MaskSource, recalibrate, train_finder};
use keyslice_train::organs::{OrgansTrainOptions, train_organs};
use keyslice_train::rl::{RlData, RlOptions, train_rl};
use keyslice_train::tiny::{TrainOptions, train};

use crate::Error;

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
    /// GRPO on the finder of --init with the E-MRL rewards (phantom cases with truth.json).
    Rl,
    /// No training: the ranges of the domain check (what CTs --init knows) measured on every
    /// case in --data; the weights are copied as they are.
    Domain,
    /// The evidence reader: keyslice-tiny's own verifier, which reads each claimed lesion in
    /// three planes through its box, added to the checkpoint of --init (phantom cases with
    /// truth.json).
    Evidence,
}

/// What to train and how: a stage and its settings.
#[derive(Clone, Debug)]
pub struct TrainPlan {
    /// The stage.
    pub stage: Stage,
    /// Folder of case folders.
    pub data: Option<PathBuf>,
    /// RL stage: a reviewed workspace's export made with its volumes, instead of `data`.
    pub from_export: Option<PathBuf>,
    /// Where config.json and model.safetensors go.
    pub out: PathBuf,
    /// The checkpoint a stage builds on.
    pub init: Option<PathBuf>,
    /// A config.json to start from.
    pub config: Option<PathBuf>,
    /// Optimisation steps.
    pub steps: usize,
    /// Slabs (or cases, for RL) per step.
    pub batch: usize,
    /// AdamW learning rate.
    pub lr: f64,
    /// Seed for initialisation and sampling.
    pub seed: u64,
    /// Version recorded in config.json.
    pub version: String,
    /// Weight of lesion pixels in the lesion masks' cross-entropy.
    pub lesion_weight: f64,
    /// Weight of the lesion masks' soft Dice term.
    pub dice_weight: f64,
    /// Cases kept out (thresholds, Dice, the reader's measure).
    pub calibration: usize,
    /// Organ stage: share of windows centred on a lesion voxel.
    pub lesion_windows: f64,
    /// Finder stage: share of the hardest negatives.
    pub hard_negatives: f64,
    /// Finder stage: the organ masks its crops stand on.
    pub finder_masks: MaskSource,
    /// Evidence stage: share of claims from the model's own answers.
    pub model_claims: f64,
    /// RL stage: samples per case.
    pub group: usize,
    /// RL stage: KL coefficient of the key-slice choice.
    pub kl: f64,
    /// RL stage: KL coefficient of the presence decisions.
    pub presence_kl: f64,
    /// RL stage: clip range of the probability ratio.
    pub clip: f64,
    /// RL stage: optimiser steps per drawn batch.
    pub updates: usize,
    /// RL stage: reward weights.
    pub rewards: RewardWeights,
    /// RL stage: only the cases the supervised model gets wrong.
    pub hard_only: bool,
}

/// What a stage wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trained {
    /// The model, in words.
    pub model: &'static str,
    /// The files written into the output folder.
    pub files: &'static str,
}

const CHECKPOINT: &str = "config.json, model.safetensors";

impl TrainPlan {
    /// The learning rate is positive, steps and batch at least 1, the weights and
    /// coefficients finite and not negative, the shares from 0 to 1; each refused with its
    /// flag named.
    pub fn check(&self) -> Result<(), Error> {
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(Error::Argument(format!(
                "--lr {}: must be a positive number",
                self.lr
            )));
        }
        if self.steps == 0 || self.batch == 0 {
            return Err(Error::Argument(
                "--steps and --batch must be at least 1".into(),
            ));
        }
        for (flag, value) in [
            ("--lesion-weight", self.lesion_weight),
            ("--dice-weight", self.dice_weight),
            ("--kl", self.kl),
            ("--presence-kl", self.presence_kl),
            ("--clip", self.clip),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(Error::Argument(format!(
                    "{flag} {value}: must be a finite number of at least 0"
                )));
            }
        }
        for (flag, share) in [
            ("--lesion-windows", self.lesion_windows),
            ("--hard-negatives", self.hard_negatives),
            ("--model-claims", self.model_claims),
        ] {
            if !(0.0..=1.0).contains(&share) {
                return Err(Error::Argument(format!(
                    "{flag} is a share, from 0 to 1 (got {share})"
                )));
            }
        }
        Ok(())
    }
}

/// Runs one stage of `plan` (checked first); progress lines go to `progress`, the RL stage's
/// reward chart is drawn by `png`.
pub fn train_stage(
    plan: &TrainPlan,
    progress: &dyn Fn(&str),
    png: &dyn Fn(&Chart) -> Result<Vec<u8>, String>,
) -> Result<Trained, Error> {
    plan.check()?;
    let init = match (plan.stage, &plan.init) {
        (Stage::Networks, _) => None,
        (_, Some(init)) => Some(init.as_path()),
        (_, None) => {
            return Err(Error::Argument(
                "--stage organs, finder, calibrate, rl, domain and evidence need --init DIR, the checkpoint they build on (e.g. models/keyslice-tiny)".into(),
            ));
        }
    };
    if let (Stage::Rl, Some(init)) = (plan.stage, init) {
        return run_rl(plan, init, progress, png);
    }
    let Some(data) = &plan.data else {
        return Err(Error::Argument(
            "--from-export is for --stage rl; the other stages read case folders with masks (--data DIR)".into(),
        ));
    };
    let Some(init) = init else {
        let options = TrainOptions {
            config: plan.config.as_deref().map(read_config).transpose()?,
            lesion_weight: plan.lesion_weight,
            dice_weight: plan.dice_weight,
            steps: plan.steps,
            batch: plan.batch,
            learning_rate: plan.lr,
            seed: plan.seed,
            version: plan.version.clone(),
        };
        train(data, &plan.out, &options, progress)?;
        return Ok(Trained {
            model: "keyslice-tiny",
            files: CHECKPOINT,
        });
    };
    let model = match plan.stage {
        Stage::Calibrate => {
            recalibrate(init, data, &plan.out, &plan.version, progress)?;
            "keyslice-tiny with recalibrated finder thresholds"
        }
        Stage::Domain => {
            calibrate_domain(init, data, &plan.out, progress)?;
            "keyslice-tiny with the domain check's ranges"
        }
        Stage::Organs => {
            let options = OrgansTrainOptions {
                steps: plan.steps,
                batch: plan.batch,
                learning_rate: plan.lr,
                seed: plan.seed,
                version: plan.version.clone(),
                held_out: plan.calibration,
                start: match &plan.config {
                    None => None,
                    Some(path) => read_config(path)?.organs,
                },
                lesion_share: plan.lesion_windows,
            };
            train_organs(init, data, &plan.out, &options, progress)?;
            "keyslice-tiny with its organ network"
        }
        Stage::Finder => {
            let options = FinderTrainOptions {
                steps: plan.steps,
                batch: plan.batch,
                learning_rate: plan.lr,
                seed: plan.seed,
                version: plan.version.clone(),
                calibration: plan.calibration,
                start: match &plan.config {
                    None => None,
                    Some(path) => read_config(path)?.finder,
                },
                hard_negatives: plan.hard_negatives,
                masks: plan.finder_masks,
            };
            train_finder(init, data, &plan.out, &options, progress)?;
            "keyslice-tiny with its finder"
        }
        Stage::Evidence | Stage::Networks | Stage::Rl => {
            let options = EvidenceTrainOptions {
                steps: plan.steps,
                batch: plan.batch,
                learning_rate: plan.lr,
                seed: plan.seed,
                version: plan.version.clone(),
                held_out: plan.calibration,
                lesion_weight: plan.lesion_weight,
                model_claims: plan.model_claims,
            };
            train_evidence(init, data, &plan.out, &options, progress)?;
            "keyslice-tiny with its evidence reader"
        }
    };
    Ok(Trained {
        model,
        files: CHECKPOINT,
    })
}

/// The RL stage.
fn run_rl(
    plan: &TrainPlan,
    init: &Path,
    progress: &dyn Fn(&str),
    png: &dyn Fn(&Chart) -> Result<Vec<u8>, String>,
) -> Result<Trained, Error> {
    if plan.group < 2 || plan.updates == 0 {
        return Err(Error::Argument(
            "--group must be at least 2 and --updates at least 1".into(),
        ));
    }
    let options = RlOptions {
        steps: plan.steps,
        cases_per_step: plan.batch,
        group: plan.group,
        learning_rate: plan.lr,
        kl: plan.kl,
        presence_kl: plan.presence_kl,
        clip: plan.clip,
        updates: plan.updates,
        weights: plan.rewards,
        hard_only: plan.hard_only,
        seed: plan.seed,
        version: plan.version.clone(),
    };
    let data = match (&plan.from_export, &plan.data) {
        (Some(export), _) => RlData::Export(export.clone()),
        (None, Some(data)) => RlData::Phantoms(data.clone()),
        (None, None) => {
            return Err(Error::Argument(
                "--stage rl needs --data DIR (phantoms) or --from-export DIR".into(),
            ));
        }
    };
    train_rl(init, &data, &plan.out, &options, progress, png)?;
    Ok(Trained {
        model: "keyslice-tiny with its RL-trained finder",
        files: "config.json, model.safetensors, rl_metrics.csv, rl_rewards.png",
    })
}

/// A keyslice-tiny `config.json`.
fn read_config(path: &Path) -> Result<TinyConfig, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::InvalidFile(format!("{}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| {
        Error::InvalidFile(format!(
            "{}: not a keyslice-tiny config: {e}",
            path.display()
        ))
    })
}
