//! Images and videos into the vision tower's patches, as the `transformers` processors
//! (`Qwen2VLImageProcessor`, `Qwen3VLVideoProcessor`) do it:
//!
//! 1. size: [`smart_resize`] picks a height and width that are multiples of
//!    `patch_size * merge_size` (32) with the pixel count inside the checkpoint's bounds
//!    (for a video, bounds on all frames together), keeping the aspect ratio;
//! 2. resize: bicubic with antialiasing on 8-bit pixels ([`resize_rgb`], PIL's algorithm,
//!    which torchvision's uint8 path follows); skipped when the size is already right;
//! 3. values: `(pixel / 255 - mean) / std` per channel;
//! 4. patches: frames grouped by `temporal_patch_size` (an image is repeated, a video's last
//!    frame is repeated to fill the last group), cut into `patch_size` squares, ordered so
//!    that each `merge_size x merge_size` block of patches is contiguous; each patch is one row
//!    of `channels * temporal * patch * patch` values in (channel, time, y, x) order.

use super::config::ProcessorConfig;

/// An 8-bit RGB frame, rows top to bottom, `width * 3` bytes per row.
#[derive(Debug, Clone)]
pub struct RgbFrame {
    pub width: usize,
    pub height: usize,
    pub pixels: Vec<u8>,
}

impl RgbFrame {
    /// A grey frame as RGB (each value repeated three times).
    #[must_use]
    pub fn from_grey(width: usize, height: usize, grey: &[u8]) -> Self {
        let pixels = grey.iter().flat_map(|&g| [g, g, g]).collect();
        Self {
            width,
            height,
            pixels,
        }
    }
}

/// The patches of one image or video and its grid in patches (temporal, height, width).
#[derive(Debug, Clone)]
pub struct Patches {
    /// `grid_t * grid_h * grid_w` rows of `patch_len` values.
    pub values: Vec<f32>,
    pub patch_len: usize,
    pub grid_thw: [usize; 3],
}

fn round_half_even(x: f64) -> f64 {
    x.round_ties_even()
}

/// The processors' `smart_resize`: a `(height, width)` divisible by `factor`, with
/// `frames * height * width` between `min_pixels` and `max_pixels` (`video_frames` is `None`
/// for an image), aspect ratio kept as closely as possible.
pub fn smart_resize(
    video_frames: Option<usize>,
    temporal_factor: usize,
    height: usize,
    width: usize,
    factor: usize,
    min_pixels: usize,
    max_pixels: usize,
) -> Result<(usize, usize), String> {
    let (mut h, mut w) = (height as f64, width as f64);
    let f = factor as f64;
    if video_frames.is_some() && (h < f || w < f) {
        let scale = (f / h).max(f / w);
        h = (h * scale).floor();
        w = (w * scale).floor();
    }
    if h.max(w) / h.min(w).max(1.0) > 200.0 {
        return Err(format!(
            "aspect ratio {width}x{height} is beyond 200:1, which Qwen3-VL does not take"
        ));
    }
    let (t, n) = match video_frames {
        Some(frames) => (
            (round_half_even(frames as f64 / temporal_factor as f64) * temporal_factor as f64)
                as usize,
            frames as f64,
        ),
        None => (1, 1.0),
    };
    let mut h_bar = (round_half_even(h / f) * f) as usize;
    let mut w_bar = (round_half_even(w / f) * f) as usize;
    if t * h_bar * w_bar > max_pixels {
        let beta = ((n * h * w) / max_pixels as f64).sqrt();
        h_bar = factor.max(((h / beta / f).floor() * f) as usize);
        w_bar = factor.max(((w / beta / f).floor() * f) as usize);
    } else if t * h_bar * w_bar < min_pixels {
        let beta = (min_pixels as f64 / (n * h * w)).sqrt();
        h_bar = ((h * beta / f).ceil() * f) as usize;
        w_bar = ((w * beta / f).ceil() * f) as usize;
    }
    Ok((h_bar.max(factor), w_bar.max(factor)))
}

fn bicubic(x: f64) -> f64 {
    // PIL's bicubic kernel (a = -0.5).
    const A: f64 = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * A
    } else {
        0.0
    }
}

const PRECISION_BITS: u32 = 32 - 8 - 2;

/// Fixed-point taps of one output position: first input index and weights.
fn coefficients(in_size: usize, out_size: usize) -> Vec<(usize, Vec<i32>)> {
    let scale = in_size as f64 / out_size as f64;
    let filterscale = scale.max(1.0);
    let support = 2.0 * filterscale;
    (0..out_size)
        .map(|xx| {
            let center = (xx as f64 + 0.5) * scale;
            let xmin = ((center - support + 0.5) as i64).max(0) as usize;
            let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
            let mut k: Vec<f64> = (xmin..xmax)
                .map(|x| bicubic((x as f64 - center + 0.5) / filterscale))
                .collect();
            let total: f64 = k.iter().sum();
            if total != 0.0 {
                for w in &mut k {
                    *w /= total;
                }
            }
            let fixed = k
                .iter()
                .map(|&w| {
                    let v = w * f64::from(1u32 << PRECISION_BITS);
                    if v < 0.0 {
                        (v - 0.5).trunc() as i32
                    } else {
                        (v + 0.5).trunc() as i32
                    }
                })
                .collect();
            (xmin, fixed)
        })
        .collect()
}

