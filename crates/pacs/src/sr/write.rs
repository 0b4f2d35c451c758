//! Writes a [`CaseResult`] as a TID 1500 Comprehensive 3D SR, and its key slice as a Key
//! Object Selection document, as DICOM Part 10 bytes (Explicit VR Little Endian, UTF-8).

use dicom_core::{DataElement, VR};
use dicom_dictionary_std::{tags, uids};
use dicom_object::InMemDicomObject;
use dicom_object::meta::FileMetaTableBuilder;
use keyslice_core::findings::{
    KeySlice, Lesion, LesionAxes, Organ, SliceBox, SliceRange, TumorPresence,
};
use keyslice_core::prediction::ModelId;

use super::codes::{self, Code};
use super::tree::{Node, Value, put_item, sequence, sop_reference};
use super::{
    COMPREHENSIVE_3D_SR, CT_IMAGE, CaseResult, KEY_OBJECT_SELECTION, Observer, StudyContext,
    StudyReadMark, content_uid, now_date_time,
};
use crate::PacsError;
use keyslice_io::dicom::write::text;

/// A written document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// SOP Instance UID.
    pub sop_uid: String,
    /// Series Instance UID.
    pub series_uid: String,
    /// SOP Class UID.
    pub class_uid: String,
    /// The Part 10 file.
    pub bytes: Vec<u8>,
}

/// Series Number of the AI result SR.
pub const RESULT_SERIES_NUMBER: i32 = 9901;
/// Series Number of the Key Object Selection.
pub const KEY_IMAGES_SERIES_NUMBER: i32 = 9902;
/// Series Number of reviewers' correction SRs.
pub const REVIEW_SERIES_NUMBER: i32 = 9903;
/// Series Number of a reader study's reads.
pub const STUDY_READ_SERIES_NUMBER: i32 = 9904;

const CONTAINS: &str = "CONTAINS";
const CONCEPT_MOD: &str = "HAS CONCEPT MOD";
const OBS_CONTEXT: &str = "HAS OBS CONTEXT";
const HAS_PROPERTIES: &str = "HAS PROPERTIES";

/// The TID 1500 SR of `result` in `study`, its content dated now.
pub fn result_sr(study: &StudyContext, result: &CaseResult) -> Result<Written, PacsError> {
    result_sr_at(study, result, None)
}

/// The TID 1500 SR of `result` in `study`, its content (and a reviewer's verification) dated
/// `at` (`YYYYMMDD`, `HHMMSS`, UTC): when the review was accepted, not when it was sent.
pub fn result_sr_at(
    study: &StudyContext,
    result: &CaseResult,
    at: Option<(String, String)>,
) -> Result<Written, PacsError> {
    measurement_report(study, result, at, None)
}

/// A reader study's read of a case as a TID 1500 SR by the reader (a person), marked as a
/// research read so no one takes it for a clinical review: it carries the Clinical Trial
/// Subject, Study and Series attributes (the study as the protocol, the case as the subject
/// reading, the session and arm as the time point), its own series, and it is never
/// verified. Its content is dated `at` (when the read was recorded). Its UIDs follow from
/// the study, the arm, the session and what it says: stored twice, it is one document.
pub fn study_read_sr(
    study: &StudyContext,
    result: &CaseResult,
    mark: &StudyReadMark,
    at: (String, String),
) -> Result<Written, PacsError> {
    measurement_report(study, result, Some(at), Some(mark))
}

