//! Writes a [`Volume`] (or a label volume, as uint8) as a single-file NIfTI-1 (`.nii` or `.nii.gz`).
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

#[cfg(target_endian = "big")]
compile_error!("the NIfTI writer stores voxels in the host byte order, assumed little-endian");

use flate2::Compression;
use flate2::write::GzEncoder;

use super::NiftiError;
use super::header::quaternion_from_linear;
use keyslice_core::volume::{Affine, LabelVolume, Volume, Voxels};

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
    let grid = Grid {
        dims: volume.dims(),
        patient_from_voxel: *volume.patient_from_voxel(),
    };
    write_file(path, grid, options, |out, lps_from_stored| {
        let (datatype, bitpix) = match volume.voxels() {
            Voxels::I16(_) => (4, 16),
            Voxels::F32(_) => (16, 32),
        };
        out.write_all(&header_bytes(
            grid.dims,
            (datatype, bitpix),
            &lps_from_stored.ras_from_lps(),
        ))?;
        match volume.voxels() {
            Voxels::I16(values) => write_slices(values, grid.dims, options.flip_rows, out),
            Voxels::F32(values) => write_slices(values, grid.dims, options.flip_rows, out),
        }
    })
}

/// Writes a label volume (segmentation mask) to `path` as unsigned 8-bit NIfTI-1, laid out
/// like [`write_nifti`]'s output so masks and CT share one grid.
pub fn write_label_nifti(
    labels: &LabelVolume,
    path: &Path,
    options: WriteOptions,
) -> Result<(), NiftiError> {
    let grid = Grid {
        dims: labels.dims,
        patient_from_voxel: labels.patient_from_voxel,
    };
    if labels.labels.len() != grid.dims.iter().product::<usize>() {
        return Err(NiftiError::Unwritable {
            path: path.to_path_buf(),
            detail: format!(
                "{} labels for a {}×{}×{} grid",
                labels.labels.len(),
                grid.dims[0],
                grid.dims[1],
                grid.dims[2]
            ),
        });
    }
    write_file(path, grid, options, |out, lps_from_stored| {
        out.write_all(&header_bytes(
            grid.dims,
            (2, 8),
            &lps_from_stored.ras_from_lps(),
        ))?;
        write_slices(&labels.labels, grid.dims, options.flip_rows, out)
    })
}

/// Dimensions and placement of what is written.
#[derive(Clone, Copy)]
struct Grid {
    dims: [usize; 3],
    patient_from_voxel: Affine,
}

/// Creates `path` through a temporary file renamed into place; `body` writes header and
/// voxels given the stored voxel → LPS transform (rows flipped if asked).
fn write_file(
    path: &Path,
    grid: Grid,
    options: WriteOptions,
    body: impl FnOnce(&mut dyn Write, &Affine) -> std::io::Result<()>,
) -> Result<(), NiftiError> {
    let write_error = |source| NiftiError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(size) = grid.dims.iter().find(|&&size| size > i16::MAX as usize) {
        return Err(NiftiError::Unwritable {
            path: path.to_path_buf(),
            detail: format!("NIfTI-1 holds at most 32767 voxels per axis, this volume has {size}"),
        });
    }
    let mut lps_from_stored = grid.patient_from_voxel;
    if options.flip_rows {
        // Stored row j' = rows - 1 - j: the origin moves to the last row, the j axis reverses.
        lps_from_stored.translation =
            grid.patient_from_voxel
                .apply([0.0, (grid.dims[1].max(1) - 1) as f64, 0.0]);
        for row in 0..3 {
            lps_from_stored.linear[row][1] = -lps_from_stored.linear[row][1];
        }
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
        if gzip {
            let buffered = BufWriter::with_capacity(1 << 20, file);
            let level = Compression::new(options.compression_level.min(9));
            let mut encoder = GzEncoder::new(buffered, level);
            body(&mut encoder, &lps_from_stored)?;
            let buffered = encoder.finish()?;
            drop(
                buffered
                    .into_inner()
                    .map_err(std::io::IntoInnerError::into_error)?,
            );
        } else {
            // Whole slices are assembled in memory, so the file needs no extra buffering.
            let mut file = file;
            body(&mut file, &lps_from_stored)?;
        }
        // Rename only after everything is written: the target name only ever points at a
        // complete file. (No fsync: a conversion can be rerun, and fsync doubles its time.)
        std::fs::rename(&temporary, path)
    })();
    if result.is_err() {
        // Best effort: the temporary file is ours and incomplete.
        let _ = std::fs::remove_file(&temporary);
    }
    result.map_err(write_error)
}

/// Writes slice after slice, each assembled (rows reversed if asked) into one buffer of
/// little-endian bytes.
fn write_slices<T: bytemuck::Pod>(
    values: &[T],
    dims: [usize; 3],
    flip_rows: bool,
    out: &mut (impl Write + ?Sized),
) -> std::io::Result<()> {
    let [columns, rows, slices] = dims;
    let row_bytes = columns * std::mem::size_of::<T>();
    let mut slice_bytes = vec![0u8; row_bytes * rows];
    for k in 0..slices {
        for stored_row in 0..rows {
            let j = if flip_rows {
                rows - 1 - stored_row
            } else {
                stored_row
            };
            let start = columns * (j + rows * k);
            let source: &[u8] = bytemuck::cast_slice(&values[start..start + columns]);
            slice_bytes[stored_row * row_bytes..(stored_row + 1) * row_bytes]
                .copy_from_slice(source);
        }
        out.write_all(&slice_bytes)?;
    }
    Ok(())
}

/// The 348-byte NIfTI-1 header plus the 4-byte "no extensions" marker, little endian.
fn header_bytes(
    dims: [usize; 3],
    (datatype, bitpix): (i16, i16),
    ras_from_voxel: &Affine,
) -> Vec<u8> {
    let mut header = vec![0u8; 352];
    let mut put =
        |offset: usize, bytes: &[u8]| header[offset..offset + bytes.len()].copy_from_slice(bytes);
    let spacing = ras_from_voxel.spacing_mm();
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
