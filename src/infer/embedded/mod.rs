//! `keyslice-tiny`, the embedded default model: trained by this project on synthetic
//! phantoms (`keyslice train`), shipped in `models/keyslice-tiny/` and compiled into the
//! binary, so analysis works on a fresh machine with no download and no GPU.
//!
//! Two networks of the same shape ([`net::SliceNet`]): the **diagnoser** reads every axial
//! slab of the volume on the model grid ([`grid`]) with its neighbours and position features
//! and marks organs and lesions per pixel; [`decode`] turns that into findings, a report (the
//! project's report writer), the key slice and a box. The **verifier** sees only a crop of the
//! key slice around the box and describes what is visible there, through the same decoding,
//! as a local description. From version 2 a third network, the **finder** ([`finder`]),
//! decides which organs show a tumor and where: for every organ and slab an organ mask
//! covers, it answers "tumor here?" on a finer grid, and the decoding grows the lesion from
//! the cell that decided (the diagnoser's lesion masks are then unused). From version 3 a
//! fourth, the **organ network** ([`organs`]), draws those organ masks on the finer grid
//! (before, they were the diagnoser's). It is honest about what it is: trained only on
//! synthetic phantoms, not for clinical use (see `MODEL_CARD.md`).

pub mod batch_norm;
pub mod conv;
pub mod decode;
pub mod finder;
pub mod finder_train;
pub mod grid;
pub mod net;
pub mod organs;
pub mod organs_train;
pub mod rl_plot;
pub mod rl_train;
pub mod train;

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use serde::{Deserialize, Serialize};

use super::{Diagnoser, Diagnosis, InferError, KeySliceImage, ModelId, Verifier};
use crate::findings::{Findings, SliceBox, TumorPresence, write_local_description, write_report};
use crate::volume::Volume;
use batch_norm::NormMode;
use decode::{
    DecodeRule, FINDER_RULE, Probabilities, find_lesions, findings_of, key_slab, slab_box,
    visible_organs,
};
use finder::{FinderConfig, FinderNet, SlabAnswer};
use grid::{GridSpec, ModelGrid};
use net::{OUTPUTS, SliceNet};
use organs::{OrganNet, OrgansConfig, Reading};

/// candle's error text without the backtrace it may carry.
#[must_use]
pub fn candle_message(error: &candle_core::Error) -> String {
    error
        .to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The weights and configuration compiled into the binary.
const EMBEDDED_CONFIG: &str = include_str!("../../../models/keyslice-tiny/config.json");
const EMBEDDED_WEIGHTS: &[u8] = include_bytes!("../../../models/keyslice-tiny/model.safetensors");

/// `config.json` of a keyslice-tiny checkpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TinyConfig {
    /// `"keyslice-tiny"`.
    pub model: String,
    /// Checkpoint version (bumped at each retraining).
    pub version: String,
    /// The diagnoser's grid.
    pub grid: GridSpec,
    /// Pixels per side of the verifier's crop (on the same pixel spacing).
    pub crop: usize,
    /// Channel widths of the diagnoser at full, ½, ¼, ⅛ resolution.
    pub diagnoser_widths: [usize; 4],
    /// Channel widths of the verifier.
    pub verifier_widths: [usize; 4],
    /// Window centre and width (HU) of each input window.
    pub windows: Vec<[f32; 2]>,
    /// Groups of the group normalisation after each convolution (0: none, as in version 1).
    #[serde(default)]
    pub norm_groups: usize,
    /// Side of the square windows of the grid the diagnoser is trained on (0: whole slabs);
    /// it always reads whole slabs when analysing.
    #[serde(default)]
    pub train_crop: usize,
    /// When lesion pixels make a lesion.
    #[serde(default)]
    pub decode: DecodeRule,
    /// The lesion finder (version 2 on): when present it decides which organs show a tumor
    /// and where, and the diagnoser's lesion masks are not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finder: Option<FinderConfig>,
    /// The organ network (version 3 on): when present its masks, on the finder's grid,
    /// replace the diagnoser's for the finder and the decoding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organs: Option<OrgansConfig>,
}

impl TinyConfig {
    /// The configuration a fresh training run starts from.
    #[must_use]
    pub fn initial() -> Self {
        Self {
            model: "keyslice-tiny".into(),
            version: "0".into(),
            // 128 × 3 mm = 384 mm field, fine enough for 1 cm tumors; the diagnoser trains
            // on 64² windows of it so that training fits well under an hour on two CPU cores
            // (about 1.3 s a step). Group normalisation learned more slowly per step and
            // cost a third more time in a 150-step trial, so it is off.
            grid: GridSpec {
                size: 128,
                pixel_mm: 3.0,
                slab_mm: 5.0,
            },
            crop: 48,
            diagnoser_widths: [8, 16, 32, 48],
            verifier_widths: [8, 16, 24, 32],
            windows: vec![[40.0, 400.0], [90.0, 150.0]],
            norm_groups: 0,
            train_crop: 64,
            decode: DecodeRule::default(),
            finder: None,
            organs: None,
        }
    }

    /// Diagnoser input channels: three slabs × windows, plus x, y and height features.
    #[must_use]
    pub fn diagnoser_inputs(&self) -> usize {
        3 * self.windows.len() + 3
    }

    /// Verifier input channels: one slice × windows, plus x, y and height features.
    #[must_use]
    pub fn verifier_inputs(&self) -> usize {
        self.windows.len() + 3
    }
}

/// The two networks with their configuration.
pub struct TinyModel {
    /// Configuration.
    pub config: TinyConfig,
    /// Reads the volume.
    pub diagnoser: SliceNet,
    /// Reads the key-slice crop.
    pub verifier: SliceNet,
    /// Decides tumor presence per organ and slab (version 2 on).
    pub finder: Option<FinderNet>,
    /// The organ network, when the checkpoint has one.
    pub organs: Option<OrganNet>,
    device: Device,
}

impl TinyModel {
    /// The model compiled into the binary.
    pub fn embedded() -> Result<Self, InferError> {
        let error = |detail: String| InferError::Model {
            path: "embedded keyslice-tiny".into(),
            detail,
        };
        let config: TinyConfig =
            serde_json::from_str(EMBEDDED_CONFIG).map_err(|e| error(e.to_string()))?;
        let device = Device::Cpu;
        let tensors = candle_core::safetensors::load_buffer(EMBEDDED_WEIGHTS, &device)
            .map_err(|e| error(candle_message(&e)))?;
        Self::from_tensors(config, tensors, device).map_err(|e| error(candle_message(&e)))
    }

    /// A checkpoint folder (`config.json`, `model.safetensors`).
    pub fn load(folder: &Path) -> Result<Self, InferError> {
        let error = |path: &Path, detail: String| InferError::Model {
            path: path.to_path_buf(),
            detail,
        };
        let config_path = folder.join("config.json");
        let text = std::fs::read_to_string(&config_path)
            .map_err(|e| error(&config_path, e.to_string()))?;
        let config: TinyConfig =
            serde_json::from_str(&text).map_err(|e| error(&config_path, e.to_string()))?;
        if let Some(problem) = config
            .finder
            .as_ref()
            .and_then(FinderConfig::detail_problem)
        {
            return Err(error(&config_path, problem));
        }
        let weights = folder.join("model.safetensors");
        let device = Device::Cpu;
        let tensors = candle_core::safetensors::load(&weights, &device)
            .map_err(|e| error(&weights, candle_message(&e)))?;
        Self::from_tensors(config, tensors, device).map_err(|e| error(&weights, candle_message(&e)))
    }

