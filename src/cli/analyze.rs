//! `keyslice analyze PATH... [--backend embedded|openai] [--model M] [--json]`: the E-MRL
//! pipeline on each study with the embedded `keyslice-tiny` (or a checkpoint folder of it, or
//! a model on an OpenAI-compatible server): report, key slice, the verifier's
//! local description of that slice, and their consistency. With `--json`, one Prediction per
//! line (JSONL, what `score --pred` reads). A study that cannot be read is reported and the
//! others go on; the exit status is 1 if any failed.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;

use super::CliError;
use crate::infer::backend::Backend;
use keyslice_workflow::analyze::{analyse_case, prediction_text, video_refused_warning};
use keyslice_workflow::backend::BackendSpec;

/// Arguments of `analyze`.
#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// DICOM series (folder or file), NIfTI files, or case folders.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// The model and where it runs.
    #[command(flatten)]
    pub backend: BackendSpec,
    /// Skip the verifier (no local description, no consistency).
    #[arg(long)]
    pub no_verify: bool,
    /// Print the Prediction record as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `analyze`.
pub fn run(args: &AnalyzeArgs) -> Result<(), CliError> {
    let loading = std::time::Instant::now();
    let model = args.backend.backend()?;
    tracing::debug!(
        model_ms = loading.elapsed().as_secs_f64() * 1000.0,
        "model loaded"
    );
    let mut failed = 0;
    for path in &args.paths {
        if let Err(error) = analyze_one(args, &model, path) {
            if args.paths.len() == 1 {
                return Err(error);
            }
            // Each failure is said once, here; the others go on.
            eprintln!("error: {error}\nhint: {}", error.hint());
            failed += 1;
        }
    }
    if failed > 0 {
        return Err(CliError::PartlyFailed {
            failed,
            total: args.paths.len(),
        });
    }
    Ok(())
}

fn analyze_one(args: &AnalyzeArgs, model: &Backend, path: &Path) -> Result<(), CliError> {
    let prediction = analyse_case(model, None, path, !args.no_verify)?;
    if let Some(warning) = video_refused_warning(&prediction.diagnoser.version, &prediction) {
        eprintln!("warning: {}", crate::text::shown(&warning));
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        let text = serde_json::to_string(&prediction).unwrap_or_default();
        writeln!(out, "{text}")?;
        return Ok(());
    }
    write!(
        out,
        "{}",
        prediction_text(&prediction, matches!(model, Backend::Embedded(_)))
    )?;
    Ok(())
}
