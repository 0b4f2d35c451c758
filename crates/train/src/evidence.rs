//! Training of the evidence reader (`keyslice train --stage evidence`): keyslice-tiny's own
//! verifier, which reads one claimed lesion in three planes through the centre of its box
//! ([`keyslice_infer::embedded::evidence`]). Its weights are new; nothing is shared with the
//! diagnoser, the organ network or the finder of the checkpoint it is added to.
//!
//! Each step draws claims the way answers make them: four in ten on a real lesion (a slice
//! of its middle half, its section's box there, stretched or shifted a little), three on a
//! random place in an organ, two where a model guessing would put a box (the slice's middle
//! half, a lesion-sized box), one straight above or below a real lesion, off its slices. The
//! targets are the true organ and lesion masks and the lesion's attenuation on the axial
//! view, so a claim over clean tissue teaches as much as one over a tumor. A share of the
//! claims can come from the answers of the checkpoint's own diagnoser on the training cases
//! (its real findings and its false ones, where a verifier earns its keep). Cases need masks
//! and `truth.json` (the phantoms of `keyslice phantom`).

use std::path::Path;
use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use candle_nn::{Optimizer, VarBuilder, VarMap};
use rayon::prelude::*;

use keyslice_core::findings::{Organ, SliceBox, TumorPresence};
use keyslice_core::rng::Rng;
use keyslice_core::volume::Volume;
use keyslice_infer::Diagnoser;
use keyslice_infer::embedded::decode::attenuation_index;
use keyslice_infer::embedded::evidence::{
    ClaimPlace, EvidenceConfig, evidence_input, read_claim, view_voxels,
};
use keyslice_infer::embedded::net::SliceNet;
use keyslice_infer::embedded::{TinyConfig, TinyDiagnoser, TinyModel};
use keyslice_infer::hallucinate::{guessed_box, guessed_slice};
use keyslice_io::masks::load_mask_onto;
use keyslice_io::nifti::read_nifti;
use keyslice_phantom::PhantomTruth;

use crate::tiny::{
    LossWeights, TrainError, WindowTargets, adamw, add_trained, batch_loss, case_folders, diverged,
    seeded_init, write_checkpoint,
};

/// Settings of the evidence stage.
#[derive(Clone, Debug)]
pub struct EvidenceTrainOptions {
    /// Optimisation steps.
    pub steps: usize,
    /// Claims per step.
    pub batch: usize,
    /// AdamW learning rate, lowered tenfold for the last 30 % of steps.
    pub learning_rate: f64,
    /// Seed of the initialisation and of the claims drawn.
    pub seed: u64,
    /// Checkpoint version written to `config.json`.
    pub version: String,
    /// Cases (the last ones of the data) kept out of training to measure the reader on.
    pub held_out: usize,
    /// Weight of lesion pixels in the lesion masks' cross-entropy.
    pub lesion_weight: f64,
    /// Share of the claims taken from the answers of the `--init` model itself on the
    /// training cases (its real findings and its false ones, with the evidence it cites).
    pub model_claims: f64,
}

/// One lesion of a case: its organ, attenuation class and slices.
struct LesionPlace {
    organ: Organ,
    attenuation: u8,
    first: usize,
    last: usize,
    largest: usize,
}

/// One case on its own grid: the CT, organ bits and lesion number (+1) per voxel.
struct EvidenceCase {
    volume: Volume,
    organs: Vec<u8>,
    lesion: Vec<u8>,
    lesions: Vec<LesionPlace>,
}

impl EvidenceCase {
    fn at(&self, [i, j, k]: [usize; 3]) -> usize {
        let [nx, ny, _] = self.volume.dims();
        i + nx * (j + ny * k)
    }

    /// The bounding box (voxels) of lesion `number`'s section on slice `k`.
    fn section_box(&self, number: usize, k: usize) -> Option<[u32; 4]> {
        let [nx, ny, _] = self.volume.dims();
        let code = u8::try_from(number + 1).ok()?;
        let mut bounds: Option<[usize; 4]> = None;
        for j in 0..ny {
            for i in 0..nx {
                if self.lesion[self.at([i, j, k])] == code {
                    bounds = Some(bounds.map_or([i, j, i, j], |[c0, r0, c1, r1]| {
                        [c0.min(i), r0.min(j), c1.max(i), r1.max(j)]
                    }));
                }
            }
        }
        bounds.map(|b| b.map(|value| value as u32))
    }
}