    pub(crate) fn from_tensors(
        config: TinyConfig,
        tensors: std::collections::HashMap<String, Tensor>,
        device: Device,
    ) -> candle_core::Result<Self> {
        let wants_stem = config
            .finder
            .as_ref()
            .is_some_and(|f| f.detail_factor() >= 2);
        if wants_stem && !tensors.contains_key("finder.stem.conv_a.weight") {
            candle_core::bail!(
                "config.json gives the finder a detail stem (\"detail\") that these weights do \
                 not hold; use the weights it was trained with, or remove \"detail\""
            );
        }
        let vb = VarBuilder::from_tensors(tensors, DType::F32, &device);
        Ok(Self {
            diagnoser: SliceNet::new(
                config.diagnoser_inputs(),
                config.diagnoser_widths,
                config.norm_groups,
                &vb.pp("diagnoser"),
            )?,
            verifier: SliceNet::new(
                config.verifier_inputs(),
                config.verifier_widths,
                config.norm_groups,
                &vb.pp("verifier"),
            )?,
            finder: match &config.finder {
                None => None,
                Some(finder) => {
                    if (finder.grid.slab_mm - config.grid.slab_mm).abs() > 1e-9 {
                        candle_core::bail!(
                            "the finder's slabs ({} mm) must be the diagnoser's ({} mm)",
                            finder.grid.slab_mm,
                            config.grid.slab_mm
                        );
                    }
                    if finder.crop == 0
                        || !finder.crop.is_multiple_of(finder::STRIDE)
                        || finder.crop > finder.grid.size
                    {
                        candle_core::bail!(
                            "the finder's crop ({}) must be a multiple of {} and fit its grid",
                            finder.crop,
                            finder::STRIDE
                        );
                    }
                    if let Some(problem) = finder.detail_problem() {
                        candle_core::bail!("{problem}");
                    }
                    Some(FinderNet::new(
                        FinderConfig::inputs(config.windows.len()),
                        finder,
                        &vb.pp("finder"),
                        NormMode::Infer,
                    )?)
                }
            },
            organs: match &config.organs {
                None => None,
                Some(organs) => {
                    if config
                        .finder
                        .as_ref()
                        .is_some_and(|f| f.grid != organs.grid)
                    {
                        candle_core::bail!("the organ network's grid must be the finder's");
                    }
                    if (organs.grid.slab_mm - config.grid.slab_mm).abs() > 1e-9
                        || !organs.grid.size.is_multiple_of(8)
                    {
                        candle_core::bail!(
                            "the organ network's grid needs the diagnoser's slabs ({} mm) and a size divisible by 8",
                            config.grid.slab_mm
                        );
                    }
                    Some(OrganNet::new(
                        config.diagnoser_inputs(),
                        organs.widths,
                        &vb.pp("organs"),
                        NormMode::Infer,
                    )?)
                }
            },
            config,
            device,
        })
    }

    /// Per-pixel probabilities of every slab of `grid` (sigmoid for masks, softmax for
    /// the class groups). The network runs only on the in-plane box that holds the body in
    /// any slab (plus a margin, rounded to the network's stride of 8): air costs nothing,
    /// and the position planes keep their values, so the result is that of the whole slab
    /// up to the network's border effects. Outside the box every probability is 0.
    pub fn diagnose_grid(&self, grid: &ModelGrid) -> candle_core::Result<Probabilities> {
        self.diagnose_slabs(grid, &vec![true; grid.slabs])
    }

    /// [`Self::diagnose_grid`] on the slabs where `wanted` is true; the others' channels are
    /// left empty (all zeros, as [`Probabilities`] reads an empty channel).
    pub fn diagnose_slabs(
        &self,
        grid: &ModelGrid,
        wanted: &[bool],
    ) -> candle_core::Result<Probabilities> {
        let n = grid.spec.size;
        let plane = n * n;
        let ([column0, row0], [width, height]) = body_box(grid);
        let channels = self.config.diagnoser_inputs();
        let mut values = vec![vec![Vec::new(); OUTPUTS]; grid.slabs];
        let slabs: Vec<usize> = (0..grid.slabs)
            .filter(|&slab| wanted.get(slab).copied().unwrap_or(false))
            .collect();
        for batch in slabs.chunks(16) {
            let mut inputs = Vec::with_capacity(batch.len() * channels * width * height);
            for &slab in batch {
                let full = diagnoser_input(grid, slab, &self.config.windows);
                for channel in 0..channels {
                    for row in row0..row0 + height {
                        let start = channel * plane + row * n + column0;
                        inputs.extend_from_slice(&full[start..start + width]);
                    }
                }
            }
            let x = Tensor::from_vec(inputs, (batch.len(), channels, height, width), &self.device)?;
            let logits = self.diagnoser.forward(&x)?;
            for (&slab, cropped) in batch.iter().zip(probabilities_of(&logits)?) {
                values[slab] = cropped
                    .into_iter()
                    .map(|channel| {
                        let mut whole = vec![0f32; plane];
                        for row in 0..height {
                            let at = (row0 + row) * n + column0;
                            whole[at..at + width]
                                .copy_from_slice(&channel[row * width..(row + 1) * width]);
                        }
                        whole
                    })
                    .collect();
            }
        }
        Ok(Probabilities {
            size: n,
            pixel_mm: grid.spec.pixel_mm,
            slab_mm: grid.spec.slab_mm,
            values,
        })
    }

    /// The finder's answer for every organ and slab of `fine` (the finder's grid) where the
    /// organ's mask covers at least 4 pixels, and those masks on `fine` (`[slab * 4 +
    /// organ][pixel]`). The masks are the organ network's when the model has one, else the
    /// diagnoser's (`coarse`, on the diagnoser's grid). Empty without a finder.
    pub fn find(
        &self,
        fine: &ModelGrid,
        coarse: &Probabilities,
        reading: Reading,
    ) -> candle_core::Result<(Vec<SlabAnswer>, Vec<Vec<bool>>)> {
        if self.finder.is_none() {
            return Ok((Vec::new(), Vec::new()));
        }
        let masks = self.organ_masks(fine, coarse, reading)?;
        Ok((self.answers(fine, &masks)?, masks))
    }

    /// The finder's answer for every organ and slab of `fine` where the organ's mask in
    /// `masks` (`[slab * 4 + organ][pixel]`) covers at least 4 pixels. Empty without a
    /// finder.
    pub fn answers(
        &self,
        fine: &ModelGrid,
        masks: &[Vec<bool>],
    ) -> candle_core::Result<Vec<SlabAnswer>> {
        let (Some(net), Some(config)) = (&self.finder, &self.config.finder) else {
            return Ok(Vec::new());
        };
        let crop = config.crop.min(fine.spec.size);
        let jobs = finder::jobs(masks, fine.spec.size, crop);
        let mut answers = Vec::with_capacity(jobs.len());
        for batch in jobs.chunks(32) {
            let (x, m, detail) =
                finder::batch_inputs(fine, masks, batch, crop, &self.config.windows, &self.device)?;
            let organs: Vec<usize> = batch.iter().map(|job| job.organ).collect();
            let cells =
                finder::organ_cells(&net.forward(&x, detail.as_ref(), false)?, &organs, &m)?
                    .to_vec2::<f32>()?;
            for (job, row) in batch.iter().zip(cells) {
                answers.push(finder::answer(job, &row, crop));
            }
        }
        Ok(answers)
    }

    /// An analysis with a finder: the lesions on `fine` (the finder's grid) and the key slab
    /// (that of the strongest answer kept). With an organ network the diagnoser (on
    /// `coarse`) runs last, and only on the slabs that hold a lesion: from version 3 the
    /// decoding reads nothing of it but location classes on lesion pixels. `lap` marks the
    /// end of each stage (for the debug log).
    fn finder_lesions(
        &self,
        fine: &ModelGrid,
        coarse: &ModelGrid,
        finder: &FinderConfig,
        lap: &mut dyn FnMut(&str),
    ) -> candle_core::Result<(Vec<decode::FoundLesion>, Option<usize>)> {
        let (masks, diagnosed) = if let Some(organs) = &self.organs {
            let masks =
                organs.masks(fine, &self.config.windows, &self.device, Reading::Alternate)?;
            (masks, None)
        } else {
            let probabilities = self.diagnose_grid(coarse)?;
            let masks = self.organ_masks(fine, &probabilities, Reading::Alternate)?;
            (masks, Some(probabilities))
        };
        lap("organ masks");
        let answers = self.answers(fine, &masks)?;
        lap("finder");
        let grown = grown_lesions(fine, &answers, &masks, finder.thresholds);
        let probabilities = if let Some(probabilities) = diagnosed {
            probabilities
        } else {
            let mut wanted = vec![false; coarse.slabs];
            for lesion in &grown {
                wanted[lesion.slab.min(coarse.slabs.saturating_sub(1))] = true;
            }
            self.diagnose_slabs(coarse, &wanted)?
        };
        lap("diagnoser network");
        let decoded = probabilities_with(fine, &probabilities, &grown, &masks);
        let lesions = find_lesions(&decoded, FINDER_RULE);
        let strongest = strongest_slab(&answers, finder.thresholds, &lesions);
        Ok((lesions, strongest))
    }

