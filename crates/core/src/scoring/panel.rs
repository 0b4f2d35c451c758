//! Truth by a panel: several experts' findings of the same cases, combined organ by organ.
//! Where the panel is unanimous or a strict majority agrees, that is the truth; where it is
//! split evenly, an adjudicator's findings decide, and without one the organ stays
//! unresolved (and its case is left out of the truth: a study is never scored against a
//! guess). The lesions of an organ are those of the first panelist who sides with the
//! decision. Fleiss' kappa says how far the panel agreed beyond chance.

use std::collections::BTreeMap;

use crate::findings::{Findings, Organ, OrganFindings, TumorPresence};

/// How one organ of one case was decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decided {
    /// Every panelist said the same.
    Unanimous,
    /// More than half said the same.
    Majority,
    /// The panel was split evenly; the adjudicator decided.
    Adjudicated,
    /// The panel was split evenly and no adjudicator said anything of it.
    Unresolved,
}

/// One organ's decision.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct OrganVote {
    /// The case.
    pub case_id: String,
    /// The organ.
    pub organ: &'static str,
    /// Panelists who called a tumor, of those who read the case.
    pub tumor_votes: usize,
    /// Panelists who read the case.
    pub panelists: usize,
    /// How it was decided.
    pub decided: Decided,
    /// The truth: a tumor or not (absent when unresolved).
    pub tumor: Option<bool>,
}

/// The panel's truth.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PanelTruth {
    /// Per case the findings decided, for the cases whose every organ was decided.
    pub truth: BTreeMap<String, Findings>,
    /// Every organ's decision.
    pub votes: Vec<OrganVote>,
    /// Fleiss' kappa of tumor presence over the (case, organ) units every panelist read
    /// (`None` when there are none, or no variation at all).
    pub kappa: Option<f64>,
}

/// Combines `panel` (one map of findings per panelist, by case) and the adjudicator's
/// findings, when there is one. A case counts once at least two panelists read it.
#[must_use]
pub fn panel_truth(
    panel: &[BTreeMap<String, Findings>],
    adjudicator: Option<&BTreeMap<String, Findings>>,
) -> PanelTruth {
    let mut cases: Vec<&String> = panel.iter().flat_map(BTreeMap::keys).collect();
    cases.sort();
    cases.dedup();
    let mut result = PanelTruth::default();
    let mut complete_units = Vec::new();
    for case in cases {
        let readings: Vec<&Findings> = panel.iter().filter_map(|one| one.get(case)).collect();
        if readings.len() < 2 {
            continue;
        }
        let mut findings = Findings::default();
        let mut resolved = true;
        for organ in Organ::ALL {
            let tumor_votes = readings
                .iter()
                .filter(|reading| reading.states_tumor(organ))
                .count();
            let panelists = readings.len();
            let (decided, tumor) = if tumor_votes == 0 || tumor_votes == panelists {
                (Decided::Unanimous, Some(tumor_votes > 0))
            } else if 2 * tumor_votes > panelists {
                (Decided::Majority, Some(true))
            } else if 2 * tumor_votes < panelists {
                (Decided::Majority, Some(false))
            } else {
                match adjudicator.and_then(|adjudicator| adjudicator.get(case)) {
                    Some(adjudicated) => {
                        (Decided::Adjudicated, Some(adjudicated.states_tumor(organ)))
                    }
                    None => (Decided::Unresolved, None),
                }
            };
            if panelists == panel.len() {
                complete_units.push(tumor_votes);
            }
            match tumor {
                Some(tumor) => {
                    let lesions = readings
                        .iter()
                        .find(|reading| reading.states_tumor(organ) == tumor)
                        .map(|reading| reading.organ(organ).lesions.clone())
                        .or_else(|| {
                            adjudicator
                                .and_then(|adjudicator| adjudicator.get(case))
                                .map(|reading| reading.organ(organ).lesions.clone())
                        })
                        .unwrap_or_default();
                    findings.organs.insert(
                        organ,
                        OrganFindings {
                            tumor: if tumor {
                                TumorPresence::Yes
                            } else {
                                TumorPresence::No
                            },
                            lesions: if tumor { lesions } else { Vec::new() },
                            span: None,
                        },
                    );
                }
                None => resolved = false,
            }
            result.votes.push(OrganVote {
                case_id: case.clone(),
                organ: organ.key(),
                tumor_votes,
                panelists,
                decided,
                tumor,
            });
        }
        if resolved {
            result.truth.insert(case.clone(), findings);
        }
    }
    result.kappa = fleiss_kappa(&complete_units, panel.len());
    result
}

