//! Reader studies: made from a workspace or a PACS query, read by simulated readers for a
//! demonstration, reported (tables and charts as data, the tables written with the `csv`
//! crate), their reads published to the PACS as DICOM SR, and truth from a panel.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

use keyslice_core::chart::Chart;
use keyslice_core::findings::{Findings, Organ};
use keyslice_core::mrmc::hallucination::{Hallucinations, ReportCase, hallucinations};
use keyslice_core::mrmc::{MrmcError, Reads, UstatRow, ustat_table};
use keyslice_core::prediction::{ModelId, Prediction};
use keyslice_core::scoring::SizeTolerance;
use keyslice_pacs::sr::write::Written;
use keyslice_pacs::sr::{CaseResult, Observer, StudyContext, StudyReadMark};
use keyslice_review::study::summary::ReaderSummary;
use keyslice_review::study::{
    AiResult, Arm, Design, Read, ReaderRules, STUDY_FILE, STUDY_VERSION, Shows, Study,
    StudyDefinition, StudyError, Uptake,
};
use keyslice_review::workspace::{Predictions, Workspace, WorkspaceCase};

use crate::pacs::{Batches, Connection, Pending, StoreOutcome, store_batches};
use crate::{Error, Report};

/// The truth of each case: a JSONL file, or a folder of case folders.
pub fn truth_map(truth: &Path) -> Result<BTreeMap<String, Findings>, Error> {
    keyslice_io::cases::read_truth(truth)?
        .into_iter()
        .map(|record| {
            let findings = record
                .truth_findings()
                .map_err(|error| Error::Argument(format!("{error} ({})", truth.display())))?;
            Ok((record.case_id.clone(), findings))
        })
        .collect()
}

/// What a new study is made of.
pub struct NewStudy<'a> {
    /// The study's folder.
    pub dir: &'a Path,
    /// Its cases: a workspace, or (with `pacs`) made in `dir/workspace` from a PACS query.
    pub workspace: Option<&'a Path>,
    /// A DICOMweb URL whose studies become the cases.
    pub pacs: Option<&'a str>,
    /// The readers.
    pub readers: &'a [String],
    /// The arms.
    pub arms: Vec<Arm>,
    /// How the readers meet the arms.
    pub design: Design,
    /// The schedule's seed.
    pub seed: u64,
}

/// A study just made, and its file.
pub struct Created {
    /// The study.
    pub study: Study,
    /// Its `study.json`.
    pub file: PathBuf,
}

impl crate::Outcome for Created {
    fn json(&self) -> String {
        let definition = &self.study.definition;
        serde_json::json!({
            "study": definition.name,
            "file": self.file,
            "readers": definition.readers,
            "cases": definition.cases.len(),
            "arms": definition.arms.iter().map(|arm| arm.name.as_str()).collect::<Vec<_>>(),
        })
        .to_string()
    }

    fn text(&self) -> String {
        let definition = &self.study.definition;
        let arms: Vec<&str> = definition
            .arms
            .iter()
            .map(|arm| arm.name.as_str())
            .collect();
        format!(
            "study {}: {} readers × {} cases × {} arms ({}), {}",
            definition.name,
            definition.readers.len(),
            definition.cases.len(),
            definition.arms.len(),
            arms.join(", "),
            self.file.display()
        )
    }
}

impl crate::Outcome for Simulated {
    fn json(&self) -> String {
        serde_json::json!({
            "recorded": self.recorded,
            "cases_with_ai": self.cases_with_ai,
            "cases": self.cases,
            "pull": self.pull,
            "left_alone": self.left_alone,
            "note": "simulated readers demonstrate the workflow and measure nothing about people",
        })
        .to_string()
    }

    fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut text = format!(
            "{} simulated read(s); AI results for {} of {} cases (pull {}). Simulated readers \
             demonstrate the workflow and measure nothing about people.",
            self.recorded, self.cases_with_ai, self.cases, self.pull
        );
        for reader in &self.left_alone {
            let _ = write!(
                text,
                "\n{reader} was left alone: they have reads of their own (simulate them too with --reader {reader})"
            );
        }
        text
    }
}