fn measurement_report(
    study: &StudyContext,
    result: &CaseResult,
    at: Option<(String, String)>,
    mark: Option<&StudyReadMark>,
) -> Result<Written, PacsError> {
    // The document's UIDs follow from the study and what it says; its series from the study
    // and who made it (all of one reviewer's documents in a study share a series).
    let purpose = mark.map_or_else(String::new, |mark| {
        format!("study-read|{}|{}|{}|", mark.study, mark.arm, mark.session)
    });
    let seed = format!("{}|sr|{purpose}{}", study.study_uid, result.content_key());
    let series_seed = format!(
        "{}|sr|{}{}",
        study.study_uid,
        mark.map_or_else(String::new, |mark| format!("study-read|{}|", mark.study)),
        result.observer.key()
    );
    let tracking_seed = study.study_uid.clone();
    let image_class = if study.image_class_uid.is_empty() {
        CT_IMAGE
    } else {
        &study.image_class_uid
    };
    let key_sop = result
        .findings
        .key_slice
        .as_ref()
        .and_then(|key| key.sop_instance_uid.clone());

    let groups = measurement_groups(
        result,
        &tracking_seed,
        (image_class, study.image_size),
        key_sop.as_ref(),
    );

    let root = root_items(result, &seed, image_class, key_sop.as_ref(), groups);
    let root = Node::new(
        "",
        codes::measurement_report(),
        Value::Container(Some("1500")),
    )
    .with(root);

    let (series_number, description) = match (&result.observer, mark) {
        (Observer::Person { name }, Some(mark)) => (
            STUDY_READ_SERIES_NUMBER,
            format!("Keyslice reader study {}: {name}", mark.study),
        ),
        (Observer::Device { model }, _) => (
            RESULT_SERIES_NUMBER,
            format!("Keyslice AI result ({} {})", model.id, model.version),
        ),
        (Observer::Person { name }, None) => {
            (REVIEW_SERIES_NUMBER, format!("Keyslice review by {name}"))
        }
    };
    let document = Document {
        class_uid: COMPREHENSIVE_3D_SR,
        modality: "SR",
        series_number,
        series_description: description,
        seed,
        series_seed,
        content_at: at.clone(),
    };
    let mut object = document.header(study, &result.algorithm);
    let (date, time) = at.unwrap_or_else(now_date_time);
    object.put(text(tags::COMPLETION_FLAG, VR::CS, "COMPLETE"));
    if let Some(mark) = mark {
        clinical_trial(&mut object, mark);
    }
    match (&result.observer, mark) {
        // A study read is research, never a verified clinical statement.
        (Observer::Device { .. }, _) | (Observer::Person { .. }, Some(_)) => {
            object.put(text(tags::VERIFICATION_FLAG, VR::CS, "UNVERIFIED"));
        }
        (Observer::Person { name }, None) => {
            // A reviewer's correction is their verified statement.
            object.put(text(tags::VERIFICATION_FLAG, VR::CS, "VERIFIED"));
            let mut verifier = InMemDicomObject::new_empty();
            verifier.put(text(tags::VERIFYING_OBSERVER_NAME, VR::PN, name));
            verifier.put(text(
                tags::VERIFYING_ORGANIZATION,
                VR::LO,
                "Keyslice review",
            ));
            verifier.put(text(
                tags::VERIFICATION_DATE_TIME,
                VR::DT,
                &format!("{date}{time}"),
            ));
            verifier.put(sequence(
                tags::VERIFYING_OBSERVER_IDENTIFICATION_CODE_SEQUENCE,
                Vec::new(),
            ));
            object.put(sequence(tags::VERIFYING_OBSERVER_SEQUENCE, vec![verifier]));
        }
    }
    object.put(sequence(
        tags::PERFORMED_PROCEDURE_CODE_SEQUENCE,
        Vec::new(),
    ));
    let images = referenced_images(result, key_sop.as_ref());
    if !images.is_empty() {
        object.put(evidence(study, image_class, &images));
    }
    put_item(&mut object, &root);
    document.finish(object)
}

/// Imaging Measurements: one group per organ spoken of, one per lesion, and the key evidence.
/// The key slice's index and z, and the lesion's slice range (its 3D extent along the
/// stack) as slice indices.
fn slice_positions(key: &KeySlice, range: Option<SliceRange>) -> Vec<Node> {
    let index = |code, slice: u32| {
        Node::new(
            CONTAINS,
            code,
            Value::Num(f64::from(slice), codes::no_units()),
        )
    };
    let mut items = vec![index(codes::key_slice_index(), key.index)];
    if let Some(z_mm) = key.z_mm {
        items.push(Node::new(
            CONTAINS,
            codes::key_slice_z(),
            Value::Num(z_mm, codes::millimeter()),
        ));
    }
    if let Some(range) = range {
        items.push(index(codes::lesion_first_slice(), range.first));
        items.push(index(codes::lesion_last_slice(), range.last));
    }
    items
}

/// A lesion's own evidence as slice indices: its slice (unless the group draws it on that
/// image, which states it) and the first and last slices it is seen on.
fn evidence_items(lesion: &Lesion, with_slice: bool) -> Vec<Node> {
    let Some(evidence) = &lesion.evidence else {
        return Vec::new();
    };
    let index = |name: Code, value: u32| {
        Node::new(
            CONTAINS,
            name,
            Value::Num(f64::from(value), codes::no_units()),
        )
    };
    let mut items = Vec::new();
    if with_slice {
        items.push(index(codes::key_slice_index(), evidence.key_slice));
    }
    if let Some(range) = evidence.slices {
        items.push(index(codes::lesion_first_slice(), range.first));
        items.push(index(codes::lesion_last_slice(), range.last));
    }
    items
}

/// The verifier's standing on one finding (an organ's presence when `lesion` is `None`, else
/// one lesion) and its consistency, when the result was verified: every finding carries its
/// own, so a reader sees which claim the evidence denies, not only the case's weakest score.
fn standing_items(result: &CaseResult, organ: Organ, lesion: Option<usize>) -> Vec<Node> {
    let Some(finding) = result.consistency.as_ref().and_then(|consistency| {
        consistency
            .findings
            .iter()
            .find(|finding| finding.organ == organ && finding.lesion == lesion)
    }) else {
        return Vec::new();
    };
    vec![
        Node::new(
            CONTAINS,
            codes::finding_standing(),
            Value::Text(finding.standing.word().into()),
        ),
        Node::new(
            CONTAINS,
            codes::consistency(),
            Value::Num(finding.score, codes::no_units()),
        ),
    ]
}

