//! `keyslice workspace create|analyze|list`: fill and inspect a review workspace without the
//! window (see `review::workspace` for the folder's layout).

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::CliError;
use super::backend::BackendArgs;
use crate::review::workspace::Workspace;
use crate::text::shown;

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
        backend: BackendArgs,
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
    match &args.action {
        WorkspaceAction::Create { dir, inputs, json } => {
            let (urls, paths): (Vec<&PathBuf>, Vec<&PathBuf>) = inputs
                .iter()
                .partition(|input| crate::pacs::DicomWebUrl::is_dicomweb(&input.to_string_lossy()));
            let (mut from_pacs, mut failed) = (0, 0);
            for url in urls {
                let imported = keyslice_workflow::pacs::import_studies(
                    dir,
                    &url.to_string_lossy(),
                    &super::Terminal::default(),
                )?;
                from_pacs += imported.added;
                failed += imported.failed;
            }
            let paths: Vec<PathBuf> = paths.into_iter().cloned().collect();
            let (workspace, added) = if paths.is_empty() {
                (Workspace::open(dir)?, 0)
            } else {
                Workspace::create_or_extend(dir, &paths)?
            };
            let added = added + from_pacs;
            let summary = serde_json::json!({
                "dir": dir,
                "added": added,
                "failed": failed,
                "cases": workspace.manifest.cases.len(),
            });
            super::print_summary(*json, &summary, || {
                format!(
                    "{added} case(s) added; {} in {} ({}, {}, {})",
                    workspace.manifest.cases.len(),
                    dir.display(),
                    crate::review::workspace::MANIFEST_FILE,
                    crate::review::workspace::PREDICTIONS_FILE,
                    crate::review::workspace::DATABASE_FILE,
                )
            })?;
            if failed > 0 {
                return Err(CliError::PartlyFailed {
                    failed,
                    total: added + failed,
                });
            }
            Ok(())
        }
        WorkspaceAction::Analyze {
            dir,
            backend,
            force,
            json,
        } => analyze(dir, backend, *force, *json),
        WorkspaceAction::List { dir, json } => list(dir, *json),
    }
}

fn analyze(
    dir: &std::path::Path,
    backend: &BackendArgs,
    force: bool,
    json: bool,
) -> Result<(), CliError> {
    let backend = backend.backend()?;
    let current = backend.model_id();
    let analysis = keyslice_workflow::analyze::analyse_workspace(
        dir,
        &backend,
        force,
        &super::Terminal::default(),
    )?;
    let (done, skipped, failed) = (analysis.analysed, analysis.skipped, analysis.failures.len());
    let summary = serde_json::json!({
        "dir": dir,
        "analysed": done,
        "skipped": skipped,
        "failed": failed,
        "model": {"id": current.id, "version": current.version},
        "failures": analysis.failures,
    });
    super::print_summary(json, &summary, || {
        format!(
            "{done} analysed, {skipped} already analysed by {} {}, {failed} failed",
            current.id, current.version
        )
    })?;
    if failed > 0 {
        return Err(CliError::PartlyFailed {
            failed,
            total: done + failed,
        });
    }
    Ok(())
}

fn list(dir: &std::path::Path, json: bool) -> Result<(), CliError> {
    let workspace = Workspace::open(dir)?;
    let predictions = workspace.predictions()?;
    for warning in workspace.health(&predictions)?.warnings() {
        eprintln!(
            "warning: {}: {}",
            shown(&dir.display().to_string()),
            shown(&warning)
        );
    }
    let rows = workspace.worklist(&predictions)?;
    let mut out = std::io::stdout().lock();
    if !json {
        writeln!(
            out,
            "{:<24} {:<10} {:>11}  {:<16}  needs a look because",
            "case", "status", "consistency", "reviewer"
        )?;
    }
    for row in rows {
        if json {
            writeln!(out, "{}", serde_json::to_string(&row).unwrap_or_default())?;
        } else {
            writeln!(
                out,
                "{:<24} {:<10} {:>11}  {:<16}  {}",
                shown(&row.case_id),
                row.status.label(),
                row.consistency
                    .map_or("–".to_string(), |c| format!("{c:.2}")),
                shown(&row.reviewer.unwrap_or_default()),
                shown(&row.attention.unwrap_or_default())
            )?;
        }
    }
    Ok(())
}
