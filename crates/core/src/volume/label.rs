//! Label volumes (segmentation masks) and bringing them onto a CT's grid.
//!
//! A mask may sit on a grid that differs from the CT's (another spacing, a crop, another axis
//! order). Overlays, lesion extents and key-slice truth must all use the CT grid, so masks are
//! resampled onto it through both transforms with nearest-neighbour lookup, which keeps label
//! values exact.

use rayon::prelude::*;

use super::Affine;

/// Integer labels on a grid placed in the patient frame (`0` is background).
#[derive(Clone, Debug, PartialEq)]
pub struct LabelVolume {
    /// Structure name (`"liver_lesion"`), usually the file stem.
    pub name: String,
    /// Columns, rows, slices.
    pub dims: [usize; 3],
    /// Voxel index → patient LPS millimetres.
    pub patient_from_voxel: Affine,
    /// One label per voxel, laid out like [`crate::volume::Volume`] (x fastest).
    pub labels: Vec<u8>,
}

impl LabelVolume {
    /// Number of voxels with a non-zero label.
    #[must_use]
    pub fn foreground_count(&self) -> usize {
        self.labels.iter().filter(|&&label| label != 0).count()
    }

    /// Number of foreground voxels on each slice `k`.
    #[must_use]
    pub fn foreground_per_slice(&self) -> Vec<usize> {
        let plane = self.dims[0] * self.dims[1];
        self.labels
            .chunks(plane.max(1))
            .map(|slice| slice.iter().filter(|&&label| label != 0).count())
            .collect()
    }

    /// For each index along `axis` (0 = columns, 1 = rows, 2 = slices), how many voxels carry
    /// a label that `counted` accepts. An `axis` above 2 gives an empty list.
    #[must_use]
    pub fn counts_along(&self, axis: usize, counted: impl Fn(u8) -> bool) -> Vec<usize> {
        let by_label = self.counts_by_label_along(axis);
        let length = if axis > 2 { 0 } else { self.dims[axis] };
        (0..length)
            .map(|index| {
                by_label
                    .iter()
                    .enumerate()
                    .filter(|(label, _)| counted(*label as u8))
                    .map(|(_, counts)| counts[index])
                    .sum()
            })
            .collect()
    }

    /// `counts[label][index]`: voxels of each non-zero label at each index along `axis`, in
    /// one pass over the volume (label 0 counts nothing). An `axis` above 2 gives empty lists.
    #[must_use]
    pub fn counts_by_label_along(&self, axis: usize) -> Vec<Vec<usize>> {
        let length = if axis > 2 { 0 } else { self.dims[axis] };
        let mut counts = vec![vec![0usize; length]; 256];
        if length == 0 {
            return counts;
        }
        let [nx, ny, _] = self.dims;
        for (offset, &label) in self.labels.iter().enumerate() {
            if label != 0 {
                let index = match axis {
                    0 => offset % nx.max(1),
                    1 => (offset / nx.max(1)) % ny.max(1),
                    _ => offset / (nx * ny).max(1),
                };
                if let Some(count) = counts[usize::from(label)].get_mut(index) {
                    *count += 1;
                }
            }
        }
        counts
    }
}

/// Index of the largest positive count, the first one on a tie (so the choice is the same
/// every time); `None` when every count is 0. The key-slice rule: the slice with the most
/// lesion voxels.
#[must_use]
pub fn first_largest(counts: &[usize]) -> Option<usize> {
    counts
        .iter()
        .enumerate()
        .filter(|(_, count)| **count > 0)
        .max_by(|(a, left), (b, right)| left.cmp(right).then(b.cmp(a)))
        .map(|(index, _)| index)
}

/// First and last index with a non-zero count, if any.
#[must_use]
pub fn extent_of(counts: &[usize]) -> Option<(usize, usize)> {
    let first = counts.iter().position(|&count| count > 0)?;
    let last = counts.iter().rposition(|&count| count > 0)?;
    Some((first, last))
}

