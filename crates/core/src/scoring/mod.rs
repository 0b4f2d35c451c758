//! The E-MRL reward terms and the dataset metrics of `keyslice score`, as plain functions of
//! [`Findings`], with the formulas written next to the code.
//!
//! Every term lies in [0, 1]. A prediction is a report (read into findings), a key slice and,
//! optionally, the verifier's local description of that slice. The reference is the truth
//! findings and, when masks are known, each lesion's slice extent.
//!
//! | term | formula |
//! |---|---|
//! | format | ½·[the report states something about an organ] + ½·[a key slice is given, or no tumor is claimed] |
//! | existence | mean over the four organs of 1 (definite and right), ½ (uncertain), 0 (wrong); not mentioned counts as "no" |
//! | attributes | lesions matched within each organ (best pairs first; an organ given a tumor with no lesion described has one undescribed lesion); a pair scores the mean of the truth's attributes it gets right (size within tolerance, overlapping location, same attenuation); sum of pair scores ÷ Σ max(truth lesions, predicted lesions); 1 when neither side describes a lesion |
//! | localization | mean of the slice part and the box part, each when it can be scored. Slice: key slice inside a true lesion's slice extent (from masks, else the truth's `lesion_slices` around its key slice): ½ + ½·(1 − distance to that lesion's largest-area slice ÷ its half extent); outside every extent: 0. Box: when the truth has a box, IoU of the predicted box with it if the predicted key slice lies in a true extent (or within 2 slices of the true key slice), else 0 |
//! | consistency | see [`consistency`]: per finding, whether the verifier shows it (values compared), denies it or cannot see it (0); the case scores its weakest finding |
//! | total | Σ weightᵢ·termᵢ ÷ Σ weightᵢ over the terms that were scored |
//!
//! Core module: no file formats, no GPU, no UI.

pub mod answer;
pub mod checks;
pub mod metrics;
pub mod panel;
pub mod truth;

use serde::{Deserialize, Serialize};

pub use answer::{AnswerScore, FormFault, VolumeSize, score_answer};
pub use checks::{Attribute, AttributeCheck, Verdict, attribute_checks};
pub use truth::{TruthError, TruthRecord};

pub use crate::findings::LesionExtent;
use crate::findings::{Findings, Lesion, LesionSize, Organ, SliceBox, TumorPresence};

/// Weights of the reward terms (defaults: all 1, i.e. the plain mean of the scored terms).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RewardWeights {
    /// Format term.
    pub format: f64,
    /// Existence term.
    pub existence: f64,
    /// Attributes term.
    pub attributes: f64,
    /// Localization term.
    pub localization: f64,
    /// Cross-view consistency term.
    pub consistency: f64,
}

/// What is wrong with a `name=value,…` list of reward weights.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RewardWeightsError {
    /// A part is not `name=value`.
    #[error("`{0}` is not name=value")]
    NotPair(String),
    /// A value is not a number.
    #[error("`{value}` is not a number (in `{part}`)")]
    NotNumber {
        /// The value.
        value: String,
        /// The part it is in.
        part: String,
    },
    /// A weight is negative or not finite.
    #[error("the weight of {0} must be a number ≥ 0")]
    Negative(String),
    /// A name that is no term.
    #[error("unknown term `{0}` (format, existence, attributes, localization, consistency)")]
    UnknownTerm(String),
}

impl RewardWeights {
    /// The terms' names, in the order the reward lists them.
    pub const TERMS: [&'static str; 5] = [
        "format",
        "existence",
        "attributes",
        "localization",
        "consistency",
    ];

    /// The weight of the term `name`, when it is one.
    fn term_mut(&mut self, name: &str) -> Option<&mut f64> {
        match name {
            "format" => Some(&mut self.format),
            "existence" => Some(&mut self.existence),
            "attributes" => Some(&mut self.attributes),
            "localization" => Some(&mut self.localization),
            "consistency" => Some(&mut self.consistency),
            _ => None,
        }
    }

