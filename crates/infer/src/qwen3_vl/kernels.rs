//! CPU kernels for the steps of Qwen3-VL that cost most after the matrix products:
//!
//! - the vision MLP's tanh-approximated GELU: candle calls the library `tanh` once per value;
//! - the language model's `silu(gate) * up`, one pass instead of candle's single-threaded
//!   `SiLU` and a product;
//! - attention (scores, softmax, weighted sum) for the vision tower's frames and the language
//!   model's causal prefill: one task per head and block of query rows, the block's scores
//!   in cache and taken through the softmax in place, the products by the `gemm` crate on
//!   each thread, instead of candle's products around a whole `(heads, patches, patches)`
//!   score tensor (20 MB for a 448² image). Causal blocks skip the keys past their last row;
//! - the softmax in place, where decoding still uses candle's products.
//!
//! The element-wise loops are compiled for the CPU found at run time (`pulp` dispatch:
//! AVX-512, AVX2 or SSE; the loop body must be inlined into the dispatch, which a closure is
//! not, so each kernel is a `WithSimd` type) with a polynomial `exp` (Cephes `expf`, relative
//! error about 1e-7), threaded over chunks. Other devices and dtypes use candle's own ops.

use candle_core::{
    CpuStorage, CustomOp1, CustomOp2, CustomOp3, DType, Device, InplaceOp1, Layout, Result, Shape,
    Tensor,
};
use rayon::prelude::*;

/// Values per task of the element-wise kernels (256 KB of f32).
const CHUNK: usize = 65_536;

/// `exp(x)` without a library call: `2^n * p(r)` with `x = n ln 2 + r`; exactly 0 below
/// `x = -60` (`e^-60` ≈ 1e-26 is nothing next to the 1 a softmax's largest term contributes,
/// and a tiny result would become a subnormal number once scaled, which the CPU handles a
/// hundred times slower, as a causal mask's `-inf` scores would make it).
#[inline(always)]
fn fast_exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    let x = x.clamp(-87.3, 88.3);
    let n = (x * LOG2E + 0.5).floor();
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let z = r * r;
    let p = (((((1.987_569_1e-4 * r + 1.398_2e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5)
        * z
        + r
        + 1.0;
    // 2^n from n's bits without a float-to-integer conversion (Rust's saturating `as i32`
    // keeps the loop scalar): n + 127 is an integer in [1, 254], and adding 1.5 * 2^23 puts
    // it in the low bits of the mantissa, which the shift moves into the exponent.
    let bits = (n + 12_583_039.0).to_bits() << 23;
    let value = p * f32::from_bits(bits);
    if x < -60.0 { 0.0 } else { value }
}

/// GELU (tanh form) of `input` into `out`, compiled for this CPU's SIMD by pulp's dispatch.
struct GeluChunk<'a> {
    input: &'a [f32],
    out: &'a mut [f32],
}

impl pulp::WithSimd for GeluChunk<'_> {
    type Output = ();

    // pulp compiles the body for the detected CPU only when it is inlined into its dispatch.
    #[expect(clippy::inline_always, reason = "the inner loop of a kernel")]
    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        // 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3).
        let k = (2.0f32 / std::f32::consts::PI).sqrt();
        for (o, &x) in self.out.iter_mut().zip(self.input) {
            let u = k * (x + 0.044_715 * x * x * x);
            *o = x / (1.0 + fast_exp(-2.0 * u));
        }
    }
}

/// `silu(gate) * up` into `out`, compiled for this CPU's SIMD.
struct SiluMulChunk<'a> {
    gate: &'a [f32],
    up: &'a [f32],
    out: &'a mut [f32],
}

impl pulp::WithSimd for SiluMulChunk<'_> {
    type Output = ();

    #[expect(clippy::inline_always, reason = "the inner loop of a kernel")]
    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        for ((o, &g), &u) in self.out.iter_mut().zip(self.gate).zip(self.up) {
            *o = g / (1.0 + fast_exp(-g)) * u;
        }
    }
}

struct SiluMul;

