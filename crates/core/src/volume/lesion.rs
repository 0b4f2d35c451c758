//! A lesion in 3D: a mask grown from a box under an HU range (and within an organ), and the
//! measures a mask gives: its volume, the longest diameter in the axial plane and the longest
//! one at right angles to it (as RECIST measures), and its extent in voxels.
//!
//! Masks are one byte per voxel (non-zero: in the lesion), laid out like the volume (x
//! fastest, then y, then z).

use std::collections::VecDeque;

use rayon::prelude::*;

use super::Volume;

/// A box of voxels, both corners included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VoxelBox {
    /// The lowest column, row and slice.
    pub min: [usize; 3],
    /// The highest column, row and slice.
    pub max: [usize; 3],
}

impl VoxelBox {
    /// The box grown by `margin` voxels on every side, kept inside `dims`.
    #[must_use]
    pub fn grown(&self, margin: [usize; 3], dims: [usize; 3]) -> Self {
        Self {
            min: std::array::from_fn(|a| self.min[a].saturating_sub(margin[a])),
            max: std::array::from_fn(|a| (self.max[a] + margin[a]).min(dims[a] - 1)),
        }
    }

    pub(crate) fn contains(&self, voxel: [usize; 3]) -> bool {
        (0..3).all(|a| (self.min[a]..=self.max[a]).contains(&voxel[a]))
    }

    /// Voxels in the box.
    pub(crate) fn len(&self) -> usize {
        (0..3).map(|a| self.max[a] - self.min[a] + 1).product()
    }

    /// `voxel`'s position in an array laid out over the box (x fastest).
    pub(crate) fn local(&self, [x, y, z]: [usize; 3]) -> usize {
        let size = [self.max[0] - self.min[0] + 1, self.max[1] - self.min[1] + 1];
        (x - self.min[0]) + size[0] * ((y - self.min[1]) + size[1] * (z - self.min[2]))
    }

    pub(crate) fn voxels(&self) -> impl Iterator<Item = [usize; 3]> + '_ {
        (self.min[2]..=self.max[2]).flat_map(move |z| {
            (self.min[1]..=self.max[1])
                .flat_map(move |y| (self.min[0]..=self.max[0]).map(move |x| [x, y, z]))
        })
    }
}

/// Why a mask cannot be grown.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum GrowError {
    /// The box is not inside the volume, or is inverted.
    #[error("the box {min:?}–{max:?} is not inside the volume of {dims:?} voxels")]
    BoxOutside {
        /// The box's lowest corner.
        min: [usize; 3],
        /// The box's highest corner.
        max: [usize; 3],
        /// The volume's size.
        dims: [usize; 3],
    },
    /// The HU range is empty.
    #[error("the HU range {min}–{max} is empty: its minimum is above its maximum")]
    EmptyRange {
        /// Lowest HU.
        min: f32,
        /// Highest HU.
        max: f32,
    },
    /// No voxel of the box's centre lies in the range (and the organ).
    #[error("no voxel at the box's centre is {} (and in the organ): nothing to grow from", range_text(*min, *max))]
    NoSeed {
        /// Lowest HU.
        min: f32,
        /// Highest HU.
        max: f32,
    },
}

/// An HU range in words: `below 59 HU`, `above 130 HU`, `between 20 and 80 HU`.
fn range_text(min: f32, max: f32) -> String {
    match (min <= f32::MIN, max >= f32::MAX) {
        (true, true) => "at any HU".to_string(),
        (true, false) => format!("below {max} HU"),
        (false, true) => format!("above {min} HU"),
        (false, false) => format!("between {min} and {max} HU"),
    }
}

/// How a mask grows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GrowOptions {
    /// The HU range of the lesion; `None`: chosen from the box (halfway between its centre's
    /// median and its surroundings', on the centre's side), or, for a lesion within
    /// [`ISO_HU`] of its organ, the rim around it when one is found.
    pub hu: Option<(f32, f32)>,
    /// How far the mask may reach beyond the box, as a share of the box's size per side (at
    /// least one voxel): the leak guard.
    pub margin: f64,
}

impl Default for GrowOptions {
    fn default() -> Self {
        Self {
            hu: None,
            margin: 0.25,
        }
    }
}

