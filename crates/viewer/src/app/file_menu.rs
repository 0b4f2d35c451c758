//! The File menu: the native open dialog (a job, so the window keeps drawing while it is
//! open), a typed path, recent studies, the demos, and exporting the workspace. Where no
//! dialog service runs (no session bus for the desktop portal), or the dialog fails or never
//! appears, a small window asks for the path instead, with a notice saying why.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Source;
use super::job::{Job, Polled};
use super::open::{Pick, pick_in_background};
use keyslice_export::ExportFormat;

/// What the File menu asked for.
pub(super) enum FileCommand {
    /// Open a study or workspace.
    Open(Source),
    /// Export the workspace's accepted cases in a format (its folder name).
    Export(ExportFormat, &'static str),
    /// Close the window (every correction is already saved).
    Quit,
}

/// The menu's own state: the open dialog, if shown, and the path being typed.
#[derive(Default)]
pub(super) struct FileMenu {
    dialog: Option<Job<Option<PathBuf>>>,
    typed_path: String,
    /// The "Open a path" window is shown (no dialog could be).
    prompt: bool,
    /// Its text field takes the keyboard on its first frame.
    prompt_focus: bool,
    /// A notice for the next poll.
    notice: Option<String>,
    /// The pending dialog was said not to have appeared.
    overdue_said: bool,
}

/// How long a dialog may take to appear before the path window is offered beside it.
const DIALOG_PATIENCE: Duration = Duration::from_secs(4);

/// Whether a file dialog can be shown: on Linux and the BSDs the dialog is the desktop
/// portal's, reached over the session bus; without one (a bare X server, a remote session) no
/// dialog ever appears.
fn dialog_service_available() -> bool {
    if !cfg!(any(
        target_os = "linux",
        target_os = "freebsd",
        target_os = "openbsd",
        target_os = "netbsd"
    )) {
        return true;
    }
    std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some_and(|address| !address.is_empty())
        || super::settings::env_folder("XDG_RUNTIME_DIR")
            .is_some_and(|folder| folder.join("bus").exists())
}

impl FileMenu {
    /// Shows the native dialog, unless one is already open; where none can be shown, the
    /// window that asks for a typed path.
    pub(super) fn show_dialog(
        &mut self,
        ctx: &egui::Context,
        pick: Pick,
        start_in: Option<PathBuf>,
    ) {
        if !dialog_service_available() {
            tracing::info!("no file dialog service: asking for a typed path");
            self.ask_for_path(
                "no file dialog is available here (no desktop portal on a session bus): type the path, or drop the file on the window",
            );
            return;
        }
        if self.dialog.is_none() {
            self.overdue_said = false;
            self.dialog = Some(pick_in_background(pick, start_in, ctx));
        }
    }

    /// Shows the path window with `why` as a notice.
    fn ask_for_path(&mut self, why: &str) {
        self.prompt = true;
        self.prompt_focus = true;
        self.notice = Some(why.to_string());
    }

    /// The path window, while shown: the study to open once a path is given.
    pub(super) fn prompt_ui(&mut self, ctx: &egui::Context) -> Option<FileCommand> {
        if !self.prompt {
            return None;
        }
        let mut chosen = None;
        let mut open = true;
        egui::Window::new("Open a path")
            .collapsible(false)
            .resizable(false)
            .anchor(egui::Align2::CENTER_TOP, egui::vec2(0.0, 80.0))
            .open(&mut open)
            .show(ctx, |ui| {
                ui.label(
                    "A NIfTI file, a DICOM file or folder, a case folder, a workspace, or a study \
                     on a PACS (dicomweb+http://HOST/ROOT/studies/UID):",
                );
                let field = ui.add(
                    egui::TextEdit::singleline(&mut self.typed_path)
                        .hint_text("/data/case/ct.nii.gz")
                        .desired_width(420.0),
                );
                if std::mem::take(&mut self.prompt_focus) {
                    field.request_focus();
                }
                let entered =
                    field.lost_focus() && ui.input(|input| input.key_pressed(egui::Key::Enter));
                ui.horizontal(|ui| {
                    let typed = self.typed_path.trim();
                    if (ui.button("Open").clicked() || entered) && !typed.is_empty() {
                        chosen = Some(FileCommand::Open(Source::Path(PathBuf::from(typed))));
                    }
                    if ui.button("Cancel").clicked() {
                        self.prompt = false;
                    }
                });
            });
        if chosen.is_some() || !open {
            self.prompt = false;
        }
        chosen
    }

