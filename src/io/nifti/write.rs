//! Writes a [`Volume`] as a single-file NIfTI-1 (`.nii` or `.nii.gz`).
//!
//! The layout follows dcm2niix, so that nibabel and dcm2niix users see the same thing from
//! both tools: image rows are stored bottom-up (the DICOM row order reversed, dcm2niix's
//! default), sform and qform both hold the scanner transform in RAS (`*_code = 1`), units are
//! millimetres, `int16` when the volume is exact integers, else `float32`, no scaling. The file
//! is written to a temporary name beside the target and renamed, so an interrupted write
//! never leaves a half file under the real name.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use flate2::Compression;
use flate2::write::GzEncoder;

use super::NiftiError;
use super::header::quaternion_from_linear;
use crate::volume::{Affine, Volume, Voxels};

/// Choices for [`write_nifti`].
#[derive(Clone, Copy, Debug)]
pub struct WriteOptions {
    /// Reverse the row order (dcm2niix's default). With `false` rows are stored as loaded.
    pub flip_rows: bool,
    /// gzip level when the name ends in `.gz` (0–9).
    pub compression_level: u32,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            flip_rows: true,
            compression_level: 6,
        }
    }
}

/// Writes `volume` to `path`; gzip-compressed when the name ends in `.gz`.
pub fn write_nifti(volume: &Volume, path: &Path, options: WriteOptions) -> Result<(), NiftiError> {
    let write_error = |source| NiftiError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(size) = volume.dims().iter().find(|&&size| size > i16::MAX as usize) {
        return Err(NiftiError::Unwritable {
            path: path.to_path_buf(),
            detail: format!("NIfTI-1 holds at most 32767 voxels per axis, this volume has {size}"),
        });
    }
    let gzip = path
        .extension()
        .is_some_and(|extension| extension.eq_ignore_ascii_case("gz"));
    let temporary = {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".partial-{}", std::process::id()));
        path.with_file_name(name)
    };
    let result = (|| -> std::io::Result<()> {
        let file = File::create(&temporary)?;
        let buffered = BufWriter::with_capacity(1 << 20, file);
        let file = if gzip {
            let mut encoder =
                GzEncoder::new(buffered, Compression::new(options.compression_level.min(9)));
            write_body(volume, options, &mut encoder)?;
            encoder.finish()?
        } else {
            let mut buffered = buffered;
            write_body(volume, options, &mut buffered)?;
            buffered
        };
        let file = file
            .into_inner()
            .map_err(std::io::IntoInnerError::into_error)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if result.is_err() {
        // Best effort: the temporary file is ours and incomplete.
        let _ = std::fs::remove_file(&temporary);
    }
    result.map_err(write_error)
}

fn write_body(volume: &Volume, options: WriteOptions, out: &mut impl Write) -> std::io::Result<()> {
    let [columns, rows, slices] = volume.dims();
    let mut lps_from_stored = *volume.patient_from_voxel();
    if options.flip_rows {
        // Stored row j' = rows - 1 - j: the origin moves to the last row, the j axis reverses.
        lps_from_stored.translation =
            volume
                .patient_from_voxel()
                .apply([0.0, (rows - 1) as f64, 0.0]);
        for row in 0..3 {
            lps_from_stored.linear[row][1] = -lps_from_stored.linear[row][1];
        }
    }
    out.write_all(&header_bytes(volume, &lps_from_stored.ras_from_lps()))?;
    let mut line = Vec::with_capacity(columns * 4);
    for k in 0..slices {
        for stored_row in 0..rows {
            let j = if options.flip_rows {
                rows - 1 - stored_row
            } else {
                stored_row
            };
            let start = columns * (j + rows * k);
            line.clear();
            match volume.voxels() {
                Voxels::I16(values) => {
                    for value in &values[start..start + columns] {
                        line.extend_from_slice(&value.to_le_bytes());
                    }
                }
                Voxels::F32(values) => {
                    for value in &values[start..start + columns] {
                        line.extend_from_slice(&value.to_le_bytes());
                    }
                }
            }
            out.write_all(&line)?;
        }
    }
    Ok(())
}

/// The 348-byte NIfTI-1 header plus the 4-byte "no extensions" marker, little endian.
fn header_bytes(volume: &Volume, ras_from_voxel: &Affine) -> Vec<u8> {
    let mut header = vec![0u8; 352];
    let mut put =
        |offset: usize, bytes: &[u8]| header[offset..offset + bytes.len()].copy_from_slice(bytes);
    let dims = volume.dims();
    let spacing = ras_from_voxel.spacing_mm();
    let (datatype, bitpix): (i16, i16) = match volume.voxels() {
        Voxels::I16(_) => (4, 16),
        Voxels::F32(_) => (16, 32),
    };
    let (quaternion, qfac) = quaternion_from_linear(&ras_from_voxel.linear);
    put(0, &348i32.to_le_bytes());
    put(38, b"r"); // regular = 'r', as nifti1_io writes
    let dim: [i16; 8] = [
        3,
        dim_i16(dims[0]),
        dim_i16(dims[1]),
        dim_i16(dims[2]),
        1,
        1,
        1,
        1,
    ];
    for (n, value) in dim.iter().enumerate() {
        put(40 + 2 * n, &value.to_le_bytes());
    }
    put(70, &datatype.to_le_bytes());
    put(72, &bitpix.to_le_bytes());
    let pixdim: [f32; 8] = [
        qfac as f32,
        spacing[0] as f32,
        spacing[1] as f32,
        spacing[2] as f32,
        0.0,
        0.0,
        0.0,
        0.0,
    ];
    for (n, value) in pixdim.iter().enumerate() {
        put(76 + 4 * n, &value.to_le_bytes());
    }
    put(108, &352f32.to_le_bytes()); // vox_offset
    put(112, &1f32.to_le_bytes()); // scl_slope
    put(116, &0f32.to_le_bytes()); // scl_inter
    put(123, &[2u8]); // xyzt_units: millimetres
    let description = b"Keyslice";
    put(148, description);
    put(252, &1i16.to_le_bytes()); // qform_code: scanner
    put(254, &1i16.to_le_bytes()); // sform_code: scanner
    for (n, value) in quaternion.iter().enumerate() {
        put(256 + 4 * n, &(*value as f32).to_le_bytes());
    }
    for (n, value) in ras_from_voxel.translation.iter().enumerate() {
        put(268 + 4 * n, &(*value as f32).to_le_bytes());
    }
    for row in 0..3 {
        let values = [
            ras_from_voxel.linear[row][0],
            ras_from_voxel.linear[row][1],
            ras_from_voxel.linear[row][2],
            ras_from_voxel.translation[row],
        ];
        for (n, value) in values.iter().enumerate() {
            put(280 + 16 * row + 4 * n, &(*value as f32).to_le_bytes());
        }
    }
    put(344, b"n+1\0");
    header
}

/// NIfTI-1 dimensions are signed 16-bit; [`write_nifti`] refuses larger volumes up front.
fn dim_i16(size: usize) -> i16 {
    i16::try_from(size).unwrap_or(i16::MAX)
}
