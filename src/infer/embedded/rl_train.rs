//! The reinforcement stage of `keyslice-tiny`: `keyslice train --stage rl`, GRPO (group
//! relative policy optimisation, as `DeepSeekMath` and the E-MRL paper use it) on the lesion
//! finder, rewarded by the E-MRL terms of [`crate::scoring`].
//!
//! **Policy.** For a case the finder answers every (organ, slab) job with a logit ℓⱼ (its
//! organ's largest cell logit, [`finder::organ_cells`]). A sample is a report: each organ is
//! present with probability σ(Lₒ − tₒ), Lₒ its strongest job's logit and tₒ the logit of
//! its calibrated threshold, so the most likely sample is what analysis reports. A present
//! organ's report describes its jobs above the threshold (at least the strongest), decoded
//! as analysis decodes them: lesions grown from each job's deciding cell, their size,
//! location and attenuation measured on the image. The key slice is drawn among the
//! described jobs with probabilities softmax(ℓ) (analysis takes the strongest). Attributes
//! are not drawn; they follow from which organs and slabs the policy marks. (Drawing each
//! job on its own was tried first: with some 30 slabs an organ, one of them nearly always
//! fired, and the samples called tumors everywhere.)
//!
//! **Reward.** Per sample, the weighted mean ([`weighted_total`]) of format, existence,
//! attributes and localization against the truth, and cross-view consistency between the
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

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use candle_core::{D, DType, Device, Tensor, Var};
use candle_nn::{AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use rayon::prelude::*;

use super::batch_norm::NormMode;
use super::decode::{FINDER_RULE, Probabilities, find_lesions, findings_of};
use super::finder::{self, FinderConfig, FinderNet, Job, SlabAnswer};
use super::finder_train::base_checkpoint;
use super::grid::ModelGrid;
use super::net;
use super::organs::Reading;
use super::train::{TrainError, add_trained, case_folders, write_checkpoint};
use super::{TinyConfig, TinyModel, TinyVerifier, finder_probabilities};
use crate::findings::{Findings, TumorPresence, read_report};
use crate::infer::{KeySliceImage, Verifier};
use crate::io::nifti::read_nifti;
use crate::phantom::PhantomTruth;
use crate::phantom::rng::Rng;
use crate::scoring::{
    LesionExtent, Prediction, Reference, RewardWeights, Rewards, SizeTolerance, consistency,
    rewards, weighted_total,
};

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

/// The E-MRL reward of a report (`report`, `key_slice`) with the verifier's reading `local`
/// of its key slice, against the truth: the terms of [`rewards`], with consistency taken
/// between the truth and the local description (the cross-view term of training) and the
/// total weighted accordingly.
#[must_use]
pub fn sample_reward(
    report: &Findings,
    key_slice: Option<u32>,
    local: Option<&Findings>,
    truth: &Findings,
    extents: &[LesionExtent],
    weights: &RewardWeights,
) -> Rewards {
    let tolerance = SizeTolerance::default();
    let scored = rewards(
        &Prediction {
            report,
            key_slice,
            local_description: None,
        },
        &Reference {
            findings: truth,
            lesion_extents: extents,
        },
        weights,
        tolerance,
    );
    let cross = local.map(|local| consistency(truth, local, tolerance));
    let mut weighted = vec![
        (weights.format, scored.format),
        (weights.existence, scored.existence),
        (weights.attributes, scored.attributes),
    ];
    weighted.extend(scored.localization.map(|v| (weights.localization, v)));
    weighted.extend(cross.map(|c| (weights.consistency, c.score)));
    Rewards {
        consistency: cross,
        total: weighted_total(&weighted),
        ..scored
    }
}

/// Group-relative advantages: (r − mean) ÷ (standard deviation + 10⁻⁶); all 0 when the
/// group's rewards are equal.
#[must_use]
pub fn advantages(rewards: &[f64]) -> Vec<f64> {
    let n = rewards.len().max(1) as f64;
    let mean = rewards.iter().sum::<f64>() / n;
    let std = (rewards.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / n).sqrt();
    rewards.iter().map(|r| (r - mean) / (std + 1e-6)).collect()
}

/// One case, prepared once: the finder trunk's features per job, what the decoding needs,
/// the verifier's reading of every slab, and the truth.
struct RlCase {
    /// The case folder (phantoms) or CT (exports), for messages.
    path: PathBuf,
    truth: Findings,
    extents: Vec<LesionExtent>,
    /// The reviewer corrected the model's findings (exports only).
    hard: Option<bool>,
    jobs: Vec<Job>,
    /// `[jobs, widths[1], crop / 4, crop / 4]`.
    features: Tensor,
    /// `[jobs, 4, 1, 1]`: 1 on the job's organ.
    selection: Tensor,
    /// `[jobs, cells]`: 0 inside the organ, −30 outside.
    outside: Tensor,
    /// Each job's organ.
    organs: Vec<usize>,
    /// Each job's threshold logit tₒ.
    centres: Vec<f32>,
    /// The supervised policy's logits ℓⱼ.
    reference: Vec<f32>,
    /// The supervised answers (deciding cells, fixed for the decoding).
    answers: Vec<SlabAnswer>,
    fine: ModelGrid,
    /// The diagnoser's probabilities with only the location channels kept.
    coarse: Probabilities,
    masks: Vec<Vec<bool>>,
    /// The verifier's local description of each slab that has a job.
    local: HashMap<usize, Findings>,
    /// Decoded reports by the set of "yes" jobs.
    decoded: Mutex<HashMap<Vec<bool>, Findings>>,
}

impl RlCase {
    /// The report of the jobs marked in `yes`, decoded as analysis does.
    fn report(&self, yes: &[bool]) -> Findings {
        if let Ok(cache) = self.decoded.lock()
            && let Some(found) = cache.get(yes)
        {
            return found.clone();
        }
        let chosen: Vec<SlabAnswer> = self
            .answers
            .iter()
            .zip(yes)
            .filter(|(_, on)| **on)
            .map(|(answer, _)| SlabAnswer {
                probability: 1.0,
                ..*answer
            })
            .collect();
        let decoded =
            finder_probabilities(&self.fine, &self.coarse, &chosen, &self.masks, [0.5; 4]);
        let findings = findings_of(&find_lesions(&decoded, FINDER_RULE));
        if let Ok(mut cache) = self.decoded.lock() {
            cache.insert(yes.to_vec(), findings.clone());
        }
        findings
    }

    /// The reward of a sample: jobs `yes`, key job `key`.
    fn reward(&self, yes: &[bool], key: Option<usize>, weights: &RewardWeights) -> Rewards {
        let report = self.report(yes);
        let key_slab = key.map(|job| self.jobs[job].slab);
        sample_reward(
            &report,
            key_slab.map(|slab| self.fine.centre_slice[slab]),
            key_slab.and_then(|slab| self.local.get(&slab)),
            &self.truth,
            &self.extents,
            weights,
        )
    }
}

/// One drawn sample: which organs show a tumor, the jobs (slabs) whose lesions the report
/// then describes, and the key job.
#[derive(Clone, Debug, PartialEq)]
struct Sample {
    present: [bool; 4],
    yes: Vec<bool>,
    key: Option<usize>,
}

/// Each organ's largest logit (the finder's answer for the organ, as analysis pools it);
/// `None` for an organ without jobs.
fn organ_logits(logits: &[f32], organs: &[usize]) -> [Option<f32>; 4] {
    let mut best = [None; 4];
    for (&logit, &organ) in logits.iter().zip(organs) {
        best[organ] = Some(best[organ].map_or(logit, |b: f32| b.max(logit)));
    }
    best
}

/// The jobs a report with organs `present` describes: in a present organ, every job above
/// the organ's threshold logit, and at least the strongest one.
fn described(logits: &[f32], centres: &[f32], organs: &[usize], present: [bool; 4]) -> Vec<bool> {
    let best = organ_logits(logits, organs);
    logits
        .iter()
        .zip(centres)
        .zip(organs)
        .map(|((&l, &t), &o)| present[o] && (l > t || Some(l) == best[o]))
        .collect()
}

/// The described job with the largest logit.
fn strongest(logits: &[f32], yes: &[bool]) -> Option<usize> {
    logits
        .iter()
        .enumerate()
        .filter(|(job, _)| yes[*job])
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(job, _)| job)
}

