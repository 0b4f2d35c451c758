//! DICOM series → [`Volume`].
//!
//! Input is one file, a folder (searched recursively) or a DICOMDIR. Files are grouped by
//! Series Instance UID; the image series with the most slices is loaded unless one is named.
//! Steps, in order:
//!
//! 1. discover candidate files; skip files without the `DICM` marker, note unreadable ones;
//! 2. read every header up to Pixel Data, in parallel ([`header`]);
//! 3. build the slice stack: drop localizers, check sizes and orientation, sort along the
//!    normal, refuse gantry tilt and duplicate positions, warn on irregular spacing ([`stack`]);
//! 4. decode pixel data in parallel into one buffer, `i16` when the rescale is integral and the
//!    values fit, otherwise `f32` ([`decode`]); slices that fail to decode are left out with a
//!    warning naming the file.
//!
//! ```no_run
//! use keyslice::io::dicom::{DicomOptions, load_dicom};
//! let study = load_dicom("study/".as_ref(), &DicomOptions::default())?;
//! println!("{:?} voxels, {} series found", study.volume.dims(), study.series.len());
//! # Ok::<(), keyslice::io::dicom::DicomError>(())
//! ```
//!
//! Knows the DICOM file format; knows nothing of NIfTI, rendering or the UI.

mod codestream;
mod decode;
pub use decode::SliceFault;
mod guard;
pub(crate) mod header;
mod stack;

/// Explicit VR Big Endian: retired from the standard (so the dictionary marks it
/// deprecated), still found in old archives and still read.
pub(crate) const EXPLICIT_VR_BIG_ENDIAN: &str = "1.2.840.10008.1.2.2";

pub mod write;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;

use header::{FileHeader, Probe};
use keyslice_core::volume::{Affine, SliceInfo, Volume, VolumeInfo, Voxels};
use stack::{Stack, build_stack, name_list};

/// Errors loading a DICOM series; each names the file or series at fault.
#[derive(Debug, thiserror::Error)]
pub enum DicomError {
    /// The file system refused a read.
    #[error("cannot read: {source} ({})", path.display())]
    Io {
        /// File or folder.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// Writing a DICOM series failed (nothing was left under the output name).
    #[error("cannot write the DICOM series: {reason} ({})", path.display())]
    Write {
        /// The output folder or file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// Nothing that looks like a DICOM image was found.
    #[error(
        "no DICOM images found ({}); {non_dicom_files} non-DICOM file(s) skipped, {unreadable} unreadable DICOM file(s)",
        path.display()
    )]
    NoImages {
        /// What was searched.
        path: PathBuf,
        /// Files without the DICM marker.
        non_dicom_files: usize,
        /// DICOM files that could not be parsed.
        unreadable: usize,
    },
    /// A single file was given and it is not DICOM.
    #[error("not a DICOM file: no DICM marker after the 128-byte preamble ({})", path.display())]
    NotDicom {
        /// The file.
        path: PathBuf,
    },
    /// A single file was given and it could not be parsed.
    #[error("unreadable DICOM file: {reason} ({})", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Parser message.
        reason: String,
    },
    /// `--series` named a series that is not there.
    #[error("series {series_uid} is not among the {} series found ({})", available.len(), path.display())]
    SeriesNotFound {
        /// What was searched.
        path: PathBuf,
        /// The UID asked for.
        series_uid: String,
        /// UIDs that exist.
        available: Vec<String>,
    },
    /// A DICOMDIR could not be followed.
    #[error("cannot read DICOMDIR: {reason} ({})", path.display())]
    Dicomdir {
        /// The DICOMDIR.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A required attribute is missing or unusable.
    #[error("{field} is {detail} ({})", path.display())]
    InvalidField {
        /// The file.
        path: PathBuf,
        /// Attribute name as in the standard.
        field: &'static str,
        /// What is wrong with it.
        detail: String,
    },
    /// Images of one series have different sizes.
    #[error("series {series_uid} mixes image sizes {sizes} ({})", name_list(files.iter()))]
    MixedImageSizes {
        /// The series.
        series_uid: String,
        /// Sizes seen, columns×rows.
        sizes: String,
        /// The first file and the ones that differ from it.
        files: Vec<PathBuf>,
    },
    /// Images of one series belong to different patients, studies or frames of reference:
    /// never one volume.
    #[error("series {series_uid} mixes {field}s ({values}): slices of another patient, study or frame of reference are never stacked into one volume ({})", name_list(files.iter()))]
    MixedSubjects {
        /// The series.
        series_uid: String,
        /// The attribute that differs (`Patient ID`).
        field: &'static str,
        /// The values seen, shown as text.
        values: String,
        /// The first file and the ones that differ from it.
        files: Vec<PathBuf>,
    },
    /// Images of one series have different orientations.
    #[error("series {series_uid} mixes slice orientations ({})", name_list(files.iter()))]
    MixedOrientations {
        /// The series.
        series_uid: String,
        /// The first file and the ones that differ from it.
        files: Vec<PathBuf>,
    },
    /// Slices are offset sideways as they advance: a tilted gantry.
    #[error(
        "series {series_uid} was acquired with a gantry tilt of {angle_degrees:.1}°, which Keyslice does not resample yet ({})",
        name_list(files.iter())
    )]
    GantryTilt {
        /// The series.
        series_uid: String,
        /// Angle between the slice normal and the direction the slices advance.
        angle_degrees: f64,
        /// First and last slice files.
        files: Vec<PathBuf>,
    },
    /// Two or more images sit at the same place.
    #[error(
        "series {series_uid} has {} images at the same position {position_mm:.2} mm along the slice normal ({})",
        files.len(),
        name_list(files.iter())
    )]
    DuplicatePositions {
        /// The series.
        series_uid: String,
        /// Position along the normal.
        position_mm: f64,
        /// The images found there.
        files: Vec<PathBuf>,
    },
    /// The series would take more memory than one volume may.
    #[error("series {series_uid} is too large to load: {source} ({})", path.display())]
    TooLarge {
        /// The first file of the series.
        path: PathBuf,
        /// The series.
        series_uid: String,
        /// Size and budget.
        source: crate::limits::VolumeTooLarge,
    },
    /// Not one slice of the chosen series could be decoded.
    #[error("no image of series {series_uid} could be decoded: {reason} ({})", path.display())]
    NothingDecoded {
        /// The series.
        series_uid: String,
        /// The first file that failed.
        path: PathBuf,
        /// Why it failed.
        reason: decode::SliceFault,
    },
}