/// Reads a case folder: the CT, the four organ masks, the three lesion masks and
/// `truth.json`, each lesion voxel given the truth lesion whose centre is nearest.
fn load_case(folder: &Path) -> Result<EvidenceCase, TrainError> {
    let case_error = |path: &Path, detail: String| TrainError::Case {
        path: path.to_path_buf(),
        detail,
    };
    let case = keyslice_io::cases::CaseFolder::new(folder);
    let ct_path = case.ct();
    let volume = read_nifti(&ct_path).map_err(|e| case_error(&ct_path, e.to_string()))?;
    let truth_path = case.truth();
    let truth: PhantomTruth = std::fs::read_to_string(&truth_path)
        .map_err(|e| e.to_string())
        .and_then(|text| serde_json::from_str(&text).map_err(|e| e.to_string()))
        .map_err(|detail| {
            case_error(
                &truth_path,
                format!("{detail}; the evidence stage needs each lesion's truth (phantoms of `keyslice phantom`)"),
            )
        })?;
    let segmentations = case.masks();
    let mask = |name: &str| -> Result<Option<Vec<u8>>, TrainError> {
        let path = segmentations.join(format!("{name}.nii.gz"));
        if !path.is_file() {
            return Ok(None);
        }
        let mask = load_mask_onto(&path, &volume).map_err(|e| case_error(&path, e.to_string()))?;
        Ok(Some(mask.labels))
    };
    let count: usize = volume.dims().iter().product();
    let mut organs = vec![0u8; count];
    for (bit, name) in ["liver", "pancreas", "kidney_left", "kidney_right"]
        .iter()
        .enumerate()
    {
        if let Some(labels) = mask(name)? {
            for (out, &value) in organs.iter_mut().zip(&labels) {
                if value != 0 {
                    *out |= 1 << bit;
                }
            }
        }
    }
    let inverse = volume.patient_from_voxel().inverse().ok_or_else(|| {
        case_error(
            &ct_path,
            "the CT's voxel-to-patient transform is singular".into(),
        )
    })?;
    let centres: Vec<[f64; 3]> = truth
        .lesions
        .iter()
        .map(|lesion| inverse.apply(lesion.centre_mm))
        .collect();
    let spacing = volume.spacing_mm();
    let [nx, ny, _] = volume.dims();
    let mut lesion = vec![0u8; count];
    for name in ["liver_lesion", "pancreatic_lesion", "kidney_lesion"] {
        let Some(labels) = mask(name)? else {
            continue;
        };
        for (at, &value) in labels.iter().enumerate() {
            if value == 0 {
                continue;
            }
            let voxel = [at % nx, (at / nx) % ny, at / (nx * ny)];
            let distance = |centre: &[f64; 3]| {
                (0..3)
                    .map(|axis| ((voxel[axis] as f64 - centre[axis]) * spacing[axis]).powi(2))
                    .sum::<f64>()
            };
            if let Some((number, _)) = centres
                .iter()
                .enumerate()
                .min_by(|a, b| distance(a.1).total_cmp(&distance(b.1)))
            {
                lesion[at] = u8::try_from(number + 1).unwrap_or(0);
            }
        }
    }
    let lesions = truth
        .lesions
        .iter()
        .map(|l| LesionPlace {
            organ: l.organ,
            attenuation: attenuation_index(l.attenuation) as u8,
            first: l.first_slice as usize,
            last: l.last_slice as usize,
            largest: l.largest_slice as usize,
        })
        .collect();
    Ok(EvidenceCase {
        volume,
        organs,
        lesion,
        lesions,
    })
}

/// A claim to read: case, slice and box.
#[derive(Clone, Debug)]
struct Claim {
    case: usize,
    slice: usize,
    slice_box: SliceBox,
}

/// Draws claims; the order of draws is part of what makes a seed reproduce a checkpoint.
struct Claims<'a> {
    cases: &'a [EvidenceCase],
    /// (case, lesion number) of every lesion.
    lesions: Vec<(usize, usize)>,
    /// The claims a model's own answers make, and the share of draws taken from them.
    answered: Vec<Claim>,
    answered_share: f64,
    rng: Rng,
}

