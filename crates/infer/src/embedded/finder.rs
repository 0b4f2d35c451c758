//! The lesion finder of `keyslice-tiny` (version 2 on): a small CNN asked one question per
//! organ and slab, "does this organ show a tumor on this slab?", instead of marking lesion
//! pixels among thousands of others (what per-pixel lesion masks fail to learn;
//! see the model card).
//!
//! Input: a `crop`² window of the finder's grid (3 mm pixels, 5 mm slabs) centred on the
//! organ's extent on that slab: the slab and its two neighbours in each window, the organ's
//! mask (grown by a pixel) and x, y and height position planes. Three blocks of two 3×3
//! convolutions (batch normalisation, ReLU), max-pooled twice, then a 1×1 head with one
//! logit per organ and ¼-resolution cell. The answer for an organ is the largest logit of its
//! channel over the cells its mask touches (multiple-instance pooling): the cell that decides
//! is where the tumor is, which places the lesion for the decoding.

use candle_core::{Module, Result, Tensor};
use candle_nn::{Conv2d, Conv2dConfig, VarBuilder, conv2d};
use keyslice_core::findings::Organ;
use serde::{Deserialize, Serialize};

use super::batch_norm::{NormBlock, NormMode};
use super::grid::{GridSpec, ModelGrid};
use super::input::{position_channels, window};

/// Cells of the finder's output per input pixel along a side (two 2× poolings).
pub const STRIDE: usize = 4;

/// The organs the finder and the organ network answer for, in [`Organ::ALL`]'s order: an
/// organ's index in their channels and thresholds.
pub const ORGANS: usize = Organ::ALL.len();

/// A region at least this many HU darker or brighter than its organ differs from it to the
/// eye (hypo- or hyperattenuating); closer, it is isoattenuating and no edge of its own bounds
/// it.
pub const VISIBLE_CONTRAST_HU: f32 = 12.0;

/// The finder's part of `config.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FinderConfig {
    /// Its grid (the slab thickness must be the diagnoser's, so that slabs correspond).
    pub grid: GridSpec,
    /// Pixels per side of a crop (a multiple of [`STRIDE`]).
    pub crop: usize,
    /// Channel widths of the three blocks.
    pub widths: [usize; 3],
    /// Probability above which an organ's slab counts as showing a tumor, per organ (liver,
    /// pancreas, left kidney, right kidney): chosen on calibration cases held out of the
    /// finder's training, never on the held-out test set.
    pub thresholds: [f32; ORGANS],
    /// Organ-mask probability from which a pixel counts as the organ, per organ: the
    /// diagnoser's small organs can stay below 0.5 (chosen on calibration cases).
    #[serde(default = "half")]
    pub mask_thresholds: [f32; ORGANS],
    /// Detail: the CT on pixels a whole number of times finer, read by a stem block before
    /// the first (`None`: the finder reads only its grid; checkpoints without the field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<FinderDetail>,
}

/// The finder's detail stem: the slabs' HU (three slabs, every window) on pixels `factor`
/// times finer than the finder's grid, through a block of `width` channels and a
/// `factor`-fold max-pooling onto the grid, where they join the first block's input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinderDetail {
    /// How many detail pixels per grid pixel along a side (2: 1.5 mm on a 3 mm grid).
    pub factor: usize,
    /// Channels of the stem block.
    pub width: usize,
}

fn half() -> [f32; ORGANS] {
    [0.5; ORGANS]
}

impl FinderConfig {
    /// The configuration a fresh finder starts from.
    #[must_use]
    pub fn initial(slab_mm: f64) -> Self {
        Self {
            grid: GridSpec {
                size: 128,
                pixel_mm: 3.0,
                slab_mm,
            },
            crop: 64,
            widths: [16, 32, 64],
            thresholds: [0.5; ORGANS],
            mask_thresholds: half(),
            detail: None,
        }
    }

    /// Input channels: three slabs × windows, the organ mask, x, y and height.
    #[must_use]
    pub fn inputs(windows: usize) -> usize {
        3 * windows + 4
    }

    /// The detail factor (1 without detail).
    #[must_use]
    pub fn detail_factor(&self) -> usize {
        self.detail.map_or(1, |detail| detail.factor.max(1))
    }

    /// What is wrong with the `detail` setting, if anything: a factor outside 2–4 (1 would
    /// be the grid itself; beyond 4 the detail of a 512 × 512 × 300 CT alone outgrows a
    /// gigabyte) or a stem without channels.
    #[must_use]
    pub fn detail_problem(&self) -> Option<String> {
        let detail = self.detail?;
        (!(2..=4).contains(&detail.factor) || detail.width == 0).then(|| {
            format!(
                "the finder's \"detail\" needs a factor of 2 to 4 and a width of at least 1 \
                 (it has factor {} and width {}); remove \"detail\" for a finder that reads only \
                 its grid",
                detail.factor, detail.width
            )
        })
    }
}

/// The network.
pub struct FinderNet {
    stem: Option<(NormBlock, usize)>,
    blocks: [NormBlock; 3],
    head: Conv2d,
}

