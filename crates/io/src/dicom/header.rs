//! Reads what the loader needs from one DICOM file's header (everything before Pixel Data),
//! for classic single-frame images and for multi-frame Enhanced CT/MR, whose per-frame
//! position, orientation, spacing and rescale live in functional group sequences.

use std::path::{Path, PathBuf};

use dicom_core::Tag;
use dicom_dictionary_std::{tags, uids};
use dicom_object::file::ReadPreamble;
use dicom_object::{DefaultDicomObject, InMemDicomObject, OpenFileOptions};

use super::DicomError;
use super::guard::Walked;
use keyslice_core::volume::Vec3;

/// Media Storage SOP Class of a DICOMDIR.
pub(crate) const MEDIA_STORAGE_DIRECTORY: &str = uids::MEDIA_STORAGE_DIRECTORY_STORAGE;

/// Geometry and rescale of one frame (a single-frame file has one).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FrameHeader {
    /// 0-based frame index inside the file.
    pub frame_index: u32,
    /// Image Position (Patient), LPS mm.
    pub position_lps_mm: Option<Vec3>,
    /// Image Orientation (Patient): row direction then column direction.
    pub orientation: Option<[f64; 6]>,
    /// Pixel Spacing: between rows, then between columns (mm).
    pub pixel_spacing_mm: Option<[f64; 2]>,
    /// Slice Thickness (mm).
    pub slice_thickness_mm: Option<f64>,
    /// Rescale Slope.
    pub rescale_slope: f64,
    /// Rescale Intercept.
    pub rescale_intercept: f64,
}

/// What the loader keeps of one file.
#[derive(Clone, Debug)]
pub(crate) struct FileHeader {
    pub path: PathBuf,
    pub series_uid: String,
    pub sop_instance_uid: String,
    /// Patient ID, Study Instance UID and Frame of Reference UID: the slices of one volume
    /// must agree on each.
    pub patient_id: String,
    pub study_uid: String,
    /// Who and which study, for the reviewer (never exported).
    pub patient_name: String,
    pub birth_date: String,
    pub sex: String,
    pub study_date: String,
    pub accession: String,
    pub frame_of_reference_uid: String,
    pub modality: String,
    pub series_description: String,
    pub series_number: Option<i64>,
    pub body_part: String,
    /// Burned In Annotation (0028,0301) is `YES`.
    pub burned_in_annotation: bool,
    pub image_type: Vec<String>,
    pub rows: u32,
    pub columns: u32,
    pub pixel_signed: bool,
    pub photometric: String,
    pub transfer_syntax: String,
    pub has_pixel_data: bool,
    pub frames: Vec<FrameHeader>,
    /// Where the samples lie when they can be read straight from the file.
    pub native: Option<NativePixels>,
}

/// Plain little-endian grey-scale samples at a known place in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NativePixels {
    /// Byte offset of the Pixel Data value.
    pub offset: u64,
    /// Its length in bytes.
    pub length: u64,
    pub bits_allocated: u16,
    pub bits_stored: u16,
}

impl FileHeader {
    /// Whether the image type marks a localizer (scout, topogram).
    pub fn is_localizer(&self) -> bool {
        self.image_type
            .iter()
            .any(|value| value.trim().eq_ignore_ascii_case("LOCALIZER"))
    }
}

/// Result of looking at one file.
pub(crate) enum Probe {
    /// A DICOM image (or other DICOM object) whose header could be read.
    Dicom(Box<FileHeader>),
    /// A DICOMDIR.
    Directory,
    /// Not a DICOM file (no `DICM` marker).
    NotDicom,
    /// A DICOM file that could not be parsed.
    Unreadable(String),
}

/// Whether the file carries the `DICM` marker after the 128-byte preamble.
pub(crate) fn has_dicom_marker(path: &Path) -> Result<bool, std::io::Error> {
    read_marker(&mut crate::limits::open_regular(path)?)
}

/// Reads the preamble and the `DICM` marker from the start of `file`.
fn read_marker(mut file: impl std::io::Read) -> Result<bool, std::io::Error> {
    let mut start = [0u8; 132];
    let mut filled = 0;
    while filled < start.len() {
        let read = file.read(&mut start[filled..])?;
        if read == 0 {
            return Ok(false);
        }
        filled += read;
    }
    Ok(&start[128..132] == b"DICM")
}