fn measurement_groups(
    result: &CaseResult,
    tracking_seed: &str,
    (image_class, image_size): (&str, Option<[u32; 2]>),
    key_sop: Option<&String>,
) -> Vec<Node> {
    let mut groups = Vec::new();
    // A device's result names its algorithm in each group (TID 1500); a person's correction
    // is theirs, and cites the AI result it started from once, among the evaluations.
    let algorithm = match result.observer {
        Observer::Device { .. } => algorithm_items(&result.algorithm),
        Observer::Person { .. } => Vec::new(),
    };
    // Only what is drawn is a measurement group, each on its own image (a viewer draws every
    // group's region); presence per organ, and lesions without an image of their own, are
    // the document's qualitative evaluations (`qualitative_findings`).
    for organ in Organ::ALL {
        for (number, lesion) in result.findings.organ(organ).lesions.iter().enumerate() {
            let Some(image) = lesion_image(result, organ, number) else {
                continue;
            };
            let head = group_head(
                &lesion_label(organ, number, lesion),
                tracking_seed,
                Some(organ),
                &algorithm,
            );
            let mut group = lesion_group(head, lesion, image, (image_class, image_size));
            group
                .children
                .extend(standing_items(result, organ, Some(number)));
            groups.push(group);
        }
    }
    if let Some(key) = &result.findings.key_slice {
        let evidence_organ = Organ::ALL
            .into_iter()
            .find(|&organ| result.findings.organ(organ).tumor == TumorPresence::Yes);
        let mut items = group_head(KEY_EVIDENCE, tracking_seed, evidence_organ, &algorithm);
        let mut template = "1501";
        if let Some(sop) = key_sop {
            if let Some(slice_box) = &result.findings.slice_box {
                items.push(region(slice_box, image_class, sop));
                template = "1410";
            } else if let Some([columns, rows]) = image_size {
                // No box: the slice itself is the evidence, marked by a point at its centre
                // (a viewer draws every group's region, and needs one).
                items.push(
                    Node::new(
                        CONTAINS,
                        codes::image_region(),
                        Value::Scoord(
                            "POINT".into(),
                            vec![columns as f32 / 2.0, rows as f32 / 2.0],
                        ),
                    )
                    .with(vec![Node::new(
                        "SELECTED FROM",
                        codes::source(),
                        Value::Image(image_class.to_string(), sop.clone()),
                    )]),
                );
            }
            items.push(Node::new(
                CONTAINS,
                codes::key_slice(),
                Value::Image(image_class.to_string(), sop.clone()),
            ));
        }
        items.extend(slice_positions(key, result.findings.lesion_slices));
        if let Some(description) = &result.local_description {
            items.push(Node::new(
                CONTAINS,
                codes::verifier_description(),
                Value::Text(description.clone()),
            ));
        }
        if let Some(verifier) = &result.verifier {
            items.push(Node::new(
                CONTAINS,
                codes::verifier_name(),
                Value::Text(format!("{} {}", verifier.id, verifier.version)),
            ));
        }
        if let Some(consistency) = &result.consistency {
            let score = |name: Code, value: f64| {
                Node::new(CONTAINS, name, Value::Num(value, codes::no_units()))
            };
            items.push(score(codes::consistency(), consistency.score));
            items.push(score(codes::consistency_organ(), consistency.organ));
            for (name, value) in [
                (codes::consistency_location(), consistency.location),
                (codes::consistency_attenuation(), consistency.attenuation),
                (codes::consistency_size(), consistency.size),
                (codes::consistency_region(), consistency.region),
            ] {
                if let Some(value) = value {
                    items.push(score(name, value));
                }
            }
        }
        groups.push(group(Some(template), items));
    }

    groups
}

/// A lesion's measurement group on its own image, after its `head` items: measured as a
/// reader measures (TID 1501) where its axes can be drawn, else its box as the image region
/// (TID 1410).
fn lesion_group(
    mut items: Vec<Node>,
    lesion: &Lesion,
    image: &super::LesionImage,
    (image_class, image_size): (&str, Option<[u32; 2]>),
) -> Node {
    let slice_index = Node::new(
        CONTAINS,
        codes::key_slice_index(),
        Value::Num(f64::from(image.slice), codes::no_units()),
    );
    let sop = image.sop_instance_uid.as_str();
    let template = if let Some((size, axes)) = lesion.size.zip(drawn_axes(image, image_size)) {
        // Each axis a length drawn on the image as the line it was measured along, the box
        // as where the slice index comes from.
        items.push(
            Node::new(
                CONTAINS,
                codes::long_axis(),
                Value::Num(size.long_cm, codes::centimeter()),
            )
            .with(vec![measured_on(line(axes.long), image_class, sop)]),
        );
        if let Some(short_cm) = size.short_cm {
            items.push(
                Node::new(
                    CONTAINS,
                    codes::short_axis(),
                    Value::Num(short_cm, codes::centimeter()),
                )
                .with(vec![measured_on(line(axes.short), image_class, sop)]),
            );
        }
        items.extend(lesion_items(&Lesion {
            size: None,
            ..lesion.clone()
        }));
        items.push(slice_index.with(vec![measured_on(
            box_outline(&image.slice_box),
            image_class,
            sop,
        )]));
        "1501"
    } else {
        items.push(region(&image.slice_box, image_class, sop));
        items.extend(lesion_items(lesion));
        items.push(slice_index);
        "1410"
    };
    items.extend(evidence_items(lesion, false));
    group(Some(template), items)
}