impl FinderNet {
    /// Builds (or loads, through `vb`) the network, its normalisations as `mode` says.
    pub fn new(
        inputs: usize,
        config: &FinderConfig,
        vb: &VarBuilder,
        mode: NormMode,
    ) -> Result<Self> {
        let [w1, w2, w3] = config.widths;
        let detail = config.detail.filter(|detail| detail.factor >= 2);
        // The detail stem reads the HU planes only: three slabs × windows.
        let stem = detail
            .map(|detail| {
                NormBlock::new(inputs - 4, detail.width, &vb.pp("stem"), mode)
                    .map(|block| (block, detail.factor))
            })
            .transpose()?;
        let first_inputs = inputs + detail.map_or(0, |detail| detail.width);
        Ok(Self {
            stem,
            blocks: [
                NormBlock::new(first_inputs, w1, &vb.pp("block1"), mode)?,
                NormBlock::new(w1, w2, &vb.pp("block2"), mode)?,
                NormBlock::new(w2, w3, &vb.pp("block3"), mode)?,
            ],
            head: conv2d(w3, 4, 1, Conv2dConfig::default(), vb.pp("head"))?,
        })
    }

    /// `x`: `[batch, inputs, crop, crop]` (and with a detail stem `detail`: `[batch, HU
    /// planes, crop · factor, crop · factor]`) → logits `[batch, 4, crop / 4, crop / 4]`;
    /// `train` normalises with the batch's statistics.
    pub fn forward(&self, x: &Tensor, detail: Option<&Tensor>, train: bool) -> Result<Tensor> {
        self.top(&self.trunk(x, detail, train)?, train)
    }

    /// The stem (if any) and the first two blocks: → `[batch, widths[1], crop / 4, crop /
    /// 4]` (what the RL stage computes once per case and keeps).
    pub fn trunk(&self, x: &Tensor, detail: Option<&Tensor>, train: bool) -> Result<Tensor> {
        let [first, second, _] = &self.blocks;
        let x = match (&self.stem, detail) {
            (None, _) => x.clone(),
            (Some((stem, factor)), Some(detail)) => {
                let features = stem.forward(detail, train)?.max_pool2d(*factor)?;
                Tensor::cat(&[x, &features], 1)?
            }
            (Some(_), None) => candle_core::bail!(
                "this finder reads the CT's detail, and its grid was made without it"
            ),
        };
        let a = first.forward(&x, train)?;
        second.forward(&a.max_pool2d(2)?, train)?.max_pool2d(2)
    }

    /// The third block and the head on the trunk's output: the logits.
    pub fn top(&self, trunk: &Tensor, train: bool) -> Result<Tensor> {
        self.head.forward(&self.blocks[2].forward(trunk, train)?)
    }

    /// The batch normalisation's running statistics as named tensors (under `prefix`, e.g.
    /// `finder`), to be saved with the weights.
    pub fn running_tensors(&self, prefix: &str) -> Result<Vec<(String, Tensor)>> {
        let mut out = Vec::new();
        if let Some((stem, _)) = &self.stem {
            out.extend(stem.running_tensors(&format!("{prefix}.stem"))?);
        }
        for (index, block) in self.blocks.iter().enumerate() {
            out.extend(block.running_tensors(&format!("{prefix}.block{}", index + 1))?);
        }
        Ok(out)
    }
}

/// Each sample's logit map for its organ with the cells outside the organ pushed far down:
/// `logits` `[batch, 4, h, w]`, `organs[b]` the organ index of sample `b`, `masks`
/// `[batch, 1, h·4, w·4]` (1 on the organ) → `[batch, h·w]`.
pub fn organ_cells(logits: &Tensor, organs: &[usize], masks: &Tensor) -> Result<Tensor> {
    let (batch, channels, _, _) = logits.dims4()?;
    let mut select = vec![0f32; batch * channels];
    for (b, &organ) in organs.iter().enumerate() {
        select[b * channels + organ] = 1.0;
    }
    let select = Tensor::from_vec(select, (batch, channels, 1, 1), logits.device())?;
    let map = logits.broadcast_mul(&select)?.sum(1)?;
    let cells = masks.max_pool2d(STRIDE)?.squeeze(1)?;
    // Outside the organ: logit − 30 (probability below 1e-13), so the maximum is inside it.
    let outside = ((cells - 1.0)? * 30.0)?;
    (map + outside)?.flatten_from(1)
}

/// One finder crop: where it lies on the grid and its organ mask (crop pixels, 0/1).
pub struct FinderCrop {
    /// Grid column and row of the crop's top-left pixel.
    pub corner: (usize, usize),
    /// The organ mask inside the crop, row-major.
    pub mask: Vec<f32>,
}

/// The crop corner that centres `centre` as far as the grid allows.
#[must_use]
pub fn crop_corner(centre: (usize, usize), crop: usize, size: usize) -> (usize, usize) {
    let corner = |at: usize| at.saturating_sub(crop / 2).min(size.saturating_sub(crop));
    (corner(centre.0), corner(centre.1))
}

