//! Per-attribute checks of a report against the verifier's local description: for every
//! value the reader took from the report (tumor presence, lesion size, location,
//! attenuation), whether what the key slice shows agrees, disagrees, or cannot say. The
//! report and evidence panels colour each value by this; [`super::consistency`] is the
//! score over the same comparisons.
//!
//! Core module: no UI.

use serde::{Deserialize, Serialize};

use super::{SizeTolerance, pair_score};
use crate::findings::{Findings, Lesion, Organ, Span};

/// Which value of a finding is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attribute {
    /// Tumor present or not.
    Presence,
    /// Lesion size.
    Size,
    /// Lesion location.
    Location,
    /// Lesion attenuation.
    Attenuation,
}

impl Attribute {
    /// The name panels show.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Presence => "presence",
            Self::Size => "size",
            Self::Location => "location",
            Self::Attenuation => "attenuation",
        }
    }
}

/// What the key slice says about one report value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The local description states the same.
    Agrees,
    /// The local description states otherwise (or shows no lesion for a claimed one).
    Disagrees,
    /// The key slice does not show it (another organ, or the description does not state it).
    NotShown,
}

/// One checked report value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttributeCheck {
    /// The organ.
    pub organ: Organ,
    /// The report lesion (index into the organ's lesions), for lesion attributes.
    pub lesion: Option<usize>,
    /// Which value.
    pub attribute: Attribute,
    /// Where the value is in the report text, when it was read from text.
    pub span: Option<Span>,
    /// The verdict.
    pub verdict: Verdict,
}

/// Checks every value the report states against the local description.
///
/// Presence: a claimed tumor agrees when the slice shows a lesion in that organ, disagrees
/// when the verifier states the organ (or the whole slice) clean, and is not shown when the
/// verifier says nothing of the organ (it is not on the key slice: the claim is unverified).
/// A denied tumor disagrees when the slice shows one there. Lesion values are compared with the local lesion of the
/// same organ that agrees best, like [`super::consistency`].
#[must_use]
pub fn attribute_checks(
    report: &Findings,
    local: &Findings,
    tolerance: SizeTolerance,
) -> Vec<AttributeCheck> {
    let mut checks = Vec::new();
    for organ in Organ::ALL {
        let claimed = report.organ(organ);
        let shown = local.organ(organ);
        let presence = match (claimed.tumor.as_positive(), shown.tumor.as_positive()) {
            (true, true) | (false, false) => Verdict::Agrees,
            (true, false) if super::verifier_denies(local, organ) => Verdict::Disagrees,
            (true, false) => Verdict::NotShown,
            (false, true) => Verdict::Disagrees,
        };
        // An organ the report never mentions and the slice does not show is no finding.
        if claimed.span.is_some() || claimed.tumor.as_positive() || shown.tumor.as_positive() {
            checks.push(AttributeCheck {
                organ,
                lesion: None,
                attribute: Attribute::Presence,
                span: claimed.span,
                verdict: presence,
            });
        }
        let pairs = if shown.tumor.as_positive() {
            lesion_pairs(&claimed.lesions, &shown.lesions, tolerance)
        } else {
            Vec::new()
        };
        for (index, lesion) in claimed.lesions.iter().enumerate() {
            // The slice lesions this report lesion is compared with; none when the slice
            // shows another of the organ's lesions (or none): not on the key slice.
            let compared: Vec<&Lesion> = pairs
                .iter()
                .filter(|(paired, _)| *paired == index)
                .map(|(_, local)| local)
                .collect();
            checks.extend(lesion_checks(organ, index, lesion, &compared, tolerance));
        }
    }
    checks
}

/// The report lesion each lesion the slice shows in an organ is compared with: the one that
/// agrees best ([`pair_score`]); a slice that shows the organ's tumor without describing a
/// lesion is one lesion stating nothing. `(report lesion index, slice lesion)` per slice
/// lesion; empty when the report has no lesion there. [`super::consistency`] scores these
/// pairs and [`attribute_checks`] colours them, so the score and the listed differences
/// come from the same comparisons.
#[must_use]
pub(super) fn lesion_pairs(
    report: &[Lesion],
    local: &[Lesion],
    tolerance: SizeTolerance,
) -> Vec<(usize, Lesion)> {
    lesion_pairs_among(report, local, tolerance, &|_| true)
}

/// [`lesion_pairs`] with only the report lesions `candidate` accepts (by index) to pair with;
/// a slice lesion none of them fits is paired with none.
pub(super) fn lesion_pairs_among(
    report: &[Lesion],
    local: &[Lesion],
    tolerance: SizeTolerance,
    candidate: &dyn Fn(usize) -> bool,
) -> Vec<(usize, Lesion)> {
    let local: Vec<Lesion> = if local.is_empty() {
        vec![Lesion::default()]
    } else {
        local.to_vec()
    };
    local
        .into_iter()
        .filter_map(|shown| {
            let best = report
                .iter()
                .enumerate()
                .filter(|(index, _)| candidate(*index))
                .max_by(|(_, a), (_, b)| {
                    pair_score(a, &shown, tolerance)
                        .0
                        .total_cmp(&pair_score(b, &shown, tolerance).0)
                })?;
            Some((best.0, shown))
        })
        .collect()
}

