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
        } => create(
            dir,
            (workspace.as_deref(), pacs.as_deref()),
            readers,
            arms,
            (design, *groups, *washout_days),
            (*seed, *json),
        ),
        StudyAction::Status { dir } => status(dir),
        StudyAction::Simulate {
            dir,
            truth,
            pull,
            readers,
            json,
        } => simulate(dir, truth, *pull, readers, *json),
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
        } => panel_truth(panel, adjudicator.as_deref(), out, *json),
        StudyAction::Publish {
            dir,
            reader,
            out,
            no_store,
            json,
            connection,
        } => publish(
            dir,
            reader.as_deref(),
            out.as_deref(),
            (*no_store, *json),
            connection,
        ),
    }
}

fn create(
    dir: &std::path::Path,
    (workspace, pacs): (Option<&std::path::Path>, Option<&str>),
    readers: &[String],
    arms: &[String],
    (design, groups, washout_days): (&str, u32, u32),
    (seed, json): (u64, bool),
) -> Result<(), CliError> {
    use crate::review::study::{Design, STUDY_VERSION, Study, StudyDefinition};
    let from_pacs = dir.join("workspace");
    if let Some(query) = pacs {
        if dir.join(crate::review::study::STUDY_FILE).exists() {
            return Err(CliError::Study(crate::review::study::StudyError::Exists(
                dir.join(crate::review::study::STUDY_FILE),
            )));
        }
        let (added, failed) = super::pacs::add_to_workspace(&from_pacs, query)?;
        eprintln!(
            "{added} stud(ies) of the query retrieved into {}{}",
            from_pacs.display(),
            if failed > 0 {
                format!("; {failed} could not be retrieved and are not in the study")
            } else {
                String::new()
            }
        );
    }
    let workspace = workspace.unwrap_or(&from_pacs);
    let opened = crate::review::workspace::Workspace::open(workspace)?;
    let arms = parse_arms(arms)?;
    let design = match design {
        "crossover" => Design::Crossover { washout_days },
        "sequential" => Design::Sequential,
        "split-plot" => Design::SplitPlot {
            groups,
            washout_days,
        },
        other => {
            return Err(CliError::Argument(format!(
                "--design {other}: crossover, split-plot or sequential"
            )));
        }
    };
    let definition = StudyDefinition {
        keyslice_study: STUDY_VERSION,
        name: dir.file_name().map_or_else(
            || "study".to_string(),
            |name| name.to_string_lossy().to_string(),
        ),
        workspace: std::path::absolute(workspace).unwrap_or_else(|_| workspace.to_path_buf()),
        cases: opened
            .manifest
            .cases
            .iter()
            .map(|case| case.case_id.clone())
            .collect(),
        readers: readers.to_vec(),
        arms,
        design,
        seed,
        pacs_query: pacs.map(str::to_string),
    };
    let study = Study::create(dir, definition).map_err(CliError::from)?;
    let definition = &study.definition;
    let arms: Vec<&str> = definition
        .arms
        .iter()
        .map(|arm| arm.name.as_str())
        .collect();
    let file = dir.join(crate::review::study::STUDY_FILE);
    let summary = serde_json::json!({
        "study": definition.name,
        "file": file,
        "readers": definition.readers,
        "cases": definition.cases.len(),
        "arms": arms,
    });
    super::print_summary(json, &summary, || {
        format!(
            "study {}: {} readers × {} cases × {} arms ({}), {}",
            definition.name,
            definition.readers.len(),
            definition.cases.len(),
            definition.arms.len(),
            arms.join(", "),
            file.display()
        )
    })
}

/// `--arm NAME=SHOWS` values (default: unaided=images, evidence=evidence).
fn parse_arms(arms: &[String]) -> Result<Vec<crate::review::study::Arm>, CliError> {
    use crate::review::study::{Arm, Shows};
    Ok(if arms.is_empty() {
        vec![
            Arm {
                name: "unaided".into(),
                shows: Shows::Images,
            },
            Arm {
                name: "evidence".into(),
                shows: Shows::Evidence,
            },
        ]
    } else {
        arms.iter()
            .map(|arm| {
                let (name, shows) = arm.split_once('=').ok_or_else(|| {
                    CliError::Argument(format!(
                        "--arm {arm}: give NAME=SHOWS, SHOWS one of images, report, evidence"
                    ))
                })?;
                let shows = match shows {
                    "images" => Shows::Images,
                    "report" => Shows::Report,
                    "evidence" => Shows::Evidence,
                    other => {
                        return Err(CliError::Argument(format!(
                            "--arm {arm}: `{other}` is not images, report or evidence"
                        )));
                    }
                };
                Ok(Arm {
                    name: name.to_string(),
                    shows,
                })
            })
            .collect::<Result<_, _>>()?
    })
}

