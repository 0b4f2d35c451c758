//! NIfTI-1 and NIfTI-2 headers, reduced to the one shape the reader needs.
//!
//! NIfTI-1 headers are parsed by the `nifti` crate. The crate (0.18) does not read NIfTI-2
//! (540-byte header, 64-bit dimensions and doubles), so that layout is parsed here from the
//! specification (nifti2.h), with the same byte-order detection.

use std::io::Read;

use super::NiftiError;
use keyslice_core::volume::Affine;
use keyslice_core::volume::geometry::{cross, dot};

/// NIfTI datatype codes this reader accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DataType {
    U8,
    I8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
}

impl DataType {
    pub fn from_code(code: i64) -> Option<Self> {
        Some(match code {
            2 => Self::U8,
            256 => Self::I8,
            4 => Self::I16,
            512 => Self::U16,
            8 => Self::I32,
            768 => Self::U32,
            1024 => Self::I64,
            1280 => Self::U64,
            16 => Self::F32,
            64 => Self::F64,
            _ => return None,
        })
    }

    pub fn byte_size(self) -> usize {
        match self {
            Self::U8 | Self::I8 => 1,
            Self::I16 | Self::U16 => 2,
            Self::I32 | Self::U32 | Self::F32 => 4,
            Self::I64 | Self::U64 | Self::F64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Self::F32 | Self::F64)
    }
}

/// Human name of a datatype code, for messages.
pub(crate) fn datatype_name(code: i64) -> &'static str {
    match code {
        0 => "unknown (0)",
        1 => "binary (1)",
        32 => "complex64",
        128 => "RGB24",
        1536 => "float128",
        1792 => "complex128",
        2048 => "complex256",
        2304 => "RGBA32",
        _ => "an unknown code",
    }
}

/// What the reader uses from either header version.
#[derive(Clone, Debug)]
pub(crate) struct Header {
    pub version: u8,
    pub little_endian: bool,
    /// `dim[0..8]` as stored.
    pub dim: [i64; 8],
    pub datatype_code: i64,
    pub bitpix: i64,
    pub pixdim: [f64; 8],
    pub vox_offset: u64,
    pub scl_slope: f64,
    pub scl_inter: f64,
    pub qform_code: i64,
    pub sform_code: i64,
    /// `quatern_b`, `quatern_c`, `quatern_d`, `qoffset_x`, `qoffset_y`, `qoffset_z`.
    pub quatern: [f64; 6],
    pub srow: [[f64; 4]; 3],
    pub descrip: String,
    /// `ni1`/`ni2`: the voxels are in a separate `.img` file.
    pub pair: bool,
}

/// Reads either header version from the start of a (decompressed) stream.
pub(crate) fn read_header(reader: &mut impl Read) -> Result<Header, NiftiError> {
    let mut size = [0u8; 4];
    reader
        .read_exact(&mut size)
        .map_err(|_| NiftiError::header("file is shorter than a NIfTI header"))?;
    let little = i32::from_le_bytes(size);
    let big = i32::from_be_bytes(size);
    match (little, big) {
        (348, _) | (_, 348) => read_nifti1(size, reader),
        (540, _) | (_, 540) => read_nifti2(little == 540, reader),
        _ => Err(NiftiError::header(format!(
            "sizeof_hdr is {little}, expected 348 (NIfTI-1) or 540 (NIfTI-2): not a NIfTI file"
        ))),
    }
}

