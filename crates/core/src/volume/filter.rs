//! In-plane smoothing of one axial plane: the separable `[w, 1 − 2w, w]` kernel that the
//! phantoms use for partial volume (w = 0.25, the 1-2-1 binomial) and the model grid uses to
//! soften a CT finer than its training phantoms.
//!
//! Core module: plain `f32` planes, no files, models or UI.

/// Convolves a square plane (`n × n`, row-major) with `[w, 1 − 2w, w]` along its rows
/// (`weights[0]`, neighbours one column apart) and then along its columns (`weights[1]`). A
/// pixel on the first or last column keeps its value in the first pass, one on the first or
/// last row in the second; a weight of 0 skips its pass.
pub fn smooth_plane(plane: &mut [f32], n: usize, weights: [f32; 2]) {
    for (stride, w) in [(1, weights[0]), (n, weights[1])] {
        if w <= 0.0 {
            continue;
        }
        let input = plane.to_vec();
        for j in 0..n {
            for i in 0..n {
                let at = i + n * j;
                let position = if stride == 1 { i } else { j };
                if position == 0 || position + 1 == n {
                    continue;
                }
                plane[at] =
                    w * input[at - stride] + (1.0 - 2.0 * w) * input[at] + w * input[at + stride];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_spreads_as_the_binomial_and_the_sum_is_kept() {
        let n = 5;
        let mut plane = vec![0f32; n * n];
        plane[2 + n * 2] = 16.0;
        smooth_plane(&mut plane, n, [0.25, 0.25]);
        let expected = [1.0, 2.0, 1.0, 2.0, 4.0, 2.0, 1.0, 2.0, 1.0];
        let got: Vec<f32> = (1..4)
            .flat_map(|j| (1..4).map(move |i| (i, j)))
            .map(|(i, j)| plane[i + n * j])
            .collect();
        assert_eq!(got, expected);
        assert!((plane.iter().sum::<f32>() - 16.0).abs() < 1e-6);
    }

    #[test]
    fn zero_weights_leave_the_plane_alone() {
        let mut plane: Vec<f32> = (0..16).map(|v| v as f32 * 3.5).collect();
        let before = plane.clone();
        smooth_plane(&mut plane, 4, [0.0, 0.0]);
        assert_eq!(plane, before);
    }
}
