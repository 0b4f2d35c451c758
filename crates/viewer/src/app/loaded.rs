//! What a load reads: a study into a CT ready to show (a file or folder, a workspace's case
//! with its saved prediction) and a case's masks onto its grid, with the lesions they mark.
//! The loading types and readers that the background loading (`open`), a study arriving
//! from a PACS (`arrival`) and a reader study's items (`study`) share.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keyslice_core::prediction::Prediction;
use keyslice_core::volume::label::{extent_of, first_largest, is_lesion};
use keyslice_core::volume::{LabelVolume, Structure, Volume, combine_structures};
use keyslice_io::masks::load_masks_onto;
use keyslice_io::{LoadOptions, SourceFormat, Study, load_study};
use keyslice_review::workspace::{Workspace, WorkspaceError};

use crate::render::view::{Plane, PlaneAxes};
use crate::ui::viewport::LesionMark;

/// A loaded CT, ready to show.
pub struct LoadedStudy {
    /// The CT (shared with the worker that goes on to load the masks onto its grid).
    pub volume: Arc<Volume>,
    /// What the title bar shows.
    pub title: String,
    /// Shown above the viewer.
    pub warnings: Vec<String>,
    /// The case's saved prediction (workspace cases), if any.
    pub prediction: Option<Box<Prediction>>,
}

/// A case's masks on the CT grid, with what they say about lesions.
#[derive(Default)]
pub struct LoadedMasks {
    /// Combined label volume on the CT grid.
    pub labels: Option<LabelVolume>,
    /// The structures in `labels`.
    pub structures: Vec<Structure>,
    /// Axial extents of the lesion structures.
    pub lesion_marks: Vec<LesionMark>,
    /// Reference key slice from the masks (axial slice with the most lesion voxels).
    pub key_slice: Option<(usize, String)>,
    /// Masks that could not be read or shown.
    pub warnings: Vec<String>,
}

/// Where a case's masks are read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MaskPlace {
    /// A folder of masks: an AbdomenAtlas `segmentations/` folder (NIfTI masks, and DICOM
    /// Segmentations in it), or a DICOM folder with segmentations beside the CT.
    Folder(PathBuf),
    /// The segmentations of a study opened from its PACS, retrieved into the cache beside the
    /// CT's series folder `ct_folder`, newest first: the newest that fits the CT is shown (each
    /// one Keyslice stores holds every mask of the case at the time).
    Stored {
        /// The segmentation files, newest first.
        files: Vec<PathBuf>,
        /// The CT's DICOM folder (its frame of reference).
        ct_folder: PathBuf,
    },
}

/// Reads the study at `path` (one series of it when `options` names one); also returns the
/// `segmentations/` folder beside a NIfTI file, when there is one.
pub(super) fn load_path(
    path: &Path,
    options: &LoadOptions,
) -> Result<(LoadedStudy, Option<MaskPlace>), (String, String)> {
    let study: Study =
        load_study(path, options).map_err(|error| (error.to_string(), error.hint()))?;
    let mut warnings = study.volume.warnings().to_vec();
    warnings.extend(
        study
            .unreadable
            .iter()
            .map(|file| format!("skipped {}: {}", file.path.display(), file.reason)),
    );
    let mask_folder = match study.format {
        SourceFormat::Nifti => study
            .path
            .parent()
            .map(|parent| keyslice_io::cases::CaseFolder::new(parent).masks()),
        // A DICOM folder that holds segmentations beside the CT: they are its masks.
        SourceFormat::Dicom => study
            .series
            .iter()
            .any(|series| series.modality.eq_ignore_ascii_case("SEG"))
            .then(|| {
                if study.path.is_dir() {
                    Some(study.path.clone())
                } else {
                    study.path.parent().map(Path::to_path_buf)
                }
            })
            .flatten(),
    }
    .filter(|folder| folder.is_dir());
    Ok((
        LoadedStudy {
            title: study.path.display().to_string(),
            volume: Arc::new(study.volume),
            warnings,
            prediction: None,
        },
        mask_folder.map(MaskPlace::Folder),
    ))
}

/// Reads one case of a workspace: its CT, where its masks are and its saved prediction.
pub(super) fn load_workspace_case(
    root: &Path,
    case_id: &str,
) -> Result<(LoadedStudy, Option<MaskPlace>), (String, String)> {
    let failed = |error: WorkspaceError| (error.to_string(), error.hint().to_string());
    let workspace = Workspace::open(root).map_err(failed)?;
    let case = workspace.case(case_id).cloned().ok_or_else(|| {
        (
            format!("{}: no case {case_id} in this workspace", root.display()),
            "pick a case from the worklist".to_string(),
        )
    })?;
    let predictions = workspace.predictions().map_err(failed)?;
    let prediction = predictions.get(case_id).cloned();
    // The series the prediction was made on, not whichever the folder holds most of now.
    let bound_series = prediction
        .as_ref()
        .and_then(|prediction| prediction.images.as_ref())
        .map(|images| images.series_uid.clone())
        .filter(|uid| !uid.is_empty());
    let (mut study, study_masks) = match bound_series {
        Some(series_uid) => load_path(
            &case.volume,
            &LoadOptions {
                series_uid: Some(series_uid),
            },
        )?,
        None => load_path(&case.volume, &LoadOptions::default())?,
    };
    study
        .warnings
        .extend(predictions.damaged.iter().map(|line| {
            format!(
                "{}: {line} (skipped)",
                workspace.predictions_path().display()
            )
        }));
    // A prediction made on other images is not shown over these.
    let changed = prediction
        .as_ref()
        .and_then(|prediction| prediction.images.as_ref())
        .and_then(|images| images.changed(&study.volume));
    if let Some(changed) = changed {
        study.warnings.insert(
            0,
            format!(
                "{case_id}: {changed}. Its saved prediction is not shown over these images: analyse it again (A), and check the review, which was made on the earlier images"
            ),
        );
    } else {
        study.prediction = prediction.map(Box::new);
    }
    study.title = format!("{case_id} — {}", root.display());
    let masks = case
        .masks
        .filter(|folder| folder.is_dir())
        .map(MaskPlace::Folder)
        .or(study_masks)
        .or_else(|| {
            // A study from a PACS: the segmentations stored with it came with its results.
            let ct_folder = case.volume.clone();
            let files = keyslice_workflow::masks::stored_segmentations(&ct_folder);
            (case.origin.is_some() && ct_folder.is_dir() && !files.is_empty())
                .then_some(MaskPlace::Stored { files, ct_folder })
        });
    Ok((study, masks))
}

