//! The network of `keyslice-tiny`: a small 2D encoder–decoder (U-Net shaped) applied per
//! axial slab, with neighbouring slabs as input channels (2.5D: candle has no conv3d), and a
//! dense head per pixel.
//!
//! Head channels ([`OUTPUTS`]): 4 organ masks (liver, pancreas, left and right kidney), 4
//! lesion masks (a lesion of that organ), 3 attenuation classes (hypo, iso, hyper) and 13
//! location classes (liver segments II–VIII, pancreas head/body/tail, kidney upper/mid/lower
//! pole), the last two meaningful on lesion pixels. Weight names follow the layer tree
//! (`enc1.conv_a.weight`, …) as candle's `VarBuilder` lays them out.

use super::conv::conv3x3;
use candle_core::{Module, Result, Tensor};
use candle_nn::{Conv2d, Conv2dConfig, GroupNorm, VarBuilder, conv2d, group_norm};

/// Organ mask channels.
pub const ORGAN: std::ops::Range<usize> = 0..4;
/// Lesion mask channels (same organ order).
pub const LESION: std::ops::Range<usize> = 4..8;
/// Attenuation class channels.
pub const ATTENUATION: std::ops::Range<usize> = 8..11;
/// Location class channels.
pub const LOCATION: std::ops::Range<usize> = 11..24;
/// All head channels.
pub const OUTPUTS: usize = 24;

/// Two 3×3 convolutions ([`conv3x3`]: the same result as candle's, faster to train), each
/// followed by group normalisation (when `groups` > 0) and ReLU.
struct Block {
    conv_a: Conv2d,
    norm_a: Option<GroupNorm>,
    conv_b: Conv2d,
    norm_b: Option<GroupNorm>,
}

impl Block {
    fn new(inputs: usize, outputs: usize, groups: usize, vb: &VarBuilder) -> Result<Self> {
        let config = Conv2dConfig {
            padding: 1,
            ..Conv2dConfig::default()
        };
        let norm = |name: &str| -> Result<Option<GroupNorm>> {
            if groups == 0 {
                Ok(None)
            } else {
                group_norm(groups.min(outputs), outputs, 1e-5, vb.pp(name)).map(Some)
            }
        };
        Ok(Self {
            conv_a: conv2d(inputs, outputs, 3, config, vb.pp("conv_a"))?,
            norm_a: norm("norm_a")?,
            conv_b: conv2d(outputs, outputs, 3, config, vb.pp("conv_b"))?,
            norm_b: norm("norm_b")?,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let normed = |x: Tensor, norm: &Option<GroupNorm>| match norm {
            Some(norm) => norm.forward(&x),
            None => Ok(x),
        };
        let conv = |conv: &Conv2d, x: &Tensor| conv3x3(x, conv.weight(), conv.bias());
        let a = normed(conv(&self.conv_a, x)?, &self.norm_a)?.relu()?;
        normed(conv(&self.conv_b, &a)?, &self.norm_b)?.relu()
    }
}

/// The encoder–decoder.
pub struct SliceNet {
    enc1: Block,
    enc2: Block,
    enc3: Block,
    bottom: Block,
    dec3: Block,
    dec2: Block,
    dec1: Block,
    head: Conv2d,
}

impl SliceNet {
    /// Builds (or loads, through `vb`) a network with `inputs` channels and the given widths
    /// at full, ½, ¼ and ⅛ resolution; `groups` > 0 adds group normalisation after every
    /// convolution but the head.
    pub fn new(inputs: usize, widths: [usize; 4], groups: usize, vb: &VarBuilder) -> Result<Self> {
        let [w1, w2, w3, w4] = widths;
        let g = groups;
        Ok(Self {
            enc1: Block::new(inputs, w1, g, &vb.pp("enc1"))?,
            enc2: Block::new(w1, w2, g, &vb.pp("enc2"))?,
            enc3: Block::new(w2, w3, g, &vb.pp("enc3"))?,
            bottom: Block::new(w3, w4, g, &vb.pp("bottom"))?,
            dec3: Block::new(w4 + w3, w3, g, &vb.pp("dec3"))?,
            dec2: Block::new(w3 + w2, w2, g, &vb.pp("dec2"))?,
            dec1: Block::new(w2 + w1, w1, g, &vb.pp("dec1"))?,
            head: conv2d(w1, OUTPUTS, 1, Conv2dConfig::default(), vb.pp("head"))?,
        })
    }

    /// `x`: `[batch, inputs, size, size]` (size divisible by 8) → logits
    /// `[batch, OUTPUTS, size, size]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (_, _, height, width) = x.dims4()?;
        let e1 = self.enc1.forward(x)?;
        let e2 = self.enc2.forward(&e1.max_pool2d(2)?)?;
        let e3 = self.enc3.forward(&e2.max_pool2d(2)?)?;
        let bottom = self.bottom.forward(&e3.max_pool2d(2)?)?;
        let up3 = bottom.upsample_nearest2d(height / 4, width / 4)?;
        let d3 = self.dec3.forward(&Tensor::cat(&[&up3, &e3], 1)?)?;
        let up2 = d3.upsample_nearest2d(height / 2, width / 2)?;
        let d2 = self.dec2.forward(&Tensor::cat(&[&up2, &e2], 1)?)?;
        let up1 = d2.upsample_nearest2d(height, width)?;
        let d1 = self.dec1.forward(&Tensor::cat(&[&up1, &e1], 1)?)?;
        self.head.forward(&d1)
    }
}

/// `[batch, OUTPUTS, h, w]` logits → `[batch][channel][pixel]` probabilities.
pub(crate) fn probabilities_of(logits: &Tensor) -> candle_core::Result<Vec<Vec<Vec<f32>>>> {
    let (batch, _, height, width) = logits.dims4()?;
    let masks = candle_nn::ops::sigmoid(&logits.narrow(1, 0, ATTENUATION.start)?)?;
    let attenuation =
        candle_nn::ops::softmax(&logits.narrow(1, ATTENUATION.start, ATTENUATION.len())?, 1)?;
    let location = candle_nn::ops::softmax(&logits.narrow(1, LOCATION.start, LOCATION.len())?, 1)?;
    let all = Tensor::cat(&[&masks, &attenuation, &location], 1)?.reshape((
        batch,
        OUTPUTS,
        height * width,
    ))?;
    all.to_vec3::<f32>()
}