/// The most likely sample under `logits`: what analysis reports (an organ is present when its
/// largest logit passes its threshold; the key is the strongest described job).
fn greedy(logits: &[f32], centres: &[f32], organs: &[usize]) -> Sample {
    let best = organ_logits(logits, organs);
    let mut present = [false; 4];
    for (job, &organ) in organs.iter().enumerate() {
        present[organ] |= best[organ].is_some_and(|b| b > centres[job]);
    }
    let yes = described(logits, centres, organs, present);
    let key = strongest(logits, &yes);
    Sample { present, yes, key }
}

/// A sample drawn from the policy with logits `logits`: each organ present with probability
/// σ(its largest logit − its threshold logit), then the key among the described jobs with
/// probabilities softmax(ℓ).
fn draw(logits: &[f32], centres: &[f32], organs: &[usize], rng: &mut Rng) -> Sample {
    let best = organ_logits(logits, organs);
    let mut centre = [0f32; 4];
    for (job, &organ) in organs.iter().enumerate() {
        centre[organ] = centres[job];
    }
    let mut present = [false; 4];
    for organ in 0..4 {
        if let Some(b) = best[organ] {
            present[organ] = rng.unit() < 1.0 / (1.0 + f64::from(centre[organ] - b).exp());
        }
    }
    let yes = described(logits, centres, organs, present);
    let on: Vec<usize> = (0..yes.len()).filter(|&job| yes[job]).collect();
    let key = (!on.is_empty()).then(|| {
        let top = on.iter().map(|&job| logits[job]).fold(f32::MIN, f32::max);
        let weights: Vec<f64> = on
            .iter()
            .map(|&job| f64::from(logits[job] - top).exp())
            .collect();
        on[rng.weighted(&weights)]
    });
    Sample { present, yes, key }
}

/// log σ(x), stably: −(max(−x, 0) + log(1 + e^(−|x|))).
fn log_sigmoid(x: &Tensor) -> candle_core::Result<Tensor> {
    let tail = (x.abs()?.neg()?.exp()? + 1.0)?.log()?;
    (x.neg()?.relu()? + tail)?.neg()
}

