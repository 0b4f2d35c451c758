//! The vision tower: patch embedding, learned position embeddings resampled (bilinear, corners
//! aligned) to each grid, 2-D rotary attention within each frame, the patch merger and the
//! deepstack mergers whose outputs are added to the language model's first layers.

use candle_core::{D, DType, Module, Result, Tensor};
use candle_nn::{LayerNorm, Linear, VarBuilder, layer_norm, linear};

use super::config::VisionConfig;

fn act(name: &str, x: &Tensor) -> Result<Tensor> {
    match name {
        "gelu" | "gelu_new" => x.gelu_erf(),
        "silu" => x.silu(),
        // gelu_pytorch_tanh and gelu_fast: the tanh approximation.
        _ => x.gelu(),
    }
}

struct Block {
    norm1: LayerNorm,
    norm2: LayerNorm,
    qkv: Linear,
    proj: Linear,
    fc1: Linear,
    fc2: Linear,
    heads: usize,
    act: String,
}

pub(crate) fn rotate_half(x: &Tensor) -> Result<Tensor> {
    let half = x.dim(D::Minus1)? / 2;
    let x1 = x.narrow(D::Minus1, 0, half)?;
    let x2 = x.narrow(D::Minus1, half, half)?;
    Tensor::cat(&[&x2.neg()?, &x1], D::Minus1)
}

impl Block {
    fn new(cfg: &VisionConfig, vb: VarBuilder) -> Result<Self> {
        let h = cfg.hidden_size;
        Ok(Self {
            norm1: layer_norm(h, 1e-6, vb.pp("norm1"))?,
            norm2: layer_norm(h, 1e-6, vb.pp("norm2"))?,
            qkv: linear(h, 3 * h, vb.pp("attn.qkv"))?,
            proj: linear(h, h, vb.pp("attn.proj"))?,
            fc1: linear(h, cfg.intermediate_size, vb.pp("mlp.linear_fc1"))?,
            fc2: linear(cfg.intermediate_size, h, vb.pp("mlp.linear_fc2"))?,
            heads: cfg.num_heads,
            act: cfg.hidden_act.clone(),
        })
    }

    /// `x`: (patches, hidden); `cos`/`sin`: (patches, `head_dim`); attention within each
    /// `segments` run of patches (one frame each).
    fn forward(
        &self,
        x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        segments: &[usize],
    ) -> Result<Tensor> {
        let (n, hidden) = x.dims2()?;
        let head_dim = hidden / self.heads;
        let qkv = self
            .qkv
            .forward(&self.norm1.forward(x)?)?
            .reshape((n, 3, self.heads, head_dim))?;
        let rope = |t: Tensor| -> Result<Tensor> {
            let t = t.to_dtype(DType::F32)?;
            let c = cos.unsqueeze(1)?;
            let s = sin.unsqueeze(1)?;
            t.broadcast_mul(&c)?
                .add(&rotate_half(&t)?.broadcast_mul(&s)?)?
                .to_dtype(x.dtype())
        };
        let q = rope(qkv.narrow(1, 0, 1)?.squeeze(1)?)?;
        let k = rope(qkv.narrow(1, 1, 1)?.squeeze(1)?)?;
        let v = qkv.narrow(1, 2, 1)?.squeeze(1)?;
        let scale = 1.0 / (head_dim as f64).sqrt();
        let mut outs = Vec::with_capacity(segments.len());
        let mut start = 0;
        for &len in segments {
            // (heads, len, head_dim)
            let qs = q.narrow(0, start, len)?.transpose(0, 1)?.contiguous()?;
            let ks = k.narrow(0, start, len)?.transpose(0, 1)?.contiguous()?;
            let vs = v.narrow(0, start, len)?.transpose(0, 1)?.contiguous()?;
            let w = (qs.matmul(&ks.t()?)? * scale)?;
            let w =
                candle_nn::ops::softmax_last_dim(&w.to_dtype(DType::F32)?)?.to_dtype(x.dtype())?;
            outs.push(w.matmul(&vs)?.transpose(0, 1)?.reshape((len, hidden))?);
            start += len;
        }
        let attn = self.proj.forward(&Tensor::cat(&outs, 0)?)?;
        let x = (x + attn)?;
        let mlp = self.fc2.forward(&act(
            &self.act,
            &self.fc1.forward(&self.norm2.forward(&x)?)?,
        )?)?;
        x + mlp
    }
}