/// The document's top-level content items around the measurement `groups`.
fn root_items(
    result: &CaseResult,
    seed: &str,
    image_class: &str,
    key_sop: Option<&String>,
    groups: Vec<Node>,
) -> Vec<Node> {
    let mut root = vec![Node::new(
        CONCEPT_MOD,
        codes::language(),
        Value::Code(codes::english()),
    )];
    root.extend(observer_items(&result.observer, seed));
    root.push(Node::new(
        CONCEPT_MOD,
        codes::procedure_reported(),
        Value::Code(codes::ct_procedure()),
    ));
    let images = referenced_images(result, key_sop);
    if !images.is_empty() {
        root.push(
            Node::new(CONTAINS, codes::image_library(), Value::Container(None)).with(vec![
                Node::new(
                    CONTAINS,
                    codes::image_library_group(),
                    Value::Container(None),
                )
                .with(
                    images
                        .iter()
                        .map(|sop| {
                            Node::new(
                                CONTAINS,
                                Code::new("", "", ""),
                                Value::Image(image_class.to_string(), (*sop).to_string()),
                            )
                        })
                        .collect(),
                ),
            ]),
        );
    }
    if !groups.is_empty() {
        root.push(
            Node::new(
                CONTAINS,
                codes::imaging_measurements(),
                Value::Container(None),
            )
            .with(groups),
        );
    }
    // The result's standing travels with it: a result the model itself called meaningless
    // for this CT says so in the document, first among the qualitative evaluations.
    let mut evaluations = Vec::new();
    if matches!(result.observer, Observer::Person { .. }) && !result.algorithm.id.is_empty() {
        evaluations.push(
            Node::new(
                CONTAINS,
                codes::ai_result_reviewed(),
                Value::Text(format!(
                    "{} {}",
                    result.algorithm.id, result.algorithm.version
                )),
            )
            .with(algorithm_items(&result.algorithm)),
        );
    }
    if let Some(unfamiliar) = &result.out_of_domain {
        evaluations.push(Node::new(
            CONTAINS,
            codes::result_standing(),
            Value::Text(unfamiliar.sentence()),
        ));
    }
    evaluations.extend(qualitative_findings(result));
    if let Some(report) = result.report.as_ref().filter(|r| !r.trim().is_empty()) {
        evaluations.push(Node::new(
            CONTAINS,
            codes::findings_text(),
            Value::Text(report.clone()),
        ));
    }
    if !evaluations.is_empty() {
        root.push(
            Node::new(
                CONTAINS,
                codes::qualitative_evaluations(),
                Value::Container(None),
            )
            .with(evaluations),
        );
    }
    root
}

/// The Key Object Selection document that points at the key slice of `result`.
pub fn key_object_selection(
    study: &StudyContext,
    result: &CaseResult,
) -> Result<Written, PacsError> {
    let Some(sop) = result
        .findings
        .key_slice
        .as_ref()
        .and_then(|key| key.sop_instance_uid.clone())
    else {
        return Err(PacsError::NoKeyImage);
    };
    let image_class = if study.image_class_uid.is_empty() {
        CT_IMAGE
    } else {
        &study.image_class_uid
    };
    let seed = format!(
        "{}|kos|{sop}|{} {}",
        study.study_uid, result.algorithm.id, result.algorithm.version
    );
    let series_seed = format!(
        "{}|kos|{} {}",
        study.study_uid, result.algorithm.id, result.algorithm.version
    );
    let mut description = format!(
        "Key evidence slice of the AI report by {} {}",
        result.algorithm.id, result.algorithm.version
    );
    if let Some(unfamiliar) = &result.out_of_domain {
        // Not an image of interest for care: a research result, and no agreement is claimed.
        description = format!("{}. {description}", unfamiliar.sentence());
    } else if let Some(consistency) = &result.consistency {
        use std::fmt::Write as _;
        let _ = write!(
            description,
            "; report-evidence consistency {:.2}",
            consistency.score
        );
    }
    let mut items = vec![Node::new(
        CONCEPT_MOD,
        codes::language(),
        Value::Code(codes::english()),
    )];
    items.extend(observer_items(&result.observer, &seed));
    items.push(Node::new(
        CONTAINS,
        codes::key_object_description(),
        Value::Text(description),
    ));
    items.push(Node::new(
        CONTAINS,
        Code::new("", "", ""),
        Value::Image(image_class.to_string(), sop.clone()),
    ));
    let title = if result.out_of_domain.is_some() {
        codes::for_research()
    } else {
        codes::of_interest()
    };
    let root = Node::new("", title, Value::Container(Some("2010"))).with(items);
    let document = Document {
        class_uid: KEY_OBJECT_SELECTION,
        modality: "KO",
        series_number: KEY_IMAGES_SERIES_NUMBER,
        series_description: format!(
            "Keyslice key images ({} {})",
            result.algorithm.id, result.algorithm.version
        ),
        seed,
        series_seed,
        content_at: None,
    };
    let mut object = document.header(study, &result.algorithm);
    object.put(evidence(study, image_class, &[sop.as_str()]));
    put_item(&mut object, &root);
    document.finish(object)
}

