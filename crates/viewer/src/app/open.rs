//! Opening a study off the UI thread: read the volume, its case masks and lesion extents, and
//! hand the result back over a channel; and the native file/folder dialog, also off the UI
//! thread so the window keeps drawing while it is open.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};

use super::job::Job;

use super::workspace::{data_dir, demo_dir, prepare_demo, scratch_workspace};
use keyslice_review::workspace::{MANIFEST_FILE, WorklistEntry, Workspace, WorkspaceError};

pub use super::loaded::{LoadedMasks, LoadedStudy, MaskPlace, lesion_marks, load_case_masks};
use super::loaded::{load_path, load_workspace_case};
use keyslice_core::volume::demo::demo_abdomen;
use keyslice_io::LoadOptions;

/// What to open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A file or folder the user named.
    Path(PathBuf),
    /// The built-in synthetic demo volume.
    Demo,
    /// The demo workspace (phantom cases analysed by keyslice-tiny, made on first run):
    /// its worklist, then its first case.
    DemoWorkspace,
    /// A review workspace folder: its worklist, then its first case.
    Workspace(PathBuf),
    /// A workspace opened at one of its cases: its worklist, and that case (a study just
    /// retrieved from a PACS into the PACS workspace).
    WorkspaceAt {
        /// The workspace folder.
        root: PathBuf,
        /// The case to show first.
        case_id: String,
    },
    /// A study arriving from a PACS: shown as it comes, then opened as the source the
    /// retrieve hands over.
    Arriving(super::arrival::Arrival<Source>),
    /// A reader's next item of a reader study: its case, showing only what its arm allows.
    StudyRead {
        /// The study folder.
        dir: PathBuf,
        /// The reader.
        reader: String,
    },
    /// One case of a workspace, with its saved prediction.
    WorkspaceCase {
        /// The workspace folder.
        root: PathBuf,
        /// The case.
        case_id: String,
    },
}

/// What the loading worker reports, in this order: the study, then (for a case folder with
/// `segmentations/`) its masks; or a failure.
pub enum LoadEvent {
    /// Preparing the demo workspace: what is being done, and the fraction done.
    Progress(String, f32),
    /// A workspace's folder and worklist (sent before its first case's study).
    Workspace(PathBuf, Vec<WorklistEntry>),
    /// The CT is ready: show it at once.
    Study(LoadedStudy),
    /// The part of a study that has arrived from a PACS so far (more is coming).
    Preview(Box<super::arrival::Preview>),
    /// The reader-study item whose case follows.
    StudyItem(Box<super::study::StudyItem>),
    /// The masks are ready.
    Masks(Box<LoadedMasks>),
    /// Something the user should know that does not stop loading.
    Notice(String),
    /// Loading failed: what failed and what to do.
    Failed(String, String),
}

/// One load reads at a time: a load waits here for the one before it, so a burst of clicks
/// never reads many studies at once; each superseded load gives up when its turn comes.
static LOAD_LANE: Mutex<()> = Mutex::new(());

/// Load workers alive now (waiting for the lane, or reading).
static RUNNING_LOADS: AtomicUsize = AtomicUsize::new(0);

/// How many load workers are alive: after the user stops switching cases, one at most.
#[must_use]
pub fn running_loads() -> usize {
    RUNNING_LOADS.load(Ordering::SeqCst)
}

/// Counts a load worker for as long as it lives.
struct Running;

