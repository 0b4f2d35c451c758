//! The evidence box and its 3D extent: drawn on the axial plane (the box on the key slice),
//! and on the coronal and sagittal planes as the cuboid it spans (box columns or rows × the
//! lesion's slice range); edited with the box tool (`B`).
//!
//! With the tool on, a primary drag on the axial plane draws a new box on the slice shown,
//! or moves the box (drag inside it) or one of its corners (drag a corner) on the key slice;
//! on the coronal or sagittal plane, dragging the extent's top or bottom edge sets the first
//! or last slice of the range, which always keeps the key slice. The finished drag becomes
//! one [`ViewerCommand::EditEvidence`], which the app records as corrections (undo with
//! Ctrl+Z).

use egui::{Color32, Pos2, Rect, Stroke, Vec2};

use super::extent::{self, BoxDrag, DragKind, Evidence};
use super::state::{Viewer, ViewerCommand, plane_index};
use crate::render::view::Plane;

const EVIDENCE_COLOUR: Color32 = Color32::from_rgb(255, 200, 40);
/// How near (points) to a corner or an edge a drag grabs it.
const GRAB: f32 = 8.0;
impl Viewer {
    /// [`extent::with_default_range`] in this viewer's volume.
    pub(super) fn with_default_range(&self, evidence: Evidence, spacing: [f64; 3]) -> Evidence {
        extent::with_default_range(evidence, self.dims, spacing)
    }

    /// [`extent::dragged_evidence`] in this viewer's volume at the axial slice shown.
    pub(super) fn dragged_evidence(
        &self,
        kind: DragKind,
        before: Option<Evidence>,
        start: [f64; 3],
        now: [f64; 3],
    ) -> Option<Evidence> {
        let axial = self.views[plane_index(Plane::Axial)].slice;
        extent::dragged_evidence(kind, before, start, now, self.dims, axial)
    }

    /// The evidence to draw: a drag's preview while dragging, else the evidence.
    fn shown_evidence(&self) -> Option<Evidence> {
        self.box_drag
            .and_then(|drag| drag.preview)
            .or(self.evidence)
    }

    /// The screen rectangle of the evidence on `plane`, and whether the plane's slice cuts it.
    fn evidence_rect(
        &self,
        evidence: &Evidence,
        plane: Plane,
        rect: Rect,
        spacing: [f64; 3],
    ) -> (Rect, bool) {
        let index = plane_index(plane);
        let (low, high) = evidence.corners();
        let a = self.point_of(plane, rect, low, spacing);
        let b = self.point_of(plane, rect, high, spacing);
        let normal = self.axes[index].normal;
        let slice = self.views[index].slice;
        let cut = slice > low[normal] && slice < high[normal];
        (Rect::from_two_pos(a, b), cut)
    }

    /// Draws the evidence on `plane`: solid where the plane's slice cuts it, dashed where it
    /// lies on other slices (so the reviewer sees where to scroll).
    pub(super) fn evidence_overlay(
        &self,
        ui: &egui::Ui,
        plane: Plane,
        rect: Rect,
        spacing: [f64; 3],
    ) {
        let Some(evidence) = self.shown_evidence() else {
            return;
        };
        let (shape, cut) = self.evidence_rect(&evidence, plane, rect, spacing);
        let painter = ui.painter_at(rect);
        if cut {
            painter.rect_stroke(
                shape,
                0.0,
                Stroke::new(2.0, EVIDENCE_COLOUR),
                egui::StrokeKind::Outside,
            );
        } else {
            let faint = Stroke::new(1.0, EVIDENCE_COLOUR.gamma_multiply(0.6));
            let corners = [
                shape.left_top(),
                shape.right_top(),
                shape.right_bottom(),
                shape.left_bottom(),
                shape.left_top(),
            ];
            for pair in corners.windows(2) {
                painter.add(egui::Shape::dashed_line(
                    &[pair[0], pair[1]],
                    faint,
                    4.0,
                    4.0,
                ));
            }
        }
        let (first, last) = evidence.span();
        let text = match plane {
            Plane::Axial => format!("evidence, slice {}", evidence.key_slice),
            _ => format!("lesion slices {first}-{last}"),
        };
        // Above the box, towards the middle of the plane, so the label stays on screen.
        let (at, align) = if shape.center().x > rect.center().x {
            (shape.right_top(), egui::Align2::RIGHT_BOTTOM)
        } else {
            (shape.left_top(), egui::Align2::LEFT_BOTTOM)
        };
        painter.text(
            at - Vec2::new(0.0, 3.0),
            align,
            text,
            egui::FontId::proportional(12.0),
            EVIDENCE_COLOUR,
        );
        if self.box_tool && cut && plane == Plane::Axial {
            for corner in [
                shape.left_top(),
                shape.right_top(),
                shape.left_bottom(),
                shape.right_bottom(),
            ] {
                painter.rect_filled(
                    Rect::from_center_size(corner, Vec2::splat(6.0)),
                    1.0,
                    EVIDENCE_COLOUR,
                );
            }
        }
    }