fn clip8(v: i64) -> u8 {
    (v >> PRECISION_BITS).clamp(0, 255) as u8
}

/// Bicubic resize with antialiasing (PIL's `Image.resize(BICUBIC)`, 8-bit fixed point, a
/// horizontal pass then a vertical one).
#[must_use]
pub fn resize_rgb(src: &RgbFrame, width: usize, height: usize) -> RgbFrame {
    let mut cur = src.clone();
    if width != cur.width {
        let coeffs = coefficients(cur.width, width);
        let mut out = vec![0u8; width * cur.height * 3];
        for y in 0..cur.height {
            let row = &cur.pixels[y * cur.width * 3..(y + 1) * cur.width * 3];
            for (x, (xmin, k)) in coeffs.iter().enumerate() {
                for c in 0..3 {
                    let mut ss: i64 = 1 << (PRECISION_BITS - 1);
                    for (i, &w) in k.iter().enumerate() {
                        ss += i64::from(row[(xmin + i) * 3 + c]) * i64::from(w);
                    }
                    out[(y * width + x) * 3 + c] = clip8(ss);
                }
            }
        }
        cur = RgbFrame {
            width,
            height: cur.height,
            pixels: out,
        };
    }
    if height != cur.height {
        let coeffs = coefficients(cur.height, height);
        let w3 = cur.width * 3;
        let mut out = vec![0u8; w3 * height];
        for (y, (ymin, k)) in coeffs.iter().enumerate() {
            for x in 0..w3 {
                let mut ss: i64 = 1 << (PRECISION_BITS - 1);
                for (i, &w) in k.iter().enumerate() {
                    ss += i64::from(cur.pixels[(ymin + i) * w3 + x]) * i64::from(w);
                }
                out[y * w3 + x] = clip8(ss);
            }
        }
        cur = RgbFrame {
            width: cur.width,
            height,
            pixels: out,
        };
    }
    cur
}

fn normalised(frame: &RgbFrame, cfg: &ProcessorConfig) -> Vec<f32> {
    // Channel-first planes, as the processors hold them.
    let n = frame.width * frame.height;
    let mut out = vec![0f32; 3 * n];
    let scale = cfg.rescale_factor as f32;
    for i in 0..n {
        for c in 0..3 {
            let v = f32::from(frame.pixels[i * 3 + c]) * scale;
            out[c * n + i] = (v - cfg.image_mean[c]) / cfg.image_std[c];
        }
    }
    out
}

