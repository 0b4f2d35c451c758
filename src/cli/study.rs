//! `keyslice study mrmc FILE.imrmc [--json] [--per-reader]`: the multi-reader multi-case
//! analysis of a reader study's reads in iMRMC's input format, printed as iMRMC's
//! U-statistic table (or its per-reader table), so the figures can be checked with iMRMC.
//! `keyslice study hallucinations --pred PRED.jsonl --truth TRUTH`: which AI reports claim a
//! tumor that is not there, and how well the report–evidence consistency flags them.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::CliError;

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
    /// Defines a reader study over a workspace's cases in folder DIR (`study.json`, and
    /// `reads/` for what the readers record).
    Create {
        /// The study folder (made; must not hold a study yet).
        dir: PathBuf,
        /// The workspace whose cases are read (all of them).
        #[arg(long, required_unless_present = "pacs", conflicts_with = "pacs")]
        workspace: Option<PathBuf>,
        /// Or the studies of a PACS query (`dicomweb+http(s)://HOST/ROOT?PatientID=…`): their
        /// CT series are retrieved into the workspace DIR/workspace, and the query is kept in
        /// study.json.
        #[arg(long)]
        pacs: Option<String>,
        /// A reader (repeat: at least two).
        #[arg(long = "reader", required = true)]
        readers: Vec<String>,
        /// An arm as NAME=SHOWS, SHOWS one of images, report, evidence (repeat; default
        /// unaided=images and evidence=evidence).
        #[arg(long = "arm")]
        arms: Vec<String>,
        /// The design: crossover (one arm per session, arms counterbalanced), split-plot (as
        /// crossover, each block of readers reading its own block of cases) or sequential
        /// (each case unaided, then aided, in one sitting).
        #[arg(long, default_value = "crossover")]
        design: String,
        /// Blocks of readers and cases in a split-plot design.
        #[arg(long, default_value_t = 2)]
        groups: u32,
        /// Days between a reader's sessions in a crossover or split-plot design.
        #[arg(long, default_value_t = 28)]
        washout_days: u32,
        /// The seed of the case orders.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print the outcome as one JSON line.
        #[arg(long)]
        json: bool,
    },
    /// Reads the whole study with simulated readers following documented rules (perception
    /// with a skill per reader, belief moved by the AI's report, trusted with the evidence
    /// only from a consistency), to try a study design and its report before real readers.
    /// Stopped part way, it resumes where it stopped.
    Simulate {
        /// The study folder.
        dir: PathBuf,
        /// The truth of the cases: a JSONL file, or a folder of case folders.
        #[arg(long)]
        truth: PathBuf,
        /// How far the AI's call moves a reader's belief (in units of perception noise).
        #[arg(long, default_value_t = 1.0)]
        pull: f64,
        /// Simulate this reader too although they have reads of their own (repeatable); by
        /// default a reader with a person's reads is left alone.
        #[arg(long = "reader", value_name = "NAME")]
        readers: Vec<String>,
        /// Print the outcome as one JSON line.
        #[arg(long)]
        json: bool,
    },
    /// Where each reader stands: items read of all, and what comes next.
    Status {
        /// The study folder.
        dir: PathBuf,
    },
    /// The study's analysis: the MRMC table of the arms (as `study mrmc`), each reader's
    /// sensitivity, specificity and time per case in each arm; the reads in iMRMC's format
    /// and the tables as CSV in --out.
    Report {
        /// The study folder.
        dir: PathBuf,
        /// The truth of the cases: a JSONL file, or a folder of case folders.
        #[arg(long)]
        truth: PathBuf,
        /// Where to write reads.imrmc, mrmc.csv, readers.csv and the charts roc.png,
        /// forest.png and time.png (default: DIR/report).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Also show the charts in a window.
        #[arg(long)]
        window: bool,
        /// Print the analysis as one JSON object (`study`, `readers`, `cases`, `units`,
        /// `simulated`, `mrmc` with iMRMC's columns, `uptake`, `out`, `files`) instead of
        /// the text; the files are written as without it.
        #[arg(long)]
        json: bool,
    },
    /// Truth from a panel: each panelist's findings of the cases (a truth JSONL file or a
    /// folder of case folders each), combined per organ: unanimous or a strict majority is the
    /// truth; an even split is decided by --adjudicator, and stays unresolved (its case left
    /// out) without one. Writes the truth as JSONL for `study report --truth`, and prints
    /// how each organ was decided and Fleiss' kappa of the panel.
    Truth {
        /// A panelist's findings (repeat: at least two).
        #[arg(long = "panel", required = true)]
        panel: Vec<PathBuf>,
        /// The adjudicator's findings, for organs the panel split on evenly.
        #[arg(long)]
        adjudicator: Option<PathBuf>,
        /// Where to write the truth (JSONL).
        #[arg(long)]
        out: PathBuf,
        /// Print every organ's votes as JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// Stores each read as the reader's SR in the PACS its case came from, marked as a
    /// research read of this study (Clinical Trial attributes; never verified, never shown as
    /// a clinical review). A read already held is not sent again.
    Publish {
        /// The study folder.
        dir: PathBuf,
        /// Only this reader's reads.
        #[arg(long)]
        reader: Option<String>,
        /// Also write the documents as files into this folder.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Write the files only; store nothing (needs --out).
        #[arg(long, requires = "out")]
        no_store: bool,
        /// Print the outcome as one JSON line.
        #[arg(long)]
        json: bool,
        /// Server settings.
        #[command(flatten)]
        connection: super::pacs::Connection,
    },
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
            let tables = keyslice_workflow::study::mrmc_tables(file, *per_reader, *json)?;
            write!(std::io::stdout().lock(), "{tables}")?;
            Ok(())
        }
        StudyAction::Hallucinations {
            pred,
            truth,
            json,
            imrmc,
        } => hallucinations(pred, truth, imrmc.as_deref(), *json),
        StudyAction::Create {
            dir,
            workspace,
            pacs,
            readers,
            arms,
            design,
            groups,
            washout_days,
            seed,
            json,
        } => {
            let new = keyslice_workflow::study::NewStudy {
                dir,
                workspace: workspace.as_deref(),
                pacs: pacs.as_deref(),
                readers,
                arms: parse_arms(arms)?,
                design: parse_design(design, *groups, *washout_days)?,
                seed: *seed,
            };
            let created =
                keyslice_workflow::study::create_study(&new, &super::Terminal::default())?;
            super::print_outcome(*json, &created)
        }
        StudyAction::Status { dir } => super::print_lines(&keyslice_workflow::study::status_lines(
            dir,
            crate::date::now_seconds(),
        )?),
        StudyAction::Simulate {
            dir,
            truth,
            pull,
            readers,
            json,
        } => {
            let simulated = keyslice_workflow::study::simulate(
                dir,
                truth,
                *pull,
                readers,
                crate::date::now_seconds(),
            )?;
            super::print_outcome(*json, &simulated)
        }
        StudyAction::Report {
            dir,
            truth,
            out,
            window,
            json,
        } => report(dir, truth, out.as_deref(), *window, *json),
        StudyAction::Truth {
            panel,
            adjudicator,
            out,
            json,
        } => {
            let decided =
                keyslice_workflow::study::panel_truth(panel, adjudicator.as_deref(), out)?;
            let mut stdout = std::io::stdout().lock();
            keyslice_workflow::study::write_panel(&mut stdout, &decided, panel.len(), out, *json)?;
            Ok(())
        }
        StudyAction::Publish {
            dir,
            reader,
            out,
            no_store,
            json,
            connection,
        } => {
            let published = keyslice_workflow::study::publish_reads(
                dir,
                reader.as_deref(),
                out.as_deref(),
                *no_store,
                connection,
                &super::Terminal::default(),
            )?;
            super::print_outcome(*json, &published)
        }
    }
}

