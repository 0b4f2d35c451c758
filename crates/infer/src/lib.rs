//! Inference: the E-MRL pipeline behind two traits, so that backends plug in.
//!
//! A [`Diagnoser`] reads a whole volume and writes a report with a key evidence slice (and
//! optionally a box on it). A [`Verifier`] sees only that slice ([`KeySliceImage`], cut out
//! here so it cannot look elsewhere) and describes what is visible there. [`run_pipeline`]
//! reads both texts with the findings reader and scores their consistency with `scoring`,
//! producing a [`Prediction`]: the record `analyze` prints, `score` reads and the review
//! workflow shows. Garbled or partial model output is kept and flagged in `warnings`, never
//! fatal.
//!
//! Backends: [`embedded`] (`keyslice-tiny`, candle, CPU) and [`openai`] (any
//! OpenAI-compatible chat-completions server). Depends on the core, `io` (frames), candle
//! and ureq; knows nothing of the UI.

pub mod backend;
pub mod embedded;
pub mod hallucinate;
pub mod openai;
pub mod qwen3_vl;
pub mod views;

use std::time::Instant;

pub use keyslice_core::key_slice::KeySliceImage;
pub use keyslice_core::prediction::{
    LesionCheck, ModelId, OutOfDomain, PREDICTION_VERSION, Prediction, PredictionKeySlice, Timings,
};

use keyslice_core::findings::evidence::{box_problem, box_too_large, cap_lesions, range_problem};
use keyslice_core::findings::{Findings, KeySlice, LesionAxes, Organ, SliceBox, read_report};
use keyslice_core::prediction::bounded_answer;
use keyslice_core::scoring::{SizeTolerance, consistency_with_views};
use keyslice_core::volume::Volume;

/// Why a backend could not produce its output.
#[derive(Debug, thiserror::Error)]
pub enum InferError {
    /// The model files could not be read.
    #[error("model {path}: {detail}")]
    Model {
        /// The model folder or file.
        path: std::path::PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The network failed while running.
    #[error("{model}: {detail}")]
    Run {
        /// Which model.
        model: String,
        /// What failed.
        detail: String,
    },
    /// The volume cannot be analysed (empty, not CT-like).
    #[error("cannot analyse this volume: {0}")]
    Volume(String),
    /// The volume is not what the models read (another modality or body part, or values
    /// that are not Hounsfield units); nothing was analysed.
    #[error("not analysed: {0}")]
    NotAnalysable(String),
    /// The series has text drawn into its pixels (Burned In Annotation YES) and was not to
    /// leave the machine; nothing was sent.
    #[error("not analysed: {0}")]
    BurnedIn(String),
    /// A model server failed or refused.
    #[error("server {url}: {detail}")]
    Server {
        /// The server's base URL.
        url: String,
        /// What failed.
        detail: String,
        /// What kind of failure it is, for code that decides what to do next.
        fault: ServerFault,
    },
}

/// What kind of failure a model server's error is: read from the failure itself, so that no
/// code decides by the error's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerFault {
    /// The network failed before an answer (timeout, refused, DNS, certificate, dropped).
    Net(keyslice_io::http::NetFault),
    /// The server answered with this HTTP status (not a success).
    Status(u16),
    /// The server refused the request (with this HTTP status) as longer than the model's
    /// context.
    ContextTooLong(u16),
    /// The server answered, but not with what was asked (no chat completion, a redirect, a
    /// wait longer than Keyslice waits, an unreadable body).
    Answer,
}

impl InferError {
    /// What the user can do about it.
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            Self::Model { .. } => {
                "check the model folder (config.json and model.safetensors), or run without --model to use the embedded keyslice-tiny"
            }
            Self::Run { .. } => "rerun with KEYSLICE_LOG=debug and report the message",
            Self::Volume(_) => "check that the input is a CT volume (info shows its geometry)",
            Self::BurnedIn(_) => {
                "analyse it with the embedded model (nothing leaves this machine), or, if the text in its pixels may go to that server, add --allow-burned-in"
            }
            Self::NotAnalysable(_) => {
                "open an abdominal CT series (keyslice info lists the series of a folder; pick one with --series)"
            }
            Self::Server {
                fault: ServerFault::Net(keyslice_io::http::NetFault::Certificate),
                ..
            } => keyslice_io::http::CERTIFICATE_HINT,
            Self::Server {
                fault: ServerFault::Status(401 | 403),
                ..
            } => "set the key in the variable named by --api-key-env (e.g. KEYSLICE_API_KEY)",
            Self::Server {
                fault: ServerFault::ContextTooLong(_),
                ..
            } => "send fewer slices (--frames) or raise the server's max_model_len",
            Self::Server { .. } => {
                "check that the server is running and reachable at --url (…/v1), and that \
                 --model names a model it serves (GET …/v1/models lists them)"
            }
        }
    }
}