pub(crate) struct Document {
    pub(crate) class_uid: &'static str,
    pub(crate) modality: &'static str,
    pub(crate) series_number: i32,
    pub(crate) series_description: String,
    /// What the document says: its SOP Instance UID follows from it.
    pub(crate) seed: String,
    /// Who made it in which study: its Series Instance UID follows from it.
    pub(crate) series_seed: String,
    /// When its content was made (`YYYYMMDD`, `HHMMSS`), when not now.
    pub(crate) content_at: Option<(String, String)>,
}

impl Document {
    /// Patient, study, series, equipment and SOP common attributes.
    pub(crate) fn header(&self, study: &StudyContext, model: &ModelId) -> InMemDicomObject {
        let mut object = InMemDicomObject::new_empty();
        let (date, time) = now_date_time();
        object.put(text(tags::SPECIFIC_CHARACTER_SET, VR::CS, "ISO_IR 192"));
        object.put(text(tags::SOP_CLASS_UID, VR::UI, self.class_uid));
        object.put(text(
            tags::SOP_INSTANCE_UID,
            VR::UI,
            &content_uid(&self.seed),
        ));
        object.put(text(tags::INSTANCE_CREATION_DATE, VR::DA, &date));
        object.put(text(tags::INSTANCE_CREATION_TIME, VR::TM, &time));
        object.put(text(tags::TIMEZONE_OFFSET_FROM_UTC, VR::SH, "+0000"));
        // Patient and study: copied from the images, so the document files with them.
        object.put(text(tags::PATIENT_NAME, VR::PN, &study.patient_name));
        object.put(text(tags::PATIENT_ID, VR::LO, &study.patient_id));
        object.put(text(
            tags::PATIENT_BIRTH_DATE,
            VR::DA,
            &study.patient_birth_date,
        ));
        object.put(text(tags::PATIENT_SEX, VR::CS, &study.patient_sex));
        object.put(text(tags::STUDY_INSTANCE_UID, VR::UI, &study.study_uid));
        object.put(text(tags::STUDY_DATE, VR::DA, &study.study_date));
        object.put(text(tags::STUDY_TIME, VR::TM, &study.study_time));
        object.put(text(tags::STUDY_ID, VR::SH, &study.study_id));
        object.put(text(tags::ACCESSION_NUMBER, VR::SH, &study.accession));
        object.put(text(
            tags::REFERRING_PHYSICIAN_NAME,
            VR::PN,
            &study.referring_physician,
        ));
        object.put(text(tags::MODALITY, VR::CS, self.modality));
        object.put(text(
            tags::SERIES_INSTANCE_UID,
            VR::UI,
            &content_uid(&format!("{}series", self.series_seed)),
        ));
        object.put(text(
            tags::SERIES_NUMBER,
            VR::IS,
            &self.series_number.to_string(),
        ));
        object.put(text(
            tags::SERIES_DESCRIPTION,
            VR::LO,
            &truncate(&self.series_description, 64),
        ));
        object.put(text(tags::SERIES_DATE, VR::DA, &date));
        object.put(text(tags::SERIES_TIME, VR::TM, &time));
        object.put(sequence(
            tags::REFERENCED_PERFORMED_PROCEDURE_STEP_SEQUENCE,
            Vec::new(),
        ));
        object.put(text(tags::MANUFACTURER, VR::LO, "Keyslice"));
        object.put(text(
            tags::MANUFACTURER_MODEL_NAME,
            VR::LO,
            &truncate(format!("{} {}", model.id, model.version).trim(), 64),
        ));
        object.put(text(tags::DEVICE_SERIAL_NUMBER, VR::LO, "0"));
        object.put(text(
            tags::SOFTWARE_VERSIONS,
            VR::LO,
            concat!("keyslice ", env!("CARGO_PKG_VERSION")),
        ));
        object.put(text(tags::INSTANCE_NUMBER, VR::IS, "1"));
        let (content_date, content_time) = self.content_at.clone().unwrap_or((date, time));
        object.put(text(tags::CONTENT_DATE, VR::DA, &content_date));
        object.put(text(tags::CONTENT_TIME, VR::TM, &content_time));
        let mut scheme = InMemDicomObject::new_empty();
        scheme.put(text(tags::CODING_SCHEME_DESIGNATOR, VR::SH, codes::KSL));
        scheme.put(text(tags::CODING_SCHEME_NAME, VR::ST, codes::KSL_NAME));
        scheme.put(text(
            tags::CODING_SCHEME_RESPONSIBLE_ORGANIZATION,
            VR::ST,
            "Keyslice",
        ));
        object.put(sequence(
            tags::CODING_SCHEME_IDENTIFICATION_SEQUENCE,
            vec![scheme],
        ));
        object
    }

