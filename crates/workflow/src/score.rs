//! Predictions scored against truth: the paper's metrics for a set of predictions (JSONL, or
//! case folders in the phantom / AbdomenAtlas layout), and each case's E-MRL reward as
//! training computes it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use keyslice_core::findings::{Findings, read_report};
use keyslice_core::scoring::metrics::{
    BinaryMetrics, DatasetMetrics, MissingCase, ScoredCase, dataset_metrics,
};
use keyslice_core::scoring::{
    LesionExtent, Prediction, Reference, RewardWeights, SizeTolerance, VolumeSize, rewards,
    score_answer,
};
use keyslice_io::cases::{PredictionRecord, read_predictions, read_truth};

use crate::Error;

/// One matched case, owned, before the metrics borrow it.
struct OwnedCase {
    case_id: String,
    truth: Findings,
    extents: Vec<LesionExtent>,
    size: VolumeSize,
    predicted: Findings,
    key_slice: Option<u32>,
    local: Option<Findings>,
}

/// Predictions scored against truth.
pub struct Scored {
    /// The dataset's metrics.
    pub metrics: DatasetMetrics,
    /// Cases matched and scored.
    pub scored: usize,
    /// Each matched case's reward as training computes it (one JSON object each).
    pub per_case: Vec<serde_json::Value>,
}

/// Scores the predictions of `pred` against the truth of `truth` (JSONL, or case folders):
/// the paper's metrics over the matched cases (those on one side only listed as missing),
/// and each case's E-MRL reward.
pub fn score(
    pred: &Path,
    truth_path: &Path,
    tolerance: SizeTolerance,
    slice_tolerance: u32,
) -> Result<Scored, Error> {
    let predictions = read_predictions(pred)?;
    let truth = read_truth(truth_path)?;
    let mut truth_by_case = BTreeMap::new();
    for record in truth {
        truth_by_case.insert(record.case_id.clone(), record);
    }
    let mut prediction_by_case = BTreeMap::new();
    for record in predictions {
        prediction_by_case.insert(record.case_id.clone(), record);
    }
    let mut missing = Vec::new();
    // Owned inputs first, then borrowed views for the metrics.
    let mut owned: Vec<OwnedCase> = Vec::new();
    for (case_id, prediction) in &prediction_by_case {
        let Some(truth) = truth_by_case.get(case_id) else {
            missing.push(MissingCase {
                case_id: case_id.clone(),
                missing_from: "truth".into(),
            });
            continue;
        };
        let predicted = prediction.predicted_findings();
        let key_slice = prediction.key_slice_index(&predicted);
        let local = prediction
            .local_description
            .as_deref()
            .map(|text| read_report(text).findings);
        owned.push(OwnedCase {
            case_id: case_id.clone(),
            truth: truth
                .truth_findings()
                .map_err(|error| Error::Argument(format!("{error} ({})", truth_path.display())))?,
            extents: truth.lesion_extents.clone(),
            size: truth.volume_size(),
            predicted,
            key_slice,
            local,
        });
    }
    for case_id in truth_by_case.keys() {
        if !prediction_by_case.contains_key(case_id) {
            missing.push(MissingCase {
                case_id: case_id.clone(),
                missing_from: "predictions".into(),
            });
        }
    }
    missing.sort_by(|a, b| a.case_id.cmp(&b.case_id));
    let cases: Vec<ScoredCase<'_>> = owned
        .iter()
        .map(|case| ScoredCase {
            case_id: &case.case_id,
            truth: &case.truth,
            extents: &case.extents,
            predicted: &case.predicted,
            key_slice: case.key_slice,
            local: case.local.as_ref(),
        })
        .collect();
    let per_case = owned
        .iter()
        .map(|case| per_case(&prediction_by_case[&case.case_id], case, tolerance))
        .collect();
    let scored = cases.len();
    let metrics = dataset_metrics(&cases, missing, tolerance, slice_tolerance);
    Ok(Scored {
        metrics,
        scored,
        per_case,
    })
}

/// One case's reward line: the answer text scored as training scores it when the record is
/// a report alone, else the record's findings and key slice.
fn per_case(
    record: &PredictionRecord,
    case: &OwnedCase,
    tolerance: SizeTolerance,
) -> serde_json::Value {
    let reference = Reference {
        findings: &case.truth,
        lesion_extents: &case.extents,
    };
    let weights = RewardWeights::default();
    let text_alone = record
        .report
        .as_deref()
        .filter(|_| record.findings.is_none() && record.key_slice.is_none());
    let (rewards, problems, faults) = if let Some(report) = text_alone {
        let scored = score_answer(
            report,
            record.local_description.as_deref(),
            &reference,
            &weights,
            tolerance,
            case.size,
        );
        let faults: Vec<String> = scored.faults.iter().map(ToString::to_string).collect();
        (scored.rewards, scored.problems, faults)
    } else {
        let prediction = Prediction {
            report: &case.predicted,
            key_slice: case.key_slice,
            slice_box: case.predicted.slice_box.as_ref(),
            local_description: case.local.as_ref(),
        };
        (
            rewards(&prediction, &reference, &weights, tolerance),
            Vec::new(),
            Vec::new(),
        )
    };
    serde_json::json!({
        "case_id": case.case_id,
        "reward": rewards.total,
        "rewards": rewards,
        "problems": problems,
        "faults": faults,
    })
}

fn percent(value: Option<f64>) -> String {
    value.map_or_else(|| "   –  ".to_string(), |v| format!("{:5.1}%", 100.0 * v))
}

impl Scored {
    /// The readable table.
    #[must_use]
    pub fn table(&self) -> String {
        table(&self.metrics, self.scored)
    }
}

fn table(metrics: &DatasetMetrics, scored: usize) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(out, "{scored} case(s) scored\n");
    let _ = writeln!(
        out,
        "{:<14}{:>12}{:>12}{:>12}",
        "existence", "sensitivity", "specificity", "balanced"
    );
    let row = |out: &mut String, name: &str, m: &BinaryMetrics| {
        let _ = writeln!(
            out,
            "{name:<14}{:>12}{:>12}{:>12}",
            percent(m.sensitivity),
            percent(m.specificity),
            percent(m.balanced_accuracy)
        );
    };
    for name in ["liver", "pancreas", "kidney_left", "kidney_right", "kidney"] {
        if let Some(m) = metrics.organs.get(name) {
            row(&mut out, name, m);
        }
    }
    row(&mut out, "overall", &metrics.overall);
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "attributes    size {}  location {}  attenuation {}",
        percent(metrics.attributes.size),
        percent(metrics.attributes.location),
        percent(metrics.attributes.attenuation)
    );
    let _ = writeln!(
        out,
        "key slice     hit rate {}  mean error {}",
        percent(metrics.key_slice.hit_rate),
        metrics
            .key_slice
            .mean_error_slices
            .map_or_else(|| "–".to_string(), |e| format!("{e:.1} slices"))
    );
    let _ = writeln!(
        out,
        "consistency   mean {}",
        percent(metrics.consistency_mean)
    );
    let _ = writeln!(
        out,
        "hallucination rate {}",
        percent(metrics.hallucination_rate)
    );
    for missing in &metrics.missing_cases {
        let _ = writeln!(
            out,
            "missing       {} (not in {})",
            missing.case_id, missing.missing_from
        );
    }
    out
}