    /// The organ masks on `fine` (`[slab * 4 + organ][pixel]`) the finder works in: the organ
    /// network's when the model has one, else the diagnoser's (`coarse`). Empty without a
    /// finder.
    pub fn organ_masks(
        &self,
        fine: &ModelGrid,
        coarse: &Probabilities,
        reading: Reading,
    ) -> candle_core::Result<Vec<Vec<bool>>> {
        let Some(config) = &self.config.finder else {
            return Ok(Vec::new());
        };
        match &self.organs {
            Some(organs) => organs.masks(fine, &self.config.windows, &self.device, reading),
            None => Ok(organ_masks_on(fine, coarse, config.mask_thresholds)),
        }
    }

    /// Per-pixel probabilities (`[channel][pixel]`) of the verifier on one crop, as made by
    /// [`verifier_input`].
    pub fn verify_crop(&self, crop: &[f32]) -> candle_core::Result<Vec<Vec<f32>>> {
        let c = self.config.crop;
        let x = Tensor::from_vec(
            crop.to_vec(),
            (1, self.config.verifier_inputs(), c, c),
            &self.device,
        )?;
        let logits = self.verifier.forward(&x)?;
        Ok(probabilities_of(&logits)?.remove(0))
    }
}

/// `[batch, OUTPUTS, h, w]` logits → `[batch][channel][pixel]` probabilities.
fn probabilities_of(logits: &Tensor) -> candle_core::Result<Vec<Vec<Vec<f32>>>> {
    let (batch, _, height, width) = logits.dims4()?;
    let masks = candle_nn::ops::sigmoid(&logits.narrow(1, 0, net::ATTENUATION.start)?)?;
    let attenuation = candle_nn::ops::softmax(
        &logits.narrow(1, net::ATTENUATION.start, net::ATTENUATION.len())?,
        1,
    )?;
    let location = candle_nn::ops::softmax(
        &logits.narrow(1, net::LOCATION.start, net::LOCATION.len())?,
        1,
    )?;
    let all = Tensor::cat(&[&masks, &attenuation, &location], 1)?.reshape((
        batch,
        OUTPUTS,
        height * width,
    ))?;
    all.to_vec3::<f32>()
}

/// The model pixel of `coarse` (a grid of `coarse_size` pixels of `coarse_mm`) nearest the
/// centre of pixel `index` of a grid of `fine_size` pixels of `fine_mm`, both centred on the
/// scan.
fn coarse_index(
    index: usize,
    fine_size: usize,
    fine_mm: f64,
    coarse_size: usize,
    coarse_mm: f64,
) -> usize {
    let mm = (index as f64 - (fine_size as f64 - 1.0) / 2.0) * fine_mm;
    (mm / coarse_mm + (coarse_size as f64 - 1.0) / 2.0)
        .round()
        .clamp(0.0, (coarse_size - 1) as f64) as usize
}

/// The diagnoser's organ masks (probability ≥ the organ's threshold) resampled (nearest)
/// onto `fine`: `[slab * 4 + organ][pixel]`.
fn organ_masks_on(
    fine: &ModelGrid,
    coarse: &Probabilities,
    thresholds: [f32; 4],
) -> Vec<Vec<bool>> {
    let n = fine.spec.size;
    let lookup: Vec<usize> = (0..n)
        .map(|i| coarse_index(i, n, fine.spec.pixel_mm, coarse.size, coarse.pixel_mm))
        .collect();
    let mut masks = Vec::with_capacity(fine.slabs * 4);
    for slab in 0..fine.slabs {
        let values = &coarse.values[slab.min(coarse.values.len().saturating_sub(1))];
        for organ in 0..4 {
            let channel = &values[net::ORGAN.start + organ];
            masks.push(
                (0..n * n)
                    .map(|pixel| {
                        channel[lookup[pixel / n] * coarse.size + lookup[pixel % n]]
                            >= thresholds[organ]
                    })
                    .collect(),
            );
        }
    }
    masks
}

/// A lesion grown on the finder's grid from one answer: its slab, organ, pixels and
/// attenuation class (0 hypo, 1 iso, 2 hyper).
struct GrownLesion {
    slab: usize,
    organ: usize,
    pixels: Vec<usize>,
    attenuation: usize,
}

/// The lesion pixels grown from each answer at or above its organ's threshold (none where
/// they touch bone, above 400 HU), with the attenuation their contrast shows (within 12 HU
/// of the organ: iso).
fn grown_lesions(
    fine: &ModelGrid,
    answers: &[SlabAnswer],
    masks: &[Vec<bool>],
    thresholds: [f32; 4],
) -> Vec<GrownLesion> {
    let plane = fine.spec.size * fine.spec.size;
    let mut positive = [false; 4];
    let mut called = vec![false; fine.slabs * 4];
    for answer in answers {
        let tumor = answer.probability >= thresholds[answer.organ];
        positive[answer.organ] |= tumor;
        called[answer.slab * 4 + answer.organ] = tumor;
    }
    let references = organ_references(fine, masks, positive, &called);
    let mut grown = Vec::new();
    for answer in answers {
        if answer.probability < thresholds[answer.organ] {
            continue;
        }
        let (pixels, contrast) = finder::grow_lesion(
            fine,
            &masks[answer.slab * 4 + answer.organ],
            answer,
            references[answer.slab * 4 + answer.organ],
        );
        // No tumor of these organs reaches 400 HU; a region that does lies on bone (an organ
        // mask that strays onto the spine or ribs).
        let plane_hu = &fine.hu[answer.slab * plane..(answer.slab + 1) * plane];
        if pixels.iter().any(|&pixel| plane_hu[pixel] > 400.0) {
            continue;
        }
        let attenuation = if contrast <= -12.0 {
            0
        } else if contrast >= 12.0 {
            2
        } else {
            1
        };
        grown.push(GrownLesion {
            slab: answer.slab,
            organ: answer.organ,
            pixels,
            attenuation,
        });
    }
    grown
}

/// Interior pixels the broad slabs without a tumor call must hold to give an organ's
/// reference alone (a kidney's interior on one 5 mm slab is about 100 pixels of 3 mm).
const MIN_REFERENCE_PIXELS: usize = 30;