/// Log-probabilities of every token of `samples` under logits `logits` (`[jobs]`, job `j`
/// of organ `organs[j]`, threshold logit `centres[j]`): `[samples, 5]`, each organ's
/// presence then the key choice (0 where a token does not exist, see [`token_mask`]).
fn token_logprobs(
    logits: &Tensor,
    centres: &[f32],
    organs: &[usize],
    samples: &[Sample],
) -> candle_core::Result<Tensor> {
    let device = logits.device();
    let jobs = logits.dim(0)?;
    let g = samples.len();
    // Each organ's largest logit: jobs of other organs pushed far down.
    let mut away = vec![-1e4f32; 4 * jobs];
    let mut centre = [0f32; 4];
    for (job, &organ) in organs.iter().enumerate() {
        away[organ * jobs + job] = 0.0;
        centre[organ] = centres[job];
    }
    let away = Tensor::from_vec(away, (4, jobs), device)?;
    let organ_best = logits.unsqueeze(0)?.broadcast_add(&away)?.max(1)?;
    let z = (organ_best - Tensor::new(&centre, device)?)?.unsqueeze(0)?;
    let present: Vec<f32> = samples
        .iter()
        .flat_map(|s| s.present.map(|on| f32::from(u8::from(on))))
        .collect();
    let present = Tensor::from_vec(present, (g, 4), device)?;
    let presence = (present.broadcast_mul(&log_sigmoid(&z)?)?
        + (1.0 - &present)?.broadcast_mul(&log_sigmoid(&z.neg()?)?)?)?;
    // The key: log softmax over the described jobs of the chosen one (the maximum is a
    // constant shift).
    let yes: Vec<f32> = samples
        .iter()
        .flat_map(|s| s.yes.iter().map(|&on| f32::from(u8::from(on))))
        .collect();
    let yes = Tensor::from_vec(yes, (g, jobs), device)?;
    let mut key = vec![0f32; g * jobs];
    let mut has_key = vec![0f32; g];
    for (index, sample) in samples.iter().enumerate() {
        if let Some(job) = sample.key {
            key[index * jobs + job] = 1.0;
            has_key[index] = 1.0;
        }
    }
    let key = Tensor::from_vec(key, (g, jobs), device)?;
    let has_key = Tensor::from_vec(has_key, (g, 1), device)?;
    let top = logits.max(0)?.detach();
    let shifted = logits.broadcast_sub(&top)?.unsqueeze(0)?;
    let mass = (shifted.exp()?.broadcast_mul(&yes)?.sum_keepdim(1)? + (1.0 - &has_key)?)?;
    let chosen = key.broadcast_mul(&shifted)?.sum_keepdim(1)?;
    let key_term = ((chosen - mass.log()?)? * &has_key)?;
    Tensor::cat(&[presence, key_term], 1)
}

/// Tokens that exist per sample: `[samples, 5]`, 1 for each organ the case has jobs for and
/// for a key.
fn token_mask(
    samples: &[Sample],
    organs: &[usize],
    device: &Device,
) -> candle_core::Result<Tensor> {
    let mut seen = [0f32; 4];
    for &organ in organs {
        seen[organ] = 1.0;
    }
    let mut mask = Vec::with_capacity(samples.len() * 5);
    for sample in samples {
        mask.extend_from_slice(&seen);
        mask.push(f32::from(u8::from(sample.key.is_some())));
    }
    Tensor::from_vec(mask, (samples.len(), 5), device)
}

/// The finder's top on a case's features: each job's logit ℓⱼ (`[jobs]`) and its organ's
/// cell logits (`[jobs, cells]`).
fn job_logits(net: &FinderNet, case: &RlCase) -> candle_core::Result<(Tensor, Tensor)> {
    let logits = net.top(&case.features, false)?;
    let cells = (logits
        .broadcast_mul(&case.selection)?
        .sum(1)?
        .flatten_from(1)?
        + &case.outside)?;
    Ok((cells.max(D::Minus1)?, cells))
}

/// What one case contributes to a step: its samples, their advantages and rewards, and the
/// log-probabilities of the policy that drew them.
struct Drawn {
    case: usize,
    samples: Vec<Sample>,
    advantages: Vec<f64>,
    rewards: Vec<Rewards>,
    old: Tensor,
}

/// Figures of one step.
#[derive(Clone, Debug, Default)]
struct StepFigures {
    reward: f64,
    terms: [Option<f64>; 5],
    kl: f64,
    advantage_spread: f64,
    flat_groups: f64,
    loss: f64,
}

impl StepFigures {
    /// The progress line's figures.
    fn summary(&self) -> String {
        let show = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.3}"));
        format!(
            "reward {:.3} (format {}, existence {}, attributes {}, localization {}, consistency {}), KL {:.4}, |advantage| {:.2}, flat groups {:.0} %",
            self.reward,
            show(self.terms[0]),
            show(self.terms[1]),
            show(self.terms[2]),
            show(self.terms[3]),
            show(self.terms[4]),
            self.kl,
            self.advantage_spread,
            self.flat_groups * 100.0
        )
    }
}

/// Mean of the values present.
fn mean_of(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let (sum, count) = values
        .flatten()
        .fold((0.0, 0usize), |(sum, count), v| (sum + v, count + 1));
    (count > 0).then(|| sum / count as f64)
}

