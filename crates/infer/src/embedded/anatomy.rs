//! Locations inside organs from the organ masks: Couinaud liver segments, kidney poles and
//! pancreas parts, and which of them one slice can tell apart.

use super::net;
/// Location classes that follow from the organ masks (`[slab * 4 + organ][pixel]`), as
/// reports define them, written one-hot into the location channels of `values` on each
/// organ's pixels: kidney poles are the upper, middle and lower thirds of the kidney's height
/// (when it spans at least 3 slabs); the pancreas head, body and tail lie along the gland from
/// the patient's right (head: the first 30 % of its width) to the left (tail: from 65 %), when
/// it spans at least 5 columns. Liver segments (see [`liver_segment`])
/// follow the liver's width and its right and left parts' middles. Elsewhere the diagnoser's
/// location channels stay.
pub(super) fn mask_locations(masks: &[Vec<bool>], n: usize, values: &mut [Vec<Vec<f32>>]) {
    let slabs = values.len();
    let mut write = |slab: usize, pixel: usize, classes: std::ops::Range<usize>, class: usize| {
        for channel in classes.clone() {
            // Slabs without a lesion have empty location channels: nothing reads them.
            if let Some(value) = values[slab][net::LOCATION.start + channel].get_mut(pixel) {
                *value = if channel == class { 1.0 } else { 0.0 };
            }
        }
    };
    let pixels = |slab: usize, organ: usize| {
        masks[slab * 4 + organ]
            .iter()
            .enumerate()
            .filter(|(_, on)| **on)
            .map(|(pixel, _)| pixel)
    };
    // Pancreas: organ 1, classes 7 (head), 8 (body), 9 (tail); the patient's right is the
    // grid's low columns.
    let columns = (0..slabs)
        .flat_map(|slab| pixels(slab, 1).map(|pixel| pixel % n))
        .fold(None, |range: Option<(usize, usize)>, column| {
            Some(range.map_or((column, column), |(lo, hi)| {
                (lo.min(column), hi.max(column))
            }))
        });
    if let Some((lo, hi)) = columns
        && hi - lo + 1 >= 5
    {
        for slab in 0..slabs {
            let on: Vec<usize> = pixels(slab, 1).collect();
            for pixel in on {
                let position = (pixel % n - lo) as f64 / (hi - lo) as f64;
                let class = if position < 0.3 {
                    7
                } else if position < 0.65 {
                    8
                } else {
                    9
                };
                write(slab, pixel, 7..10, class);
            }
        }
    }
    // Liver: organ 0, classes 0–6 (segments 2–8).
    if let Some(parts) = LiverParts::of(masks, n, slabs) {
        for slab in 0..slabs {
            let on: Vec<usize> = pixels(slab, 0).collect();
            for pixel in on {
                let segment = parts.segment(slab, pixel % n, pixel / n);
                write(slab, pixel, 0..7, usize::from(segment) - 2);
            }
        }
    }
    // Kidneys: organs 2 and 3, classes 10 (upper), 11 (mid), 12 (lower); higher slabs lie
    // higher in the patient.
    for organ in [2, 3] {
        let shown: Vec<usize> = (0..slabs)
            .filter(|&slab| pixels(slab, organ).nth(3).is_some())
            .collect();
        let (Some(&lo), Some(&hi)) = (shown.first(), shown.last()) else {
            continue;
        };
        if hi - lo + 1 < 3 {
            continue;
        }
        let centre = (lo + hi) as f64 / 2.0;
        let half = (hi - lo + 1) as f64 / 2.0;
        for slab in lo..=hi {
            let height = (slab as f64 - centre) / half;
            let class = if height > 1.0 / 3.0 {
                10
            } else if height < -1.0 / 3.0 {
                12
            } else {
                11
            };
            let on: Vec<usize> = pixels(slab, organ).collect();
            for pixel in on {
                write(slab, pixel, 10..13, class);
            }
        }
    }
}

