//! Linear layers laid out for speed on the CPU: the weight is kept transposed, `(in, out)`
//! row-major, which the `gemm` crate multiplies fastest for many rows (prefill, vision), and
//! one-row products (decoding) go through [`gemv`], a threaded kernel that streams the weight
//! once (candle's general product is about half as fast for a single row). GPUs and other
//! dtypes use candle's product as is.

use candle_core::{DType, Device, Module, Result, Storage, Tensor};
use candle_nn::VarBuilder;
use rayon::prelude::*;

/// `y = x W^T + b` with `W` stored as `W^T`.
pub struct Lin {
    /// `(in, out)`, contiguous.
    wt: Tensor,
    bias: Option<Tensor>,
}

impl Lin {
    /// Load `weight` `(out, in)` and, when `bias`, `bias` `(out)` from `vb`.
    pub fn new(in_dim: usize, out_dim: usize, bias: bool, vb: VarBuilder) -> Result<Self> {
        let w = vb.get((out_dim, in_dim), "weight")?;
        let bias = if bias {
            Some(vb.get(out_dim, "bias")?)
        } else {
            None
        };
        Self::from_weight(&w, bias)
    }

    /// From a weight `(out, in)` (e.g. tied embeddings).
    pub fn from_weight(w: &Tensor, bias: Option<Tensor>) -> Result<Self> {
        Ok(Self {
            wt: transposed(w)?,
            bias,
        })
    }
}

/// `w` `(rows, cols)` → a contiguous `(cols, rows)` copy. On the CPU a tiled, threaded copy
/// (candle's strided copy walks the source column by column: 0.9 s of the 148 M-parameter
/// bench checkpoint's loading); elsewhere candle's.
pub fn transposed(w: &Tensor) -> Result<Tensor> {
    if matches!(w.device(), Device::Cpu) && w.rank() == 2 {
        w.contiguous()?.apply_op1_no_bwd(&Transpose)
    } else {
        w.t()?.contiguous()
    }
}

struct Transpose;

/// Side of the square tiles copied at once (a tile of f32 is 16 KB: both sides stay in L1).
const TILE: usize = 64;

fn transpose_tiled<T: Copy + Default + Send + Sync>(src: &[T], rows: usize, cols: usize) -> Vec<T> {
    let mut out = vec![T::default(); rows * cols];
    // Each task writes TILE output rows (source columns), all of their length.
    out.par_chunks_mut(TILE * rows)
        .enumerate()
        .for_each(|(block, dst)| {
            let c0 = block * TILE;
            let width = dst.len() / rows;
            for r0 in (0..rows).step_by(TILE) {
                let height = TILE.min(rows - r0);
                for c in 0..width {
                    let line = &mut dst[c * rows + r0..c * rows + r0 + height];
                    for (r, value) in line.iter_mut().enumerate() {
                        *value = src[(r0 + r) * cols + c0 + c];
                    }
                }
            }
        });
    out
}

impl candle_core::CustomOp1 for Transpose {
    fn name(&self) -> &'static str {
        "keyslice-transpose"
    }

    fn cpu_fwd(
        &self,
        storage: &candle_core::CpuStorage,
        layout: &candle_core::Layout,
    ) -> Result<(candle_core::CpuStorage, candle_core::Shape)> {
        use candle_core::CpuStorage as S;
        let (rows, cols) = layout.shape().dims2()?;
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("transpose input must be contiguous");
        };
        let out = match storage {
            S::F32(v) => S::F32(transpose_tiled(&v[start..end], rows, cols)),
            S::BF16(v) => S::BF16(transpose_tiled(&v[start..end], rows, cols)),
            S::F16(v) => S::F16(transpose_tiled(&v[start..end], rows, cols)),
            S::F64(v) => S::F64(transpose_tiled(&v[start..end], rows, cols)),
            _ => candle_core::bail!("transpose: integer weights are not supported"),
        };
        Ok((out, candle_core::Shape::from((cols, rows))))
    }
}

impl Module for Lin {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let dims = x.dims().to_vec();
        let (in_dim, out_dim) = self.wt.dims2()?;
        let rows = x.elem_count() / in_dim;
        let x2 = x.reshape((rows, in_dim))?;
        let y = if rows == 1 && matches!(x.device(), Device::Cpu) && x.dtype() == DType::F32 {
            let xs = x2.flatten_all()?.to_vec1::<f32>()?;
            let (storage, layout) = self.wt.storage_and_layout();
            let Storage::Cpu(cpu) = &*storage else {
                candle_core::bail!("CPU weight expected");
            };
            let all = cpu.as_slice::<f32>()?;
            let start = layout.start_offset();
            let w = &all[start..start + in_dim * out_dim];
            let out = gemv(&xs, w, out_dim);
            drop(storage);
            Tensor::from_vec(out, (1, out_dim), x.device())?
        } else {
            x2.matmul(&self.wt)?
        };
        let y = match &self.bias {
            Some(b) => y.broadcast_add(b)?,
            None => y,
        };
        let mut out_dims = dims;
        if let Some(last) = out_dims.last_mut() {
            *last = out_dim;
        }
        y.reshape(out_dims)
    }
}

