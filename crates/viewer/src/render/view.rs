//! Where a view looks: plane, slice, zoom, pan and window/level, and the one affine map the
//! shader needs (viewport uv → voxel index). Pure maths, testable without a GPU.
//!
//! Planes follow the radiological convention whatever the volume's axis order: axial and
//! coronal show the patient's right on screen left; axial has anterior up; coronal and
//! sagittal have superior up; sagittal has anterior on the left. Pixels are square in
//! millimetres, so anisotropic voxels are shown true to size.

use serde::{Deserialize, Serialize};

use keyslice_core::volume::Vec3;
use keyslice_core::volume::geometry::dot;

/// The three orthogonal planes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Plane {
    /// Transverse: looking from the feet.
    Axial,
    /// Frontal: looking from the front.
    Coronal,
    /// Side view: looking from the patient's left.
    Sagittal,
}

impl Plane {
    /// Every plane, in the order the viewer lays them out.
    pub const ALL: [Self; 3] = [Self::Axial, Self::Coronal, Self::Sagittal];

    /// Patient directions (LPS) that should point screen-right and screen-down.
    fn screen_directions(self) -> (Vec3, Vec3) {
        match self {
            Self::Axial => ([1.0, 0.0, 0.0], [0.0, 1.0, 0.0]),
            Self::Coronal => ([1.0, 0.0, 0.0], [0.0, 0.0, -1.0]),
            Self::Sagittal => ([0.0, 1.0, 0.0], [0.0, 0.0, -1.0]),
        }
    }
}

/// How a plane maps onto the volume's voxel axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlaneAxes {
    /// Voxel axis running screen-right, and whether it runs backwards.
    pub horizontal: (usize, bool),
    /// Voxel axis running screen-down, and whether it runs backwards.
    pub vertical: (usize, bool),
    /// Voxel axis along the plane normal (the slice index).
    pub normal: usize,
}

impl PlaneAxes {
    /// Picks the voxel axes closest to the plane's screen directions.
    #[must_use]
    pub fn new(plane: Plane, directions: &[Vec3; 3]) -> Self {
        let (right, down) = plane.screen_directions();
        let best = |wanted: Vec3, exclude: Option<usize>| -> (usize, bool) {
            let axis = (0..3)
                .filter(|&axis| Some(axis) != exclude)
                .max_by(|&a, &b| {
                    dot(directions[a], wanted)
                        .abs()
                        .total_cmp(&dot(directions[b], wanted).abs())
                })
                .unwrap_or(0);
            (axis, dot(directions[axis], wanted) < 0.0)
        };
        let horizontal = best(right, None);
        let vertical = best(down, Some(horizontal.0));
        let normal = 3 - horizontal.0 - vertical.0;
        Self {
            horizontal,
            vertical,
            normal,
        }
    }
}

/// One view's state.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SliceView {
    /// Which plane.
    pub plane: Plane,
    /// Slice position along the plane normal, in voxel index units.
    pub slice: f64,
    /// 1 shows the whole plane; 2 shows half of it twice as large.
    pub zoom: f64,
    /// Pan in millimetres (screen right, screen down).
    pub pan_mm: [f64; 2],
    /// Window centre (level) in HU.
    pub window_center_hu: f64,
    /// Window width in HU.
    pub window_width_hu: f64,
}

impl SliceView {
    /// A view of the middle slice with the soft-tissue window (400/40).
    #[must_use]
    pub fn centred(plane: Plane, axes: PlaneAxes, dims: [usize; 3]) -> Self {
        Self {
            plane,
            slice: ((dims[axes.normal].max(1) - 1) / 2) as f64,
            zoom: 1.0,
            pan_mm: [0.0, 0.0],
            window_center_hu: 40.0,
            window_width_hu: 400.0,
        }
    }

    /// Millimetres per screen pixel for a viewport of `viewport_px`.
    #[must_use]
    pub fn mm_per_pixel(
        &self,
        axes: PlaneAxes,
        dims: [usize; 3],
        spacing_mm: Vec3,
        viewport_px: [f64; 2],
    ) -> f64 {
        let width_mm = dims[axes.horizontal.0] as f64 * spacing_mm[axes.horizontal.0];
        let height_mm = dims[axes.vertical.0] as f64 * spacing_mm[axes.vertical.0];
        let fit = (width_mm / viewport_px[0].max(1.0)).max(height_mm / viewport_px[1].max(1.0));
        fit / self.zoom.max(1e-3)
    }