/// Trains the finder of the checkpoint in `init` by GRPO on the cases of `data` and writes
/// the checkpoint, `rl_metrics.csv` (a row per step) and `rl_rewards.png` (the reward
/// curves) to `out`.
pub fn train_rl(
    init: &Path,
    data: &RlData,
    out: &Path,
    options: &RlOptions,
    mut progress: impl FnMut(&str),
) -> Result<TinyConfig, TrainError> {
    let started = Instant::now();
    let device = Device::Cpu;
    if options.group < 2 {
        return Err(TrainError::Candle(
            "GRPO needs a group of at least 2 samples per case".into(),
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
    super::rl_plot::write_reward_plot(&history_series(&history, window), window, &plot_path)
        .map_err(|detail| TrainError::Write {
            path: plot_path.clone(),
            source: std::io::Error::other(detail),
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

/// The trainable finder: every finder tensor of the checkpoint (`base`) as a variable, the
/// normalisations kept apart from the convolutions with their running statistics.
fn trainable_finder(
    config: &TinyConfig,
    finder_config: &FinderConfig,
    base: &HashMap<String, Tensor>,
    device: &Device,
) -> Result<(VarMap, FinderNet), TrainError> {
    let varmap = VarMap::new();
    {
        let mut data = varmap
            .data()
            .lock()
            .map_err(|_| TrainError::Candle("variables locked".into()))?;
        for (name, tensor) in base.iter().filter(|(name, _)| name.starts_with("finder.")) {
            data.insert(name.clone(), Var::from_tensor(tensor)?);
        }
    }
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, device);
    let net = FinderNet::new(
        FinderConfig::inputs(config.windows.len()),
        finder_config,
        &vb.pp("finder"),
        NormMode::FineTune,
    )?;
    Ok((varmap, net))
}

/// The variables the RL stage trains: the finder's third block and head (weights and
/// normalisation scales and shifts, not the running statistics), in name order.
fn top_variables(varmap: &VarMap) -> Result<Vec<Var>, TrainError> {
    let data = varmap
        .data()
        .lock()
        .map_err(|_| TrainError::Candle("variables locked".into()))?;
    let mut names: Vec<&String> = data
        .keys()
        .filter(|name| {
            (name.starts_with("finder.block3.") || name.starts_with("finder.head."))
                && !name.contains("running_")
        })
        .collect();
    names.sort();
    Ok(names.into_iter().map(|name| data[name].clone()).collect())
}

/// Every case of `data` prepared (in parallel); with `hard_only`, those the supervised
/// model misses an attribute on. Cases where no organ was found are left out: there is
/// nothing to train on them.
fn prepare_cases(
    model: &TinyModel,
    net: &FinderNet,
    finder_config: &FinderConfig,
    data: &RlData,
    options: &RlOptions,
    started: Instant,
    progress: &mut impl FnMut(&str),
) -> Result<Vec<RlCase>, TrainError> {
    let sources = case_sources(data)?;
    progress(&format!(
        "preparing {} cases from {} (the supervised model's analysis and the verifier's reading of every slab)",
        sources.len(),
        data.describe()
    ));
    let prepared: Vec<RlCase> = sources
        .par_iter()
        .map(|source| prepare_case(model, net, finder_config, source))
        .collect::<Result<_, _>>()?;
    let greedy_rewards: Vec<Rewards> = prepared
        .iter()
        .map(|case| {
            let sample = greedy(&case.reference, &case.centres, &case.organs);
            case.reward(&sample.yes, sample.key, &options.weights)
        })
        .collect();
    let supervised = mean_of(greedy_rewards.iter().map(|r| Some(r.total))).unwrap_or(0.0);
    let cases: Vec<RlCase> = prepared
        .into_iter()
        .zip(&greedy_rewards)
        .filter(|(case, reward)| {
            !case.jobs.is_empty()
                && (!options.hard_only || reward.attributes < 1.0 || case.hard == Some(true))
        })
        .map(|(case, _)| case)
        .collect();
    progress(&format!(
        "{} cases ready in {:.0} s{}; the supervised model's mean reward {supervised:.3}",
        cases.len(),
        started.elapsed().as_secs_f64(),
        if options.hard_only {
            " (hard only: the supervised model misses an attribute, or the reviewer corrected it)"
        } else {
            ""
        }
    ));
    if cases.is_empty() {
        return Err(TrainError::NoCases(data.folder().to_path_buf()));
    }
    Ok(cases)
}

/// The `options.updates` optimiser steps on the drawn groups, and the step's figures.
fn update(
    net: &FinderNet,
    optimizer: &mut AdamW,
    cases: &[RlCase],
    drawn: &[Drawn],
    options: &RlOptions,
) -> Result<StepFigures, TrainError> {
    let mut figures = StepFigures::default();
    for update in 0..options.updates {
        let mut total: Option<Tensor> = None;
        let mut kl_sum = 0.0;
        for group in drawn {
            let (loss, kl) = group_loss(net, &cases[group.case], group, options)?;
            kl_sum += kl;
            let loss = (loss / drawn.len() as f64)?;
            total = Some(match total {
                None => loss,
                Some(sum) => (sum + loss)?,
            });
        }
        if let Some(total) = total {
            if update == 0 {
                figures.loss = f64::from(total.to_scalar::<f32>()?);
                figures.kl = kl_sum / drawn.len() as f64;
            }
            optimizer.backward_step(&total)?;
        }
    }
    let all: Vec<&Rewards> = drawn.iter().flat_map(|group| &group.rewards).collect();
    figures.reward = mean_of(all.iter().map(|r| Some(r.total))).unwrap_or(0.0);
    figures.terms = [
        mean_of(all.iter().map(|r| Some(r.format))),
        mean_of(all.iter().map(|r| Some(r.existence))),
        mean_of(all.iter().map(|r| Some(r.attributes))),
        mean_of(all.iter().map(|r| r.localization)),
        mean_of(all.iter().map(|r| r.consistency.map(|c| c.score))),
    ];
    figures.advantage_spread = mean_of(
        drawn
            .iter()
            .flat_map(|group| group.advantages.iter().map(|a| Some(a.abs()))),
    )
    .unwrap_or(0.0);
    figures.flat_groups = drawn
        .iter()
        .filter(|group| group.advantages.iter().all(|a| a.abs() < 1e-9))
        .count() as f64
        / drawn.len().max(1) as f64;
    Ok(figures)
}

/// The curves of the plot: the total and each term per step, each a moving mean over the
/// last `window` steps that scored it.
fn history_series(history: &[StepFigures], window: usize) -> Vec<(&'static str, Vec<f64>)> {
    let names = [
        "total",
        "format",
        "existence",
        "attributes",
        "localization",
        "consistency",
    ];
    let value = |figures: &StepFigures, index: usize| {
        if index == 0 {
            Some(figures.reward)
        } else {
            figures.terms[index - 1]
        }
    };
    names
        .into_iter()
        .enumerate()
        .map(|(index, name)| {
            let present: Vec<f64> = history.iter().filter_map(|f| value(f, index)).collect();
            let mut seen = 0;
            let values = history
                .iter()
                .map(|f| {
                    seen += usize::from(value(f, index).is_some());
                    let upto = seen.max(1).min(present.len());
                    let recent = &present[upto.saturating_sub(window.max(1))..upto];
                    recent.iter().sum::<f64>() / recent.len().max(1) as f64
                })
                .collect();
            (name, values)
        })
        .collect()
}

/// Draws a group of samples for case `index` and scores them.
fn draw_group(
    net: &FinderNet,
    cases: &[RlCase],
    index: usize,
    options: &RlOptions,
    rng: &mut Rng,
) -> Result<Drawn, TrainError> {
    let case = &cases[index];
    let (logits, _) = job_logits(net, case)?;
    let values = logits.to_vec1::<f32>()?;
    let samples: Vec<Sample> = (0..options.group)
        .map(|_| draw(&values, &case.centres, &case.organs, rng))
        .collect();
    let rewards: Vec<Rewards> = samples
        .par_iter()
        .map(|sample| case.reward(&sample.yes, sample.key, &options.weights))
        .collect();
    let totals: Vec<f64> = rewards.iter().map(|r| r.total).collect();
    let old = token_logprobs(&logits, &case.centres, &case.organs, &samples)?.detach();
    Ok(Drawn {
        case: index,
        samples,
        advantages: advantages(&totals),
        rewards,
        old,
    })
}

/// The GRPO loss of one drawn group under the current policy, and its mean KL per token.
fn group_loss(
    net: &FinderNet,
    case: &RlCase,
    group: &Drawn,
    options: &RlOptions,
) -> Result<(Tensor, f64), TrainError> {
    let device = case.features.device();
    let (logits, _) = job_logits(net, case)?;
    let current = token_logprobs(&logits, &case.centres, &case.organs, &group.samples)?;
    let reference = token_logprobs(
        &Tensor::new(case.reference.as_slice(), device)?,
        &case.centres,
        &case.organs,
        &group.samples,
    )?;
    let mask = token_mask(&group.samples, &case.organs, device)?;
    let g = group.samples.len();
    let advantages: Vec<f32> = group.advantages.iter().map(|&a| a as f32).collect();
    let advantages = Tensor::from_vec(advantages, (g, 1), device)?;
    let ratio = (&current - &group.old)?.exp()?;
    let unclipped = ratio.broadcast_mul(&advantages)?;
    let clipped = ratio
        .clamp(1.0 - options.clip, 1.0 + options.clip)?
        .broadcast_mul(&advantages)?;
    let surrogate = unclipped.minimum(&clipped)?;
    let d = (reference - &current)?;
    let kl = ((d.exp()? - &d)? - 1.0)?;
    let presence_kl = options.presence_kl as f32;
    let betas = Tensor::new(
        &[[
            presence_kl,
            presence_kl,
            presence_kl,
            presence_kl,
            options.kl as f32,
        ]],
        device,
    )?;
    let per_token = ((surrogate - kl.broadcast_mul(&betas)?)? * &mask)?;
    let tokens = mask.sum(1)?;
    let per_sample = (per_token.sum(1)? / &tokens)?;
    let loss = per_sample.mean(0)?.neg()?;
    let kl_mean = ((kl * &mask)?.sum(1)? / tokens)?
        .mean(0)?
        .to_scalar::<f32>()?;
    Ok((loss, f64::from(kl_mean)))
}

/// Where the RL stage's cases come from.
#[derive(Clone, Debug)]
pub enum RlData {
    /// Phantom case folders (`ct.nii.gz` and `truth.json` with findings and lesion extents).
    Phantoms(PathBuf),
    /// A `swift` or `verl` export made with `--volumes`: its reviewed findings are the
    /// truth ([`crate::export::read`]).
    Export(PathBuf),
}

impl RlData {
    /// The folder.
    #[must_use]
    pub fn folder(&self) -> &Path {
        match self {
            Self::Phantoms(folder) | Self::Export(folder) => folder,
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Phantoms(folder) => folder.display().to_string(),
            Self::Export(folder) => format!("the train split of the export {}", folder.display()),
        }
    }
}

/// A case before preparation: its CT and its truth.
struct CaseSource {
    /// The case folder or the CT, for messages.
    path: PathBuf,
    ct: PathBuf,
    truth: Findings,
    /// The lesions' slice extents; `None`: taken around the key slice once the CT is read
    /// ([`reviewed_extents`]).
    extents: Option<Vec<LesionExtent>>,
    hard: Option<bool>,
}

/// The cases of `data`, their truth read.
fn case_sources(data: &RlData) -> Result<Vec<CaseSource>, TrainError> {
    match data {
        RlData::Phantoms(folder) => case_folders(folder)?
            .into_iter()
            .map(|folder| {
                let truth_path = folder.join("truth.json");
                let needs = "the RL stage needs phantom truth (findings and lesion extents), or \
                             a reviewed export through --from-export";
                let truth: PhantomTruth = std::fs::read_to_string(&truth_path)
                    .map_err(|error| error.to_string())
                    .and_then(|text| serde_json::from_str(&text).map_err(|error| error.to_string()))
                    .map_err(|error| TrainError::Case {
                        path: truth_path.clone(),
                        detail: format!("{error} ({needs})"),
                    })?;
                Ok(CaseSource {
                    ct: folder.join("ct.nii.gz"),
                    path: folder,
                    truth: truth.findings,
                    extents: Some(truth.lesion_extents),
                    hard: None,
                })
            })
            .collect(),
        RlData::Export(folder) => {
            let cases = crate::export::read::read_training_cases(folder)?;
            if cases.is_empty() {
                return Err(TrainError::NoCases(folder.clone()));
            }
            Ok(cases
                .into_iter()
                .map(|case| CaseSource {
                    path: case.volume.clone(),
                    ct: case.volume,
                    truth: case.findings,
                    extents: None,
                    hard: Some(case.hard),
                })
                .collect())
        }
    }
}

/// Lesion extents from reviewed findings, which name a key slice but not every lesion's
/// slices: one extent centred on the key slice, as tall as the largest lesion of an organ
/// with a tumor is long (1 cm when no size is stated), at least a slice either side. The
/// localization reward then rewards key slices near the reviewer's. Empty without a key
/// slice or a tumor.
#[must_use]
pub fn reviewed_extents(truth: &Findings, slice_mm: f64, slices: usize) -> Vec<LesionExtent> {
    let Some(key) = truth.key_slice.as_ref() else {
        return Vec::new();
    };
    let tumors = truth
        .organs
        .iter()
        .filter(|(_, found)| found.tumor == TumorPresence::Yes);
    let Some((organ, long_cm)) = tumors
        .map(|(organ, found)| {
            let long = found
                .lesions
                .iter()
                .filter_map(|lesion| lesion.size.map(|size| size.long_cm))
                .fold(None, |best: Option<f64>, v| {
                    Some(best.map_or(v, |b| b.max(v)))
                });
            (*organ, long.unwrap_or(1.0))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
    else {
        return Vec::new();
    };
    let last = u32::try_from(slices.saturating_sub(1)).unwrap_or(u32::MAX);
    let key_index = key.index.min(last);
    let half = (long_cm * 10.0 / 2.0 / slice_mm.max(1e-3)).ceil().max(1.0);
    let half = if half >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        half as u32
    };
    vec![LesionExtent {
        organ,
        first_slice: key_index.saturating_sub(half),
        last_slice: key_index.saturating_add(half).min(last),
        largest_slice: key_index,
    }]
}

/// Reads and prepares one case.
fn prepare_case(
    model: &TinyModel,
    net: &FinderNet,
    finder_config: &FinderConfig,
    source: &CaseSource,
) -> Result<RlCase, TrainError> {
    let volume = read_nifti(&source.ct).map_err(|error| TrainError::Case {
        path: source.ct.clone(),
        detail: error.to_string(),
    })?;
    let extents = source.extents.clone().unwrap_or_else(|| {
        reviewed_extents(&source.truth, volume.spacing_mm()[2], volume.dims()[2])
    });
    let fine = ModelGrid::from_volume(&volume, finder_config.grid)
        .with_detail(&volume, finder_config.detail_factor());
    let coarse_grid = fine
        .pooled(model.config.grid)
        .unwrap_or_else(|| ModelGrid::from_volume(&volume, model.config.grid));
    let mut coarse = model.diagnose_grid(&coarse_grid)?;
    let masks = model.organ_masks(&fine, &coarse, Reading::Stretch)?;
    // The decoding reads only the diagnoser's location channels: keep just those.
    for slab in &mut coarse.values {
        for (channel, values) in slab.iter_mut().enumerate() {
            if !net::LOCATION.contains(&channel) {
                *values = Vec::new();
            }
        }
    }
    let crop = finder_config.crop.min(fine.spec.size);
    let jobs = finder::jobs(&masks, fine.spec.size, crop);
    let (features, selection, outside) =
        job_tensors(model, net, finder_config, &fine, &masks, &jobs)?;
    let threshold_logit = |p: f32| {
        let p = p.clamp(1e-4, 1.0 - 1e-4);
        (p / (1.0 - p)).ln()
    };
    let centres: Vec<f32> = jobs
        .iter()
        .map(|job| threshold_logit(finder_config.thresholds[job.organ]))
        .collect();
    let mut case = RlCase {
        path: source.path.clone(),
        organs: jobs.iter().map(|job| job.organ).collect(),
        truth: source.truth.clone(),
        extents,
        hard: source.hard,
        jobs,
        features,
        selection,
        outside,
        centres,
        reference: Vec::new(),
        answers: Vec::new(),
        fine,
        coarse,
        masks,
        local: HashMap::new(),
        decoded: Mutex::new(HashMap::new()),
    };
    if !case.jobs.is_empty() {
        let (logits, cell_logits) = job_logits(net, &case)?;
        case.reference = logits.to_vec1::<f32>()?;
        case.answers = case
            .jobs
            .iter()
            .zip(cell_logits.to_vec2::<f32>()?)
            .map(|(job, row)| finder::answer(job, &row, crop))
            .collect();
    }
    case.local = local_readings(model, &volume, &case)?;
    Ok(case)
}

/// The finder trunk's features of every job (`[jobs, widths[1], crop / 4, crop / 4]`), the
/// organ selection (`[jobs, 4, 1, 1]`) and the cells outside each job's organ (`[jobs,
/// cells]`: −30 there, 0 inside).
fn job_tensors(
    model: &TinyModel,
    net: &FinderNet,
    finder_config: &FinderConfig,
    fine: &ModelGrid,
    masks: &[Vec<bool>],
    jobs: &[Job],
) -> Result<(Tensor, Tensor, Tensor), TrainError> {
    let device = &model.device;
    let crop = finder_config.crop.min(fine.spec.size);
    let side = crop / finder::STRIDE;
    let mut features = Vec::new();
    let mut outside = Vec::new();
    for batch in jobs.chunks(32) {
        let (x, m, detail) =
            finder::batch_inputs(fine, masks, batch, crop, &model.config.windows, device)?;
        features.push(net.trunk(&x, detail.as_ref(), false)?.detach());
        let cells = m.max_pool2d(finder::STRIDE)?.flatten_from(1)?;
        outside.push(((cells - 1.0)? * 30.0)?);
    }
    let features = if features.is_empty() {
        Tensor::zeros((0, finder_config.widths[1], side, side), DType::F32, device)?
    } else {
        Tensor::cat(&features, 0)?
    };
    let outside = if outside.is_empty() {
        Tensor::zeros((0, side * side), DType::F32, device)?
    } else {
        Tensor::cat(&outside, 0)?
    };
    let mut selection = vec![0f32; jobs.len() * 4];
    for (index, job) in jobs.iter().enumerate() {
        selection[index * 4 + job.organ] = 1.0;
    }
    let selection = Tensor::from_vec(selection, (jobs.len(), 4, 1, 1), device)?;
    Ok((features, selection, outside))
}

/// The verifier's local description (read back into findings) of the centre slice of every
/// slab the case has a job on.
fn local_readings(
    model: &TinyModel,
    volume: &crate::volume::Volume,
    case: &RlCase,
) -> Result<HashMap<usize, Findings>, TrainError> {
    let mut slabs: Vec<usize> = case.jobs.iter().map(|job| job.slab).collect();
    slabs.dedup();
    let verifier = TinyVerifier(model);
    let mut local = HashMap::new();
    for slab in slabs {
        let index = case.fine.centre_slice[slab];
        let Some(image) = KeySliceImage::extract(volume, index, None) else {
            continue;
        };
        let text = verifier
            .describe(&image)
            .map_err(|error| TrainError::Case {
                path: case.path.clone(),
                detail: error.to_string(),
            })?;
        local.insert(slab, read_report(&text).findings);
    }
    Ok(local)
}

/// `rl_metrics.csv`, written a row per step and flushed, so an interrupted run keeps its
/// curve.
struct MetricsFile {
    path: PathBuf,
    file: std::fs::File,
}

impl MetricsFile {
    const HEADER: &'static str = "step,reward,format,existence,attributes,localization,consistency,kl,advantage_abs_mean,flat_groups,loss,seconds";

    fn create(path: &Path) -> Result<Self, TrainError> {
        let write_error = |source| TrainError::Write {
            path: path.to_path_buf(),
            source,
        };
        let mut file = std::fs::File::create(path).map_err(write_error)?;
        writeln!(file, "{}", Self::HEADER).map_err(write_error)?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
        })
    }

    fn row(&mut self, step: usize, figures: &StepFigures, seconds: f64) -> Result<(), TrainError> {
        let cell = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.5}"));
        let terms: Vec<String> = figures.terms.iter().map(|&t| cell(t)).collect();
        writeln!(
            self.file,
            "{step},{:.5},{},{:.6},{:.5},{:.4},{:.6},{seconds:.1}",
            figures.reward,
            terms.join(","),
            figures.kl,
            figures.advantage_spread,
            figures.flat_groups,
            figures.loss
        )
        .and_then(|()| self.file.flush())
        .map_err(|source| TrainError::Write {
            path: self.path.clone(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reviewed findings give one extent around the key slice, as tall as the largest lesion
    /// is long; nothing without a key slice or a tumor.
    #[test]
    fn reviewed_extents_surround_the_key_slice() {
        use crate::findings::{Lesion, LesionSize, Organ};
        let mut truth = Findings::default();
        assert!(reviewed_extents(&truth, 2.0, 100).is_empty());
        truth.key_slice = Some(crate::findings::KeySlice {
            index: 40,
            z_mm: None,
            sop_instance_uid: None,
            span: None,
        });
        assert!(reviewed_extents(&truth, 2.0, 100).is_empty(), "no tumor");
        let kidney = truth.organ_mut(Organ::KidneyLeft);
        kidney.tumor = TumorPresence::Yes;
        kidney.lesions.push(Lesion {
            size: Some(LesionSize {
                long_cm: 3.0,
                short_cm: None,
            }),
            ..Lesion::default()
        });
        truth.organ_mut(Organ::Liver).tumor = TumorPresence::Yes;
        // 3 cm at 2 mm slices: 8 slices either side (15 mm ÷ 2 mm, rounded up).
        let extents = reviewed_extents(&truth, 2.0, 100);
        assert_eq!(extents.len(), 1);
        let extent = extents[0];
        assert_eq!(extent.organ, Organ::KidneyLeft);
        assert_eq!(
            (extent.first_slice, extent.largest_slice, extent.last_slice),
            (32, 40, 48)
        );
        // Clipped to the volume; a key slice past the end is moved onto the last slice.
        let extent = reviewed_extents(&truth, 2.0, 44)[0];
        assert_eq!((extent.largest_slice, extent.last_slice), (40, 43));
        let extent = reviewed_extents(&truth, 2.0, 30)[0];
        assert_eq!((extent.first_slice, extent.largest_slice), (21, 29));
        // Without a stated size, 1 cm; thick slices still give a slice either side.
        truth.organ_mut(Organ::KidneyLeft).tumor = TumorPresence::No;
        let extent = reviewed_extents(&truth, 10.0, 100)[0];
        assert_eq!(extent.organ, Organ::Liver);
        assert_eq!((extent.first_slice, extent.last_slice), (39, 41));
    }

    #[test]
    fn advantages_are_relative_to_the_group() {
        let a = advantages(&[1.0, 0.0, 0.5, 0.5]);
        assert!((a.iter().sum::<f64>()).abs() < 1e-9);
        assert!(a[0] > 0.0 && a[1] < 0.0 && a[2].abs() < 1e-9);
        // Standard deviation √(1/8): 0.5 / 0.3536 = 1.414.
        assert!((a[0] - 2f64.sqrt()).abs() < 1e-4, "{a:?}");
        assert!(advantages(&[0.3; 8]).iter().all(|v| v.abs() < 1e-9));
    }

    /// The tensor log-probabilities are those of the written-out policy: a Bernoulli per
    /// organ on its largest logit, softmax over the described jobs for the key.
    #[test]
    fn token_logprobs_match_the_policy() {
        let device = Device::Cpu;
        // Jobs 0 and 1 in the liver, job 2 in the left kidney.
        let logits = [2.0f32, -1.0, 0.5];
        let centres = [0.0f32, 0.0, 1.0];
        let organs = [0usize, 0, 2];
        let samples = vec![
            Sample {
                present: [true, false, true, false],
                yes: vec![true, false, true],
                key: Some(2),
            },
            Sample {
                present: [false; 4],
                yes: vec![false; 3],
                key: None,
            },
        ];
        let lp = token_logprobs(
            &Tensor::new(&logits, &device).unwrap(),
            &centres,
            &organs,
            &samples,
        )
        .unwrap()
        .to_vec2::<f32>()
        .unwrap();
        let sigmoid = |x: f32| 1.0 / (1.0 + (-x).exp());
        let key = (0.5f32.exp() / (2f32.exp() + 0.5f32.exp())).ln();
        assert!((lp[0][0] - sigmoid(2.0).ln()).abs() < 1e-5, "{:?}", lp[0]);
        assert!((lp[0][2] - sigmoid(-0.5).ln()).abs() < 1e-5, "{:?}", lp[0]);
        assert!((lp[0][4] - key).abs() < 1e-5, "{:?}", lp[0]);
        assert!((lp[1][0] - (1.0 - sigmoid(2.0)).ln()).abs() < 1e-5);
        assert!(lp[1][4].abs() < 1e-6, "no key: no key token");
        let mask = token_mask(&samples, &organs, &device)
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
        assert_eq!(mask[0], vec![1.0, 0.0, 1.0, 0.0, 1.0]);
        assert_eq!(mask[1], vec![1.0, 0.0, 1.0, 0.0, 0.0]);
    }

    /// Draws follow the policy: an organ far above its threshold is always present, far
    /// below never; a present organ describes its jobs above threshold (at least its
    /// strongest); the key is a described job; the greedy sample is what analysis reports.
    #[test]
    fn draws_follow_the_probabilities() {
        // Liver: jobs 0 (30) and 1 (−30); pancreas: job 2 (−30); left kidney: jobs 3 (0),
        // 4 (−2).
        let logits = [30.0f32, -30.0, -30.0, 0.0, -2.0];
        let centres = [0.0f32, 0.0, 0.0, 0.0, 0.0];
        let organs = [0usize, 0, 1, 2, 2];
        let mut rng = Rng::new(3);
        let mut kidney = 0;
        for _ in 0..400 {
            let sample = draw(&logits, &centres, &organs, &mut rng);
            assert!(sample.present[0] && !sample.present[1] && !sample.present[3]);
            assert!(sample.yes[0] && !sample.yes[1] && !sample.yes[2] && !sample.yes[4]);
            assert_eq!(sample.yes[3], sample.present[2]);
            let key = sample.key.expect("a described job, so a key");
            assert!(sample.yes[key]);
            kidney += usize::from(sample.present[2]);
        }
        assert!((150..250).contains(&kidney), "σ(0) = ½: {kidney} of 400");
        let best = greedy(&logits, &centres, &organs);
        assert_eq!(best.present, [true, false, false, false]);
        assert_eq!(best.yes, vec![true, false, false, false, false]);
        assert_eq!(best.key, Some(0));
    }

    /// The gradient of the GRPO objective raises the log-probability of a sample with a
    /// positive advantage: descending the loss raises the logit of the organ it called
    /// present and lowers the one it called absent.
    #[test]
    fn the_loss_favours_samples_with_positive_advantage() {
        let device = Device::Cpu;
        let logits = Var::new(&[0.0f32, 0.0], &device).unwrap();
        let organs = [0usize, 1];
        let samples = vec![
            Sample {
                present: [true, false, false, false],
                yes: vec![true, false],
                key: Some(0),
            },
            Sample {
                present: [false, true, false, false],
                yes: vec![false, true],
                key: Some(1),
            },
        ];
        let advantages = Tensor::new(&[[1.0f32], [-1.0]], &device).unwrap();
        let lp = token_logprobs(logits.as_tensor(), &[0.0, 0.0], &organs, &samples).unwrap();
        let objective = (lp.sum_keepdim(1).unwrap() * &advantages)
            .unwrap()
            .sum_all()
            .unwrap();
        let grads = objective.neg().unwrap().backward().unwrap();
        let grad = grads
            .get(logits.as_tensor())
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        assert!(grad[0] < 0.0 && grad[1] > 0.0, "{grad:?}");
    }
}