    /// Weights from `name=value` pairs separated by commas (`existence=2,format=0.5`); the
    /// terms not named keep their default.
    pub fn parse(text: &str) -> Result<Self, RewardWeightsError> {
        let mut weights = Self::default();
        for part in text
            .split(',')
            .map(str::trim)
            .filter(|part| !part.is_empty())
        {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| RewardWeightsError::NotPair(part.to_string()))?;
            let value: f64 = value
                .trim()
                .parse()
                .map_err(|_| RewardWeightsError::NotNumber {
                    value: value.to_string(),
                    part: part.to_string(),
                })?;
            if !(value.is_finite() && value >= 0.0) {
                return Err(RewardWeightsError::Negative(name.to_string()));
            }
            let slot = weights
                .term_mut(name.trim())
                .ok_or_else(|| RewardWeightsError::UnknownTerm(name.trim().to_string()))?;
            *slot = value;
        }
        Ok(weights)
    }
}

impl Default for RewardWeights {
    fn default() -> Self {
        Self {
            format: 1.0,
            existence: 1.0,
            attributes: 1.0,
            localization: 1.0,
            consistency: 1.0,
        }
    }
}

/// When two sizes agree: `|predicted − truth| ≤ max(absolute_cm, relative · truth)` on the
/// long axis, and on the short axis when both give one. Defaults: 0.5 cm or 20 %.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SizeTolerance {
    /// Relative tolerance (0.2 = 20 %).
    pub relative: f64,
    /// Absolute tolerance in cm.
    pub absolute_cm: f64,
}

impl Default for SizeTolerance {
    fn default() -> Self {
        Self {
            relative: 0.2,
            absolute_cm: 0.5,
        }
    }
}

impl SizeTolerance {
    /// Whether `predicted` agrees with `truth`.
    #[must_use]
    pub fn agrees(&self, predicted: LesionSize, truth: LesionSize) -> bool {
        let close = |p: f64, t: f64| (p - t).abs() <= self.absolute_cm.max(self.relative * t.abs());
        let short_ok = match (predicted.short_cm, truth.short_cm) {
            (Some(p), Some(t)) => close(p, t),
            _ => true,
        };
        close(predicted.long_cm, truth.long_cm) && short_ok
    }
}

/// Agreement between a report and a local description: the score (the weakest finding's),
/// per attribute and per finding.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Consistency {
    /// Overall score in [0, 1]: mean of the components below that could be compared.
    pub score: f64,
    /// The organ the slice shows a lesion in is one the report gives a tumor (or, when the
    /// slice shows none, the report claims none).
    pub organ: f64,
    /// Locations agree (when both state one).
    pub location: Option<f64>,
    /// Attenuations agree (when both state one).
    pub attenuation: Option<f64>,
    /// In-plane sizes agree within tolerance (when both state one).
    pub size: Option<f64>,
    /// The verifier's answer about the box it was shown agrees with the report (when it was
    /// asked): see [`region_agreement`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<f64>,
    /// The verifier's standing on each finding (empty in results made before findings were
    /// verified one by one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<FindingConsistency>,
}

/// All reward terms for one prediction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rewards {
    /// Format term.
    pub format: f64,
    /// Existence term.
    pub existence: f64,
    /// Attributes term.
    pub attributes: f64,
    /// Localization term, when lesion extents are known and the truth has lesions.
    pub localization: Option<f64>,
    /// Consistency, when a local description was given.
    pub consistency: Option<Consistency>,
    /// Weighted mean of the scored terms.
    pub total: f64,
}

/// What is scored.
#[derive(Clone, Copy, Debug)]
pub struct Prediction<'a> {
    /// Findings read from the predicted report.
    pub report: &'a Findings,
    /// The predicted key slice.
    pub key_slice: Option<u32>,
    /// The predicted box on the key slice.
    pub slice_box: Option<&'a SliceBox>,
    /// Findings read from the verifier's local description of the key slice.
    pub local_description: Option<&'a Findings>,
}