/// The fast path of [`resample_nearest`] when the two grids share their voxel centres up to
/// an axis permutation, flips and a whole-voxel shift (a mask written in another row order,
/// a crop): every target voxel maps to exactly one source voxel by integer strides. `None`
/// when the grids are not related that way.
fn resample_by_index(
    mask: &LabelVolume,
    target_dims: [usize; 3],
    mask_from_target: &Affine,
) -> Option<Vec<u8>> {
    let whole = |value: f64| {
        let rounded = value.round();
        ((value - rounded).abs() < 1e-4).then_some(rounded as i64)
    };
    // step[a][b]: source index change along source axis b per target step along axis a.
    let mut step = [[0i64; 3]; 3];
    for (axis, row) in step.iter_mut().enumerate() {
        let column = mask_from_target.column(axis);
        for b in 0..3 {
            row[b] = whole(column[b])?;
        }
        if row.iter().map(|value| value.abs()).sum::<i64>() != 1 {
            return None;
        }
    }
    let origin = mask_from_target.translation.map(whole);
    let origin = [origin[0]?, origin[1]?, origin[2]?];
    let source_dims = mask.dims.map(|size| size as i64);
    let strides = [1, source_dims[0], source_dims[0] * source_dims[1]];
    let [columns, rows, slices] = target_dims;
    let plane = columns * rows;
    let mut labels = vec![0u8; plane * slices];
    labels
        .par_chunks_mut(plane.max(1))
        .enumerate()
        .for_each(|(k, target_plane)| {
            for j in 0..rows {
                let row = &mut target_plane[j * columns..(j + 1) * columns];
                let mut position =
                    [0, 1, 2].map(|b| origin[b] + step[1][b] * j as i64 + step[2][b] * k as i64);
                for label in row {
                    if (0..3).all(|b| (0..source_dims[b]).contains(&position[b])) {
                        let index: i64 = (0..3).map(|b| position[b] * strides[b]).sum();
                        *label = mask.labels[index as usize];
                    }
                    for b in 0..3 {
                        position[b] += step[0][b];
                    }
                }
            }
        });
    Some(labels)
}

/// One structure in a combined label volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Structure {
    /// Name (file stem: `liver_lesion`).
    pub name: String,
    /// Its label value in the combined volume (1–15).
    pub label: u8,
}

/// Fixed label values for the structures Keyslice knows, so colours stay the same across
/// cases: organs 1–5, lesions 9–11 (drawn over organs). Others get 6–8, then 12–14; 15 is
/// kept for the lesion masks a reviewer draws ([`DRAWN_MASK_LABEL`]).
fn known_label(name: &str) -> Option<u8> {
    Some(match name {
        "liver" => 1,
        "pancreas" => 2,
        "kidney_left" => 3,
        "kidney_right" => 4,
        "spleen" => 5,
        "liver_lesion" | "liver_tumor" => 9,
        "pancreatic_lesion" | "pancreas_lesion" | "pancreatic_tumor" => 10,
        "kidney_lesion" | "kidney_tumor" => 11,
        _ => return None,
    })
}

/// The label value of lesion masks drawn in the viewer, which no loaded structure takes.
pub const DRAWN_MASK_LABEL: u8 = 15;

/// Whether a structure name is a lesion (drawn over organs).
#[must_use]
pub fn is_lesion(name: &str) -> bool {
    name.contains("lesion") || name.contains("tumor")
}

