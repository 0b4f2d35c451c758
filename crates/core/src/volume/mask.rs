//! A lesion's mask as an annotator edits it: the strokes of a segment editor (brush and
//! eraser as a disc on a slice or a ball, threshold inside an HU range, fill between slices,
//! islands, smoothing), and the compact form a mask is logged and stored in
//! ([`LesionMask`], run lengths over the CT).
//!
//! Every stroke works on a dense mask (one byte per voxel, laid out like the volume) and
//! touches only the box around what it changes, so a stroke on a 512² × 300 CT costs what the
//! lesion costs. A stroke that cannot apply (an HU range with min > max, islands of an empty
//! mask, fill between fewer than two drawn slices) is refused with its reason and changes
//! nothing.

use serde::{Deserialize, Serialize};

use super::Volume;
use super::lesion::{Measures, VoxelBox, fill_holes, keep_largest_part, measure, parts};
use crate::findings::{Lesion, LesionSize, SliceRange};

/// A mask stored as run lengths over the CT (x fastest, then y, then slice), starting with a
/// run outside the mask: `[outside, inside, outside, inside, …]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LesionMask {
    /// The CT's columns, rows and slices: a mask of another grid is never applied.
    pub dims: [usize; 3],
    /// Alternating run lengths, the first outside (0 when the first voxel is inside).
    pub runs: Vec<u32>,
}

/// A mask that does not fit the CT it is applied to, or whose runs do not cover it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MaskError {
    /// Drawn on a CT of another size.
    #[error("the mask was drawn on a CT of {mask:?} voxels; this CT has {ct:?}")]
    OtherGrid {
        /// The mask's grid.
        mask: [usize; 3],
        /// The CT's.
        ct: [usize; 3],
    },
    /// Its runs do not add up to its grid.
    #[error("the mask's runs cover {covered} voxels; its grid has {expected}")]
    Runs {
        /// Voxels the runs cover.
        covered: u64,
        /// Voxels in its grid.
        expected: u64,
    },
}

impl LesionMask {
    /// The compact form of a dense mask on a grid of `dims`.
    #[must_use]
    pub fn from_dense(mask: &[u8], dims: [usize; 3]) -> Self {
        let mut runs = Vec::new();
        let mut inside = false;
        let mut length: u32 = 0;
        let mut rest = mask;
        while !rest.is_empty() {
            // Outside the mask, eight empty voxels at a time (a lesion is a speck of a CT).
            if !inside && rest.len() >= 8 && length <= u32::MAX - 8 {
                let (word, after) = rest.split_at(8);
                if u64::from_ne_bytes([
                    word[0], word[1], word[2], word[3], word[4], word[5], word[6], word[7],
                ]) == 0
                {
                    length += 8;
                    rest = after;
                    continue;
                }
            }
            let value = rest[0] != 0;
            rest = &rest[1..];
            if value == inside && length < u32::MAX {
                length += 1;
            } else if value == inside {
                // A run longer than u32 holds: an empty run of the other kind between.
                runs.extend([length, 0]);
                length = 1;
            } else {
                runs.push(length);
                inside = !inside;
                length = 1;
            }
        }
        runs.push(length);
        Self { dims, runs }
    }

    /// The dense mask on a CT of `dims` (its own grid, checked).
    pub fn to_dense(&self, dims: [usize; 3]) -> Result<Vec<u8>, MaskError> {
        if self.dims != dims {
            return Err(MaskError::OtherGrid {
                mask: self.dims,
                ct: dims,
            });
        }
        let expected: u64 = dims.iter().map(|&d| d as u64).product();
        let covered: u64 = self.runs.iter().map(|&run| u64::from(run)).sum();
        if covered != expected {
            return Err(MaskError::Runs { covered, expected });
        }
        let mut mask = Vec::with_capacity(dims.iter().product());
        for (n, &run) in self.runs.iter().enumerate() {
            mask.resize(mask.len() + run as usize, u8::from(n % 2 == 1));
        }
        Ok(mask)
    }

    /// The runs inside the mask as `(first voxel, length)`, in order.
    pub fn inside_runs(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let mut start = 0usize;
        self.runs.iter().enumerate().filter_map(move |(n, &run)| {
            let first = start;
            start += run as usize;
            (n % 2 == 1 && run > 0).then_some((first, run as usize))
        })
    }

