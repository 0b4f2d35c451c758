//! Supervised training of `keyslice-tiny` on case folders in the AbdomenAtlas layout (the
//! phantoms of `keyslice phantom`, or real cases with masks).
//!
//! Targets per model voxel come from the masks (organs; lesions per organ, the kidney lesion
//! mask split by the kidney it lies in) and, where the case has a phantom `truth.json`, from
//! its lesion list (attenuation and location of the lesion whose ellipsoid holds the voxel).
//! Each step trains both networks: the diagnoser on a batch of slabs (half of them showing a
//! lesion) and the verifier on a batch of crops (most centred near a lesion). Losses: BCE on
//! the masks (lesions weighted up, they are rare), cross-entropy on the class groups over
//! lesion pixels. AdamW; everything seeded.

use keyslice_io::cases::CaseFolder;
use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use candle_nn::{AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use rayon::prelude::*;

use keyslice_core::findings::Organ;
use keyslice_core::rng::Rng;
use keyslice_infer::embedded::decode::{attenuation_index, location_index};
use keyslice_infer::embedded::finder::FinderConfig;
use keyslice_infer::embedded::grid::ModelGrid;
use keyslice_infer::embedded::net::{ATTENUATION, LESION, LOCATION, ORGAN, SliceNet};
use keyslice_infer::embedded::{TinyConfig, diagnoser_input, verifier_input};
use keyslice_io::masks::load_mask_onto;
use keyslice_io::nifti::read_nifti;
use keyslice_phantom::PhantomTruth;
use keyslice_phantom::anatomy::Ellipsoid;

/// Why training could not run.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// A case could not be read.
    #[error("{path}: {detail}")]
    Case {
        /// The case folder or file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A reviewed export could not be read (`--from-export`).
    #[error(transparent)]
    Export(#[from] keyslice_export::read::ReadError),
    /// No usable case in the data folder.
    #[error("no case folders with ct.nii.gz and segmentations/ in {0}")]
    NoCases(PathBuf),
    /// The settings cannot train (`--config`, `--group`, the `--init` checkpoint's layout).
    #[error("{0}")]
    Settings(String),
    /// The cases cannot train this network (none with a tumor, say).
    #[error("{0}")]
    Data(String),
    /// A failed step left the network's variables locked.
    #[error("the network's variables were left locked by a failed step")]
    VariablesLocked,
    /// The network failed.
    #[error("training failed: {}", keyslice_infer::embedded::candle_message(.0))]
    Candle(#[source] candle_core::Error),
    /// The checkpoint could not be written.
    #[error("{path}: {source}")]
    Write {
        /// What was being written.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
}

impl From<candle_core::Error> for TrainError {
    fn from(error: candle_core::Error) -> Self {
        Self::Candle(error)
    }
}

/// Training settings.
#[derive(Clone, Debug)]
pub struct TrainOptions {
    /// Optimisation steps.
    pub steps: usize,
    /// Slabs (and crops) per step.
    pub batch: usize,
    /// Learning rate (AdamW), lowered tenfold for the last 30 % of steps.
    pub learning_rate: f64,
    /// Seed for initialisation and sampling.
    pub seed: u64,
    /// Checkpoint version written to `config.json`.
    pub version: String,
    /// Grid, widths and windows to start from ([`TinyConfig::initial`] when `None`).
    pub config: Option<TinyConfig>,
    /// Weight of lesion pixels in the lesion masks' cross-entropy.
    pub lesion_weight: f64,
    /// Weight of the lesion masks' soft Dice term (0: cross-entropy alone).
    pub dice_weight: f64,
}

/// One case on the model grid with its per-voxel targets.
pub struct CaseTargets {
    /// Case folder name.
    pub case_id: String,
    /// The CT on the model grid.
    pub grid: ModelGrid,
    /// Organ mask bits per voxel (bit n: organ n of [`Organ::ALL`]).
    pub organs: Vec<u8>,
    /// Lesion organ + 1 per voxel (0: none).
    pub lesion: Vec<u8>,
    /// Attenuation class per voxel (255: unknown or no lesion).
    pub attenuation: Vec<u8>,
    /// Location class per voxel (255: unknown or no lesion).
    pub location: Vec<u8>,
}

/// A blank case of `slabs` slabs of `n`² pixels with lesion codes at `lesions`.
#[cfg(test)]
pub(crate) fn case_with(n: usize, slabs: usize, lesions: &[(usize, u8)]) -> CaseTargets {
    let voxels = slabs * n * n;
    let mut lesion = vec![0u8; voxels];
    for &(voxel, code) in lesions {
        lesion[voxel] = code;
    }
    CaseTargets {
        case_id: "test".into(),
        grid: ModelGrid {
            spec: keyslice_infer::embedded::grid::GridSpec {
                size: n,
                pixel_mm: 3.0,
                slab_mm: 5.0,
            },
            slabs,
            hu: vec![0.0; voxels],
            centre_slice: (0..slabs as u32).collect(),
            ct_spacing_mm: [3.0, 3.0, 5.0],
            ct_dims: [n, n, slabs],
            z_range_mm: (0.0, 5.0 * slabs as f64),
            above_mm: 0.0,
            detail: None,
        },
        organs: vec![0; voxels],
        lesion,
        attenuation: vec![255; voxels],
        location: vec![255; voxels],
    }
}

/// Case folders under `data` (sorted), each with `ct.nii.gz` and `segmentations/`.
pub fn case_folders(data: &Path) -> Result<Vec<PathBuf>, TrainError> {
    let entries = std::fs::read_dir(data).map_err(|error| TrainError::Case {
        path: data.to_path_buf(),
        detail: error.to_string(),
    })?;
    let mut folders: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            let case = CaseFolder::new(path);
            case.ct().is_file() && case.masks().is_dir()
        })
        .collect();
    folders.sort();
    if folders.is_empty() {
        return Err(TrainError::NoCases(data.to_path_buf()));
    }
    Ok(folders)
}

/// Reads one case folder onto the model grid with its targets.
pub fn load_case(folder: &Path, config: &TinyConfig) -> Result<CaseTargets, TrainError> {
    let case_error = |path: &Path, detail: String| TrainError::Case {
        path: path.to_path_buf(),
        detail,
    };
    let case = CaseFolder::new(folder);
    let ct_path = case.ct();
    let volume = read_nifti(&ct_path).map_err(|e| case_error(&ct_path, e.to_string()))?;
    // A finder that reads detail on this grid gets it with the case.
    let detail = config
        .finder
        .as_ref()
        .filter(|finder| finder.grid == config.grid)
        .map_or(1, FinderConfig::detail_factor);
    let grid = ModelGrid::from_volume(&volume, config.grid).with_detail(&volume, detail);
    let segmentations = case.masks();
    let sampled = |name: &str| -> Result<Option<Vec<u8>>, TrainError> {
        let path = segmentations.join(format!("{name}.nii.gz"));
        if !path.is_file() {
            return Ok(None);
        }
        let mask = load_mask_onto(&path, &volume).map_err(|e| case_error(&path, e.to_string()))?;
        Ok(Some(grid.sample_labels(&mask)))
    };
    let count = grid.hu.len();
    let mut organs = vec![0u8; count];
    let organ_masks: Vec<Option<Vec<u8>>> = ["liver", "pancreas", "kidney_left", "kidney_right"]
        .iter()
        .map(|name| sampled(name))
        .collect::<Result<_, _>>()?;
    for (bit, mask) in organ_masks.iter().enumerate() {
        if let Some(mask) = mask {
            for (out, &value) in organs.iter_mut().zip(mask) {
                if value != 0 {
                    *out |= 1 << bit;
                }
            }
        }
    }
    let mut lesion = vec![0u8; count];
    for (name, organ) in [("liver_lesion", 1u8), ("pancreatic_lesion", 2)] {
        if let Some(mask) = sampled(name)? {
            for (out, &value) in lesion.iter_mut().zip(&mask) {
                if value != 0 {
                    *out = organ;
                }
            }
        }
    }
    let n = grid.spec.size;
    if let Some(mask) = sampled("kidney_lesion")? {
        for (at, &value) in mask.iter().enumerate() {
            if value == 0 {
                continue;
            }
            let left = organs[at] & 0b0100 != 0;
            let right = organs[at] & 0b1000 != 0;
            let is_left = match (left, right) {
                (true, false) => true,
                (false, true) => false,
                // The patient's left is +x, higher columns.
                _ => at % n >= n / 2,
            };
            lesion[at] = if is_left { 3 } else { 4 };
        }
    }
    let (attenuation, location) = lesion_classes(folder, &volume, &grid, &lesion);
    Ok(CaseTargets {
        case_id: folder
            .file_name()
            .map(|name| name.to_string_lossy().to_string())
            .unwrap_or_default(),
        grid,
        organs,
        lesion,
        attenuation,
        location,
    })
}

/// Attenuation and location class per model voxel of each lesion voxel, from a phantom
/// `truth.json` (the lesion whose ellipsoid holds the voxel); 255 where unknown.
fn lesion_classes(
    folder: &Path,
    volume: &keyslice_core::volume::Volume,
    grid: &ModelGrid,
    lesion: &[u8],
) -> (Vec<u8>, Vec<u8>) {
    let n = grid.spec.size;
    let count = lesion.len();
    let mut attenuation = vec![255u8; count];
    let mut location = vec![255u8; count];
    let truth_path = CaseFolder::new(folder).truth();
    if let Ok(text) = std::fs::read_to_string(&truth_path)
        && let Ok(truth) = serde_json::from_str::<PhantomTruth>(&text)
    {
        let plane = n * n;
        for (at, &code) in lesion.iter().enumerate() {
            if code == 0 {
                continue;
            }
            let (slab, pixel) = (at / plane, at % plane);
            let (ci, cj) = grid.ct_pixel(pixel % n, pixel / n);
            let point =
                volume
                    .patient_from_voxel()
                    .apply([ci, cj, f64::from(grid.centre_slice[slab])]);
            let organ = Organ::ALL[usize::from(code) - 1];
            let owner = truth
                .lesions
                .iter()
                .filter(|l| l.organ == organ)
                .map(|l| {
                    let shape = Ellipsoid {
                        centre: l.centre_mm,
                        radii: l.radii_mm,
                        angle: l.angle_rad,
                    };
                    (shape.level(point), l)
                })
                .filter(|(level, _)| *level < 2.0)
                .min_by(|a, b| a.0.total_cmp(&b.0));
            if let Some((_, owner)) = owner {
                attenuation[at] = attenuation_index(owner.attenuation) as u8;
                location[at] = location_index(&owner.location).map_or(255, |i| i as u8);
            }
        }
    }
    (attenuation, location)
}

/// Targets of a `side`² window of slab `slab` starting at (`column0`, `row0`), as flat
/// channel-major vectors: organ (4), lesion (4), attenuation one-hot (3), location one-hot
/// (13), and the class masks (1 each).
pub(crate) struct WindowTargets {
    pub(crate) organ: Vec<f32>,
    pub(crate) lesion: Vec<f32>,
    pub(crate) attenuation: Vec<f32>,
    pub(crate) attenuation_mask: Vec<f32>,
    pub(crate) location: Vec<f32>,
    pub(crate) location_mask: Vec<f32>,
}

fn window_targets(
    case: &CaseTargets,
    slab: usize,
    column0: isize,
    row0: isize,
    side: usize,
) -> WindowTargets {
    let size = case.grid.spec.size as isize;
    let plane = side * side;
    let mut targets = WindowTargets {
        organ: vec![0.0; 4 * plane],
        lesion: vec![0.0; 4 * plane],
        attenuation: vec![0.0; 3 * plane],
        attenuation_mask: vec![0.0; plane],
        location: vec![0.0; 13 * plane],
        location_mask: vec![0.0; plane],
    };
    let base = slab * (size * size) as usize;
    for row in 0..side {
        for column in 0..side {
            let (grid_column, grid_row) = (column0 + column as isize, row0 + row as isize);
            if !(0..size).contains(&grid_column) || !(0..size).contains(&grid_row) {
                continue;
            }
            let at = base + (grid_column + size * grid_row) as usize;
            let pixel = column + side * row;
            for bit in 0..4 {
                if case.organs[at] & (1 << bit) != 0 {
                    targets.organ[bit * plane + pixel] = 1.0;
                }
            }
            let code = case.lesion[at];
            if code > 0 {
                targets.lesion[(usize::from(code) - 1) * plane + pixel] = 1.0;
                if case.attenuation[at] != 255 {
                    targets.attenuation[usize::from(case.attenuation[at]) * plane + pixel] = 1.0;
                    targets.attenuation_mask[pixel] = 1.0;
                }
                if case.location[at] != 255 {
                    targets.location[usize::from(case.location[at]) * plane + pixel] = 1.0;
                    targets.location_mask[pixel] = 1.0;
                }
            }
        }
    }
    targets
}

/// Weights of the lesion-mask loss terms.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LossWeights {
    /// Lesion pixels in the cross-entropy.
    pub(crate) lesion: f64,
    /// The soft Dice term.
    pub(crate) dice: f64,
}

/// Numerically stable binary cross-entropy on logits, positives weighted by `positive`.
pub(crate) fn bce_with_logits(
    logits: &Tensor,
    targets: &Tensor,
    positive: f64,
) -> candle_core::Result<Tensor> {
    let loss =
        ((logits.relu()? - (logits * targets)?)? + (logits.abs()?.neg()?.exp()? + 1.0)?.log()?)?;
    let weights = targets.affine(positive - 1.0, 1.0)?;
    (loss * weights)?.mean_all()
}

/// 1 − soft Dice per channel (over batch and pixels), averaged over channels; a channel with
/// no target pixels and no predicted mass costs nothing.
pub(crate) fn soft_dice_loss(
    probabilities: &Tensor,
    targets: &Tensor,
) -> candle_core::Result<Tensor> {
    let overlap = (probabilities * targets)?.sum((0, 2, 3))?;
    let total = (probabilities.sum((0, 2, 3))? + targets.sum((0, 2, 3))?)?;
    let dice = ((overlap * 2.0)? + 1.0)?.div(&(total + 1.0)?)?;
    dice.affine(-1.0, 1.0)?.mean_all()
}

/// Cross-entropy over channels where `mask` is set (0 when nothing is).
fn masked_cross_entropy(
    logits: &Tensor,
    one_hot: &Tensor,
    mask: &Tensor,
) -> candle_core::Result<Tensor> {
    let log_p = candle_nn::ops::log_softmax(logits, 1)?;
    let per_pixel = (log_p * one_hot)?.sum_keepdim(1)?.neg()?;
    let count = mask.sum_all()?.to_scalar::<f32>()?;
    (per_pixel * mask)?.sum_all()? / f64::from(count.max(1.0))
}

/// Losses of one batch: masks, classes; returns (total, lesion part) for logging.
pub(crate) fn batch_loss(
    logits: &Tensor,
    targets: &[WindowTargets],
    side: usize,
    weights: LossWeights,
    device: &Device,
) -> candle_core::Result<(Tensor, f32)> {
    let batch = targets.len();
    let stack = |pick: &dyn Fn(&WindowTargets) -> &Vec<f32>, channels: usize| {
        let data: Vec<f32> = targets
            .iter()
            .flat_map(|t| pick(t).iter().copied())
            .collect();
        Tensor::from_vec(data, (batch, channels, side, side), device)
    };
    let organ = stack(&|t| &t.organ, 4)?;
    let lesion = stack(&|t| &t.lesion, 4)?;
    let attenuation = stack(&|t| &t.attenuation, 3)?;
    let attenuation_mask = stack(&|t| &t.attenuation_mask, 1)?;
    let location = stack(&|t| &t.location, 13)?;
    let location_mask = stack(&|t| &t.location_mask, 1)?;
    let organ_loss = bce_with_logits(&logits.narrow(1, ORGAN.start, ORGAN.len())?, &organ, 1.0)?;
    let lesion_logits = logits.narrow(1, LESION.start, LESION.len())?;
    // Lesions cover well under 1 % of pixels: weighted BCE plus a soft Dice term per
    // channel, which does not let "nothing anywhere" look like a good answer. A large weight
    // makes "the whole organ" the cheapest lesion mask.
    let lesion_loss = (bce_with_logits(&lesion_logits, &lesion, weights.lesion)?
        + (soft_dice_loss(&candle_nn::ops::sigmoid(&lesion_logits)?, &lesion)? * weights.dice)?)?;
    let attenuation_loss = masked_cross_entropy(
        &logits.narrow(1, ATTENUATION.start, ATTENUATION.len())?,
        &attenuation,
        &attenuation_mask,
    )?;
    let location_loss = masked_cross_entropy(
        &logits.narrow(1, LOCATION.start, LOCATION.len())?,
        &location,
        &location_mask,
    )?;
    let lesion_value = lesion_loss.to_scalar::<f32>()?;
    let total =
        (organ_loss + (lesion_loss * 2.0)? + (attenuation_loss * 0.5)? + (location_loss * 0.5)?)?;
    Ok((total, lesion_value))
}

/// Every (case, slab) showing a lesion.
fn lesion_slabs(cases: &[CaseTargets]) -> Vec<(usize, usize)> {
    cases
        .iter()
        .enumerate()
        .flat_map(|(index, case)| {
            let plane = case.grid.spec.size * case.grid.spec.size;
            (0..case.grid.slabs)
                .filter(move |&slab| {
                    case.lesion[slab * plane..(slab + 1) * plane]
                        .iter()
                        .any(|&code| code > 0)
                })
                .map(move |slab| (index, slab))
        })
        .collect()
}

/// Draws the training samples; the order of draws is part of what makes a seed reproduce a
/// checkpoint, so it is kept fixed.
struct Sampler<'a> {
    cases: &'a [CaseTargets],
    lesion_slabs: &'a [(usize, usize)],
    rng: Rng,
}

