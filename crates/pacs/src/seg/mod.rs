//! Lesion and organ masks as a DICOM Segmentation (binary SEG), the format every SEG-aware
//! viewer (OHIF, 3D Slicer, highdicom) reads.
//!
//! One segment per lesion and per organ, coded with SNOMED CT: an organ is an *Anatomical
//! Structure* of its type (Liver, Pancreas, Kidney with its laterality); a lesion is a
//! *Neoplasm*, a *Morphologically Abnormal Structure*, with its organ as the anatomic region
//! and a tracking identifier. Frames are the CT's own slices, each referencing its source
//! image, so the segmentation lies on the CT's grid and in its frame of reference
//! ([`write::segmentation`]). [`read::segmentation`] gives every segment back as a mask on
//! the CT's grid, or refuses the document with the reason (another series, frames missing,
//! fractional, a pixel count that does not match its rows and columns).

pub mod read;
pub mod write;

use keyslice_core::findings::Organ;
use keyslice_core::volume::{Affine, Volume};

use crate::sr::codes::{self, Code};

/// Series Number of Keyslice's segmentations.
pub const SEG_SERIES_NUMBER: i32 = 9905;

/// The most segments one document may hold (each is a mask the size of the CT in memory).
pub const MAX_SEGMENTS: usize = 64;

/// What a segment is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SegmentOf {
    /// An organ.
    Organ(Organ),
    /// A lesion of an organ: its index among that organ's lesions.
    Lesion {
        /// The organ.
        organ: Organ,
        /// The lesion's index among the organ's lesions, from 0.
        lesion: usize,
    },
    /// Something else a document segments (read from another tool's SEG): the meaning of its
    /// property type.
    Other(String),
}

/// How a segment was made (Segment Algorithm Type).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// Drawn by a person.
    Manual,
    /// Drawn by a person with a tool's help (grown from a box, thresholded): the tool's name.
    Semiautomatic(String),
    /// Made by a model: its name.
    Automatic(String),
}

/// One segment: what it is, its label, how it was made and its mask on the CT's grid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// What it is.
    pub of: SegmentOf,
    /// Its label, as a viewer lists it.
    pub label: String,
    /// How it was made.
    pub algorithm: Algorithm,
    /// One byte per CT voxel (x fastest, then y, then slice): non-zero inside.
    pub mask: Vec<u8>,
}

impl Segment {
    /// A lesion's segment, labelled `Liver lesion 1`.
    #[must_use]
    pub fn lesion(organ: Organ, lesion: usize, algorithm: Algorithm, mask: Vec<u8>) -> Self {
        let name = organ.to_string();
        let mut label: String = name.chars().take(1).flat_map(char::to_uppercase).collect();
        label.push_str(&name.chars().skip(1).collect::<String>());
        Self {
            of: SegmentOf::Lesion { organ, lesion },
            label: format!("{label} lesion {}", lesion + 1),
            algorithm,
            mask,
        }
    }

    /// Its property category, type, type modifier and anatomic region (with modifier).
    pub(crate) fn codes(&self) -> SegmentCodes {
        match &self.of {
            SegmentOf::Organ(organ) => {
                let (site, laterality) = codes::organ_site(*organ);
                SegmentCodes {
                    category: anatomical_structure(),
                    kind: site,
                    kind_modifier: laterality,
                    region: None,
                }
            }
            SegmentOf::Lesion { organ, .. } => SegmentCodes {
                category: morphologically_altered_structure(),
                kind: codes::neoplasm(),
                kind_modifier: None,
                region: Some(codes::organ_site(*organ)),
            },
            SegmentOf::Other(meaning) => SegmentCodes {
                category: anatomical_structure(),
                kind: Code::new(&short_code(meaning), codes::KSL, meaning),
                kind_modifier: None,
                region: None,
            },
        }
    }
}

/// A segment's codes.
pub(crate) struct SegmentCodes {
    pub(crate) category: Code,
    pub(crate) kind: Code,
    pub(crate) kind_modifier: Option<Code>,
    pub(crate) region: Option<(Code, Option<Code>)>,
}

