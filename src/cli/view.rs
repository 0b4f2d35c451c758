//! `keyslice view [PATH]`: the viewer window on a study, or on the built-in synthetic demo
//! volume when no path is given.

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::app::{Source, run as run_app};

/// Arguments of `view`.
#[derive(Debug, Args)]
pub struct ViewArgs {
    /// A DICOM file, folder or DICOMDIR, a NIfTI file, or a case folder; without one, a
    /// synthetic demo abdomen opens.
    pub path: Option<PathBuf>,
}

/// Runs `view`.
pub fn run(args: &ViewArgs) -> Result<(), CliError> {
    let source = args.path.clone().map_or(Source::Demo, Source::Path);
    run_app(source).map_err(|error| CliError::Window(error.to_string()))
}
