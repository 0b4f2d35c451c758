//! Opening a study in the window: the loading job's events (progress, worklist, the CT, its
//! masks, a failure) applied as they arrive, and files dropped on the window.

use std::time::{Duration, Instant};

use super::arrival::Preview;
use super::job::{Job, Polled};
use super::open::{LoadEvent, LoadedMasks, LoadedStudy, load_in_background};
use super::{KeysliceApp, Shown, Source};
use crate::ui::viewport::{Viewer, ViewerCommand, ViewerGpu};

/// The study being opened and the timing of the one on screen.
pub(super) struct Loader {
    /// The source being loaded, if any.
    current: Option<Loading>,
    /// When the study on screen (or being loaded) was asked for.
    pub(super) started: Instant,
    /// What preparing the demo workspace is doing, and the fraction done.
    pub(super) progress: Option<(String, f32)>,
    /// Whether the first slices of the study on screen have been drawn (logged once).
    pub(super) first_slice_logged: bool,
    /// For a study arriving from a PACS: when its first file came.
    pub(super) first_arrival: Option<std::time::SystemTime>,
    /// The longest a study and its masks may take to read ([`LOAD_DEADLINE`]).
    pub(super) deadline: Duration,
}

/// The longest the window waits for a study (and its masks) to be read: a file on a share
/// that stopped answering, or anything else that never ends, is abandoned after this, said
/// as such, and the next case opens as usual. A study arriving from a PACS and the demo
/// workspace's first preparation have their own progress and no deadline.
pub const LOAD_DEADLINE: Duration = Duration::from_mins(1);

/// A source being loaded: its job, and whether its study has arrived (masks may follow).
struct Loading {
    source: Source,
    job: Job<LoadEvent>,
    study_arrived: bool,
}

impl Default for Loader {
    fn default() -> Self {
        Self {
            current: None,
            started: Instant::now(),
            progress: None,
            first_slice_logged: false,
            first_arrival: None,
            deadline: LOAD_DEADLINE,
        }
    }
}

impl Loader {
    /// Whether a source is being loaded.
    pub(super) fn is_loading(&self) -> bool {
        self.current.is_some()
    }

    /// While loading: whether the study has arrived (its masks are still coming).
    pub(super) fn study_arrived(&self) -> Option<bool> {
        self.current.as_ref().map(|loading| loading.study_arrived)
    }
}

impl KeysliceApp {
    /// Starts loading `source`. The study on screen goes at once, with its review and
    /// analysis: until the new one has arrived the window shows what is opening, never one
    /// case's images or findings under another case's name, and no edit can land anywhere.
    /// A load still running for an earlier request is dropped (and stops).
    pub(super) fn open(&mut self, ctx: &egui::Context, source: Source) {
        self.loader.current = None;
        self.study = None;
        self.cases.review = None;
        self.analysis.reset();
        self.title = match &source {
            Source::Path(path) => path.display().to_string(),
            Source::Demo => "demo".to_string(),
            Source::DemoWorkspace => "demo workspace".to_string(),
            Source::Workspace(root) => root.display().to_string(),
            Source::Arriving(arrival) => arrival.title().to_string(),
            Source::StudyRead { dir, reader } => {
                format!("study {} · {reader}", dir.display())
            }
            Source::WorkspaceCase { case_id, root } | Source::WorkspaceAt { case_id, root } => {
                format!("{case_id} — {}", root.display())
            }
        };
        if let Source::WorkspaceCase { case_id, .. } = &source {
            self.cases.open_case = Some(case_id.clone());
        } else if let Source::WorkspaceAt { case_id, .. } = &source {
            // The worklist arrives with the workspace; this case stays the one opened.
            self.cases.close_workspace();
            self.cases.open_case = Some(case_id.clone());
        } else {
            // The worklist arrives with the workspace, if the source is one.
            self.cases.close_workspace();
        }
        self.loader.started = Instant::now();
        self.loader.first_arrival = None;
        self.reading = None;
        self.error = None;
        self.loader.progress = None;
        self.notices.clear();
        let job = load_in_background(ctx, source.clone());
        self.loader.current = Some(Loading {
            source,
            job,
            study_arrived: false,
        });
    }