/// Reads the header of `path` up to (not including) Pixel Data. The file is opened once:
/// the marker, the structural walk and the parse read through the same handle.
pub(crate) fn probe_file(path: &Path) -> Result<Probe, DicomError> {
    use std::io::{Seek, SeekFrom};
    let io_error = |source| DicomError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = crate::limits::open_regular(path).map_err(io_error)?;
    if !read_marker(&mut file).map_err(io_error)? {
        return Ok(Probe::NotDicom);
    }
    let walked = match super::guard::check_open_file(&file, usize::MAX) {
        Ok(walked) => walked,
        Err(reason) => return Ok(Probe::Unreadable(reason)),
    };
    file.seek(SeekFrom::Start(128)).map_err(io_error)?;
    let parsed = crate::limits::contain(|| {
        OpenFileOptions::new()
            .read_until(tags::PIXEL_DATA)
            .read_preamble(ReadPreamble::Never)
            .from_reader(std::io::BufReader::with_capacity(16 * 1024, &file))
    });
    let object = match parsed {
        Ok(Ok(object)) => object,
        Ok(Err(error)) => return Ok(Probe::Unreadable(error.to_string())),
        Err(reason) => return Ok(Probe::Unreadable(reason.to_string())),
    };
    if object.meta().media_storage_sop_class_uid() == MEDIA_STORAGE_DIRECTORY {
        return Ok(Probe::Directory);
    }
    match file_header(path, &object, walked) {
        Ok(header) => Ok(Probe::Dicom(Box::new(header))),
        Err(reason) => Ok(Probe::Unreadable(reason)),
    }
}

/// Transfer syntaxes whose pixel data is stored as plain samples (not encapsulated).
const NATIVE_SYNTAXES: [&str; 3] = [
    uids::IMPLICIT_VR_LITTLE_ENDIAN,
    uids::EXPLICIT_VR_LITTLE_ENDIAN,
    super::EXPLICIT_VR_BIG_ENDIAN,
];

/// Deflated Explicit VR Little Endian: native samples inside a deflate stream.
const DEFLATED_SYNTAX: &str = uids::DEFLATED_EXPLICIT_VR_LITTLE_ENDIAN;

/// Checks Number of Frames against what the file can hold, before one record per frame is
/// made: native frames take their full size in the file, encapsulated ones at least an
/// 8-byte item header each; a deflated file may hold at most the memory budget.
fn checked_frame_count(
    object: &DefaultDicomObject,
    transfer_syntax: &str,
    file_length: u64,
) -> Result<u32, String> {
    let declared = integer(object, tags::NUMBER_OF_FRAMES).unwrap_or(1);
    if declared <= 1 {
        // Absent, zero or negative: a single frame, as readers treat it; one frame is
        // bounded by Rows × Columns and the memory budget.
        return Ok(1);
    }
    let frames = u64::try_from(declared).unwrap_or(u64::MAX);
    let rows = integer(object, tags::ROWS).unwrap_or(0).max(0) as u64;
    let columns = integer(object, tags::COLUMNS).unwrap_or(0).max(0) as u64;
    let frame_bytes = native_frame_bytes(object, rows, columns);
    let (needed, available) = if NATIVE_SYNTAXES.contains(&transfer_syntax) {
        (frames.saturating_mul(frame_bytes), file_length)
    } else if transfer_syntax == DEFLATED_SYNTAX {
        (
            frames.saturating_mul(frame_bytes),
            crate::limits::max_volume_bytes(),
        )
    } else {
        (frames.saturating_mul(8), file_length)
    };
    if needed > available || frames > u64::from(u32::MAX) {
        return Err(format!(
            "Number of Frames (0028,0008) is {declared}, which needs {needed} bytes of pixel data, but the file can hold {available}: the header is damaged"
        ));
    }
    Ok(frames as u32)
}