/// The checks of one report lesion against the slice lesions it is paired with: a value
/// disagrees when any of them states otherwise, agrees when one states the same and none
/// otherwise, and is not shown when none states it.
fn lesion_checks(
    organ: Organ,
    index: usize,
    lesion: &Lesion,
    compared: &[&Lesion],
    tolerance: SizeTolerance,
) -> Vec<AttributeCheck> {
    let verdict = |stated: bool, answers: Vec<bool>| {
        if !stated {
            None
        } else if answers.contains(&false) {
            Some(Verdict::Disagrees)
        } else if answers.is_empty() {
            Some(Verdict::NotShown)
        } else {
            Some(Verdict::Agrees)
        }
    };
    let size = verdict(
        lesion.size.is_some(),
        compared
            .iter()
            .filter_map(|shown| lesion.size.zip(shown.size))
            .map(|(report, slice)| tolerance.agrees(slice, report))
            .collect(),
    );
    let location = verdict(
        lesion.location.is_some(),
        compared
            .iter()
            .filter_map(|shown| lesion.location.as_ref().zip(shown.location.as_ref()))
            .map(|(report, slice)| report.agrees_with(slice))
            .collect(),
    );
    let attenuation = verdict(
        lesion.attenuation.is_some(),
        compared
            .iter()
            .filter_map(|shown| lesion.attenuation.zip(shown.attenuation))
            .map(|(report, slice)| report == slice)
            .collect(),
    );
    [
        (Attribute::Size, size, lesion.spans.size),
        (Attribute::Location, location, lesion.spans.location),
        (
            Attribute::Attenuation,
            attenuation,
            lesion.spans.attenuation,
        ),
    ]
    .into_iter()
    .filter_map(|(attribute, verdict, span)| {
        verdict.map(|verdict| AttributeCheck {
            organ,
            lesion: Some(index),
            attribute,
            span,
            verdict,
        })
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::read_report;

    fn findings(text: &str) -> Findings {
        read_report(text).findings
    }

    #[test]
    fn a_hallucinated_pancreas_lesion_is_not_supported_by_a_clean_slice() {
        let report = findings(
            "Pancreas: a 2.5 x 2.0 cm hypoattenuating lesion in the pancreatic head. \
             Liver: no focal lesion.",
        );
        let local = findings("No lesion is visible on this slice.");
        let checks = attribute_checks(&report, &local, SizeTolerance::default());
        let presence = checks
            .iter()
            .find(|c| c.organ == Organ::Pancreas && c.attribute == Attribute::Presence)
            .expect("pancreas presence checked");
        assert_eq!(presence.verdict, Verdict::Disagrees);
        assert!(presence.span.is_some());
        let size = checks
            .iter()
            .find(|c| c.attribute == Attribute::Size)
            .expect("size checked");
        assert_eq!(size.verdict, Verdict::NotShown);
        let liver = checks
            .iter()
            .find(|c| c.organ == Organ::Liver)
            .expect("liver checked");
        assert_eq!(liver.verdict, Verdict::Agrees);
    }

    #[test]
    fn matching_and_conflicting_lesion_values_are_told_apart() {
        let report =
            findings("Liver: a 3.0 x 2.5 cm hypoattenuating lesion in segment 7. Kidneys: normal.");
        let local = findings("Liver: a 3.2 x 2.4 cm hyperattenuating lesion in segment 7.");
        let checks = attribute_checks(&report, &local, SizeTolerance::default());
        let verdict = |attribute| {
            checks
                .iter()
                .find(|c| c.organ == Organ::Liver && c.attribute == attribute)
                .map(|c| c.verdict)
        };
        assert_eq!(verdict(Attribute::Presence), Some(Verdict::Agrees));
        assert_eq!(verdict(Attribute::Size), Some(Verdict::Agrees));
        assert_eq!(verdict(Attribute::Location), Some(Verdict::Agrees));
        assert_eq!(verdict(Attribute::Attenuation), Some(Verdict::Disagrees));
    }

    #[test]
    fn a_second_lesion_off_the_key_slice_is_unverified_rather_than_differing() {
        let report = findings(
            "Liver lesion 1: Location: segment 7. Size: 2.6 x 1.4 cm. Attenuation: \
             hypoattenuating.\nLiver lesion 2: Location: segment 3. Size: 1.0 x 0.6 cm. \
             Attenuation: hyperattenuating.",
        );
        let local = findings("Liver: a 2.5 x 1.5 cm hypoattenuating lesion in segment 7.");
        let tolerance = SizeTolerance::default();
        let checks = attribute_checks(&report, &local, tolerance);
        let second: Vec<Verdict> = checks
            .iter()
            .filter(|check| check.lesion == Some(1))
            .map(|check| check.verdict)
            .collect();
        assert_eq!(second, [Verdict::NotShown; 3], "{checks:?}");
        // The key slice bears out the first lesion; the second has no evidence, and the case
        // takes its weakest finding.
        let score = super::super::consistency(&report, &local, tolerance);
        let standings: Vec<_> = score
            .findings
            .iter()
            .map(|f| (f.standing, f.score))
            .collect();
        assert_eq!(
            standings,
            [
                (super::super::Standing::Agrees, 1.0),
                (super::super::Standing::Unverified, 0.0)
            ],
            "{score:?}"
        );
        assert!(score.has_unverified());
        assert!(score.score.abs() < 1e-9, "{score:?}");
    }

    /// Every per-attribute figure of the consistency is below 1 exactly when a check of that
    /// attribute disagrees: the headline and the listed differences never contradict.
    #[test]
    fn the_score_and_the_listed_differences_agree_on_random_findings() {
        let mut rng = crate::rng::Rng::new(7);
        let sizes = ["1.0 x 0.8", "2.6 x 1.4", "4.0 x 3.0"];
        let places = ["segment 7", "segment 3", "segment 4"];
        let kinds = ["hypoattenuating", "hyperattenuating", "isoattenuating"];
        let lesion = |rng: &mut crate::rng::Rng, number: usize| {
            format!(
                "Liver lesion {number}: Location: {}. Size: {} cm. Attenuation: {}.\n",
                places[rng.below(3)],
                sizes[rng.below(3)],
                kinds[rng.below(3)]
            )
        };
        let text = |rng: &mut crate::rng::Rng, none: &str| match rng.below(3) {
            0 => none.to_string(),
            1 => lesion(rng, 1),
            _ => lesion(rng, 1) + &lesion(rng, 2),
        };
        let tolerance = SizeTolerance::default();
        for _ in 0..400 {
            let report = findings(&text(&mut rng, "Liver: no tumor."));
            let local = findings(&text(&mut rng, "No lesion is visible on this slice."));
            let score = super::super::consistency(&report, &local, tolerance);
            let checks = attribute_checks(&report, &local, tolerance);
            let differs = |attribute| {
                checks.iter().any(|check| {
                    check.attribute == attribute && check.verdict == Verdict::Disagrees
                })
            };
            for (attribute, value) in [
                (Attribute::Presence, Some(score.organ)),
                (Attribute::Size, score.size),
                (Attribute::Location, score.location),
                (Attribute::Attenuation, score.attenuation),
            ] {
                assert_eq!(
                    value.is_some_and(|value| value < 1.0),
                    differs(attribute),
                    "{attribute:?}: {score:?} against {checks:?}"
                );
            }
        }
    }

    /// Each way the verifier can stand on a claim: it shows it, states the organ clean,
    /// cannot see it, or shows a lesion the report lacks; only the first agrees.
    #[test]
    fn a_claim_the_verifier_denies_or_cannot_see_scores_zero_and_the_case_its_weakest() {
        use super::super::Standing;
        let tolerance = SizeTolerance::default();
        let report = findings(
            "Liver: a 3.0 x 2.5 cm hypoattenuating lesion in segment 7. \
             Pancreas: a 2.0 cm lesion in the pancreatic tail. Kidneys: no tumor.",
        );
        let standing = |local: &str, organ: Organ| {
            let score = super::super::consistency(&report, &findings(local), tolerance);
            let finding = score
                .findings
                .iter()
                .find(|finding| finding.organ == organ)
                .copied()
                .expect("the organ's finding");
            (finding.standing, finding.score, score.score)
        };
        // The slice shows the liver lesion and states the pancreas clean: the pancreas claim
        // is denied, and the case scores 0 however well the liver agrees.
        let denied = "Slice 40: hypoattenuating lesion in the liver (hepatic segment 7), \
                      3.1 x 2.4 cm. Slice 40: no lesion in the pancreas.";
        assert_eq!(standing(denied, Organ::Liver), (Standing::Agrees, 1.0, 0.0));
        assert_eq!(
            standing(denied, Organ::Pancreas),
            (Standing::Denied, 0.0, 0.0)
        );
        // The pancreas is not on the slice: unverified, never agreeing.
        let unseen =
            "Slice 40: hypoattenuating lesion in the liver (hepatic segment 7), 3.1 x 2.4 cm.";
        assert_eq!(
            standing(unseen, Organ::Pancreas),
            (Standing::Unverified, 0.0, 0.0)
        );
        // A kidney lesion the report calls absent.
        let missed = "Slice 40: lesion in the left kidney.";
        assert_eq!(
            standing(missed, Organ::KidneyLeft),
            (Standing::NotReported, 0.0, 0.0)
        );
        // A whole slice called clean denies every claim.
        assert_eq!(
            standing("Slice 40: no lesion.", Organ::Liver),
            (Standing::Denied, 0.0, 0.0)
        );
        // A tumor-free report on a clean slice agrees.
        let clean = findings("Liver: no tumor. Pancreas: no tumor. Kidneys: no tumor.");
        let score = super::super::consistency(
            &clean,
            &findings("No lesion is visible on this slice."),
            tolerance,
        );
        assert!(score.findings.is_empty());
        assert!((score.score - 1.0).abs() < 1e-12, "{score:?}");
    }
}
