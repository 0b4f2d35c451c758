//! The CT volume every other module agrees on: voxels in Hounsfield units, their grid, and
//! where each voxel sits in the patient (LPS, millimetres).
//!
//! Layout: voxel `[i, j, k]` is stored at `i + columns·(j + rows·k)`; `i` runs along an image
//! row (a column index), `j` down the image (a row index), `k` over slices. For DICOM, slice
//! `k` is ordered along the slice normal `row × column` (for axial: inferior → superior) and
//! keeps its own patient position and SOP Instance UID.
//!
//! Core module: no file formats, no GPU, no UI. `io` builds volumes, everything else reads them.

pub mod demo;
pub mod filter;
pub mod geometry;
pub mod label;
pub mod lesion;
pub mod mask;
pub mod orient;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

pub use geometry::{Affine, Vec3};
pub use label::{LabelVolume, Structure, combine_structures, resample_nearest};

/// The voxel values, in Hounsfield units for CT (or the modality's rescaled unit otherwise).
#[derive(Clone, Debug, PartialEq)]
pub enum Voxels {
    /// Exact integer values (rescale slope and intercept integral, values within i16).
    I16(Vec<i16>),
    /// Values a 16-bit integer cannot hold exactly.
    F32(Vec<f32>),
}

impl Voxels {
    /// Number of voxels.
    #[must_use]
    pub fn len(&self) -> usize {
        match self {
            Self::I16(values) => values.len(),
            Self::F32(values) => values.len(),
        }
    }

    /// Whether there are no voxels.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value at a flat index, as `f32`, or `None` outside the volume.
    #[must_use]
    pub fn get(&self, index: usize) -> Option<f32> {
        match self {
            Self::I16(values) => values.get(index).map(|&value| f32::from(value)),
            Self::F32(values) => values.get(index).copied(),
        }
    }

    /// Bytes the voxels take in memory.
    #[must_use]
    pub fn byte_len(&self) -> usize {
        match self {
            Self::I16(values) => values.len() * 2,
            Self::F32(values) => values.len() * 4,
        }
    }

    /// Name of the element type as `info` prints it (`"int16"`, `"float32"`).
    #[must_use]
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::I16(_) => "int16",
            Self::F32(_) => "float32",
        }
    }
}

/// Per-slice facts kept from the source, indexed by slice `k`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SliceInfo {
    /// Patient position (LPS, mm) of the slice's first voxel, as the source recorded it.
    pub position_lps_mm: Vec3,
    /// DICOM SOP Instance UID of the image this slice came from (`None` for NIfTI).
    pub sop_instance_uid: Option<String>,
    /// Frame number inside a multi-frame DICOM object (1-based), when there is one.
    pub frame_number: Option<u32>,
}

/// What the volume is and where it came from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VolumeInfo {
    /// DICOM Modality (`"CT"`), or empty when unknown (NIfTI).
    pub modality: String,
    /// DICOM Series Instance UID, or empty for NIfTI.
    pub series_uid: String,
    /// DICOM Series Description, or the NIfTI `descrip` field.
    pub series_description: String,
    /// Whether the source said MONOCHROME1: low values are to be shown bright.
    pub display_inverted: bool,
    /// DICOM Body Part Examined (`"ABDOMEN"`), or empty when unknown.
    #[serde(default)]
    pub body_part: String,
    /// Who and which study, from the DICOM header, for the reviewer to check they are on the
    /// right patient; `None` when the file holds no identity (NIfTI, phantoms). Shown on the
    /// user's machine only: never exported, never part of a case id.
    #[serde(default)]
    pub patient: Option<PatientIdentity>,
    /// Whether a slice of the series says Burned In Annotation (0028,0301) `YES`: text (a
    /// name, a date, an instruction) is drawn into its pixels, so its images are never sent
    /// to a model server unless the user allows it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub burned_in_annotation: bool,
}

/// The patient and study a DICOM series belongs to, as its header gives them (empty when
/// absent).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatientIdentity {
    /// Patient's Name (0010,0010), as `FAMILY^GIVEN`.
    pub name: String,
    /// Patient ID (0010,0020).
    pub id: String,
    /// Patient's Birth Date (0010,0030), `YYYYMMDD`.
    pub birth_date: String,
    /// Patient's Sex (0010,0040).
    pub sex: String,
    /// Study Date (0008,0020), `YYYYMMDD`.
    pub study_date: String,
    /// Accession Number (0008,0050).
    pub accession: String,
}

