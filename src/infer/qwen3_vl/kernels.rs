//! CPU kernels for the element-wise steps that cost most in the Qwen3-VL vision tower after
//! the matrix products:
//!
//! - the MLP's tanh-approximated GELU: candle calls `tanh` once per value (17 ms for a
//!   784 × 2048 activation here);
//! - the attention's softmax over the `(heads, patches, patches)` scores (20 MB for a 448²
//!   image): candle's takes 10.6 ms a block with a library `exp` per value and a new output
//!   tensor; this one works in place on the scores.
//!
//! Both are plain loops the compiler vectorises for the CPU found at run time (`pulp`
//! dispatch: AVX-512, AVX2 or SSE; the loop body must be inlined into the dispatch, which a
//! closure is not, so each kernel is a `WithSimd` type) with a polynomial `exp` (Cephes
//! `expf`, relative error about 1e-7), threaded over chunks. Other devices and dtypes use
//! candle's own ops.

use candle_core::{
    CpuStorage, CustomOp1, DType, Device, InplaceOp1, Layout, Result, Shape, Tensor,
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
    // n is in [-126, 128]: a valid exponent after the bias.
    let bits = ((n as i32 + 127) as u32) << 23;
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
    fn gelu_matches_candle() {
        let dev = Device::Cpu;
        let x = (Tensor::randn(0f32, 4.0, (3, 7, 131), &dev).unwrap() - 1.0).unwrap();
        let ours = gelu_tanh(&x).unwrap();
        let theirs = x.gelu().unwrap();
        let d = (ours - theirs).unwrap().abs().unwrap().max_all().unwrap();
        assert!(d.to_scalar::<f32>().unwrap() < 1e-5);
    }
}