impl DicomError {
    /// What a user can do about it, in one sentence.
    #[must_use]
    pub fn hint(&self) -> String {
        match self {
            Self::Io { .. } => "check that the path exists and that you may read it".into(),
            Self::Write { .. } => {
                "give a new output folder in a writable place with room for the series".into()
            }
            Self::NoImages { .. } | Self::NotDicom { .. } => {
                "point Keyslice at a DICOM file, a folder of DICOM files, a DICOMDIR or a .nii/.nii.gz file".into()
            }
            Self::Unreadable { .. } => {
                "the file is damaged or truncated; copy it again from the archive or leave it out".into()
            }
            Self::SeriesNotFound { available, .. } => format!(
                "use one of: {}",
                available.join(", ")
            ),
            Self::Dicomdir { .. } => "open the folder that holds the images instead of the DICOMDIR".into(),
            Self::InvalidField { .. } => "re-export the series from the scanner or PACS with complete image geometry".into(),
            Self::MixedSubjects { .. } => {
                "the folder holds slices of more than one patient, study or scan under one Series Instance UID: move the files named above out of it (or ask the PACS administrator to check the series), then open it again".into()
            }
            Self::MixedImageSizes { .. } | Self::MixedOrientations { .. } | Self::DuplicatePositions { .. } => {
                "the folder mixes several image stacks under one series; split them (e.g. by acquisition or phase) or pick another series with --series".into()
            }
            Self::TooLarge { .. } => format!(
                "if the machine has the memory, raise the budget (e.g. {}=16000); otherwise load a cropped or downsampled series",
                crate::limits::MAX_VOLUME_ENV
            ),
            Self::GantryTilt { .. } => {
                "use a tilt-corrected reconstruction from the scanner, or convert with dcm2niix, which corrects tilt".into()
            }
            Self::NothingDecoded { reason, .. } if reason.incomplete => {
                "the file is incomplete; copy it again from the archive".into()
            }
            Self::NothingDecoded { .. } => {
                "if the encoding is unsupported, decompress the files first (dcmdjpeg IN OUT, or gdcmconv --raw IN OUT) or re-export them uncompressed".into()
            }
        }
    }
}

