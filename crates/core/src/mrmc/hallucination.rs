//! The E-MRL question asked of a set of AI reports against truth: of the reports that claim a
//! tumor, which are hallucinations (a tumor claimed in an organ whose truth has none), and
//! how well the report–evidence consistency tells them from grounded ones — the area under
//! the ROC curve of `1 − consistency` as a hallucination detector, with its variance with
//! cases random (the U-statistic of one reader), so a study can say whether showing the
//! evidence can help a reader catch them.

use serde::Serialize;

use super::{MrmcError, Reads, normal_quantile, reader_table};
use crate::findings::{Findings, Organ};
use crate::scoring::{SizeTolerance, Standing, consistency};

/// The consistency from which the evidence panel shows a finding in green, as agreeing (when
/// the verifier also shows it).
pub const SHOWN_AGREEING_FROM: f64 = 0.75;

/// Bootstrap resamples of the cases for the per-finding AUROC's interval.
const BOOTSTRAP_SAMPLES: usize = 2000;

/// The seed of that resampling, fixed so the interval is the same on every run.
const BOOTSTRAP_SEED: u64 = 0x4556_4944;

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

/// One claimed finding (an organ the report gives a tumor) and what the evidence showed of it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FindingClaim {
    /// The case.
    pub case_id: String,
    /// The organ.
    pub organ: &'static str,
    /// The organ's truth has no tumor: the finding is made up.
    pub made_up: bool,
    /// The verifier's standing on it (the weakest of its lesions); unverified when the
    /// verifier was not asked or did not see it.
    pub standing: Standing,
    /// Its consistency (the weakest of its lesions'; 0 unless it agrees).
    pub score: f64,
}

impl FindingClaim {
    /// Whether the evidence panel shows it as agreeing: the verifier shows it and its
    /// consistency is at least [`SHOWN_AGREEING_FROM`].
    #[must_use]
    pub fn shown_agreeing(&self) -> bool {
        self.standing == Standing::Agrees && self.score >= SHOWN_AGREEING_FROM
    }
}

/// Every claimed finding, never leaving one out: a finding without usable evidence counts as
/// unverified (score 0), not as missing.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FindingFigures {
    /// Made-up findings.
    pub made_up: usize,
    /// Findings whose organ has a tumor in truth.
    pub real: usize,
    /// AUROC of `1 − consistency` for telling made-up findings from real ones.
    pub auroc: Option<f64>,
    /// Its 95 % interval, the cases resampled (a case's findings together).
    pub auroc_ci: Option<[f64; 2]>,
    /// Share of made-up findings the panel shows as agreeing.
    pub made_up_shown_agreeing: Option<f64>,
    /// Share of real findings the panel does not show as agreeing (flagged).
    pub real_flagged: Option<f64>,
    /// Each finding.
    pub claims: Vec<FindingClaim>,
}

/// The per-finding figures of `claims` (see [`FindingFigures`]).
#[must_use]
pub fn finding_figures(claims: Vec<FindingClaim>) -> FindingFigures {
    let made_up = claims.iter().filter(|claim| claim.made_up).count();
    let real = claims.len() - made_up;
    let share = |count: usize, of: usize| (of > 0).then(|| count as f64 / of as f64);
    let made_up_shown_agreeing = share(
        claims
            .iter()
            .filter(|claim| claim.made_up && claim.shown_agreeing())
            .count(),
        made_up,
    );
    let real_flagged = share(
        claims
            .iter()
            .filter(|claim| !claim.made_up && !claim.shown_agreeing())
            .count(),
        real,
    );
    let auroc = auroc_of(claims.iter());
    // The interval: the cases resampled with replacement, each bringing all its findings
    // (grouped once, so a resample costs one pass over the findings it draws).
    let mut by_case: std::collections::BTreeMap<&str, Vec<&FindingClaim>> =
        std::collections::BTreeMap::new();
    for claim in &claims {
        by_case
            .entry(claim.case_id.as_str())
            .or_default()
            .push(claim);
    }
    let cases: Vec<&Vec<&FindingClaim>> = by_case.values().collect();
    let auroc_ci = auroc.and_then(|_| {
        let mut rng = crate::rng::Rng::new(BOOTSTRAP_SEED);
        let mut values = Vec::with_capacity(BOOTSTRAP_SAMPLES);
        for _ in 0..BOOTSTRAP_SAMPLES {
            let resampled =
                (0..cases.len()).flat_map(|_| cases[rng.below(cases.len())].iter().copied());
            values.extend(auroc_of(resampled));
        }
        values.sort_by(f64::total_cmp);
        let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
        (!values.is_empty()).then(|| [at(0.025), at(0.975)])
    });
    FindingFigures {
        made_up,
        real,
        auroc,
        auroc_ci,
        made_up_shown_agreeing,
        real_flagged,
        claims,
    }
}

