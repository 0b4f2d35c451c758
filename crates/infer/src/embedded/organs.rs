//! The organ network of `keyslice-tiny` (version 3 on): liver, pancreas and kidney masks on
//! the finder's 3 mm grid, which the finder's crops and the lesion decoding stand on.
//!
//! Version 1's diagnoser, trained on everything at once on a 6 mm grid without
//! normalisation, never drew a pancreas or a right kidney above probability 0.5, so the
//! finder never looked there. This network does one job: a U-Net (four levels, two 3×3
//! convolutions with batch normalisation per level, skip connections) over the slab and its
//! neighbours in each window plus x, y and height planes (the diagnoser's input), trained
//! with binary cross-entropy plus soft Dice per organ. A `PyTorch` trial of the same shape
//! reached held-out Dice 0.97 (liver), 0.85 (pancreas), 0.95 and 0.96 (kidneys) in 1 000
//! steps; the model card has this implementation's figures.

use candle_core::{Device, Module, Result, Tensor};
use candle_nn::{Conv2d, Conv2dConfig, VarBuilder, conv2d};
use serde::{Deserialize, Serialize};

use super::batch_norm::{NormBlock, NormMode};
use super::grid::{GridSpec, ModelGrid};
use super::input::{body_box, diagnoser_input};

/// How [`OrganNet::masks`] reads along the scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// Every third slab first, then every slab within [`REACH`] of the first and last of
    /// those that show an organ (these organs lie in one stretch of the abdomen; a CT that
    /// reaches the chest or pelvis costs a third there). What training reads, so that a
    /// documented training command gives the same weights as before.
    Stretch,
    /// Every other slab; the slabs between take the mean of their neighbours' logits (the
    /// organs change little over 10 mm). Half the network's work on any scan: what
    /// `keyslice analyze` reads.
    Alternate,
}

/// Slabs read beyond the first and last probe slab that shows an organ (15 mm of 5 mm slabs:
/// more than the gap between probes).
const REACH: usize = 3;

/// The organ network's part of `config.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OrgansConfig {
    /// Its grid (slabs as thick as the diagnoser's, so that slabs correspond).
    pub grid: GridSpec,
    /// Channel widths at full, ½, ¼ and ⅛ resolution.
    pub widths: [usize; 4],
    /// Side of the square windows it is trained on (it reads whole slabs when analysing).
    pub train_side: usize,
}

impl OrgansConfig {
    /// The configuration a fresh organ network starts from: on a fresh finder's grid.
    #[must_use]
    pub fn initial(slab_mm: f64) -> Self {
        Self {
            grid: super::finder::FinderConfig::initial(slab_mm).grid,
            widths: [16, 32, 48, 64],
            train_side: 64,
        }
    }
}

/// The network.
pub struct OrganNet {
    down: [NormBlock; 3],
    bottom: NormBlock,
    up: [NormBlock; 3],
    head: Conv2d,
}

impl OrganNet {
    /// Builds (or loads, through `vb`) the network for `inputs` channels, its
    /// normalisations as `mode` says.
    pub fn new(inputs: usize, widths: [usize; 4], vb: &VarBuilder, mode: NormMode) -> Result<Self> {
        let [w1, w2, w3, w4] = widths;
        let block = |i, o, name: &str| NormBlock::new(i, o, &vb.pp(name), mode);
        Ok(Self {
            down: [
                block(inputs, w1, "down1")?,
                block(w1, w2, "down2")?,
                block(w2, w3, "down3")?,
            ],
            bottom: block(w3, w4, "bottom")?,
            up: [
                block(w2 + w1, w1, "up1")?,
                block(w3 + w2, w2, "up2")?,
                block(w4 + w3, w3, "up3")?,
            ],
            head: conv2d(w1, 4, 1, Conv2dConfig::default(), vb.pp("head"))?,
        })
    }