    /// What the mask measures on a grid of `spacing_mm` ([`measure`]), decoding only the
    /// slices it reaches: a 3 cm lesion of a 512² × 300 CT costs its slab, not the CT.
    #[must_use]
    pub fn measure(&self, spacing_mm: [f64; 3]) -> Option<Measures> {
        let plane = self.dims[0] * self.dims[1];
        let mut runs = self.inside_runs().peekable();
        let first = runs.peek()?.0 / plane.max(1);
        let last = self
            .inside_runs()
            .last()
            .map(|(start, length)| (start + length - 1) / plane.max(1))?;
        let slab_dims = [self.dims[0], self.dims[1], last - first + 1];
        let offset = first * plane;
        let mut slab = vec![0u8; slab_dims.iter().product()];
        for (start, length) in runs {
            let from = start.checked_sub(offset)?;
            slab.get_mut(from..from + length)?.fill(1);
        }
        let mut measures = measure(&slab, slab_dims, spacing_mm)?;
        measures.slice += first;
        measures.extent[2] = [measures.extent[2][0] + first, measures.extent[2][1] + first];
        Some(measures)
    }

    /// Voxels inside.
    #[must_use]
    pub fn voxels(&self) -> u64 {
        self.runs
            .iter()
            .skip(1)
            .step_by(2)
            .map(|&run| u64::from(run))
            .sum()
    }
}

/// The plane a disc is drawn in, by the axis it is normal to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plane {
    /// Normal to the slices (z).
    Axial,
    /// Normal to y.
    Coronal,
    /// Normal to x.
    Sagittal,
}

impl Plane {
    /// The axis it is normal to.
    #[must_use]
    pub fn normal(self) -> usize {
        match self {
            Self::Axial => 2,
            Self::Coronal => 1,
            Self::Sagittal => 0,
        }
    }
}

/// A brush's shape: a disc on the slice shown, or a ball through the slices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Brush {
    /// A disc in a plane.
    Disc(Plane),
    /// A ball.
    Ball,
}

/// Why a stroke changes nothing.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum EditError {
    /// Its centre or box is not in the CT.
    #[error("the stroke at {at:?} is outside the CT of {dims:?} voxels")]
    Outside {
        /// Where.
        at: [usize; 3],
        /// The CT.
        dims: [usize; 3],
    },
    /// A brush without a size.
    #[error("a brush radius of {0} mm: it must be a positive number of millimetres")]
    Radius(f64),
    /// An HU range that holds nothing.
    #[error("the HU range {min}–{max} is empty: min must not exceed max")]
    EmptyRange {
        /// Its lower end.
        min: f32,
        /// Its upper end.
        max: f32,
    },
    /// Islands, smoothing or fill of a mask with nothing in it.
    #[error("the mask is empty: there is nothing to {0}")]
    EmptyMask(&'static str),
    /// Fill between slices with fewer than two drawn.
    #[error(
        "fill between slices needs the lesion drawn on two or more slices of that plane; it is drawn on {0}"
    )]
    TooFewSlices(usize),
    /// The mask is not the CT's size.
    #[error("the mask has {found} voxels; the CT has {expected}")]
    MaskSize {
        /// Voxels in the mask.
        found: usize,
        /// Voxels in the CT.
        expected: usize,
    },
}

fn index(dims: [usize; 3], [x, y, z]: [usize; 3]) -> usize {
    x + dims[0] * (y + dims[1] * z)
}

fn check_size(mask: &[u8], dims: [usize; 3]) -> Result<(), EditError> {
    let expected = dims.iter().product();
    if mask.len() == expected {
        Ok(())
    } else {
        Err(EditError::MaskSize {
            found: mask.len(),
            expected,
        })
    }
}

/// The box around a mask's voxels, or `None` when it is empty.
#[must_use]
pub fn bounds(mask: &[u8], dims: [usize; 3]) -> Option<VoxelBox> {
    let mut min = [usize::MAX; 3];
    let mut max = [0usize; 3];
    let plane = dims[0] * dims[1];
    for (z, slice) in mask.chunks_exact(plane.max(1)).enumerate() {
        for (offset, _) in slice.iter().enumerate().filter(|(_, v)| **v != 0) {
            let voxel = [offset % dims[0], offset / dims[0], z];
            for a in 0..3 {
                min[a] = min[a].min(voxel[a]);
                max[a] = max[a].max(voxel[a]);
            }
        }
    }
    (min[0] != usize::MAX).then_some(VoxelBox { min, max })
}

