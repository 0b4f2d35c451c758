//! The reinforcement stage of `keyslice-tiny`: `keyslice train --stage rl`, GRPO (group
//! relative policy optimisation, as `DeepSeekMath` and the E-MRL paper use it) on the lesion
//! finder, rewarded by the E-MRL terms of [`keyslice_core::scoring`].
//!
//! **Policy.** For a case the finder answers every (organ, slab) job with a logit ℓⱼ (its
//! organ's largest cell logit, [`keyslice_infer::embedded::finder::organ_cells`]). A sample
//! is a report: each organ is present with probability σ(Lₒ − tₒ), Lₒ its strongest job's logit and tₒ the logit of
//! its calibrated threshold, so the most likely sample is what analysis reports. A present
//! organ's report describes its jobs above the threshold (at least the strongest), decoded
//! as analysis decodes them: lesions grown from each job's deciding cell, their size,
//! location and attenuation measured on the image. The key slice is drawn among the
//! described jobs with probabilities softmax(ℓ) (analysis takes the strongest). Attributes
//! are not drawn; they follow from which organs and slabs the policy marks. (Drawing each
//! job on its own was tried first: with some 30 slabs an organ, one of them nearly always
//! fired, and the samples called tumors everywhere.)
//!
//! **Reward.** Per sample, the weighted mean ([`keyslice_core::scoring::weighted_total`]) of
//! format, existence, attributes and localization against the truth, and cross-view consistency between the
//! truth and the verifier's local description of the sampled key slice. The verifier is the
//! supervised model, frozen: its reading of every slab is computed once per case.
//!
//! **Update.** Advantages are group-relative: (r − mean) ÷ (std + 10⁻⁶) over the G samples
//! of a case. Every action (each organ's presence, the key slice) is a token: the objective per
//! sample is the mean over its tokens of min(ρA, clip(ρ, 1 ± ε)·A) − β·KL, ρ the probability
//! ratio to the policy that drew the sample and KL the k3 estimator (e^d − d − 1, d the log
//! ratio reference ÷ policy) against the frozen supervised policy, with β = `presence_kl`
//! (1) on the presence tokens and `kl` (0.01, the authors' value) on the key slice: with
//! 0.01 everywhere the presences drifted and detection fell, with the presences anchored
//! the key slice still learns (see the model card's ablation). Each drawn batch gives
//! `updates` AdamW steps (ρ = 1 at the first; the clip acts from the second).
//!
//! **Data** ([`RlData`]). Phantom folders give the truth and every lesion's slice extent.
//! A reviewed workspace's `swift` or `verl` export with volumes (`--from-export`) gives the
//! reviewer's corrected findings as the truth and one extent around the reviewer's key slice
//! ([`reviewed_extents`]): the loop from corrections back into the model.
//!
//! Only the finder's top (its third block and head) trains: the trunk's features are
//! computed once per case, which makes a step about twenty times cheaper on a CPU. The
//! batch normalisations keep their supervised running statistics.

mod grpo;
mod metrics;
pub mod plot;
mod policy;
mod rewards;
mod sampling;
mod sources;

pub use rewards::{advantages, sample_reward};
pub use sources::{RlData, reviewed_extents};

use std::path::Path;
use std::time::Instant;

use candle_core::Device;
use candle_nn::{AdamW, Optimizer, ParamsAdamW};

use crate::finder::base_checkpoint;
use crate::tiny::{TrainError, add_trained, write_checkpoint};
use grpo::{top_variables, trainable_finder, update};
use keyslice_core::rng::Rng;
use keyslice_core::scoring::RewardWeights;
use keyslice_infer::embedded::{TinyConfig, TinyModel};
use metrics::{MetricsFile, history_series};
use sampling::draw_group;
use sources::prepare_cases;

/// Settings of the RL stage.
#[derive(Clone, Debug)]
pub struct RlOptions {
    /// Optimisation steps (each draws a group for `cases_per_step` cases).
    pub steps: usize,
    /// Cases per step (their losses are summed: gradient accumulation).
    pub cases_per_step: usize,
    /// Samples per case (GRPO's group size G).
    pub group: usize,
    /// AdamW learning rate (constant).
    pub learning_rate: f64,
    /// KL coefficient β of the key-slice token against the supervised policy.
    pub kl: f64,
    /// KL coefficient β of the four presence tokens (`kl` is the key slice's): a larger one
    /// keeps tumor detection near the supervised model's while the key slice learns.
    pub presence_kl: f64,
    /// Clip range ε of the probability ratio.
    pub clip: f64,
    /// AdamW steps per drawn batch (GRPO's μ).
    pub updates: usize,
    /// Weights of the reward terms.
    pub weights: RewardWeights,
    /// Train only on cases the supervised model gets wrong on attributes.
    pub hard_only: bool,
    /// Seed of the draws and of the case order.
    pub seed: u64,
    /// Version written to `config.json`.
    pub version: String,
}