    /// The dialog's answer, once given: the study to open, or (when no dialog service
    /// answered) a notice saying what to do instead.
    pub(super) fn poll(&mut self, notices: &mut Vec<String>) -> Option<FileCommand> {
        notices.extend(self.notice.take());
        let dialog = self.dialog.as_ref()?;
        match dialog.poll() {
            Polled::Pending => {
                if dialog.elapsed() > DIALOG_PATIENCE && !self.overdue_said {
                    self.overdue_said = true;
                    self.ask_for_path(
                        "the system's file dialog has not appeared: type the path instead",
                    );
                }
                None
            }
            Polled::Ended => {
                self.dialog = None;
                None
            }
            Polled::Message(choice) => {
                // Nobody cancels a dialog within half a second: no dialog service answered.
                let too_quick = dialog.elapsed() < Duration::from_millis(500);
                self.dialog = None;
                if let Some(path) = choice {
                    return Some(FileCommand::Open(Source::Path(path)));
                }
                if too_quick {
                    self.ask_for_path(
                        "no file dialog is available here (xdg-desktop-portal is not running): type the path, or drop the file on the window",
                    );
                    notices.extend(self.notice.take());
                }
                None
            }
        }
    }

    /// The menu; `recent` lists the recent studies, `can_export` enables the export entries.
    pub(super) fn ui(
        &mut self,
        ui: &mut egui::Ui,
        recent: &[PathBuf],
        can_export: bool,
    ) -> Option<FileCommand> {
        let start_in = recent
            .first()
            .and_then(|path| path.parent())
            .map(Path::to_path_buf);
        let mut chosen = None;
        ui.menu_button("File", |ui| {
            let waiting = self.dialog.is_some();
            for (pick, text) in [(Pick::File, "Open file…"), (Pick::Folder, "Open folder…")] {
                if ui.add_enabled(!waiting, egui::Button::new(text)).clicked() {
                    self.show_dialog(ui.ctx(), pick, start_in.clone());
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
                    chosen = Some(FileCommand::Open(Source::Path(PathBuf::from(typed))));
                    ui.close();
                }
            }
            ui.separator();
            ui.menu_button("Open recent", |ui| {
                if recent.is_empty() {
                    ui.label("Nothing opened yet.");
                }
                for path in recent {
                    let exists = path.exists();
                    let button =
                        ui.add_enabled(exists, egui::Button::new(path.display().to_string()));
                    if button.clicked() {
                        chosen = Some(FileCommand::Open(Source::Path(path.clone())));
                        ui.close();
                    }
                    if !exists {
                        button.on_disabled_hover_text("no longer there");
                    }
                }
            });
            ui.separator();
            if ui.button("Open the demo workspace").clicked() {
                chosen = Some(FileCommand::Open(Source::DemoWorkspace));
                ui.close();
            }
            if ui.button("Open the built-in demo volume").clicked() {
                chosen = Some(FileCommand::Open(Source::Demo));
                ui.close();
            }
            ui.separator();
            ui.add_enabled_ui(can_export, |ui| {
                ui.menu_button("Export accepted cases", |ui| {
                    for (format, name) in [
                        (ExportFormat::Llamafactory, "llamafactory"),
                        (ExportFormat::Swift, "swift"),
                        (ExportFormat::Verl, "verl"),
                        (ExportFormat::Keyslices, "keyslices"),
                        (ExportFormat::Segmentation, "segmentation"),
                    ] {
                        if ui.button(name).clicked() {
                            chosen = Some(FileCommand::Export(format, name));
                            ui.close();
                        }
                    }
                });
            });
            ui.separator();
            if ui
                .button("Quit (Ctrl+Q)")
                .on_hover_text("every correction is already saved")
                .clicked()
            {
                chosen = Some(FileCommand::Quit);
                ui.close();
            }
        });
        chosen
    }
}
