//! The workspace in the window: its worklist, the case on screen and that case's review
//! (corrections recorded as they are made, undo/redo, status), and the app's side of them
//! (the key slice marker follows the review; moving along the worklist opens a case).

use std::path::{Path, PathBuf};

use super::Shown;
use super::{KeysliceApp, Source};
use crate::ui::editor::{EditCommand, key_slice_here, key_slice_note, set_key_slice};
use crate::ui::masks::MaskCommand;
use crate::ui::viewport::{Evidence, ViewerCommand};
use crate::ui::worklist::WorklistCommand;
use keyslice_core::findings::Findings;
use keyslice_core::findings::{KeySlice, SliceRange};
use keyslice_core::prediction::Prediction;
use keyslice_core::prediction::PredictionKeySlice;
use keyslice_review::reviewed::{Field, KEY_SLICE_FIELD};
use keyslice_review::workspace::{DATABASE_FILE, WorklistEntry, Workspace};
use keyslice_review::{CaseReview, ReviewStatus, model_findings, model_masks};

/// The open workspace and its case under review; all empty outside a workspace.
#[derive(Default)]
pub(super) struct Cases {
    /// The open workspace's folder and worklist.
    pub(super) workspace: Option<(PathBuf, Vec<WorklistEntry>)>,
    /// The workspace case on screen.
    pub(super) open_case: Option<String>,
    /// The open workspace case under review (its corrections, undo/redo).
    pub(super) review: Option<CaseReview>,
    /// Who reviews: the name every correction and status is recorded under.
    pub(super) reviewer: String,
}

impl Cases {
    /// The open workspace's folder.
    pub(super) fn root(&self) -> Option<&Path> {
        self.workspace.as_ref().map(|(root, _)| root.as_path())
    }

    /// A workspace has arrived: its worklist, and the case being opened (the one asked for
    /// when it is in the worklist, else the first).
    pub(super) fn show_workspace(&mut self, root: PathBuf, worklist: Vec<WorklistEntry>) {
        let wanted = self
            .open_case
            .take()
            .filter(|case_id| worklist.iter().any(|entry| &entry.case_id == case_id));
        self.open_case = wanted.or_else(|| worklist.first().map(|entry| entry.case_id.clone()));
        self.workspace = Some((root, worklist));
    }

    /// Outside a workspace now (a study opened by itself).
    pub(super) fn close_workspace(&mut self) {
        self.open_case = None;
        self.workspace = None;
    }

    /// Opens the review of the workspace case on screen (none outside a workspace); a
    /// failure gives the notice to show.
    pub(super) fn open_review(&mut self) -> Option<String> {
        self.review = None;
        let (Some((root, _)), Some(case_id)) = (&self.workspace, &self.open_case) else {
            return None;
        };
        match CaseReview::open(&root.join(DATABASE_FILE), case_id, &self.reviewer, None) {
            Ok(review) => {
                self.review = Some(review);
                None
            }
            Err(error) => Some(format!(
                "corrections cannot be recorded: {error} ({})",
                error.hint()
            )),
        }
    }

    /// The model's findings and lesion masks the review starts from (a new analysis
    /// replaces them).
    pub(super) fn set_model(&mut self, prediction: &Prediction) {
        if let Some(review) = &mut self.review {
            review.set_base(Some(model_findings(prediction)));
            review.set_base_masks(model_masks(prediction));
        }
    }

    /// The worklist row of the case under review shows its stored status.
    fn sync_worklist_status(&mut self) {
        let (Some(review), Some((_, worklist))) = (&self.review, &mut self.workspace) else {
            return;
        };
        if let Some(entry) = worklist.iter_mut().find(|e| e.case_id == review.case_id()) {
            entry.status = review.status();
            if review.status() != ReviewStatus::New {
                entry.reviewer = Some(self.reviewer.clone());
            }
        }
    }

