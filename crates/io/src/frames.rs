//! Frames for video-language training: axial slices windowed to 8-bit grey PNG, sampled along
//! z. Sampling: `count` frames spread evenly from the first slice to the last (frame `f` is
//! slice `round(f·(n−1)/(count−1))`), then the frame nearest the key slice is moved onto it
//! exactly, so the key slice is always one of the frames; with `n ≤ count` every slice is a
//! frame. The frame → slice table is written with each case, so a key slice can be found in
//! the frames and back.
//!
//! PNGs hold pixels only (no text chunks, no timestamps): the same volume gives the same bytes.
//! Used by exports (files) and by remote backends (in-memory PNGs sent as image parts).

use std::path::Path;
use std::sync::LazyLock;

use keyslice_core::volume::{Volume, Voxels};

/// The frame rate at which a CT's frames are a video, everywhere a video-language model
/// sees them: the in-process Qwen3-VL, the OpenAI-compatible request (written into its
/// Motion-JPEG AVI, [`crate::avi`], so a server's video reader stamps the frames at this rate), and the exports (verl's and ms-swift's
/// `sample_fps`, LLaMA-Factory's `video_fps`). It is the default of `qwen_vl_utils` and
/// LLaMA-Factory, so a model trained with them sees the timestamps it is served with:
/// frames 0 and 1 are `<0.2 seconds>`, 2 and 3 `<1.2 seconds>`, …
pub const VIDEO_FPS: f64 = 2.0;

/// Soft-tissue window (width, level) in HU used for frames.
pub const FRAME_WINDOW_HU: (f32, f32) = (400.0, 40.0);

/// The slice index of each frame, in order (inferior to superior).
#[must_use]
pub fn sample_slices(slices: usize, count: usize, key_slice: Option<usize>) -> Vec<usize> {
    if slices == 0 || count == 0 {
        return Vec::new();
    }
    if slices <= count {
        return (0..slices).collect();
    }
    let mut frames: Vec<usize> = if count == 1 {
        vec![(slices - 1) / 2]
    } else {
        (0..count)
            .map(|f| ((f * (slices - 1)) as f64 / (count - 1) as f64).round() as usize)
            .collect()
    };
    if let Some(key) = key_slice.filter(|key| *key < slices)
        && let Some(nearest) = (0..frames.len()).min_by_key(|&f| frames[f].abs_diff(key))
    {
        // The key lies between the nearest frame's neighbours, so the order stays.
        frames[nearest] = key;
    }
    frames
}

/// The frame showing `slice`, if it is one.
#[must_use]
pub fn frame_of(frames: &[usize], slice: usize) -> Option<usize> {
    frames.iter().position(|&s| s == slice)
}

/// HU to 8-bit grey in the frame window.
#[must_use]
pub fn window_grey(hu: f32) -> u8 {
    let (width, level) = FRAME_WINDOW_HU;
    let low = level - width / 2.0;
    ((hu - low) / width * 255.0).round().clamp(0.0, 255.0) as u8
}

/// Axial slice `slice` of `volume` as 8-bit grey pixels (row-major) in the frame window;
/// black outside the volume.
#[must_use]
pub fn frame_grey(volume: &Volume, slice: usize) -> Vec<u8> {
    /// [`window_grey`] of every 16-bit value, so that integer CTs are windowed by lookup.
    static GREY_OF_I16: LazyLock<Vec<u8>> = LazyLock::new(|| {
        (i32::from(i16::MIN)..=i32::from(i16::MAX))
            .map(|value| window_grey(value as f32))
            .collect()
    });
    let [columns, rows, slices] = volume.dims();
    let plane = columns * rows;
    if slice >= slices {
        return vec![window_grey(-1000.0); plane];
    }
    let range = plane * slice..plane * (slice + 1);
    match volume.voxels() {
        Voxels::I16(values) => values[range]
            .iter()
            .map(|&value| GREY_OF_I16[(i32::from(value) - i32::from(i16::MIN)) as usize])
            .collect(),
        Voxels::F32(values) => values[range].iter().map(|&hu| window_grey(hu)).collect(),
    }
}

/// Axial slice `slice` of `volume` as grey PNG bytes in the frame window.
pub fn frame_png(volume: &Volume, slice: usize) -> std::io::Result<Vec<u8>> {
    let [columns, rows, _] = volume.dims();
    grey_png(&frame_grey(volume, slice), columns, rows)
}

/// 8-bit grey pixels (row-major) as PNG bytes.
pub fn grey_png(pixels: &[u8], columns: usize, rows: usize) -> std::io::Result<Vec<u8>> {
    let to_io = |error: png::EncodingError| std::io::Error::other(error.to_string());
    let mut bytes = Vec::new();
    let mut encoder = png::Encoder::new(
        &mut bytes,
        u32::try_from(columns).map_err(std::io::Error::other)?,
        u32::try_from(rows).map_err(std::io::Error::other)?,
    );
    encoder.set_color(png::ColorType::Grayscale);
    // The fastest deflate: frames are written per case and sent per request.
    encoder.set_compression(png::Compression::Fast);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(to_io)?;
    writer.write_image_data(pixels).map_err(to_io)?;
    writer.finish().map_err(to_io)?;
    Ok(bytes)
}

/// Writes axial slice `slice` of `volume` as a grey PNG in the frame window.
pub fn write_frame(volume: &Volume, slice: usize, path: &Path) -> std::io::Result<()> {
    std::fs::write(path, frame_png(volume, slice)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_spread_evenly_and_always_include_the_key_slice() {
        assert_eq!(sample_slices(5, 8, Some(2)), vec![0, 1, 2, 3, 4]);
        assert_eq!(sample_slices(101, 5, None), vec![0, 25, 50, 75, 100]);
        let frames = sample_slices(101, 5, Some(33));
        assert_eq!(frames, vec![0, 33, 50, 75, 100]);
        assert_eq!(frame_of(&frames, 33), Some(1));
        assert!(frames.windows(2).all(|pair| pair[0] < pair[1]));
        assert_eq!(sample_slices(0, 5, None), Vec::<usize>::new());
    }
}
