//! Reviewing one case: the review database held open, the case's log, its corrected
//! findings and undo/redo history, kept in step. Every change is checked against the
//! findings types, committed to the database, and only then shown (the log is re-read after
//! each commit, so the screen never shows an edit the database does not hold).
//!
//! Core module: no UI. The app's findings editor and the scripted-review test drive it.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::reviewed::{Field, FieldError, History, ReviewedCase, STATUS_FIELD};
use super::store::{Correction, Edit, ReviewStatus, ReviewStore, StoreError};
use keyslice_core::findings::{Findings, KeySlice, Organ};
use keyslice_core::prediction::Prediction;
use keyslice_core::volume::mask::LesionMask;

/// Why a change was not made.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The value does not fit the field; nothing was recorded.
    #[error(transparent)]
    Field(#[from] FieldError),
    /// The database refused; nothing was recorded.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ReviewError {
    /// What the user can do about it.
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            Self::Field(_) => "the value was not saved; enter it again in the form shown",
            Self::Store(error) => error.hint(),
        }
    }
}

/// The lesion masks the model found, by organ and lesion: the starting masks a review
/// corrects (empty for a model that segments no lesions).
#[must_use]
pub fn model_masks(prediction: &Prediction) -> BTreeMap<(Organ, usize), LesionMask> {
    prediction
        .lesion_checks
        .iter()
        .filter_map(|check| Some(((check.organ, check.lesion), check.mask.clone()?)))
        .collect()
}

/// The model's findings of a prediction as the base a review corrects: spans removed, the
/// prediction's key slice and box included.
#[must_use]
pub fn model_findings(prediction: &Prediction) -> Findings {
    let mut findings = prediction.findings.without_spans();
    if let Some(key) = &prediction.key_slice {
        findings.key_slice = Some(KeySlice {
            index: key.index,
            z_mm: Some(key.z_mm),
            sop_instance_uid: key.sop_instance_uid.clone(),
            span: None,
        });
    }
    if prediction.slice_box.is_some() {
        findings.slice_box.clone_from(&prediction.slice_box);
    }
    findings
}

/// One case under review.
pub struct CaseReview {
    store: ReviewStore,
    case_id: String,
    reviewer: String,
    base: Option<Findings>,
    base_masks: BTreeMap<(Organ, usize), LesionMask>,
    log: Vec<Correction>,
    case: ReviewedCase,
    history: History,
    status: ReviewStatus,
}

impl CaseReview {
    /// Opens the review of `case_id` in the database at `database`, on the model's findings
    /// `base` (none when the case was not analysed), edits signed by `reviewer`.
    pub fn open(
        database: &Path,
        case_id: &str,
        reviewer: &str,
        base: Option<Findings>,
    ) -> Result<Self, StoreError> {
        let store = ReviewStore::open(database)?;
        let mut review = Self {
            store,
            case_id: case_id.to_string(),
            reviewer: reviewer.to_string(),
            base,
            base_masks: BTreeMap::new(),
            log: Vec::new(),
            case: ReviewedCase::replay(None, &[]),
            history: History::default(),
            status: ReviewStatus::New,
        };
        review.reload()?;
        Ok(review)
    }

    /// Replaces the model's findings (a fresh analysis) and replays the log on them.
    pub fn set_base(&mut self, base: Option<Findings>) {
        self.base = base;
        self.replay();
    }

    /// Replaces the lesion masks the model found (see [`model_masks`]): each lesion's mask
    /// until the reviewer changes it.
    pub fn set_base_masks(&mut self, masks: BTreeMap<(Organ, usize), LesionMask>) {
        self.base_masks = masks;
        self.replay();
    }

    fn replay(&mut self) {
        self.case =
            ReviewedCase::replay_with_masks(self.base.as_ref(), &self.base_masks, &self.log);
    }

    fn reload(&mut self) -> Result<(), StoreError> {
        self.log = self.store.corrections(Some(&self.case_id))?;
        self.status = self.store.case_state(&self.case_id)?.status;
        self.replay();
        self.history = History::of(&self.log);
        Ok(())
    }

    /// The case's id.
    #[must_use]
    pub fn case_id(&self) -> &str {
        &self.case_id
    }

    /// The findings as corrected so far.
    #[must_use]
    pub fn case(&self) -> &ReviewedCase {
        &self.case
    }

    /// The model's findings, if analysed.
    #[must_use]
    pub fn base(&self) -> Option<&Findings> {
        self.base.as_ref()
    }

    /// What undo and redo would do.
    #[must_use]
    pub fn history(&self) -> &History {
        &self.history
    }

    /// The case's review status.
    #[must_use]
    pub fn status(&self) -> ReviewStatus {
        self.status
    }

    /// The case's log, oldest first.
    #[must_use]
    pub fn log(&self) -> &[Correction] {
        &self.log
    }

    /// [`Self::set`] of a typed field.
    pub fn set_field(&mut self, field: Field, value: Value) -> Result<bool, ReviewError> {
        self.set(&field.path(), value)
    }

    /// Sets `field` to `value`: checked, committed, then shown. Returns `false` when the
    /// value is what the field already holds (nothing recorded).
    pub fn set(&mut self, field: &str, value: Value) -> Result<bool, ReviewError> {
        let old = self.case.get(field)?;
        if old == value {
            return Ok(false);
        }
        // Checked on a copy first: a value that does not fit is never recorded.
        self.case.clone().apply(field, &old, &value)?;
        self.remember_base()?;
        self.store.record(&Edit {
            case_id: self.case_id.clone(),
            field: field.to_string(),
            old_value: old,
            new_value: value,
            reviewer: self.reviewer.clone(),
        })?;
        self.reload()?;
        Ok(true)
    }

    /// Sets the review status (accept: done; flag: flagged); undoable like an edit. Nothing is
    /// recorded when the case already has that status.
    pub fn set_status(&mut self, status: ReviewStatus) -> Result<(), ReviewError> {
        // Accepting an accepted case (or flagging a flagged one) changes nothing: no entry.
        if status == self.status {
            return Ok(());
        }
        self.remember_base()?;
        self.store
            .set_status(&self.case_id, status, &self.reviewer)?;
        self.reload()?;
        Ok(())
    }

    /// Keeps the findings this review starts from in the database, beside the log, so the
    /// reviewed findings can be rebuilt from the database alone.
    fn remember_base(&mut self) -> Result<(), ReviewError> {
        let base = serde_json::to_value(&self.base).unwrap_or(serde_json::Value::Null);
        self.store.remember_base(&self.case_id, &base)?;
        Ok(())
    }

    /// Reverses the latest edit; returns the field it changed (`None`: nothing to undo).
    pub fn undo(&mut self) -> Result<Option<String>, ReviewError> {
        self.reverse(self.history.undo_target())
    }

    /// Reapplies the latest undone edit; returns the field it changed.
    pub fn redo(&mut self) -> Result<Option<String>, ReviewError> {
        self.reverse(self.history.redo_target())
    }

    fn reverse(&mut self, target: Option<i64>) -> Result<Option<String>, ReviewError> {
        let Some(id) = target else {
            return Ok(None);
        };
        let entry = self.store.undo(id, &self.reviewer)?;
        self.reload()?;
        Ok(Some(entry.field))
    }

    /// Whether a field name is the status (kept in the cases table, shown by the worklist).
    #[must_use]
    pub fn is_status(field: &str) -> bool {
        field == STATUS_FIELD
    }
}