/// Per slab and organ (`[slab * 4 + organ]`), the organ's HU across the scan: the median of
/// its interior pixels (all eight neighbours in the mask) on its broad slabs, for every slab
/// at least half as broad as those. The broad slabs are those where the finder called no
/// tumor (`called[slab * 4 + organ]` false or absent) and the mask covers at least half of
/// their largest section; when they hold fewer than [`MIN_REFERENCE_PIXELS`] or that section
/// is under a third of the organ's largest (only tips are clear), all slabs showing at least
/// half of the organ's largest section. `None` on smaller sections (an organ's tip, darker by
/// partial volume along the scan, keeps its own slab's median; see [`finder::grow_lesion`])
/// and for the organs `wanted` leaves out (only organs with a lesion to grow need it).
///
/// A large tumor swells the organ's mask and can fill most of it on every slab it crosses:
/// a 4.7 cm hyperattenuating kidney tumor was the median of the kidney's interior there,
/// showed no contrast, and the cortex and medulla around it grew as "hypoattenuating
/// lesions".
#[must_use]
pub fn organ_references(
    fine: &ModelGrid,
    masks: &[Vec<bool>],
    wanted: [bool; 4],
    called: &[bool],
) -> Vec<Option<f32>> {
    let n = fine.spec.size;
    let plane = n * n;
    let mut references = vec![None; fine.slabs * 4];
    for organ in (0..4).filter(|&organ| wanted[organ]) {
        let areas: Vec<usize> = (0..fine.slabs)
            .map(|slab| {
                masks
                    .get(slab * 4 + organ)
                    .map_or(0, |m| m.iter().filter(|&&on| on).count())
            })
            .collect();
        let interior = |slabs: &[usize]| {
            let mut values = Vec::new();
            for &slab in slabs {
                let mask = &masks[slab * 4 + organ];
                let hu = &fine.hu[slab * plane..(slab + 1) * plane];
                values.extend(
                    (0..plane)
                        .filter(|&pixel| mask[pixel] && finder::surrounded(pixel, n, mask))
                        .map(|pixel| hu[pixel]),
                );
            }
            values
        };
        // The slabs `keep` accepts that are at least half as broad as the broadest of them.
        let broad_among = |keep: &dyn Fn(usize) -> bool| {
            let slabs: Vec<usize> = (0..fine.slabs)
                .filter(|&slab| areas[slab] > 0 && keep(slab))
                .collect();
            let largest = slabs.iter().map(|&slab| areas[slab]).max().unwrap_or(0);
            let broad: Vec<usize> = slabs
                .into_iter()
                .filter(|&slab| areas[slab] * 2 >= largest)
                .collect();
            (broad, largest)
        };
        let (broad, largest) = broad_among(&|_| true);
        if largest == 0 {
            continue;
        }
        // A tumor also swells the organ's mask: the slabs without one are measured against
        // their own broadest section, if that is not a mere tip.
        let called_at = |slab: usize| called.get(slab * 4 + organ).copied().unwrap_or(false);
        let (clear, clear_largest) = broad_among(&|slab| !called_at(slab));
        let mut values = if clear_largest * 3 >= largest {
            interior(&clear)
        } else {
            Vec::new()
        };
        let broad = if values.len() >= MIN_REFERENCE_PIXELS {
            // Every slab as broad as those, the swollen ones with the tumor included.
            (0..fine.slabs)
                .filter(|&slab| areas[slab] > 0 && areas[slab] * 2 >= clear_largest)
                .collect()
        } else {
            values = interior(&broad);
            broad
        };
        if values.is_empty() {
            continue;
        }
        let middle = values.len() / 2;
        let median = *values.select_nth_unstable_by(middle, f32::total_cmp).1;
        for &slab in &broad {
            references[slab * 4 + organ] = Some(median);
        }
    }
    references
}

/// Probabilities on the finder's grid for the decoding ([`find_lesions`]): organ masks and
/// location classes from the diagnoser (resampled), and the lesions [`grown_lesions`] grows
/// from the finder's answers.
fn finder_probabilities(
    fine: &ModelGrid,
    coarse: &Probabilities,
    answers: &[SlabAnswer],
    masks: &[Vec<bool>],
    thresholds: [f32; 4],
) -> Probabilities {
    let grown = grown_lesions(fine, answers, masks, thresholds);
    probabilities_with(fine, coarse, &grown, masks)
}

/// [`finder_probabilities`] with the lesions already grown. On slabs without a lesion only
/// the organ channels are filled, the others left empty (all zeros): the decoding reads
/// lesion, attenuation and location channels only on lesion pixels.
fn probabilities_with(
    fine: &ModelGrid,
    coarse: &Probabilities,
    grown: &[GrownLesion],
    masks: &[Vec<bool>],
) -> Probabilities {
    let n = fine.spec.size;
    let plane = n * n;
    let lookup: Vec<usize> = (0..n)
        .map(|i| coarse_index(i, n, fine.spec.pixel_mm, coarse.size, coarse.pixel_mm))
        .collect();
    let mut with_lesion = vec![false; fine.slabs];
    for lesion in grown {
        with_lesion[lesion.slab] = true;
    }
    let mut values: Vec<Vec<Vec<f32>>> = (0..fine.slabs)
        .map(|slab| {
            let source = &coarse.values[slab.min(coarse.values.len().saturating_sub(1))];
            (0..OUTPUTS)
                .map(|channel| {
                    if net::ORGAN.contains(&channel) {
                        masks[slab * 4 + channel - net::ORGAN.start]
                            .iter()
                            .map(|&on| if on { 1.0 } else { 0.0 })
                            .collect()
                    } else if !with_lesion[slab] {
                        // All zeros: nothing of a slab without a lesion but its organs is read.
                        Vec::new()
                    } else if net::LOCATION.contains(&channel) {
                        // An empty channel (a slab the diagnoser did not read) is all zeros.
                        let channel = &source[channel];
                        (0..plane)
                            .map(|pixel| {
                                let at = lookup[pixel / n] * coarse.size + lookup[pixel % n];
                                channel.get(at).copied().unwrap_or(0.0)
                            })
                            .collect()
                    } else {
                        vec![0.0; plane]
                    }
                })
                .collect()
        })
        .collect();
    mask_locations(masks, n, &mut values);
    for lesion in grown {
        let slab = &mut values[lesion.slab];
        for &pixel in &lesion.pixels {
            slab[net::LESION.start + lesion.organ][pixel] = 1.0;
            slab[net::ATTENUATION.start + lesion.attenuation][pixel] = 1.0;
        }
    }
    Probabilities {
        size: n,
        pixel_mm: fine.spec.pixel_mm,
        slab_mm: fine.spec.slab_mm,
        values,
    }
}

/// Location classes that follow from the organ masks (`[slab * 4 + organ][pixel]`), as
/// reports define them, written one-hot into the location channels of `values` on each
/// organ's pixels: kidney poles are the upper, middle and lower thirds of the kidney's height
/// (when it spans at least 3 slabs); the pancreas head, body and tail lie along the gland from
/// the patient's right (head: the first 30 % of its width) to the left (tail: from 65 %), when
/// it spans at least 5 columns. Liver segments (see [`liver_segment`])
/// follow the liver's width and its right and left parts' middles. Elsewhere the diagnoser's
/// location channels stay.
fn mask_locations(masks: &[Vec<bool>], n: usize, values: &mut [Vec<Vec<f32>>]) {
    let slabs = values.len();
    let mut write = |slab: usize, pixel: usize, classes: std::ops::Range<usize>, class: usize| {
        for channel in classes.clone() {
            // Slabs without a lesion have empty location channels: nothing reads them.
            if let Some(value) = values[slab][net::LOCATION.start + channel].get_mut(pixel) {
                *value = if channel == class { 1.0 } else { 0.0 };
            }
        }
    };
    let pixels = |slab: usize, organ: usize| {
        masks[slab * 4 + organ]
            .iter()
            .enumerate()
            .filter(|(_, on)| **on)
            .map(|(pixel, _)| pixel)
    };
    // Pancreas: organ 1, classes 7 (head), 8 (body), 9 (tail); the patient's right is the
    // grid's low columns.
    let columns = (0..slabs)
        .flat_map(|slab| pixels(slab, 1).map(|pixel| pixel % n))
        .fold(None, |range: Option<(usize, usize)>, column| {
            Some(range.map_or((column, column), |(lo, hi)| {
                (lo.min(column), hi.max(column))
            }))
        });
    if let Some((lo, hi)) = columns
        && hi - lo + 1 >= 5
    {
        for slab in 0..slabs {
            let on: Vec<usize> = pixels(slab, 1).collect();
            for pixel in on {
                let position = (pixel % n - lo) as f64 / (hi - lo) as f64;
                let class = if position < 0.3 {
                    7
                } else if position < 0.65 {
                    8
                } else {
                    9
                };
                write(slab, pixel, 7..10, class);
            }
        }
    }
    // Liver: organ 0, classes 0–6 (segments 2–8).
    if let Some(parts) = LiverParts::of(masks, n, slabs) {
        for slab in 0..slabs {
            let on: Vec<usize> = pixels(slab, 0).collect();
            for pixel in on {
                let segment = parts.segment(slab, pixel % n, pixel / n);
                write(slab, pixel, 0..7, usize::from(segment) - 2);
            }
        }
    }
    // Kidneys: organs 2 and 3, classes 10 (upper), 11 (mid), 12 (lower); higher slabs lie
    // higher in the patient.
    for organ in [2, 3] {
        let shown: Vec<usize> = (0..slabs)
            .filter(|&slab| pixels(slab, organ).nth(3).is_some())
            .collect();
        let (Some(&lo), Some(&hi)) = (shown.first(), shown.last()) else {
            continue;
        };
        if hi - lo + 1 < 3 {
            continue;
        }
        let centre = (lo + hi) as f64 / 2.0;
        let half = (hi - lo + 1) as f64 / 2.0;
        for slab in lo..=hi {
            let height = (slab as f64 - centre) / half;
            let class = if height > 1.0 / 3.0 {
                10
            } else if height < -1.0 / 3.0 {
                12
            } else {
                11
            };
            let on: Vec<usize> = pixels(slab, organ).collect();
            for pixel in on {
                write(slab, pixel, 10..13, class);
            }
        }
    }
}

