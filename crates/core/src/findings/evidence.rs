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

/// Largest share of the slice a model's box may cover and still point at one lesion.
pub const MAX_BOX_SHARE: f64 = 0.25;

/// Most lesions a report may list in one organ; more are not a report a reader can check.
pub const MAX_LESIONS_PER_ORGAN: usize = 20;

/// The box of `findings` covers more than [`MAX_BOX_SHARE`] of a slice of `columns` × `rows`
/// (a box around the whole slice points at nothing): the sentence saying so.
#[must_use]
pub fn box_too_large(findings: &Findings, columns: usize, rows: usize) -> Option<String> {
    let [c0, r0, c1, r1] = findings.slice_box.as_ref()?.voxels.map(|v| v as usize);
    if columns == 0 || rows == 0 || c1 < c0 || r1 < r0 {
        return None;
    }
    let share = ((c1.min(columns - 1) - c0.min(columns - 1) + 1)
        * (r1.min(rows - 1) - r0.min(rows - 1) + 1)) as f64
        / (columns * rows) as f64;
    (share > MAX_BOX_SHARE).then(|| {
        format!(
            "the box (columns {c0}-{c1}, rows {r0}-{r1}) covers {:.0}% of the slice: a box around one lesion covers at most {:.0}%",
            100.0 * share,
            100.0 * MAX_BOX_SHARE
        )
    })
}

/// Keeps at most [`MAX_LESIONS_PER_ORGAN`] lesions in each organ of `findings`: a sentence for
/// each organ cut, naming it and what was dropped.
pub fn cap_lesions(findings: &mut Findings) -> Vec<String> {
    let mut cut = Vec::new();
    for (organ, finding) in &mut findings.organs {
        let listed = finding.lesions.len();
        if listed > MAX_LESIONS_PER_ORGAN {
            finding.lesions.truncate(MAX_LESIONS_PER_ORGAN);
            cut.push(format!(
                "{organ}: the report lists {listed} lesions; the first {MAX_LESIONS_PER_ORGAN} are kept"
            ));
        }
    }
    cut
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

    #[test]
    fn a_box_around_most_of_the_slice_and_a_flood_of_lesions_are_named() {
        let whole = with_evidence(40, [0, 0, 63, 47], None);
        let said = box_too_large(&whole, 64, 48).expect("too large");
        assert!(said.contains("covers 100% of the slice"), "{said}");
        let lesion = with_evidence(40, [10, 10, 29, 29], None);
        assert!(box_too_large(&lesion, 64, 48).is_none());
        let mut flood = Findings::default();
        flood.organ_mut(crate::findings::Organ::Pancreas).lesions =
            vec![crate::findings::Lesion::default(); 45];
        let cut = cap_lesions(&mut flood);
        assert_eq!(
            cut,
            ["pancreas: the report lists 45 lesions; the first 20 are kept"]
        );
        assert_eq!(
            flood.organ(crate::findings::Organ::Pancreas).lesions.len(),
            MAX_LESIONS_PER_ORGAN
        );
    }
}