impl PatientIdentity {
    /// One line a reviewer reads at a glance: `DOE, JANE · ID 12345 · born 1960-01-02 · F ·
    /// study 2024-01-05 · accession A1`; missing parts are left out. Control characters
    /// are shown as escapes.
    #[must_use]
    pub fn line(&self) -> String {
        let date = |text: &str| {
            if text.len() == 8 && text.bytes().all(|b| b.is_ascii_digit()) {
                format!("{}-{}-{}", &text[..4], &text[4..6], &text[6..])
            } else {
                text.to_string()
            }
        };
        let name = crate::text::person_name(&self.name);
        let parts = [
            name,
            labelled("ID", &self.id),
            labelled("born", &date(&self.birth_date)),
            self.sex.trim().to_string(),
            labelled("study", &date(&self.study_date)),
            labelled("accession", &self.accession),
        ];
        let line = parts
            .iter()
            .filter(|part| !part.is_empty())
            .cloned()
            .collect::<Vec<_>>()
            .join(" · ");
        crate::text::shown(&line).into_owned()
    }
}

/// `label value`, or nothing when `value` is blank.
fn labelled(label: &str, value: &str) -> String {
    let value = value.trim();
    if value.is_empty() {
        String::new()
    } else {
        format!("{label} {value}")
    }
}

/// Errors building a volume from parts that do not fit together.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// The voxel count does not match the dimensions.
    #[error("volume has {actual} voxels but its dimensions {dims:?} need {expected}")]
    VoxelCountMismatch {
        /// Columns, rows, slices.
        dims: [usize; 3],
        /// `dims` multiplied out.
        expected: usize,
        /// What was given.
        actual: usize,
    },
    /// A dimension is zero.
    #[error("volume dimensions {dims:?} contain a zero")]
    EmptyDimension {
        /// Columns, rows, slices.
        dims: [usize; 3],
    },
    /// The voxel-to-patient map cannot be inverted.
    #[error("the voxel-to-patient transform is singular (a zero spacing or parallel axes)")]
    SingularTransform,
    /// The voxel size or position is not a number a CT can have.
    #[error("implausible geometry: {detail}")]
    ImplausibleGeometry {
        /// Which axis or coordinate, and its value.
        detail: String,
    },
    /// The per-slice list does not have one entry per slice.
    #[error("volume has {slices} slices but {infos} per-slice records")]
    SliceInfoMismatch {
        /// Slices in `dims`.
        slices: usize,
        /// Records given.
        infos: usize,
    },
}

/// Largest voxel size accepted along any axis: a metre. Larger values come from damaged
/// headers (a spacing of 1e29 mm), never from a scanner.
pub const MAX_SPACING_MM: f64 = 1000.0;

/// Farthest the first voxel may lie from the scanner's origin: a kilometre.
pub const MAX_ORIGIN_MM: f64 = 1.0e6;

/// Refuses a transform whose numbers no scanner writes: NaN or infinite entries, a voxel
/// size of zero or over [`MAX_SPACING_MM`], an origin beyond [`MAX_ORIGIN_MM`].
fn check_geometry(patient_from_voxel: &Affine) -> Result<(), VolumeError> {
    let names = ["column (i)", "row (j)", "slice (k)"];
    for (axis, spacing) in patient_from_voxel.spacing_mm().into_iter().enumerate() {
        if !spacing.is_finite() || spacing <= 0.0 || spacing > MAX_SPACING_MM {
            return Err(VolumeError::ImplausibleGeometry {
                detail: format!(
                    "the {} axis has a voxel size of {spacing} mm (accepted: above 0, at most {MAX_SPACING_MM} mm)",
                    names[axis]
                ),
            });
        }
    }
    for (axis, value) in patient_from_voxel.translation.into_iter().enumerate() {
        if !value.is_finite() || value.abs() > MAX_ORIGIN_MM {
            return Err(VolumeError::ImplausibleGeometry {
                detail: format!(
                    "the first voxel's position has {} = {value} mm (accepted: within ±{MAX_ORIGIN_MM} mm)",
                    ["x", "y", "z"][axis]
                ),
            });
        }
    }
    Ok(())
}

/// Minimum, maximum and mean of the voxel values.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValueStats {
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
}

/// A 3D scalar image on a regular grid placed in the patient frame.
#[derive(Clone, Debug, PartialEq)]
pub struct Volume {
    dims: [usize; 3],
    patient_from_voxel: Affine,
    voxels: Voxels,
    slices: Vec<SliceInfo>,
    info: VolumeInfo,
    warnings: Vec<String>,
}

