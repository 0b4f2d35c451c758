//! AI results and reviewer corrections as DICOM documents a PACS keeps and any viewer shows.
//!
//! One analysed case becomes two objects in the source study (the IHE AI Results profile):
//! - a **Comprehensive 3D SR** following TID 1500 *Imaging Measurement Report*
//!   ([`write::result_sr`]): per organ a measurement group with the tumor presence (present,
//!   absent, equivocal), per lesion a group with long × short axis in cm (UCUM), location and
//!   attenuation, and a key-evidence group (TID 1410) with the box on the key slice as a
//!   SCOORD selected from the source CT image, the verifier's description and the
//!   consistency with its per-attribute terms; the model is the device observer and, in each
//!   group, the algorithm name and version (TID 4019). Comprehensive 3D rather than Enhanced
//!   SR: it is what highdicom and dcmqi write for TID 1500, and it can carry the lesion's 3D
//!   extent as SCOORD3D next to the 2D box.
//! - a **Key Object Selection** document titled (113000, DCM, "Of Interest")
//!   ([`write::key_object_selection`]) that references the key slice, so a PACS viewer jumps
//!   to the image the report rests on.
//!
//! A reviewer's correction is a new SR of the same shape whose observer is the reviewer
//! (a person), in its own series: the AI's document is never replaced. A reader study's read
//! is one too ([`write::study_read_sr`]), marked as research by the Clinical Trial attributes,
//! never verified, and read back apart from clinical reviews. [`read`] gives either
//! kind back as a [`CaseResult`].

pub mod codes;
pub mod read;
pub mod tree;
pub mod write;

use std::path::Path;

use dicom_dictionary_std::{tags, uids};
use keyslice_core::findings::{Findings, LesionAxes, Organ, SliceBox};
use keyslice_core::prediction::{ModelId, OutOfDomain, Prediction, StoredResult};
use keyslice_core::scoring::Consistency;

use crate::PacsError;

/// SOP Class UID of Comprehensive 3D SR Storage.
pub const COMPREHENSIVE_3D_SR: &str = uids::COMPREHENSIVE3_DSR_STORAGE;
/// SOP Class UID of Key Object Selection Document Storage.
pub const KEY_OBJECT_SELECTION: &str = uids::KEY_OBJECT_SELECTION_DOCUMENT_STORAGE;
/// SOP Class UID of CT Image Storage (the default for a key slice of unknown class).
pub const CT_IMAGE: &str = uids::CT_IMAGE_STORAGE;

/// Who made a document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observer {
    /// The model (device observer).
    Device {
        /// The model.
        model: ModelId,
    },
    /// A reviewer (person observer), by the name they review under.
    Person {
        /// The reviewer's name.
        name: String,
    },
}

/// What marks a document as one read of a reader study: research, never a clinical review.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StudyReadMark {
    /// The reader study (its name: the clinical trial protocol).
    pub study: String,
    /// The arm read in.
    pub arm: String,
    /// The reader's session, from 0.
    pub session: usize,
    /// The case, as the study names it.
    pub case: String,
}

/// One case's result as an SR says it: the AI's, or a reviewer's correction of it.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseResult {
    /// Who made it.
    pub observer: Observer,
    /// The model whose result this is (for a correction: the model that was corrected).
    pub algorithm: ModelId,
    /// The verifier model, when there was one.
    pub verifier: Option<ModelId>,
    /// Presence per organ, lesions, the key slice (index and SOP Instance UID) and its box.
    pub findings: Findings,
    /// The report text, when the document carries it.
    pub report: Option<String>,
    /// The verifier's description of the key slice.
    pub local_description: Option<String>,
    /// Report-evidence consistency.
    pub consistency: Option<Consistency>,
    /// Set when the model said the CT is unlike what it was trained on: the result means
    /// nothing for this CT, and every document and view of it says so.
    pub out_of_domain: Option<OutOfDomain>,
    /// The lesions that have an image of their own (the slice their evidence names, with a
    /// box): each is drawn there in the SR, as its own planar measurement group.
    pub lesion_images: Vec<LesionImage>,
}