impl CustomOp2 for SiluMul {
    fn name(&self) -> &'static str {
        "keyslice-silu-mul"
    }

    fn cpu_fwd(
        &self,
        gate: &CpuStorage,
        gate_layout: &Layout,
        up: &CpuStorage,
        up_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (Some((g0, g1)), Some((u0, u1))) = (
            gate_layout.contiguous_offsets(),
            up_layout.contiguous_offsets(),
        ) else {
            candle_core::bail!("silu-mul inputs must be contiguous");
        };
        if gate_layout.shape() != up_layout.shape() {
            candle_core::bail!(
                "silu-mul: gate {:?} and up {:?} differ",
                gate_layout.dims(),
                up_layout.dims()
            );
        }
        let gate = &gate.as_slice::<f32>()?[g0..g1];
        let up = &up.as_slice::<f32>()?[u0..u1];
        let mut out = vec![0f32; gate.len()];
        out.par_chunks_mut(CHUNK)
            .zip(gate.par_chunks(CHUNK).zip(up.par_chunks(CHUNK)))
            .for_each(|(out, (gate, up))| {
                pulp::Arch::new().dispatch(SiluMulChunk { gate, up, out });
            });
        Ok((CpuStorage::F32(out), gate_layout.shape().clone()))
    }
}

/// `silu(gate) * up`, the language model's gated MLP: one threaded pass on the CPU in f32
/// (candle's `SiLU` is a library `exp` per value on one thread);
/// candle's ops elsewhere.
pub fn silu_mul(gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    if matches!(gate.device(), Device::Cpu)
        && gate.dtype() == DType::F32
        && up.dtype() == DType::F32
    {
        gate.contiguous()?
            .apply_op2_no_bwd(&up.contiguous()?, &SiluMul)
    } else {
        gate.silu()? * up
    }
}

/// Softmax of each `len`-long row of `rows`, in place, compiled for this CPU's SIMD.
struct SoftmaxRows<'a> {
    rows: &'a mut [f32],
    len: usize,
}

/// Values per vector of partial maxima and sums (one AVX-512 register of f32; two AVX2 ones).
const LANES: usize = 16;

impl pulp::WithSimd for SoftmaxRows<'_> {
    type Output = ();

    #[expect(clippy::inline_always, reason = "the inner loop of a kernel")]
    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        for row in self.rows.chunks_exact_mut(self.len) {
            // Maxima and sums in LANES partial lanes, so that the loops vectorise.
            let mut lanes = [f32::NEG_INFINITY; LANES];
            let mut chunks = row.chunks_exact(LANES);
            for chunk in &mut chunks {
                for (m, &value) in lanes.iter_mut().zip(chunk) {
                    *m = m.max(value);
                }
            }
            let max = chunks
                .remainder()
                .iter()
                .chain(&lanes)
                .copied()
                .fold(f32::NEG_INFINITY, f32::max);
            for value in row.iter_mut() {
                *value = fast_exp(*value - max);
            }
            let mut sums = [0f32; LANES];
            let mut chunks = row.chunks_exact(LANES);
            for chunk in &mut chunks {
                for (sum, &value) in sums.iter_mut().zip(chunk) {
                    *sum += value;
                }
            }
            let inverse = 1.0 / sums.iter().chain(chunks.remainder()).sum::<f32>();
            for value in row.iter_mut() {
                *value *= inverse;
            }
        }
    }
}

struct InplaceSoftmax;

impl InplaceOp1 for InplaceSoftmax {
    fn name(&self) -> &'static str {
        "keyslice-softmax-in-place"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> Result<()> {
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("softmax input must be contiguous");
        };
        let len = layout.dims().last().copied().unwrap_or(1).max(1);
        let CpuStorage::F32(data) = storage else {
            candle_core::bail!("softmax in place: f32 only");
        };
        // Chunks of whole rows, about 64 K values each.
        let rows_per_chunk = (CHUNK / len).max(1);
        data[start..end]
            .par_chunks_mut(rows_per_chunk * len)
            .for_each(|rows| pulp::Arch::new().dispatch(SoftmaxRows { rows, len }));
        Ok(())
    }
}

/// Softmax over the last dimension. On the CPU in f32 it overwrites `x` (which must be a
/// tensor nothing else reads afterwards, such as a fresh product) and returns it; elsewhere
/// it is candle's `softmax_last_dim`.
pub fn softmax_last_dim_in_place(x: Tensor) -> Result<Tensor> {
    if matches!(x.device(), Device::Cpu) && x.dtype() == DType::F32 && x.is_contiguous() {
        x.inplace_op1(&InplaceSoftmax)?;
        Ok(x)
    } else {
        candle_nn::ops::softmax_last_dim(&x)
    }
}

