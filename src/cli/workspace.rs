//! `keyslice workspace create|analyze|list`: fill and inspect a review workspace without the
//! window (see `review::workspace` for the folder's layout).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::CliError;
use keyslice_workflow::backend::BackendSpec;

/// Arguments of `workspace`.
#[derive(Debug, Args)]
pub struct WorkspaceArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: WorkspaceAction,
}

/// The `workspace` subcommands.
#[derive(Debug, Subcommand)]
#[expect(
    clippy::large_enum_variant,
    reason = "parsed once per run from the command line; the backend's flags are what they are"
)]
pub enum WorkspaceAction {
    /// Create a workspace in DIR (or add to it) from NIfTI files, DICOM series folders, case
    /// folders, a folder of case folders, or studies on a PACS (a `dicomweb+http(s)://` URL
    /// naming a study or a query: each study's CT series is retrieved into DIR/dicomweb).
    Create {
        /// The workspace folder (created if needed).
        dir: PathBuf,
        /// What to add: paths, or `dicomweb+http://HOST/ROOT?PatientID=…&StudyDate=…`.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Print the outcome as one JSON line (`added`, `failed`, `cases`, `dir`).
        #[arg(long)]
        json: bool,
    },
    /// Run a backend (default: the embedded model) on every case that has no prediction from
    /// it yet, appending to predictions.jsonl (a case that fails is reported and the others
    /// go on).
    Analyze {
        /// The workspace folder.
        dir: PathBuf,
        /// The model and where it runs.
        #[command(flatten)]
        backend: BackendSpec,
        /// Analyse every case again.
        #[arg(long)]
        force: bool,
        /// Print the outcome as one JSON line (`analysed`, `skipped`, `failed`, `model`,
        /// `failures` with each case and its error); progress stays on stderr.
        #[arg(long)]
        json: bool,
    },
    /// List the cases with review status and consistency, lowest consistency first.
    List {
        /// The workspace folder.
        dir: PathBuf,
        /// One JSON object per case.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `workspace`.
pub fn run(args: &WorkspaceArgs) -> Result<(), CliError> {
    let terminal = super::Terminal::default();
    let (added, failed) = match &args.action {
        WorkspaceAction::Create { dir, inputs, json } => {
            let made = keyslice_workflow::workspace::create_workspace(dir, inputs, &terminal)?;
            super::print_outcome(*json, &made)?;
            (made.added, made.failed)
        }
        WorkspaceAction::Analyze {
            dir,
            backend,
            force,
            json,
        } => {
            let analysis = keyslice_workflow::analyze::analyse_workspace(
                dir,
                &backend.backend()?,
                *force,
                &terminal,
            )?;
            super::print_outcome(*json, &analysis)?;
            (analysis.analysed, analysis.failures.len())
        }
        WorkspaceAction::List { dir, json } => {
            return super::print_lines(&keyslice_workflow::workspace::worklist_lines(
                dir, *json, &terminal,
            )?);
        }
    };
    if failed > 0 {
        return Err(CliError::PartlyFailed {
            failed,
            total: added + failed,
        });
    }
    Ok(())
}