/// The `--design` named, with its blocks and washout.
fn parse_design(
    name: &str,
    groups: u32,
    washout_days: u32,
) -> Result<crate::review::study::Design, CliError> {
    crate::review::study::Design::named(name, groups, washout_days).ok_or_else(|| {
        CliError::Argument(format!(
            "--design {name}: crossover, split-plot or sequential"
        ))
    })
}

/// `--arm NAME=SHOWS` values (default: unaided=images, evidence=evidence).
fn parse_arms(arms: &[String]) -> Result<Vec<crate::review::study::Arm>, CliError> {
    use crate::review::study::Arm;
    if arms.is_empty() {
        return Ok(Arm::defaults());
    }
    arms.iter()
        .map(|arm| {
            Arm::parse(arm).map_err(|error| CliError::Argument(format!("--arm {arm}: {error}")))
        })
        .collect()
}

/// `study hallucinations`: printed as a table, or pretty JSON.
fn hallucinations(
    pred: &std::path::Path,
    truth: &std::path::Path,
    imrmc: Option<&std::path::Path>,
    json: bool,
) -> Result<(), CliError> {
    let (analysis, matched) = keyslice_workflow::study::hallucination_analysis(pred, truth, imrmc)?;
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &analysis).map_err(std::io::Error::from)?;
        writeln!(out)?;
    } else {
        keyslice_workflow::study::write_hallucinations(&mut out, &analysis, matched)?;
    }
    Ok(())
}

fn report(
    dir: &std::path::Path,
    truth: &std::path::Path,
    out_dir: Option<&std::path::Path>,
    window: bool,
    json: bool,
) -> Result<(), CliError> {
    let report = keyslice_workflow::study::study_report(dir, truth)?;
    let out_dir = out_dir.map_or_else(|| dir.join("report"), std::path::Path::to_path_buf);
    let written = report.write_files(&out_dir, &|chart| {
        crate::ui::chart::chart_png(chart, [720.0, 560.0], 2.0).map_err(|error| error.to_string())
    })?;
    if json {
        let summary = keyslice_workflow::study::summary_json(&report, &out_dir, &written);
        super::print_summary(true, &summary, String::new)?;
    } else {
        let mut stdout = std::io::stdout().lock();
        report.write_text(&mut stdout)?;
        writeln!(stdout, "written: {}", out_dir.display())?;
    }
    if window {
        crate::app::results::run_charts(
            &format!(
                "Keyslice study {}",
                crate::text::shown(&report.study.definition.name)
            ),
            report.charts.into_iter().map(|(_, chart)| chart).collect(),
        )
        .map_err(|error| CliError::Window(error.to_string()))?;
    }
    Ok(())
}
