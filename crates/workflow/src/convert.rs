//! A CT converted: to NIfTI-1 (oriented as dcm2niix writes it), or to a DICOM CT series (to
//! load phantoms or converted studies into a PACS) with the identity given.

use std::path::{Path, PathBuf};

use keyslice_io::dicom::write::{SeriesIdentity, write_ct_series};
use keyslice_io::nifti::{WriteOptions, write_nifti};
use keyslice_io::{IoError, LoadOptions, Study, load_study};

use crate::{Error, Outcome, Report};

/// The identity a converted DICOM series carries.
#[derive(Clone, Debug)]
pub struct Identity {
    /// Patient's Name, `Family^Given`.
    pub patient_name: String,
    /// Patient ID (default: the input's file name).
    pub patient_id: Option<String>,
    /// Accession Number.
    pub accession: String,
}

impl Identity {
    /// The identity as DICOM takes it: a person name without a backslash or a control
    /// character, the Patient ID (LO) and Accession Number (SH) single values within their
    /// length; each refused with its flag named.
    pub fn check(&self) -> Result<(), Error> {
        keyslice_io::dicom::write::check_person_name("--patient-name", &self.patient_name)
            .map_err(|error| {
                Error::Argument(keyslice_core::text::shown(&error.to_string()).into_owned())
            })?;
        let single = [
            (
                "--patient-id",
                self.patient_id.as_deref().unwrap_or_default(),
                64,
            ),
            ("--accession", self.accession.as_str(), 16),
        ];
        for (flag, value, limit) in single {
            let chars = value.chars().count();
            let problem = if value.contains('\\') {
                Some("holds a backslash (\\), which DICOM reads as a second value".to_string())
            } else if value.chars().any(char::is_control) {
                Some("holds a control character".to_string())
            } else if chars > limit {
                Some(format!(
                    "has {chars} characters; DICOM allows at most {limit}"
                ))
            } else {
                None
            };
            if let Some(problem) = problem {
                return Err(Error::Argument(format!(
                    "{flag} `{}` {problem}",
                    keyslice_core::text::shown(value)
                )));
            }
        }
        Ok(())
    }
}

/// What a CT becomes.
#[derive(Clone, Debug)]
pub enum Target {
    /// A NIfTI-1 file (`.nii`, or `.nii.gz` compressed).
    Nifti,
    /// A DICOM CT series in a new folder, one file per axial slice.
    Dicom(Identity),
}

/// A conversion done.
pub struct Converted {
    input: PathBuf,
    out: PathBuf,
    format: &'static str,
    dims: [usize; 3],
    dtype: &'static str,
    files: usize,
    warnings: Vec<String>,
}

#[expect(
    clippy::case_sensitive_file_extension_comparisons,
    reason = "compared lower-cased"
)]
fn is_nifti_name(path: &Path) -> bool {
    let lower = path.to_string_lossy().to_ascii_lowercase();
    lower.ends_with(".nii") || lower.ends_with(".nii.gz")
}

/// Converts the CT at `path` (the series `series_uid`, else the largest) to `target` at
/// `out`; the volume's warnings and the files that could not be read are told to `report`.
pub fn convert(
    path: &Path,
    series_uid: Option<String>,
    out: &Path,
    target: &Target,
    report: &dyn Report,
) -> Result<Converted, Error> {
    match target {
        Target::Dicom(identity) => {
            identity.check()?;
            if out.exists() {
                return Err(Error::Argument(format!(
                    "{} exists; --dicom writes the series into a new folder",
                    out.display()
                )));
            }
        }
        Target::Nifti if !is_nifti_name(out) => {
            return Err(Error::Argument(format!(
                "'{}' must end in .nii or .nii.gz (or add --dicom to write a DICOM series)",
                out.display()
            )));
        }
        Target::Nifti => {}
    }
    let study = load_study(path, &LoadOptions { series_uid })?;
    let warnings = warnings_of(&study);
    for warning in &warnings {
        report.warning(warning);
    }
    let (format, files) = match target {
        Target::Dicom(identity) => {
            let stem = path
                .file_name()
                .map_or_else(String::new, |name| name.to_string_lossy().into_owned());
            let stem = stem
                .trim_end_matches(".gz")
                .trim_end_matches(".nii")
                .to_string();
            let identity = SeriesIdentity {
                patient_name: identity.patient_name.clone(),
                patient_id: identity.patient_id.clone().unwrap_or(stem),
                accession: identity.accession.clone(),
                study_date: String::new(),
                study_description: "CT abdomen".into(),
                series_description: match study.volume.info().series_description.as_str() {
                    "" => "Converted by Keyslice".into(),
                    description => description.to_string(),
                },
            };
            let files = write_ct_series(&study.volume, out, &identity).map_err(IoError::from)?;
            ("dicom", files)
        }
        Target::Nifti => {
            write_nifti(&study.volume, out, WriteOptions::default()).map_err(IoError::from)?;
            ("nifti", 1)
        }
    };
    Ok(Converted {
        input: path.to_path_buf(),
        out: out.to_path_buf(),
        format,
        dims: study.volume.dims(),
        dtype: study.volume.voxels().type_name(),
        files,
        warnings,
    })
}

/// The volume's warnings, and each DICOM file that could not be read.
fn warnings_of(study: &Study) -> Vec<String> {
    let mut warnings: Vec<String> = study
        .volume
        .warnings()
        .iter()
        .map(ToString::to_string)
        .collect();
    warnings.extend(study.unreadable.iter().map(|skipped| {
        format!(
            "skipped unreadable DICOM file {}: {}",
            skipped.path.display(),
            skipped.reason
        )
    }));
    warnings
}

impl Outcome for Converted {
    fn json(&self) -> String {
        serde_json::json!({
            "input": self.input,
            "out": self.out,
            "format": self.format,
            "dims": self.dims,
            "dtype": self.dtype,
            "files": self.files,
            "warnings": self.warnings,
        })
        .to_string()
    }

    fn text(&self) -> String {
        let [columns, rows, slices] = self.dims;
        if self.format == "dicom" {
            format!(
                "wrote {} DICOM file(s) to {} ({columns} × {rows} × {slices})",
                self.files,
                self.out.display()
            )
        } else {
            format!(
                "wrote {} ({columns} × {rows} × {slices}, {})",
                self.out.display(),
                self.dtype
            )
        }
    }
}