impl Sampler<'_> {
    /// A slab showing a lesion when `lesion` (and any exists), else any slab.
    fn slab(&mut self, lesion: bool) -> (usize, usize) {
        if lesion && !self.lesion_slabs.is_empty() {
            self.lesion_slabs[self.rng.below(self.lesion_slabs.len())]
        } else {
            let case = self.rng.below(self.cases.len());
            (case, self.rng.below(self.cases[case].grid.slabs))
        }
    }

    /// Diagnoser batch: every other window holds a lesion (anywhere but the outer 4 pixels),
    /// the rest are anywhere in the middle of a slab; whole slabs when `side` is the grid.
    fn diagnoser_windows(&mut self, batch: usize, size: usize, side: usize) -> Vec<Crop> {
        // Lesions anywhere in the window, not only near its centre: the network must not
        // learn "lesions are in the middle" from the distance to the padded border.
        let jitter = (side / 2).saturating_sub(4).max(1);
        (0..batch)
            .map(|b| self.crop(b % 2 == 0, size, jitter))
            .collect()
    }

    /// Verifier batch: three crops in four centred near a lesion pixel (±4 pixels), the rest
    /// anywhere in the middle of a slab.
    fn verifier_crops(&mut self, batch: usize, size: usize) -> Vec<Crop> {
        (0..batch).map(|b| self.crop(b % 4 != 3, size, 4)).collect()
    }

    /// A crop centre: near a random lesion pixel (± `jitter`) of a slab showing one when
    /// `near_lesion`, else anywhere in the middle half of a random slab.
    fn crop(&mut self, near_lesion: bool, size: usize, jitter: usize) -> Crop {
        let (case, slab) = self.slab(near_lesion);
        let plane = size * size;
        let lesion_pixels: Vec<usize> = if near_lesion {
            (0..plane)
                .filter(|&pixel| self.cases[case].lesion[slab * plane + pixel] > 0)
                .collect()
        } else {
            Vec::new()
        };
        let centre = if lesion_pixels.is_empty() {
            let column = size / 4 + self.rng.below(size / 2);
            (column, size / 4 + self.rng.below(size / 2))
        } else {
            let pixel = lesion_pixels[self.rng.below(lesion_pixels.len())];
            let column_jitter = self.rng.below(2 * jitter + 1) as isize - jitter as isize;
            let row_jitter = self.rng.below(2 * jitter + 1) as isize - jitter as isize;
            let clamp = |value: isize| value.clamp(0, size as isize - 1) as usize;
            (
                clamp((pixel % size) as isize + column_jitter),
                clamp((pixel / size) as isize + row_jitter),
            )
        };
        (case, slab, centre)
    }
}