    /// `x`: `[batch, inputs, h, w]` (h and w divisible by 8) → organ logits `[batch, 4, h,
    /// w]`; `train` normalises with the batch's statistics.
    pub fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        let (_, _, height, width) = x.dims4()?;
        let e1 = self.down[0].forward(x, train)?;
        let e2 = self.down[1].forward(&e1.max_pool2d(2)?, train)?;
        let e3 = self.down[2].forward(&e2.max_pool2d(2)?, train)?;
        let bottom = self.bottom.forward(&e3.max_pool2d(2)?, train)?;
        let joined = |coarse: &Tensor, skip: &Tensor, divisor: usize| {
            let up = coarse.upsample_nearest2d(height / divisor, width / divisor)?;
            Tensor::cat(&[&up, skip], 1)
        };
        let d3 = self.up[2].forward(&joined(&bottom, &e3, 4)?, train)?;
        let d2 = self.up[1].forward(&joined(&d3, &e2, 2)?, train)?;
        let d1 = self.up[0].forward(&joined(&d2, &e1, 1)?, train)?;
        self.head.forward(&d1)
    }

    /// The running statistics of every normalisation as named tensors under `prefix`.
    pub fn running_tensors(&self, prefix: &str) -> Result<Vec<(String, Tensor)>> {
        let named = [
            ("down1", &self.down[0]),
            ("down2", &self.down[1]),
            ("down3", &self.down[2]),
            ("bottom", &self.bottom),
            ("up1", &self.up[0]),
            ("up2", &self.up[1]),
            ("up3", &self.up[2]),
        ];
        let mut out = Vec::new();
        for (name, block) in named {
            out.extend(block.running_tensors(&format!("{prefix}.{name}"))?);
        }
        Ok(out)
    }

    /// Organ masks (probability ≥ 0.5) of every slab of `grid`, `[slab * 4 + organ][pixel]`,
    /// read as `reading` says. The network reads only the in-plane box that holds the body
    /// (as the diagnoser does); outside it no pixel is an organ.
    pub fn masks(
        &self,
        grid: &ModelGrid,
        windows: &[[f32; 2]],
        device: &Device,
        reading: Reading,
    ) -> Result<Vec<Vec<bool>>> {
        let body = body_box(grid);
        let read = |slab| self.slab_logits(grid, slab, body, windows, device);
        // Logits (`[organ][pixel of the body box]`) of each slab; `None` where none was read
        // (no organ there).
        let mut logits = vec![None; grid.slabs];
        match reading {
            Reading::Stretch => {
                let mut shown = Vec::new();
                for slab in (0..grid.slabs).step_by(3) {
                    let found = read(slab)?;
                    if found
                        .iter()
                        .any(|channel| channel.iter().filter(|&&logit| logit >= 0.0).count() >= 4)
                    {
                        shown.push(slab);
                    }
                    logits[slab] = Some(found);
                }
                if let (Some(&first), Some(&last)) = (shown.first(), shown.last()) {
                    let stretch = first.saturating_sub(REACH)..=(last + REACH).min(grid.slabs - 1);
                    for slab in stretch.filter(|slab| slab % 3 != 0) {
                        logits[slab] = Some(read(slab)?);
                    }
                }
            }
            Reading::Alternate => {
                for slab in alternate_slabs(grid.slabs) {
                    logits[slab] = Some(read(slab)?);
                }
                fill_between(&mut logits);
            }
        }
        let n = grid.spec.size;
        let ([column0, row0], [width, height]) = body;
        let mut masks = Vec::with_capacity(grid.slabs * super::finder::ORGANS);
        for slab in logits {
            for organ in 0..super::finder::ORGANS {
                let mut whole = vec![false; n * n];
                if let Some(channels) = &slab {
                    for row in 0..height {
                        for column in 0..width {
                            // Logit ≥ 0 is probability ≥ 0.5.
                            whole[(row0 + row) * n + column0 + column] =
                                channels[organ][row * width + column] >= 0.0;
                        }
                    }
                }
                masks.push(whole);
            }
        }
        Ok(masks)
    }

    /// The four organ logits of one slab on the body box `body` (`[organ][pixel]`). One slab
    /// at a time: the convolutions' column buffers of a larger batch outgrow the caches (8
    /// slabs at a time took 60 % longer).
    fn slab_logits(
        &self,
        grid: &ModelGrid,
        slab: usize,
        ([column0, row0], [width, height]): ([usize; 2], [usize; 2]),
        windows: &[[f32; 2]],
        device: &Device,
    ) -> Result<Vec<Vec<f32>>> {
        let n = grid.spec.size;
        let plane = n * n;
        let channels = 3 * windows.len() + 3;
        let full = diagnoser_input(grid, slab, windows);
        let mut input = Vec::with_capacity(channels * width * height);
        for channel in 0..channels {
            for row in row0..row0 + height {
                let start = channel * plane + row * n + column0;
                input.extend_from_slice(&full[start..start + width]);
            }
        }
        let x = Tensor::from_vec(input, (1, channels, height, width), device)?;
        self.forward(&x, false)?
            .flatten_from(2)?
            .squeeze(0)?
            .to_vec2::<f32>()
    }
}

/// The slabs [`Reading::Alternate`] reads: 0, 2, 4, … and the last.
fn alternate_slabs(slabs: usize) -> Vec<usize> {
    (0..slabs)
        .filter(|&slab| slab % 2 == 0 || slab + 1 == slabs)
        .collect()
}

/// Gives every unread slab (`None`) whose two neighbours were read the mean of their logits.
fn fill_between(logits: &mut [Option<Vec<Vec<f32>>>]) {
    for slab in 1..logits.len().saturating_sub(1) {
        if logits[slab].is_some() {
            continue;
        }
        if let (Some(before), Some(after)) = (&logits[slab - 1], &logits[slab + 1]) {
            let mean = before
                .iter()
                .zip(after)
                .map(|(a, b)| a.iter().zip(b).map(|(a, b)| 0.5 * (a + b)).collect())
                .collect();
            logits[slab] = Some(mean);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every other slab and the last are read; every slab between two read ones gets their
    /// mean, channel by channel and pixel by pixel.
    #[test]
    fn alternate_reading_fills_the_slabs_between() {
        assert_eq!(alternate_slabs(1), vec![0]);
        assert_eq!(alternate_slabs(4), vec![0, 2, 3]);
        assert_eq!(alternate_slabs(5), vec![0, 2, 4]);
        let slab = |value: f32| Some(vec![vec![value, -value], vec![2.0 * value, 0.0]]);
        let mut logits = vec![None; 5];
        for read in alternate_slabs(5) {
            logits[read] = slab(read as f32 - 2.0);
        }
        fill_between(&mut logits);
        assert_eq!(logits[1], slab(-1.0));
        assert_eq!(logits[3], slab(1.0));
        assert_eq!(logits[2], slab(0.0));
        // With an even count the last slab is read, so none is left unfilled.
        let mut even = vec![None; 4];
        for read in alternate_slabs(4) {
            even[read] = slab(read as f32);
        }
        fill_between(&mut even);
        assert_eq!(even[1], slab(1.0));
        assert!(even.iter().all(Option::is_some));
    }
}
