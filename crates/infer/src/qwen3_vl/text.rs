//! The language model: Qwen3 decoder layers (q/k RMS norms, grouped-query attention) with
//! interleaved multimodal `RoPE`, deepstack visual features added after the first layers, and a
//! key/value cache that grows with the sequence (no fixed-size buffer).

use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::{Embedding, RmsNorm, VarBuilder, embedding, rms_norm};

use super::linear::Lin;

use super::config::TextConfig;

/// Rotary cosines and sines for a run of tokens: `(tokens, head_dim / 2)` (the second half of
/// the head repeats the first).
pub struct Rope {
    pub cos: Tensor,
    pub sin: Tensor,
}

/// Interleaved M-RoPE: frequency `i` of the half head follows the height axis when
/// `i % 3 == 1` (for the first `3 * section[1]`), the width axis when `i % 3 == 2` (for the
/// first `3 * section[2]`), and the temporal axis otherwise.
pub fn mrope(
    cfg: &TextConfig,
    positions: &[[i64; 3]],
    dtype: DType,
    device: &Device,
) -> Result<Rope> {
    let half = cfg.head_dim / 2;
    let inv: Vec<f32> = (0..cfg.head_dim)
        .step_by(2)
        .map(|i| 1.0 / (cfg.rope_theta as f32).powf(i as f32 / cfg.head_dim as f32))
        .collect();
    let [_, sh, sw] = cfg.mrope_section;
    let axis: Vec<usize> = (0..half)
        .map(|i| {
            if i % 3 == 1 && i < 3 * sh {
                1
            } else if i % 3 == 2 && i < 3 * sw {
                2
            } else {
                0
            }
        })
        .collect();
    let n = positions.len();
    let mut cos = Vec::with_capacity(n * half);
    let mut sin = Vec::with_capacity(n * half);
    for p in positions {
        for (i, f) in inv.iter().enumerate() {
            let angle = p[axis[i]] as f32 * f;
            cos.push(angle.cos());
            sin.push(angle.sin());
        }
    }
    Ok(Rope {
        cos: Tensor::from_vec(cos, (n, half), device)?.to_dtype(dtype)?,
        sin: Tensor::from_vec(sin, (n, half), device)?.to_dtype(dtype)?,
    })
}

/// Keys or values of one layer: a buffer with room to grow (doubling when full, so appending
/// a token copies nothing) and the number of positions filled.
struct Cache {
    buf: Tensor,
    len: usize,
}

impl Cache {
    fn append(slot: &mut Option<Self>, t: &Tensor) -> Result<Tensor> {
        let (b, h, seq, d) = t.dims4()?;
        let needed = slot.as_ref().map_or(0, |c| c.len) + seq;
        let grow = slot
            .as_ref()
            .is_none_or(|c| c.buf.dim(2).is_ok_and(|cap| cap < needed));
        if grow {
            let cap = (needed + 256).max(needed * 2);
            let buf = Tensor::zeros((b, h, cap, d), t.dtype(), t.device())?;
            if let Some(old) = slot.as_ref() {
                buf.slice_set(&old.buf.narrow(2, 0, old.len)?.contiguous()?, 2, 0)?;
            }
            let len = slot.as_ref().map_or(0, |c| c.len);
            *slot = Some(Self { buf, len });
        }
        let cache = slot.as_mut().expect("set above");
        cache.buf.slice_set(&t.contiguous()?, 2, cache.len)?;
        cache.len += seq;
        cache.buf.narrow(2, 0, cache.len)
    }
}

struct Attention {
    q: Lin,
    k: Lin,
    v: Lin,
    o: Lin,
    q_norm: RmsNorm,
    k_norm: RmsNorm,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    k_cache: Option<Cache>,
    v_cache: Option<Cache>,
}

impl Attention {
    fn new(cfg: &TextConfig, vb: VarBuilder) -> Result<Self> {
        let (h, d) = (cfg.hidden_size, cfg.head_dim);
        let b = cfg.attention_bias;
        Ok(Self {
            q: Lin::new(h, cfg.num_attention_heads * d, b, vb.pp("q_proj"))?,
            k: Lin::new(h, cfg.num_key_value_heads * d, b, vb.pp("k_proj"))?,
            v: Lin::new(h, cfg.num_key_value_heads * d, b, vb.pp("v_proj"))?,
            o: Lin::new(cfg.num_attention_heads * d, h, b, vb.pp("o_proj"))?,
            q_norm: rms_norm(d, cfg.rms_norm_eps, vb.pp("q_norm"))?,
            k_norm: rms_norm(d, cfg.rms_norm_eps, vb.pp("k_norm"))?,
            heads: cfg.num_attention_heads,
            kv_heads: cfg.num_key_value_heads,
            head_dim: d,
            k_cache: None,
            v_cache: None,
        })
    }

