//! Mutations of real DICOM and NIfTI files for the reader fuzz test: blind ones (cuts, byte
//! flips, repeated or dropped chunks) and ones that know the formats (a DICOM element's value,
//! VR or length; a compressed frame's size fields; a NIfTI header field, inside the gzip
//! stream for `.nii.gz`). Deterministic: a seed and an index give the same bytes every run.

use std::io::{Read, Write};

/// A small deterministic generator (xorshift64).
pub struct Random(pub u64);

impl Random {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, limit: usize) -> usize {
        if limit == 0 {
            0
        } else {
            (self.next_u64() % limit as u64) as usize
        }
    }

    fn pick<T: Copy>(&mut self, values: &[T]) -> T {
        values[self.below(values.len())]
    }
}

/// Which format a seed file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Dicom,
    Nifti,
    NiftiGz,
}

/// DICOM elements whose values decide allocations and geometry.
const DICOM_TAGS: [(u16, u16); 14] = [
    (0x0028, 0x0010), // Rows
    (0x0028, 0x0011), // Columns
    (0x0028, 0x0008), // Number of Frames
    (0x0028, 0x0100), // Bits Allocated
    (0x0028, 0x0101), // Bits Stored
    (0x0028, 0x0002), // Samples per Pixel
    (0x0028, 0x0103), // Pixel Representation
    (0x0028, 0x0030), // Pixel Spacing
    (0x0020, 0x0032), // Image Position (Patient)
    (0x0020, 0x0037), // Image Orientation (Patient)
    (0x0028, 0x1053), // Rescale Slope
    (0x0028, 0x1052), // Rescale Intercept
    (0x7FE0, 0x0010), // Pixel Data
    (0x0002, 0x0010), // Transfer Syntax UID
];

const NUMBER_STRINGS: [&str; 12] = [
    "2147483647",
    "-1",
    "0",
    "65535",
    "1e29",
    "inf",
    "-inf",
    "nan",
    "1e308\\1e308",
    "0\\0\\0",
    "1\\0\\0\\1\\0\\0",
    "40000",
];

const WORDS: [u16; 8] = [0, 1, 2, 3, 0x7FFF, 0x8000, 0xFFFF, 4096];