impl Volume {
    /// Assembles a volume, checking that the parts agree.
    ///
    /// `slices` may be empty, in which case per-slice positions are derived from the transform.
    pub fn new(
        dims: [usize; 3],
        patient_from_voxel: Affine,
        voxels: Voxels,
        slices: Vec<SliceInfo>,
        info: VolumeInfo,
    ) -> Result<Self, VolumeError> {
        if dims.contains(&0) {
            return Err(VolumeError::EmptyDimension { dims });
        }
        let expected = dims[0]
            .checked_mul(dims[1])
            .and_then(|plane| plane.checked_mul(dims[2]))
            .unwrap_or(usize::MAX);
        if voxels.len() != expected {
            return Err(VolumeError::VoxelCountMismatch {
                dims,
                expected,
                actual: voxels.len(),
            });
        }
        check_geometry(&patient_from_voxel)?;
        if patient_from_voxel.inverse().is_none() {
            return Err(VolumeError::SingularTransform);
        }
        let slices = if slices.is_empty() {
            (0..dims[2])
                .map(|k| SliceInfo {
                    position_lps_mm: patient_from_voxel.apply([0.0, 0.0, k as f64]),
                    sop_instance_uid: None,
                    frame_number: None,
                })
                .collect()
        } else if slices.len() == dims[2] {
            slices
        } else {
            return Err(VolumeError::SliceInfoMismatch {
                slices: dims[2],
                infos: slices.len(),
            });
        };
        Ok(Self {
            dims,
            patient_from_voxel,
            voxels,
            slices,
            info,
            warnings: Vec::new(),
        })
    }

    /// Columns, rows, slices.
    #[must_use]
    pub fn dims(&self) -> [usize; 3] {
        self.dims
    }

    /// Voxel index → patient LPS millimetres.
    #[must_use]
    pub fn patient_from_voxel(&self) -> &Affine {
        &self.patient_from_voxel
    }

    /// Spacing along `i`, `j`, `k` in millimetres.
    #[must_use]
    pub fn spacing_mm(&self) -> Vec3 {
        self.patient_from_voxel.spacing_mm()
    }

    /// Patient position of voxel `[0, 0, 0]`.
    #[must_use]
    pub fn origin_lps_mm(&self) -> Vec3 {
        self.patient_from_voxel.translation
    }

    /// Unit direction of each voxel axis in LPS, as columns.
    #[must_use]
    pub fn directions_lps(&self) -> [Vec3; 3] {
        self.patient_from_voxel.directions()
    }

    /// The voxel values.
    #[must_use]
    pub fn voxels(&self) -> &Voxels {
        &self.voxels
    }

    /// Takes the voxel values out, leaving the rest of the description.
    #[must_use]
    pub fn into_voxels(self) -> Voxels {
        self.voxels
    }

    /// Per-slice facts, one per `k`.
    #[must_use]
    pub fn slices(&self) -> &[SliceInfo] {
        &self.slices
    }

    /// Source description.
    #[must_use]
    pub fn info(&self) -> &VolumeInfo {
        &self.info
    }

    /// Things the loader noticed that a user should know (irregular spacing, a dropped file).
    #[must_use]
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Adds a warning.
    pub fn push_warning(&mut self, warning: impl Into<String>) {
        self.warnings.push(warning.into());
    }

    /// Flat index of voxel `[i, j, k]`, or `None` outside the grid.
    #[must_use]
    pub fn index(&self, voxel: [usize; 3]) -> Option<usize> {
        let [columns, rows, slices] = self.dims;
        (voxel[0] < columns && voxel[1] < rows && voxel[2] < slices)
            .then(|| voxel[0] + columns * (voxel[1] + rows * voxel[2]))
    }

    /// The value at voxel `[i, j, k]`.
    #[must_use]
    pub fn value(&self, voxel: [usize; 3]) -> Option<f32> {
        self.index(voxel).and_then(|index| self.voxels.get(index))
    }

    /// The value of the voxel nearest to a patient point, or `None` outside the volume.
    #[must_use]
    pub fn value_at_patient(&self, point_lps_mm: Vec3) -> Option<f32> {
        let voxel = self.patient_from_voxel.inverse()?.apply(point_lps_mm);
        let mut index = [0usize; 3];
        for axis in 0..3 {
            let rounded = voxel[axis].round();
            if rounded < 0.0 || rounded >= self.dims[axis] as f64 {
                return None;
            }
            index[axis] = rounded as usize;
        }
        self.value(index)
    }

