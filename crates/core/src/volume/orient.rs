//! Reorders a volume's axes (permutation and flips only, never resampling) so that voxel axes
//! `i, j, k` point as closely as possible to patient Left, Posterior, Superior.
//!
//! A NIfTI file may store the same CT in any axis order (RAS from nibabel, LAS from FSL, LPS
//! from ITK); after this step every one of them has the same voxel layout as an axial DICOM
//! series, so "slice k" and "left" mean the same thing everywhere downstream. The transform
//! is updated exactly, so patient positions do not change.

use rayon::prelude::*;

use super::{Affine, SliceInfo, Volume, Voxels};

/// How output axis `a` reads its input: input axis `source_axis[a]`, reversed when `flip[a]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxisReorder {
    /// Input axis for each output axis.
    pub source_axis: [usize; 3],
    /// Whether each output axis runs against its input axis.
    pub flip: [bool; 3],
}

impl AxisReorder {
    /// The reorder that leaves a volume as it is.
    pub const IDENTITY: Self = Self {
        source_axis: [0, 1, 2],
        flip: [false; 3],
    };

    /// The permutation and flips that bring the axes of `patient_from_voxel` closest to L, P, S.
    #[must_use]
    pub fn towards_lps(patient_from_voxel: &Affine) -> Self {
        const PERMUTATIONS: [[usize; 3]; 6] = [
            [0, 1, 2],
            [0, 2, 1],
            [1, 0, 2],
            [1, 2, 0],
            [2, 0, 1],
            [2, 1, 0],
        ];
        let directions = patient_from_voxel.directions();
        let score = |permutation: &[usize; 3]| -> f64 {
            (0..3)
                .map(|patient_axis| directions[permutation[patient_axis]][patient_axis].abs())
                .sum()
        };
        let best = PERMUTATIONS
            .iter()
            .max_by(|a, b| score(a).total_cmp(&score(b)))
            .copied()
            .unwrap_or([0, 1, 2]);
        let flip = [0, 1, 2].map(|patient_axis| directions[best[patient_axis]][patient_axis] < 0.0);
        Self {
            source_axis: best,
            flip,
        }
    }

    /// Whether applying this reorder changes nothing.
    #[must_use]
    pub fn is_identity(&self) -> bool {
        *self == Self::IDENTITY
    }

    /// Output dimensions for input dimensions `dims`.
    #[must_use]
    pub fn output_dims(&self, dims: [usize; 3]) -> [usize; 3] {
        self.source_axis.map(|axis| dims[axis])
    }

    /// The transform of the reordered grid, given the input grid's.
    #[must_use]
    pub fn output_affine(&self, input: &Affine, input_dims: [usize; 3]) -> Affine {
        let origin_voxel = self.input_voxel([0, 0, 0], input_dims);
        let mut linear = [[0.0; 3]; 3];
        for output_axis in 0..3 {
            let column = input.column(self.source_axis[output_axis]);
            let sign = if self.flip[output_axis] { -1.0 } else { 1.0 };
            for row in 0..3 {
                linear[row][output_axis] = sign * column[row];
            }
        }
        Affine {
            linear,
            translation: input.apply(origin_voxel.map(|index| index as f64)),
        }
    }

    /// The input voxel that output voxel `output` reads.
    #[must_use]
    pub fn input_voxel(&self, output: [usize; 3], input_dims: [usize; 3]) -> [usize; 3] {
        let mut input = [0usize; 3];
        for output_axis in 0..3 {
            let axis = self.source_axis[output_axis];
            input[axis] = if self.flip[output_axis] {
                input_dims[axis] - 1 - output[output_axis]
            } else {
                output[output_axis]
            };
        }
        input
    }

    /// Reorders a flat array laid out as `input_dims` (x fastest).
    #[must_use]
    pub fn apply_to<T: Copy + Send + Sync + Default>(
        &self,
        values: &[T],
        input_dims: [usize; 3],
    ) -> Vec<T> {
        let output_dims = self.output_dims(input_dims);
        let input_strides = [1, input_dims[0], input_dims[0] * input_dims[1]];
        let plane = output_dims[0] * output_dims[1];
        let mut output = vec![T::default(); values.len()];
        output
            .par_chunks_mut(plane.max(1))
            .enumerate()
            .for_each(|(k, output_plane)| {
                let step_i = signed_stride(input_strides[self.source_axis[0]], self.flip[0]);
                for j in 0..output_dims[1] {
                    let start = self.input_voxel([0, j, k], input_dims);
                    let mut offset = (start[0] * input_strides[0]
                        + start[1] * input_strides[1]
                        + start[2] * input_strides[2])
                        as isize;
                    let row = &mut output_plane[j * output_dims[0]..(j + 1) * output_dims[0]];
                    for value in row {
                        *value = values[offset as usize];
                        offset += step_i;
                    }
                }
            });
        output
    }
}

/// Reverses a flat array laid out as `dims` (x fastest) along each flagged axis, in place.
fn flip_in_place<T: Send>(values: &mut [T], dims: [usize; 3], flip: [bool; 3]) {
    let [columns, rows, slices] = dims;
    let plane = columns * rows;
    if columns == 0 || rows == 0 || slices == 0 {
        return;
    }
    if flip[0] {
        values.par_chunks_mut(columns).for_each(<[T]>::reverse);
    }
    if flip[1] {
        values.par_chunks_mut(plane).for_each(|slice| {
            for j in 0..rows / 2 {
                let (upper, lower) = slice.split_at_mut((rows - 1 - j) * columns);
                upper[j * columns..(j + 1) * columns].swap_with_slice(&mut lower[..columns]);
            }
        });
    }
    if flip[2] {
        for k in 0..slices / 2 {
            let (front, back) = values.split_at_mut((slices - 1 - k) * plane);
            front[k * plane..(k + 1) * plane].swap_with_slice(&mut back[..plane]);
        }
    }
}

