//! Reads a binary DICOM Segmentation (Keyslice's or another tool's) onto a CT's grid.

use std::path::Path;

use dicom_core::Tag;
use dicom_dictionary_std::{tags, uids};
use dicom_object::InMemDicomObject;
use keyslice_core::findings::Organ;
use keyslice_core::text::shown_short;
use keyslice_core::volume::Affine;

use super::{Algorithm, MAX_SEGMENTS, SegError, Segment, SegmentOf, SourceSeries};
use crate::sr::codes;
use crate::sr::tree::{first_item, items, read_code, string};

/// The largest segmentation file read (a CT's worth of 1-bit frames for many segments).
pub const MAX_SEG_BYTES: usize = 1 << 30;
/// The most memory the masks of one segmentation may take (a byte per voxel per segment).
pub const MAX_MASK_BYTES: usize = 2 << 30;

/// What a segmentation holds, on the CT's grid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadSegmentation {
    /// Its SOP Instance UID.
    pub sop_uid: String,
    /// Every segment with its mask (segment number order).
    pub segments: Vec<Segment>,
    /// What was read but is worth knowing (segments that overlap, frames given twice), in
    /// words.
    pub notes: Vec<String>,
}

/// Whether the file at `path` is a DICOM Segmentation (by its file meta, without reading
/// the rest).
#[must_use]
pub fn is_segmentation_file(path: &Path) -> bool {
    dicom_object::OpenFileOptions::new()
        .read_until(tags::SOP_CLASS_UID)
        .open_file(path)
        .is_ok_and(|object| {
            object
                .meta()
                .media_storage_sop_class_uid
                .trim_end_matches(['\0', ' '])
                == uids::SEGMENTATION_STORAGE
        })
}

/// A segmentation file's Content Date and Time as `YYYYMMDDHHMMSS…` (empty where the file
/// states none), read without its frames: which of several segmentations of a study is the
/// newest. `None` when the file cannot be read.
#[must_use]
pub fn content_date_time(path: &Path) -> Option<String> {
    let object = dicom_object::OpenFileOptions::new()
        .read_until(tags::PIXEL_DATA)
        .open_file(path)
        .ok()?;
    let get = |tag| string(&object, tag).unwrap_or_default();
    Some(format!(
        "{}{}",
        get(tags::CONTENT_DATE).trim(),
        get(tags::CONTENT_TIME).trim()
    ))
}

/// Reads the segmentation file at `path` onto `source`.
pub fn segmentation_file(path: &Path, source: &SourceSeries) -> Result<ReadSegmentation, SegError> {
    let bytes = std::fs::read(path).map_err(|error| {
        SegError::Dicom(format!(
            "{}: {error}",
            keyslice_core::text::shown(&path.display().to_string())
        ))
    })?;
    segmentation(&bytes, source)
}

