//! Screen and voxel coordinates of one plane's rectangle, both ways.

use egui::{Pos2, Rect};

use super::state::{Viewer, plane_index};
use crate::render::view::Plane;

impl Viewer {
    /// Maps a point in a view's rect to a continuous voxel index.
    pub(super) fn voxel_at(
        &self,
        plane: Plane,
        rect: Rect,
        pos: Pos2,
        spacing: [f64; 3],
    ) -> [f64; 3] {
        let u = f64::from((pos.x - rect.min.x) / rect.width().max(1.0));
        let v = f64::from((pos.y - rect.min.y) / rect.height().max(1.0));
        self.voxel_at_uv(
            plane,
            [u, v],
            [f64::from(rect.width()), f64::from(rect.height())],
            spacing,
        )
    }

    /// Maps a voxel to a point in a view's rect (its in-plane coordinates).
    pub(super) fn point_of(
        &self,
        plane: Plane,
        rect: Rect,
        voxel: [f64; 3],
        spacing: [f64; 3],
    ) -> Pos2 {
        let index = plane_index(plane);
        let matrix = self.views[index].voxel_from_uv(
            self.axes[index],
            self.dims,
            spacing,
            [f64::from(rect.width()), f64::from(rect.height())],
        );
        let (across, _) = self.axes[index].horizontal;
        let (down, _) = self.axes[index].vertical;
        let u = (voxel[across] - f64::from(matrix[3][across])) / f64::from(matrix[0][across]);
        let v = (voxel[down] - f64::from(matrix[3][down])) / f64::from(matrix[1][down]);
        Pos2::new(
            rect.min.x + (u as f32) * rect.width(),
            rect.min.y + (v as f32) * rect.height(),
        )
    }
}