/// A training window: (case, slab, centre pixel).
type Crop = (usize, usize, (usize, usize));

/// The diagnoser's loss on `windows` (whole slabs when `config.train_crop` is 0 or the
/// grid size), and its lesion part.
fn diagnoser_batch_loss(
    diagnoser: &SliceNet,
    cases: &[CaseTargets],
    windows: &[Crop],
    config: &TinyConfig,
    weights: LossWeights,
    device: &Device,
) -> candle_core::Result<(Tensor, f32)> {
    let size = config.grid.size;
    let side = diagnoser_side(config);
    let channels = config.diagnoser_inputs();
    let mut inputs = Vec::with_capacity(windows.len() * channels * side * side);
    let mut targets = Vec::with_capacity(windows.len());
    for &(case, slab, centre) in windows {
        let full = diagnoser_input(&cases[case].grid, slab, &config.windows);
        // The window lies inside the grid: its corner is clamped.
        let corner = |at: usize| at.saturating_sub(side / 2).min(size - side);
        let (column0, row0) = if side == size {
            (0, 0)
        } else {
            (corner(centre.0), corner(centre.1))
        };
        for channel in 0..channels {
            for row in row0..row0 + side {
                let start = channel * size * size + row * size + column0;
                inputs.extend_from_slice(&full[start..start + side]);
            }
        }
        targets.push(window_targets(
            &cases[case],
            slab,
            column0 as isize,
            row0 as isize,
            side,
        ));
    }
    let input = Tensor::from_vec(inputs, (windows.len(), channels, side, side), device)?;
    batch_loss(&diagnoser.forward(&input)?, &targets, side, weights, device)
}

