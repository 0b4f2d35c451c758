//! File formats → [`keyslice_core::volume`] and back: DICOM series ([`dicom`]), NIfTI ([`nifti`]),
//! and segmentation folders in the AbdomenAtlas layout ([`masks`]).
//!
//! [`load_study`] is the one entry point the CLI and the app use: it decides from the path
//! what to read. Every error names the file (and field or series) at fault and carries a hint.
//!
//! Depends on `volume`; knows nothing of rendering, inference or the UI.

pub mod atomic;
pub mod avi;
pub mod cases;
pub mod dicom;
pub mod frames;
pub mod http;
pub mod jsonl;
pub mod limits;
pub mod masks;
pub mod nifti;
pub mod secrets;

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use dicom::{DicomError, DicomOptions, SeriesSummary, SkippedFile};
use keyslice_core::volume::Volume;
pub use nifti::NiftiError;

/// The image files of the study at `path` at a glance (a NIfTI file, a case folder's
/// `ct.nii.gz`, or every regular file below a DICOM folder, links not followed): `None` when
/// nothing can be read there. Reads no image: a worklist of thousands of cases checks them
/// all in a moment.
#[must_use]
pub fn files_stamp(path: &Path) -> Option<keyslice_core::prediction::FilesStamp> {
    use keyslice_core::prediction::FilesStamp;
    let case_ct = cases::CaseFolder::new(path).ct();
    let root = if path.is_dir() && case_ct.is_file() {
        case_ct
    } else {
        path.to_path_buf()
    };
    let mut stamp = FilesStamp {
        count: 0,
        bytes: 0,
        modified: 0,
    };
    let mut add = |meta: &std::fs::Metadata| {
        stamp.count += 1;
        stamp.bytes += meta.len();
        let modified = meta
            .modified()
            .ok()
            .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |since| since.as_secs());
        stamp.modified = stamp.modified.max(modified);
    };
    let meta = std::fs::symlink_metadata(&root).ok()?;
    if meta.is_file() {
        add(&meta);
        return Some(stamp);
    }
    let mut folders = vec![root];
    // Bounded: a folder of more entries than any study holds is not walked further.
    let mut visited = 0usize;
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).ok()?.flatten() {
            visited += 1;
            if visited > 1_000_000 {
                return Some(stamp);
            }
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                folders.push(entry.path());
            } else if meta.is_file() {
                add(&meta);
            }
        }
    }
    Some(stamp)
}

/// Any error loading or saving a volume.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// From the DICOM reader.
    #[error(transparent)]
    Dicom(#[from] DicomError),
    /// From the NIfTI reader or writer.
    #[error(transparent)]
    Nifti(#[from] NiftiError),
    /// The path does not exist.
    #[error("no such file or folder ({})", path.display())]
    NotFound {
        /// What was asked for.
        path: PathBuf,
    },
    /// `--series` was given for a NIfTI file.
    #[error("--series applies to DICOM input, but this is a NIfTI file ({})", path.display())]
    SeriesForNifti {
        /// The NIfTI file.
        path: PathBuf,
    },
}

impl IoError {
    /// What a user can do about it, in one sentence.
    #[must_use]
    pub fn hint(&self) -> String {
        match self {
            Self::Dicom(error) => error.hint(),
            Self::Nifti(error) => error.hint().to_string(),
            Self::NotFound { .. } => "check the spelling of the path".into(),
            Self::SeriesForNifti { .. } => "leave out --series for NIfTI files".into(),
        }
    }
}

/// Which reader produced a study.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceFormat {
    /// DICOM series.
    Dicom,
    /// NIfTI file.
    Nifti,
}

/// A loaded volume with what the loader learned about its source.
#[derive(Debug)]
pub struct Study {
    /// The volume.
    pub volume: Volume,
    /// The file that was read (for a case folder, its `ct.nii.gz`).
    pub path: PathBuf,
    /// Which reader.
    pub format: SourceFormat,
    /// DICOM series found (empty for NIfTI).
    pub series: Vec<SeriesSummary>,
    /// Files without the DICM marker that were skipped.
    pub non_dicom_files: usize,
    /// DICOM files that could not be used.
    pub unreadable: Vec<SkippedFile>,
}

/// Options for [`load_study`].
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// DICOM Series Instance UID to load instead of the largest series.
    pub series_uid: Option<String>,
}

/// Loads a CT from a DICOM file, folder or DICOMDIR, a NIfTI file, or a case folder holding
/// `ct.nii.gz` (the AbdomenAtlas layout).
pub fn load_study(path: &Path, options: &LoadOptions) -> Result<Study, IoError> {
    if !path.exists() {
        return Err(IoError::NotFound {
            path: path.to_path_buf(),
        });
    }
    let nifti_path = if nifti::is_nifti_path(path) && path.is_file() {
        Some(path.to_path_buf())
    } else if path.is_dir() {
        cases::CaseFolder::new(path).ct_found()
    } else {
        None
    };
    if let Some(nifti_path) = nifti_path {
        if options.series_uid.is_some() {
            return Err(IoError::SeriesForNifti { path: nifti_path });
        }
        let volume = nifti::read_nifti(&nifti_path)?;
        return Ok(Study {
            volume,
            path: nifti_path,
            format: SourceFormat::Nifti,
            series: Vec::new(),
            non_dicom_files: 0,
            unreadable: Vec::new(),
        });
    }
    let study = dicom::load_dicom(
        path,
        &DicomOptions {
            series_uid: options.series_uid.clone(),
        },
    )?;
    Ok(Study {
        volume: study.volume,
        path: path.to_path_buf(),
        format: SourceFormat::Dicom,
        series: study.series,
        non_dicom_files: study.non_dicom_files,
        unreadable: study.unreadable,
    })
}
