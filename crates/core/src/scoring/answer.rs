//! One answer scored as a training framework asks for a reward: the answer's text read by
//! the findings reader (key slice, box and all), the verifier's text when there is one,
//! against the truth. `keyslice score --per-case` and the Python module (verl's
//! `compute_score`, the ms-swift plugin) both call [`score_answer`], so the reward a model is
//! trained on is the one Keyslice reports.
//!
//! A policy optimised on a reward finds whatever the reward forgives, so an answer is first
//! checked for form ([`form_faults`]): it states tumor presence for each of the four organs,
//! never states an organ both with and without a tumor, keeps to [`MAX_ANSWER_CHARS`]
//! characters, is mostly text the reader can use, and its evidence is evidence:
//!
//! - an answer that claims a tumor (or hedges one) names exactly one key slice, the slice its
//!   conclusion rests on, which the verifier re-reads;
//! - a tumor-free answer needs no key slice and may name one (a slice that shows the organs
//!   clean), but gives no box and no lesion slice range: there is no lesion for them to
//!   bound. This is the one rule the prompts, the model, the review and the exports keep, so
//!   a tumor-free truth report is well-formed;
//! - every key slice, box and slice range lies inside the volume (when its size is known),
//!   the range holds the key slice, and no box covers more than [`MAX_BOX_FRACTION`] of the
//!   slice: evidence the verifier cannot read is a fault, never a way to skip the
//!   verifier. Each lesion's own evidence line is held to the same rules, and one for a
//!   lesion in an organ the answer calls tumor-free is evidence without a lesion.
//!
//! A well-formed answer earns the E-MRL terms (format 1). An answer with any fault earns at
//! most [`MALFORMED_CAP`]: `MALFORMED_CAP × (organs stated + [one key slice]) ÷ 5`, so
//! empty text, garbage, a refusal and another language earn 0, and every faulty answer earns
//! less than any well-formed answer that gets presence right (which earns at least 0.4).

use serde::Serialize;

use super::{Prediction, Reference, RewardWeights, Rewards, SizeTolerance, rewards};
use crate::findings::evidence::{MAX_LESIONS_PER_ORGAN, box_problem, evidence_problems};
use crate::findings::{Organ, ReadReport, SliceBox, TumorPresence, read_report};

/// Longest answer scored as a report: a report of four organs with several lesions each is
/// under 2,000 characters.
pub const MAX_ANSWER_CHARS: usize = 4000;
/// Largest share of the slice a box may cover and still point at a lesion.
pub const MAX_BOX_FRACTION: f64 = 0.25;
/// Most that an answer with a form fault earns.
pub const MALFORMED_CAP: f64 = 0.1;
/// Largest share of an answer's characters that may lie in sentences the reader cannot use.
pub const MAX_UNREAD_FRACTION: f64 = 0.5;

/// Why an answer is not a report the reward can trust.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "fault", rename_all = "snake_case")]
pub enum FormFault {
    /// An organ's tumor presence is not stated.
    OrganNotStated {
        /// The organ.
        organ: Organ,
    },
    /// No key slice is named.
    NoKeySlice,
    /// More than one key slice is named.
    SeveralKeySlices {
        /// The slices named.
        slices: Vec<u32>,
    },
    /// An organ is stated both with and without a tumor.
    Contradiction {
        /// The organ.
        organ: Organ,
    },
    /// Longer than [`MAX_ANSWER_CHARS`].
    TooLong {
        /// Characters in the answer.
        chars: usize,
    },
    /// More than [`MAX_UNREAD_FRACTION`] of the text is sentences the reader cannot use (an
    /// echoed prompt, another language, talk around the report).
    MostlyUnread {
        /// Share of the characters in unread sentences.
        fraction: f64,
    },
    /// The box covers more than [`MAX_BOX_FRACTION`] of the slice.
    BoxTooLarge {
        /// Share of the slice it covers.
        fraction: f64,
    },
    /// A tumor-free answer gives a box or a lesion slice range, or an organ called tumor-free
    /// is given a lesion's evidence line: evidence of a lesion it does not claim.
    EvidenceWithoutLesion,
    /// An organ lists more lesions than a report can ([`MAX_LESIONS_PER_ORGAN`]).
    TooManyLesions {
        /// The organ.
        organ: Organ,
        /// Lesions listed.
        count: usize,
    },
    /// The evidence cannot be read on the volume: a key slice outside it, a box outside the
    /// slice or with its corners out of order, a range that leaves the volume, is inverted or
    /// does not hold the key slice.
    Evidence {
        /// What is wrong, as a sentence.
        problem: String,
    },
}

