//! Training of the lesion finder ([`keyslice_infer::embedded::finder`]) on top of a trained diagnoser:
//! `keyslice train --stage finder --init DIR`.
//!
//! Samples are (case, organ, slab) with the organ on the slab (its true mask, or with
//! `--finder-masks organ-network` the mask the organ network of `--init` draws, which is what
//! the finder is given at analysis time); a sample is positive when a lesion of that organ
//! shows on the slab (inside the network's mask, with those masks). Batches are half positive, half
//! negative (every negative is the same organ without a tumor there: the hard negatives
//! the per-pixel masks never saw enough of); crops are centred on the organ with ±4 pixels of
//! jitter. Loss: binary cross-entropy of the organ's largest cell logit. AdamW, the learning
//! rate ÷ 10 for the last 30 %, everything seeded.
//!
//! The last `calibration` cases are left out of training: the whole analysis (the
//! diagnoser's organ masks, then the finder) runs on them and each organ's threshold is the
//! one with the best balanced accuracy of "largest slab probability ≥ threshold" there.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use candle_nn::{Optimizer, VarBuilder, VarMap};
use rayon::prelude::*;

use crate::tiny::{
    CaseTargets, TrainError, adamw, add_trained, case_folders, load_case, seeded_init,
    write_checkpoint,
};
use keyslice_core::rng::Rng;
use keyslice_infer::embedded::batch_norm::NormMode;
use keyslice_infer::embedded::finder::{self, FinderConfig, FinderNet};
use keyslice_infer::embedded::grid::ModelGrid;
use keyslice_infer::embedded::organs::Reading;
use keyslice_infer::embedded::{TinyConfig, TinyModel};
use keyslice_io::nifti::read_nifti;

/// Settings of the finder stage.
#[derive(Clone, Debug)]
pub struct FinderTrainOptions {
    /// Optimisation steps.
    pub steps: usize,
    /// Crops per step (half of them positive).
    pub batch: usize,
    /// AdamW learning rate.
    pub learning_rate: f64,
    /// Seed for initialisation and sampling.
    pub seed: u64,
    /// Checkpoint version written to `config.json`.
    pub version: String,
    /// Cases (the last ones of the data folder) kept out of training to choose thresholds.
    pub calibration: usize,
    /// Grid, crop and widths to start from ([`FinderConfig::initial`] when `None`).
    pub start: Option<FinderConfig>,
    /// Share of each batch's negatives drawn from the hardest ones (0: none, as for
    /// version 2). The finder's answer for an organ is its largest over 20–60 slabs, so the
    /// few negatives it scores highest decide its false alarms; from 30 % of the steps on,
    /// every negative is scored afresh at 30, 50 and 70 % and this share of the negatives
    /// comes from the top tenth.
    pub hard_negatives: f64,
    /// Which organ masks the crops stand on: the true ones (as for versions 2 to 4), or the
    /// masks the organ network of `init` draws, which the finder is given at analysis time.
    pub masks: MaskSource,
}

/// Where the finder stage's organ masks come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MaskSource {
    /// The case's true organ masks (which hold their tumors).
    #[default]
    Truth,
    /// The masks of the organ network of `init`, read as `keyslice analyze` reads them
    /// (every other slab). They take in some neighbouring tissue and leave out part of
    /// some tumors: a slab whose tumor lies wholly outside the mask is left out of
    /// training (the finder cannot see it there, and it is no negative either).
    OrganNetwork,
}

/// A training sample: (case, organ, slab).
type Sample = (usize, usize, usize);

/// The organ mask of `organ` on `slab` of a case (the true one, or the organ network's
/// when [`MaskSource::OrganNetwork`] put it in `case.organs`).
fn organ_mask(case: &CaseTargets, organ: usize, slab: usize) -> Vec<bool> {
    let plane = case.grid.spec.size * case.grid.spec.size;
    case.organs[slab * plane..(slab + 1) * plane]
        .iter()
        .map(|&bits| bits & (1 << organ) != 0)
        .collect()
}