/// Fleiss' kappa of a yes/no rating: `yes_counts` per unit, each rated by `raters`.
#[must_use]
pub fn fleiss_kappa(yes_counts: &[usize], raters: usize) -> Option<f64> {
    if yes_counts.is_empty() || raters < 2 {
        return None;
    }
    #[expect(clippy::cast_precision_loss, reason = "counts of raters and units")]
    let (n, units) = (raters as f64, yes_counts.len() as f64);
    let mut agreement = 0.0;
    let mut yes_total = 0.0;
    for &yes in yes_counts {
        #[expect(clippy::cast_precision_loss, reason = "counts of raters")]
        let (yes, no) = (yes as f64, (raters - yes.min(raters)) as f64);
        agreement += (yes * (yes - 1.0) + no * (no - 1.0)) / (n * (n - 1.0));
        yes_total += yes;
    }
    let observed = agreement / units;
    let share_yes = yes_total / (units * n);
    let chance = share_yes * share_yes + (1.0 - share_yes) * (1.0 - share_yes);
    if (1.0 - chance).abs() < 1e-12 {
        return None;
    }
    Some((observed - chance) / (1.0 - chance))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn findings(tumors: &[Organ]) -> Findings {
        let mut findings = Findings::default();
        for organ in Organ::ALL {
            findings.organs.insert(
                organ,
                OrganFindings {
                    tumor: if tumors.contains(&organ) {
                        TumorPresence::Yes
                    } else {
                        TumorPresence::No
                    },
                    lesions: Vec::new(),
                    span: None,
                },
            );
        }
        findings
    }

    #[test]
    fn fleiss_kappa_matches_the_worked_example() {
        // Fleiss (1971)-style check by hand: 4 units, 3 raters, yes counts 3, 0, 2, 1.
        // P̄ = (1 + 1 + 1/3 + 1/3) / 4 = 2/3; p_yes = 6/12 = 0.5, Pe = 0.5; κ = 1/3.
        let kappa = fleiss_kappa(&[3, 0, 2, 1], 3).expect("kappa");
        assert!((kappa - 1.0 / 3.0).abs() < 1e-12, "{kappa}");
        assert!(fleiss_kappa(&[3, 3, 3], 3).is_none(), "no variation");
        assert_eq!(fleiss_kappa(&[3, 0, 3, 0], 3), Some(1.0));
    }

    #[test]
    fn majority_decides_and_an_even_split_waits_for_the_adjudicator() {
        let case = |tumors: &[Organ]| BTreeMap::from([("c1".to_string(), findings(tumors))]);
        // Three panelists: two call the liver, one the pancreas too.
        let three = [
            case(&[Organ::Liver]),
            case(&[Organ::Liver, Organ::Pancreas]),
            case(&[]),
        ];
        let truth = panel_truth(&three, None);
        let decided = &truth.truth["c1"];
        assert!(decided.states_tumor(Organ::Liver));
        assert!(!decided.states_tumor(Organ::Pancreas));
        let liver = truth
            .votes
            .iter()
            .find(|v| v.organ == "liver")
            .expect("vote");
        assert_eq!((liver.tumor_votes, liver.decided), (2, Decided::Majority));
        // Two panelists split on the liver: unresolved, and the case is left out...
        let two = [case(&[Organ::Liver]), case(&[])];
        let split = panel_truth(&two, None);
        assert!(split.truth.is_empty());
        assert!(split.votes.iter().any(|v| v.decided == Decided::Unresolved));
        // ...until the adjudicator decides it.
        let adjudicator = case(&[]);
        let settled = panel_truth(&two, Some(&adjudicator));
        assert!(!settled.truth["c1"].states_tumor(Organ::Liver));
        assert!(
            settled
                .votes
                .iter()
                .any(|v| v.organ == "liver" && v.decided == Decided::Adjudicated)
        );
    }

    #[test]
    fn a_case_read_by_one_panelist_only_is_no_truth() {
        let one = BTreeMap::from([("c1".to_string(), findings(&[Organ::Liver]))]);
        let truth = panel_truth(&[one, BTreeMap::new()], None);
        assert!(truth.truth.is_empty() && truth.votes.is_empty());
    }
}
