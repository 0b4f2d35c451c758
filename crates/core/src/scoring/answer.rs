//! One answer scored as a training framework asks for a reward: the answer's text read by
//! the findings reader (key slice, box and all), the verifier's text when there is one,
//! against the truth. `keyslice score --per-case` and the Python module (verl's
//! `compute_score`, the ms-swift plugin) both call [`score_answer`], so the reward a model is
//! trained on is the one Keyslice reports.

use serde::Serialize;

use super::{Prediction, Reference, RewardWeights, Rewards, SizeTolerance, rewards};
use crate::findings::evidence::box_problem;
use crate::findings::read_report;

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
}

/// The reward of `answer` (a report), with `local_description` the verifier's text about
/// its key slice when one was produced, against `reference`.
#[must_use]
pub fn score_answer(
    answer: &str,
    local_description: Option<&str>,
    reference: &Reference<'_>,
    weights: &RewardWeights,
    tolerance: SizeTolerance,
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
    AnswerScore {
        rewards: rewards(&prediction, reference, weights, tolerance),
        problems,
        unread: read.unread.len(),
    }
}
