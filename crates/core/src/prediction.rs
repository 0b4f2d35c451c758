//! The `Prediction` record: everything one pipeline run produced for one case, as JSON.
//!
//! ```json
//! {"version": 1, "case_id": "...",
//!  "diagnoser": {"id": "keyslice-tiny", "version": "1"}, "verifier": {...} | null,
//!  "report": "...", "findings": { Findings read from the report, with spans },
//!  "key_slice": {"index": 57, "z_mm": 114.0, "sop_instance_uid": "..."} | null,
//!  "box": {"voxels": [c0, r0, c1, r1], "mm": [...]} | null,
//!  "local_description": "..." | null, "local_findings": { Findings } | null,
//!  "consistency": {"score", "organ", "location", "attenuation", "size"} | null,
//!  "timings_ms": {"diagnose", "verify", "total"}, "warnings": ["..."],
//!  "out_of_domain": {"label", "model", "reasons": ["..."]} | absent,
//!  "stored": {"document", "server", "reviews": [{"reviewer", "stored", "summary", "changes"}]}}
//! ```
//!
//! `stored` is there only when the prediction is an AI result read back from a PACS.
//!
//! `keyslice score --pred` reads these lines directly (`case_id`, `report`, `findings`,
//! `key_slice`, `local_description`).

use serde::{Deserialize, Serialize};

use crate::findings::{Findings, LesionAxes, Organ, SliceBox};
use crate::scoring::Consistency;
use crate::volume::{Volume, Voxels};

/// Version of the record's layout.
pub const PREDICTION_VERSION: u32 = 1;

/// A model's name and version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelId {
    /// Model name (`keyslice-tiny`, a checkpoint folder name, a served model).
    pub id: String,
    /// Version or checkpoint revision.
    pub version: String,
}

/// The key slice as recorded: index, patient z, and the DICOM instance when known.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PredictionKeySlice {
    /// Index along the volume's slice axis (0 = first, inferior for axial CT).
    pub index: u32,
    /// Patient z of the slice (LPS, mm).
    pub z_mm: f64,
    /// SOP Instance UID of the slice when the volume came from DICOM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sop_instance_uid: Option<String>,
}

impl PredictionKeySlice {
    /// Slice `index` of `volume`, with its z and DICOM instance.
    #[must_use]
    pub fn of(volume: &Volume, index: u32) -> Self {
        let z_mm = volume
            .patient_from_voxel()
            .apply([0.0, 0.0, f64::from(index)])[2];
        Self {
            index,
            z_mm: (z_mm * 100.0).round() / 100.0,
            sop_instance_uid: volume
                .slices()
                .get(index as usize)
                .and_then(|slice| slice.sop_instance_uid.clone()),
        }
    }
}

/// Milliseconds spent in each stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// The diagnoser.
    pub diagnose: f64,
    /// The verifier.
    pub verify: f64,
    /// The whole pipeline.
    pub total: f64,
}

/// Where a prediction came from when it was not made on this machine: an AI result stored
/// on a PACS, with the corrections reviewers stored beside it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredResult {
    /// The document it was read from ("SR of 2026-12-05 11:18 UTC").
    pub document: String,
    /// The PACS (its DICOMweb root URL, without credentials).
    pub server: String,
    /// Each reviewer's newest stored correction, by reviewer name.
    #[serde(default)]
    pub reviews: Vec<StoredReview>,
}

/// One reviewer's correction as stored on the PACS.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredReview {
    /// The reviewer (the SR's person observer).
    pub reviewer: String,
    /// When it was stored ("2026-12-05 11:22 UTC").
    pub stored: String,
    /// Presence per organ with lesion sizes, and the key slice, on one line.
    pub summary: String,
    /// What the reviewer changed from the stored AI result, one phrase each
    /// ([`crate::findings::summary::changes`]); empty when they accepted it as it was.
    #[serde(default)]
    pub changes: Vec<String>,
}

/// A diagnoser's word that the CT is outside what it was trained on: its report is kept
/// but means nothing for this CT. The embedded demo model says so for any CT that does not
/// look like its training phantoms.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutOfDomain {
    /// What every view shows: [`OutOfDomain::LABEL`].
    pub label: String,
    /// The model that said so.
    pub model: String,
    /// What about the CT is unlike its training data, one phrase each.
    pub reasons: Vec<String>,
}

impl OutOfDomain {
    /// The label of a case the demo model is out of its depth on.
    pub const LABEL: &'static str = "demo model: not meaningful for this CT";

