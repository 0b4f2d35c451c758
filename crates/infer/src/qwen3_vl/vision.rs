//! The vision tower: patch embedding, learned position embeddings resampled (bilinear, corners
//! aligned) to each grid, 2-D rotary attention within each frame, the patch merger and the
//! deepstack mergers whose outputs are added to the language model's first layers.

use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::{LayerNorm, VarBuilder, layer_norm};
use rayon::prelude::*;

use super::linear::Lin;

use super::config::VisionConfig;

fn act(name: &str, x: &Tensor) -> Result<Tensor> {
    match name {
        "gelu" | "gelu_new" => x.gelu_erf(),
        "silu" => x.silu(),
        // gelu_pytorch_tanh and gelu_fast: the tanh approximation.
        _ => super::kernels::gelu_tanh(x),
    }
}

struct Block {
    norm1: LayerNorm,
    norm2: LayerNorm,
    qkv: Lin,
    proj: Lin,
    fc1: Lin,
    fc2: Lin,
    heads: usize,
    act: String,
}

impl Block {
    fn new(cfg: &VisionConfig, vb: VarBuilder) -> Result<Self> {
        let h = cfg.hidden_size;
        Ok(Self {
            norm1: layer_norm(h, 1e-6, vb.pp("norm1"))?,
            norm2: layer_norm(h, 1e-6, vb.pp("norm2"))?,
            qkv: Lin::new(h, 3 * h, true, vb.pp("attn.qkv"))?,
            proj: Lin::new(h, h, true, vb.pp("attn.proj"))?,
            fc1: Lin::new(h, cfg.intermediate_size, true, vb.pp("mlp.linear_fc1"))?,
            fc2: Lin::new(cfg.intermediate_size, h, true, vb.pp("mlp.linear_fc2"))?,
            heads: cfg.num_heads,
            act: cfg.hidden_act.clone(),
        })
    }

    /// `x`: (patches, hidden); `cos`/`sin`: (patches, `head_dim / 2`), the rotary angles of
    /// each half; attention within each `segments` run of patches (one frame each).
    fn forward(
        &self,
        x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        segments: &[usize],
    ) -> Result<Tensor> {
        let hidden = x.dim(1)?;
        let head_dim = hidden / self.heads;
        let qkv = self.qkv.forward(&self.norm1.forward(x)?)?;
        // Each (heads, patches, head_dim); the 1/sqrt(d) scale goes on q (not on q·k).
        let scale = 1.0 / (head_dim as f64).sqrt();
        let (q, k, v) = super::kernels::rotary_qkv(&qkv, self.heads, cos, sin, scale)?;
        // (patches, hidden); the softmax in f32, as the reference takes it.
        let attn = super::kernels::segment_attention(&q, &k, &v, segments)?;
        let attn = self.proj.forward(&attn)?;
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
    fc1: Lin,
    fc2: Lin,
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
            fc1: Lin::new(merged, merged, true, vb.pp("linear_fc1"))?,
            fc2: Lin::new(merged, cfg.out_hidden_size, true, vb.pp("linear_fc2"))?,
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
    /// The position table as plain values when it lives on the CPU in f32, for
    /// [`Self::positions`].
    pos_table: Option<Vec<f32>>,
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
        let patch_weight = super::linear::transposed(&w.reshape((cfg.hidden_size, patch_len))?)?;
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
        let pos_table = (matches!(pos_embed.device(), Device::Cpu)
            && pos_embed.dtype() == DType::F32)
            .then(|| pos_embed.flatten_all()?.to_vec1::<f32>())
            .transpose()?;
        Ok(Self {
            patch_weight,
            patch_bias,
            pos_embed,
            pos_table,
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
    /// clamped): four table rows and their weights per patch.
    fn position_taps(&self, rc: &[(usize, usize, usize, usize)]) -> (Vec<u32>, Vec<f32>) {
        let side = (self.cfg.num_position_embeddings as f64).sqrt() as usize;
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
        let mut index = Vec::with_capacity(rc.len() * 4);
        let mut weight = Vec::with_capacity(rc.len() * 4);
        for &(row, col, h, w) in rc {
            for (ty, wy) in taps(row, h) {
                for (tx, wx) in taps(col, w) {
                    index.push((ty * side + tx) as u32);
                    weight.push(wy * wx);
                }
            }
        }
        (index, weight)
    }

    /// The position embeddings resampled to the patches, `(patches, hidden)` in f32: each
    /// patch's four `index` rows of the table times their `weight`. On the CPU one threaded
    /// pass over the table (candle's gather, product and sum over the taps took 10 ms for
    /// 784 patches).
    fn positions(&self, index: Vec<u32>, weight: Vec<f32>, device: &Device) -> Result<Tensor> {
        let n = index.len() / 4;
        let hidden = self.cfg.hidden_size;
        if let (Some(table), Device::Cpu) = (&self.pos_table, device) {
            let mut out = vec![0f32; n * hidden];
            out.par_chunks_mut(hidden)
                .zip(index.par_chunks(4).zip(weight.par_chunks(4)))
                .for_each(|(row, (taps, weights))| {
                    for (&tap, &w) in taps.iter().zip(weights) {
                        // Taps are clamped inside the table's side (`position_taps`).
                        let src = &table[tap as usize * hidden..(tap as usize + 1) * hidden];
                        for (o, &value) in row.iter_mut().zip(src) {
                            *o += w * value;
                        }
                    }
                });
            return Tensor::from_vec(out, (n, hidden), device);
        }
        let index = Tensor::from_vec(index, 4 * n, device)?;
        let weight = Tensor::from_vec(weight, (n, 4, 1), device)?;
        self.pos_embed
            .to_dtype(DType::F32)?
            .index_select(&index, 0)?
            .reshape((n, 4, ()))?
            .broadcast_mul(&weight)?
            .sum(1)
    }

    /// Rotary angles of each patch, one half of the head (the other half repeats it):
    /// `[row * f, col * f]` over the frequencies `f` of a quarter of the head dimension.
    fn rotary(&self, rc: &[(usize, usize, usize, usize)]) -> (Vec<f32>, Vec<f32>, usize) {
        let head_dim = self.cfg.hidden_size / self.cfg.num_heads;
        let spatial = head_dim / 2;
        let inv: Vec<f32> = (0..spatial)
            .step_by(2)
            .map(|i| 1.0 / (self.cfg.rope_theta as f32).powf(i as f32 / spatial as f32))
            .collect();
        let mut cos = Vec::with_capacity(rc.len() * spatial);
        let mut sin = Vec::with_capacity(rc.len() * spatial);
        for &(row, col, _, _) in rc {
            for angle in inv
                .iter()
                .map(|f| row as f32 * f)
                .chain(inv.iter().map(|f| col as f32 * f))
            {
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
        (cos, sin, spatial)
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
        let (index, weight) = self.position_taps(&rc);
        let pos = self.positions(index, weight, device)?;
        let mut x = (x + pos.to_dtype(dtype)?)?;
        let (cos, sin, half) = self.rotary(&rc);
        let cos = Tensor::from_vec(cos, (n, half), device)?;
        let sin = Tensor::from_vec(sin, (n, half), device)?;
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