/// Paints (`inside`) or erases a brush of `radius_mm` at `centre`; returns the voxels
/// changed.
pub fn paint(
    mask: &mut [u8],
    dims: [usize; 3],
    spacing_mm: [f64; 3],
    centre: [usize; 3],
    radius_mm: f64,
    brush: Brush,
    inside: bool,
) -> Result<usize, EditError> {
    check_size(mask, dims)?;
    if (0..3).any(|a| centre[a] >= dims[a]) {
        return Err(EditError::Outside { at: centre, dims });
    }
    if !(radius_mm.is_finite() && radius_mm > 0.0) {
        return Err(EditError::Radius(radius_mm));
    }
    let flat = match brush {
        Brush::Disc(plane) => Some(plane.normal()),
        Brush::Ball => None,
    };
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a reach in voxels: positive, and bounded by the CT below"
    )]
    let reach: [usize; 3] = std::array::from_fn(|a| {
        if flat == Some(a) {
            0
        } else {
            ((radius_mm / spacing_mm[a].max(1e-6)).floor() as usize).min(dims[a])
        }
    });
    let within = VoxelBox {
        min: std::array::from_fn(|a| centre[a].saturating_sub(reach[a])),
        max: std::array::from_fn(|a| (centre[a] + reach[a]).min(dims[a] - 1)),
    };
    let value = u8::from(inside);
    let mut changed = 0;
    for voxel in within.voxels() {
        let distance: f64 = (0..3)
            .map(|a| (voxel[a].abs_diff(centre[a]) as f64 * spacing_mm[a]).powi(2))
            .sum();
        let i = index(dims, voxel);
        if distance <= radius_mm * radius_mm && (mask[i] != 0) != inside {
            mask[i] = value;
            changed += 1;
        }
    }
    Ok(changed)
}

/// Inside `within`, the mask becomes the voxels whose HU lie in `hu` (both ends included);
/// outside it, it is unchanged. Returns the voxels changed.
pub fn threshold(
    mask: &mut [u8],
    volume: &Volume,
    within: VoxelBox,
    hu: (f32, f32),
) -> Result<usize, EditError> {
    let dims = volume.dims();
    check_size(mask, dims)?;
    let (min, max) = hu;
    if min.is_nan() || max.is_nan() || min > max {
        return Err(EditError::EmptyRange { min, max });
    }
    if (0..3).any(|a| within.min[a] > within.max[a] || within.max[a] >= dims[a]) {
        return Err(EditError::Outside {
            at: within.max,
            dims,
        });
    }
    let voxels = volume.voxels();
    let mut changed = 0;
    for voxel in within.voxels() {
        let i = index(dims, voxel);
        let value = voxels.get(i).unwrap_or(f32::NAN);
        let inside = (min..=max).contains(&value);
        if (mask[i] != 0) != inside {
            mask[i] = u8::from(inside);
            changed += 1;
        }
    }
    Ok(changed)
}

/// What to do with a mask's islands (its 6-connected parts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Islands {
    /// Keep the largest, remove the rest.
    KeepLargest,
    /// Remove the parts smaller than this many voxels.
    RemoveSmallerThan(usize),
}

/// Removes islands by `rule`; returns the voxels removed.
pub fn islands(mask: &mut [u8], dims: [usize; 3], rule: Islands) -> Result<usize, EditError> {
    check_size(mask, dims)?;
    let within = bounds(mask, dims).ok_or(EditError::EmptyMask("remove islands from"))?;
    let before = count(mask, &within, dims);
    match rule {
        Islands::KeepLargest => keep_largest_part(mask, &within, dims),
        Islands::RemoveSmallerThan(smallest) => {
            let (part, sizes) = parts(mask, &within, dims);
            for voxel in within.voxels() {
                let label = part[within.local(voxel)] as usize;
                if label != 0 && sizes[label] < smallest {
                    mask[index(dims, voxel)] = 0;
                }
            }
        }
    }
    Ok(before - count(mask, &within, dims))
}

fn count(mask: &[u8], within: &VoxelBox, dims: [usize; 3]) -> usize {
    within
        .voxels()
        .filter(|&voxel| mask[index(dims, voxel)] != 0)
        .count()
}

