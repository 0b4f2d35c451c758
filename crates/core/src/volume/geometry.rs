//! Affine maps between voxel indices and the patient frame, in millimetres.
//!
//! The patient frame is DICOM's LPS: +x towards the patient's left, +y towards posterior,
//! +z towards superior (head). NIfTI's world frame is RAS (+x right, +y anterior), so the
//! two differ by a sign flip of x and y; [`Affine::ras_from_lps`] converts.
//!
//! Owns small fixed-size linear algebra only; knows nothing of files, pixels or rendering.

use serde::{Deserialize, Serialize};

/// A point or direction in 3D, in millimetres unless the name says otherwise.
pub type Vec3 = [f64; 3];

/// `p = linear · v + translation`: maps voxel indices `v = [i, j, k]` to patient millimetres.
///
/// Column `c` of `linear` is the step in millimetres taken when voxel index `c` grows by one,
/// so its length is the voxel spacing along that axis and its direction the axis direction.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Affine {
    /// Row-major 3×3 matrix.
    pub linear: [[f64; 3]; 3],
    /// Patient position of voxel `[0, 0, 0]`, in millimetres.
    pub translation: Vec3,
}

impl Affine {
    /// The identity map.
    pub const IDENTITY: Self = Self {
        linear: [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
        translation: [0.0; 3],
    };

    /// Builds the map from the three axis directions (unit vectors), the spacing along each and
    /// the origin (position of voxel `[0, 0, 0]`).
    #[must_use]
    pub fn from_axes(directions: [Vec3; 3], spacing_mm: Vec3, origin_mm: Vec3) -> Self {
        let mut linear = [[0.0; 3]; 3];
        for (column, (direction, spacing)) in directions.iter().zip(spacing_mm).enumerate() {
            for row in 0..3 {
                linear[row][column] = direction[row] * spacing;
            }
        }
        Self {
            linear,
            translation: origin_mm,
        }
    }

    /// Column `axis` of the linear part: the millimetre step of one voxel along that axis.
    #[must_use]
    pub fn column(&self, axis: usize) -> Vec3 {
        [
            self.linear[0][axis],
            self.linear[1][axis],
            self.linear[2][axis],
        ]
    }

    /// Voxel spacing along each axis (length of each column), in millimetres.
    #[must_use]
    pub fn spacing_mm(&self) -> Vec3 {
        [0, 1, 2].map(|axis| norm(self.column(axis)))
    }

    /// Unit direction of each voxel axis, as columns; a zero column stays zero.
    #[must_use]
    pub fn directions(&self) -> [Vec3; 3] {
        [0, 1, 2].map(|axis| normalized(self.column(axis)))
    }

    /// Maps a (possibly fractional) voxel index to the patient frame.
    #[must_use]
    pub fn apply(&self, voxel: Vec3) -> Vec3 {
        let mut out = self.translation;
        for (row, value) in out.iter_mut().enumerate() {
            *value += self.linear[row][0] * voxel[0]
                + self.linear[row][1] * voxel[1]
                + self.linear[row][2] * voxel[2];
        }
        out
    }

    /// Applies only the linear part (for directions and steps).
    #[must_use]
    pub fn apply_linear(&self, step: Vec3) -> Vec3 {
        let mut out = [0.0; 3];
        for (row, value) in out.iter_mut().enumerate() {
            *value = self.linear[row][0] * step[0]
                + self.linear[row][1] * step[1]
                + self.linear[row][2] * step[2];
        }
        out
    }

    /// Determinant of the linear part.
    #[must_use]
    pub fn determinant(&self) -> f64 {
        let m = &self.linear;
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    }

    /// The inverse map, or `None` when the linear part is singular (a zero spacing or two
    /// parallel axes).
    #[must_use]
    pub fn inverse(&self) -> Option<Self> {
        let det = self.determinant();
        if !det.is_finite() || det.abs() < 1e-12 {
            return None;
        }
        let m = &self.linear;
        let inv_det = 1.0 / det;
        let linear = [
            [
                (m[1][1] * m[2][2] - m[1][2] * m[2][1]) * inv_det,
                (m[0][2] * m[2][1] - m[0][1] * m[2][2]) * inv_det,
                (m[0][1] * m[1][2] - m[0][2] * m[1][1]) * inv_det,
            ],
            [
                (m[1][2] * m[2][0] - m[1][0] * m[2][2]) * inv_det,
                (m[0][0] * m[2][2] - m[0][2] * m[2][0]) * inv_det,
                (m[0][2] * m[1][0] - m[0][0] * m[1][2]) * inv_det,
            ],
            [
                (m[1][0] * m[2][1] - m[1][1] * m[2][0]) * inv_det,
                (m[0][1] * m[2][0] - m[0][0] * m[2][1]) * inv_det,
                (m[0][0] * m[1][1] - m[0][1] * m[1][0]) * inv_det,
            ],
        ];
        let partial = Self {
            linear,
            translation: [0.0; 3],
        };
        let shifted = partial.apply_linear(self.translation);
        Some(Self {
            linear,
            translation: shifted.map(|value| -value),
        })
    }

    /// `self ∘ inner`: first `inner`, then `self`.
    #[must_use]
    pub fn compose(&self, inner: &Self) -> Self {
        let mut linear = [[0.0; 3]; 3];
        for (row, out_row) in linear.iter_mut().enumerate() {
            for (column, value) in out_row.iter_mut().enumerate() {
                *value = (0..3)
                    .map(|n| self.linear[row][n] * inner.linear[n][column])
                    .sum();
            }
        }
        Self {
            linear,
            translation: self.apply(inner.translation),
        }
    }

    /// Converts between LPS and RAS (the same flip both ways): negates x and y rows.
    #[must_use]
    pub fn ras_from_lps(&self) -> Self {
        let mut out = *self;
        for row in 0..2 {
            for column in 0..3 {
                out.linear[row][column] = -out.linear[row][column];
            }
            out.translation[row] = -out.translation[row];
        }
        out
    }

    /// Whether every entry differs from `other`'s by at most `tolerance`.
    #[must_use]
    pub fn approx_eq(&self, other: &Self, tolerance: f64) -> bool {
        let linear_close = self
            .linear
            .iter()
            .flatten()
            .zip(other.linear.iter().flatten())
            .all(|(a, b)| (a - b).abs() <= tolerance);
        let translation_close = self
            .translation
            .iter()
            .zip(other.translation)
            .all(|(a, b)| (a - b).abs() <= tolerance);
        linear_close && translation_close
    }
}

/// Dot product.
#[must_use]
pub fn dot(a: Vec3, b: Vec3) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

/// Cross product `a × b`.
#[must_use]
pub fn cross(a: Vec3, b: Vec3) -> Vec3 {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

/// Euclidean length.
#[must_use]
pub fn norm(a: Vec3) -> f64 {
    dot(a, a).sqrt()
}

/// `a - b`.
#[must_use]
pub fn sub(a: Vec3, b: Vec3) -> Vec3 {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

/// `a` scaled to unit length; a zero vector stays zero.
#[must_use]
pub fn normalized(a: Vec3) -> Vec3 {
    let length = norm(a);
    if length > 0.0 {
        a.map(|value| value / length)
    } else {
        a
    }
}

/// The anatomical letter (L/R, P/A, S/I) a direction in LPS points to most, for orientation
/// labels and messages (`"L"` for `[1, 0, 0]`).
#[must_use]
pub fn dominant_letter(direction: Vec3) -> char {
    let axis = (0..3)
        .max_by(|&a, &b| direction[a].abs().total_cmp(&direction[b].abs()))
        .unwrap_or(0);
    let positive = direction[axis] >= 0.0;
    match (axis, positive) {
        (0, true) => 'L',
        (0, false) => 'R',
        (1, true) => 'P',
        (1, false) => 'A',
        (_, true) => 'S',
        (_, false) => 'I',
    }
}

#[cfg(test)]
#[expect(
    clippy::float_cmp,
    reason = "decoded values are exact; exact comparison is the point"
)]
mod tests {
    use super::*;

