//! The eframe application: opens a window at once, loads the study on a background thread
//! with a progress indicator, uploads it to the GPU, and runs the viewer, applying the
//! commands its panels return. Studies open from the command line, the File menu (native
//! dialog, typed path, recent studies) or by dropping a file or folder on the window. Errors
//! are shown in the window with a hint; nothing panics, and the window stays usable.
//!
//! Each part of the window owns its state: the loader ([`loading`]), the File menu and its
//! dialog ([`file_menu`]), the analysis panel with its running job ([`analysis`]), the
//! workspace and the case under review ([`review`]), a running export ([`export`]) and the
//! saved settings ([`settings`]). Work off the UI thread is a [`job::Job`]. This module holds
//! them together and routes the commands the panels return.

mod analysis;
pub mod arrival;
mod export;
mod file_menu;
pub mod job;
pub mod loaded;
mod loading;
mod masks;
pub mod open;
pub mod pacs;
mod panels;
pub mod results;
mod review;
pub mod settings;
pub mod study;
pub mod workspace;

use std::sync::Arc;

pub use loading::LOAD_DEADLINE;
pub use open::Source;

use analysis::AnalysisPanel;
use export::ExportJob;
use file_menu::{FileCommand, FileMenu};
use loading::Loader;
use open::Pick;
use review::Cases;
use settings::{Settings, SettingsFile};

use crate::ui::analysis::AnalysisCommand;
use crate::ui::report::ReportCommand;
use crate::ui::viewport::{Viewer, ViewerCommand};
use keyslice_core::volume::Volume;
use keyslice_infer::backend::Backend;

/// Who is reviewing: the name set once in the settings (`keyslice view --reviewer NAME`),
/// else `$KEYSLICE_REVIEWER`, else the login name, else "reviewer".
fn reviewer_name(settings: &Settings) -> String {
    settings
        .reviewer
        .as_deref()
        .map(str::trim)
        // A name edited into the file with control characters is no name to sign with.
        .filter(|name| !name.is_empty() && !name.chars().any(char::is_control))
        .map(str::to_string)
        .or_else(|| {
            ["KEYSLICE_REVIEWER", "USER", "USERNAME"]
                .iter()
                .find_map(|name| std::env::var(name).ok().filter(|value| !value.is_empty()))
        })
        .unwrap_or_else(|| "reviewer".to_string())
}

/// The study on screen: the CT and the viewer's state on it.
struct Shown {
    volume: Arc<Volume>,
    viewer: Viewer,
}

/// The application state.
pub struct KeysliceApp {
    /// What the title bar shows.
    title: String,
    /// The study being opened, and when the one on screen was asked for.
    loader: Loader,
    /// The study on screen.
    study: Option<Shown>,
    /// Shown in the top bar until the next study opens.
    notices: Vec<String>,
    /// Why the last study could not be opened, and what to do.
    error: Option<(String, String)>,
    render_state: Option<egui_wgpu::RenderState>,
    settings: SettingsFile,
    file_menu: FileMenu,
    analysis: AnalysisPanel,
    /// The open workspace, its case on screen, and that case's review.
    cases: Cases,
    export: ExportJob,
    /// Whether the keyboard help (`?`) is open.
    help_open: bool,
    /// Where the planes were drawn in the last frame.
    viewer_rect: Option<egui::Rect>,
    /// Whether the last click was on the planes (they keep the keyboard until a click
    /// elsewhere).
    planes_clicked: bool,
    /// Whether single-letter keys may change the review this frame.
    review_keys: bool,
    /// The side panels' widths drawn this frame (left, right), kept in the settings.
    panel_widths: std::cell::Cell<[Option<f32>; 2]>,
    /// The last correction saved, in words, and when: shown over the images for a while.
    announcement: Option<(String, std::time::Instant)>,
    /// The read in progress, when a reader reads a reader study.
    reading: Option<study::Reading>,
    /// The case's lesion masks: the one being drawn, the overlay, their measures.
    masks: masks::LesionMasks,
}

impl KeysliceApp {
    /// Starts loading `source` in the background; the window shows progress meanwhile.
    #[must_use]
    pub fn new(cc: &eframe::CreationContext<'_>, source: Source, backend: Option<Backend>) -> Self {
        let (settings, notice) = SettingsFile::load();
        let mut app = Self::with_renderer(
            &cc.egui_ctx,
            cc.wgpu_render_state.clone(),
            source,
            backend,
            settings,
        );
        app.notices.extend(notice);
        app
    }

