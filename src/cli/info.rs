//! `keyslice info PATH [--series UID] [--json]`: what the volume is and where it sits.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use keyslice_workflow::info::InfoReport;

use super::CliError;
use crate::io::{LoadOptions, load_study};

/// Arguments of `info`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    /// A DICOM file, a folder of DICOM files, a DICOMDIR, a .nii/.nii.gz file, or a case
    /// folder holding ct.nii.gz.
    pub path: PathBuf,
    /// Series Instance UID to describe instead of the largest image series.
    #[arg(long)]
    pub series: Option<String>,
    /// Print JSON (keys are listed in `docs/manual.md`).
    #[arg(long)]
    pub json: bool,
}

/// Runs `info`.
pub fn run(args: &InfoArgs) -> Result<(), CliError> {
    let study = load_study(
        &args.path,
        &LoadOptions {
            series_uid: args.series.clone(),
        },
    )?;
    let report = InfoReport::from_study(&study);
    let mut stdout = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut stdout, &report).map_err(std::io::Error::from)?;
        writeln!(stdout)?;
    } else {
        write!(stdout, "{}", report.to_text())?;
    }
    Ok(())
}