/// The centre (column, row) of the bounding box of `mask` (one slab of the grid), if any
/// pixel is set.
#[must_use]
pub fn mask_centre(mask: &[bool], size: usize) -> Option<(usize, usize)> {
    let mut bounds: Option<[usize; 4]> = None;
    for (pixel, _) in mask.iter().enumerate().filter(|(_, on)| **on) {
        let (column, row) = (pixel % size, pixel / size);
        bounds = Some(match bounds {
            None => [column, row, column, row],
            Some([c0, r0, c1, r1]) => [c0.min(column), r0.min(row), c1.max(column), r1.max(row)],
        });
    }
    bounds.map(|[c0, r0, c1, r1]| (usize::midpoint(c0, c1), usize::midpoint(r0, r1)))
}

/// The finder's input for organ mask `mask` (one slab of `grid`, row-major) on `slab`, in a
/// crop with top-left `corner`; channel-major. Also returns the crop's mask (grown by one
/// pixel, as the network sees it).
#[must_use]
pub fn finder_input(
    grid: &ModelGrid,
    slab: usize,
    mask: &[bool],
    corner: (usize, usize),
    crop: usize,
    windows: &[[f32; 2]],
) -> (Vec<f32>, FinderCrop) {
    let n = grid.spec.size;
    let mut input = Vec::with_capacity(FinderConfig::inputs(windows.len()) * crop * crop);
    let (column0, row0) = corner;
    hu_planes(grid, slab, corner, crop, windows, &mut input);
    let mut grown = vec![0f32; crop * crop];
    for row in 0..crop {
        for column in 0..crop {
            let (gr, gc) = (row0 + row, column0 + column);
            let near = (gr.saturating_sub(1)..=(gr + 1).min(n - 1))
                .any(|r| (gc.saturating_sub(1)..=(gc + 1).min(n - 1)).any(|c| mask[r * n + c]));
            if near {
                grown[row * crop + column] = 1.0;
            }
        }
    }
    input.extend_from_slice(&grown);
    position_channels(
        grid,
        grid.height_feature(slab),
        column0 as isize,
        row0 as isize,
        crop,
        &mut input,
    );
    (
        input,
        FinderCrop {
            corner,
            mask: grown,
        },
    )
}

/// The detail stem's input for the crop with top-left `corner` (on the finder's grid) of
/// `slab`: the three slabs' HU in every window on `grid`'s detail, channel-major, `crop ·
/// factor` pixels a side. `None` when the grid has no detail.
#[must_use]
pub fn detail_input(
    grid: &ModelGrid,
    slab: usize,
    corner: (usize, usize),
    crop: usize,
    windows: &[[f32; 2]],
) -> Option<Vec<f32>> {
    let detail = grid.detail.as_deref()?;
    let factor = detail.spec.size / grid.spec.size.max(1);
    let side = crop * factor;
    let mut input = Vec::with_capacity(3 * windows.len() * side * side);
    hu_planes(
        detail,
        slab,
        (corner.0 * factor, corner.1 * factor),
        side,
        windows,
        &mut input,
    );
    Some(input)
}

/// Appends the `side`² square with top-left `corner` of the slab below `slab`, `slab` and
/// the slab above (the nearest inside the grid) in each window, channel-major.
fn hu_planes(
    grid: &ModelGrid,
    slab: usize,
    (column0, row0): (usize, usize),
    side: usize,
    windows: &[[f32; 2]],
    input: &mut Vec<f32>,
) {
    let n = grid.spec.size;
    let plane = n * n;
    for offset in [-1isize, 0, 1] {
        let s = (slab as isize + offset).clamp(0, grid.slabs as isize - 1) as usize;
        let values = &grid.hu[s * plane..(s + 1) * plane];
        for &w in windows {
            for row in row0..row0 + side {
                input.extend(
                    values[row * n + column0..row * n + column0 + side]
                        .iter()
                        .map(|&hu| window(hu, w)),
                );
            }
        }
    }
}

/// A question to the finder: does `organ` show a tumor on `slab` (in the crop with top-left
/// `corner`)?
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Job {
    /// Slab.
    pub slab: usize,
    /// Organ index.
    pub organ: usize,
    /// Grid column and row of the crop's top-left pixel.
    pub corner: (usize, usize),
}

/// Every organ and slab where the organ's mask (`masks[slab * 4 + organ]`, on a grid of
/// `size`² pixels) covers at least 4 pixels, with its crop.
#[must_use]
pub fn jobs(masks: &[Vec<bool>], size: usize, crop: usize) -> Vec<Job> {
    let mut jobs = Vec::new();
    for (index, mask) in masks.iter().enumerate() {
        if mask.iter().filter(|&&on| on).count() < 4 {
            continue;
        }
        if let Some(centre) = mask_centre(mask, size) {
            jobs.push(Job {
                slab: index / 4,
                organ: index % 4,
                corner: crop_corner(centre, crop, size),
            });
        }
    }
    jobs
}