/// `y = x · wt` for one row `x` (length `in`) and `wt` `(in, out)` row-major: output columns
/// are split in blocks across threads; each block accumulates `x[k] * wt[k, block]` four rows
/// at a time into sums kept in cache, with the widest SIMD the CPU has (`pulp` picks AVX-512,
/// AVX2 or SSE at run time).
#[must_use]
pub fn gemv(x: &[f32], wt: &[f32], out_dim: usize) -> Vec<f32> {
    const BLOCK: usize = 256;
    let arch = pulp::Arch::new();
    let mut y = vec![0f32; out_dim];
    y.par_chunks_mut(BLOCK).enumerate().for_each(|(b, acc)| {
        arch.dispatch(Axpy {
            acc,
            x,
            wt,
            out_dim,
            first: b * BLOCK,
        });
    });
    y
}

struct Axpy<'a> {
    acc: &'a mut [f32],
    x: &'a [f32],
    wt: &'a [f32],
    out_dim: usize,
    first: usize,
}

impl pulp::WithSimd for Axpy<'_> {
    type Output = ();

    // pulp compiles the body for the detected CPU only when it is inlined into its dispatch.
    #[expect(clippy::inline_always, reason = "the inner loop of the matrix product")]
    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let Self {
            acc,
            x,
            wt,
            out_dim,
            first,
        } = self;
        let width = acc.len();
        let row = |k: usize| &wt[k * out_dim + first..k * out_dim + first + width];
        let (acc_v, acc_t) = S::as_mut_simd_f32s(acc);
        let mut k = 0;
        while k + 4 <= x.len() {
            let (r0, t0) = S::as_simd_f32s(row(k));
            let (r1, t1) = S::as_simd_f32s(row(k + 1));
            let (r2, t2) = S::as_simd_f32s(row(k + 2));
            let (r3, t3) = S::as_simd_f32s(row(k + 3));
            let (x0, x1, x2, x3) = (x[k], x[k + 1], x[k + 2], x[k + 3]);
            let (s0, s1, s2, s3) = (
                simd.splat_f32s(x0),
                simd.splat_f32s(x1),
                simd.splat_f32s(x2),
                simd.splat_f32s(x3),
            );
            for (i, a) in acc_v.iter_mut().enumerate() {
                let mut v = simd.mul_add_e_f32s(s0, r0[i], *a);
                v = simd.mul_add_e_f32s(s1, r1[i], v);
                v = simd.mul_add_e_f32s(s2, r2[i], v);
                *a = simd.mul_add_e_f32s(s3, r3[i], v);
            }
            for (i, a) in acc_t.iter_mut().enumerate() {
                *a += x0 * t0[i] + x1 * t1[i] + x2 * t2[i] + x3 * t3[i];
            }
            k += 4;
        }
        while k < x.len() {
            let (r, t) = S::as_simd_f32s(row(k));
            let s = simd.splat_f32s(x[k]);
            for (a, w) in acc_v.iter_mut().zip(r) {
                *a = simd.mul_add_e_f32s(s, *w, *a);
            }
            for (a, w) in acc_t.iter_mut().zip(t) {
                *a += x[k] * w;
            }
            k += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tiled_transpose_matches_candle() {
        let dev = candle_core::Device::Cpu;
        for (rows, cols) in [(1, 1), (3, 130), (130, 3), (70, 200)] {
            let w = candle_core::Tensor::randn(0f32, 1.0, (rows, cols), &dev).unwrap();
            for dtype in [candle_core::DType::F32, candle_core::DType::BF16] {
                let w = w.to_dtype(dtype).unwrap();
                let ours = super::transposed(&w).unwrap();
                let theirs = w.t().unwrap().contiguous().unwrap();
                assert_eq!(ours.dims(), theirs.dims());
                let same = ours
                    .to_dtype(candle_core::DType::F32)
                    .unwrap()
                    .eq(&theirs.to_dtype(candle_core::DType::F32).unwrap())
                    .unwrap()
                    .to_dtype(candle_core::DType::F32)
                    .unwrap()
                    .sum_all()
                    .unwrap()
                    .to_scalar::<f32>()
                    .unwrap();
                assert_eq!(same as usize, rows * cols, "{rows}x{cols} {dtype:?}");
            }
        }
    }

    use super::*;

    #[test]
    fn gemv_matches_a_plain_product() {
        let (k, n) = (37, 1030);
        let x: Vec<f32> = (0..k).map(|i| (i as f32 * 0.37).sin()).collect();
        let wt: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.011).cos()).collect();
        let y = gemv(&x, &wt, n);
        for j in [0, 1, 511, 512, 1029] {
            let expected: f32 = (0..k).map(|i| x[i] * wt[i * n + j]).sum();
            assert!(
                (y[j] - expected).abs() < 1e-4,
                "{j}: {} vs {expected}",
                y[j]
            );
        }
    }

    #[test]
    fn one_row_and_many_rows_agree() {
        let dev = Device::Cpu;
        let w = Tensor::randn(0f32, 1.0, (300, 70), &dev).unwrap();
        let b = Tensor::randn(0f32, 1.0, 300, &dev).unwrap();
        let lin = Lin::from_weight(&w, Some(b)).unwrap();
        let x = Tensor::randn(0f32, 1.0, (1, 3, 70), &dev).unwrap();
        let many = lin.forward(&x).unwrap();
        let one = lin.forward(&x.narrow(1, 1, 1).unwrap()).unwrap();
        let d = (many.narrow(1, 1, 1).unwrap() - one)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(d < 1e-4, "{d}");
        assert_eq!(many.dims(), &[1, 3, 300]);
    }
}
