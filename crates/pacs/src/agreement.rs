//! Agreement between reviewers who labelled the same studies: per pair of reviewers, the key
//! slice distance, Cohen's kappa of tumor presence per organ and the agreement of lesion
//! attributes; and the studies where they disagree, for adjudication.
//!
//! Pure computation on [`Findings`]; where the labels come from (SR documents in a PACS,
//! a workspace) is the caller's business.

use std::collections::BTreeMap;

use keyslice_core::findings::{Findings, Organ};
use keyslice_core::scoring::SizeTolerance;
use serde::Serialize;

/// One reviewer's label of one study.
#[derive(Clone, Debug)]
pub struct Label {
    /// The study (Study Instance UID or case id).
    pub study: String,
    /// The reviewer.
    pub reviewer: String,
    /// What they concluded.
    pub findings: Findings,
}

/// Agreement of one pair of reviewers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairAgreement {
    /// First reviewer (alphabetical).
    pub reviewer_a: String,
    /// Second reviewer.
    pub reviewer_b: String,
    /// Studies both labelled.
    pub studies: usize,
    /// Cohen's kappa of tumor presence per organ (`None` when undefined: every label the
    /// same for both, or no studies).
    pub presence_kappa: BTreeMap<Organ, Option<f64>>,
    /// Share of studies × organs with the same presence.
    pub presence_agreement: f64,
    /// Mean |Δ key slice index| over studies where both gave a key slice.
    pub mean_key_slice_distance: Option<f64>,
    /// Share of compared lesion attributes (location, attenuation, size) that agree.
    pub attribute_agreement: Option<f64>,
}

/// A study the reviewers disagree on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Disagreement {
    /// The study.
    pub study: String,
    /// The reviewers involved.
    pub reviewers: Vec<String>,
    /// What differs, in words.
    pub reasons: Vec<String>,
}

/// The whole report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgreementReport {
    /// Per pair of reviewers.
    pub pairs: Vec<PairAgreement>,
    /// Studies to adjudicate, sorted.
    pub disagreements: Vec<Disagreement>,
}

/// Compares every pair of reviewers; a key slice more than `slice_tolerance` slices apart
/// counts as a disagreement.
#[must_use]
pub fn agreement(labels: &[Label], slice_tolerance: u32) -> AgreementReport {
    // Reviewer → study → findings (a later label of the same study replaces an earlier).
    let mut by_reviewer: BTreeMap<&str, BTreeMap<&str, &Findings>> = BTreeMap::new();
    for label in labels {
        by_reviewer
            .entry(label.reviewer.as_str())
            .or_default()
            .insert(label.study.as_str(), &label.findings);
    }
    let reviewers: Vec<&str> = by_reviewer.keys().copied().collect();
    let mut pairs = Vec::new();
    let mut disagreements: BTreeMap<(String, String, String), Vec<String>> = BTreeMap::new();
    for (i, a) in reviewers.iter().enumerate() {
        for b in &reviewers[i + 1..] {
            let (labels_a, labels_b) = (&by_reviewer[a], &by_reviewer[b]);
            let common: Vec<&str> = labels_a
                .keys()
                .filter(|study| labels_b.contains_key(*study))
                .copied()
                .collect();
            let mut presence_kappa = BTreeMap::new();
            let (mut same, mut compared) = (0usize, 0usize);
            for organ in Organ::ALL {
                let pairs: Vec<(bool, bool)> = common
                    .iter()
                    .map(|study| {
                        (
                            labels_a[study].organ(organ).tumor.as_positive(),
                            labels_b[study].organ(organ).tumor.as_positive(),
                        )
                    })
                    .collect();
                same += pairs.iter().filter(|(x, y)| x == y).count();
                compared += pairs.len();
                presence_kappa.insert(organ, cohen_kappa(&pairs));
            }
            let mut tally = Tally::default();
            for study in &common {
                let (x, y) = (labels_a[study], labels_b[study]);
                let reasons = compare(x, y, slice_tolerance, &mut tally);
                if !reasons.is_empty() {
                    disagreements
                        .entry(((*study).to_string(), (*a).to_string(), (*b).to_string()))
                        .or_default()
                        .extend(reasons);
                }
            }
            pairs.push(PairAgreement {
                reviewer_a: (*a).to_string(),
                reviewer_b: (*b).to_string(),
                studies: common.len(),
                presence_kappa,
                presence_agreement: if compared == 0 {
                    0.0
                } else {
                    same as f64 / compared as f64
                },
                mean_key_slice_distance: (!tally.distances.is_empty())
                    .then(|| tally.distances.iter().sum::<f64>() / tally.distances.len() as f64),
                attribute_agreement: (tally.attributes_compared > 0)
                    .then(|| tally.attributes_same as f64 / tally.attributes_compared as f64),
            });
        }
    }
    AgreementReport {
        pairs,
        disagreements: disagreements
            .into_iter()
            .map(|((study, a, b), reasons)| Disagreement {
                study,
                reviewers: vec![a, b],
                reasons,
            })
            .collect(),
    }
}

/// What one pair of reviewers' comparisons add up to.
#[derive(Default)]
struct Tally {
    distances: Vec<f64>,
    attributes_same: usize,
    attributes_compared: usize,
}

