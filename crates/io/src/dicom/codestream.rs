//! Checks a compressed frame against the header before a codec sees it.
//!
//! The codecs behind dicom-pixeldata trust Rows, Columns and Samples per Pixel: a frame whose
//! own codestream says another size made them index past their buffers (a panic) or abort.
//! This module reads the size each codestream declares (JPEG and JPEG-LS start-of-frame,
//! JPEG 2000 SIZ, the RLE segment table) and refuses a frame that disagrees with the header,
//! with a sentence naming both sizes.

use dicom_dictionary_std::uids;

/// What the header promises about one frame.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Expected {
    pub rows: u32,
    pub columns: u32,
    pub samples_per_pixel: u32,
    pub bits_allocated: u32,
}

/// The families of encapsulated transfer syntaxes, by UID.
fn family(transfer_syntax: &str) -> Option<Family> {
    match transfer_syntax {
        uids::RLE_LOSSLESS => Some(Family::Rle),
        uids::JPEGLS_LOSSLESS | uids::JPEGLS_NEAR_LOSSLESS => Some(Family::Jpeg),
        uid if uid.starts_with("1.2.840.10008.1.2.4.5")
            || uid.starts_with("1.2.840.10008.1.2.4.6")
            || uid.starts_with("1.2.840.10008.1.2.4.7") =>
        {
            Some(Family::Jpeg)
        }
        uid if uid.starts_with("1.2.840.10008.1.2.4.9")
            || uid.starts_with("1.2.840.10008.1.2.4.20") =>
        {
            Some(Family::Jpeg2000)
        }
        _ => None,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Jpeg,
    Jpeg2000,
    Rle,
}

/// `Ok` when the frame's first fragment agrees with `expected` (or the syntax is not one
/// this module reads); otherwise what disagrees.
pub(crate) fn check_frame(
    transfer_syntax: &str,
    fragment: &[u8],
    expected: Expected,
) -> Result<(), String> {
    let Some(family) = family(transfer_syntax) else {
        return Ok(());
    };
    let (columns, rows, components) = match family {
        Family::Jpeg => jpeg_size(fragment)?,
        Family::Jpeg2000 => jpeg2000_size(fragment)?,
        Family::Rle => return check_rle(fragment, expected),
    };
    if columns != expected.columns || rows != expected.rows {
        return Err(format!(
            "the compressed frame is {columns}×{rows} but Columns × Rows (0028,0011/0010) say {}×{}",
            expected.columns, expected.rows
        ));
    }
    if components != expected.samples_per_pixel {
        return Err(format!(
            "the compressed frame has {components} component(s) but Samples per Pixel (0028,0002) is {}",
            expected.samples_per_pixel
        ));
    }
    Ok(())
}

/// Width, height and components from a JPEG (or JPEG-LS) start-of-frame segment.
fn jpeg_size(data: &[u8]) -> Result<(u32, u32, u32), String> {
    if data.len() < 4 || data[0] != 0xFF || data[1] != 0xD8 {
        return Err("the compressed frame does not start with a JPEG start-of-image marker".into());
    }
    let mut at = 2;
    while at + 4 <= data.len() {
        if data[at] != 0xFF {
            return Err(format!("the JPEG stream has no marker at byte {at}"));
        }
        let marker = data[at + 1];
        if marker == 0xFF {
            at += 1; // fill byte
            continue;
        }
        let length = usize::from(u16::from_be_bytes([data[at + 2], data[at + 3]]));
        let is_frame_header =
            matches!(marker, 0xC0..=0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF | 0xF7);
        if is_frame_header {
            if length < 8 || at + 2 + length > data.len() {
                return Err("the JPEG frame header is cut short".into());
            }
            let segment = &data[at + 4..at + 2 + length];
            let height = u32::from(u16::from_be_bytes([segment[1], segment[2]]));
            let width = u32::from(u16::from_be_bytes([segment[3], segment[4]]));
            let components = u32::from(segment[5]);
            return Ok((width, height, components));
        }
        if marker == 0xDA || marker == 0xD9 || length < 2 {
            break; // scan data or end of image before any frame header
        }
        at += 2 + length;
    }
    Err("the JPEG stream has no frame header (start-of-frame marker)".into())
}

/// Width, height and components from a JPEG 2000 codestream's SIZ segment (a JP2 file
/// wrapper is searched for its codestream).
fn jpeg2000_size(data: &[u8]) -> Result<(u32, u32, u32), String> {
    let start = data
        .windows(4)
        .take(4096)
        .position(|window| window == [0xFF, 0x4F, 0xFF, 0x51])
        .ok_or("the compressed frame holds no JPEG 2000 codestream (SOC and SIZ markers)")?;
    let siz = &data[start + 4..];
    // Lsiz(2) Rsiz(2) Xsiz(4) Ysiz(4) XOsiz(4) YOsiz(4) XTsiz(4) YTsiz(4) XTOsiz(4) YTOsiz(4) Csiz(2)
    if siz.len() < 38 {
        return Err("the JPEG 2000 SIZ segment is cut short".into());
    }
    let word = |at: usize| u32::from_be_bytes([siz[at], siz[at + 1], siz[at + 2], siz[at + 3]]);
    let (x, y, x_offset, y_offset) = (word(4), word(8), word(12), word(16));
    if x_offset > x || y_offset > y {
        return Err("the JPEG 2000 image offset lies outside the image".into());
    }
    let components = u32::from(u16::from_be_bytes([siz[36], siz[37]]));
    Ok((x - x_offset, y - y_offset, components))
}

/// The RLE header: one segment per byte of each sample, offsets inside the fragment and
/// increasing.
fn check_rle(data: &[u8], expected: Expected) -> Result<(), String> {
    if data.len() < 64 {
        return Err("the RLE frame is shorter than its 64-byte header".into());
    }
    let word = |at: usize| u32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
    let segments = word(0);
    let wanted = expected.samples_per_pixel * expected.bits_allocated.div_ceil(8);
    if segments != wanted {
        return Err(format!(
            "the RLE frame has {segments} segment(s), but Samples per Pixel and Bits Allocated need {wanted}"
        ));
    }
    let mut previous = 0u32;
    for index in 0..segments as usize {
        let offset = word(4 + 4 * index);
        if offset < 64 || offset < previous || offset as usize >= data.len() {
            return Err(format!(
                "RLE segment {} starts at byte {offset}, outside the {}-byte frame",
                index + 1,
                data.len()
            ));
        }
        previous = offset;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPECTED: Expected = Expected {
        rows: 64,
        columns: 32,
        samples_per_pixel: 1,
        bits_allocated: 16,
    };

    #[test]
    fn a_jpeg_frame_of_another_size_is_refused() {
        // SOI, SOF1 (length 11): precision 12, height 64, width 48, one component.
        let frame = [
            0xFF, 0xD8, 0xFF, 0xC1, 0x00, 0x0B, 12, 0x00, 0x40, 0x00, 0x30, 1, 1, 0x11, 0,
        ];
        let error = check_frame("1.2.840.10008.1.2.4.51", &frame, EXPECTED).expect_err("48 wide");
        assert!(
            error.contains("48×64") && error.contains("32×64"),
            "{error}"
        );
        let mut right = frame;
        right[10] = 0x20;
        assert!(check_frame("1.2.840.10008.1.2.4.51", &right, EXPECTED).is_ok());
    }

    #[test]
    fn an_rle_frame_with_too_few_segments_is_refused() {
        let mut frame = vec![0u8; 80];
        frame[0] = 1; // one segment, but 16-bit samples need two
        frame[4] = 64;
        let error = check_frame("1.2.840.10008.1.2.5", &frame, EXPECTED).expect_err("1 of 2");
        assert!(error.contains("need 2"), "{error}");
        frame[0] = 2;
        frame[8] = 200; // the second segment starts past the end
        let error = check_frame("1.2.840.10008.1.2.5", &frame, EXPECTED).expect_err("offset");
        assert!(error.contains("segment 2"), "{error}");
        frame[8] = 70;
        assert!(check_frame("1.2.840.10008.1.2.5", &frame, EXPECTED).is_ok());
    }

    #[test]
    fn a_jpeg_2000_frame_of_another_size_is_refused() {
        let mut frame = vec![0xFF, 0x4F, 0xFF, 0x51, 0x00, 0x29, 0x00, 0x00];
        for value in [32u32, 65, 0, 0, 32, 65, 0, 0] {
            frame.extend_from_slice(&value.to_be_bytes());
        }
        frame.extend_from_slice(&1u16.to_be_bytes());
        let error = check_frame("1.2.840.10008.1.2.4.90", &frame, EXPECTED).expect_err("65 rows");
        assert!(error.contains("32×65"), "{error}");
    }
}
