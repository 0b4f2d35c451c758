//! NIfTI-1 / NIfTI-2 (`.nii`, `.nii.gz`, `.hdr`/`.img` pairs) → [`Volume`], and NIfTI-1 out.
//!
//! Reading, in order:
//! 1. the header (NIfTI-1 through the `nifti` crate, NIfTI-2 from the spec; either byte order);
//! 2. the transform: sform when `sform_code > 0`, else qform, else voxel sizes only (warned);
//!    RAS is converted to DICOM's LPS;
//! 3. the voxels, streamed from the (gzip) file straight into the final buffer: `int16`
//!    without scaling is read in place, other types are converted chunk by chunk; integer data
//!    with integral `scl_slope`/`scl_inter` stays `i16` when it fits, everything else is `f32`;
//! 4. 4D files: the first volume, with a warning;
//! 5. axes are permuted/flipped (no resampling) to point closest to L, P, S, so a RAS file and
//!    an LPS file of the same patient give identical volumes.
//!
//! Knows the NIfTI format; knows nothing of DICOM, rendering or the UI.

mod header;
mod write;

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use flate2::bufread::MultiGzDecoder;

use crate::limits;
use header::{DataType, Header, Placement, datatype_name, read_header};
use keyslice_core::volume::orient::{AxisReorder, reorient_towards_lps};
use keyslice_core::volume::{Affine, LabelVolume, Volume, VolumeInfo, Voxels};
pub use write::{WriteOptions, write_label_nifti, write_nifti};

/// Errors reading or writing NIfTI; each names the file and, where it applies, the field.
#[derive(Debug, thiserror::Error)]
pub enum NiftiError {
    /// The file system refused.
    #[error("cannot read: {source} ({})", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A header field is wrong (the path is filled in by the caller-facing functions).
    #[error("invalid NIfTI header: {detail} ({})", path.display())]
    Header {
        /// The file.
        path: PathBuf,
        /// Which field and why.
        detail: String,
    },
    /// The voxel data ends early or cannot be decompressed.
    #[error("voxel data is truncated or corrupt: {detail} ({})", path.display())]
    Data {
        /// The file.
        path: PathBuf,
        /// What was expected and found.
        detail: String,
    },
    /// The volume would take more memory than one volume may.
    #[error("too large to load: {source} ({})", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Size and budget.
        source: crate::limits::VolumeTooLarge,
    },
    /// A label mask holds values that are not labels.
    #[error("not a label mask: {detail} ({})", path.display())]
    NotLabels {
        /// The file.
        path: PathBuf,
        /// The offending value.
        detail: String,
    },
    /// The volume cannot be expressed in NIfTI-1.
    #[error("cannot write this volume as NIfTI-1: {detail} ({})", path.display())]
    Unwritable {
        /// The output file.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// Writing the output failed.
    #[error("cannot write: {source} ({})", path.display())]
    Write {
        /// The output file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
}

impl NiftiError {
    pub(crate) fn header(detail: impl Into<String>) -> Self {
        Self::Header {
            path: PathBuf::new(),
            detail: detail.into(),
        }
    }

    fn at(self, file: &Path) -> Self {
        match self {
            Self::Header { path, detail } if path.as_os_str().is_empty() => Self::Header {
                path: file.to_path_buf(),
                detail,
            },
            other => other,
        }
    }

    /// What a user can do about it, in one sentence.
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            Self::Io { .. } => "check that the path exists and that you may read it",
            Self::Header { .. } => {
                "the file is not a valid NIfTI image; re-export it (e.g. with dcm2niix or nibabel)"
            }
            Self::Data { .. } => "the file is incomplete; copy or download it again",
            Self::NotLabels { .. } => {
                "label masks hold whole numbers from 0 to 255; check that this file is a segmentation"
            }
            Self::Write { .. } => "check that the output folder exists, is writable and has space",
            Self::Unwritable { .. } => "crop or downsample the volume first",
            Self::TooLarge { .. } => {
                "if the machine has the memory, raise KEYSLICE_MAX_VOLUME_MB; otherwise crop or downsample the volume first"
            }
        }
    }
}

/// Whether a path names a NIfTI file by its extension.
#[must_use]
pub fn is_nifti_path(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    [".nii", ".nii.gz", ".hdr", ".hdr.gz"]
        .iter()
        .any(|extension| name.ends_with(extension))
}