/// The finder's inputs: `[batch, inputs, crop, crop]`, the crop masks `[batch, 1, crop,
/// crop]` of `batch`, and the detail stem's input when `grid` has detail.
pub fn batch_inputs(
    grid: &ModelGrid,
    masks: &[Vec<bool>],
    batch: &[Job],
    crop: usize,
    windows: &[[f32; 2]],
    device: &candle_core::Device,
) -> Result<(Tensor, Tensor, Option<Tensor>)> {
    let channels = FinderConfig::inputs(windows.len());
    let mut inputs = Vec::with_capacity(batch.len() * channels * crop * crop);
    let mut crop_masks = Vec::with_capacity(batch.len() * crop * crop);
    let mut details = Vec::new();
    for job in batch {
        if let Some(detail) = detail_input(grid, job.slab, job.corner, crop, windows) {
            details.extend(detail);
        }
        let (input, made) = finder_input(
            grid,
            job.slab,
            &masks[job.slab * 4 + job.organ],
            job.corner,
            crop,
            windows,
        );
        inputs.extend(input);
        crop_masks.extend(made.mask);
    }
    Ok((
        Tensor::from_vec(inputs, (batch.len(), channels, crop, crop), device)?,
        Tensor::from_vec(crop_masks, (batch.len(), 1, crop, crop), device)?,
        detail_tensor(details, grid, batch.len(), crop, windows, device)?,
    ))
}

/// `values` (`count` inputs of [`detail_input`] on `grid` for crops of `crop`) as `[count,
/// HU planes, side, side]`; `None` when the grid has no detail.
pub fn detail_tensor(
    values: Vec<f32>,
    grid: &ModelGrid,
    count: usize,
    crop: usize,
    windows: &[[f32; 2]],
    device: &candle_core::Device,
) -> Result<Option<Tensor>> {
    let Some(detail) = grid.detail.as_deref() else {
        return Ok(None);
    };
    let side = crop * (detail.spec.size / grid.spec.size.max(1));
    Ok(Some(Tensor::from_vec(
        values,
        (count, 3 * windows.len(), side, side),
        device,
    )?))
}

/// The answer to `job` from its organ's cell logits (a row of [`organ_cells`]): the largest
/// logit decides, its cell places the lesion.
#[must_use]
pub fn answer(job: &Job, cells: &[f32], crop: usize) -> SlabAnswer {
    let per_row = crop / STRIDE;
    let (best, logit) = cells
        .iter()
        .copied()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or((0, f32::NEG_INFINITY));
    SlabAnswer {
        organ: job.organ,
        slab: job.slab,
        probability: 1.0 / (1.0 + (-logit).exp()),
        cell: (
            job.corner.0 + (best % per_row) * STRIDE,
            job.corner.1 + (best / per_row) * STRIDE,
        ),
    }
}

/// The finder's answer for one organ on one slab.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlabAnswer {
    /// Organ index (liver, pancreas, left kidney, right kidney).
    pub organ: usize,
    /// Slab.
    pub slab: usize,
    /// Probability that the organ shows a tumor on this slab.
    pub probability: f32,
    /// Grid column and row of the top-left pixel of the deciding cell ([`STRIDE`]² pixels).
    pub cell: (usize, usize),
}

/// Pixels of closing ([`closed_area`]) before a lesion grows: gaps in an organ mask up to
/// twice this wide close.
const CLOSING: usize = 3;

/// Difference from the organ (HU) from which a pixel is no tumor of it but fat or air.
const CEILING: f32 = 110.0;

/// How far (pixels) around the deciding cell a lesion's seed may lie ([`grow_lesion`]).
const SEED_REACH: usize = 2;

/// The pixels of the 3 × 3 square around `pixel` on an `n`² grid that lie on the grid.
fn square(pixel: usize, n: usize) -> impl Iterator<Item = usize> {
    let (column, row) = (pixel % n, pixel / n);
    (row.saturating_sub(1)..=(row + 1).min(n - 1)).flat_map(move |r| {
        (column.saturating_sub(1)..=(column + 1).min(n - 1)).map(move |c| r * n + c)
    })
}

/// Whether the whole 3 × 3 square around `pixel` (none of it off the `n`² grid) lies in `set`.
pub(super) fn surrounded(pixel: usize, n: usize, set: &[bool]) -> bool {
    square(pixel, n).count() == 9 && square(pixel, n).all(|at| set[at])
}

/// Flood fill on an `n`² grid: `starts`, then every pixel 4-connected to what is reached for
/// which `passes` holds, each once, in the order reached (depth first).
fn flood(starts: Vec<usize>, n: usize, mut passes: impl FnMut(usize) -> bool) -> Vec<usize> {
    let mut seen = vec![false; n * n];
    for &start in &starts {
        seen[start] = true;
    }
    let mut stack = starts;
    let mut reached = Vec::new();
    while let Some(pixel) = stack.pop() {
        reached.push(pixel);
        let (column, row) = (pixel % n, pixel / n);
        let left = (column > 0).then(|| pixel - 1);
        let right = (column + 1 < n).then(|| pixel + 1);
        let up = (row > 0).then(|| pixel - n);
        let down = (row + 1 < n).then(|| pixel + n);
        for next in [left, right, up, down].into_iter().flatten() {
            if !seen[next] && passes(next) {
                seen[next] = true;
                stack.push(next);
            }
        }
    }
    reached
}