/// Reads the Part 10 bytes of a segmentation of `source`.
pub fn segmentation(bytes: &[u8], source: &SourceSeries) -> Result<ReadSegmentation, SegError> {
    if bytes.len() > MAX_SEG_BYTES {
        return Err(SegError::Dicom(format!(
            "{} bytes, more than the {} MiB a segmentation is read up to",
            bytes.len(),
            MAX_SEG_BYTES >> 20
        )));
    }
    let body = bytes
        .get(128..)
        .ok_or_else(|| SegError::Dicom("shorter than a DICOM preamble".into()))?;
    let object = dicom_object::OpenFileOptions::new()
        .from_reader(body)
        .map_err(|error| SegError::Dicom(format!("not a DICOM file: {error}")))?;
    let class = string(&object, tags::SOP_CLASS_UID).unwrap_or_default();
    if class != uids::SEGMENTATION_STORAGE {
        return Err(SegError::NotSegmentation(shown_short(&class, 80)));
    }
    let kind = string(&object, tags::SEGMENTATION_TYPE).unwrap_or_default();
    match kind.as_str() {
        "BINARY" => {}
        "FRACTIONAL" => {
            let of = string(&object, tags::SEGMENTATION_FRACTIONAL_TYPE).unwrap_or_default();
            return Err(SegError::Fractional(shown_short(&of.to_lowercase(), 40)));
        }
        _ => {
            return Err(SegError::Field {
                field: "SegmentationType",
                reason: format!("`{}`, where BINARY is read", shown_short(&kind, 40)),
            });
        }
    }
    check_same_series(&object, source)?;
    let [columns, rows] = check_size(&object, source)?;
    let descriptions = segment_descriptions(&object)?;
    let frames = frame_count(&object)?;
    let per_frame = items(&object, tags::PER_FRAME_FUNCTIONAL_GROUPS_SEQUENCE);
    if per_frame.len() < frames {
        return Err(SegError::FramesMissing {
            stated: frames,
            field: "PerFrameFunctionalGroupsSequence",
            found: per_frame.len(),
        });
    }
    let pixels = pixel_bytes(&object)?;
    let plane = rows * columns;
    let expected = (plane * frames).div_ceil(8);
    if pixels.len() < expected {
        return Err(SegError::PixelCount {
            found: pixels.len(),
            expected,
            rows,
            columns,
            frames,
        });
    }
    let shared = first_item(&object, tags::SHARED_FUNCTIONAL_GROUPS_SEQUENCE);
    let placer = Placer::new(source)?;
    // Each segment is read as a mask the size of the CT: bounded, so a SEG of many segments
    // on a large CT is refused instead of taking the machine's memory.
    let bytes = descriptions.len().saturating_mul(source.voxel_count());
    if bytes > MAX_MASK_BYTES {
        return Err(SegError::TooLarge {
            segments: descriptions.len(),
            megabytes: bytes >> 20,
        });
    }
    let mut masks = vec![vec![0u8; source.voxel_count()]; descriptions.len()];
    let mut seen = std::collections::HashSet::new();
    let mut notes = Vec::new();
    for (n, item) in per_frame.iter().take(frames).enumerate() {
        let frame = n + 1;
        let number = frame_segment(item, shared, descriptions.len())
            .map_err(|reason| SegError::Frame { frame, reason })?;
        check_orientation(item, shared, source)
            .map_err(|reason| SegError::Frame { frame, reason })?;
        let slice = placer
            .slice_of(item, shared)
            .map_err(|reason| SegError::Frame { frame, reason })?;
        if !seen.insert((number, slice)) {
            notes.push(format!(
                "frame {frame} gives slice {} of segment {number} again; both are kept",
                slice + 1
            ));
        }
        let mask = &mut masks[number - 1][slice * plane..(slice + 1) * plane];
        for (i, voxel) in mask.iter_mut().enumerate() {
            let bit = n * plane + i;
            if pixels[bit / 8] >> (bit % 8) & 1 == 1 {
                *voxel = 1;
            }
        }
    }
    let segments = segments_of(descriptions, masks);
    notes.extend(overlaps(&segments));
    Ok(ReadSegmentation {
        sop_uid: string(&object, tags::SOP_INSTANCE_UID).unwrap_or_default(),
        segments,
        notes,
    })
}

/// A segmentation of this CT: its frame of reference, and the series it references when it
/// names any.
fn check_same_series(object: &InMemDicomObject, source: &SourceSeries) -> Result<(), SegError> {
    let frame_of_reference = string(object, tags::FRAME_OF_REFERENCE_UID).unwrap_or_default();
    if frame_of_reference != source.frame_of_reference_uid {
        return Err(SegError::OtherSeries {
            theirs: format!(
                "frame of reference {}",
                shown_short(&frame_of_reference, 80)
            ),
            ours: format!("frame of reference {}", source.frame_of_reference_uid),
        });
    }
    let series: Vec<String> = items(object, tags::REFERENCED_SERIES_SEQUENCE)
        .iter()
        .filter_map(|item| string(item, tags::SERIES_INSTANCE_UID))
        .collect();
    if !series.is_empty() && !series.contains(&source.series_uid) {
        return Err(SegError::OtherSeries {
            theirs: format!("series {}", shown_short(&series.join(", "), 200)),
            ours: format!("series {}", source.series_uid),
        });
    }
    Ok(())
}

