//! The policy's samples: which organs a report calls present, which of their slabs it
//! describes, and its key slice; the greedy sample is what analysis reports.

use candle_core::Tensor;
use rayon::prelude::*;

use super::RlOptions;
use super::policy::{Sample, draw, token_logprobs};
use super::rewards::advantages;
use super::sources::RlCase;
use crate::tiny::TrainError;
use keyslice_core::rng::Rng;
use keyslice_core::scoring::Rewards;
use keyslice_infer::embedded::finder::FinderNet;

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
    let (logits, _) = case.logits(net)?;
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
    use crate::rl::policy::greedy;

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
