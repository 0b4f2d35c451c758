//! `keyslice convert PATH OUT.nii[.gz] [--series UID]`: a CT as NIfTI-1, oriented as dcm2niix
//! writes it; `keyslice convert PATH OUT_FOLDER --dicom --patient-id ID`: a CT as a DICOM CT
//! series (to load phantoms or converted studies into a PACS).

use std::path::PathBuf;

use clap::Args;

use super::CliError;

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

/// Runs `convert`.
pub fn run(args: &ConvertArgs) -> Result<(), CliError> {
    use keyslice_workflow::convert::{Identity, Target, convert};
    let target = if args.dicom {
        Target::Dicom(Identity {
            patient_name: args.patient_name.clone(),
            patient_id: args.patient_id.clone(),
            accession: args.accession.clone(),
        })
    } else {
        Target::Nifti
    };
    let converted = convert(
        &args.path,
        args.series.clone(),
        &args.out,
        &target,
        &super::Terminal::default(),
    )?;
    super::print_outcome(args.json, &converted)
}
