//! `keyslice view [PATH] [BACKEND]`: the viewer window on a study, or on the demo workspace (phantom
//! cases analysed by keyslice-tiny, made on first run) when no path is given.

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use super::backend::BackendArgs;
use crate::app::{Source, run as run_app};

/// Arguments of `view`.
#[derive(Debug, Args)]
pub struct ViewArgs {
    /// A DICOM file, folder or DICOMDIR, a NIfTI file, or a case folder; without one, the
    /// demo workspace opens (made on first run in the user's data folder).
    pub path: Option<PathBuf>,
    /// The model live analysis (`A`) runs: the embedded one by default, or a server.
    #[command(flatten)]
    pub backend: BackendArgs,
}

/// Runs `view`.
pub fn run(args: &ViewArgs) -> Result<(), CliError> {
    let source = args
        .path
        .clone()
        .map_or(Source::DemoWorkspace, Source::Path);
    let backend = args.backend.backend()?;
    run_app(source, Some(backend)).map_err(|error| CliError::Window(error.to_string()))
}