/// Side of the diagnoser's training windows.
fn diagnoser_side(config: &TinyConfig) -> usize {
    if config.train_crop == 0 || config.train_crop > config.grid.size {
        config.grid.size
    } else {
        config.train_crop
    }
}

/// The verifier's loss on `crops` (case, slab, centre).
fn verifier_batch_loss(
    verifier: &SliceNet,
    cases: &[CaseTargets],
    crops: &[Crop],
    config: &TinyConfig,
    weights: LossWeights,
    device: &Device,
) -> candle_core::Result<Tensor> {
    let side = config.crop;
    let mut inputs = Vec::new();
    let mut targets = Vec::new();
    for &(case, slab, centre) in crops {
        let (input, (column0, row0)) =
            verifier_input(&cases[case].grid, slab, centre, side, &config.windows);
        inputs.extend(input);
        targets.push(window_targets(&cases[case], slab, column0, row0, side));
    }
    let input = Tensor::from_vec(
        inputs,
        (crops.len(), config.verifier_inputs(), side, side),
        device,
    )?;
    Ok(batch_loss(&verifier.forward(&input)?, &targets, side, weights, device)?.0)
}

/// AdamW over every variable of `varmap` (weight decay 1e-4), as both training stages use it.
pub(crate) fn adamw(varmap: &VarMap, learning_rate: f64) -> candle_core::Result<AdamW> {
    AdamW::new(
        varmap.all_vars(),
        ParamsAdamW {
            lr: learning_rate,
            weight_decay: 1e-4,
            ..ParamsAdamW::default()
        },
    )
}