    /// Records the findings editor's commands, each committed before the next frame shows
    /// it; failures are added to `notices`.
    fn apply_edits(
        &mut self,
        commands: Vec<EditCommand>,
        notices: &mut Vec<String>,
        announced: &mut Vec<String>,
    ) {
        let Some(review) = &mut self.review else {
            return;
        };
        for command in commands {
            let result = match command {
                EditCommand::Set { field, value } => review
                    .set_field(field, value)
                    .map(|saved| saved.then(|| field.path())),
                EditCommand::Undo => review.undo(),
                EditCommand::Redo => review.redo(),
                // Resolved by the app, which knows the slice on screen and moves the viewer,
                // and holds the masks.
                EditCommand::KeySliceHere | EditCommand::ShowSlice(_) | EditCommand::Mask(_) => {
                    Ok(None)
                }
            };
            match result {
                Ok(Some(field)) => {
                    tracing::info!(case = review.case_id(), field, "correction saved");
                    // What was saved, from what to what, said where the reviewer looks.
                    if let Some(entry) = review.log().last() {
                        let words = keyslice_review::reviewed::change_words(
                            &entry.field,
                            &entry.old_value,
                            &entry.new_value,
                        );
                        announced.push(if entry.undoes.is_some() {
                            format!("undone — {words}")
                        } else {
                            format!("saved — {words} · Ctrl+Z undoes")
                        });
                    }
                }
                Ok(None) => {}
                Err(error) => notices.push(format!("not saved: {error} ({})", error.hint())),
            }
        }
        self.sync_worklist_status();
    }

    /// In a workspace, appends a fresh analysis of the open case to its predictions and
    /// updates the worklist; elsewhere nothing is written. A failure gives the notice to
    /// show.
    pub(super) fn save_prediction(&mut self, prediction: &Prediction) -> Option<String> {
        let (Some((root, worklist)), Some(case_id)) = (&mut self.workspace, &self.open_case) else {
            return None;
        };
        if prediction.case_id != *case_id {
            return None;
        }
        match Workspace::open(root).and_then(|w| w.append_prediction(prediction)) {
            Ok(()) => {
                if let Some(entry) = worklist.iter_mut().find(|e| e.case_id == *case_id) {
                    entry.consistency = prediction.consistency.as_ref().map(|c| c.score);
                }
                None
            }
            Err(error) => Some(format!("analysis shown but not saved: {error}")),
        }
    }

    /// Records a status or moves along the worklist: the case to open, if any. The case
    /// under review records its status in its own log (so Ctrl+Z undoes it), committed
    /// before the list shows it.
    fn apply_worklist(
        &mut self,
        command: WorklistCommand,
        notices: &mut Vec<String>,
        announced: &mut Vec<String>,
    ) -> Option<Source> {
        if let WorklistCommand::SetStatus(status) = command
            && let Some(review) = &mut self.review
        {
            let before = review.status();
            match review.set_status(status) {
                Err(error) => {
                    notices.push(format!("status not saved: {error} ({})", error.hint()));
                }
                Ok(()) if before != status => {
                    // What was done, by whom, said where the reviewer looks.
                    announced.push(format!(
                        "saved — {} {} by {} · Ctrl+Z undoes",
                        keyslice_core::text::shown(review.case_id()),
                        status_words(status),
                        keyslice_core::text::person_name(&self.reviewer)
                    ));
                }
                Ok(()) => {}
            }
            self.sync_worklist_status();
            return None;
        }
        let (root, _) = self.workspace.as_ref()?;
        // A status is recorded in the open case's review (above), never around it.
        let WorklistCommand::Open(case_id) = command else {
            return None;
        };
        Some(Source::WorkspaceCase {
            root: root.clone(),
            case_id,
        })
    }
}

/// A status as a sentence says it ("accepted", "flagged").
fn status_words(status: ReviewStatus) -> &'static str {
    match status {
        ReviewStatus::Done => "accepted",
        ReviewStatus::Flagged => "flagged",
        ReviewStatus::InReview => "marked in review",
        ReviewStatus::New => "marked new",
    }
}

/// The evidence to draw from findings: their box on their key slice, with the slice range.
fn evidence_of(findings: &Findings) -> Option<Evidence> {
    let slice_box = findings.slice_box.as_ref()?;
    let key = findings.key_slice.as_ref()?;
    Some(Evidence {
        voxels: slice_box.voxels,
        key_slice: key.index,
        slices: findings
            .lesion_slices
            .map(|range| (range.first, range.last)),
    })
}

