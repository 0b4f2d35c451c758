//! The model's fixed grid: axial slabs of `slab_mm` (averaged from the CT's slices) sampled
//! on a square of `size` pixels of `pixel_mm`, centred on the CT's in-plane centre. Lesions
//! and organs keep their size in millimetres whatever the scanner's grid, and every model
//! voxel maps back to a CT slice and pixel.
//!
//! Works on the volume's voxel axes (i, j in-plane, k along slices), which `io` orders towards
//! LPS, so rows run anterior → posterior and columns patient right → left.

use rayon::prelude::*;

use keyslice_core::volume::filter::smooth_plane;
use keyslice_core::volume::{LabelVolume, Volume, Voxels};

/// The sampling of the model grid.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GridSpec {
    /// Pixels per side.
    pub size: usize,
    /// Pixel spacing, mm.
    pub pixel_mm: f64,
    /// Slab thickness (and spacing), mm.
    pub slab_mm: f64,
}

/// A volume on the model grid.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelGrid {
    /// The sampling.
    pub spec: GridSpec,
    /// Number of slabs.
    pub slabs: usize,
    /// HU per voxel, slab-major then row-major (`size × size` per slab).
    pub hu: Vec<f32>,
    /// CT slice index at each slab's centre.
    pub centre_slice: Vec<u32>,
    /// CT voxel spacing (columns, rows, slices), mm.
    pub ct_spacing_mm: [f64; 3],
    /// CT dims.
    pub ct_dims: [usize; 3],
    /// Patient z (mm) of the first slab's centre and of the last, for position features.
    pub z_range_mm: (f64, f64),
    /// How far the scan reaches beyond the last slab, mm: 0 for a whole volume; a key slice
    /// cut out of a volume sets it, so that its height feature says where the slice lies.
    pub above_mm: f64,
    /// The same slabs on pixels a whole number of times finer, for a finder that reads
    /// detail ([`Self::with_detail`]); `None` otherwise.
    pub detail: Option<Box<ModelGrid>>,
}

impl ModelGrid {
    /// The first and last CT slice averaged into slab `s`.
    #[must_use]
    pub fn slab_slices(&self, s: usize) -> (usize, usize) {
        slab_slices(s, self.spec, self.ct_spacing_mm, self.ct_dims)
    }

    /// Samples `volume` onto the grid: each slab is the mean of the CT slices whose centres
    /// fall in it (the nearest one if none), each pixel the mean over its footprint in-plane.
    #[must_use]
    pub fn from_volume(volume: &Volume, spec: GridSpec) -> Self {
        Self::sampled(volume, spec, TRAINING_PIXEL_MM)
    }

    /// This grid with its detail: the same slabs and field on pixels `factor` times finer,
    /// softened to the blur of a training phantom of pixels `factor` times finer than
    /// [`TRAINING_PIXEL_MM`] (a finder reading 1.5 mm detail learns it from phantoms of a 256
    /// matrix, 1.2–1.8 mm). A factor under 2 leaves the grid as it is.
    #[must_use]
    pub fn with_detail(mut self, volume: &Volume, factor: usize) -> Self {
        if factor >= 2 {
            let spec = GridSpec {
                size: self.spec.size * factor,
                pixel_mm: self.spec.pixel_mm / factor as f64,
                slab_mm: self.spec.slab_mm,
            };
            let mut detail = Self::sampled(volume, spec, TRAINING_PIXEL_MM / factor as f64);
            detail.above_mm = self.above_mm;
            self.detail = Some(Box::new(detail));
        }
        self
    }