    /// The app drawing with `render_state` into `ctx`, with `settings` (what [`Self::new`]
    /// does with eframe's and the user's; a test harness gives its own).
    #[must_use]
    pub fn with_renderer(
        ctx: &egui::Context,
        render_state: Option<egui_wgpu::RenderState>,
        source: Source,
        backend: Option<Backend>,
        settings: SettingsFile,
    ) -> Self {
        let reviewer = reviewer_name(&settings.settings);
        let mut app = Self {
            title: String::new(),
            loader: Loader::default(),
            study: None,
            notices: Vec::new(),
            error: None,
            render_state,
            settings,
            file_menu: FileMenu::default(),
            analysis: AnalysisPanel::new(backend.map(Arc::new)),
            cases: Cases {
                reviewer,
                ..Cases::default()
            },
            export: ExportJob::default(),
            help_open: false,
            viewer_rect: None,
            planes_clicked: false,
            review_keys: false,
            panel_widths: std::cell::Cell::new([None, None]),
            announcement: None,
            reading: None,
            masks: masks::LesionMasks::default(),
        };
        app.open(ctx, source);
        app
    }

    /// The workspace case the window names (highlighted in the worklist, in the title).
    #[must_use]
    pub fn named_case(&self) -> Option<&str> {
        self.cases.open_case.as_deref()
    }

    /// The case whose images and review are on screen: `None` while a case is opening.
    #[must_use]
    pub fn case_on_screen(&self) -> Option<&str> {
        self.study.as_ref()?;
        self.cases
            .review
            .as_ref()
            .map(keyslice_review::CaseReview::case_id)
    }

    /// The size of the volume on screen and the crosshair's voxel in it.
    #[must_use]
    pub fn volume_on_screen(&self) -> Option<([usize; 3], [f64; 3])> {
        self.study
            .as_ref()
            .map(|shown| (shown.volume.dims(), shown.viewer.crosshair))
    }

    /// Whether anything of a study (its images, then its masks) is still being read.
    #[must_use]
    pub fn is_loading(&self) -> bool {
        self.loader.is_loading()
    }

    /// Whether a study is being opened.
    #[must_use]
    pub fn is_opening(&self) -> bool {
        self.loader.is_loading() && self.study.is_none()
    }

    /// The evidence box and extent drawn on the planes: what the record holds for the case
    /// under review, else the model's.
    #[must_use]
    pub fn evidence_on_screen(&self) -> Option<crate::ui::viewport::Evidence> {
        self.study.as_ref().and_then(|shown| shown.viewer.evidence)
    }

    /// What each lesion mask of the case on screen measures, by organ and lesion.
    #[must_use]
    pub fn lesion_mask_measures(
        &self,
    ) -> &std::collections::BTreeMap<
        (keyslice_core::findings::Organ, usize),
        keyslice_core::volume::lesion::Measures,
    > {
        &self.masks.measures
    }

    /// Where the planes were drawn in the last frame.
    #[must_use]
    pub fn viewer_rect(&self) -> Option<egui::Rect> {
        self.viewer_rect
    }

    /// The analysis on screen (saved with the case, or just made).
    #[must_use]
    pub fn analysis_on_screen(&self) -> Option<&keyslice_core::prediction::Prediction> {
        self.analysis.prediction()
    }

    /// The last correction saved, in words, while it is shown over the images.
    #[must_use]
    pub fn announcement(&self) -> Option<&str> {
        self.announcement.as_ref().map(|(text, _)| text.as_str())
    }

    /// The error shown instead of a study, with its hint, if any.
    #[must_use]
    pub fn error_shown(&self) -> Option<(&str, &str)> {
        self.error
            .as_ref()
            .map(|(error, hint)| (error.as_str(), hint.as_str()))
    }

    /// The notices in the top bar.
    #[must_use]
    pub fn notices(&self) -> &[String] {
        &self.notices
    }

    /// Writes the settings now; a failure is shown, never fatal.
    fn save_settings(&mut self) {
        self.notices.extend(self.settings.save());
    }

