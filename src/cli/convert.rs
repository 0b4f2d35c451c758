//! `keyslice convert PATH OUT.nii[.gz] [--series UID]`: a CT as NIfTI-1, oriented as dcm2niix
//! writes it; `keyslice convert PATH OUT_FOLDER --dicom --patient-id ID`: a CT as a DICOM CT
//! series (to load phantoms or converted studies into a PACS).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::io::dicom::write::{SeriesIdentity, write_ct_series};
use crate::io::nifti::{WriteOptions, write_nifti};
use crate::io::{IoError, LoadOptions, load_study};

/// Arguments of `convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// A DICOM file, folder or DICOMDIR, or a NIfTI file.
    pub path: PathBuf,
    /// The NIfTI file to write (`.nii.gz` compresses), or with `--dicom` the folder for the
    /// DICOM series (it must not exist).
    pub out: PathBuf,
    /// Series Instance UID to convert instead of the largest image series.
    #[arg(long)]
    pub series: Option<String>,
    /// Write a DICOM CT series (one file per axial slice) instead of NIfTI.
    #[arg(long)]
    pub dicom: bool,
    /// With `--dicom`: the Patient ID to write (default: the input's file name).
    #[arg(long, requires = "dicom")]
    pub patient_id: Option<String>,
    /// With `--dicom`: the Patient's Name to write, `Family^Given`.
    #[arg(long, requires = "dicom", default_value = "Anonymous")]
    pub patient_name: String,
    /// With `--dicom`: the Accession Number to write.
    #[arg(long, requires = "dicom", default_value = "")]
    pub accession: String,
    /// Print what was written as one JSON line (`out`, `format`, `dims`, `files`, `dtype`,
    /// `warnings`).
    #[arg(long)]
    pub json: bool,
}

#[expect(
    clippy::case_sensitive_file_extension_comparisons,
    reason = "compared lower-cased"
)]
fn nifti_output_path(value: &str) -> Result<PathBuf, String> {
    let lower = value.to_ascii_lowercase();
    if lower.ends_with(".nii") || lower.ends_with(".nii.gz") {
        Ok(PathBuf::from(value))
    } else {
        Err(format!("'{value}' must end in .nii or .nii.gz"))
    }
}

/// The identity flags as DICOM takes them: a person name without a backslash or a control
/// character, the Patient ID (LO) and Accession Number (SH) single values within their length;
/// each refused with the flag named.
fn check_identity(args: &ConvertArgs) -> Result<(), CliError> {
    crate::io::dicom::write::check_person_name("--patient-name", &args.patient_name)
        .map_err(|error| CliError::Argument(crate::text::shown(&error.to_string()).into_owned()))?;
    let single = [
        (
            "--patient-id",
            args.patient_id.as_deref().unwrap_or_default(),
            64,
        ),
        ("--accession", args.accession.as_str(), 16),
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
            return Err(CliError::Argument(format!(
                "{flag} `{}` {problem}",
                crate::text::shown(value)
            )));
        }
    }
    Ok(())
}

/// Runs `convert`.
pub fn run(args: &ConvertArgs) -> Result<(), CliError> {
    if args.dicom {
        check_identity(args)?;
    }
    if args.dicom && args.out.exists() {
        return Err(CliError::Argument(format!(
            "{} exists; --dicom writes the series into a new folder",
            args.out.display()
        )));
    }
    if !args.dicom {
        nifti_output_path(&args.out.to_string_lossy()).map_err(|reason| {
            CliError::Argument(format!("{reason} (or add --dicom to write a DICOM series)"))
        })?;
    }
    let study = load_study(
        &args.path,
        &LoadOptions {
            series_uid: args.series.clone(),
        },
    )?;
    let mut stderr = std::io::stderr().lock();
    for warning in study.volume.warnings() {
        writeln!(stderr, "warning: {warning}")?;
    }
    for skipped in &study.unreadable {
        writeln!(
            stderr,
            "warning: skipped unreadable DICOM file {}: {}",
            skipped.path.display(),
            skipped.reason
        )?;
    }
    let [columns, rows, slices] = study.volume.dims();
    if args.dicom {
        let stem = args
            .path
            .file_name()
            .map_or_else(String::new, |name| name.to_string_lossy().into_owned());
        let stem = stem
            .trim_end_matches(".gz")
            .trim_end_matches(".nii")
            .to_string();
        let identity = SeriesIdentity {
            patient_name: args.patient_name.clone(),
            patient_id: args.patient_id.clone().unwrap_or(stem),
            accession: args.accession.clone(),
            study_date: String::new(),
            study_description: "CT abdomen".into(),
            series_description: match study.volume.info().series_description.as_str() {
                "" => "Converted by Keyslice".into(),
                description => description.to_string(),
            },
        };
        let files = write_ct_series(&study.volume, &args.out, &identity).map_err(IoError::from)?;
        let summary = summary(args, &study, "dicom", files);
        return super::print_summary(args.json, &summary, || {
            format!(
                "wrote {files} DICOM file(s) to {} ({columns} × {rows} × {slices})",
                args.out.display()
            )
        });
    }
    write_nifti(&study.volume, &args.out, WriteOptions::default()).map_err(IoError::from)?;
    let summary = summary(args, &study, "nifti", 1);
    super::print_summary(args.json, &summary, || {
        format!(
            "wrote {} ({columns} × {rows} × {slices}, {})",
            args.out.display(),
            study.volume.voxels().type_name()
        )
    })
}

/// What `convert --json` prints.
fn summary(
    args: &ConvertArgs,
    study: &crate::io::Study,
    format: &str,
    files: usize,
) -> serde_json::Value {
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
    serde_json::json!({
        "input": args.path,
        "out": args.out,
        "format": format,
        "dims": study.volume.dims(),
        "dtype": study.volume.voxels().type_name(),
        "files": files,
        "warnings": warnings,
    })
}
