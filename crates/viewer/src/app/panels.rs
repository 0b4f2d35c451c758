//! The window's layout: the left panel (worklist, analysis, evidence, report), the right
//! panel (findings editor, measurements, key slice, structures), the central area (error,
//! progress or the viewer) and the veil shown while files are dragged over the window.

use std::time::Duration;

use super::{KeysliceApp, Shown};
use crate::render::view::Plane;
use crate::ui::analysis::AnalysisCommand;
use crate::ui::editor::{EditCommand, FindingsEditor, ruler_size};
use crate::ui::report::ReportCommand;
use crate::ui::viewport::{Viewer, ViewerCommand};
use crate::ui::worklist::{WorklistCommand, worklist_ui};
use keyslice_core::findings::KeySlice;
use keyslice_core::prediction::PredictionKeySlice;
use keyslice_core::volume::Volume;

/// Largest share of the window a side panel may be dragged to.
pub const SIDE_PANEL_MAX_SHARE: f32 = 0.4;

/// A side panel's default and largest width in a window of this size. In a window of
/// 1200 px or more it opens at its `preferred` width (or the width the reader last dragged it
/// to) and may be dragged to [`SIDE_PANEL_MAX_SHARE`] of the window; below that it yields to
/// the images (at most a sixth of the window, never under 100 px), so the planes keep about
/// two thirds of a small window. Its width changes only by the reader's hand.
pub fn side_panel_width(ctx: &egui::Context, preferred: f32, saved: Option<f32>) -> (f32, f32) {
    let window = ctx.content_rect().width();
    let largest = if window >= 1200.0 {
        (window * SIDE_PANEL_MAX_SHARE).max(preferred)
    } else {
        (window / 6.0).max(100.0)
    };
    let wanted = saved.filter(|width| *width >= 100.0).unwrap_or(preferred);
    (wanted.min(largest), largest)
}

/// The line over the images that says whose CT this is: the patient and study from the
/// DICOM header, with the series; for a file that holds no identity (NIfTI), that it holds
/// none, so a reviewer never takes silence for the right patient.
fn patient_header_ui(ui: &mut egui::Ui, volume: &Volume, announcement: Option<&str>) {
    use keyslice_core::text::shown;
    let info = volume.info();
    let identity = match &info.patient {
        Some(patient) => {
            let line = patient.line();
            if line.is_empty() {
                "the DICOM header names no patient".to_string()
            } else {
                line
            }
        }
        None => "no patient identity in this file".to_string(),
    };
    // One line of a fixed height whose parts shorten (full text on hover) rather than push
    // the planes: a long name or a passing message never moves the images under the hand.
    // The line's rect is allocated first; its parts are drawn in a child that cannot grow it.
    let (rect, _) =
        ui.allocate_exact_size(egui::vec2(ui.available_width(), 20.0), egui::Sense::hover());
    let mut line = ui.new_child(
        egui::UiBuilder::new()
            .max_rect(rect)
            .layout(egui::Layout::left_to_right(egui::Align::Center)),
    );
    line.set_clip_rect(rect.intersect(ui.clip_rect()));
    // The patient first, with most of the line; what is left goes to the message, then the
    // series.
    line.scope(|ui| {
        ui.set_max_width((rect.width() * 0.6).max(120.0));
        ui.add(egui::Label::new(egui::RichText::new(&identity).strong().size(15.0)).truncate())
            .on_hover_text(&identity);
    });
    if let Some(announcement) = announcement {
        line.add(
            egui::Label::new(
                egui::RichText::new(announcement)
                    .strong()
                    .color(egui::Color32::from_rgb(120, 200, 140)),
            )
            .truncate(),
        )
        .on_hover_text(announcement);
    }
    if !info.series_description.trim().is_empty() {
        line.add(egui::Label::new(shown(info.series_description.trim())).truncate());
    }
}

impl KeysliceApp {
    /// The left panel: worklist, analysis, evidence and report.
    pub(super) fn left_panel_ui(
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
        let saved = self.settings.settings.panel_widths.map(|[left, _]| left);
        let (default_width, max_width) = side_panel_width(ui.ctx(), 300.0, saved);
        let panel = egui::Panel::left("keyslice-left")
            .default_size(default_width)
            .min_size(100.0)
            .max_size(max_width)
            .show(ui, |ui| {
                let bottom = ui.clip_rect().bottom();
                // Content wider than a narrow panel scrolls inside it, never past its edge.
                egui::ScrollArea::both().show(ui, |ui| {
                    if let Some((root, worklist)) = &self.cases.workspace {
                        worklist_command = worklist_ui(
                            ui,
                            root,
                            worklist,
                            self.cases.open_case.as_deref(),
                            self.review_keys,
                            &self.cases.reviewer,
                        );
                        ui.separator();
                    }
                    (analysis_command, report_command) =
                        self.analysis.ui(ui, bottom, self.reading.is_none());
                });
            });
        let [_, right] = self.panel_widths.get();
        self.panel_widths
            .set([Some(panel.response.rect.width()), right]);
        (worklist_command, analysis_command, report_command)
    }

