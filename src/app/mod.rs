//! The eframe application: opens a window at once, loads the study on a background thread
//! with a progress indicator, uploads it to the GPU, and runs the viewer, applying the
//! commands its panels return. Studies open from the command line, the File menu (native
//! dialog, typed path, recent studies) or by dropping a file or folder on the window. Errors
//! are shown in the window with a hint; nothing panics, and the window stays usable.
//!
//! Wires `io`, `render` and `ui` together; holds runtime state, with the saved settings
//! (recent studies, overlay opacity) in [`settings`].

pub mod open;
pub mod settings;
pub mod workspace;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

pub use open::Source;
use open::{LoadEvent, LoadedMasks, Pick, load_in_background, pick_in_background};
use settings::{Settings, settings_path};

use crate::export::{ExportError, ExportFormat, ExportOptions, export_workspace};
use crate::infer::backend::Backend;
use crate::infer::{KeySliceImage, Prediction, PredictionKeySlice};
use crate::render::view::Plane;
use crate::review::reviewed::KEY_SLICE_FIELD;
use crate::review::workspace::DATABASE_FILE;
use crate::review::workspace::{WorklistEntry, Workspace};
use crate::review::{CaseReview, ReviewStatus, ReviewStore, model_findings};
use crate::scoring::{AttributeCheck, SizeTolerance, attribute_checks};
use crate::ui::analysis::{AnalysisCommand, AnalysisState, analysis_ui};
use crate::ui::editor::{EditCommand, FindingsEditor, ruler_size};
use crate::ui::report::{ReportCommand, evidence_ui, report_ui, thumbnail_image};
use crate::ui::viewport::{Viewer, ViewerCommand, ViewerGpu};
use crate::ui::worklist::{WorklistCommand, worklist_ui};

/// Who is reviewing: `$KEYSLICE_REVIEWER`, else the login name, else "reviewer".
fn reviewer_name() -> String {
    ["KEYSLICE_REVIEWER", "USER", "USERNAME"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|value| !value.is_empty()))
        .unwrap_or_else(|| "reviewer".to_string())
}
use crate::volume::Volume;

/// The application state.
pub struct KeysliceApp {
    title: String,
    /// The source being loaded, its events, and whether its study has arrived (masks may
    /// still follow).
    loading: Option<(Source, Receiver<LoadEvent>, bool)>,
    started: Instant,
    volume: Option<Arc<Volume>>,
    viewer: Option<Viewer>,
    notices: Vec<String>,
    error: Option<(String, String)>,
    render_state: Option<egui_wgpu::RenderState>,
    first_slice_logged: bool,
    settings: Settings,
    settings_path: Option<PathBuf>,
    settings_dirty: Option<Instant>,
    /// The open dialog's answer channel and when it was shown.
    dialog: Option<(Receiver<Option<PathBuf>>, Instant)>,
    typed_path: String,
    analysis: AnalysisState,
    /// The running analysis: its answer channel and when it started.
    analysis_job: Option<(Receiver<AnalysisResult>, Instant)>,
    /// The open workspace's folder and worklist.
    workspace: Option<(PathBuf, Vec<WorklistEntry>)>,
    /// The workspace case on screen.
    open_case: Option<String>,
    /// What preparing the demo workspace is doing, and the fraction done.
    progress: Option<(String, f32)>,
    /// The open workspace case under review (its corrections, undo/redo).
    review: Option<CaseReview>,
    /// The analysis shown before a re-run, restored when the re-run is cancelled.
    previous_analysis: Option<AnalysisState>,
    /// The key slice thumbnail of the analysis on screen: for which slice, its texture and
    /// the pixel step it was made with.
    evidence: Option<(u32, egui::TextureHandle, usize)>,
    /// Whether the keyboard help (`?`) is open.
    help_open: bool,
    /// A running export: its answer (the line to show).
    export_job: Option<Receiver<String>>,
    /// What live analysis runs (`keyslice view --backend …`; the embedded model by default).
    backend: Option<Arc<Backend>>,
}

/// A finished analysis: the prediction, or what failed and what to do.
type AnalysisResult = Result<Prediction, (String, String)>;