impl<'a> Claims<'a> {
    fn new(cases: &'a [EvidenceCase], rng: Rng) -> Self {
        let lesions = cases
            .iter()
            .enumerate()
            .flat_map(|(case, c)| (0..c.lesions.len()).map(move |number| (case, number)))
            .collect();
        Self {
            cases,
            lesions,
            answered: Vec::new(),
            answered_share: 0.0,
            rng,
        }
    }

    fn uniform(&mut self, low: f64, high: f64) -> f64 {
        self.rng.uniform(low, high)
    }

    /// A square box of `side_mm` centred on voxel (`i`, `j`).
    fn square(case: &EvidenceCase, i: f64, j: f64, side_mm: f64) -> SliceBox {
        let [nx, ny, _] = case.volume.dims();
        let spacing = case.volume.spacing_mm();
        let half = [side_mm / 2.0 / spacing[0], side_mm / 2.0 / spacing[1]];
        let clamp = |value: f64, size: usize| value.round().clamp(0.0, (size - 1) as f64) as u32;
        SliceBox {
            voxels: [
                clamp(i - half[0], nx),
                clamp(j - half[1], ny),
                clamp(i + half[0], nx),
                clamp(j + half[1], ny),
            ],
            mm: None,
        }
    }

    /// A claim on a real lesion: a slice of its middle half (its largest one half the time),
    /// its section's box there, each side moved by up to a fifth of the box.
    fn on_lesion(&mut self) -> Option<(Claim, usize)> {
        if self.lesions.is_empty() {
            return None;
        }
        let (case, number) = self.lesions[self.rng.below(self.lesions.len())];
        let c = &self.cases[case];
        let place = &c.lesions[number];
        let slice = if self.rng.below(2) == 0 {
            place.largest
        } else {
            let quarter = (place.last - place.first) / 4;
            place.first + quarter + self.rng.below(place.last - place.first - 2 * quarter + 1)
        };
        let [c0, r0, c1, r1] = c.section_box(number, slice)?;
        let (width, height) = (f64::from(c1 - c0 + 1), f64::from(r1 - r0 + 1));
        let mut moved = |value: u32, scale: f64| {
            (f64::from(value) + self.rng.uniform(-0.2, 0.2) * scale)
                .round()
                .max(0.0)
        };
        let [nx, ny, _] = c.volume.dims();
        let corners = [
            moved(c0, width).min((nx - 1) as f64),
            moved(r0, height).min((ny - 1) as f64),
            moved(c1, width).min((nx - 1) as f64),
            moved(r1, height).min((ny - 1) as f64),
        ];
        let voxels = [
            corners[0].min(corners[2]) as u32,
            corners[1].min(corners[3]) as u32,
            corners[0].max(corners[2]) as u32,
            corners[1].max(corners[3]) as u32,
        ];
        Some((
            Claim {
                case,
                slice,
                slice_box: SliceBox { voxels, mm: None },
            },
            number,
        ))
    }

    /// A claim on a random voxel of an organ (lesion or not), a box of 1–3.5 cm.
    fn in_organ(&mut self) -> Claim {
        let case = self.rng.below(self.cases.len());
        let c = &self.cases[case];
        let [nx, ny, nz] = c.volume.dims();
        let bit = 1u8 << self.rng.below(4);
        for _ in 0..200 {
            let voxel = [self.rng.below(nx), self.rng.below(ny), self.rng.below(nz)];
            if c.organs[c.at(voxel)] & bit != 0 {
                let side = self.uniform(10.0, 35.0);
                return Claim {
                    case,
                    slice: voxel[2],
                    slice_box: Self::square(c, voxel[0] as f64, voxel[1] as f64, side),
                };
            }
        }
        self.guessed_for(case)
    }

    /// A claim as a model guessing would cite it: a slice of the middle half, a box a tenth
    /// of the slice wide somewhere in its middle half.
    fn guessed(&mut self) -> Claim {
        let case = self.rng.below(self.cases.len());
        self.guessed_for(case)
    }

