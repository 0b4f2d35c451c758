//! The File menu: the native open dialog (a job, so the window keeps drawing while it is
//! open), a typed path, recent studies, the demos, and exporting the workspace.

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
}

/// The menu's own state: the open dialog, if shown, and the path being typed.
#[derive(Default)]
pub(super) struct FileMenu {
    dialog: Option<Job<Option<PathBuf>>>,
    typed_path: String,
}

impl FileMenu {
    /// Shows the native dialog, unless one is already open.
    pub(super) fn show_dialog(
        &mut self,
        ctx: &egui::Context,
        pick: Pick,
        start_in: Option<PathBuf>,
    ) {
        if self.dialog.is_none() {
            self.dialog = Some(pick_in_background(pick, start_in, ctx));
        }
    }

    /// The dialog's answer, once given: the study to open, or (when no dialog service
    /// answered) a notice saying what to do instead.
    pub(super) fn poll(&mut self, notices: &mut Vec<String>) -> Option<FileCommand> {
        let dialog = self.dialog.as_ref()?;
        match dialog.poll() {
            Polled::Pending => None,
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
                    notices.push(
                        "no file dialog is available here (xdg-desktop-portal is not running): \
                         type the path under File > Open a path, or drop the file on the window"
                            .into(),
                    );
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
                    ] {
                        if ui.button(name).clicked() {
                            chosen = Some(FileCommand::Export(format, name));
                            ui.close();
                        }
                    }
                });
            });
        });
        chosen
    }
}