impl std::fmt::Display for FormFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::OrganNotStated { organ } => write!(f, "{organ}: tumor presence not stated"),
            Self::NoKeySlice => write!(f, "no key slice named"),
            Self::SeveralKeySlices { slices } => write!(f, "several key slices named: {slices:?}"),
            Self::Contradiction { organ } => {
                write!(f, "{organ}: stated both with and without a tumor")
            }
            Self::TooLong { chars } => {
                write!(f, "{chars} characters, more than {MAX_ANSWER_CHARS}")
            }
            Self::MostlyUnread { fraction } => write!(
                f,
                "{:.0}% of the text is sentences the reader cannot use",
                100.0 * fraction
            ),
            Self::BoxTooLarge { fraction } => {
                write!(f, "the box covers {:.0}% of the slice", 100.0 * fraction)
            }
            Self::TooManyLesions { organ, count } => write!(
                f,
                "{organ}: {count} lesions listed, more than {MAX_LESIONS_PER_ORGAN}"
            ),
            Self::EvidenceWithoutLesion => write!(
                f,
                "evidence of a lesion no organ is given: a box, a lesion slice range or a lesion's evidence line"
            ),
            Self::Evidence { problem } => f.write_str(problem),
        }
    }
}

/// The size of the volume an answer's evidence refers to, as far as it is known.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VolumeSize {
    /// Columns and rows of the axial slices: the box is checked against them.
    pub slice_size: Option<[u32; 2]>,
    /// Axial slices: the key slice and the lesion range are checked against them.
    pub slices: Option<u32>,
}

/// The form faults of `answer` as read into `read` (see the module text), its evidence
/// checked against `size` as far as it is known.
#[must_use]
pub fn form_faults(answer: &str, read: &ReadReport, size: VolumeSize) -> Vec<FormFault> {
    let mut faults: Vec<FormFault> = Organ::ALL
        .into_iter()
        .filter(|&organ| read.findings.organ(organ).tumor == TumorPresence::NotMentioned)
        .map(|organ| FormFault::OrganNotStated { organ })
        .collect();
    let claims_tumor = read.findings.any_tumor();
    match read.key_slices.len() {
        0 if claims_tumor => faults.push(FormFault::NoKeySlice),
        0 | 1 => {}
        _ => faults.push(FormFault::SeveralKeySlices {
            slices: read.key_slices.clone(),
        }),
    }
    faults.extend(
        Organ::ALL
            .into_iter()
            .map(|organ| (organ, read.findings.organ(organ).lesions.len()))
            .filter(|(_, count)| *count > MAX_LESIONS_PER_ORGAN)
            .map(|(organ, count)| FormFault::TooManyLesions { organ, count }),
    );
    // Evidence of a lesion the answer does not claim: a box or range in a tumor-free answer,
    // a lesion's evidence line in an organ it calls tumor-free.
    let unclaimed_line = read
        .lesion_evidence
        .iter()
        .any(|line| !read.findings.organ(line.organ).tumor.as_positive());
    if unclaimed_line
        || (!claims_tumor
            && (read.findings.slice_box.is_some() || read.findings.lesion_slices.is_some()))
    {
        faults.push(FormFault::EvidenceWithoutLesion);
    }
    let unknown = u32::MAX as usize;
    let dims = [
        size.slice_size
            .map_or(unknown, |[columns, _]| columns as usize),
        size.slice_size.map_or(unknown, |[_, rows]| rows as usize),
        size.slices.map_or(unknown, |slices| slices as usize),
    ];
    // A box without a key slice is already a missing key slice (or evidence without a lesion).
    if read.findings.key_slice.is_some() {
        faults.extend(
            evidence_problems(&read.findings, dims)
                .into_iter()
                .map(|problem| FormFault::Evidence { problem }),
        );
    }
    faults.extend(
        read.contradictions
            .iter()
            .map(|&organ| FormFault::Contradiction { organ }),
    );
    let chars = answer.chars().count();
    if chars > MAX_ANSWER_CHARS {
        faults.push(FormFault::TooLong { chars });
    }
    let text_chars = answer.chars().filter(|c| !c.is_whitespace()).count();
    let unread_chars: usize = read
        .unread
        .iter()
        .map(|sentence| sentence.text.chars().filter(|c| !c.is_whitespace()).count())
        .sum();
    if text_chars > 0 {
        let fraction = unread_chars as f64 / text_chars as f64;
        if fraction > MAX_UNREAD_FRACTION {
            faults.push(FormFault::MostlyUnread { fraction });
        }
    }
    if let Some(fraction) = read
        .findings
        .slice_box
        .as_ref()
        .and_then(|slice_box| box_fraction(slice_box, size))
        .filter(|&fraction| fraction > MAX_BOX_FRACTION)
    {
        faults.push(FormFault::BoxTooLarge { fraction });
    }
    faults.extend(lesion_evidence_faults(read, dims, size));
    faults
}