    fn guessed_for(&mut self, case: usize) -> Claim {
        let c = &self.cases[case];
        let [nx, ny, nz] = c.volume.dims();
        let slice = guessed_slice(nz, &mut self.rng);
        Claim {
            case,
            slice,
            slice_box: guessed_box(nx, ny, &mut self.rng),
        }
    }

    /// A real lesion's box on a slice above or below its own (by 2–8 slices).
    fn off_slices(&mut self) -> Claim {
        let Some((claim, number)) = self.on_lesion() else {
            return self.guessed();
        };
        let c = &self.cases[claim.case];
        let [_, _, nz] = c.volume.dims();
        let (first, last) = (c.lesions[number].first, c.lesions[number].last);
        let away = 2 + self.rng.below(7);
        let slice = if self.rng.below(2) == 0 && first >= away {
            first - away
        } else {
            (last + away).min(nz - 1)
        };
        Claim { slice, ..claim }
    }

    /// One training claim.
    fn draw(&mut self) -> Claim {
        if !self.answered.is_empty() && self.rng.unit() < self.answered_share {
            return self.answered[self.rng.below(self.answered.len())].clone();
        }
        match self.rng.below(10) {
            0..=3 => self
                .on_lesion()
                .map_or_else(|| self.in_organ(), |(claim, _)| claim),
            4..=6 => self.in_organ(),
            7..=8 => self.guessed(),
            _ => self.off_slices(),
        }
    }
}

/// The claims the diagnoser of `model` makes on `cases`: each lesion's own key slice and box.
fn answered_claims(model: &TinyModel, cases: &[EvidenceCase]) -> Result<Vec<Claim>, TrainError> {
    let per_case: Vec<Vec<Claim>> = cases
        .par_iter()
        .enumerate()
        .map(|(case, c)| {
            let diagnosis = TinyDiagnoser(model)
                .diagnose(&c.volume)
                .map_err(|error| TrainError::Data(error.to_string()))?;
            Ok(diagnosis
                .lesions
                .into_iter()
                .filter_map(|evidence| {
                    Some(Claim {
                        case,
                        slice: evidence.key_slice as usize,
                        slice_box: evidence.slice_box?,
                    })
                })
                .filter(|claim| claim.slice < c.volume.dims()[2])
                .collect())
        })
        .collect::<Result<_, TrainError>>()?;
    Ok(per_case.concat())
}

/// The targets of a claim's axial view: the true organs, lesions and attenuation at the
/// voxel nearest each pixel.
fn claim_targets(
    case: &EvidenceCase,
    place: &ClaimPlace,
    config: &EvidenceConfig,
) -> WindowTargets {
    let plane = config.side * config.side;
    let mut targets = WindowTargets {
        organ: vec![0.0; 4 * plane],
        lesion: vec![0.0; 4 * plane],
        attenuation: vec![0.0; 3 * plane],
        attenuation_mask: vec![0.0; plane],
        location: vec![0.0; 13 * plane],
        location_mask: vec![0.0; plane],
    };
    let dims = case.volume.dims();
    let [axial, _, _] = view_voxels(&case.volume, place, config);
    for (pixel, at) in axial.iter().enumerate() {
        let mut voxel = [0usize; 3];
        let mut inside = true;
        for axis in 0..3 {
            let value = at[axis].round();
            if value < 0.0 || value >= dims[axis] as f64 {
                inside = false;
                break;
            }
            voxel[axis] = value as usize;
        }
        if !inside {
            continue;
        }
        let index = case.at(voxel);
        for bit in 0..4 {
            if case.organs[index] & (1 << bit) != 0 {
                targets.organ[bit * plane + pixel] = 1.0;
            }
        }
        let code = case.lesion[index];
        if code > 0
            && let Some(lesion) = case.lesions.get(usize::from(code) - 1)
        {
            let organ = Organ::ALL
                .iter()
                .position(|o| *o == lesion.organ)
                .unwrap_or(0);
            targets.lesion[organ * plane + pixel] = 1.0;
            targets.attenuation[usize::from(lesion.attenuation) * plane + pixel] = 1.0;
            targets.attenuation_mask[pixel] = 1.0;
        }
    }
    targets
}