/// What a diagnoser returns: the report text and where its evidence is.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Diagnosis {
    /// The report, as the model wrote it.
    pub report: String,
    /// Key evidence slice (index along the volume's slice axis), if the model named one.
    pub key_slice: Option<u32>,
    /// A box on the key slice, if the model gave one.
    pub slice_box: Option<SliceBox>,
    /// Anything the backend wants the user to know.
    pub warnings: Vec<String>,
    /// How the CT was given to the model (`"video (32 frames)"`, `"images (32 frames; …)"`),
    /// when the backend chooses.
    pub input: Option<String>,
    /// Why the server refused the CT as a video, when it did (the CT went as images).
    pub video_refused: Option<String>,
    /// Set when the model says the CT is outside what it was trained on.
    pub out_of_domain: Option<OutOfDomain>,
    /// Evidence of their own for the report's lesions (organ and index as the report lists
    /// them), when the model names it: each is verified on its own key slice.
    pub lesions: Vec<LesionEvidence>,
}

/// The evidence a model names for one lesion of its report.
#[derive(Clone, Debug, PartialEq)]
pub struct LesionEvidence {
    /// The organ.
    pub organ: Organ,
    /// The lesion's index among the organ's lesions in the report.
    pub lesion: usize,
    /// The slice that shows it best.
    pub key_slice: u32,
    /// Its box on that slice.
    pub slice_box: Option<SliceBox>,
    /// Its long and short axes on that slice, when the diagnoser measured them there.
    pub axes: Option<LesionAxes>,
    /// Its 3D mask on the CT's grid, when the diagnoser segments lesions.
    pub mask: Option<keyslice_core::volume::mask::LesionMask>,
}

/// Most lesions verified on slices of their own per answer (a report lists at most 20 per
/// organ; the views beyond are not read).
pub const MAX_LESION_VIEWS: usize = keyslice_core::prediction::MAX_LESION_CHECKS;

/// Reads a whole volume and writes a report with a key slice.
pub trait Diagnoser {
    /// Model name and version, recorded in every prediction.
    fn model_id(&self) -> ModelId;
    /// Diagnoses `volume`.
    fn diagnose(&self, volume: &Volume) -> Result<Diagnosis, InferError>;
}

/// Looks at one claim's evidence and describes what is visible there.
pub trait Verifier {
    /// Model name and version.
    fn model_id(&self) -> ModelId;
    /// The local description of `slice`.
    fn describe(&self, slice: &KeySliceImage) -> Result<String, InferError>;
    /// The local description of the evidence a claim cites: slice `index` of `volume` with
    /// `slice_box`. By default the key slice alone with its box ([`Self::describe`]); a
    /// verifier that reads more of the volume around the box (reformats through it) does so
    /// here.
    fn describe_claim(
        &self,
        volume: &Volume,
        index: u32,
        slice_box: Option<&SliceBox>,
    ) -> Result<String, InferError> {
        describe_key_slice(self, volume, index, slice_box)
    }
}

/// What `verifier` says of slice `index` of `volume` alone, with `slice_box` drawn: the
/// reading every verifier can give.
pub fn describe_key_slice<V: Verifier + ?Sized>(
    verifier: &V,
    volume: &Volume,
    index: u32,
    slice_box: Option<&SliceBox>,
) -> Result<String, InferError> {
    let image = KeySliceImage::extract(volume, index, slice_box.cloned()).ok_or_else(|| {
        InferError::Volume(format!(
            "slice {index} is outside the volume ({} slices)",
            volume.dims()[2]
        ))
    })?;
    verifier.describe(&image)
}

/// Body Part Examined values (upper case, any part of the value) that cover the abdomen.
const ABDOMINAL_BODY_PARTS: [&str; 11] = [
    "ABD", "PELV", "LIVER", "PANCREA", "KIDNEY", "RENAL", "TORSO", "TRUNK", "WHOLE", "BODY", "CAP",
];