/// One lesion's own image: the slice its evidence names and its box there.
#[derive(Clone, Debug, PartialEq)]
pub struct LesionImage {
    /// The organ.
    pub organ: Organ,
    /// The lesion's index among the organ's lesions.
    pub lesion: usize,
    /// The slice index.
    pub slice: u32,
    /// The slice's SOP Instance UID.
    pub sop_instance_uid: String,
    /// The box on it, pixel corners (inclusive).
    pub slice_box: SliceBox,
    /// The lesion's long and short axes on it, when they were measured there and still
    /// stand for the lesion's size.
    pub axes: Option<LesionAxes>,
}

impl LesionImage {
    /// The images of `findings`' lesions among `images`: one per lesion that still exists,
    /// in organ and lesion order.
    fn kept(images: &[Self], findings: &Findings) -> Vec<Self> {
        let mut kept: Vec<Self> = Vec::new();
        for image in images {
            let organ = findings.organ(image.organ);
            if organ.tumor.as_positive()
                && image.lesion < organ.lesions.len()
                && !kept
                    .iter()
                    .any(|k| (k.organ, k.lesion) == (image.organ, image.lesion))
            {
                kept.push(image.clone());
            }
        }
        kept.sort_by_key(|image| (image.organ, image.lesion));
        kept
    }
}

impl Observer {
    /// Who, as one line: `device:MODEL VERSION` or `person:NAME`.
    #[must_use]
    pub fn key(&self) -> String {
        match self {
            Self::Device { model } => format!("device:{} {}", model.id, model.version),
            Self::Person { name } => format!("person:{name}"),
        }
    }
}

impl CaseResult {
    /// What the document says, as one line of text for its UIDs ([`content_uid`]): who made
    /// it, the model, the findings and the report. Two documents with the same content key say
    /// the same thing.
    #[must_use]
    pub fn content_key(&self) -> String {
        // Findings and ModelId serialise to JSON without fail (plain structs and enums).
        let findings = serde_json::to_string(&self.findings).unwrap_or_default();
        let images: Vec<String> = self
            .lesion_images
            .iter()
            .map(|image| {
                format!(
                    "{}:{}:{}:{}:{:?}:{:?}",
                    image.organ.key(),
                    image.lesion,
                    image.slice,
                    image.sop_instance_uid,
                    image.slice_box.voxels,
                    image.axes.map(|axes| [axes.long, axes.short])
                )
            })
            .collect();
        format!(
            "{}|{} {}|{findings}|{}|{}",
            self.observer.key(),
            self.algorithm.id,
            self.algorithm.version,
            self.report.as_deref().unwrap_or(""),
            images.join(",")
        )
    }

    /// The AI result of a prediction.
    #[must_use]
    pub fn from_prediction(prediction: &Prediction) -> Self {
        let mut findings = prediction.findings.without_spans();
        findings.key_slice =
            prediction
                .key_slice
                .as_ref()
                .map(|key| keyslice_core::findings::KeySlice {
                    index: key.index,
                    z_mm: Some(key.z_mm),
                    sop_instance_uid: key.sop_instance_uid.clone(),
                    span: None,
                });
        // The box goes as pixel corners on the key slice (its millimetres follow from the
        // image's geometry and are not repeated).
        findings.slice_box = prediction.slice_box.as_ref().map(|slice_box| SliceBox {
            voxels: slice_box.voxels,
            mm: None,
        });
        // A document never says "no tumor" beside a lesion, nor lists more lesions than a
        // report can (an answer written before the cap).
        findings.drop_contradictions();
        let _ = keyslice_core::findings::evidence::cap_lesions(&mut findings);
        let images: Vec<LesionImage> = prediction
            .lesion_checks
            .iter()
            .filter_map(|check| {
                Some(LesionImage {
                    organ: check.organ,
                    lesion: check.lesion,
                    slice: check.key_slice,
                    sop_instance_uid: check.sop_instance_uid.clone()?,
                    slice_box: SliceBox {
                        voxels: check.slice_box.as_ref()?.voxels,
                        mm: None,
                    },
                    axes: check.axes,
                })
            })
            .collect();
        let lesion_images = LesionImage::kept(&images, &findings);
        // A model's name and version name its server; one recorded before secrets were kept
        // out of predictions never carries them into a document.
        let redacted = |model: &ModelId| ModelId {
            id: keyslice_io::secrets::redact(&model.id),
            version: keyslice_io::secrets::redact(&model.version),
        };
        Self {
            observer: Observer::Device {
                model: redacted(&prediction.diagnoser),
            },
            algorithm: redacted(&prediction.diagnoser),
            verifier: prediction.verifier.as_ref().map(redacted),
            findings,
            report: Some({
                // A document holds a report, never megabytes of a broken answer.
                let mut report = prediction.report.clone();
                let _ = keyslice_core::prediction::bounded_answer(&mut report, "the report");
                report
            }),
            local_description: prediction.local_description.clone(),
            consistency: prediction.consistency.clone(),
            out_of_domain: prediction.out_of_domain.clone(),
            lesion_images,
        }
    }