impl KeysliceApp {
    /// Starts loading `source` in the background; the window shows progress meanwhile.
    #[must_use]
    pub fn new(cc: &eframe::CreationContext<'_>, source: Source, backend: Option<Backend>) -> Self {
        let settings_path = settings_path();
        let mut notices = Vec::new();
        let settings = match settings_path.as_deref().map(Settings::load) {
            Some(Ok(settings)) => settings,
            Some(Err(error)) => {
                tracing::warn!(%error, "settings not read");
                notices.push(format!("settings not read: {error}"));
                Settings::default()
            }
            None => Settings::default(),
        };
        let mut app = Self {
            title: String::new(),
            loading: None,
            started: Instant::now(),
            volume: None,
            viewer: None,
            notices: Vec::new(),
            error: None,
            render_state: cc.wgpu_render_state.clone(),
            first_slice_logged: false,
            settings,
            settings_path,
            settings_dirty: None,
            dialog: None,
            typed_path: String::new(),
            analysis: AnalysisState::Idle,
            analysis_job: None,
            workspace: None,
            open_case: None,
            progress: None,
            review: None,
            previous_analysis: None,
            evidence: None,
            help_open: false,
            export_job: None,
            backend: backend.map(Arc::new),
        };
        app.open(&cc.egui_ctx, source);
        // After `open`, which clears the previous study's notices.
        app.notices.extend(notices);
        app
    }

    /// Starts loading `source`; the study on screen stays until the new one has arrived.
    fn open(&mut self, ctx: &egui::Context, source: Source) {
        let context = ctx.clone();
        self.title = match &source {
            Source::Path(path) => path.display().to_string(),
            Source::Demo => "demo".to_string(),
            Source::DemoWorkspace => "demo workspace".to_string(),
            Source::Workspace(root) => root.display().to_string(),
            Source::WorkspaceCase { case_id, .. } => case_id.clone(),
        };
        if let Source::WorkspaceCase { case_id, .. } = &source {
            self.open_case = Some(case_id.clone());
        } else {
            // The worklist arrives with the workspace, if the source is one.
            self.open_case = None;
            self.workspace = None;
        }
        self.started = Instant::now();
        self.error = None;
        self.progress = None;
        self.notices.clear();
        let receiver = load_in_background(source.clone(), move || context.request_repaint());
        self.loading = Some((source, receiver, false));
    }

    fn poll_loading(&mut self) {
        loop {
            let Some((source, receiver, study_arrived)) = &mut self.loading else {
                return;
            };
            match receiver.try_recv() {
                Ok(LoadEvent::Progress(text, fraction)) => self.progress = Some((text, fraction)),
                Ok(LoadEvent::Workspace(root, worklist)) => {
                    self.open_case = worklist.first().map(|entry| entry.case_id.clone());
                    self.workspace = Some((root, worklist));
                }
                Ok(LoadEvent::Study(study)) => {
                    self.progress = None;
                    *study_arrived = true;
                    if let Source::Path(path) = source {
                        let path = path.clone();
                        self.settings.remember(&path);
                        self.save_settings();
                    }
                    self.show_study(study);
                }
                Ok(LoadEvent::Masks(masks)) => self.show_masks(*masks),
                Ok(LoadEvent::Notice(notice)) => self.notices.push(notice),
                Ok(LoadEvent::Failed(message, hint)) => {
                    self.loading = None;
                    // The study that was open (if any) is dropped so the error is not
                    // mistaken for a message about it.
                    self.viewer = None;
                    self.volume = None;
                    self.error = Some((message, hint));
                }
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => {
                    if !*study_arrived {
                        self.error = Some((
                            "loading stopped unexpectedly".into(),
                            "try opening the study again".into(),
                        ));
                    }
                    self.loading = None;
                }
            }
        }
    }