    /// `model`'s word that the CT is unlike its training data, for `reasons`.
    #[must_use]
    pub fn new(model: &str, reasons: Vec<String>) -> Self {
        Self {
            label: Self::LABEL.to_string(),
            model: model.to_string(),
            reasons,
        }
    }

    /// The label with the reasons, on one line. Always [`Self::LABEL`], whatever a record
    /// read from a file says its label is.
    #[must_use]
    pub fn sentence(&self) -> String {
        format!("{}: {}", Self::LABEL, self.reasons.join("; "))
    }
}

/// One claimed lesion verified on its own key slice: the evidence the diagnoser named for it
/// and what the verifier said of that slice alone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LesionCheck {
    /// The organ.
    pub organ: Organ,
    /// The lesion's index among the organ's lesions in the report.
    pub lesion: usize,
    /// Its key slice.
    pub key_slice: u32,
    /// Its box on that slice, when it has a usable one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice_box: Option<SliceBox>,
    /// The DICOM instance of that slice, when the volume came from DICOM (so a document can
    /// draw the lesion on its own image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sop_instance_uid: Option<String>,
    /// Its long and short axes on that slice, when the diagnoser measured them there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axes: Option<LesionAxes>,
    /// The verifier's description of that slice.
    pub local_description: String,
    /// The lesion's 3D mask as the model found it, on the CT's grid: the starting mask a
    /// reviewer corrects (a mask of another grid is never applied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<crate::volume::mask::LesionMask>,
}

/// The longest model answer (a report or a local description) kept, in bytes: a report is a
/// page (1024 tokens are about 4 KB); an answer of megabytes is a broken or hostile server,
/// and its tail is cut before anything (the reader, the window, an SR) has to hold it.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The most warnings a prediction keeps (an unreadable answer of thousands of lines would
/// otherwise give one each); the last says how many more there were.
pub const MAX_WARNINGS: usize = 50;

/// `text` cut to at most [`MAX_ANSWER_BYTES`] at a line end (else a character boundary); with
/// a sentence saying so, naming `what` and its length, when cut.
#[must_use]
pub fn bounded_answer(text: &mut String, what: &str) -> Option<String> {
    if text.len() <= MAX_ANSWER_BYTES {
        return None;
    }
    let length = text.len();
    let mut end = MAX_ANSWER_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if let Some(line_end) = text[..end].rfind('\n') {
        end = line_end + 1;
    }
    text.truncate(end);
    Some(format!(
        "{what} is {length} bytes, longer than any report; only its first {end} bytes are read"
    ))
}

/// `warnings` cut to [`MAX_WARNINGS`], the last saying how many were left out.
pub fn bounded_warnings(warnings: &mut Vec<String>) {
    if warnings.len() > MAX_WARNINGS {
        let more = warnings.len() - (MAX_WARNINGS - 1);
        warnings.truncate(MAX_WARNINGS - 1);
        warnings.push(format!("… and {more} more warnings"));
    }
}

/// One case's prediction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// [`PREDICTION_VERSION`].
    pub version: u32,
    /// Case identifier.
    pub case_id: String,
    /// Who wrote the report.
    pub diagnoser: ModelId,
    /// Who wrote the local description.
    pub verifier: Option<ModelId>,
    /// The report as the model wrote it (kept even when partly unreadable).
    pub report: String,
    /// What the findings reader took from it.
    pub findings: Findings,
    /// The key evidence slice.
    pub key_slice: Option<PredictionKeySlice>,
    /// The box on the key slice.
    #[serde(rename = "box")]
    pub slice_box: Option<SliceBox>,
    /// How the CT was given to the diagnoser (`"video (32 frames)"`, or images and why),
    /// when the backend records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// Why the server refused the CT as a video, when it did and the CT went as images
    /// instead (a model trained on videos was not trained on images).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video_refused: Option<String>,
    /// The verifier's description of the key slice.
    pub local_description: Option<String>,
    /// What the findings reader took from the local description.
    pub local_findings: Option<Findings>,
    /// Agreement of the report with the local description, per attribute.
    pub consistency: Option<Consistency>,
    /// The claimed lesions the diagnoser named evidence of their own for, each verified on
    /// its own key slice (the lesion on the key slice above is not repeated).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lesion_checks: Vec<LesionCheck>,
    /// Time per stage.
    pub timings_ms: Timings,
    /// Everything odd: unread sentences, a key slice outside the volume, a failed verifier.
    pub warnings: Vec<String>,
    /// Set when the diagnoser says the CT is outside its training data: the report stands
    /// but means nothing; never shown as agreement, never published without being forced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_of_domain: Option<OutOfDomain>,
    /// The PACS document this prediction was read from, with the reviews stored beside it;
    /// `None` for a prediction made here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored: Option<StoredResult>,
    /// The images it was made on; `None` in a prediction written before they were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<ImageBinding>,
}