    fn cached(&self) -> usize {
        self.k_cache.as_ref().map_or(0, |c| c.len)
    }

    /// `x`: (1, seq, hidden); causal over the cached keys plus this run.
    fn forward(&mut self, x: &Tensor, rope: &Rope) -> Result<Tensor> {
        let (b, seq, _) = x.dims3()?;
        let shape = |t: Tensor, heads: usize| t.reshape((b, seq, heads, self.head_dim));
        let q = self
            .q_norm
            .forward(&shape(self.q.forward(x)?, self.heads)?)?;
        let k = self
            .k_norm
            .forward(&shape(self.k.forward(x)?, self.kv_heads)?)?;
        let v = shape(self.v.forward(x)?, self.kv_heads)?;
        // (b, heads, seq, d); the 1/sqrt(d) scale goes on q (not on q·k).
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        let q = q.transpose(1, 2)?.contiguous()?;
        let k = k.transpose(1, 2)?.contiguous()?;
        let v = v.transpose(1, 2)?;
        let q = (candle_nn::rotary_emb::rope(&q, &rope.cos, &rope.sin)? * scale)?;
        let k = candle_nn::rotary_emb::rope(&k, &rope.cos, &rope.sin)?;
        let past = self.cached();
        let k = Cache::append(&mut self.k_cache, &k)?;
        let v = Cache::append(&mut self.v_cache, &v)?;
        let total = past + seq;
        // Prefill on the CPU: a blocked kernel that skips the masked keys.
        if seq > 1
            && b == 1
            && let Some(out) = super::kernels::causal_attention_cpu(
                &q.squeeze(0)?,
                &k.squeeze(0)?,
                &v.squeeze(0)?,
                past,
            )
        {
            return self.o.forward(&out?.unsqueeze(0)?);
        }
        // Grouped-query attention without copying keys: the `rep` query heads that share a
        // key/value head are stacked along the sequence axis, (b, kv, rep * seq, d).
        let rep = self.heads / self.kv_heads;
        let q = q.reshape((b, self.kv_heads, rep * seq, self.head_dim))?;
        let mut w = q.matmul(&k.t()?)?;
        if seq > 1 {
            let mask: Vec<f32> = (0..rep * seq)
                .flat_map(|row| {
                    let i = row % seq;
                    (0..total).map(move |j| if j > past + i { f32::NEG_INFINITY } else { 0.0 })
                })
                .collect();
            let mask =
                Tensor::from_vec(mask, (rep * seq, total), x.device())?.to_dtype(w.dtype())?;
            w = w.broadcast_add(&mask)?;
        }
        let w = super::kernels::softmax_last_dim_in_place(w.to_dtype(DType::F32)?)?
            .to_dtype(x.dtype())?;
        let out = w
            .matmul(&v)?
            .reshape((b, self.heads, seq, self.head_dim))?
            .transpose(1, 2)?
            .reshape((b, seq, self.heads * self.head_dim))?;
        self.o.forward(&out)
    }
}

struct Layer {
    attn: Attention,
    input_norm: RmsNorm,
    post_norm: RmsNorm,
    gate: Lin,
    up: Lin,
    down: Lin,
}

impl Layer {
    fn new(cfg: &TextConfig, vb: VarBuilder) -> Result<Self> {
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        Ok(Self {
            attn: Attention::new(cfg, vb.pp("self_attn"))?,
            input_norm: rms_norm(h, cfg.rms_norm_eps, vb.pp("input_layernorm"))?,
            post_norm: rms_norm(h, cfg.rms_norm_eps, vb.pp("post_attention_layernorm"))?,
            gate: Lin::new(h, i, false, vb.pp("mlp.gate_proj"))?,
            up: Lin::new(h, i, false, vb.pp("mlp.up_proj"))?,
            down: Lin::new(i, h, false, vb.pp("mlp.down_proj"))?,
        })
    }

    fn forward(&mut self, x: &Tensor, rope: &Rope) -> Result<Tensor> {
        let x = (x + self.attn.forward(&self.input_norm.forward(x)?, rope)?)?;
        let h = self.post_norm.forward(&x)?;
        let mlp = self.down.forward(&super::kernels::silu_mul(
            &self.gate.forward(&h)?,
            &self.up.forward(&h)?,
        )?)?;
        x + mlp
    }
}

/// Visual features to add after the first layers: positions in the sequence and one
/// `(positions, hidden)` tensor per deepstack level.
pub struct Deepstack<'a> {
    pub positions: &'a [usize],
    pub features: &'a [Tensor],
}