/// Opens a file, transparently decompressing gzip (detected by its magic bytes).
fn open_stream(path: &Path) -> Result<(Box<dyn Read>, u64, bool), NiftiError> {
    let io_error = |source| NiftiError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = crate::limits::open_regular(path).map_err(io_error)?;
    let length = file.metadata().map_err(io_error)?.len();
    let mut magic = [0u8; 2];
    let gzip = file.read_exact(&mut magic).is_ok() && magic == [0x1f, 0x8b];
    let file = crate::limits::open_regular(path).map_err(io_error)?;
    let buffered = BufReader::with_capacity(1 << 20, file);
    if gzip {
        Ok((Box::new(MultiGzDecoder::new(buffered)), length, true))
    } else {
        Ok((Box::new(buffered), length, false))
    }
}

/// Header, stream positioned at the first voxel, and what the volume needs from them.
struct Opened {
    header: Header,
    data: Box<dyn Read>,
    data_type: DataType,
    /// `[nx, ny, nz]` of the first volume.
    dims: [usize; 3],
    warnings: Vec<String>,
    /// Whether the voxels are the whole of a gzip stream whose checksum is read after them.
    check_gzip_trailer: bool,
    /// The file the voxels come from.
    data_path: PathBuf,
}

impl Opened {
    /// After the voxels: reads the rest of a gzip stream, so its CRC-32 and length are
    /// checked (a damaged `.nii.gz` otherwise gives wrong voxels without a word).
    fn finish(&mut self) -> Result<(), NiftiError> {
        if !self.check_gzip_trailer {
            return Ok(());
        }
        std::io::copy(&mut self.data, &mut std::io::sink())
            .map(|_| ())
            .map_err(|error| NiftiError::Data {
                path: self.data_path.clone(),
                detail: format!(
                    "the compressed data is damaged ({error}): gzip's checksum does not match the voxels"
                ),
            })
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "header checks in the order a reader meets them"
)]
fn open(path: &Path, bytes_per_output_voxel: u64) -> Result<Opened, NiftiError> {
    let (mut stream, file_length, gzip) = open_stream(path)?;
    let header = read_header(&mut stream).map_err(|error| error.at(path))?;
    let header_error = |detail: String| NiftiError::Header {
        path: path.to_path_buf(),
        detail,
    };
    let rank = header.dim[0];
    if !(1..=7).contains(&rank) {
        return Err(header_error(format!("dim[0] = {rank}, expected 1 to 7")));
    }
    let mut dims = [1usize; 3];
    for axis in 0..3 {
        if (axis as i64) < rank {
            let size = header.dim[axis + 1];
            if size < 1 {
                return Err(header_error(format!(
                    "dim[{}] = {size}, expected at least 1",
                    axis + 1
                )));
            }
            dims[axis] = usize::try_from(size)
                .map_err(|_| header_error(format!("dim[{}] = {size} is too large", axis + 1)))?;
        }
    }
    let mut warnings = Vec::new();
    let extra_volumes: i64 = (4..=rank as usize)
        .map(|axis| header.dim[axis].max(1))
        .product();
    if extra_volumes > 1 {
        warnings.push(format!(
            "the file holds {extra_volumes} volumes (dim = {:?}); showing the first",
            &header.dim[1..=rank as usize]
        ));
    }
    if header.qform_code > 0 {
        let [b, c, d, ..] = header.quatern;
        let squared = b * b + c * c + d * d;
        // nibabel allows rounding of a few float32 epsilons, and so does this.
        if !squared.is_finite() || squared > 1.0 + 1e-6 {
            return Err(header_error(format!(
                "the qform quaternion (quatern_b, quatern_c, quatern_d) = ({b}, {c}, {d}) has b²+c²+d² = {squared}, more than 1: it is not a rotation, so the orientation cannot be trusted"
            )));
        }
    }
    let data_type = DataType::from_code(header.datatype_code).ok_or_else(|| {
        header_error(format!(
            "datatype {} ({}) is not a scalar type Keyslice reads (uint8/16/32/64, int8/16/32/64, float32/64)",
            header.datatype_code,
            datatype_name(header.datatype_code)
        ))
    })?;
    if header.bitpix != 8 * data_type.byte_size() as i64 {
        return Err(header_error(format!(
            "bitpix is {} but datatype {} needs {}",
            header.bitpix,
            header.datatype_code,
            8 * data_type.byte_size()
        )));
    }
    let voxel_bytes = dims
        .iter()
        .try_fold(data_type.byte_size() as u64, |acc, &size| {
            acc.checked_mul(size as u64)
        })
        .ok_or_else(|| header_error(format!("dimensions {dims:?} are too large")))?;

    if bytes_per_output_voxel > 0 {
        let dims_u64 = dims.map(|size| size as u64);
        limits::check_volume_bytes(
            limits::volume_bytes(dims_u64, bytes_per_output_voxel),
            dims_u64,
        )
        .map_err(|source| NiftiError::TooLarge {
            path: path.to_path_buf(),
            source,
        })?;
    }
    let (mut data, data_file_length, data_gzip, data_path) = if header.pair {
        let image = pair_image_path(path).ok_or_else(|| {
            header_error(
                "the header says the voxels are in a separate .img file, which is missing".into(),
            )
        })?;
        let (stream, length, gzip) = open_stream(&image)?;
        (stream, length, gzip, image)
    } else {
        (stream, file_length, gzip, path.to_path_buf())
    };
    let header_bytes: u64 = if header.pair {
        0
    } else if header.version == 1 {
        348
    } else {
        540
    };
    if !header.pair && header.vox_offset < header_bytes {
        return Err(header_error(format!(
            "vox_offset {} lies inside the {header_bytes}-byte header",
            header.vox_offset
        )));
    }
    let start = if header.pair {
        header.vox_offset
    } else {
        header.vox_offset - header_bytes
    };
    // A deflate stream expands at most ~1032:1, so a compressed file this small cannot hold the
    // voxels the header claims: refuse before allocating.
    let capacity = if data_gzip {
        data_file_length.saturating_mul(1032)
    } else {
        data_file_length
    };
    let needed = header.vox_offset.saturating_add(voxel_bytes);
    if capacity < needed {
        return Err(NiftiError::Data {
            path: data_path,
            detail: format!(
                "the header describes {needed} bytes (dims {dims:?}, {} bytes per voxel) but the file holds {data_file_length}{}",
                data_type.byte_size(),
                if data_gzip { " compressed" } else { "" }
            ),
        });
    }
    std::io::copy(&mut (&mut data).take(start), &mut std::io::sink()).map_err(|error| {
        NiftiError::Data {
            path: data_path.clone(),
            detail: error.to_string(),
        }
    })?;
    Ok(Opened {
        header,
        data,
        data_type,
        dims,
        warnings,
        check_gzip_trailer: data_gzip && extra_volumes <= 1,
        data_path,
    })
}