struct GeluTanh;

impl CustomOp1 for GeluTanh {
    fn name(&self) -> &'static str {
        "keyslice-gelu-tanh"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("gelu input must be contiguous");
        };
        let input = &storage.as_slice::<f32>()?[start..end];
        let mut out = vec![0f32; input.len()];
        out.par_chunks_mut(CHUNK)
            .zip(input.par_chunks(CHUNK))
            .for_each(|(out, input)| pulp::Arch::new().dispatch(GeluChunk { input, out }));
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }
}

/// GELU with the tanh approximation (`gelu_pytorch_tanh`).
pub fn gelu_tanh(x: &Tensor) -> Result<Tensor> {
    if matches!(x.device(), Device::Cpu) && x.dtype() == DType::F32 {
        x.contiguous()?.apply_op1_no_bwd(&GeluTanh)
    } else {
        x.gelu()
    }
}

/// Scores per block of query rows of one head (1 MB of f32, in the L3 cache). Smaller blocks
/// that fit L2 are slower: each product packs the head's keys or values again for fewer
/// rows (`docs/performance.md` has the measurements).
const SCORE_BLOCK: usize = 1 << 18;

/// Query rows per block of causal attention: a block computes the scores of every key up
/// to its last row's, so smaller blocks skip more of the masked ones.
const CAUSAL_ROWS: usize = 64;

/// Multi-head attention, `q` already scaled, with any strides: `q` is `(heads, tokens,
/// head_dim)`, `k` and `v` `(kv_heads, keys, head_dim)` (query head `h` reads key/value head
/// `h / (heads / kv_heads)`). The output is `(tokens, heads * head_dim)`, heads side by side
/// as the output projection reads them.
struct BlockedAttention<'a> {
    mask: Mask<'a>,
}

/// Which keys each query sees.
#[derive(Clone, Copy)]
enum Mask<'a> {
    /// The keys of its own run of tokens (one frame each); the keys are the queries' tokens.
    Segments(&'a [usize]),
    /// Causal after `past` cached keys: query `i` sees keys `0..=past + i`.
    Causal { past: usize },
}

/// A rank-3 operand `(head, token, d)`: its storage from the layout's start, and strides.
struct Operand<'a> {
    data: &'a [f32],
    stride: [usize; 3],
}

impl<'a> Operand<'a> {
    fn new(storage: &'a CpuStorage, layout: &Layout) -> Result<Self> {
        let data = storage.as_slice::<f32>()?;
        let stride = layout.stride();
        if data.len() < layout.start_offset() {
            candle_core::bail!("attention operand starts beyond its storage");
        }
        Ok(Self {
            data: &data[layout.start_offset()..],
            stride: [stride[0], stride[1], stride[2]],
        })
    }

    /// Head `h` from token `t` on, with the (token, d) strides of a matrix.
    fn matrix(&self, h: usize, t: usize) -> (&'a [f32], usize, usize) {
        let offset = (h * self.stride[0] + t * self.stride[1]).min(self.data.len());
        (&self.data[offset..], self.stride[1], self.stride[2])
    }
}

/// A matrix in a slice: its first element, and its row and column strides.
type Strided<'a> = (&'a [f32], usize, usize);