/// Lowest value an abdominal CT in Hounsfield units must reach: air outside the body and in
/// the bowel is about −1000 HU, so a volume that never goes below this is not such a CT
/// (an MR, a PET, an image in other units).
const AIR_BELOW_HU: f64 = -500.0;

/// `Ok` when `volume` is something the models read: a CT (or a file that does not say) of
/// the abdomen (or a body part left blank), in Hounsfield units. Otherwise why not, naming
/// the field, so a case is reported as not analysed instead of as "no lesion found".
pub fn check_analysable(volume: &Volume) -> Result<(), InferError> {
    let info = volume.info();
    let modality = info.modality.trim();
    if !modality.is_empty() && !modality.eq_ignore_ascii_case("CT") {
        return Err(InferError::NotAnalysable(format!(
            "the series is {modality} (Modality, 0008,0060); the models read abdominal CT"
        )));
    }
    let body_part = info.body_part.trim().to_ascii_uppercase();
    if !body_part.is_empty()
        && !ABDOMINAL_BODY_PARTS
            .iter()
            .any(|part| body_part.contains(part))
    {
        return Err(InferError::NotAnalysable(format!(
            "Body Part Examined (0018,0015) is {body_part}; the models read CT of the abdomen"
        )));
    }
    let stats = volume.value_stats();
    if stats.min > AIR_BELOW_HU {
        return Err(InferError::NotAnalysable(format!(
            "no voxel is below {AIR_BELOW_HU} HU (the lowest is {:.0}): air reads about −1000 HU on CT, so these values are not Hounsfield units of a CT",
            stats.min
        )));
    }
    Ok(())
}

/// Runs diagnosis → key slice → verification → consistency on `volume`. A verifier failure
/// or a missing key slice leaves the prediction without a local description (with a
/// warning); only a diagnoser failure is an error.
pub fn run_pipeline(
    case_id: &str,
    volume: &Volume,
    diagnoser: &dyn Diagnoser,
    verifier: Option<&dyn Verifier>,
) -> Result<Prediction, InferError> {
    check_analysable(volume)?;
    let started = Instant::now();
    let mut diagnosis = diagnoser.diagnose(volume)?;
    let diagnose_ms = started.elapsed().as_secs_f64() * 1000.0;
    let mut warnings = diagnosis.warnings.clone();
    // An answer of megabytes is cut before it is read.
    warnings.extend(bounded_answer(&mut diagnosis.report, "the model's answer"));
    if let Some(unfamiliar) = &diagnosis.out_of_domain {
        warnings.insert(0, unfamiliar.sentence());
    }
    let read = read_report(&diagnosis.report);
    for unread in &read.unread {
        warnings.push(format!(
            "report sentence not understood (kept in the report): {:?}",
            unread.text
        ));
    }
    for problem in &read.problems {
        warnings.push(format!("report evidence not used: {problem}"));
    }
    let lesion_evidence = lesion_evidence(&diagnosis, &read);
    let mut findings = read.findings;
    // An answer listing lesions by the thousand is capped, the organ named, before anything
    // downstream (the window, the SR) has to hold it.
    warnings.extend(cap_lesions(&mut findings));
    // The key slice the model named explicitly wins over one written in its report.
    let key_index = diagnosis
        .key_slice
        .or_else(|| findings.key_slice.as_ref().map(|key| key.index));
    let [_, _, slices] = volume.dims();
    let key_index = match key_index {
        Some(index) if (index as usize) < slices => Some(index),
        Some(index) => {
            warnings.push(format!(
                "the model's key slice {index} is outside the volume (0–{}); ignored",
                slices.saturating_sub(1)
            ));
            None
        }
        None => {
            warnings.push("the model named no key slice; nothing to verify".into());
            None
        }
    };
    let slice_box = checked_evidence(
        &mut findings,
        diagnosis.slice_box.clone(),
        key_index,
        volume.dims(),
        &mut warnings,
    );
    let key_slice = key_index.map(|index| PredictionKeySlice::of(volume, index));
    let verify_started = Instant::now();
    let Verified {
        local_description,
        local_findings,
        consistency: consistency_score,
        lesion_checks,
    } = match (verifier, key_index) {
        (Some(verifier), Some(index)) => verify(
            volume,
            verifier,
            (index, slice_box.as_ref()),
            &lesion_evidence,
            &findings,
            &mut warnings,
        ),
        _ => Verified::default(),
    };
    let verify_ms = verify_started.elapsed().as_secs_f64() * 1000.0;
    let mut prediction = Prediction {
        version: PREDICTION_VERSION,
        case_id: case_id.to_string(),
        diagnoser: diagnoser.model_id(),
        verifier: verifier.map(Verifier::model_id),
        report: diagnosis.report,
        findings,
        key_slice,
        slice_box,
        input: diagnosis.input,
        video_refused: diagnosis.video_refused,
        local_description,
        local_findings,
        consistency: consistency_score,
        lesion_checks,
        timings_ms: Timings {
            diagnose: round_ms(diagnose_ms),
            verify: round_ms(verify_ms),
            total: round_ms(started.elapsed().as_secs_f64() * 1000.0),
        },
        warnings,
        out_of_domain: diagnosis.out_of_domain,
        stored: None,
        images: Some(keyslice_core::prediction::ImageBinding::of(volume)),
    };
    prediction.bound();
    Ok(prediction)
}