/// Mutant number `index` of `original`.
#[must_use]
pub fn mutate(original: &[u8], format: Format, seed: u64, index: usize) -> Vec<u8> {
    let mut random = Random(seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    for _ in 0..4 {
        random.next_u64();
    }
    let kind = random.below(10);
    match (format, kind) {
        (_, 0) => truncate(original, &mut random),
        (_, 1) => flip_bytes(original, &mut random),
        (_, 2) => chunk(original, &mut random),
        (Format::Dicom, 3 | 4) => dicom_value(original, &mut random),
        (Format::Dicom, 5) => dicom_vr(original, &mut random),
        (Format::Dicom, 6) => dicom_length(original, &mut random),
        (Format::Dicom, _) => codestream(original, &mut random),
        (Format::Nifti, _) => nifti_field(original, &mut random),
        (Format::NiftiGz, _) => {
            let Some(plain) = gunzip(original) else {
                return flip_bytes(original, &mut random);
            };
            let mutated = if kind == 9 {
                truncate(&plain, &mut random)
            } else {
                nifti_field(&plain, &mut random)
            };
            gzip(&mutated)
        }
    }
}

fn truncate(original: &[u8], random: &mut Random) -> Vec<u8> {
    original[..random.below(original.len())].to_vec()
}

fn flip_bytes(original: &[u8], random: &mut Random) -> Vec<u8> {
    let mut bytes = original.to_vec();
    for _ in 0..=random.below(8) {
        let limit = if random.below(4) == 0 {
            bytes.len()
        } else {
            bytes.len().min(1024)
        };
        let at = random.below(limit);
        bytes[at] = random.next_u64() as u8;
    }
    bytes
}

/// Repeats or drops a chunk (a missing or doubled stretch of a copy).
fn chunk(original: &[u8], random: &mut Random) -> Vec<u8> {
    let start = random.below(original.len());
    let length = 1 + random.below(256.min(original.len() - start));
    let mut bytes = original[..start].to_vec();
    if random.below(2) == 0 {
        bytes.extend_from_slice(&original[start..start + length]);
        bytes.extend_from_slice(&original[start..]);
    } else {
        bytes.extend_from_slice(&original[start + length..]);
    }
    bytes
}

/// Offsets of an element's tag in little-endian order.
fn find_tag(bytes: &[u8], (group, element): (u16, u16)) -> Vec<usize> {
    let mut needle = group.to_le_bytes().to_vec();
    needle.extend_from_slice(&element.to_le_bytes());
    bytes
        .windows(4)
        .enumerate()
        .filter(|(_, window)| *window == needle.as_slice())
        .map(|(at, _)| at)
        .collect()
}

fn some_tag(bytes: &[u8], random: &mut Random) -> Option<usize> {
    let tag = random.pick(&DICOM_TAGS);
    let found = find_tag(bytes, tag);
    (!found.is_empty()).then(|| found[random.below(found.len())])
}

/// Whether the element at `at` has an explicit VR of two upper-case letters.
fn explicit_vr(bytes: &[u8], at: usize) -> Option<[u8; 2]> {
    let vr = [*bytes.get(at + 4)?, *bytes.get(at + 5)?];
    vr.iter().all(u8::is_ascii_uppercase).then_some(vr)
}

/// Replaces an element's value: a binary word, or a text number with its length fixed up.
fn dicom_value(original: &[u8], random: &mut Random) -> Vec<u8> {
    let Some(at) = some_tag(original, random) else {
        return flip_bytes(original, random);
    };
    let mut bytes = original.to_vec();
    match explicit_vr(original, at) {
        Some(vr) if matches!(&vr, b"US" | b"SS" | b"UL" | b"SL") => {
            let value = random.pick(&WORDS).to_le_bytes();
            if let Some(slot) = bytes.get_mut(at + 8..at + 10) {
                slot.copy_from_slice(&value);
            }
            bytes
        }
        Some(vr) if matches!(&vr, b"IS" | b"DS" | b"UI") => {
            let old_length = usize::from(u16::from_le_bytes([original[at + 6], original[at + 7]]));
            let Some(end) = (at + 8)
                .checked_add(old_length)
                .filter(|&end| end <= original.len())
            else {
                return bytes;
            };
            let mut value = random.pick(&NUMBER_STRINGS).as_bytes().to_vec();
            if value.len() % 2 == 1 {
                value.push(b' ');
            }
            let mut out = original[..at + 6].to_vec();
            out.extend_from_slice(&(value.len() as u16).to_le_bytes());
            out.extend_from_slice(&value);
            out.extend_from_slice(&original[end..]);
            out
        }
        _ => {
            // Implicit VR or another type: overwrite the first value bytes (the value starts
            // 8 bytes after the tag in both cases).
            for n in 0..2 {
                if let Some(byte) = bytes.get_mut(at + 8 + n) {
                    *byte = random.next_u64() as u8;
                }
            }
            bytes
        }
    }
}

/// Changes an element's VR bytes (to another VR or to letters that are none).
fn dicom_vr(original: &[u8], random: &mut Random) -> Vec<u8> {
    let Some(at) = some_tag(original, random) else {
        return flip_bytes(original, random);
    };
    let mut bytes = original.to_vec();
    let vr: &[u8; 2] = random.pick(&[b"OB", b"UN", b"SQ", b"US", b"ZZ", b"UT", b"OW", b"\0\0"]);
    if at + 6 <= bytes.len() {
        bytes[at + 4..at + 6].copy_from_slice(vr);
    }
    bytes
}

/// Sets an element's length field to a large or odd value.
fn dicom_length(original: &[u8], random: &mut Random) -> Vec<u8> {
    let Some(at) = some_tag(original, random) else {
        return flip_bytes(original, random);
    };
    let mut bytes = original.to_vec();
    let long = matches!(
        explicit_vr(original, at).as_ref().map(|vr| &vr[..]),
        Some(b"OB" | b"OW" | b"SQ" | b"UN" | b"UT" | b"OF")
    );
    if long {
        let value: u32 = random.pick(&[0xFFFF_FFF0, 0x7FFF_FFFF, 0x1000_0000, 1, 0xFFFF_FFFF]);
        if let Some(slot) = bytes.get_mut(at + 8..at + 12) {
            slot.copy_from_slice(&value.to_le_bytes());
        }
    } else if let Some(slot) = bytes.get_mut(at + 6..at + 8) {
        slot.copy_from_slice(&random.pick(&WORDS).to_le_bytes());
    }
    bytes
}

/// Changes the size fields inside a compressed frame: a JPEG start-of-frame, a JPEG 2000
/// SIZ segment or an RLE header.
fn codestream(original: &[u8], random: &mut Random) -> Vec<u8> {
    let mut bytes = original.to_vec();
    let sof = bytes.windows(2).position(|window| {
        window[0] == 0xFF && matches!(window[1], 0xC0..=0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xF7)
    });
    let siz = bytes
        .windows(4)
        .position(|window| window == [0xFF, 0x4F, 0xFF, 0x51]);
    let rle = find_tag(&bytes, (0xFFFE, 0xE000)).get(1).map(|&at| at + 8);
    let word = random.pick(&WORDS).to_be_bytes();
    if let Some(at) = sof {
        // Height at +5, width at +7, components at +9.
        let field = at + random.pick(&[5usize, 7, 9]);
        if field + 2 <= bytes.len() {
            bytes[field..field + 2].copy_from_slice(&word);
        }
    } else if let Some(at) = siz {
        // Xsiz at +8, Ysiz at +12, Csiz at +40.
        let field = at + random.pick(&[8usize, 12, 16, 40]);
        if field + 2 <= bytes.len() {
            bytes[field..field + 2].copy_from_slice(&word);
        }
    } else if let Some(at) = rle {
        // Segment count, then the offsets.
        let field = at + 4 * random.below(3);
        if field + 4 <= bytes.len() {
            let value: u32 = random.pick(&[0, 1, 3, 15, 16, 64, 0xFFFF_FFFF]);
            bytes[field..field + 4].copy_from_slice(&value.to_le_bytes());
        }
    } else {
        return dicom_value(original, random);
    }
    bytes
}

/// Writes an odd value into one of a NIfTI header's fields (NIfTI-1 or NIfTI-2 layout).
fn nifti_field(original: &[u8], random: &mut Random) -> Vec<u8> {
    let mut bytes = original.to_vec();
    if bytes.len() < 348 {
        return flip_bytes(original, random);
    }
    let nifti2 = i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) == 540;
    // (offset, width in bytes, float?) of dim[1..4], datatype, bitpix, pixdim[1..4],
    // vox_offset, scl_slope, qform/sform codes, quaternion offsets and srow entries.
    let fields: &[(usize, usize, bool)] = if nifti2 {
        &[
            (24, 8, false),
            (32, 8, false),
            (40, 8, false),
            (12, 2, false),
            (14, 2, false),
            (112, 8, true),
            (120, 8, true),
            (128, 8, true),
            (168, 8, false),
            (176, 8, true),
            (344, 4, false),
            (348, 4, false),
            (376, 8, true),
            (400, 8, true),
            (424, 8, true),
            (456, 8, true),
        ]
    } else {
        &[
            (42, 2, false),
            (44, 2, false),
            (46, 2, false),
            (70, 2, false),
            (72, 2, false),
            (80, 4, true),
            (84, 4, true),
            (88, 4, true),
            (108, 4, true),
            (112, 4, true),
            (252, 2, false),
            (254, 2, false),
            (268, 4, true),
            (280, 4, true),
            (292, 4, true),
            (340, 4, true),
        ]
    };
    let (offset, width, float) = fields[random.below(fields.len())];
    let value: Vec<u8> = if float {
        let x = random.pick(&[
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -1.0,
            1e29,
            1e-30,
            0.37,
            1e300,
        ]);
        if width == 4 {
            (x as f32).to_le_bytes().to_vec()
        } else {
            x.to_le_bytes().to_vec()
        }
    } else {
        let x: i64 = random.pick(&[0, -1, 1, 2, 7, 16, 32_767, 65_535, 1 << 30, i64::MAX]);
        x.to_le_bytes()[..width].to_vec()
    };
    bytes[offset..offset + width].copy_from_slice(&value);
    bytes
}

fn gunzip(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .read_to_end(&mut out)
        .ok()?;
    Some(out)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).expect("writing to memory");
    encoder.finish().expect("writing to memory")
}
