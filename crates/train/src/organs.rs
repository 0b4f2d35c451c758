//! Training of the organ network ([`keyslice_infer::embedded::organs`]) on top of a checkpoint:
//! `keyslice train --stage organs --init DIR`.
//!
//! Samples are `train_side`² windows of a random slab of a random case: four in five
//! centred on a random organ pixel (± 16 pixels), the rest anywhere in the middle of the
//! slab. With `lesion_share` above 0, that share of the windows is centred instead on a
//! random lesion voxel (± 16 pixels): tumors are part of their organ's mask, but so rare
//! among organ pixels that a network trained without them draws the organ around them, and
//! the finder, which looks only inside the mask, cannot see them. Loss: binary cross-entropy plus soft Dice per organ over the batch (the pancreas
//! covers a few hundred pixels of a slab: without the Dice term "no pancreas" is nearly
//! free). AdamW, the learning rate ÷ 10 for the last 30 %, everything seeded.
//!
//! The last `held_out` cases are left out of training; the Dice of each organ on them is
//! reported at the end (the figure the model card quotes).

use std::path::Path;
use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use candle_nn::{Optimizer, VarBuilder, VarMap};

use crate::finder::{base_checkpoint, load_training_cases};
use crate::tiny::{
    CaseTargets, TrainError, adamw, add_trained, bce_with_logits, load_case, seeded_init,
    soft_dice_loss, write_checkpoint,
};
use keyslice_core::rng::Rng;
use keyslice_infer::embedded::batch_norm::NormMode;
use keyslice_infer::embedded::organs::{OrganNet, OrgansConfig, Reading};
use keyslice_infer::embedded::{TinyConfig, diagnoser_input};

/// Settings of the organ stage.
#[derive(Clone, Debug)]
pub struct OrgansTrainOptions {
    /// Optimisation steps.
    pub steps: usize,
    /// Windows per step.
    pub batch: usize,
    /// AdamW learning rate.
    pub learning_rate: f64,
    /// Seed for initialisation and sampling.
    pub seed: u64,
    /// Checkpoint version written to `config.json`.
    pub version: String,
    /// Cases (the last ones of the data folder) kept out of training to measure Dice on.
    pub held_out: usize,
    /// Grid, widths and window side to start from ([`OrgansConfig::initial`] when `None`).
    pub start: Option<OrgansConfig>,
    /// Share of the windows centred on a lesion voxel (0: none, as for version 3).
    pub lesion_share: f64,
}

/// What the organ stage wrote and measured.
#[derive(Clone, Debug)]
pub struct OrgansReport {
    /// The checkpoint's configuration.
    pub config: TinyConfig,
    /// Dice of each organ (liver, pancreas, left kidney, right kidney) on the held-out cases;
    /// `None` when no case was held out or an organ is absent from all of them.
    pub dice: PerOrgan,
    /// Share of each organ's lesion voxels inside its predicted mask on the held-out cases
    /// (what the finder can see); `None` when no held-out case has a lesion there.
    pub lesion_cover: PerOrgan,
}

/// A figure per organ (liver, pancreas, left kidney, right kidney), `None` where undefined.
type PerOrgan = [Option<f64>; 4];

/// A training window: (case, slab, top-left column, top-left row).
type Window = (usize, usize, usize, usize);

/// Every lesion voxel of the training cases as (case, voxel index).
fn lesion_voxels(cases: &[CaseTargets]) -> Vec<(usize, usize)> {
    cases
        .iter()
        .enumerate()
        .flat_map(|(index, case)| {
            case.lesion
                .iter()
                .enumerate()
                .filter(|(_, code)| **code != 0)
                .map(move |(voxel, _)| (index, voxel))
        })
        .collect()
}

/// A window centred near the lesion voxel `(case, voxel)` (± 16 pixels).
fn draw_near_lesion(
    cases: &[CaseTargets],
    (case, voxel): (usize, usize),
    side: usize,
    rng: &mut Rng,
) -> Window {
    let n = cases[case].grid.spec.size;
    let (slab, pixel) = (voxel / (n * n), voxel % (n * n));
    let jitter = |at: usize, rng: &mut Rng| {
        (at as isize + rng.below(33) as isize - 16).clamp(0, n as isize - 1) as usize
    };
    let column = jitter(pixel % n, rng);
    let row = jitter(pixel / n, rng);
    let corner = |at: usize| at.saturating_sub(side / 2).min(n - side);
    (case, slab, corner(column), corner(row))
}

/// How a batch's windows are drawn.
struct Sampler {
    /// Window side, pixels.
    side: usize,
    /// Every lesion voxel of the training cases (empty unless some windows go there).
    lesions: Vec<(usize, usize)>,
    /// Windows per batch centred on a lesion: the first ones, the same count every step.
    on_lesions: usize,
}

impl Sampler {
    fn new(cases: &[CaseTargets], side: usize, options: &OrgansTrainOptions) -> Self {
        let lesions = if options.lesion_share > 0.0 {
            lesion_voxels(cases)
        } else {
            Vec::new()
        };
        let on_lesions = if lesions.is_empty() {
            0
        } else {
            ((options.batch as f64 * options.lesion_share).round() as usize).min(options.batch)
        };
        Self {
            side,
            lesions,
            on_lesions,
        }
    }

