//! The GRPO update: per-token log-probabilities of a sample under the finder, the clipped
//! objective with its KL terms, and AdamW steps on the finder's top.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{AdamW, Optimizer, VarBuilder, VarMap};

use super::RlOptions;
use super::metrics::{StepFigures, mean_of};
use super::policy::{token_logprobs, token_mask};
use super::sampling::Drawn;
use super::sources::RlCase;
use crate::tiny::TrainError;
use keyslice_core::scoring::Rewards;
use keyslice_infer::embedded::TinyConfig;
use keyslice_infer::embedded::batch_norm::NormMode;
use keyslice_infer::embedded::finder::{FinderConfig, FinderNet};

/// The trainable finder: every finder tensor of the checkpoint (`base`) as a variable, the
/// normalisations kept apart from the convolutions with their running statistics.
pub(super) fn trainable_finder(
    config: &TinyConfig,
    finder_config: &FinderConfig,
    base: &HashMap<String, Tensor>,
    device: &Device,
) -> Result<(VarMap, FinderNet), TrainError> {
    let varmap = VarMap::new();
    {
        let mut data = varmap
            .data()
            .lock()
            .map_err(|_| TrainError::VariablesLocked)?;
        for (name, tensor) in base.iter().filter(|(name, _)| name.starts_with("finder.")) {
            data.insert(name.clone(), Var::from_tensor(tensor)?);
        }
    }
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, device);
    let net = FinderNet::new(
        FinderConfig::inputs(config.windows.len()),
        finder_config,
        &vb.pp("finder"),
        NormMode::FineTune,
    )?;
    Ok((varmap, net))
}

/// The variables the RL stage trains: the finder's third block and head (weights and
/// normalisation scales and shifts, not the running statistics), in name order.
pub(super) fn top_variables(varmap: &VarMap) -> Result<Vec<Var>, TrainError> {
    let data = varmap
        .data()
        .lock()
        .map_err(|_| TrainError::VariablesLocked)?;
    let mut names: Vec<&String> = data
        .keys()
        .filter(|name| {
            (name.starts_with("finder.block3.") || name.starts_with("finder.head."))
                && !name.contains("running_")
        })
        .collect();
    names.sort();
    Ok(names.into_iter().map(|name| data[name].clone()).collect())
}

/// The `options.updates` optimiser steps on the drawn groups, and the step's figures.
pub(super) fn update(
    net: &FinderNet,
    optimizer: &mut AdamW,
    cases: &[RlCase],
    drawn: &[Drawn],
    options: &RlOptions,
) -> Result<StepFigures, TrainError> {
    let mut figures = StepFigures::default();
    for update in 0..options.updates {
        let mut total: Option<Tensor> = None;
        let mut kl_sum = 0.0;
        for group in drawn {
            let (loss, kl) = group_loss(net, &cases[group.case], group, options)?;
            kl_sum += kl;
            let loss = (loss / drawn.len() as f64)?;
            total = Some(match total {
                None => loss,
                Some(sum) => (sum + loss)?,
            });
        }
        if let Some(total) = total {
            if update == 0 {
                figures.loss = f64::from(total.to_scalar::<f32>()?);
                figures.kl = kl_sum / drawn.len() as f64;
            }
            optimizer.backward_step(&total)?;
        }
    }
    let all: Vec<&Rewards> = drawn.iter().flat_map(|group| &group.rewards).collect();
    figures.reward = mean_of(all.iter().map(|r| Some(r.total))).unwrap_or(0.0);
    figures.terms = [
        mean_of(all.iter().map(|r| Some(r.format))),
        mean_of(all.iter().map(|r| Some(r.existence))),
        mean_of(all.iter().map(|r| Some(r.attributes))),
        mean_of(all.iter().map(|r| r.localization)),
        mean_of(all.iter().map(|r| r.consistency.as_ref().map(|c| c.score))),
    ];
    figures.advantage_spread = mean_of(
        drawn
            .iter()
            .flat_map(|group| group.advantages.iter().map(|a| Some(a.abs()))),
    )
    .unwrap_or(0.0);
    figures.flat_groups = drawn
        .iter()
        .filter(|group| group.advantages.iter().all(|a| a.abs() < 1e-9))
        .count() as f64
        / drawn.len().max(1) as f64;
    Ok(figures)
}

