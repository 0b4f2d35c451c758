//! The E-MRL question asked of a set of AI reports against truth: of the reports that claim a
//! tumor, which are hallucinations (a tumor claimed in an organ whose truth has none), and
//! how well the report–evidence consistency tells them from grounded ones — the area under
//! the ROC curve of `1 − consistency` as a hallucination detector, with its variance with
//! cases random (the U-statistic of one reader), so a study can say whether showing the
//! evidence can help a reader catch them.

use serde::Serialize;

use super::{MrmcError, Reads, normal_quantile, reader_table};
use crate::findings::{Findings, Organ};
use crate::scoring::{SizeTolerance, consistency};

/// One AI report and what is known of its case.
pub struct ReportCase<'a> {
    /// The case.
    pub case_id: &'a str,
    /// What the report says.
    pub report: &'a Findings,
    /// What the verifier said of the key slice, when it was asked.
    pub local: Option<&'a Findings>,
    /// The truth.
    pub truth: &'a Findings,
}

/// What became of one report that claims a tumor.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Claim {
    /// The case.
    pub case_id: String,
    /// Organs the report gives a tumor.
    pub claimed: Vec<&'static str>,
    /// Of those, the organs whose truth has none.
    pub hallucinated: Vec<&'static str>,
    /// The report–evidence consistency, when the verifier was asked.
    pub consistency: Option<f64>,
}

/// The analysis.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hallucinations {
    /// Reports that claim at least one tumor.
    pub claims: usize,
    /// Of those, reports with a hallucinated tumor.
    pub hallucinated: usize,
    /// Reports whose every claimed tumor is real.
    pub grounded: usize,
    /// Claims without a verifier's description (no consistency): left out of the AUROC.
    pub without_evidence: usize,
    /// Mean consistency of hallucinated and of grounded claims.
    pub mean_consistency_hallucinated: Option<f64>,
    /// See above.
    pub mean_consistency_grounded: Option<f64>,
    /// AUROC of `1 − consistency` for telling hallucinated claims from grounded ones.
    pub auroc: Option<f64>,
    /// Its variance with cases random.
    pub auroc_variance: Option<f64>,
    /// Its 95 % interval (Normal), clipped to [0, 1].
    pub auroc_ci: Option<[f64; 2]>,
    /// Why there is no AUROC, when there is none.
    pub auroc_missing: Option<String>,
    /// Each claim.
    pub cases: Vec<Claim>,
}

/// The analysis of `cases`; also the reads (reader `consistency`, modality `verifier`, the
/// condition: a hallucinated claim) in iMRMC's form, to check the AUROC with iMRMC. Fails
/// only on a case identifier that iMRMC's format cannot hold (one with a comma).
pub fn hallucinations(
    cases: &[ReportCase<'_>],
    tolerance: SizeTolerance,
) -> Result<(Hallucinations, Reads), MrmcError> {
    let mut claims = Vec::new();
    for case in cases {
        let claimed: Vec<&'static str> = case
            .report
            .tumor_organs()
            .into_iter()
            .map(Organ::key)
            .collect();
        if claimed.is_empty() {
            continue;
        }
        let hallucinated = case
            .report
            .tumor_organs()
            .into_iter()
            .filter(|&organ| !case.truth.states_tumor(organ))
            .map(Organ::key)
            .collect();
        claims.push(Claim {
            case_id: case.case_id.to_string(),
            claimed,
            hallucinated,
            consistency: case
                .local
                .map(|local| consistency(case.report, local, tolerance).score),
        });
    }
    let is_hallucinated = |claim: &Claim| !claim.hallucinated.is_empty();
    let mean = |hallucinated: bool| {
        let values: Vec<f64> = claims
            .iter()
            .filter(|claim| is_hallucinated(claim) == hallucinated)
            .filter_map(|claim| claim.consistency)
            .collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    };
    let scored: Vec<&Claim> = claims
        .iter()
        .filter(|claim| claim.consistency.is_some())
        .collect();
    if let Some(bad) = scored
        .iter()
        .find(|claim| claim.case_id.contains(',') || claim.case_id.chars().any(char::is_control))
    {
        return Err(MrmcError::TooFew(format!(
            "the case id `{}` cannot be written in iMRMC's format (it holds a comma or a control character)",
            bad.case_id.escape_debug()
        )));
    }
    let reads = Reads::from_rows(
        scored
            .iter()
            .map(|claim| (claim.case_id.as_str(), is_hallucinated(claim))),
        scored.iter().map(|claim| {
            (
                "consistency",
                claim.case_id.as_str(),
                "verifier",
                1.0 - claim.consistency.unwrap_or(0.0),
            )
        }),
    )?;
    let (auroc, auroc_variance, auroc_missing) = match reader_table(&reads) {
        Ok(rows) => (Some(rows[0].AUCA), Some(rows[0].varAUCA), None),
        Err(MrmcError::TooFew(reason)) => (None, None, Some(reason)),
        Err(other) => (None, None, Some(other.to_string())),
    };
    let z = normal_quantile(1.0 - super::ALPHA / 2.0);
    let auroc_ci = auroc.zip(auroc_variance).map(|(auc, variance)| {
        let half = z * variance.max(0.0).sqrt();
        [(auc - half).max(0.0), (auc + half).min(1.0)]
    });
    let hallucinated = claims.iter().filter(|claim| is_hallucinated(claim)).count();
    Ok((
        Hallucinations {
            claims: claims.len(),
            hallucinated,
            grounded: claims.len() - hallucinated,
            without_evidence: claims.len() - scored.len(),
            mean_consistency_hallucinated: mean(true),
            mean_consistency_grounded: mean(false),
            auroc,
            auroc_variance,
            auroc_ci,
            auroc_missing: auroc_missing.map(|reason| {
                format!("no AUROC: {reason} (hallucinated claims are the cases with the condition)")
            }),
            cases: claims,
        },
        reads,
    ))
}
