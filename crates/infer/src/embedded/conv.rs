//! A 3×3, stride-1, zero-padded convolution for `keyslice-tiny` written as an explicit
//! `im2col` followed by a matrix product, so that both directions run on candle's GEMM.
//!
//! candle's own CPU `conv2d` is fine forwards, but its backward pass computes the input
//! gradient with a direct `conv_transpose2d` loop and the kernel gradient as a convolution
//! whose kernel is the whole image; together they made a training step about five times
//! the forward cost. Here the backward of the product is candle's (two GEMMs) and the
//! backward of `im2col` is `col2im`, a scatter-add written below. Weights keep candle's
//! `Conv2d` layout (`[out, in, 3, 3]`), so checkpoints are unchanged.

use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

/// `x` `[batch, channels, height, width]` → columns `[batch, channels · 9 + 1, height · width]`,
/// row `c · 9 + dy · 3 + dx` holding `x[c, y + dy − 1, x + dx − 1]` (zero outside), and a
/// last row of ones that carries the bias through the same product (its gradient comes out of
/// the product too, with no separate reduction).
struct Im2Col;

fn im2col(input: &[f32], batch: usize, channels: usize, height: usize, width: usize) -> Vec<f32> {
    let plane = height * width;
    let per_item = (channels * 9 + 1) * plane;
    let mut out = vec![0f32; batch * per_item];
    out.par_chunks_mut(per_item)
        .enumerate()
        .for_each(|(item, columns)| {
            let (taps, ones) = columns.split_at_mut(channels * 9 * plane);
            ones.fill(1.0);
            taps.par_chunks_mut(9 * plane)
                .enumerate()
                .for_each(|(channel, rows)| {
                    let at = (item * channels + channel) * plane;
                    spread(&input[at..at + plane], rows, height, width);
                });
        });
    out
}

/// One channel's nine shifted copies (`rows`: 9 planes).
fn spread(source: &[f32], rows: &mut [f32], height: usize, width: usize) {
    let plane = height * width;
    for (tap, row) in rows.chunks_mut(plane).enumerate() {
        let (dy, dx) = (tap / 3, tap % 3);
        for y in 0..height {
            let Some(sy) = (y + dy).checked_sub(1).filter(|&sy| sy < height) else {
                continue;
            };
            let out_row = &mut row[y * width..(y + 1) * width];
            let in_row = &source[sy * width..(sy + 1) * width];
            match dx {
                0 => out_row[1..].copy_from_slice(&in_row[..width - 1]),
                1 => out_row.copy_from_slice(in_row),
                _ => out_row[..width - 1].copy_from_slice(&in_row[1..]),
            }
        }
    }
}

/// The adjoint of [`im2col`]: sums every column entry back onto the pixel it came from (the
/// ones row has no source).
fn col2im(columns: &[f32], batch: usize, channels: usize, height: usize, width: usize) -> Vec<f32> {
    let plane = height * width;
    let per_item = (channels * 9 + 1) * plane;
    let mut out = vec![0f32; batch * channels * plane];
    out.par_chunks_mut(plane)
        .enumerate()
        .for_each(|(bc, target)| {
            let (item, channel) = (bc / channels, bc % channels);
            let at = item * per_item + channel * 9 * plane;
            let rows = &columns[at..at + 9 * plane];
            for (tap, row) in rows.chunks(plane).enumerate() {
                let (dy, dx) = (tap / 3, tap % 3);
                for y in 0..height {
                    let Some(sy) = (y + dy).checked_sub(1).filter(|&sy| sy < height) else {
                        continue;
                    };
                    let from = &row[y * width..(y + 1) * width];
                    let to = &mut target[sy * width..(sy + 1) * width];
                    let (from, to) = match dx {
                        0 => (&from[1..], &mut to[..width - 1]),
                        1 => (from, to),
                        _ => (&from[..width - 1], &mut to[1..]),
                    };
                    for (t, f) in to.iter_mut().zip(from) {
                        *t += f;
                    }
                }
            }
        });
    out
}

impl CustomOp1 for Im2Col {
    fn name(&self) -> &'static str {
        "keyslice-im2col3x3"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let (batch, channels, height, width) = layout.shape().dims4()?;
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("im2col input must be contiguous");
        };
        let input = &storage.as_slice::<f32>()?[start..end];
        let out = im2col(input, batch, channels, height, width);
        Ok((
            CpuStorage::F32(out),
            Shape::from((batch, channels * 9 + 1, height * width)),
        ))
    }

    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad_res: &Tensor) -> Result<Option<Tensor>> {
        let (batch, channels, height, width) = arg.dims4()?;
        let grad_res = grad_res.contiguous()?;
        let (storage, layout) = grad_res.storage_and_layout();
        let candle_core::Storage::Cpu(storage) = &*storage else {
            candle_core::bail!("im2col runs on the CPU only");
        };
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("im2col gradient must be contiguous");
        };
        let summed = col2im(
            &storage.as_slice::<f32>()?[start..end],
            batch,
            channels,
            height,
            width,
        );
        Tensor::from_vec(summed, (batch, channels, height, width), arg.device()).map(Some)
    }
}