struct Merger {
    norm: LayerNorm,
    fc1: Linear,
    fc2: Linear,
    post_shuffle: bool,
    merged: usize,
}

impl Merger {
    fn new(cfg: &VisionConfig, post_shuffle: bool, vb: VarBuilder) -> Result<Self> {
        let merged = cfg.hidden_size * cfg.spatial_merge_size * cfg.spatial_merge_size;
        let norm_size = if post_shuffle {
            merged
        } else {
            cfg.hidden_size
        };
        Ok(Self {
            norm: layer_norm(norm_size, 1e-6, vb.pp("norm"))?,
            fc1: linear(merged, merged, vb.pp("linear_fc1"))?,
            fc2: linear(merged, cfg.out_hidden_size, vb.pp("linear_fc2"))?,
            post_shuffle,
            merged,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = if self.post_shuffle {
            self.norm.forward(&x.reshape(((), self.merged))?)?
        } else {
            self.norm.forward(x)?.reshape(((), self.merged))?
        };
        self.fc2.forward(&self.fc1.forward(&x)?.gelu_erf()?)
    }
}

/// The vision tower's output for a batch of grids: merged tokens for the language model and
/// one deepstack feature per deepstack level, both `(tokens, text hidden)`.
pub struct VisionOutput {
    pub embeds: Tensor,
    pub deepstack: Vec<Tensor>,
}

/// The vision tower.
pub struct VisionModel {
    patch_weight: Tensor,
    patch_bias: Tensor,
    pos_embed: Tensor,
    blocks: Vec<Block>,
    merger: Merger,
    deepstack: Vec<(usize, Merger)>,
    cfg: VisionConfig,
}

impl VisionModel {
    /// Load from the `model.visual` weights.
    pub fn new(cfg: &VisionConfig, vb: VarBuilder) -> Result<Self> {
        let patch_len = cfg.in_channels * cfg.temporal_patch_size * cfg.patch_size * cfg.patch_size;
        let w = vb.get(
            (
                cfg.hidden_size,
                cfg.in_channels,
                cfg.temporal_patch_size,
                cfg.patch_size,
                cfg.patch_size,
            ),
            "patch_embed.proj.weight",
        )?;
        // A stride-equals-kernel Conv3d over one patch is a matrix product.
        let patch_weight = w.reshape((cfg.hidden_size, patch_len))?.t()?.contiguous()?;
        let patch_bias = vb.get(cfg.hidden_size, "patch_embed.proj.bias")?;
        let pos_embed = vb.get(
            (cfg.num_position_embeddings, cfg.hidden_size),
            "pos_embed.weight",
        )?;
        let blocks = (0..cfg.depth)
            .map(|i| Block::new(cfg, vb.pp(format!("blocks.{i}"))))
            .collect::<Result<Vec<_>>>()?;
        let merger = Merger::new(cfg, false, vb.pp("merger"))?;
        let deepstack = cfg
            .deepstack_visual_indexes
            .iter()
            .enumerate()
            .map(|(i, &layer)| {
                Ok((
                    layer,
                    Merger::new(cfg, true, vb.pp(format!("deepstack_merger_list.{i}")))?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            patch_weight,
            patch_bias,
            pos_embed,
            blocks,
            merger,
            deepstack,
            cfg: cfg.clone(),
        })
    }

    /// Each patch's (row, column) in its frame, in the merge-block order of the patches.
    fn patch_rows_cols(&self, grids: &[[usize; 3]]) -> Vec<(usize, usize, usize, usize)> {
        let m = self.cfg.spatial_merge_size;
        let mut out = Vec::new();
        for &[t, h, w] in grids {
            for _ in 0..t {
                for bh in 0..h / m {
                    for bw in 0..w / m {
                        for ih in 0..m {
                            for iw in 0..m {
                                out.push((bh * m + ih, bw * m + iw, h, w));
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// The learned position grid resampled to each patch (bilinear, corners aligned, edges
    /// clamped), as a (patches x positions) weight matrix.
    fn position_weights(&self, rc: &[(usize, usize, usize, usize)]) -> Vec<f32> {
        let side = (self.cfg.num_position_embeddings as f64).sqrt() as usize;
        let mut weights = vec![0f32; rc.len() * side * side];
        let taps = |index: usize, size: usize| -> [(usize, f32); 2] {
            let src = (index as f32 * (side as f32 - 1.0)) / ((size as f32 - 1.0).max(1.0));
            let floor = src.floor();
            let mut out = [(0usize, 0f32); 2];
            for (o, slot) in out.iter_mut().enumerate() {
                let raw = floor + o as f32;
                let tap = raw.clamp(0.0, side as f32 - 1.0) as usize;
                let w = (1.0 - (src - raw).abs()).max(0.0);
                *slot = (tap, w);
            }
            out
        };
        for (p, &(row, col, h, w)) in rc.iter().enumerate() {
            for (ty, wy) in taps(row, h) {
                for (tx, wx) in taps(col, w) {
                    weights[p * side * side + ty * side + tx] += wy * wx;
                }
            }
        }
        weights
    }

    /// Rotary angles of each patch: `[row * f, col * f, row * f, col * f]` over the
    /// frequencies `f` of a quarter of the head dimension.
    fn rotary(&self, rc: &[(usize, usize, usize, usize)]) -> (Vec<f32>, Vec<f32>, usize) {
        let head_dim = self.cfg.hidden_size / self.cfg.num_heads;
        let spatial = head_dim / 2;
        let inv: Vec<f32> = (0..spatial)
            .step_by(2)
            .map(|i| 1.0 / (self.cfg.rope_theta as f32).powf(i as f32 / spatial as f32))
            .collect();
        let mut cos = Vec::with_capacity(rc.len() * head_dim);
        let mut sin = Vec::with_capacity(rc.len() * head_dim);
        for &(row, col, _, _) in rc {
            let half: Vec<f32> = inv
                .iter()
                .map(|f| row as f32 * f)
                .chain(inv.iter().map(|f| col as f32 * f))
                .collect();
            for _ in 0..2 {
                cos.extend(half.iter().map(|a| a.cos()));
                sin.extend(half.iter().map(|a| a.sin()));
            }
        }
        (cos, sin, head_dim)
    }

    /// Run the tower on the patches of one or more grids (rows in the processors' order).
    pub fn forward(&self, patches: &Tensor, grids: &[[usize; 3]]) -> Result<VisionOutput> {
        let device = patches.device();
        let dtype = self.patch_weight.dtype();
        let rc = self.patch_rows_cols(grids);
        let n = rc.len();
        if patches.dim(0)? != n {
            candle_core::bail!(
                "{} patches for grids {grids:?}, which need {n}",
                patches.dim(0)?
            );
        }
        let x = patches
            .to_dtype(dtype)?
            .matmul(&self.patch_weight)?
            .broadcast_add(&self.patch_bias)?;
        let side2 = self.cfg.num_position_embeddings;
        let pw = Tensor::from_vec(self.position_weights(&rc), (n, side2), device)?;
        let pos = pw.matmul(&self.pos_embed.to_dtype(DType::F32)?)?;
        let mut x = (x + pos.to_dtype(dtype)?)?;
        let (cos, sin, head_dim) = self.rotary(&rc);
        let cos = Tensor::from_vec(cos, (n, head_dim), device)?;
        let sin = Tensor::from_vec(sin, (n, head_dim), device)?;
        let segments: Vec<usize> = grids
            .iter()
            .flat_map(|&[t, h, w]| std::iter::repeat_n(h * w, t))
            .collect();
        let mut deepstack = Vec::new();
        for (i, block) in self.blocks.iter().enumerate() {
            x = block.forward(&x, &cos, &sin, &segments)?;
            if let Some((_, merger)) = self.deepstack.iter().find(|(layer, _)| *layer == i) {
                deepstack.push(merger.forward(&x)?);
            }
        }
        Ok(VisionOutput {
            embeds: self.merger.forward(&x)?,
            deepstack,
        })
    }
}
