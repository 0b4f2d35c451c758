//! The evidence a report points at, checked against the CT it describes: the key slice, the
//! box on it and the lesion's slice range.
//!
//! A model's box can be garbled in ways a reader must not paper over: corners out of order,
//! a box larger than the slice, a box on another slice than the key slice, a slice range
//! that leaves the volume or does not hold the key slice. [`evidence_problems`] names each
//! such fault as a sentence; callers drop the faulty part and record the sentence (a
//! prediction's warnings, an export's left-out list), so nothing is silently discarded or
//! silently used.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Findings;

/// Axial slices `first..=last` (0-based indices along the volume's slice axis).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceRange {
    /// First slice (inclusive).
    pub first: u32,
    /// Last slice (inclusive).
    pub last: u32,
}

impl SliceRange {
    /// Whether `slice` lies in the range.
    #[must_use]
    pub fn contains(&self, slice: u32) -> bool {
        self.first <= slice && slice <= self.last
    }
}

impl fmt::Display for SliceRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

/// What is wrong with the box of `findings` on a CT of `dims` (columns, rows, slices), as a
/// sentence; `None` when it is fine or there is none.
#[must_use]
pub fn box_problem(findings: &Findings, dims: [usize; 3]) -> Option<String> {
    let slice_box = findings.slice_box.as_ref()?;
    let voxels = slice_box.voxels;
    let [column_min, row_min, column_max, row_max] = voxels.map(|value| value as usize);
    if findings.key_slice.is_none() {
        return Some(format!("the box {voxels:?} has no key slice to lie on"));
    }
    if column_min > column_max || row_min > row_max {
        return Some(format!(
            "the box (columns {column_min}-{column_max}, rows {row_min}-{row_max}) has its corners out of order"
        ));
    }
    if column_max >= dims[0] || row_max >= dims[1] {
        return Some(format!(
            "the box (columns {column_min}-{column_max}, rows {row_min}-{row_max}) reaches outside the {} × {} slice (columns 0-{}, rows 0-{})",
            dims[0],
            dims[1],
            dims[0].saturating_sub(1),
            dims[1].saturating_sub(1)
        ));
    }
    None
}

/// What is wrong with the lesion slice range of `findings` on a CT of `slices` axial slices;
/// `None` when it is fine or there is none.
#[must_use]
pub fn range_problem(findings: &Findings, slices: usize) -> Option<String> {
    let range = findings.lesion_slices?;
    if range.first > range.last {
        return Some(format!("the lesion slice range {range} is inverted"));
    }
    if range.last as usize >= slices {
        return Some(format!(
            "the lesion slice range {range} leaves the volume's {slices} axial slices (0-{})",
            slices.saturating_sub(1)
        ));
    }
    if let Some(key) = &findings.key_slice
        && !range.contains(key.index)
    {
        return Some(format!(
            "the lesion slice range {range} does not hold the key slice {}",
            key.index
        ));
    }
    None
}

/// Every fault of the evidence of `findings` on a CT of `dims`: the key slice outside the
/// volume, then [`box_problem`] and [`range_problem`].
#[must_use]
pub fn evidence_problems(findings: &Findings, dims: [usize; 3]) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(key) = &findings.key_slice
        && key.index as usize >= dims[2]
    {
        problems.push(format!(
            "key slice {} is outside the volume's {} axial slices (0-{})",
            key.index,
            dims[2],
            dims[2].saturating_sub(1)
        ));
    }
    problems.extend(box_problem(findings, dims));
    problems.extend(range_problem(findings, dims[2]));
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::{KeySlice, SliceBox};

    fn with_evidence(key: u32, voxels: [u32; 4], range: Option<(u32, u32)>) -> Findings {
        Findings {
            key_slice: Some(KeySlice {
                index: key,
                z_mm: None,
                sop_instance_uid: None,
                span: None,
            }),
            slice_box: Some(SliceBox { voxels, mm: None }),
            lesion_slices: range.map(|(first, last)| SliceRange { first, last }),
            ..Findings::default()
        }
    }

    #[test]
    fn a_box_inside_the_slice_and_a_range_around_the_key_slice_pass() {
        let findings = with_evidence(40, [10, 20, 30, 40], Some((35, 45)));
        assert!(evidence_problems(&findings, [64, 64, 80]).is_empty());
    }

    #[test]
    fn each_fault_is_named() {
        let dims = [64, 48, 80];
        let inverted = with_evidence(40, [30, 20, 10, 40], None);
        assert!(evidence_problems(&inverted, dims)[0].contains("out of order"));
        let outside = with_evidence(40, [10, 20, 30, 48], None);
        assert!(evidence_problems(&outside, dims)[0].contains("64 × 48 slice"));
        let range = with_evidence(40, [10, 20, 30, 40], Some((45, 50)));
        assert!(evidence_problems(&range, dims)[0].contains("does not hold the key slice 40"));
        let backwards = with_evidence(40, [10, 20, 30, 40], Some((45, 35)));
        assert!(evidence_problems(&backwards, dims)[0].contains("inverted"));
        let beyond = with_evidence(79, [10, 20, 30, 40], Some((70, 90)));
        assert!(evidence_problems(&beyond, dims)[0].contains("leaves the volume"));
    }

    #[test]
    fn iou_is_one_for_the_same_box_and_zero_apart() {
        let a = SliceBox {
            voxels: [0, 0, 9, 9],
            mm: None,
        };
        let b = SliceBox {
            voxels: [5, 0, 14, 9],
            mm: None,
        };
        let far = SliceBox {
            voxels: [50, 50, 60, 60],
            mm: None,
        };
        assert!((a.iou(&a) - 1.0).abs() < 1e-12);
        assert!((a.iou(&b) - 50.0 / 150.0).abs() < 1e-12);
        assert!(a.iou(&far).abs() < 1e-12);
    }
}
