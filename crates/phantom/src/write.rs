//! Writes phantom cases in the AbdomenAtlas layout:
//!
//! ```text
//! OUT/manifest.json
//! OUT/PHANTOM_<seed>_<index>/ct.nii.gz
//! OUT/PHANTOM_<seed>_<index>/segmentations/{liver,pancreas,kidney_left,...}.nii.gz
//! OUT/PHANTOM_<seed>_<index>/truth.json
//! ```
//!
//! Each case is written into a hidden temporary folder and renamed into place, so a case
//! folder is either complete or absent, even if the process is killed. An existing case
//! folder is never overwritten.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{GENERATOR_VERSION, PhantomCase, PhantomOptions, case_id, generate};
use keyslice_io::atomic::write_atomically;
use keyslice_io::nifti::{NiftiError, WriteOptions, write_label_nifti, write_nifti};

/// Why phantoms could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PhantomError {
    /// A folder or file could not be created.
    #[error("{path}: {source}")]
    Io {
        /// What was being written.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A NIfTI file could not be written.
    #[error(transparent)]
    Nifti(#[from] NiftiError),
    /// `manifest.json` is there and cannot take these cases.
    #[error("{path}: {detail}; it is left as it is")]
    ForeignManifest {
        /// The manifest.
        path: PathBuf,
        /// Why the new cases cannot be added to it.
        detail: String,
    },
    /// The case is already there.
    #[error("{path} already exists; phantoms are never overwritten")]
    Exists {
        /// The case folder.
        path: PathBuf,
    },
}

impl PhantomError {
    /// What the user can do about it.
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            Self::Io { .. } | Self::Nifti(_) => {
                "check that the output folder is writable and the disk has space"
            }
            Self::Exists { .. } => "choose another --out folder, another --seed, or remove it",
            Self::ForeignManifest { .. } => {
                "choose another --out folder; a phantom folder holds one seed and one set of settings"
            }
        }
    }
}

/// One case in the manifest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ManifestCase {
    /// Case identifier (the folder name).
    pub case_id: String,
    /// CT path relative to the manifest.
    pub ct: String,
    /// Mask folder relative to the manifest.
    pub segmentations: String,
    /// Truth file relative to the manifest.
    pub truth: String,
    /// Columns, rows, slices.
    pub dims: [usize; 3],
    /// Voxel spacing, mm.
    pub spacing_mm: [f64; 3],
    /// Number of visible lesions.
    pub lesions: usize,
}

/// `manifest.json`: what was generated, with which settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// `"keyslice phantom"`.
    pub generator: String,
    /// [`GENERATOR_VERSION`].
    pub generator_version: u32,
    /// The set's seed.
    pub seed: u64,
    /// In-plane matrix.
    pub matrix: usize,
    /// Fixed slice spacing, if one was asked for.
    pub slice_mm: Option<f64>,
    /// The cases, in index order.
    pub cases: Vec<ManifestCase>,
    /// Reminder for anyone who finds the folder.
    pub note: String,
}

/// Generates cases `first..first + count` of `seed` into `out`, calling `progress(done,
/// count)` after each; writes `manifest.json` listing these cases and those an earlier run of
/// the same seed and settings wrote there. A `manifest.json` that Keyslice did not write, or
/// that lists another seed or settings, is refused before anything is generated.
pub fn write_phantoms(
    out: &Path,
    seed: u64,
    first: u32,
    count: u32,
    options: PhantomOptions,
    mut progress: impl FnMut(u32, u32, &str),
) -> Result<Manifest, PhantomError> {
    let io_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PhantomError::Io { path, source }
    };
    std::fs::create_dir_all(out).map_err(io_error(out))?;
    let manifest_path = out.join("manifest.json");
    let earlier = earlier_cases(&manifest_path, seed, options)?;
    for index in first..first + count {
        let folder = out.join(case_id(seed, index));
        if folder.exists() {
            return Err(PhantomError::Exists { path: folder });
        }
    }
    let mut cases = earlier;
    for (done, index) in (first..first + count).enumerate() {
        let case = generate(seed, index, options);
        cases.push(write_case(out, &case)?);
        progress(done as u32 + 1, count, &case.truth.case_id);
    }
    cases.sort_by(|a, b| a.case_id.cmp(&b.case_id));
    cases.dedup_by(|a, b| a.case_id == b.case_id);
    let manifest = Manifest {
        generator: "keyslice phantom".into(),
        generator_version: GENERATOR_VERSION,
        seed,
        matrix: options.matrix,
        slice_mm: options.slice_mm,
        cases,
        note:
            "Synthetic CT phantoms generated by Keyslice: not patient data, not for clinical use."
                .into(),
    };
    let text = serde_json::to_string_pretty(&manifest).unwrap_or_default();
    write_atomically(&manifest_path, text.as_bytes()).map_err(io_error(&manifest_path))?;
    Ok(manifest)
}

