//! Opening a study off the UI thread: read the volume, its case masks and lesion extents, and
//! hand the result back over a channel; and the native file/folder dialog, also off the UI
//! thread so the window keeps drawing while it is open.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};

use super::workspace::{demo_dir, prepare_demo, read_prediction};
use crate::infer::Prediction;

use crate::io::masks::load_masks_onto;
use crate::io::{LoadOptions, SourceFormat, Study, load_study};
use crate::render::view::{Plane, PlaneAxes};
use crate::ui::viewport::LesionMark;
use crate::volume::demo::demo_abdomen;
use crate::volume::label::{extent_of, first_largest, is_lesion};
use crate::volume::{LabelVolume, Structure, Volume, combine_structures};

/// What to open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A file or folder the user named.
    Path(PathBuf),
    /// The built-in synthetic demo volume.
    Demo,
    /// The demo workspace (phantom cases analysed by keyslice-tiny, made on first run):
    /// opens its first case.
    DemoWorkspace,
}

/// A loaded CT, ready to show.
pub struct LoadedStudy {
    /// The CT (shared with the worker that goes on to load the masks onto its grid).
    pub volume: Arc<Volume>,
    /// What the title bar shows.
    pub title: String,
    /// Shown above the viewer.
    pub warnings: Vec<String>,
    /// The case folder's saved analysis (`prediction.json`), if any.
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

/// What the loading worker reports, in this order: the study, then (for a case folder with
/// `segmentations/`) its masks; or a failure.
pub enum LoadEvent {
    /// Preparing the demo workspace: what is being done, and the fraction done.
    Progress(String, f32),
    /// The demo workspace's case folders (sent before the first case's study).
    Workspace(Vec<PathBuf>),
    /// The CT is ready: show it at once.
    Study(LoadedStudy),
    /// The masks are ready.
    Masks(Box<LoadedMasks>),
    /// Loading failed: what failed and what to do.
    Failed(String, String),
}

/// Starts loading `source` on a worker thread; `wake` runs after each event is sent (it asks
/// the window to repaint). The CT is sent as soon as it is read, masks follow, so the first
/// slices never wait for a dozen segmentation files.
pub fn load_in_background(source: Source, wake: impl Fn() + Send + 'static) -> Receiver<LoadEvent> {
    let (sender, receiver) = channel();
    std::thread::spawn(move || {
        // The window may have closed or moved on meanwhile; then nobody needs the result.
        let source = if source == Source::DemoWorkspace {
            match open_demo_workspace(&sender, &wake) {
                Ok(first) => Source::Path(first),
                Err((message, hint)) => {
                    let _ = sender.send(LoadEvent::Failed(message, hint));
                    wake();
                    return;
                }
            }
        } else {
            source
        };
        match load_volume(&source) {
            Ok((study, mask_folder)) => {
                let volume = Arc::clone(&study.volume);
                let _ = sender.send(LoadEvent::Study(study));
                wake();
                if let Some(folder) = mask_folder {
                    let masks = Box::new(load_case_masks(&folder, &volume));
                    let _ = sender.send(LoadEvent::Masks(masks));
                    wake();
                }
            }
            Err((message, hint)) => {
                let _ = sender.send(LoadEvent::Failed(message, hint));
                wake();
            }
        }
    });
    receiver
}

/// Prepares the demo workspace, reporting progress, and returns its first case folder.
fn open_demo_workspace(
    sender: &Sender<LoadEvent>,
    wake: &impl Fn(),
) -> Result<PathBuf, (String, String)> {
    let folder = demo_dir().ok_or_else(|| {
        (
            "no data folder for the demo workspace (HOME is not set)".to_string(),
            "set KEYSLICE_DATA_DIR to a writable folder".to_string(),
        )
    })?;
    let cases = prepare_demo(&folder, &mut |text, fraction| {
        let _ = sender.send(LoadEvent::Progress(text.to_string(), fraction));
        wake();
    })?;
    let _ = sender.send(LoadEvent::Workspace(cases.clone()));
    cases.into_iter().next().ok_or_else(|| {
        (
            "the demo workspace has no cases".to_string(),
            format!("remove {} and start again", folder.display()),
        )
    })
}

/// Loads `source` and its masks in one go (what the worker does, without the channel).
pub fn load(source: &Source) -> Result<(LoadedStudy, Option<LoadedMasks>), (String, String)> {
    let (study, mask_folder) = load_volume(source)?;
    let masks = mask_folder.map(|folder| load_case_masks(&folder, &study.volume));
    Ok((study, masks))
}

/// Reads the CT; also returns the case's `segmentations/` folder when there is one.
pub fn load_volume(source: &Source) -> Result<(LoadedStudy, Option<PathBuf>), (String, String)> {
    match source {
        Source::Demo => Ok((
            LoadedStudy {
                volume: Arc::new(demo_abdomen()),
                title: "Synthetic demo abdomen (not patient data)".to_string(),
                warnings: Vec::new(),
                prediction: None,
            },
            None,
        )),
        Source::DemoWorkspace => {
            let folder = demo_dir().ok_or_else(|| {
                (
                    "no data folder for the demo workspace (HOME is not set)".to_string(),
                    "set KEYSLICE_DATA_DIR to a writable folder".to_string(),
                )
            })?;
            let cases = prepare_demo(&folder, &mut |_, _| {})?;
            let first = cases.into_iter().next().ok_or_else(|| {
                (
                    "the demo workspace has no cases".to_string(),
                    format!("remove {} and start again", folder.display()),
                )
            })?;
            load_volume(&Source::Path(first))
        }
        Source::Path(path) => {
            let study: Study = load_study(path, &LoadOptions::default())
                .map_err(|error| (error.to_string(), error.hint()))?;
            let mut warnings = study.volume.warnings().to_vec();
            warnings.extend(
                study
                    .unreadable
                    .iter()
                    .map(|file| format!("skipped {}: {}", file.path.display(), file.reason)),
            );
            let mask_folder = (study.format == SourceFormat::Nifti)
                .then(|| {
                    study
                        .path
                        .parent()
                        .map(|parent| parent.join("segmentations"))
                })
                .flatten()
                .filter(|folder| folder.is_dir());
            // A case folder (the NIfTI's folder, or the folder opened) may hold its saved
            // analysis.
            let case_folder = if path.is_dir() {
                Some(path.clone())
            } else {
                (study.format == SourceFormat::Nifti)
                    .then(|| study.path.parent().map(Path::to_path_buf))
                    .flatten()
            };
            let prediction = match case_folder.as_deref().map(read_prediction) {
                Some(Ok(prediction)) => prediction.map(Box::new),
                Some(Err(error)) => {
                    warnings.push(format!("saved analysis not shown: {error}"));
                    None
                }
                None => None,
            };
            Ok((
                LoadedStudy {
                    title: study.path.display().to_string(),
                    volume: Arc::new(study.volume),
                    warnings,
                    prediction,
                },
                mask_folder,
            ))
        }
    }
}

/// Reads an AbdomenAtlas `segmentations/` folder onto the CT grid and derives the lesion
/// extents and reference key slice. A mask that cannot be read becomes a warning.
#[must_use]
pub fn load_case_masks(folder: &Path, volume: &Volume) -> LoadedMasks {
    let mut warnings = Vec::new();
    let (labels, structures) = case_masks(folder, volume, &mut warnings);
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

/// The masks in `folder` on the CT's grid, combined into one label volume.
fn case_masks(
    folder: &Path,
    volume: &Volume,
    warnings: &mut Vec<String>,
) -> (Option<LabelVolume>, Vec<Structure>) {
    match load_masks_onto(folder, volume) {
        Ok(masks) => {
            let (combined, structures, left_out) = combine_structures(&masks);
            if !left_out.is_empty() {
                warnings.push(format!(
                    "masks not shown (more than 15 structures): {}",
                    left_out.join(", ")
                ));
            }
            (combined, structures)
        }
        Err(error) => {
            warnings.push(format!("masks not shown: {error}"));
            (None, Vec::new())
        }
    }
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

/// What the user picks in the native dialog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// A NIfTI file or one DICOM file.
    File,
    /// A DICOM folder or a case folder.
    Folder,
}

/// Shows the native file or folder dialog (xdg-desktop-portal on Linux) without blocking the
/// window: the choice arrives on the returned channel, `None` when cancelled or when no
/// dialog service is available (the path field in the File menu works without one).
pub fn pick_in_background(
    pick: Pick,
    start_in: Option<PathBuf>,
    done: impl FnOnce() + Send + 'static,
) -> Receiver<Option<PathBuf>> {
    let (sender, receiver) = channel();
    let show = move || {
        let mut dialog = rfd::FileDialog::new().set_title(match pick {
            Pick::File => "Open a CT (NIfTI or DICOM file)",
            Pick::Folder => "Open a DICOM folder or case folder",
        });
        if let Some(folder) = start_in {
            dialog = dialog.set_directory(folder);
        }
        let chosen = match pick {
            Pick::File => dialog
                .add_filter("CT volumes", &["nii", "gz", "hdr", "dcm", "DCM"])
                .add_filter("All files", &["*"])
                .pick_file(),
            Pick::Folder => dialog.pick_folder(),
        };
        let _ = sender.send(chosen);
        done();
    };
    // macOS wants dialogs on the main thread; elsewhere a worker keeps the window drawing.
    if cfg!(target_os = "macos") {
        show();
    } else {
        std::thread::spawn(show);
    }
    receiver
}
