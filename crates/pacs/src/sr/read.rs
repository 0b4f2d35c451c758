//! Reads Keyslice's SR and KOS documents back: the AI result and each reviewer's correction
//! of a study, as [`CaseResult`]s.

use std::path::Path;

use dicom_dictionary_std::tags;
use dicom_object::InMemDicomObject;
use keyslice_core::findings::{
    Findings, KeySlice, Lesion, LesionSize, Organ, SliceBox, SliceRange,
};
use keyslice_core::prediction::ModelId;
use keyslice_core::scoring::Consistency;

use super::codes;
use super::tree::{Node, Value, read_item, string};
use super::{COMPREHENSIVE_3D_SR, CaseResult, KEY_OBJECT_SELECTION, Observer};
use crate::PacsError;

/// A document read back.
#[derive(Clone, Debug, PartialEq)]
pub enum Document {
    /// A TID 1500 result (the AI's or a reviewer's).
    Result(Box<Stored<CaseResult>>),
    /// A Key Object Selection.
    KeyImages(Stored<KeyImages>),
}

/// A document with where it is filed.
#[derive(Clone, Debug, PartialEq)]
pub struct Stored<T> {
    /// Study Instance UID.
    pub study_uid: String,
    /// Series Instance UID.
    pub series_uid: String,
    /// SOP Instance UID.
    pub sop_uid: String,
    /// Content Date and Time (`YYYYMMDDHHMMSS`).
    pub content_date_time: String,
    /// The content.
    pub content: T,
}

/// What a Key Object Selection selects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyImages {
    /// Document title's meaning ("Of Interest").
    pub title: String,
    /// Key Object Description.
    pub description: String,
    /// Referenced SOP Instance UIDs.
    pub images: Vec<String>,
}

/// Reads a document from a file.
pub fn read_file(path: &Path) -> Result<Document, PacsError> {
    let object = dicom_object::open_file(path)
        .map_err(|error| PacsError::Dicom(format!("cannot read {}: {error}", path.display())))?;
    read_object(&object).map_err(|reason| PacsError::Dicom(format!("{}: {reason}", path.display())))
}

/// Reads a document from Part 10 bytes.
pub fn read_bytes(bytes: &[u8]) -> Result<Document, String> {
    let object = dicom_object::OpenFileOptions::new()
        .from_reader(bytes.get(128..).ok_or("shorter than a DICOM preamble")?)
        .map_err(|error| format!("not a DICOM file: {error}"))?;
    read_object(&object)
}

fn read_object(object: &InMemDicomObject) -> Result<Document, String> {
    let class = string(object, tags::SOP_CLASS_UID).unwrap_or_default();
    let root = read_item(object)?;
    match class.as_str() {
        KEY_OBJECT_SELECTION => Ok(Document::KeyImages(stored(object, key_images(&root)))),
        COMPREHENSIVE_3D_SR | "1.2.840.10008.5.1.4.1.1.88.33" | "1.2.840.10008.5.1.4.1.1.88.22" => {
            if !root.name.is("126000", "DCM") {
                return Err(format!(
                    "an SR titled `{}`, not an Imaging Measurement Report",
                    root.name.meaning
                ));
            }
            Ok(Document::Result(Box::new(stored(
                object,
                case_result(&root)?,
            ))))
        }
        other => Err(format!(
            "SOP class {other} is neither an SR nor a Key Object Selection"
        )),
    }
}

/// `content` with where `object` is filed.
fn stored<T>(object: &InMemDicomObject, content: T) -> Stored<T> {
    let get = |tag| string(object, tag).unwrap_or_default();
    Stored {
        study_uid: get(tags::STUDY_INSTANCE_UID),
        series_uid: get(tags::SERIES_INSTANCE_UID),
        sop_uid: get(tags::SOP_INSTANCE_UID),
        content_date_time: format!("{}{}", get(tags::CONTENT_DATE), get(tags::CONTENT_TIME)),
        content,
    }
}

fn key_images(root: &Node) -> KeyImages {
    KeyImages {
        title: root.name.meaning.clone(),
        description: root
            .child(&codes::key_object_description())
            .and_then(Node::text)
            .unwrap_or_default()
            .to_string(),
        images: root
            .children
            .iter()
            .filter_map(|child| match &child.value {
                Value::Image(_, sop) => Some(sop.clone()),
                _ => None,
            })
            .collect(),
    }
}

fn observer(root: &Node) -> Observer {
    let person = root
        .child(&codes::observer_type())
        .and_then(Node::code)
        .is_some_and(|code| code.is("121006", "DCM"));
    if person {
        Observer::Person {
            name: root
                .child(&codes::person_observer_name())
                .and_then(Node::text)
                .unwrap_or_default()
                .to_string(),
        }
    } else {
        let model = root
            .child(&codes::device_observer_model_name())
            .and_then(Node::text)
            .unwrap_or_default();
        let (id, version) = model.rsplit_once(' ').unwrap_or((model, ""));
        Observer::Device {
            model: ModelId {
                id: id.to_string(),
                version: version.to_string(),
            },
        }
    }
}