impl Running {
    fn start() -> Self {
        RUNNING_LOADS.fetch_add(1, Ordering::SeqCst);
        Self
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING_LOADS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The study a `dicomweb+http(s)://…/studies/UID` URL names, as it will arrive: looked up on
/// the PACS now, then retrieved behind the window into `workspace` (see
/// [`super::pacs::arriving`]), and opened there as a case with its stored result.
pub fn from_pacs(
    url: &str,
    workspace: &Path,
    report: Arc<dyn keyslice_workflow::Report + Send>,
) -> Result<Source, keyslice_workflow::Error> {
    super::pacs::arriving(url, workspace, report, |opened| Source::WorkspaceAt {
        root: opened.root,
        case_id: opened.case_id,
    })
    .map(Source::Arriving)
}

/// Starts loading `source` on a worker thread; each event wakes the window. The CT is sent as
/// soon as it is read, masks follow, so the first slices never wait for a dozen segmentation
/// files. Loads take turns ([`LOAD_LANE`]); a load the window has dropped (the user asked for
/// another case) stops at its next step and sends nothing more.
#[must_use]
pub fn load_in_background(ctx: &egui::Context, source: Source) -> Job<LoadEvent> {
    Job::spawn_cancellable(ctx, move |send, cancelled| {
        let _running = Running::start();
        // A panicked load cannot leave the lane closed: the guard inside is `()`.
        let _lane = LOAD_LANE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if cancelled() {
            return;
        }
        let mut send = |event| send(event);
        // A study on a PACS named in the window: looked up here, off the window's thread, then
        // shown as it arrives.
        let source = match source {
            Source::Path(path) if keyslice_workflow::pacs::is_pacs_url(&path.to_string_lossy()) => {
                match from_pacs(
                    &path.to_string_lossy(),
                    &keyslice_workflow::pacs::pacs_workspace(),
                    Arc::new(keyslice_workflow::Logged),
                ) {
                    Ok(source) => source,
                    Err(error) => {
                        send(LoadEvent::Failed(error.to_string(), error.hint()));
                        return;
                    }
                }
            }
            other => other,
        };
        let source = match source {
            Source::Arriving(arrival) => {
                let mut preview = |preview| send(LoadEvent::Preview(Box::new(preview)));
                match super::arrival::watch(&arrival, &mut preview, &cancelled) {
                    Some(Ok(source)) => source,
                    Some(Err((message, hint))) => {
                        send(LoadEvent::Failed(message, hint));
                        return;
                    }
                    None => return,
                }
            }
            Source::StudyRead { dir, reader } => {
                match super::study::next_item(&dir, &reader) {
                    Ok((item, study)) => {
                        if !cancelled() {
                            send(LoadEvent::StudyItem(Box::new(item)));
                            send(LoadEvent::Study(study));
                        }
                    }
                    Err((message, hint)) => send(LoadEvent::Failed(message, hint)),
                }
                return;
            }
            other => other,
        };
        let source = match resolve(with_scratch_workspace(source, &mut send), &mut send) {
            Ok(source) => source,
            Err((message, hint)) => {
                send(LoadEvent::Failed(message, hint));
                return;
            }
        };
        if cancelled() {
            return;
        }
        match load_volume(&source) {
            Ok((study, mask_place)) => {
                if cancelled() {
                    return;
                }
                let volume = Arc::clone(&study.volume);
                send(LoadEvent::Study(study));
                if let Some(place) = mask_place
                    && !cancelled()
                {
                    send(LoadEvent::Masks(Box::new(load_case_masks(&place, &volume))));
                }
            }
            Err((message, hint)) => send(LoadEvent::Failed(message, hint)),
        }
    })
}

/// A study opened by path becomes a case of its scratch workspace (see
/// [`scratch_workspace`]) so corrections on it are recorded; where that cannot be made (no
/// data folder, not writable, a single DICOM file), the study opens alone with a notice.
/// Other sources are returned as they are.
fn with_scratch_workspace(source: Source, send: &mut dyn FnMut(LoadEvent)) -> Source {
    let Source::Path(path) = &source else {
        return source;
    };
    if path.join(MANIFEST_FILE).is_file() {
        return source;
    }
    let Some(data) = data_dir() else {
        send(LoadEvent::Notice(
            "corrections are not recorded: no data folder (set KEYSLICE_DATA_DIR)".into(),
        ));
        return source;
    };
    match scratch_workspace(&data, path) {
        Ok(root) => Source::Workspace(root),
        Err((message, _)) => {
            tracing::warn!(%message, "no scratch workspace");
            // A path that does not load says so itself; only a readable study needs the note.
            if path.exists() {
                send(LoadEvent::Notice(format!(
                    "corrections are not recorded for this study: {message}"
                )));
            }
            source
        }
    }
}

/// Turns a workspace source (the demo, a workspace folder, or a path holding
/// `workspace.json`) into its first case, sending progress and the worklist to `send`; other
/// sources are returned as they are.
fn resolve(source: Source, send: &mut dyn FnMut(LoadEvent)) -> Result<Source, (String, String)> {
    let root = match source {
        Source::DemoWorkspace => {
            let folder = demo_dir().ok_or_else(|| {
                (
                    "no data folder for the demo workspace (HOME is not set)".to_string(),
                    "set KEYSLICE_DATA_DIR to a writable folder".to_string(),
                )
            })?;
            prepare_demo(&folder, &mut |text, fraction| {
                send(LoadEvent::Progress(text.to_string(), fraction));
            })?;
            folder
        }
        Source::Workspace(root) => root,
        Source::WorkspaceAt { root, case_id } => {
            let failed = |error: WorkspaceError| (error.to_string(), error.hint().to_string());
            let workspace = Workspace::open(&root).map_err(failed)?;
            let predictions = workspace.predictions().map_err(failed)?;
            let worklist = workspace.worklist(&predictions).map_err(failed)?;
            send(LoadEvent::Workspace(root.clone(), worklist));
            return Ok(Source::WorkspaceCase { root, case_id });
        }
        Source::Path(path) if path.join(MANIFEST_FILE).is_file() => path,
        other => return Ok(other),
    };
    let failed = |error: WorkspaceError| (error.to_string(), error.hint().to_string());
    let workspace = Workspace::open(&root).map_err(failed)?;
    let predictions = workspace.predictions().map_err(failed)?;
    let worklist = workspace.worklist(&predictions).map_err(failed)?;
    let first = worklist.first().map(|entry| entry.case_id.clone());
    send(LoadEvent::Workspace(root.clone(), worklist));
    let case_id = first.ok_or_else(|| {
        (
            format!("the workspace {} has no cases", root.display()),
            "add cases with `keyslice workspace create DIR INPUT...`".to_string(),
        )
    })?;
    Ok(Source::WorkspaceCase { root, case_id })
}

/// Loads `source` and its masks in one go (what the worker does, without the channel).
pub fn load(source: &Source) -> Result<(LoadedStudy, Option<LoadedMasks>), (String, String)> {
    let source = resolve(source.clone(), &mut |_| {})?;
    let (study, mask_place) = load_volume(&source)?;
    let masks = mask_place.map(|place| load_case_masks(&place, &study.volume));
    Ok((study, masks))
}

/// Reads the CT; also returns where the case's masks are, when it has any.
pub fn load_volume(source: &Source) -> Result<(LoadedStudy, Option<MaskPlace>), (String, String)> {
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
        Source::DemoWorkspace | Source::Workspace(_) | Source::WorkspaceAt { .. } => {
            load_volume(&resolve(source.clone(), &mut |_| {})?)
        }
        Source::WorkspaceCase { root, case_id } => load_workspace_case(root, case_id),
        Source::StudyRead { dir, reader } => {
            super::study::next_item(dir, reader).map(|(_, study)| (study, None))
        }
        Source::Arriving(_) => Err((
            "the study is still arriving from the PACS".to_string(),
            "wait for the retrieve to end, or open the study again".to_string(),
        )),
        Source::Path(path) if path.join(MANIFEST_FILE).is_file() => {
            load_volume(&resolve(source.clone(), &mut |_| {})?)
        }
        Source::Path(path) => load_path(path, &LoadOptions::default()),
    }
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
/// window: the choice arrives as the job's message, `None` when cancelled or when no
/// dialog service is available (the path field in the File menu works without one).
#[must_use]
pub fn pick_in_background(
    pick: Pick,
    start_in: Option<PathBuf>,
    ctx: &egui::Context,
) -> Job<Option<PathBuf>> {
    let (sender, receiver) = channel();
    let context = ctx.clone();
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
        context.request_repaint();
    };
    // macOS wants dialogs on the main thread; elsewhere a worker keeps the window drawing.
    if cfg!(target_os = "macos") {
        show();
    } else {
        std::thread::spawn(show);
    }
    Job::from_receiver(receiver)
}