/// Each lesion's own evidence: as the model gave it, else as its report's evidence lines give
/// it (what a vision-language model writes).
fn lesion_evidence(
    diagnosis: &Diagnosis,
    read: &keyslice_core::findings::ReadReport,
) -> Vec<LesionEvidence> {
    if diagnosis.lesions.is_empty() {
        read.lesion_evidence
            .iter()
            .map(|line| LesionEvidence {
                organ: line.organ,
                lesion: line.lesion,
                key_slice: line.key_slice,
                slice_box: line.slice_box.clone(),
                axes: None,
                mask: None,
            })
            .collect()
    } else {
        diagnosis.lesions.clone()
    }
}

/// What verifying an answer gave: the key slice's description, read, the consistency per
/// finding, and each lesion read on its own slice.
#[derive(Default)]
struct Verified {
    local_description: Option<String>,
    local_findings: Option<Findings>,
    consistency: Option<keyslice_core::scoring::Consistency>,
    lesion_checks: Vec<LesionCheck>,
}

/// The verifier on the answer's key slice with its box (`main`), then on each lesion's own
/// slice, and the consistency of `findings` with what it said; a failure is a warning.
fn verify(
    volume: &Volume,
    verifier: &dyn Verifier,
    main: (u32, Option<&SliceBox>),
    lesions: &[LesionEvidence],
    findings: &Findings,
    warnings: &mut Vec<String>,
) -> Verified {
    let (index, slice_box) = main;
    if index as usize >= volume.dims()[2] {
        return Verified::default();
    }
    match verifier.describe_claim(volume, index, slice_box) {
        Ok(mut text) => {
            warnings.extend(bounded_answer(&mut text, "the verifier's answer"));
            let local = read_report(&text);
            for unread in &local.unread {
                warnings.push(format!(
                    "local description sentence not understood: {:?}",
                    unread.text
                ));
            }
            let lesion_checks =
                verify_lesions(volume, verifier, lesions, (main, &text), findings, warnings);
            let views: Vec<(Organ, usize, Findings)> = lesion_checks
                .iter()
                .map(|check| {
                    (
                        check.organ,
                        check.lesion,
                        read_report(&check.local_description).findings,
                    )
                })
                .collect();
            let views: Vec<(Organ, usize, &Findings)> = views
                .iter()
                .map(|(organ, lesion, view)| (*organ, *lesion, view))
                .collect();
            Verified {
                consistency: Some(consistency_with_views(
                    findings,
                    &local.findings,
                    &views,
                    SizeTolerance::default(),
                )),
                local_findings: Some(local.findings),
                local_description: Some(text),
                lesion_checks,
            }
        }
        Err(error) => {
            warnings.push(format!("verifier failed: {error}"));
            Verified::default()
        }
    }
}