fn now_seconds() -> u64 {
    crate::date::now_seconds()
}

fn status(dir: &std::path::Path) -> Result<(), CliError> {
    use crate::review::study::{Next, Study};
    let study = Study::open(dir).map_err(CliError::from)?;
    let mut out = std::io::stdout().lock();
    for reader in &study.definition.readers {
        let line = match study.next(reader, now_seconds()).map_err(CliError::from)? {
            Next::Item { item, done, total } => format!(
                "{done} of {total} read; next: case {} in arm {} (session {})",
                item.case,
                study.definition.arms[item.arm].name,
                item.session + 1
            ),
            Next::Washout { opens_at } => format!(
                "the next session opens in {:.1} days (washout)",
                opens_at.saturating_sub(now_seconds()) as f64 / 86_400.0
            ),
            Next::Done => "every item read".to_string(),
        };
        writeln!(out, "{}: {line}", crate::text::shown(reader))?;
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
    use crate::review::study::Study;
    let study = Study::open(dir).map_err(CliError::from)?;
    let truth_by_case = truth_map(truth)?;
    let reads = study.mrmc_reads(&truth_by_case).map_err(CliError::from)?;
    let out_dir = out_dir.map_or_else(|| dir.join("report"), std::path::Path::to_path_buf);
    std::fs::create_dir_all(&out_dir).map_err(|error| {
        CliError::Output(std::io::Error::new(
            error.kind(),
            format!("{}: {error}", out_dir.display()),
        ))
    })?;
    let write = |name: &str, text: &str| report_file(&out_dir, name, text.as_bytes());
    write(
        "reads.imrmc",
        &reads.to_imrmc(&[
            &format!("Keyslice reader study {}", study.definition.name),
            "unit: case/organ; score: the reader's confidence (0-100) that a tumor is present; modality: arm",
        ]),
    )?;
    // With --json the text goes nowhere and one JSON object is printed at the end.
    let mut stdout: Box<dyn Write> = if json {
        Box::new(std::io::sink())
    } else {
        Box::new(std::io::stdout().lock())
    };
    let mut written = vec!["reads.imrmc", "readers.csv"];
    let definition = &study.definition;
    writeln!(
        stdout,
        "study {}: {} readers, {} cases ({} case/organ units with truth), arms {}",
        definition.name,
        definition.readers.len(),
        definition.cases.len(),
        reads.negatives.len() + reads.positives.len(),
        definition
            .arms
            .iter()
            .map(|arm| arm.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    let simulated = study.simulated_note().map_err(CliError::from)?;
    if let Some(note) = &simulated {
        writeln!(stdout, "{note}")?;
    }
    let lines = reader_lines(&study, &truth_by_case, &mut stdout)?;
    write("readers.csv", &(lines.join("\n") + "\n"))?;
    let uptake = uptake_lines(&study, &truth_by_case, &mut stdout)?;
    let mrmc_rows = match ustat_table(&reads) {
        Ok(rows) => {
            write("mrmc.csv", &to_csv(&rows))?;
            written.push("mrmc.csv");
            writeln!(
                stdout,
                "\nMRMC (readers and cases random; U-statistics as iMRMC):"
            )?;
            let arms: Vec<&str> = definition
                .arms
                .iter()
                .map(|arm| arm.name.as_str())
                .collect();
            mrmc_lines(&rows, &arms, &mut stdout)?;
            Ok(rows)
        }
        Err(error) => {
            writeln!(stdout, "\nno MRMC analysis yet: {error}")?;
            Err(error.to_string())
        }
    };
    let (charts, files) = report_charts(
        &study,
        &truth_by_case,
        uptake.as_deref(),
        simulated.as_ref(),
        &out_dir,
    )?;
    writeln!(stdout, "written: {}", out_dir.display())?;
    drop(stdout);
    if json {
        written.extend(files);
        let summary = report_summary(
            &study,
            &reads,
            (simulated, uptake),
            mrmc_rows,
            &out_dir,
            &written,
        );
        super::print_summary(true, &summary, String::new)?;
    }
    if window {
        crate::app::results::run_charts(
            &format!("Keyslice study {}", crate::text::shown(&definition.name)),
            charts,
        )
        .map_err(|error| CliError::Window(error.to_string()))?;
    }
    Ok(())
}

/// What `study report --json` prints.
fn report_summary(
    study: &crate::review::study::Study,
    reads: &crate::mrmc::Reads,
    (simulated, uptake): (Option<String>, Option<Vec<crate::review::study::Uptake>>),
    mrmc_rows: Result<Vec<crate::mrmc::UstatRow>, String>,
    out_dir: &std::path::Path,
    written: &[&str],
) -> serde_json::Value {
    let definition = &study.definition;
    let (mrmc, mrmc_error) = match mrmc_rows {
        Ok(rows) => (serde_json::to_value(rows).ok(), None),
        Err(error) => (None, Some(error)),
    };
    serde_json::json!({
        "study": definition.name,
        "readers": definition.readers.len(),
        "cases": definition.cases.len(),
        "units": reads.negatives.len() + reads.positives.len(),
        "arms": definition.arms.iter().map(|arm| arm.name.as_str()).collect::<Vec<_>>(),
        "simulated": simulated,
        "mrmc": mrmc,
        "mrmc_error": mrmc_error,
        "uptake": uptake,
        "out": out_dir,
        "files": written,
    })
}

/// Writes one file of a study's report into its folder, naming the file when it fails.
fn report_file(out_dir: &std::path::Path, name: &str, bytes: &[u8]) -> Result<(), CliError> {
    let path = out_dir.join(name);
    crate::io::atomic::write_atomically(&path, bytes).map_err(|error| {
        CliError::Output(std::io::Error::new(
            error.kind(),
            format!("{}: {error}", path.display()),
        ))
    })
}

/// The report's charts, each written as a PNG into `out_dir`; with the file names written.
fn report_charts(
    study: &crate::review::study::Study,
    truth_by_case: &std::collections::BTreeMap<String, crate::findings::Findings>,
    uptake: Option<&[crate::review::study::Uptake]>,
    simulated: Option<&String>,
    out_dir: &std::path::Path,
) -> Result<(Vec<crate::chart::Chart>, Vec<&'static str>), CliError> {
    let mut charts = study.charts(truth_by_case).map_err(CliError::from)?;
    let mut files = crate::review::study::charts::CHART_FILES.to_vec();
    if let Some(uptake) = uptake.filter(|arms| arms.iter().any(|arm| arm.hallucinations_read > 0)) {
        let mut chart = crate::review::study::charts::uptake_chart(uptake);
        if let Some(note) = simulated {
            chart.caption.insert(0, note.clone());
        }
        charts.push(chart);
        files.push(crate::review::study::charts::UPTAKE_FILE);
    }
    files.truncate(charts.len());
    for (chart, name) in charts.iter().zip(&files) {
        let png = crate::ui::chart::chart_png(chart, [720.0, 560.0], 2.0)
            .map_err(|error| CliError::Output(std::io::Error::other(error)))?;
        report_file(out_dir, name, &png)?;
    }
    Ok((charts, files))
}

/// The per-finding figures of `study hallucinations` on one line.
fn finding_line(
    out: &mut impl Write,
    findings: &crate::mrmc::hallucination::FindingFigures,
) -> std::io::Result<()> {
    let number = |value: Option<f64>| value.map_or_else(|| "–".to_string(), |v| format!("{v:.3}"));
    let share = |value: Option<f64>| {
        value.map_or_else(|| "–".to_string(), |v| format!("{:.0} %", 100.0 * v))
    };
    writeln!(
        out,
        "per finding ({} made up, {} real; every claim counted, one without evidence as unverified): AUROC {}{}; made-up findings shown as agreeing {}; real findings flagged {}",
        findings.made_up,
        findings.real,
        number(findings.auroc),
        findings
            .auroc_ci
            .map_or_else(String::new, |[low, high]| format!(
                " (95 % CI {low:.3}–{high:.3}, cases resampled)"
            )),
        share(findings.made_up_shown_agreeing),
        share(findings.real_flagged)
    )?;
    Ok(())
}

fn hallucinations(
    pred: &std::path::Path,
    truth: &std::path::Path,
    json: bool,
    imrmc: Option<&std::path::Path>,
) -> Result<(), CliError> {
    use crate::findings::read_report;
    use crate::io::cases::read_predictions;
    use crate::mrmc::hallucination::{ReportCase, hallucinations};
    let truth_by_case = truth_map(truth)?;
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
    finding_line(&mut out, &analysis.findings)?;
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

/// Each reader in each arm: calls against truth, and time per case; printed, and returned as
/// CSV lines.
fn reader_lines(
    study: &crate::review::study::Study,
    truth_by_case: &std::collections::BTreeMap<String, crate::findings::Findings>,
    stdout: &mut impl Write,
) -> Result<Vec<String>, CliError> {
    let rows = study.summaries(truth_by_case).map_err(CliError::from)?;
    let mut lines = vec!["\"reader\",\"arm\",\"reads\",\"sensitivity\",\"specificity\",\"balanced_accuracy\",\"auc\",\"median_seconds_per_case\"".to_string()];
    writeln!(
        stdout,
        "reader       arm          reads  sensitivity  specificity  balanced    AUC  s/case"
    )?;
    let shown = |value: Option<f64>| value.map_or_else(|| "–".to_string(), |v| format!("{v:.3}"));
    let csv = |value: Option<f64>| value.map_or_else(|| "NA".to_string(), |v| v.to_string());
    for row in &rows {
        writeln!(
            stdout,
            "{:<12} {:<12} {:>5}  {:>11}  {:>11}  {:>8}  {:>5}  {:>6}",
            crate::text::shown(&row.reader),
            crate::text::shown(&row.arm),
            row.reads,
            shown(row.sensitivity),
            shown(row.specificity),
            shown(row.balanced_accuracy),
            shown(row.auc),
            row.median_seconds
                .map_or_else(|| "–".to_string(), |v| format!("{v:.1}"))
        )?;
        lines.push(format!(
            "{},{},{},{},{},{},{},{}",
            crate::text::csv_quoted(&row.reader),
            crate::text::csv_quoted(&row.arm),
            row.reads,
            csv(row.sensitivity),
            csv(row.specificity),
            csv(row.balanced_accuracy),
            csv(row.auc),
            csv(row.median_seconds)
        ));
    }
    Ok(lines)
}

/// The E-MRL question: of the AI's hallucinated findings, how many the readers kept in each
/// arm (with the images alone: how often they called that tumor on their own), and how well
/// the consistency flags them.
/// Prints how the readers took the AI's hallucinated findings; returns it per arm when the
/// study's workspace has AI results.
fn uptake_lines(
    study: &crate::review::study::Study,
    truth_by_case: &std::collections::BTreeMap<String, crate::findings::Findings>,
    stdout: &mut impl Write,
) -> Result<Option<Vec<crate::review::study::Uptake>>, CliError> {
    use crate::findings::Organ;
    use crate::mrmc::hallucination::{ReportCase, hallucinations};
    let Ok(workspace) = crate::review::workspace::Workspace::open(&study.definition.workspace)
    else {
        writeln!(
            stdout,
            "\nthe study's workspace {} cannot be opened: no analysis of the AI's findings",
            study.definition.workspace.display()
        )?;
        return Ok(None);
    };
    let predictions = workspace.predictions()?;
    let mut hallucinated = std::collections::BTreeMap::new();
    let mut cases = Vec::new();
    for case in &study.definition.cases {
        let (Some(prediction), Some(truth)) = (predictions.get(case), truth_by_case.get(case))
        else {
            continue;
        };
        let organs: Vec<Organ> = prediction
            .findings
            .tumor_organs()
            .into_iter()
            .filter(|&organ| !truth.states_tumor(organ))
            .collect();
        if !organs.is_empty() {
            hallucinated.insert(case.clone(), organs);
        }
        cases.push((case, prediction, truth));
    }
    if cases.is_empty() {
        writeln!(
            stdout,
            "\nno AI results for the study's cases in {}: `keyslice workspace analyze` it to see how readers took the AI's findings",
            study.definition.workspace.display()
        )?;
        return Ok(None);
    }
    let uptake = study.uptake(&hallucinated).map_err(CliError::from)?;
    writeln!(
        stdout,
        "\nthe AI's hallucinated findings (a tumor claimed in an organ whose truth has none): {} in {} of {} cases",
        hallucinated.values().map(Vec::len).sum::<usize>(),
        hallucinated.len(),
        cases.len()
    )?;
    for arm in &uptake {
        let share = if arm.hallucinations_read > 0 {
            format!(
                "{:.0} %",
                100.0 * arm.kept as f64 / arm.hallucinations_read as f64
            )
        } else {
            "–".to_string()
        };
        let how = match arm.shows {
            crate::review::study::Shows::Images => "called that tumor on their own",
            _ => "kept it",
        };
        writeln!(
            stdout,
            "  arm {}: {} read(s) of a hallucinated finding, {how} in {} ({share})",
            arm.arm, arm.hallucinations_read, arm.kept
        )?;
    }
    let report_cases: Vec<ReportCase<'_>> = cases
        .iter()
        .map(|(case, prediction, truth)| ReportCase {
            case_id: case,
            report: &prediction.findings,
            local: prediction.local_findings.as_ref(),
            truth,
        })
        .collect();
    if let Ok((analysis, _)) =
        hallucinations(&report_cases, crate::scoring::SizeTolerance::default())
    {
        match (analysis.auroc, analysis.auroc_ci) {
            (Some(auroc), Some([low, high])) => writeln!(
                stdout,
                "  consistency as a hallucination detector: AUROC {auroc:.3} (95 % CI {low:.3}–{high:.3})"
            )?,
            _ => writeln!(
                stdout,
                "  consistency as a hallucination detector: {}",
                analysis
                    .auroc_missing
                    .unwrap_or_else(|| "no AUROC".to_string())
            )?,
        }
    }
    Ok(Some(uptake))
}

/// Each arm's AUC and each pair's difference (the arm defined later minus the earlier one, as
/// the charts read it), with its BDG interval.
fn mrmc_lines(
    rows: &[crate::mrmc::UstatRow],
    arms: &[&str],
    stdout: &mut impl Write,
) -> Result<(), CliError> {
    for row in rows {
        let difference = crate::mrmc::arm_difference(row, arms);
        if !(row.botCIBDG.is_finite() && row.topCIBDG.is_finite()) {
            let (what, estimate) = match &difference {
                Some(d) => (format!("{} − {}", d.later, d.earlier), d.estimate),
                None => (row.modalityA.clone(), row.AUCA),
            };
            writeln!(
                stdout,
                "  AUC {what} = {estimate:.3} (no interval: the variance estimate is not positive; more readers or cases are needed)"
            )?;
            continue;
        }
        match difference {
            Some(d) => writeln!(
                stdout,
                "  AUC {} − {} = {:+.3} (95 % CI {:+.3} to {:+.3}, df {:.1}, p = {:.3})",
                d.later, d.earlier, d.estimate, d.low, d.high, d.df, d.p
            )?,
            _ => writeln!(
                stdout,
                "  AUC {} = {:.3} (95 % CI {:.3} to {:.3}, df {:.1})",
                row.modalityA, row.AUCA, row.botCIBDG, row.topCIBDG, row.dfBDG
            )?,
        }
    }
    Ok(())
}

fn simulate(
    dir: &std::path::Path,
    truth: &std::path::Path,
    pull: f64,
    named: &[String],
    json: bool,
) -> Result<(), CliError> {
    use crate::review::study::{AiResult, ReaderRules, Study};
    let study = Study::open(dir).map_err(CliError::from)?;
    if let Some(unknown) = named
        .iter()
        .find(|name| !study.definition.readers.contains(name))
    {
        return Err(CliError::Argument(format!(
            "--reader {}: not a reader of study {} (its readers: {})",
            crate::text::shown(unknown),
            study.definition.name,
            study.definition.readers.join(", ")
        )));
    }
    let truth_by_case = truth_map(truth)?;
    let predictions =
        crate::review::workspace::Workspace::open(&study.definition.workspace)?.predictions()?;
    let ai = study
        .definition
        .cases
        .iter()
        .filter_map(|case| Some((case.clone(), AiResult::of(predictions.get(case)?))))
        .collect();
    let simulation = study
        .simulate(
            &truth_by_case,
            &ai,
            ReaderRules { pull },
            now_seconds(),
            named,
        )
        .map_err(CliError::from)?;
    let summary = serde_json::json!({
        "recorded": simulation.recorded,
        "cases_with_ai": ai.len(),
        "cases": study.definition.cases.len(),
        "pull": pull,
        "left_alone": simulation.left_alone,
        "note": "simulated readers demonstrate the workflow and measure nothing about people",
    });
    super::print_summary(json, &summary, || {
        use std::fmt::Write as _;
        let mut text = format!(
            "{} simulated read(s); AI results for {} of {} cases (pull {pull}). Simulated readers \
             demonstrate the workflow and measure nothing about people.",
            simulation.recorded,
            ai.len(),
            study.definition.cases.len()
        );
        for reader in &simulation.left_alone {
            let _ = write!(
                text,
                "\n{reader} was left alone: they have reads of their own (simulate them too with --reader {reader})"
            );
        }
        text
    })
}

/// The truth of each case: a JSONL file, or a folder of case folders.
fn truth_map(
    truth: &std::path::Path,
) -> Result<std::collections::BTreeMap<String, crate::findings::Findings>, CliError> {
    crate::io::cases::read_truth(truth)?
        .into_iter()
        .map(|record| {
            let findings = record
                .truth_findings()
                .map_err(|error| CliError::Argument(format!("{error} ({})", truth.display())))?;
            Ok((record.case_id.clone(), findings))
        })
        .collect()
}

/// `study publish`: each read as the reader's SR, marked as a study read, into the PACS its
/// case came from (and `out`).
fn publish(
    dir: &std::path::Path,
    only: Option<&str>,
    out: Option<&std::path::Path>,
    (no_store, json): (bool, bool),
    connection: &super::pacs::Connection,
) -> Result<(), CliError> {
    use crate::review::study::Study;
    let study = Study::open(dir).map_err(CliError::from)?;
    let definition = &study.definition;
    if let Some(reader) = only
        && !definition.readers.iter().any(|name| name == reader)
    {
        return Err(CliError::Study(
            crate::review::study::StudyError::NotAReader(reader.to_string()),
        ));
    }
    let workspace = crate::review::workspace::Workspace::open(&definition.workspace)?;
    let predictions = workspace.predictions()?;
    if let Some(out) = out {
        std::fs::create_dir_all(out).map_err(|source| CliError::Input {
            path: out.to_path_buf(),
            source,
        })?;
    }
    // Documents per (origin, study UID), to ask each study once what it holds.
    let mut batches = Batches::new();
    let (mut written, mut skipped) = (0, 0);
    let mut not_dicom = std::collections::BTreeSet::new();
    let mut slice_sops = SliceSops::new();
    // With --json the per-document lines go nowhere and one JSON line ends the run.
    let mut stdout: Box<dyn Write> = if json {
        Box::new(std::io::sink())
    } else {
        Box::new(std::io::stdout().lock())
    };
    for reader in definition
        .readers
        .iter()
        .filter(|reader| only.is_none_or(|name| name == reader.as_str()))
    {
        for read in study.reads(reader).map_err(CliError::from)? {
            let Some(case) = workspace.case(&read.case) else {
                skipped += 1;
                continue;
            };
            if case.origin.is_none() && out.is_none() {
                skipped += 1;
                continue;
            }
            // An SR files with the DICOM study it reads: a NIfTI case has none.
            if !case.volume.is_dir() {
                not_dicom.insert(case.case_id.clone());
                skipped += 1;
                continue;
            }
            let (context, document) =
                read_document(definition, case, (&predictions, &mut slice_sops), &read)?;
            if let Some(out) = out {
                let path = out.join(format!(
                    "{}-{}-{}-{}.dcm",
                    read.case,
                    read.reader,
                    read.arm,
                    read.session + 1
                ));
                crate::io::atomic::write_atomically(&path, &document.bytes)
                    .map_err(|source| CliError::Input { path, source })?;
            }
            written += 1;
            if let (Some(origin), false) = (&case.origin, no_store) {
                batches
                    .entry((origin.clone(), context.study_uid.clone()))
                    .or_default()
                    .push((
                        format!("{} {} {}", read.case, read.reader, read.arm),
                        document,
                    ));
            }
        }
    }
    if let Some(first) = not_dicom.first() {
        eprintln!(
            "note: {} case(s) are not DICOM series (such as {}): their reads cannot be stored as SR, which files with the DICOM study it reads",
            not_dicom.len(),
            crate::text::shown(first)
        );
    }
    let (stored, held) = store_batches(batches, connection, &mut stdout)?;
    drop(stdout);
    let summary = serde_json::json!({
        "written": written,
        "stored": stored,
        "held": held,
        "skipped": skipped,
    });
    super::print_summary(json, &summary, || {
        format!(
            "{written} study read(s) as SR; {stored} stored, {held} already on the PACS; {skipped} read(s) of cases without a PACS origin or DICOM images skipped"
        )
    })
}

/// The SR of one study read of `case`, and the identity of the study it files with.
/// The SOP Instance UID of each slice of a case's series, by case, read once per case.
type SliceSops = std::collections::HashMap<String, Vec<Option<String>>>;

/// The SOP Instance UID of slice `index` of a case: the prediction's key slice when it is that
/// slice, else read from the case's series (its images loaded once, then kept in `known`).
fn slice_sop(
    case: &crate::review::workspace::WorkspaceCase,
    prediction: Option<&crate::prediction::Prediction>,
    index: u32,
    known: &mut SliceSops,
) -> Option<String> {
    if let Some(sop) = prediction
        .and_then(|p| p.key_slice.as_ref())
        .filter(|key| key.index == index)
        .and_then(|key| key.sop_instance_uid.clone())
    {
        return Some(sop);
    }
    let sops = known.entry(case.case_id.clone()).or_insert_with(|| {
        let series_uid = prediction
            .and_then(|p| p.images.as_ref())
            .map(|images| images.series_uid.clone())
            .filter(|uid| !uid.is_empty());
        crate::io::load_study(&case.volume, &crate::io::LoadOptions { series_uid })
            .map(|study| {
                study
                    .volume
                    .slices()
                    .iter()
                    .map(|slice| slice.sop_instance_uid.clone())
                    .collect()
            })
            .unwrap_or_default()
    });
    sops.get(index as usize).cloned().flatten()
}

fn read_document(
    definition: &crate::review::study::StudyDefinition,
    case: &crate::review::workspace::WorkspaceCase,
    (predictions, slice_sops): (&crate::review::workspace::Predictions, &mut SliceSops),
    read: &crate::review::study::Read,
) -> Result<
    (
        crate::pacs::sr::StudyContext,
        crate::pacs::sr::write::Written,
    ),
    CliError,
> {
    use crate::pacs::sr::write::study_read_sr;
    use crate::pacs::sr::{CaseResult, Observer, StudyContext, StudyReadMark};
    use crate::review::study::Shows;
    let shows = definition
        .arms
        .iter()
        .find(|arm| arm.name == read.arm)
        .map_or(Shows::Images, |arm| arm.shows);
    // The model whose report the reader saw; none for a read of the images alone.
    let algorithm = match (shows, predictions.get(&case.case_id)) {
        (Shows::Images, _) | (_, None) => crate::prediction::ModelId {
            id: String::new(),
            version: String::new(),
        },
        (_, Some(prediction)) => prediction.diagnoser.clone(),
    };
    let context = StudyContext::from_folder(&case.volume)?;
    let mut findings = read.findings();
    // The reader's key slice as its image, so the document marks it there.
    if let Some(key) = &mut findings.key_slice {
        key.sop_instance_uid =
            slice_sop(case, predictions.get(&case.case_id), key.index, slice_sops);
    }
    let result = CaseResult {
        observer: Observer::Person {
            name: read.reader.clone(),
        },
        algorithm,
        verifier: None,
        findings,
        report: Some(read.summary(&definition.name)),
        local_description: None,
        consistency: None,
        out_of_domain: None,
        // A read says presence per organ; it draws no lesion.
        lesion_images: Vec::new(),
    };
    let mark = StudyReadMark {
        study: definition.name.clone(),
        arm: read.arm.clone(),
        session: read.session,
        case: read.case.clone(),
    };
    let at = keyslice_core::date::dicom_from_rfc3339(&read.at)
        .unwrap_or_else(crate::pacs::sr::now_date_time);
    let document = study_read_sr(&context, &result, &mark, at)?;
    Ok((context, document))
}

/// `study truth`: the panel's truth, written as JSONL.
fn panel_truth(
    panel: &[PathBuf],
    adjudicator: Option<&std::path::Path>,
    out: &std::path::Path,
    json: bool,
) -> Result<(), CliError> {
    use crate::scoring::panel::{Decided, panel_truth};
    if panel.len() < 2 {
        return Err(CliError::Argument(
            "--panel: give at least two panelists' findings".into(),
        ));
    }
    let readings = panel
        .iter()
        .map(|path| truth_map(path))
        .collect::<Result<Vec<_>, _>>()?;
    let adjudicated = adjudicator.map(truth_map).transpose()?;
    let decided = panel_truth(&readings, adjudicated.as_ref());
    let mut text = String::new();
    for (case_id, findings) in &decided.truth {
        let record = crate::scoring::TruthRecord {
            case_id: case_id.clone(),
            findings: Some(findings.clone()),
            report: None,
            lesion_extents: Vec::new(),
            slice_size: None,
            slices: None,
        };
        text.push_str(&serde_json::to_string(&record).map_err(std::io::Error::from)?);
        text.push('\n');
    }
    crate::io::atomic::write_atomically(out, text.as_bytes()).map_err(|error| {
        CliError::Output(std::io::Error::new(
            error.kind(),
            format!("{}: {error}", out.display()),
        ))
    })?;
    let mut stdout = std::io::stdout().lock();
    if json {
        for vote in &decided.votes {
            writeln!(
                stdout,
                "{}",
                serde_json::to_string(vote).map_err(std::io::Error::from)?
            )?;
        }
    }
    let count = |kind: Decided| {
        decided
            .votes
            .iter()
            .filter(|vote| vote.decided == kind)
            .count()
    };
    let unresolved: Vec<_> = decided
        .votes
        .iter()
        .filter(|vote| vote.decided == Decided::Unresolved)
        .collect();
    writeln!(
        stdout,
        "panel of {}: {} case(s) with truth written to {}; organs unanimous {}, by majority {}, adjudicated {}, unresolved {}; Fleiss' kappa {}",
        panel.len(),
        decided.truth.len(),
        out.display(),
        count(Decided::Unanimous),
        count(Decided::Majority),
        count(Decided::Adjudicated),
        unresolved.len(),
        decided
            .kappa
            .map_or_else(|| "n/a".to_string(), |kappa| format!("{kappa:.3}"))
    )?;
    for vote in &unresolved {
        writeln!(
            stdout,
            "unresolved: {} {}: {} of {} panelists call a tumor; the case is left out",
            crate::text::shown(&vote.case_id),
            vote.organ,
            vote.tumor_votes,
            vote.panelists
        )?;
    }
    if !unresolved.is_empty() {
        writeln!(
            stdout,
            "hint: give --adjudicator FILE with the adjudicator's findings of these cases"
        )?;
    }
    Ok(())
}

/// Documents to store, by (PACS origin, Study Instance UID): each with a line saying what it
/// is.
type Batches =
    std::collections::BTreeMap<(String, String), Vec<(String, crate::pacs::sr::write::Written)>>;

/// Stores each study's documents that its PACS does not hold yet; (stored, already held).
fn store_batches(
    batches: Batches,
    connection: &super::pacs::Connection,
    stdout: &mut impl Write,
) -> Result<(usize, usize), CliError> {
    let (mut stored, mut held) = (0, 0);
    for ((origin, study_uid), documents) in batches {
        let server = connection.server(&crate::pacs::DicomWebUrl::parse(&origin)?)?;
        let on_server = crate::pacs::results::held_documents(&server, &study_uid)?;
        let mut to_store = Vec::new();
        for (what, document) in documents {
            if on_server.contains(&document.sop_uid) {
                held += 1;
            } else {
                writeln!(
                    stdout,
                    "{} stored {}",
                    crate::text::shown(&what),
                    document.sop_uid
                )?;
                to_store.push(document.bytes);
            }
        }
        if !to_store.is_empty() {
            crate::pacs::dicomweb::stow::store(&server, &study_uid, &to_store)?;
            stored += to_store.len();
        }
    }
    Ok((stored, held))
}