fn case_result(root: &Node) -> Result<CaseResult, String> {
    let observer = observer(root);
    let mut findings = Findings::default();
    let mut algorithm = None;
    let mut verifier = None;
    let mut local_description = None;
    let mut consistency = None;
    let groups = root
        .child(&codes::imaging_measurements())
        .map(|node| node.children.as_slice())
        .unwrap_or_default();
    for group in groups {
        if algorithm.is_none() {
            algorithm = group
                .child(&codes::algorithm_name())
                .and_then(Node::text)
                .map(|id| ModelId {
                    id: id.to_string(),
                    version: group
                        .child(&codes::algorithm_version())
                        .and_then(Node::text)
                        .unwrap_or_default()
                        .to_string(),
                });
        }
        let label = group
            .child(&codes::tracking_identifier())
            .and_then(Node::text)
            .unwrap_or_default();
        let organ = organ_of(group);
        if label == "key evidence" {
            evidence(
                group,
                &mut findings,
                &mut local_description,
                &mut consistency,
            );
            verifier = group
                .child(&codes::verifier_name())
                .and_then(Node::text)
                .map(|text| {
                    let (id, version) = text.rsplit_once(' ').unwrap_or((text, ""));
                    ModelId {
                        id: id.to_string(),
                        version: version.to_string(),
                    }
                });
            continue;
        }
        let Some(organ) = organ else {
            return Err(format!(
                "measurement group `{label}` names no organ Keyslice knows"
            ));
        };
        if let Some(presence) = group
            .child(&codes::tumor_presence())
            .and_then(Node::code)
            .and_then(codes::presence_of)
        {
            findings.organ_mut(organ).tumor = presence;
        } else {
            findings.organ_mut(organ).lesions.push(lesion(group));
        }
    }
    let report = root
        .child(&codes::qualitative_evaluations())
        .and_then(|node| node.child(&codes::findings_text()))
        .and_then(Node::text)
        .map(str::to_string);
    let algorithm = algorithm.unwrap_or_else(|| match &observer {
        Observer::Device { model } => model.clone(),
        Observer::Person { .. } => ModelId {
            id: String::new(),
            version: String::new(),
        },
    });
    Ok(CaseResult {
        observer,
        algorithm,
        verifier,
        findings,
        report,
        local_description,
        consistency,
    })
}

fn organ_of(group: &Node) -> Option<Organ> {
    let site = group.child(&codes::finding_site())?;
    let laterality = site.child(&codes::laterality()).and_then(Node::code);
    codes::organ_of(site.code()?, laterality)
}

fn lesion(group: &Node) -> Lesion {
    let long_cm = group.child(&codes::long_axis()).and_then(Node::number);
    let short_cm = group.child(&codes::short_axis()).and_then(Node::number);
    let location_name = codes::location_in_organ();
    let location_codes: Vec<&codes::Code> = group
        .children_named(&location_name)
        .filter_map(Node::code)
        .collect();
    Lesion {
        size: long_cm.map(|long_cm| LesionSize { long_cm, short_cm }),
        location: codes::location_of(&location_codes),
        attenuation: group
            .child(&codes::attenuation())
            .and_then(Node::code)
            .and_then(codes::attenuation_of),
        count: group
            .child(&codes::lesion_count())
            .and_then(Node::number)
            .map(|n| n.round() as u32),
        spans: keyslice_core::findings::LesionSpans::default(),
    }
}

fn evidence(
    group: &Node,
    findings: &mut Findings,
    local_description: &mut Option<String>,
    consistency: &mut Option<Consistency>,
) {
    let sop = group
        .child(&codes::key_slice())
        .and_then(|node| match &node.value {
            Value::Image(_, sop) => Some(sop.clone()),
            _ => None,
        });
    let index = group
        .child(&codes::key_slice_index())
        .and_then(Node::number)
        .map(|n| n.round() as u32);
    if let Some(index) = index {
        findings.key_slice = Some(KeySlice {
            index,
            z_mm: group.child(&codes::key_slice_z()).and_then(Node::number),
            sop_instance_uid: sop,
            span: None,
        });
    }
    let slice_of = |code| {
        group
            .child(&code)
            .and_then(Node::number)
            .filter(|n| n.is_finite() && *n >= 0.0)
            .map(|n| n.round() as u32)
    };
    if let (Some(first), Some(last)) = (
        slice_of(codes::lesion_first_slice()),
        slice_of(codes::lesion_last_slice()),
    ) {
        findings.lesion_slices = Some(SliceRange { first, last });
    }
    if let Some(Value::Scoord(_, points)) = group.child(&codes::image_region()).map(|n| &n.value)
        && points.len() >= 8
    {
        let xs = points.iter().step_by(2).copied();
        let ys = points.iter().skip(1).step_by(2).copied();
        let (c0, c1) = xs.fold((f32::MAX, f32::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
        let (r0, r1) = ys.fold((f32::MAX, f32::MIN), |(lo, hi), y| (lo.min(y), hi.max(y)));
        findings.slice_box = Some(SliceBox {
            voxels: [
                c0.round().max(0.0) as u32,
                r0.round().max(0.0) as u32,
                (c1.round() - 1.0).max(0.0) as u32,
                (r1.round() - 1.0).max(0.0) as u32,
            ],
            mm: None,
        });
    }
    *local_description = group
        .child(&codes::verifier_description())
        .and_then(Node::text)
        .map(str::to_string);
    if let Some(score) = group.child(&codes::consistency()).and_then(Node::number) {
        let part = |code| group.child(&code).and_then(Node::number);
        *consistency = Some(Consistency {
            score,
            organ: part(codes::consistency_organ()).unwrap_or(score),
            location: part(codes::consistency_location()),
            attenuation: part(codes::consistency_attenuation()),
            size: part(codes::consistency_size()),
            region: part(codes::consistency_region()),
        });
    }
}
