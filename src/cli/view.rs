//! `keyslice view [PATH]`: the viewer window on a study, or on the demo workspace (phantom
//! cases analysed by keyslice-tiny, made on first run) when no path is given.

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::app::{Source, run as run_app};

/// Arguments of `view`.
#[derive(Debug, Args)]
pub struct ViewArgs {
    /// A DICOM file, folder or DICOMDIR, a NIfTI file, or a case folder; without one, the
    /// demo workspace opens (made on first run in the user's data folder).
    pub path: Option<PathBuf>,
}

/// Runs `view`.
pub fn run(args: &ViewArgs) -> Result<(), CliError> {
    let source = args
        .path
        .clone()
        .map_or(Source::DemoWorkspace, Source::Path);
    run_app(source).map_err(|error| CliError::Window(error.to_string()))
}
