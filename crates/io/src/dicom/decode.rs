//! Decodes the pixel data of a stack's slices, in parallel, straight into the volume buffer.
//!
//! Each file is opened once (a multi-frame file's frames share it); samples are unpacked
//! according to Bits Allocated / Bits Stored / Pixel Representation and mapped to the
//! modality's unit with each frame's own Rescale Slope and Intercept. Plain little-endian
//! samples are read straight from where the header scan found them, into a buffer each
//! thread reuses (one read of the frame's bytes, no parse); everything else goes through
//! dicom-pixeldata's registry (big endian, deflate, RLE, JPEG, JPEG-LS, JPEG 2000).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use dicom_dictionary_std::{tags, uids};
use dicom_object::{InMemDicomObject, OpenFileOptions};
use dicom_pixeldata::PixelDecoder;
use rayon::prelude::*;

use super::codestream::{Expected, check_frame};
use super::header::{FileHeader, NativePixels};
use super::stack::Stack;
use crate::limits;

/// A small unsigned header value (Samples per Pixel, Bits Allocated).
fn header_u32(object: &InMemDicomObject, tag: dicom_core::Tag) -> Option<u32> {
    object
        .get(tag)
        .and_then(|element| element.to_int::<u32>().ok())
}

/// A voxel type the decoder can write: knows how to take a rescaled value.
pub(crate) trait Sample: Copy + Default + Send + Sync {
    /// Stores `raw · slope + intercept`; returns `false` if the value cannot be held exactly.
    fn store(raw: i64, slope: f64, intercept: f64, out: &mut Self) -> bool;

    /// Unpacks a frame of 16-bit little-endian samples in one tight loop, when this type has
    /// one for these rescale values: `Some(fits)`; `None` leaves it to the general path.
    fn unpack_16(
        _data: &[u8],
        _layout: SampleLayout,
        _slope: f64,
        _intercept: f64,
        _output: &mut [Self],
    ) -> Option<bool> {
        None
    }
}

impl Sample for i16 {
    fn unpack_16(
        data: &[u8],
        layout: SampleLayout,
        slope: f64,
        intercept: f64,
        output: &mut [Self],
    ) -> Option<bool> {
        // In 32-bit integers: a 16-bit sample times a slope of at most 2^14 plus an intercept
        // of at most 2^30 cannot overflow. (The i16 type is only chosen for integer rescales.)
        if slope.abs() > 16_384.0 || intercept.abs() > f64::from(1 << 30) {
            return None;
        }
        let (slope, intercept) = (slope as i32, intercept as i32);
        let bits_stored = u32::from(layout.bits_stored.clamp(1, 16));
        let unused = 32 - bits_stored;
        let mask = (1u32 << bits_stored) - 1;
        let mut fits = true;
        let samples = output.iter_mut().zip(data.chunks_exact(2));
        if layout.signed {
            for (out, pair) in samples {
                let raw = u32::from(u16::from_le_bytes([pair[0], pair[1]]));
                let value = (((raw << unused) as i32) >> unused) * slope + intercept;
                fits &= i32::from(value as i16) == value;
                *out = value as i16;
            }
        } else {
            for (out, pair) in samples {
                let raw = u32::from(u16::from_le_bytes([pair[0], pair[1]]));
                let value = ((raw & mask) as i32) * slope + intercept;
                fits &= i32::from(value as i16) == value;
                *out = value as i16;
            }
        }
        Some(fits)
    }

    fn store(raw: i64, slope: f64, intercept: f64, out: &mut Self) -> bool {
        // Only chosen when slope and intercept are integers, so this is exact integer maths;
        // a damaged header's huge slope overflows into "does not fit" (the f32 path).
        let value = raw
            .checked_mul(slope as i64)
            .and_then(|value| value.checked_add(intercept as i64))
            .and_then(|value| i16::try_from(value).ok());
        match value {
            Some(value) => {
                *out = value;
                true
            }
            None => false,
        }
    }
}

impl Sample for f32 {
    fn store(raw: i64, slope: f64, intercept: f64, out: &mut Self) -> bool {
        *out = (raw as f64 * slope + intercept) as f32;
        true
    }
}

/// Why a slice could not be decoded: what went wrong, and whether its file ended early
/// (what a copy cut short looks like, as against data no decoder reads).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceFault {
    /// What went wrong, in words.
    pub reason: String,
    /// The file ended before the slice's data did.
    pub incomplete: bool,
}