/// The cases an existing `manifest.json` lists, when it is a phantom manifest of the same
/// seed and settings; none when there is no manifest.
fn earlier_cases(
    path: &Path,
    seed: u64,
    options: PhantomOptions,
) -> Result<Vec<ManifestCase>, PhantomError> {
    let refuse = |detail: String| PhantomError::ForeignManifest {
        path: path.to_path_buf(),
        detail,
    };
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string(path).map_err(|source| PhantomError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let manifest: Manifest = serde_json::from_str(&text)
        .ok()
        .filter(|manifest: &Manifest| manifest.generator == "keyslice phantom")
        .ok_or_else(|| refuse("this manifest.json was not written by keyslice phantom".into()))?;
    let same_settings = manifest.seed == seed
        && manifest.matrix == options.matrix
        && manifest.slice_mm == options.slice_mm
        && manifest.generator_version == GENERATOR_VERSION;
    if !same_settings {
        return Err(refuse(format!(
            "it lists phantoms of seed {} at a {} matrix (generator {}), not seed {seed} at {} (generator {GENERATOR_VERSION})",
            manifest.seed, manifest.matrix, manifest.generator_version, options.matrix
        )));
    }
    Ok(manifest.cases)
}

/// Writes one case folder (through a temporary folder renamed into place).
pub fn write_case(out: &Path, case: &PhantomCase) -> Result<ManifestCase, PhantomError> {
    let case_id = &case.truth.case_id;
    let folder = out.join(case_id);
    let temporary = out.join(format!(".{case_id}.partial-{}", std::process::id()));
    let result = (|| -> Result<(), PhantomError> {
        let io_error = |path: &Path| {
            let path = path.to_path_buf();
            move |source| PhantomError::Io { path, source }
        };
        let layout = keyslice_io::cases::CaseFolder::new(&temporary);
        let segmentations = layout.masks();
        std::fs::create_dir_all(&segmentations).map_err(io_error(&segmentations))?;
        let options = WriteOptions::default();
        write_nifti(&case.volume, &layout.ct(), options)?;
        for name in PhantomCase::mask_names() {
            if let Some(mask) = case.mask(name) {
                let path = segmentations.join(format!("{name}.nii.gz"));
                write_label_nifti(&mask, &path, options)?;
            }
        }
        let truth = layout.truth();
        let text = serde_json::to_string_pretty(&case.truth).unwrap_or_default();
        std::fs::write(&truth, text).map_err(io_error(&truth))?;
        if folder.exists() {
            return Err(PhantomError::Exists {
                path: folder.clone(),
            });
        }
        std::fs::rename(&temporary, &folder).map_err(io_error(&folder))
    })();
    if result.is_err() {
        // Best effort: the temporary folder is ours and incomplete.
        let _ = std::fs::remove_dir_all(&temporary);
    }
    result?;
    Ok(ManifestCase {
        case_id: case_id.clone(),
        ct: format!("{case_id}/ct.nii.gz"),
        segmentations: format!("{case_id}/segmentations"),
        truth: format!("{case_id}/truth.json"),
        dims: case.truth.dims,
        spacing_mm: case.truth.spacing_mm,
        lesions: case.truth.lesions.len(),
    })
}