/// The truth for one case.
#[derive(Clone, Copy, Debug)]
pub struct Reference<'a> {
    /// True findings.
    pub findings: &'a Findings,
    /// True lesions' slice extents (empty when no masks are known).
    pub lesion_extents: &'a [LesionExtent],
}

/// Format term (see the module table).
#[must_use]
pub fn format_score(prediction: &Prediction<'_>) -> f64 {
    let states_something = prediction
        .report
        .organs
        .values()
        .any(|organ| organ.tumor != TumorPresence::NotMentioned);
    let evidence = prediction.key_slice.is_some() || !prediction.report.any_tumor();
    0.5 * f64::from(u8::from(states_something)) + 0.5 * f64::from(u8::from(evidence))
}

/// Existence term for one organ.
#[must_use]
pub fn organ_existence(predicted: TumorPresence, truth: TumorPresence) -> f64 {
    match predicted {
        TumorPresence::Uncertain => 0.5,
        _ if predicted.as_positive() == truth.as_positive() => 1.0,
        _ => 0.0,
    }
}

/// Existence term (see the module table).
#[must_use]
pub fn existence_score(predicted: &Findings, truth: &Findings) -> f64 {
    Organ::ALL
        .iter()
        .map(|&organ| organ_existence(predicted.organ(organ).tumor, truth.organ(organ).tumor))
        .sum::<f64>()
        / Organ::ALL.len() as f64
}

/// Right/total counts per attribute over true lesions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributeCounts {
    /// True lesions with a size / sizes matched right.
    pub size: (u32, u32),
    /// Same for location.
    pub location: (u32, u32),
    /// Same for attenuation.
    pub attenuation: (u32, u32),
}

/// Attributes term and the per-attribute counts behind it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttributeScore {
    /// The term in [0, 1].
    pub score: f64,
    /// (right, total) per attribute, over true lesions that state it.
    pub counts: AttributeCounts,
}

/// Score of predicted lesion `p` against true lesion `t`: the mean over the attributes the
/// truth states of whether the prediction gets them right (1 when the truth states none).
fn pair_score(p: &Lesion, t: &Lesion, tolerance: SizeTolerance) -> (f64, AttributeCounts) {
    let mut counts = AttributeCounts::default();
    let mut right = 0u32;
    let mut total = 0u32;
    if let Some(truth_size) = t.size {
        let ok = p
            .size
            .is_some_and(|size| tolerance.agrees(size, truth_size));
        counts.size = (u32::from(ok), 1);
        right += u32::from(ok);
        total += 1;
    }
    if let Some(truth_location) = &t.location {
        let ok = p
            .location
            .as_ref()
            .is_some_and(|l| l.agrees_with(truth_location));
        counts.location = (u32::from(ok), 1);
        right += u32::from(ok);
        total += 1;
    }
    if let Some(truth_attenuation) = t.attenuation {
        let ok = p.attenuation == Some(truth_attenuation);
        counts.attenuation = (u32::from(ok), 1);
        right += u32::from(ok);
        total += 1;
    }
    let score = if total == 0 {
        1.0
    } else {
        f64::from(right) / f64::from(total)
    };
    (score, counts)
}

/// Matches lesions best pair first (by pair score, then order, so the result is
/// deterministic); returns `(truth index, predicted index, score, counts)`.
fn match_lesions(
    predicted: &[Lesion],
    truth: &[Lesion],
    tolerance: SizeTolerance,
) -> Vec<(usize, usize, f64, AttributeCounts)> {
    let mut pairs = Vec::new();
    for (ti, t) in truth.iter().enumerate() {
        for (pi, p) in predicted.iter().enumerate() {
            let (score, counts) = pair_score(p, t, tolerance);
            pairs.push((ti, pi, score, counts));
        }
    }
    pairs.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
    let mut used_truth = vec![false; truth.len()];
    let mut used_predicted = vec![false; predicted.len()];
    let mut matched = Vec::new();
    for (ti, pi, score, counts) in pairs {
        if !used_truth[ti] && !used_predicted[pi] {
            used_truth[ti] = true;
            used_predicted[pi] = true;
            matched.push((ti, pi, score, counts));
        }
    }
    matched
}