/// Every (case, organ, slab) with at least 4 organ pixels, split into (positives,
/// negatives), and the number left out. With `inside` a slab counts as positive only when a
/// lesion voxel of the organ lies inside its mask grown by one pixel (what the finder sees),
/// and a slab whose lesion lies wholly outside is left out (in neither list); without it any
/// lesion voxel of the organ on the slab makes it positive (true masks hold their tumors).
fn samples(cases: &[CaseTargets], inside: bool) -> (Vec<Sample>, Vec<Sample>, usize) {
    let (mut positives, mut negatives, mut outside) = (Vec::new(), Vec::new(), 0);
    for (index, case) in cases.iter().enumerate() {
        let n = case.grid.spec.size;
        let plane = n * n;
        for slab in 0..case.grid.slabs {
            for organ in 0..keyslice_infer::embedded::finder::ORGANS {
                let range = slab * plane..(slab + 1) * plane;
                let count = case.organs[range.clone()]
                    .iter()
                    .filter(|&&bits| bits & (1 << organ) != 0)
                    .count();
                if count < 4 {
                    continue;
                }
                let code = organ as u8 + 1;
                let lesion = &case.lesion[range];
                if !lesion.contains(&code) {
                    negatives.push((index, organ, slab));
                } else if !inside || lesion_inside(case, organ, slab) {
                    positives.push((index, organ, slab));
                } else {
                    outside += 1;
                }
            }
        }
    }
    (positives, negatives, outside)
}

/// Whether a lesion voxel of `organ` on `slab` lies inside the organ's mask grown by one
/// pixel (the mask channel the finder sees, [`finder::finder_input`]).
fn lesion_inside(case: &CaseTargets, organ: usize, slab: usize) -> bool {
    let n = case.grid.spec.size;
    let plane = n * n;
    let code = organ as u8 + 1;
    let lesion = &case.lesion[slab * plane..(slab + 1) * plane];
    let organs = &case.organs[slab * plane..(slab + 1) * plane];
    lesion.iter().enumerate().any(|(pixel, &at)| {
        let (row, column) = (pixel / n, pixel % n);
        at == code
            && (row.saturating_sub(1)..=(row + 1).min(n - 1)).any(|r| {
                (column.saturating_sub(1)..=(column + 1).min(n - 1))
                    .any(|c| organs[r * n + c] & (1 << organ) != 0)
            })
    })
}

/// Replaces each case's organ bits by the masks `organs` draws on its grid (read every
/// other slab, as the analysis reads them).
fn use_network_masks(
    organs: &keyslice_infer::embedded::organs::OrganNet,
    windows: &[[f32; 2]],
    cases: &mut [CaseTargets],
) -> candle_core::Result<()> {
    for case in cases {
        let masks = organs.masks(&case.grid, windows, &Device::Cpu, Reading::Alternate)?;
        case.organs = organ_bits(&masks, case.grid.spec.size * case.grid.spec.size);
    }
    Ok(())
}

/// Masks `[slab * 4 + organ][pixel]` (`plane` pixels a slab) as organ bits per voxel.
fn organ_bits(masks: &[Vec<bool>], plane: usize) -> Vec<u8> {
    let mut bits = vec![0u8; masks.len() / 4 * plane];
    for (index, mask) in masks.iter().enumerate() {
        let (slab, organ) = (index / 4, index % 4);
        for (pixel, _) in mask.iter().enumerate().filter(|(_, on)| **on) {
            bits[slab * plane + pixel] |= 1 << organ;
        }
    }
    bits
}