/// The images a prediction was made on: which series and what it held. A case's folder can
/// change under it (a larger series lands in the same study folder, a file is replaced); a
/// prediction, its review and its export belong to these images, and are refused with
/// another.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageBinding {
    /// DICOM Series Instance UID; empty for NIfTI.
    pub series_uid: String,
    /// Columns, rows, slices.
    pub dims: [usize; 3],
    /// SHA-256 (hex) of the voxel values, the patient geometry and each slice's SOP Instance
    /// UID.
    pub digest: String,
    /// What the case's files looked like when the prediction was saved in a workspace: a
    /// cheap first look (no image read) for the worklist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<FilesStamp>,
}

/// A case's image files at a glance: how many, their bytes in all, the latest change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilesStamp {
    /// Regular files.
    pub count: u64,
    /// Their sizes, summed.
    pub bytes: u64,
    /// The latest modification time among them, in seconds since the epoch.
    pub modified: u64,
}

impl ImageBinding {
    /// The binding of `volume`.
    #[must_use]
    pub fn of(volume: &Volume) -> Self {
        use sha2::{Digest as _, Sha256};
        use std::fmt::Write as _;
        let mut hasher = Sha256::new();
        for dim in volume.dims() {
            hasher.update((dim as u64).to_le_bytes());
        }
        let affine = volume.patient_from_voxel();
        for value in affine.linear.iter().flatten().chain(&affine.translation) {
            hasher.update(value.to_le_bytes());
        }
        match volume.voxels() {
            Voxels::I16(values) => {
                hasher.update([0]);
                for chunk in values.chunks(1 << 16) {
                    let bytes: Vec<u8> = chunk.iter().flat_map(|v| v.to_le_bytes()).collect();
                    hasher.update(&bytes);
                }
            }
            Voxels::F32(values) => {
                hasher.update([1]);
                for chunk in values.chunks(1 << 16) {
                    let bytes: Vec<u8> = chunk.iter().flat_map(|v| v.to_le_bytes()).collect();
                    hasher.update(&bytes);
                }
            }
        }
        for slice in volume.slices() {
            hasher.update(
                slice
                    .sop_instance_uid
                    .as_deref()
                    .unwrap_or_default()
                    .as_bytes(),
            );
            hasher.update([0]);
        }
        let digest = hasher
            .finalize()
            .iter()
            .fold(String::with_capacity(64), |mut hex, byte| {
                let _ = write!(hex, "{byte:02x}");
                hex
            });
        Self {
            series_uid: volume.info().series_uid.clone(),
            dims: volume.dims(),
            digest,
            files: None,
        }
    }

    /// What differs between these images and `volume`, in words; `None` when they are the
    /// same.
    #[must_use]
    pub fn changed(&self, volume: &Volume) -> Option<String> {
        let now = Self::of(volume);
        if (&now.series_uid, now.dims, &now.digest) == (&self.series_uid, self.dims, &self.digest) {
            return None;
        }
        let [c, r, s] = self.dims;
        let [c2, r2, s2] = now.dims;
        Some(if now.series_uid != self.series_uid {
            format!(
                "it was analysed on series {} and the images are now series {}",
                if self.series_uid.is_empty() {
                    "(none)"
                } else {
                    &self.series_uid
                },
                if now.series_uid.is_empty() {
                    "(none)"
                } else {
                    &now.series_uid
                }
            )
        } else if now.dims != self.dims {
            format!(
                "it was analysed on {c} × {r} × {s} voxels and the images are now {c2} × {r2} × {s2}"
            )
        } else {
            "its images hold other values than when it was analysed (a file was replaced or changed)".to_string()
        })
    }
}

