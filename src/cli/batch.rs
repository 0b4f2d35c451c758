//! `keyslice batch DATASET... --out PRED.jsonl [--backend …] [--jobs N]`: a backend over a
//! whole dataset, on several servers at once when several `--url` are given (each with its
//! own requests in flight, `URL#jobs=N`; a server that stops answering hands its case back to
//! the others). Cases are found as `workspace create` finds them (case folders, a folder of
//! case folders, NIfTI files, DICOM series folders, a workspace's `workspace.json`). Cases
//! already in the output are skipped, so a stopped batch resumes; each prediction is appended
//! as one synced line, so a killed batch loses at most the cases in flight; a case that fails
//! is written to `PRED.errors.jsonl` with its error and the batch goes on. Progress with rate
//! and ETA goes to stderr; a summary at the end. With `--json` every line either stream
//! carries is a JSON object (`progress`, `error`, the summary). `keyslice score --pred PRED.jsonl` reads the
//! output.

use std::path::PathBuf;

use clap::Args;
use keyslice_workflow::batch::{BatchOptions, Lane, run_batch};

use super::CliError;
use keyslice_workflow::backend::{BackendKind, BackendSpec};

/// Arguments of `batch`.
#[derive(Debug, Args)]
pub struct BatchArgs {
    /// Dataset folders, case folders, NIfTI files, DICOM series folders or workspaces.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// The predictions file (JSONL), appended to.
    #[arg(long)]
    pub out: PathBuf,
    /// Cases run at once (threads; for a server, requests in flight; per server when several
    /// --url are given, unless a URL says `#jobs=N`).
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Skip the verifier.
    #[arg(long)]
    pub no_verify: bool,
    /// The model and where it runs.
    #[command(flatten)]
    pub backend: BackendSpec,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// Memory for the cases in flight, in MB (256–1048576): each case holds its CT while its
    /// requests run; cases wait for room instead of all being loaded at once, however many
    /// --jobs and --url there are. A case larger than the whole budget runs alone.
    #[arg(long, default_value_t = 2048, value_name = "MB", value_parser = clap::value_parser!(u64).range(256..=1_048_576))]
    pub memory_mb: u64,
    /// Stop the batch after this many failures of the model server in a row (errors,
    /// timeouts, refusals; a case's own bad files do not count), saying why: a server that
    /// hangs costs its timeout K times, not once per case. 0 never stops.
    #[arg(long, default_value_t = 10, value_name = "K")]
    pub stop_after_failures: usize,
}

/// Runs `batch`.
pub fn run(args: &BatchArgs) -> Result<(), CliError> {
    if !(1..=256).contains(&args.jobs) {
        return Err(CliError::Argument(format!(
            "--jobs {} is not between 1 and 256",
            args.jobs
        )));
    }
    if args.stop_after_failures > 100_000 {
        return Err(CliError::Argument(format!(
            "--stop-after-failures {} is not between 0 (never stop) and 100000",
            args.stop_after_failures
        )));
    }
    let options = BatchOptions {
        inputs: &args.inputs,
        out: &args.out,
        verify: !args.no_verify,
        memory_mb: args.memory_mb,
        stop_after_failures: args.stop_after_failures,
    };
    let summary = run_batch(
        lanes(args)?,
        &options,
        &keyslice_workflow::terminal::BatchTerminal { json: args.json },
    )?;
    super::print_outcome(args.json, &summary)?;
    if let Some(last) = &summary.tripped {
        return Err(CliError::Stopped(format!(
            "batch stopped after {} failures of the model server in a row, {} case(s) not run; the last: {last}",
            args.stop_after_failures,
            summary.cases - summary.skipped - summary.done - summary.failed
        )));
    }
    if summary.failed > 0 {
        return Err(CliError::PartlyFailed {
            failed: summary.failed,
            total: summary.cases - summary.skipped,
        });
    }
    Ok(())
}

/// The lanes of a batch: one per `--url` with `--backend openai` (each `#jobs=N`, else
/// `--jobs`), else the one backend with `--jobs` threads.
fn lanes(args: &BatchArgs) -> Result<Vec<Lane>, CliError> {
    if args.backend.backend == BackendKind::Openai {
        let spec = &args.backend;
        return spec
            .endpoints()?
            .into_iter()
            .map(|endpoint| {
                let backend = spec.server(&endpoint.url)?;
                Ok(Lane::new(
                    endpoint.shown(),
                    backend,
                    endpoint.jobs.unwrap_or(args.jobs),
                ))
            })
            .collect();
    }
    let backend = args.backend.backend()?;
    Ok(vec![Lane::new(backend.model_id().id, backend, args.jobs)])
}