impl KeysliceApp {
    /// Marks the key slice the review holds: the reviewer's when they set one, else the
    /// model's.
    pub(super) fn sync_key_slice(&mut self) {
        let Some(study) = &mut self.study else {
            return;
        };
        let viewer = &mut study.viewer;
        let reviewed = self
            .cases
            .review
            .as_ref()
            .filter(|review| review.case().changed.iter().any(|f| f == KEY_SLICE_FIELD));
        if let Some(review) = reviewed {
            viewer.key_slice = review
                .case()
                .findings
                .key_slice
                .as_ref()
                .map(|key| f64::from(key.index));
            viewer.key_slice_source = viewer
                .key_slice
                .map(|_| "set in review (S), replacing the model's".to_string());
        } else if let Some(prediction) = self.analysis.prediction()
            && let Some(key) = &prediction.key_slice
        {
            viewer.key_slice = Some(f64::from(key.index));
            viewer.key_slice_source = Some(format!(
                "named by {} (its evidence for the report)",
                prediction.diagnoser.id
            ));
        }
        viewer.evidence = if let Some(review) = &self.cases.review {
            // What the record holds: the model's box and range are not evidence on a key
            // slice the reviewer moved away from them.
            let mut findings = review.case().findings.clone();
            let model = self
                .analysis
                .prediction()
                .map(keyslice_review::case::model_findings);
            keyslice_export::rules::reconcile(
                &mut findings,
                model.as_ref(),
                &review.case().changed,
            );
            evidence_of(&findings)
        } else {
            self.analysis.prediction().and_then(|prediction| {
                let mut findings = prediction.findings.clone();
                findings.slice_box.clone_from(&prediction.slice_box);
                if let Some(key) = &prediction.key_slice {
                    findings.key_slice = Some(KeySlice {
                        index: key.index,
                        z_mm: Some(key.z_mm),
                        sop_instance_uid: None,
                        span: None,
                    });
                }
                evidence_of(&findings)
            })
        };
    }

    /// The corrections a box tool drag makes: the key slice when the box went to another
    /// slice, the box, the slice range; each recorded (and undone) as its own correction.
    pub(super) fn evidence_edits(&mut self, evidence: Evidence) -> Vec<EditCommand> {
        let Some(review) = &self.cases.review else {
            self.notices.push(
                "the box is shown but not recorded: corrections are recorded in a workspace \
                 (keyslice workspace create DIR THIS_STUDY)"
                    .into(),
            );
            return Vec::new();
        };
        let findings = &review.case().findings;
        let mut edits = Vec::new();
        if findings.key_slice.as_ref().map(|key| key.index) != Some(evidence.key_slice)
            && let Some(Shown { volume, .. }) = &self.study
        {
            let key = PredictionKeySlice::of(volume, evidence.key_slice);
            edits.push(set_key_slice(&KeySlice {
                index: key.index,
                z_mm: Some(key.z_mm),
                sop_instance_uid: key.sop_instance_uid,
                span: None,
            }));
        }
        if findings.slice_box.as_ref().map(|b| b.voxels) != Some(evidence.voxels) {
            // The corners in patient millimetres too, as the model's box has them.
            let mm = self.study.as_ref().map(|Shown { volume, .. }| {
                let [c0, r0, c1, r1] = evidence.voxels.map(f64::from);
                let z = f64::from(evidence.key_slice);
                let low = volume.patient_from_voxel().apply([c0, r0, z]);
                let high = volume.patient_from_voxel().apply([c1, r1, z]);
                let round = |value: f64| (value * 100.0).round() / 100.0;
                [round(low[0]), round(low[1]), round(high[0]), round(high[1])]
            });
            edits.push(EditCommand::Set {
                field: Field::Box,
                value: serde_json::json!({ "voxels": evidence.voxels, "mm": mm }),
            });
        }
        let range = evidence
            .slices
            .map(|(first, last)| SliceRange { first, last });
        if findings.lesion_slices != range {
            edits.push(EditCommand::Set {
                field: Field::LesionSlices,
                value: range.map_or(serde_json::Value::Null, |range| serde_json::json!(range)),
            });
        }
        edits
    }

    /// Records the findings editor's commands and keeps the worklist and key slice marker
    /// in step.
    pub(super) fn apply_edits(&mut self, commands: Vec<EditCommand>) {
        if self.cases.review.is_none() {
            return;
        }
        let here = self.axial_key_slice();
        let findings = self
            .cases
            .review
            .as_ref()
            .map(|review| review.case().findings.clone());
        let mut show = Vec::new();
        let commands = commands
            .into_iter()
            .flat_map(|command| match command {
                EditCommand::ShowSlice(slice) => {
                    show.push(ViewerCommand::SetSlice {
                        plane: crate::render::view::Plane::Axial,
                        slice: f64::from(slice),
                    });
                    Vec::new()
                }
                EditCommand::Mask(command) => self.mask_edits(command),
                EditCommand::KeySliceHere => here
                    .as_ref()
                    .zip(findings.as_ref())
                    .map(|(here, findings)| {
                        self.notices.extend(key_slice_note(here, findings));
                        key_slice_here(here, findings)
                    })
                    .unwrap_or_default(),
                other => vec![other],
            })
            .collect();
        let mut announced = Vec::new();
        self.cases
            .apply_edits(commands, &mut self.notices, &mut announced);
        if let Some(last) = announced.pop() {
            self.announcement = Some((last, std::time::Instant::now()));
        }
        self.sync_key_slice();
        if !show.is_empty() {
            self.apply_viewer_commands(show);
        }
    }