/// (91723000, SCT, "Anatomical Structure")
fn anatomical_structure() -> Code {
    Code::new("91723000", "SCT", "Anatomical Structure")
}

/// (49755003, SCT, "Morphologically Abnormal Structure")
fn morphologically_altered_structure() -> Code {
    Code::new("49755003", "SCT", "Morphologically Abnormal Structure")
}

/// A private code value for a meaning (at most 16 characters, letters and digits).
fn short_code(meaning: &str) -> String {
    let code: String = meaning
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(16)
        .collect();
    if code.is_empty() {
        "OTHER".into()
    } else {
        code
    }
}

/// The CT series a segmentation is drawn on: its UIDs, grid and one source image per slice.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceSeries {
    /// Series Instance UID.
    pub series_uid: String,
    /// Frame of Reference UID.
    pub frame_of_reference_uid: String,
    /// SOP Class UID of its images.
    pub image_class_uid: String,
    /// Columns, rows, slices.
    pub dims: [usize; 3],
    /// Voxel → patient (LPS, mm).
    pub patient_from_voxel: Affine,
    /// The SOP Instance UID of each slice's image.
    pub slice_uids: Vec<String>,
}

impl SourceSeries {
    /// The series `volume` was read from, with the Frame of Reference and SOP Class of its
    /// images (from any file of it: [`crate::sr::StudyContext`]). Refused when the volume
    /// did not come from DICOM images, one per slice.
    pub fn of(
        volume: &Volume,
        frame_of_reference_uid: &str,
        image_class_uid: &str,
    ) -> Result<Self, SegError> {
        let series_uid = volume.info().series_uid.clone();
        let slice_uids: Option<Vec<String>> = volume
            .slices()
            .iter()
            .map(|slice| slice.sop_instance_uid.clone())
            .collect();
        let slice_uids = match slice_uids {
            Some(uids) if !series_uid.is_empty() && uids.len() == volume.dims()[2] => uids,
            _ => return Err(SegError::NoSourceImages),
        };
        // A multi-frame image (one file, many slices) has one SOP Instance UID for all.
        if slice_uids.windows(2).any(|pair| pair[0] == pair[1]) {
            return Err(SegError::MultiFrameSource);
        }
        if frame_of_reference_uid.is_empty() {
            return Err(SegError::NoFrameOfReference);
        }
        Ok(Self {
            series_uid,
            frame_of_reference_uid: frame_of_reference_uid.to_string(),
            image_class_uid: if image_class_uid.is_empty() {
                crate::sr::CT_IMAGE.to_string()
            } else {
                image_class_uid.to_string()
            },
            dims: volume.dims(),
            patient_from_voxel: *volume.patient_from_voxel(),
            slice_uids,
        })
    }

    /// Voxels per slice.
    #[must_use]
    pub fn plane(&self) -> usize {
        self.dims[0] * self.dims[1]
    }

    /// Voxels in the CT.
    #[must_use]
    pub fn voxel_count(&self) -> usize {
        self.plane() * self.dims[2]
    }
}

