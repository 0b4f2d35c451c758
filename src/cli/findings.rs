//! `keyslice findings REPORT.txt [--json]`: what the reader finds in one report, with the words
//! each value came from and the sentences it could not read.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::CliError;

/// Arguments of `findings`.
#[derive(Debug, Args)]
pub struct FindingsArgs {
    /// The report text file, or `-` for standard input.
    pub report: PathBuf,
    /// Print the Findings object as JSON (plus `unread`).
    #[arg(long)]
    pub json: bool,
}

/// Runs `findings`.
pub fn run(args: &FindingsArgs) -> Result<(), CliError> {
    let read = keyslice_workflow::findings::read_report_file(&args.report)?;
    let mut stdout = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut stdout, &read.findings_json())
            .map_err(std::io::Error::from)?;
        writeln!(stdout)?;
    } else {
        write!(stdout, "{}", read.describe())?;
    }
    Ok(())
}