fn read_nifti1(size: [u8; 4], reader: &mut impl Read) -> Result<Header, NiftiError> {
    let raw = nifti::NiftiHeader::from_reader(size.as_slice().chain(reader))
        .map_err(|error| NiftiError::header(format!("NIfTI-1 header: {error}")))?;
    let pair = match &raw.magic {
        b"n+1\0" => false,
        b"ni1\0" => true,
        other => {
            return Err(NiftiError::header(format!(
                "magic is {:?}, expected \"n+1\" or \"ni1\"",
                String::from_utf8_lossy(other)
            )));
        }
    };
    let mut dim = [0i64; 8];
    for (out, value) in dim.iter_mut().zip(raw.dim) {
        // dim is signed short in nifti1.h; the crate reads it unsigned.
        *out = i64::from(value as i16);
    }
    Ok(Header {
        version: 1,
        little_endian: raw.endianness == nifti::Endianness::Little,
        dim,
        datatype_code: i64::from(raw.datatype),
        bitpix: i64::from(raw.bitpix),
        pixdim: raw.pixdim.map(f64::from),
        vox_offset: if raw.vox_offset.is_finite() && raw.vox_offset >= 0.0 {
            raw.vox_offset as u64
        } else {
            return Err(NiftiError::header(format!(
                "vox_offset {} is not a byte offset",
                raw.vox_offset
            )));
        },
        scl_slope: f64::from(raw.scl_slope),
        scl_inter: f64::from(raw.scl_inter),
        qform_code: i64::from(raw.qform_code),
        sform_code: i64::from(raw.sform_code),
        quatern: [
            raw.quatern_b,
            raw.quatern_c,
            raw.quatern_d,
            raw.quatern_x,
            raw.quatern_y,
            raw.quatern_z,
        ]
        .map(f64::from),
        srow: [raw.srow_x, raw.srow_y, raw.srow_z].map(|row| row.map(f64::from)),
        descrip: text(&raw.descrip),
        pair,
    })
}

fn read_nifti2(little_endian: bool, reader: &mut impl Read) -> Result<Header, NiftiError> {
    let mut bytes = [0u8; 540];
    reader
        .read_exact(&mut bytes[4..])
        .map_err(|_| NiftiError::header("file ends inside the NIfTI-2 header"))?;
    let field = Fields {
        bytes: &bytes,
        little_endian,
    };
    let pair = match &bytes[4..8] {
        b"n+2\0" => false,
        b"ni2\0" => true,
        other => {
            return Err(NiftiError::header(format!(
                "NIfTI-2 magic is {:?}, expected \"n+2\" or \"ni2\"",
                String::from_utf8_lossy(other)
            )));
        }
    };
    let vox_offset = field.i64(168);
    Ok(Header {
        version: 2,
        little_endian,
        dim: std::array::from_fn(|n| field.i64(16 + 8 * n)),
        datatype_code: i64::from(field.i16(12)),
        bitpix: i64::from(field.i16(14)),
        pixdim: std::array::from_fn(|n| field.f64(104 + 8 * n)),
        vox_offset: u64::try_from(vox_offset)
            .map_err(|_| NiftiError::header(format!("vox_offset {vox_offset} is negative")))?,
        scl_slope: field.f64(176),
        scl_inter: field.f64(184),
        qform_code: i64::from(field.i32(344)),
        sform_code: i64::from(field.i32(348)),
        quatern: std::array::from_fn(|n| field.f64(352 + 8 * n)),
        srow: std::array::from_fn(|row| std::array::from_fn(|n| field.f64(400 + 32 * row + 8 * n))),
        descrip: text(&bytes[240..320]),
        pair,
    })
}

struct Fields<'a> {
    bytes: &'a [u8; 540],
    little_endian: bool,
}

impl Fields<'_> {
    fn array<const N: usize>(&self, offset: usize) -> [u8; N] {
        let mut out = [0u8; N];
        out.copy_from_slice(&self.bytes[offset..offset + N]);
        if !self.little_endian {
            out.reverse();
        }
        out
    }
    fn i16(&self, offset: usize) -> i16 {
        i16::from_le_bytes(self.array(offset))
    }
    fn i32(&self, offset: usize) -> i32 {
        i32::from_le_bytes(self.array(offset))
    }
    fn i64(&self, offset: usize) -> i64 {
        i64::from_le_bytes(self.array(offset))
    }
    fn f64(&self, offset: usize) -> f64 {
        f64::from_le_bytes(self.array(offset))
    }
}

