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
/// Presence: a claimed tumor agrees when the slice shows a lesion in that organ, is not
/// shown when the slice shows lesions elsewhere only, and disagrees when the slice shows no
/// lesion at all (the named evidence does not support the report). A denied tumor disagrees
/// when the slice shows one there. Lesion values are compared with the local lesion of the
/// same organ that agrees best, like [`super::consistency`].
#[must_use]
pub fn attribute_checks(
    report: &Findings,
    local: &Findings,
    tolerance: SizeTolerance,
) -> Vec<AttributeCheck> {
    let slice_shows_any = local.any_tumor();
    let mut checks = Vec::new();
    for organ in Organ::ALL {
        let claimed = report.organ(organ);
        let shown = local.organ(organ);
        let presence = match (claimed.tumor.as_positive(), shown.tumor.as_positive()) {
            (true, true) | (false, false) => Verdict::Agrees,
            (true, false) if slice_shows_any => Verdict::NotShown,
            _ => Verdict::Disagrees,
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
        for (index, lesion) in claimed.lesions.iter().enumerate() {
            let best = shown.lesions.iter().max_by(|a, b| {
                pair_score(lesion, a, tolerance)
                    .0
                    .total_cmp(&pair_score(lesion, b, tolerance).0)
            });
            checks.extend(lesion_checks(organ, index, lesion, best, tolerance));
        }
    }
    checks
}

fn lesion_checks(
    organ: Organ,
    index: usize,
    lesion: &Lesion,
    shown: Option<&Lesion>,
    tolerance: SizeTolerance,
) -> Vec<AttributeCheck> {
    let verdict = |stated: bool, agrees: Option<bool>| match agrees {
        _ if !stated => None,
        Some(true) => Some(Verdict::Agrees),
        Some(false) => Some(Verdict::Disagrees),
        None => Some(Verdict::NotShown),
    };
    let size = verdict(
        lesion.size.is_some(),
        lesion
            .size
            .zip(shown.and_then(|s| s.size))
            .map(|(report, slice)| tolerance.agrees(slice, report)),
    );
    let location = verdict(
        lesion.location.is_some(),
        lesion
            .location
            .as_ref()
            .zip(shown.and_then(|s| s.location.as_ref()))
            .map(|(report, slice)| report.agrees_with(slice)),
    );
    let attenuation = verdict(
        lesion.attenuation.is_some(),
        lesion
            .attenuation
            .zip(shown.and_then(|s| s.attenuation))
            .map(|(report, slice)| report == slice),
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
}