/// Smooths the mask's surface: each voxel takes the majority of its 3×3×3 neighbourhood (a
/// binary median), which removes one-voxel spikes and fills one-voxel notches; holes it
/// leaves are filled. Returns the voxels changed.
pub fn smooth(mask: &mut [u8], dims: [usize; 3]) -> Result<usize, EditError> {
    check_size(mask, dims)?;
    let within = bounds(mask, dims)
        .ok_or(EditError::EmptyMask("smooth"))?
        .grown([1, 1, 1], dims);
    let before: Vec<u8> = within.voxels().map(|v| mask[index(dims, v)]).collect();
    let at = |voxel: [usize; 3]| before[within.local(voxel)] != 0;
    let mut changed = 0;
    for voxel in within.voxels() {
        let mut inside = 0;
        let mut total = 0;
        for dz in -1i64..=1 {
            for dy in -1i64..=1 {
                for dx in -1i64..=1 {
                    let moved = [dx, dy, dz]
                        .iter()
                        .enumerate()
                        .map(|(a, d)| usize::try_from(voxel[a] as i64 + d).ok())
                        .collect::<Option<Vec<usize>>>();
                    let Some(moved) = moved else { continue };
                    let moved = [moved[0], moved[1], moved[2]];
                    if within.contains(moved) {
                        total += 1;
                        inside += usize::from(at(moved));
                    }
                }
            }
        }
        let value = inside * 2 > total;
        if at(voxel) != value {
            mask[index(dims, voxel)] = u8::from(value);
            changed += 1;
        }
    }
    if bounds(mask, dims).is_some() {
        fill_holes(mask, &within, dims);
    }
    Ok(changed)
}

/// The plane a lesion was drawn on slice by slice: the one whose drawn slices leave the most
/// empty slices between them. A mask drawn on axial slices 10 and 20 leaves nine empty axial
/// slices between them and none in the other planes (each drawn shape spans its rows and
/// columns without a gap). Axial when no plane leaves a gap, or on a tie.
#[must_use]
pub fn drawn_plane(mask: &[u8], dims: [usize; 3]) -> Plane {
    let mut drawn: [Vec<bool>; 3] = std::array::from_fn(|axis| vec![false; dims[axis]]);
    let plane = dims[0] * dims[1];
    for (i, _) in mask.iter().enumerate().filter(|(_, on)| **on != 0) {
        let voxel = [i % dims[0], (i / dims[0]) % dims[1], i / plane.max(1)];
        for axis in 0..3 {
            if let Some(slot) = drawn[axis].get_mut(voxel[axis]) {
                *slot = true;
            }
        }
    }
    let gaps = |axis: usize| {
        let slices = &drawn[axis];
        match (
            slices.iter().position(|&on| on),
            slices.iter().rposition(|&on| on),
        ) {
            (Some(first), Some(last)) => slices[first..=last].iter().filter(|on| !**on).count(),
            _ => 0,
        }
    };
    [Plane::Axial, Plane::Coronal, Plane::Sagittal]
        .into_iter()
        .fold((Plane::Axial, 0), |(best, most), plane| {
            let gaps = gaps(plane.normal());
            if gaps > most {
                (plane, gaps)
            } else {
                (best, most)
            }
        })
        .0
}

/// Fills the slices between those the lesion is drawn on (normal to `plane`): each empty
/// slice between two drawn ones takes the shape between theirs, interpolated through their
/// signed distance maps (as 3D Slicer and ITK-SNAP interpolate). Returns the voxels added.
pub fn fill_between(
    mask: &mut [u8],
    dims: [usize; 3],
    spacing_mm: [f64; 3],
    plane: Plane,
) -> Result<usize, EditError> {
    check_size(mask, dims)?;
    let normal = plane.normal();
    let [across, down] = match normal {
        0 => [1, 2],
        1 => [0, 2],
        _ => [0, 1],
    };
    let within = bounds(mask, dims).ok_or(EditError::EmptyMask("fill between"))?;
    let drawn: Vec<usize> = (within.min[normal]..=within.max[normal])
        .filter(|&s| {
            let mut slab = within;
            slab.min[normal] = s;
            slab.max[normal] = s;
            slab.voxels().any(|voxel| mask[index(dims, voxel)] != 0)
        })
        .collect();
    if drawn.len() < 2 {
        return Err(EditError::TooFewSlices(drawn.len()));
    }
    // The plane's own grid, around everything drawn, one voxel wider: distances to the
    // outside are then found inside it.
    let crop = within.grown([1, 1, 1], dims);
    let size = [
        crop.max[across] - crop.min[across] + 1,
        crop.max[down] - crop.min[down] + 1,
    ];
    let voxel_at = |s: usize, a: usize, b: usize| {
        let mut voxel = [0; 3];
        voxel[normal] = s;
        voxel[across] = crop.min[across] + a;
        voxel[down] = crop.min[down] + b;
        voxel
    };
    let signed = |s: usize| {
        let inside: Vec<bool> = (0..size[1])
            .flat_map(|b| (0..size[0]).map(move |a| (a, b)))
            .map(|(a, b)| mask[index(dims, voxel_at(s, a, b))] != 0)
            .collect();
        signed_distance(&inside, size, [spacing_mm[across], spacing_mm[down]])
    };
    // Every gap's two distance maps first: the mask changes only after all are read.
    let gaps: Vec<(usize, usize, Vec<f64>, Vec<f64>)> = drawn
        .windows(2)
        .filter(|pair| pair[1] - pair[0] >= 2)
        .map(|pair| (pair[0], pair[1], signed(pair[0]), signed(pair[1])))
        .collect();
    let mut added = 0;
    for (first, last, from, to) in gaps {
        for s in first + 1..last {
            let share = (s - first) as f64 / (last - first) as f64;
            for b in 0..size[1] {
                for a in 0..size[0] {
                    let n = a + size[0] * b;
                    if (1.0 - share) * from[n] + share * to[n] <= 0.0 {
                        let i = index(dims, voxel_at(s, a, b));
                        if mask[i] == 0 {
                            mask[i] = 1;
                            added += 1;
                        }
                    }
                }
            }
        }
    }
    Ok(added)
}