    /// Applies what the File menu asked for.
    fn apply_file_command(&mut self, ctx: &egui::Context, command: FileCommand) {
        match command {
            FileCommand::Open(source) => self.open(ctx, source),
            FileCommand::Export(format, name) => {
                if let Some(root) = self.cases.root() {
                    let notice = self.export.start(ctx, root, format, name);
                    self.notices.push(notice);
                }
            }
            FileCommand::Quit => ctx.send_viewport_cmd(egui::ViewportCommand::Close),
        }
    }

    /// Applies the viewer's commands; an opacity change is remembered in the settings.
    /// What the planes' commands change in the review: the evidence box drawn, a brush
    /// stroke (painted now, recorded when lifted).
    fn viewer_edits(&mut self, commands: &[ViewerCommand]) -> Vec<crate::ui::editor::EditCommand> {
        let mut edits = Vec::new();
        for command in commands {
            match *command {
                ViewerCommand::EditEvidence(evidence) => {
                    edits.extend(self.evidence_edits(evidence));
                }
                ViewerCommand::Paint {
                    plane,
                    voxel,
                    erase,
                } => self.paint_mask(plane, voxel, erase),
                ViewerCommand::PaintEnded => edits.extend(self.end_stroke()),
                _ => {}
            }
        }
        edits
    }

    fn apply_viewer_commands(&mut self, commands: Vec<ViewerCommand>) {
        let Some(study) = &mut self.study else {
            return;
        };
        for command in commands {
            if let ViewerCommand::SetOpacity(opacity) = command {
                self.settings.settings.mask_opacity = opacity.clamp(0.0, 1.0);
                self.settings.mark_changed();
            }
            study.viewer.apply(command, &study.volume);
        }
    }
}

impl eframe::App for KeysliceApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.frame_ui(ui);
    }

    fn on_exit(&mut self) {
        if self.settings.unsaved() {
            self.save_settings();
        }
    }
}

impl KeysliceApp {
    /// Keeps the window's size and position, and the side panels' widths, in the settings (written once they settle), so
    /// the next start opens where the reviewer left it.
    fn remember_window_geometry(&mut self, ctx: &egui::Context) {
        let (inner, outer) = ctx.input(|input| {
            let viewport = input.viewport();
            (viewport.inner_rect, viewport.outer_rect)
        });
        let Some(inner) = inner else {
            return;
        };
        let size = Some([inner.width().round(), inner.height().round()]);
        let position = outer.map(|outer| [outer.min.x.round(), outer.min.y.round()]);
        let settings = &mut self.settings.settings;
        // The side panels as the reviewer last sized them (unchanged where not drawn).
        let drawn = self.panel_widths.get();
        let mut widths = settings.panel_widths.unwrap_or([0.0; 2]);
        for (kept, width) in widths.iter_mut().zip(drawn) {
            if let Some(width) = width {
                *kept = width.round();
            }
        }
        let mut changed = false;
        if drawn.iter().any(Option::is_some) && settings.panel_widths != Some(widths) {
            settings.panel_widths = Some(widths);
            changed = true;
        }
        if settings.window_size != size
            || (position.is_some() && settings.window_position != position)
        {
            settings.window_size = size;
            if position.is_some() {
                settings.window_position = position;
            }
            changed = true;
        }
        if changed {
            self.settings.mark_changed();
        }
    }

    /// Whether single-letter keys may change the review this frame: the planes have the
    /// keyboard (the pointer is over them, or the last click was on them), no menu or popup
    /// is open and no text field takes the keys. A path typed into the File menu, or letters
    /// typed anywhere else, never move the key slice or flag the case.
    fn planes_have_keyboard(&mut self, ctx: &egui::Context) -> bool {
        let Some(planes) = self.viewer_rect else {
            return false;
        };
        let (pointer, pressed) =
            ctx.input(|input| (input.pointer.latest_pos(), input.pointer.any_pressed()));
        let over = pointer.is_some_and(|position| planes.contains(position));
        if pressed {
            self.planes_clicked = over;
        }
        (over || self.planes_clicked)
            && !ctx.egui_wants_keyboard_input()
            && !egui::Popup::is_any_open(ctx)
    }