/// Bytes of one native frame: rows × columns × samples × bits allocated, with 4:2:2 colour
/// (two chroma samples shared by two pixels) at two samples a pixel.
fn native_frame_bytes(object: &DefaultDicomObject, rows: u64, columns: u64) -> u64 {
    let samples = integer(object, tags::SAMPLES_PER_PIXEL)
        .unwrap_or(1)
        .clamp(1, 4) as u64;
    let bits = integer(object, tags::BITS_ALLOCATED)
        .unwrap_or(16)
        .clamp(1, 64) as u64;
    let photometric = string(object, tags::PHOTOMETRIC_INTERPRETATION).unwrap_or_default();
    let samples = if photometric.contains("422") {
        samples.min(2)
    } else {
        samples
    };
    (rows * columns * samples * bits).div_ceil(8)
}

/// Refuses native Pixel Data far longer than the image needs (more than twice the size plus
/// 1 MiB): a deflated file can hide a gigabyte of zeros in a megabyte, and the whole value
/// would be read into memory for a small image.
fn check_pixel_data_length(
    object: &DefaultDicomObject,
    transfer_syntax: &str,
    frames: u32,
    pixel_data_length: Option<u64>,
) -> Result<(), String> {
    let native = NATIVE_SYNTAXES.contains(&transfer_syntax) || transfer_syntax == DEFLATED_SYNTAX;
    let Some(length) = pixel_data_length.filter(|_| native) else {
        return Ok(());
    };
    let rows = integer(object, tags::ROWS).unwrap_or(0).max(0) as u64;
    let columns = integer(object, tags::COLUMNS).unwrap_or(0).max(0) as u64;
    let needed = native_frame_bytes(object, rows, columns) * u64::from(frames);
    if length > needed.saturating_mul(2).saturating_add(1 << 20) {
        return Err(format!(
            "Pixel Data (7FE0,0010) holds {length} bytes but {rows} rows × {columns} columns × {frames} frame(s) need {needed}: the header or the data is damaged"
        ));
    }
    Ok(())
}

fn file_header(
    path: &Path,
    object: &DefaultDicomObject,
    walked: Walked,
) -> Result<FileHeader, String> {
    let text = |tag: Tag| string(object, tag).unwrap_or_default();
    let rows = integer(object, tags::ROWS).unwrap_or(0);
    let columns = integer(object, tags::COLUMNS).unwrap_or(0);
    if !(0..=65_535).contains(&rows) || !(0..=65_535).contains(&columns) {
        return Err(format!(
            "Rows (0028,0010) {rows} or Columns (0028,0011) {columns} is outside 0 to 65535"
        ));
    }
    let transfer_syntax = object
        .meta()
        .transfer_syntax()
        .trim_end_matches('\0')
        .to_string();
    let frame_count = checked_frame_count(object, &transfer_syntax, walked.file_length)?;
    check_pixel_data_length(
        object,
        &transfer_syntax,
        frame_count,
        walked.pixel_data_length,
    )?;
    let has_pixel_data = rows > 0 && columns > 0;
    let frames = frame_headers(object, frame_count);
    let native = native_pixels(object, &transfer_syntax, walked);
    Ok(FileHeader {
        path: path.to_path_buf(),
        series_uid: text(tags::SERIES_INSTANCE_UID),
        patient_id: text(tags::PATIENT_ID),
        study_uid: text(tags::STUDY_INSTANCE_UID),
        patient_name: text(tags::PATIENT_NAME),
        birth_date: text(tags::PATIENT_BIRTH_DATE),
        sex: text(tags::PATIENT_SEX),
        study_date: text(tags::STUDY_DATE),
        accession: text(tags::ACCESSION_NUMBER),
        frame_of_reference_uid: text(tags::FRAME_OF_REFERENCE_UID),
        sop_instance_uid: {
            let sop = text(tags::SOP_INSTANCE_UID);
            if sop.is_empty() {
                object.meta().media_storage_sop_instance_uid().to_string()
            } else {
                sop
            }
        },
        modality: text(tags::MODALITY),
        series_description: text(tags::SERIES_DESCRIPTION),
        series_number: integer(object, tags::SERIES_NUMBER),
        body_part: text(tags::BODY_PART_EXAMINED),
        burned_in_annotation: text(tags::BURNED_IN_ANNOTATION).eq_ignore_ascii_case("YES"),
        image_type: strings(object, tags::IMAGE_TYPE),
        rows: rows as u32,
        columns: columns as u32,
        pixel_signed: integer(object, tags::PIXEL_REPRESENTATION) == Some(1),
        photometric: text(tags::PHOTOMETRIC_INTERPRETATION),
        transfer_syntax,
        has_pixel_data,
        frames,
        native,
    })
}