/// A plane's signed distance (mm) to the boundary of `inside`: negative inside, positive
/// outside.
fn signed_distance(inside: &[bool], size: [usize; 2], spacing: [f64; 2]) -> Vec<f64> {
    let to_inside = distance_to(inside, size, spacing, true);
    let to_outside = distance_to(inside, size, spacing, false);
    to_inside
        .iter()
        .zip(&to_outside)
        .map(|(a, b)| a.sqrt() - b.sqrt())
        .collect()
}

/// Squared Euclidean distance (mm²) of each pixel to the nearest pixel whose `inside` is
/// `target` (Felzenszwalb and Huttenlocher's separable transform).
fn distance_to(inside: &[bool], size: [usize; 2], spacing: [f64; 2], target: bool) -> Vec<f64> {
    const FAR: f64 = 1e20;
    let mut grid: Vec<f64> = inside
        .iter()
        .map(|&value| if value == target { 0.0 } else { FAR })
        .collect();
    // Along rows, then columns.
    let mut line = Vec::new();
    for b in 0..size[1] {
        line.clear();
        line.extend((0..size[0]).map(|a| grid[a + size[0] * b]));
        let out = transform_1d(&line, spacing[0]);
        for (a, value) in out.into_iter().enumerate() {
            grid[a + size[0] * b] = value;
        }
    }
    for a in 0..size[0] {
        line.clear();
        line.extend((0..size[1]).map(|b| grid[a + size[0] * b]));
        let out = transform_1d(&line, spacing[1]);
        for (b, value) in out.into_iter().enumerate() {
            grid[a + size[0] * b] = value;
        }
    }
    grid
}

/// The 1D squared distance transform of `f` on a line of pixels `step` mm apart: the lower
/// envelope of the parabolas rooted at each pixel.
fn transform_1d(f: &[f64], step: f64) -> Vec<f64> {
    let n = f.len();
    let mut out = vec![0.0; n];
    if n == 0 {
        return out;
    }
    let position = |q: usize| q as f64 * step;
    let mut roots = vec![0usize; n];
    let mut bounds = vec![0.0f64; n + 1];
    let mut k = 0;
    bounds[0] = f64::NEG_INFINITY;
    bounds[1] = f64::INFINITY;
    for q in 1..n {
        loop {
            let p = roots[k];
            let crossing = ((f[q] + position(q).powi(2)) - (f[p] + position(p).powi(2)))
                / (2.0 * (position(q) - position(p)));
            if crossing <= bounds[k] && k > 0 {
                k -= 1;
            } else if crossing <= bounds[k] {
                roots[0] = q;
                bounds[1] = f64::INFINITY;
                break;
            } else {
                k += 1;
                roots[k] = q;
                bounds[k] = crossing;
                bounds[k + 1] = f64::INFINITY;
                break;
            }
        }
    }
    k = 0;
    for (q, value) in out.iter_mut().enumerate() {
        while bounds[k + 1] < position(q) {
            k += 1;
        }
        let p = roots[k];
        *value = (position(q) - position(p)).powi(2) + f[p];
    }
    out
}

/// A lesion's size as a report gives it, from its mask's measures: the axial long axis and
/// its perpendicular, in cm to one decimal.
#[must_use]
pub fn size_of(measures: &Measures) -> LesionSize {
    let cm = |mm: f64| mm.round() / 10.0;
    LesionSize {
        long_cm: cm(measures.long_axis_mm),
        short_cm: Some(cm(measures.short_axis_mm)),
    }
}

/// The slices a lesion's mask spans.
#[must_use]
pub fn slices_of(measures: &Measures) -> SliceRange {
    let [first, last] = measures.extent[2];
    SliceRange {
        first: u32::try_from(first).unwrap_or(u32::MAX),
        last: u32::try_from(last).unwrap_or(u32::MAX),
    }
}