/// Each lesion the diagnoser named evidence of its own for, verified on its own key slice and
/// box (up to [`MAX_LESION_VIEWS`]); a lesion whose evidence is the answer's key slice with its
/// box (`main`) takes that reading (`main_text`), a slice outside the volume or a box that
/// cannot be used is named in `warnings`, and a slice asked twice is read once.
fn verify_lesions(
    volume: &Volume,
    verifier: &dyn Verifier,
    lesions: &[LesionEvidence],
    (main, main_text): ((u32, Option<&SliceBox>), &str),
    findings: &Findings,
    warnings: &mut Vec<String>,
) -> Vec<LesionCheck> {
    let dims = volume.dims();
    let mut checks: Vec<LesionCheck> = Vec::new();
    for evidence in lesions.iter().take(MAX_LESION_VIEWS) {
        if evidence.lesion >= findings.organ(evidence.organ).lesions.len() {
            continue;
        }
        if evidence.key_slice as usize >= dims[2] {
            warnings.push(format!(
                "{} lesion {}: its key slice {} is outside the volume; not verified",
                evidence.organ,
                evidence.lesion + 1,
                evidence.key_slice
            ));
            continue;
        }
        let mut own = keyslice_core::findings::Evidence {
            key_slice: evidence.key_slice,
            slice_box: evidence.slice_box.clone(),
            slices: None,
        }
        .as_findings();
        if let Some(problem) =
            box_problem(&own, dims).or_else(|| box_too_large(&own, dims[0], dims[1]))
        {
            warnings.push(format!(
                "{} lesion {}: its box is not used: {problem}",
                evidence.organ,
                evidence.lesion + 1
            ));
            own.slice_box = None;
        }
        // Axes are drawn only where they lie on the slice.
        let axes = evidence.axes.filter(|axes| axes.fits(dims[0], dims[1]));
        // The answer's own key slice and box, already read, is this lesion's evidence.
        if (evidence.key_slice, own.slice_box.as_ref()) == main {
            checks.push(LesionCheck {
                organ: evidence.organ,
                lesion: evidence.lesion,
                key_slice: evidence.key_slice,
                slice_box: own.slice_box,
                sop_instance_uid: PredictionKeySlice::of(volume, evidence.key_slice)
                    .sop_instance_uid,
                axes,
                local_description: main_text.to_string(),
                mask: evidence.mask.clone(),
            });
            continue;
        }
        let asked = checks.iter().find(|check| {
            check.key_slice == evidence.key_slice && check.slice_box == own.slice_box
        });
        let text = if let Some(asked) = asked {
            asked.local_description.clone()
        } else {
            match verifier.describe_claim(volume, evidence.key_slice, own.slice_box.as_ref()) {
                Ok(mut text) => {
                    warnings.extend(bounded_answer(&mut text, "the verifier's answer"));
                    text
                }
                Err(error) => {
                    warnings.push(format!("verifier failed on a lesion's own slice: {error}"));
                    continue;
                }
            }
        };
        checks.push(LesionCheck {
            organ: evidence.organ,
            lesion: evidence.lesion,
            key_slice: evidence.key_slice,
            slice_box: own.slice_box,
            sop_instance_uid: PredictionKeySlice::of(volume, evidence.key_slice).sop_instance_uid,
            axes,
            local_description: text,
            mask: evidence.mask.clone(),
        });
    }
    checks
}

/// The box the diagnoser gave (explicitly, else in its report) and its lesion slice range,
/// checked against the volume and the key slice: a faulty one is dropped from `findings` with
/// the reason in `warnings`, never used as it is. Returns the box to show and verify.
fn checked_evidence(
    findings: &mut Findings,
    given_box: Option<SliceBox>,
    key_index: Option<u32>,
    dims: [usize; 3],
    warnings: &mut Vec<String>,
) -> Option<SliceBox> {
    let mut evidence = Findings {
        key_slice: key_index.map(|index| KeySlice {
            index,
            z_mm: None,
            sop_instance_uid: None,
            span: None,
        }),
        slice_box: given_box.or_else(|| findings.slice_box.clone()),
        lesion_slices: findings.lesion_slices,
        ..Findings::default()
    };
    if let Some(problem) =
        box_problem(&evidence, dims).or_else(|| box_too_large(&evidence, dims[0], dims[1]))
    {
        warnings.push(format!("the model's box is not used: {problem}"));
        evidence.slice_box = None;
    }
    if let Some(problem) = range_problem(&evidence, dims[2]) {
        warnings.push(format!(
            "the model's lesion slice range is not used: {problem}"
        ));
        evidence.lesion_slices = None;
    }
    findings.slice_box.clone_from(&evidence.slice_box);
    findings.lesion_slices = evidence.lesion_slices;
    evidence.slice_box
}

fn round_ms(ms: f64) -> f64 {
    (ms * 10.0).round() / 10.0
}
