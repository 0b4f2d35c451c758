//! The empirical ROC curve of one set of scores: the operating points a reader's confidence
//! gives at each of its thresholds, for plotting. Its trapezoidal area is the
//! Mann–Whitney AUC (ties counted half) that the U-statistics average.

/// The empirical ROC curve of `scores` (`(score, has the condition)`): points
/// `[false-positive fraction, true-positive fraction]` from `[0, 0]` to `[1, 1]`, one per
/// distinct score, highest first. Empty when either class has no case.
#[must_use]
pub fn roc_curve(scores: &[(f64, bool)]) -> Vec<[f64; 2]> {
    let positives = scores.iter().filter(|(_, positive)| *positive).count();
    let negatives = scores.len() - positives;
    if positives == 0 || negatives == 0 {
        return Vec::new();
    }
    let mut sorted: Vec<(f64, bool)> = scores
        .iter()
        .copied()
        .filter(|(score, _)| score.is_finite())
        .collect();
    sorted.sort_by(|a, b| b.0.total_cmp(&a.0));
    let (mut true_positives, mut false_positives) = (0_usize, 0_usize);
    let mut points = vec![[0.0, 0.0]];
    let mut index = 0;
    while index < sorted.len() {
        let threshold = sorted[index].0;
        while index < sorted.len() && sorted[index].0.total_cmp(&threshold).is_eq() {
            if sorted[index].1 {
                true_positives += 1;
            } else {
                false_positives += 1;
            }
            index += 1;
        }
        #[expect(clippy::cast_precision_loss, reason = "counts of cases")]
        points.push([
            false_positives as f64 / negatives as f64,
            true_positives as f64 / positives as f64,
        ]);
    }
    if points.last() != Some(&[1.0, 1.0]) {
        points.push([1.0, 1.0]);
    }
    points
}

/// The area under a curve of [`roc_curve`] by the trapezoidal rule.
#[must_use]
pub fn area(points: &[[f64; 2]]) -> f64 {
    points
        .windows(2)
        .map(|pair| (pair[1][0] - pair[0][0]) * (pair[1][1] + pair[0][1]) / 2.0)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Mann–Whitney AUC by counting pairs, ties half.
    fn pairs_auc(scores: &[(f64, bool)]) -> f64 {
        let (mut sum, mut count) = (0.0, 0.0);
        for (positive, _) in scores.iter().filter(|(_, p)| *p) {
            for (negative, _) in scores.iter().filter(|(_, p)| !*p) {
                count += 1.0;
                sum += if positive > negative {
                    1.0
                } else if positive.total_cmp(negative).is_eq() {
                    0.5
                } else {
                    0.0
                };
            }
        }
        sum / count
    }

    #[test]
    fn curve_area_is_the_mann_whitney_auc_with_ties() {
        let mut rng = crate::rng::Rng::new(7);
        for _ in 0..50 {
            let scores: Vec<(f64, bool)> = (0..40)
                .map(|index| {
                    // Coarse scores, so ties between and within classes are frequent.
                    let positive = index % 3 == 0;
                    let score = (rng.unit() * 6.0).floor() + if positive { 1.5 } else { 0.0 };
                    (score.floor(), positive)
                })
                .collect();
            let curve = roc_curve(&scores);
            assert_eq!(curve.first(), Some(&[0.0, 0.0]));
            assert_eq!(curve.last(), Some(&[1.0, 1.0]));
            assert!(
                curve
                    .windows(2)
                    .all(|w| w[1][0] >= w[0][0] && w[1][1] >= w[0][1])
            );
            assert!((area(&curve) - pairs_auc(&scores)).abs() < 1e-12);
        }
    }

    #[test]
    fn one_class_alone_has_no_curve() {
        assert!(roc_curve(&[(1.0, true), (2.0, true)]).is_empty());
        assert!(roc_curve(&[]).is_empty());
    }
}