/// The Mann–Whitney AUROC of `1 − score` (made-up findings the positives), ties counting
/// ½, from the ranks (`n log n`, not every pair); `None` without both kinds.
fn auroc_of<'a>(claims: impl Iterator<Item = &'a FindingClaim>) -> Option<f64> {
    let mut values: Vec<(f64, bool)> = claims
        .map(|claim| (1.0 - claim.score, claim.made_up))
        .collect();
    values.sort_by(|a, b| a.0.total_cmp(&b.0));
    let positives = values.iter().filter(|(_, made_up)| *made_up).count();
    let negatives = values.len() - positives;
    if positives == 0 || negatives == 0 {
        return None;
    }
    // Each run of equal values shares the mean of its ranks (1-based).
    let mut rank_sum = 0.0;
    let mut start = 0;
    while start < values.len() {
        let end = start
            + values[start..]
                .iter()
                .take_while(|(value, _)| value.total_cmp(&values[start].0).is_eq())
                .count();
        let mean_rank = (start + 1 + end) as f64 / 2.0;
        let in_run = values[start..end]
            .iter()
            .filter(|(_, made_up)| *made_up)
            .count();
        rank_sum += mean_rank * in_run as f64;
        start = end;
    }
    let p = positives as f64;
    Some((rank_sum - p * (p + 1.0) / 2.0) / (p * negatives as f64))
}

/// The claimed findings of one report: each organ it gives a tumor, with the verifier's
/// standing on its weakest lesion.
fn finding_claims(case: &ReportCase<'_>, tolerance: SizeTolerance) -> Vec<FindingClaim> {
    let scored = case
        .local
        .map(|local| consistency(case.report, local, tolerance));
    case.report
        .tumor_organs()
        .into_iter()
        .map(|organ| {
            let weakest = scored.as_ref().and_then(|scored| {
                scored
                    .findings
                    .iter()
                    .filter(|finding| finding.organ == organ)
                    .min_by(|a, b| a.score.total_cmp(&b.score))
                    .copied()
            });
            FindingClaim {
                case_id: case.case_id.to_string(),
                organ: organ.key(),
                made_up: !case.truth.states_tumor(organ),
                standing: weakest.map_or(Standing::Unverified, |finding| finding.standing),
                score: weakest.map_or(0.0, |finding| finding.score),
            }
        })
        .collect()
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
    /// The same question asked of each claimed finding rather than each report: whether the
    /// evidence tells a made-up finding from a real one, every finding counted.
    pub findings: FindingFigures,
}

/// The analysis of `cases`; also the reads (reader `consistency`, modality `verifier`, the
/// condition: a hallucinated claim) in iMRMC's form, to check the AUROC with iMRMC. Fails
/// only on a case identifier that iMRMC's format cannot hold (one with a comma).
pub fn hallucinations(
    cases: &[ReportCase<'_>],
    tolerance: SizeTolerance,
) -> Result<(Hallucinations, Reads), MrmcError> {
    let mut claims = Vec::new();
    let mut finding_list = Vec::new();
    for case in cases {
        finding_list.extend(finding_claims(case, tolerance));
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
            findings: finding_figures(finding_list),
        },
        reads,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AUROC from ranks equals the count over every pair, ties ½, on scores with many
    /// ties; the interval holds it and is the same on every run.
    #[test]
    fn the_rank_auroc_is_the_pairwise_one_and_its_interval_is_repeatable() {
        let mut rng = crate::rng::Rng::new(11);
        let claims: Vec<FindingClaim> = (0..300)
            .map(|k| FindingClaim {
                case_id: format!("case{}", k / 3),
                organ: "liver",
                made_up: rng.unit() < 0.4,
                standing: Standing::Agrees,
                score: (rng.below(5) as f64) / 4.0,
            })
            .collect();
        let mut pairs = 0.0;
        let mut count = 0.0;
        for p in claims.iter().filter(|claim| claim.made_up) {
            for n in claims.iter().filter(|claim| !claim.made_up) {
                pairs += match (1.0 - p.score).total_cmp(&(1.0 - n.score)) {
                    std::cmp::Ordering::Greater => 1.0,
                    std::cmp::Ordering::Equal => 0.5,
                    std::cmp::Ordering::Less => 0.0,
                };
                count += 1.0;
            }
        }
        let figures = finding_figures(claims.clone());
        let auroc = figures.auroc.expect("both kinds");
        assert!(
            (auroc - pairs / count).abs() < 1e-12,
            "{auroc} {}",
            pairs / count
        );
        let [low, high] = figures.auroc_ci.expect("an interval");
        assert!(low <= auroc && auroc <= high, "{low} {auroc} {high}");
        assert_eq!(finding_figures(claims).auroc_ci, Some([low, high]));
    }
}