/// The language model with its cache.
pub struct TextModel {
    embed: Embedding,
    layers: Vec<Layer>,
    norm: RmsNorm,
    lm_head: Lin,
    cfg: TextConfig,
}

impl TextModel {
    /// Load from `model.language_model` (and `lm_head`, or the tied embeddings).
    pub fn new(cfg: &TextConfig, tied: bool, vb: VarBuilder, head: VarBuilder) -> Result<Self> {
        let embed = embedding(cfg.vocab_size, cfg.hidden_size, vb.pp("embed_tokens"))?;
        let layers = (0..cfg.num_hidden_layers)
            .map(|i| Layer::new(cfg, vb.pp(format!("layers.{i}"))))
            .collect::<Result<Vec<_>>>()?;
        let norm = rms_norm(cfg.hidden_size, cfg.rms_norm_eps, vb.pp("norm"))?;
        let lm_head = if tied || !head.contains_tensor("weight") {
            Lin::from_weight(embed.embeddings(), None)?
        } else {
            Lin::new(cfg.hidden_size, cfg.vocab_size, false, head)?
        };
        Ok(Self {
            embed,
            layers,
            norm,
            lm_head,
            cfg: cfg.clone(),
        })
    }

    /// Token embeddings, `(1, seq, hidden)`.
    pub fn embed(&self, ids: &[u32], device: &Device) -> Result<Tensor> {
        let ids = Tensor::new(ids, device)?.unsqueeze(0)?;
        self.embed.forward(&ids)
    }

    /// Forget the cache (a new prompt).
    pub fn clear_cache(&mut self) {
        for layer in &mut self.layers {
            layer.attn.k_cache = None;
            layer.attn.v_cache = None;
        }
    }

    /// Tokens already in the cache.
    #[must_use]
    pub fn cached(&self) -> usize {
        self.layers.first().map_or(0, |l| l.attn.cached())
    }

    /// Run `embeds` (1, seq, hidden) at `positions` (one `[t, h, w]` per token) after the
    /// cache; returns the logits of every position, `(seq, vocab)` in f32, or with
    /// [`Logits::Last`] of the last one only, `(1, vocab)`.
    pub fn forward(
        &mut self,
        embeds: &Tensor,
        positions: &[[i64; 3]],
        deepstack: Option<Deepstack>,
        which: Logits,
    ) -> Result<Tensor> {
        let rope = mrope(&self.cfg, positions, embeds.dtype(), embeds.device())?;
        let mut x = embeds.clone();
        for (i, layer) in self.layers.iter_mut().enumerate() {
            x = layer.forward(&x, &rope)?;
            if let Some(ds) = &deepstack
                && let Some(feat) = ds.features.get(i)
            {
                x = add_at(&x, ds.positions, feat)?;
            }
        }
        let x = match which {
            Logits::All => x,
            Logits::Last => x.narrow(1, x.dim(1)? - 1, 1)?,
        };
        let x = self.norm.forward(&x)?;
        self.lm_head.forward(&x)?.squeeze(0)?.to_dtype(DType::F32)
    }
}

/// Which positions' logits a forward pass returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// Every position (the numeric tests compare them all).
    All,
    /// The last position only (generation needs no more).
    Last,
}

/// `x[0, positions[i]] += feat[i]`.
fn add_at(x: &Tensor, positions: &[usize], feat: &Tensor) -> Result<Tensor> {
    let (_, seq, hidden) = x.dims3()?;
    let mut index = vec![0u32; seq];
    for (i, &p) in positions.iter().enumerate() {
        index[p] = i as u32 + 1;
    }
    let zeros = Tensor::zeros((1, hidden), x.dtype(), x.device())?;
    let table = Tensor::cat(&[&zeros, &feat.to_dtype(x.dtype())?], 0)?;
    let index = Tensor::from_vec(index, seq, x.device())?;
    x + table.index_select(&index, 0)?.unsqueeze(0)?
}

/// Put `rows` (n, hidden) in place of the tokens at `positions` of `embeds` (1, seq, hidden).
pub fn scatter_rows(embeds: &Tensor, positions: &[usize], rows: &Tensor) -> Result<Tensor> {
    let seq = embeds.dim(1)?;
    let mut index: Vec<u32> = (0..seq as u32).collect();
    for (i, &p) in positions.iter().enumerate() {
        index[p] = (seq + i) as u32;
    }
    let table = Tensor::cat(&[&embeds.squeeze(0)?, &rows.to_dtype(embeds.dtype())?], 0)?;
    let index = Tensor::from_vec(index, seq, embeds.device())?;
    table.index_select(&index, 0)?.unsqueeze(0)
}