/// A mask grown from a box, and the range it grew under.
#[derive(Clone, Debug, PartialEq)]
pub struct Grown {
    /// One byte per voxel of the volume: 1 in the lesion.
    pub mask: Vec<u8>,
    /// The HU range used.
    pub hu: (f32, f32),
    /// For an isoattenuating lesion grown within its rim: the HU (after in-plane smoothing)
    /// above which a voxel counted as rim.
    pub rim: Option<f32>,
}

/// How far apart, in HU, the box's centre and the organ around it must be for the lesion to
/// be told from its organ by density alone. Closer than this, the lesion is isoattenuating:
/// the grow looks for the brighter rim (capsule) around it instead.
pub const ISO_HU: f32 = 15.0;

/// Grows a lesion's mask from `bounds`.
///
/// The values are first denoised in the axial plane (a 3×3 median, which keeps edges where
/// they are). Then the voxels within the HU range connected (6-connected) to the box's centre
/// are taken, kept within the box grown by the margin (so a lesion touching a vessel of the
/// same density cannot leak along it) and within `organ` when given; holes are filled and the
/// largest connected part kept.
///
/// With the default range, a lesion whose centre is within [`ISO_HU`] of its organ has no edge
/// of density to grow to; if a brighter rim encloses it on its axial slices, the mask is the
/// rim and what it encloses ([`Grown::rim`]), else the grow falls back to the range.
pub fn grow_from_box(
    volume: &Volume,
    bounds: VoxelBox,
    organ: Option<&[u8]>,
    options: &GrowOptions,
) -> Result<Grown, GrowError> {
    let dims = volume.dims();
    if (0..3).any(|a| bounds.min[a] > bounds.max[a] || bounds.max[a] >= dims[a]) {
        return Err(GrowError::BoxOutside {
            min: bounds.min,
            max: bounds.max,
            dims,
        });
    }
    let index = |[x, y, z]: [usize; 3]| x + dims[0] * (y + dims[1] * z);
    let margin: [usize; 3] = std::array::from_fn(|a| {
        let size = (bounds.max[a] - bounds.min[a] + 1) as f64;
        ((size * options.margin).ceil() as usize).max(1)
    });
    let search = bounds.grown(margin, dims);
    if let Some((low, high)) = options.hu
        && low > high
    {
        return Err(GrowError::EmptyRange {
            min: low,
            max: high,
        });
    }
    let denoised = plane_filtered(volume, &search, PlaneFilter::Median);
    // Every voxel looked at lies in the search box: the centre and the box are inside it.
    let value = |voxel: [usize; 3]| denoised[search.local(voxel)];
    let centre = VoxelBox {
        min: std::array::from_fn(|a| bounds.min[a] + (bounds.max[a] - bounds.min[a]) / 4),
        max: std::array::from_fn(|a| bounds.max[a] - (bounds.max[a] - bounds.min[a]) / 4),
    };
    let in_organ = |voxel: [usize; 3]| organ.is_none_or(|mask| mask[index(voxel)] != 0);
    let (low, high) = if let Some(range) = options.hu {
        range
    } else {
        // Halfway between the median of the box's centre and that of the organ around the box
        // (the ring outside the box, within the organ when one is given), on the centre's
        // side: the lesion may be darker or brighter than its organ.
        let inside = median(
            centre
                .voxels()
                .filter(|&v| in_organ(v))
                .map(value)
                .collect(),
        );
        let around = median(
            search
                .voxels()
                .filter(|&v| !bounds.contains(v) && in_organ(v))
                .map(value)
                .collect(),
        );
        match (inside, around) {
            (Some(inside), Some(around)) => {
                if (inside - around).abs() < ISO_HU
                    && let Some(grown) =
                        grow_within_rim(volume, &bounds, &search, &in_organ, around)
                {
                    return Ok(grown);
                }
                let middle = f32::midpoint(inside, around);
                if inside <= around {
                    (f32::MIN, middle)
                } else {
                    (middle, f32::MAX)
                }
            }
            _ => (f32::MIN, f32::MAX),
        }
    };
    let fits = |voxel: [usize; 3]| {
        let v = value(voxel);
        v >= low && v <= high && in_organ(voxel)
    };
    let mut mask = vec![0u8; volume.voxels().len()];
    let mut queue: VecDeque<[usize; 3]> = centre.voxels().filter(|&v| fits(v)).collect();
    if queue.is_empty() {
        return Err(GrowError::NoSeed {
            min: low,
            max: high,
        });
    }
    for &voxel in &queue {
        mask[index(voxel)] = 1;
    }
    while let Some(voxel) = queue.pop_front() {
        for next in neighbours(voxel, &search) {
            let i = index(next);
            if mask[i] == 0 && fits(next) {
                mask[i] = 1;
                queue.push_back(next);
            }
        }
    }
    keep_largest_part(&mut mask, &search, dims);
    fill_holes(&mut mask, &search, dims);
    Ok(Grown {
        mask,
        hu: (low, high),
        rim: None,
    })
}

