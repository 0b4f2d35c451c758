//! Dataset metrics of `keyslice score`: per-organ sensitivity, specificity and balanced
//! accuracy of tumor existence, attribute accuracy, key-slice hit rate and error, mean
//! consistency and hallucination rate.
//!
//! Conventions: "uncertain" counts as a reported tumor and "not mentioned" as none; `kidney`
//! is positive when either kidney is; `overall` pools every (case, organ) pair of the four
//! organs; the hallucination rate is the share of truth-negative (case, organ) pairs the
//! prediction calls positive. A metric with nothing to measure (no positive case for a
//! sensitivity) is `null`, never a made-up 0 or 1.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{AttributeCounts, LesionExtent, SizeTolerance, attribute_score, consistency};
use crate::findings::{Findings, Organ};

/// One case to score.
#[derive(Clone, Copy, Debug)]
pub struct ScoredCase<'a> {
    /// Case identifier.
    pub case_id: &'a str,
    /// True findings.
    pub truth: &'a Findings,
    /// True lesion extents (may be empty).
    pub extents: &'a [LesionExtent],
    /// Findings read from the predicted report.
    pub predicted: &'a Findings,
    /// Predicted key slice.
    pub key_slice: Option<u32>,
    /// Findings read from the local description, when given.
    pub local: Option<&'a Findings>,
}

/// Sensitivity, specificity and their mean.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct BinaryMetrics {
    /// TP / (TP + FN).
    pub sensitivity: Option<f64>,
    /// TN / (TN + FP).
    pub specificity: Option<f64>,
    /// Mean of the two (when both exist).
    pub balanced_accuracy: Option<f64>,
}

/// Attribute accuracy over true lesions stating the attribute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct AttributeMetrics {
    /// Size within tolerance.
    pub size: Option<f64>,
    /// Location agrees.
    pub location: Option<f64>,
    /// Attenuation equal.
    pub attenuation: Option<f64>,
}

/// Key-slice metrics over cases whose truth has a tumor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct KeySliceMetrics {
    /// Share of those cases whose key slice lies in a true lesion's extent (or, without
    /// masks, within the slice tolerance of the true key slice). Cases with neither extents
    /// nor a true key slice cannot be judged and are left out; a missing predicted key
    /// slice is a miss.
    pub hit_rate: Option<f64>,
    /// Mean |predicted − true largest-area slice|, in slices.
    pub mean_error_slices: Option<f64>,
}

/// A case present on one side only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MissingCase {
    /// Case identifier.
    pub case_id: String,
    /// `"predictions"` or `"truth"`: where it is missing.
    pub missing_from: String,
}

/// Everything `keyslice score --json` prints (key names are part of the interface).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DatasetMetrics {
    /// `liver`, `pancreas`, `kidney_left`, `kidney_right`, `kidney`.
    pub organs: BTreeMap<String, BinaryMetrics>,
    /// Pooled over the four organs.
    pub overall: BinaryMetrics,
    /// Attribute accuracy.
    pub attributes: AttributeMetrics,
    /// Key-slice metrics.
    pub key_slice: KeySliceMetrics,
    /// Mean consistency over cases with a local description.
    pub consistency_mean: Option<f64>,
    /// Share of truth-negative (case, organ) pairs reported positive.
    pub hallucination_rate: Option<f64>,
    /// Cases present on one side only (not scored).
    pub missing_cases: Vec<MissingCase>,
}

#[derive(Clone, Copy, Default)]
struct Confusion {
    true_positive: u32,
    false_negative: u32,
    true_negative: u32,
    false_positive: u32,
}

impl Confusion {
    fn add(&mut self, truth: bool, predicted: bool) {
        match (truth, predicted) {
            (true, true) => self.true_positive += 1,
            (true, false) => self.false_negative += 1,
            (false, false) => self.true_negative += 1,
            (false, true) => self.false_positive += 1,
        }
    }

    fn metrics(self) -> BinaryMetrics {
        let sensitivity = ratio(self.true_positive, self.true_positive + self.false_negative);
        let specificity = ratio(self.true_negative, self.true_negative + self.false_positive);
        let balanced_accuracy = match (sensitivity, specificity) {
            (Some(a), Some(b)) => Some(f64::midpoint(a, b)),
            _ => None,
        };
        BinaryMetrics {
            sensitivity,
            specificity,
            balanced_accuracy,
        }
    }
}

