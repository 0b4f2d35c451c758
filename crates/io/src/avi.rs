//! Motion-JPEG AVI: JPEG frames in an AVI 1.0 (RIFF) container whose headers carry the frame
//! rate. A video-language server decodes such a file with its own video reader (vLLM: `OpenCV`
//! or its `FFmpeg`; `SGLang`: decord), and takes the frame rate, and so each frame's timestamp, from
//! the file itself: no per-request setting is needed for a stock server to read the CT at
//! [`crate::frames::VIDEO_FPS`].
//!
//! The layout (all sizes little-endian, every chunk padded to an even length):
//!
//! ```text
//! RIFF 'AVI '
//!   LIST 'hdrl'
//!     'avih' (main header: µs per frame, frame count, size)
//!     LIST 'strl'
//!       'strh' ('vids', 'MJPG', rate/scale = frames per second, length)
//!       'strf' (BITMAPINFOHEADER, compression 'MJPG')
//!   LIST 'movi'
//!     '00dc' JPEG …            (one chunk per frame)
//!   'idx1'                     (offset and size of each frame, all key frames)
//! ```

/// `AVIF_HASINDEX`: the file ends with an `idx1` index.
const AVIF_HASINDEX: u32 = 0x10;
/// `AVIIF_KEYFRAME`: every Motion-JPEG frame stands alone.
const AVIIF_KEYFRAME: u32 = 0x10;

/// Why frames cannot be an AVI.
#[derive(Debug, thiserror::Error)]
pub enum AviError {
    /// No frames were given.
    #[error("a video needs at least one frame")]
    NoFrames,
    /// The frame rate is not a positive finite number.
    #[error("frame rate {0} is not a positive number")]
    FrameRate(f64),
    /// The file would pass the 1 GiB that AVI 1.0 readers accept.
    #[error("{0} bytes of frames are more than one AVI 1.0 file holds (1 GiB)")]
    TooLarge(usize),
}

/// The rate as AVI writes it: `rate / scale` frames per second (`2 / 1` for 2 fps; a
/// fractional rate to a thousandth).
fn rate_and_scale(fps: f64) -> (u32, u32) {
    let whole = fps.round();
    if (fps - whole).abs() < 1e-9 && (1.0..=f64::from(u32::MAX)).contains(&whole) {
        // Whole by the check above, and in range.
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "checked"
        )]
        return (whole as u32, 1);
    }
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a positive rate to a thousandth; a rate past four million frames per second saturates"
    )]
    let thousandths = (fps * 1000.0).round().max(1.0) as u32;
    (thousandths, 1000)
}

/// A chunk: its four-character code, its size and its bytes, padded to an even length.
fn chunk(out: &mut Vec<u8>, id: [u8; 4], body: &[u8]) {
    out.extend_from_slice(&id);
    out.extend_from_slice(&len32(body.len()).to_le_bytes());
    out.extend_from_slice(body);
    if body.len() % 2 == 1 {
        out.push(0);
    }
}

/// A list: `LIST`, its size, its type and its chunks.
fn list(out: &mut Vec<u8>, kind: [u8; 4], body: &[u8]) {
    out.extend_from_slice(b"LIST");
    out.extend_from_slice(&len32(body.len() + 4).to_le_bytes());
    out.extend_from_slice(&kind);
    out.extend_from_slice(body);
}

/// A length within an AVI 1.0 file (checked against 1 GiB before any is written).
fn len32(length: usize) -> u32 {
    u32::try_from(length).unwrap_or(u32::MAX)
}

/// The largest file written: AVI 1.0 readers stop at 1 GiB.
const MAX_FILE: usize = 1 << 30;