/// A 3×3 filter in the axial plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PlaneFilter {
    /// The median of the nine: noise goes, edges stay where they are (a line one pixel thin
    /// goes too).
    Median,
    /// The 1-2-1 binomial in both directions: noise is cut to 0.375 of itself and a thin line
    /// keeps half its contrast.
    Binomial,
}

/// The voxels of `within` after `filter`, laid out over the box (x fastest); neighbours
/// beyond the volume's edge repeat the edge.
fn plane_filtered(volume: &Volume, within: &VoxelBox, filter: PlaneFilter) -> Vec<f32> {
    let dims = volume.dims();
    let voxels = volume.voxels();
    let at = |x: usize, y: usize, z: usize| {
        voxels
            .get(x + dims[0] * (y + dims[1] * z))
            .unwrap_or(f32::NAN)
    };
    let width = within.max[0] - within.min[0] + 1;
    let plane = width * (within.max[1] - within.min[1] + 1);
    let mut out = vec![0f32; within.len()];
    // Slice by slice in parallel: a box as large as the CT is filtered in about a second.
    out.par_chunks_mut(plane)
        .enumerate()
        .for_each(|(k, slice)| {
            let z = within.min[2] + k;
            for (at_box, value) in slice.iter_mut().enumerate() {
                let x = within.min[0] + at_box % width;
                let y = within.min[1] + at_box / width;
                let xs = [x.saturating_sub(1), x, (x + 1).min(dims[0] - 1)];
                let ys = [y.saturating_sub(1), y, (y + 1).min(dims[1] - 1)];
                let mut nine = [0f32; 9];
                for (j, &yy) in ys.iter().enumerate() {
                    for (i, &xx) in xs.iter().enumerate() {
                        nine[i + 3 * j] = at(xx, yy, z);
                    }
                }
                *value = match filter {
                    PlaneFilter::Median => {
                        nine.sort_unstable_by(f32::total_cmp);
                        nine[4]
                    }
                    PlaneFilter::Binomial => {
                        const W: [f32; 3] = [0.25, 0.5, 0.25];
                        (0..9).map(|k| W[k % 3] * W[k / 3] * nine[k]).sum()
                    }
                };
            }
        });
    out
}

/// How many noise standard deviations (of the smoothed values) a rim must stand above its
/// organ.
const RIM_NOISE_FACTOR: f32 = 2.5;

