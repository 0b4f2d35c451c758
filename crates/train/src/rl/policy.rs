//! The policy the RL stage trains, as plain functions of the finder's job logits: its
//! samples (which organs a report calls present, which slabs it describes, its key), the
//! greedy sample analysis reports, and the log-probabilities of a sample's tokens.

use candle_core::{Device, Tensor};
use keyslice_core::rng::Rng;

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

/// log σ(x), stably: −(max(−x, 0) + log(1 + e^(−|x|))).
pub(super) fn log_sigmoid(x: &Tensor) -> candle_core::Result<Tensor> {
    let tail = (x.abs()?.neg()?.exp()? + 1.0)?.log()?;
    (x.neg()?.relu()? + tail)?.neg()
}

/// Log-probabilities of every token of `samples` under logits `logits` (`[jobs]`, job `j`
/// of organ `organs[j]`, threshold logit `centres[j]`): `[samples, 5]`, each organ's
/// presence then the key choice (0 where a token does not exist, see [`token_mask`]).
pub(super) fn token_logprobs(
    logits: &Tensor,
    centres: &[f32],
    organs: &[usize],
    samples: &[Sample],
) -> candle_core::Result<Tensor> {
    let device = logits.device();
    let jobs = logits.dim(0)?;
    let g = samples.len();
    // Each organ's largest logit: jobs of other organs pushed far down.
    let mut away = vec![-1e4f32; 4 * jobs];
    let mut centre = [0f32; 4];
    for (job, &organ) in organs.iter().enumerate() {
        away[organ * jobs + job] = 0.0;
        centre[organ] = centres[job];
    }
    let away = Tensor::from_vec(away, (4, jobs), device)?;
    let organ_best = logits.unsqueeze(0)?.broadcast_add(&away)?.max(1)?;
    let z = (organ_best - Tensor::new(&centre, device)?)?.unsqueeze(0)?;
    let present: Vec<f32> = samples
        .iter()
        .flat_map(|s| s.present.map(|on| f32::from(u8::from(on))))
        .collect();
    let present = Tensor::from_vec(present, (g, 4), device)?;
    let presence = (present.broadcast_mul(&log_sigmoid(&z)?)?
        + (1.0 - &present)?.broadcast_mul(&log_sigmoid(&z.neg()?)?)?)?;
    // The key: log softmax over the described jobs of the chosen one (the maximum is a
    // constant shift).
    let yes: Vec<f32> = samples
        .iter()
        .flat_map(|s| s.yes.iter().map(|&on| f32::from(u8::from(on))))
        .collect();
    let yes = Tensor::from_vec(yes, (g, jobs), device)?;
    let mut key = vec![0f32; g * jobs];
    let mut has_key = vec![0f32; g];
    for (index, sample) in samples.iter().enumerate() {
        if let Some(job) = sample.key {
            key[index * jobs + job] = 1.0;
            has_key[index] = 1.0;
        }
    }
    let key = Tensor::from_vec(key, (g, jobs), device)?;
    let has_key = Tensor::from_vec(has_key, (g, 1), device)?;
    let top = logits.max(0)?.detach();
    let shifted = logits.broadcast_sub(&top)?.unsqueeze(0)?;
    let mass = (shifted.exp()?.broadcast_mul(&yes)?.sum_keepdim(1)? + (1.0 - &has_key)?)?;
    let chosen = key.broadcast_mul(&shifted)?.sum_keepdim(1)?;
    let key_term = ((chosen - mass.log()?)? * &has_key)?;
    Tensor::cat(&[presence, key_term], 1)
}

/// Tokens that exist per sample: `[samples, 5]`, 1 for each organ the case has jobs for and
/// for a key.
pub(super) fn token_mask(
    samples: &[Sample],
    organs: &[usize],
    device: &Device,
) -> candle_core::Result<Tensor> {
    let mut seen = [0f32; 4];
    for &organ in organs {
        seen[organ] = 1.0;
    }
    let mut mask = Vec::with_capacity(samples.len() * 5);
    for sample in samples {
        mask.extend_from_slice(&seen);
        mask.push(f32::from(u8::from(sample.key.is_some())));
    }
    Tensor::from_vec(mask, (samples.len(), 5), device)
}
