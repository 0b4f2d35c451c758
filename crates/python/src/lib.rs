//! `keyslice_reward._native`: the findings reader and the E-MRL reward of Keyslice for
//! Python, so that verl and ms-swift train on the reward `keyslice score --per-case` reports.
//!
//! The Python package around it (`python/keyslice_reward`) adds verl's `compute_score` and
//! the ms-swift reward plugin. A ground truth that cannot be read raises `ValueError` naming
//! the field: a training sample never gets a reward computed against a wrong truth. A
//! garbled answer is not an error; it fails the reward's form check and earns at most 0.1.

use keyslice_core::findings::read_report;
use keyslice_core::scoring::{Reference, RewardWeights, SizeTolerance, TruthRecord, score_answer};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

fn weights_of(json: Option<&str>) -> Result<RewardWeights, String> {
    let Some(json) = json else {
        return Ok(RewardWeights::default());
    };
    let weights: RewardWeights =
        serde_json::from_str(json).map_err(|e| format!("reward weights: {e}"))?;
    let all = [
        weights.format,
        weights.existence,
        weights.attributes,
        weights.localization,
        weights.consistency,
    ];
    if all.iter().any(|w| !w.is_finite() || *w < 0.0) {
        return Err(format!(
            "reward weights must be finite and not negative: {all:?}"
        ));
    }
    Ok(weights)
}

/// The reward of `answer` against `ground_truth` (JSON text), with `local_description` the
/// verifier's text about the answer's key slice when there is one, and `weights` a JSON
/// object of the five term weights (all 1 by default). Returns the result as JSON text:
/// `{"rewards": {format, existence, attributes, localization, consistency, total},
/// "problems": [...], "unread": n, "faults": [...]}`. The truth is read by the same
/// definition as `keyslice score` (`TruthRecord`: nulls are absent keys, a truth with neither
/// findings nor report is an error).
#[pyfunction]
#[pyo3(signature = (answer, ground_truth, local_description=None, weights=None))]
fn score(
    answer: &str,
    ground_truth: &str,
    local_description: Option<&str>,
    weights: Option<&str>,
) -> PyResult<String> {
    let truth = TruthRecord::from_json(ground_truth)
        .map_err(|error| PyValueError::new_err(error.to_string()))?;
    let findings = truth
        .truth_findings()
        .map_err(|error| PyValueError::new_err(error.to_string()))?;
    let weights = weights_of(weights).map_err(PyValueError::new_err)?;
    let reference = Reference {
        findings: &findings,
        lesion_extents: &truth.lesion_extents,
    };
    let scored = score_answer(
        answer,
        local_description,
        &reference,
        &weights,
        SizeTolerance::default(),
        truth.volume_size(),
    );
    serde_json::to_string(&scored).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// A report read into findings JSON (what Keyslice understood), with the sentences it could
/// not read and the evidence it could not use.
#[pyfunction]
fn read(text: &str) -> PyResult<String> {
    serde_json::to_string(&read_report(text)).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The module.
#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(score, module)?)?;
    module.add_function(wrap_pyfunction!(read, module)?)?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
