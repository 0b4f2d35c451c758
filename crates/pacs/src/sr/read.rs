//! Reads Keyslice's SR and KOS documents back: the AI result and each reviewer's correction
//! of a study, as [`CaseResult`]s.

use std::path::Path;

use dicom_dictionary_std::{tags, uids};
use dicom_object::InMemDicomObject;
use keyslice_core::findings::{
    Evidence, Findings, KeySlice, Lesion, LesionAxes, LesionSize, Organ, SliceBox, SliceRange,
};
use keyslice_core::prediction::{ModelId, OutOfDomain};
use keyslice_core::scoring::{Consistency, FindingConsistency, Standing};

use super::codes::{self, Code};
use super::tree::{Node, Value, read_item, string};
use super::{
    COMPREHENSIVE_3D_SR, CaseResult, KEY_OBJECT_SELECTION, LesionImage, Observer, StudyReadMark,
};
use crate::PacsError;

/// A document read back.
#[derive(Clone, Debug, PartialEq)]
pub enum Document {
    /// A TID 1500 result (the AI's or a reviewer's).
    Result(Box<Stored<CaseResult>>),
    /// A Key Object Selection.
    KeyImages(Stored<KeyImages>),
    /// One read of a reader study (research: never a clinical review).
    StudyRead {
        /// What the reader said.
        read: Box<Stored<CaseResult>>,
        /// Which study, arm, session and case.
        mark: StudyReadMark,
    },
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

/// The largest SR or KOS file read (Keyslice's are a few kilobytes).
pub const MAX_DOCUMENT_BYTES: u64 = 4 << 20;

/// The most sequence items one document may hold (Keyslice's hold about a hundred).
pub const MAX_DOCUMENT_ITEMS: usize = 20_000;

/// The most reasons an out-of-domain standing keeps when read back.
const MAX_REASONS: usize = 8;

/// The highest slice index accepted (no CT has more slices).
const MAX_SLICE_INDEX: f64 = 65_535.0;

/// The largest lesion axis accepted, in centimetres: the width of an adult abdomen.
const MAX_AXIS_CM: f64 = 50.0;

/// Reads a document from a file. The file is walked first as images are (every declared
/// length inside the file, shallow nesting, at most [`MAX_DOCUMENT_ITEMS`] items), so a
/// hostile document is refused before it is parsed.
pub fn read_file(path: &Path) -> Result<Document, PacsError> {
    let unreadable = |reason: String| PacsError::Unreadable {
        path: path.to_path_buf(),
        reason,
    };
    let size = std::fs::metadata(path)
        .map_err(|error| unreadable(format!("cannot read it: {error}")))?
        .len();
    if size > MAX_DOCUMENT_BYTES {
        return Err(unreadable(format!(
            "{size} bytes, more than the {} MiB any SR or KOS of Keyslice's takes",
            MAX_DOCUMENT_BYTES >> 20
        )));
    }
    keyslice_io::dicom::check_structure(path, MAX_DOCUMENT_ITEMS)
        .map_err(|malformed| unreadable(malformed.reason))?;
    let object = dicom_object::open_file(path).map_err(|source| PacsError::Open {
        path: path.to_path_buf(),
        source: Box::new(source),
    })?;
    read_object(&object).map_err(unreadable)
}

/// Reads a document from Part 10 bytes (at most [`MAX_DOCUMENT_BYTES`]).
pub fn read_bytes(bytes: &[u8]) -> Result<Document, super::tree::NotReadable> {
    read_part10(bytes).map_err(|reason| super::tree::NotReadable { reason })
}

fn read_part10(bytes: &[u8]) -> Result<Document, String> {
    if bytes.len() as u64 > MAX_DOCUMENT_BYTES {
        return Err(format!(
            "{} bytes, more than the {} MiB any SR or KOS of Keyslice's takes",
            bytes.len(),
            MAX_DOCUMENT_BYTES >> 20
        ));
    }
    let object = dicom_object::OpenFileOptions::new()
        .from_reader(bytes.get(128..).ok_or("shorter than a DICOM preamble")?)
        .map_err(|error| format!("not a DICOM file: {error}"))?;
    read_object(&object)
}

fn read_object(object: &InMemDicomObject) -> Result<Document, String> {
    let class = string(object, tags::SOP_CLASS_UID).unwrap_or_default();
    let root = read_item(object).map_err(|error| error.reason)?;
    match class.as_str() {
        KEY_OBJECT_SELECTION => Ok(Document::KeyImages(stored(object, key_images(&root)))),
        COMPREHENSIVE_3D_SR | uids::COMPREHENSIVE_SR_STORAGE | uids::ENHANCED_SR_STORAGE => {
            if !root.name.is("126000", "DCM") {
                return Err(format!(
                    "an SR titled `{}`, not an Imaging Measurement Report",
                    root.name.meaning
                ));
            }
            let result = Box::new(stored(object, case_result(&root)?));
            // Any document of a clinical trial is research: never taken for a clinical review.
            match study_read_mark(object) {
                Some(mark) => Ok(Document::StudyRead { read: result, mark }),
                None => Ok(Document::Result(result)),
            }
        }
        other => Err(format!(
            "SOP class {other} is neither an SR nor a Key Object Selection"
        )),
    }
}

/// The reader study a document belongs to, when it carries a clinical trial protocol.
fn study_read_mark(object: &InMemDicomObject) -> Option<StudyReadMark> {
    let protocol = string(object, tags::CLINICAL_TRIAL_PROTOCOL_ID)?;
    if protocol.trim().is_empty() {
        return None;
    }
    let get = |tag| string(object, tag).unwrap_or_default();
    Some(StudyReadMark {
        study: protocol,
        arm: get(tags::CLINICAL_TRIAL_TIME_POINT_DESCRIPTION)
            .strip_prefix("arm ")
            .unwrap_or_default()
            .to_string(),
        session: get(tags::CLINICAL_TRIAL_TIME_POINT_ID)
            .strip_prefix("session ")
            .and_then(|number| number.trim().parse::<usize>().ok())
            .map_or(0, |number| number.saturating_sub(1)),
        case: get(tags::CLINICAL_TRIAL_SUBJECT_READING_ID),
    })
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
    let mut verifier = None;
    let mut local_description = None;
    let mut consistency = None;
    let groups = root
        .child(&codes::imaging_measurements())
        .map(|node| node.children.as_slice())
        .unwrap_or_default();
    let evaluations = root.child(&codes::qualitative_evaluations());
    let parts = parts(groups, evaluations)?;
    let algorithm = parts.algorithm.clone();
    if let Some(group) = parts.evidence {
        evidence(
            group,
            &mut findings,
            &mut local_description,
            &mut consistency,
        )?;
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
    }
    let (standings, lesion_images) = organ_findings(&parts, &mut findings)?;
    if let Some(consistency) = &mut consistency {
        consistency.findings = standings;
    }
    let report = evaluations
        .and_then(|node| node.child(&codes::findings_text()))
        .and_then(Node::text)
        .map(str::to_string);
    let standing = evaluations
        .and_then(|node| node.child(&codes::result_standing()))
        .and_then(Node::text);
    // A document that says "no tumor" beside a lesion is not one Keyslice can trust; a box or
    // slice range on findings without any tumor is dropped (an older writer kept them).
    if let Some((organ, _)) = findings
        .organs
        .iter()
        .find(|(_, finding)| !finding.tumor.as_positive() && !finding.lesions.is_empty())
    {
        return Err(format!(
            "the document contradicts itself: {} has no tumor but lists a lesion",
            organ.key()
        ));
    }
    findings.drop_contradictions();
    // A person's correction cites the AI result it started from once.
    let reviewed = evaluations
        .and_then(|node| node.child(&codes::ai_result_reviewed()))
        .and_then(model_of);
    let algorithm = algorithm.or(reviewed).unwrap_or_else(|| match &observer {
        Observer::Device { model } => model.clone(),
        Observer::Person { .. } => ModelId {
            id: String::new(),
            version: String::new(),
        },
    });
    let out_of_domain = standing.map(|text| standing_of(text, &algorithm.id));
    Ok(CaseResult {
        observer,
        algorithm,
        verifier,
        findings,
        report,
        local_description,
        consistency,
        out_of_domain,
        lesion_images,
    })
}

/// A result's content items sorted by what they say: presence per organ (a qualitative
/// evaluation, or an older document's group), each lesion (a group drawn on its own image, or
/// an evaluation) with the number its label gives it, and the key evidence group.
struct Parts<'a> {
    presence: Vec<(Organ, &'a Node)>,
    lesions: Vec<(Organ, Option<usize>, &'a Node)>,
    evidence: Option<&'a Node>,
    algorithm: Option<ModelId>,
}

fn parts<'a>(groups: &'a [Node], evaluations: Option<&'a Node>) -> Result<Parts<'a>, String> {
    let mut parts = Parts {
        presence: Vec::new(),
        lesions: Vec::new(),
        evidence: None,
        algorithm: None,
    };
    for group in groups {
        if parts.algorithm.is_none() {
            parts.algorithm = model_of(group);
        }
        let label = group
            .child(&codes::tracking_identifier())
            .and_then(Node::text)
            .unwrap_or_default();
        if label.starts_with("key evidence") {
            parts.evidence = Some(group);
            continue;
        }
        let Some(organ) = organ_of(group) else {
            return Err(format!(
                "measurement group `{label}` names no organ Keyslice knows"
            ));
        };
        if group.child(&codes::tumor_presence()).is_some() {
            parts.presence.push((organ, group));
        } else {
            parts.lesions.push((organ, label_number(label), group));
        }
    }
    let named = |node: &Node, code: &codes::Code| node.name.is(&code.value, &code.scheme);
    for item in evaluations
        .map(|node| node.children.as_slice())
        .unwrap_or_default()
    {
        let is_lesion = named(item, &codes::finding())
            && item
                .code()
                .is_some_and(|code| code.is(&codes::neoplasm().value, &codes::neoplasm().scheme));
        let is_presence = named(item, &codes::tumor_presence());
        if !is_lesion && !is_presence {
            continue;
        }
        let Some(organ) = organ_of(item) else {
            return Err(format!(
                "the qualitative evaluation `{}` names no organ Keyslice knows",
                item.name.meaning
            ));
        };
        if is_presence {
            parts.presence.push((organ, item));
        } else {
            let label = item
                .child(&codes::tracking_identifier())
                .and_then(Node::text)
                .unwrap_or_default();
            parts.lesions.push((organ, label_number(label), item));
        }
    }
    Ok(parts)
}

/// Presence and lesions per organ into `findings`, lesions in the order of their numbers;
/// each finding's standing and each lesion's own image.
fn organ_findings(
    parts: &Parts<'_>,
    findings: &mut Findings,
) -> Result<(Vec<FindingConsistency>, Vec<LesionImage>), String> {
    let mut standings = Vec::new();
    let mut images = Vec::new();
    for organ in Organ::ALL {
        for (_, node) in parts.presence.iter().filter(|(o, _)| *o == organ) {
            // An evaluation is the presence itself; an older document's group holds it.
            let own = node.name.is(
                &codes::tumor_presence().value,
                &codes::tumor_presence().scheme,
            );
            let presence = node
                .code()
                .filter(|_| own)
                .or_else(|| node.child(&codes::tumor_presence()).and_then(Node::code))
                .and_then(codes::presence_of);
            if let Some(presence) = presence {
                findings.organ_mut(organ).tumor = presence;
            }
            if let Some(standing) = finding_standing(node, organ, None)? {
                standings.push(standing);
            }
        }
        let mut mine: Vec<&(Organ, Option<usize>, &Node)> = parts
            .lesions
            .iter()
            .filter(|(o, _, _)| *o == organ)
            .collect();
        // A lesion without a number keeps its place after the numbered ones.
        mine.sort_by_key(|(_, number, _)| number.unwrap_or(usize::MAX));
        for (_, _, node) in mine {
            let lesions = &mut findings.organ_mut(organ).lesions;
            lesions.push(lesion(node)?);
            let index = lesions.len() - 1;
            if let Some(standing) = finding_standing(node, organ, Some(index))? {
                standings.push(standing);
            }
            if let Some(image) = lesion_image(node, organ, index)? {
                if let Some(evidence) = &mut lesions[index].evidence
                    && evidence.key_slice == image.slice
                {
                    evidence.slice_box = Some(image.slice_box.clone());
                }
                images.push(image);
            }
        }
    }
    Ok((standings, images))
}

/// The number a label gives a lesion ("liver lesion 2, 3.1 cm" is 2), counted from 1; as an
/// index from 0.
fn label_number(label: &str) -> Option<usize> {
    let (_, rest) = label.split_once("lesion ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse::<usize>().ok()?.checked_sub(1)
}

/// A lesion's own image, when its group draws it: the box on the image it is selected from
/// (the group's image region, or the outline the slice index is measured on), the slice
/// index, and the axes where they are drawn on the same image.
fn lesion_image(node: &Node, organ: Organ, lesion: usize) -> Result<Option<LesionImage>, String> {
    let region = node.child(&codes::image_region()).or_else(|| {
        node.child(&codes::key_slice_index())
            .and_then(|index| index.child(&codes::source_of_measurement()))
    });
    let Some(region) = region else {
        return Ok(None);
    };
    let Value::Scoord(_, points) = &region.value else {
        return Ok(None);
    };
    let Some(sop) = region.children.iter().find_map(|child| match &child.value {
        Value::Image(_, sop) => Some(sop.clone()),
        _ => None,
    }) else {
        return Ok(None);
    };
    let Some(slice) = checked_slice(node, &codes::key_slice_index(), "a lesion's slice index")?
    else {
        return Ok(None);
    };
    let slice_box = box_of(points)
        .map_err(|error| format!("the box of {} lesion {} {error}", organ.key(), lesion + 1))?;
    let axes = axes_of(node, &sop);
    Ok(slice_box.map(|slice_box| LesionImage {
        organ,
        lesion,
        slice,
        sop_instance_uid: sop,
        slice_box,
        axes,
    }))
}

/// The long and short axes a lesion group draws on image `sop`: each axis measurement's
/// line of two points, as voxel positions (to a hundredth of a voxel); `None` unless both
/// are there, on that image, and on an image at all.
fn axes_of(node: &Node, sop: &str) -> Option<LesionAxes> {
    let ends = |name: Code| -> Option<[[f64; 2]; 2]> {
        let line = node.child(&name)?.child(&codes::source_of_measurement())?;
        let on_image = line
            .children
            .iter()
            .any(|child| matches!(&child.value, Value::Image(_, image) if image.as_str() == sop));
        let Value::Scoord(kind, points) = &line.value else {
            return None;
        };
        if !on_image || kind != "POLYLINE" || points.len() != 4 {
            return None;
        }
        let voxel = |value: f32| (f64::from(value) - 0.5) * 100.0;
        let at = |i: usize| voxel(points[i]).round() / 100.0;
        Some([[at(0), at(1)], [at(2), at(3)]])
    };
    let axes = LesionAxes {
        long: ends(codes::long_axis())?,
        short: ends(codes::short_axis())?,
    };
    axes.fits(usize::from(u16::MAX), usize::from(u16::MAX))
        .then_some(axes)
}

/// The box a closed POLYLINE of pixel edges outlines (pixel corners, inclusive); `None` for
/// fewer than four points.
fn box_of(points: &[f32]) -> Result<Option<SliceBox>, String> {
    if points.len() < 8 {
        return Ok(None);
    }
    if let Some(bad) = points
        .iter()
        .find(|&&point| !point.is_finite() || !(0.0..=65_536.0).contains(&point))
    {
        return Err(format!("has the coordinate {bad}, outside any image"));
    }
    let xs = points.iter().step_by(2).copied();
    let ys = points.iter().skip(1).step_by(2).copied();
    let (c0, c1) = xs.fold((f32::MAX, f32::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let (r0, r1) = ys.fold((f32::MAX, f32::MIN), |(lo, hi), y| (lo.min(y), hi.max(y)));
    // Within 0..=65 536 (checked above): exact as u32 once rounded.
    Ok(Some(SliceBox {
        voxels: [
            c0.round().max(0.0) as u32,
            r0.round().max(0.0) as u32,
            (c1.round() - 1.0).max(0.0) as u32,
            (r1.round() - 1.0).max(0.0) as u32,
        ],
        mm: None,
    }))
}

/// The algorithm a node names (its Algorithm Name and Version modifiers), if any.
fn model_of(node: &Node) -> Option<ModelId> {
    node.child(&codes::algorithm_name())
        .and_then(Node::text)
        .map(|id| ModelId {
            id: id.to_string(),
            version: node
                .child(&codes::algorithm_version())
                .and_then(Node::text)
                .unwrap_or_default()
                .to_string(),
        })
}

/// A result's standing from its text: whatever the document's words, a result marked as out
/// of the model's depth reads back as such (the label is Keyslice's own), with its reasons.
fn standing_of(text: &str, model: &str) -> OutOfDomain {
    let reasons = text
        .strip_prefix(OutOfDomain::LABEL)
        .map_or(text, |rest| rest.trim_start_matches(':').trim());
    OutOfDomain::new(
        model,
        reasons
            .split("; ")
            .filter(|reason| !reason.is_empty())
            .take(MAX_REASONS)
            .map(|reason| keyslice_core::text::shown_short(reason, 200))
            .collect(),
    )
}

fn organ_of(group: &Node) -> Option<Organ> {
    let site = group.child(&codes::finding_site())?;
    let laterality = site.child(&codes::laterality()).and_then(Node::code);
    codes::organ_of(site.code()?, laterality)
}

/// A NUM item's value when it is present, refused unless finite and within `range`
/// (`meaning` says what it is, for the error).
fn checked_number(
    group: &Node,
    code: &codes::Code,
    meaning: &str,
    range: std::ops::RangeInclusive<f64>,
) -> Result<Option<f64>, String> {
    match group.child(code).and_then(Node::number) {
        None => Ok(None),
        Some(value) if value.is_finite() && range.contains(&value) => Ok(Some(value)),
        Some(value) => Err(format!(
            "{meaning} is {}, not within {}–{}: the document is damaged or not a result Keyslice can trust",
            readable(value),
            range.start(),
            range.end()
        )),
    }
}

/// A number as people write it: `1e300` rather than three hundred digits.
fn readable(value: f64) -> String {
    if value != 0.0 && (value.abs() >= 1e6 || value.abs() < 1e-3) {
        format!("{value:e}")
    } else {
        format!("{value}")
    }
}

/// A slice index item: a whole number from 0 to [`MAX_SLICE_INDEX`].
fn checked_slice(group: &Node, code: &codes::Code, meaning: &str) -> Result<Option<u32>, String> {
    match checked_number(group, code, meaning, 0.0..=MAX_SLICE_INDEX)? {
        Some(value) if value.fract() != 0.0 => {
            Err(format!("{meaning} is {value}, not a whole slice number"))
        }
        // Whole and within 0..=65 535: exact as u32.
        value => Ok(value.map(|value| value as u32)),
    }
}

/// A lesion axis: more than 0 and at most [`MAX_AXIS_CM`] centimetres.
fn checked_axis(group: &Node, code: &codes::Code, meaning: &str) -> Result<Option<f64>, String> {
    match checked_number(group, code, meaning, 0.0..=MAX_AXIS_CM)? {
        Some(value) if value <= 0.0 => Err(format!("{meaning} is {value} cm, not a size")),
        value => Ok(value),
    }
}

fn lesion(group: &Node) -> Result<Lesion, String> {
    let long_cm = checked_axis(group, &codes::long_axis(), "the long axis")?;
    let short_cm = checked_axis(group, &codes::short_axis(), "the short axis")?;
    let location_name = codes::location_in_organ();
    let location_codes: Vec<&codes::Code> = group
        .children_named(&location_name)
        .filter_map(Node::code)
        .collect();
    let count = checked_number(
        group,
        &codes::lesion_count(),
        "the lesion count",
        1.0..=1000.0,
    )?;
    Ok(Lesion {
        size: long_cm.map(|long_cm| LesionSize { long_cm, short_cm }),
        location: codes::location_of(&location_codes),
        attenuation: group
            .child(&codes::attenuation())
            .and_then(Node::code)
            .and_then(codes::attenuation_of),
        // Within 1..=1000: exact as u32 once rounded.
        count: count.map(|n| n.round() as u32),
        // Its own evidence: its slice and range here, its box where its group draws it.
        evidence: checked_slice(group, &codes::key_slice_index(), "a lesion's slice index")?
            .map(|key_slice| -> Result<Evidence, String> {
                let first = checked_slice(
                    group,
                    &codes::lesion_first_slice(),
                    "a lesion's first slice",
                )?;
                let last =
                    checked_slice(group, &codes::lesion_last_slice(), "a lesion's last slice")?;
                Ok(Evidence {
                    key_slice,
                    slice_box: None,
                    slices: first
                        .zip(last)
                        .map(|(first, last)| SliceRange { first, last }),
                })
            })
            .transpose()?,
        spans: keyslice_core::findings::LesionSpans::default(),
    })
}

/// A finding's standing and consistency as its measurement group gives them; `None` when the
/// group carries none (a result never verified, or written before findings had their own).
fn finding_standing(
    group: &Node,
    organ: Organ,
    lesion: Option<usize>,
) -> Result<Option<FindingConsistency>, String> {
    let Some(word) = group.child(&codes::finding_standing()).and_then(Node::text) else {
        return Ok(None);
    };
    let standing = [
        Standing::Agrees,
        Standing::Denied,
        Standing::Unverified,
        Standing::NotReported,
    ]
    .into_iter()
    .find(|standing| standing.word() == word.trim())
    .ok_or_else(|| {
        format!(
            "the standing of {} is `{word}`, not one Keyslice writes",
            organ.key()
        )
    })?;
    let score = checked_number(
        group,
        &codes::consistency(),
        "a finding's consistency",
        0.0..=1.0,
    )?
    .unwrap_or(0.0);
    Ok(Some(FindingConsistency {
        organ,
        lesion,
        standing,
        score,
    }))
}

fn evidence(
    group: &Node,
    findings: &mut Findings,
    local_description: &mut Option<String>,
    consistency: &mut Option<Consistency>,
) -> Result<(), String> {
    let sop = group
        .child(&codes::key_slice())
        .and_then(|node| match &node.value {
            Value::Image(_, sop) => Some(sop.clone()),
            _ => None,
        });
    let index = checked_slice(group, &codes::key_slice_index(), "the key slice index")?;
    if let Some(index) = index {
        findings.key_slice = Some(KeySlice {
            index,
            z_mm: checked_number(
                group,
                &codes::key_slice_z(),
                "the key slice position (mm)",
                -1.0e5..=1.0e5,
            )?,
            sop_instance_uid: sop,
            span: None,
        });
    }
    if let (Some(first), Some(last)) = (
        checked_slice(
            group,
            &codes::lesion_first_slice(),
            "the lesion's first slice",
        )?,
        checked_slice(
            group,
            &codes::lesion_last_slice(),
            "the lesion's last slice",
        )?,
    ) {
        if first > last {
            return Err(format!(
                "the lesion's slice range {first}–{last} runs backwards"
            ));
        }
        findings.lesion_slices = Some(SliceRange { first, last });
    }
    if let Some(Value::Scoord(_, points)) = group.child(&codes::image_region()).map(|n| &n.value)
        && let Some(slice_box) =
            box_of(points).map_err(|error| format!("the evidence box {error}"))?
    {
        findings.slice_box = Some(slice_box);
    }
    *local_description = group
        .child(&codes::verifier_description())
        .and_then(Node::text)
        .map(str::to_string);
    let score_of =
        |code: codes::Code, meaning: &str| checked_number(group, &code, meaning, 0.0..=1.0);
    if let Some(score) = score_of(codes::consistency(), "the consistency")? {
        *consistency = Some(Consistency {
            score,
            organ: score_of(codes::consistency_organ(), "the organ consistency")?.unwrap_or(score),
            location: score_of(codes::consistency_location(), "the location consistency")?,
            attenuation: score_of(
                codes::consistency_attenuation(),
                "the attenuation consistency",
            )?,
            size: score_of(codes::consistency_size(), "the size consistency")?,
            region: score_of(codes::consistency_region(), "the region consistency")?,
            findings: Vec::new(),
        });
    }
    Ok(())
}