/// Compares two labels of one study; returns the disagreements in words.
fn compare(x: &Findings, y: &Findings, slice_tolerance: u32, tally: &mut Tally) -> Vec<String> {
    let mut reasons = Vec::new();
    for organ in Organ::ALL {
        let (px, py) = (x.organ(organ).tumor, y.organ(organ).tumor);
        if px.as_positive() != py.as_positive() {
            reasons.push(format!("{organ}: tumor {px:?} vs {py:?}").to_lowercase());
        }
        let (Some(lx), Some(ly)) = (
            x.organ(organ).lesions.first(),
            y.organ(organ).lesions.first(),
        ) else {
            continue;
        };
        let mut compare = |name: &str, agree: Option<bool>| {
            if let Some(agree) = agree {
                tally.attributes_compared += 1;
                if agree {
                    tally.attributes_same += 1;
                } else {
                    reasons.push(format!("{organ} lesion: {name} differs"));
                }
            }
        };
        compare(
            "location",
            lx.location
                .as_ref()
                .zip(ly.location.as_ref())
                .map(|(p, q)| p.agrees_with(q)),
        );
        compare(
            "attenuation",
            lx.attenuation.zip(ly.attenuation).map(|(p, q)| p == q),
        );
        compare(
            "size",
            lx.size
                .zip(ly.size)
                .map(|(p, q)| SizeTolerance::default().agrees(p, q)),
        );
    }
    if let (Some(kx), Some(ky)) = (&x.key_slice, &y.key_slice) {
        let distance = kx.index.abs_diff(ky.index);
        tally.distances.push(f64::from(distance));
        if distance > slice_tolerance {
            reasons.push(format!(
                "key slices {} and {} are {distance} slices apart",
                kx.index, ky.index
            ));
        }
    }
    reasons
}

/// Cohen's kappa of two raters' yes/no labels; `None` when chance agreement is total.
#[must_use]
pub fn cohen_kappa(pairs: &[(bool, bool)]) -> Option<f64> {
    if pairs.is_empty() {
        return None;
    }
    let n = pairs.len() as f64;
    let observed = pairs.iter().filter(|(a, b)| a == b).count() as f64 / n;
    let yes_a = pairs.iter().filter(|(a, _)| *a).count() as f64 / n;
    let yes_b = pairs.iter().filter(|(_, b)| *b).count() as f64 / n;
    let expected = yes_a * yes_b + (1.0 - yes_a) * (1.0 - yes_b);
    if (1.0 - expected).abs() < 1e-12 {
        return None;
    }
    Some((observed - expected) / (1.0 - expected))
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyslice_core::findings::{KeySlice, TumorPresence};

    fn label(study: &str, reviewer: &str, liver: TumorPresence, key: u32) -> Label {
        let mut findings = Findings::default();
        findings.organ_mut(Organ::Liver).tumor = liver;
        findings.key_slice = Some(KeySlice {
            index: key,
            z_mm: None,
            sop_instance_uid: None,
            span: None,
        });
        Label {
            study: study.into(),
            reviewer: reviewer.into(),
            findings,
        }
    }

    #[test]
    fn kappa_matches_the_textbook_example() {
        // 50 items: both yes 20, a yes b no 5, a no b yes 10, both no 15 → kappa 0.4.
        let mut pairs = vec![(true, true); 20];
        pairs.extend(vec![(true, false); 5]);
        pairs.extend(vec![(false, true); 10]);
        pairs.extend(vec![(false, false); 15]);
        let kappa = cohen_kappa(&pairs).unwrap();
        assert!((kappa - 0.4).abs() < 1e-9, "{kappa}");
        assert_eq!(cohen_kappa(&[(true, true), (true, true)]), None);
    }

    #[test]
    fn disagreeing_studies_are_listed_with_their_reasons() {
        use TumorPresence::{No, Yes};
        let labels = vec![
            label("s1", "ana", Yes, 40),
            label("s1", "ben", Yes, 42),
            label("s2", "ana", Yes, 10),
            label("s2", "ben", No, 30),
            label("s3", "ana", No, 5),
            label("s3", "ben", No, 5),
        ];
        let report = agreement(&labels, 3);
        assert_eq!(report.pairs.len(), 1);
        let pair = &report.pairs[0];
        assert_eq!((pair.reviewer_a.as_str(), pair.studies), ("ana", 3));
        assert_eq!(pair.mean_key_slice_distance, Some((2.0 + 20.0 + 0.0) / 3.0));
        // Liver: (yes,yes), (yes,no), (no,no): p_o = 2/3, p_e = 2/3·1/3 + 1/3·2/3 = 4/9.
        let kappa = pair.presence_kappa[&Organ::Liver].unwrap();
        assert!((kappa - (2.0 / 3.0 - 4.0 / 9.0) / (5.0 / 9.0)).abs() < 1e-9);
        assert_eq!(report.disagreements.len(), 1);
        assert_eq!(report.disagreements[0].study, "s2");
        assert_eq!(
            report.disagreements[0].reasons.len(),
            2,
            "{:?}",
            report.disagreements
        );
    }
}