/// The mask of an isoattenuating lesion inside `bounds`: on each axial slice, the voxels
/// brighter than the organ around (`around`, HU) by enough to stand out of the noise, closed
/// over one-pixel gaps, and what they enclose; the 3D part at the box's middle. `None` when no rim encloses
/// the box's centre.
fn grow_within_rim(
    volume: &Volume,
    bounds: &VoxelBox,
    search: &VoxelBox,
    in_organ: &impl Fn([usize; 3]) -> bool,
    around: f32,
) -> Option<Grown> {
    let dims = volume.dims();
    let voxels = volume.voxels();
    let index = |[x, y, z]: [usize; 3]| x + dims[0] * (y + dims[1] * z);
    // The noise, from the raw organ around the box (median absolute deviation).
    let ring: Vec<f32> = search
        .voxels()
        .filter(|&v| !bounds.contains(v) && in_organ(v))
        .filter_map(|v| voxels.get(index(v)))
        .collect();
    let ring_median = median(ring.clone())?;
    let sigma = 1.4826 * median(ring.iter().map(|v| (v - ring_median).abs()).collect())?;
    let smoothed = plane_filtered(volume, search, PlaneFilter::Binomial);
    let mut inside: Vec<f32> = bounds
        .voxels()
        .filter(|&v| in_organ(v))
        .map(|v| smoothed[search.local(v)])
        .filter(|v| v.is_finite())
        .collect();
    if inside.is_empty() {
        return None;
    }
    let high_at = inside.len() * 9 / 10;
    let (_, bright, _) = inside.select_nth_unstable_by(high_at, f32::total_cmp);
    let step = (RIM_NOISE_FACTOR * 0.375 * sigma).max((*bright - around) / 2.0);
    let threshold = around + step;
    let rim: Vec<bool> = search
        .voxels()
        .map(|v| smoothed[search.local(v)] >= threshold && in_organ(v))
        .collect();
    let mut mask = vec![0u8; voxels.len()];
    let size = [
        search.max[0] - search.min[0] + 1,
        search.max[1] - search.min[1] + 1,
    ];
    let plane = size[0] * size[1];
    for (k, z) in (search.min[2]..=search.max[2]).enumerate() {
        let filled = closed_and_filled(&rim[k * plane..(k + 1) * plane], size);
        for (at, on) in filled.iter().enumerate() {
            if *on
                && in_organ([
                    search.min[0] + at % size[0],
                    search.min[1] + at / size[0],
                    z,
                ])
            {
                mask[index([
                    search.min[0] + at % size[0],
                    search.min[1] + at / size[0],
                    z,
                ])] = 1;
            }
        }
    }
    // The lesion is the part at the box's middle; bright specks elsewhere are left out.
    let middle: [usize; 3] = std::array::from_fn(|a| usize::midpoint(bounds.min[a], bounds.max[a]));
    let (part, _) = parts(&mask, search, dims);
    let lesion = part[search.local(middle)];
    if lesion == 0 {
        return None;
    }
    for voxel in search.voxels() {
        if part[search.local(voxel)] != lesion {
            mask[index(voxel)] = 0;
        }
    }
    Some(Grown {
        mask,
        hu: (threshold, f32::MAX),
        rim: Some(threshold),
    })
}

/// A plane's pixels closed over one-pixel gaps (dilated by a 3×3 square, holes filled, eroded
/// back) with the holes filled.
fn closed_and_filled(on: &[bool], size: [usize; 2]) -> Vec<bool> {
    let square = |plane: &[bool], keep_if_any: bool| -> Vec<bool> {
        (0..plane.len())
            .map(|at| {
                let (x, y) = (at % size[0], at / size[0]);
                let mut any = false;
                let mut all = true;
                for yy in y.saturating_sub(1)..=(y + 1).min(size[1] - 1) {
                    for xx in x.saturating_sub(1)..=(x + 1).min(size[0] - 1) {
                        let v = plane[xx + size[0] * yy];
                        any |= v;
                        all &= v;
                    }
                }
                if keep_if_any { any } else { all }
            })
            .collect()
    };
    let dilated = square(on, true);
    // Fill: what the plane's border cannot reach without crossing the dilated pixels.
    let mut outside = vec![false; on.len()];
    let mut queue: VecDeque<usize> = (0..on.len())
        .filter(|&at| {
            let (x, y) = (at % size[0], at / size[0]);
            (x == 0 || y == 0 || x + 1 == size[0] || y + 1 == size[1]) && !dilated[at]
        })
        .collect();
    for &at in &queue {
        outside[at] = true;
    }
    while let Some(at) = queue.pop_front() {
        let (x, y) = (at % size[0], at / size[0]);
        let mut next = Vec::with_capacity(4);
        if x > 0 {
            next.push(at - 1);
        }
        if x + 1 < size[0] {
            next.push(at + 1);
        }
        if y > 0 {
            next.push(at - size[0]);
        }
        if y + 1 < size[1] {
            next.push(at + size[0]);
        }
        for n in next {
            if !dilated[n] && !outside[n] {
                outside[n] = true;
                queue.push_back(n);
            }
        }
    }
    let filled: Vec<bool> = outside.iter().map(|o| !o).collect();
    square(&filled, false)
}

fn median(mut values: Vec<f32>) -> Option<f32> {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return None;
    }
    let middle = values.len() / 2;
    let (_, value, _) = values.select_nth_unstable_by(middle, f32::total_cmp);
    Some(*value)
}