    fn batch(&self, cases: &[CaseTargets], size: usize, rng: &mut Rng) -> Vec<Window> {
        (0..size)
            .map(|b| {
                if b < self.on_lesions {
                    let at = self.lesions[rng.below(self.lesions.len())];
                    draw_near_lesion(cases, at, self.side, rng)
                } else {
                    draw(cases, self.side, rng)
                }
            })
            .collect()
    }
}

/// Draws a window: four in five centred near an organ pixel of the slab (when it has one).
fn draw(cases: &[CaseTargets], side: usize, rng: &mut Rng) -> Window {
    let case = rng.below(cases.len());
    let grid = &cases[case].grid;
    let n = grid.spec.size;
    let plane = n * n;
    let slab = rng.below(grid.slabs);
    let near_organ = rng.below(5) < 4;
    let organ_pixels: Vec<usize> = if near_organ {
        (0..plane)
            .filter(|&pixel| cases[case].organs[slab * plane + pixel] != 0)
            .collect()
    } else {
        Vec::new()
    };
    let (column, row) = if organ_pixels.is_empty() {
        (n / 4 + rng.below(n / 2), n / 4 + rng.below(n / 2))
    } else {
        let pixel = organ_pixels[rng.below(organ_pixels.len())];
        let jitter = |at: usize, rng: &mut Rng| {
            (at as isize + rng.below(33) as isize - 16).clamp(0, n as isize - 1) as usize
        };
        let column = jitter(pixel % n, rng);
        (column, jitter(pixel / n, rng))
    };
    let corner = |at: usize| at.saturating_sub(side / 2).min(n - side);
    (case, slab, corner(column), corner(row))
}

/// The loss of one batch of windows.
fn batch_loss(
    net: &OrganNet,
    cases: &[CaseTargets],
    windows: &[Window],
    side: usize,
    config: &TinyConfig,
    device: &Device,
) -> candle_core::Result<Tensor> {
    let channels = config.diagnoser_inputs();
    let mut inputs = Vec::with_capacity(windows.len() * channels * side * side);
    let mut targets = Vec::with_capacity(windows.len() * 4 * side * side);
    for &(case, slab, column0, row0) in windows {
        let grid = &cases[case].grid;
        let n = grid.spec.size;
        let plane = n * n;
        let full = diagnoser_input(grid, slab, &config.windows);
        for channel in 0..channels {
            for row in row0..row0 + side {
                let start = channel * plane + row * n + column0;
                inputs.extend_from_slice(&full[start..start + side]);
            }
        }
        let bits = &cases[case].organs[slab * plane..(slab + 1) * plane];
        for organ in 0..4 {
            for row in row0..row0 + side {
                targets.extend(
                    bits[row * n + column0..row * n + column0 + side]
                        .iter()
                        .map(|&b| f32::from(b >> organ & 1)),
                );
            }
        }
    }
    let x = Tensor::from_vec(inputs, (windows.len(), channels, side, side), device)?;
    let t = Tensor::from_vec(targets, (windows.len(), 4, side, side), device)?;
    let logits = net.forward(&x, true)?;
    bce_with_logits(&logits, &t, 1.0)? + soft_dice_loss(&candle_nn::ops::sigmoid(&logits)?, &t)?
}