    pub(crate) fn finish(&self, object: InMemDicomObject) -> Result<Written, PacsError> {
        let get = |tag| super::tree::string(&object, tag).unwrap_or_default();
        let sop_uid = get(tags::SOP_INSTANCE_UID);
        let series_uid = get(tags::SERIES_INSTANCE_UID);
        let meta = FileMetaTableBuilder::new()
            .media_storage_sop_class_uid(self.class_uid)
            .media_storage_sop_instance_uid(sop_uid.as_str())
            .transfer_syntax(uids::EXPLICIT_VR_LITTLE_ENDIAN)
            .implementation_class_uid("2.25.171717033417113150137064451573416633953")
            .implementation_version_name("KEYSLICE")
            .build()
            .map_err(|error| PacsError::Meta(Box::new(error)))?;
        let mut bytes = Vec::with_capacity(16 * 1024);
        object
            .with_exact_meta(meta)
            .write_all(&mut bytes)
            .map_err(|error| PacsError::Write(Box::new(error)))?;
        Ok(Written {
            sop_uid,
            series_uid,
            class_uid: self.class_uid.to_string(),
            bytes,
        })
    }
}

fn truncate(text: &str, max_chars: usize) -> String {
    text.chars().take(max_chars).collect()
}

/// Current Requested Procedure Evidence: the images the document references.
fn evidence(study: &StudyContext, class_uid: &str, sops: &[&str]) -> DataElement<InMemDicomObject> {
    let mut series = InMemDicomObject::new_empty();
    series.put(text(tags::SERIES_INSTANCE_UID, VR::UI, &study.series_uid));
    series.put(sequence(
        tags::REFERENCED_SOP_SEQUENCE,
        sops.iter()
            .map(|sop| sop_reference(class_uid, sop))
            .collect(),
    ));
    let mut item = InMemDicomObject::new_empty();
    item.put(sequence(tags::REFERENCED_SERIES_SEQUENCE, vec![series]));
    item.put(text(tags::STUDY_INSTANCE_UID, VR::UI, &study.study_uid));
    sequence(
        tags::CURRENT_REQUESTED_PROCEDURE_EVIDENCE_SEQUENCE,
        vec![item],
    )
}

/// TID 1002 observer context: the model as device, or the reviewer as person.
fn observer_items(observer: &Observer, seed: &str) -> Vec<Node> {
    match observer {
        Observer::Device { model } => vec![
            Node::new(
                OBS_CONTEXT,
                codes::observer_type(),
                Value::Code(codes::device()),
            ),
            Node::new(
                OBS_CONTEXT,
                codes::device_observer_uid(),
                Value::UidRef(content_uid(&format!("{seed}device"))),
            ),
            Node::new(
                OBS_CONTEXT,
                codes::device_observer_name(),
                Value::Text(model.id.clone()),
            ),
            Node::new(
                OBS_CONTEXT,
                codes::device_observer_model_name(),
                Value::Text(format!("{} {}", model.id, model.version)),
            ),
        ],
        Observer::Person { name } => vec![
            Node::new(
                OBS_CONTEXT,
                codes::observer_type(),
                Value::Code(codes::person()),
            ),
            Node::new(
                OBS_CONTEXT,
                codes::person_observer_name(),
                Value::PersonName(name.clone()),
            ),
        ],
    }
}