/// Overwrites every variable of `varmap`: weights He-normal (σ = √(2 / fan-in)), biases 0,
/// normalisation scales 1.
pub(crate) fn seeded_init(varmap: &VarMap, seed: u64, device: &Device) -> candle_core::Result<()> {
    let data = varmap
        .data()
        .lock()
        .map_err(|_| candle_core::Error::Msg("variables locked".into()))?;
    let mut names: Vec<&String> = data.keys().collect();
    names.sort();
    let mut rng = Rng::new(seed ^ 0x5EED);
    for name in names {
        let var = &data[name];
        let dims = var.dims().to_vec();
        let count: usize = dims.iter().product();
        let is_norm = name.contains(".norm_");
        let values: Vec<f32> = if name.rsplit('.').next() == Some("bias") {
            vec![0.0; count]
        } else if is_norm {
            vec![1.0; count]
        } else {
            let fan_in: usize = dims.iter().skip(1).product::<usize>().max(1);
            let sigma = (2.0 / fan_in as f64).sqrt();
            (0..count)
                .map(|n| (sigma * keyslice_core::rng::normal_at(rng.next_u64(), n as u64)) as f32)
                .collect()
        };
        var.set(&Tensor::from_vec(values, dims.as_slice(), device)?)?;
    }
    Ok(())
}