/// Attributes term (see the module table).
#[must_use]
pub fn attribute_score(
    predicted: &Findings,
    truth: &Findings,
    tolerance: SizeTolerance,
) -> AttributeScore {
    let mut numerator = 0.0;
    let mut denominator = 0usize;
    let mut counts = AttributeCounts::default();
    for organ in Organ::ALL {
        let truth_lesions = &claimed_lesions(truth, organ);
        let predicted_lesions = &claimed_lesions(predicted, organ);
        denominator += truth_lesions.len().max(predicted_lesions.len());
        let matched = match_lesions(predicted_lesions, truth_lesions, tolerance);
        for (_, _, score, pair_counts) in &matched {
            numerator += score;
            add_counts(&mut counts, pair_counts);
        }
        // True lesions left unmatched still count in the per-attribute totals.
        for (ti, lesion) in truth_lesions.iter().enumerate() {
            if !matched.iter().any(|(matched_ti, ..)| *matched_ti == ti) {
                counts.size.1 += u32::from(lesion.size.is_some());
                counts.location.1 += u32::from(lesion.location.is_some());
                counts.attenuation.1 += u32::from(lesion.attenuation.is_some());
            }
        }
    }
    let score = if denominator == 0 {
        1.0
    } else {
        numerator / denominator as f64
    };
    AttributeScore { score, counts }
}

/// The lesions `findings` claims in `organ`: those described, or one undescribed lesion
/// when the organ is given a tumor (or a hedged one) without a lesion described, so a claim
/// never costs less for leaving its lesion out.
fn claimed_lesions(findings: &Findings, organ: Organ) -> std::borrow::Cow<'_, [Lesion]> {
    let finding = findings.organ(organ);
    if finding.lesions.is_empty() && finding.tumor.as_positive() {
        std::borrow::Cow::Owned(vec![Lesion::default()])
    } else {
        std::borrow::Cow::Borrowed(&finding.lesions)
    }
}

pub(crate) fn add_counts(total: &mut AttributeCounts, more: &AttributeCounts) {
    total.size.0 += more.size.0;
    total.size.1 += more.size.1;
    total.location.0 += more.location.0;
    total.location.1 += more.location.1;
    total.attenuation.0 += more.attenuation.0;
    total.attenuation.1 += more.attenuation.1;
}

/// True extents for the localization term: the masks' when known, else one built from the
/// truth's `lesion_slices` (largest-area slice: the true key slice when it lies inside, else
/// the middle), in the first organ reported with a tumor.
#[must_use]
pub fn reference_extents(truth: &Findings, extents: &[LesionExtent]) -> Vec<LesionExtent> {
    if !extents.is_empty() {
        return extents.to_vec();
    }
    let Some(range) = truth
        .lesion_slices
        .filter(|range| range.first <= range.last)
    else {
        return Vec::new();
    };
    let Some(organ) = Organ::ALL
        .into_iter()
        .find(|organ| truth.organ(*organ).tumor.as_positive())
    else {
        return Vec::new();
    };
    let largest = truth
        .key_slice
        .as_ref()
        .map(|key| key.index)
        .filter(|index| range.contains(*index))
        .unwrap_or(range.first + (range.last - range.first) / 2);
    vec![LesionExtent {
        organ,
        first_slice: range.first,
        last_slice: range.last,
        largest_slice: largest,
    }]
}