fn pair_image_path(header_path: &Path) -> Option<PathBuf> {
    let name = header_path.file_name()?.to_string_lossy().to_string();
    let stem = name
        .strip_suffix(".gz")
        .unwrap_or(&name)
        .trim_end_matches(".hdr")
        .trim_end_matches(".HDR")
        .to_string();
    ["img", "img.gz", "IMG"]
        .iter()
        .map(|extension| header_path.with_file_name(format!("{stem}.{extension}")))
        .find(|candidate| candidate.is_file())
}

/// Reads a NIfTI file as a CT volume (see the module documentation for the steps).
pub fn read_nifti(path: &Path) -> Result<Volume, NiftiError> {
    let mut opened = open(path, 4)?;
    let dims = opened.dims;
    let count = dims[0] * dims[1] * dims[2];
    let (slope, intercept) = scaling(&opened.header);
    let mut voxels = read_voxels(
        &mut opened.data,
        opened.data_type,
        opened.header.little_endian,
        count,
        slope,
        intercept,
    )
    .map_err(|detail| NiftiError::Data {
        path: path.to_path_buf(),
        detail,
    })?;
    opened.finish()?;
    let Opened {
        header,
        mut warnings,
        ..
    } = opened;
    if let Voxels::F32(values) = &mut voxels {
        replace_non_finite(values, path, &mut warnings)?;
    }
    let (ras_from_voxel, placement) = header.ras_from_voxel();
    if placement != Placement::Sform {
        warnings.extend(header.pixdim_warnings());
    }
    if placement == Placement::PixdimOnly {
        warnings.push(
            "the header sets neither sform nor qform: orientation is unknown, axes are assumed to be R→L, A→P, I→S scaled by pixdim".into(),
        );
    }
    let info = VolumeInfo {
        series_description: header.descrip.clone(),
        ..VolumeInfo::default()
    };
    let mut volume = Volume::new(
        dims,
        ras_from_voxel.ras_from_lps(),
        voxels,
        Vec::new(),
        info,
    )
    .map_err(|error| NiftiError::Header {
        path: path.to_path_buf(),
        detail: format!("{error} ({placement:?} transform)"),
    })?;
    reorient_towards_lps(&mut volume);
    for warning in warnings {
        volume.push_warning(warning);
    }
    Ok(volume)
}