/// 3×3 convolution, stride 1, padding 1: `x` `[batch, in, h, w]`, `weight` `[out, in, 3, 3]`,
/// `bias` `[out]` → `[batch, out, h, w]`. This op for f32 on the CPU (in strips when no
/// gradient is wanted); candle's `conv2d` for other devices and dtypes (as the other custom
/// kernels of the project fall back).
pub fn conv3x3(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let (batch, _, height, width) = x.dims4()?;
    let (outputs, inputs, kh, kw) = weight.dims4()?;
    if (kh, kw) != (3, 3) {
        candle_core::bail!("conv3x3 needs a 3×3 kernel, got {kh}×{kw}");
    }
    if !(x.device().is_cpu() && x.dtype() == candle_core::DType::F32) {
        let out = x.conv2d(weight, 1, 1, 1, 1)?;
        return match bias {
            Some(bias) => out.broadcast_add(&bias.reshape((1, outputs, 1, 1))?),
            None => Ok(out),
        };
    }
    if !x.track_op() && !weight.track_op() {
        return conv3x3_strips(x, weight, bias, STRIP_PIXELS);
    }
    let columns = x.contiguous()?.apply_op1(Im2Col)?;
    let bias = match bias {
        Some(bias) => bias.reshape((outputs, 1))?,
        None => Tensor::zeros((outputs, 1), weight.dtype(), weight.device())?,
    };
    let kernel = Tensor::cat(&[&weight.reshape((outputs, inputs * 9))?, &bias], 1)?
        .unsqueeze(0)?
        .broadcast_as((batch, outputs, inputs * 9 + 1))?;
    kernel
        .matmul(&columns)?
        .reshape((batch, outputs, height, width))
}

/// Pixels per strip of [`conv3x3_strips`]: the columns of a 48-channel input then take 7 MB.
const STRIP_PIXELS: usize = 4096;

/// Inference (no gradient wanted): the image in strips of rows, each `im2col`-ed into a
/// buffer that stays in the cache and multiplied at once, written without zero-filling it
/// first. Against one buffer for the whole image (what training needs, for the backward
/// pass): the organ network 8 % and the finder 30 % faster on a 512² × 300 CT.
fn conv3x3_strips(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    strip_px: usize,
) -> Result<Tensor> {
    let (batch, channels, height, width) = x.dims4()?;
    let outputs = weight.dim(0)?;
    let bias = match bias {
        Some(bias) => bias.reshape((outputs, 1))?,
        None => Tensor::zeros((outputs, 1), weight.dtype(), weight.device())?,
    };
    let kernel = Tensor::cat(&[&weight.reshape((outputs, channels * 9))?, &bias], 1)?;
    let input = x.contiguous()?.flatten_all()?.to_vec1::<f32>()?;
    let plane = height * width;
    let rows = (strip_px / width.max(1)).clamp(1, height);
    let mut out = vec![0f32; batch * outputs * plane];
    for item in 0..batch {
        let source = &input[item * channels * plane..(item + 1) * channels * plane];
        let mut y0 = 0;
        while y0 < height {
            let y1 = (y0 + rows).min(height);
            let n = (y1 - y0) * width;
            let columns = strip_columns(source, channels, height, width, y0, y1);
            let columns = Tensor::from_vec(columns, (channels * 9 + 1, n), x.device())?;
            let product = kernel.matmul(&columns)?.flatten_all()?.to_vec1::<f32>()?;
            for (o, values) in product.chunks(n).enumerate() {
                let at = (item * outputs + o) * plane + y0 * width;
                out[at..at + n].copy_from_slice(values);
            }
            y0 = y1;
        }
    }
    Tensor::from_vec(out, (batch, outputs, height, width), x.device())
}

/// Columns of rows `y0..y1` of one item (`source`: `[channels, height, width]`), as [`im2col`]
/// lays them out, built by appending (no zero fill first).
fn strip_columns(
    source: &[f32],
    channels: usize,
    height: usize,
    width: usize,
    y0: usize,
    y1: usize,
) -> Vec<f32> {
    let plane = height * width;
    let n = (y1 - y0) * width;
    let mut columns = Vec::with_capacity((channels * 9 + 1) * n);
    for channel in 0..channels {
        let image = &source[channel * plane..(channel + 1) * plane];
        for tap in 0..9 {
            let (dy, dx) = (tap / 3, tap % 3);
            for y in y0..y1 {
                let Some(sy) = (y + dy).checked_sub(1).filter(|&sy| sy < height) else {
                    columns.resize(columns.len() + width, 0.0);
                    continue;
                };
                let row = &image[sy * width..(sy + 1) * width];
                match dx {
                    0 => {
                        columns.push(0.0);
                        columns.extend_from_slice(&row[..width - 1]);
                    }
                    1 => columns.extend_from_slice(row),
                    _ => {
                        columns.extend_from_slice(&row[1..]);
                        columns.push(0.0);
                    }
                }
            }
        }
    }
    columns.resize(columns.len() + n, 1.0);
    columns
}