/// The six face neighbours of `voxel` inside `within`.
pub(crate) fn neighbours(
    voxel: [usize; 3],
    within: &VoxelBox,
) -> impl Iterator<Item = [usize; 3]> + '_ {
    (0..3).flat_map(move |axis| {
        [-1i64, 1].into_iter().filter_map(move |step| {
            let moved = voxel[axis] as i64 + step;
            let moved = usize::try_from(moved).ok()?;
            let mut next = voxel;
            next[axis] = moved;
            within.contains(next).then_some(next)
        })
    })
}

/// The 6-connected parts of `mask` inside `within`: a label per voxel of the box (0 outside
/// the mask, parts from 1) and each part's size (`sizes[0]` is unused).
pub(crate) fn parts(mask: &[u8], within: &VoxelBox, dims: [usize; 3]) -> (Vec<u32>, Vec<usize>) {
    let index = |[x, y, z]: [usize; 3]| x + dims[0] * (y + dims[1] * z);
    // Labels over the box only: a stroke on a 512² × 300 CT touches the box, not the CT.
    let mut part = vec![0u32; within.len()];
    let mut sizes = vec![0usize];
    for start in within.voxels() {
        if mask[index(start)] == 0 || part[within.local(start)] != 0 {
            continue;
        }
        let label = sizes.len() as u32;
        let mut size = 0;
        let mut queue = VecDeque::from([start]);
        part[within.local(start)] = label;
        while let Some(voxel) = queue.pop_front() {
            size += 1;
            for next in neighbours(voxel, within) {
                if mask[index(next)] != 0 && part[within.local(next)] == 0 {
                    part[within.local(next)] = label;
                    queue.push_back(next);
                }
            }
        }
        sizes.push(size);
    }
    (part, sizes)
}

/// Keeps only the largest 6-connected part of `mask` inside `within`.
pub(crate) fn keep_largest_part(mask: &mut [u8], within: &VoxelBox, dims: [usize; 3]) {
    let index = |[x, y, z]: [usize; 3]| x + dims[0] * (y + dims[1] * z);
    let (part, sizes) = parts(mask, within, dims);
    let Some(largest) = (1..sizes.len()).max_by_key(|&label| sizes[label]) else {
        return;
    };
    for voxel in within.voxels() {
        if part[within.local(voxel)] as usize != largest {
            mask[index(voxel)] = 0;
        }
    }
}

/// Fills what `mask` encloses within `within`: every voxel not in the mask that the box's
/// boundary cannot reach without crossing it.
pub(crate) fn fill_holes(mask: &mut [u8], within: &VoxelBox, dims: [usize; 3]) {
    let index = |[x, y, z]: [usize; 3]| x + dims[0] * (y + dims[1] * z);
    let mut outside = vec![false; within.len()];
    let mut queue: VecDeque<[usize; 3]> = within
        .voxels()
        .filter(|v| (0..3).any(|a| v[a] == within.min[a] || v[a] == within.max[a]))
        .filter(|&v| mask[index(v)] == 0)
        .collect();
    for &voxel in &queue {
        outside[within.local(voxel)] = true;
    }
    while let Some(voxel) = queue.pop_front() {
        for next in neighbours(voxel, within) {
            if mask[index(next)] == 0 && !outside[within.local(next)] {
                outside[within.local(next)] = true;
                queue.push_back(next);
            }
        }
    }
    for voxel in within.voxels() {
        let i = index(voxel);
        if mask[i] == 0 && !outside[within.local(voxel)] {
            mask[i] = 1;
        }
    }
}

/// What a lesion's mask measures.
#[derive(Clone, Debug, PartialEq)]
pub struct Measures {
    /// Voxels in the mask.
    pub voxels: usize,
    /// Its volume, mL.
    pub volume_ml: f64,
    /// The longest diameter in an axial slice, mm (from the outer edges of its end pixels).
    pub long_axis_mm: f64,
    /// The longest diameter at right angles to it on the same slice, mm.
    pub short_axis_mm: f64,
    /// The slice the long axis lies on.
    pub slice: usize,
    /// Its ends, as (column, row) pixel centres.
    pub long_axis: [[f64; 2]; 2],
    /// The lowest and highest column, row and slice the mask reaches.
    pub extent: [[usize; 2]; 3],
}