fn number_of(object: &InMemDicomObject, tag: Tag, field: &'static str) -> Result<usize, SegError> {
    let text = string(object, tag).ok_or(SegError::Field {
        field,
        reason: "missing".into(),
    })?;
    text.trim().parse::<usize>().map_err(|_| SegError::Field {
        field,
        reason: format!("`{}` is not a count", shown_short(&text, 40)),
    })
}

/// Columns and rows, which must be the CT's; 1-bit pixels.
fn check_size(object: &InMemDicomObject, source: &SourceSeries) -> Result<[usize; 2], SegError> {
    let columns = number_of(object, tags::COLUMNS, "Columns")?;
    let rows = number_of(object, tags::ROWS, "Rows")?;
    if [columns, rows] != [source.dims[0], source.dims[1]] {
        return Err(SegError::OtherSize {
            columns,
            rows,
            ct_columns: source.dims[0],
            ct_rows: source.dims[1],
        });
    }
    let bits = number_of(object, tags::BITS_ALLOCATED, "BitsAllocated")?;
    if bits != 1 {
        return Err(SegError::Field {
            field: "BitsAllocated",
            reason: format!("{bits}, where a binary segmentation has 1"),
        });
    }
    Ok([columns, rows])
}

fn frame_count(object: &InMemDicomObject) -> Result<usize, SegError> {
    let frames = number_of(object, tags::NUMBER_OF_FRAMES, "NumberOfFrames")?;
    if frames == 0 {
        return Err(SegError::Field {
            field: "NumberOfFrames",
            reason: "0: the segmentation holds no frame".into(),
        });
    }
    Ok(frames)
}

/// The pixel data, uncompressed.
fn pixel_bytes(object: &InMemDicomObject) -> Result<Vec<u8>, SegError> {
    let element = object
        .element_opt(tags::PIXEL_DATA)
        .ok()
        .flatten()
        .ok_or(SegError::Field {
            field: "PixelData",
            reason: "missing".into(),
        })?;
    if element.fragments().is_some() {
        return Err(SegError::Field {
            field: "PixelData",
            reason: "compressed (encapsulated); Keyslice reads uncompressed segmentations".into(),
        });
    }
    element
        .to_bytes()
        .map(std::borrow::Cow::into_owned)
        .map_err(|error| SegError::Field {
            field: "PixelData",
            reason: error.to_string(),
        })
}

/// What one Segment Sequence item says.
struct Description {
    number: usize,
    label: String,
    of: Described,
    algorithm: Algorithm,
}

/// What a segment is, before lesions are numbered per organ.
enum Described {
    Organ(Organ),
    LesionOf(Organ),
    Other(String),
}

/// The segments, in number order (numbered 1, 2, … as the standard requires).
fn segment_descriptions(object: &InMemDicomObject) -> Result<Vec<Description>, SegError> {
    let list = items(object, tags::SEGMENT_SEQUENCE);
    if list.is_empty() {
        return Err(SegError::Field {
            field: "SegmentSequence",
            reason: "empty: the segmentation describes no segment".into(),
        });
    }
    if list.len() > MAX_SEGMENTS {
        return Err(SegError::TooMany(list.len()));
    }
    let mut descriptions = Vec::with_capacity(list.len());
    for (n, item) in list.iter().enumerate() {
        let number = number_of(item, tags::SEGMENT_NUMBER, "SegmentNumber")?;
        if number != n + 1 {
            return Err(SegError::Field {
                field: "SegmentNumber",
                reason: format!(
                    "item {} is numbered {number}; segments are numbered 1, 2, …",
                    n + 1
                ),
            });
        }
        let label = string(item, tags::SEGMENT_LABEL).map_or_else(
            || format!("Segment {number}"),
            |label| shown_short(&label, 64),
        );
        let kind =
            first_item(item, tags::SEGMENTED_PROPERTY_TYPE_CODE_SEQUENCE).and_then(read_code);
        let modifier = first_item(item, tags::SEGMENTED_PROPERTY_TYPE_CODE_SEQUENCE)
            .and_then(|kind| first_item(kind, tags::SEGMENTED_PROPERTY_TYPE_MODIFIER_CODE_SEQUENCE))
            .and_then(read_code);
        let region = first_item(item, tags::ANATOMIC_REGION_SEQUENCE);
        let region_organ = region.and_then(|region| {
            let site = read_code(region)?;
            let laterality =
                first_item(region, tags::ANATOMIC_REGION_MODIFIER_SEQUENCE).and_then(read_code);
            codes::organ_of(&site, laterality.as_ref())
        });
        let of = match &kind {
            Some(kind) if is_lesion(kind) => match region_organ.or_else(|| organ_in(&label)) {
                Some(organ) => Described::LesionOf(organ),
                None => Described::Other(label.clone()),
            },
            Some(kind) => match codes::organ_of(kind, modifier.as_ref()) {
                Some(organ) => Described::Organ(organ),
                None => Described::Other(shown_short(&kind.meaning, 64)),
            },
            None => Described::Other(label.clone()),
        };
        let name = string(item, tags::SEGMENT_ALGORITHM_NAME).unwrap_or_default();
        let algorithm = match string(item, tags::SEGMENT_ALGORITHM_TYPE).as_deref() {
            Some("AUTOMATIC") => Algorithm::Automatic(name),
            Some("SEMIAUTOMATIC") => Algorithm::Semiautomatic(name),
            _ => Algorithm::Manual,
        };
        descriptions.push(Description {
            number,
            label,
            of,
            algorithm,
        });
    }
    Ok(descriptions)
}