    /// The AI result as a prediction of case `case_id` (to show a stored result in the
    /// viewer as if it had just been analysed), marked with where it was stored.
    #[must_use]
    pub fn to_prediction(&self, case_id: &str, stored: StoredResult) -> Prediction {
        let key_slice = self.findings.key_slice.as_ref().map(|key| {
            keyslice_core::prediction::PredictionKeySlice {
                index: key.index,
                z_mm: key.z_mm.unwrap_or_default(),
                sop_instance_uid: key.sop_instance_uid.clone(),
            }
        });
        let mut findings = self.findings.clone();
        findings.key_slice = None;
        findings.slice_box = None;
        Prediction {
            version: keyslice_core::prediction::PREDICTION_VERSION,
            case_id: case_id.to_string(),
            diagnoser: self.algorithm.clone(),
            verifier: self.verifier.clone(),
            report: self.report.clone().unwrap_or_default(),
            findings,
            key_slice,
            slice_box: self.findings.slice_box.clone(),
            input: None,
            video_refused: None,
            local_findings: self
                .local_description
                .as_deref()
                .map(|text| keyslice_core::findings::read_report(text).findings),
            local_description: self.local_description.clone(),
            consistency: self.consistency.clone(),
            lesion_checks: Vec::new(),
            timings_ms: keyslice_core::prediction::Timings::default(),
            warnings: Vec::new(),
            out_of_domain: self.out_of_domain.clone(),
            stored: Some(stored),
            images: None,
        }
    }

    /// One line: presence per organ with lesion sizes, and the key slice.
    #[must_use]
    pub fn summary(&self) -> String {
        use keyslice_core::findings::{Organ, TumorPresence};
        let mut parts: Vec<String> = Organ::ALL
            .iter()
            .filter_map(|&organ| {
                let findings = self.findings.organ(organ);
                let word = match findings.tumor {
                    TumorPresence::Yes => "tumor",
                    TumorPresence::No => "no tumor",
                    TumorPresence::Uncertain => "uncertain",
                    TumorPresence::NotMentioned => return None,
                };
                let sizes: Vec<String> = findings
                    .lesions
                    .iter()
                    .filter_map(|lesion| lesion.size)
                    .map(keyslice_core::findings::summary::size_label)
                    .collect();
                Some(if sizes.is_empty() {
                    format!("{organ} {word}")
                } else {
                    format!("{organ} {word} ({})", sizes.join(", "))
                })
            })
            .collect();
        if let Some(key) = &self.findings.key_slice {
            parts.push(format!("key slice {}", key.index));
        }
        parts.join(", ")
    }

    /// A reviewer's corrected findings of the AI result `ai`.
    #[must_use]
    pub fn correction(ai: &Self, reviewer: &str, findings: &Findings) -> Self {
        let mut findings = findings.without_spans();
        if findings.key_slice.is_none() {
            findings.key_slice.clone_from(&ai.findings.key_slice);
        }
        // What the reviewer signs never says "no tumor" beside a lesion.
        findings.drop_contradictions();
        // A lesion the reviewer kept keeps the image its evidence named while that is still
        // its evidence; its axes only while its size is the one they measured.
        let mut lesion_images = LesionImage::kept(&ai.lesion_images, &findings);
        // An image whose slice or box is no longer the lesion's evidence is not its image.
        lesion_images.retain(|image| {
            findings
                .organ(image.organ)
                .lesions
                .get(image.lesion)
                .and_then(|lesion| lesion.evidence.as_ref())
                .is_none_or(|evidence| {
                    evidence.key_slice == image.slice
                        && evidence
                            .slice_box
                            .as_ref()
                            .is_none_or(|slice_box| slice_box.voxels == image.slice_box.voxels)
                })
        });
        for image in &mut lesion_images {
            let size = |findings: &Findings| {
                findings
                    .organ(image.organ)
                    .lesions
                    .get(image.lesion)
                    .and_then(|lesion| lesion.size)
            };
            if size(&findings) != size(&ai.findings) {
                image.axes = None;
            }
        }
        Self {
            observer: Observer::Person {
                name: reviewer.to_string(),
            },
            algorithm: ai.algorithm.clone(),
            verifier: None,
            findings,
            report: None,
            local_description: None,
            out_of_domain: None,
            consistency: None,
            lesion_images,
        }
    }
}