/// Trains both networks on the cases in `data` and writes `config.json` and
/// `model.safetensors` to `out`. `progress` receives a line every few steps.
pub fn train(
    data: &Path,
    out: &Path,
    options: &TrainOptions,
    mut progress: impl FnMut(&str),
) -> Result<TinyConfig, TrainError> {
    let started = Instant::now();
    let mut config = options.config.clone().unwrap_or_else(TinyConfig::initial);
    config.version.clone_from(&options.version);
    let folders = case_folders(data)?;
    progress(&format!(
        "reading {} cases from {}",
        folders.len(),
        data.display()
    ));
    let cases: Vec<CaseTargets> = folders
        .par_iter()
        .map(|folder| load_case(folder, &config))
        .collect::<Result<_, _>>()?;
    let lesion_slabs = lesion_slabs(&cases);
    progress(&format!(
        "{} cases, {} slabs showing a lesion, read in {:.1} s",
        cases.len(),
        lesion_slabs.len(),
        started.elapsed().as_secs_f64()
    ));
    let device = Device::Cpu;
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
    let diagnoser = SliceNet::new(
        config.diagnoser_inputs(),
        config.diagnoser_widths,
        config.norm_groups,
        &vb.pp("diagnoser"),
    )?;
    let verifier = SliceNet::new(
        config.verifier_inputs(),
        config.verifier_widths,
        config.norm_groups,
        &vb.pp("verifier"),
    )?;
    // candle's CPU initialisers cannot be seeded: draw every weight again from our own
    // seeded generator (He-normal weights, zero biases), in name order.
    seeded_init(&varmap, options.seed, &device)?;
    let mut optimizer = adamw(&varmap, options.learning_rate)?;
    let mut sampler = Sampler {
        cases: &cases,
        lesion_slabs: &lesion_slabs,
        rng: Rng::new(options.seed),
    };
    let weights = LossWeights {
        lesion: options.lesion_weight,
        dice: options.dice_weight,
    };
    let mut recent = Vec::new();
    for step in 0..options.steps {
        if step == options.steps * 7 / 10 {
            optimizer.set_learning_rate(options.learning_rate / 10.0);
        }
        let windows =
            sampler.diagnoser_windows(options.batch, config.grid.size, diagnoser_side(&config));
        let (diagnoser_loss, lesion_loss) =
            diagnoser_batch_loss(&diagnoser, &cases, &windows, &config, weights, &device)?;
        let crops = sampler.verifier_crops(options.batch, config.grid.size);
        let verifier_loss =
            verifier_batch_loss(&verifier, &cases, &crops, &config, weights, &device)?;
        let loss = (&diagnoser_loss + &verifier_loss)?;
        if !loss.to_scalar::<f32>()?.is_finite() {
            return Err(diverged(step));
        }
        optimizer.backward_step(&loss)?;
        recent.push((
            diagnoser_loss.to_scalar::<f32>()?,
            lesion_loss,
            verifier_loss.to_scalar::<f32>()?,
        ));
        if (step + 1) % 25 == 0 || step + 1 == options.steps {
            let count = recent.len() as f32;
            let mean =
                |pick: fn(&(f32, f32, f32)) -> f32| recent.iter().map(pick).sum::<f32>() / count;
            progress(&format!(
                "step {}/{}: diagnoser loss {:.4} (lesion {:.4}), verifier loss {:.4}, {:.0} s",
                step + 1,
                options.steps,
                mean(|r| r.0),
                mean(|r| r.1),
                mean(|r| r.2),
                started.elapsed().as_secs_f64()
            ));
            recent.clear();
        }
    }
    let mut tensors = std::collections::HashMap::new();
    add_trained(&mut tensors, &varmap, Vec::new())?;
    write_checkpoint(&tensors, &config, out)?;
    Ok(config)
}

