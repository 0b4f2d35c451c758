//! The policy's samples: which organs a report calls present, which of their slabs it
//! describes, and its key slice; the greedy sample is what analysis reports.

use candle_core::Tensor;
use rayon::prelude::*;

use super::RlOptions;
use super::grpo::{job_logits, token_logprobs};
use super::rewards::advantages;
use super::sources::RlCase;
use crate::tiny::TrainError;
use keyslice_core::rng::Rng;
use keyslice_core::scoring::Rewards;
use keyslice_infer::embedded::finder::FinderNet;

/// One drawn sample: which organs show a tumor, the jobs (slabs) whose lesions the report
/// then describes, and the key job.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Sample {
    pub(super) present: [bool; 4],
    pub(super) yes: Vec<bool>,
    pub(super) key: Option<usize>,
}

/// Each organ's largest logit (the finder's answer for the organ, as analysis pools it);
/// `None` for an organ without jobs.
pub(super) fn organ_logits(logits: &[f32], organs: &[usize]) -> [Option<f32>; 4] {
    let mut best = [None; 4];
    for (&logit, &organ) in logits.iter().zip(organs) {
        best[organ] = Some(best[organ].map_or(logit, |b: f32| b.max(logit)));
    }
    best
}

/// The jobs a report with organs `present` describes: in a present organ, every job above
/// the organ's threshold logit, and at least the strongest one.
pub(super) fn described(
    logits: &[f32],
    centres: &[f32],
    organs: &[usize],
    present: [bool; 4],
) -> Vec<bool> {
    let best = organ_logits(logits, organs);
    logits
        .iter()
        .zip(centres)
        .zip(organs)
        .map(|((&l, &t), &o)| present[o] && (l > t || Some(l) == best[o]))
        .collect()
}

/// The described job with the largest logit.
pub(super) fn strongest(logits: &[f32], yes: &[bool]) -> Option<usize> {
    logits
        .iter()
        .enumerate()
        .filter(|(job, _)| yes[*job])
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(job, _)| job)
}

/// The most likely sample under `logits`: what analysis reports (an organ is present when its
/// largest logit passes its threshold; the key is the strongest described job).
pub(super) fn greedy(logits: &[f32], centres: &[f32], organs: &[usize]) -> Sample {
    let best = organ_logits(logits, organs);
    let mut present = [false; 4];
    for (job, &organ) in organs.iter().enumerate() {
        present[organ] |= best[organ].is_some_and(|b| b > centres[job]);
    }
    let yes = described(logits, centres, organs, present);
    let key = strongest(logits, &yes);
    Sample { present, yes, key }
}

/// A sample drawn from the policy with logits `logits`: each organ present with probability
/// σ(its largest logit − its threshold logit), then the key among the described jobs with
/// probabilities softmax(ℓ).
pub(super) fn draw(logits: &[f32], centres: &[f32], organs: &[usize], rng: &mut Rng) -> Sample {
    let best = organ_logits(logits, organs);
    let mut centre = [0f32; 4];
    for (job, &organ) in organs.iter().enumerate() {
        centre[organ] = centres[job];
    }
    let mut present = [false; 4];
    for organ in 0..4 {
        if let Some(b) = best[organ] {
            present[organ] = rng.unit() < 1.0 / (1.0 + f64::from(centre[organ] - b).exp());
        }
    }
    let yes = described(logits, centres, organs, present);
    let on: Vec<usize> = (0..yes.len()).filter(|&job| yes[job]).collect();
    let key = (!on.is_empty()).then(|| {
        let top = on.iter().map(|&job| logits[job]).fold(f32::MIN, f32::max);
        let weights: Vec<f64> = on
            .iter()
            .map(|&job| f64::from(logits[job] - top).exp())
            .collect();
        on[rng.weighted(&weights)]
    });
    Sample { present, yes, key }
}

/// What one case contributes to a step: its samples, their advantages and rewards, and the
/// log-probabilities of the policy that drew them.
pub(super) struct Drawn {
    pub(super) case: usize,
    pub(super) samples: Vec<Sample>,
    pub(super) advantages: Vec<f64>,
    pub(super) rewards: Vec<Rewards>,
    pub(super) old: Tensor,
}

/// Draws a group of samples for case `index` and scores them.
pub(super) fn draw_group(
    net: &FinderNet,
    cases: &[RlCase],
    index: usize,
    options: &RlOptions,
    rng: &mut Rng,
) -> Result<Drawn, TrainError> {
    let case = &cases[index];
    let (logits, _) = job_logits(net, case)?;
    let values = logits.to_vec1::<f32>()?;
    let samples: Vec<Sample> = (0..options.group)
        .map(|_| draw(&values, &case.centres, &case.organs, rng))
        .collect();
    let rewards: Vec<Rewards> = samples
        .par_iter()
        .map(|sample| case.reward(&sample.yes, sample.key, &options.weights))
        .collect();
    let totals: Vec<f64> = rewards.iter().map(|r| r.total).collect();
    let old = token_logprobs(&logits, &case.centres, &case.organs, &samples)?.detach();
    Ok(Drawn {
        case: index,
        samples,
        advantages: advantages(&totals),
        rewards,
        old,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Draws follow the policy: an organ far above its threshold is always present, far
    /// below never; a present organ describes its jobs above threshold (at least its
    /// strongest); the key is a described job; the greedy sample is what analysis reports.
    #[test]
    fn draws_follow_the_probabilities() {
        // Liver: jobs 0 (30) and 1 (−30); pancreas: job 2 (−30); left kidney: jobs 3 (0),
        // 4 (−2).
        let logits = [30.0f32, -30.0, -30.0, 0.0, -2.0];
        let centres = [0.0f32, 0.0, 0.0, 0.0, 0.0];
        let organs = [0usize, 0, 1, 2, 2];
        let mut rng = Rng::new(3);
        let mut kidney = 0;
        for _ in 0..400 {
            let sample = draw(&logits, &centres, &organs, &mut rng);
            assert!(sample.present[0] && !sample.present[1] && !sample.present[3]);
            assert!(sample.yes[0] && !sample.yes[1] && !sample.yes[2] && !sample.yes[4]);
            assert_eq!(sample.yes[3], sample.present[2]);
            let key = sample.key.expect("a described job, so a key");
            assert!(sample.yes[key]);
            kidney += usize::from(sample.present[2]);
        }
        assert!((150..250).contains(&kidney), "σ(0) = ½: {kidney} of 400");
        let best = greedy(&logits, &centres, &organs);
        assert_eq!(best.present, [true, false, false, false]);
        assert_eq!(best.yes, vec![true, false, false, false, false]);
        assert_eq!(best.key, Some(0));
    }
}