/// Share of the liver's width, from the patient's right, where segment IV begins (the
/// gallbladder fossa, Cantlie's line) and where the left lateral segments II and III begin
/// (the falciform ligament). Chosen on the true liver masks of the seed-13 calibration
/// phantoms (a liver segment right for 63 of their 67 single liver tumors, 94 %; 120 of
/// the 125 in the first 400 training phantoms), not on the held-out ones.
const CANTLIE_SHARE: f64 = 0.525;
const FALCIFORM_SHARE: f64 = 0.7;

/// What the liver's segments are read from: its width in columns, and the middles of its
/// right part (segments V–VIII, split by the middle's slab and row) and of its left lateral
/// part (II above the middle's slab, III below).
struct LiverParts {
    lo: usize,
    hi: usize,
    right_slab: f64,
    right_row: f64,
    left_slab: f64,
}

impl LiverParts {
    /// From the liver masks (`[slab * 4][pixel]`); `None` when the liver spans fewer than 5
    /// columns or either part is empty.
    fn of(masks: &[Vec<bool>], n: usize, slabs: usize) -> Option<Self> {
        let on = || {
            (0..slabs).flat_map(move |slab| {
                masks[slab * 4]
                    .iter()
                    .enumerate()
                    .filter(|(_, on)| **on)
                    .map(move |(pixel, _)| (slab, pixel % n, pixel / n))
            })
        };
        let lo = on().map(|(_, column, _)| column).min()?;
        let hi = on().map(|(_, column, _)| column).max()?;
        if hi - lo + 1 < 5 {
            return None;
        }
        let share = |column: usize| (column - lo) as f64 / (hi - lo) as f64;
        let (mut right, mut left) = ([0.0f64; 3], [0.0f64; 2]);
        for (slab, column, row) in on() {
            if share(column) < CANTLIE_SHARE {
                right[0] += slab as f64;
                right[1] += row as f64;
                right[2] += 1.0;
            } else if share(column) >= FALCIFORM_SHARE {
                left[0] += slab as f64;
                left[1] += 1.0;
            }
        }
        (right[2] > 0.0 && left[1] > 0.0).then(|| Self {
            lo,
            hi,
            right_slab: right[0] / right[2],
            right_row: right[1] / right[2],
            left_slab: left[0] / left[1],
        })
    }

    /// The segment (2–8) of the liver pixel at `column`, `row` on `slab` (higher slabs lie
    /// higher in the patient, higher rows further back).
    fn segment(&self, slab: usize, column: usize, row: usize) -> u8 {
        liver_segment(
            (column.clamp(self.lo, self.hi) - self.lo) as f64 / (self.hi - self.lo) as f64,
            slab as f64 >= self.right_slab,
            (row as f64) < self.right_row,
            slab as f64 >= self.left_slab,
        )
    }
}

/// Couinaud segment from a point's share of the liver's width from the patient's right and
/// where it lies against the middle of the right part (`superior`, `anterior`) and of the
/// left lateral part (`above_left`): II/III left of the falciform ligament, IV between it and
/// Cantlie's line, V–VIII to the right (VIII anterior superior, V anterior inferior, VII
/// posterior superior, VI posterior inferior).
fn liver_segment(share: f64, superior: bool, anterior: bool, above_left: bool) -> u8 {
    if share >= FALCIFORM_SHARE {
        if above_left { 2 } else { 3 }
    } else if share >= CANTLIE_SHARE {
        4
    } else {
        match (anterior, superior) {
            (true, true) => 8,
            (true, false) => 5,
            (false, true) => 7,
            (false, false) => 6,
        }
    }
}

/// The in-plane box (corner, size as columns × rows) holding every pixel above −500 HU in
/// any slab, with a 4-pixel margin, sides rounded up to multiples of 8 and kept inside the
/// grid; the whole grid when nothing is above −500 HU.
fn body_box(grid: &ModelGrid) -> ([usize; 2], [usize; 2]) {
    let n = grid.spec.size;
    let plane = n * n;
    let (mut low, mut high) = ([n, n], [0usize, 0usize]);
    for (at, &hu) in grid.hu.iter().enumerate() {
        if hu > -500.0 {
            let pixel = at % plane;
            let (column, row) = (pixel % n, pixel / n);
            low = [low[0].min(column), low[1].min(row)];
            high = [high[0].max(column), high[1].max(row)];
        }
    }
    if low[0] > high[0] || !n.is_multiple_of(8) {
        return ([0, 0], [n, n]);
    }
    let side = |axis: usize| -> (usize, usize) {
        let first = low[axis].saturating_sub(4);
        let last = (high[axis] + 4).min(n - 1);
        let length = (last - first + 1).div_ceil(8) * 8;
        let length = length.min(n);
        (first.min(n - length), length)
    };
    let ((column0, width), (row0, height)) = (side(0), side(1));
    ([column0, row0], [width, height])
}

/// Window `hu` to 0–1.
fn window(hu: f32, [centre, width]: [f32; 2]) -> f32 {
    ((hu - (centre - width / 2.0)) / width).clamp(0.0, 1.0)
}

/// The diagnoser's input for `slab`: the slab below, the slab, the slab above, in each
/// window, then x, y and height features; channel-major.
#[must_use]
pub fn diagnoser_input(grid: &ModelGrid, slab: usize, windows: &[[f32; 2]]) -> Vec<f32> {
    let n = grid.spec.size;
    let plane = n * n;
    let mut input = Vec::with_capacity((3 * windows.len() + 3) * plane);
    for offset in [-1isize, 0, 1] {
        let s = (slab as isize + offset).clamp(0, grid.slabs as isize - 1) as usize;
        let values = &grid.hu[s * plane..(s + 1) * plane];
        for &w in windows {
            input.extend(values.iter().map(|&hu| window(hu, w)));
        }
    }
    position_channels(grid, grid.height_feature(slab), 0, 0, n, &mut input);
    input
}

/// x, y and height feature planes for a `side`² window starting at model pixel
/// (`column0`, `row0`).
fn position_channels(
    grid: &ModelGrid,
    height: f32,
    column0: isize,
    row0: isize,
    side: usize,
    input: &mut Vec<f32>,
) {
    let n = grid.spec.size as isize;
    let feature = |column: isize, row: isize| {
        // Outside the grid the features continue linearly.
        let half = (n as f64 - 1.0) / 2.0;
        let scale = 200.0 / grid.spec.pixel_mm;
        (
            ((column as f64 - half) / scale) as f32,
            ((row as f64 - half) / scale) as f32,
        )
    };
    for axis in 0..2 {
        for row in 0..side as isize {
            for column in 0..side as isize {
                let (x, y) = feature(column0 + column, row0 + row);
                input.push(if axis == 0 { x } else { y });
            }
        }
    }
    input.extend(std::iter::repeat_n(height, side * side));
}

