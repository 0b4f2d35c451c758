//! A study shown while it arrives from a PACS: whoever retrieves it (the command line) fills
//! a series folder with whole files; the loading worker reads what is there, at most every
//! [`PREVIEW_EVERY`], and sends it as a preview, the key instance alone first when a stored
//! result names it. When the retrieve has ended, the study opens as the source it handed
//! over (a case of the PACS workspace, with its review and the stored result).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use keyslice_io::dicom::{DicomOptions, load_dicom};

use super::loaded::LoadedStudy;

/// The shortest time between two previews: reading the files that arrived costs about a
/// third of a second per 300 slices on two cores, so the screen keeps up without the
/// reading taking the CPU the transfer needs.
pub const PREVIEW_EVERY: Duration = Duration::from_millis(300);

/// How often the folder is looked at.
const LOOK_EVERY: Duration = Duration::from_millis(10);

/// A study arriving into a folder, and what to open once it has (`T`, a source); cloned
/// handles share it.
pub struct Arrival<T>(Arc<ArrivalState<T>>);

impl<T> Clone for Arrival<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

struct ArrivalState<T> {
    folder: PathBuf,
    total: Option<usize>,
    key_file: Option<PathBuf>,
    title: String,
    outcome: Mutex<Option<Result<T, (String, String)>>>,
}

impl<T> Arrival<T> {
    /// A study whose series arrives into `folder` (`total` instances when known); the file of
    /// the key instance, when a stored result names one, is shown alone first.
    #[must_use]
    pub fn new(
        folder: PathBuf,
        total: Option<usize>,
        key_file: Option<PathBuf>,
        title: String,
    ) -> Self {
        Self(Arc::new(ArrivalState {
            folder,
            total,
            key_file,
            title,
            outcome: Mutex::new(None),
        }))
    }

    /// The retrieve has ended: open `outcome` (or show its failure: what and what to do).
    pub fn finish(&self, outcome: Result<T, (String, String)>) {
        *self
            .0
            .outcome
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(outcome);
    }

    /// What the title bar shows.
    #[must_use]
    pub fn title(&self) -> &str {
        &self.0.title
    }

    fn take_outcome(&self) -> Option<Result<T, (String, String)>> {
        self.0
            .outcome
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

impl<T> std::fmt::Debug for Arrival<T> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Arrival")
            .field("folder", &self.0.folder)
            .field("total", &self.0.total)
            .finish_non_exhaustive()
    }
}

impl<T> PartialEq for Arrival<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl<T> Eq for Arrival<T> {}

/// A preview: the study as far as it has arrived.
pub struct Preview {
    /// What has arrived, read as a study.
    pub study: LoadedStudy,
    /// Files in the folder.
    pub arrived: usize,
    /// Instances in the series, when known.
    pub total: Option<usize>,
    /// When the first file came (its modification time).
    pub first_arrival: Option<SystemTime>,
}

/// Sends previews until the retrieve ends; then the source to open, or its failure; `None`
/// when the window no longer wants this study.
pub(super) fn watch<T>(
    arrival: &Arrival<T>,
    send: &mut dyn FnMut(Preview),
    cancelled: &dyn Fn() -> bool,
) -> Option<Result<T, (String, String)>> {
    let state = &arrival.0;
    let mut shown = 0;
    let mut last: Option<Instant> = None;
    loop {
        if cancelled() {
            return None;
        }
        // Taken before the folder is read: a study that ended meanwhile is read whole below.
        let ended = arrival.take_outcome();
        let files = dicom_files(&state.folder);
        let complete = state.total.is_some_and(|total| files.len() >= total);
        let due = last.is_none_or(|at| at.elapsed() >= PREVIEW_EVERY);
        if ended.is_none() && !complete && files.len() > shown && due {
            let key_alone = state
                .key_file
                .as_ref()
                .filter(|key| shown == 0 && files.contains(key));
            let read = key_alone.map_or(state.folder.as_path(), PathBuf::as_path);
            let started = Instant::now();
            match load_dicom(read, &DicomOptions::default()) {
                Ok(study) => {
                    tracing::debug!(
                        files = files.len(),
                        key_alone = key_alone.is_some(),
                        elapsed_ms = started.elapsed().as_millis(),
                        "preview read"
                    );
                    shown = if key_alone.is_some() { 1 } else { files.len() };
                    send(Preview {
                        study: LoadedStudy {
                            volume: Arc::new(study.volume),
                            title: state.title.clone(),
                            warnings: Vec::new(),
                            prediction: None,
                        },
                        arrived: files.len(),
                        total: state.total,
                        first_arrival: first_arrival(&files),
                    });
                    last = Some(Instant::now());
                }
                // A study whose first files do not yet make an image: wait for more.
                Err(error) => tracing::debug!(%error, "no preview yet"),
            }
        }
        if let Some(outcome) = ended {
            return Some(outcome);
        }
        std::thread::sleep(LOOK_EVERY);
    }
}

/// The `.dcm` files of `folder`.
fn dicom_files(folder: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(folder)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|extension| extension == "dcm"))
                .collect()
        })
        .unwrap_or_default()
}

/// The earliest modification time among `files`.
fn first_arrival(files: &[PathBuf]) -> Option<SystemTime> {
    files
        .iter()
        .filter_map(|file| {
            file.metadata()
                .and_then(|metadata| metadata.modified())
                .ok()
        })
        .min()
}