    /// One frame of the whole window.
    pub fn frame_ui(&mut self, ui: &mut egui::Ui) {
        let ctx = ui.ctx().clone();
        self.review_keys = self.planes_have_keyboard(&ctx);
        self.poll_loading();
        if let Some(command) = self.file_menu.poll(&mut self.notices) {
            self.apply_file_command(&ctx, command);
        }
        self.poll_analysis(&ctx);
        self.export.poll(&mut self.notices);
        self.dropped_files(&ctx);
        if ctx.input_mut(|input| input.consume_key(egui::Modifiers::COMMAND, egui::Key::O)) {
            self.file_menu.show_dialog(&ctx, Pick::File, None);
        }
        if ctx.input_mut(|input| input.consume_key(egui::Modifiers::COMMAND, egui::Key::Q)) {
            self.apply_file_command(&ctx, FileCommand::Quit);
        }
        let mut file_command = None;
        egui::Panel::top("keyslice-top").show(ui, |ui| {
            // The menu holds a text field, so only a click outside (or a chosen entry) closes it.
            let config = egui::containers::menu::MenuConfig::new()
                .close_behavior(egui::PopupCloseBehavior::CloseOnClickOutside);
            egui::MenuBar::new().config(config).ui(ui, |ui| {
                let can_export = self.cases.root().is_some() && !self.export.running();
                file_command = self
                    .file_menu
                    .ui(ui, &self.settings.settings.recent, can_export);
                ui.strong("Keyslice");
                if let Some(study_arrived) = self.loader.study_arrived() {
                    ui.spinner();
                    ui.label(if study_arrived {
                        "loading masks…"
                    } else {
                        "opening…"
                    });
                }
                // Cut to the window, never wider: a bar wider than the window would push the
                // right panel off it.
                ui.add(egui::Label::new(&self.title).truncate());
            });
        });
        if !self.notices.is_empty() {
            // Below the bar, each wrapped to the window's width.
            egui::Panel::top("keyslice-notices").show(ui, |ui| {
                for notice in &self.notices {
                    ui.add(
                        egui::Label::new(
                            egui::RichText::new(notice)
                                .color(egui::Color32::from_rgb(230, 180, 60)),
                        )
                        .wrap(),
                    );
                }
            });
        }
        if let Some(command) = file_command.or_else(|| self.file_menu.prompt_ui(&ctx)) {
            self.apply_file_command(&ctx, command);
        }
        let (mut commands, mut edit_commands, worklist_command, analysis_command, report_command) =
            self.side_panels_ui(ui, &ctx);
        if let Some(command) = worklist_command {
            self.apply_worklist(&ctx, command);
        }
        match analysis_command {
            Some(AnalysisCommand::Run) if !self.analysis.running() => self.start_analysis(&ctx),
            Some(AnalysisCommand::Cancel) if self.analysis.cancel() => {
                self.notices
                    .push("analysis cancelled; the case is as it was".into());
                tracing::info!("analysis cancelled");
            }
            _ => {}
        }
        match report_command {
            Some(ReportCommand::JumpToKeySlice) => commands.push(ViewerCommand::JumpToKeySlice),
            Some(ReportCommand::ShowSlice(slice)) => commands.push(ViewerCommand::SetSlice {
                plane: crate::render::view::Plane::Axial,
                slice: f64::from(slice),
            }),
            None => {}
        }
        egui::CentralPanel::default().show(ui, |ui| self.central_ui(ui, &mut commands));
        edit_commands.extend(self.viewer_edits(&commands));
        self.apply_viewer_commands(commands);
        // After the viewer's commands, so that "key slice = current" reads the slice that
        // this frame's keys (K, ↑) moved to.
        if !edit_commands.is_empty() {
            self.apply_edits(edit_commands);
        }
        self.sync_masks();
        self.remember_window_geometry(&ctx);
        // Opacity drags change the setting every frame; it is written once they settle.
        if let Some(notice) = self.settings.save_when_settled(&ctx) {
            self.notices.push(notice);
        }
        crate::ui::help::help_ui(&ctx, &mut self.help_open);
        Self::drop_hint_ui(&ctx);
    }
}

/// What the side panels asked for in a frame: viewer commands, edits, and the worklist's,
/// analysis panel's and report's commands.
type SidePanelCommands = (
    Vec<ViewerCommand>,
    Vec<crate::ui::editor::EditCommand>,
    Option<crate::ui::worklist::WorklistCommand>,
    Option<AnalysisCommand>,
    Option<ReportCommand>,
);