/// The verifier's input: a `crop`² window of slab `slab` centred on model pixel `centre`
/// (air outside the grid), then in-plane position features and a zero height plane (the
/// verifier sees one slice and is not told where it lies); and the window's top-left corner.
#[must_use]
pub fn verifier_input(
    grid: &ModelGrid,
    slab: usize,
    centre: (usize, usize),
    crop: usize,
    windows: &[[f32; 2]],
) -> (Vec<f32>, (isize, isize)) {
    let n = grid.spec.size as isize;
    let plane = grid.spec.size * grid.spec.size;
    let column0 = centre.0 as isize - crop as isize / 2;
    let row0 = centre.1 as isize - crop as isize / 2;
    let values = &grid.hu[slab * plane..(slab + 1) * plane];
    let mut input = Vec::with_capacity((windows.len() + 3) * crop * crop);
    for &w in windows {
        for row in row0..row0 + crop as isize {
            for column in column0..column0 + crop as isize {
                let hu = if (0..n).contains(&row) && (0..n).contains(&column) {
                    values[(column + n * row) as usize]
                } else {
                    -1000.0
                };
                input.push(window(hu, w));
            }
        }
    }
    position_channels(grid, 0.0, column0, row0, crop, &mut input);
    (input, (column0, row0))
}

/// The embedded model as a [`Diagnoser`].
pub struct TinyDiagnoser<'a>(pub &'a TinyModel);

impl Diagnoser for TinyDiagnoser<'_> {
    fn model_id(&self) -> ModelId {
        ModelId {
            id: self.0.config.model.clone(),
            version: self.0.config.version.clone(),
        }
    }

    fn diagnose(&self, volume: &Volume) -> Result<Diagnosis, InferError> {
        let model = self.0;
        let run_error = |error: candle_core::Error| InferError::Run {
            model: model.config.model.clone(),
            detail: candle_message(&error),
        };
        if volume.dims().contains(&0) {
            return Err(InferError::Volume("it has no voxels".into()));
        }
        // Stage times go to the debug log (`KEYSLICE_LOG=debug`): what `benches/analyze.rs`
        // measures as a whole, split.
        let mut clock = std::time::Instant::now();
        let mut lap = |stage: &str| {
            tracing::debug!(
                stage,
                ms = clock.elapsed().as_secs_f64() * 1e3,
                "diagnoser stage"
            );
            clock = std::time::Instant::now();
        };
        // With a finder the CT is read once onto its finer grid and the diagnoser's grid is
        // pooled from it (when it is the same field in larger pixels).
        let fine = model.config.finder.as_ref().map(|finder| {
            ModelGrid::from_volume(volume, finder.grid).with_detail(volume, finder.detail_factor())
        });
        let coarse = fine
            .as_ref()
            .and_then(|fine| fine.pooled(model.config.grid))
            .unwrap_or_else(|| ModelGrid::from_volume(volume, model.config.grid));
        lap("grid");
        // With a finder, the decoding reads its grid; without, the diagnoser's lesion masks.
        let (grid, lesions, strongest) =
            if let (Some(finder), Some(fine)) = (&model.config.finder, fine) {
                let (lesions, strongest) = model
                    .finder_lesions(&fine, &coarse, finder, &mut lap)
                    .map_err(run_error)?;
                (fine, lesions, strongest)
            } else {
                let probabilities = model.diagnose_grid(&coarse).map_err(run_error)?;
                lap("diagnoser network");
                let lesions = find_lesions(&probabilities, model.config.decode);
                (coarse, lesions, None)
            };
        lap("decoding");
        let mut findings = findings_of(&lesions);
        let key = strongest.or_else(|| key_slab(&lesions, grid.slabs));
        let mut slice_box = None;
        let mut key_slice = None;
        if let Some(slab) = key {
            let index = grid.centre_slice[slab];
            key_slice = Some(index);
            slice_box = slab_box(&lesions, slab, grid.spec.size)
                .map(|bounds| ct_box(volume, &grid, bounds, index));
        }
        findings.key_slice = key_slice.map(|index| crate::findings::KeySlice {
            index,
            z_mm: Some(
                (volume
                    .patient_from_voxel()
                    .apply([0.0, 0.0, f64::from(index)])[2]
                    * 100.0)
                    .round()
                    / 100.0,
            ),
            sop_instance_uid: None,
            span: None,
        });
        findings.slice_box.clone_from(&slice_box);
        Ok(Diagnosis {
            report: write_report(&findings),
            key_slice,
            slice_box,
            warnings: Vec::new(),
        })
    }
}

/// Answers whose probabilities differ by less than this are equally strong for the key
/// slab. A large tumor saturates the finder on every slab it crosses (0.99991 against
/// 0.99996), and the exact value then picked the slab, often the tumor's edge: with
/// probabilities compared to the hundredth the slab with the larger lesion section wins,
/// and on the 200 held-out phantoms the key slice lies 3.8 slices from the largest section
/// instead of 4.5 (consistency 0.77 instead of 0.75; the hit rate within one case).
const KEY_PROBABILITY_STEP: f32 = 0.01;

/// The key slab with a finder: that of the strongest answer at or above its organ's
/// threshold whose lesion was kept (the mode of the policy the RL stage trains), if any;
/// among answers equally strong to [`KEY_PROBABILITY_STEP`], the one with more lesion voxels
/// on its slab.
fn strongest_slab(
    answers: &[SlabAnswer],
    thresholds: [f32; 4],
    lesions: &[decode::FoundLesion],
) -> Option<usize> {
    let voxels = |answer: &SlabAnswer| {
        lesions
            .iter()
            .filter(|found| found.organ as usize == answer.organ)
            .map(|found| {
                found
                    .voxels
                    .iter()
                    .filter(|(slab, _)| *slab == answer.slab)
                    .count()
            })
            .sum::<usize>()
    };
    answers
        .iter()
        .filter(|answer| answer.probability >= thresholds[answer.organ])
        .map(|answer| (answer, voxels(answer)))
        .filter(|(_, count)| *count > 0)
        .max_by(|a, b| {
            let level = |answer: &SlabAnswer| (answer.probability / KEY_PROBABILITY_STEP).round();
            level(a.0).total_cmp(&level(b.0)).then(a.1.cmp(&b.1))
        })
        .map(|(answer, _)| answer.slab)
}

/// A model-pixel box on the key slice as CT voxels (outer edges of the model pixels) and mm.
fn ct_box(volume: &Volume, grid: &ModelGrid, [c0, r0, c1, r1]: [usize; 4], index: u32) -> SliceBox {
    let [nx, ny, _] = volume.dims();
    let half = [
        grid.spec.pixel_mm / 2.0 / grid.ct_spacing_mm[0],
        grid.spec.pixel_mm / 2.0 / grid.ct_spacing_mm[1],
    ];
    let (low_i, low_j) = grid.ct_pixel(c0, r0);
    let (high_i, high_j) = grid.ct_pixel(c1, r1);
    let clamp = |value: f64, size: usize| value.round().clamp(0.0, (size - 1) as f64);
    let voxels = [
        clamp(low_i - half[0], nx),
        clamp(low_j - half[1], ny),
        clamp(high_i + half[0], nx),
        clamp(high_j + half[1], ny),
    ];
    let corner = |i: f64, j: f64| volume.patient_from_voxel().apply([i, j, f64::from(index)]);
    let (low, high) = (corner(voxels[0], voxels[1]), corner(voxels[2], voxels[3]));
    let round = |value: f64| (value * 100.0).round() / 100.0;
    SliceBox {
        voxels: voxels.map(|value| value as u32),
        mm: Some([round(low[0]), round(low[1]), round(high[0]), round(high[1])]),
    }
}

/// The embedded model as a [`Verifier`].
pub struct TinyVerifier<'a>(pub &'a TinyModel);

