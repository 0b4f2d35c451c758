//! `keyslice eval evidence --data DIR [--seed S] [--json]`: whether the evidence tells a
//! made-up finding from a real one. On case folders with truth (phantoms), the model answers
//! each case once; its answer is verified as it is (its natural false positives are their own
//! row) and again with one made-up finding of each kind injected
//! ([`crate::infer::hallucinate::Kind`]; the evaluation is `keyslice_workflow::eval`), each re-verified on the answer's key slice. Per
//! kind and overall, per finding: the AUROC of `1 − consistency` (made-up findings against
//! the real findings of the untouched answers) with a 95 % interval that resamples whole
//! cases, the share of made-up findings shown as agreeing, the share of real findings
//! flagged, and what verifying cost. An injection that lands on a real tumor the model missed
//! is counted apart, never as made up.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::CliError;
use keyslice_workflow::backend::BackendSpec;

/// Arguments of `eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// What to evaluate.
    #[command(subcommand)]
    pub action: EvalAction,
}

/// The evaluations.
#[derive(Debug, Subcommand)]
pub enum EvalAction {
    /// Whether the report–evidence consistency tells made-up findings of every kind from
    /// real ones, per finding.
    Evidence {
        /// Case folders with truth (`keyslice phantom --out DIR` makes them).
        #[arg(long)]
        data: PathBuf,
        /// The model and where it runs.
        #[command(flatten)]
        backend: BackendSpec,
        /// Seed of the injections (each drawn from the seed, the case and the kind).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print the figures as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `eval`.
pub fn run(args: &EvalArgs) -> Result<(), CliError> {
    match &args.action {
        EvalAction::Evidence {
            data,
            backend,
            seed,
            json,
        } => {
            let evaluation =
                keyslice_workflow::eval::evaluate_evidence(data, &backend.backend()?, *seed)?;
            let mut out = std::io::stdout().lock();
            if *json {
                serde_json::to_writer_pretty(&mut out, &evaluation)
                    .map_err(std::io::Error::from)?;
                writeln!(out)?;
            } else {
                evaluation.write_table(&mut out)?;
            }
            Ok(())
        }
    }
}