/// The error of a run whose loss stopped being a finite number at `step` (counted from 0).
pub(crate) fn diverged(step: usize) -> TrainError {
    TrainError::Data(format!(
        "the loss is not a finite number at step {}: training diverged, and no checkpoint was written; train again with a lower --lr",
        step + 1
    ))
}

/// Adds (or replaces) every trained variable of `varmap` and the normalisations' `running`
/// statistics in `tensors`.
pub(crate) fn add_trained(
    tensors: &mut std::collections::HashMap<String, Tensor>,
    varmap: &VarMap,
    running: Vec<(String, Tensor)>,
) -> Result<(), TrainError> {
    let data = varmap
        .data()
        .lock()
        .map_err(|_| TrainError::VariablesLocked)?;
    for (name, var) in data.iter() {
        tensors.insert(name.clone(), var.as_tensor().clone());
    }
    tensors.extend(running);
    Ok(())
}

/// Writes `model.safetensors` (`tensors`) and `config.json` to `out`: every stage's
/// checkpoint. A weight that is not a finite number (training diverged) is refused, naming
/// it, and nothing is written: such a model would answer "no tumor" everywhere.
pub(crate) fn write_checkpoint(
    tensors: &std::collections::HashMap<String, Tensor>,
    config: &TinyConfig,
    out: &Path,
) -> Result<(), TrainError> {
    let mut names: Vec<&String> = tensors.keys().collect();
    names.sort();
    for name in names {
        if !keyslice_infer::embedded::all_finite(&tensors[name])? {
            return Err(TrainError::Data(format!(
                "the weight `{name}` is not a finite number: training diverged, and no checkpoint was written; train again with a lower --lr"
            )));
        }
    }
    std::fs::create_dir_all(out).map_err(|source| TrainError::Write {
        path: out.to_path_buf(),
        source,
    })?;
    let weights = out.join("model.safetensors");
    candle_core::safetensors::save(tensors, &weights)?;
    let config_path = out.join("config.json");
    let text = serde_json::to_string_pretty(config).unwrap_or_default();
    std::fs::write(&config_path, text + "\n").map_err(|source| TrainError::Write {
        path: config_path,
        source,
    })?;
    Ok(())
}
