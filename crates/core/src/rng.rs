//! A small deterministic random source (SplitMix64) for phantoms: the same seed gives the same
//! case on every machine and thread count, with no dependency on a crate's stream stability.

/// SplitMix64 (Steele, Lea, Flood 2014): 64-bit state, passes BigCrush, trivially seedable.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator for `seed`, decorrelated from neighbouring seeds by one mixing step.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        let mut rng = Self {
            state: seed ^ 0x9E37_79B9_7F4A_7C15,
        };
        rng.next_u64();
        rng
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.state)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[low, high)`.
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.unit()
    }

    /// Uniform integer in `[0, n)` (`0` when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        (self.unit() * n as f64) as usize % n
    }

    /// An index drawn with the given (non-negative) weights.
    pub fn weighted(&mut self, weights: &[f64]) -> usize {
        let total: f64 = weights.iter().sum();
        let mut left = self.unit() * total;
        for (index, weight) in weights.iter().enumerate() {
            if left < *weight {
                return index;
            }
            left -= weight;
        }
        weights.len().saturating_sub(1)
    }
}

/// The SplitMix64 output function; also a good 64-bit hash.
#[must_use]
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A standard normal value that depends only on `(seed, index)`: voxel noise that is the same
/// whichever thread computes which voxel. Box–Muller on two hashed uniforms.
#[must_use]
pub fn normal_at(seed: u64, index: u64) -> f64 {
    let a = mix(seed ^ mix(index.wrapping_mul(2).wrapping_add(1)));
    let b = mix(a ^ 0xD6E8_FEB8_6659_FD93);
    let u1 = ((a >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    let u2 = (b >> 11) as f64 / (1u64 << 53) as f64;
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// The 95 % percentile bootstrap interval of the mean of `values`: 2000 resamples drawn with
/// `seed`, so the same values give the same interval. `None` for no values.
#[must_use]
pub fn mean_interval_95(values: &[f64], seed: u64) -> Option<(f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let n = values.len();
    let mut rng = Rng::new(seed);
    let mut means: Vec<f64> = (0..2000)
        .map(|_| (0..n).map(|_| values[rng.below(n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    Some((means[50], means[1949]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mean_interval_holds_the_mean_and_is_the_same_each_time() {
        let values: Vec<f64> = (0..40).map(|i| f64::from(i % 7)).collect();
        let mean = values.iter().sum::<f64>() / 40.0;
        let (low, high) = mean_interval_95(&values, 1).expect("an interval");
        assert!(low < mean && mean < high, "{low} {mean} {high}");
        assert_eq!(mean_interval_95(&values, 1), Some((low, high)));
        assert_eq!(mean_interval_95(&[], 1), None);
        assert_eq!(mean_interval_95(&[0.5], 1), Some((0.5, 0.5)));
    }

    #[test]
    fn same_seed_same_stream_and_sane_moments() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let mut c = Rng::new(8);
        let draws: Vec<f64> = (0..10_000).map(|_| a.unit()).collect();
        assert!(draws.iter().all(|&x| (0.0..1.0).contains(&x)));
        assert_eq!(draws[..5], (0..5).map(|_| b.unit()).collect::<Vec<_>>()[..]);
        assert!((draws[0] - c.unit()).abs() > 0.0);
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((mean - 0.5).abs() < 0.02, "{mean}");
        let normals: Vec<f64> = (0..20_000).map(|i| normal_at(3, i)).collect();
        let mean = normals.iter().sum::<f64>() / normals.len() as f64;
        let variance = normals.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 20_000.0;
        assert!(
            mean.abs() < 0.03 && (variance - 1.0).abs() < 0.05,
            "{mean} {variance}"
        );
    }

    #[test]
    fn weighted_draws_follow_the_weights() {
        let mut rng = Rng::new(1);
        let mut counts = [0usize; 3];
        for _ in 0..30_000 {
            counts[rng.weighted(&[1.0, 2.0, 0.0])] += 1;
        }
        assert_eq!(counts[2], 0);
        let ratio = counts[1] as f64 / counts[0] as f64;
        assert!((ratio - 2.0).abs() < 0.15, "{counts:?}");
    }
}