impl SliceFault {
    /// A file that ended before the slice's data did.
    fn incomplete(reason: String) -> Self {
        Self {
            reason,
            incomplete: true,
        }
    }
}

impl From<String> for SliceFault {
    fn from(reason: String) -> Self {
        Self {
            reason,
            incomplete: false,
        }
    }
}

impl From<&str> for SliceFault {
    fn from(reason: &str) -> Self {
        reason.to_string().into()
    }
}

impl From<limits::DecoderFailed> for SliceFault {
    fn from(failed: limits::DecoderFailed) -> Self {
        failed.to_string().into()
    }
}

impl std::fmt::Display for SliceFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

/// Outcome of decoding a stack.
pub(crate) struct Decoded<T> {
    pub voxels: Vec<T>,
    /// For each slice that failed: its index in the stack and why.
    pub failures: Vec<(usize, SliceFault)>,
    /// Whether some value did not fit the sample type (only possible for `i16`).
    pub overflow: bool,
}

/// Decodes every slice of `stack` into a buffer of `T` laid out slice after slice.
pub(crate) fn decode_stack<T: Sample>(files: &[FileHeader], stack: &Stack) -> Decoded<T> {
    let plane = stack.rows as usize * stack.columns as usize;
    let mut voxels = vec![T::default(); plane * stack.slices.len()];
    let overflow = AtomicBool::new(false);

    // Hand each file the output slices of its frames.
    let mut slots: Vec<Option<&mut [T]>> = voxels.chunks_mut(plane).map(Some).collect();
    let mut jobs: BTreeMap<usize, Vec<(usize, &mut [T])>> = BTreeMap::new();
    for (k, slice) in stack.slices.iter().enumerate() {
        if let Some(slot) = slots[k].take() {
            jobs.entry(slice.file).or_default().push((k, slot));
        }
    }
    let failures: Vec<(usize, SliceFault)> = jobs
        .into_par_iter()
        .flat_map_iter(|(file_index, outputs)| {
            decode_file(&files[file_index], stack, outputs, &overflow)
        })
        .collect();
    let mut failures = failures;
    failures.sort_by_key(|(k, _)| *k);
    Decoded {
        voxels,
        failures,
        overflow: overflow.load(Ordering::Relaxed),
    }
}

fn decode_file<T: Sample>(
    file: &FileHeader,
    stack: &Stack,
    outputs: Vec<(usize, &mut [T])>,
    overflow: &AtomicBool,
) -> Vec<(usize, SliceFault)> {
    let fail_all = |outputs: Vec<(usize, &mut [T])>, reason: SliceFault| {
        outputs
            .into_iter()
            .map(|(k, _)| (k, reason.clone()))
            .collect::<Vec<_>>()
    };
    if let Some(native) = file.native {
        return decode_native(file, native, stack, outputs, overflow);
    }
    let object = match limits::contain(|| OpenFileOptions::new().open_file(&file.path)) {
        Ok(Ok(object)) => object,
        Ok(Err(error)) => {
            return fail_all(
                outputs,
                SliceFault::incomplete(format!("the file could not be read to the end: {error}")),
            );
        }
        Err(reason) => return fail_all(outputs, reason.into()),
    };
    outputs
        .into_par_iter()
        .filter_map(|(k, output)| {
            let slice = &stack.slices[k];
            let result = check_codestream(file, &object, stack, slice.frame_index)
                .and_then(|()| {
                    limits::contain(|| object.decode_pixel_data_frame(slice.frame_index))
                        .map_err(SliceFault::from)
                })
                .and_then(|decoded| {
                    decoded.map_err(|error| {
                        format!("the pixel data cannot be decoded: {}", error_chain(&error)).into()
                    })
                })
                .and_then(|decoded| {
                    if decoded.samples_per_pixel() != 1 {
                        return Err(format!(
                            "{} samples per pixel (a colour image), not a grey-scale CT slice",
                            decoded.samples_per_pixel()
                        )
                        .into());
                    }
                    if decoded.rows() != stack.rows || decoded.columns() != stack.columns {
                        return Err(format!(
                            "decoded size {}×{} differs from the header's {}×{}",
                            decoded.columns(),
                            decoded.rows(),
                            stack.columns,
                            stack.rows
                        )
                        .into());
                    }
                    let layout = SampleLayout {
                        bits_allocated: decoded.bits_allocated(),
                        bits_stored: decoded.bits_stored(),
                        signed: file.pixel_signed,
                    };
                    unpack(
                        decoded.data(),
                        layout,
                        slice.rescale_slope,
                        slice.rescale_intercept,
                        output,
                    )
                });
            settle(file, k, result, overflow)
        })
        .collect()
}