/// Which series to load.
#[derive(Clone, Debug, Default)]
pub struct DicomOptions {
    /// Series Instance UID to load instead of the largest image series.
    pub series_uid: Option<String>,
}

/// One series found in the input.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SeriesSummary {
    /// Series Instance UID.
    pub series_uid: String,
    /// Series Description.
    pub series_description: String,
    /// Modality.
    pub modality: String,
    /// Series Number, when present.
    pub series_number: Option<i64>,
    /// Number of files.
    pub files: usize,
    /// Number of image frames (slices) over all files.
    pub slices: usize,
    /// Columns × rows of the first image, `[0, 0]` for non-image objects.
    pub image_size: [u32; 2],
    /// Whether this is the series that was loaded.
    pub selected: bool,
}

/// A DICOM file that could not be used.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SkippedFile {
    /// The file.
    pub path: PathBuf,
    /// Why.
    pub reason: String,
}

/// A loaded series and what else was found.
#[derive(Debug)]
pub struct DicomStudy {
    /// The chosen series as a volume.
    pub volume: Volume,
    /// Every series found, sorted by Series Number then UID.
    pub series: Vec<SeriesSummary>,
    /// Files without the DICM marker.
    pub non_dicom_files: usize,
    /// DICOM files that could not be read or decoded.
    pub unreadable: Vec<SkippedFile>,
}

struct Scan {
    headers: Vec<FileHeader>,
    non_dicom_files: usize,
    unreadable: Vec<SkippedFile>,
}

/// The patient and study of the first DICOM file found in `folder` (or of the file
/// `folder` names), read from its header only; `None` when there is none. For the worklist,
/// so a reviewer sees whose study each case is before opening it.
#[must_use]
pub fn patient_identity(folder: &Path) -> Option<keyslice_core::volume::PatientIdentity> {
    use dicom_dictionary_std::tags;
    let first = if folder.is_file() {
        Some(folder.to_path_buf())
    } else {
        let mut files: Vec<PathBuf> = std::fs::read_dir(folder)
            .ok()?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.is_file())
            .collect();
        files.sort();
        files
            .into_iter()
            .find(|path| header::has_dicom_marker(path).unwrap_or(false))
    }?;
    guard::check_lengths(&first).ok()?;
    let object = crate::limits::contain(|| {
        dicom_object::OpenFileOptions::new()
            .read_until(dicom_dictionary_std::tags::PIXEL_DATA)
            .open_file(&first)
    })
    .ok()?
    .ok()?;
    let text = |tag| header::string(&object, tag).unwrap_or_default();
    Some(keyslice_core::volume::PatientIdentity {
        name: text(tags::PATIENT_NAME),
        id: text(tags::PATIENT_ID),
        birth_date: text(tags::PATIENT_BIRTH_DATE),
        sex: text(tags::PATIENT_SEX),
        study_date: text(tags::STUDY_DATE),
        accession: text(tags::ACCESSION_NUMBER),
    })
}

/// The structural walk images get before they are parsed, for any other DICOM file (a
/// structured report): every declared length must fit in the file, nesting stays shallow,
/// and the file holds at most `max_items` sequence items. Refuses with the byte at fault.
pub fn check_structure(path: &Path, max_items: usize) -> Result<(), Malformed> {
    guard::check_lengths_and_items(path, max_items)
        .map(|_| ())
        .map_err(|reason| Malformed { reason })
}

/// A DICOM file whose structure is broken: what is wrong, naming the byte at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Malformed {
    /// What is wrong.
    pub reason: String,
}

/// Whether `path` is a whole DICOM file as far as its structure shows: the `DICM` marker, and
/// every element's declared length inside the file. A cache uses this to tell a file cut by
/// a crash (empty, or ending inside an element) from one to keep.
#[must_use]
pub fn is_whole_file(path: &Path) -> bool {
    header::has_dicom_marker(path).unwrap_or(false)
        && guard::check_lengths(path).is_ok_and(|walked| walked.file_length > 132)
}