    /// Uploads a newly loaded CT and starts a viewer on it.
    fn show_study(&mut self, study: open::LoadedStudy) {
        self.title = study.title;
        self.notices.extend(study.warnings);
        let volume = study.volume;
        if let Some(render_state) = &self.render_state {
            let notices = ViewerGpu::install(render_state, &volume, None);
            self.notices.extend(notices);
            let mut viewer = Viewer::new(&volume);
            viewer.mask_opacity = self.settings.mask_opacity;
            self.viewer = Some(viewer);
            self.volume = Some(volume);
            self.first_slice_logged = false;
            self.analysis = AnalysisState::Idle;
            self.analysis_job = None;
            self.previous_analysis = None;
            self.evidence = None;
            self.open_review();
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

    /// Adds a case's masks to the study on screen.
    fn show_masks(&mut self, masks: LoadedMasks) {
        self.notices.extend(masks.warnings);
        let (Some(render_state), Some(volume), Some(viewer)) =
            (&self.render_state, &self.volume, &mut self.viewer)
        else {
            return;
        };
        ViewerGpu::set_labels(render_state, volume.dims(), masks.labels.as_ref());
        let opacity = viewer.mask_opacity;
        // The model's key slice, once shown, stays the one marked; the masks' reference key
        // slice is then only in the lesion extents.
        let model_key = viewer
            .key_slice
            .zip(viewer.key_slice_source.clone())
            .filter(|_| matches!(self.analysis, AnalysisState::Done(_)));
        *viewer = std::mem::replace(viewer, Viewer::new(volume))
            .with_structures(&masks.structures)
            .with_lesions(masks.lesion_marks, masks.key_slice);
        if let Some((slice, source)) = model_key {
            viewer.key_slice = Some(slice);
            viewer.key_slice_source = Some(source);
        }
        viewer.mask_opacity = opacity;
        tracing::info!(
            elapsed_ms = self.started.elapsed().as_millis(),
            structures = masks.structures.len(),
            "masks shown"
        );
        self.sync_key_slice();
    }

    fn poll_dialog(&mut self, ctx: &egui::Context) {
        let Some((receiver, shown)) = &self.dialog else {
            return;
        };
        match receiver.try_recv() {
            Ok(choice) => {
                // Nobody cancels a dialog within half a second: no dialog service answered.
                let too_quick = shown.elapsed() < Duration::from_millis(500);
                self.dialog = None;
                match choice {
                    Some(path) => self.open(ctx, Source::Path(path)),
                    None if too_quick => self.notices.push(
                        "no file dialog is available here (xdg-desktop-portal is not running): \
                         type the path under File > Open a path, or drop the file on the window"
                            .into(),
                    ),
                    None => {}
                }
            }
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Disconnected) => self.dialog = None,
        }
    }

    /// Writes the settings now; a failure is shown, never fatal.
    fn save_settings(&mut self) {
        self.settings_dirty = None;
        let Some(path) = &self.settings_path else {
            return;
        };
        if let Err(error) = self.settings.save(path) {
            tracing::warn!(%error, "settings not saved");
            self.notices.push(format!("settings not saved: {error}"));
        }
    }

    /// Starts the embedded model on the open study, off the UI thread.
    fn start_analysis(&mut self, ctx: &egui::Context) {
        let Some(volume) = self.volume.clone() else {
            return;
        };
        // A workspace case keeps its id so the prediction is saved with it.
        let case_id = self.open_case.clone().unwrap_or_else(|| self.title.clone());
        let (sender, receiver) = std::sync::mpsc::channel();
        let context = ctx.clone();
        let backend = self.backend.clone();
        std::thread::spawn(move || {
            let result = match backend {
                Some(backend) => backend.run(&case_id, &volume, true),
                None => Backend::embedded().and_then(|b| b.run(&case_id, &volume, true)),
            }
            .map_err(|error| (error.to_string(), error.hint().to_string()));
            // The study may have been closed meanwhile; then nobody needs the result.
            let _ = sender.send(result);
            context.request_repaint();
        });
        self.analysis_job = Some((receiver, Instant::now()));
        self.previous_analysis = Some(std::mem::replace(
            &mut self.analysis,
            AnalysisState::Running(0.0),
        ));
    }

    fn poll_analysis(&mut self, ctx: &egui::Context) {
        let Some((receiver, started)) = &self.analysis_job else {
            return;
        };
        match receiver.try_recv() {
            Ok(Ok(prediction)) => {
                self.analysis_job = None;
                self.previous_analysis = None;
                self.save_prediction(&prediction);
                self.show_prediction(prediction, false);
            }
            Ok(Err((message, hint))) => {
                self.analysis_job = None;
                self.previous_analysis = None;
                self.analysis = AnalysisState::Failed(message, hint);
            }
            Err(TryRecvError::Empty) => {
                self.analysis = AnalysisState::Running(started.elapsed().as_secs_f32());
                ctx.request_repaint_after(Duration::from_millis(100));
            }
            Err(TryRecvError::Disconnected) => {
                self.analysis_job = None;
                self.analysis = AnalysisState::Failed(
                    "the analysis stopped unexpectedly".into(),
                    "try again; with KEYSLICE_LOG=debug the log says more".into(),
                );
            }
        }
    }

    /// Shows `prediction` in the analysis panel and marks its key slice; `jump` also goes
    /// there (a saved analysis opened with its case).
    fn show_prediction(&mut self, prediction: Prediction, jump: bool) {
        if let (Some(viewer), Some(key)) = (&mut self.viewer, &prediction.key_slice) {
            viewer.key_slice = Some(f64::from(key.index));
            viewer.key_slice_source = Some(format!(
                "named by {} (its evidence for the report)",
                prediction.diagnoser.id
            ));
            if jump && let Some(volume) = &self.volume {
                viewer.apply(ViewerCommand::JumpToKeySlice, volume);
            }
        }
        if jump {
            tracing::info!(
                key_slice = prediction.key_slice.as_ref().map(|key| key.index),
                "saved analysis shown"
            );
        }
        if let Some(review) = &mut self.review {
            review.set_base(Some(model_findings(&prediction)));
        }
        self.analysis = AnalysisState::Done(Box::new(prediction));
        self.sync_key_slice();
    }

    /// Stops waiting for the running analysis: its result is discarded when it comes, and
    /// the analysis shown before (if any) is back.
    fn cancel_analysis(&mut self) {
        if self.analysis_job.take().is_some() {
            self.analysis = self.previous_analysis.take().unwrap_or_default();
            self.notices
                .push("analysis cancelled; the case is as it was".into());
            tracing::info!("analysis cancelled");
        }
    }

    /// Opens the review of the workspace case on screen (none outside a workspace).
    fn open_review(&mut self) {
        self.review = None;
        let (Some((root, _)), Some(case_id)) = (&self.workspace, &self.open_case) else {
            return;
        };
        match CaseReview::open(&root.join(DATABASE_FILE), case_id, &reviewer_name(), None) {
            Ok(review) => self.review = Some(review),
            Err(error) => self.notices.push(format!(
                "corrections cannot be recorded: {error} ({})",
                error.hint()
            )),
        }
    }

    /// Marks the key slice the review holds: the reviewer's when they set one, else the
    /// model's.
    fn sync_key_slice(&mut self) {
        let Some(viewer) = &mut self.viewer else {
            return;
        };
        let reviewed = self
            .review
            .as_ref()
            .filter(|review| review.case().changed.iter().any(|f| f == KEY_SLICE_FIELD));
        if let Some(review) = reviewed {
            viewer.key_slice = review
                .case()
                .findings
                .key_slice
                .as_ref()
                .map(|key| f64::from(key.index));
            viewer.key_slice_source = viewer
                .key_slice
                .map(|_| "set in review (S), replacing the model's".to_string());
        } else if let AnalysisState::Done(prediction) = &self.analysis
            && let Some(key) = &prediction.key_slice
        {
            viewer.key_slice = Some(f64::from(key.index));
            viewer.key_slice_source = Some(format!(
                "named by {} (its evidence for the report)",
                prediction.diagnoser.id
            ));
        }
    }

    /// Records the findings editor's commands (each committed before the next frame shows
    /// it) and keeps the worklist and key slice marker in step.
    fn apply_edits(&mut self, commands: Vec<EditCommand>) {
        let Some(review) = &mut self.review else {
            return;
        };
        for command in commands {
            let result = match command {
                EditCommand::Set { field, value } => review
                    .set(&field, value)
                    .map(|saved| saved.then_some(field)),
                EditCommand::Undo => review.undo(),
                EditCommand::Redo => review.redo(),
            };
            match result {
                Ok(Some(field)) => {
                    tracing::info!(case = review.case_id(), field, "correction saved");
                }
                Ok(None) => {}
                Err(error) => self
                    .notices
                    .push(format!("not saved: {error} ({})", error.hint())),
            }
        }
        self.sync_worklist_status();
        self.sync_key_slice();
    }

    /// The worklist row of the case under review shows its stored status.
    fn sync_worklist_status(&mut self) {
        let (Some(review), Some((_, worklist))) = (&self.review, &mut self.workspace) else {
            return;
        };
        if let Some(entry) = worklist.iter_mut().find(|e| e.case_id == review.case_id()) {
            entry.status = review.status();
            if review.status() != ReviewStatus::New {
                entry.reviewer = Some(reviewer_name());
            }
        }
    }

    /// Builds the key slice thumbnail of the analysis on screen, once per slice.
    fn ensure_evidence(&mut self, ctx: &egui::Context) {
        let (AnalysisState::Done(prediction), Some(volume)) = (&self.analysis, &self.volume) else {
            self.evidence = None;
            return;
        };
        let Some(key) = &prediction.key_slice else {
            self.evidence = None;
            return;
        };
        if self
            .evidence
            .as_ref()
            .is_some_and(|(index, ..)| *index == key.index)
        {
            return;
        }
        self.evidence = KeySliceImage::extract(volume, key.index, None).map(|slice| {
            let (image, stride) = thumbnail_image(&slice);
            let texture =
                ctx.load_texture("keyslice-evidence", image, egui::TextureOptions::LINEAR);
            (key.index, texture, stride)
        });
    }

    /// In a workspace, appends a fresh analysis of the open case to its predictions and
    /// updates the worklist; elsewhere nothing is written.
    fn save_prediction(&mut self, prediction: &Prediction) {
        let (Some((root, worklist)), Some(case_id)) = (&mut self.workspace, &self.open_case) else {
            return;
        };
        if prediction.case_id != *case_id {
            return;
        }
        let saved = Workspace::open(root).and_then(|w| w.append_prediction(prediction));
        match saved {
            Ok(()) => {
                if let Some(entry) = worklist.iter_mut().find(|e| e.case_id == *case_id) {
                    entry.consistency = prediction.consistency.as_ref().map(|c| c.score);
                }
            }
            Err(error) => self
                .notices
                .push(format!("analysis shown but not saved: {error}")),
        }
    }

    /// Opens a case, moves along the worklist, or records the open case's status in the
    /// workspace's review database (committed before the list shows it).
    fn apply_worklist(&mut self, ctx: &egui::Context, command: WorklistCommand) {
        // The case under review records its status in its own log, so Ctrl+Z undoes it.
        if let WorklistCommand::SetStatus(status) = command
            && let Some(review) = &mut self.review
        {
            if let Err(error) = review.set_status(status) {
                self.notices
                    .push(format!("status not saved: {error} ({})", error.hint()));
            }
            self.sync_worklist_status();
            return;
        }
        let Some((root, worklist)) = &mut self.workspace else {
            return;
        };
        let position = self
            .open_case
            .as_ref()
            .and_then(|open| worklist.iter().position(|e| e.case_id == *open));
        let target = match command {
            WorklistCommand::Open(case_id) => Some(case_id),
            WorklistCommand::SetStatus(status) => {
                let (Some(case_id), Some(position)) = (self.open_case.clone(), position) else {
                    return;
                };
                let reviewer = reviewer_name();
                let saved = ReviewStore::open(&root.join(DATABASE_FILE))
                    .and_then(|mut store| store.set_status(&case_id, status, &reviewer));
                match saved {
                    Ok(_) => {
                        worklist[position].status = status;
                        worklist[position].reviewer = Some(reviewer);
                    }
                    Err(error) => {
                        self.notices
                            .push(format!("status not saved: {error} ({})", error.hint()));
                    }
                }
                None
            }
        };
        if let Some(case_id) = target {
            let root = root.clone();
            self.open(ctx, Source::WorkspaceCase { root, case_id });
        }
    }

    /// The central area: the error, the loading progress, or the viewer.
    fn central_ui(&mut self, ui: &mut egui::Ui, commands: &mut Vec<ViewerCommand>) {
        if let Some((message, hint)) = &self.error {
            ui.colored_label(
                egui::Color32::from_rgb(230, 90, 80),
                format!("error: {message}"),
            );
            ui.label(format!("hint: {hint}"));
            ui.label("Open another study from the File menu, or drop one on the window.");
        } else if let (Some(viewer), Some(volume)) = (&mut self.viewer, &self.volume) {
            commands.extend(viewer.viewer_ui(ui, volume));
            if !self.first_slice_logged {
                // The frame that carries the first slices; measured by
                // benches/viewer_first_slice.sh (KEYSLICE_LOG=info).
                self.first_slice_logged = true;
                tracing::info!(
                    elapsed_ms = self.started.elapsed().as_millis(),
                    "first slices drawn"
                );
            }
        } else if self.loading.is_some() {
            if let Some((text, fraction)) = &self.progress {
                ui.heading("Preparing the demo workspace (first run only)");
                ui.label(
                    "A few synthetic CT phantoms are generated into your data folder and \
                     analysed by the embedded keyslice-tiny model.",
                );
                ui.add(
                    egui::ProgressBar::new(*fraction)
                        .text(text.as_str())
                        .desired_width(480.0),
                );
            }
            ui.horizontal(|ui| {
                ui.spinner();
                ui.label(format!(
                    "Loading… {:.1} s",
                    self.started.elapsed().as_secs_f32()
                ));
            });
            ui.ctx().request_repaint_after(Duration::from_millis(100));
        }
    }

    /// Opens the first file or folder dropped on the window.
    fn dropped_files(&mut self, ctx: &egui::Context) {
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

    /// The File menu: dialog, typed path, recent studies, demo.
    fn file_menu_ui(&mut self, ui: &mut egui::Ui) {
        let start_in = self
            .settings
            .recent
            .first()
            .and_then(|path| path.parent())
            .map(std::path::Path::to_path_buf);
        let mut chosen = None;
        let mut export = None;
        ui.menu_button("File", |ui| {
            let waiting = self.dialog.is_some();
            for (pick, text) in [(Pick::File, "Open file…"), (Pick::Folder, "Open folder…")] {
                if ui.add_enabled(!waiting, egui::Button::new(text)).clicked() {
                    let context = ui.ctx().clone();
                    self.dialog = Some((
                        pick_in_background(pick, start_in.clone(), move || {
                            context.request_repaint();
                        }),
                        Instant::now(),
                    ));
                    ui.close();
                }
            }
            ui.separator();
            ui.label("Open a path:");
            let field = ui.add(
                egui::TextEdit::singleline(&mut self.typed_path)
                    .hint_text("/data/case/ct.nii.gz")
                    .desired_width(320.0),
            );
            if field.lost_focus() && ui.input(|input| input.key_pressed(egui::Key::Enter)) {
                let typed = self.typed_path.trim();
                if !typed.is_empty() {
                    chosen = Some(Source::Path(PathBuf::from(typed)));
                    ui.close();
                }
            }
            ui.separator();
            ui.menu_button("Open recent", |ui| {
                if self.settings.recent.is_empty() {
                    ui.label("Nothing opened yet.");
                }
                for path in &self.settings.recent {
                    let exists = path.exists();
                    let button =
                        ui.add_enabled(exists, egui::Button::new(path.display().to_string()));
                    if button.clicked() {
                        chosen = Some(Source::Path(path.clone()));
                        ui.close();
                    }
                    if !exists {
                        button.on_disabled_hover_text("no longer there");
                    }
                }
            });
            ui.separator();
            if ui.button("Open the demo workspace").clicked() {
                chosen = Some(Source::DemoWorkspace);
                ui.close();
            }
            if ui.button("Open the built-in demo volume").clicked() {
                chosen = Some(Source::Demo);
                ui.close();
            }
            ui.separator();
            let can_export = self.workspace.is_some() && self.export_job.is_none();
            ui.add_enabled_ui(can_export, |ui| {
                ui.menu_button("Export accepted cases", |ui| {
                    for (format, name) in [
                        (ExportFormat::Llamafactory, "llamafactory"),
                        (ExportFormat::Swift, "swift"),
                        (ExportFormat::Verl, "verl"),
                        (ExportFormat::Keyslices, "keyslices"),
                    ] {
                        if ui.button(name).clicked() {
                            export = Some((format, name));
                            ui.close();
                        }
                    }
                });
            });
        });
        if let Some(source) = chosen {
            self.open(ui.ctx(), source);
        }
        if let Some((format, name)) = export {
            self.start_export(ui.ctx(), format, name);
        }
    }

    /// Which model live analysis runs, in words.
    fn backend_name(&self) -> String {
        self.backend.as_ref().map_or_else(
            || "keyslice-tiny (synthetic-trained, not for clinical use)".to_string(),
            |backend| backend.describe(),
        )
    }

    /// The left panel: worklist, analysis, evidence and report.
    fn left_panel_ui(
        &self,
        ui: &mut egui::Ui,
    ) -> (
        Option<WorklistCommand>,
        Option<AnalysisCommand>,
        Option<ReportCommand>,
    ) {
        let mut worklist_command = None;
        let mut analysis_command = None;
        let mut report_command = None;
        let analysis = &self.analysis;
        let checks: Vec<AttributeCheck> = match analysis {
            AnalysisState::Done(prediction) => prediction
                .local_findings
                .as_ref()
                .map(|local| {
                    attribute_checks(&prediction.findings, local, SizeTolerance::default())
                })
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        egui::Panel::left("keyslice-left")
            .default_size(300.0)
            .show(ui, |ui| {
                egui::ScrollArea::vertical().show(ui, |ui| {
                    if let Some((root, worklist)) = &self.workspace {
                        worklist_command =
                            worklist_ui(ui, root, worklist, self.open_case.as_deref());
                        ui.separator();
                    }
                    analysis_command = analysis_ui(ui, analysis, &self.backend_name());
                    if let AnalysisState::Done(prediction) = analysis {
                        let thumbnail = self
                            .evidence
                            .as_ref()
                            .map(|(_, texture, stride)| (texture, *stride));
                        report_command = evidence_ui(ui, prediction, &checks, thumbnail);
                        ui.separator();
                        report_command = report_ui(ui, prediction, &checks).or(report_command);
                    }
                });
            });
        (worklist_command, analysis_command, report_command)
    }

    /// The right panel: the findings editor (in a workspace), measurements, key slice,
    /// structures.
    fn right_panel_ui(&self, ui: &mut egui::Ui) -> (Vec<ViewerCommand>, Vec<EditCommand>) {
        let (Some(viewer), Some(volume)) = (&self.viewer, &self.volume) else {
            return (Vec::new(), Vec::new());
        };
        let mut edit_commands = Vec::new();
        let commands = egui::Panel::right("keyslice-side")
            .default_size(280.0)
            .show(ui, |ui| {
                egui::ScrollArea::vertical()
                    .show(ui, |ui| {
                        if let Some(review) = &self.review {
                            let axial = viewer.view(Plane::Axial).slice.round().max(0.0);
                            let current = axial as u32;
                            let lengths: Vec<f64> = viewer
                                .measurements
                                .iter()
                                .filter(|m| m.plane == Plane::Axial)
                                .map(|m| m.length_mm)
                                .collect();
                            let editor = FindingsEditor {
                                case: review.case(),
                                model: review.base(),
                                history: review.history(),
                                current_slice: {
                                    let key = PredictionKeySlice::of(volume, current);
                                    crate::findings::KeySlice {
                                        index: key.index,
                                        z_mm: Some(key.z_mm),
                                        sop_instance_uid: key.sop_instance_uid,
                                        span: None,
                                    }
                                },
                                ruler: ruler_size(&lengths),
                            };
                            edit_commands = editor.ui(ui);
                        } else {
                            ui.heading("Findings");
                            ui.weak(
                                "Corrections are recorded in a workspace: \
                                 keyslice workspace create DIR THIS_STUDY, then open DIR.",
                            );
                        }
                        ui.separator();
                        viewer.side_panel_ui(ui)
                    })
                    .inner
            })
            .inner;
        (commands, edit_commands)
    }

    /// Exports the open workspace's accepted cases into `WORKSPACE/exports/FORMAT`, off the
    /// UI thread; the outcome is shown as a notice.
    fn start_export(&mut self, ctx: &egui::Context, format: ExportFormat, name: &str) {
        let Some((root, _)) = &self.workspace else {
            return;
        };
        let root = root.clone();
        let out = root.join("exports").join(name);
        let (sender, receiver) = std::sync::mpsc::channel();
        let context = ctx.clone();
        std::thread::spawn(move || {
            let options = ExportOptions {
                format,
                ..ExportOptions::default()
            };
            let line = match Workspace::open(&root)
                .map_err(ExportError::from)
                .and_then(|workspace| export_workspace(&workspace, &options, &out))
            {
                Ok(summary) => format!(
                    "exported {} case(s) ({} hard) to {}",
                    summary.train + summary.val,
                    summary.hard,
                    out.display()
                ),
                Err(error) => format!("export failed: {error} ({})", error.hint()),
            };
            let _ = sender.send(line);
            context.request_repaint();
        });
        self.export_job = Some(receiver);
        self.notices.push(format!("exporting {name}…"));
    }

    fn poll_export(&mut self) {
        let Some(receiver) = &self.export_job else {
            return;
        };
        match receiver.try_recv() {
            Ok(line) => {
                self.export_job = None;
                self.notices
                    .retain(|notice| !notice.starts_with("exporting "));
                tracing::info!(%line, "export finished");
                self.notices.push(line);
            }
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Disconnected) => {
                self.export_job = None;
                self.notices.push("the export stopped unexpectedly".into());
            }
        }
    }

    /// A veil over the window while files are dragged over it.
    fn drop_hint_ui(ctx: &egui::Context) {
        let hovering = ctx.input(|input| !input.raw.hovered_files.is_empty());
        if !hovering {
            return;
        }
        let painter = ctx.layer_painter(egui::LayerId::new(
            egui::Order::Foreground,
            egui::Id::unique("keyslice-drop"),
        ));
        let rect = ctx.content_rect();
        painter.rect_filled(rect, 0.0, egui::Color32::from_black_alpha(180));
        painter.text(
            rect.center(),
            egui::Align2::CENTER_CENTER,
            "Drop a NIfTI file, DICOM file or folder to open it",
            egui::FontId::proportional(22.0),
            egui::Color32::WHITE,
        );
    }
}

impl eframe::App for KeysliceApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        let ctx = ui.ctx().clone();
        self.poll_loading();
        self.poll_dialog(&ctx);
        self.poll_analysis(&ctx);
        self.poll_export();
        self.dropped_files(&ctx);
        if ctx.input_mut(|input| input.consume_key(egui::Modifiers::COMMAND, egui::Key::O))
            && self.dialog.is_none()
        {
            let context = ctx.clone();
            self.dialog = Some((
                pick_in_background(Pick::File, None, move || context.request_repaint()),
                Instant::now(),
            ));
        }
        egui::Panel::top("keyslice-top").show(ui, |ui| {
            // The menu holds a text field, so only a click outside (or a chosen entry) closes it.
            let config = egui::containers::menu::MenuConfig::new()
                .close_behavior(egui::PopupCloseBehavior::CloseOnClickOutside);
            egui::MenuBar::new().config(config).ui(ui, |ui| {
                self.file_menu_ui(ui);
                ui.strong("Keyslice");
                ui.label(&self.title);
                if let Some((_, _, study_arrived)) = &self.loading
                    && self.viewer.is_some()
                {
                    ui.spinner();
                    ui.label(if *study_arrived {
                        "loading masks…"
                    } else {
                        "opening…"
                    });
                }
                for notice in &self.notices {
                    ui.colored_label(egui::Color32::from_rgb(230, 180, 60), notice);
                }
            });
        });
        let mut commands = Vec::new();
        let mut analysis_command = None;
        let mut worklist_command = None;
        let mut report_command = None;
        let mut edit_commands = Vec::new();
        self.ensure_evidence(&ctx);
        if self.viewer.is_some() {
            (worklist_command, analysis_command, report_command) = self.left_panel_ui(ui);
            (commands, edit_commands) = self.right_panel_ui(ui);
            let typing = ctx.egui_wants_keyboard_input();
            if !typing && ctx.input(|input| input.key_pressed(egui::Key::A)) {
                analysis_command = Some(AnalysisCommand::Run);
            }
        }
        if let Some(command) = worklist_command {
            self.apply_worklist(&ctx, command);
        }
        if !edit_commands.is_empty() {
            self.apply_edits(edit_commands);
        }
        match analysis_command {
            Some(AnalysisCommand::Run) if self.analysis_job.is_none() => self.start_analysis(&ctx),
            Some(AnalysisCommand::Cancel) => self.cancel_analysis(),
            _ => {}
        }
        if report_command == Some(ReportCommand::JumpToKeySlice) {
            commands.push(ViewerCommand::JumpToKeySlice);
        }
        egui::CentralPanel::default().show(ui, |ui| self.central_ui(ui, &mut commands));
        if let (Some(viewer), Some(volume)) = (&mut self.viewer, &self.volume) {
            for command in commands {
                if let ViewerCommand::SetOpacity(opacity) = command {
                    self.settings.mask_opacity = opacity.clamp(0.0, 1.0);
                    self.settings_dirty.get_or_insert_with(Instant::now);
                }
                viewer.apply(command, volume);
            }
        }
        // Opacity drags change the setting every frame; write it once they settle.
        if let Some(since) = self.settings_dirty {
            if since.elapsed() > Duration::from_secs(1) {
                self.save_settings();
            } else {
                ctx.request_repaint_after(Duration::from_millis(300));
            }
        }
        crate::ui::help::help_ui(&ctx, &mut self.help_open);
        Self::drop_hint_ui(&ctx);
    }

    fn on_exit(&mut self) {
        if self.settings_dirty.is_some() {
            self.save_settings();
        }
    }
}

/// Opens the viewer window on `source` and runs until it is closed.
pub fn run(source: Source, backend: Option<Backend>) -> Result<(), eframe::Error> {
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("Keyslice")
            .with_inner_size([1280.0, 800.0]),
        renderer: eframe::Renderer::Wgpu,
        ..eframe::NativeOptions::default()
    };
    eframe::run_native(
        "Keyslice",
        options,
        Box::new(move |cc| Ok(Box::new(KeysliceApp::new(cc, source, backend)))),
    )
}