fn text(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).trim().to_string()
}

/// Which header field placed the volume in space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    Sform,
    Qform,
    /// Neither transform is set: only voxel sizes are known.
    PixdimOnly,
}

impl Header {
    /// Warnings for voxel sizes in `pixdim` that cannot be used (zero, negative, NaN or
    /// infinite) and are read as 1 mm by [`Header::ras_from_voxel`].
    pub fn pixdim_warnings(&self) -> Vec<String> {
        (1..=3)
            .filter(|&n| {
                let value = self.pixdim[n].abs();
                !(value.is_finite() && value > 0.0)
            })
            .map(|n| {
                format!(
                    "pixdim[{n}] (the voxel size along axis {n}) is {}, not a positive size: assuming 1 mm",
                    self.pixdim[n]
                )
            })
            .collect()
    }

    /// The voxel → RAS transform: sform when `sform_code > 0`, else qform when
    /// `qform_code > 0`, else a scaling by `pixdim` (NIfTI "method 1").
    #[expect(
        clippy::many_single_char_names,
        reason = "b, c, d, x, y, z are nifti1.h's names"
    )]
    pub fn ras_from_voxel(&self) -> (Affine, Placement) {
        if self.sform_code > 0 {
            let linear =
                std::array::from_fn(|row| std::array::from_fn(|column| self.srow[row][column]));
            let translation = [self.srow[0][3], self.srow[1][3], self.srow[2][3]];
            return (
                Affine {
                    linear,
                    translation,
                },
                Placement::Sform,
            );
        }
        let spacing = [1, 2, 3].map(|n| {
            let value = self.pixdim[n].abs();
            if value.is_finite() && value > 0.0 {
                value
            } else {
                1.0
            }
        });
        if self.qform_code > 0 {
            let qfac = if self.pixdim[0] < 0.0 { -1.0 } else { 1.0 };
            let [b, c, d, x, y, z] = self.quatern;
            let rotation = rotation_from_quaternion(b, c, d);
            let mut linear = [[0.0; 3]; 3];
            for row in 0..3 {
                linear[row][0] = rotation[row][0] * spacing[0];
                linear[row][1] = rotation[row][1] * spacing[1];
                linear[row][2] = rotation[row][2] * spacing[2] * qfac;
            }
            return (
                Affine {
                    linear,
                    translation: [x, y, z],
                },
                Placement::Qform,
            );
        }
        let mut linear = [[0.0; 3]; 3];
        for axis in 0..3 {
            linear[axis][axis] = spacing[axis];
        }
        (
            Affine {
                linear,
                translation: [0.0; 3],
            },
            Placement::PixdimOnly,
        )
    }
}

/// Rotation matrix of the unit quaternion `(a, b, c, d)` with `a` derived (nifti1.h).
pub(crate) fn rotation_from_quaternion(b: f64, c: f64, d: f64) -> [[f64; 3]; 3] {
    let squared = b * b + c * c + d * d;
    let (a, b, c, d) = if squared > 1.0 {
        let length = squared.sqrt();
        (0.0, b / length, c / length, d / length)
    } else {
        ((1.0 - squared).sqrt(), b, c, d)
    };
    [
        [
            a * a + b * b - c * c - d * d,
            2.0 * (b * c - a * d),
            2.0 * (b * d + a * c),
        ],
        [
            2.0 * (b * c + a * d),
            a * a + c * c - b * b - d * d,
            2.0 * (c * d - a * b),
        ],
        [
            2.0 * (b * d - a * c),
            2.0 * (c * d + a * b),
            a * a + d * d - c * c - b * b,
        ],
    ]
}