/// `jpegs` (each a whole JPEG of `width` × `height` pixels) as a Motion-JPEG AVI at `fps`
/// frames per second.
pub fn mjpeg_avi(
    jpegs: &[Vec<u8>],
    width: u32,
    height: u32,
    fps: f64,
) -> Result<Vec<u8>, AviError> {
    if jpegs.is_empty() {
        return Err(AviError::NoFrames);
    }
    if !(fps.is_finite() && fps > 0.0) {
        return Err(AviError::FrameRate(fps));
    }
    let frame_bytes: usize = jpegs.iter().map(|jpeg| jpeg.len() + 9).sum();
    if frame_bytes + 16 * jpegs.len() + 512 > MAX_FILE {
        return Err(AviError::TooLarge(frame_bytes));
    }
    let (rate, scale) = rate_and_scale(fps);
    let frames = len32(jpegs.len());
    let largest = len32(jpegs.iter().map(Vec::len).max().unwrap_or(0));
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "microseconds per frame of a positive rate; below one frame a second per hour it saturates"
    )]
    let micros_per_frame = (1e6 / fps).round().min(f64::from(u32::MAX)) as u32;

    let mut avih = Vec::with_capacity(56);
    for value in [
        micros_per_frame,
        // Bytes per second at the largest frame.
        largest.saturating_mul(rate.div_ceil(scale)),
        0,
        AVIF_HASINDEX,
        frames,
        0,
        1,
        largest,
        width,
        height,
        0,
        0,
        0,
        0,
    ] {
        avih.extend_from_slice(&value.to_le_bytes());
    }

    let mut strh = Vec::with_capacity(56);
    strh.extend_from_slice(b"vids");
    strh.extend_from_slice(b"MJPG");
    for value in [0_u32, 0, 0, scale, rate, 0, frames, largest, u32::MAX, 0] {
        // dwFlags, wPriority + wLanguage, dwInitialFrames, dwScale, dwRate, dwStart,
        // dwLength, dwSuggestedBufferSize, dwQuality (-1: default), dwSampleSize.
        strh.extend_from_slice(&value.to_le_bytes());
    }
    // rcFrame: left, top, right, bottom.
    for value in [0_u16, 0, clamp16(width), clamp16(height)] {
        strh.extend_from_slice(&value.to_le_bytes());
    }

    let mut strf = Vec::with_capacity(40);
    strf.extend_from_slice(&40_u32.to_le_bytes());
    strf.extend_from_slice(&width.to_le_bytes());
    strf.extend_from_slice(&height.to_le_bytes());
    strf.extend_from_slice(&1_u16.to_le_bytes());
    strf.extend_from_slice(&24_u16.to_le_bytes());
    strf.extend_from_slice(b"MJPG");
    for value in [width.saturating_mul(height).saturating_mul(3), 0, 0, 0, 0] {
        strf.extend_from_slice(&value.to_le_bytes());
    }

    let mut strl = Vec::new();
    chunk(&mut strl, *b"strh", &strh);
    chunk(&mut strl, *b"strf", &strf);
    let mut hdrl = Vec::new();
    chunk(&mut hdrl, *b"avih", &avih);
    list(&mut hdrl, *b"strl", &strl);

    let mut movi = Vec::with_capacity(frame_bytes);
    let mut index = Vec::with_capacity(16 * jpegs.len());
    for jpeg in jpegs {
        // Offsets count from the 'movi' type code, as readers expect.
        let offset = len32(movi.len() + 4);
        chunk(&mut movi, *b"00dc", jpeg);
        index.extend_from_slice(b"00dc");
        index.extend_from_slice(&AVIIF_KEYFRAME.to_le_bytes());
        index.extend_from_slice(&offset.to_le_bytes());
        index.extend_from_slice(&len32(jpeg.len()).to_le_bytes());
    }

    let mut body = Vec::with_capacity(hdrl.len() + movi.len() + index.len() + 64);
    body.extend_from_slice(b"AVI ");
    list(&mut body, *b"hdrl", &hdrl);
    list(&mut body, *b"movi", &movi);
    chunk(&mut body, *b"idx1", &index);
    let mut file = Vec::with_capacity(body.len() + 8);
    file.extend_from_slice(b"RIFF");
    file.extend_from_slice(&len32(body.len()).to_le_bytes());
    file.extend_from_slice(&body);
    Ok(file)
}

fn clamp16(value: u32) -> u16 {
    u16::try_from(value).unwrap_or(u16::MAX)
}