/// The organ's largest cell logit for each sample `[samples]`: crops centred on the organ
/// mask, with ±4 pixels of jitter when `rng` is given; `train` normalises with the
/// batch's statistics.
#[expect(
    clippy::too_many_arguments,
    reason = "the network, its options and the data of one step, each used"
)]
fn sample_logits(
    net: &FinderNet,
    cases: &[CaseTargets],
    samples: &[Sample],
    config: &FinderConfig,
    windows: &[[f32; 2]],
    mut rng: Option<&mut Rng>,
    train: bool,
    device: &Device,
) -> candle_core::Result<Tensor> {
    let crop = config.crop;
    let channels = FinderConfig::inputs(windows.len());
    let mut inputs = Vec::with_capacity(samples.len() * channels * crop * crop);
    let mut masks = Vec::with_capacity(samples.len() * crop * crop);
    let mut organs = Vec::with_capacity(samples.len());
    let mut details = Vec::new();
    for &(case, organ, slab) in samples {
        let grid: &ModelGrid = &cases[case].grid;
        let n = grid.spec.size;
        let mask = organ_mask(&cases[case], organ, slab);
        let mut centre = finder::mask_centre(&mask, n).unwrap_or((n / 2, n / 2));
        if let Some(rng) = rng.as_deref_mut() {
            let mut jitter = |at: usize| {
                (at as isize + rng.below(9) as isize - 4).clamp(0, n as isize - 1) as usize
            };
            centre = (jitter(centre.0), jitter(centre.1));
        }
        let corner = finder::crop_corner(centre, crop, n);
        let (input, made) = finder::finder_input(grid, slab, &mask, corner, crop, windows);
        if let Some(detail) = finder::detail_input(grid, slab, corner, crop, windows) {
            details.extend(detail);
        }
        inputs.extend(input);
        masks.extend(made.mask);
        organs.push(organ);
    }
    let x = Tensor::from_vec(inputs, (samples.len(), channels, crop, crop), device)?;
    let m = Tensor::from_vec(masks, (samples.len(), 1, crop, crop), device)?;
    // Every case's grid has the same detail (or none): the first one's says which.
    let detail = match samples.first() {
        Some(&(case, _, _)) => finder::detail_tensor(
            details,
            &cases[case].grid,
            samples.len(),
            crop,
            windows,
            device,
        )?,
        None => None,
    };
    finder::organ_cells(&net.forward(&x, detail.as_ref(), train)?, &organs, &m)?.max(1)
}

/// The hardest tenth of `negatives` (at least one): those the network, in inference mode,
/// scores highest.
fn hardest_negatives(
    net: &FinderNet,
    cases: &[CaseTargets],
    negatives: &[Sample],
    config: &FinderConfig,
    windows: &[[f32; 2]],
    device: &Device,
) -> candle_core::Result<Vec<Sample>> {
    let mut scored = Vec::with_capacity(negatives.len());
    for chunk in negatives.chunks(64) {
        let logits = sample_logits(net, cases, chunk, config, windows, None, false, device)?
            .to_vec1::<f32>()?;
        scored.extend(chunk.iter().copied().zip(logits));
    }
    Ok(top_tenth(scored))
}

/// The tenth of `scored` (at least one) with the highest scores, highest first (ties in
/// sample order, so that the result is deterministic).
fn top_tenth(mut scored: Vec<(Sample, f32)>) -> Vec<Sample> {
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let keep = (scored.len() / 10).max(1);
    scored
        .into_iter()
        .take(keep)
        .map(|(sample, _)| sample)
        .collect()
}

/// The loss of one batch of samples with their labels.
fn batch_loss(
    net: &FinderNet,
    cases: &[CaseTargets],
    batch: &[(Sample, bool)],
    config: &FinderConfig,
    windows: &[[f32; 2]],
    rng: &mut Rng,
    device: &Device,
) -> candle_core::Result<Tensor> {
    let samples: Vec<Sample> = batch.iter().map(|&(sample, _)| sample).collect();
    let logits = sample_logits(
        net,
        cases,
        &samples,
        config,
        windows,
        Some(rng),
        true,
        device,
    )?;
    let labels: Vec<f32> = batch
        .iter()
        .map(|&(_, positive)| if positive { 1.0 } else { 0.0 })
        .collect();
    let labels = Tensor::from_vec(labels, batch.len(), device)?;
    // Binary cross-entropy with logits, written out stably: max(z, 0) − z·y + ln(1 + e^−|z|).
    let loss =
        ((logits.relu()? - (&logits * &labels)?)? + (logits.abs()?.neg()?.exp()? + 1.0)?.log()?)?;
    loss.mean_all()
}