/// Share of the liver's width, from the patient's right, where segment IV begins (the
/// gallbladder fossa, Cantlie's line) and where the left lateral segments II and III begin
/// (the falciform ligament). Chosen on the true liver masks of the seed-13 calibration
/// phantoms (a liver segment right for 63 of their 67 single liver tumors, 94 %; 120 of
/// the 125 in the first 400 training phantoms), not on the held-out ones.
pub(super) const CANTLIE_SHARE: f64 = 0.525;
pub(super) const FALCIFORM_SHARE: f64 = 0.7;

/// What the liver's segments are read from: its width in columns, and the middles of its
/// right part (segments V–VIII, split by the middle's slab and row) and of its left lateral
/// part (II above the middle's slab, III below).
pub(super) struct LiverParts {
    lo: usize,
    hi: usize,
    right_slab: f64,
    right_row: f64,
    left_slab: f64,
}

impl LiverParts {
    /// From the liver masks (`[slab * 4][pixel]`); `None` when the liver spans fewer than 5
    /// columns or either part is empty.
    fn of(masks: &[Vec<bool>], n: usize, slabs: usize) -> Option<Self> {
        let on = || {
            (0..slabs).flat_map(move |slab| {
                masks[slab * 4]
                    .iter()
                    .enumerate()
                    .filter(|(_, on)| **on)
                    .map(move |(pixel, _)| (slab, pixel % n, pixel / n))
            })
        };
        let lo = on().map(|(_, column, _)| column).min()?;
        let hi = on().map(|(_, column, _)| column).max()?;
        if hi - lo + 1 < 5 {
            return None;
        }
        let share = |column: usize| (column - lo) as f64 / (hi - lo) as f64;
        let (mut right, mut left) = ([0.0f64; 3], [0.0f64; 2]);
        for (slab, column, row) in on() {
            if share(column) < CANTLIE_SHARE {
                right[0] += slab as f64;
                right[1] += row as f64;
                right[2] += 1.0;
            } else if share(column) >= FALCIFORM_SHARE {
                left[0] += slab as f64;
                left[1] += 1.0;
            }
        }
        (right[2] > 0.0 && left[1] > 0.0).then(|| Self {
            lo,
            hi,
            right_slab: right[0] / right[2],
            right_row: right[1] / right[2],
            left_slab: left[0] / left[1],
        })
    }

    /// The segment (2–8) of the liver pixel at `column`, `row` on `slab` (higher slabs lie
    /// higher in the patient, higher rows further back).
    fn segment(&self, slab: usize, column: usize, row: usize) -> u8 {
        liver_segment(
            (column.clamp(self.lo, self.hi) - self.lo) as f64 / (self.hi - self.lo) as f64,
            slab as f64 >= self.right_slab,
            (row as f64) < self.right_row,
            slab as f64 >= self.left_slab,
        )
    }
}

/// Couinaud segment from a point's share of the liver's width from the patient's right and
/// where it lies against the middle of the right part (`superior`, `anterior`) and of the
/// left lateral part (`above_left`): II/III left of the falciform ligament, IV between it and
/// Cantlie's line, V–VIII to the right (VIII anterior superior, V anterior inferior, VII
/// posterior superior, VI posterior inferior).
pub(super) fn liver_segment(share: f64, superior: bool, anterior: bool, above_left: bool) -> u8 {
    if share >= FALCIFORM_SHARE {
        if above_left { 2 } else { 3 }
    } else if share >= CANTLIE_SHARE {
        4
    } else {
        match (anterior, superior) {
            (true, true) => 8,
            (true, false) => 5,
            (false, true) => 7,
            (false, false) => 6,
        }
    }
}