/// The frame count and frame rate an AVI's main header states (for a request's own check of
/// what it sends), or `None` when `bytes` do not start as an AVI.
#[must_use]
pub fn avi_header(bytes: &[u8]) -> Option<(u32, f64)> {
    let word = |at: usize| {
        bytes
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
    };
    if bytes.get(0..4)? != b"RIFF" || bytes.get(8..12)? != b"AVI " || bytes.get(24..28)? != b"avih"
    {
        return None;
    }
    let micros = word(32)?;
    let frames = word(48)?;
    (micros > 0).then(|| (frames, 1e6 / f64::from(micros)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chunks of a RIFF list body, as (code, body).
    fn chunks(mut body: &[u8]) -> Vec<([u8; 4], &[u8])> {
        let mut out = Vec::new();
        while body.len() >= 8 {
            let id: [u8; 4] = body[0..4].try_into().expect("four bytes");
            let size = u32::from_le_bytes(body[4..8].try_into().expect("four bytes")) as usize;
            out.push((id, &body[8..8 + size]));
            body = &body[(8 + size + size % 2).min(body.len())..];
        }
        out
    }

    #[test]
    fn frames_rate_and_index_are_where_readers_look() {
        let jpegs = vec![
            vec![0xFF, 0xD8, 1, 0xFF, 0xD9],
            vec![0xFF, 0xD8, 2, 2, 0xFF, 0xD9],
        ];
        let avi = mjpeg_avi(&jpegs, 48, 40, 2.0).expect("written");
        assert_eq!(&avi[0..4], b"RIFF");
        assert_eq!(
            u32::from_le_bytes(avi[4..8].try_into().expect("four bytes")) as usize,
            avi.len() - 8
        );
        assert_eq!(avi_header(&avi), Some((2, 2.0)));
        let top = chunks(&avi[12..]);
        let codes: Vec<&[u8]> = top.iter().map(|(id, _)| &id[..]).collect();
        assert_eq!(codes, [b"LIST", b"LIST", b"idx1"]);
        let hdrl = chunks(&top[0].1[4..]);
        let strl = chunks(&hdrl[1].1[4..]);
        let strh = strl[0].1;
        assert_eq!(&strh[0..8], b"vidsMJPG");
        let scale = u32::from_le_bytes(strh[20..24].try_into().expect("four bytes"));
        let rate = u32::from_le_bytes(strh[24..28].try_into().expect("four bytes"));
        assert_eq!((rate, scale), (2, 1));
        let movi = &top[1].1;
        assert_eq!(&movi[0..4], b"movi");
        let frames = chunks(&movi[4..]);
        assert_eq!(frames.len(), 2);
        assert!(
            frames
                .iter()
                .zip(&jpegs)
                .all(|((id, body), jpeg)| id == b"00dc" && body == jpeg)
        );
        // Each index entry points at its frame's chunk, counted from 'movi'.
        let index = top[2].1;
        for (k, jpeg) in jpegs.iter().enumerate() {
            let entry = &index[16 * k..16 * k + 16];
            let offset = u32::from_le_bytes(entry[8..12].try_into().expect("four bytes")) as usize;
            let size = u32::from_le_bytes(entry[12..16].try_into().expect("four bytes")) as usize;
            assert_eq!(&movi[offset..offset + 4], b"00dc");
            assert_eq!(&movi[offset + 8..offset + 8 + size], &jpeg[..]);
        }
    }

    #[test]
    fn odd_rates_and_bad_input() {
        assert_eq!(rate_and_scale(2.0), (2, 1));
        assert_eq!(rate_and_scale(29.97), (29_970, 1000));
        assert_eq!(rate_and_scale(0.5), (500, 1000));
        assert!(matches!(mjpeg_avi(&[], 4, 4, 2.0), Err(AviError::NoFrames)));
        for fps in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                mjpeg_avi(&[vec![1]], 4, 4, fps),
                Err(AviError::FrameRate(_))
            ));
        }
        assert_eq!(avi_header(b"RIFF\0\0\0\0WAVE"), None);
        assert_eq!(avi_header(b""), None);
    }
}