    /// Whether the study on screen is a preview of one still arriving from a PACS.
    pub(super) fn arriving(&self) -> bool {
        self.loader.first_arrival.is_some() && self.loader.is_loading()
    }

    /// Opens `source` as a click in the window does (see `open`).
    pub fn open_source(&mut self, ctx: &egui::Context, source: Source) {
        self.open(ctx, source);
    }

    /// Sets how long a load may take before it is abandoned (tests shorten it).
    pub fn set_load_deadline(&mut self, deadline: Duration) {
        self.loader.deadline = deadline;
    }

    /// Stops reading the study being opened (its worker is told to stop and is no longer
    /// waited for: a read that hangs keeps nothing else waiting); `why` is shown.
    pub(super) fn abandon_loading(&mut self, why: &str) {
        let Some(loading) = self.loader.current.take() else {
            return;
        };
        self.loader.progress = None;
        if loading.study_arrived {
            self.notices.push(format!("masks not shown: {why}"));
        } else {
            self.error = Some((
                format!("{} was not opened: {why}", self.title),
                "check that its files can be read (a network share that stopped answering, a pipe or a device under a file's name), or open another case".into(),
            ));
        }
    }

    /// Whether the load in progress has its own progress and no deadline: a study arriving
    /// from a PACS, the demo workspace's first preparation.
    fn load_has_no_deadline(&self) -> bool {
        self.loader.progress.is_some()
            || self.loader.first_arrival.is_some()
            || self.loader.current.as_ref().is_some_and(|loading| {
                matches!(loading.source, Source::Arriving(_) | Source::DemoWorkspace)
            })
    }

    /// Applies the loading job's events that have arrived.
    pub(super) fn poll_loading(&mut self) {
        if self.loader.current.is_some()
            && !self.load_has_no_deadline()
            && self.loader.started.elapsed() > self.loader.deadline
        {
            let seconds = self.loader.deadline.as_secs_f32();
            self.abandon_loading(&format!("reading did not end within {seconds:.0} s"));
            return;
        }
        loop {
            let Some(loading) = &mut self.loader.current else {
                return;
            };
            let event = match loading.job.poll() {
                Polled::Pending => return,
                Polled::Message(event) => event,
                Polled::Ended => {
                    if !loading.study_arrived {
                        self.error = Some((
                            "loading stopped unexpectedly".into(),
                            "try opening the study again".into(),
                        ));
                    }
                    self.loader.current = None;
                    return;
                }
            };
            match event {
                LoadEvent::Progress(text, fraction) => {
                    self.loader.progress = Some((text, fraction));
                }
                LoadEvent::Workspace(root, worklist) => self.cases.show_workspace(root, worklist),
                LoadEvent::Study(study) => {
                    loading.study_arrived = true;
                    let opened = match &loading.source {
                        Source::Path(path) => Some(path.clone()),
                        _ => None,
                    };
                    self.loader.progress = None;
                    if let Some(path) = opened {
                        self.settings.settings.remember(&path);
                        self.save_settings();
                    }
                    self.show_study(study);
                }
                LoadEvent::Preview(preview) => self.show_preview(*preview),
                LoadEvent::StudyItem(item) => {
                    self.reading = Some(super::study::Reading::new(*item));
                }
                LoadEvent::Masks(masks) => self.show_masks(*masks),
                LoadEvent::Notice(notice) => self.notices.push(notice),
                LoadEvent::Failed(message, hint) => {
                    self.loader.current = None;
                    // The study that was open (if any) is dropped so the error is not
                    // mistaken for a message about it.
                    self.study = None;
                    self.error = Some((message, hint));
                }
            }
        }
    }