/// `dst = lhs · rhs` for an `m x k` and a `k x n` matrix into an `m x n` one, each at the start
/// of its slice with its own strides, through the `gemm` crate on this thread (its kernels
/// for the CPU found at run time). Panics when a matrix does not fit in its slice.
#[expect(
    unsafe_code,
    reason = "the gemm crate's product, as the module text explains"
)]
fn strided_product(
    (m, n, k): (usize, usize, usize),
    dst: (&mut [f32], usize, usize),
    lhs: Strided<'_>,
    rhs: Strided<'_>,
) {
    let fits = |len: usize, rows: usize, cols: usize, rs: usize, cs: usize| {
        rows == 0 || cols == 0 || (rows - 1) * rs + (cols - 1) * cs < len
    };
    let (dst, dst_rs, dst_cs) = dst;
    assert!(
        fits(dst.len(), m, n, dst_rs, dst_cs)
            && fits(lhs.0.len(), m, k, lhs.1, lhs.2)
            && fits(rhs.0.len(), k, n, rhs.1, rhs.2),
        "strided product out of its slices"
    );
    if m == 0 || n == 0 {
        return;
    }
    // SAFETY: every element the product reads or writes, `(i, j)` at `i * rs + j * cs` of
    // its slice, is inside that slice (asserted above); `dst` is borrowed mutably, so it
    // aliases neither operand. With `read_dst` false the destination is only written.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            dst_cs as isize,
            dst_rs as isize,
            false,
            lhs.0.as_ptr(),
            lhs.2 as isize,
            lhs.1 as isize,
            rhs.0.as_ptr(),
            rhs.2 as isize,
            rhs.1 as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

impl CustomOp3 for BlockedAttention<'_> {
    fn name(&self) -> &'static str {
        "keyslice-blocked-attention"
    }

    fn cpu_fwd(
        &self,
        qs: &CpuStorage,
        ql: &Layout,
        ks: &CpuStorage,
        kl: &Layout,
        vs: &CpuStorage,
        vl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (heads, tokens, dim) = ql.shape().dims3()?;
        let (kv_heads, keys, kv_dim) = kl.shape().dims3()?;
        if vl.dims() != kl.dims() || kv_dim != dim || kv_heads == 0 || heads % kv_heads != 0 {
            candle_core::bail!(
                "attention: q {:?}, k {:?}, v {:?} do not fit",
                ql.dims(),
                kl.dims(),
                vl.dims()
            );
        }
        let group = heads / kv_heads;
        // Runs of query tokens, each with its first key, its number of keys and the past keys
        // every query of the run sees (`None`: all of its keys, no mask).
        let runs: Vec<(usize, usize, usize, Option<usize>)> = match self.mask {
            Mask::Segments(segments) => {
                if segments.iter().sum::<usize>() != tokens || keys != tokens {
                    candle_core::bail!(
                        "attention: segments {segments:?} for {tokens} tokens and {keys} keys"
                    );
                }
                let mut start = 0;
                segments
                    .iter()
                    .map(|&len| {
                        start += len;
                        (len, start - len, len, None)
                    })
                    .collect()
            }
            Mask::Causal { past } => {
                if keys != past + tokens {
                    candle_core::bail!(
                        "attention: {keys} keys for {past} cached and {tokens} new tokens"
                    );
                }
                vec![(tokens, 0, keys, Some(past))]
            }
        };
        let (q, k, v) = (
            Operand::new(qs, ql)?,
            Operand::new(ks, kl)?,
            Operand::new(vs, vl)?,
        );
        let width = heads * dim;
        let mut out = vec![0f32; tokens * width];
        // One task per head and block of query rows within a run (as many rows as keep the
        // scores in cache, `SCORE_BLOCK`); a causal block reads the keys up to its last
        // row's. Each task returns its `(rows, head_dim)` block, copied into place after.
        let mut tasks = Vec::new();
        let mut first = 0;
        for &(len, key_start, key_len, past) in &runs {
            let rows = match past {
                Some(_) => CAUSAL_ROWS,
                None => SCORE_BLOCK / key_len.max(1),
            }
            .clamp(1, len.max(1));
            for r0 in (0..len).step_by(rows) {
                let take = rows.min(len - r0);
                let (seen, past) = match past {
                    Some(p) => (p + r0 + take, Some(p + r0)),
                    None => (key_len, None),
                };
                for h in 0..heads {
                    tasks.push((first + r0, take, key_start, seen, past, h));
                }
            }
            first += len;
        }
        let blocks: Vec<Vec<f32>> = tasks
            .par_iter()
            .map_init(
                Vec::new,
                |scores: &mut Vec<f32>, &(first, rows, key_start, len, past, h)| {
                    scores.resize(rows * len, 0.0);
                    // scores = q[h, first.., :] · k[h / group, key_start.., :]^T
                    let (kh, kt, kd) = k.matrix(h / group, key_start);
                    strided_product(
                        (rows, len, dim),
                        (scores, len, 1),
                        q.matrix(h, first),
                        (kh, kd, kt),
                    );
                    // Row i sees keys 0..=past + i.
                    if let Some(past) = past {
                        for (i, row) in scores.chunks_exact_mut(len).enumerate() {
                            row[past + i + 1..].fill(f32::NEG_INFINITY);
                        }
                    }
                    pulp::Arch::new().dispatch(SoftmaxRows { rows: scores, len });
                    // block = scores · v[h / group, key_start.., :]
                    let mut block = vec![0f32; rows * dim];
                    strided_product(
                        (rows, dim, len),
                        (&mut block, dim, 1),
                        (scores, len, 1),
                        v.matrix(h / group, key_start),
                    );
                    block
                },
            )
            .collect();
        // Each block into its rows and head's columns of the output.
        for (&(first, _, _, _, _, h), block) in tasks.iter().zip(&blocks) {
            for (i, row) in block.chunks_exact(dim).enumerate() {
                let at = (first + i) * width + h * dim;
                out[at..at + dim].copy_from_slice(row);
            }
        }
        Ok((CpuStorage::F32(out), Shape::from((tokens, width))))
    }
}

