//! The worklist panel: a workspace's cases with review status and the model's consistency,
//! in the order given (lowest consistency first, so likely hallucinations are triaged
//! first); the open case is highlighted. Returns what the user asked for: open a case, accept
//! or flag the open one, or move to the next or previous case.

use std::path::Path;

use crate::review::ReviewStatus;
use crate::review::workspace::WorklistEntry;
use crate::ui::analysis::consistency_colour;

/// What the user asked for in the worklist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorklistCommand {
    /// Open this case.
    Open(String),
    /// Set the open case's status (accept: done; flag: flagged).
    SetStatus(ReviewStatus),
    /// The next case in the list (`N`).
    Next,
    /// The previous case in the list (`P`).
    Previous,
}

/// Draws the worklist.
pub fn worklist_ui(
    ui: &mut egui::Ui,
    root: &Path,
    worklist: &[WorklistEntry],
    open_case: Option<&str>,
) -> Option<WorklistCommand> {
    let mut command = None;
    ui.heading("Worklist");
    ui.small(root.display().to_string());
    egui::Grid::new("keyslice-worklist")
        .num_columns(3)
        .striped(true)
        .show(ui, |ui| {
            ui.weak("case");
            ui.weak("status");
            ui.weak("consistency");
            ui.end_row();
            for entry in worklist {
                let open = open_case == Some(entry.case_id.as_str());
                if ui.selectable_label(open, &entry.case_id).clicked() && !open {
                    command = Some(WorklistCommand::Open(entry.case_id.clone()));
                }
                ui.label(entry.status.label());
                match entry.consistency {
                    Some(value) => {
                        ui.colored_label(consistency_colour(value), format!("{value:.2}"));
                    }
                    None => {
                        ui.weak("–");
                    }
                }
                ui.end_row();
            }
        });
    if open_case.is_some() {
        ui.horizontal(|ui| {
            if ui.button("Accept (Ctrl+Enter)").clicked() {
                command = Some(WorklistCommand::SetStatus(ReviewStatus::Done));
            }
            if ui.button("Flag (F)").clicked() {
                command = Some(WorklistCommand::SetStatus(ReviewStatus::Flagged));
            }
        });
        ui.horizontal(|ui| {
            if ui.small_button("previous (P)").clicked() {
                command = Some(WorklistCommand::Previous);
            }
            if ui.small_button("next (N)").clicked() {
                command = Some(WorklistCommand::Next);
            }
        });
    }
    let typing = ui.ctx().egui_wants_keyboard_input();
    if !typing && open_case.is_some() {
        ui.input(|input| {
            if input.modifiers.command && input.key_pressed(egui::Key::Enter) {
                command = Some(WorklistCommand::SetStatus(ReviewStatus::Done));
            } else if input.key_pressed(egui::Key::F) {
                command = Some(WorklistCommand::SetStatus(ReviewStatus::Flagged));
            } else if input.key_pressed(egui::Key::N) {
                command = Some(WorklistCommand::Next);
            } else if input.key_pressed(egui::Key::P) {
                command = Some(WorklistCommand::Previous);
            }
        });
    }
    command
}