/// How many slices the series [`load_dicom`] stacks under `path` has (the one named, else
/// the one with the most slices), read from the headers alone.
pub fn series_slice_count(path: &Path, series_uid: Option<&str>) -> Result<usize, DicomError> {
    let scan = scan(path)?;
    let mut by_series: BTreeMap<&str, usize> = BTreeMap::new();
    for file in scan.headers.iter().filter(|file| file.has_pixel_data) {
        *by_series.entry(&file.series_uid).or_default() += file.frames.len();
    }
    match series_uid {
        Some(uid) => by_series
            .get(uid)
            .copied()
            .ok_or_else(|| DicomError::SeriesNotFound {
                path: path.to_path_buf(),
                series_uid: uid.to_string(),
                available: by_series.keys().map(ToString::to_string).collect(),
            }),
        None => Ok(by_series.values().copied().max().unwrap_or(0)),
    }
}

/// Loads the largest image series under `path` (or the one named in `options`).
pub fn load_dicom(path: &Path, options: &DicomOptions) -> Result<DicomStudy, DicomError> {
    let started = std::time::Instant::now();
    let scan = scan(path)?;
    tracing::debug!(
        files = scan.headers.len(),
        elapsed_ms = started.elapsed().as_millis(),
        "read DICOM headers"
    );
    let mut by_series: BTreeMap<&str, Vec<&FileHeader>> = BTreeMap::new();
    for file in &scan.headers {
        by_series.entry(&file.series_uid).or_default().push(file);
    }
    let slices_of = |files: &[&FileHeader]| -> usize {
        files
            .iter()
            .filter(|file| file.has_pixel_data)
            .map(|file| file.frames.len())
            .sum()
    };
    let chosen_uid = match &options.series_uid {
        Some(uid) => {
            if !by_series.contains_key(uid.as_str()) {
                return Err(DicomError::SeriesNotFound {
                    path: path.to_path_buf(),
                    series_uid: uid.clone(),
                    available: by_series.keys().map(ToString::to_string).collect(),
                });
            }
            uid.clone()
        }
        None => by_series
            .iter()
            .filter(|(_, files)| slices_of(files) > 0)
            // Most slices wins; on a tie the first UID in sort order, so the choice is stable.
            .max_by(|a, b| slices_of(a.1).cmp(&slices_of(b.1)).then(b.0.cmp(a.0)))
            .map(|(uid, _)| (*uid).to_string())
            .ok_or_else(|| DicomError::NoImages {
                path: path.to_path_buf(),
                non_dicom_files: scan.non_dicom_files,
                unreadable: scan.unreadable.len(),
            })?,
    };
    let mut series: Vec<SeriesSummary> = by_series
        .iter()
        .map(|(uid, files)| {
            let first = files[0];
            SeriesSummary {
                series_uid: (*uid).to_string(),
                series_description: first.series_description.clone(),
                modality: first.modality.clone(),
                series_number: first.series_number,
                files: files.len(),
                slices: slices_of(files),
                image_size: [first.columns, first.rows],
                selected: *uid == chosen_uid,
            }
        })
        .collect();
    series.sort_by(|a, b| {
        a.series_number
            .unwrap_or(i64::MAX)
            .cmp(&b.series_number.unwrap_or(i64::MAX))
            .then_with(|| a.series_uid.cmp(&b.series_uid))
    });

    let files: Vec<FileHeader> = by_series
        .remove(chosen_uid.as_str())
        .unwrap_or_default()
        .into_iter()
        .cloned()
        .collect();
    let mut unreadable = scan.unreadable;
    let volume = load_series(&chosen_uid, files, &mut unreadable)?;
    tracing::debug!(elapsed_ms = started.elapsed().as_millis(), "decoded series");
    Ok(DicomStudy {
        volume,
        series,
        non_dicom_files: scan.non_dicom_files,
        unreadable,
    })
}

