//! The evidence box and its 3D extent as data, and what a drag of the box tool makes of
//! them: no egui here, so the viewer's state and these rules are tested without a window
//! (`evidence` draws them and reads the pointer).

use crate::render::view::Plane;

/// The evidence shown: a box on the key slice and, when known, the lesion's slice range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evidence {
    /// `[column_min, row_min, column_max, row_max]` on the key slice (voxels, inclusive).
    pub voxels: [u32; 4],
    /// The key slice (axial index) the box lies on.
    pub key_slice: u32,
    /// First and last axial slice of the lesion, inclusive.
    pub slices: Option<(u32, u32)>,
}

impl Evidence {
    /// The slices the extent covers: the range, or the key slice alone.
    #[must_use]
    pub fn span(&self) -> (u32, u32) {
        self.slices.unwrap_or((self.key_slice, self.key_slice))
    }

    /// The cuboid's low and high corners in continuous voxel coordinates (voxel edges).
    pub(super) fn corners(&self) -> ([f64; 3], [f64; 3]) {
        let [c0, r0, c1, r1] = self.voxels.map(f64::from);
        let (first, last) = self.span();
        (
            [c0 - 0.5, r0 - 0.5, f64::from(first) - 0.5],
            [c1 + 0.5, r1 + 0.5, f64::from(last) + 0.5],
        )
    }
}

/// What a drag with the box tool changes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum DragKind {
    /// A new box from the drag's start on this axial slice.
    New,
    /// The whole box, by the drag.
    Move,
    /// One corner: 0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right (columns, rows).
    Corner(usize),
    /// The first (`false`) or last (`true`) slice of the range.
    RangeEnd(bool),
}

/// A drag in progress.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct BoxDrag {
    pub(super) plane: Plane,
    pub(super) kind: DragKind,
    /// Where the drag started (continuous voxel).
    pub(super) start: [f64; 3],
    /// The evidence before the drag (for moves and corners).
    pub(super) before: Option<Evidence>,
    /// The evidence the drag makes so far.
    pub(super) preview: Option<Evidence>,
}

/// The least reach of a new box's slice range either side of its key slice.
const NEW_RANGE_SLICES: u32 = 2;

/// A new box without a range gets one as deep as the box is wide (a lesion is about as
/// tall as it is wide), at least [`NEW_RANGE_SLICES`] slices either side of the key
/// slice: an extent of one slice is a line on the coronal and sagittal planes whose ends
/// cannot be grabbed apart.
pub(super) fn with_default_range(
    mut evidence: Evidence,
    dims: [usize; 3],
    spacing: [f64; 3],
) -> Evidence {
    if evidence.slices.is_none() {
        let [c0, r0, c1, r1] = evidence.voxels.map(f64::from);
        let half_mm = ((c1 - c0 + 1.0) * spacing[0]).min((r1 - r0 + 1.0) * spacing[1]) / 2.0;
        let reach = ((half_mm / spacing[2].max(1e-3)).round() as u32).max(NEW_RANGE_SLICES);
        let last = dims[2].saturating_sub(1) as u32;
        evidence.slices = Some((
            evidence.key_slice.saturating_sub(reach),
            (evidence.key_slice + reach).min(last),
        ));
    }
    evidence
}

/// The evidence a drag of `kind` from `start` to `now` makes, in a volume of `dims` shown
/// at `axial_slice`.
pub(super) fn dragged_evidence(
    kind: DragKind,
    before: Option<Evidence>,
    start: [f64; 3],
    now: [f64; 3],
    dims: [usize; 3],
    axial_slice: f64,
) -> Option<Evidence> {
    let last = |axis: usize| (dims[axis].max(1) - 1) as f64;
    let clamp = |value: f64, axis: usize| value.round().clamp(0.0, last(axis)) as u32;
    let axial_slice = axial_slice.round().max(0.0) as u32;
    match kind {
        DragKind::New => {
            let (a0, a1) = (clamp(start[0], 0), clamp(now[0], 0));
            let (b0, b1) = (clamp(start[1], 1), clamp(now[1], 1));
            let slices = before
                .and_then(|e| e.slices)
                .filter(|(first, last)| *first <= axial_slice && axial_slice <= *last);
            Some(Evidence {
                voxels: [a0.min(a1), b0.min(b1), a0.max(a1), b0.max(b1)],
                key_slice: axial_slice,
                slices,
            })
        }
        DragKind::Move => {
            let mut evidence = before?;
            let [c0, r0, c1, r1] = evidence.voxels.map(i64::from);
            let shift = |delta: f64, low: i64, high: i64, axis: usize| {
                let max = last(axis) as i64;
                (delta.round() as i64).clamp(-low, max - high)
            };
            let dc = shift(now[0] - start[0], c0, c1, 0);
            let dr = shift(now[1] - start[1], r0, r1, 1);
            evidence.voxels = [c0 + dc, r0 + dr, c1 + dc, r1 + dr].map(|v| v as u32);
            Some(evidence)
        }
        DragKind::Corner(corner) => {
            let mut evidence = before?;
            let [c0, r0, c1, r1] = evidence.voxels;
            let (column, row) = (clamp(now[0], 0), clamp(now[1], 1));
            let (other_column, other_row) = (
                if corner % 2 == 1 { c0 } else { c1 },
                if corner >= 2 { r0 } else { r1 },
            );
            evidence.voxels = [
                column.min(other_column),
                row.min(other_row),
                column.max(other_column),
                row.max(other_row),
            ];
            Some(evidence)
        }
        DragKind::RangeEnd(is_last) => {
            let mut evidence = before?;
            let (first, last_slice) = evidence.span();
            let moved = clamp(now[2], 2);
            let (first, last_slice) = if is_last {
                (first, moved)
            } else {
                (moved, last_slice)
            };
            let (low, high) = (first.min(last_slice), first.max(last_slice));
            evidence.slices = Some((low.min(evidence.key_slice), high.max(evidence.key_slice)));
            Some(evidence)
        }
    }
}