/// Merges binary masks already on one grid into one label volume (lesions over organs),
/// with the label each structure got; masks beyond 14 structures are left out and named.
#[must_use]
pub fn combine_structures(
    masks: &[LabelVolume],
) -> (Option<LabelVolume>, Vec<Structure>, Vec<String>) {
    let Some(first) = masks.first() else {
        return (None, Vec::new(), Vec::new());
    };
    let mut structures = Vec::new();
    let mut left_out = Vec::new();
    let mut spare = [6u8, 7, 8, 12, 13, 14].into_iter();
    for mask in masks {
        let label = known_label(&mask.name).or_else(|| spare.next());
        match label {
            Some(label) if mask.dims == first.dims => structures.push(Structure {
                name: mask.name.clone(),
                label,
            }),
            _ => left_out.push(mask.name.clone()),
        }
    }
    let mut labels = vec![0u8; first.labels.len()];
    // Organs first, lesions last, so lesions stay visible where they overlap an organ.
    let mut order: Vec<(&LabelVolume, u8)> = masks
        .iter()
        .filter_map(|mask| {
            structures
                .iter()
                .find(|structure| structure.name == mask.name)
                .map(|structure| (mask, structure.label))
        })
        .collect();
    order.sort_by_key(|(mask, _)| is_lesion(&mask.name));
    for (mask, label) in order {
        for (out, &value) in labels.iter_mut().zip(&mask.labels) {
            if value != 0 {
                *out = label;
            }
        }
    }
    let combined = LabelVolume {
        name: "structures".into(),
        dims: first.dims,
        patient_from_voxel: first.patient_from_voxel,
        labels,
    };
    (Some(combined), structures, left_out)
}