/// Cut same-sized frames (already resized) into patches; `frames.len()` must be a multiple of
/// `temporal_patch_size`.
fn patchify(frames: &[Vec<f32>], width: usize, height: usize, cfg: &ProcessorConfig) -> Patches {
    let (p, m, tp) = (cfg.patch_size, cfg.merge_size, cfg.temporal_patch_size);
    let (gt, gh, gw) = (frames.len() / tp, height / p, width / p);
    let patch_len = 3 * tp * p * p;
    let mut values = Vec::with_capacity(gt * gh * gw * patch_len);
    let plane = width * height;
    for t in 0..gt {
        for bh in 0..gh / m {
            for bw in 0..gw / m {
                for ih in 0..m {
                    for iw in 0..m {
                        let (py, px) = ((bh * m + ih) * p, (bw * m + iw) * p);
                        for c in 0..3 {
                            for dt in 0..tp {
                                let frame = &frames[t * tp + dt];
                                for y in 0..p {
                                    let start = c * plane + (py + y) * width + px;
                                    values.extend_from_slice(&frame[start..start + p]);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    Patches {
        values,
        patch_len,
        grid_thw: [gt, gh, gw],
    }
}

/// An image or video the processor cannot take: what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct UnfitInput {
    /// What is wrong.
    pub reason: String,
}

/// One image into patches.
pub fn image_patches(image: &RgbFrame, cfg: &ProcessorConfig) -> Result<Patches, UnfitInput> {
    image_patches_of(image, cfg).map_err(|reason| UnfitInput { reason })
}

fn image_patches_of(image: &RgbFrame, cfg: &ProcessorConfig) -> Result<Patches, String> {
    let factor = cfg.patch_size * cfg.merge_size;
    let (min_pixels, max_pixels) = cfg.pixel_bounds(false);
    let (h, w) = if cfg.do_resize {
        smart_resize(
            None,
            cfg.temporal_patch_size,
            image.height,
            image.width,
            factor,
            min_pixels,
            max_pixels,
        )?
    } else {
        (image.height, image.width)
    };
    if h % factor != 0 || w % factor != 0 {
        return Err(format!(
            "image is {}x{}; without resizing it must be a multiple of {factor} on both sides",
            image.width, image.height
        ));
    }
    let resized = resize_rgb(image, w, h);
    let plane = normalised(&resized, cfg);
    let frames = vec![plane; cfg.temporal_patch_size];
    Ok(patchify(&frames, w, h, cfg))
}

/// A video's frames (all the same size) into patches.
pub fn video_patches(frames: &[RgbFrame], cfg: &ProcessorConfig) -> Result<Patches, UnfitInput> {
    video_patches_of(frames, cfg).map_err(|reason| UnfitInput { reason })
}

fn video_patches_of(frames: &[RgbFrame], cfg: &ProcessorConfig) -> Result<Patches, String> {
    let first = frames.first().ok_or("the video has no frames")?;
    if let Some(bad) = frames
        .iter()
        .position(|f| f.width != first.width || f.height != first.height)
    {
        return Err(format!(
            "frame {bad} is {}x{} but frame 0 is {}x{}: all frames must be the same size",
            frames[bad].width, frames[bad].height, first.width, first.height
        ));
    }
    let tp = cfg.temporal_patch_size;
    if frames.len() < tp {
        return Err(format!("a video needs at least {tp} frames"));
    }
    let factor = cfg.patch_size * cfg.merge_size;
    let (min_pixels, max_pixels) = cfg.pixel_bounds(true);
    let (h, w) = if cfg.do_resize {
        smart_resize(
            Some(frames.len()),
            tp,
            first.height,
            first.width,
            factor,
            min_pixels,
            max_pixels,
        )?
    } else {
        (first.height, first.width)
    };
    let mut planes: Vec<Vec<f32>> = frames
        .iter()
        .map(|f| normalised(&resize_rgb(f, w, h), cfg))
        .collect();
    while !planes.len().is_multiple_of(tp) {
        let last = planes[planes.len() - 1].clone();
        planes.push(last);
    }
    Ok(patchify(&planes, w, h, cfg))
}

/// The timestamp of each temporal patch (seconds, the mean of its first and last frame's
/// times), for frames sampled at `indices` of a video at `fps`; the prompt shows them as
/// `<0.2 seconds>`.
#[must_use]
pub fn timestamps(indices: &[usize], fps: f64, temporal_patch_size: usize) -> Vec<f64> {
    let mut idx: Vec<usize> = indices.to_vec();
    while !idx.is_empty() && !idx.len().is_multiple_of(temporal_patch_size) {
        idx.push(idx[idx.len() - 1]);
    }
    idx.chunks(temporal_patch_size)
        .map(|c| f64::midpoint(c[0] as f64 / fps, c[c.len() - 1] as f64 / fps))
        .collect()
}

/// Which of `total` frames to keep when at most `max` are taken: evenly spaced, first and last
/// included (`numpy.linspace(0, total - 1, n).round()`).
#[must_use]
pub fn sample_indices(total: usize, max: usize) -> Vec<usize> {
    if total <= max || max < 2 {
        return (0..total.min(max.max(1))).collect();
    }
    (0..max)
        .map(|i| round_half_even(i as f64 * (total - 1) as f64 / (max - 1) as f64) as usize)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smart_resize_matches_the_reference_rules() {
        // Already a multiple of 32 and inside the bounds: unchanged.
        assert_eq!(smart_resize(None, 2, 64, 96, 32, 2048, 16384), Ok((64, 96)));
        // 50 x 70 rounds to 64 x 64 (ties go to even, as Python's round does).
        assert_eq!(smart_resize(None, 2, 50, 70, 32, 2048, 16384), Ok((64, 64)));
        assert_eq!(smart_resize(None, 2, 48, 48, 32, 0, 1 << 20), Ok((64, 64)));
        // Too many pixels: scaled down, still multiples of 32.
        let (h, w) = smart_resize(None, 2, 512, 512, 32, 2048, 16384).unwrap();
        assert!(h * w <= 16384 && h % 32 == 0 && w % 32 == 0, "{h}x{w}");
        assert!(smart_resize(None, 2, 10, 3000, 32, 0, 1 << 30).is_err());
    }

    #[test]
    fn timestamps_average_each_temporal_patch() {
        assert_eq!(timestamps(&[0, 1, 2, 3, 4], 2.0, 2), vec![0.25, 1.25, 2.0]);
        assert_eq!(format!("{:.1}", 0.25), "0.2");
        assert_eq!(sample_indices(10, 4), vec![0, 3, 6, 9]);
        assert_eq!(sample_indices(3, 8), vec![0, 1, 2]);
    }

    #[test]
    fn resize_keeps_a_flat_image_flat_and_identity_is_exact() {
        let flat = RgbFrame::from_grey(7, 5, &[100; 35]);
        let r = resize_rgb(&flat, 12, 9);
        assert!(r.pixels.iter().all(|&v| v == 100));
        let grad: Vec<u8> = (0..35).map(|i| (i * 7) as u8).collect();
        let g = RgbFrame::from_grey(7, 5, &grad);
        assert_eq!(resize_rgb(&g, 7, 5).pixels, g.pixels);
    }
}