    fn oblique() -> Affine {
        let row = normalized([0.9, 0.1, 0.0]);
        let column = normalized(cross([0.0, 0.0, 1.0], row));
        let normal = cross(row, column);
        Affine::from_axes([row, column, normal], [0.7, 0.8, 2.5], [-100.0, 20.0, 35.0])
    }

    #[test]
    fn inverse_undoes_the_map() {
        let affine = oblique();
        let inverse = affine.inverse().expect("oblique axes are independent");
        let point = affine.apply([10.0, 20.5, 3.0]);
        let back = inverse.apply(point);
        assert!((back[0] - 10.0).abs() < 1e-9);
        assert!((back[1] - 20.5).abs() < 1e-9);
        assert!((back[2] - 3.0).abs() < 1e-9);
        assert!(inverse.compose(&affine).approx_eq(&Affine::IDENTITY, 1e-12));
    }

    #[test]
    fn spacing_and_directions_come_back_from_the_columns() {
        let affine = oblique();
        let spacing = affine.spacing_mm();
        assert!((spacing[0] - 0.7).abs() < 1e-12);
        assert!((spacing[2] - 2.5).abs() < 1e-12);
        assert!((norm(affine.directions()[1]) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn ras_flip_negates_left_and_posterior() {
        let lps = Affine::from_axes(
            [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            [1.0, 1.0, 1.0],
            [5.0, 6.0, 7.0],
        );
        let ras = lps.ras_from_lps();
        assert_eq!(ras.apply([1.0, 1.0, 1.0]), [-6.0, -7.0, 8.0]);
        assert_eq!(ras.ras_from_lps(), lps);
    }

    #[test]
    fn singular_map_has_no_inverse() {
        let flat = Affine::from_axes(
            [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]],
            [1.0; 3],
            [0.0; 3],
        );
        assert!(flat.inverse().is_none());
    }

    #[test]
    fn letters_name_the_dominant_direction() {
        assert_eq!(dominant_letter([0.9, 0.1, 0.0]), 'L');
        assert_eq!(dominant_letter([0.0, -1.0, 0.2]), 'A');
        assert_eq!(dominant_letter([0.1, 0.0, -0.8]), 'I');
    }
}