/// A segmentation that cannot be written or read, with what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum SegError {
    /// The CT did not come from DICOM images, one file per slice.
    #[error(
        "the CT was not read from a DICOM series (no source image per slice), so a segmentation cannot reference it; write it as a DICOM series first (keyslice convert --dicom)"
    )]
    NoSourceImages,
    /// The CT came from one multi-frame image.
    #[error(
        "the CT is one multi-frame image; Keyslice writes segmentations of single-frame series"
    )]
    MultiFrameSource,
    /// The CT's images state no Frame of Reference.
    #[error("the CT's images have no Frame of Reference UID, which a segmentation must share")]
    NoFrameOfReference,
    /// Nothing to write.
    #[error("no segment holds a voxel: there is no mask to store")]
    Empty,
    /// More segments than one document holds.
    #[error("{0} segments, more than the {MAX_SEGMENTS} one segmentation holds")]
    TooMany(usize),
    /// Its segments' masks on this CT would take more memory than one segmentation may.
    #[error(
        "{segments} segments on this CT take {megabytes} MiB as masks, more than one segmentation may; keep the segments of interest (lesions, their organs) in it"
    )]
    TooLarge {
        /// Segments.
        segments: usize,
        /// Memory they would take.
        megabytes: usize,
    },
    /// A segment's mask is not the size of the CT.
    #[error("segment `{label}` has {found} voxels; the CT has {expected}")]
    MaskSize {
        /// The segment.
        label: String,
        /// Voxels in its mask.
        found: usize,
        /// Voxels in the CT.
        expected: usize,
    },
    /// The document could not be parsed or written as DICOM.
    #[error("{0}")]
    Dicom(String),
    /// The document is not a segmentation.
    #[error("not a DICOM Segmentation (SOP Class {0})")]
    NotSegmentation(String),
    /// A fractional segmentation (probabilities or occupancy, not a mask).
    #[error(
        "a fractional segmentation ({0}); Keyslice reads binary masks: export it as BINARY from the tool that made it"
    )]
    Fractional(String),
    /// It segments another series or frame of reference.
    #[error(
        "it segments another series ({theirs}), not this CT ({ours}); open it with the CT it was drawn on"
    )]
    OtherSeries {
        /// What the document references.
        theirs: String,
        /// The CT's.
        ours: String,
    },
    /// Its frames are not the CT's size.
    #[error(
        "its frames are {columns}×{rows}; the CT's slices are {ct_columns}×{ct_rows}, so its masks do not lie on the CT's grid"
    )]
    OtherSize {
        /// Its columns.
        columns: usize,
        /// Its rows.
        rows: usize,
        /// The CT's columns.
        ct_columns: usize,
        /// The CT's rows.
        ct_rows: usize,
    },
    /// A field is missing or wrong.
    #[error("{field}: {reason}")]
    Field {
        /// The attribute (its keyword).
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// Fewer frames described or stored than it states.
    #[error("frames missing: it states {stated} frames, {field} holds {found}")]
    FramesMissing {
        /// Number of Frames.
        stated: usize,
        /// What holds fewer.
        field: &'static str,
        /// How many it holds.
        found: usize,
    },
    /// The pixel data is not the size its rows, columns and frames make.
    #[error(
        "its pixel data holds {found} bytes; {rows} rows × {columns} columns × {frames} frames of 1-bit pixels take {expected}"
    )]
    PixelCount {
        /// Bytes found.
        found: usize,
        /// Bytes expected.
        expected: usize,
        /// Rows.
        rows: usize,
        /// Columns.
        columns: usize,
        /// Frames.
        frames: usize,
    },
    /// A frame is not one of the CT's slices.
    #[error("frame {frame}: {reason}")]
    Frame {
        /// The frame, from 1.
        frame: usize,
        /// Why it does not lie on a slice.
        reason: String,
    },
}

impl SegError {
    /// What to do about it, in one sentence.
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            Self::NoSourceImages | Self::MultiFrameSource | Self::NoFrameOfReference => {
                "store the CT as a DICOM series (keyslice convert IN OUT --dicom) and open that"
            }
            Self::Empty => "draw or grow a mask on a lesion first",
            Self::TooLarge { .. } | Self::TooMany(_) => {
                "export a segmentation of fewer segments from the tool that made it"
            }
            Self::MaskSize { .. } => "this is a fault in Keyslice: please report it with the case",
            Self::OtherSeries { .. } | Self::OtherSize { .. } => {
                "open the segmentation with the CT series it references"
            }
            Self::Fractional(_) => "export the segmentation as BINARY and open that",
            Self::Dicom(_)
            | Self::NotSegmentation(_)
            | Self::Field { .. }
            | Self::FramesMissing { .. }
            | Self::PixelCount { .. }
            | Self::Frame { .. } => {
                "the file is damaged or not a segmentation: export it again from the tool that made it"
            }
        }
    }
}
