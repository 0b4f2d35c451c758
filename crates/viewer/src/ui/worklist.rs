//! The worklist panel: a workspace's cases with review status, the model's consistency and
//! the reviewer; by default lowest consistency first, so likely hallucinations are triaged
//! first (after cases the demo model is out of its depth on, labelled so), and sortable by case or status and filtered by status (the choice is kept for the
//! session). The open case is highlighted. Returns what the user asked for: open a case
//! (clicked, or the next / previous one in the order shown), accept or flag the open one.

use std::path::Path;

use crate::ui::analysis::{UNFAMILIAR_COLOUR, consistency_colour};
use keyslice_core::prediction::OutOfDomain;
use keyslice_review::ReviewStatus;
use keyslice_review::workspace::{WorklistEntry, triage_order};

/// What the user asked for in the worklist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorklistCommand {
    /// Open this case.
    Open(String),
    /// Set the open case's status (accept: done; flag: flagged).
    SetStatus(ReviewStatus),
}

/// How the list is ordered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Order {
    /// Cases without grounded evidence first (with the reason on hover), then lowest
    /// consistency first.
    #[default]
    Consistency,
    /// By case id.
    Case,
    /// New, in review, flagged, done.
    Status,
}

fn status_rank(status: ReviewStatus) -> u8 {
    match status {
        ReviewStatus::New => 0,
        ReviewStatus::InReview => 1,
        ReviewStatus::Flagged => 2,
        ReviewStatus::Done => 3,
    }
}

/// The entries shown, in the order shown.
fn visible(
    worklist: &[WorklistEntry],
    order: Order,
    only: Option<ReviewStatus>,
) -> Vec<&WorklistEntry> {
    let mut shown: Vec<&WorklistEntry> = worklist
        .iter()
        .filter(|entry| only.is_none_or(|status| entry.status == status))
        .collect();
    match order {
        Order::Consistency => {
            shown.sort_by(|a, b| triage_order(a, b).then_with(|| a.case_id.cmp(&b.case_id)));
        }
        Order::Case => shown.sort_by(|a, b| a.case_id.cmp(&b.case_id)),
        Order::Status => shown.sort_by(|a, b| {
            status_rank(a.status)
                .cmp(&status_rank(b.status))
                .then_with(|| a.case_id.cmp(&b.case_id))
        }),
    }
    shown
}

/// Draws the worklist; `review_keys`: whether single-letter keys may change the review now
/// (see `FindingsEditor::review_keys`).
pub fn worklist_ui(
    ui: &mut egui::Ui,
    root: &Path,
    worklist: &[WorklistEntry],
    open_case: Option<&str>,
    review_keys: bool,
    reviewer: &str,
) -> Option<WorklistCommand> {
    let mut command = None;
    ui.heading("Worklist");
    ui.small(root.display().to_string());
    let (order, only) = order_and_filter_ui(ui);
    let shown = visible(worklist, order, only);
    let done = worklist
        .iter()
        .filter(|entry| entry.status == ReviewStatus::Done)
        .count();
    ui.small(format!(
        "{} of {} shown · {done} done",
        shown.len(),
        worklist.len()
    ));
    let with_patients = shown.iter().any(|entry| entry.patient.is_some());
    // A long list scrolls in a quarter of the window (at least six rows), leaving the rest
    // to the analysis.
    let rows_height = (ui.ctx().content_rect().height() * 0.25).max(160.0);
    egui::ScrollArea::vertical()
        .id_salt("keyslice-worklist-rows")
        .max_height(rows_height)
        .show(ui, |ui| {
            rows_ui(ui, &shown, open_case, with_patients, &mut command);
        });
    let position = open_case.and_then(|open| shown.iter().position(|e| e.case_id == open));
    let step = |forward: bool| {
        let target = match (position, forward) {
            (Some(p), true) => shown.get(p + 1),
            (Some(p), false) => p.checked_sub(1).and_then(|p| shown.get(p)),
            // The open case is filtered out: start from the top.
            (None, _) => shown.first(),
        };
        target.map(|entry| WorklistCommand::Open(entry.case_id.clone()))
    };
    if open_case.is_some() {
        ui.horizontal(|ui| {
            if ui.button("Accept (Ctrl+Enter)").clicked() {
                command = Some(WorklistCommand::SetStatus(ReviewStatus::Done));
            }
            if ui.button("Flag (F)").clicked() {
                command = Some(WorklistCommand::SetStatus(ReviewStatus::Flagged));
            }
        });
        // Who accepts, right under the buttons: the name the review log records.
        ui.add(
            egui::Label::new(
                egui::RichText::new(format!(
                    "as {}",
                    keyslice_core::text::shown_short(reviewer, REVIEWER_CHARS)
                ))
                .weak(),
            )
            .truncate(),
        )
        .on_hover_text(
            "recorded in the review log under this name (exports carry a pseudonym); \
             set it once with keyslice view --reviewer NAME",
        );
        ui.horizontal(|ui| {
            if ui.small_button("previous (P)").clicked() {
                command = step(false);
            }
            if ui.small_button("next (N)").clicked() {
                command = step(true);
            }
        });
    }
    // Keys act unless a text field or a menu takes them; F (a single letter that changes the
    // review) only while the images have the keyboard (`review_keys`).
    let typing = ui.ctx().egui_wants_keyboard_input() || egui::Popup::is_any_open(ui.ctx());
    // A click on a row this frame wins over keys pressed in the same frame.
    if !typing && open_case.is_some() && command.is_none() {
        // The modifiers are those of the key event itself: a quick Ctrl+Enter has released
        // Ctrl again by the time the frame runs.
        use egui::{Key, Modifiers};
        ui.input_mut(|input| {
            if input.consume_key(Modifiers::COMMAND, Key::Enter) {
                command = Some(WorklistCommand::SetStatus(ReviewStatus::Done));
            } else if review_keys && input.consume_key(Modifiers::NONE, Key::F) {
                command = Some(WorklistCommand::SetStatus(ReviewStatus::Flagged));
            } else if input.consume_key(Modifiers::NONE, Key::N) {
                command = step(true);
            } else if input.consume_key(Modifiers::NONE, Key::P) {
                command = step(false);
            }
        });
    }
    command
}

