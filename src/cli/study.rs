//! `keyslice study mrmc FILE.imrmc [--json] [--per-reader]`: the multi-reader multi-case
//! analysis of a reader study's reads in iMRMC's input format, printed as iMRMC's
//! U-statistic table (or its per-reader table), so the figures can be checked with iMRMC.
//! `keyslice study hallucinations --pred PRED.jsonl --truth TRUTH`: which AI reports claim a
//! tumor that is not there, and how well the report–evidence consistency flags them.

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
    /// Of the AI reports that claim a tumor, those that are hallucinations (a tumor claimed
    /// in an organ whose truth has none), and the AUROC of the report–evidence consistency
    /// as a detector of them, with its 95 % interval (cases random).
    Hallucinations {
        /// Predictions, one JSON object per line (as `score` reads them).
        #[arg(long)]
        pred: PathBuf,
        /// Truth: a JSONL file, or a folder of case folders.
        #[arg(long)]
        truth: PathBuf,
        /// Print JSON, with each claim.
        #[arg(long)]
        json: bool,
        /// Also write the claims' scores in iMRMC's format (to check the AUROC with iMRMC).
        #[arg(long)]
        imrmc: Option<PathBuf>,
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
        StudyAction::Hallucinations {
            pred,
            truth,
            json,
            imrmc,
        } => hallucinations(pred, truth, *json, imrmc.as_deref()),
    }
}

fn hallucinations(
    pred: &std::path::Path,
    truth: &std::path::Path,
    json: bool,
    imrmc: Option<&std::path::Path>,
) -> Result<(), CliError> {
    use crate::findings::read_report;
    use crate::io::cases::{read_predictions, read_truth};
    use crate::mrmc::hallucination::{ReportCase, hallucinations};
    let truth_by_case: std::collections::BTreeMap<String, crate::findings::Findings> =
        read_truth(truth)?
            .into_iter()
            .map(|record| {
                let findings = record.truth_findings().map_err(|error| {
                    CliError::Argument(format!("{error} ({})", truth.display()))
                })?;
                Ok((record.case_id.clone(), findings))
            })
            .collect::<Result<_, CliError>>()?;
    let owned: Vec<_> = read_predictions(pred)?
        .into_iter()
        .filter_map(|record| {
            let truth = truth_by_case.get(&record.case_id)?.clone();
            let local = record
                .local_description
                .as_deref()
                .map(|text| read_report(text).findings);
            Some((
                record.case_id.clone(),
                record.predicted_findings(),
                local,
                truth,
            ))
        })
        .collect();
    let cases: Vec<ReportCase<'_>> = owned
        .iter()
        .map(|(case_id, report, local, truth)| ReportCase {
            case_id,
            report,
            local: local.as_ref(),
            truth,
        })
        .collect();
    let (analysis, reads) = hallucinations(&cases, crate::scoring::SizeTolerance::default())
        .map_err(|error| CliError::InvalidFile(format!("{}: {error}", pred.display())))?;
    if let Some(path) = imrmc {
        let text = reads.to_imrmc(&[
            "Keyslice: report-evidence consistency as a detector of hallucinated AI findings",
            "reader consistency: 1 - consistency; truth 1: a hallucinated claim",
        ]);
        crate::io::atomic::write_atomically(path, text.as_bytes()).map_err(|error| {
            CliError::Output(std::io::Error::new(
                error.kind(),
                format!("{}: {error}", path.display()),
            ))
        })?;
    }
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &analysis).map_err(std::io::Error::from)?;
        writeln!(out)?;
        return Ok(());
    }
    let number = |value: Option<f64>| value.map_or_else(|| "–".to_string(), |v| format!("{v:.3}"));
    writeln!(
        out,
        "{} of {} matched report(s) claim a tumor: {} hallucinated (a tumor claimed in an organ whose truth has none), {} grounded, {} without the verifier's description",
        analysis.claims,
        cases.len(),
        analysis.hallucinated,
        analysis.grounded,
        analysis.without_evidence
    )?;
    writeln!(
        out,
        "mean consistency: hallucinated {}, grounded {}",
        number(analysis.mean_consistency_hallucinated),
        number(analysis.mean_consistency_grounded)
    )?;
    match (analysis.auroc, analysis.auroc_ci, &analysis.auroc_missing) {
        (Some(auroc), Some([low, high]), _) => writeln!(
            out,
            "consistency as a hallucination detector: AUROC {auroc:.3} (95 % CI {low:.3}–{high:.3}, cases random)"
        )?,
        (_, _, Some(reason)) => writeln!(out, "{reason}")?,
        _ => {}
    }
    for claim in analysis
        .cases
        .iter()
        .filter(|claim| !claim.hallucinated.is_empty())
    {
        writeln!(
            out,
            "  {}: claimed {}; no tumor in truth: {}; consistency {}",
            crate::text::shown(&claim.case_id),
            claim.claimed.join(", "),
            claim.hallucinated.join(", "),
            number(claim.consistency)
        )?;
    }
    Ok(())
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