/// The share of a slice of `size` that `slice_box` covers, when the slice size is known and
/// the box's corners are in order.
fn box_fraction(slice_box: &SliceBox, size: VolumeSize) -> Option<f64> {
    let [columns, rows] = size.slice_size?;
    let [c0, r0, c1, r1] = slice_box.voxels;
    let span = |a: u32, b: u32, limit: u32| {
        f64::from(b.min(limit.saturating_sub(1)).saturating_sub(a) + 1)
    };
    (columns > 0 && rows > 0 && c1 >= c0 && r1 >= r0).then(|| {
        span(c0, c1, columns) * span(r0, r1, rows) / (f64::from(columns) * f64::from(rows))
    })
}

/// Each claimed lesion's own evidence read as the key evidence is: inside the volume, its box
/// in order and not most of the slice, its range holding its slice; and no evidence line for
/// a lesion in an organ the answer calls tumor-free.
fn lesion_evidence_faults(read: &ReadReport, dims: [usize; 3], size: VolumeSize) -> Vec<FormFault> {
    let mut faults = Vec::new();
    for organ in Organ::ALL {
        for (number, lesion) in read.findings.organ(organ).lesions.iter().enumerate() {
            let Some(evidence) = &lesion.evidence else {
                continue;
            };
            let name = format!("{organ} lesion {}", number + 1);
            faults.extend(
                evidence_problems(&evidence.as_findings(), dims)
                    .into_iter()
                    .map(|problem| FormFault::Evidence {
                        problem: format!("{name}'s evidence: {problem}"),
                    }),
            );
            if let Some(fraction) = evidence
                .slice_box
                .as_ref()
                .and_then(|slice_box| box_fraction(slice_box, size))
                .filter(|&fraction| fraction > MAX_BOX_FRACTION)
            {
                faults.push(FormFault::Evidence {
                    problem: format!("{name}'s box covers {:.0}% of the slice", 100.0 * fraction),
                });
            }
        }
    }
    faults
}

/// The share of the form an answer has: organs stated and the key slice (one where a tumor
/// is claimed; none needed once a tumor-free answer states every organ), of five.
fn structure(read: &ReadReport) -> f64 {
    let stated = Organ::ALL
        .into_iter()
        .filter(|&organ| read.findings.organ(organ).tumor != TumorPresence::NotMentioned)
        .count();
    // A tumor-free answer needs no key slice once it states every organ.
    let one_key = usize::from(match read.key_slices.len() {
        0 => !read.findings.any_tumor() && stated == Organ::ALL.len(),
        count => count == 1,
    });
    (stated + one_key) as f64 / 5.0
}

/// An answer's reward and what the reader could not use.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AnswerScore {
    /// The reward terms and their weighted total.
    pub rewards: Rewards,
    /// Evidence the answer gives that could not be used (a box on another slice than the
    /// key slice, a box line without readable corners), as sentences.
    pub problems: Vec<String>,
    /// Sentences of the answer the reader could not interpret.
    pub unread: usize,
    /// Why the answer is not well-formed (empty when it is): its total is then at most
    /// [`MALFORMED_CAP`].
    pub faults: Vec<FormFault>,
}

/// The reward of `answer` (a report), with `local_description` the verifier's text about
/// its key slice when one was produced, against `reference`; the volume's `size` as far as
/// it is known.
#[must_use]
pub fn score_answer(
    answer: &str,
    local_description: Option<&str>,
    reference: &Reference<'_>,
    weights: &RewardWeights,
    tolerance: SizeTolerance,
    size: VolumeSize,
) -> AnswerScore {
    let read = read_report(answer);
    let local = local_description.map(read_report);
    let mut problems = read.problems.clone();
    // The slice size is not known here: only a box without a key slice or with its corners
    // out of order is a fault (such a box scores no overlap).
    problems.extend(box_problem(&read.findings, [usize::MAX; 3]));
    if let Some(local) = &local {
        problems.extend(
            local
                .problems
                .iter()
                .map(|problem| format!("local description: {problem}")),
        );
    }
    let findings = &read.findings;
    let prediction = Prediction {
        report: findings,
        key_slice: findings.key_slice.as_ref().map(|key| key.index),
        slice_box: findings.slice_box.as_ref(),
        local_description: local.as_ref().map(|local| &local.findings),
    };
    let faults = form_faults(answer, &read, size);
    let mut scored = rewards(&prediction, reference, weights, tolerance);
    if faults.is_empty() {
        scored.format = 1.0;
    } else {
        scored.format = structure(&read);
        scored.total = MALFORMED_CAP * scored.format;
    }
    AnswerScore {
        rewards: scored,
        problems,
        unread: read.unread.len(),
        faults,
    }
}