/// Rotary embedding of the queries (then scaled) and keys of a `(tokens, 3 * heads * dim)`
/// product, in the rotate-half form: `(2, heads, tokens, dim)` out, queries first.
struct RotaryQk {
    heads: usize,
    scale: f32,
}

impl CustomOp3 for RotaryQk {
    fn name(&self) -> &'static str {
        "keyslice-rotary-qk"
    }

    fn cpu_fwd(
        &self,
        qkv: &CpuStorage,
        qkv_layout: &Layout,
        cos: &CpuStorage,
        cos_layout: &Layout,
        sin: &CpuStorage,
        sin_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (Some((q0, q1)), Some((c0, c1)), Some((s0, s1))) = (
            qkv_layout.contiguous_offsets(),
            cos_layout.contiguous_offsets(),
            sin_layout.contiguous_offsets(),
        ) else {
            candle_core::bail!("rotary inputs must be contiguous");
        };
        let (tokens, width) = qkv_layout.shape().dims2()?;
        let (cos_tokens, half) = cos_layout.shape().dims2()?;
        let dim = 2 * half;
        if width != 3 * self.heads * dim
            || cos_tokens != tokens
            || sin_layout.shape() != cos_layout.shape()
        {
            candle_core::bail!(
                "rotary: qkv {:?} with {} heads, cos {:?}, sin {:?} do not fit",
                qkv_layout.dims(),
                self.heads,
                cos_layout.dims(),
                sin_layout.dims()
            );
        }
        let (qkv, cos, sin) = (
            &qkv.as_slice::<f32>()?[q0..q1],
            &cos.as_slice::<f32>()?[c0..c1],
            &sin.as_slice::<f32>()?[s0..s1],
        );
        let mut out = vec![0f32; 2 * self.heads * tokens * dim];
        // One task per (queries or keys, head): its `(tokens, dim)` block of the output.
        out.par_chunks_mut(tokens * dim)
            .enumerate()
            .for_each(|(index, block)| {
                let (part, head) = (index / self.heads, index % self.heads);
                let scale = if part == 0 { self.scale } else { 1.0 };
                let column = part * self.heads * dim + head * dim;
                for (t, row) in block.chunks_exact_mut(dim).enumerate() {
                    let x = &qkv[t * width + column..t * width + column + dim];
                    let (c, s) = (
                        &cos[t * half..(t + 1) * half],
                        &sin[t * half..(t + 1) * half],
                    );
                    let (first, second) = row.split_at_mut(half);
                    for i in 0..half {
                        first[i] = (x[i] * c[i] - x[half + i] * s[i]) * scale;
                        second[i] = (x[half + i] * c[i] + x[i] * s[i]) * scale;
                    }
                }
            });
        Ok((
            CpuStorage::F32(out),
            Shape::from((2, self.heads, tokens, dim)),
        ))
    }
}