/// Characters of the reviewer's name shown beside Accept.
const REVIEWER_CHARS: usize = 24;
/// Characters of a case name shown in its column (the whole name on hover).
const CASE_CHARS: usize = 24;
/// Characters of the patient line shown in its column (the whole line on hover).
const PATIENT_CHARS: usize = 36;

/// The rows of the worklist, with their header; a click on a case asks to open it.
fn rows_ui(
    ui: &mut egui::Ui,
    shown: &[&WorklistEntry],
    open_case: Option<&str>,
    with_patients: bool,
    command: &mut Option<WorklistCommand>,
) {
    egui::Grid::new("keyslice-worklist")
        .num_columns(if with_patients { 4 } else { 3 })
        .striped(true)
        .show(ui, |ui| {
            ui.weak("case");
            ui.weak("status");
            ui.weak("consistency");
            if with_patients {
                ui.weak("patient");
            }
            ui.end_row();
            for entry in shown {
                let open = open_case == Some(entry.case_id.as_str());
                // Long names are shortened in their column, whole on hover: the panel keeps
                // its width.
                let label = keyslice_core::text::shown_short(&entry.case_id, CASE_CHARS);
                let clicked = ui
                    .selectable_label(open, label)
                    .on_hover_text(keyslice_core::text::shown(&entry.case_id))
                    .clicked();
                if clicked && !open {
                    *command = Some(WorklistCommand::Open(entry.case_id.clone()));
                }
                let status = ui.label(entry.status.label());
                if let Some(reviewer) = &entry.reviewer {
                    status.on_hover_text(format!("last changed by {reviewer}"));
                }
                consistency_cell(ui, entry);
                if with_patients {
                    // Whose study: the reviewer checks it before opening the case.
                    let patient = entry.patient.as_deref().unwrap_or("–");
                    ui.small(keyslice_core::text::shown_short(patient, PATIENT_CHARS))
                        .on_hover_text(keyslice_core::text::shown(patient));
                }
                ui.end_row();
            }
        });
}

/// The consistency column of one row: the score in its colour, "check" with the reason for
/// a case without grounded evidence, the demo model's label where it is out of its depth.
fn consistency_cell(ui: &mut egui::Ui, entry: &WorklistEntry) {
    match (&entry.attention, entry.consistency) {
        // Out of the demo model's depth: never a score, never green.
        (Some(reason), _) if entry.out_of_domain => {
            ui.colored_label(UNFAMILIAR_COLOUR, "not meaningful")
                .on_hover_text(format!(
                    "{}\n{}",
                    OutOfDomain::LABEL,
                    keyslice_core::text::shown_short(reason, 600)
                ));
        }
        (Some(reason), consistency) => {
            let text = consistency
                .map_or_else(|| "check".to_string(), |value| format!("check {value:.2}"));
            ui.colored_label(egui::Color32::from_rgb(230, 150, 40), text)
                .on_hover_text(reason);
        }
        (None, Some(value)) => {
            ui.colored_label(consistency_colour(value), format!("{value:.2}"));
        }
        (None, None) => {
            ui.weak("–");
        }
    }
}

fn order_and_filter_ui(ui: &mut egui::Ui) -> (Order, Option<ReviewStatus>) {
    let order_id = egui::Id::unique("keyslice-worklist-order");
    let filter_id = egui::Id::unique("keyslice-worklist-filter");
    let mut order: Order = ui.data(|data| data.get_temp(order_id)).unwrap_or_default();
    let mut only: Option<ReviewStatus> = ui.data(|data| data.get_temp(filter_id)).flatten();
    ui.horizontal(|ui| {
        egui::ComboBox::from_id_salt("worklist-order")
            .selected_text(match order {
                Order::Consistency => "needs a look first",
                Order::Case => "by case",
                Order::Status => "by status",
            })
            .show_ui(ui, |ui| {
                ui.selectable_value(&mut order, Order::Consistency, "needs a look first");
                ui.selectable_value(&mut order, Order::Case, "by case");
                ui.selectable_value(&mut order, Order::Status, "by status");
            })
            .response
            .accessible_name("worklist order");
        egui::ComboBox::from_id_salt("worklist-filter")
            .selected_text(only.map_or("all", ReviewStatus::label))
            .show_ui(ui, |ui| {
                ui.selectable_value(&mut only, None, "all");
                for status in [
                    ReviewStatus::New,
                    ReviewStatus::InReview,
                    ReviewStatus::Flagged,
                    ReviewStatus::Done,
                ] {
                    ui.selectable_value(&mut only, Some(status), status.label());
                }
            })
            .response
            .accessible_name("show cases with status");
    });
    ui.data_mut(|data| {
        data.insert_temp(order_id, order);
        data.insert_temp(filter_id, only);
    });
    (order, only)
}
