//! `keyslice export WORKSPACE --format FORMAT --out DIR`: reviewed cases as training data
//! (see `export` for the steps and `export::formats` for each format's files).

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::CliError;
use crate::export::{ExportFormat, ExportOptions};

/// Arguments of `export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The workspace folder.
    pub workspace: PathBuf,
    /// The training-data format.
    #[arg(long, value_enum)]
    pub format: FormatArg,
    /// The export folder (made, or an earlier export there replaced once the new one is
    /// complete).
    #[arg(long)]
    pub out: PathBuf,
    /// Also export cases not accepted yet (answered by the model's prediction and any
    /// corrections).
    #[arg(long)]
    pub include_unreviewed: bool,
    /// Fraction of cases for a validation split, chosen by a seeded hash of the case
    /// (0: all train; above 0: at least one case when there are two or more).
    #[arg(long, default_value_t = 0.0)]
    pub split: f64,
    /// Seed of the split.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Frames per case (axial slices, evenly spread, the key slice always among them).
    #[arg(long, default_value_t = 32)]
    pub frames: usize,
    /// Also write each case's CT (`volumes/<case>.nii.gz`: HU and geometry, no DICOM
    /// field), so `keyslice train --stage rl --from-export` can train on the reviewed cases.
    #[arg(long)]
    pub volumes: bool,
    /// The absolute folder the export will be in when a framework reads it (on the training
    /// machine); frame paths in the rows start there. Default: the export folder itself.
    #[arg(long)]
    pub frames_root: Option<PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The `--format` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// LLaMA-Factory `ShareGPT` JSON with videos and `dataset_info.json`.
    Llamafactory,
    /// ms-swift JSONL with extra columns for reward functions.
    Swift,
    /// verl parquet.
    Verl,
    /// Key-slice labels (CSV and JSON).
    Keyslices,
    /// Label maps for segmentation training: CT and organ + reviewed lesion masks as NIfTI, in nnU-Net's layout with dataset.json and MONAI's datalist.json.
    Segmentation,
}

impl From<FormatArg> for ExportFormat {
    fn from(format: FormatArg) -> Self {
        match format {
            FormatArg::Llamafactory => Self::Llamafactory,
            FormatArg::Swift => Self::Swift,
            FormatArg::Verl => Self::Verl,
            FormatArg::Keyslices => Self::Keyslices,
            FormatArg::Segmentation => Self::Segmentation,
        }
    }
}

/// Runs `export`.
pub fn run(args: &ExportArgs) -> Result<(), CliError> {
    if !(0.0..1.0).contains(&args.split) {
        return Err(CliError::Argument(format!(
            "--split {} is not a fraction in [0, 1)",
            args.split
        )));
    }
    if !(1..=512).contains(&args.frames) {
        return Err(CliError::Argument(format!(
            "--frames {} is not between 1 and 512",
            args.frames
        )));
    }
    let options = ExportOptions {
        format: args.format.into(),
        include_unreviewed: args.include_unreviewed,
        val_fraction: args.split,
        seed: args.seed,
        frames: args.frames,
        volumes: args.volumes,
        frames_root: args.frames_root.clone(),
    };
    let exported = keyslice_workflow::export::export(
        &args.workspace,
        &options,
        &args.out,
        &super::Terminal::default(),
    )?;
    super::print_outcome(args.json, &exported)
}