/// `mask` (`n`² pixels, row-major) closed by a square of `radius` pixels and with its holes
/// filled: where an organ's tumor may lie though the mask left it out.
#[must_use]
pub fn closed_area(mask: &[bool], n: usize, radius: usize) -> Vec<bool> {
    // A square's dilation is a row pass then a column pass; erosion is dilation of the
    // complement.
    let spread = |input: &[bool], value: bool| {
        let mut rows = input.to_vec();
        for row in 0..n {
            for column in 0..n {
                let lo = column.saturating_sub(radius);
                let hi = (column + radius).min(n - 1);
                if (lo..=hi).any(|c| input[row * n + c] == value) {
                    rows[row * n + column] = value;
                }
            }
        }
        let mut out = rows.clone();
        for row in 0..n {
            for column in 0..n {
                let lo = row.saturating_sub(radius);
                let hi = (row + radius).min(n - 1);
                if (lo..=hi).any(|r| rows[r * n + column] == value) {
                    out[row * n + column] = value;
                }
            }
        }
        out
    };
    let mut area = spread(&spread(mask, true), false);
    // Holes: pixels outside the area that no path outside it joins to the grid's border.
    let border: Vec<usize> = (0..n * n)
        .filter(|&p| {
            let (column, row) = (p % n, p / n);
            (column == 0 || row == 0 || column == n - 1 || row == n - 1) && !area[p]
        })
        .collect();
    let outside = flood(border, n, |p| !area[p]);
    area.fill(true);
    for p in outside {
        area[p] = false;
    }
    area
}

/// The compact part of `region` (pixels of an `n`² grid) that holds `seed`: its opening by a
/// 3 × 3 square (what remains of pixels whose whole 3 × 3 neighbourhood is in the region,
/// grown back by one pixel), the 4-connected part nearest `seed`. A region too thin to
/// survive the opening anywhere is a tumor under three pixels across or a strip along an
/// organ's edge (partial volume with the fat beside it): what of it lies in the seed's 3 × 3
/// square stays, so that a strip does not measure as a lesion several centimetres long.
#[must_use]
pub fn compact_core(region: &[usize], seed: usize, n: usize) -> Vec<usize> {
    let mut inside = vec![false; n * n];
    for &pixel in region {
        inside[pixel] = true;
    }
    let centres: Vec<usize> = region
        .iter()
        .copied()
        .filter(|&pixel| surrounded(pixel, n, &inside))
        .collect();
    if centres.is_empty() {
        return region
            .iter()
            .copied()
            .filter(|&pixel| square(seed, n).any(|at| at == pixel))
            .collect();
    }
    let mut opened = vec![false; n * n];
    for &centre in &centres {
        for at in square(centre, n) {
            opened[at] = true;
        }
    }
    // The part nearest the seed: flood from the opened pixel closest to it.
    let distance = |pixel: usize| {
        let (dc, dr) = (
            (pixel % n).abs_diff(seed % n),
            (pixel / n).abs_diff(seed / n),
        );
        dc * dc + dr * dr
    };
    let Some(start) = (0..n * n)
        .filter(|&p| opened[p])
        .min_by_key(|&p| distance(p))
    else {
        return region.to_vec();
    };
    let mut part = flood(vec![start], n, |at| opened[at]);
    part.sort_unstable();
    part
}