impl Verifier for TinyVerifier<'_> {
    fn model_id(&self) -> ModelId {
        ModelId {
            id: format!("{}-verifier", self.0.config.model),
            version: self.0.config.version.clone(),
        }
    }

    fn describe(&self, slice: &KeySliceImage) -> Result<String, InferError> {
        let model = self.0;
        let run_error = |error: candle_core::Error| InferError::Run {
            model: format!("{}-verifier", model.config.model),
            detail: candle_message(&error),
        };
        // The slice alone, as a one-slab volume on the model grid.
        let volume = slice_volume(slice).map_err(InferError::Volume)?;
        if let Some(finder) = &model.config.finder {
            let local = read_slice_with_finder(model, finder, &volume, slice.from_top_mm)
                .map_err(run_error)?;
            return Ok(write_local_description(slice.index, &local));
        }
        // The one-slice volume is 1 mm thick: a 1 mm slab holds exactly that slice.
        let spec = GridSpec {
            slab_mm: 1.0,
            ..model.config.grid
        };
        let grid = ModelGrid::from_volume(&volume, spec);
        let n = grid.spec.size;
        let centre = slice.slice_box.as_ref().map_or((n / 2, n / 2), |b| {
            model_pixel_of(
                &grid,
                f64::midpoint(f64::from(b.voxels[0]), f64::from(b.voxels[2])),
                f64::midpoint(f64::from(b.voxels[1]), f64::from(b.voxels[3])),
            )
        });
        let (input, _) = verifier_input(&grid, 0, centre, model.config.crop, &model.config.windows);
        let values = model.verify_crop(&input).map_err(run_error)?;
        let probabilities = Probabilities {
            size: model.config.crop,
            pixel_mm: grid.spec.pixel_mm,
            slab_mm: grid.spec.slab_mm,
            values: vec![values],
        };
        let lesions = find_lesions(&probabilities, model.config.decode);
        let mut local: Findings = findings_of(&lesions);
        // Organs neither shown with a lesion nor visible in the crop are not mentioned.
        let visible = visible_organs(&probabilities.values[0], 20);
        for organ in crate::findings::Organ::ALL {
            let entry = local.organ_mut(organ);
            if entry.tumor == TumorPresence::No && !visible.contains(&organ) {
                entry.tumor = TumorPresence::NotMentioned;
            }
        }
        Ok(write_local_description(slice.index, &local))
    }
}

/// The finder's reading of one slice alone (`volume` holds just that slice, `from_top_mm`
/// below the top of its scan): the organ masks on it, then the finder per organ,
/// decoded as for a volume. Organs the slice does not show are not mentioned.
fn read_slice_with_finder(
    model: &TinyModel,
    finder: &FinderConfig,
    volume: &Volume,
    from_top_mm: f64,
) -> candle_core::Result<Findings> {
    // The one-slice volume is 1 mm thick: a 1 mm slab holds exactly that slice.
    let slab = |grid: GridSpec| {
        let mut one = ModelGrid::from_volume(
            volume,
            GridSpec {
                slab_mm: 1.0,
                ..grid
            },
        );
        one.above_mm = from_top_mm;
        one
    };
    let coarse = slab(model.config.grid);
    let probabilities = model.diagnose_grid(&coarse)?;
    let fine = slab(finder.grid).with_detail(volume, finder.detail_factor());
    let (answers, masks) = model.find(&fine, &probabilities, Reading::Alternate)?;
    let decoded = finder_probabilities(&fine, &probabilities, &answers, &masks, finder.thresholds);
    let mut local = findings_of(&find_lesions(&decoded, FINDER_RULE));
    // One slice shows which side of the falciform ligament and of Cantlie's line a liver
    // lesion lies and whether it is anterior or posterior, not whether it lies above or below
    // the right part's middle (the whole liver's business): the segment pair it can name.
    for lesion in &mut local.organ_mut(crate::findings::Organ::Liver).lesions {
        if let Some(crate::findings::Location::LiverSegments(segments)) = &mut lesion.location {
            *segments = one_slice_segments(segments);
        }
    }
    let visible = visible_organs(&decoded.values[0], 4);
    for organ in crate::findings::Organ::ALL {
        let entry = local.organ_mut(organ);
        if entry.tumor == TumorPresence::No && !visible.contains(&organ) {
            entry.tumor = TumorPresence::NotMentioned;
        }
    }
    Ok(local)
}

/// The liver segments one slice can tell apart from `segments`: II/III, IV, V/VIII, VI/VII.
fn one_slice_segments(segments: &[u8]) -> Vec<u8> {
    let mut pairs: Vec<u8> = segments
        .iter()
        .flat_map(|&segment| match segment {
            2 | 3 => vec![2, 3],
            5 | 8 => vec![5, 8],
            6 | 7 => vec![6, 7],
            other => vec![other],
        })
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    pairs
}

/// The model pixel nearest CT pixel (`i`, `j`).
fn model_pixel_of(grid: &ModelGrid, i: f64, j: f64) -> (usize, usize) {
    let n = grid.spec.size;
    let half_model = (n as f64 - 1.0) / 2.0;
    let x_mm = (i - (grid.ct_dims[0] as f64 - 1.0) / 2.0) * grid.ct_spacing_mm[0];
    let y_mm = (j - (grid.ct_dims[1] as f64 - 1.0) / 2.0) * grid.ct_spacing_mm[1];
    let to_pixel = |mm: f64| {
        ((mm / grid.spec.pixel_mm + half_model)
            .round()
            .clamp(0.0, (n - 1) as f64)) as usize
    };
    (to_pixel(x_mm), to_pixel(y_mm))
}