/// The box part of the localization term (see the module table); `None` when the truth has
/// no box on a key slice.
#[must_use]
pub fn box_localization(
    prediction: &Prediction<'_>,
    truth: &Findings,
    extents: &[LesionExtent],
) -> Option<f64> {
    let truth_box = truth.slice_box.as_ref()?;
    let truth_key = truth.key_slice.as_ref()?.index;
    let (Some(key), Some(predicted_box)) = (prediction.key_slice, prediction.slice_box) else {
        return Some(0.0);
    };
    let on_the_lesion = if extents.is_empty() {
        key.abs_diff(truth_key) <= 2
    } else {
        extents
            .iter()
            .any(|extent| extent.first_slice <= key && key <= extent.last_slice)
    };
    Some(if on_the_lesion {
        predicted_box.iou(truth_box)
    } else {
        0.0
    })
}

/// Localization term (see the module table): the mean of the slice part
/// ([`localization_score`] on [`reference_extents`]) and [`box_localization`], each when
/// scored; `None` when neither is.
#[must_use]
pub fn localization(prediction: &Prediction<'_>, reference: &Reference<'_>) -> Option<f64> {
    let extents = reference_extents(reference.findings, reference.lesion_extents);
    let parts: Vec<f64> = [
        localization_score(prediction.key_slice, &extents),
        box_localization(prediction, reference.findings, &extents),
    ]
    .into_iter()
    .flatten()
    .collect();
    mean(&parts)
}

/// The slice part of the localization term (see the module table); `None` when no extents
/// are known.
#[must_use]
pub fn localization_score(key_slice: Option<u32>, extents: &[LesionExtent]) -> Option<f64> {
    if extents.is_empty() {
        return None;
    }
    let Some(key) = key_slice else {
        return Some(0.0);
    };
    let best = extents
        .iter()
        .filter(|extent| extent.first_slice <= key && key <= extent.last_slice)
        .map(|extent| {
            let half = f64::from(
                (extent.largest_slice - extent.first_slice)
                    .max(extent.last_slice - extent.largest_slice),
            )
            .max(1.0);
            let distance = f64::from(key.abs_diff(extent.largest_slice));
            0.5 + 0.5 * (1.0 - (distance / half).min(1.0))
        })
        .fold(0.0, f64::max);
    Some(best)
}

/// How the verifier stands on one finding: a lesion the report claims (or an organ's tumor
/// claimed without a lesion described), or a lesion the slice shows that the report lacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// The verifier shows the lesion; its score is how well the values agree.
    Agrees,
    /// The verifier states the organ (or the whole slice) free of lesions: the claim is
    /// contradicted by the evidence the model itself named. Scores 0.
    Denied,
    /// The evidence does not show the claim at all (the organ or lesion is not on the key
    /// slice, or the verifier said nothing of it): never shown as agreeing. Scores 0.
    Unverified,
    /// The slice shows a lesion in an organ the report calls free of tumor. Scores 0.
    NotReported,
}

impl Standing {
    /// The word panels and documents show.
    #[must_use]
    pub fn word(self) -> &'static str {
        match self {
            Self::Agrees => "agrees",
            Self::Denied => "denied by the verifier",
            Self::Unverified => "unverified",
            Self::NotReported => "shown but not reported",
        }
    }
}

/// The verifier's standing on one finding and its score in [0, 1].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FindingConsistency {
    /// The organ.
    pub organ: Organ,
    /// The report lesion (index into the organ's lesions), when the finding is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lesion: Option<usize>,
    /// How the verifier stands on it.
    pub standing: Standing,
    /// 0 unless it agrees; then the mean of presence (1), the lesion values both state and
    /// the box answer.
    pub score: f64,
}

impl Consistency {
    /// Whether some finding has no usable evidence: the case is then never shown as
    /// agreeing, whatever its other findings.
    #[must_use]
    pub fn has_unverified(&self) -> bool {
        self.findings
            .iter()
            .any(|finding| finding.standing == Standing::Unverified)
    }