impl crate::Outcome for ReadsPublished {
    fn json(&self) -> String {
        serde_json::json!({
            "written": self.written,
            "stored": self.stored.stored.len(),
            "held": self.stored.held,
            "skipped": self.skipped,
        })
        .to_string()
    }

    fn text(&self) -> String {
        let mut lines: Vec<String> = self
            .stored
            .stored
            .iter()
            .map(|(what, sop_uid)| format!("{} stored {sop_uid}", keyslice_core::text::shown(what)))
            .collect();
        lines.push(format!(
            "{} study read(s) as SR; {} stored, {} already on the PACS; {} read(s) of cases without a PACS origin or DICOM images skipped",
            self.written,
            self.stored.stored.len(),
            self.stored.held,
            self.skipped
        ));
        lines.join("\n")
    }
}

/// Where each reader of a study stands: their next item, a washout, or done; a line each.
pub fn status_lines(dir: &Path, now_seconds: u64) -> Result<Vec<String>, Error> {
    use keyslice_review::study::Next;
    let study = Study::open(dir)?;
    let mut lines = Vec::new();
    for reader in &study.definition.readers {
        let line = match study.next(reader, now_seconds)? {
            Next::Item { item, done, total } => format!(
                "{done} of {total} read; next: case {} in arm {} (session {})",
                item.case,
                study.definition.arms[item.arm].name,
                item.session + 1
            ),
            Next::Washout { opens_at } => format!(
                "the next session opens in {:.1} days (washout)",
                opens_at.saturating_sub(now_seconds) as f64 / 86_400.0
            ),
            Next::Done => "every item read".to_string(),
        };
        lines.push(format!("{}: {line}", keyslice_core::text::shown(reader)));
    }
    Ok(lines)
}

/// The tables of iMRMC (the U-statistics, or per reader) of the reads in `file` (iMRMC's
/// input format), as CSV in iMRMC's columns or one JSON object a row.
pub fn mrmc_tables(file: &Path, per_reader: bool, json: bool) -> Result<String, Error> {
    use keyslice_core::mrmc::{Csv, parse_imrmc, reader_table, to_csv};
    fn rows<T: Csv + serde::Serialize>(rows: &[T], json: bool) -> Result<String, Error> {
        if !json {
            return Ok(to_csv(rows));
        }
        let mut text = String::new();
        for row in rows {
            text.push_str(&serde_json::to_string(row).map_err(std::io::Error::from)?);
            text.push('\n');
        }
        Ok(text)
    }
    let text = std::fs::read_to_string(file).map_err(|source| Error::Input {
        path: file.to_path_buf(),
        source,
    })?;
    let invalid = |error: MrmcError| Error::InvalidFile(format!("{}: {error}", file.display()));
    let reads = parse_imrmc(&text).map_err(invalid)?;
    if per_reader {
        rows(&reader_table(&reads).map_err(invalid)?, json)
    } else {
        rows(&ustat_table(&reads).map_err(invalid)?, json)
    }
}