    /// Opens a case, moves along the worklist, or records the open case's status. A status
    /// asked for while a case is still opening changes nothing (the case named on screen is
    /// not yet the one whose review is open).
    pub(super) fn apply_worklist(&mut self, ctx: &egui::Context, command: WorklistCommand) {
        if matches!(command, WorklistCommand::SetStatus(_)) && self.cases.review.is_none() {
            if self.is_opening() {
                self.notices.push(format!(
                    "nothing changed: {} is still opening",
                    self.cases.open_case.as_deref().unwrap_or("the case")
                ));
            }
            return;
        }
        let mut announced = Vec::new();
        let source = self
            .cases
            .apply_worklist(command, &mut self.notices, &mut announced);
        if let Some(last) = announced.pop() {
            self.announcement = Some((last, std::time::Instant::now()));
        }
        if let Some(source) = source {
            self.open(ctx, source);
        }
    }
}

impl KeysliceApp {
    /// A mask row's command: drawing starts or stops, the brush changes, or the mask changes
    /// (the correction to record).
    fn mask_edits(&mut self, command: MaskCommand) -> Vec<EditCommand> {
        let (Some(study), Some(review)) = (&mut self.study, &self.cases.review) else {
            return Vec::new();
        };
        let edit = match command {
            MaskCommand::Draw(target) => {
                self.masks.draw(
                    target,
                    review.case_id(),
                    review.case(),
                    &study.volume,
                    &mut study.viewer,
                );
                None
            }
            MaskCommand::Brush(brush) => {
                self.masks.brush = brush;
                if study.viewer.brush.is_some() {
                    study.viewer.brush = Some(brush);
                }
                None
            }
            MaskCommand::Apply { organ, lesion, op } => {
                match self.masks.apply(
                    (organ, lesion),
                    op,
                    review.case(),
                    &study.volume,
                    &study.viewer,
                ) {
                    Ok(edit) => edit,
                    Err(reason) => {
                        self.notices.push(format!("mask unchanged: {reason}"));
                        None
                    }
                }
            }
            MaskCommand::UseMeasures { organ, lesion } => {
                self.masks.measured_lesion((organ, lesion), review.case())
            }
        };
        edit.map(|(field, value)| EditCommand::Set { field, value })
            .into_iter()
            .collect()
    }

    /// The brush touched a voxel: the lesion being drawn is painted there.
    pub(super) fn paint_mask(
        &mut self,
        plane: crate::render::view::Plane,
        voxel: [f64; 3],
        erase: bool,
    ) {
        let Some(study) = &mut self.study else {
            return;
        };
        // The brush follows the viewer's size keys.
        if let Some(brush) = study.viewer.brush {
            self.masks.brush = brush;
        }
        let normal = study.viewer.normal_axis(plane);
        self.masks.paint(
            self.render_state.as_ref(),
            &study.volume,
            &mut study.viewer,
            normal,
            voxel,
            erase,
        );
    }

    /// The brush was lifted: the stroke as one correction of the case it was drawn on.
    pub(super) fn end_stroke(&mut self) -> Option<EditCommand> {
        let dims = self.study.as_ref()?.volume.dims();
        let case_id = self.cases.review.as_ref().map(CaseReview::case_id);
        match self.masks.stroke_ended(case_id, dims) {
            Ok(edit) => edit.map(|(field, value)| EditCommand::Set { field, value }),
            Err(notice) => {
                self.notices.push(notice);
                if let Some(study) = &mut self.study {
                    study.viewer.brush = None;
                }
                None
            }
        }
    }

    /// The overlay and measures follow the review's masks.
    pub(super) fn sync_masks(&mut self) {
        let Some(study) = &mut self.study else {
            return;
        };
        let review = self
            .cases
            .review
            .as_ref()
            .map(|review| (review.case_id(), review.case()));
        self.masks.sync(
            self.render_state.as_ref(),
            &study.volume,
            &mut study.viewer,
            review,
        );
    }
}