    /// [`Self::from_volume`] softened towards training phantoms of `training_pixel_mm`.
    fn sampled(volume: &Volume, spec: GridSpec, training_pixel_mm: f64) -> Self {
        let dims = volume.dims();
        let spacing = volume.spacing_mm();
        let height_mm = dims[2] as f64 * spacing[2];
        let slabs = ((height_mm / spec.slab_mm).round() as usize).max(1);
        let n = spec.size;
        let mut hu = vec![0f32; slabs * n * n];
        let centre_slice: Vec<u32> = (0..slabs)
            .map(|s| slab_centre_slice(s, spec, spacing, dims))
            .collect();
        // Each model pixel averages a `taps`² lattice of bilinear samples over its footprint
        // (a box filter), so fine CT grids are not point-sampled into noise and aliasing.
        // Both the lattice and bilinear interpolation are separable: every model column is a
        // short list of weighted CT columns, every model row one of CT rows, and a slice is
        // filtered along its rows and then along its columns (a sample outside the CT reads
        // as air, -1000 HU, as in [`bilinear`]).
        let columns = AxisTaps::new(spec, spacing, dims, 0);
        let rows = AxisTaps::new(spec, spacing, dims, 1);
        let per_pixel = (columns.taps * rows.taps) as f32;
        let blur = [
            harmonising_weight(spacing[0], spec.pixel_mm, training_pixel_mm),
            harmonising_weight(spacing[1], spec.pixel_mm, training_pixel_mm),
        ];
        let (nx, ny) = (dims[0], dims[1]);
        hu.par_chunks_mut(n * n).enumerate().for_each(|(s, plane)| {
            let (first, last) = slab_slices(s, spec, spacing, dims);
            let count = (last - first + 1) as f32 * per_pixel;
            // The slice filtered along each CT row: `[CT row][model column]`.
            let mut along = vec![0f32; ny * n];
            for k in first..=last {
                let at = nx * ny * k;
                match volume.voxels() {
                    Voxels::I16(values) => {
                        columns.filter_rows(&values[at..at + nx * ny], nx, &mut along);
                    }
                    Voxels::F32(values) => {
                        columns.filter_rows(&values[at..at + nx * ny], nx, &mut along);
                    }
                }
                for (row, weights) in rows.weights.iter().enumerate() {
                    for column in 0..n {
                        let mut sum = 0.0;
                        for &(j, weight) in weights {
                            sum += weight * along[j * n + column];
                        }
                        let outside = (columns.taps * rows.taps
                            - columns.inside[column] * rows.inside[row])
                            as f32;
                        plane[column + n * row] += (sum - 1000.0 * outside) / count;
                    }
                }
            }
            smooth_plane(plane, n, blur);
        });
        let z = |s: usize| {
            volume
                .patient_from_voxel()
                .apply([0.0, 0.0, f64::from(centre_slice[s])])[2]
        };
        Self {
            spec,
            slabs,
            hu,
            z_range_mm: (z(0), z(slabs - 1)),
            above_mm: 0.0,
            centre_slice,
            ct_spacing_mm: spacing,
            ct_dims: dims,
            detail: None,
        }
    }

    /// This grid averaged over `factor`² blocks of pixels onto `spec` (the same field and
    /// slabs with pixels `factor` times as large): the box filter of `from_volume` over the
    /// larger footprint, without reading the CT again. `None` when `spec` is not such a grid.
    #[must_use]
    pub fn pooled(&self, spec: GridSpec) -> Option<Self> {
        let factor = self.spec.size / spec.size.max(1);
        let same_field = factor >= 1
            && spec.size * factor == self.spec.size
            && (spec.pixel_mm - self.spec.pixel_mm * factor as f64).abs() < 1e-9
            && (spec.slab_mm - self.spec.slab_mm).abs() < 1e-9;
        if !same_field {
            return None;
        }
        let (n, m) = (self.spec.size, spec.size);
        let scale = 1.0 / (factor * factor) as f32;
        let mut hu = vec![0f32; self.slabs * m * m];
        for (slab, out) in hu.chunks_mut(m * m).enumerate() {
            let source = &self.hu[slab * n * n..(slab + 1) * n * n];
            for (pixel, value) in out.iter_mut().enumerate() {
                let (column, row) = (pixel % m * factor, pixel / m * factor);
                let mut sum = 0.0;
                for r in row..row + factor {
                    sum += source[r * n + column..r * n + column + factor]
                        .iter()
                        .sum::<f32>();
                }
                *value = sum * scale;
            }
        }
        Some(Self {
            spec,
            hu,
            centre_slice: self.centre_slice.clone(),
            slabs: self.slabs,
            ct_spacing_mm: self.ct_spacing_mm,
            ct_dims: self.ct_dims,
            z_range_mm: self.z_range_mm,
            above_mm: self.above_mm,
            detail: None,
        })
    }