/// The Clinical Trial Subject, Study and Series attributes that mark a study read as
/// research: the reader study as the protocol, the case as the subject's reading, the
/// session and arm as the time point.
fn clinical_trial(object: &mut InMemDicomObject, mark: &StudyReadMark) {
    let long = |value: &str| truncate(value, 64);
    object.put(text(
        tags::CLINICAL_TRIAL_SPONSOR_NAME,
        VR::LO,
        "Keyslice reader study",
    ));
    object.put(text(
        tags::CLINICAL_TRIAL_PROTOCOL_ID,
        VR::LO,
        &long(&mark.study),
    ));
    object.put(text(
        tags::CLINICAL_TRIAL_PROTOCOL_NAME,
        VR::LO,
        &long(&format!(
            "Reader study {} (research, not a clinical read)",
            mark.study
        )),
    ));
    object.put(text(tags::CLINICAL_TRIAL_SITE_ID, VR::LO, ""));
    object.put(text(tags::CLINICAL_TRIAL_SITE_NAME, VR::LO, ""));
    object.put(text(
        tags::CLINICAL_TRIAL_SUBJECT_READING_ID,
        VR::LO,
        &long(&mark.case),
    ));
    object.put(text(
        tags::CLINICAL_TRIAL_TIME_POINT_ID,
        VR::LO,
        &format!("session {}", mark.session + 1),
    ));
    object.put(text(
        tags::CLINICAL_TRIAL_TIME_POINT_DESCRIPTION,
        VR::ST,
        &format!("arm {}", mark.arm),
    ));
    object.put(text(
        tags::CLINICAL_TRIAL_COORDINATING_CENTER_NAME,
        VR::LO,
        "",
    ));
    object.put(text(
        tags::CLINICAL_TRIAL_SERIES_DESCRIPTION,
        VR::LO,
        &long(&format!("reads of arm {}", mark.arm)),
    ));
}

/// TID 4019 algorithm identification (none for a read made without the AI).
fn algorithm_items(model: &ModelId) -> Vec<Node> {
    if model.id.is_empty() {
        return Vec::new();
    }
    vec![
        Node::new(
            CONCEPT_MOD,
            codes::algorithm_name(),
            Value::Text(model.id.clone()),
        ),
        Node::new(
            CONCEPT_MOD,
            codes::algorithm_version(),
            Value::Text(model.version.clone()),
        ),
    ]
}

/// The rows every measurement group starts with: tracking identifier and UID, finding,
/// finding site, algorithm.
fn group_head(label: &str, seed: &str, organ: Option<Organ>, algorithm: &[Node]) -> Vec<Node> {
    let mut items = vec![
        Node::new(
            CONTAINS,
            codes::tracking_identifier(),
            Value::Text(label.to_string()),
        ),
        Node::new(
            CONTAINS,
            codes::tracking_uid(),
            Value::UidRef(content_uid(&format!("{seed}{label}"))),
        ),
        Node::new(CONTAINS, codes::finding(), Value::Code(codes::neoplasm())),
    ];
    if let Some(organ) = organ {
        items.push(site(organ));
    }
    items.extend(algorithm.iter().cloned());
    items
}

/// Every image the document draws on: the key slice, then each lesion's own, once each.
fn referenced_images<'a>(result: &'a CaseResult, key_sop: Option<&'a String>) -> Vec<&'a str> {
    let mut images: Vec<&str> = key_sop.map(String::as_str).into_iter().collect();
    for image in &result.lesion_images {
        if !images.contains(&image.sop_instance_uid.as_str()) {
            images.push(&image.sop_instance_uid);
        }
    }
    images
}

/// The tracking identifier of the key evidence group: what it is, as a reader sees it.
pub const KEY_EVIDENCE: &str = "key evidence (the slice the report rests on)";

/// A lesion's label as a reader sees it: "liver lesion 1, 4.9 cm".
fn lesion_label(organ: Organ, number: usize, lesion: &Lesion) -> String {
    let size = lesion
        .size
        .map_or_else(String::new, |size| format!(", {:.1} cm", size.long_cm));
    format!("{} lesion {}{size}", organ_words(organ), number + 1)
}

/// An organ in words ("left kidney").
fn organ_words(organ: Organ) -> &'static str {
    match organ {
        Organ::Liver => "liver",
        Organ::Pancreas => "pancreas",
        Organ::KidneyLeft => "left kidney",
        Organ::KidneyRight => "right kidney",
    }
}

/// The image of lesion `number` of `organ`, when it has one.
fn lesion_image(result: &CaseResult, organ: Organ, number: usize) -> Option<&super::LesionImage> {
    result
        .lesion_images
        .iter()
        .find(|image| (image.organ, image.lesion) == (organ, number))
}

/// A box as a closed POLYLINE of pixel edges (the box covers pixels c0..=c1, r0..=r1).
fn box_outline(slice_box: &SliceBox) -> Vec<f32> {
    let [c0, r0, c1, r1] = slice_box.voxels.map(|v| v as f32);
    let (c1, r1) = (c1 + 1.0, r1 + 1.0);
    vec![c0, r0, c1, r0, c1, r1, c0, r1, c0, r0]
}

/// A segment between two voxel positions (the first pixel's centre at 0, 0) as a POLYLINE in
/// image coordinates (the first pixel's top left corner at 0, 0).
fn line(ends: [[f64; 2]; 2]) -> Vec<f32> {
    ends.iter()
        .flat_map(|[column, row]| [(column + 0.5) as f32, (row + 0.5) as f32])
        .collect()
}