fn scan(path: &Path) -> Result<Scan, DicomError> {
    let metadata = std::fs::metadata(path).map_err(|source| DicomError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let candidates = if metadata.is_dir() {
        let mut files = Vec::new();
        walk(path, &mut files)?;
        files
    } else {
        match header::probe_file(path)? {
            Probe::Directory => header::dicomdir_files(path)?,
            Probe::NotDicom => {
                return Err(DicomError::NotDicom {
                    path: path.to_path_buf(),
                });
            }
            Probe::Unreadable(reason) => {
                return Err(DicomError::Unreadable {
                    path: path.to_path_buf(),
                    reason,
                });
            }
            Probe::Dicom(_) => vec![path.to_path_buf()],
        }
    };
    let probes: Vec<(PathBuf, Result<Probe, DicomError>)> = candidates
        .into_par_iter()
        .map(|file| {
            let probe = header::probe_file(&file);
            (file, probe)
        })
        .collect();
    let mut scan = Scan {
        headers: Vec::new(),
        non_dicom_files: 0,
        unreadable: Vec::new(),
    };
    for (file, probe) in probes {
        match probe {
            Ok(Probe::Dicom(header)) => scan.headers.push(*header),
            Ok(Probe::Directory) => {}
            Ok(Probe::NotDicom) => scan.non_dicom_files += 1,
            Ok(Probe::Unreadable(reason)) => {
                scan.unreadable.push(SkippedFile { path: file, reason });
            }
            Err(error) => scan.unreadable.push(SkippedFile {
                path: file,
                reason: error.to_string(),
            }),
        }
    }
    if scan.headers.is_empty() {
        if let [only] = scan.unreadable.as_slice() {
            return Err(DicomError::Unreadable {
                path: only.path.clone(),
                reason: only.reason.clone(),
            });
        }
        return Err(DicomError::NoImages {
            path: path.to_path_buf(),
            non_dicom_files: scan.non_dicom_files,
            unreadable: scan.unreadable.len(),
        });
    }
    Ok(scan)
}

/// Collects regular files below `folder`, sorted, without following links to folders.
fn walk(folder: &Path, files: &mut Vec<PathBuf>) -> Result<(), DicomError> {
    let entries = std::fs::read_dir(folder).map_err(|source| DicomError::Io {
        path: folder.to_path_buf(),
        source,
    })?;
    let mut paths: Vec<(PathBuf, bool)> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| DicomError::Io {
            path: folder.to_path_buf(),
            source,
        })?;
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let is_dir = kind.is_dir();
        let is_file = kind.is_file() || (kind.is_symlink() && entry.path().is_file());
        if is_dir || is_file {
            paths.push((entry.path(), is_dir));
        }
    }
    paths.sort();
    for (path, is_dir) in paths {
        if is_dir {
            walk(&path, files)?;
        } else {
            files.push(path);
        }
    }
    Ok(())
}

fn load_series(
    series_uid: &str,
    mut files: Vec<FileHeader>,
    unreadable: &mut Vec<SkippedFile>,
) -> Result<Volume, DicomError> {
    let stack = build_stack(series_uid, &files)?;
    let dims = [
        u64::from(stack.columns),
        u64::from(stack.rows),
        stack.slices.len() as u64,
    ];
    // Checked at the widest voxel type (f32) before the buffer is allocated.
    crate::limits::check_volume_bytes(crate::limits::volume_bytes(dims, 4), dims).map_err(
        |source| DicomError::TooLarge {
            path: files[stack.slices[0].file].path.clone(),
            series_uid: series_uid.to_string(),
            source,
        },
    )?;
    if let Err((k, reason)) = decode::precheck_stack(&files, &stack) {
        let file = &files[stack.slices[k].file];
        return Err(DicomError::NothingDecoded {
            series_uid: series_uid.to_string(),
            path: file.path.clone(),
            reason: decode::SliceFault {
                reason: format!(
                    "{} (transfer syntax {})",
                    reason.reason, file.transfer_syntax
                ),
                incomplete: reason.incomplete,
            },
        });
    }
    let integral = stack
        .slices
        .iter()
        .all(|slice| slice.rescale_slope.fract() == 0.0 && slice.rescale_intercept.fract() == 0.0);
    let (mut voxels, failures) = if integral {
        let decoded = decode::decode_stack::<i16>(&files, &stack);
        if decoded.overflow {
            drop(decoded); // the i16 buffer goes before the f32 one is made
            let decoded = decode::decode_stack::<f32>(&files, &stack);
            (Voxels::F32(decoded.voxels), decoded.failures)
        } else {
            (Voxels::I16(decoded.voxels), decoded.failures)
        }
    } else {
        let decoded = decode::decode_stack::<f32>(&files, &stack);
        (Voxels::F32(decoded.voxels), decoded.failures)
    };
    let stack = if failures.is_empty() {
        stack
    } else {
        drop_failed_slices(
            series_uid,
            &mut files,
            &stack,
            &failures,
            &mut voxels,
            unreadable,
        )?
    };
    assemble(series_uid, &files, &stack, voxels)
}

