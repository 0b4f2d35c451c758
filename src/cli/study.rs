//! `keyslice study mrmc FILE.imrmc [--json] [--per-reader]`: the multi-reader multi-case
//! analysis of a reader study's reads in iMRMC's input format, printed as iMRMC's
//! U-statistic table (or its per-reader table), so the figures can be checked with iMRMC.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::CliError;
use crate::mrmc::{Csv, parse_imrmc, reader_table, to_csv, ustat_table};

/// Arguments of `study`.
#[derive(Debug, Args)]
pub struct StudyArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: StudyAction,
}

/// What `study` does.
#[derive(Debug, Subcommand)]
pub enum StudyAction {
    /// The MRMC analysis of reads in iMRMC's format (front matter, `BEGIN DATA:`, then
    /// `readerID,caseID,modalityID,score` rows; `truth` rows give each case's truth, 0 or
    /// 1): each modality's reader-averaged AUC, its variance with readers and cases random
    /// (U-statistics, as iMRMC), the Normal and BDG tests and 95 % intervals, and each pair's
    /// difference. CSV with iMRMC's column names.
    Mrmc {
        /// The reads.
        file: PathBuf,
        /// One JSON object per row instead of CSV.
        #[arg(long)]
        json: bool,
        /// Each reader's AUCs and variances (cases random) instead.
        #[arg(long)]
        per_reader: bool,
    },
}

/// Runs `study`.
pub fn run(args: &StudyArgs) -> Result<(), CliError> {
    match &args.action {
        StudyAction::Mrmc {
            file,
            json,
            per_reader,
        } => {
            let text = std::fs::read_to_string(file).map_err(|source| CliError::Input {
                path: file.clone(),
                source,
            })?;
            let invalid = |error: crate::mrmc::MrmcError| {
                CliError::InvalidFile(format!("{}: {error}", file.display()))
            };
            let reads = parse_imrmc(&text).map_err(invalid)?;
            let mut out = std::io::stdout().lock();
            if *per_reader {
                print(&mut out, &reader_table(&reads).map_err(invalid)?, *json)?;
            } else {
                print(&mut out, &ustat_table(&reads).map_err(invalid)?, *json)?;
            }
            Ok(())
        }
    }
}

fn print<T: Csv + serde::Serialize>(
    out: &mut impl Write,
    rows: &[T],
    json: bool,
) -> Result<(), CliError> {
    if json {
        for row in rows {
            let line = serde_json::to_string(row)
                .map_err(|error| CliError::Internal(error.to_string()))?;
            writeln!(out, "{line}")?;
        }
    } else {
        write!(out, "{}", to_csv(rows))?;
    }
    Ok(())
}