/// Lesion pixels of one positive answer, grown on the grid from its deciding cell.
///
/// The organ's HU is `reference` (the median of its interior across the scan, see
/// `organ_references` in the module above) where given, else the median of the mask on the
/// slab: a tumor that fills most of a kidney's cross-section is most of that slab's median
/// and would show no contrast against it.
///
/// The seed is the pixel within [`SEED_REACH`] pixels of the cell (with its 3 × 3 square in
/// the growth area) whose 5 × 5 mean differs most from the organ: the finder's cell often sits
/// beside a small tumor rather than on it, and a 5 × 5 mean favours a blob over the
/// partial-volume rim along the organ's edge. Where no such mean reaches 12 HU, the pixel of
/// the cell itself (away from the mask's edge where it can be) whose 3 × 3 mean differs most.
/// From there the seed climbs to the neighbour whose 3 × 3 mean differs most the same way
/// until none differs more (the tumor's middle, so that half its contrast is half the
/// tumor's). The region is then the seed's 4-connected neighbours within 12 pixels whose 3 × 3 mean
/// differs the same way by at least half as much (and 8 HU), and by less than 110 HU (fat
/// beside a 60 HU organ differs by 160).
///
/// The region may grow over the organ mask closed and with its holes filled
/// ([`closed_area`]): an organ network can leave a dark tumor out of the organ, and a region
/// kept to the mask would then be only the rim around the hole, a long thin strip that
/// measures nothing like the tumor. Means are taken over that area only: a mean that reached
/// outside it would read the fat beside the organ as tumor and grow a strip along its edge. A
/// seed with less than 12 HU of contrast (an isoattenuating tumor shows only by its rim)
/// gives the cell's organ pixels. Tumors are compact: what the region holds beyond its
/// [`compact_core`] (strips along an organ's edge or a vessel) goes. Returns the pixels and
/// the region's mean difference from the organ, HU.
#[must_use]
pub fn grow_lesion(
    grid: &ModelGrid,
    mask: &[bool],
    answer: &SlabAnswer,
    reference: Option<f32>,
) -> (Vec<usize>, f32) {
    let n = grid.spec.size;
    let plane = n * n;
    let hu = &grid.hu[answer.slab * plane..(answer.slab + 1) * plane];
    let median = if let Some(reference) = reference {
        reference
    } else {
        let mut organ: Vec<f32> = (0..plane).filter(|&p| mask[p]).map(|p| hu[p]).collect();
        if organ.is_empty() {
            return (Vec::new(), 0.0);
        }
        let middle = organ.len() / 2;
        *organ.select_nth_unstable_by(middle, f32::total_cmp).1
    };
    if !mask.iter().any(|&on| on) {
        return (Vec::new(), 0.0);
    }
    let area = closed_area(mask, n, CLOSING);
    // The mean of the pixels within `radius` of `pixel` that lie in the area, less the organ.
    let mean = |pixel: usize, radius: usize| {
        let (column, row) = (pixel % n, pixel / n);
        let (mut sum, mut count) = (0.0, 0.0);
        for r in row.saturating_sub(radius)..=(row + radius).min(n - 1) {
            for c in column.saturating_sub(radius)..=(column + radius).min(n - 1) {
                if area[r * n + c] {
                    sum += hu[r * n + c];
                    count += 1.0;
                }
            }
        }
        if count == 0.0 {
            0.0
        } else {
            sum / count - median
        }
    };
    let smooth = |pixel: usize| mean(pixel, 1);
    let (column0, row0) = answer.cell;
    let around: Vec<usize> = (row0.saturating_sub(SEED_REACH)..(row0 + STRIDE + SEED_REACH).min(n))
        .flat_map(|row| {
            (column0.saturating_sub(SEED_REACH)..(column0 + STRIDE + SEED_REACH).min(n))
                .map(move |column| row * n + column)
        })
        .filter(|&pixel| surrounded(pixel, n, &area))
        .collect();
    let blob = around
        .iter()
        .copied()
        .map(|pixel| (pixel, mean(pixel, 2).abs()))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .filter(|&(_, contrast)| contrast >= VISIBLE_CONTRAST_HU)
        .map(|(pixel, _)| pixel);
    let cell: Vec<usize> = (row0..(row0 + STRIDE).min(n))
        .flat_map(|row| (column0..(column0 + STRIDE).min(n)).map(move |column| row * n + column))
        .filter(|&pixel| area[pixel])
        .collect();
    let inner: Vec<usize> = cell
        .iter()
        .copied()
        .filter(|&pixel| surrounded(pixel, n, mask))
        .collect();
    let candidates = if inner.is_empty() { &cell } else { &inner };
    let Some(start) = blob.or_else(|| {
        candidates
            .iter()
            .copied()
            .max_by(|&a, &b| smooth(a).abs().total_cmp(&smooth(b).abs()))
    }) else {
        return (Vec::new(), 0.0);
    };
    // Uphill to the strongest 3 × 3 mean of the same sign: a seed on the tumor's edge would
    // halve its contrast and let the region take in the ring around it.
    let sign = smooth(start).signum();
    let mut seed = start;
    while let Some(next) = square(seed, n)
        .filter(|&at| area[at])
        .max_by(|&a, &b| (sign * smooth(a)).total_cmp(&(sign * smooth(b))))
    {
        if sign * smooth(next) <= sign * smooth(seed) {
            break;
        }
        seed = next;
    }
    let contrast = smooth(seed);
    let region = if contrast.abs() < VISIBLE_CONTRAST_HU {
        cell
    } else {
        let sign = contrast.signum();
        let floor = (contrast.abs() / 2.0).max(8.0);
        let region = flood(vec![seed], n, |next| {
            let near = (next % n).abs_diff(seed % n) <= 12 && (next / n).abs_diff(seed / n) <= 12;
            near && area[next] && (floor..CEILING).contains(&(sign * smooth(next)))
        });
        compact_core(&region, seed, n)
    };
    let difference =
        region.iter().map(|&p| hu[p] - median).sum::<f32>() / region.len().max(1) as f32;
    (region, difference)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};
    use candle_nn::VarMap;

    #[test]
    fn organ_cells_keep_the_organ_channel_inside_the_mask() {
        let device = Device::Cpu;
        // Two samples, 4 organ channels, 2 × 2 cells; values encode (sample, channel, cell).
        let values: Vec<f32> = (0..2 * 4 * 4).map(|v| v as f32).collect();
        let logits = Tensor::from_vec(values, (2, 4, 2, 2), &device).unwrap();
        // Sample 0: mask on the top-left cell only; sample 1: everywhere.
        let mut masks = vec![0f32; 2 * 8 * 8];
        masks[0] = 1.0;
        for value in &mut masks[64..] {
            *value = 1.0;
        }
        let masks = Tensor::from_vec(masks, (2, 1, 8, 8), &device).unwrap();
        let cells = organ_cells(&logits, &[2, 1], &masks)
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
        // Sample 0, channel 2: cells 8..12; only cell 0 is inside.
        assert_eq!(cells[0], vec![8.0, 9.0 - 30.0, 10.0 - 30.0, 11.0 - 30.0]);
        // Sample 1, channel 1: values 16 + 4..8.
        assert_eq!(cells[1], vec![20.0, 21.0, 22.0, 23.0]);
    }

    #[test]
    fn the_network_maps_a_crop_to_quarter_resolution_cells() {
        let device = Device::Cpu;
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
        let config = FinderConfig {
            crop: 16,
            widths: [4, 4, 8],
            ..FinderConfig::initial(5.0)
        };
        let net = FinderNet::new(FinderConfig::inputs(2), &config, &vb, NormMode::Train).unwrap();
        let x = Tensor::zeros((3, FinderConfig::inputs(2), 16, 16), DType::F32, &device).unwrap();
        assert_eq!(net.forward(&x, None, true).unwrap().dims(), &[3, 4, 4, 4]);
        assert_eq!(net.running_tensors("finder").unwrap().len(), 12);
    }

    #[test]
    fn a_detail_stem_reads_finer_pixels_onto_the_same_cells() {
        let device = Device::Cpu;
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
        let config = FinderConfig {
            crop: 16,
            widths: [4, 4, 8],
            detail: Some(FinderDetail {
                factor: 2,
                width: 4,
            }),
            ..FinderConfig::initial(5.0)
        };
        let net = FinderNet::new(FinderConfig::inputs(2), &config, &vb, NormMode::Train).unwrap();
        let x = Tensor::zeros((3, FinderConfig::inputs(2), 16, 16), DType::F32, &device).unwrap();
        // Three slabs in two windows, on pixels twice as fine.
        let detail = Tensor::zeros((3, 6, 32, 32), DType::F32, &device).unwrap();
        assert_eq!(
            net.forward(&x, Some(&detail), true).unwrap().dims(),
            &[3, 4, 4, 4]
        );
        assert_eq!(net.running_tensors("finder").unwrap().len(), 16);
        let missing = net.forward(&x, None, false).unwrap_err().to_string();
        assert!(missing.contains("detail"), "{missing}");
    }

    #[test]
    fn the_detail_input_is_the_crop_on_the_finer_pixels() {
        let n = 8;
        let mut grid = one_slab(n, vec![0.0; n * n]);
        let mut detail = one_slab(2 * n, (0..4 * n * n).map(|at| at as f32).collect());
        detail.spec.pixel_mm = 1.5;
        grid.detail = Some(Box::new(detail));
        let wide = [[5000.0, 10_000.0]];
        let (corner, crop) = ((3, 2), 4);
        let input = detail_input(&grid, 0, corner, crop, &wide).unwrap();
        // Three slabs (one here, repeated) of an 8 × 8 square from detail pixel (6, 4).
        assert_eq!(input.len(), 3 * 8 * 8);
        let at = |column: usize, row: usize| window((row * 2 * n + column) as f32, wide[0]);
        assert!((input[0] - at(6, 4)).abs() < 1e-6);
        assert!((input[7] - at(13, 4)).abs() < 1e-6);
        assert!((input[8 * 7 + 7] - at(13, 11)).abs() < 1e-6);
        assert_eq!(input[..64], input[128..]);
        assert!(detail_input(&one_slab(n, vec![0.0; n * n]), 0, corner, crop, &wide).is_none());
    }

    #[test]
    fn the_growth_area_fills_holes_and_narrow_gaps_but_not_the_outside() {
        let n = 20;
        // A ring 4..16 with a hole 8..12 and a notch two pixels wide at columns 9..11, rows
        // 4..6 of its top edge.
        let mut mask = vec![false; n * n];
        for row in 4..16 {
            for column in 4..16 {
                let hole = (8..12).contains(&row) && (8..12).contains(&column);
                let notch = (4..6).contains(&row) && (9..11).contains(&column);
                mask[row * n + column] = !hole && !notch;
            }
        }
        let area = closed_area(&mask, n, 2);
        for row in 0..n {
            for column in 0..n {
                let inside = (4..16).contains(&row) && (4..16).contains(&column);
                assert_eq!(area[row * n + column], inside, "pixel ({column}, {row})");
            }
        }
    }

    #[test]
    fn the_compact_core_drops_a_strip_along_the_blob() {
        let n = 16;
        // A 4 × 4 blob at columns 2–5, rows 2–5, and a strip one pixel high from column 6 to
        // 14 on row 3.
        let blob: Vec<usize> = (2..6)
            .flat_map(|row| (2..6).map(move |column| row * n + column))
            .collect();
        let mut region = blob.clone();
        region.extend((6..15).map(|column| 3 * n + column));
        assert_eq!(compact_core(&region, 3 * n + 12, n), blob);
        // A strip alone is too thin for the opening: what of it lies around the seed stays.
        let strip: Vec<usize> = (6..15).map(|column| 3 * n + column).collect();
        assert_eq!(
            compact_core(&strip, 3 * n + 9, n),
            vec![3 * n + 8, 3 * n + 9, 3 * n + 10]
        );
    }

    /// One slab of `n`² pixels at `hu` everywhere (a 3 mm grid), with `organ` HU in the mask.
    fn one_slab(n: usize, hu: Vec<f32>) -> ModelGrid {
        ModelGrid {
            spec: GridSpec {
                size: n,
                pixel_mm: 3.0,
                slab_mm: 5.0,
            },
            slabs: 1,
            hu,
            centre_slice: vec![0],
            ct_spacing_mm: [3.0, 3.0, 5.0],
            ct_dims: [n, n, 1],
            z_range_mm: (0.0, 0.0),
            above_mm: 0.0,
            detail: None,
        }
    }

    /// An organ mask over rows and columns `side` of an `n`² slab in fat (-95 HU), its pixels
    /// at `hu(row, column)`.
    fn organ_square(
        n: usize,
        side: std::ops::Range<usize>,
        hu: impl Fn(usize, usize) -> f32,
    ) -> (Vec<bool>, Vec<f32>) {
        let mut mask = vec![false; n * n];
        let mut values = vec![-95f32; n * n];
        for row in side.clone() {
            for column in side.clone() {
                mask[row * n + column] = true;
                values[row * n + column] = hu(row, column);
            }
        }
        (mask, values)
    }

    /// A positive answer for `organ` on slab 0 with its deciding cell at `cell`.
    fn positive(organ: usize, cell: (usize, usize)) -> SlabAnswer {
        SlabAnswer {
            organ,
            slab: 0,
            probability: 0.9,
            cell,
        }
    }

    #[test]
    fn a_lesion_grows_on_the_blob_beside_the_cell_not_on_the_organ_edge() {
        let n = 32;
        // An organ at 110 HU over rows 4–27 and columns 4–27 in fat; its top two rows are
        // darker (partial volume with the fat above: 70 HU), and a 5 × 5 tumor at 50 HU lies at
        // rows 11–15, columns 12–16.
        let (mask, mut hu) = organ_square(n, 4..28, |row, _| if row < 6 { 70.0 } else { 110.0 });
        let tumor: Vec<usize> = (11..16)
            .flat_map(|row| (12..17).map(move |column| row * n + column))
            .collect();
        for &pixel in &tumor {
            hu[pixel] = 50.0;
        }
        let grid = one_slab(n, hu);
        // The finder's cell (columns 12–15, rows 5–8) touches the dark edge and stops two
        // rows short of the tumor.
        let answer = positive(0, (12, 5));
        let (region, contrast) = grow_lesion(&grid, &mask, &answer, None);
        // The tumor but its four corners, whose 3 × 3 means are mostly organ (half the
        // tumor's contrast is the edge, as on a blurred image).
        let corners = [11 * n + 12, 11 * n + 16, 15 * n + 12, 15 * n + 16];
        let expected: Vec<usize> = tumor
            .iter()
            .copied()
            .filter(|p| !corners.contains(p))
            .collect();
        assert_eq!(region, expected);
        assert!((contrast + 60.0).abs() < 0.01, "{contrast}");
    }

    #[test]
    fn a_tumor_filling_the_slab_shows_against_the_organ_across_the_scan() {
        let n = 24;
        // A kidney section (rows and columns 4–19) almost wholly taken by a 120 HU tumor
        // (rows and columns 6–17), the cortex at 175 HU around it: the slab's median is the
        // tumor's.
        let (mask, hu) = organ_square(n, 4..20, |row, column| {
            if (6..18).contains(&row) && (6..18).contains(&column) {
                120.0
            } else {
                175.0
            }
        });
        let grid = one_slab(n, hu);
        let answer = positive(3, (8, 8));
        // Against the slab's median (120 HU) the tumor is the organ and the cortex around it
        // reads as a hyperattenuating lesion.
        let (region, contrast) = grow_lesion(&grid, &mask, &answer, None);
        assert!(contrast > 12.0, "{contrast}");
        assert!(!region.is_empty());
        // Against the kidney's HU across the scan the tumor is the region, hypoattenuating.
        let (region, contrast) = grow_lesion(&grid, &mask, &answer, Some(175.0));
        let in_tumor = |p: usize| (6..18).contains(&(p / n)) && (6..18).contains(&(p % n));
        assert!(region.iter().all(|&p| in_tumor(p)));
        // All of it but the four corners, whose 3 × 3 means are mostly cortex.
        assert_eq!(region.len(), 12 * 12 - 4);
        assert!((contrast + 55.0).abs() < 0.01, "{contrast}");
    }

    #[test]
    fn crops_centre_the_organ_and_stay_inside_the_grid() {
        let size = 16;
        let mut mask = vec![false; size * size];
        for row in 2..5 {
            for column in 10..15 {
                mask[row * size + column] = true;
            }
        }
        assert_eq!(mask_centre(&mask, size), Some((12, 3)));
        assert_eq!(mask_centre(&vec![false; size * size], size), None);
        assert_eq!(crop_corner((12, 3), 8, size), (8, 0));
        assert_eq!(crop_corner((3, 15), 8, size), (0, 8));
    }
}