/// The measures of the non-zero voxels of `mask` on a grid of `dims` voxels of
/// `spacing_mm`; `None` for an empty mask.
#[must_use]
pub fn measure(mask: &[u8], dims: [usize; 3], spacing_mm: [f64; 3]) -> Option<Measures> {
    let plane = dims[0] * dims[1];
    let mut extent = [[usize::MAX, 0]; 3];
    let mut voxels = 0;
    // Eight voxels at a time past the empty ones: a lesion is a speck of a CT.
    for (chunk, bytes) in mask.chunks(8).enumerate() {
        if let Ok(word) = <[u8; 8]>::try_from(bytes)
            && u64::from_ne_bytes(word) == 0
        {
            continue;
        }
        for (offset, _) in bytes.iter().enumerate().filter(|(_, on)| **on != 0) {
            let i = chunk * 8 + offset;
            let voxel = [i % dims[0], (i / dims[0]) % dims[1], i / plane];
            for a in 0..3 {
                extent[a][0] = extent[a][0].min(voxel[a]);
                extent[a][1] = extent[a][1].max(voxel[a]);
            }
            voxels += 1;
        }
    }
    if voxels == 0 {
        return None;
    }
    let mut best: Option<(f64, usize, [[f64; 2]; 2])> = None;
    for z in extent[2][0]..=extent[2][1] {
        let slice = &mask[z * plane..(z + 1) * plane];
        if let Some((length, ends)) = longest_chord(slice, dims, spacing_mm)
            && best.is_none_or(|(longest, _, _)| length > longest)
        {
            best = Some((length, z, ends));
        }
    }
    let (long_axis_mm, slice, long_axis) = best?;
    let short_axis_mm = perpendicular_extent(
        &mask[slice * plane..(slice + 1) * plane],
        dims,
        spacing_mm,
        long_axis,
    );
    Some(Measures {
        voxels,
        volume_ml: voxels as f64 * spacing_mm.iter().product::<f64>() / 1000.0,
        long_axis_mm,
        short_axis_mm,
        slice,
        long_axis,
        extent,
    })
}

/// The longest distance between two pixels of the slice's region, measured from their outer
/// edges along the line (one pixel's extent in that direction is added), with its ends.
fn longest_chord(
    slice: &[u8],
    dims: [usize; 3],
    spacing: [f64; 3],
) -> Option<(f64, [[f64; 2]; 2])> {
    let on = |x: usize, y: usize| slice[x + dims[0] * y] != 0;
    // Only pixels on the region's edge can be the ends of its longest chord.
    let mut edge = Vec::new();
    for y in 0..dims[1] {
        for x in 0..dims[0] {
            if !on(x, y) {
                continue;
            }
            let inner = x > 0
                && y > 0
                && x + 1 < dims[0]
                && y + 1 < dims[1]
                && on(x - 1, y)
                && on(x + 1, y)
                && on(x, y - 1)
                && on(x, y + 1);
            if !inner {
                edge.push([x as f64, y as f64]);
            }
        }
    }
    let mut best: Option<(f64, [[f64; 2]; 2])> = None;
    for (i, a) in edge.iter().enumerate() {
        for b in &edge[i..] {
            let length = edge_to_edge(*a, *b, spacing);
            if best.is_none_or(|(longest, _)| length > longest) {
                best = Some((length, [*a, *b]));
            }
        }
    }
    best
}

/// The distance between two pixel centres plus one pixel's extent along the line joining
/// them: the length a ruler laid from one outer edge to the other reads.
fn edge_to_edge(a: [f64; 2], b: [f64; 2], spacing: [f64; 3]) -> f64 {
    let d = [(b[0] - a[0]) * spacing[0], (b[1] - a[1]) * spacing[1]];
    let length = d[0].hypot(d[1]);
    let pixel = if length > 0.0 {
        (d[0].abs() / length).mul_add(spacing[0], d[1].abs() / length * spacing[1])
    } else {
        spacing[0].min(spacing[1])
    };
    length + pixel
}

