//! The ground truth of one case, as `keyslice score` reads it from a truth file and as the
//! Python reward (verl's `compute_score`, the ms-swift plugin) reads it from a training row:
//! one definition, so both score against the same thing.
//!
//! `{"case_id": "…"?, "findings": {…}? | "report": "…"?, "lesion_extents": [{"organ",
//! "first_slice", "last_slice", "largest_slice"}]?, "slice_size": [columns, rows]?, "slices": N?}`, or bare
//! findings JSON (an object with `organs`). Other keys are ignored (a phantom's `truth.json`
//! carries its generation settings). A `null` value is the key left out, at any depth: ms-swift
//! fills the keys a row lacks with nulls. A record with neither `findings` nor `report` is an
//! error, never "no tumor": a training sample is not rewarded against a truth nobody gave.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::findings::{Findings, LesionExtent, read_report};

/// One case's ground truth.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TruthRecord {
    /// Case identifier (a truth folder's `truth.json` defaults it to the folder name).
    #[serde(default)]
    pub case_id: String,
    /// True findings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub findings: Option<Findings>,
    /// True report text (read when `findings` is absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
    /// Lesion slice extents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lesion_extents: Vec<LesionExtent>,
    /// Columns and rows of the axial slices the key slice and boxes refer to, when known:
    /// the reward then refuses boxes that cover most of the slice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice_size: Option<[u32; 2]>,
    /// Axial slices of the volume, when known: the reward then refuses key slices and lesion
    /// ranges outside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slices: Option<u32>,
}

/// Why a truth cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TruthError {
    /// Not JSON at all.
    #[error("ground truth is not JSON: {0}")]
    NotJson(String),
    /// JSON, but a field has the wrong type or value.
    #[error("ground truth: {0}")]
    Field(String),
    /// Neither findings nor a report.
    #[error(
        "ground truth{} has neither \"findings\" nor \"report\": there is nothing to score against",
        if .0.is_empty() { String::new() } else { format!(" of case {:?}", .0) }
    )]
    Empty(String),
}

impl TruthRecord {
    /// The volume's size as far as this truth knows it, for [`super::answer::form_faults`].
    #[must_use]
    pub fn volume_size(&self) -> super::answer::VolumeSize {
        super::answer::VolumeSize {
            slice_size: self.slice_size,
            slices: self.slices,
        }
    }

    /// Reads a truth from JSON text (see the module text).
    pub fn from_json(text: &str) -> Result<Self, TruthError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| TruthError::NotJson(e.to_string()))?;
        Self::from_value(value)
    }

    /// Reads a truth from a JSON value (see the module text).
    pub fn from_value(mut value: Value) -> Result<Self, TruthError> {
        strip_nulls(&mut value);
        if !value.is_object() {
            return Err(TruthError::Field(format!(
                "expected a JSON object, found {}",
                kind(&value)
            )));
        }
        if value.get("organs").is_some() {
            let findings: Findings = serde_json::from_value(value)
                .map_err(|e| TruthError::Field(format!("findings: {e}")))?;
            return Ok(Self {
                findings: Some(findings),
                ..Self::default()
            });
        }
        let record: Self = serde_json::from_value(value).map_err(|e| {
            TruthError::Field(format!(
                "{e} (expected findings JSON, or {{\"findings\"|\"report\", \"lesion_extents\"}})"
            ))
        })?;
        if record.findings.is_none() && record.report.is_none() {
            return Err(TruthError::Empty(record.case_id));
        }
        Ok(record)
    }

    /// The true findings: given, else read from the report.
    pub fn truth_findings(&self) -> Result<Findings, TruthError> {
        match (&self.findings, &self.report) {
            (Some(findings), _) => Ok(findings.clone()),
            (None, Some(report)) => Ok(read_report(report).findings),
            (None, None) => Err(TruthError::Empty(self.case_id.clone())),
        }
    }
}

/// Removes every `null` member of every object, at any depth (a `null` in a list stays, and
/// fails where a list of values is expected).
fn strip_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, member| !member.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::{Organ, TumorPresence};

    #[test]
    fn a_record_without_findings_or_report_is_an_error_naming_the_case() {
        let error = TruthRecord::from_json(r#"{"case_id":"x"}"#).unwrap_err();
        assert_eq!(error, TruthError::Empty("x".into()));
        assert!(error.to_string().contains("case \"x\""), "{error}");
        // A misspelt key is ignored, so the record is still empty, not silently "no tumor".
        assert!(matches!(
            TruthRecord::from_json(r#"{"finding":{"organs":{}}}"#),
            Err(TruthError::Empty(_))
        ));
    }

    #[test]
    fn nulls_are_absent_keys_at_any_depth() {
        let text = r#"{"case_id":"a","findings":{"organs":{"liver":{"tumor":"yes","lesions":null}},
            "box":null,"key_slice":null},"report":null,"lesion_extents":null,"slice_size":null}"#;
        let record = TruthRecord::from_json(text).unwrap();
        let findings = record.truth_findings().unwrap();
        assert_eq!(findings.organ(Organ::Liver).tumor, TumorPresence::Yes);
        assert!(findings.organ(Organ::Liver).lesions.is_empty());
        assert!(record.lesion_extents.is_empty());
    }

    #[test]
    fn bare_findings_and_reports_are_truths() {
        let bare = TruthRecord::from_json(r#"{"organs":{"pancreas":{"tumor":"no"}}}"#).unwrap();
        assert_eq!(
            bare.truth_findings().unwrap().organ(Organ::Pancreas).tumor,
            TumorPresence::No
        );
        let report = TruthRecord::from_json(r#"{"report":"A 2 cm liver mass."}"#).unwrap();
        assert_eq!(
            report.truth_findings().unwrap().organ(Organ::Liver).tumor,
            TumorPresence::Yes
        );
    }

    #[test]
    fn wrong_types_name_the_field() {
        let error =
            TruthRecord::from_json(r#"{"findings":{"organs":{"liver":{"tumor":3}}}}"#).unwrap_err();
        assert!(matches!(error, TruthError::Field(_)), "{error}");
        assert!(matches!(
            TruthRecord::from_json("[1]"),
            Err(TruthError::Field(_))
        ));
        assert!(matches!(
            TruthRecord::from_json("{"),
            Err(TruthError::NotJson(_))
        ));
    }
}