impl Default for RlOptions {
    fn default() -> Self {
        Self {
            steps: 300,
            cases_per_step: 4,
            group: 8,
            learning_rate: 1e-4,
            kl: 0.01,
            presence_kl: 1.0,
            clip: 0.2,
            updates: 1,
            weights: RewardWeights::default(),
            hard_only: false,
            seed: 7,
            version: "rl".into(),
        }
    }
}

/// Trains the finder of the checkpoint in `init` by GRPO on the cases of `data` and writes
/// the checkpoint, `rl_metrics.csv` (a row per step) and `rl_rewards.png` (the reward
/// curves, the chart `draw` makes into PNG bytes) to `out`.
pub fn train_rl(
    init: &Path,
    data: &RlData,
    out: &Path,
    options: &RlOptions,
    mut progress: impl FnMut(&str),
    draw: impl FnOnce(&keyslice_core::chart::Chart) -> Result<Vec<u8>, String>,
) -> Result<TinyConfig, TrainError> {
    let started = Instant::now();
    let device = Device::Cpu;
    if options.group < 2 {
        return Err(TrainError::Settings(
            "GRPO needs a group of at least 2 samples per case (--group)".into(),
        ));
    }
    let (mut config, base) = base_checkpoint(init, None, &device)?;
    let Some(finder_config) = config.finder.clone() else {
        return Err(TrainError::Case {
            path: init.to_path_buf(),
            detail: "the checkpoint has no finder for the RL stage to train".into(),
        });
    };
    let model = TinyModel::from_tensors(config.clone(), base.clone(), device.clone())?;
    let (varmap, net) = trainable_finder(&config, &finder_config, &base, &device)?;
    let cases = prepare_cases(
        &model,
        &net,
        &finder_config,
        data,
        options,
        started,
        &mut progress,
    )?;
    let mut optimizer = AdamW::new(
        top_variables(&varmap)?,
        ParamsAdamW {
            lr: options.learning_rate,
            weight_decay: 0.0,
            ..ParamsAdamW::default()
        },
    )?;
    std::fs::create_dir_all(out).map_err(|source| TrainError::Write {
        path: out.to_path_buf(),
        source,
    })?;
    let metrics_path = out.join("rl_metrics.csv");
    let mut metrics = MetricsFile::create(&metrics_path)?;
    let mut rng = Rng::new(options.seed);
    let mut order: Vec<usize> = Vec::new();
    let mut history = Vec::with_capacity(options.steps);
    for step in 0..options.steps {
        let mut drawn = Vec::with_capacity(options.cases_per_step);
        for _ in 0..options.cases_per_step {
            if order.is_empty() {
                order = (0..cases.len()).collect();
                for i in (1..order.len()).rev() {
                    order.swap(i, rng.below(i + 1));
                }
            }
            let index = order.pop().unwrap_or(0);
            drawn.push(draw_group(&net, &cases, index, options, &mut rng)?);
        }
        let figures = update(&net, &mut optimizer, &cases, &drawn, options)?;
        metrics.row(step + 1, &figures, started.elapsed().as_secs_f64())?;
        if (step + 1) % 10 == 0 || step + 1 == options.steps {
            progress(&format!(
                "step {}/{}: {}, {:.0} s",
                step + 1,
                options.steps,
                figures.summary(),
                started.elapsed().as_secs_f64()
            ));
        }
        history.push(figures);
    }
    let plot_path = out.join("rl_rewards.png");
    let window = (options.steps / 20).max(1);
    let png = draw(&plot::reward_chart(
        &history_series(&history, window),
        window,
    ))
    .map_err(|detail| TrainError::Write {
        path: plot_path.clone(),
        source: std::io::Error::other(detail),
    })?;
    std::fs::write(&plot_path, png).map_err(|source| TrainError::Write {
        path: plot_path.clone(),
        source,
    })?;
    let mut tensors = base;
    add_trained(&mut tensors, &varmap, Vec::new())?;
    config.version.clone_from(&options.version);
    write_checkpoint(&tensors, &config, out)?;
    progress(&format!(
        "done in {:.0} s: checkpoint, {} and {} in {}",
        started.elapsed().as_secs_f64(),
        metrics_path.display(),
        plot_path.display(),
        out.display()
    ));
    Ok(config)
}
