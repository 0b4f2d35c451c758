//! Segmentation masks in the AbdomenAtlas layout (`<case>/segmentations/<structure>.nii.gz`),
//! loaded as label volumes and brought onto the CT's grid through both files' transforms.

use std::path::Path;

use rayon::prelude::*;

use super::nifti::{NiftiError, read_label_nifti};
use keyslice_core::volume::{LabelVolume, Volume, resample_nearest};

/// Reads every `*.nii` / `*.nii.gz` in `folder` (sorted by name) and resamples each onto
/// `ct`'s grid by nearest neighbour. The structure name is the file stem (`liver_lesion`).
pub fn load_masks_onto(folder: &Path, ct: &Volume) -> Result<Vec<LabelVolume>, NiftiError> {
    let entries = std::fs::read_dir(folder).map_err(|source| NiftiError::Io {
        path: folder.to_path_buf(),
        source,
    })?;
    let mut paths: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| is_mask_file(path))
        .collect();
    paths.sort();
    // Masks are independent: read and resample them in parallel (order kept by rayon).
    paths
        .par_iter()
        .map(|path| load_mask_onto(path, ct))
        .collect()
}

/// Whether the file name ends in `.nii` or `.nii.gz`, in any letter case.
#[expect(
    clippy::case_sensitive_file_extension_comparisons,
    reason = "compared lower-cased"
)]
fn is_mask_file(path: &Path) -> bool {
    path.file_name()
        .map(|name| name.to_string_lossy().to_ascii_lowercase())
        .is_some_and(|name| name.ends_with(".nii") || name.ends_with(".nii.gz"))
}

/// Reads one mask and resamples it onto `ct`'s grid.
pub fn load_mask_onto(path: &Path, ct: &Volume) -> Result<LabelVolume, NiftiError> {
    let mask = read_label_nifti(path)?;
    resample_nearest(&mask, ct.dims(), ct.patient_from_voxel()).ok_or_else(|| NiftiError::Header {
        path: path.to_path_buf(),
        detail: "the mask's voxel-to-patient transform is singular".into(),
    })
}