/// A slice's outcome: a value that did not fit raises `overflow`; a failure becomes the
/// slice's reason, with the file's transfer syntax.
fn settle(
    file: &FileHeader,
    k: usize,
    result: Result<bool, SliceFault>,
    overflow: &AtomicBool,
) -> Option<(usize, SliceFault)> {
    match result {
        Ok(fits) => {
            if !fits {
                overflow.store(true, Ordering::Relaxed);
            }
            None
        }
        Err(fault) => Some((
            k,
            SliceFault {
                reason: format!(
                    "{} (transfer syntax {})",
                    fault.reason, file.transfer_syntax
                ),
                incomplete: fault.incomplete,
            },
        )),
    }
}

thread_local! {
    /// Each decoding thread's buffer for one frame's file bytes, reused from frame to frame.
    static FRAME_BYTES: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Reads each frame's plain samples from the file at the offset the header scan found and
/// unpacks them into its output slice.
fn decode_native<T: Sample>(
    file: &FileHeader,
    native: NativePixels,
    stack: &Stack,
    outputs: Vec<(usize, &mut [T])>,
    overflow: &AtomicBool,
) -> Vec<(usize, SliceFault)> {
    let opened = crate::limits::open_regular(&file.path);
    let layout = SampleLayout {
        bits_allocated: native.bits_allocated,
        bits_stored: native.bits_stored,
        signed: file.pixel_signed,
    };
    let frame_bytes =
        u64::from(stack.rows) * u64::from(stack.columns) * u64::from(native.bits_allocated / 8);
    outputs
        .into_par_iter()
        .filter_map(|(k, output)| {
            let slice = &stack.slices[k];
            let result = opened
                .as_ref()
                .map_err(|error| SliceFault::from(format!("the file cannot be opened: {error}")))
                .and_then(|opened| {
                    let skipped = u64::from(slice.frame_index) * frame_bytes;
                    // A short value is read as far as it goes: unpacking then names the shortfall.
                    let available = native.length.saturating_sub(skipped).min(frame_bytes);
                    FRAME_BYTES.with_borrow_mut(|bytes| {
                        bytes.resize(usize::try_from(available).unwrap_or(usize::MAX), 0);
                        read_at(opened, bytes, native.offset + skipped).map_err(|error| {
                            SliceFault::incomplete(format!(
                                "the file could not be read to the end: {error}"
                            ))
                        })?;
                        unpack(
                            bytes,
                            layout,
                            slice.rescale_slope,
                            slice.rescale_intercept,
                            output,
                        )
                    })
                });
            settle(file, k, result, overflow)
        })
        .collect()
}

/// Fills `buffer` from byte `offset` of `file` (the handle is shared between threads).
fn read_at(file: &std::fs::File, buffer: &mut [u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(file, buffer, offset)
    }
    #[cfg(not(unix))]
    {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = file.try_clone()?;
        file.seek(SeekFrom::Start(offset))?;
        file.read_exact(buffer)
    }
}

/// Checks frame `frame_index` of the opened `object` against the stack's image size.
fn check_codestream(
    file: &FileHeader,
    object: &InMemDicomObject,
    stack: &Stack,
    frame_index: u32,
) -> Result<(), SliceFault> {
    let expected = Expected {
        rows: stack.rows,
        columns: stack.columns,
        samples_per_pixel: header_u32(object, tags::SAMPLES_PER_PIXEL).unwrap_or(1),
        bits_allocated: header_u32(object, tags::BITS_ALLOCATED).unwrap_or(16),
    };
    let fragments = object
        .get(tags::PIXEL_DATA)
        .and_then(|element| element.value().fragments());
    let frame_count = file.frames.len();
    // The frame's first fragment: one fragment per frame, or a single frame.
    let fragment = fragments.and_then(|fragments| {
        if fragments.len() == frame_count {
            fragments.get(frame_index as usize)
        } else if frame_count == 1 {
            fragments.first()
        } else {
            None
        }
    });
    match fragment {
        Some(fragment) => {
            check_frame(&file.transfer_syntax, fragment, expected).map_err(SliceFault::from)
        }
        None if fragments.is_some_and(<[Vec<u8>]>::is_empty) => {
            Err("the encapsulated pixel data holds no fragment".into())
        }
        None => Ok(()),
    }
}

/// Before the volume's buffer is allocated: the first, middle and last slices' compressed
/// frames are checked against the header. When every one of them disagrees, the header is
/// what is wrong (a damaged Rows or Columns), and nothing is allocated for its size;
/// `Err((slice, reason))` names the first. A single bad slice is left to the decoder, which
/// leaves it out.
pub(crate) fn precheck_stack(
    files: &[FileHeader],
    stack: &Stack,
) -> Result<(), (usize, SliceFault)> {
    let last = stack.slices.len().saturating_sub(1);
    let mut sampled = vec![0, last / 2, last];
    sampled.dedup();
    let mut first_failure = None;
    for &k in &sampled {
        let slice = &stack.slices[k];
        let file = &files[slice.file];
        if !file.transfer_syntax.starts_with("1.2.840.10008.1.2.4")
            && file.transfer_syntax != uids::RLE_LOSSLESS
        {
            return Ok(()); // native pixel data: its length was checked with the header
        }
        let checked = match limits::contain(|| OpenFileOptions::new().open_file(&file.path)) {
            Ok(Ok(object)) => check_codestream(file, &object, stack, slice.frame_index),
            Ok(Err(error)) => Err(SliceFault::incomplete(format!(
                "the file could not be read to the end: {error}"
            ))),
            Err(reason) => Err(reason.into()),
        };
        match checked {
            Ok(()) => return Ok(()),
            Err(reason) => {
                first_failure.get_or_insert((k, reason));
            }
        }
    }
    first_failure.map_or(Ok(()), Err)
}

/// An error and its causes, joined with ": " (the codec's own message is usually the cause).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        // An error that shows its cause already ends with it; a short cause that merely
        // appears inside the message (a word, a number) is still added.
        if !message.ends_with(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct SampleLayout {
    pub bits_allocated: u16,
    pub bits_stored: u16,
    pub signed: bool,
}

/// Unpacks little-endian samples into `output`; `Ok(false)` when a value did not fit.
pub(crate) fn unpack<T: Sample>(
    data: &[u8],
    layout: SampleLayout,
    slope: f64,
    intercept: f64,
    output: &mut [T],
) -> Result<bool, SliceFault> {
    let bytes_per_sample = match layout.bits_allocated {
        8 => 1,
        16 => 2,
        32 => 4,
        other => {
            return Err(format!("Bits Allocated {other} is not supported (8, 16 or 32)").into());
        }
    };
    let needed = output.len() * bytes_per_sample;
    if data.len() < needed {
        return Err(SliceFault::incomplete(format!(
            "pixel data holds {} bytes, the image needs {needed}: the file is truncated",
            data.len()
        )));
    }
    if bytes_per_sample == 2
        && let Some(fits) = T::unpack_16(data, layout, slope, intercept, output)
    {
        return Ok(fits);
    }
    let bits_stored = u32::from(layout.bits_stored.clamp(1, layout.bits_allocated));
    let unused = 64 - bits_stored;
    let mask = if bits_stored >= 64 {
        u64::MAX
    } else {
        (1u64 << bits_stored) - 1
    };
    let to_value = |raw: u64| -> i64 {
        if layout.signed {
            // Move the sign bit of the stored value to bit 63, then shift back arithmetically.
            ((raw << unused) as i64) >> unused
        } else {
            (raw & mask) as i64
        }
    };
    let mut fits = true;
    match bytes_per_sample {
        1 => {
            for (out, &byte) in output.iter_mut().zip(data) {
                fits &= T::store(to_value(u64::from(byte)), slope, intercept, out);
            }
        }
        2 => {
            for (out, pair) in output.iter_mut().zip(data.chunks_exact(2)) {
                let raw = u16::from_le_bytes([pair[0], pair[1]]);
                fits &= T::store(to_value(u64::from(raw)), slope, intercept, out);
            }
        }
        _ => {
            for (out, quad) in output.iter_mut().zip(data.chunks_exact(4)) {
                let raw = u32::from_le_bytes([quad[0], quad[1], quad[2], quad[3]]);
                fits &= T::store(to_value(u64::from(raw)), slope, intercept, out);
            }
        }
    }
    Ok(fits)
}

#[cfg(test)]
#[expect(
    clippy::float_cmp,
    reason = "decoded values are exact; exact comparison is the point"
)]
mod tests {
    use super::*;