    /// Samples a label volume on the CT's grid onto the model grid (nearest, at the slab
    /// centre slice).
    #[must_use]
    pub fn sample_labels(&self, labels: &LabelVolume) -> Vec<u8> {
        let n = self.spec.size;
        let dims = labels.dims;
        let mut out = vec![0u8; self.slabs * n * n];
        out.par_chunks_mut(n * n)
            .enumerate()
            .for_each(|(s, plane)| {
                let k = self.centre_slice[s] as usize;
                for row in 0..n {
                    for column in 0..n {
                        let (ci, cj) = ct_position(
                            column as f64,
                            row as f64,
                            self.spec,
                            self.ct_spacing_mm,
                            self.ct_dims,
                        );
                        let (i, j) = (ci.round(), cj.round());
                        if i >= 0.0 && j >= 0.0 && (i as usize) < dims[0] && (j as usize) < dims[1]
                        {
                            plane[column + n * row] =
                                labels.labels[i as usize + dims[0] * (j as usize + dims[1] * k)];
                        }
                    }
                }
            });
        out
    }

    /// The CT voxel (column, row) at the centre of model pixel (`column`, `row`).
    #[must_use]
    pub fn ct_pixel(&self, column: usize, row: usize) -> (f64, f64) {
        self.ct_point(column as f64, row as f64)
    }

    /// The CT voxel position (column, row) of model position (`column`, `row`), both in
    /// pixels with the first pixel's centre at 0.
    #[must_use]
    pub fn ct_point(&self, column: f64, row: f64) -> (f64, f64) {
        ct_position(column, row, self.spec, self.ct_spacing_mm, self.ct_dims)
    }

    /// Height feature of slab `s`: 0 at the top of the scan, growing downwards by 1 per
    /// 300 mm (phantoms and abdominal CTs end near the liver dome).
    #[must_use]
    pub fn height_feature(&self, s: usize) -> f32 {
        let from_top = (self.slabs.saturating_sub(1) - s.min(self.slabs - 1)) as f64
            * self.spec.slab_mm
            + self.above_mm;
        (from_top / 300.0) as f32
    }
}

/// One in-plane axis of the resampling: for each model index, the CT indices its lattice of
/// bilinear samples touches with their summed weights, and how many samples fall inside the
/// CT.
struct AxisTaps {
    /// Samples per model pixel along this axis.
    taps: usize,
    /// `[model index]` → (CT index, weight).
    weights: Vec<Vec<(usize, f32)>>,
    /// `[model index]` → samples inside the CT.
    inside: Vec<usize>,
}

impl AxisTaps {
    fn new(spec: GridSpec, spacing: [f64; 3], dims: [usize; 3], axis: usize) -> Self {
        let taps = (spec.pixel_mm / spacing[axis]).round().clamp(1.0, 8.0);
        let last = (dims[axis] - 1) as f64;
        let mut weights = Vec::with_capacity(spec.size);
        let mut inside = Vec::with_capacity(spec.size);
        for index in 0..spec.size {
            let (ci, cj) = ct_position(index as f64, index as f64, spec, spacing, dims);
            let centre = if axis == 0 { ci } else { cj };
            let mut list: Vec<(usize, f32)> = Vec::new();
            let mut add = |at: usize, weight: f32| match list.iter_mut().find(|(i, _)| *i == at) {
                Some((_, sum)) => *sum += weight,
                None => list.push((at, weight)),
            };
            let mut count = 0;
            for t in 0..taps as usize {
                let p = centre + ((t as f64 + 0.5) / taps - 0.5) * spec.pixel_mm / spacing[axis];
                if p < 0.0 || p > last {
                    continue;
                }
                count += 1;
                let low = p.floor() as usize;
                let high = (low + 1).min(dims[axis] - 1);
                let fraction = (p - low as f64) as f32;
                add(low, 1.0 - fraction);
                add(high, fraction);
            }
            weights.push(list);
            inside.push(count);
        }
        Self {
            taps: taps as usize,
            weights,
            inside,
        }
    }

