//! The reward of one sampled report (the E-MRL terms against the truth and the frozen
//! verifier's reading of its key slice) and the group-relative advantages.

use keyslice_core::findings::Findings;
use keyslice_core::scoring::{
    LesionExtent, Prediction, Reference, RewardWeights, Rewards, SizeTolerance, consistency,
    rewards, weighted_total,
};

/// The E-MRL reward of a report (`report`, `key_slice`) with the verifier's reading `local`
/// of its key slice, against the truth: the terms of [`rewards`], with consistency taken
/// between the truth and the local description (the cross-view term of training) and the
/// total weighted accordingly.
#[must_use]
pub fn sample_reward(
    report: &Findings,
    key_slice: Option<u32>,
    local: Option<&Findings>,
    truth: &Findings,
    extents: &[LesionExtent],
    weights: &RewardWeights,
) -> Rewards {
    let tolerance = SizeTolerance::default();
    let scored = rewards(
        &Prediction {
            report,
            key_slice,
            slice_box: None,
            local_description: None,
        },
        &Reference {
            findings: truth,
            lesion_extents: extents,
        },
        weights,
        tolerance,
    );
    let cross = local.map(|local| consistency(truth, local, tolerance));
    let mut weighted = vec![
        (weights.format, scored.format),
        (weights.existence, scored.existence),
        (weights.attributes, scored.attributes),
    ];
    weighted.extend(scored.localization.map(|v| (weights.localization, v)));
    weighted.extend(cross.as_ref().map(|c| (weights.consistency, c.score)));
    Rewards {
        consistency: cross,
        total: weighted_total(&weighted),
        ..scored
    }
}

/// Group-relative advantages: (r − mean) ÷ (standard deviation + 10⁻⁶); all 0 when the
/// group's rewards are equal.
#[must_use]
pub fn advantages(rewards: &[f64]) -> Vec<f64> {
    let n = rewards.len().max(1) as f64;
    let mean = rewards.iter().sum::<f64>() / n;
    let std = (rewards.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / n).sqrt();
    rewards.iter().map(|r| (r - mean) / (std + 1e-6)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advantages_are_relative_to_the_group() {
        let a = advantages(&[1.0, 0.0, 0.5, 0.5]);
        assert!((a.iter().sum::<f64>()).abs() < 1e-9);
        assert!(a[0] > 0.0 && a[1] < 0.0 && a[2].abs() < 1e-9);
        // Standard deviation √(1/8): 0.5 / 0.3536 = 1.414.
        assert!((a[0] - 2f64.sqrt()).abs() < 1e-4, "{a:?}");
        assert!(advantages(&[0.3; 8]).iter().all(|v| v.abs() < 1e-9));
    }
}