/// Where a lesion's report disagrees with its mask, in words: a size more than 20 % off the
/// mask's long axis, evidence on a slice the mask does not reach.
#[must_use]
pub fn disagreements(lesion: &Lesion, measures: &Measures) -> Vec<String> {
    let mut found = Vec::new();
    let measured_cm = measures.long_axis_mm / 10.0;
    if let Some(size) = lesion.size
        && measured_cm > 0.0
        && ((size.long_cm - measured_cm) / measured_cm).abs() > 0.2
    {
        found.push(format!(
            "reported {:.1} cm; its mask measures {measured_cm:.1} cm",
            size.long_cm
        ));
    }
    let [first, last] = measures.extent[2];
    if let Some(evidence) = &lesion.evidence
        && !(first..=last).contains(&(evidence.key_slice as usize))
    {
        found.push(format!(
            "its evidence is on slice {}; its mask spans slices {first}–{last}",
            evidence.key_slice
        ));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIMS: [usize; 3] = [40, 40, 30];

    fn empty() -> Vec<u8> {
        vec![0; DIMS.iter().product()]
    }

    fn filled(mask: &[u8]) -> usize {
        mask.iter().filter(|v| **v != 0).count()
    }

    #[test]
    fn run_lengths_give_the_mask_back_and_refuse_another_grid() {
        let mut mask = empty();
        paint(
            &mut mask,
            DIMS,
            [1.0; 3],
            [20, 20, 15],
            5.0,
            Brush::Ball,
            true,
        )
        .expect("painted");
        mask[0] = 1;
        let compact = LesionMask::from_dense(&mask, DIMS);
        assert_eq!(compact.runs[0], 0);
        assert_eq!(compact.voxels(), filled(&mask) as u64);
        assert_eq!(compact.to_dense(DIMS).expect("same grid"), mask);
        assert_eq!(
            compact.to_dense([40, 40, 31]).unwrap_err(),
            MaskError::OtherGrid {
                mask: DIMS,
                ct: [40, 40, 31]
            }
        );
        let mut broken = compact.clone();
        broken.runs.push(3);
        assert!(matches!(broken.to_dense(DIMS), Err(MaskError::Runs { .. })));
        // Round trip through JSON, as the review log keeps it.
        let json = serde_json::to_string(&compact).expect("json");
        let back: LesionMask = serde_json::from_str(&json).expect("read");
        assert_eq!(back, compact);
        // Measured from the runs, as from the whole mask.
        assert_eq!(
            compact.measure([1.0, 1.0, 2.0]),
            measure(&mask, DIMS, [1.0, 1.0, 2.0])
        );
        let inside: usize = compact.inside_runs().map(|(_, length)| length).sum();
        assert_eq!(inside, filled(&mask));
        assert_eq!(compact.inside_runs().next(), Some((0, 1)));
        // An empty mask is one run.
        assert_eq!(LesionMask::from_dense(&empty(), DIMS).runs, vec![48_000]);
    }

    #[test]
    fn a_brush_paints_a_disc_on_its_slice_or_a_ball_and_the_eraser_takes_it_back() {
        let mut mask = empty();
        let disc = paint(
            &mut mask,
            DIMS,
            [1.0; 3],
            [20, 20, 10],
            3.0,
            Brush::Disc(Plane::Axial),
            true,
        )
        .expect("painted");
        // A disc of radius 3 voxels: 29 pixels, all on slice 10.
        assert_eq!(disc, 29);
        let measures = measure(&mask, DIMS, [1.0; 3]).expect("measured");
        assert_eq!(measures.extent[2], [10, 10]);
        // Coronal: all on row 20.
        let mut coronal = empty();
        paint(
            &mut coronal,
            DIMS,
            [1.0; 3],
            [20, 20, 10],
            3.0,
            Brush::Disc(Plane::Coronal),
            true,
        )
        .expect("painted");
        assert_eq!(
            bounds(&coronal, DIMS).map(|b| [b.min[1], b.max[1]]),
            Some([20, 20])
        );
        // A ball in mm on anisotropic voxels reaches fewer slices than columns.
        let mut ball = empty();
        paint(
            &mut ball,
            DIMS,
            [1.0, 1.0, 3.0],
            [20, 20, 15],
            6.0,
            Brush::Ball,
            true,
        )
        .expect("painted");
        let b = bounds(&ball, DIMS).expect("painted");
        assert_eq!([b.min[2], b.max[2]], [13, 17]);
        assert_eq!([b.min[0], b.max[0]], [14, 26]);
        // Erasing the same disc leaves nothing of it.
        let erased = paint(
            &mut mask,
            DIMS,
            [1.0; 3],
            [20, 20, 10],
            3.0,
            Brush::Disc(Plane::Axial),
            false,
        )
        .expect("erased");
        assert_eq!(erased, 29);
        assert_eq!(filled(&mask), 0);
        // Outside the CT, and a radius of nothing, are refused.
        assert!(matches!(
            paint(
                &mut mask,
                DIMS,
                [1.0; 3],
                [40, 0, 0],
                2.0,
                Brush::Ball,
                true
            ),
            Err(EditError::Outside { .. })
        ));
        assert_eq!(
            paint(&mut mask, DIMS, [1.0; 3], [1, 1, 1], 0.0, Brush::Ball, true),
            Err(EditError::Radius(0.0))
        );
        assert!(matches!(
            paint(
                &mut [0u8; 5],
                DIMS,
                [1.0; 3],
                [1, 1, 1],
                2.0,
                Brush::Ball,
                true
            ),
            Err(EditError::MaskSize { .. })
        ));
    }

    fn volume_with_ball() -> Volume {
        let mut values = vec![60i16; DIMS.iter().product()];
        for z in 0..DIMS[2] {
            for y in 0..DIMS[1] {
                for x in 0..DIMS[0] {
                    let d = (x as f64 - 20.0).powi(2)
                        + (y as f64 - 20.0).powi(2)
                        + (z as f64 - 15.0).powi(2);
                    if d <= 36.0 {
                        values[index(DIMS, [x, y, z])] = 10;
                    }
                }
            }
        }
        Volume::new(
            DIMS,
            crate::volume::Affine::IDENTITY,
            crate::volume::Voxels::I16(values),
            Vec::new(),
            crate::volume::VolumeInfo::default(),
        )
        .expect("a volume")
    }

    #[test]
    fn threshold_keeps_the_range_inside_its_box_and_refuses_an_empty_range() {
        let volume = volume_with_ball();
        let mut mask = empty();
        let within = VoxelBox {
            min: [10, 10, 5],
            max: [30, 30, 25],
        };
        let changed = threshold(&mut mask, &volume, within, (0.0, 30.0)).expect("thresholded");
        let mut ball = empty();
        paint(
            &mut ball,
            DIMS,
            [1.0; 3],
            [20, 20, 15],
            6.0,
            Brush::Ball,
            true,
        )
        .expect("painted");
        assert_eq!(mask, ball);
        assert_eq!(changed, filled(&ball));
        let before = mask.clone();
        assert_eq!(
            threshold(&mut mask, &volume, within, (30.0, 0.0)),
            Err(EditError::EmptyRange {
                min: 30.0,
                max: 0.0
            })
        );
        assert_eq!(mask, before, "a refused stroke changes nothing");
    }

    #[test]
    fn islands_and_smoothing_clean_a_mask_and_refuse_an_empty_one() {
        let mut mask = empty();
        paint(
            &mut mask,
            DIMS,
            [1.0; 3],
            [20, 20, 15],
            5.0,
            Brush::Ball,
            true,
        )
        .expect("painted");
        let lesion = filled(&mask);
        mask[index(DIMS, [2, 2, 2])] = 1;
        mask[index(DIMS, [35, 35, 3])] = 1;
        mask[index(DIMS, [35, 36, 3])] = 1;
        assert_eq!(
            islands(&mut mask, DIMS, Islands::RemoveSmallerThan(2)),
            Ok(1)
        );
        assert_eq!(islands(&mut mask, DIMS, Islands::KeepLargest), Ok(2));
        assert_eq!(filled(&mask), lesion);
        // A spike comes off and a notch is filled.
        let spike = index(DIMS, [26, 20, 15]);
        mask[spike] = 1;
        let notch = index(DIMS, [20, 20, 20]);
        assert_eq!(mask[notch], 1);
        mask[notch] = 0;
        let changed = smooth(&mut mask, DIMS).expect("smoothed");
        assert!(changed >= 2);
        assert_eq!(mask[spike], 0);
        assert_eq!(mask[index(DIMS, [20, 20, 19])], 1);
        let mut nothing = empty();
        assert_eq!(
            islands(&mut nothing, DIMS, Islands::KeepLargest),
            Err(EditError::EmptyMask("remove islands from"))
        );
        assert_eq!(
            smooth(&mut nothing, DIMS),
            Err(EditError::EmptyMask("smooth"))
        );
    }

    #[test]
    fn fill_between_interpolates_the_shape_between_two_drawn_slices() {
        let mut mask = empty();
        let axial = Brush::Disc(Plane::Axial);
        paint(&mut mask, DIMS, [1.0; 3], [20, 20, 5], 4.0, axial, true).expect("painted");
        paint(&mut mask, DIMS, [1.0; 3], [20, 20, 15], 8.0, axial, true).expect("painted");
        let added = fill_between(&mut mask, DIMS, [1.0; 3], Plane::Axial).expect("filled");
        assert!(added > 0);
        // Every slice between is drawn, growing from radius 4 to 8: slice 10 about radius 6.
        let per_slice: Vec<usize> = (5..=15)
            .map(|z| {
                mask[z * 1600..(z + 1) * 1600]
                    .iter()
                    .filter(|v| **v != 0)
                    .count()
            })
            .collect();
        assert!(
            per_slice.windows(2).all(|pair| pair[0] <= pair[1]),
            "{per_slice:?}"
        );
        let mut six = empty();
        paint(&mut six, DIMS, [1.0; 3], [20, 20, 10], 6.0, axial, true).expect("painted");
        let six = six.iter().filter(|v| **v != 0).count();
        assert!(
            per_slice[5].abs_diff(six) <= 12,
            "{} vs {six}",
            per_slice[5]
        );
        // One drawn slice, or none, is refused.
        let mut one = empty();
        paint(&mut one, DIMS, [1.0; 3], [20, 20, 5], 4.0, axial, true).expect("painted");
        assert_eq!(
            fill_between(&mut one, DIMS, [1.0; 3], Plane::Axial),
            Err(EditError::TooFewSlices(1))
        );
        // In the sagittal plane, the drawn slices are columns.
        assert_eq!(
            fill_between(&mut one, DIMS, [1.0; 3], Plane::Sagittal),
            Ok(0),
            "columns 16–24 are all drawn: nothing between"
        );
    }

    #[test]
    fn fill_between_takes_the_plane_the_slices_were_drawn_on() {
        let mut mask = empty();
        assert_eq!(drawn_plane(&mask, DIMS), Plane::Axial);
        // Two discs on coronal slices 12 and 22.
        let coronal = Brush::Disc(Plane::Coronal);
        paint(&mut mask, DIMS, [1.0; 3], [20, 12, 10], 5.0, coronal, true).expect("painted");
        paint(&mut mask, DIMS, [1.0; 3], [20, 22, 10], 5.0, coronal, true).expect("painted");
        assert_eq!(drawn_plane(&mask, DIMS), Plane::Coronal);
        let added = fill_between(&mut mask, DIMS, [1.0; 3], Plane::Coronal).expect("filled");
        assert!(added > 0);
        let coronal_slices: Vec<bool> = (12..=22)
            .map(|y| (0..DIMS[2]).any(|z| (0..DIMS[0]).any(|x| mask[index(DIMS, [x, y, z])] != 0)))
            .collect();
        assert!(coronal_slices.iter().all(|&on| on), "{coronal_slices:?}");
        // Two discs on axial slices: axial.
        let mut axial = empty();
        let disc = Brush::Disc(Plane::Axial);
        paint(&mut axial, DIMS, [1.0; 3], [20, 20, 4], 5.0, disc, true).expect("painted");
        paint(&mut axial, DIMS, [1.0; 3], [20, 20, 14], 5.0, disc, true).expect("painted");
        assert_eq!(drawn_plane(&axial, DIMS), Plane::Axial);
    }

    #[test]
    fn a_masks_measures_become_a_reports_size_and_slice_range() {
        let mut mask = empty();
        paint(
            &mut mask,
            DIMS,
            [1.0; 3],
            [20, 20, 15],
            6.0,
            Brush::Ball,
            true,
        )
        .expect("painted");
        let measures = measure(&mask, DIMS, [1.5, 1.5, 2.0]).expect("measured");
        let size = size_of(&measures);
        assert!((size.long_cm - 1.95).abs() < 0.1, "{size:?}");
        assert_eq!(slices_of(&measures), SliceRange { first: 9, last: 21 });
        // A report that says otherwise is told where.
        let mut lesion = Lesion {
            size: Some(size),
            ..Lesion::default()
        };
        assert!(disagreements(&lesion, &measures).is_empty());
        lesion.size = Some(LesionSize {
            long_cm: 3.0,
            short_cm: None,
        });
        lesion.evidence = Some(crate::findings::Evidence {
            key_slice: 25,
            slice_box: None,
            slices: None,
        });
        assert_eq!(
            disagreements(&lesion, &measures),
            [
                "reported 3.0 cm; its mask measures 2.0 cm",
                "its evidence is on slice 25; its mask spans slices 9–21"
            ]
        );
    }
}