/// Resamples `mask` onto the grid `target_dims` / `target_patient_from_voxel` by nearest
/// neighbour; target voxels outside the mask's grid get label 0. Returns `None` when the
/// mask's transform cannot be inverted.
#[must_use]
pub fn resample_nearest(
    mask: &LabelVolume,
    target_dims: [usize; 3],
    target_patient_from_voxel: &Affine,
) -> Option<LabelVolume> {
    let mask_from_patient = mask.patient_from_voxel.inverse()?;
    let mask_from_target = mask_from_patient.compose(target_patient_from_voxel);
    let name = mask.name.clone();
    if target_dims == mask.dims && mask_from_target.approx_eq(&Affine::IDENTITY, 1e-4) {
        return Some(LabelVolume {
            name,
            dims: target_dims,
            patient_from_voxel: *target_patient_from_voxel,
            labels: mask.labels.clone(),
        });
    }
    if let Some(labels) = resample_by_index(mask, target_dims, &mask_from_target) {
        return Some(LabelVolume {
            name,
            dims: target_dims,
            patient_from_voxel: *target_patient_from_voxel,
            labels,
        });
    }
    let [columns, rows, slices] = target_dims;
    let plane = columns * rows;
    let mut labels = vec![0u8; plane * slices];
    let step_i = mask_from_target.column(0);
    let source_dims = mask.dims.map(|size| size as f64);
    labels
        .par_chunks_mut(plane.max(1))
        .enumerate()
        .for_each(|(k, target_plane)| {
            for j in 0..rows {
                let mut position = mask_from_target.apply([0.0, j as f64, k as f64]);
                let row = &mut target_plane[j * columns..(j + 1) * columns];
                for label in row {
                    let rounded = position.map(f64::round);
                    if (0..3).all(|axis| rounded[axis] >= 0.0 && rounded[axis] < source_dims[axis])
                    {
                        let index = rounded[0] as usize
                            + mask.dims[0]
                                * (rounded[1] as usize + mask.dims[1] * rounded[2] as usize);
                        *label = mask.labels[index];
                    }
                    for axis in 0..3 {
                        position[axis] += step_i[axis];
                    }
                }
            }
        });
    Some(LabelVolume {
        name,
        dims: target_dims,
        patient_from_voxel: *target_patient_from_voxel,
        labels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axes(spacing: [f64; 3], origin: [f64; 3]) -> Affine {
        Affine::from_axes(
            [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            spacing,
            origin,
        )
    }

    #[test]
    fn counts_along_each_axis_find_a_block_where_it_is() {
        // A 4×3×5 grid with label 9 on x 1..=2, y 2, z 3..=4 and label 1 elsewhere on z 0.
        let dims = [4, 3, 5];
        let mut labels = vec![0u8; 60];
        for z in 3..=4 {
            for x in 1..=2 {
                labels[x + 4 * (2 + 3 * z)] = 9;
            }
        }
        labels[0] = 1;
        let volume = LabelVolume {
            name: "combined".into(),
            dims,
            patient_from_voxel: axes([1.0; 3], [0.0; 3]),
            labels,
        };
        let lesion = |label: u8| label == 9;
        assert_eq!(volume.counts_along(2, lesion), vec![0, 0, 0, 2, 2]);
        assert_eq!(volume.counts_along(1, lesion), vec![0, 0, 4]);
        assert_eq!(volume.counts_along(0, lesion), vec![0, 2, 2, 0]);
        assert_eq!(extent_of(&volume.counts_along(2, lesion)), Some((3, 4)));
        assert_eq!(extent_of(&volume.counts_along(2, |label| label == 5)), None);
        assert!(volume.counts_along(3, lesion).is_empty());
    }

    #[test]
    fn coarse_mask_lands_on_the_fine_grid_where_it_belongs() {
        // A 2 mm mask with one labelled voxel at patient (2, 2, 2) ± 1 mm.
        let mut labels = vec![0u8; 27];
        labels[1 + 3 * (1 + 3)] = 7;
        let mask = LabelVolume {
            name: "lesion".into(),
            dims: [3, 3, 3],
            patient_from_voxel: axes([2.0; 3], [0.0; 3]),
            labels,
        };
        let target = axes([1.0; 3], [0.0; 3]);
        let resampled = resample_nearest(&mask, [6, 6, 6], &target).expect("invertible");
        let at = |i: usize, j: usize, k: usize| resampled.labels[i + 6 * (j + 6 * k)];
        assert_eq!(at(2, 2, 2), 7);
        // x = 1 mm is mask index 0.5, which rounds (half away from zero) into the labelled
        // voxel; x = 3 mm is index 1.5, which rounds out of it.
        assert_eq!(at(1, 2, 2), 7);
        assert_eq!(at(3, 2, 2), 0);
        assert_eq!(resampled.foreground_count(), 8);
    }

    #[test]
    fn identical_grids_copy_the_labels() {
        let mask = LabelVolume {
            name: "liver".into(),
            dims: [2, 2, 1],
            patient_from_voxel: axes([1.0; 3], [5.0; 3]),
            labels: vec![0, 1, 2, 3],
        };
        let same =
            resample_nearest(&mask, [2, 2, 1], &mask.patient_from_voxel).expect("invertible");
        assert_eq!(same.labels, vec![0, 1, 2, 3]);
    }

    #[test]
    fn lesions_are_painted_over_their_organ_with_fixed_labels() {
        let grid = Affine::IDENTITY;
        let lesion = LabelVolume {
            name: "liver_lesion".into(),
            dims: [3, 1, 1],
            patient_from_voxel: grid,
            labels: vec![0, 1, 0],
        };
        let liver = LabelVolume {
            name: "liver".into(),
            dims: [3, 1, 1],
            patient_from_voxel: grid,
            labels: vec![1, 1, 1],
        };
        let odd = LabelVolume {
            name: "gallbladder".into(),
            dims: [3, 1, 1],
            patient_from_voxel: grid,
            labels: vec![0, 0, 1],
        };
        let (combined, structures, left_out) = combine_structures(&[lesion, liver, odd]);
        let combined = combined.expect("masks given");
        // gallbladder (6) is an organ: drawn before the lesion, after… whichever came first.
        assert_eq!(combined.labels, vec![1, 9, 6]);
        assert_eq!(structures.len(), 3);
        assert!(left_out.is_empty());
    }

    #[test]
    fn per_slice_counts_follow_k() {
        let mask = LabelVolume {
            name: "x".into(),
            dims: [2, 1, 3],
            patient_from_voxel: Affine::IDENTITY,
            labels: vec![0, 1, 1, 1, 0, 0],
        };
        assert_eq!(mask.foreground_per_slice(), vec![1, 2, 0]);
    }
}