    /// Uploads a newly loaded CT and starts a viewer on it.
    fn show_study(&mut self, study: LoadedStudy) {
        self.title = study.title;
        // A study that was previewed while it arrived had its first slices on screen then;
        // what was said about the previews is said again of the whole study if it holds.
        let previewed = self.loader.first_arrival.take().is_some();
        if previewed {
            self.notices.clear();
        } else {
            self.loader.first_slice_logged = false;
        }
        self.notices.extend(study.warnings);
        let volume = study.volume;
        if let Some(render_state) = &self.render_state {
            let notices = ViewerGpu::install(render_state, &volume, None);
            self.notices.extend(notices);
            let mut viewer = Viewer::new(&volume);
            viewer.mask_opacity = self.settings.settings.mask_opacity;
            self.study = Some(Shown { volume, viewer });
            self.analysis.reset();
            self.notices.extend(self.cases.open_review());
            if let Some(prediction) = study.prediction {
                self.show_prediction(*prediction, true);
            }
        } else {
            self.error = Some((
                "no GPU renderer is available for this window".into(),
                "install a Vulkan driver (mesa-vulkan-drivers gives a software one)".into(),
            ));
        }
    }

    /// Shows the part of a study that has arrived: the first time like a study (without its
    /// review, which opens with the whole study), then in place of the last preview with the
    /// crosshair at the same point of the patient and the same window.
    fn show_preview(&mut self, preview: Preview) {
        let Some(render_state) = &self.render_state else {
            return;
        };
        let volume = preview.study.volume;
        let mut viewer = Viewer::new(&volume);
        viewer.mask_opacity = self.settings.settings.mask_opacity;
        if let Some(Shown {
            volume: before,
            viewer: was,
        }) = &self.study
        {
            let point = before.patient_from_voxel().apply(was.crosshair);
            if let Some(voxel) = volume
                .patient_from_voxel()
                .inverse()
                .map(|inverse| inverse.apply(point))
            {
                let dims = volume.dims();
                let clamped =
                    [0, 1, 2].map(|axis| voxel[axis].clamp(0.0, (dims[axis].max(1) - 1) as f64));
                viewer.apply(ViewerCommand::SetCrosshair(clamped), &volume);
            }
            let ((width, level), (new_width, new_level)) = (was.window(), viewer.window());
            viewer.apply(
                ViewerCommand::AdjustWindow {
                    width_hu: width - new_width,
                    level_hu: level - new_level,
                },
                &volume,
            );
        } else {
            self.loader.first_slice_logged = false;
            self.loader.first_arrival = preview.first_arrival;
        }
        self.notices
            .extend(ViewerGpu::install(render_state, &volume, None));
        self.title = match preview.total {
            Some(total) => format!(
                "{} — arriving from the PACS: {} of {total} images",
                preview.study.title, preview.arrived
            ),
            None => format!(
                "{} — arriving from the PACS: {} images",
                preview.study.title, preview.arrived
            ),
        };
        self.study = Some(Shown { volume, viewer });
    }

    /// Adds a case's masks to the study on screen.
    fn show_masks(&mut self, masks: LoadedMasks) {
        self.notices.extend(masks.warnings);
        let (Some(render_state), Some(Shown { volume, viewer })) =
            (&self.render_state, &mut self.study)
        else {
            return;
        };
        ViewerGpu::set_labels(render_state, volume.dims(), masks.labels.as_ref());
        self.masks.set_base(volume, masks.labels.clone());
        let opacity = viewer.mask_opacity;
        // The model's key slice, once shown, stays the one marked; the masks' reference key
        // slice is then only in the lesion extents.
        let model_key = viewer
            .key_slice
            .zip(viewer.key_slice_source.clone())
            .filter(|_| self.analysis.prediction().is_some());
        *viewer = std::mem::replace(viewer, Viewer::new(volume))
            .with_structures(&masks.structures)
            .with_lesions(masks.lesion_marks, masks.key_slice);
        if let Some((slice, source)) = model_key {
            viewer.key_slice = Some(slice);
            viewer.key_slice_source = Some(source);
        }
        viewer.mask_opacity = opacity;
        tracing::info!(
            elapsed_ms = self.loader.started.elapsed().as_millis(),
            structures = masks.structures.len(),
            "masks shown"
        );
        self.sync_key_slice();
    }

    /// Opens the first file or folder dropped on the window.
    pub(super) fn dropped_files(&mut self, ctx: &egui::Context) {
        let dropped = ctx.input(|input| {
            input
                .raw
                .dropped_files
                .first()
                .map(|file| file.path().to_path_buf())
        });
        if let Some(path) = dropped {
            self.open(ctx, Source::Path(path));
        }
    }
}