/// A lesion's property type: a neoplasm, tumor, mass, lesion or nodule.
fn is_lesion(kind: &codes::Code) -> bool {
    const LESION_TYPES: [&str; 6] = [
        "108369006", // Neoplasm
        "4147007",   // Mass
        "52988006",  // Lesion
        "27925004",  // Nodule
        "86049000",  // Malignant neoplasm, primary
        "367643001", // Cyst
    ];
    kind.scheme == "SCT" && LESION_TYPES.contains(&kind.value.as_str())
}

/// An organ a label names (`liver tumor`, `kidney_lesion_left`), for a lesion segment that
/// states no anatomic region.
fn organ_in(label: &str) -> Option<Organ> {
    let label = label.to_lowercase();
    if label.contains("liver") || label.contains("hepat") {
        Some(Organ::Liver)
    } else if label.contains("pancrea") {
        Some(Organ::Pancreas)
    } else if label.contains("kidney") || label.contains("renal") {
        if label.contains("left") {
            Some(Organ::KidneyLeft)
        } else if label.contains("right") {
            Some(Organ::KidneyRight)
        } else {
            None
        }
    } else {
        None
    }
}

/// The segment number a frame belongs to (per-frame, or shared when there is one segment).
fn frame_segment(
    item: &InMemDicomObject,
    shared: Option<&InMemDicomObject>,
    count: usize,
) -> Result<usize, String> {
    let identification = first_item(item, tags::SEGMENT_IDENTIFICATION_SEQUENCE)
        .or_else(|| {
            shared.and_then(|shared| first_item(shared, tags::SEGMENT_IDENTIFICATION_SEQUENCE))
        })
        .ok_or("no SegmentIdentificationSequence: which segment it belongs to is not said")?;
    let number = string(identification, tags::REFERENCED_SEGMENT_NUMBER)
        .and_then(|text| text.trim().parse::<usize>().ok())
        .ok_or("ReferencedSegmentNumber missing or not a number")?;
    if number == 0 || number > count {
        return Err(format!(
            "it belongs to segment {number}, which the SegmentSequence does not describe (1 to {count})"
        ));
    }
    Ok(number)
}

/// Decimal values of a DS attribute.
fn decimals_of(object: &InMemDicomObject, tag: Tag) -> Option<Vec<f64>> {
    string(object, tag)?
        .split('\\')
        .map(|value| value.trim().parse::<f64>().ok())
        .collect()
}