/// Per-organ threshold with the best balanced accuracy on `scores` (largest probability,
/// truth) per organ: the midpoint between neighbouring scores (the higher on a tie), 0.5
/// when an organ has no positive or no negative case.
#[must_use]
pub fn best_thresholds(scores: &[Vec<(f32, bool)>; 4]) -> [f32; 4] {
    let mut thresholds = [0.5f32; 4];
    for (organ, list) in scores.iter().enumerate() {
        let positives = list.iter().filter(|s| s.1).count();
        let negatives = list.len() - positives;
        if positives == 0 || negatives == 0 {
            continue;
        }
        let mut values: Vec<f32> = list.iter().map(|s| s.0).collect();
        values.sort_by(f32::total_cmp);
        values.dedup();
        let mut best = (f64::NEG_INFINITY, 0.5f32);
        let candidates = values
            .windows(2)
            .map(|pair| f32::midpoint(pair[0], pair[1]))
            .chain([
                values[0] / 2.0,
                f32::midpoint(values[values.len() - 1], 1.0),
            ]);
        for threshold in candidates {
            let sensitivity =
                list.iter().filter(|s| s.1 && s.0 >= threshold).count() as f64 / positives as f64;
            let specificity =
                list.iter().filter(|s| !s.1 && s.0 < threshold).count() as f64 / negatives as f64;
            let balanced = f64::midpoint(sensitivity, specificity);
            // On a tie the higher threshold: no tumor is called without evidence for it.
            let tie = (balanced - best.0).abs() < 1e-12 && threshold > best.1;
            if balanced > best.0 + 1e-12 || tie {
                best = (balanced, threshold);
            }
        }
        thresholds[organ] = best.1;
    }
    thresholds
}

/// The configuration and weights of the checkpoint in `init`, but those named under
/// `replaced` (the part a stage trains afresh, e.g. `finder.`), if any.
pub(crate) fn base_checkpoint(
    init: &Path,
    replaced: Option<&str>,
    device: &Device,
) -> Result<(TinyConfig, HashMap<String, Tensor>), TrainError> {
    let init_model = TinyModel::load(init).map_err(|error| TrainError::Case {
        path: init.to_path_buf(),
        detail: error.to_string(),
    })?;
    let weights_path = init.join("model.safetensors");
    let base = candle_core::safetensors::load(&weights_path, device)
        .map_err(|error| TrainError::Case {
            path: weights_path.clone(),
            detail: keyslice_infer::embedded::candle_message(&error),
        })?
        .into_iter()
        .filter(|(name, _)| replaced.is_none_or(|prefix| !name.starts_with(prefix)))
        .collect();
    Ok((init_model.config, base))
}

/// Trains a finder on the cases in `data` (but the last `options.calibration`, which choose
/// the thresholds) on top of the checkpoint in `init`, and writes the checkpoint (the
/// diagnoser and verifier of `init`, the finder, `config.json` with its settings) to `out`.
pub fn train_finder(
    init: &Path,
    data: &Path,
    out: &Path,
    options: &FinderTrainOptions,
    mut progress: impl FnMut(&str),
) -> Result<TinyConfig, TrainError> {
    let started = Instant::now();
    let device = Device::Cpu;
    let (mut config, base) = base_checkpoint(init, Some("finder."), &device)?;
    config.version.clone_from(&options.version);
    let finder_config = options
        .start
        .clone()
        .unwrap_or_else(|| FinderConfig::initial(config.grid.slab_mm));
    if let Some(problem) = finder_config.detail_problem() {
        return Err(TrainError::Settings(format!("{problem} (in --config)")));
    }
    // The cases are read with what this finder reads (its detail).
    config.finder = Some(finder_config.clone());
    // The organ network first, so that a checkpoint without one fails before the cases
    // are read.
    let inside = options.masks == MaskSource::OrganNetwork;
    let network = if inside {
        let model = TinyModel::load(init).map_err(|error| TrainError::Case {
            path: init.to_path_buf(),
            detail: error.to_string(),
        })?;
        if model.organs.is_none() {
            return Err(TrainError::Case {
                path: init.to_path_buf(),
                detail: "--finder-masks organ-network needs a checkpoint with an organ network (version 3 on)".into(),
            });
        }
        Some(model)
    } else {
        None
    };
    let (mut cases, calibration_folders, fine_config) = load_training_cases(
        data,
        options.calibration,
        finder_config.grid,
        &config,
        "for calibration",
        &mut progress,
    )?;
    if let Some(organs) = network.as_ref().and_then(|model| model.organs.as_ref()) {
        use_network_masks(organs, &config.windows, &mut cases)?;
        progress(&format!(
            "organ masks drawn by the organ network of {}, {:.1} s",
            init.display(),
            started.elapsed().as_secs_f64()
        ));
    }
    drop(network);
    let (positives, negatives, outside) = samples(&cases, inside);
    progress(&format!(
        "{} organ slabs with a tumor, {} without ({} more whose tumor lies outside the mask, left out), read in {:.1} s",
        positives.len(),
        negatives.len(),
        outside,
        started.elapsed().as_secs_f64()
    ));
    if positives.is_empty() || negatives.is_empty() {
        return Err(TrainError::Data(
            "the finder needs organ slabs with and without a tumor".into(),
        ));
    }
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
    let net = FinderNet::new(
        FinderConfig::inputs(config.windows.len()),
        &finder_config,
        &vb.pp("finder"),
        NormMode::Train,
    )?;
    seeded_init(&varmap, options.seed, &device)?;
    optimise(
        &net,
        &varmap,
        &cases,
        (&positives, &negatives),
        &finder_config,
        &config.windows,
        options,
        |step, loss| {
            progress(&format!(
                "step {step}/{}: finder loss {loss:.4}, {:.0} s",
                options.steps,
                started.elapsed().as_secs_f64()
            ));
        },
    )?;
    drop(cases);
    // Calibration: the whole analysis on cases the finder never saw.
    let mut tensors = base;
    add_trained(&mut tensors, &varmap, net.running_tensors("finder")?)?;
    config.finder = Some(finder_config);
    calibrate_and_write(
        config,
        &tensors,
        &calibration_folders,
        &fine_config,
        out,
        started,
        &mut progress,
    )
}