/// Makes a reader study; with a PACS query, its studies are first imported into the study's
/// own workspace (a study that cannot be retrieved is told to `report` and left out).
pub fn create_study(new: &NewStudy<'_>, report: &dyn Report) -> Result<Created, Error> {
    let from_pacs = new.dir.join("workspace");
    if let Some(query) = new.pacs {
        if new.dir.join(STUDY_FILE).exists() {
            return Err(Error::Study(StudyError::Exists(new.dir.join(STUDY_FILE))));
        }
        let imported = crate::pacs::import_studies(&from_pacs, query, report)?;
        report.note(&format!(
            "{} stud(ies) of the query retrieved into {}{}",
            imported.added,
            from_pacs.display(),
            if imported.failed > 0 {
                format!(
                    "; {} could not be retrieved and are not in the study",
                    imported.failed
                )
            } else {
                String::new()
            }
        ));
    }
    let workspace = new.workspace.unwrap_or(&from_pacs);
    let opened = Workspace::open(workspace)?;
    let definition = StudyDefinition {
        keyslice_study: STUDY_VERSION,
        name: new.dir.file_name().map_or_else(
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
        readers: new.readers.to_vec(),
        arms: new.arms.clone(),
        design: new.design,
        seed: new.seed,
        pacs_query: new.pacs.map(str::to_string),
    };
    Ok(Created {
        study: Study::create(new.dir, definition)?,
        file: new.dir.join(STUDY_FILE),
    })
}

/// What [`simulate`] did.
pub struct Simulated {
    /// How far each reader's calls were pulled towards the AI's.
    pub pull: f64,
    /// Reads recorded.
    pub recorded: usize,
    /// Cases with an AI result.
    pub cases_with_ai: usize,
    /// Cases in the study.
    pub cases: usize,
    /// Readers left alone (they have reads of their own).
    pub left_alone: Vec<String>,
}

/// Simulated readers read the study (a demonstration of the workflow; it measures nothing
/// about people): each reader's call follows the truth, pulled towards the AI's by `pull`.
pub fn simulate(
    dir: &Path,
    truth: &Path,
    pull: f64,
    named: &[String],
    now_seconds: u64,
) -> Result<Simulated, Error> {
    let study = Study::open(dir)?;
    if let Some(unknown) = named
        .iter()
        .find(|name| !study.definition.readers.contains(name))
    {
        return Err(Error::Argument(format!(
            "--reader {}: not a reader of study {} (its readers: {})",
            keyslice_core::text::shown(unknown),
            study.definition.name,
            study.definition.readers.join(", ")
        )));
    }
    let truth_by_case = truth_map(truth)?;
    let predictions = Workspace::open(&study.definition.workspace)?.predictions()?;
    let ai = study
        .definition
        .cases
        .iter()
        .filter_map(|case| Some((case.clone(), AiResult::of(predictions.get(case)?))))
        .collect::<BTreeMap<_, _>>();
    let simulation = study.simulate(
        &truth_by_case,
        &ai,
        ReaderRules { pull },
        now_seconds,
        named,
    )?;
    Ok(Simulated {
        pull,
        recorded: simulation.recorded,
        cases_with_ai: ai.len(),
        cases: study.definition.cases.len(),
        left_alone: simulation.left_alone,
    })
}

/// How the readers took the AI's hallucinated findings, or why that cannot be said.
pub enum UptakeAnalysis {
    /// The study's workspace cannot be opened.
    NoWorkspace(PathBuf),
    /// The workspace has no AI result for the study's cases.
    NoAiResults(PathBuf),
    /// The AI's findings, read.
    Found {
        /// Hallucinated findings (a tumor claimed in an organ whose truth has none).
        hallucinated: usize,
        /// Cases with one.
        cases_with: usize,
        /// Cases with an AI result and truth.
        cases: usize,
        /// Per arm.
        arms: Vec<Uptake>,
        /// The consistency as a detector of them: AUROC and its 95 % interval, or why none.
        detector: Option<Result<(f64, [f64; 2]), String>>,
    },
}

impl UptakeAnalysis {
    /// Per arm, when the AI's findings were read.
    #[must_use]
    pub fn arms(&self) -> Option<&[Uptake]> {
        match self {
            Self::Found { arms, .. } => Some(arms),
            _ => None,
        }
    }
}

/// A reader study's report as data: what `study report` prints and writes.
pub struct StudyReport {
    /// The study.
    pub study: Study,
    /// The reads in iMRMC's terms (case/organ units with truth).
    pub reads: Reads,
    /// Set when the reads are simulated.
    pub simulated: Option<String>,
    /// Each reader's row in each arm, then each arm's pooled row.
    pub readers: Vec<ReaderSummary>,
    /// How the readers took the AI's hallucinated findings.
    pub uptake: UptakeAnalysis,
    /// The MRMC analysis (readers and cases random), or why there is none yet.
    pub mrmc: Result<Vec<UstatRow>, MrmcError>,
    /// The charts, each with its file name.
    pub charts: Vec<(&'static str, Chart)>,
}

/// Reads a study's reads against `truth` into its report.
pub fn study_report(dir: &Path, truth: &Path) -> Result<StudyReport, Error> {
    use keyslice_review::study::charts::{CHART_FILES, UPTAKE_FILE, uptake_chart};
    let study = Study::open(dir)?;
    let truth_by_case = truth_map(truth)?;
    let reads = study.mrmc_reads(&truth_by_case)?;
    let simulated = study.simulated_note()?;
    let readers = study.summaries(&truth_by_case)?;
    let uptake = uptake(&study, &truth_by_case)?;
    let mrmc = ustat_table(&reads);
    let mut charts: Vec<(&'static str, Chart)> = CHART_FILES
        .into_iter()
        .zip(study.charts(&truth_by_case)?)
        .collect();
    if let Some(arms) = uptake
        .arms()
        .filter(|arms| arms.iter().any(|arm| arm.hallucinations_read > 0))
    {
        let mut chart = uptake_chart(arms);
        if let Some(note) = &simulated {
            chart.caption.insert(0, note.clone());
        }
        charts.push((UPTAKE_FILE, chart));
    }
    Ok(StudyReport {
        study,
        reads,
        simulated,
        readers,
        uptake,
        mrmc,
        charts,
    })
}

impl StudyReport {
    /// Writes the report's files into `out_dir` (made when missing): the reads for iMRMC,
    /// the tables as CSV, each chart as the PNG `png` draws. Returns the files' names.
    pub fn write_files(
        &self,
        out_dir: &Path,
        png: &dyn Fn(&Chart) -> Result<Vec<u8>, String>,
    ) -> Result<Vec<&'static str>, Error> {
        std::fs::create_dir_all(out_dir).map_err(|source| Error::Write {
            path: out_dir.to_path_buf(),
            source,
        })?;
        let write = |name: &str, bytes: &[u8]| {
            let path = out_dir.join(name);
            keyslice_io::atomic::write_atomically(&path, bytes)
                .map_err(|source| Error::Write { path, source })
        };
        write(
            "reads.imrmc",
            self.reads
                .to_imrmc(&[
                    &format!("Keyslice reader study {}", self.study.definition.name),
                    "unit: case/organ; score: the reader's confidence (0-100) that a tumor is present; modality: arm",
                ])
                .as_bytes(),
        )?;
        write("readers.csv", &readers_csv(&self.readers)?)?;
        let mut written = vec!["reads.imrmc", "readers.csv"];
        if let Ok(rows) = &self.mrmc {
            // iMRMC's own table, as its R package writes it.
            write("mrmc.csv", keyslice_core::mrmc::to_csv(rows).as_bytes())?;
            written.push("mrmc.csv");
        }
        for (name, chart) in &self.charts {
            let bytes = png(chart).map_err(|reason| {
                Error::Output(std::io::Error::other(format!("{name}: {reason}")))
            })?;
            write(name, &bytes)?;
            written.push(name);
        }
        Ok(written)
    }
}

/// The readers' table as CSV (a header, then a row per reader and arm): absent figures as
/// `NA`, text that a spreadsheet would run as a formula defused.
pub fn readers_csv(rows: &[ReaderSummary]) -> Result<Vec<u8>, Error> {
    let figure = |value: Option<f64>| value.map_or_else(|| "NA".to_string(), |v| v.to_string());
    let mut writer = csv::WriterBuilder::new()
        .quote_style(csv::QuoteStyle::NonNumeric)
        .from_writer(Vec::new());
    let failed = |error: csv::Error| Error::Output(std::io::Error::other(error));
    writer
        .write_record([
            "reader",
            "arm",
            "reads",
            "sensitivity",
            "specificity",
            "balanced_accuracy",
            "auc",
            "median_seconds_per_case",
        ])
        .map_err(failed)?;
    for row in rows {
        writer
            .write_record([
                keyslice_core::text::defused(&row.reader).into_owned(),
                keyslice_core::text::defused(&row.arm).into_owned(),
                row.reads.to_string(),
                figure(row.sensitivity),
                figure(row.specificity),
                figure(row.balanced_accuracy),
                figure(row.auc),
                figure(row.median_seconds),
            ])
            .map_err(failed)?;
    }
    writer
        .into_inner()
        .map_err(|error| Error::Output(std::io::Error::other(error.to_string())))
}

/// The E-MRL question: of the AI's hallucinated findings, how many the readers kept in each
/// arm (with the images alone: how often they called that tumor on their own), and how well
/// the consistency flags them.
fn uptake(
    study: &Study,
    truth_by_case: &BTreeMap<String, Findings>,
) -> Result<UptakeAnalysis, Error> {
    let Ok(workspace) = Workspace::open(&study.definition.workspace) else {
        return Ok(UptakeAnalysis::NoWorkspace(
            study.definition.workspace.clone(),
        ));
    };
    let predictions = workspace.predictions()?;
    let mut hallucinated = BTreeMap::new();
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
        return Ok(UptakeAnalysis::NoAiResults(
            study.definition.workspace.clone(),
        ));
    }
    let arms = study.uptake(&hallucinated)?;
    let report_cases: Vec<ReportCase<'_>> = cases
        .iter()
        .map(|(case, prediction, truth)| ReportCase {
            case_id: case,
            report: &prediction.findings,
            local: prediction.local_findings.as_ref(),
            truth,
        })
        .collect();
    let detector = hallucinations(&report_cases, SizeTolerance::default())
        .ok()
        .map(|(analysis, _)| match (analysis.auroc, analysis.auroc_ci) {
            (Some(auroc), Some(ci)) => Ok((auroc, ci)),
            _ => Err(analysis
                .auroc_missing
                .unwrap_or_else(|| "no AUROC".to_string())),
        });
    Ok(UptakeAnalysis::Found {
        hallucinated: hallucinated.values().map(Vec::len).sum(),
        cases_with: hallucinated.len(),
        cases: cases.len(),
        arms,
        detector,
    })
}

/// Which AI reports of `pred` claim a tumor that truth does not have, and how well the
/// report–evidence consistency flags them; with the number of reports matched with truth.
/// With `imrmc`, the claims' scores are written there in iMRMC's format too.
pub fn hallucination_analysis(
    pred: &Path,
    truth: &Path,
    imrmc: Option<&Path>,
) -> Result<(Hallucinations, usize), Error> {
    use keyslice_core::findings::read_report;
    let truth_by_case = truth_map(truth)?;
    let owned: Vec<_> = keyslice_io::cases::read_predictions(pred)?
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
    let (analysis, reads) = hallucinations(&cases, SizeTolerance::default())
        .map_err(|error| Error::InvalidFile(format!("{}: {error}", pred.display())))?;
    if let Some(path) = imrmc {
        let text = reads.to_imrmc(&[
            "Keyslice: report-evidence consistency as a detector of hallucinated AI findings",
            "reader consistency: 1 - consistency; truth 1: a hallucinated claim",
        ]);
        keyslice_io::atomic::write_atomically(path, text.as_bytes()).map_err(|source| {
            Error::Write {
                path: path.to_path_buf(),
                source,
            }
        })?;
    }
    Ok((analysis, cases.len()))
}

/// What [`publish_reads`] did.
#[derive(Debug, Default)]
pub struct ReadsPublished {
    /// Reads written as SR.
    pub written: usize,
    /// What the PACS got now and what it held already.
    pub stored: StoreOutcome,
    /// Reads of cases without a PACS origin (and no folder) or without DICOM images.
    pub skipped: usize,
    /// Cases that are not DICOM series (their reads cannot file with a DICOM study).
    pub not_dicom: BTreeSet<String>,
}

/// Each read of a study (of `only`, when given) as the reader's SR marked as a study read,
/// into the PACS its case came from (unless `no_store`) and the folder `out`.
pub fn publish_reads(
    dir: &Path,
    only: Option<&str>,
    out: Option<&Path>,
    no_store: bool,
    connection: &Connection,
    report: &dyn Report,
) -> Result<ReadsPublished, Error> {
    let study = Study::open(dir)?;
    let definition = &study.definition;
    if let Some(reader) = only
        && !definition.readers.iter().any(|name| name == reader)
    {
        return Err(Error::Study(StudyError::NotAReader(reader.to_string())));
    }
    let workspace = Workspace::open(&definition.workspace)?;
    let predictions = workspace.predictions()?;
    if let Some(out) = out {
        std::fs::create_dir_all(out).map_err(|source| Error::Write {
            path: out.to_path_buf(),
            source,
        })?;
    }
    // Documents per (origin, study UID), to ask each study once what it holds.
    let mut batches = Batches::new();
    let mut published = ReadsPublished::default();
    let mut slice_sops = SliceSops::new();
    for reader in definition
        .readers
        .iter()
        .filter(|reader| only.is_none_or(|name| name == reader.as_str()))
    {
        for read in study.reads(reader)? {
            let Some(case) = workspace.case(&read.case) else {
                published.skipped += 1;
                continue;
            };
            if case.origin.is_none() && out.is_none() {
                published.skipped += 1;
                continue;
            }
            // An SR files with the DICOM study it reads: a NIfTI case has none.
            if !case.volume.is_dir() {
                published.not_dicom.insert(case.case_id.clone());
                published.skipped += 1;
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
                keyslice_io::atomic::write_atomically(&path, &document.bytes)
                    .map_err(|source| Error::Write { path, source })?;
            }
            published.written += 1;
            if let (Some(origin), false) = (&case.origin, no_store) {
                batches
                    .entry((origin.clone(), context.study_uid.clone()))
                    .or_default()
                    .push(Pending {
                        what: format!("{} {} {}", read.case, read.reader, read.arm),
                        document,
                    });
            }
        }
    }
    if let Some(first) = published.not_dicom.first() {
        report.note(&format!(
            "note: {} case(s) are not DICOM series (such as {}): their reads cannot be stored as SR, which files with the DICOM study it reads",
            published.not_dicom.len(),
            keyslice_core::text::shown(first)
        ));
    }
    published.stored = store_batches(batches, connection)?;
    Ok(published)
}

/// The SOP Instance UID of each slice of a case's series, by case, read once per case.
type SliceSops = HashMap<String, Vec<Option<String>>>;

/// The SOP Instance UID of slice `index` of a case: the prediction's key slice when it is that
/// slice, else read from the case's series (its images loaded once, then kept in `known`).
fn slice_sop(
    case: &WorkspaceCase,
    prediction: Option<&Prediction>,
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
        keyslice_io::load_study(&case.volume, &keyslice_io::LoadOptions { series_uid })
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

/// The SR of one study read of `case`, and the identity of the study it files with.
fn read_document(
    definition: &StudyDefinition,
    case: &WorkspaceCase,
    (predictions, slice_sops): (&Predictions, &mut SliceSops),
    read: &Read,
) -> Result<(StudyContext, Written), Error> {
    use keyslice_pacs::sr::write::study_read_sr;
    let shows = definition
        .arms
        .iter()
        .find(|arm| arm.name == read.arm)
        .map_or(Shows::Images, |arm| arm.shows);
    // The model whose report the reader saw; none for a read of the images alone.
    let algorithm = match (shows, predictions.get(&case.case_id)) {
        (Shows::Images, _) | (_, None) => ModelId {
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
        .unwrap_or_else(keyslice_pacs::sr::now_date_time);
    let document = study_read_sr(&context, &result, &mark, at)?;
    Ok((context, document))
}

/// The panel's truth: each panelist's findings of the cases (the adjudicator's where given)
/// voted into one truth per case, written to `out` as truth JSONL.
pub fn panel_truth(
    panel: &[PathBuf],
    adjudicator: Option<&Path>,
    out: &Path,
) -> Result<keyslice_core::scoring::panel::PanelTruth, Error> {
    if panel.len() < 2 {
        return Err(Error::Argument(
            "--panel: give at least two panelists' findings".into(),
        ));
    }
    let readings = panel
        .iter()
        .map(|path| truth_map(path))
        .collect::<Result<Vec<_>, _>>()?;
    let adjudicated = adjudicator.map(truth_map).transpose()?;
    let decided = keyslice_core::scoring::panel::panel_truth(&readings, adjudicated.as_ref());
    let mut text = String::new();
    for (case_id, findings) in &decided.truth {
        let record = keyslice_core::scoring::TruthRecord {
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
    keyslice_io::atomic::write_atomically(out, text.as_bytes()).map_err(|source| Error::Write {
        path: out.to_path_buf(),
        source,
    })?;
    Ok(decided)
}

/// The report as text, as `study report` prints it.
impl StudyReport {
    /// Writes the report as text: the study, each reader's row, how the AI's hallucinated
    /// findings were taken, the MRMC analysis.
    pub fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        write_report(self, out)
    }
}

/// What `study report` prints.
fn write_report(report: &StudyReport, out: &mut dyn Write) -> std::io::Result<()> {
    let definition = &report.study.definition;
    let arms: Vec<&str> = definition
        .arms
        .iter()
        .map(|arm| arm.name.as_str())
        .collect();
    writeln!(
        out,
        "study {}: {} readers, {} cases ({} case/organ units with truth), arms {}",
        definition.name,
        definition.readers.len(),
        definition.cases.len(),
        report.reads.negatives.len() + report.reads.positives.len(),
        arms.join(", ")
    )?;
    if let Some(note) = &report.simulated {
        writeln!(out, "{note}")?;
    }
    reader_lines(&report.readers, out)?;
    uptake_lines(&report.uptake, out)?;
    match &report.mrmc {
        Ok(rows) => {
            writeln!(
                out,
                "\nMRMC (readers and cases random; U-statistics as iMRMC):"
            )?;
            mrmc_lines(rows, &arms, out)?;
        }
        Err(error) => writeln!(out, "\nno MRMC analysis yet: {error}")?,
    }
    Ok(())
}

/// What `study report --json` prints: the figures, and the files written to `out_dir`.
#[must_use]
pub fn summary_json(
    report: &StudyReport,
    out_dir: &std::path::Path,
    written: &[&str],
) -> serde_json::Value {
    let definition = &report.study.definition;
    let (mrmc, mrmc_error) = match &report.mrmc {
        Ok(rows) => (serde_json::to_value(rows).ok(), None),
        Err(error) => (None, Some(error.to_string())),
    };
    serde_json::json!({
        "study": definition.name,
        "readers": definition.readers.len(),
        "cases": definition.cases.len(),
        "units": report.reads.negatives.len() + report.reads.positives.len(),
        "arms": definition.arms.iter().map(|arm| arm.name.as_str()).collect::<Vec<_>>(),
        "simulated": report.simulated,
        "mrmc": mrmc,
        "mrmc_error": mrmc_error,
        "uptake": report.uptake.arms(),
        "out": out_dir,
        "files": written,
    })
}

/// Each reader in each arm: calls against truth, and time per case.
fn reader_lines(
    rows: &[keyslice_review::study::summary::ReaderSummary],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "reader       arm          reads  sensitivity  specificity  balanced    AUC  s/case"
    )?;
    let shown = |value: Option<f64>| value.map_or_else(|| "–".to_string(), |v| format!("{v:.3}"));
    for row in rows {
        writeln!(
            out,
            "{:<12} {:<12} {:>5}  {:>11}  {:>11}  {:>8}  {:>5}  {:>6}",
            keyslice_core::text::shown(&row.reader),
            keyslice_core::text::shown(&row.arm),
            row.reads,
            shown(row.sensitivity),
            shown(row.specificity),
            shown(row.balanced_accuracy),
            shown(row.auc),
            row.median_seconds
                .map_or_else(|| "–".to_string(), |v| format!("{v:.1}"))
        )?;
    }
    Ok(())
}

/// How the readers took the AI's hallucinated findings.
fn uptake_lines(uptake: &UptakeAnalysis, out: &mut dyn Write) -> std::io::Result<()> {
    let (hallucinated, cases_with, cases, arms, detector) = match uptake {
        UptakeAnalysis::NoWorkspace(path) => {
            writeln!(
                out,
                "\nthe study's workspace {} cannot be opened: no analysis of the AI's findings",
                path.display()
            )?;
            return Ok(());
        }
        UptakeAnalysis::NoAiResults(path) => {
            writeln!(
                out,
                "\nno AI results for the study's cases in {}: `keyslice workspace analyze` it to see how readers took the AI's findings",
                path.display()
            )?;
            return Ok(());
        }
        UptakeAnalysis::Found {
            hallucinated,
            cases_with,
            cases,
            arms,
            detector,
        } => (hallucinated, cases_with, cases, arms, detector),
    };
    writeln!(
        out,
        "\nthe AI's hallucinated findings (a tumor claimed in an organ whose truth has none): {hallucinated} in {cases_with} of {cases} cases"
    )?;
    for arm in arms {
        let share = if arm.hallucinations_read > 0 {
            format!(
                "{:.0} %",
                100.0 * arm.kept as f64 / arm.hallucinations_read as f64
            )
        } else {
            "–".to_string()
        };
        let how = match arm.shows {
            keyslice_review::study::Shows::Images => "called that tumor on their own",
            _ => "kept it",
        };
        writeln!(
            out,
            "  arm {}: {} read(s) of a hallucinated finding, {how} in {} ({share})",
            arm.arm, arm.hallucinations_read, arm.kept
        )?;
    }
    match detector {
        Some(Ok((auroc, [low, high]))) => writeln!(
            out,
            "  consistency as a hallucination detector: AUROC {auroc:.3} (95 % CI {low:.3}–{high:.3})"
        )?,
        Some(Err(reason)) => writeln!(out, "  consistency as a hallucination detector: {reason}")?,
        None => {}
    }
    Ok(())
}

/// Each arm's AUC and each pair's difference (the arm defined later minus the earlier one, as
/// the charts read it), with its BDG interval.
fn mrmc_lines(
    rows: &[keyslice_core::mrmc::UstatRow],
    arms: &[&str],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    for row in rows {
        let difference = keyslice_core::mrmc::arm_difference(row, arms);
        if !(row.botCIBDG.is_finite() && row.topCIBDG.is_finite()) {
            let (what, estimate) = match &difference {
                Some(d) => (format!("{} − {}", d.later, d.earlier), d.estimate),
                None => (row.modalityA.clone(), row.AUCA),
            };
            writeln!(
                out,
                "  AUC {what} = {estimate:.3} (no interval: the variance estimate is not positive; more readers or cases are needed)"
            )?;
            continue;
        }
        match difference {
            Some(d) => writeln!(
                out,
                "  AUC {} − {} = {:+.3} (95 % CI {:+.3} to {:+.3}, df {:.1}, p = {:.3})",
                d.later, d.earlier, d.estimate, d.low, d.high, d.df, d.p
            )?,
            _ => writeln!(
                out,
                "  AUC {} = {:.3} (95 % CI {:.3} to {:.3}, df {:.1})",
                row.modalityA, row.AUCA, row.botCIBDG, row.topCIBDG, row.dfBDG
            )?,
        }
    }
    Ok(())
}

/// The per-finding figures of `study hallucinations` on one line.
fn finding_line(
    out: &mut dyn Write,
    findings: &keyslice_core::mrmc::hallucination::FindingFigures,
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

/// What `study hallucinations` prints: the claims, the consistency as a detector, per
/// finding, and each hallucinated claim.
pub fn write_hallucinations(
    out: &mut dyn Write,
    analysis: &Hallucinations,
    matched: usize,
) -> std::io::Result<()> {
    let number = |value: Option<f64>| value.map_or_else(|| "–".to_string(), |v| format!("{v:.3}"));
    writeln!(
        out,
        "{} of {} matched report(s) claim a tumor: {} hallucinated (a tumor claimed in an organ whose truth has none), {} grounded, {} without the verifier's description",
        analysis.claims,
        matched,
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
    finding_line(out, &analysis.findings)?;
    for claim in analysis
        .cases
        .iter()
        .filter(|claim| !claim.hallucinated.is_empty())
    {
        writeln!(
            out,
            "  {}: claimed {}; no tumor in truth: {}; consistency {}",
            keyslice_core::text::shown(&claim.case_id),
            claim.claimed.join(", "),
            claim.hallucinated.join(", "),
            number(claim.consistency)
        )?;
    }
    Ok(())
}

/// What `study truth` prints: the votes with `--json`, then the totals and what is left
/// unresolved.
pub fn write_panel(
    out: &mut dyn Write,
    decided: &keyslice_core::scoring::panel::PanelTruth,
    panelists: usize,
    written_to: &Path,
    json: bool,
) -> std::io::Result<()> {
    use keyslice_core::scoring::panel::Decided;
    if json {
        for vote in &decided.votes {
            writeln!(out, "{}", serde_json::to_string(vote)?)?;
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
        out,
        "panel of {panelists}: {} case(s) with truth written to {}; organs unanimous {}, by majority {}, adjudicated {}, unresolved {}; Fleiss' kappa {}",
        decided.truth.len(),
        written_to.display(),
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
            out,
            "unresolved: {} {}: {} of {} panelists call a tumor; the case is left out",
            keyslice_core::text::shown(&vote.case_id),
            vote.organ,
            vote.tumor_votes,
            vote.panelists
        )?;
    }
    if !unresolved.is_empty() {
        writeln!(
            out,
            "hint: give --adjudicator FILE with the adjudicator's findings of these cases"
        )?;
    }
    Ok(())
}
