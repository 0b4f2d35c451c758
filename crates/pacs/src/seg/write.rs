//! Writes masks as a binary DICOM Segmentation on the CT's grid.

use std::fmt::Write as _;

use dicom_core::value::PrimitiveValue;
use dicom_core::{DataElement, Tag, VR};
use dicom_dictionary_std::{tags, uids};
use dicom_object::InMemDicomObject;
use keyslice_core::prediction::ModelId;
use keyslice_io::dicom::write::{decimals, text};
use sha2::{Digest, Sha256};

use super::{Algorithm, MAX_SEGMENTS, SEG_SERIES_NUMBER, SegError, Segment, SourceSeries};
use crate::sr::StudyContext;
use crate::sr::codes::Code;
use crate::sr::tree::{code_item, sequence, sop_reference};
use crate::sr::write::{Document, Written};

/// Who made the masks: the person named as content creator (empty for a model's masks) and
/// the model whose result they belong to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authorship {
    /// Content Creator's Name (a DICOM person name), empty when a model made them alone.
    pub creator: String,
    /// The model whose findings the masks belong to (the equipment's model name).
    pub model: ModelId,
}

/// `segments` (empty ones left out) as one binary DICOM Segmentation of `source`, in
/// `study`. Frames are the slices each segment touches, in segment then slice order; each
/// references its source image. The document's UIDs follow from the study and the masks:
/// the same masks written twice are one document.
pub fn segmentation(
    study: &StudyContext,
    source: &SourceSeries,
    segments: &[Segment],
    authorship: &Authorship,
) -> Result<Written, SegError> {
    let expected = source.voxel_count();
    if let Some(segment) = segments.iter().find(|s| s.mask.len() != expected) {
        return Err(SegError::MaskSize {
            label: segment.label.clone(),
            found: segment.mask.len(),
            expected,
        });
    }
    let segments: Vec<&Segment> = segments
        .iter()
        .filter(|segment| segment.mask.iter().any(|&v| v != 0))
        .collect();
    if segments.is_empty() {
        return Err(SegError::Empty);
    }
    if segments.len() > MAX_SEGMENTS {
        return Err(SegError::TooMany(segments.len()));
    }
    let frames = frames_of(source, &segments);
    let seed = format!("{}|seg|{}", study.study_uid, content_digest(&segments));
    let document = Document {
        class_uid: uids::SEGMENTATION_STORAGE,
        modality: "SEG",
        series_number: SEG_SERIES_NUMBER,
        series_description: "Keyslice lesion masks".into(),
        seed: seed.clone(),
        series_seed: format!("{}|seg|", study.study_uid),
        content_at: None,
    };
    let mut object = document.header(study, &authorship.model);
    // A segmentation's series names no performed procedure step (an SR's names an empty one).
    object.remove_element(tags::REFERENCED_PERFORMED_PROCEDURE_STEP_SEQUENCE);
    if !segments
        .iter()
        .any(|segment| matches!(segment.of, super::SegmentOf::Other(_)))
    {
        object.remove_element(tags::CODING_SCHEME_IDENTIFICATION_SEQUENCE);
    }
    object.put(text(tags::IMAGE_TYPE, VR::CS, "DERIVED\\PRIMARY"));
    object.put(text(tags::CONTENT_LABEL, VR::CS, "KEYSLICE_MASKS"));
    object.put(text(
        tags::CONTENT_DESCRIPTION,
        VR::LO,
        "Lesion and organ masks",
    ));
    object.put(text(
        tags::CONTENT_CREATOR_NAME,
        VR::PN,
        &authorship.creator,
    ));
    object.put(text(
        tags::FRAME_OF_REFERENCE_UID,
        VR::UI,
        &source.frame_of_reference_uid,
    ));
    object.put(text(tags::POSITION_REFERENCE_INDICATOR, VR::LO, ""));
    object.put(text(tags::SEGMENTATION_TYPE, VR::CS, "BINARY"));
    object.put(sequence(
        tags::SEGMENT_SEQUENCE,
        segments
            .iter()
            .zip(1u16..)
            .map(|(segment, number)| segment_item(segment, number, &seed))
            .collect(),
    ));
    put_geometry(&mut object, source);
    put_dimensions(&mut object, &seed);
    object.put(sequence(
        tags::PER_FRAME_FUNCTIONAL_GROUPS_SEQUENCE,
        frames
            .iter()
            .map(|frame| frame_item(source, frame))
            .collect(),
    ));
    object.put(referenced_series(source, &frames));
    put_pixels(&mut object, source, &segments, &frames);
    document
        .finish(object)
        .map_err(|error| SegError::Dicom(error.to_string()))
}