    /// What a drag starting at `pos` (voxel `voxel`) on `plane` would change, if anything.
    pub(super) fn grab(
        &self,
        plane: Plane,
        rect: Rect,
        pos: Pos2,
        voxel: [f64; 3],
        spacing: [f64; 3],
    ) -> Option<DragKind> {
        let axial_slice = self.views[plane_index(Plane::Axial)].slice;
        match (plane, self.evidence) {
            (Plane::Axial, Some(evidence))
                if (f64::from(evidence.key_slice) - axial_slice).abs() < 0.5 =>
            {
                let (shape, _) = self.evidence_rect(&evidence, plane, rect, spacing);
                let (low, high) = evidence.corners();
                let z = f64::from(evidence.key_slice);
                let corners = [
                    [low[0], low[1], z],
                    [high[0], low[1], z],
                    [low[0], high[1], z],
                    [high[0], high[1], z],
                ];
                if let Some(corner) = corners
                    .iter()
                    .position(|c| self.point_of(plane, rect, *c, spacing).distance(pos) <= GRAB)
                {
                    return Some(DragKind::Corner(corner));
                }
                if shape.contains(pos) {
                    return Some(DragKind::Move);
                }
                Some(DragKind::New)
            }
            (Plane::Axial, _) => Some(DragKind::New),
            (_, Some(evidence)) => {
                let (low, high) = evidence.corners();
                let index = plane_index(plane);
                // The slice axis (2) lies along one screen direction of this plane.
                let along_x = self.axes[index].horizontal.0 == 2;
                let edge = |value: f64| {
                    let mut at = voxel;
                    at[2] = value;
                    let p = self.point_of(plane, rect, at, spacing);
                    if along_x {
                        (p.x - pos.x).abs()
                    } else {
                        (p.y - pos.y).abs()
                    }
                };
                let (to_first, to_last) = (edge(low[2]), edge(high[2]));
                let inside_across = {
                    let (shape, _) = self.evidence_rect(&evidence, plane, rect, spacing);
                    if along_x {
                        pos.y >= shape.min.y - GRAB && pos.y <= shape.max.y + GRAB
                    } else {
                        pos.x >= shape.min.x - GRAB && pos.x <= shape.max.x + GRAB
                    }
                };
                if !inside_across {
                    return None;
                }
                if to_first <= GRAB && to_first <= to_last {
                    Some(DragKind::RangeEnd(false))
                } else if to_last <= GRAB {
                    Some(DragKind::RangeEnd(true))
                } else {
                    None
                }
            }
            _ => None,
        }
    }