    /// An error with a cause, shown with the cause in its own text or not.
    #[derive(Debug)]
    struct Wrapped {
        text: &'static str,
        cause: std::io::Error,
    }

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.text)
        }
    }

    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.cause)
        }
    }

    #[test]
    fn an_error_chain_names_each_cause_once() {
        let cause = || std::io::Error::other("frame 3");
        let shown = Wrapped {
            text: "cannot decode: frame 3",
            cause: cause(),
        };
        assert_eq!(error_chain(&shown), "cannot decode: frame 3");
        // "frame 3" inside the message is not the cause shown: it is added.
        let hidden = Wrapped {
            text: "frame 3 of 9 cannot be decoded",
            cause: cause(),
        };
        assert_eq!(
            error_chain(&hidden),
            "frame 3 of 9 cannot be decoded: frame 3"
        );
    }

    #[test]
    fn twelve_bit_signed_samples_are_sign_extended() {
        // 0x0FFF is -1 in 12-bit two's complement; upper bits may hold junk (overlays).
        let data = [0xFF, 0x0F, 0xFF, 0xF7, 0x00, 0x08];
        let mut out = [0i16; 3];
        let layout = SampleLayout {
            bits_allocated: 16,
            bits_stored: 12,
            signed: true,
        };
        assert_eq!(unpack(&data, layout, 1.0, 0.0, &mut out), Ok(true));
        assert_eq!(out, [-1, 2047, -2048]);
    }

    #[test]
    fn unsigned_samples_are_masked_and_rescaled() {
        let data = [0x00, 0xF4, 0x18, 0x04]; // 0xF400 masked to 12 bits = 1024; 0x0418 = 1048
        let mut out = [0i16; 2];
        let layout = SampleLayout {
            bits_allocated: 16,
            bits_stored: 12,
            signed: false,
        };
        assert_eq!(unpack(&data, layout, 1.0, -1024.0, &mut out), Ok(true));
        assert_eq!(out, [0, 24]);
    }

    #[test]
    fn values_beyond_int16_are_reported() {
        let data = [0xFF, 0xFF];
        let mut out = [0i16; 1];
        let layout = SampleLayout {
            bits_allocated: 16,
            bits_stored: 16,
            signed: false,
        };
        assert_eq!(unpack(&data, layout, 1.0, 0.0, &mut out), Ok(false));
        let mut wide = [0f32; 1];
        assert_eq!(unpack(&data, layout, 0.5, -10.0, &mut wide), Ok(true));
        assert_eq!(wide, [32757.5]);
    }

    #[test]
    fn the_sixteen_bit_loop_agrees_with_the_general_path_on_every_sample() {
        let data: Vec<u8> = (0..=u16::MAX).flat_map(u16::to_le_bytes).collect();
        for (bits_stored, signed) in [(16, true), (16, false), (12, true), (12, false)] {
            let layout = SampleLayout {
                bits_allocated: 16,
                bits_stored,
                signed,
            };
            for (slope, intercept) in [(1.0, 0.0), (1.0, -1024.0), (2.0, 30_000.0), (-1.0, 5.0)] {
                let mut narrow = vec![0i16; 1 << 16];
                let mut wide = vec![0f32; 1 << 16];
                let fits = unpack(&data, layout, slope, intercept, &mut narrow).expect("unpacks");
                assert_eq!(unpack(&data, layout, slope, intercept, &mut wide), Ok(true));
                let in_range = wide
                    .iter()
                    .all(|&value| (-32768.0..=32767.0).contains(&value));
                assert_eq!(fits, in_range, "{layout:?} {slope} {intercept}");
                if fits {
                    for (n, (&a, &b)) in narrow.iter().zip(&wide).enumerate() {
                        assert_eq!(
                            f32::from(a),
                            b,
                            "sample {n:#06x} {layout:?} {slope} {intercept}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn short_pixel_data_is_an_error() {
        let mut out = [0i16; 4];
        let layout = SampleLayout {
            bits_allocated: 16,
            bits_stored: 16,
            signed: true,
        };
        let error = unpack(&[0u8; 6], layout, 1.0, 0.0, &mut out).expect_err("too short");
        assert!(error.incomplete, "{error}");
        assert!(error.reason.contains("truncated"), "{error}");
    }
}