/// The vision tower's queries, keys and values from its `(tokens, 3 * heads * dim)` product:
/// queries and keys rotated (rotate-half form, angles `cos`/`sin` `(tokens, dim / 2)`) and
/// the queries multiplied by `scale`, each `(heads, tokens, dim)`. On the CPU in f32 one
/// threaded pass, the values read in place; elsewhere candle's rotary op in f32 (the
/// reference rotates in f32).
pub fn rotary_qkv(
    qkv: &Tensor,
    heads: usize,
    cos: &Tensor,
    sin: &Tensor,
    scale: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    let (tokens, width) = qkv.dims2()?;
    let dim = width / (3 * heads.max(1));
    // (3, heads, tokens, dim), a view.
    let parts = qkv
        .reshape((tokens, 3, heads, dim))?
        .permute((1, 2, 0, 3))?;
    let v = parts.get(2)?;
    if matches!(qkv.device(), Device::Cpu) && qkv.dtype() == DType::F32 {
        let qk = qkv.contiguous()?.apply_op3_no_bwd(
            &cos.contiguous()?,
            &sin.contiguous()?,
            &RotaryQk {
                heads,
                scale: scale as f32,
            },
        )?;
        return Ok((qk.get(0)?, qk.get(1)?, v));
    }
    let rope = |t: Tensor| -> Result<Tensor> {
        candle_nn::rotary_emb::rope(&t.to_dtype(DType::F32)?.unsqueeze(0)?, cos, sin)?
            .squeeze(0)?
            .to_dtype(qkv.dtype())
    };
    let q = (rope(parts.get(0)?.contiguous()?)? * scale)?;
    let k = rope(parts.get(1)?.contiguous()?)?;
    Ok((q, k, v.contiguous()?))
}

/// Softmax attention within each run of `segments` tokens (no mask), `q` already scaled:
/// `q`, `k`, `v` are `(heads, tokens, head_dim)`; the result is `(tokens, heads *
/// head_dim)`. On the CPU in f32 a blocked kernel; elsewhere candle's products and softmax
/// (in f32, as the reference takes it).
pub fn segment_attention(q: &Tensor, k: &Tensor, v: &Tensor, segments: &[usize]) -> Result<Tensor> {
    let (heads, _, dim) = q.dims3()?;
    if matches!(q.device(), Device::Cpu) && q.dtype() == DType::F32 {
        return q.apply_op3_no_bwd(
            k,
            v,
            &BlockedAttention {
                mask: Mask::Segments(segments),
            },
        );
    }
    let mut outs = Vec::with_capacity(segments.len());
    let mut start = 0;
    for &len in segments {
        let qs = q.narrow(1, start, len)?;
        let ks = k.narrow(1, start, len)?;
        let vs = v.narrow(1, start, len)?;
        let w = qs.matmul(&ks.t()?)?.to_dtype(DType::F32)?;
        let w = candle_nn::ops::softmax_last_dim(&w)?.to_dtype(q.dtype())?;
        outs.push(
            w.matmul(&vs)?
                .transpose(0, 1)?
                .reshape((len, heads * dim))?,
        );
        start += len;
    }
    Tensor::cat(&outs, 0)
}