    /// The box tool's drags on `plane`; returns whether the tool is on and so takes the
    /// primary button (the plane does not also move its crosshair).
    pub(super) fn box_tool_input(
        &mut self,
        plane: Plane,
        rect: Rect,
        response: &egui::Response,
        spacing: [f64; 3],
        commands: &mut Vec<ViewerCommand>,
    ) -> bool {
        if !self.box_tool {
            return false;
        }
        let primary = egui::PointerButton::Primary;
        // A drag starts where the button went down, not where it passed egui's drag threshold.
        let pressed_at = response
            .ctx
            .input(|input| input.pointer.press_origin())
            .or_else(|| response.interact_pointer_pos());
        if response.drag_started_by(primary)
            && let Some(pos) = pressed_at
        {
            let voxel = self.voxel_at(plane, rect, pos, spacing);
            self.box_drag = self
                .grab(plane, rect, pos, voxel, spacing)
                .map(|kind| BoxDrag {
                    plane,
                    kind,
                    start: voxel,
                    before: self.evidence,
                    preview: None,
                });
        }
        // While the tool is on, primary clicks and drags are the tool's (the crosshair stays).
        let Some(mut drag) = self.box_drag.filter(|drag| drag.plane == plane) else {
            return true;
        };
        if let Some(pos) = response.interact_pointer_pos() {
            let now = self.voxel_at(plane, rect, pos, spacing);
            drag.preview = self
                .dragged_evidence(drag.kind, drag.before, drag.start, now)
                .map(|evidence| self.with_default_range(evidence, spacing));
            self.box_drag = Some(drag);
        }
        if response.drag_stopped() {
            self.box_drag = None;
            if let Some(evidence) = drag.preview.filter(|e| Some(*e) != drag.before) {
                commands.push(ViewerCommand::EditEvidence(evidence));
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyslice_core::volume::geometry::Affine;
    use keyslice_core::volume::{Volume, VolumeInfo, Voxels};

    fn viewer_on_slice(slice: f64) -> (Viewer, Volume) {
        let affine = Affine::from_axes(
            [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            [1.0, 1.0, 2.0],
            [0.0; 3],
        );
        let volume = Volume::new(
            [40, 30, 20],
            affine,
            Voxels::I16(vec![0; 40 * 30 * 20]),
            Vec::new(),
            VolumeInfo::default(),
        )
        .expect("a volume");
        let mut viewer = Viewer::new(&volume);
        viewer.apply(
            ViewerCommand::SetSlice {
                plane: Plane::Axial,
                slice,
            },
            &volume,
        );
        (viewer, volume)
    }

    const BOX: Evidence = Evidence {
        voxels: [10, 8, 20, 16],
        key_slice: 9,
        slices: Some((6, 12)),
    };

    #[test]
    fn a_new_box_is_on_the_slice_shown_and_keeps_a_range_that_holds_it() {
        let (viewer, _) = viewer_on_slice(11.0);
        let new = viewer
            .dragged_evidence(
                DragKind::New,
                Some(BOX),
                [30.2, 20.0, 11.0],
                [25.0, 4.6, 11.0],
            )
            .expect("a box");
        assert_eq!(new.voxels, [25, 5, 30, 20], "corners in order, rounded");
        assert_eq!((new.key_slice, new.slices), (11, Some((6, 12))));
        let (viewer, _) = viewer_on_slice(15.0);
        let elsewhere = viewer
            .dragged_evidence(
                DragKind::New,
                Some(BOX),
                [1.0, 1.0, 15.0],
                [99.0, 2.0, 15.0],
            )
            .expect("a box");
        assert_eq!(elsewhere.voxels, [1, 1, 39, 2], "clamped to the slice");
        assert_eq!(
            elsewhere.slices, None,
            "the old range does not hold slice 15"
        );
    }

    #[test]
    fn a_new_box_without_a_range_gets_one_as_deep_as_it_is_wide() {
        let (viewer, _) = viewer_on_slice(10.0);
        let spacing = [1.0, 1.0, 2.0];
        let new = Evidence {
            voxels: [10, 10, 21, 17],
            key_slice: 10,
            slices: None,
        };
        // 8 mm across its shorter side: 4 mm either way, two 2 mm slices.
        assert_eq!(
            viewer.with_default_range(new, spacing).slices,
            Some((8, 12))
        );
        // 24 mm across: six slices either way, cut at the volume's last slice (19).
        let wide = Evidence {
            voxels: [0, 0, 23, 23],
            key_slice: 16,
            slices: None,
        };
        assert_eq!(
            viewer.with_default_range(wide, spacing).slices,
            Some((10, 19))
        );
        // A box with a range keeps it.
        assert_eq!(viewer.with_default_range(BOX, spacing), BOX);
    }

    #[test]
    fn moves_and_corners_stay_inside_and_ranges_keep_the_key_slice() {
        let (viewer, _) = viewer_on_slice(9.0);
        let moved = viewer
            .dragged_evidence(
                DragKind::Move,
                Some(BOX),
                [15.0, 12.0, 9.0],
                [45.0, 10.0, 9.0],
            )
            .expect("moved");
        assert_eq!(
            moved.voxels,
            [29, 6, 39, 14],
            "stopped at the right edge, same size"
        );
        let corner = viewer
            .dragged_evidence(
                DragKind::Corner(3),
                Some(BOX),
                [20.0, 16.0, 9.0],
                [5.0, 3.0, 9.0],
            )
            .expect("resized");
        assert_eq!(
            corner.voxels,
            [5, 3, 10, 8],
            "dragged past the other corner: swapped"
        );
        let last = viewer
            .dragged_evidence(
                DragKind::RangeEnd(true),
                Some(BOX),
                [0.0, 0.0, 12.0],
                [0.0, 0.0, 3.0],
            )
            .expect("range");
        assert_eq!(
            last.slices,
            Some((3, 9)),
            "the range still holds key slice 9"
        );
        let first = viewer
            .dragged_evidence(
                DragKind::RangeEnd(false),
                Some(BOX),
                [0.0, 0.0, 6.0],
                [0.0, 0.0, 2.4],
            )
            .expect("range");
        assert_eq!(first.slices, Some((2, 12)));
    }
}