/// The GRPO loss of one drawn group under the current policy, and its mean KL per token.
pub(super) fn group_loss(
    net: &FinderNet,
    case: &RlCase,
    group: &Drawn,
    options: &RlOptions,
) -> Result<(Tensor, f64), TrainError> {
    let device = case.features.device();
    let (logits, _) = case.logits(net)?;
    let current = token_logprobs(&logits, &case.centres, &case.organs, &group.samples)?;
    let reference = token_logprobs(
        &Tensor::new(case.reference.as_slice(), device)?,
        &case.centres,
        &case.organs,
        &group.samples,
    )?;
    let mask = token_mask(&group.samples, &case.organs, device)?;
    let g = group.samples.len();
    let advantages: Vec<f32> = group.advantages.iter().map(|&a| a as f32).collect();
    let advantages = Tensor::from_vec(advantages, (g, 1), device)?;
    let ratio = (&current - &group.old)?.exp()?;
    let unclipped = ratio.broadcast_mul(&advantages)?;
    let clipped = ratio
        .clamp(1.0 - options.clip, 1.0 + options.clip)?
        .broadcast_mul(&advantages)?;
    let surrogate = unclipped.minimum(&clipped)?;
    let d = (reference - &current)?;
    let kl = ((d.exp()? - &d)? - 1.0)?;
    let presence_kl = options.presence_kl as f32;
    let betas = Tensor::new(
        &[[
            presence_kl,
            presence_kl,
            presence_kl,
            presence_kl,
            options.kl as f32,
        ]],
        device,
    )?;
    let per_token = ((surrogate - kl.broadcast_mul(&betas)?)? * &mask)?;
    let tokens = mask.sum(1)?;
    let per_sample = (per_token.sum(1)? / &tokens)?;
    let loss = per_sample.mean(0)?.neg()?;
    let kl_mean = ((kl * &mask)?.sum(1)? / tokens)?
        .mean(0)?
        .to_scalar::<f32>()?;
    Ok((loss, f64::from(kl_mean)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rl::policy::Sample;

    /// The tensor log-probabilities are those of the written-out policy: a Bernoulli per
    /// organ on its largest logit, softmax over the described jobs for the key.
    #[test]
    fn token_logprobs_match_the_policy() {
        let device = Device::Cpu;
        // Jobs 0 and 1 in the liver, job 2 in the left kidney.
        let logits = [2.0f32, -1.0, 0.5];
        let centres = [0.0f32, 0.0, 1.0];
        let organs = [0usize, 0, 2];
        let samples = vec![
            Sample {
                present: [true, false, true, false],
                yes: vec![true, false, true],
                key: Some(2),
            },
            Sample {
                present: [false; 4],
                yes: vec![false; 3],
                key: None,
            },
        ];
        let lp = token_logprobs(
            &Tensor::new(&logits, &device).unwrap(),
            &centres,
            &organs,
            &samples,
        )
        .unwrap()
        .to_vec2::<f32>()
        .unwrap();
        let sigmoid = |x: f32| 1.0 / (1.0 + (-x).exp());
        let key = (0.5f32.exp() / (2f32.exp() + 0.5f32.exp())).ln();
        assert!((lp[0][0] - sigmoid(2.0).ln()).abs() < 1e-5, "{:?}", lp[0]);
        assert!((lp[0][2] - sigmoid(-0.5).ln()).abs() < 1e-5, "{:?}", lp[0]);
        assert!((lp[0][4] - key).abs() < 1e-5, "{:?}", lp[0]);
        assert!((lp[1][0] - (1.0 - sigmoid(2.0)).ln()).abs() < 1e-5);
        assert!(lp[1][4].abs() < 1e-6, "no key: no key token");
        let mask = token_mask(&samples, &organs, &device)
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
        assert_eq!(mask[0], vec![1.0, 0.0, 1.0, 0.0, 1.0]);
        assert_eq!(mask[1], vec![1.0, 0.0, 1.0, 0.0, 0.0]);
    }

    /// The gradient of the GRPO objective raises the log-probability of a sample with a
    /// positive advantage: descending the loss raises the logit of the organ it called
    /// present and lowers the one it called absent.
    #[test]
    fn the_loss_favours_samples_with_positive_advantage() {
        let device = Device::Cpu;
        let logits = Var::new(&[0.0f32, 0.0], &device).unwrap();
        let organs = [0usize, 1];
        let samples = vec![
            Sample {
                present: [true, false, false, false],
                yes: vec![true, false],
                key: Some(0),
            },
            Sample {
                present: [false, true, false, false],
                yes: vec![false, true],
                key: Some(1),
            },
        ];
        let advantages = Tensor::new(&[[1.0f32], [-1.0]], &device).unwrap();
        let lp = token_logprobs(logits.as_tensor(), &[0.0, 0.0], &organs, &samples).unwrap();
        let objective = (lp.sum_keepdim(1).unwrap() * &advantages)
            .unwrap()
            .sum_all()
            .unwrap();
        let grads = objective.neg().unwrap().backward().unwrap();
        let grad = grads
            .get(logits.as_tensor())
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        assert!(grad[0] < 0.0 && grad[1] > 0.0, "{grad:?}");
    }
}
