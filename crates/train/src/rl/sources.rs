//! Training cases: phantom folders or a reviewed export, read into the finder's jobs, the
//! truth with each lesion's slice extent, and the frozen verifier's reading of every slab.

use keyslice_io::cases::CaseFolder;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use candle_core::{DType, Tensor};
use rayon::prelude::*;

use super::RlOptions;
use super::metrics::mean_of;
use super::policy::greedy;
use super::rewards::sample_reward;
use crate::tiny::{TrainError, case_folders};
use keyslice_core::findings::{Findings, TumorPresence, read_report};
use keyslice_core::scoring::{LesionExtent, RewardWeights, Rewards};
use keyslice_infer::embedded::decode::{FINDER_RULE, Probabilities, find_lesions, findings_of};
use keyslice_infer::embedded::finder::{self, FinderConfig, FinderNet, Job, SlabAnswer};
use keyslice_infer::embedded::grid::ModelGrid;
use keyslice_infer::embedded::net;
use keyslice_infer::embedded::organs::Reading;
use keyslice_infer::embedded::{TinyModel, TinyVerifier, finder_probabilities};
use keyslice_infer::{KeySliceImage, Verifier};
use keyslice_io::nifti::read_nifti;
use keyslice_phantom::PhantomTruth;

/// One case, prepared once: the finder trunk's features per job, what the decoding needs,
/// the verifier's reading of every slab, and the truth.
pub(super) struct RlCase {
    /// The case folder (phantoms) or CT (exports), for messages.
    pub(super) path: PathBuf,
    pub(super) truth: Findings,
    pub(super) extents: Vec<LesionExtent>,
    /// The reviewer corrected the model's findings (exports only).
    pub(super) hard: Option<bool>,
    pub(super) jobs: Vec<Job>,
    /// `[jobs, widths[1], crop / 4, crop / 4]`.
    pub(super) features: Tensor,
    /// `[jobs, 4, 1, 1]`: 1 on the job's organ.
    pub(super) selection: Tensor,
    /// `[jobs, cells]`: 0 inside the organ, −30 outside.
    pub(super) outside: Tensor,
    /// Each job's organ.
    pub(super) organs: Vec<usize>,
    /// Each job's threshold logit tₒ.
    pub(super) centres: Vec<f32>,
    /// The supervised policy's logits ℓⱼ.
    pub(super) reference: Vec<f32>,
    /// The supervised answers (deciding cells, fixed for the decoding).
    pub(super) answers: Vec<SlabAnswer>,
    pub(super) fine: ModelGrid,
    /// The diagnoser's probabilities with only the location channels kept.
    pub(super) coarse: Probabilities,
    pub(super) masks: Vec<Vec<bool>>,
    /// The verifier's local description of each slab that has a job.
    pub(super) local: HashMap<usize, Findings>,
    /// Decoded reports by the set of "yes" jobs.
    pub(super) decoded: Mutex<HashMap<Vec<bool>, Findings>>,
}

impl RlCase {
    /// The finder's top on a case's features: each job's logit ℓⱼ (`[jobs]`) and its organ's
    /// cell logits (`[jobs, cells]`).
    pub(super) fn logits(&self, net: &FinderNet) -> candle_core::Result<(Tensor, Tensor)> {
        let logits = net.top(&self.features, false)?;
        let cells = (logits
            .broadcast_mul(&self.selection)?
            .sum(1)?
            .flatten_from(1)?
            + &self.outside)?;
        Ok((cells.max(candle_core::D::Minus1)?, cells))
    }
}

impl RlCase {
    /// The report of the jobs marked in `yes`, decoded as analysis does.
    pub(super) fn report(&self, yes: &[bool]) -> Findings {
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
    pub(super) fn reward(
        &self,
        yes: &[bool],
        key: Option<usize>,
        weights: &RewardWeights,
    ) -> Rewards {
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

/// Every case of `data` prepared (in parallel); with `hard_only`, those the supervised
/// model misses an attribute on. Cases where no organ was found are left out: there is
/// nothing to train on them.
pub(super) fn prepare_cases(
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

/// Where the RL stage's cases come from.
#[derive(Clone, Debug)]
pub enum RlData {
    /// Phantom case folders (`ct.nii.gz` and `truth.json` with findings and lesion extents).
    Phantoms(PathBuf),
    /// A `swift` or `verl` export made with `--volumes`: its reviewed findings are the
    /// truth ([`keyslice_export::read`]).
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

    pub(super) fn describe(&self) -> String {
        match self {
            Self::Phantoms(folder) => folder.display().to_string(),
            Self::Export(folder) => format!("the train split of the export {}", folder.display()),
        }
    }
}

/// A case before preparation: its CT and its truth.
pub(super) struct CaseSource {
    /// The case folder or the CT, for messages.
    pub(super) path: PathBuf,
    pub(super) ct: PathBuf,
    pub(super) truth: Findings,
    /// The lesions' slice extents; `None`: taken around the key slice once the CT is read
    /// ([`reviewed_extents`]).
    pub(super) extents: Option<Vec<LesionExtent>>,
    pub(super) hard: Option<bool>,
}

/// The cases of `data`, their truth read.
pub(super) fn case_sources(data: &RlData) -> Result<Vec<CaseSource>, TrainError> {
    match data {
        RlData::Phantoms(folder) => case_folders(folder)?
            .into_iter()
            .map(|folder| {
                let truth_path = CaseFolder::new(&folder).truth();
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
                    ct: CaseFolder::new(&folder).ct(),
                    path: folder,
                    truth: truth.findings,
                    extents: Some(truth.lesion_extents),
                    hard: None,
                })
            })
            .collect(),
        RlData::Export(folder) => {
            let cases = keyslice_export::read::read_training_cases(folder)?;
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
pub(super) fn prepare_case(
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
        let (logits, cell_logits) = case.logits(net)?;
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
pub(super) fn job_tensors(
    model: &TinyModel,
    net: &FinderNet,
    finder_config: &FinderConfig,
    fine: &ModelGrid,
    masks: &[Vec<bool>],
    jobs: &[Job],
) -> Result<(Tensor, Tensor, Tensor), TrainError> {
    let device = model.device();
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
pub(super) fn local_readings(
    model: &TinyModel,
    volume: &keyslice_core::volume::Volume,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Reviewed findings give one extent around the key slice, as tall as the largest lesion
    /// is long; nothing without a key slice or a tumor.
    #[test]
    fn reviewed_extents_surround_the_key_slice() {
        use keyslice_core::findings::{Lesion, LesionSize, Organ};
        let mut truth = Findings::default();
        assert!(reviewed_extents(&truth, 2.0, 100).is_empty());
        truth.key_slice = Some(keyslice_core::findings::KeySlice {
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
}