/// Trains an organ network on the cases in `data` (but the last `options.held_out`) on top
/// of the checkpoint in `init`, and writes the checkpoint (everything of `init` but any
/// organ network, the new one, `config.json` with its settings) to `out`.
pub fn train_organs(
    init: &Path,
    data: &Path,
    out: &Path,
    options: &OrgansTrainOptions,
    mut progress: impl FnMut(&str),
) -> Result<OrgansReport, TrainError> {
    let started = Instant::now();
    let device = Device::Cpu;
    let (mut config, mut tensors) = base_checkpoint(init, Some("organs."), &device)?;
    config.version.clone_from(&options.version);
    let organs_config = options
        .start
        .clone()
        .or_else(|| config.organs.clone())
        .unwrap_or_else(|| OrgansConfig::initial(config.grid.slab_mm));
    let side = organs_config.train_side.min(organs_config.grid.size);
    if side == 0 || !side.is_multiple_of(8) {
        return Err(TrainError::Settings(format!(
            "the organ network's training windows ({side} pixels) must be a multiple of 8"
        )));
    }
    if let Some(finder) = &config.finder
        && finder.grid != organs_config.grid
    {
        // The finder reads the organ masks on its own grid.
        return Err(TrainError::Settings(
            "the organ network's grid must be the finder's in the --init checkpoint".into(),
        ));
    }
    let (cases, held_folders, fine_config) = load_training_cases(
        data,
        options.held_out,
        organs_config.grid,
        &config,
        "held out",
        &mut progress,
    )?;
    progress(&format!("read in {:.1} s", started.elapsed().as_secs_f64()));
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
    let net = OrganNet::new(
        config.diagnoser_inputs(),
        organs_config.widths,
        &vb.pp("organs"),
        NormMode::Train,
    )?;
    seeded_init(&varmap, options.seed, &device)?;
    let mut optimizer = adamw(&varmap, options.learning_rate)?;
    let mut rng = Rng::new(options.seed);
    let mut recent = Vec::new();
    let sampler = Sampler::new(&cases, side, options);
    for step in 0..options.steps {
        if step == options.steps * 7 / 10 {
            optimizer.set_learning_rate(options.learning_rate / 10.0);
        }
        let windows = sampler.batch(&cases, options.batch, &mut rng);
        let loss = batch_loss(&net, &cases, &windows, side, &fine_config, &device)?;
        optimizer.backward_step(&loss)?;
        recent.push(loss.to_scalar::<f32>()?);
        if (step + 1) % 50 == 0 || step + 1 == options.steps {
            progress(&format!(
                "step {}/{}: organ loss {:.4}, {:.0} s",
                step + 1,
                options.steps,
                recent.iter().sum::<f32>() / recent.len() as f32,
                started.elapsed().as_secs_f64()
            ));
            recent.clear();
        }
    }
    drop(cases);
    add_trained(&mut tensors, &varmap, net.running_tensors("organs")?)?;
    let (dice, lesion_cover) = held_out_dice(&net, &held_folders, &fine_config, &device)?;
    let shown = |values: &PerOrgan| {
        values
            .iter()
            .map(|d| d.map_or("-".into(), |d| format!("{d:.3}")))
            .collect::<Vec<_>>()
            .join(", ")
    };
    progress(&format!(
        "held-out Dice (liver, pancreas, left kidney, right kidney) on {} cases: {}; lesion voxels inside the mask: {}",
        held_folders.len(),
        shown(&dice),
        shown(&lesion_cover)
    ));
    config.organs = Some(organs_config);
    write_checkpoint(&tensors, &config, out)?;
    Ok(OrgansReport {
        config,
        dice,
        lesion_cover,
    })
}

/// Dice of each organ's mask from `net` against the true masks, over the cases in `folders`
/// (`None` for an organ neither shows), and the share of each organ's lesion voxels inside
/// its predicted mask (`None` for an organ with no lesion there).
fn held_out_dice(
    net: &OrganNet,
    folders: &[std::path::PathBuf],
    fine_config: &TinyConfig,
    device: &Device,
) -> Result<(PerOrgan, PerOrgan), TrainError> {
    let mut overlap = [0usize; 4];
    let mut total = [0usize; 4];
    let mut covered = [0usize; 4];
    let mut lesion = [0usize; 4];
    for folder in folders {
        let case = load_case(folder, fine_config)?;
        let masks = net.masks(&case.grid, &fine_config.windows, device, Reading::Stretch)?;
        let plane = case.grid.spec.size * case.grid.spec.size;
        for (index, mask) in masks.iter().enumerate() {
            let (slab, organ) = (index / 4, index % 4);
            let truth = &case.organs[slab * plane..(slab + 1) * plane];
            let lesions = &case.lesion[slab * plane..(slab + 1) * plane];
            for ((&predicted, &bits), &code) in mask.iter().zip(truth).zip(lesions) {
                let actual = bits >> organ & 1 == 1;
                overlap[organ] += usize::from(predicted && actual);
                total[organ] += usize::from(predicted) + usize::from(actual);
                if usize::from(code) == organ + 1 {
                    lesion[organ] += 1;
                    covered[organ] += usize::from(predicted);
                }
            }
        }
    }
    let share = |part: [usize; 4], whole: [usize; 4], scale: f64| -> PerOrgan {
        std::array::from_fn(|organ| {
            (whole[organ] > 0).then(|| scale * part[organ] as f64 / whole[organ] as f64)
        })
    };
    Ok((share(overlap, total, 2.0), share(covered, lesion, 1.0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tiny::case_with;

    #[test]
    fn lesion_windows_hold_their_lesion_voxel_and_stay_on_the_grid() {
        let n = 96;
        // A lesion voxel near a corner of slab 2 of the second case, one mid-slab in the first.
        let corner = 2 * n * n + 90 * n + 2;
        let middle = n * n + 40 * n + 50;
        let cases = [
            case_with(n, 3, &[(middle, 1)]),
            case_with(n, 3, &[(corner, 3)]),
        ];
        let voxels = lesion_voxels(&cases);
        assert_eq!(voxels, vec![(0, middle), (1, corner)]);
        let side = 64;
        let mut rng = Rng::new(5);
        for draw in 0..200 {
            let (case, voxel) = voxels[draw % 2];
            let (at_case, slab, column0, row0) =
                draw_near_lesion(&cases, (case, voxel), side, &mut rng);
            assert_eq!(at_case, case);
            assert_eq!(slab, voxel / (n * n));
            let (column, row) = (voxel % n, voxel % (n * n) / n);
            assert!(
                column0 + side <= n && row0 + side <= n,
                "window off the grid"
            );
            assert!(
                (column0..column0 + side).contains(&column) && (row0..row0 + side).contains(&row),
                "window ({column0}, {row0}) misses the lesion at ({column}, {row})"
            );
        }
    }
}