    /// The right panel: the findings editor (in a workspace), measurements, key slice,
    /// structures.
    pub(super) fn right_panel_ui(
        &mut self,
        ui: &mut egui::Ui,
    ) -> (
        Vec<ViewerCommand>,
        Vec<EditCommand>,
        Option<super::study::ReadingCommand>,
    ) {
        let mut reading_command = None;
        // Out of `self` while the panel draws (the panel reads the rest of `self`).
        let mut reading = self.reading.take();
        let Some(Shown { volume, viewer }) = &self.study else {
            self.reading = reading;
            return (Vec::new(), Vec::new(), None);
        };
        let mut edit_commands = Vec::new();
        let saved = self.settings.settings.panel_widths.map(|[_, right]| right);
        let (default_width, max_width) = side_panel_width(ui.ctx(), 280.0, saved);
        let panel = egui::Panel::right("keyslice-side")
            .default_size(default_width)
            .min_size(100.0)
            .max_size(max_width)
            .show(ui, |ui| {
                // Content wider than a narrow panel scrolls inside it, never past its edge.
                egui::ScrollArea::both()
                    .show(ui, |ui| {
                        if let Some(reading) = &mut reading {
                            reading_command = reading.ui(ui);
                        } else if let Some(review) = &self.cases.review {
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
                                current_slice: Self::key_slice_on_screen(volume, viewer),
                                ruler: ruler_size(&lengths),
                                review_keys: self.review_keys,
                                masks: &self.masks.measures,
                                drawing: self.masks.drawing(),
                            };
                            edit_commands = editor.ui(ui);
                        } else if self.arriving() {
                            ui.heading("Findings");
                            ui.weak(
                                "The study is arriving from the PACS: its findings and \
                                 corrections open when the last image is in.",
                            );
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
            });
        let [left, _] = self.panel_widths.get();
        self.panel_widths
            .set([left, Some(panel.response.rect.width())]);
        self.reading = reading;
        (panel.inner, edit_commands, reading_command)
    }

    /// The axial slice on screen as a key slice (index, z, SOP Instance UID).
    fn key_slice_on_screen(volume: &Volume, viewer: &Viewer) -> KeySlice {
        let axial = viewer.view(Plane::Axial).slice.round().max(0.0);
        let key = PredictionKeySlice::of(volume, axial as u32);
        KeySlice {
            index: key.index,
            z_mm: Some(key.z_mm),
            sop_instance_uid: key.sop_instance_uid,
            span: None,
        }
    }

    /// The axial slice on screen as a key slice, when a study is shown.
    pub(super) fn axial_key_slice(&self) -> Option<KeySlice> {
        self.study
            .as_ref()
            .map(|Shown { volume, viewer }| Self::key_slice_on_screen(volume, viewer))
    }

    /// The central area: the error, the loading progress, or the viewer.
    pub(super) fn central_ui(&mut self, ui: &mut egui::Ui, commands: &mut Vec<ViewerCommand>) {
        if let Some((message, hint)) = &self.error {
            ui.colored_label(
                egui::Color32::from_rgb(230, 90, 80),
                format!("error: {message}"),
            );
            ui.label(format!("hint: {hint}"));
            ui.label("Open another study from the File menu, or drop one on the window.");
        } else if let Some(Shown { volume, viewer }) = &mut self.study {
            // The last correction stays in the header line for a few seconds.
            if self
                .announcement
                .as_ref()
                .is_some_and(|(_, at)| at.elapsed() > Duration::from_secs(6))
            {
                self.announcement = None;
            }
            let announcement = self.announcement.as_ref().map(|(text, _)| text.as_str());
            patient_header_ui(ui, volume, announcement);
            if announcement.is_some() {
                ui.ctx().request_repaint_after(Duration::from_millis(500));
            }
            self.viewer_rect = Some(ui.available_rect_before_wrap());
            commands.extend(viewer.viewer_ui(ui, volume));
            if !self.loader.first_slice_logged {
                // The frame that carries the first slices; measured by
                // benches/viewer_first_slice.sh (KEYSLICE_LOG=info).
                self.loader.first_slice_logged = true;
                // For a study arriving from a PACS, also how long after its first file came.
                let since_first_file_ms = self
                    .loader
                    .first_arrival
                    .and_then(|at| at.elapsed().ok())
                    .map(|since| since.as_millis());
                tracing::info!(
                    elapsed_ms = self.loader.started.elapsed().as_millis(),
                    since_first_file_ms,
                    "first slices drawn"
                );
            }
        } else if self.loader.is_loading() {
            ui.heading(format!("Opening {}", self.title));
            if let Some((text, fraction)) = &self.loader.progress {
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
            let stop = ui
                .horizontal(|ui| {
                    ui.spinner();
                    ui.label(format!(
                        "Loading… {:.1} s",
                        self.loader.started.elapsed().as_secs_f32()
                    ));
                    ui.button("Stop")
                        .on_hover_text("Stop reading this study; another can be opened at once")
                        .clicked()
                })
                .inner;
            if stop {
                self.abandon_loading("stopped");
            }
            ui.ctx().request_repaint_after(Duration::from_millis(100));
        }
    }

    /// A veil over the window while files are dragged over it.
    pub(super) fn drop_hint_ui(ctx: &egui::Context) {
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