/// One frame: a segment (numbered from 1) on a slice.
struct Frame {
    segment: u16,
    slice: usize,
}

/// The slices each segment touches, in segment then slice order.
fn frames_of(source: &SourceSeries, segments: &[&Segment]) -> Vec<Frame> {
    let plane = source.plane();
    segments
        .iter()
        .zip(1u16..)
        .flat_map(|(segment, number)| {
            segment
                .mask
                .chunks_exact(plane.max(1))
                .enumerate()
                .filter(|(_, slice)| slice.iter().any(|&v| v != 0))
                .map(move |(slice, _)| Frame {
                    segment: number,
                    slice,
                })
        })
        .collect()
}

/// A digest of the segments' labels, kinds and masks.
fn content_digest(segments: &[&Segment]) -> String {
    let mut hasher = Sha256::new();
    for segment in segments {
        hasher.update(format!(
            "{:?}|{}|{:?}|",
            segment.of, segment.label, segment.algorithm
        ));
        hasher.update(&segment.mask);
    }
    let mut hex = String::with_capacity(64);
    for byte in hasher.finalize() {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// A Segment Sequence item.
fn segment_item(segment: &Segment, number: u16, seed: &str) -> InMemDicomObject {
    let codes = segment.codes();
    let mut item = InMemDicomObject::new_empty();
    item.put(DataElement::new(
        tags::SEGMENT_NUMBER,
        VR::US,
        PrimitiveValue::from(number),
    ));
    item.put(text(tags::SEGMENT_LABEL, VR::LO, &segment.label));
    let (kind, name) = match &segment.algorithm {
        Algorithm::Manual => ("MANUAL", None),
        Algorithm::Semiautomatic(name) => ("SEMIAUTOMATIC", Some(name)),
        Algorithm::Automatic(name) => ("AUTOMATIC", Some(name)),
    };
    item.put(text(tags::SEGMENT_ALGORITHM_TYPE, VR::CS, kind));
    if let Some(name) = name {
        item.put(text(tags::SEGMENT_ALGORITHM_NAME, VR::LO, name));
    }
    item.put(sequence(
        tags::SEGMENTED_PROPERTY_CATEGORY_CODE_SEQUENCE,
        vec![code_item(&codes.category)],
    ));
    let mut kind_item = code_item(&codes.kind);
    if let Some(modifier) = &codes.kind_modifier {
        kind_item.put(sequence(
            tags::SEGMENTED_PROPERTY_TYPE_MODIFIER_CODE_SEQUENCE,
            vec![code_item(modifier)],
        ));
    }
    item.put(sequence(
        tags::SEGMENTED_PROPERTY_TYPE_CODE_SEQUENCE,
        vec![kind_item],
    ));
    if let Some((region, laterality)) = &codes.region {
        let mut region_item = code_item(region);
        if let Some(laterality) = laterality {
            region_item.put(sequence(
                tags::ANATOMIC_REGION_MODIFIER_SEQUENCE,
                vec![code_item(laterality)],
            ));
        }
        item.put(sequence(tags::ANATOMIC_REGION_SEQUENCE, vec![region_item]));
    }
    // The segment keeps one identity across the documents of a case.
    item.put(text(tags::TRACKING_ID, VR::UT, &segment.label));
    item.put(text(
        tags::TRACKING_UID,
        VR::UI,
        &crate::sr::content_uid(&format!("{seed}|track|{}", segment.label)),
    ));
    let colour = lab_colour(&segment.of);
    item.put(DataElement::new(
        tags::RECOMMENDED_DISPLAY_CIE_LAB_VALUE,
        VR::US,
        PrimitiveValue::U16(colour.into_iter().collect()),
    ));
    item
}

/// A display colour (`CIELab` scaled to 0–65535): lesions warm, organs by organ.
fn lab_colour(of: &super::SegmentOf) -> [u16; 3] {
    use keyslice_core::findings::Organ;
    match of {
        super::SegmentOf::Lesion { .. } => [34_000, 53_000, 50_000],
        super::SegmentOf::Organ(Organ::Liver) => [37_000, 41_000, 43_000],
        super::SegmentOf::Organ(Organ::Pancreas) => [52_000, 36_000, 44_000],
        super::SegmentOf::Organ(_) => [42_000, 40_000, 28_000],
        super::SegmentOf::Other(_) => [45_000, 32_896, 32_896],
    }
}

/// Shared functional groups: pixel spacing, slice thickness and the plane's orientation.
fn put_geometry(object: &mut InMemDicomObject, source: &SourceSeries) {
    let affine = &source.patient_from_voxel;
    let spacing = affine.spacing_mm();
    let [x, y, _] = affine.directions();
    let mut measures = InMemDicomObject::new_empty();
    measures.put(text(
        tags::PIXEL_SPACING,
        VR::DS,
        &decimals(&[spacing[1], spacing[0]]),
    ));
    measures.put(text(
        tags::SLICE_THICKNESS,
        VR::DS,
        &decimals(&[spacing[2]]),
    ));
    measures.put(text(
        tags::SPACING_BETWEEN_SLICES,
        VR::DS,
        &decimals(&[spacing[2]]),
    ));
    let mut orientation = InMemDicomObject::new_empty();
    orientation.put(text(
        tags::IMAGE_ORIENTATION_PATIENT,
        VR::DS,
        &decimals(&[x[0], x[1], x[2], y[0], y[1], y[2]]),
    ));
    let mut shared = InMemDicomObject::new_empty();
    shared.put(sequence(tags::PIXEL_MEASURES_SEQUENCE, vec![measures]));
    shared.put(sequence(
        tags::PLANE_ORIENTATION_SEQUENCE,
        vec![orientation],
    ));
    object.put(sequence(
        tags::SHARED_FUNCTIONAL_GROUPS_SEQUENCE,
        vec![shared],
    ));
}

/// The two dimensions frames are indexed by: segment number, then position.
fn put_dimensions(object: &mut InMemDicomObject, seed: &str) {
    let organisation = crate::sr::content_uid(&format!("{seed}|dimensions"));
    let mut organisation_item = InMemDicomObject::new_empty();
    organisation_item.put(text(
        tags::DIMENSION_ORGANIZATION_UID,
        VR::UI,
        &organisation,
    ));
    object.put(sequence(
        tags::DIMENSION_ORGANIZATION_SEQUENCE,
        vec![organisation_item],
    ));
    let dimension = |pointer: Tag, group: Tag, label: &str| {
        let mut item = InMemDicomObject::new_empty();
        item.put(text(
            tags::DIMENSION_ORGANIZATION_UID,
            VR::UI,
            &organisation,
        ));
        item.put(DataElement::new(
            tags::DIMENSION_INDEX_POINTER,
            VR::AT,
            PrimitiveValue::Tags([pointer].into_iter().collect()),
        ));
        item.put(DataElement::new(
            tags::FUNCTIONAL_GROUP_POINTER,
            VR::AT,
            PrimitiveValue::Tags([group].into_iter().collect()),
        ));
        item.put(text(tags::DIMENSION_DESCRIPTION_LABEL, VR::LO, label));
        item
    };
    object.put(sequence(
        tags::DIMENSION_INDEX_SEQUENCE,
        vec![
            dimension(
                tags::REFERENCED_SEGMENT_NUMBER,
                tags::SEGMENT_IDENTIFICATION_SEQUENCE,
                "ReferencedSegmentNumber",
            ),
            dimension(
                tags::IMAGE_POSITION_PATIENT,
                tags::PLANE_POSITION_SEQUENCE,
                "ImagePositionPatient",
            ),
        ],
    ));
}

/// (121322, DCM, "Source image for image processing operation")
fn source_image_purpose() -> Code {
    Code::new(
        "121322",
        "DCM",
        "Source image for image processing operation",
    )
}

/// (113076, DCM, "Segmentation")
fn segmentation_derivation() -> Code {
    Code::new("113076", "DCM", "Segmentation")
}

/// One frame's functional groups: its source image, dimension index, position and segment.
fn frame_item(source: &SourceSeries, frame: &Frame) -> InMemDicomObject {
    let mut reference = sop_reference(&source.image_class_uid, &source.slice_uids[frame.slice]);
    reference.put(sequence(
        tags::PURPOSE_OF_REFERENCE_CODE_SEQUENCE,
        vec![code_item(&source_image_purpose())],
    ));
    // The frame is the source slice's own grid: a viewer may index it by that image.
    reference.put(text(tags::SPATIAL_LOCATIONS_PRESERVED, VR::CS, "YES"));
    let mut derivation = InMemDicomObject::new_empty();
    derivation.put(sequence(tags::SOURCE_IMAGE_SEQUENCE, vec![reference]));
    derivation.put(sequence(
        tags::DERIVATION_CODE_SEQUENCE,
        vec![code_item(&segmentation_derivation())],
    ));
    let position = source
        .patient_from_voxel
        .apply([0.0, 0.0, frame.slice as f64]);
    let mut content = InMemDicomObject::new_empty();
    let slice_index = u32::try_from(frame.slice + 1).unwrap_or(u32::MAX);
    content.put(DataElement::new(
        tags::DIMENSION_INDEX_VALUES,
        VR::UL,
        PrimitiveValue::U32(
            [u32::from(frame.segment), slice_index]
                .into_iter()
                .collect(),
        ),
    ));
    let mut plane = InMemDicomObject::new_empty();
    plane.put(text(
        tags::IMAGE_POSITION_PATIENT,
        VR::DS,
        &decimals(&position),
    ));
    let mut identification = InMemDicomObject::new_empty();
    identification.put(DataElement::new(
        tags::REFERENCED_SEGMENT_NUMBER,
        VR::US,
        PrimitiveValue::from(frame.segment),
    ));
    let mut item = InMemDicomObject::new_empty();
    item.put(sequence(tags::DERIVATION_IMAGE_SEQUENCE, vec![derivation]));
    item.put(sequence(tags::FRAME_CONTENT_SEQUENCE, vec![content]));
    item.put(sequence(tags::PLANE_POSITION_SEQUENCE, vec![plane]));
    item.put(sequence(
        tags::SEGMENT_IDENTIFICATION_SEQUENCE,
        vec![identification],
    ));
    item
}

/// Common Instance Reference: the source images the frames derive from.
fn referenced_series(source: &SourceSeries, frames: &[Frame]) -> DataElement<InMemDicomObject> {
    let mut slices: Vec<usize> = frames.iter().map(|frame| frame.slice).collect();
    slices.sort_unstable();
    slices.dedup();
    let mut series = InMemDicomObject::new_empty();
    series.put(text(tags::SERIES_INSTANCE_UID, VR::UI, &source.series_uid));
    series.put(sequence(
        tags::REFERENCED_INSTANCE_SEQUENCE,
        slices
            .iter()
            .map(|&slice| sop_reference(&source.image_class_uid, &source.slice_uids[slice]))
            .collect(),
    ));
    sequence(tags::REFERENCED_SERIES_SEQUENCE, vec![series])
}

/// Image pixel attributes and the frames as 1-bit pixels, packed without padding between
/// frames, the first pixel in each byte's lowest bit.
fn put_pixels(
    object: &mut InMemDicomObject,
    source: &SourceSeries,
    segments: &[&Segment],
    frames: &[Frame],
) {
    let plane = source.plane();
    let [columns, rows, _] = source.dims;
    let bits = plane * frames.len();
    let mut packed = vec![0u8; bits.div_ceil(8)];
    for (n, frame) in frames.iter().enumerate() {
        let segment = segments[usize::from(frame.segment) - 1];
        let slice = &segment.mask[frame.slice * plane..(frame.slice + 1) * plane];
        for (i, _) in slice.iter().enumerate().filter(|(_, v)| **v != 0) {
            let bit = n * plane + i;
            packed[bit / 8] |= 1 << (bit % 8);
        }
    }
    if packed.len() % 2 == 1 {
        packed.push(0);
    }
    let short = |tag, value: u16| DataElement::new(tag, VR::US, PrimitiveValue::from(value));
    object.put(short(tags::SAMPLES_PER_PIXEL, 1));
    object.put(text(
        tags::PHOTOMETRIC_INTERPRETATION,
        VR::CS,
        "MONOCHROME2",
    ));
    object.put(short(tags::ROWS, u16::try_from(rows).unwrap_or(u16::MAX)));
    object.put(short(
        tags::COLUMNS,
        u16::try_from(columns).unwrap_or(u16::MAX),
    ));
    object.put(short(tags::BITS_ALLOCATED, 1));
    object.put(short(tags::BITS_STORED, 1));
    object.put(short(tags::HIGH_BIT, 0));
    object.put(short(tags::PIXEL_REPRESENTATION, 0));
    object.put(text(tags::LOSSY_IMAGE_COMPRESSION, VR::CS, "00"));
    object.put(text(
        tags::NUMBER_OF_FRAMES,
        VR::IS,
        &frames.len().to_string(),
    ));
    object.put(DataElement::new(
        tags::PIXEL_DATA,
        VR::OB,
        PrimitiveValue::from(packed),
    ));
}