/// Whether the box of `claim` truly holds a lesion: a third of a lesion section on the key
/// slice inside it, or the box centre on one.
fn truly_inside(case: &EvidenceCase, claim: &Claim) -> bool {
    let [c0, r0, c1, r1] = claim.slice_box.voxels.map(|v| v as usize);
    let centre = case.at([
        usize::midpoint(c0, c1),
        usize::midpoint(r0, r1),
        claim.slice,
    ]);
    if case.lesion[centre] != 0 {
        return true;
    }
    (0..case.lesions.len()).any(|number| {
        let code = (number + 1) as u8;
        let [nx, ny, _] = case.volume.dims();
        let (mut total, mut within) = (0usize, 0usize);
        for j in 0..ny {
            for i in 0..nx {
                if case.lesion[case.at([i, j, claim.slice])] == code {
                    total += 1;
                    if (c0..=c1).contains(&i) && (r0..=r1).contains(&j) {
                        within += 1;
                    }
                }
            }
        }
        total > 0 && within * 3 >= total
    })
}

/// Trains the evidence reader on the cases of `data` and writes the checkpoint of `init`
/// with it to `out`; `progress` gets a line every 25 steps and the held-out figures.
pub fn train_evidence(
    init: &Path,
    data: &Path,
    out: &Path,
    options: &EvidenceTrainOptions,
    mut progress: impl FnMut(&str),
) -> Result<TinyConfig, TrainError> {
    let started = Instant::now();
    let base = TinyModel::load(init).map_err(|error| TrainError::Case {
        path: init.to_path_buf(),
        detail: error.to_string(),
    })?;
    let evidence = base.config.evidence.unwrap_or_else(EvidenceConfig::initial);
    let windows = base.config.windows.clone();
    let folders = case_folders(data)?;
    if folders.len() <= options.held_out {
        return Err(TrainError::Settings(format!(
            "{} cases in {}, {} of them held out: none left to train on",
            folders.len(),
            data.display(),
            options.held_out
        )));
    }
    progress(&format!(
        "reading {} cases from {}",
        folders.len(),
        data.display()
    ));
    let cases: Vec<EvidenceCase> = folders
        .par_iter()
        .map(|folder| load_case(folder))
        .collect::<Result<_, _>>()?;
    let (training, held_out) = cases.split_at(cases.len() - options.held_out);
    let mut claims = Claims::new(training, Rng::new(options.seed));
    if options.model_claims > 0.0 {
        claims.answered = answered_claims(&base, training)?;
        claims.answered_share = options.model_claims;
        progress(&format!(
            "{} claims from the answers of {} {} on the training cases, drawn {:.0} % of the time",
            claims.answered.len(),
            base.config.model,
            base.config.version,
            options.model_claims * 100.0
        ));
    }
    if claims.lesions.is_empty() {
        return Err(TrainError::Data(format!(
            "no case in {} has a lesion: the evidence reader learns what a lesion looks like from them",
            data.display()
        )));
    }
    progress(&format!(
        "{} training cases with {} lesions, {} held out; read in {:.1} s",
        training.len(),
        claims.lesions.len(),
        held_out.len(),
        started.elapsed().as_secs_f64()
    ));
    let device = Device::Cpu;
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
    let inputs = EvidenceConfig::inputs(windows.len());
    let network = SliceNet::new(inputs, evidence.widths, 0, &vb.pp("evidence"))?;
    seeded_init(&varmap, options.seed, &device)?;
    steps(
        &network,
        &varmap,
        &mut claims,
        (&evidence, &windows),
        options,
        &mut progress,
        started,
    )?;
    if !held_out.is_empty() {
        let figures = held_out_figures(&network, &evidence, &windows, held_out, options.seed)?;
        progress(&figures);
    }
    let mut config = base.config.clone();
    config.evidence = Some(evidence);
    config.version.clone_from(&options.version);
    let mut tensors: std::collections::HashMap<String, Tensor> =
        candle_core::safetensors::load(init.join("model.safetensors"), &device)?
            .into_iter()
            .filter(|(name, _)| !name.starts_with("evidence."))
            .collect();
    add_trained(&mut tensors, &varmap, Vec::new())?;
    write_checkpoint(&tensors, &config, out)?;
    Ok(config)
}