    /// Minimum, maximum and mean of all voxels (computed in parallel).
    #[must_use]
    pub fn value_stats(&self) -> ValueStats {
        fn fold<T: Copy + Into<f64> + Send + Sync>(values: &[T]) -> ValueStats {
            let (min, max, sum) = values
                .par_chunks(1 << 16)
                .map(|chunk| {
                    chunk.iter().fold(
                        (f64::INFINITY, f64::NEG_INFINITY, 0.0_f64),
                        |(min, max, sum), &value| {
                            let value: f64 = value.into();
                            (min.min(value), max.max(value), sum + value)
                        },
                    )
                })
                .reduce(
                    || (f64::INFINITY, f64::NEG_INFINITY, 0.0),
                    |a, b| (a.0.min(b.0), a.1.max(b.1), a.2 + b.2),
                );
            ValueStats {
                min,
                max,
                mean: sum / values.len().max(1) as f64,
            }
        }
        match &self.voxels {
            Voxels::I16(values) => fold(values),
            Voxels::F32(values) => fold(values),
        }
    }

    /// Replaces voxels, transform and slice records at once (used by reorientation).
    /// The voxels, to change in place (the grid stays as it is).
    pub(crate) fn voxels_mut(&mut self) -> &mut Voxels {
        &mut self.voxels
    }

    /// A new transform and per-slice records for the same dimensions.
    pub(crate) fn replace_geometry(&mut self, patient_from_voxel: Affine, slices: Vec<SliceInfo>) {
        self.patient_from_voxel = patient_from_voxel;
        self.slices = slices;
    }

    pub(crate) fn replace_grid(
        &mut self,
        dims: [usize; 3],
        patient_from_voxel: Affine,
        voxels: Voxels,
        slices: Vec<SliceInfo>,
    ) {
        self.dims = dims;
        self.patient_from_voxel = patient_from_voxel;
        self.voxels = voxels;
        self.slices = slices;
    }
}

#[cfg(test)]
#[expect(
    clippy::float_cmp,
    reason = "decoded values are exact; exact comparison is the point"
)]
mod tests {
    use super::*;

    fn ramp(dims: [usize; 3]) -> Volume {
        let count = dims.iter().product::<usize>();
        let voxels = Voxels::I16((0..count).map(|value| value as i16).collect());
        let affine = Affine::from_axes(
            [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            [0.5, 0.5, 2.0],
            [-10.0, -20.0, 30.0],
        );
        Volume::new(dims, affine, voxels, Vec::new(), VolumeInfo::default())
            .expect("ramp parts agree")
    }

    #[test]
    fn index_runs_columns_then_rows_then_slices() {
        let volume = ramp([4, 3, 2]);
        assert_eq!(volume.index([1, 0, 0]), Some(1));
        assert_eq!(volume.index([0, 1, 0]), Some(4));
        assert_eq!(volume.index([0, 0, 1]), Some(12));
        assert_eq!(volume.index([4, 0, 0]), None);
        assert_eq!(volume.value([3, 2, 1]), Some(23.0));
    }

    #[test]
    fn patient_lookup_finds_the_nearest_voxel() {
        let volume = ramp([4, 3, 2]);
        // Voxel [2, 1, 1] sits at (-10 + 1.0, -20 + 0.5, 30 + 2.0).
        assert_eq!(volume.value_at_patient([-9.0, -19.5, 32.0]), Some(18.0));
        assert_eq!(volume.value_at_patient([100.0, 0.0, 0.0]), None);
    }

    #[test]
    fn derived_slice_positions_follow_the_transform() {
        let volume = ramp([4, 3, 2]);
        assert_eq!(volume.slices()[1].position_lps_mm, [-10.0, -20.0, 32.0]);
    }

    #[test]
    fn stats_cover_every_voxel() {
        let stats = ramp([4, 3, 2]).value_stats();
        assert_eq!(stats.min, 0.0);
        assert_eq!(stats.max, 23.0);
        assert!((stats.mean - 11.5).abs() < 1e-12);
    }

    #[test]
    fn mismatched_parts_are_refused() {
        let affine = Affine::IDENTITY;
        let too_few = Volume::new(
            [2, 2, 2],
            affine,
            Voxels::F32(vec![0.0; 7]),
            Vec::new(),
            VolumeInfo::default(),
        );
        assert!(matches!(
            too_few,
            Err(VolumeError::VoxelCountMismatch { expected: 8, .. })
        ));
        let zero = Volume::new(
            [2, 0, 2],
            affine,
            Voxels::F32(Vec::new()),
            Vec::new(),
            VolumeInfo::default(),
        );
        assert!(matches!(zero, Err(VolumeError::EmptyDimension { .. })));
    }
}