    /// Filters every row of one CT slice (`nx` values per row) along this (column) axis into
    /// `out` (`[row][model column]`).
    fn filter_rows<T: Copy + Into<f32>>(&self, slice: &[T], nx: usize, out: &mut [f32]) {
        let n = self.weights.len();
        for (row, target) in slice.chunks_exact(nx).zip(out.chunks_exact_mut(n)) {
            for (value, weights) in target.iter_mut().zip(&self.weights) {
                *value = weights
                    .iter()
                    .map(|&(i, weight)| weight * row[i].into())
                    .sum();
            }
        }
    }
}

/// The finest in-plane pixel of the phantoms the model learned from, mm (a 128 matrix over
/// the narrowest field, 307 mm). A CT of finer pixels (a clinical 512 matrix at 0.6–0.9 mm)
/// is much sharper on the model grid, and the finder, never having seen such edges, took the
/// kidney's medulla and sinus for tumors: on the 200 held-out phantoms made at 512, the left
/// kidney's specificity was 0.69 against 0.94 at 128. [`harmonising_weight`] softens such a
/// CT to the blur of a training phantom of this pixel.
const TRAINING_PIXEL_MM: f64 = 2.4;

/// The weight `w` of the in-plane kernel `[w, 1 − 2w, w]` (variance 2w model pixels²) that
/// gives a CT axis of `ct_pixel_mm`, read onto a model grid of `grid_pixel_mm`, the blur of
/// a training phantom of `training_pixel_mm` ([`TRAINING_PIXEL_MM`] for the model grids).
/// A CT's own blur is taken as a 1-2-1 pass per
/// pixel (variance 0.5 pixel², as in the phantoms and about a soft-tissue reconstruction
/// kernel), and averaging over the model pixel's footprint adds (grid² − ct²) / 12; the
/// difference to the training phantom's is (5/12)(2.4² − ct²) mm² on any grid coarser than
/// both. 0 for CTs as coarse as the training phantoms, whose analyses do not change.
fn harmonising_weight(ct_pixel_mm: f64, grid_pixel_mm: f64, training_pixel_mm: f64) -> f32 {
    let missing_mm2 =
        5.0 / 12.0 * (training_pixel_mm * training_pixel_mm - ct_pixel_mm * ct_pixel_mm).max(0.0);
    (missing_mm2 / (grid_pixel_mm * grid_pixel_mm) / 2.0).min(0.25) as f32
}

/// CT (column, row), continuous, of the centre of model pixel (`column`, `row`).
fn ct_position(
    column: f64,
    row: f64,
    spec: GridSpec,
    spacing: [f64; 3],
    dims: [usize; 3],
) -> (f64, f64) {
    let half_model = (spec.size as f64 - 1.0) / 2.0;
    let x_mm = (column - half_model) * spec.pixel_mm;
    let y_mm = (row - half_model) * spec.pixel_mm;
    (
        (dims[0] as f64 - 1.0) / 2.0 + x_mm / spacing[0],
        (dims[1] as f64 - 1.0) / 2.0 + y_mm / spacing[1],
    )
}

/// First and last CT slice averaged into slab `s`.
fn slab_slices(s: usize, spec: GridSpec, spacing: [f64; 3], dims: [usize; 3]) -> (usize, usize) {
    let start_mm = s as f64 * spec.slab_mm;
    let end_mm = start_mm + spec.slab_mm;
    // Slice k's centre lies at (k + 0.5) · spacing from the scan's lower edge.
    let first = (start_mm / spacing[2] - 0.5).ceil().max(0.0) as usize;
    let last = ((end_mm / spacing[2] - 0.5).ceil() as usize).saturating_sub(1);
    let centre = slab_centre_slice(s, spec, spacing, dims) as usize;
    if first > last || last >= dims[2] {
        (centre, centre)
    } else {
        (first, last.min(dims[2] - 1))
    }
}

