//! The worklist panel: a workspace's cases with review status and the model's consistency,
//! in the order given (lowest consistency first, so likely hallucinations are triaged
//! first); the open case is highlighted and a click asks to open another.

use std::path::Path;

use crate::review::ReviewStatus;
use crate::review::workspace::WorklistEntry;
use crate::ui::analysis::consistency_colour;

/// Draws the worklist; returns the case the user picked, if any.
pub fn worklist_ui(
    ui: &mut egui::Ui,
    root: &Path,
    worklist: &[WorklistEntry],
    open_case: Option<&str>,
) -> Option<String> {
    let mut chosen = None;
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
                    chosen = Some(entry.case_id.clone());
                }
                ui.label(match entry.status {
                    ReviewStatus::New => "new",
                    ReviewStatus::InReview => "in review",
                    ReviewStatus::Done => "done",
                    ReviewStatus::Flagged => "flagged",
                });
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
    chosen
}