    /// The weakest finding, when there is one.
    #[must_use]
    pub fn weakest(&self) -> Option<&FindingConsistency> {
        self.findings
            .iter()
            .min_by(|a, b| a.score.total_cmp(&b.score))
    }
}

/// Whether the local description states `organ` free of lesions: the organ said clean, or
/// nothing at all shown on a slice whose box the verifier called empty.
pub(crate) fn verifier_denies(local: &Findings, organ: Organ) -> bool {
    local.organ(organ).tumor == TumorPresence::No
        || (!local.any_tumor() && local.inside_box == Some(TumorPresence::No))
}

/// Cross-view consistency between a report and the local description of its key slice, per
/// finding.
///
/// Every lesion the report claims is a finding (an organ given a tumor without a lesion
/// described is one): it **agrees** when the slice shows a lesion in that organ paired with
/// it (the slice lesion's best report lesion, [`checks::lesion_pairs`]), and scores the mean
/// of presence (1), location, attenuation and in-plane size (each when both state it) and the
/// box answer ([`region_agreement`]); it is **denied** (0) when the verifier states the organ
/// (or the whole slice) clean; it is **unverified** (0) when the slice does not show it at all.
/// A lesion the slice shows in an organ the report calls clean is **not reported** (0). The
/// case scores its weakest finding, so a made-up lesion the evidence does not bear out sinks
/// the case whatever the other findings score. A report claiming no tumor, against a slice
/// showing none, scores the mean of presence (1) and the box answer.
///
/// The component figures (`organ`, `location`, …) are the means over the comparisons made;
/// `organ` over the findings the verifier spoke of (0 when it spoke of none but some were
/// claimed).
#[must_use]
pub fn consistency(report: &Findings, local: &Findings, tolerance: SizeTolerance) -> Consistency {
    consistency_among(report, local, tolerance, &|_, _| true)
}

/// [`consistency`] where the slice's lesions pair only with the report lesions `candidate`
/// accepts (organ, index): a lesion read on evidence of its own is not what another claim's
/// slice shows.
fn consistency_among(
    report: &Findings,
    local: &Findings,
    tolerance: SizeTolerance,
    candidate: &dyn Fn(Organ, usize) -> bool,
) -> Consistency {
    let region = region_agreement(report, local);
    let mut findings = Vec::new();
    let mut compared = Compared::default();
    for organ in Organ::ALL {
        let claimed = report.organ(organ);
        let shown = local.organ(organ);
        let lesions: Vec<Option<usize>> = if claimed.lesions.is_empty() {
            vec![None]
        } else {
            (0..claimed.lesions.len()).map(Some).collect()
        };
        match (claimed.tumor.as_positive(), shown.tumor.as_positive()) {
            (true, true) => {
                let pairs = checks::lesion_pairs_among(
                    &claimed.lesions,
                    &shown.lesions,
                    tolerance,
                    &|index| candidate(organ, index),
                );
                for lesion in lesions {
                    findings
                        .push(compared.finding(organ, lesion, claimed, &pairs, region, tolerance));
                }
            }
            (true, false) => {
                let standing = if verifier_denies(local, organ) {
                    Standing::Denied
                } else {
                    Standing::Unverified
                };
                findings.extend(lesions.into_iter().map(|lesion| FindingConsistency {
                    organ,
                    lesion,
                    standing,
                    score: 0.0,
                }));
            }
            (false, true) => findings.push(FindingConsistency {
                organ,
                lesion: None,
                standing: Standing::NotReported,
                score: 0.0,
            }),
            (false, false) => {}
        }
    }
    let spoken: Vec<f64> = findings
        .iter()
        .filter(|finding| finding.standing != Standing::Unverified)
        .map(|finding| f64::from(u8::from(finding.standing == Standing::Agrees)))
        .collect();
    let organ = if findings.is_empty() {
        1.0
    } else {
        mean(&spoken).unwrap_or(0.0)
    };
    let score = if findings.is_empty() {
        mean_of(&[Some(organ), region])
    } else {
        findings
            .iter()
            .map(|finding| finding.score)
            .fold(f64::INFINITY, f64::min)
    };
    Consistency {
        score,
        organ,
        location: mean(&compared.location),
        attenuation: mean(&compared.attenuation),
        size: mean(&compared.size),
        region,
        findings,
    }
}