fn slab_centre_slice(s: usize, spec: GridSpec, spacing: [f64; 3], dims: [usize; 3]) -> u32 {
    let centre_mm = (s as f64 + 0.5) * spec.slab_mm;
    ((centre_mm / spacing[2] - 0.5).round().max(0.0) as usize).min(dims[2] - 1) as u32
}

/// The model pixel of `coarse` (a grid of `coarse_size` pixels of `coarse_mm`) nearest the
/// centre of pixel `index` of a grid of `fine_size` pixels of `fine_mm`, both centred on the
/// scan.
pub(super) fn coarse_index(
    index: usize,
    fine_size: usize,
    fine_mm: f64,
    coarse_size: usize,
    coarse_mm: f64,
) -> usize {
    let mm = (index as f64 - (fine_size as f64 - 1.0) / 2.0) * fine_mm;
    (mm / coarse_mm + (coarse_size as f64 - 1.0) / 2.0)
        .round()
        .clamp(0.0, (coarse_size - 1) as f64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyslice_core::volume::{Affine, VolumeInfo};

    /// Bilinear HU at continuous (`i`, `j`) on slice `k`; air outside.
    fn bilinear(volume: &Volume, i: f64, j: f64, k: usize) -> f32 {
        let [nx, ny, _] = volume.dims();
        if i < 0.0 || j < 0.0 || i > (nx - 1) as f64 || j > (ny - 1) as f64 {
            return -1000.0;
        }
        let (i0, j0) = (i.floor() as usize, j.floor() as usize);
        let (i1, j1) = ((i0 + 1).min(nx - 1), (j0 + 1).min(ny - 1));
        let (fi, fj) = ((i - i0 as f64) as f32, (j - j0 as f64) as f32);
        let at = |i: usize, j: usize| volume.value([i, j, k]).unwrap_or(-1000.0);
        let top = at(i0, j0) * (1.0 - fi) + at(i1, j0) * fi;
        let bottom = at(i0, j1) * (1.0 - fi) + at(i1, j1) * fi;
        top * (1.0 - fj) + bottom * fj
    }

    /// The direct form of [`ModelGrid::from_volume`]'s sampling: every lattice sample
    /// interpolated on its own.
    fn reference(volume: &Volume, spec: GridSpec) -> Vec<f32> {
        let dims = volume.dims();
        let spacing = volume.spacing_mm();
        let slabs = ((dims[2] as f64 * spacing[2] / spec.slab_mm).round() as usize).max(1);
        let n = spec.size;
        let taps = [0, 1].map(|axis| (spec.pixel_mm / spacing[axis]).round().clamp(1.0, 8.0));
        let offsets = |axis: usize| -> Vec<f64> {
            (0..taps[axis] as usize)
                .map(|t| ((t as f64 + 0.5) / taps[axis] - 0.5) * spec.pixel_mm / spacing[axis])
                .collect()
        };
        let (offsets_i, offsets_j) = (offsets(0), offsets(1));
        let per_pixel = (offsets_i.len() * offsets_j.len()) as f32;
        let mut hu = vec![0f32; slabs * n * n];
        for (s, plane) in hu.chunks_mut(n * n).enumerate() {
            let (first, last) = slab_slices(s, spec, spacing, dims);
            let count = (last - first + 1) as f32 * per_pixel;
            for k in first..=last {
                for row in 0..n {
                    for column in 0..n {
                        let (ci, cj) = ct_position(column as f64, row as f64, spec, spacing, dims);
                        let mut sum = 0.0;
                        for dj in &offsets_j {
                            for di in &offsets_i {
                                sum += bilinear(volume, ci + di, cj + dj, k);
                            }
                        }
                        plane[column + n * row] += sum / count;
                    }
                }
            }
            let blur = [0, 1]
                .map(|axis| harmonising_weight(spacing[axis], spec.pixel_mm, TRAINING_PIXEL_MM));
            smooth_plane(plane, n, blur);
        }
        hu
    }

    /// One slice of a disc of 200 HU in 0 HU, radius 60 mm, centred `offset_mm` right of and
    /// below the CT's in-plane centre, point-sampled on `pixel_mm` pixels over a 240 mm field
    /// and blurred by one 1-2-1 pass per pixel in each direction, as the phantoms are.
    fn disc(pixel_mm: f64, offset_mm: f64) -> Volume {
        let n = (240.0 / pixel_mm).round() as usize;
        let half = (n as f64 - 1.0) / 2.0;
        let mut values: Vec<f32> = (0..n * n)
            .map(|at| {
                let x = (at % n) as f64 - half;
                let y = (at / n) as f64 - half;
                let inside = (x * pixel_mm - offset_mm).hypot(y * pixel_mm - offset_mm) < 60.0;
                if inside { 200.0 } else { 0.0 }
            })
            .collect();
        smooth_plane(&mut values, n, [0.25, 0.25]);
        let affine = Affine::from_axes(
            [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            [pixel_mm, pixel_mm, 5.0],
            [0.0, 0.0, 0.0],
        );
        Volume::new(
            [n, n, 1],
            affine,
            Voxels::F32(values),
            Vec::new(),
            VolumeInfo::default(),
        )
        .expect("parts agree")
    }

    /// The spread (variance, model pixels²) of the disc's edge along the model rows through
    /// its middle: the second moment of the HU rise at the left edge and of the fall at the
    /// right, averaged over the rows within 15 mm of the middle.
    fn edge_spread(grid: &ModelGrid) -> f64 {
        let n = grid.spec.size;
        let mut spreads = Vec::new();
        for row in n / 2 - 5..n / 2 + 5 {
            let values = &grid.hu[row * n..(row + 1) * n];
            for rising in [true, false] {
                let steps: Vec<(f64, f64)> = (0..n - 1)
                    .map(|i| {
                        let step = f64::from(values[i + 1] - values[i]);
                        (i as f64, if rising { step } else { -step }.max(0.0))
                    })
                    .filter(|&(i, _)| (i < n as f64 / 2.0) == rising)
                    .collect();
                let total: f64 = steps.iter().map(|(_, w)| w).sum();
                let mean = steps.iter().map(|(i, w)| i * w).sum::<f64>() / total;
                let spread = steps
                    .iter()
                    .map(|(i, w)| (i - mean).powi(2) * w)
                    .sum::<f64>();
                spreads.push(spread / total);
            }
        }
        spreads.iter().sum::<f64>() / spreads.len() as f64
    }

    #[test]
    fn a_clinical_grid_reaches_the_model_as_soft_as_the_training_phantoms() {
        let spec = GridSpec {
            size: 80,
            pixel_mm: 3.0,
            slab_mm: 5.0,
        };
        // Several sub-pixel positions of the edge, so that no one lucky alignment decides.
        let spread = |pixel_mm: f64| {
            let offsets = [0.0, 0.4, 0.9, 1.3, 1.7, 2.2];
            offsets
                .iter()
                .map(|&offset| edge_spread(&ModelGrid::from_volume(&disc(pixel_mm, offset), spec)))
                .sum::<f64>()
                / offsets.len() as f64
        };
        let training = spread(2.4);
        let clinical = spread(0.75);
        assert!(
            (clinical / training - 1.0).abs() < 0.2,
            "edge spread on the model grid: 0.75 mm CT {clinical:.3} px², 2.4 mm CT {training:.3} px²"
        );
        // The finest training phantoms are read as they always were; clinical grids are
        // softened by about a 1-2-1 pass at half strength.
        assert!(harmonising_weight(2.4, 3.0, TRAINING_PIXEL_MM) == 0.0);
        assert!(harmonising_weight(3.6, 3.0, TRAINING_PIXEL_MM) == 0.0);
        assert!(harmonising_weight(2.4, 6.0, TRAINING_PIXEL_MM) == 0.0);
        let clinical_weight = harmonising_weight(0.75, 3.0, TRAINING_PIXEL_MM);
        assert!((0.1..0.15).contains(&clinical_weight), "{clinical_weight}");
    }

    #[test]
    fn the_detail_holds_the_same_slabs_on_finer_pixels_as_soft_as_its_training_phantoms() {
        let spec = GridSpec {
            size: 80,
            pixel_mm: 3.0,
            slab_mm: 5.0,
        };
        let read = |pixel_mm: f64, offset_mm: f64| {
            let volume = disc(pixel_mm, offset_mm);
            ModelGrid::from_volume(&volume, spec).with_detail(&volume, 2)
        };
        let grid = read(0.75, 0.0);
        let detail = grid.detail.as_deref().expect("detail was asked for");
        assert_eq!(
            detail.spec,
            GridSpec {
                size: 160,
                pixel_mm: 1.5,
                slab_mm: 5.0
            }
        );
        assert_eq!(
            (detail.slabs, &detail.centre_slice),
            (grid.slabs, &grid.centre_slice)
        );
        // The detail of a clinical CT is as soft as that of a 1.2 mm phantom (a 256 matrix,
        // what a finder reading 1.5 mm detail trains on), and sharper in millimetres than
        // the grid.
        let spread = |pixel_mm: f64| {
            let offsets = [0.0, 0.4, 0.9, 1.3];
            offsets
                .iter()
                .map(|&offset| {
                    edge_spread(read(pixel_mm, offset).detail.as_deref().expect("detail"))
                })
                .sum::<f64>()
                / offsets.len() as f64
        };
        let (clinical, phantom) = (spread(0.75), spread(1.2));
        assert!(
            (clinical / phantom - 1.0).abs() < 0.2,
            "edge spread of the detail: 0.75 mm CT {clinical:.3} px², 1.2 mm CT {phantom:.3} px²"
        );
        let grid_mm2 = edge_spread(&grid) * 9.0;
        assert!(
            clinical * 2.25 < 0.6 * grid_mm2,
            "{clinical} px² of 1.5 mm, {grid_mm2} mm²"
        );
        // A factor under 2 adds nothing.
        let volume = disc(0.75, 0.0);
        assert!(
            ModelGrid::from_volume(&volume, spec)
                .with_detail(&volume, 1)
                .detail
                .is_none()
        );
    }

    fn volume(dims: [usize; 3], spacing: [f64; 3], float: bool) -> Volume {
        let count = dims.iter().product::<usize>();
        // Rough CT-like values with structure on every scale.
        let value = |index: usize| {
            let (i, j, k) = (
                index % dims[0],
                index / dims[0] % dims[1],
                index / dims[0] / dims[1],
            );
            ((i * 37 + j * 11 + k * 5) % 400) as f32 - 150.0 + ((i * j) % 7) as f32 * 30.0
        };
        let voxels = if float {
            Voxels::F32((0..count).map(|index| value(index) + 0.25).collect())
        } else {
            Voxels::I16((0..count).map(|index| value(index) as i16).collect())
        };
        let affine = Affine::from_axes(
            [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            spacing,
            [0.0, 0.0, 0.0],
        );
        Volume::new(dims, affine, voxels, Vec::new(), VolumeInfo::default()).expect("parts agree")
    }

    #[test]
    fn separable_sampling_matches_the_direct_form() {
        // Fine pixels (4 × 3 samples per model pixel), a field larger than the CT (samples
        // outside read as air), pixels coarser than the model's (one sample), thin and thick
        // slices, integer and float voxels.
        let cases = [
            ([61, 47, 9], [0.75, 1.0, 1.25], 3.0, 20, false),
            ([61, 47, 9], [0.75, 1.0, 1.25], 3.0, 20, true),
            ([13, 17, 4], [4.0, 3.5, 5.0], 3.0, 24, false),
            ([30, 30, 3], [2.9, 0.6, 7.0], 3.0, 16, true),
        ];
        for (dims, spacing, pixel_mm, size, float) in cases {
            let volume = volume(dims, spacing, float);
            let spec = GridSpec {
                size,
                pixel_mm,
                slab_mm: 5.0,
            };
            let grid = ModelGrid::from_volume(&volume, spec);
            let expected = reference(&volume, spec);
            assert_eq!(grid.hu.len(), expected.len());
            let worst = grid
                .hu
                .iter()
                .zip(&expected)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(
                worst < 1e-2,
                "{dims:?} {spacing:?}: largest difference {worst} HU"
            );
            assert!(grid.hu.iter().any(|&v| v > -1000.0 + 1.0));
        }
    }
}