/// Removes slices that failed to decode from the buffer and the geometry, with a warning.
fn drop_failed_slices(
    series_uid: &str,
    files: &mut [FileHeader],
    stack: &Stack,
    failures: &[(usize, decode::SliceFault)],
    voxels: &mut Voxels,
    unreadable: &mut Vec<SkippedFile>,
) -> Result<Stack, DicomError> {
    if failures.len() == stack.slices.len() {
        let (k, reason) = &failures[0];
        return Err(DicomError::NothingDecoded {
            series_uid: series_uid.to_string(),
            path: files[stack.slices[*k].file].path.clone(),
            reason: reason.clone(),
        });
    }
    for (k, reason) in failures {
        let slice = &stack.slices[*k];
        let file = &mut files[slice.file];
        file.frames
            .retain(|frame| frame.frame_index != slice.frame_index);
        if file.frames.is_empty() {
            file.has_pixel_data = false;
        }
        unreadable.push(SkippedFile {
            path: file.path.clone(),
            reason: reason.to_string(),
        });
    }
    let plane = stack.rows as usize * stack.columns as usize;
    let kept: Vec<usize> = (0..stack.slices.len())
        .filter(|k| !failures.iter().any(|(failed, _)| failed == k))
        .collect();
    match voxels {
        Voxels::I16(values) => compact(values, &kept, plane),
        Voxels::F32(values) => compact(values, &kept, plane),
    }
    let mut rebuilt = build_stack(series_uid, files)?;
    for (k, reason) in failures {
        let slice = &stack.slices[*k];
        rebuilt.warnings.push(format!(
            "left out the slice at {:.2} mm ({}): {reason}",
            slice.along_normal_mm,
            files[slice.file].path.display()
        ));
    }
    Ok(rebuilt)
}

fn compact<T: Copy>(values: &mut Vec<T>, kept: &[usize], plane: usize) {
    for (new_k, &old_k) in kept.iter().enumerate() {
        if new_k != old_k {
            values.copy_within(old_k * plane..(old_k + 1) * plane, new_k * plane);
        }
    }
    values.truncate(kept.len() * plane);
}

fn assemble(
    series_uid: &str,
    files: &[FileHeader],
    stack: &Stack,
    voxels: Voxels,
) -> Result<Volume, DicomError> {
    let first_file = &files[stack.slices[0].file];
    let origin = stack.slices[0].position_lps_mm;
    let patient_from_voxel = Affine::from_axes(stack.directions, stack.spacing_mm, origin);
    let slices: Vec<SliceInfo> = stack
        .slices
        .iter()
        .map(|slice| {
            let file = &files[slice.file];
            SliceInfo {
                position_lps_mm: slice.position_lps_mm,
                sop_instance_uid: Some(file.sop_instance_uid.clone()),
                frame_number: (file.frames.len() > 1 || slice.frame_index > 0)
                    .then_some(slice.frame_index + 1),
            }
        })
        .collect();
    let info = VolumeInfo {
        modality: first_file.modality.clone(),
        series_uid: series_uid.to_string(),
        series_description: first_file.series_description.clone(),
        display_inverted: first_file.photometric.eq_ignore_ascii_case("MONOCHROME1"),
        body_part: first_file.body_part.clone(),
        burned_in_annotation: files.iter().any(|file| file.burned_in_annotation),
        patient: Some(keyslice_core::volume::PatientIdentity {
            name: first_file.patient_name.clone(),
            id: first_file.patient_id.clone(),
            birth_date: first_file.birth_date.clone(),
            sex: first_file.sex.clone(),
            study_date: first_file.study_date.clone(),
            accession: first_file.accession.clone(),
        }),
    };
    let dims = [
        stack.columns as usize,
        stack.rows as usize,
        stack.slices.len(),
    ];
    let mut volume =
        Volume::new(dims, patient_from_voxel, voxels, slices, info).map_err(|error| {
            DicomError::InvalidField {
                path: first_file.path.clone(),
                field: "image geometry",
                detail: error.to_string(),
            }
        })?;
    for warning in &stack.warnings {
        volume.push_warning(warning.clone());
    }
    if volume.info().display_inverted {
        volume.push_warning("MONOCHROME1: low values are displayed bright, as the source intends");
    }
    Ok(volume)
}