/// Chooses the finder thresholds of `config` by the whole analysis (with `tensors`) of the
/// cases in `folders`, read on `fine_config`'s grid, and writes the checkpoint to `out`.
fn calibrate_and_write(
    mut config: TinyConfig,
    tensors: &HashMap<String, Tensor>,
    folders: &[std::path::PathBuf],
    fine_config: &TinyConfig,
    out: &Path,
    started: Instant,
    progress: &mut impl FnMut(&str),
) -> Result<TinyConfig, TrainError> {
    let model = TinyModel::from_tensors(config.clone(), tensors.clone(), Device::Cpu)?;
    let scores = calibration_scores(&model, folders, fine_config, |done| {
        progress(&format!(
            "calibration: {done}/{} cases, {:.0} s",
            folders.len(),
            started.elapsed().as_secs_f64()
        ));
    })?;
    let Some(mut finder_config) = config.finder.take() else {
        return Err(TrainError::Settings(
            "the --init checkpoint has no finder to calibrate".into(),
        ));
    };
    finder_config.thresholds = best_thresholds(&scores);
    progress(&format!(
        "thresholds (liver, pancreas, left kidney, right kidney): {:?}",
        finder_config.thresholds
    ));
    config.finder = Some(finder_config);
    write_checkpoint(tensors, &config, out)?;
    Ok(config)
}

/// The cases of `data` but the last `held_out` (at most all but one), read onto `grid` with
/// their targets; those last case folders; and `config` on `grid`. `what` says what the
/// held-out cases are for, in the progress line.
pub(crate) fn load_training_cases(
    data: &Path,
    held_out: usize,
    grid: keyslice_infer::embedded::grid::GridSpec,
    config: &TinyConfig,
    what: &str,
    progress: &mut impl FnMut(&str),
) -> Result<(Vec<CaseTargets>, Vec<std::path::PathBuf>, TinyConfig), TrainError> {
    let folders = case_folders(data)?;
    let held_out = held_out.min(folders.len().saturating_sub(1));
    let (train_folders, held_folders) = folders.split_at(folders.len() - held_out);
    progress(&format!(
        "reading {} training cases from {} ({} more {what})",
        train_folders.len(),
        data.display(),
        held_folders.len()
    ));
    let fine_config = TinyConfig {
        grid,
        ..config.clone()
    };
    let cases: Vec<CaseTargets> = train_folders
        .par_iter()
        .map(|folder| load_case(folder, &fine_config))
        .collect::<Result<_, _>>()?;
    Ok((cases, held_folders.to_vec(), fine_config))
}