/// Reads a case's masks onto the CT grid — an AbdomenAtlas `segmentations/` folder's NIfTI
/// masks and the DICOM Segmentations in the folder, or the segmentation stored with a study
/// on its PACS — and derives the lesion extents and reference key slice. A mask that cannot
/// be read becomes a warning.
#[must_use]
pub fn load_case_masks(place: &MaskPlace, volume: &Volume) -> LoadedMasks {
    let mut warnings = Vec::new();
    let masks = match place {
        MaskPlace::Folder(folder) => folder_masks(folder, volume, &mut warnings),
        MaskPlace::Stored { files, ct_folder } => {
            stored_masks(files, ct_folder, volume, &mut warnings)
        }
    };
    let (labels, structures) = match masks {
        Some(masks) => {
            let (combined, structures, left_out) = combine_structures(&masks);
            if !left_out.is_empty() {
                warnings.push(format!(
                    "masks not shown (more than 14 structures): {}",
                    left_out.join(", ")
                ));
            }
            (combined, structures)
        }
        None => (None, Vec::new()),
    };
    let (lesion_marks, key_slice) = labels
        .as_ref()
        .map(|labels| lesion_marks(volume, labels, &structures))
        .unwrap_or_default();
    LoadedMasks {
        labels,
        structures,
        lesion_marks,
        key_slice,
        warnings,
    }
}

/// The masks in `folder` on the CT's grid; `None` (with the reason in `warnings`) when the
/// folder cannot be read.
fn folder_masks(
    folder: &Path,
    volume: &Volume,
    warnings: &mut Vec<String>,
) -> Option<Vec<LabelVolume>> {
    let segmentations = keyslice_workflow::masks::segmentation_files(folder);
    match load_masks_onto(folder, volume) {
        Ok(mut masks) => {
            masks.extend(keyslice_workflow::masks::segmentation_masks(
                &segmentations,
                folder,
                volume,
                warnings,
            ));
            Some(masks)
        }
        Err(error) => {
            warnings.push(format!("masks not shown: {error}"));
            None
        }
    }
}

/// The newest of a study's stored segmentations (`files`, newest first) that reads onto the
/// CT; the reasons the newer ones did not, and how many older ones there are, in `warnings`.
fn stored_masks(
    files: &[PathBuf],
    ct_folder: &Path,
    volume: &Volume,
    warnings: &mut Vec<String>,
) -> Option<Vec<LabelVolume>> {
    for (at, file) in files.iter().enumerate() {
        let masks = keyslice_workflow::masks::segmentation_masks(
            std::slice::from_ref(file),
            ct_folder,
            volume,
            warnings,
        );
        if !masks.is_empty() {
            let older = files.len() - at - 1;
            if older > 0 {
                warnings.push(format!(
                    "the newest segmentation stored with this study on the PACS is shown; {older} older one(s) are not"
                ));
            }
            return Some(masks);
        }
    }
    None
}

/// Each lesion structure's axial extent, and the axial slice where the lesions together cover
/// the largest area (the key-slice definition of the ground truth).
#[must_use]
pub fn lesion_marks(
    volume: &Volume,
    labels: &LabelVolume,
    structures: &[Structure],
) -> (Vec<LesionMark>, Option<(usize, String)>) {
    let axis = PlaneAxes::new(Plane::Axial, &volume.directions_lps()).normal;
    let lesions: Vec<&Structure> = structures
        .iter()
        .filter(|structure| is_lesion(&structure.name))
        .collect();
    // One pass over the labels for every structure.
    let by_label = labels.counts_by_label_along(axis);
    let marks = lesions
        .iter()
        .filter_map(|structure| {
            extent_of(&by_label[usize::from(structure.label)]).map(|(first_slice, last_slice)| {
                LesionMark {
                    name: structure.name.clone(),
                    label: structure.label,
                    first_slice,
                    last_slice,
                }
            })
        })
        .collect();
    let all: Vec<usize> = (0..labels.dims[axis])
        .map(|slice| {
            lesions
                .iter()
                .map(|structure| by_label[usize::from(structure.label)][slice])
                .sum()
        })
        .collect();
    let key_slice = first_largest(&all)
        .map(|slice| (slice, "most lesion voxels, from the case masks".to_string()));
    (marks, key_slice)
}