/// The mean of the values given; 0 when none is.
fn mean_of(parts: &[Option<f64>]) -> f64 {
    let parts: Vec<f64> = parts.iter().flatten().copied().collect();
    mean(&parts).unwrap_or(0.0)
}

/// The lesion values compared so far, per attribute (1 agrees, 0 differs).
#[derive(Default)]
struct Compared {
    location: Vec<f64>,
    attenuation: Vec<f64>,
    size: Vec<f64>,
}

impl Compared {
    /// One claimed finding of an organ the slice shows with a lesion: agreeing when a slice
    /// lesion is paired with it (its values compared and kept), unverified when none is.
    fn finding(
        &mut self,
        organ: Organ,
        lesion: Option<usize>,
        claimed: &crate::findings::OrganFindings,
        pairs: &[(usize, Lesion)],
        region: Option<f64>,
        tolerance: SizeTolerance,
    ) -> FindingConsistency {
        let Some(index) = lesion else {
            return FindingConsistency {
                organ,
                lesion,
                standing: Standing::Agrees,
                score: mean_of(&[Some(1.0), region]),
            };
        };
        let shown: Vec<&Lesion> = pairs
            .iter()
            .filter(|(paired, _)| *paired == index)
            .map(|(_, shown)| shown)
            .collect();
        if shown.is_empty() {
            return FindingConsistency {
                organ,
                lesion,
                standing: Standing::Unverified,
                score: 0.0,
            };
        }
        let best = &claimed.lesions[index];
        let mut parts = vec![Some(1.0)];
        for shown_lesion in shown {
            if let (Some(a), Some(b)) = (&best.location, &shown_lesion.location) {
                let value = f64::from(u8::from(a.agrees_with(b)));
                self.location.push(value);
                parts.push(Some(value));
            }
            if let (Some(a), Some(b)) = (best.attenuation, shown_lesion.attenuation) {
                let value = f64::from(u8::from(a == b));
                self.attenuation.push(value);
                parts.push(Some(value));
            }
            if let (Some(a), Some(b)) = (best.size, shown_lesion.size) {
                let value = f64::from(u8::from(tolerance.agrees(b, a)));
                self.size.push(value);
                parts.push(Some(value));
            }
        }
        parts.push(region);
        FindingConsistency {
            organ,
            lesion,
            standing: Standing::Agrees,
            score: mean_of(&parts),
        }
    }
}

