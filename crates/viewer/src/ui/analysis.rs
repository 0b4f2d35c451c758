//! The analysis header: run the model on the open study (`A`), its progress with a cancel
//! button, what failed, or which model answered and when; the answer itself is shown by the
//! evidence and report panels ([`crate::ui::report`]).
//!
//! Draws and returns commands; the app runs the pipeline off the UI thread.

use egui::Color32;

use keyslice_core::prediction::{OutOfDomain, Prediction, StoredResult};

/// Where the analysis of the open study stands.
#[derive(Clone, Debug, Default)]
pub enum AnalysisState {
    /// Not run yet.
    #[default]
    Idle,
    /// Running since this many seconds ago (the app updates it).
    Running(f32),
    /// Finished.
    Done(Box<Prediction>),
    /// Failed: what failed and what to do.
    Failed(String, String),
}

/// What the user asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnalysisCommand {
    /// Run (or run again) the embedded model on the open study.
    Run,
    /// Stop waiting for the running analysis; the open case stays reviewable.
    Cancel,
}

/// Colour of the label of a case the demo model is out of its depth on: a warning, never
/// the green of agreement.
pub const UNFAMILIAR_COLOUR: Color32 = Color32::from_rgb(240, 120, 70);

/// The most reasons listed under the demo model's label (it measures 16 figures).
const FEATURE_LINES: usize = 16;

/// Colour for a consistency value: red below ½, amber below ¾, green above.
#[must_use]
pub fn consistency_colour(value: f64) -> Color32 {
    if value < 0.5 {
        Color32::from_rgb(230, 90, 80)
    } else if value < 0.75 {
        Color32::from_rgb(230, 180, 60)
    } else {
        Color32::from_rgb(110, 200, 120)
    }
}

/// The panel.
#[must_use]
pub fn analysis_ui(
    ui: &mut egui::Ui,
    state: &AnalysisState,
    backend: &str,
) -> Option<AnalysisCommand> {
    let mut command = None;
    ui.heading("Analysis");
    match state {
        AnalysisState::Idle => {
            ui.label(backend);
            if ui.button("Analyze (A)").clicked() {
                command = Some(AnalysisCommand::Run);
            }
        }
        AnalysisState::Running(seconds) => {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.label(format!("analysing… {seconds:.1} s"));
                if ui.small_button("Cancel").clicked() {
                    command = Some(AnalysisCommand::Cancel);
                }
            });
        }
        AnalysisState::Failed(message, hint) => {
            ui.colored_label(Color32::from_rgb(230, 90, 80), format!("error: {message}"));
            ui.label(format!("hint: {hint}"));
            if ui.button("Try again").clicked() {
                command = Some(AnalysisCommand::Run);
            }
        }
        AnalysisState::Done(prediction) => {
            command = prediction_ui(ui, prediction);
        }
    }
    command
}

fn prediction_ui(ui: &mut egui::Ui, prediction: &Prediction) -> Option<AnalysisCommand> {
    let mut command = None;
    ui.horizontal_wrapped(|ui| {
        let model = format!(
            "{} {}",
            prediction.diagnoser.id, prediction.diagnoser.version
        );
        if prediction.stored.is_some() {
            ui.small(format!("{model} · stored on the PACS"));
        } else {
            ui.small(format!("{model} · {:.0} ms", prediction.timings_ms.total));
        }
        if ui.small_button("Analyze again").clicked() {
            command = Some(AnalysisCommand::Run);
        }
    });
    if let Some(unfamiliar) = &prediction.out_of_domain {
        ui.label(
            egui::RichText::new(OutOfDomain::LABEL)
                .strong()
                .color(UNFAMILIAR_COLOUR),
        )
        .on_hover_text(format!(
            "{} was trained on synthetic phantoms only; this CT is unlike them, so its report and consistency mean nothing here",
            unfamiliar.model
        ));
        // A record read from a file may say anything: a few short lines at most.
        for reason in unfamiliar.reasons.iter().take(FEATURE_LINES) {
            ui.small(format!(
                "• {}",
                keyslice_core::text::shown_short(reason, 160)
            ));
        }
    }
    if let Some(stored) = &prediction.stored {
        stored_ui(ui, stored);
    }
    command
}

/// Where a result read from the PACS was stored, and the corrections reviewers stored
/// beside it (each reviewer's newest).
fn stored_ui(ui: &mut egui::Ui, stored: &StoredResult) {
    // Everything here came from the PACS: shown as text, a newline or escape never forges a
    // line.
    use keyslice_core::text::shown;
    ui.small(format!(
        "{} on {}",
        shown(&stored.document),
        shown(&stored.server)
    ))
    .on_hover_text("the AI result as it was stored on the PACS; Analyze again runs the model here");
    if stored.reviews.is_empty() {
        ui.small("No review stored on the PACS yet.");
        return;
    }
    ui.label(egui::RichText::new("Reviews on the PACS").strong());
    for review in &stored.reviews {
        ui.horizontal_wrapped(|ui| {
            ui.label(
                egui::RichText::new(keyslice_core::text::person_name(&review.reviewer)).strong(),
            );
            ui.small(shown(&review.stored));
        })
        .response
        .on_hover_text(shown(&review.summary));
        if review.changes.is_empty() {
            ui.small("accepted the AI result as it was");
        }
        for change in &review.changes {
            ui.label(format!("• {}", shown(change)));
        }
    }
}