/// Quaternion `(b, c, d)` and `qfac` of the rotation part of `linear` (`nifti_mat44_to_quatern`).
#[expect(
    clippy::many_single_char_names,
    reason = "a, b, c, d, r follow nifti1_io.c"
)]
pub(crate) fn quaternion_from_linear(linear: &[[f64; 3]; 3]) -> ([f64; 3], f64) {
    let column = |axis: usize| {
        let v = [linear[0][axis], linear[1][axis], linear[2][axis]];
        let length = dot(v, v).sqrt();
        if length > 0.0 {
            v.map(|x| x / length)
        } else {
            v
        }
    };
    let (x, y, mut z) = (column(0), column(1), column(2));
    let qfac = if dot(cross(x, y), z) < 0.0 {
        z = z.map(|value| -value);
        -1.0
    } else {
        1.0
    };
    // r[row][col] with columns x, y, z.
    let r = [[x[0], y[0], z[0]], [x[1], y[1], z[1]], [x[2], y[2], z[2]]];
    let trace = r[0][0] + r[1][1] + r[2][2] + 1.0;
    let (a, b, c, d);
    if trace > 0.5 {
        a = 0.5 * trace.sqrt();
        b = 0.25 * (r[2][1] - r[1][2]) / a;
        c = 0.25 * (r[0][2] - r[2][0]) / a;
        d = 0.25 * (r[1][0] - r[0][1]) / a;
    } else {
        let xd = 1.0 + r[0][0] - (r[1][1] + r[2][2]);
        let yd = 1.0 + r[1][1] - (r[0][0] + r[2][2]);
        let zd = 1.0 + r[2][2] - (r[0][0] + r[1][1]);
        if xd > 1.0 {
            b = 0.5 * xd.sqrt();
            c = 0.25 * (r[0][1] + r[1][0]) / b;
            d = 0.25 * (r[0][2] + r[2][0]) / b;
            a = 0.25 * (r[2][1] - r[1][2]) / b;
        } else if yd > 1.0 {
            c = 0.5 * yd.sqrt();
            b = 0.25 * (r[0][1] + r[1][0]) / c;
            d = 0.25 * (r[1][2] + r[2][1]) / c;
            a = 0.25 * (r[0][2] - r[2][0]) / c;
        } else {
            d = 0.5 * zd.sqrt();
            b = 0.25 * (r[0][2] + r[2][0]) / d;
            c = 0.25 * (r[1][2] + r[2][1]) / d;
            a = 0.25 * (r[1][0] - r[0][1]) / d;
        }
    }
    let sign = if a < 0.0 { -1.0 } else { 1.0 };
    ([b * sign, c * sign, d * sign], qfac)
}

#[cfg(test)]
#[expect(
    clippy::float_cmp,
    reason = "decoded values are exact; exact comparison is the point"
)]
mod tests {
    use super::*;
    use keyslice_core::volume::geometry::normalized;

    #[test]
    #[expect(
        clippy::many_single_char_names,
        reason = "quaternion names as nifti1.h's"
    )]
    fn quaternion_round_trip_keeps_an_oblique_rotation() {
        let x = normalized([0.9, -0.3, 0.1]);
        let y = normalized(cross([0.1, 0.2, 1.0], x));
        let z = cross(x, y);
        for flip in [1.0, -1.0] {
            let linear = [
                [x[0], y[0], flip * z[0]],
                [x[1], y[1], flip * z[1]],
                [x[2], y[2], flip * z[2]],
            ];
            let ([b, c, d], qfac) = quaternion_from_linear(&linear);
            assert_eq!(qfac, flip);
            let rotation = rotation_from_quaternion(b, c, d);
            for row in 0..3 {
                assert!((rotation[row][0] - linear[row][0]).abs() < 1e-9);
                assert!((rotation[row][1] - linear[row][1]).abs() < 1e-9);
                assert!((rotation[row][2] * qfac - linear[row][2]).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn half_turn_about_z_is_found_through_the_fallback_branch() {
        let linear = [[-1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, 1.0]];
        let ([b, c, d], qfac) = quaternion_from_linear(&linear);
        assert_eq!(qfac, 1.0);
        assert!((b.abs() + c.abs()) < 1e-12 && (d.abs() - 1.0).abs() < 1e-12);
    }
}