/// [`consistency`] with the claimed lesions that have evidence of their own each read on it:
/// `views` holds (organ, lesion index, what the verifier said of that lesion's evidence). A
/// lesion's own view alone decides its standing (agrees, denied, or unverified when the view
/// does not show it), and in it the view's lesions pair with that lesion only. When the answer
/// names evidence per lesion, a lesion it names none for is unverified: the answer's key slice
/// (`local`) is some other lesion's evidence, and what it shows is that lesion. Without views
/// the key slice speaks for every claim, as [`consistency`] reads it. The case again takes its
/// weakest finding.
#[must_use]
pub fn consistency_with_views(
    report: &Findings,
    local: &Findings,
    views: &[(Organ, usize, &Findings)],
    tolerance: SizeTolerance,
) -> Consistency {
    let mut combined = consistency_among(report, local, tolerance, &|_, _| views.is_empty());
    // The attribute terms: the mean over every reading that compared them (the key slice's
    // and each lesion's own).
    let mut terms: [Vec<f64>; 3] = Default::default();
    let mut note = |read: &Consistency| {
        for (term, value) in terms
            .iter_mut()
            .zip([read.location, read.attenuation, read.size])
        {
            term.extend(value);
        }
    };
    note(&combined);
    for (organ, lesion, view) in views {
        let seen = consistency_among(report, view, tolerance, &|o, index| {
            o == *organ && index == *lesion
        });
        let Some(own) = seen
            .findings
            .iter()
            .find(|finding| finding.organ == *organ && finding.lesion == Some(*lesion))
        else {
            continue;
        };
        note(&seen);
        if let Some(slot) = combined
            .findings
            .iter_mut()
            .find(|finding| finding.organ == *organ && finding.lesion == Some(*lesion))
        {
            *slot = *own;
        }
    }
    let [location, attenuation, size] = terms;
    combined.location = mean(&location);
    combined.attenuation = mean(&attenuation);
    combined.size = mean(&size);
    if !combined.findings.is_empty() {
        combined.score = combined
            .findings
            .iter()
            .map(|finding| finding.score)
            .fold(f64::INFINITY, f64::min);
        let spoken: Vec<f64> = combined
            .findings
            .iter()
            .filter(|finding| finding.standing != Standing::Unverified)
            .map(|finding| f64::from(u8::from(finding.standing == Standing::Agrees)))
            .collect();
        combined.organ = mean(&spoken).unwrap_or(0.0);
    }
    combined
}

/// Whether the verifier's answer about the box (`local.inside_box`) supports the report:
/// for a report with a tumor, 1 for "lesion", ½ for "possible lesion", 0 for "no lesion";
/// for a report without one, 1 for "no lesion" and 0 otherwise. When the verifier also
/// marked a box of its own, its IoU with the report's box is averaged in. `None` when the
/// verifier was not asked about a box.
#[must_use]
pub fn region_agreement(report: &Findings, local: &Findings) -> Option<f64> {
    let answer = local.inside_box?;
    let said = if report.any_tumor() {
        match answer {
            TumorPresence::Yes => 1.0,
            TumorPresence::Uncertain => 0.5,
            TumorPresence::No | TumorPresence::NotMentioned => 0.0,
        }
    } else {
        f64::from(u8::from(!answer.as_positive()))
    };
    Some(match (&report.slice_box, &local.slice_box) {
        (Some(a), Some(b)) => f64::midpoint(said, a.iou(b)),
        _ => said,
    })
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// All reward terms and their weighted total.
#[must_use]
pub fn rewards(
    prediction: &Prediction<'_>,
    reference: &Reference<'_>,
    weights: &RewardWeights,
    tolerance: SizeTolerance,
) -> Rewards {
    let format = format_score(prediction);
    let existence = existence_score(prediction.report, reference.findings);
    let attributes = attribute_score(prediction.report, reference.findings, tolerance).score;
    let localization = localization(prediction, reference);
    let consistency = prediction
        .local_description
        .map(|local| consistency(prediction.report, local, tolerance));
    let mut weighted = vec![
        (weights.format, format),
        (weights.existence, existence),
        (weights.attributes, attributes),
    ];
    if let Some(value) = localization {
        weighted.push((weights.localization, value));
    }
    if let Some(value) = &consistency {
        weighted.push((weights.consistency, value.score));
    }
    Rewards {
        format,
        existence,
        attributes,
        localization,
        consistency,
        total: weighted_total(&weighted),
    }
}

/// Σ weightᵢ·termᵢ ÷ Σ weightᵢ over `(weight, term)` pairs (the scored terms); 0 when the
/// weights sum to 0.
#[must_use]
pub fn weighted_total(weighted: &[(f64, f64)]) -> f64 {
    let weight_sum: f64 = weighted.iter().map(|(weight, _)| weight).sum();
    if weight_sum > 0.0 {
        weighted
            .iter()
            .map(|(weight, value)| weight * value)
            .sum::<f64>()
            / weight_sum
    } else {
        0.0
    }
}
