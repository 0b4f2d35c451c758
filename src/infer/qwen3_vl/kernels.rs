//! CPU kernels for the element-wise steps that cost most in the Qwen3-VL vision tower after
//! the matrix products:
//!
//! - the MLP's tanh-approximated GELU: candle calls `tanh` once per value (17 ms for a
//!   784 × 2048 activation here);
//! - the attention's softmax over the `(heads, patches, patches)` scores (20 MB for a 448²
//!   image): candle's takes 10.6 ms a block with a library `exp` per value and a new output
//!   tensor; this one works in place on the scores.
//!
//! - the attention itself (scores, softmax, weighted sum), in blocks of query rows whose
//!   scores stay in the core's cache instead of a 20 MB tensor written and read four times
//!   (13.7 ms a vision block before, with candle's products and the in-place softmax).
//!
//! The element-wise ones are plain loops the compiler vectorises for the CPU found at run time (`pulp`
//! dispatch: AVX-512, AVX2 or SSE; the loop body must be inlined into the dispatch, which a
//! closure is not, so each kernel is a `WithSimd` type) with a polynomial `exp` (Cephes
//! `expf`, relative error about 1e-7), threaded over chunks. Other devices and dtypes use
//! candle's own ops.

use candle_core::{
    CpuStorage, CustomOp1, CustomOp3, DType, Device, InplaceOp1, Layout, Result, Shape, Tensor,
};
use rayon::prelude::*;

/// `exp(x)` without a library call: `2^n * p(r)` with `x = n ln 2 + r`; exactly 0 below
/// `x = -60` (`e^-60` ≈ 1e-26 is nothing next to the 1 a softmax's largest term contributes,
/// and a tiny result would become a subnormal number once scaled, which the CPU handles a
/// hundred times slower: a causal mask's `-inf` scores made the language model's softmax
/// and the product after it 40 ms a layer slower).
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
    #[allow(clippy::inline_always)]
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

/// Softmax of each `len`-long row of `rows`, in place, compiled for this CPU's SIMD.
struct SoftmaxRows<'a> {
    rows: &'a mut [f32],
    len: usize,
}

/// Values per vector of partial maxima and sums (one AVX-512 register of f32; two AVX2 ones).
const LANES: usize = 16;

impl pulp::WithSimd for SoftmaxRows<'_> {
    type Output = ();

    #[allow(clippy::inline_always)]
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
        let rows_per_chunk = (65_536 / len).max(1);
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
        out.par_chunks_mut(65_536)
            .zip(input.par_chunks(65_536))
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

/// Scores kept per block of query rows (256 KB of f32): the block's scores, its queries and
/// the product's packed operands stay in a core's L2 cache.
const SCORE_BLOCK: usize = 65_536;

/// Multi-head attention within runs of tokens (`segments`), without a mask: `q`, `k`, `v`
/// are `(heads, tokens, head_dim)` with any strides, `q` already scaled; the output is
/// `(tokens, heads * head_dim)`, heads side by side as the output projection reads them.
struct BlockedAttention<'a> {
    segments: &'a [usize],
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
#[allow(unsafe_code)]
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
        if kl.dims() != ql.dims() || vl.dims() != ql.dims() {
            candle_core::bail!(
                "attention: q {:?}, k {:?}, v {:?} differ",
                ql.dims(),
                kl.dims(),
                vl.dims()
            );
        }
        if self.segments.iter().sum::<usize>() != tokens {
            candle_core::bail!(
                "attention: segments {:?} for {tokens} tokens",
                self.segments
            );
        }
        let (q, k, v) = (
            Operand::new(qs, ql)?,
            Operand::new(ks, kl)?,
            Operand::new(vs, vl)?,
        );
        let width = heads * dim;
        let mut out = vec![0f32; tokens * width];
        // One task per block of query rows within a segment, all heads; each owns its rows
        // of the output.
        let mut tasks = Vec::new();
        let mut rest = out.as_mut_slice();
        let mut start = 0;
        for &len in self.segments {
            let rows = (SCORE_BLOCK / len.max(1)).clamp(1, len.max(1));
            for r0 in (0..len).step_by(rows) {
                let take = rows.min(len - r0);
                let (block, tail) = rest.split_at_mut(take * width);
                tasks.push((block, start, len, start + r0, take));
                rest = tail;
            }
            start += len;
        }
        tasks.into_par_iter().for_each_init(
            Vec::new,
            |scores: &mut Vec<f32>, (block, start, len, first, rows)| {
                scores.resize(rows * len, 0.0);
                for h in 0..heads {
                    // scores = q[h, first.., :] · k[h, start.., :]^T
                    let (kh, kt, kd) = k.matrix(h, start);
                    strided_product(
                        (rows, len, dim),
                        (scores, len, 1),
                        q.matrix(h, first),
                        (kh, kd, kt),
                    );
                    pulp::Arch::new().dispatch(SoftmaxRows { rows: scores, len });
                    // out[first.., h * dim..] = scores · v[h, start.., :]
                    strided_product(
                        (rows, dim, len),
                        (&mut block[h * dim..], width, 1),
                        (scores, len, 1),
                        v.matrix(h, start),
                    );
                }
            },
        );
        Ok((CpuStorage::F32(out), Shape::from((tokens, width))))
    }
}

/// Softmax attention within each run of `segments` tokens (no mask), `q` already scaled:
/// `q`, `k`, `v` are `(heads, tokens, head_dim)`; the result is `(tokens, heads *
/// head_dim)`. On the CPU in f32 a blocked kernel; elsewhere candle's products and softmax
/// (in f32, as the reference takes it).
pub fn segment_attention(q: &Tensor, k: &Tensor, v: &Tensor, segments: &[usize]) -> Result<Tensor> {
    let (heads, _, dim) = q.dims3()?;
    if matches!(q.device(), Device::Cpu) && q.dtype() == DType::F32 {
        return q.apply_op3_no_bwd(k, v, &BlockedAttention { segments });
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
        // Two frames: one of 300 tokens (its score rows split into blocks of 218) and one
        // of 5; q, k, v read from one (tokens, 3, heads, d) product as the vision tower's.
        let (heads, dim, segments) = (3usize, 16usize, [300usize, 5]);
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
        assert!(segment_attention(&q, &k, &v, &[300, 4]).is_err());
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