/// Where a little-endian file's plain grey-scale samples lie, when they can be read from the
/// file directly (a top-level Pixel Data of defined length; 8, 16 or 32 bits a sample).
fn native_pixels(
    object: &DefaultDicomObject,
    transfer_syntax: &str,
    walked: Walked,
) -> Option<NativePixels> {
    let little_endian = [
        uids::IMPLICIT_VR_LITTLE_ENDIAN,
        uids::EXPLICIT_VR_LITTLE_ENDIAN,
    ];
    if !little_endian.contains(&transfer_syntax)
        || integer(object, tags::SAMPLES_PER_PIXEL).unwrap_or(1) != 1
    {
        return None;
    }
    let bits_allocated = u16::try_from(integer(object, tags::BITS_ALLOCATED).unwrap_or(16)).ok()?;
    if ![8, 16, 32].contains(&bits_allocated) {
        return None;
    }
    let bits_stored = integer(object, tags::BITS_STORED)
        .and_then(|bits| u16::try_from(bits).ok())
        .unwrap_or(bits_allocated);
    Some(NativePixels {
        offset: walked.pixel_data_offset?,
        length: walked.pixel_data_length?,
        bits_allocated,
        bits_stored,
    })
}

/// Per-frame headers: classic attributes first, then the shared functional groups, then each
/// frame's own groups (later sources override earlier ones, as PS3.3 C.7.6.16 intends).
fn frame_headers(object: &InMemDicomObject, frame_count: u32) -> Vec<FrameHeader> {
    let mut base = FrameHeader {
        frame_index: 0,
        position_lps_mm: floats::<3>(object, tags::IMAGE_POSITION_PATIENT),
        orientation: floats::<6>(object, tags::IMAGE_ORIENTATION_PATIENT),
        pixel_spacing_mm: floats::<2>(object, tags::PIXEL_SPACING)
            .or_else(|| floats::<2>(object, tags::IMAGER_PIXEL_SPACING)),
        slice_thickness_mm: float(object, tags::SLICE_THICKNESS),
        rescale_slope: float(object, tags::RESCALE_SLOPE)
            .filter(|slope| *slope != 0.0)
            .unwrap_or(1.0),
        rescale_intercept: float(object, tags::RESCALE_INTERCEPT).unwrap_or(0.0),
    };
    if let Some(shared) = first_item(object, tags::SHARED_FUNCTIONAL_GROUPS_SEQUENCE) {
        apply_functional_groups(&mut base, shared);
    }
    let per_frame = object
        .get(tags::PER_FRAME_FUNCTIONAL_GROUPS_SEQUENCE)
        .and_then(|element| element.items());
    (0..frame_count)
        .map(|frame_index| {
            let mut frame = base.clone();
            frame.frame_index = frame_index;
            if let Some(item) = per_frame.and_then(|items| items.get(frame_index as usize)) {
                apply_functional_groups(&mut frame, item);
            }
            frame
        })
        .collect()
}