/// The longest extent of the slice's region at right angles to `axis`: the region's pixels
/// taken in strips one pixel wide along the axis, each strip's extent across it.
fn perpendicular_extent(
    slice: &[u8],
    dims: [usize; 3],
    spacing: [f64; 3],
    axis: [[f64; 2]; 2],
) -> f64 {
    let along = [
        (axis[1][0] - axis[0][0]) * spacing[0],
        (axis[1][1] - axis[0][1]) * spacing[1],
    ];
    let length = along[0].hypot(along[1]);
    let (along_unit, across_unit) = if length > 0.0 {
        (
            [along[0] / length, along[1] / length],
            [-along[1] / length, along[0] / length],
        )
    } else {
        ([1.0, 0.0], [0.0, 1.0])
    };
    let strip = spacing[0].min(spacing[1]);
    let mut across: std::collections::HashMap<i64, (f64, f64)> = std::collections::HashMap::new();
    for y in 0..dims[1] {
        for x in 0..dims[0] {
            if slice[x + dims[0] * y] == 0 {
                continue;
            }
            let point = [x as f64 * spacing[0], y as f64 * spacing[1]];
            let on_axis = point[0].mul_add(along_unit[0], point[1] * along_unit[1]);
            let off_axis = point[0].mul_add(across_unit[0], point[1] * across_unit[1]);
            let entry = across
                .entry((on_axis / strip).round() as i64)
                .or_insert((off_axis, off_axis));
            entry.0 = entry.0.min(off_axis);
            entry.1 = entry.1.max(off_axis);
        }
    }
    let pixel = across_unit[0]
        .abs()
        .mul_add(spacing[0], across_unit[1].abs() * spacing[1]);
    across
        .values()
        .map(|(low, high)| high - low + pixel)
        .fold(0.0, f64::max)
}