/// The grid a NIfTI file's volume will have once loaded by [`read_nifti`] (dimensions and
/// voxel → LPS transform after reorientation), from the header alone.
pub fn read_nifti_grid(path: &Path) -> Result<([usize; 3], Affine), NiftiError> {
    let opened = open(path, 0)?;
    let (ras_from_voxel, _) = opened.header.ras_from_voxel();
    let lps_from_voxel = ras_from_voxel.ras_from_lps();
    let reorder = AxisReorder::towards_lps(&lps_from_voxel);
    Ok((
        reorder.output_dims(opened.dims),
        reorder.output_affine(&lps_from_voxel, opened.dims),
    ))
}

/// Reads a NIfTI segmentation as labels 0–255 on its own grid (not reoriented: resample it
/// onto the CT with [`keyslice_core::volume::resample_nearest`]). The name is the file stem.
pub fn read_label_nifti(path: &Path) -> Result<LabelVolume, NiftiError> {
    let Opened {
        header,
        mut data,
        data_type,
        dims,
        ..
    } = open(path, 1)?;
    let count = dims[0] * dims[1] * dims[2];
    let (slope, intercept) = scaling(&header);
    let mut labels = vec![0u8; count];
    if data_type == DataType::U8 && (slope - 1.0).abs() < 1e-12 && intercept.abs() < 1e-12 {
        // The common case (AbdomenAtlas and Keyslice masks): the bytes are the labels.
        data.read_exact(&mut labels)
            .map_err(|error| NiftiError::Data {
                path: path.to_path_buf(),
                detail: format!("{count} label voxels expected: {error}"),
            })?;
        return Ok(LabelVolume {
            name: label_name(path),
            dims,
            patient_from_voxel: header.ras_from_voxel().0.ras_from_lps(),
            labels,
        });
    }
    let mut bad_value = None;
    let element = data_type.byte_size();
    let mut scratch = vec![0u8; CHUNK_ELEMENTS * element];
    let mut done = 0;
    while done < count {
        let take = (count - done).min(CHUNK_ELEMENTS);
        let bytes = &mut scratch[..take * element];
        data.read_exact(bytes).map_err(|error| NiftiError::Data {
            path: path.to_path_buf(),
            detail: format!("after {done} of {count} voxels: {error}"),
        })?;
        for (out, raw) in labels[done..done + take]
            .iter_mut()
            .zip(bytes.chunks_exact(element))
        {
            let value = decode_element(raw, data_type, header.little_endian) * slope + intercept;
            let rounded = value.round();
            if (value - rounded).abs() > 1e-3 || !(0.0..=255.0).contains(&rounded) {
                bad_value.get_or_insert(value);
            } else {
                *out = rounded as u8;
            }
        }
        done += take;
    }
    if let Some(value) = bad_value {
        return Err(NiftiError::NotLabels {
            path: path.to_path_buf(),
            detail: format!("it holds the value {value}"),
        });
    }
    Ok(LabelVolume {
        name: label_name(path),
        dims,
        patient_from_voxel: header.ras_from_voxel().0.ras_from_lps(),
        labels,
    })
}

/// A mask's structure name: its file name without `.nii`, `.nii.gz` or `.hdr`.
fn label_name(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().to_string())
        .unwrap_or_default();
    name.trim_end_matches(".gz")
        .trim_end_matches(".nii")
        .trim_end_matches(".hdr")
        .to_string()
}

/// `(slope, intercept)`, with a zero or non-finite slope meaning "no scaling" (nifti1.h).
fn scaling(header: &Header) -> (f64, f64) {
    if header.scl_slope == 0.0 || !header.scl_slope.is_finite() {
        (1.0, 0.0)
    } else {
        let intercept = if header.scl_inter.is_finite() {
            header.scl_inter
        } else {
            0.0
        };
        (header.scl_slope, intercept)
    }
}

const CHUNK_ELEMENTS: usize = 1 << 18;