/// Largest absolute difference, in f64 whatever the tensors' dtype (for the tests of the
/// project's kernels against candle's).
#[cfg(test)]
pub(crate) fn max_difference(a: &Tensor, b: &Tensor) -> f64 {
    (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_dtype(candle_core::DType::F64)
        .unwrap()
        .to_scalar::<f64>()
        .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    /// Forward values and both gradients agree with candle's `conv2d` on odd sizes.
    #[test]
    #[expect(
        clippy::many_single_char_names,
        reason = "the dimensions of a convolution (n, c, h, w, k)"
    )]
    fn matches_candle_conv2d_forward_and_backward() {
        let device = Device::Cpu;
        let x =
            Var::from_tensor(&Tensor::randn(0f32, 1.0, (3, 5, 7, 6), &device).unwrap()).unwrap();
        let w =
            Var::from_tensor(&Tensor::randn(0f32, 0.3, (4, 5, 3, 3), &device).unwrap()).unwrap();
        let b = Var::from_tensor(&Tensor::randn(0f32, 0.3, 4, &device).unwrap()).unwrap();
        let probe = Tensor::randn(0f32, 1.0, (3, 4, 7, 6), &device).unwrap();

        let reference = x
            .as_tensor()
            .conv2d(w.as_tensor(), 1, 1, 1, 1)
            .unwrap()
            .broadcast_add(&b.as_tensor().reshape((1, 4, 1, 1)).unwrap())
            .unwrap();
        let ours = conv3x3(x.as_tensor(), w.as_tensor(), Some(b.as_tensor())).unwrap();
        assert!(max_difference(&reference, &ours) < 1e-4);

        let grads_reference = (reference * &probe)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        let grads_ours = (ours * &probe)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        for var in [&x, &w, &b] {
            let (r, o) = (
                grads_reference.get(var.as_tensor()).unwrap(),
                grads_ours.get(var.as_tensor()).unwrap(),
            );
            assert!(max_difference(r, o) < 1e-3, "gradient differs");
        }
    }

    /// Without gradients the strip path gives candle's result, on strips that split the
    /// image unevenly and on strips of one row.
    #[test]
    fn strips_match_candle_conv2d() {
        let device = Device::Cpu;
        let x = Tensor::randn(0f32, 1.0, (2, 5, 9, 7), &device).unwrap();
        let w = Tensor::randn(0f32, 0.3, (4, 5, 3, 3), &device).unwrap();
        let bias = Tensor::randn(0f32, 0.3, 4, &device).unwrap();
        let reference = x
            .conv2d(&w, 1, 1, 1, 1)
            .unwrap()
            .broadcast_add(&bias.reshape((1, 4, 1, 1)).unwrap())
            .unwrap();
        for strip in [1, 7, 20, 63, 1000] {
            let ours = conv3x3_strips(&x, &w, Some(&bias), strip).unwrap();
            assert!(
                max_difference(&reference, &ours) < 1e-4,
                "strip of {strip} pixels"
            );
        }
        // Bit for bit the whole-image product's values (training's path, taken for a
        // variable), so that training, whose frozen parts take the strip path, reproduces.
        let wide = Tensor::randn(0f32, 1.0, (1, 48, 24, 40), &device).unwrap();
        let kernel = Tensor::randn(0f32, 0.1, (16, 48, 3, 3), &device).unwrap();
        let tracked = Var::from_tensor(&wide).unwrap();
        let wide_bias = bias.repeat(4).unwrap();
        let whole = conv3x3(tracked.as_tensor(), &kernel, Some(&wide_bias)).unwrap();
        for strip in [STRIP_PIXELS, 200] {
            let ours = conv3x3_strips(&wide, &kernel, Some(&wide_bias), strip).unwrap();
            assert!(
                max_difference(&whole, &ours) <= 0.0,
                "strip of {strip} pixels"
            );
        }
        // The public entry takes this path for tensors that track no gradient.
        let ours = conv3x3(&x, &w, None).unwrap();
        let without_bias = x.conv2d(&w, 1, 1, 1, 1).unwrap();
        assert!(max_difference(&without_bias, &ours) < 1e-4);
    }

    /// Other dtypes go through candle's `conv2d` (with the bias) and give its result.
    #[test]
    fn other_dtypes_fall_back_to_candle() {
        let device = Device::Cpu;
        let x = Tensor::randn(0f64, 1.0, (2, 3, 5, 4), &device).unwrap();
        let w = Tensor::randn(0f64, 0.3, (2, 3, 3, 3), &device).unwrap();
        let bias = Tensor::new(&[0.5f64, -1.0], &device).unwrap();
        let ours = conv3x3(&x, &w, Some(&bias)).unwrap();
        let reference = x
            .conv2d(&w, 1, 1, 1, 1)
            .unwrap()
            .broadcast_add(&bias.reshape((1, 2, 1, 1)).unwrap())
            .unwrap();
        assert!(max_difference(&ours, &reference) < 1e-12);
    }
}
