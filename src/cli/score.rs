//! `keyslice score --pred PRED.jsonl --truth TRUTH [--json | --per-case]`: the paper's metrics
//! for a set of predictions against truth (JSONL, or case folders in the phantom /
//! AbdomenAtlas layout), or each case's E-MRL reward as training computes it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::findings::{Findings, read_report};
use crate::io::cases::{PredictionRecord, read_predictions, read_truth};
use crate::scoring::metrics::{
    BinaryMetrics, DatasetMetrics, MissingCase, ScoredCase, dataset_metrics,
};
use crate::scoring::{
    LesionExtent, Prediction, Reference, RewardWeights, SizeTolerance, VolumeSize, rewards,
    score_answer,
};

/// Arguments of `score`.
#[derive(Debug, Args)]
pub struct ScoreArgs {
    /// Predictions, one JSON object per line (see `docs/manual.md`).
    #[arg(long)]
    pub pred: PathBuf,
    /// Truth: a JSONL file, or a folder of case folders (truth.json or AbdomenAtlas masks).
    #[arg(long)]
    pub truth: PathBuf,
    /// Print JSON (keys listed in `docs/manual.md`).
    #[arg(long)]
    pub json: bool,
    /// Print each case's reward terms instead, one JSON object per line (the reward that
    /// verl's `compute_score` and the ms-swift plugin of the Python module compute).
    #[arg(long, conflicts_with = "json")]
    pub per_case: bool,
    /// Relative size tolerance.
    #[arg(long, default_value_t = 0.2)]
    pub size_tolerance: f64,
    /// Absolute size tolerance in cm.
    #[arg(long, default_value_t = 0.5)]
    pub size_tolerance_cm: f64,
    /// Key-slice hit window in slices, for cases without lesion masks.
    #[arg(long, default_value_t = 2)]
    pub slice_tolerance: u32,
}

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

/// Runs `score`.
pub fn run(args: &ScoreArgs) -> Result<(), CliError> {
    let predictions = read_predictions(&args.pred)?;
    let truth = read_truth(&args.truth)?;
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
            truth: truth.truth_findings().map_err(|error| {
                CliError::Argument(format!("{error} ({})", args.truth.display()))
            })?,
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
    let tolerance = SizeTolerance {
        relative: args.size_tolerance,
        absolute_cm: args.size_tolerance_cm,
    };
    let mut stdout = std::io::stdout().lock();
    if args.per_case {
        for case in &owned {
            let record = &prediction_by_case[&case.case_id];
            let line = per_case(record, case, tolerance);
            writeln!(stdout, "{line}")?;
        }
        return Ok(());
    }
    let metrics = dataset_metrics(&cases, missing, tolerance, args.slice_tolerance);
    if args.json {
        serde_json::to_writer_pretty(&mut stdout, &metrics).map_err(std::io::Error::from)?;
        writeln!(stdout)?;
    } else {
        write!(stdout, "{}", table(&metrics, cases.len()))?;
    }
    Ok(())
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

/// The readable table.
#[must_use]
pub fn table(metrics: &DatasetMetrics, scored: usize) -> String {
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