/// The optimisation steps: each draws `options.batch` claims from `claims` and trains
/// `network` (its variables in `varmap`) on their views and targets.
fn steps(
    network: &SliceNet,
    varmap: &VarMap,
    claims: &mut Claims<'_>,
    (evidence, windows): (&EvidenceConfig, &[[f32; 2]]),
    options: &EvidenceTrainOptions,
    progress: &mut impl FnMut(&str),
    started: Instant,
) -> Result<(), TrainError> {
    let device = Device::Cpu;
    let training = claims.cases;
    let inputs = EvidenceConfig::inputs(windows.len());
    let mut optimizer = adamw(varmap, options.learning_rate)?;
    let weights = LossWeights {
        lesion: options.lesion_weight,
        dice: 0.5,
    };
    let side = evidence.side;
    let mut recent = Vec::new();
    for step in 0..options.steps {
        if step == options.steps * 7 / 10 {
            optimizer.set_learning_rate(options.learning_rate / 10.0);
        }
        let batch: Vec<Claim> = (0..options.batch).map(|_| claims.draw()).collect();
        let prepared: Vec<(Vec<f32>, WindowTargets)> = batch
            .par_iter()
            .map(|claim| {
                let case = &training[claim.case];
                let place =
                    ClaimPlace::of(&case.volume, claim.slice as u32, Some(&claim.slice_box));
                (
                    evidence_input(&case.volume, &place, evidence, windows),
                    claim_targets(case, &place, evidence),
                )
            })
            .collect();
        let (input, targets): (Vec<Vec<f32>>, Vec<WindowTargets>) = prepared.into_iter().unzip();
        let x = Tensor::from_vec(input.concat(), (options.batch, inputs, side, side), &device)?;
        let (loss, lesion) = batch_loss(&network.forward(&x)?, &targets, side, weights, &device)?;
        let value = loss.to_scalar::<f32>()?;
        if !value.is_finite() {
            return Err(diverged(step));
        }
        optimizer.backward_step(&loss)?;
        recent.push((value, lesion));
        if (step + 1) % 25 == 0 || step + 1 == options.steps {
            let count = recent.len() as f32;
            progress(&format!(
                "step {}/{}: loss {:.4} (lesion {:.4}), {:.0} s",
                step + 1,
                options.steps,
                recent.iter().map(|r| r.0).sum::<f32>() / count,
                recent.iter().map(|r| r.1).sum::<f32>() / count,
                started.elapsed().as_secs_f64()
            ));
            recent.clear();
        }
    }
    Ok(())
}

/// How the reader answers "a lesion inside the box?" on held-out claims drawn as in
/// training: the share right on boxes that hold a lesion and on boxes that do not.
fn held_out_figures(
    network: &SliceNet,
    evidence: &EvidenceConfig,
    windows: &[[f32; 2]],
    cases: &[EvidenceCase],
    seed: u64,
) -> Result<String, TrainError> {
    let mut claims = Claims::new(cases, Rng::new(seed ^ 0xE71D));
    let drawn: Vec<Claim> = (0..400).map(|_| claims.draw()).collect();
    let answers: Vec<(bool, bool)> = drawn
        .par_iter()
        .map(|claim| {
            let case = &cases[claim.case];
            let place = ClaimPlace::of(&case.volume, claim.slice as u32, Some(&claim.slice_box));
            let read = read_claim(
                network,
                evidence,
                windows,
                &case.volume,
                &place,
                &Device::Cpu,
            )?;
            Ok((
                truly_inside(case, claim),
                read.inside_box == Some(TumorPresence::Yes),
            ))
        })
        .collect::<candle_core::Result<_>>()?;
    let share = |truth: bool| {
        let of: Vec<bool> = answers
            .iter()
            .filter(|(t, _)| *t == truth)
            .map(|(_, said)| *said == truth)
            .collect();
        (of.iter().filter(|right| **right).count(), of.len())
    };
    let (found, lesions) = share(true);
    let (cleared, clean) = share(false);
    Ok(format!(
        "held out ({} case(s), 400 claims): a lesion inside the box said for {found} of {lesions}, none said for {cleared} of {clean}",
        cases.len()
    ))
}
