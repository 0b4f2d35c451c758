//! A CT described: its geometry, HU range, warnings and the DICOM series found, as the
//! `info` command prints it (text, or JSON whose keys `docs/manual.md` lists).

use std::path::PathBuf;

use keyslice_core::text::shown;
use keyslice_core::volume::geometry::dominant_letter;
use keyslice_io::{SeriesSummary, SourceFormat, Study};
use serde::Serialize;

/// The `--json` document.
#[derive(Debug, Serialize)]
pub struct InfoReport {
    /// The file or folder read.
    pub path: PathBuf,
    /// `"dicom"` or `"nifti"`.
    pub format: SourceFormat,
    /// DICOM Modality (empty for NIfTI).
    pub modality: String,
    /// Series Instance UID (empty for NIfTI).
    pub series_uid: String,
    /// Series Description (NIfTI: `descrip`).
    pub series_description: String,
    /// Columns, rows, slices.
    pub dims: [usize; 3],
    /// Spacing along columns, rows, slices (mm).
    pub spacing_mm: [f64; 3],
    /// Patient position of voxel [0, 0, 0] (LPS, mm).
    pub origin_lps_mm: [f64; 3],
    /// Direction matrix, row-major; column c is the unit vector of voxel axis c in LPS.
    pub direction_lps: [f64; 9],
    /// `"int16"` or `"float32"`.
    pub voxel_type: &'static str,
    /// Value range in HU (or the modality's unit).
    pub hu: HuStats,
    /// What the loader warns about, including skipped files.
    pub warnings: Vec<String>,
    /// Every DICOM series found (empty for NIfTI).
    pub series: Vec<SeriesSummary>,
}

/// `hu` in the JSON.
#[derive(Debug, Serialize)]
pub struct HuStats {
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Mean value.
    pub mean: f64,
}

impl InfoReport {
    /// Describes a loaded study.
    #[must_use]
    pub fn from_study(study: &Study) -> Self {
        let volume = &study.volume;
        let directions = volume.directions_lps();
        let mut direction_lps = [0.0; 9];
        for row in 0..3 {
            for column in 0..3 {
                direction_lps[3 * row + column] = directions[column][row];
            }
        }
        let stats = volume.value_stats();
        let mut warnings = volume.warnings().to_vec();
        for skipped in &study.unreadable {
            warnings.push(format!(
                "skipped unreadable DICOM file {}: {}",
                skipped.path.display(),
                skipped.reason
            ));
        }
        if study.non_dicom_files > 0 {
            warnings.push(format!(
                "skipped {} non-DICOM file(s)",
                study.non_dicom_files
            ));
        }
        Self {
            path: study.path.clone(),
            format: study.format,
            modality: volume.info().modality.clone(),
            series_uid: volume.info().series_uid.clone(),
            series_description: volume.info().series_description.clone(),
            dims: volume.dims(),
            spacing_mm: volume.spacing_mm(),
            origin_lps_mm: volume.origin_lps_mm(),
            direction_lps,
            voxel_type: volume.voxels().type_name(),
            hu: HuStats {
                min: stats.min,
                max: stats.max,
                mean: stats.mean,
            },
            warnings,
            series: study.series.clone(),
        }
    }

    /// The readable form.
    #[must_use]
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut text = String::new();
        let [columns, rows, slices] = self.dims;
        let [sx, sy, sz] = self.spacing_mm;
        let [ox, oy, oz] = self.origin_lps_mm;
        // Writing to a String cannot fail.
        let _ = writeln!(
            text,
            "path         {}",
            shown(&self.path.display().to_string())
        );
        let _ = writeln!(
            text,
            "format       {}",
            match self.format {
                SourceFormat::Dicom => "DICOM",
                SourceFormat::Nifti => "NIfTI",
            }
        );
        if !self.modality.is_empty() {
            let _ = writeln!(text, "modality     {}", shown(&self.modality));
        }
        if !self.series_uid.is_empty() {
            let _ = writeln!(text, "series       {}", shown(&self.series_uid));
        }
        if !self.series_description.is_empty() {
            let _ = writeln!(text, "description  {}", shown(&self.series_description));
        }
        let _ = writeln!(
            text,
            "dims         {columns} × {rows} × {slices} (columns × rows × slices), {}",
            self.voxel_type
        );
        let _ = writeln!(text, "spacing      {sx:.4} × {sy:.4} × {sz:.4} mm");
        let _ = writeln!(text, "origin       ({ox:.2}, {oy:.2}, {oz:.2}) mm LPS");
        for (axis, name) in ["i", "j", "k"].iter().enumerate() {
            let direction = [
                self.direction_lps[axis],
                self.direction_lps[3 + axis],
                self.direction_lps[6 + axis],
            ];
            let _ = writeln!(
                text,
                "{}            {name} → {} ({:+.4}, {:+.4}, {:+.4})",
                if axis == 0 { "axes" } else { "    " },
                dominant_letter(direction),
                direction[0],
                direction[1],
                direction[2]
            );
        }
        let _ = writeln!(
            text,
            "values       min {:.1}  max {:.1}  mean {:.2}",
            self.hu.min, self.hu.max, self.hu.mean
        );
        for warning in &self.warnings {
            let _ = writeln!(text, "warning      {}", shown(warning));
        }
        if !self.series.is_empty() {
            let _ = writeln!(text, "series found {}", self.series.len());
            for series in &self.series {
                let description = if series.series_description.is_empty() {
                    String::new()
                } else {
                    format!("  \"{}\"", shown(&series.series_description))
                };
                let _ = writeln!(
                    text,
                    "  {} {:<8} {:>5} slices  {}×{}  {}{description}",
                    if series.selected { "*" } else { " " },
                    shown(&series.modality),
                    series.slices,
                    series.image_size[0],
                    series.image_size[1],
                    shown(&series.series_uid),
                );
            }
        }
        text
    }
}
