//! The analysis panel: running the model on the open study as a job (cancellable, the
//! previous result restored on cancel), the key slice thumbnail, and the evidence and report
//! of the result on screen; with the app's side of a finished analysis (saved in a
//! workspace, its key slice marked).

use std::sync::Arc;
use std::time::Duration;

use super::job::{Job, Polled};
use super::{KeysliceApp, Shown};
use crate::ui::analysis::{AnalysisCommand, AnalysisState, analysis_ui};
use crate::ui::report::{ReportCommand, evidence_ui, report_ui, thumbnail_image};
use crate::ui::viewport::ViewerCommand;
use keyslice_core::key_slice::KeySliceImage;
use keyslice_core::prediction::Prediction;
use keyslice_core::scoring::{AttributeCheck, SizeTolerance, attribute_checks};
use keyslice_core::volume::Volume;
use keyslice_infer::backend::Backend;

/// A finished analysis: the prediction, or what failed and what to do.
type AnalysisResult = Result<Prediction, (String, String)>;

/// The analysis panel's state.
pub(super) struct AnalysisPanel {
    /// What the panel shows.
    state: AnalysisState,
    /// The running analysis.
    job: Option<Job<AnalysisResult>>,
    /// The analysis shown before a re-run, restored when the re-run is cancelled.
    previous: Option<AnalysisState>,
    /// The key slice thumbnail of the analysis on screen: for which slice, its texture and
    /// the pixel step it was made with.
    evidence: Option<(u32, egui::TextureHandle, usize)>,
    /// What live analysis runs (`keyslice view --backend …`; the embedded model by default).
    backend: Option<Arc<Backend>>,
    /// Why the last re-run failed (what, and what to do), while the analysis shown before it
    /// stays on screen.
    failure: Option<(String, String)>,
}

impl AnalysisPanel {
    pub(super) fn new(backend: Option<Arc<Backend>>) -> Self {
        Self {
            state: AnalysisState::Idle,
            job: None,
            previous: None,
            evidence: None,
            backend,
            failure: None,
        }
    }

    /// Forgets the analysis of the previous study (a running one's result is dropped).
    pub(super) fn reset(&mut self) {
        self.state = AnalysisState::Idle;
        self.job = None;
        self.previous = None;
        self.evidence = None;
        self.failure = None;
    }

    /// Whether an analysis is running.
    pub(super) fn running(&self) -> bool {
        self.job.is_some()
    }

    /// The analysis on screen, when one has finished.
    pub(super) fn prediction(&self) -> Option<&Prediction> {
        match &self.state {
            AnalysisState::Done(prediction) => Some(prediction),
            _ => None,
        }
    }

    /// Starts the model on `volume` off the UI thread; `case_id` goes with the prediction.
    fn start(&mut self, ctx: &egui::Context, volume: Arc<Volume>, case_id: String) {
        let backend = self.backend.clone();
        self.job = Some(Job::spawn(ctx, move |send| {
            let result = match backend {
                Some(backend) => backend.run(&case_id, &volume, true),
                None => Backend::embedded().and_then(|b| b.run(&case_id, &volume, true)),
            }
            .map_err(|error| (error.to_string(), error.hint().to_string()));
            send(result);
        }));
        self.failure = None;
        self.previous = Some(std::mem::replace(
            &mut self.state,
            AnalysisState::Running(0.0),
        ));
    }

    /// The running analysis's prediction, once it has come; a failure is shown in the panel.
    fn poll(&mut self, ctx: &egui::Context) -> Option<Prediction> {
        let job = self.job.as_ref()?;
        match job.poll() {
            Polled::Pending => {
                self.state = AnalysisState::Running(job.elapsed().as_secs_f32());
                ctx.request_repaint_after(Duration::from_millis(100));
                None
            }
            Polled::Message(result) => {
                self.job = None;
                let previous = self.previous.take();
                match result {
                    Ok(prediction) => Some(prediction),
                    Err((message, hint)) => {
                        // A failed re-run leaves the saved analysis on screen, with why it
                        // failed above it.
                        if let Some(AnalysisState::Done(shown)) = previous {
                            self.state = AnalysisState::Done(shown);
                            self.failure = Some((message, hint));
                        } else {
                            self.state = AnalysisState::Failed(message, hint);
                        }
                        None
                    }
                }
            }
            Polled::Ended => {
                self.job = None;
                self.state = AnalysisState::Failed(
                    "the analysis stopped unexpectedly".into(),
                    "try again; with KEYSLICE_LOG=debug the log says more".into(),
                );
                None
            }
        }
    }