impl Prediction {
    /// This prediction within bounds, however it was written (an older version, a hostile
    /// server, a hand-edited file): answers cut to [`MAX_ANSWER_BYTES`], at most
    /// [`crate::findings::evidence::MAX_LESIONS_PER_ORGAN`] lesions per organ and
    /// [`MAX_LESION_CHECKS`] lesion checks, at most [`MAX_WARNINGS`] warnings. What was cut
    /// is said in its warnings.
    pub fn bound(&mut self) {
        let mut said = Vec::new();
        said.extend(bounded_answer(&mut self.report, "the report"));
        if let Some(local) = &mut self.local_description {
            said.extend(bounded_answer(local, "the local description"));
        }
        for check in &mut self.lesion_checks {
            said.extend(bounded_answer(
                &mut check.local_description,
                "a lesion's local description",
            ));
            // Axes that are not numbers on any image are not drawn anywhere.
            if check
                .axes
                .is_some_and(|axes| !axes.fits(MAX_IMAGE_PIXELS, MAX_IMAGE_PIXELS))
            {
                said.push(format!(
                    "{} lesion {}: its axes lie outside any image and are left out",
                    check.organ,
                    check.lesion + 1
                ));
                check.axes = None;
            }
        }
        said.extend(crate::findings::evidence::cap_lesions(&mut self.findings));
        if let Some(local) = &mut self.local_findings {
            crate::findings::evidence::cap_lesions(local);
        }
        if self.lesion_checks.len() > MAX_LESION_CHECKS {
            said.push(format!(
                "{} lesion checks; the first {MAX_LESION_CHECKS} are kept",
                self.lesion_checks.len()
            ));
            self.lesion_checks.truncate(MAX_LESION_CHECKS);
        }
        if !said.is_empty() {
            self.warnings.splice(0..0, said);
        }
        bounded_warnings(&mut self.warnings);
    }
}

/// The most pixels a DICOM image has along a side (Rows and Columns are 16-bit).
const MAX_IMAGE_PIXELS: usize = 65_535;

/// The most lesions verified on views of their own per prediction.
pub const MAX_LESION_CHECKS: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hostile_answer_is_cut_to_bounds_and_says_so() {
        let lines = (1..=60_000)
            .map(|n| format!("Liver lesion {n}: Size: 1.0 x 1.0 cm.\n"))
            .collect::<Vec<_>>()
            .concat();
        let mut report = lines.clone();
        let said = bounded_answer(&mut report, "the report").expect("cut");
        assert!(report.len() <= MAX_ANSWER_BYTES && report.ends_with('\n'));
        assert!(said.contains(&lines.len().to_string()), "{said}");
        let mut short = "Liver: no tumor.".to_string();
        assert_eq!(bounded_answer(&mut short, "the report"), None);
        // A multi-byte character at the cut is never split.
        let mut wide = "é".repeat(MAX_ANSWER_BYTES);
        let _ = bounded_answer(&mut wide, "x");
        assert!(wide.chars().all(|c| c == 'é'));

        let mut warnings: Vec<String> = (0..1000).map(|n| format!("w{n}")).collect();
        bounded_warnings(&mut warnings);
        assert_eq!(warnings.len(), MAX_WARNINGS);
        assert_eq!(
            warnings.last().map(String::as_str),
            Some("… and 951 more warnings")
        );
    }

    /// Axes read from a predictions file that lie on no image (huge, negative) are left out
    /// with a warning naming the lesion; axes on an image stay.
    #[test]
    fn axes_off_any_image_are_left_out_and_said() {
        let check = |long: [[f64; 2]; 2]| {
            serde_json::json!({
                "organ": "liver", "lesion": 0, "key_slice": 3, "local_description": "",
                "axes": {"long": long, "short": [[1.0, 1.0], [2.0, 2.0]]}
            })
        };
        let mut prediction: Prediction = serde_json::from_value(serde_json::json!({
            "version": 1, "case_id": "c", "diagnoser": {"id": "m", "version": "1"},
            "verifier": null, "report": "", "findings": {"organs": {}}, "key_slice": null,
            "box": null, "local_description": null, "local_findings": null,
            "consistency": null,
            "lesion_checks": [check([[1.0, 1.0], [1e12, 2.0]]), check([[-40.0, 0.0], [1.0, 1.0]]),
                              check([[1.0, 1.0], [20.0, 9.5]])],
            "timings_ms": {"diagnose": 0.0, "verify": 0.0, "total": 0.0}, "warnings": []
        }))
        .expect("a prediction");
        prediction.bound();
        let kept: Vec<bool> = prediction
            .lesion_checks
            .iter()
            .map(|check| check.axes.is_some())
            .collect();
        assert_eq!(kept, vec![false, false, true]);
        assert_eq!(
            prediction
                .warnings
                .iter()
                .filter(|w| w.contains("liver lesion 1: its axes lie outside any image"))
                .count(),
            2,
            "{:?}",
            prediction.warnings
        );
    }
}