/// Chooses the finder thresholds of the checkpoint in `init` afresh on every case in `data`
/// (cases neither its training nor a test set used) with the whole analysis, and writes the
/// checkpoint with them to `out`: what `--stage calibrate` does, and what a new organ
/// network or a larger calibration set calls for without training the finder again.
pub fn recalibrate(
    init: &Path,
    data: &Path,
    out: &Path,
    version: &str,
    mut progress: impl FnMut(&str),
) -> Result<TinyConfig, TrainError> {
    let started = Instant::now();
    let device = Device::Cpu;
    let (mut config, tensors) = base_checkpoint(init, None, &device)?;
    let Some(finder_grid) = config.finder.as_ref().map(|finder| finder.grid) else {
        return Err(TrainError::Case {
            path: init.to_path_buf(),
            detail: "the checkpoint has no finder to calibrate".into(),
        });
    };
    config.version = version.to_string();
    let folders = case_folders(data)?;
    let fine_config = TinyConfig {
        grid: finder_grid,
        ..config.clone()
    };
    calibrate_and_write(
        config,
        &tensors,
        &folders,
        &fine_config,
        out,
        started,
        &mut progress,
    )
}

/// The optimisation loop: `options.steps` AdamW steps on batches half positive, half
/// negative; `report(step, mean loss)` every 50 steps and at the end.
#[expect(
    clippy::too_many_arguments,
    reason = "the network, its options and the data of one step, each used"
)]
fn optimise(
    net: &FinderNet,
    varmap: &VarMap,
    cases: &[CaseTargets],
    (positives, negatives): (&[Sample], &[Sample]),
    finder_config: &FinderConfig,
    windows: &[[f32; 2]],
    options: &FinderTrainOptions,
    mut report: impl FnMut(usize, f32),
) -> Result<(), TrainError> {
    let device = Device::Cpu;
    let mut optimizer = adamw(varmap, options.learning_rate)?;
    let mut rng = Rng::new(options.seed);
    let mut recent = Vec::new();
    let mining = options.hard_negatives > 0.0;
    let mine_at = [3, 5, 7].map(|tenths| options.steps * tenths / 10);
    let mut hard: Vec<Sample> = Vec::new();
    for step in 0..options.steps {
        if step == options.steps * 7 / 10 {
            optimizer.set_learning_rate(options.learning_rate / 10.0);
        }
        if mining && mine_at.contains(&step) {
            hard = hardest_negatives(net, cases, negatives, finder_config, windows, &device)?;
        }
        let batch: Vec<(Sample, bool)> = (0..options.batch)
            .map(|b| {
                if b % 2 == 0 {
                    (positives[rng.below(positives.len())], true)
                } else if !hard.is_empty() && rng.unit() < options.hard_negatives {
                    (hard[rng.below(hard.len())], false)
                } else {
                    (negatives[rng.below(negatives.len())], false)
                }
            })
            .collect();
        let loss = batch_loss(
            net,
            cases,
            &batch,
            finder_config,
            windows,
            &mut rng,
            &device,
        )?;
        optimizer.backward_step(&loss)?;
        recent.push(loss.to_scalar::<f32>()?);
        if (step + 1) % 50 == 0 || step + 1 == options.steps {
            report(step + 1, recent.iter().sum::<f32>() / recent.len() as f32);
            recent.clear();
        }
    }
    Ok(())
}