fn signed_stride(stride: usize, flip: bool) -> isize {
    let stride = stride as isize;
    if flip { -stride } else { stride }
}

/// Reorders `volume` in place so its axes point closest to L, P, S; returns what was done.
pub fn reorient_towards_lps(volume: &mut Volume) -> AxisReorder {
    let reorder = AxisReorder::towards_lps(volume.patient_from_voxel());
    if reorder.is_identity() {
        return reorder;
    }
    let input_dims = volume.dims();
    let output_dims = reorder.output_dims(input_dims);
    let output_affine = reorder.output_affine(volume.patient_from_voxel(), input_dims);
    if reorder.source_axis == [0, 1, 2] {
        // Flips only (a RAS file read as LPS): in place, so a large volume is never held
        // twice.
        let slices = if reorder.flip[2] {
            let mut slices = volume.slices().to_vec();
            slices.reverse();
            slices
        } else {
            volume.slices().to_vec()
        };
        match volume.voxels_mut() {
            Voxels::I16(values) => flip_in_place(values, input_dims, reorder.flip),
            Voxels::F32(values) => flip_in_place(values, input_dims, reorder.flip),
        }
        volume.replace_geometry(output_affine, slices);
        return reorder;
    }
    let voxels = match volume.voxels() {
        Voxels::I16(values) => Voxels::I16(reorder.apply_to(values, input_dims)),
        Voxels::F32(values) => Voxels::F32(reorder.apply_to(values, input_dims)),
    };
    let slices = if reorder.source_axis[2] == 2 {
        let mut slices = volume.slices().to_vec();
        if reorder.flip[2] {
            slices.reverse();
        }
        slices
    } else {
        (0..output_dims[2])
            .map(|k| SliceInfo {
                position_lps_mm: output_affine.apply([0.0, 0.0, k as f64]),
                sop_instance_uid: None,
                frame_number: None,
            })
            .collect()
    };
    volume.replace_grid(output_dims, output_affine, voxels, slices);
    reorder
}

#[cfg(test)]
#[expect(
    clippy::float_cmp,
    reason = "decoded values are exact; exact comparison is the point"
)]
mod tests {
    use super::*;
    use crate::volume::VolumeInfo;

    fn volume_with(affine: Affine, dims: [usize; 3]) -> Volume {
        let count = dims.iter().product::<usize>();
        let voxels = Voxels::I16((0..count).map(|value| value as i16).collect());
        Volume::new(dims, affine, voxels, Vec::new(), VolumeInfo::default())
            .expect("test parts agree")
    }

    #[test]
    fn flipping_in_place_matches_the_copying_reorder() {
        let dims = [5, 4, 3];
        let values: Vec<i16> = (0..60).collect();
        for flip in (0..8).map(|bits| [bits & 1 != 0, bits & 2 != 0, bits & 4 != 0]) {
            let reorder = AxisReorder {
                source_axis: [0, 1, 2],
                flip,
            };
            let mut in_place = values.clone();
            flip_in_place(&mut in_place, dims, flip);
            assert_eq!(in_place, reorder.apply_to(&values, dims), "flip {flip:?}");
        }
    }

    #[test]
    fn ras_stored_volume_becomes_lps_with_the_same_patient_values() {
        // Axes point Right, Anterior, Superior (nibabel's canonical order).
        let ras_axes = Affine::from_axes(
            [[-1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, 1.0]],
            [0.8, 0.9, 2.0],
            [50.0, 60.0, -10.0],
        );
        let original = volume_with(ras_axes, [5, 4, 3]);
        let mut reoriented = original.clone();
        let reorder = reorient_towards_lps(&mut reoriented);
        assert_eq!(reorder.flip, [true, true, false]);
        let directions = reoriented.directions_lps();
        assert_eq!(directions[0], [1.0, 0.0, 0.0]);
        assert_eq!(directions[1], [0.0, 1.0, 0.0]);
        for k in 0..3 {
            for j in 0..4 {
                for i in 0..5 {
                    let point = original
                        .patient_from_voxel()
                        .apply([i as f64, j as f64, k as f64]);
                    assert_eq!(
                        reoriented.value_at_patient(point),
                        original.value([i, j, k]),
                        "voxel {i} {j} {k}"
                    );
                }
            }
        }
    }

    #[test]
    fn sagittal_stack_is_permuted_so_k_runs_superior() {
        // i → Posterior, j → Inferior, k → Left.
        let sagittal = Affine::from_axes(
            [[0.0, 1.0, 0.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]],
            [1.0, 1.0, 3.0],
            [0.0, 0.0, 0.0],
        );
        let original = volume_with(sagittal, [4, 6, 2]);
        let mut reoriented = original.clone();
        let reorder = reorient_towards_lps(&mut reoriented);
        assert_eq!(reorder.source_axis, [2, 0, 1]);
        assert_eq!(reoriented.dims(), [2, 4, 6]);
        assert_eq!(reoriented.spacing_mm(), [3.0, 1.0, 1.0]);
        let point = original.patient_from_voxel().apply([3.0, 5.0, 1.0]);
        assert_eq!(
            reoriented.value_at_patient(point),
            original.value([3, 5, 1])
        );
        assert!(reoriented.directions_lps()[2][2] > 0.99);
    }

    #[test]
    fn lps_volume_is_left_alone() {
        let lps = Affine::from_axes(
            [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            [1.0; 3],
            [0.0; 3],
        );
        let mut volume = volume_with(lps, [3, 3, 3]);
        let before = volume.clone();
        assert!(reorient_towards_lps(&mut volume).is_identity());
        assert_eq!(volume, before);
    }
}
