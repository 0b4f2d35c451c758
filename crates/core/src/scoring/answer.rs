//! One answer scored as a training framework asks for a reward: the answer's text read by
//! the findings reader (key slice, box and all), the verifier's text when there is one,
//! against the truth. `keyslice score --per-case` and the Python module (verl's
//! `compute_score`, the ms-swift plugin) both call [`score_answer`], so the reward a model is
//! trained on is the one Keyslice reports.
//!
//! A policy optimised on a reward finds whatever the reward forgives, so an answer is first
//! checked for form ([`form_faults`]): it states tumor presence for each of the four organs,
//! names exactly one key slice (the slice its conclusion rests on, which the verifier
//! re-reads; for a normal CT the slice the organs are best seen on), never states an organ
//! both with and without a tumor, keeps to [`MAX_ANSWER_CHARS`] characters, is mostly text
//! the reader can use, and gives no box covering more than [`MAX_BOX_FRACTION`] of the slice.
//! A well-formed answer earns the E-MRL terms (format 1). An answer with any fault earns at
//! most [`MALFORMED_CAP`]: `MALFORMED_CAP × (organs stated + [one key slice]) ÷ 5`, so
//! empty text, garbage, a refusal and another language earn 0, and every faulty answer earns
//! less than any well-formed answer that gets presence right (which earns at least 0.4).

use serde::Serialize;

use super::{Prediction, Reference, RewardWeights, Rewards, SizeTolerance, rewards};
use crate::findings::evidence::box_problem;
use crate::findings::{Organ, ReadReport, TumorPresence, read_report};

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
        }
    }
}

/// The form faults of `answer` as read into `read` (see the module text); `slice_size`
/// (columns, rows) enables the box check.
#[must_use]
pub fn form_faults(
    answer: &str,
    read: &ReadReport,
    slice_size: Option<[u32; 2]>,
) -> Vec<FormFault> {
    let mut faults: Vec<FormFault> = Organ::ALL
        .into_iter()
        .filter(|&organ| read.findings.organ(organ).tumor == TumorPresence::NotMentioned)
        .map(|organ| FormFault::OrganNotStated { organ })
        .collect();
    match read.key_slices.len() {
        0 => faults.push(FormFault::NoKeySlice),
        1 => {}
        _ => faults.push(FormFault::SeveralKeySlices {
            slices: read.key_slices.clone(),
        }),
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
    if let (Some([columns, rows]), Some(slice_box)) = (slice_size, &read.findings.slice_box) {
        let [c0, r0, c1, r1] = slice_box.voxels;
        let span = |a: u32, b: u32, limit: u32| {
            f64::from(b.min(limit.saturating_sub(1)).saturating_sub(a) + 1)
        };
        if columns > 0 && rows > 0 && c1 >= c0 && r1 >= r0 {
            let fraction =
                span(c0, c1, columns) * span(r0, r1, rows) / (f64::from(columns) * f64::from(rows));
            if fraction > MAX_BOX_FRACTION {
                faults.push(FormFault::BoxTooLarge { fraction });
            }
        }
    }
    faults
}

/// The share of the form an answer has: organs stated and one key slice, of five.
fn structure(read: &ReadReport) -> f64 {
    let stated = Organ::ALL
        .into_iter()
        .filter(|&organ| read.findings.organ(organ).tumor != TumorPresence::NotMentioned)
        .count();
    let one_key = usize::from(read.key_slices.len() == 1);
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
/// its key slice when one was produced, against `reference`; `slice_size` (columns, rows of
/// the slice) when known.
#[must_use]
pub fn score_answer(
    answer: &str,
    local_description: Option<&str>,
    reference: &Reference<'_>,
    weights: &RewardWeights,
    tolerance: SizeTolerance,
    slice_size: Option<[u32; 2]>,
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
    let faults = form_faults(answer, &read, slice_size);
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