    /// The affine map from viewport uv (0..1, y down) to continuous voxel indices, as a
    /// column-major 4×4 matrix (WGSL's `mat4x4<f32>` layout).
    #[must_use]
    pub fn voxel_from_uv(
        &self,
        axes: PlaneAxes,
        dims: [usize; 3],
        spacing_mm: Vec3,
        viewport_px: [f64; 2],
    ) -> [[f32; 4]; 4] {
        let mm_per_pixel = self.mm_per_pixel(axes, dims, spacing_mm, viewport_px);
        let mut columns = [[0.0f64; 4]; 4];
        for (screen, (axis, backwards), extent_px, pan) in [
            (0, axes.horizontal, viewport_px[0], self.pan_mm[0]),
            (1, axes.vertical, viewport_px[1], self.pan_mm[1]),
        ] {
            let sign = if backwards { -1.0 } else { 1.0 };
            let centre = (dims[axis] as f64 - 1.0) / 2.0;
            // voxel = centre + sign · ((uv · extent − extent / 2) · mm_per_pixel − pan) / spacing
            columns[screen][axis] = sign * extent_px * mm_per_pixel / spacing_mm[axis];
            columns[3][axis] =
                centre + sign * (-extent_px / 2.0 * mm_per_pixel - pan) / spacing_mm[axis];
        }
        columns[3][axes.normal] = self.slice;
        columns[3][3] = 1.0;
        columns.map(|column| column.map(|value| value as f32))
    }
}

#[cfg(test)]
#[expect(clippy::float_cmp, reason = "voxel centres map to exact integers")]
mod tests {
    use super::*;

    const LPS: [Vec3; 3] = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];

    fn apply(matrix: &[[f32; 4]; 4], u: f32, v: f32) -> [f32; 3] {
        [0, 1, 2].map(|row| matrix[0][row] * u + matrix[1][row] * v + matrix[3][row])
    }

    #[test]
    fn axial_pixel_centres_hit_voxel_centres() {
        let dims = [8, 6, 4];
        let axes = PlaneAxes::new(Plane::Axial, &LPS);
        assert_eq!(axes.horizontal, (0, false));
        assert_eq!(axes.vertical, (1, false));
        assert_eq!(axes.normal, 2);
        let view = SliceView::centred(Plane::Axial, axes, dims);
        let matrix = view.voxel_from_uv(axes, dims, [1.0, 1.0, 3.0], [8.0, 6.0]);
        assert_eq!(apply(&matrix, 0.5 / 8.0, 0.5 / 6.0), [0.0, 0.0, 1.0]);
        assert_eq!(apply(&matrix, 7.5 / 8.0, 5.5 / 6.0), [7.0, 5.0, 1.0]);
    }

    #[test]
    fn coronal_has_superior_at_the_top() {
        let dims = [4, 4, 10];
        let axes = PlaneAxes::new(Plane::Coronal, &LPS);
        assert_eq!(axes.vertical, (2, true));
        assert_eq!(axes.normal, 1);
        let view = SliceView::centred(Plane::Coronal, axes, dims);
        let matrix = view.voxel_from_uv(axes, dims, [1.0, 1.0, 1.0], [4.0, 10.0]);
        // Top row of the screen is the highest slice (superior).
        assert_eq!(apply(&matrix, 0.5 / 4.0, 0.5 / 10.0)[2], 9.0);
    }

    #[test]
    fn sagittal_has_anterior_on_the_left() {
        let axes = PlaneAxes::new(Plane::Sagittal, &LPS);
        // Screen right runs posterior (+y in LPS): anterior is on the left.
        assert_eq!(axes.horizontal, (1, false));
        assert_eq!(axes.normal, 0);
    }

    #[test]
    fn a_flipped_volume_is_shown_the_same_way_round() {
        // i runs towards the patient's right: axial must run it backwards.
        let flipped = [[-1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
        assert_eq!(PlaneAxes::new(Plane::Axial, &flipped).horizontal, (0, true));
    }

    #[test]
    fn anisotropic_voxels_keep_their_physical_aspect() {
        // 10 × 10 voxels of 1 × 1 mm in-plane, 10 slices of 5 mm: a coronal view is 10 mm
        // wide and 50 mm tall, so in a square viewport the height sets the scale.
        let dims = [10, 10, 10];
        let axes = PlaneAxes::new(Plane::Coronal, &LPS);
        let view = SliceView::centred(Plane::Coronal, axes, dims);
        let scale = view.mm_per_pixel(axes, dims, [1.0, 1.0, 5.0], [100.0, 100.0]);
        assert!((scale - 0.5).abs() < 1e-12);
    }
}
