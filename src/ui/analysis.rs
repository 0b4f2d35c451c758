//! The analysis panel: run the model on the open study, then show its report, the key slice
//! (a button and `K` go there), the verifier's local description of that slice and the
//! consistency between the two, per attribute, so a reader sees at once whether a finding is
//! grounded. The review workflow replaces this with its full report and evidence panels.
//!
//! Draws and returns commands; the app runs the pipeline off the UI thread.

use egui::{Color32, RichText};

use crate::infer::Prediction;

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
    /// Show the key slice.
    JumpToKeySlice,
}

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
pub fn analysis_ui(ui: &mut egui::Ui, state: &AnalysisState) -> Option<AnalysisCommand> {
    let mut command = None;
    ui.heading("Analysis");
    match state {
        AnalysisState::Idle => {
            ui.label("keyslice-tiny (synthetic-trained, not for clinical use)");
            if ui.button("Analyze (A)").clicked() {
                command = Some(AnalysisCommand::Run);
            }
        }
        AnalysisState::Running(seconds) => {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.label(format!("analysing… {seconds:.1} s"));
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
    ui.small(format!(
        "{} {} · {:.0} ms",
        prediction.diagnoser.id, prediction.diagnoser.version, prediction.timings_ms.total
    ));
    match &prediction.consistency {
        Some(consistency) => {
            ui.label(
                RichText::new(format!("consistency {:.2}", consistency.score))
                    .strong()
                    .color(consistency_colour(consistency.score)),
            );
            let parts = [
                ("organ", Some(consistency.organ)),
                ("location", consistency.location),
                ("attenuation", consistency.attenuation),
                ("size", consistency.size),
            ];
            ui.horizontal_wrapped(|ui| {
                for (name, value) in parts {
                    match value {
                        Some(value) => {
                            ui.colored_label(
                                consistency_colour(value),
                                format!("{name} {value:.2}"),
                            );
                        }
                        None => {
                            ui.weak(format!("{name} –"));
                        }
                    }
                }
            });
        }
        None => {
            ui.weak("no consistency: nothing on a key slice to verify");
        }
    }
    if let Some(key) = &prediction.key_slice {
        ui.horizontal(|ui| {
            // Reports and predictions count slices from 0; the viewer's slice numbers from 1.
            ui.label(format!(
                "key slice {} (axial {}, z {:.1} mm)",
                key.index,
                key.index + 1,
                key.z_mm
            ));
            if ui.small_button("go (K)").clicked() {
                command = Some(AnalysisCommand::JumpToKeySlice);
            }
        });
    }
    if let Some(text) = &prediction.local_description {
        ui.label(RichText::new("Verifier, key slice only:").strong());
        ui.label(text.trim_end());
    }
    ui.label(RichText::new("Report:").strong());
    egui::ScrollArea::vertical()
        .max_height(260.0)
        .id_salt("analysis-report")
        .show(ui, |ui| {
            ui.label(
                RichText::new(prediction.report.trim_end())
                    .monospace()
                    .size(11.0),
            );
        });
    for warning in &prediction.warnings {
        ui.colored_label(Color32::from_rgb(230, 180, 60), warning);
    }
    if ui.small_button("Analyze again").clicked() {
        command = Some(AnalysisCommand::Run);
    }
    command
}
