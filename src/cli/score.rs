//! `keyslice score --pred PRED.jsonl --truth TRUTH [--json | --per-case]`: the paper's metrics
//! for a set of predictions against truth (JSONL, or case folders in the phantom /
//! AbdomenAtlas layout), or each case's E-MRL reward as training computes it.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::CliError;

/// Arguments of `score`.
#[derive(Debug, Args)]
pub struct ScoreArgs {
    /// Predictions, one JSON object per line (see `docs/manual.md`).
    #[arg(long)]
    pub pred: PathBuf,
    /// Truth: a JSONL file, or a folder of case folders (truth.json or AbdomenAtlas masks).
    #[arg(long)]
    pub truth: PathBuf,
    /// Print JSON (keys listed in `docs/manual.md`).
    #[arg(long)]
    pub json: bool,
    /// Print each case's reward terms instead, one JSON object per line (the reward that
    /// verl's `compute_score` and the ms-swift plugin of the Python module compute).
    #[arg(long, conflicts_with = "json")]
    pub per_case: bool,
    /// Relative size tolerance.
    #[arg(long, default_value_t = 0.2)]
    pub size_tolerance: f64,
    /// Absolute size tolerance in cm.
    #[arg(long, default_value_t = 0.5)]
    pub size_tolerance_cm: f64,
    /// Key-slice hit window in slices, for cases without lesion masks.
    #[arg(long, default_value_t = 2)]
    pub slice_tolerance: u32,
}

/// Runs `score`.
pub fn run(args: &ScoreArgs) -> Result<(), CliError> {
    let tolerance = crate::scoring::SizeTolerance {
        relative: args.size_tolerance,
        absolute_cm: args.size_tolerance_cm,
    };
    let scored =
        keyslice_workflow::score::score(&args.pred, &args.truth, tolerance, args.slice_tolerance)?;
    let mut stdout = std::io::stdout().lock();
    if args.per_case {
        for line in &scored.per_case {
            writeln!(stdout, "{line}")?;
        }
    } else if args.json {
        serde_json::to_writer_pretty(&mut stdout, &scored.metrics).map_err(std::io::Error::from)?;
        writeln!(stdout)?;
    } else {
        write!(stdout, "{}", scored.table())?;
    }
    Ok(())
}