fn decode_element(raw: &[u8], data_type: DataType, little_endian: bool) -> f64 {
    let mut bytes = [0u8; 8];
    let size = raw.len();
    bytes[..size].copy_from_slice(raw);
    if !little_endian {
        bytes[..size].reverse();
    }
    match data_type {
        DataType::U8 => f64::from(bytes[0]),
        DataType::I8 => f64::from(bytes[0] as i8),
        DataType::I16 => f64::from(i16::from_le_bytes([bytes[0], bytes[1]])),
        DataType::U16 => f64::from(u16::from_le_bytes([bytes[0], bytes[1]])),
        DataType::I32 => f64::from(i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])),
        DataType::U32 => f64::from(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])),
        DataType::F32 => f64::from(f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])),
        DataType::I64 => i64::from_le_bytes(bytes) as f64,
        DataType::U64 => u64::from_le_bytes(bytes) as f64,
        DataType::F64 => f64::from_le_bytes(bytes),
    }
}

/// Streams `count` voxels into their final type (see the module documentation).
fn read_voxels(
    data: &mut dyn Read,
    data_type: DataType,
    little_endian: bool,
    count: usize,
    slope: f64,
    intercept: f64,
) -> Result<Voxels, String> {
    let integral_scaling = slope.fract() == 0.0 && intercept.fract() == 0.0;
    // Exact identity scaling (as written by every tool that does not scale) means raw = value.
    #[expect(
        clippy::float_cmp,
        reason = "decoded values are exact; exact comparison is the point"
    )]
    let identity = slope == 1.0 && intercept == 0.0;
    if data_type == DataType::I16 && identity {
        // Fast path: the file's bytes are the final values.
        let mut values = vec![0i16; count];
        read_fully(data, bytemuck::cast_slice_mut(&mut values))?;
        if little_endian != cfg!(target_endian = "little") {
            for value in &mut values {
                *value = value.swap_bytes();
            }
        }
        return Ok(Voxels::I16(values));
    }
    let element = data_type.byte_size();
    let mut scratch = vec![0u8; CHUNK_ELEMENTS * element];
    let mut integers: Option<Vec<i16>> =
        (!data_type.is_float() && integral_scaling).then(|| Vec::with_capacity(count));
    let mut floats: Vec<f32> = Vec::new();
    let mut done = 0;
    while done < count {
        let take = (count - done).min(CHUNK_ELEMENTS);
        let bytes = &mut scratch[..take * element];
        read_fully(data, bytes)
            .map_err(|detail| format!("after {done} of {count} voxels: {detail}"))?;
        for raw in bytes.chunks_exact(element) {
            let value = decode_element(raw, data_type, little_endian) * slope + intercept;
            if let Some(values) = integers.as_mut() {
                if value >= f64::from(i16::MIN) && value <= f64::from(i16::MAX) {
                    values.push(value as i16);
                    continue;
                }
                // First value outside i16: move what we have to f32 and continue there.
                floats = Vec::with_capacity(count);
                floats.extend(values.iter().map(|&v| f32::from(v)));
                integers = None;
            }
            if floats.capacity() == 0 {
                floats.reserve_exact(count);
            }
            floats.push(value as f32);
        }
        done += take;
    }
    Ok(match integers {
        Some(values) => Voxels::I16(values),
        None => Voxels::F32(floats),
    })
}

/// NaN and infinite voxels (float data, or values beyond the range of `f32`) become the
/// lowest finite value, with a warning that counts them; a volume with no finite voxel is
/// refused.
fn replace_non_finite(
    values: &mut [f32],
    path: &Path,
    warnings: &mut Vec<String>,
) -> Result<(), NiftiError> {
    let non_finite = values.iter().filter(|value| !value.is_finite()).count();
    if non_finite == 0 {
        return Ok(());
    }
    let Some(lowest) = values
        .iter()
        .copied()
        .filter(|value| value.is_finite())
        .reduce(f32::min)
    else {
        return Err(NiftiError::Data {
            path: path.to_path_buf(),
            detail: format!("all {} voxels are NaN or infinite", values.len()),
        });
    };
    for value in values.iter_mut().filter(|value| !value.is_finite()) {
        *value = lowest;
    }
    warnings.push(format!(
        "{non_finite} voxel(s) are NaN or infinite; they are shown as the lowest value, {lowest}"
    ));
    Ok(())
}

/// Fills `bytes` from `data`, saying how far it got when the data ends early.
fn read_fully(data: &mut dyn Read, bytes: &mut [u8]) -> Result<(), String> {
    let mut filled = 0;
    while filled < bytes.len() {
        match data.read(&mut bytes[filled..]) {
            Ok(0) => {
                return Err(format!(
                    "the data ends after {filled} of the {} bytes expected",
                    bytes.len()
                ));
            }
            Ok(read) => filled += read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(format!("after {filled} bytes: {error}")),
        }
    }
    Ok(())
}