impl KeysliceApp {
    /// The left and right panels, and the analysis key.
    fn side_panels_ui(&mut self, ui: &mut egui::Ui, ctx: &egui::Context) -> SidePanelCommands {
        let mut commands = Vec::new();
        let mut analysis_command = None;
        let mut worklist_command = None;
        let mut report_command = None;
        let mut edit_commands = Vec::new();
        self.analysis
            .ensure_evidence(ctx, self.study.as_ref().map(|s| &*s.volume));
        if let Some(reading) = &mut self.reading {
            reading.tick(ctx);
        }
        // In a reader study's arm of the images alone nothing of the AI is drawn.
        let blinded = self
            .reading
            .as_ref()
            .is_some_and(|reading| reading.item.arm.shows == keyslice_review::study::Shows::Images);
        // The worklist stays while a case opens, so the user can go on to another.
        if !blinded && (self.study.is_some() || self.cases.workspace.is_some()) {
            (worklist_command, analysis_command, report_command) = self.left_panel_ui(ui);
        }
        if self.study.is_some() {
            let reading_command;
            (commands, edit_commands, reading_command) = self.right_panel_ui(ui);
            if let Some(command) = reading_command {
                self.apply_reading(ctx, command);
            }
            let typing = ctx.egui_wants_keyboard_input() || egui::Popup::is_any_open(ctx);
            if self.reading.is_none()
                && !typing
                && ctx.input(|input| input.key_pressed(egui::Key::A))
            {
                analysis_command = Some(AnalysisCommand::Run);
            }
        }
        (
            commands,
            edit_commands,
            worklist_command,
            analysis_command,
            report_command,
        )
    }
}

impl KeysliceApp {
    /// In a reader study, the active time counted on the case being read (only while the
    /// window has the focus and the reader did something within the last minute).
    #[must_use]
    pub fn reading_active(&self) -> Option<std::time::Duration> {
        self.reading.as_ref().map(study::Reading::active)
    }

    /// Applies what the reading panel asked: the key slice on screen, or the read recorded
    /// (synced) and the reader's next item opened.
    fn apply_reading(&mut self, ctx: &egui::Context, command: study::ReadingCommand) {
        let on_screen = self.axial_key_slice();
        let Some(reading) = &mut self.reading else {
            return;
        };
        match command {
            study::ReadingCommand::KeySliceHere => {
                if let Some(key) = on_screen {
                    reading.set_key_slice(key.index);
                }
            }
            study::ReadingCommand::Submit => {
                let read = reading.read();
                let (dir, reader) = (reading.item.dir.clone(), reading.item.reader.clone());
                let now = keyslice_core::date::now_seconds();
                let recorded = keyslice_review::study::Study::open(&dir)
                    .and_then(|study| study.record(&read, now));
                match recorded {
                    Ok(()) => {
                        tracing::info!(reader, case = read.case, arm = read.arm, "read recorded");
                        self.open(ctx, Source::StudyRead { dir, reader });
                    }
                    Err(error) => self.notices.push(format!(
                        "the read was not recorded: {error}; {}",
                        error.hint()
                    )),
                }
            }
        }
    }
}

/// Opens the viewer window on `source` and runs until it is closed, at the size and place
/// it had when last closed (1280 × 800 the first time).
pub fn run(source: Source, backend: Option<Backend>) -> Result<(), eframe::Error> {
    let saved = SettingsFile::load().0.settings;
    let size = saved
        .window_size
        .filter(|[width, height]| {
            *width >= 640.0 && *height >= 400.0 && *width < 20_000.0 && *height < 20_000.0
        })
        .unwrap_or([1280.0, 800.0]);
    let mut viewport = egui::ViewportBuilder::default()
        .with_title("Keyslice")
        .with_inner_size(size)
        // Below this the side panels cannot yield enough for the three planes.
        .with_min_inner_size([640.0, 400.0]);
    if let Some(position) = saved
        .window_position
        .filter(|[x, y]| x.abs() < 20_000.0 && y.abs() < 20_000.0)
    {
        viewport = viewport.with_position(position);
    }
    let options = eframe::NativeOptions {
        viewport,
        renderer: eframe::Renderer::Wgpu,
        ..eframe::NativeOptions::default()
    };
    eframe::run_native(
        "Keyslice",
        options,
        Box::new(move |cc| Ok(Box::new(KeysliceApp::new(cc, source, backend)))),
    )
}