/// The source study's identity, copied into every document so it files with the images.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StudyContext {
    /// Patient's Name.
    pub patient_name: String,
    /// Patient ID.
    pub patient_id: String,
    /// Patient's Birth Date.
    pub patient_birth_date: String,
    /// Patient's Sex.
    pub patient_sex: String,
    /// Study Instance UID.
    pub study_uid: String,
    /// Study Date.
    pub study_date: String,
    /// Study Time.
    pub study_time: String,
    /// Study ID.
    pub study_id: String,
    /// Accession Number.
    pub accession: String,
    /// Referring Physician's Name.
    pub referring_physician: String,
    /// The CT series the key slice is in.
    pub series_uid: String,
    /// SOP Class UID of its images.
    pub image_class_uid: String,
    /// Columns and rows of its images, when the file states them (where a document marks a
    /// slice it has no box on).
    pub image_size: Option<[u32; 2]>,
    /// Frame of Reference UID of the CT series (a segmentation shares it).
    pub frame_of_reference_uid: String,
}

impl StudyContext {
    /// The identity in one image of the study (any file of the CT series).
    pub fn from_file(path: &Path) -> Result<Self, PacsError> {
        let object = dicom_object::OpenFileOptions::new()
            .read_until(tags::PIXEL_DATA)
            .open_file(path)
            .map_err(|source| PacsError::Open {
                path: path.to_path_buf(),
                source: Box::new(source),
            })?;
        let get = |tag| tree::string(&object, tag).unwrap_or_default();
        let context = Self {
            patient_name: get(tags::PATIENT_NAME),
            patient_id: get(tags::PATIENT_ID),
            patient_birth_date: get(tags::PATIENT_BIRTH_DATE),
            patient_sex: get(tags::PATIENT_SEX),
            study_uid: get(tags::STUDY_INSTANCE_UID),
            study_date: get(tags::STUDY_DATE),
            study_time: get(tags::STUDY_TIME),
            study_id: get(tags::STUDY_ID),
            accession: get(tags::ACCESSION_NUMBER),
            referring_physician: get(tags::REFERRING_PHYSICIAN_NAME),
            series_uid: get(tags::SERIES_INSTANCE_UID),
            image_class_uid: get(tags::SOP_CLASS_UID),
            frame_of_reference_uid: get(tags::FRAME_OF_REFERENCE_UID),
            image_size: {
                let size = |tag| get(tag).trim().parse::<u32>().ok().filter(|&n| n > 0);
                size(tags::COLUMNS)
                    .zip(size(tags::ROWS))
                    .map(|(c, r)| [c, r])
            },
        };
        if context.study_uid.is_empty() {
            return Err(PacsError::NoStudyUid(path.to_path_buf()));
        }
        Ok(context)
    }

    /// The first DICOM file of a series folder's identity.
    pub fn from_folder(folder: &Path) -> Result<Self, PacsError> {
        let mut files: Vec<_> = std::fs::read_dir(folder)
            .map_err(|source| PacsError::Cache {
                path: folder.to_path_buf(),
                source,
            })?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.is_file())
            .collect();
        files.sort();
        let mut last_error = None;
        for file in files {
            match Self::from_file(&file) {
                Ok(context) => return Ok(context),
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| PacsError::NoDicomFile(folder.to_path_buf())))
    }
}

pub use keyslice_io::dicom::write::content_uid;

/// The current date and time (UTC) as DICOM `YYYYMMDD` and `HHMMSS`.
#[must_use]
pub fn now_date_time() -> (String, String) {
    keyslice_core::date::dicom_date_time(keyslice_core::date::now_seconds())
}