/// A one-slice volume from a key-slice image (what the verifier's grid sampling reads).
fn slice_volume(slice: &KeySliceImage) -> Result<Volume, String> {
    use crate::volume::{Affine, VolumeInfo, Voxels};
    let affine = Affine::from_axes(
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
        [slice.spacing_mm[0], slice.spacing_mm[1], 1.0],
        slice.origin_mm,
    );
    Volume::new(
        [slice.dims[0], slice.dims[1], 1],
        affine,
        Voxels::F32(slice.hu.clone()),
        Vec::new(),
        VolumeInfo::default(),
    )
    .map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detail_setting_the_weights_or_the_range_do_not_allow_is_named_at_load() {
        let device = Device::Cpu;
        let mut config: TinyConfig = serde_json::from_str(EMBEDDED_CONFIG).unwrap();
        let finder = config.finder.as_mut().unwrap();
        let tensors = || candle_core::safetensors::load_buffer(EMBEDDED_WEIGHTS, &device).unwrap();
        // The shipped weights hold no detail stem.
        finder.detail = Some(finder::FinderDetail {
            factor: 2,
            width: 8,
        });
        let Err(missing) = TinyModel::from_tensors(config.clone(), tensors(), device.clone())
        else {
            panic!("weights without a stem loaded for a finder with detail");
        };
        assert!(missing.to_string().contains("detail stem"), "{missing}");
        // Factors outside 2–4 and stems without channels are refused before any weight.
        for (factor, width) in [(1, 8), (5, 8), (2, 0)] {
            let finder = config.finder.as_mut().unwrap();
            finder.detail = Some(finder::FinderDetail { factor, width });
            let problem = finder.detail_problem().expect("a problem");
            assert!(
                problem.contains(&format!("factor {factor} and width {width}")),
                "{problem}"
            );
        }
        config.finder.as_mut().unwrap().detail = None;
        assert!(config.finder.as_ref().unwrap().detail_problem().is_none());
        assert!(TinyModel::from_tensors(config, tensors(), device.clone()).is_ok());
    }

    /// A model grid of `slabs` slabs with these HU, as read from a CT of the grid's own
    /// pixels and 5 mm slices.
    fn square_grid(spec: GridSpec, slabs: usize, hu: Vec<f32>) -> ModelGrid {
        let n = spec.size;
        ModelGrid {
            spec,
            slabs,
            hu,
            centre_slice: (0..slabs as u32).collect(),
            ct_spacing_mm: [spec.pixel_mm, spec.pixel_mm, 5.0],
            ct_dims: [n, n, slabs],
            z_range_mm: (0.0, 5.0 * (slabs - 1) as f64),
            above_mm: 0.0,
            detail: None,
        }
    }

    #[test]
    fn organ_references_are_the_interior_median_over_the_broad_sections() {
        let n = 16;
        let slabs = 4;
        let spec = GridSpec {
            size: n,
            pixel_mm: 3.0,
            slab_mm: 5.0,
        };
        // Liver (organ 0): 8 × 8 at 100 HU on slabs 0–2, but slab 1 at 60 HU (a tumor filling
        // it), and a 3 × 3 tip at 40 HU on slab 3 (under half the largest section).
        let mut hu = vec![-95f32; slabs * n * n];
        let mut masks = vec![vec![false; n * n]; slabs * 4];
        for slab in 0..slabs {
            let (side, value) = match slab {
                1 => (8, 60.0),
                3 => (3, 40.0),
                _ => (8, 100.0),
            };
            for row in 4..4 + side {
                for column in 4..4 + side {
                    masks[slab * 4][row * n + column] = true;
                    hu[slab * n * n + row * n + column] = value;
                }
            }
        }
        let grid = square_grid(spec, slabs, hu);
        let references = organ_references(&grid, &masks, [true; 4], &[]);
        for slab in 0..3 {
            assert_eq!(references[slab * 4], Some(100.0), "slab {slab}");
        }
        assert_eq!(references[3 * 4], None, "the tip keeps its own median");
        assert!(
            (1..4).all(|organ| references[organ].is_none()),
            "no other organ"
        );
        let unwanted = organ_references(&grid, &masks, [false, true, true, true], &[]);
        assert!(
            unwanted.iter().all(Option::is_none),
            "the liver was not asked for"
        );
    }

    #[test]
    fn organ_references_leave_out_the_slabs_where_a_tumor_swells_the_organ() {
        let n = 24;
        let slabs = 6;
        // Left kidney (organ 2): 8 × 8 of parenchyma at 170 HU on slabs 0–2; on slabs 3–5 a
        // tumor of 220 HU swells the mask to 13 × 13 and fills most of it, with a 3-pixel
        // rim of parenchyma on two sides. The finder called a tumor on slabs 3–5.
        let mut hu = vec![-95f32; slabs * n * n];
        let mut masks = vec![vec![false; n * n]; slabs * 4];
        for slab in 0..slabs {
            let side = if slab < 3 { 8 } else { 13 };
            for row in 4..4 + side {
                for column in 4..4 + side {
                    masks[slab * 4 + 2][row * n + column] = true;
                    let tumor = slab >= 3 && row >= 7 && column >= 7;
                    hu[slab * n * n + row * n + column] = if tumor { 220.0 } else { 170.0 };
                }
            }
        }
        let spec = GridSpec {
            size: n,
            pixel_mm: 3.0,
            slab_mm: 5.0,
        };
        let grid = square_grid(spec, slabs, hu);
        let mut called = vec![false; slabs * 4];
        for slab in 3..slabs {
            called[slab * 4 + 2] = true;
        }
        let wanted = [false, false, true, false];
        let references = organ_references(&grid, &masks, wanted, &called);
        for slab in 0..slabs {
            assert_eq!(references[slab * 4 + 2], Some(170.0), "slab {slab}");
        }
        // Without the calls the swollen slabs are the broad ones, and the tumor their median.
        let blind = organ_references(&grid, &masks, wanted, &[]);
        assert_eq!(blind[4 * 4 + 2], Some(220.0));
        assert_eq!(blind[2], None, "slab 0 is under half the swollen section");
    }

    #[test]
    fn the_key_slab_of_saturated_answers_is_the_largest_section() {
        let answer = |slab: usize, probability: f32| SlabAnswer {
            organ: 2,
            slab,
            probability,
            cell: (0, 0),
        };
        // A tumor on slabs 3–5, largest on slab 4; the finder saturates on all three, a
        // hair higher at the edge. A weaker answer on slab 9 has a larger region.
        let answers = [
            answer(3, 0.999_96),
            answer(4, 0.999_91),
            answer(5, 0.999_93),
            answer(9, 0.97),
        ];
        let section = |slab: usize, pixels: usize| (0..pixels).map(move |pixel| (slab, pixel));
        let voxels: Vec<(usize, usize)> = section(3, 4)
            .chain(section(4, 12))
            .chain(section(5, 6))
            .chain(section(9, 30))
            .collect();
        let lesion = decode::FoundLesion {
            organ: crate::findings::Organ::KidneyLeft,
            voxels,
            largest_slab: 4,
            lesion: crate::findings::Lesion::default(),
        };
        let thresholds = [0.5; 4];
        assert_eq!(strongest_slab(&answers, thresholds, &[lesion]), Some(4));
        // Below the threshold nothing is key.
        assert_eq!(strongest_slab(&answers, [1.0; 4], &[]), None);
    }

    #[test]
    fn one_slice_names_the_segment_pairs_it_can_tell_apart() {
        assert_eq!(one_slice_segments(&[8]), vec![5, 8]);
        assert_eq!(one_slice_segments(&[6]), vec![6, 7]);
        assert_eq!(one_slice_segments(&[3]), vec![2, 3]);
        assert_eq!(one_slice_segments(&[4]), vec![4]);
        assert_eq!(one_slice_segments(&[5, 8]), vec![5, 8]);
    }

    #[test]
    fn liver_segments_follow_the_livers_width_and_its_parts_middles() {
        let n = 32;
        let slabs = 9;
        // A liver box over columns 2–22, rows 4–12 and slabs 0–8: the left lateral part
        // (columns from 2 + 0.7 × 20 = 16) and the right part (below 2 + 0.525 × 20 = 12.5)
        // both centre on slab 4 and row 8.
        let mut masks = vec![vec![false; n * n]; slabs * 4];
        for slab in 0..slabs {
            for row in 4..13 {
                for column in 2..23 {
                    masks[slab * 4][row * n + column] = true;
                }
            }
        }
        let mut values = vec![vec![vec![0.5f32; n * n]; OUTPUTS]; slabs];
        mask_locations(&masks, n, &mut values);
        let segment = |slab: usize, column: usize, row: usize| {
            (0..7)
                .find(|&c| values[slab][net::LOCATION.start + c][row * n + column] > 0.99)
                .map(|class| class + 2)
        };
        assert_eq!(segment(7, 20, 8), Some(2), "left lateral, upper");
        assert_eq!(segment(1, 20, 8), Some(3), "left lateral, lower");
        assert_eq!(
            segment(4, 14, 8),
            Some(4),
            "between the ligament and Cantlie's line"
        );
        assert_eq!(segment(7, 4, 5), Some(8), "right, anterior superior");
        assert_eq!(segment(1, 4, 5), Some(5), "right, anterior inferior");
        assert_eq!(segment(7, 4, 11), Some(7), "right, posterior superior");
        assert_eq!(segment(1, 4, 11), Some(6), "right, posterior inferior");
        // Outside the liver the diagnoser's channels stay.
        assert!((values[4][net::LOCATION.start][20 * n + 4] - 0.5).abs() < 1e-6);
    }

    #[test]
    fn kidney_poles_and_pancreas_parts_follow_the_organ_masks() {
        let n = 32;
        let slabs = 9;
        let mut masks = vec![vec![false; n * n]; slabs * 4];
        // Left kidney (organ 2) on slabs 0–8 at columns 20–23, rows 10–13.
        for slab in 0..slabs {
            for row in 10..14 {
                for column in 20..24 {
                    masks[slab * 4 + 2][row * n + column] = true;
                }
            }
        }
        // Pancreas (organ 1) on slab 4 from column 2 (the patient's right) to column 21.
        for column in 2..22 {
            masks[4 * 4 + 1][16 * n + column] = true;
        }
        let mut values = vec![vec![vec![0.5f32; n * n]; OUTPUTS]; slabs];
        mask_locations(&masks, n, &mut values);
        let class = |slab: usize, pixel: usize, classes: std::ops::Range<usize>| {
            classes
                .clone()
                .find(|&c| values[slab][net::LOCATION.start + c][pixel] > 0.99)
        };
        let kidney = 11 * n + 21;
        assert_eq!(class(8, kidney, 10..13), Some(10), "top slab: upper pole");
        assert_eq!(class(4, kidney, 10..13), Some(11), "middle: mid");
        assert_eq!(
            class(0, kidney, 10..13),
            Some(12),
            "bottom slab: lower pole"
        );
        assert_eq!(class(4, 16 * n + 3, 7..10), Some(7), "right end: head");
        assert_eq!(class(4, 16 * n + 12, 7..10), Some(8), "middle: body");
        assert_eq!(class(4, 16 * n + 21, 7..10), Some(9), "left end: tail");
        // Off the masks the diagnoser's values stay.
        assert!((values[4][net::LOCATION.start + 7][0] - 0.5).abs() < 1e-6);
    }
}
