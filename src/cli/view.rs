//! `keyslice view [PATH] [BACKEND]`: the viewer window on a study, or on the demo workspace (phantom
//! cases analysed by keyslice-tiny, made on first run) when no path is given.

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::app::{Source, run as run_app};
use keyslice_workflow::backend::BackendSpec;

/// Arguments of `view`.
#[derive(Debug, Args)]
pub struct ViewArgs {
    /// A DICOM file, folder or DICOMDIR, a NIfTI file, a case folder, or a study on a PACS
    /// (`dicomweb+http(s)://HOST/ROOT/studies/STUDY_UID`: its CT is retrieved into the cache
    /// and its stored AI result shown); without one, the demo workspace opens.
    pub path: Option<PathBuf>,
    /// Read a reader study (a folder made by `keyslice study create`) as --reader: its cases
    /// one after another, each showing only what its arm allows.
    #[arg(long, requires = "reader", conflicts_with = "path")]
    pub study: Option<PathBuf>,
    /// Who reads the study.
    #[arg(long, requires = "study")]
    pub reader: Option<String>,
    /// Who reviews: the name shown beside Accept and recorded with every correction and
    /// status (exports carry a pseudonym). Set once: it is kept in the settings for the next
    /// windows.
    #[arg(long, value_name = "NAME")]
    pub reviewer: Option<String>,
    /// The model live analysis (`A`) runs: the embedded one by default, or a server.
    #[command(flatten)]
    pub backend: BackendSpec,
}

/// Runs `view`.
pub fn run(args: &ViewArgs) -> Result<(), CliError> {
    let source = match &args.path {
        None if args.study.is_some() => Source::StudyRead {
            dir: args.study.clone().unwrap_or_default(),
            reader: args.reader.clone().unwrap_or_default(),
        },
        Some(path) if crate::pacs::DicomWebUrl::is_dicomweb(&path.to_string_lossy()) => {
            crate::app::open::from_pacs(
                &path.to_string_lossy(),
                &keyslice_workflow::pacs::pacs_workspace(),
                std::sync::Arc::new(super::Terminal::default()),
            )?
        }
        Some(path) => Source::Path(path.clone()),
        None => Source::DemoWorkspace,
    };
    let backend = args.backend.backend()?;
    if let Some(name) = &args.reviewer {
        remember_reviewer(name)?;
    }
    run_app(source, Some(backend)).map_err(|error| CliError::Window(error.to_string()))
}

/// Keeps `name` as the reviewer in the settings, so every later window records under it.
fn remember_reviewer(name: &str) -> Result<(), CliError> {
    use crate::app::settings::{Settings, settings_path};
    let name = name.trim();
    if let Some(reason) = crate::pacs::publish::reviewer_problem("--reviewer", name) {
        return Err(CliError::Argument(format!(
            "{} (e.g. --reviewer \"Dr. Ana Lima\")",
            crate::text::shown(&reason)
        )));
    }
    let Some(path) = settings_path() else {
        return Err(CliError::Argument(
            "--reviewer: no settings folder (set HOME, XDG_CONFIG_HOME or KEYSLICE_CONFIG_DIR)"
                .into(),
        ));
    };
    let mut settings = Settings::load(&path).unwrap_or_default();
    settings.reviewer = Some(name.to_string());
    settings
        .save(&path)
        .map_err(|error| CliError::Argument(format!("--reviewer not kept: {error}")))
}
