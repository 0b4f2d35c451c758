//! `keyslice convert PATH OUT.nii[.gz] [--series UID]`: a CT as NIfTI-1, oriented as dcm2niix
//! writes it.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::io::nifti::{WriteOptions, write_nifti};
use crate::io::{IoError, LoadOptions, load_study};

/// Arguments of `convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// A DICOM file, folder or DICOMDIR, or a NIfTI file.
    pub path: PathBuf,
    /// The NIfTI file to write; `.nii.gz` compresses.
    #[arg(value_parser = nifti_output_path)]
    pub out: PathBuf,
    /// Series Instance UID to convert instead of the largest image series.
    #[arg(long)]
    pub series: Option<String>,
}

#[allow(clippy::case_sensitive_file_extension_comparisons)] // compared lower-cased
fn nifti_output_path(value: &str) -> Result<PathBuf, String> {
    let lower = value.to_ascii_lowercase();
    if lower.ends_with(".nii") || lower.ends_with(".nii.gz") {
        Ok(PathBuf::from(value))
    } else {
        Err(format!("'{value}' must end in .nii or .nii.gz"))
    }
}

/// Runs `convert`.
pub fn run(args: &ConvertArgs) -> Result<(), CliError> {
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
    write_nifti(&study.volume, &args.out, WriteOptions::default()).map_err(IoError::from)?;
    let [columns, rows, slices] = study.volume.dims();
    writeln!(
        std::io::stdout().lock(),
        "wrote {} ({columns} × {rows} × {slices}, {})",
        args.out.display(),
        study.volume.voxels().type_name()
    )?;
    Ok(())
}