/// `points` as a POLYLINE selected from the image.
fn polyline(
    name: Code,
    relationship: &'static str,
    points: Vec<f32>,
    image_class: &str,
    sop: &str,
) -> Node {
    Node::new(relationship, name, Value::Scoord("POLYLINE".into(), points)).with(vec![Node::new(
        "SELECTED FROM",
        codes::source(),
        Value::Image(image_class.to_string(), sop.to_string()),
    )])
}

/// A box on an image as the group's image region.
fn region(slice_box: &SliceBox, image_class: &str, sop: &str) -> Node {
    polyline(
        codes::image_region(),
        CONTAINS,
        box_outline(slice_box),
        image_class,
        sop,
    )
}

/// `points` on an image as the source of a measurement (TID 300, TID 320).
fn measured_on(points: Vec<f32>, image_class: &str, sop: &str) -> Node {
    polyline(
        codes::source_of_measurement(),
        "INFERRED FROM",
        points,
        image_class,
        sop,
    )
}

/// A lesion's axes when they can be drawn on its image: every point on the image (of
/// `image_size` columns and rows, when known).
fn drawn_axes(image: &super::LesionImage, image_size: Option<[u32; 2]>) -> Option<LesionAxes> {
    let [columns, rows] = image_size.unwrap_or([u32::from(u16::MAX); 2]);
    image
        .axes
        .filter(|axes| axes.fits(columns as usize, rows as usize))
}

/// Presence per organ, with each organ's standing, and the lesions without an image of their
/// own, as qualitative evaluations: a CODE each, its organ as the finding site, its
/// measurements and standing as properties.
fn qualitative_findings(result: &CaseResult) -> Vec<Node> {
    let properties = |nodes: Vec<Node>| -> Vec<Node> {
        nodes
            .into_iter()
            .map(|mut node| {
                node.relationship = HAS_PROPERTIES;
                node
            })
            .collect()
    };
    let mut items = Vec::new();
    for organ in Organ::ALL {
        let organ_findings = result.findings.organ(organ);
        let Some(presence) = codes::presence_code(organ_findings.tumor) else {
            continue;
        };
        let mut children = vec![site(organ)];
        children.extend(properties(standing_items(result, organ, None)));
        items.push(
            Node::new(CONTAINS, codes::tumor_presence(), Value::Code(presence)).with(children),
        );
        for (number, lesion) in organ_findings.lesions.iter().enumerate() {
            if lesion_image(result, organ, number).is_some() {
                continue;
            }
            let mut children = vec![
                site(organ),
                Node::new(
                    HAS_PROPERTIES,
                    codes::tracking_identifier(),
                    Value::Text(lesion_label(organ, number, lesion)),
                ),
            ];
            children.extend(properties(lesion_items(lesion)));
            children.extend(properties(evidence_items(lesion, true)));
            children.extend(properties(standing_items(result, organ, Some(number))));
            items.push(
                Node::new(CONTAINS, codes::finding(), Value::Code(codes::neoplasm()))
                    .with(children),
            );
        }
    }
    items
}

/// An organ as a finding site (with its laterality).
fn site(organ: Organ) -> Node {
    let (site, laterality) = codes::organ_site(organ);
    let mut node = Node::new(CONCEPT_MOD, codes::finding_site(), Value::Code(site));
    if let Some(laterality) = laterality {
        node.children.push(Node::new(
            CONCEPT_MOD,
            codes::laterality(),
            Value::Code(laterality),
        ));
    }
    node
}

fn group(template: Option<&'static str>, items: Vec<Node>) -> Node {
    Node::new(
        CONTAINS,
        codes::measurement_group(),
        Value::Container(template),
    )
    .with(items)
}

fn lesion_items(lesion: &Lesion) -> Vec<Node> {
    let mut items = Vec::new();
    if let Some(size) = lesion.size {
        items.push(Node::new(
            CONTAINS,
            codes::long_axis(),
            Value::Num(size.long_cm, codes::centimeter()),
        ));
        if let Some(short_cm) = size.short_cm {
            items.push(Node::new(
                CONTAINS,
                codes::short_axis(),
                Value::Num(short_cm, codes::centimeter()),
            ));
        }
    }
    if let Some(location) = &lesion.location {
        for code in codes::location_codes(location) {
            items.push(Node::new(
                CONTAINS,
                codes::location_in_organ(),
                Value::Code(code),
            ));
        }
    }
    if let Some(attenuation) = lesion.attenuation {
        items.push(Node::new(
            CONTAINS,
            codes::attenuation(),
            Value::Code(codes::attenuation_code(attenuation)),
        ));
    }
    if let Some(count) = lesion.count {
        items.push(Node::new(
            CONTAINS,
            codes::lesion_count(),
            Value::Num(f64::from(count), codes::lesions_unit()),
        ));
    }
    items
}