fn ratio(part: u32, whole: u32) -> Option<f64> {
    (whole > 0).then(|| f64::from(part) / f64::from(whole))
}

/// Computes the dataset metrics. `slice_tolerance` is the hit window in slices used when a
/// case has a true key slice but no lesion extents.
#[must_use]
pub fn dataset_metrics(
    cases: &[ScoredCase<'_>],
    missing_cases: Vec<MissingCase>,
    tolerance: SizeTolerance,
    slice_tolerance: u32,
) -> DatasetMetrics {
    let mut per_organ: BTreeMap<Organ, Confusion> = BTreeMap::new();
    let mut kidney = Confusion::default();
    let mut overall = Confusion::default();
    let mut counts = AttributeCounts::default();
    let mut hits = 0u32;
    let mut eligible = 0u32;
    let mut errors = Vec::new();
    let mut consistencies = Vec::new();
    for case in cases {
        for organ in Organ::ALL {
            let truth = case.truth.organ(organ).tumor.as_positive();
            let predicted = case.predicted.organ(organ).tumor.as_positive();
            per_organ.entry(organ).or_default().add(truth, predicted);
            overall.add(truth, predicted);
        }
        let either = |findings: &Findings| {
            findings.organ(Organ::KidneyLeft).tumor.as_positive()
                || findings.organ(Organ::KidneyRight).tumor.as_positive()
        };
        kidney.add(either(case.truth), either(case.predicted));
        let attributes = attribute_score(case.predicted, case.truth, tolerance);
        super::add_counts(&mut counts, &attributes.counts);
        if case.truth.any_tumor()
            && let Some((hit, error)) = key_slice_outcome(case, slice_tolerance)
        {
            eligible += 1;
            hits += u32::from(hit);
            if let Some(error) = error {
                errors.push(f64::from(error));
            }
        }
        if let Some(local) = case.local {
            consistencies.push(consistency(case.predicted, local, tolerance).score);
        }
    }
    let mut organs: BTreeMap<String, BinaryMetrics> = per_organ
        .into_iter()
        .map(|(organ, confusion)| (organ.key().to_string(), confusion.metrics()))
        .collect();
    organs.insert("kidney".into(), kidney.metrics());
    DatasetMetrics {
        organs,
        overall: overall.metrics(),
        attributes: AttributeMetrics {
            size: ratio(counts.size.0, counts.size.1),
            location: ratio(counts.location.0, counts.location.1),
            attenuation: ratio(counts.attenuation.0, counts.attenuation.1),
        },
        key_slice: KeySliceMetrics {
            hit_rate: ratio(hits, eligible),
            mean_error_slices: (!errors.is_empty())
                .then(|| errors.iter().sum::<f64>() / errors.len() as f64),
        },
        consistency_mean: (!consistencies.is_empty())
            .then(|| consistencies.iter().sum::<f64>() / consistencies.len() as f64),
        hallucination_rate: ratio(
            overall.false_positive,
            overall.false_positive + overall.true_negative,
        ),
        missing_cases,
    }
}

/// `(hit, error in slices)` for a case with a tumor; `None` when there is no way to judge
/// (no extents and no true key slice). A missing predicted key slice is a miss without error.
fn key_slice_outcome(case: &ScoredCase<'_>, slice_tolerance: u32) -> Option<(bool, Option<u32>)> {
    let Some(key) = case.key_slice else {
        let judgeable = !case.extents.is_empty() || case.truth.key_slice.is_some();
        return judgeable.then_some((false, None));
    };
    if !case.extents.is_empty() {
        let hit = case
            .extents
            .iter()
            .any(|extent| extent.first_slice <= key && key <= extent.last_slice);
        let error = case
            .extents
            .iter()
            .map(|extent| key.abs_diff(extent.largest_slice))
            .min();
        return Some((hit, error));
    }
    let truth = case.truth.key_slice.as_ref()?;
    let error = key.abs_diff(truth.index);
    Some((error <= slice_tolerance, Some(error)))
}