/// The Dice overlap of two masks (1: identical; both empty: 1).
#[must_use]
pub fn dice(a: &[u8], b: &[u8]) -> f64 {
    let (mut both, mut total) = (0usize, 0usize);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (*x != 0, *y != 0);
        both += usize::from(x && y);
        total += usize::from(x) + usize::from(y);
    }
    if total == 0 {
        1.0
    } else {
        2.0 * both as f64 / total as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volume::{Affine, Volume, Voxels};

    /// A 40³ volume of 40 HU with a 20 HU-darker ball of radius 6 voxels at (20, 20, 20), on
    /// a 1 mm grid; and the ball's true mask.
    fn ball() -> (Volume, Vec<u8>) {
        let dims = [40, 40, 40];
        let mut values = Vec::new();
        let mut truth = Vec::new();
        for z in 0..40 {
            for y in 0..40 {
                for x in 0..40 {
                    let r2 = [x, y, z]
                        .iter()
                        .map(|&c| (f64::from(c) - 20.0).powi(2))
                        .sum::<f64>();
                    let inside = r2 <= 36.0;
                    truth.push(u8::from(inside));
                    values.push(if inside { 20 } else { 60 });
                }
            }
        }
        (volume_of(dims, values), truth)
    }

    /// A volume of `values` on a 1 mm grid of `dims` voxels.
    fn volume_of(dims: [usize; 3], values: Vec<i16>) -> Volume {
        Volume::new(
            dims,
            Affine::IDENTITY,
            Voxels::I16(values),
            Vec::new(),
            crate::volume::VolumeInfo::default(),
        )
        .expect("a volume")
    }

    #[test]
    fn a_ball_grown_from_its_box_is_the_ball() {
        let (volume, truth) = ball();
        let bounds = VoxelBox {
            min: [14, 14, 14],
            max: [26, 26, 26],
        };
        let grown = grow_from_box(&volume, bounds, None, &GrowOptions::default()).expect("grown");
        // The in-plane median takes off the one-pixel tips of a digital ball with no partial
        // volume (its poles, and the ends of its middle rows): all else is the ball.
        let overlap = dice(&grown.mask, &truth);
        assert!(overlap > 0.97, "Dice {overlap:.3}");
        assert!(
            grown
                .mask
                .iter()
                .zip(&truth)
                .all(|(g, t)| *g == 0 || *t != 0)
        );
        assert_eq!(grown.hu, (f32::MIN, 40.0));
        assert_eq!(grown.rim, None);
        let measures = measure(&grown.mask, [40, 40, 40], [1.0, 1.0, 1.0]).expect("measured");
        // A digital ball of radius 6 spans 13 pixels across its middle slices.
        assert!((19..=21).contains(&measures.slice), "{measures:?}");
        assert!((measures.long_axis_mm - 13.0).abs() <= 1.0, "{measures:?}");
        assert!((measures.short_axis_mm - 13.0).abs() <= 1.0, "{measures:?}");
        assert_eq!(measures.extent, [[15, 25], [15, 25], [15, 25]]);
        let sphere_ml = 4.0 / 3.0 * std::f64::consts::PI * 216.0 / 1000.0;
        assert!(
            (measures.volume_ml - sphere_ml).abs() / sphere_ml < 0.05,
            "{measures:?}"
        );
    }

    /// A 48³ volume of 60 HU with Gaussian noise (σ 8 HU, fixed seed) and, at its middle, a
    /// ball of radius 9 voxels as dense as the organ inside and 30 HU brighter in its outer
    /// shell (from 0.78 of its radius out): an isoattenuating lesion with an enhancing rim;
    /// and the ball's true mask.
    fn rimmed_ball(rim_hu: f64) -> (Volume, Vec<u8>) {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut uniform = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut values = Vec::new();
        let mut truth = Vec::new();
        for z in 0..48 {
            for y in 0..48 {
                for x in 0..48 {
                    let r2 = [x, y, z]
                        .iter()
                        .map(|&c| (f64::from(c) - 24.0).powi(2))
                        .sum::<f64>()
                        / 81.0;
                    let inside = r2 < 1.0;
                    truth.push(u8::from(inside));
                    let clean = if inside && r2 > 0.6 {
                        60.0 + rim_hu
                    } else {
                        60.0
                    };
                    let noise = (-2.0 * uniform().max(1e-12).ln()).sqrt()
                        * (std::f64::consts::TAU * uniform()).cos();
                    values.push((clean + 8.0 * noise).round() as i16);
                }
            }
        }
        (volume_of([48, 48, 48], values), truth)
    }

    #[test]
    fn an_isoattenuating_lesion_grows_to_its_rim() {
        let (volume, truth) = rimmed_ball(30.0);
        let bounds = VoxelBox {
            min: [15, 15, 15],
            max: [33, 33, 33],
        };
        let grown = grow_from_box(&volume, bounds, None, &GrowOptions::default()).expect("grown");
        assert!(grown.rim.is_some(), "grown by range {:?}", grown.hu);
        let overlap = dice(&grown.mask, &truth);
        assert!(overlap > 0.9, "Dice {overlap:.3}");
    }

    #[test]
    fn an_isoattenuating_lesion_without_a_rim_falls_back_to_the_range() {
        // Nothing to tell the lesion from its organ: the grow still answers, by range.
        let (volume, _) = rimmed_ball(0.0);
        let bounds = VoxelBox {
            min: [15, 15, 15],
            max: [33, 33, 33],
        };
        let grown = grow_from_box(&volume, bounds, None, &GrowOptions::default()).expect("grown");
        assert_eq!(grown.rim, None);
        assert!(grown.mask.iter().any(|&on| on != 0));
    }

    #[test]
    fn bad_boxes_and_ranges_are_refused_with_the_reason() {
        let (volume, _) = ball();
        let outside = VoxelBox {
            min: [30, 30, 30],
            max: [45, 35, 35],
        };
        assert!(matches!(
            grow_from_box(&volume, outside, None, &GrowOptions::default()),
            Err(GrowError::BoxOutside { .. })
        ));
        let bounds = VoxelBox {
            min: [14, 14, 14],
            max: [26, 26, 26],
        };
        let inverted = GrowOptions {
            hu: Some((50.0, 10.0)),
            ..GrowOptions::default()
        };
        assert!(matches!(
            grow_from_box(&volume, bounds, None, &inverted),
            Err(GrowError::EmptyRange { .. })
        ));
        let elsewhere = GrowOptions {
            hu: Some((500.0, 900.0)),
            ..GrowOptions::default()
        };
        assert!(matches!(
            grow_from_box(&volume, bounds, None, &elsewhere),
            Err(GrowError::NoSeed { .. })
        ));
        assert_eq!(measure(&[0; 8], [2, 2, 2], [1.0; 3]), None);
    }

    #[test]
    fn a_leak_stops_at_the_margin() {
        let (volume, _) = ball();
        // The range takes the background too: the growth stays within the box plus margin.
        let everything = GrowOptions {
            hu: Some((-1000.0, 1000.0)),
            margin: 0.25,
        };
        let bounds = VoxelBox {
            min: [14, 14, 14],
            max: [26, 26, 26],
        };
        let grown = grow_from_box(&volume, bounds, None, &everything).expect("grown");
        let measures = measure(&grown.mask, [40, 40, 40], [1.0; 3]).expect("measured");
        assert_eq!(measures.extent, [[10, 30], [10, 30], [10, 30]]);
    }
}
