//! What the networks read: the body box, windowed HU, the diagnoser's slab stack with
//! position channels, the verifier's crop, and model pixels of CT pixels.

use super::grid::ModelGrid;

/// The in-plane box (corner, size as columns × rows) holding every pixel above −500 HU in
/// any slab, with a 4-pixel margin, sides rounded up to multiples of 8 and kept inside the
/// grid; the whole grid when nothing is above −500 HU.
pub(super) fn body_box(grid: &ModelGrid) -> ([usize; 2], [usize; 2]) {
    let n = grid.spec.size;
    let plane = n * n;
    let (mut low, mut high) = ([n, n], [0usize, 0usize]);
    for (at, &hu) in grid.hu.iter().enumerate() {
        if hu > -500.0 {
            let pixel = at % plane;
            let (column, row) = (pixel % n, pixel / n);
            low = [low[0].min(column), low[1].min(row)];
            high = [high[0].max(column), high[1].max(row)];
        }
    }
    if low[0] > high[0] || !n.is_multiple_of(8) {
        return ([0, 0], [n, n]);
    }
    let side = |axis: usize| -> (usize, usize) {
        let first = low[axis].saturating_sub(4);
        let last = (high[axis] + 4).min(n - 1);
        let length = (last - first + 1).div_ceil(8) * 8;
        let length = length.min(n);
        (first.min(n - length), length)
    };
    let ((column0, width), (row0, height)) = (side(0), side(1));
    ([column0, row0], [width, height])
}

/// Window `hu` to 0–1.
pub(super) fn window(hu: f32, [centre, width]: [f32; 2]) -> f32 {
    ((hu - (centre - width / 2.0)) / width).clamp(0.0, 1.0)
}

/// The diagnoser's input for `slab`: the slab below, the slab, the slab above, in each
/// window, then x, y and height features; channel-major.
#[must_use]
pub fn diagnoser_input(grid: &ModelGrid, slab: usize, windows: &[[f32; 2]]) -> Vec<f32> {
    let n = grid.spec.size;
    let plane = n * n;
    let mut input = Vec::with_capacity((3 * windows.len() + 3) * plane);
    for offset in [-1isize, 0, 1] {
        let s = (slab as isize + offset).clamp(0, grid.slabs as isize - 1) as usize;
        let values = &grid.hu[s * plane..(s + 1) * plane];
        for &w in windows {
            input.extend(values.iter().map(|&hu| window(hu, w)));
        }
    }
    position_channels(grid, grid.height_feature(slab), 0, 0, n, &mut input);
    input
}

/// x, y and height feature planes for a `side`² window starting at model pixel
/// (`column0`, `row0`).
pub(super) fn position_channels(
    grid: &ModelGrid,
    height: f32,
    column0: isize,
    row0: isize,
    side: usize,
    input: &mut Vec<f32>,
) {
    let n = grid.spec.size as isize;
    let feature = |column: isize, row: isize| {
        // Outside the grid the features continue linearly.
        let half = (n as f64 - 1.0) / 2.0;
        let scale = 200.0 / grid.spec.pixel_mm;
        (
            ((column as f64 - half) / scale) as f32,
            ((row as f64 - half) / scale) as f32,
        )
    };
    for axis in 0..2 {
        for row in 0..side as isize {
            for column in 0..side as isize {
                let (x, y) = feature(column0 + column, row0 + row);
                input.push(if axis == 0 { x } else { y });
            }
        }
    }
    input.extend(std::iter::repeat_n(height, side * side));
}

/// The verifier's input: a `crop`² window of slab `slab` centred on model pixel `centre`
/// (air outside the grid), then in-plane position features and a zero height plane (the
/// verifier sees one slice and is not told where it lies); and the window's top-left corner.
#[must_use]
pub fn verifier_input(
    grid: &ModelGrid,
    slab: usize,
    centre: (usize, usize),
    crop: usize,
    windows: &[[f32; 2]],
) -> (Vec<f32>, (isize, isize)) {
    let n = grid.spec.size as isize;
    let plane = grid.spec.size * grid.spec.size;
    let column0 = centre.0 as isize - crop as isize / 2;
    let row0 = centre.1 as isize - crop as isize / 2;
    let values = &grid.hu[slab * plane..(slab + 1) * plane];
    let mut input = Vec::with_capacity((windows.len() + 3) * crop * crop);
    for &w in windows {
        for row in row0..row0 + crop as isize {
            for column in column0..column0 + crop as isize {
                let hu = if (0..n).contains(&row) && (0..n).contains(&column) {
                    values[(column + n * row) as usize]
                } else {
                    -1000.0
                };
                input.push(window(hu, w));
            }
        }
    }
    position_channels(grid, 0.0, column0, row0, crop, &mut input);
    (input, (column0, row0))
}

/// The model pixel nearest CT pixel (`i`, `j`).
pub(super) fn model_pixel_of(grid: &ModelGrid, i: f64, j: f64) -> (usize, usize) {
    let n = grid.spec.size;
    let half_model = (n as f64 - 1.0) / 2.0;
    let x_mm = (i - (grid.ct_dims[0] as f64 - 1.0) / 2.0) * grid.ct_spacing_mm[0];
    let y_mm = (j - (grid.ct_dims[1] as f64 - 1.0) / 2.0) * grid.ct_spacing_mm[1];
    let to_pixel = |mm: f64| {
        ((mm / grid.spec.pixel_mm + half_model)
            .round()
            .clamp(0.0, (n - 1) as f64)) as usize
    };
    (to_pixel(x_mm), to_pixel(y_mm))
}