/// Each calibration case's largest finder probability per organ and whether the organ has a
/// tumor, from the whole analysis (the diagnoser's organ masks, then the finder).
fn calibration_scores(
    model: &TinyModel,
    folders: &[std::path::PathBuf],
    fine_config: &TinyConfig,
    mut every_20: impl FnMut(usize),
) -> Result<[Vec<(f32, bool)>; 4], TrainError> {
    let mut scores: [Vec<(f32, bool)>; 4] = Default::default();
    for (done, folder) in folders.iter().enumerate() {
        let case = load_case(folder, fine_config)?;
        let ct_path = keyslice_io::cases::CaseFolder::new(folder).ct();
        let volume = read_nifti(&ct_path).map_err(|error| TrainError::Case {
            path: ct_path.clone(),
            detail: error.to_string(),
        })?;
        let coarse = ModelGrid::from_volume(&volume, model.config.grid);
        let probabilities = model.diagnose_grid(&coarse)?;
        let (answers, _) = model.find(&case.grid, &probabilities, Reading::Stretch)?;
        for (organ, list) in scores.iter_mut().enumerate() {
            let largest = answers
                .iter()
                .filter(|answer| answer.organ == organ)
                .map(|answer| answer.probability)
                .fold(0f32, f32::max);
            list.push((largest, case.lesion.contains(&(organ as u8 + 1))));
        }
        if (done + 1) % 20 == 0 {
            every_20(done + 1);
        }
    }
    Ok(scores)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hardest_negatives_are_the_top_tenth_by_score() {
        let scored: Vec<(Sample, f32)> = (0..30)
            .map(|i| ((i, i % 4, 0), ((i * 7) % 30) as f32))
            .collect();
        // Scores 29, 28 and 27 belong to samples 17, 4 and 21 (7 i mod 30).
        assert_eq!(top_tenth(scored), vec![(17, 1, 0), (4, 0, 0), (21, 1, 0)]);
        assert_eq!(top_tenth(vec![((0, 0, 0), 1.0)]), vec![(0, 0, 0)]);
        assert!(top_tenth(Vec::new()).is_empty());
    }

    #[test]
    fn thresholds_separate_the_calibration_scores() {
        let scores = [
            vec![(0.9, true), (0.8, true), (0.3, false), (0.2, false)],
            vec![(0.4, true), (0.6, false), (0.1, false)],
            vec![(0.7, false)],
            // Nothing separates: the highest cut, which calls no tumor.
            vec![(0.0, true), (0.0, false)],
        ];
        let thresholds = best_thresholds(&scores);
        assert!((thresholds[0] - 0.55).abs() < 1e-6, "{thresholds:?}");
        // Pancreas: 0.4 positive below a 0.6 negative; the best cut keeps the positive and
        // loses one negative (balanced 0.75) or drops the positive (0.5): 0.25.
        assert!(thresholds[1] < 0.4 && thresholds[1] > 0.1, "{thresholds:?}");
        assert!((thresholds[2] - 0.5).abs() < 1e-6, "{thresholds:?}");
        assert!((thresholds[3] - 0.5).abs() < 1e-6, "{thresholds:?}");
    }

    /// A case of 3 slabs of 8² pixels: on every slab the liver (organ 0) covers columns
    /// 0–3, and a liver lesion lies at column 3 of slab 0 (inside), column 4 of slab 1 (next
    /// to the mask: the finder's grown mask takes it in) and column 7 of slab 2 (outside).
    fn liver_case() -> CaseTargets {
        let n = 8;
        let lesions: Vec<(usize, u8)> = [(0, 3), (1, 4), (2, 7)]
            .iter()
            .map(|&(slab, column)| (slab * n * n + 4 * n + column, 1))
            .collect();
        let mut case = crate::tiny::case_with(n, 3, &lesions);
        for (voxel, bits) in case.organs.iter_mut().enumerate() {
            if voxel % n < 4 {
                *bits = 1;
            }
        }
        case
    }

    #[test]
    fn a_tumor_outside_the_network_mask_is_neither_positive_nor_negative() {
        let cases = [liver_case()];
        // True masks: every slab with a liver lesion is positive.
        let (positives, negatives, outside) = samples(&cases, false);
        assert_eq!(positives, vec![(0, 0, 0), (0, 0, 1), (0, 0, 2)]);
        assert!(negatives.is_empty());
        assert_eq!(outside, 0);
        // Network masks: the lesion of slab 2 lies outside the grown mask; that slab is left
        // out.
        let (positives, negatives, outside) = samples(&cases, true);
        assert_eq!(positives, vec![(0, 0, 0), (0, 0, 1)]);
        assert!(negatives.is_empty());
        assert_eq!(outside, 1);
    }

    #[test]
    fn network_masks_become_organ_bits_per_voxel() {
        let plane = 4;
        // Two slabs; liver on pixels 0 and 1 of slab 0, right kidney (organ 3) on pixel 1 of
        // slab 0 too, pancreas on pixel 3 of slab 1.
        let mut masks = vec![vec![false; plane]; 8];
        masks[0][0] = true;
        masks[0][1] = true;
        masks[3][1] = true;
        masks[4 + 1][3] = true;
        assert_eq!(organ_bits(&masks, plane), vec![1, 9, 0, 0, 0, 0, 0, 2]);
    }
}