fn apply_functional_groups(frame: &mut FrameHeader, groups: &InMemDicomObject) {
    if let Some(position) = first_item(groups, tags::PLANE_POSITION_SEQUENCE)
        .and_then(|item| floats::<3>(item, tags::IMAGE_POSITION_PATIENT))
    {
        frame.position_lps_mm = Some(position);
    }
    if let Some(orientation) = first_item(groups, tags::PLANE_ORIENTATION_SEQUENCE)
        .and_then(|item| floats::<6>(item, tags::IMAGE_ORIENTATION_PATIENT))
    {
        frame.orientation = Some(orientation);
    }
    if let Some(measures) = first_item(groups, tags::PIXEL_MEASURES_SEQUENCE) {
        if let Some(spacing) = floats::<2>(measures, tags::PIXEL_SPACING) {
            frame.pixel_spacing_mm = Some(spacing);
        }
        if let Some(thickness) = float(measures, tags::SLICE_THICKNESS) {
            frame.slice_thickness_mm = Some(thickness);
        }
    }
    if let Some(transformation) = first_item(groups, tags::PIXEL_VALUE_TRANSFORMATION_SEQUENCE) {
        if let Some(slope) = float(transformation, tags::RESCALE_SLOPE).filter(|s| *s != 0.0) {
            frame.rescale_slope = slope;
        }
        if let Some(intercept) = float(transformation, tags::RESCALE_INTERCEPT) {
            frame.rescale_intercept = intercept;
        }
    }
}

/// The file paths a DICOMDIR references, resolved against its folder, in record order.
pub(crate) fn dicomdir_files(path: &Path) -> Result<Vec<PathBuf>, DicomError> {
    let object = OpenFileOptions::new()
        .open_file(path)
        .map_err(|error| DicomError::Dicomdir {
            path: path.to_path_buf(),
            reason: error.to_string(),
        })?;
    let root = path.parent().unwrap_or(Path::new("."));
    let records = object
        .get(tags::DIRECTORY_RECORD_SEQUENCE)
        .and_then(|element| element.items())
        .ok_or_else(|| DicomError::Dicomdir {
            path: path.to_path_buf(),
            reason: "it has no Directory Record Sequence".into(),
        })?;
    let mut files = Vec::new();
    for record in records {
        let components = strings(record, tags::REFERENCED_FILE_ID);
        if components.is_empty() {
            continue;
        }
        let mut file = root.to_path_buf();
        for component in &components {
            let component = component.trim();
            if !is_plain_component(component) {
                return Err(DicomError::Dicomdir {
                    path: path.to_path_buf(),
                    reason: format!(
                        "Referenced File ID (0004,1500) {} leaves the DICOMDIR's folder (a component is empty, \"..\", absolute or holds a separator)",
                        components.join("\\")
                    ),
                });
            }
            file.push(component);
        }
        files.push(file);
    }
    Ok(files)
}

/// Whether a Referenced File ID component names a file or folder inside the DICOMDIR's
/// folder: PS3.10 allows only upper-case letters, digits and `_`; Keyslice accepts any name
/// but refuses the ones that climb out or start over from the root.
fn is_plain_component(component: &str) -> bool {
    !component.is_empty()
        && component != "."
        && component != ".."
        && !component.contains(['/', '\\', ':', '\0'])
        && Path::new(component).components().count() == 1
        && !Path::new(component).is_absolute()
}

pub(crate) fn first_item(object: &InMemDicomObject, tag: Tag) -> Option<&InMemDicomObject> {
    object
        .get(tag)
        .and_then(|element| element.items())
        .and_then(|items| items.first())
}

pub(crate) fn string(object: &InMemDicomObject, tag: Tag) -> Option<String> {
    object
        .get(tag)
        .and_then(|element| element.to_str().ok())
        .map(|value| {
            value
                .trim_matches(|c: char| c == '\0' || c.is_whitespace())
                .to_string()
        })
}

fn strings(object: &InMemDicomObject, tag: Tag) -> Vec<String> {
    object
        .get(tag)
        .and_then(|element| element.to_multi_str().ok())
        .map(|values| {
            values
                .iter()
                .map(|value| value.trim().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn integer(object: &InMemDicomObject, tag: Tag) -> Option<i64> {
    object
        .get(tag)
        .and_then(|element| element.to_int::<i64>().ok())
}

fn float(object: &InMemDicomObject, tag: Tag) -> Option<f64> {
    object
        .get(tag)
        .and_then(|element| element.to_float64().ok())
        .filter(|value| value.is_finite())
}

fn floats<const N: usize>(object: &InMemDicomObject, tag: Tag) -> Option<[f64; N]> {
    let values = object.get(tag)?.to_multi_float64().ok()?;
    let array: [f64; N] = values.get(..N)?.try_into().ok()?;
    array.iter().all(|value| value.is_finite()).then_some(array)
}