/// Causal grouped-query attention on the CPU in f32 (the language model's prefill), `q`
/// already scaled: `q` `(heads, tokens, head_dim)`, `k` and `v` `(kv_heads, past + tokens,
/// head_dim)`; query `i` sees keys `0..=past + i`. The result is `(tokens, heads *
/// head_dim)`. `None` for other devices and dtypes, which take candle's products.
#[must_use]
pub fn causal_attention_cpu(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    past: usize,
) -> Option<Result<Tensor>> {
    (matches!(q.device(), Device::Cpu) && q.dtype() == DType::F32).then(|| {
        q.apply_op3_no_bwd(
            k,
            v,
            &BlockedAttention {
                mask: Mask::Causal { past },
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_exp_is_accurate() {
        for i in -6000..8830 {
            let x = i as f32 / 100.0;
            let (ours, std) = (fast_exp(x), x.exp());
            assert!(
                ((ours - std) / std).abs() < 3e-7,
                "exp({x}): {ours} vs {std}"
            );
        }
        for x in [-60.01, -87.3, -1000.0, f32::NEG_INFINITY] {
            assert_eq!(fast_exp(x).to_bits(), 0, "exp({x})");
        }
    }

    #[test]
    fn softmax_in_place_matches_candle() {
        let dev = Device::Cpu;
        // Rows of 784 (the vision tower's), 37 (a tail shorter than a vector) and 1.
        for shape in [(2usize, 3usize, 784usize), (1, 5, 37), (1, 4, 1)] {
            let x = (Tensor::randn(0f32, 3.0, shape, &dev).unwrap() + 2.0).unwrap();
            let theirs = candle_nn::ops::softmax_last_dim(&x).unwrap();
            let ours = softmax_last_dim_in_place(x.copy().unwrap()).unwrap();
            let d = (ours - theirs).unwrap().abs().unwrap().max_all().unwrap();
            assert!(d.to_scalar::<f32>().unwrap() < 1e-6, "{shape:?}");
        }
        // Other dtypes go to candle's softmax.
        let x = Tensor::randn(0f64, 1.0, (3, 9), &dev).unwrap();
        let d = (softmax_last_dim_in_place(x.clone()).unwrap()
            - candle_nn::ops::softmax_last_dim(&x).unwrap())
        .unwrap()
        .abs()
        .unwrap()
        .max_all()
        .unwrap();
        assert!(d.to_scalar::<f64>().unwrap() < 1e-12);
    }

    #[test]
    fn blocked_attention_matches_candle_products() {
        let dev = Device::Cpu;
        // Two frames: one of 600 tokens (its score rows split into blocks of 436 and 164)
        // and one of 5; q, k, v read from one (tokens, 3, heads, d) product as the vision
        // tower's.
        let (heads, dim, segments) = (3usize, 16usize, [600usize, 5]);
        let tokens: usize = segments.iter().sum();
        let qkv = Tensor::randn(0f32, 1.0, (tokens, 3, heads, dim), &dev)
            .unwrap()
            .permute((1, 2, 0, 3))
            .unwrap();
        let part = |i: usize| qkv.narrow(0, i, 1).unwrap().squeeze(0).unwrap();
        let (q, k, v) = (part(0), part(1), part(2));
        assert!(!v.is_contiguous());
        let ours = segment_attention(&q, &k, &v, &segments).unwrap();
        assert_eq!(ours.dims(), &[tokens, heads * dim]);
        let mut start = 0;
        for len in segments {
            let (qs, ks, vs) = (
                q.narrow(1, start, len).unwrap().contiguous().unwrap(),
                k.narrow(1, start, len).unwrap().contiguous().unwrap(),
                v.narrow(1, start, len).unwrap().contiguous().unwrap(),
            );
            let w = qs.matmul(&ks.t().unwrap().contiguous().unwrap()).unwrap();
            let w = candle_nn::ops::softmax_last_dim(&w).unwrap();
            let theirs = w.matmul(&vs).unwrap().transpose(0, 1).unwrap();
            let theirs = theirs.reshape((len, heads * dim)).unwrap();
            let d = (ours.narrow(0, start, len).unwrap() - theirs)
                .unwrap()
                .abs()
                .unwrap()
                .max_all()
                .unwrap();
            assert!(d.to_scalar::<f32>().unwrap() < 1e-5, "segment at {start}");
            start += len;
        }
        // Segments that do not add up to the tokens are an error, not a wrong read.
        assert!(segment_attention(&q, &k, &v, &[600, 4]).is_err());
    }

    #[test]
    fn causal_grouped_attention_matches_candle_products() {
        let dev = Device::Cpu;
        // 4 query heads over 2 key/value heads; 3 cached keys, then 200 new tokens (blocks
        // of 64 query rows and a last one of 8) and 700 with none cached.
        for (past, tokens) in [(3usize, 200usize), (0, 700)] {
            let (heads, kv_heads, dim) = (4usize, 2usize, 8usize);
            let keys = past + tokens;
            let q = Tensor::randn(0f32, 1.0, (heads, tokens, dim), &dev).unwrap();
            let k = Tensor::randn(0f32, 1.0, (kv_heads, keys, dim), &dev).unwrap();
            // v strided: a narrowed cache buffer, as the language model's.
            let v = Tensor::randn(0f32, 1.0, (kv_heads, keys + 50, dim), &dev)
                .unwrap()
                .narrow(1, 0, keys)
                .unwrap();
            let ours = causal_attention_cpu(&q, &k, &v, past).unwrap().unwrap();
            let mask: Vec<f32> = (0..tokens)
                .flat_map(|i| {
                    (0..keys).map(move |j| if j > past + i { f32::NEG_INFINITY } else { 0.0 })
                })
                .collect();
            let mask = Tensor::from_vec(mask, (tokens, keys), &dev).unwrap();
            let rows: Vec<Tensor> = (0..heads)
                .map(|h| {
                    let kv = h / (heads / kv_heads);
                    let (qh, kh) = (q.get(h).unwrap(), k.get(kv).unwrap());
                    let vh = v.get(kv).unwrap().contiguous().unwrap();
                    let w = qh.matmul(&kh.t().unwrap()).unwrap().add(&mask).unwrap();
                    let w = candle_nn::ops::softmax_last_dim(&w).unwrap();
                    w.matmul(&vh).unwrap()
                })
                .collect();
            let theirs = Tensor::cat(&rows, 1).unwrap();
            let d = (ours - theirs).unwrap().abs().unwrap().max_all().unwrap();
            assert!(d.to_scalar::<f32>().unwrap() < 1e-5, "past {past}");
            // Keys that do not follow the cache are an error.
            assert!(causal_attention_cpu(&q, &k, &v, past + 1).unwrap().is_err());
        }
    }

    #[test]
    fn silu_mul_matches_candle() {
        let dev = Device::Cpu;
        let gate = (Tensor::randn(0f32, 4.0, (2, 9, 131), &dev).unwrap() - 1.0).unwrap();
        let up = Tensor::randn(0f32, 1.0, (2, 9, 131), &dev).unwrap();
        let ours = silu_mul(&gate, &up).unwrap();
        let theirs = (gate.silu().unwrap() * &up).unwrap();
        let d = (ours - theirs).unwrap().abs().unwrap().max_all().unwrap();
        assert!(d.to_scalar::<f32>().unwrap() < 1e-5);
        assert!(silu_mul(&gate, &up.narrow(2, 0, 130).unwrap()).is_err());
    }

    #[test]
    fn rotary_qkv_matches_candle_rope() {
        let dev = Device::Cpu;
        let (tokens, heads, dim) = (37usize, 3usize, 8usize);
        let qkv = Tensor::randn(0f32, 1.0, (tokens, 3 * heads * dim), &dev).unwrap();
        let cos = Tensor::randn(0f32, 1.0, (tokens, dim / 2), &dev).unwrap();
        let sin = Tensor::randn(0f32, 1.0, (tokens, dim / 2), &dev).unwrap();
        let (q, k, v) = rotary_qkv(&qkv, heads, &cos, &sin, 0.5).unwrap();
        let parts = qkv
            .reshape((tokens, 3, heads, dim))
            .unwrap()
            .permute((1, 2, 0, 3))
            .unwrap()
            .contiguous()
            .unwrap();
        let rope = |i: usize| {
            let part = parts.narrow(0, i, 1).unwrap();
            candle_nn::rotary_emb::rope(&part, &cos, &sin)
                .unwrap()
                .squeeze(0)
                .unwrap()
        };
        let close = |a: &Tensor, b: &Tensor| {
            let d = (a - b).unwrap().abs().unwrap().max_all().unwrap();
            d.to_scalar::<f32>().unwrap() < 1e-6
        };
        assert!(close(&q, &(rope(0) * 0.5).unwrap()));
        assert!(close(&k, &rope(1)));
        assert!(close(&v, &parts.get(2).unwrap()));
        // A product of the wrong width is an error.
        let narrow = qkv.narrow(1, 0, 3 * heads * dim - 3).unwrap();
        assert!(rotary_qkv(&narrow, heads, &cos, &sin, 0.5).is_err());
    }

    #[test]
    fn gelu_matches_candle() {
        let dev = Device::Cpu;
        let x = (Tensor::randn(0f32, 4.0, (3, 7, 131), &dev).unwrap() - 1.0).unwrap();
        let ours = gelu_tanh(&x).unwrap();
        let theirs = x.gelu().unwrap();
        let d = (ours - theirs).unwrap().abs().unwrap().max_all().unwrap();
        assert!(d.to_scalar::<f32>().unwrap() < 1e-5);
    }
}