    /// Stops waiting for the running analysis: its result is discarded when it comes, and
    /// the analysis shown before (if any) is back. Whether one was running.
    pub(super) fn cancel(&mut self) -> bool {
        if self.job.take().is_none() {
            return false;
        }
        self.state = self.previous.take().unwrap_or_default();
        true
    }

    /// Builds the key slice thumbnail of the analysis on screen, once per slice.
    pub(super) fn ensure_evidence(&mut self, ctx: &egui::Context, volume: Option<&Volume>) {
        let (AnalysisState::Done(prediction), Some(volume)) = (&self.state, volume) else {
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

    /// Which model live analysis runs, in words.
    fn backend_name(&self) -> String {
        self.backend.as_ref().map_or_else(
            || "keyslice-tiny (synthetic-trained, not for clinical use)".to_string(),
            |backend| backend.describe(),
        )
    }

    /// The panel: run/cancel and the model's name, then the evidence and the report of the
    /// analysis on screen.
    /// The panel, down to `bottom` (the panel's lower edge, screen points).
    pub(super) fn ui(
        &self,
        ui: &mut egui::Ui,
        bottom: f32,
        offer_runs: bool,
    ) -> (Option<AnalysisCommand>, Option<ReportCommand>) {
        // In a reader study the AI's result is shown as it is: nothing to run again.
        let analysis_command = if offer_runs {
            analysis_ui(ui, &self.state, &self.backend_name())
        } else {
            ui.heading("The AI's report");
            None
        };
        if let Some((message, hint)) = &self.failure {
            ui.colored_label(
                egui::Color32::from_rgb(230, 90, 80),
                format!(
                    "Analyze again failed: {}",
                    keyslice_core::text::shown(message)
                ),
            );
            ui.small(format!(
                "{hint}; the analysis below is the one saved before"
            ));
        }
        let mut report_command = None;
        if let AnalysisState::Done(prediction) = &self.state {
            let checks: Vec<AttributeCheck> = prediction
                .local_findings
                .as_ref()
                .map(|local| {
                    attribute_checks(&prediction.findings, local, SizeTolerance::default())
                })
                .unwrap_or_default();
            let thumbnail = self
                .evidence
                .as_ref()
                .map(|(_, texture, stride)| (texture, *stride));
            report_command = evidence_ui(ui, prediction, &checks, thumbnail);
            ui.separator();
            report_command = report_ui(ui, prediction, &checks, bottom).or(report_command);
        }
        (analysis_command, report_command)
    }
}

impl KeysliceApp {
    /// Starts the model on the open study, off the UI thread.
    pub(super) fn start_analysis(&mut self, ctx: &egui::Context) {
        let Some(study) = &self.study else {
            return;
        };
        if self.reading.is_some() {
            self.notices
                .push("a reader study shows the AI's result as it is: nothing to analyse".into());
            return;
        }
        if self.arriving() {
            self.notices.push(
                "the study is still arriving from the PACS: analyse it when the last image is in"
                    .into(),
            );
            return;
        }
        // A workspace case keeps its id so the prediction is saved with it.
        let case_id = self
            .cases
            .open_case
            .clone()
            .unwrap_or_else(|| self.title.clone());
        self.analysis.start(ctx, Arc::clone(&study.volume), case_id);
    }

    /// A finished analysis is saved (in a workspace) and shown.
    pub(super) fn poll_analysis(&mut self, ctx: &egui::Context) {
        if let Some(prediction) = self.analysis.poll(ctx) {
            if let Some(notice) = self.cases.save_prediction(&prediction) {
                self.notices.push(notice);
            }
            self.show_prediction(prediction, false);
        }
    }

    /// Shows `prediction` in the analysis panel and marks its key slice; `jump` also goes
    /// there (a saved analysis opened with its case).
    pub(super) fn show_prediction(&mut self, prediction: Prediction, jump: bool) {
        if let (Some(Shown { volume, viewer }), Some(key)) =
            (&mut self.study, &prediction.key_slice)
        {
            viewer.key_slice = Some(f64::from(key.index));
            viewer.key_slice_source = Some(format!(
                "named by {} (its evidence for the report)",
                prediction.diagnoser.id
            ));
            if jump {
                viewer.apply(ViewerCommand::JumpToKeySlice, volume);
            }
        }
        if jump {
            tracing::info!(
                key_slice = prediction.key_slice.as_ref().map(|key| key.index),
                "saved analysis shown"
            );
        }
        self.cases.set_model(&prediction);
        self.analysis.state = AnalysisState::Done(Box::new(prediction));
        self.sync_key_slice();
    }
}