/// The frame's plane is the CT's axial plane.
fn check_orientation(
    item: &InMemDicomObject,
    shared: Option<&InMemDicomObject>,
    source: &SourceSeries,
) -> Result<(), String> {
    let orientation = first_item(item, tags::PLANE_ORIENTATION_SEQUENCE)
        .or_else(|| shared.and_then(|shared| first_item(shared, tags::PLANE_ORIENTATION_SEQUENCE)))
        .and_then(|plane| decimals_of(plane, tags::IMAGE_ORIENTATION_PATIENT))
        .ok_or("no ImageOrientationPatient in its functional groups")?;
    let [x, y, _] = source.patient_from_voxel.directions();
    let ours = [x[0], x[1], x[2], y[0], y[1], y[2]];
    if orientation.len() != 6
        || orientation
            .iter()
            .zip(ours)
            .any(|(theirs, ours)| (theirs - ours).abs() > 1e-3)
    {
        return Err(format!(
            "its orientation {orientation:?} is not the CT's axial plane {ours:?}"
        ));
    }
    Ok(())
}

/// Places a frame's position on one of the CT's slices.
struct Placer {
    voxel_from_patient: Affine,
    slices: usize,
}

impl Placer {
    fn new(source: &SourceSeries) -> Result<Self, SegError> {
        let voxel_from_patient = source.patient_from_voxel.inverse().ok_or(SegError::Field {
            field: "ImagePositionPatient",
            reason: "the CT's voxel-to-patient transform is singular".into(),
        })?;
        Ok(Self {
            voxel_from_patient,
            slices: source.dims[2],
        })
    }

    fn slice_of(
        &self,
        item: &InMemDicomObject,
        shared: Option<&InMemDicomObject>,
    ) -> Result<usize, String> {
        let position = first_item(item, tags::PLANE_POSITION_SEQUENCE)
            .or_else(|| shared.and_then(|shared| first_item(shared, tags::PLANE_POSITION_SEQUENCE)))
            .and_then(|plane| decimals_of(plane, tags::IMAGE_POSITION_PATIENT))
            .filter(|position| position.len() == 3)
            .ok_or("no ImagePositionPatient in its functional groups")?;
        let voxel = self
            .voxel_from_patient
            .apply([position[0], position[1], position[2]]);
        // Its first pixel is the slice's first voxel: within a tenth of a voxel.
        if voxel[0].abs() > 0.1 || voxel[1].abs() > 0.1 || (voxel[2] - voxel[2].round()).abs() > 0.1
        {
            return Err(format!(
                "its position {position:?} mm is not the corner of one of the CT's slices (voxel {voxel:.2?})"
            ));
        }
        let slice = voxel[2].round();
        if slice < 0.0 || slice >= self.slices as f64 {
            return Err(format!(
                "its position {position:?} mm lies outside the CT's {} slices",
                self.slices
            ));
        }
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "checked to be a whole slice index within the CT"
        )]
        Ok(slice as usize)
    }
}

/// Segments with their masks: lesions numbered in order within their organ.
fn segments_of(descriptions: Vec<Description>, masks: Vec<Vec<u8>>) -> Vec<Segment> {
    let mut lesions_per_organ = std::collections::HashMap::<Organ, usize>::new();
    descriptions
        .into_iter()
        .zip(masks)
        .map(|(description, mask)| {
            let of = match description.of {
                Described::Organ(organ) => SegmentOf::Organ(organ),
                Described::LesionOf(organ) => {
                    let count = lesions_per_organ.entry(organ).or_default();
                    let lesion = *count;
                    *count += 1;
                    SegmentOf::Lesion { organ, lesion }
                }
                Described::Other(meaning) => SegmentOf::Other(meaning),
            };
            debug_assert!(description.number > 0);
            Segment {
                of,
                label: description.label,
                algorithm: description.algorithm,
                mask,
            }
        })
        .collect()
}

/// Lesion segments that share voxels, in words (organs contain their lesions: not noted).
fn overlaps(segments: &[Segment]) -> Vec<String> {
    let lesions: Vec<&Segment> = segments
        .iter()
        .filter(|segment| !matches!(segment.of, SegmentOf::Organ(_)))
        .collect();
    let mut notes = Vec::new();
    for (i, a) in lesions.iter().enumerate() {
        for b in &lesions[i + 1..] {
            let shared = a
                .mask
                .iter()
                .zip(&b.mask)
                .filter(|(x, y)| **x != 0 && **y != 0)
                .count();
            if shared > 0 {
                notes.push(format!(
                    "segments `{}` and `{}` overlap in {shared} voxels; each keeps them",
                    a.label, b.label
                ));
            }
        }
    }
    notes
}