/// The liver segments one slice can tell apart from `segments`: II/III, IV, V/VIII, VI/VII.
pub(super) fn one_slice_segments(segments: &[u8]) -> Vec<u8> {
    let mut pairs: Vec<u8> = segments
        .iter()
        .flat_map(|&segment| match segment {
            2 | 3 => vec![2, 3],
            5 | 8 => vec![5, 8],
            6 | 7 => vec![6, 7],
            other => vec![other],
        })
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::net::OUTPUTS;

    #[test]
    fn one_slice_names_the_segment_pairs_it_can_tell_apart() {
        assert_eq!(one_slice_segments(&[8]), vec![5, 8]);
        assert_eq!(one_slice_segments(&[6]), vec![6, 7]);
        assert_eq!(one_slice_segments(&[3]), vec![2, 3]);
        assert_eq!(one_slice_segments(&[4]), vec![4]);
        assert_eq!(one_slice_segments(&[5, 8]), vec![5, 8]);
    }

    #[test]
    fn liver_segments_follow_the_livers_width_and_its_parts_middles() {
        let n = 32;
        let slabs = 9;
        // A liver box over columns 2–22, rows 4–12 and slabs 0–8: the left lateral part
        // (columns from 2 + 0.7 × 20 = 16) and the right part (below 2 + 0.525 × 20 = 12.5)
        // both centre on slab 4 and row 8.
        let mut masks = vec![vec![false; n * n]; slabs * 4];
        for slab in 0..slabs {
            for row in 4..13 {
                for column in 2..23 {
                    masks[slab * 4][row * n + column] = true;
                }
            }
        }
        let mut values = vec![vec![vec![0.5f32; n * n]; OUTPUTS]; slabs];
        mask_locations(&masks, n, &mut values);
        let segment = |slab: usize, column: usize, row: usize| {
            (0..7)
                .find(|&c| values[slab][net::LOCATION.start + c][row * n + column] > 0.99)
                .map(|class| class + 2)
        };
        assert_eq!(segment(7, 20, 8), Some(2), "left lateral, upper");
        assert_eq!(segment(1, 20, 8), Some(3), "left lateral, lower");
        assert_eq!(
            segment(4, 14, 8),
            Some(4),
            "between the ligament and Cantlie's line"
        );
        assert_eq!(segment(7, 4, 5), Some(8), "right, anterior superior");
        assert_eq!(segment(1, 4, 5), Some(5), "right, anterior inferior");
        assert_eq!(segment(7, 4, 11), Some(7), "right, posterior superior");
        assert_eq!(segment(1, 4, 11), Some(6), "right, posterior inferior");
        // Outside the liver the diagnoser's channels stay.
        assert!((values[4][net::LOCATION.start][20 * n + 4] - 0.5).abs() < 1e-6);
    }

    #[test]
    fn kidney_poles_and_pancreas_parts_follow_the_organ_masks() {
        let n = 32;
        let slabs = 9;
        let mut masks = vec![vec![false; n * n]; slabs * 4];
        // Left kidney (organ 2) on slabs 0–8 at columns 20–23, rows 10–13.
        for slab in 0..slabs {
            for row in 10..14 {
                for column in 20..24 {
                    masks[slab * 4 + 2][row * n + column] = true;
                }
            }
        }
        // Pancreas (organ 1) on slab 4 from column 2 (the patient's right) to column 21.
        for column in 2..22 {
            masks[4 * 4 + 1][16 * n + column] = true;
        }
        let mut values = vec![vec![vec![0.5f32; n * n]; OUTPUTS]; slabs];
        mask_locations(&masks, n, &mut values);
        let class = |slab: usize, pixel: usize, classes: std::ops::Range<usize>| {
            classes
                .clone()
                .find(|&c| values[slab][net::LOCATION.start + c][pixel] > 0.99)
        };
        let kidney = 11 * n + 21;
        assert_eq!(class(8, kidney, 10..13), Some(10), "top slab: upper pole");
        assert_eq!(class(4, kidney, 10..13), Some(11), "middle: mid");
        assert_eq!(
            class(0, kidney, 10..13),
            Some(12),
            "bottom slab: lower pole"
        );
        assert_eq!(class(4, 16 * n + 3, 7..10), Some(7), "right end: head");
        assert_eq!(class(4, 16 * n + 12, 7..10), Some(8), "middle: body");
        assert_eq!(class(4, 16 * n + 21, 7..10), Some(9), "left end: tail");
        // Off the masks the diagnoser's values stay.
        assert!((values[4][net::LOCATION.start + 7][0] - 0.5).abs() < 1e-6);
    }
}
