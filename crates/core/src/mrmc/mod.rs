//! Multi-reader multi-case (MRMC) analysis of a reader study: the area under the ROC curve of
//! each modality (arm) averaged over readers, and its variance with readers and cases both
//! random, from the U-statistic moments of Gallas (2006, 2009) as the FDA's iMRMC software
//! computes them, for any design (a reader who did not read a case in an arm simply has no
//! score there). Then the tests iMRMC reports: the Normal approximation, and Student's t with
//! the BDG (Satterthwaite) degrees of freedom of Obuchowski (2012).
//!
//! Reads come in iMRMC's own input format (see [`parse_imrmc`]) and the tables use iMRMC's
//! column names, so any figure here can be checked with iMRMC.

mod dist;
pub mod hallucination;
mod roc;
mod ustat;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

pub use dist::{normal_cdf, normal_quantile, t_cdf, t_quantile};
pub use roc::{area as roc_area, roc_curve};

/// The significance level of the tests and the confidence of the intervals (95 %).
pub const ALPHA: f64 = 0.05;

/// Degrees of freedom above which iMRMC takes the Normal distribution for Student's t.
const NORMAL_FROM_DF: f64 = 50.0;

/// The reads of a study: each reader's score of each case in each modality, and the truth.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reads {
    /// Readers, in order of first appearance.
    pub readers: Vec<String>,
    /// Cases without the condition, in order of first appearance.
    pub negatives: Vec<String>,
    /// Cases with the condition.
    pub positives: Vec<String>,
    /// Modalities, in order of first appearance.
    pub modalities: Vec<String>,
    /// Scores by (reader, case, modality) index; cases index negatives then positives.
    scores: BTreeMap<(usize, usize, usize), f64>,
    /// Each case's truth and place among the negatives or the positives.
    cases: std::collections::HashMap<String, (bool, usize)>,
}

/// What is wrong with a reads file.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MrmcError {
    /// No `BEGIN DATA:` line.
    #[error(
        "no `BEGIN DATA:` line: an iMRMC file has its front matter, then `BEGIN DATA:`, then `readerID,caseID,modalityID,score` rows"
    )]
    NoData,
    /// A row that cannot be read.
    #[error("line {line}: {reason}")]
    Row {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A case with scores but no truth row.
    #[error("case `{0}` has scores but no truth row (`truth,{0},truth,0` or `…,1`)")]
    NoTruth(String),
    /// Too little to analyse.
    #[error("{0}")]
    TooFew(String),
}

impl Reads {
    /// Adds the truth of a case (`true`: it has the condition). A case's truth is set once.
    fn set_truth(&mut self, case: &str, positive: bool) -> Result<(), String> {
        if self.cases.contains_key(case) {
            return Err(format!("case `{case}` has two truth rows"));
        }
        let place = if positive {
            self.positives.push(case.to_string());
            self.positives.len() - 1
        } else {
            self.negatives.push(case.to_string());
            self.negatives.len() - 1
        };
        self.cases.insert(case.to_string(), (positive, place));
        Ok(())
    }

    /// The index of `case` (negatives first, then positives).
    fn case_index(&self, case: &str) -> Option<usize> {
        self.cases.get(case).map(|&(positive, place)| {
            if positive {
                place + self.negatives.len()
            } else {
                place
            }
        })
    }

    /// Records a score; a reader, a modality and a case's truth must be known first.
    fn set_score(
        &mut self,
        reader: usize,
        case: usize,
        modality: usize,
        score: f64,
    ) -> Result<(), String> {
        match self.scores.insert((reader, case, modality), score) {
            None => Ok(()),
            Some(_) => Err(format!(
                "reader `{}` scored case `{}` twice in modality `{}`",
                self.readers[reader],
                self.case_name(case),
                self.modalities[modality]
            )),
        }
    }

    fn case_name(&self, case: usize) -> &str {
        if case < self.negatives.len() {
            &self.negatives[case]
        } else {
            &self.positives[case - self.negatives.len()]
        }
    }

    /// Adds the truth of `case` (`true`: it has the condition); a case's truth is given once.
    pub fn add_truth(&mut self, case: &str, positive: bool) -> Result<(), MrmcError> {
        check_name(case).map_err(|reason| MrmcError::Row { line: 0, reason })?;
        self.set_truth(case, positive)
            .map_err(|reason| MrmcError::Row { line: 0, reason })
    }

    /// Adds `reader`'s score of `case` (whose truth was given) in `modality`: reads added a
    /// reader at a time, without a file's text or a table of rows in between.
    pub fn add_score(
        &mut self,
        reader: &str,
        case: &str,
        modality: &str,
        score: f64,
    ) -> Result<(), MrmcError> {
        let row = |reason: String| MrmcError::Row { line: 0, reason };
        for name in [reader, modality] {
            check_name(name).map_err(row)?;
        }
        if !score.is_finite() {
            return Err(row(format!("the score `{score}` is not a number")));
        }
        let case = self
            .case_index(case)
            .ok_or_else(|| MrmcError::NoTruth(case.to_string()))?;
        let reader = index_of(&mut self.readers, reader);
        let modality = index_of(&mut self.modalities, modality);
        self.set_score(reader, case, modality, score).map_err(row)
    }

    /// A study from reads given in code: `(reader, case, modality, score)` and each case's
    /// truth.
    pub fn from_rows<'a>(
        truth: impl IntoIterator<Item = (&'a str, bool)>,
        rows: impl IntoIterator<Item = (&'a str, &'a str, &'a str, f64)>,
    ) -> Result<Self, MrmcError> {
        let mut text = String::from("BEGIN DATA:\n");
        for (case, positive) in truth {
            let _ = writeln!(text, "truth,{case},truth,{}", u8::from(positive));
        }
        for (reader, case, modality, score) in rows {
            let _ = writeln!(text, "{reader},{case},{modality},{score:?}");
        }
        parse_imrmc(&text)
    }

    /// The score of `reader` for `case` in `modality`, if read.
    fn score(&self, reader: usize, case: usize, modality: usize) -> Option<f64> {
        self.scores.get(&(reader, case, modality)).copied()
    }

    /// The reads as an iMRMC input file.
    #[must_use]
    pub fn to_imrmc(&self, front_matter: &[&str]) -> String {
        let mut text = String::new();
        for line in front_matter {
            text.push_str(line);
            text.push('\n');
        }
        text.push_str("BEGIN DATA:\n");
        for case in &self.negatives {
            let _ = writeln!(text, "truth,{case},truth,0");
        }
        for case in &self.positives {
            let _ = writeln!(text, "truth,{case},truth,1");
        }
        for (&(reader, case, modality), score) in &self.scores {
            let _ = writeln!(
                text,
                "{},{},{},{score}",
                self.readers[reader],
                self.case_name(case),
                self.modalities[modality]
            );
        }
        text
    }
}

/// Reads iMRMC's input format: free front matter, a line `BEGIN DATA:`, then rows
/// `readerID,caseID,modalityID,score`; rows whose reader is `truth` give a case's truth
/// (`0` without the condition, `1` with it). Truth rows may come anywhere among the scores.
pub fn parse_imrmc(text: &str) -> Result<Reads, MrmcError> {
    let mut lines = text.lines().enumerate();
    lines
        .by_ref()
        .find(|(_, line)| line.trim().eq_ignore_ascii_case("BEGIN DATA:"))
        .ok_or(MrmcError::NoData)?;
    let mut reads = Reads::default();
    let mut rows = Vec::new();
    for (index, line) in lines {
        let line_number = index + 1;
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        let fields: Vec<&str> = trimmed.split(',').map(str::trim).collect();
        let row_error = |reason: String| MrmcError::Row {
            line: line_number,
            reason,
        };
        let [reader, case, modality, score] = fields.as_slice() else {
            return Err(row_error(format!(
                "{} fields; a row is `readerID,caseID,modalityID,score`",
                fields.len()
            )));
        };
        if reader.is_empty() || case.is_empty() || modality.is_empty() {
            return Err(row_error("an empty reader, case or modality".into()));
        }
        if [reader, case, modality]
            .iter()
            .any(|name| name.chars().any(char::is_control))
        {
            return Err(row_error(
                "a control character in a reader, case or modality name".into(),
            ));
        }
        let value: f64 = score
            .parse()
            .ok()
            .filter(|value: &f64| value.is_finite())
            .ok_or_else(|| row_error(format!("the score `{score}` is not a number")))?;
        if reader.eq_ignore_ascii_case("truth") {
            let positive = match value {
                0.0 => false,
                1.0 => true,
                _ => return Err(row_error(format!("truth `{score}` is neither 0 nor 1"))),
            };
            reads.set_truth(case, positive).map_err(row_error)?;
        } else {
            rows.push((
                line_number,
                (*reader).to_string(),
                (*case).to_string(),
                (*modality).to_string(),
                value,
            ));
        }
    }
    for (line, reader, case, modality, value) in rows {
        let case = reads
            .case_index(&case)
            .ok_or_else(|| MrmcError::NoTruth(case.clone()))?;
        let reader = index_of(&mut reads.readers, &reader);
        let modality = index_of(&mut reads.modalities, &modality);
        reads
            .set_score(reader, case, modality, value)
            .map_err(|reason| MrmcError::Row { line, reason })?;
    }
    Ok(reads)
}

/// A reader, case or modality name as a reads file can hold it: not empty, no control
/// character, no comma.
fn check_name(name: &str) -> Result<(), String> {
    if name.trim().is_empty() {
        return Err("an empty reader, case or modality".into());
    }
    if name.chars().any(char::is_control) {
        return Err("a control character in a reader, case or modality name".into());
    }
    if name.contains(',') {
        return Err(format!(
            "the name `{name}` holds a comma, which a reads file cannot"
        ));
    }
    Ok(())
}

fn index_of(names: &mut Vec<String>, name: &str) -> usize {
    names.iter().position(|n| n == name).unwrap_or_else(|| {
        names.push(name.to_string());
        names.len() - 1
    })
}

/// One row of iMRMC's U-statistic table: a modality alone (`modality_b` is `NO_MOD`) or the
/// difference between two.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[allow(
    non_snake_case,
    reason = "iMRMC's own column names, so tables compare as they are"
)]
pub struct UstatRow {
    pub NR: usize,
    pub N0: usize,
    pub N1: usize,
    pub modalityA: String,
    pub modalityB: String,
    pub UstatOrMLE: &'static str,
    pub AUCA: f64,
    pub varAUCA: f64,
    pub AUCB: Option<f64>,
    pub varAUCB: Option<f64>,
    pub AUCAminusAUCB: Option<f64>,
    pub varAUCAminusAUCB: Option<f64>,
    pub pValueNormal: f64,
    pub botCInormal: f64,
    pub topCInormal: f64,
    pub rejectNormal: u8,
    pub dfBDG: f64,
    pub pValueBDG: f64,
    pub botCIBDG: f64,
    pub topCIBDG: f64,
    pub rejectBDG: u8,
}

/// One row of iMRMC's per-reader table.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[allow(
    non_snake_case,
    reason = "iMRMC's own column names, so tables compare as they are"
)]
pub struct ReaderRow {
    pub readerID: String,
    pub N0: usize,
    pub N1: usize,
    pub modalityA: String,
    pub modalityB: String,
    pub AUCA: f64,
    pub varAUCA: f64,
    pub AUCB: Option<f64>,
    pub varAUCB: Option<f64>,
    pub AUCAminusAUCB: Option<f64>,
    pub varAUCAminusAUCB: Option<f64>,
}

/// The name iMRMC gives the missing second modality of a single-modality row.
pub const NO_MOD: &str = "NO_MOD";

/// Indices of `names` in the order iMRMC sorts them (R's factor levels: by name).
fn sorted(names: &[String]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by(|&a, &b| names[a].cmp(&names[b]));
    order
}

/// Each modality alone, then each pair (the one sorted first against each later one), in
/// iMRMC's order.
fn modality_rows(reads: &Reads) -> Vec<(usize, Option<usize>)> {
    let order = sorted(&reads.modalities);
    order
        .iter()
        .map(|&a| (a, None))
        .chain(
            order
                .iter()
                .enumerate()
                .flat_map(|(n, &a)| order[n + 1..].iter().map(move |&b| (a, Some(b)))),
        )
        .collect()
}

/// The U-statistic table: each modality alone, then each pair (first against later), with
/// modalities in iMRMC's order (by name).
pub fn ustat_table(reads: &Reads) -> Result<Vec<UstatRow>, MrmcError> {
    check_enough(reads)?;
    let all: Vec<usize> = (0..reads.readers.len()).collect();
    let mut cache = ustat::Cache::new(reads);
    Ok(modality_rows(reads)
        .into_iter()
        .map(|(a, b)| ustat_row(&mut cache, &all, a, b))
        .collect())
}

/// The negative and positive cases `reader` read in modality `a` (and in `b` too, when given).
fn read_counts(reads: &Reads, reader: usize, a: usize, b: Option<usize>) -> (usize, usize) {
    let read = |case: usize| {
        reads.score(reader, case, a).is_some()
            && b.is_none_or(|b| reads.score(reader, case, b).is_some())
    };
    let n0 = reads.negatives.len();
    (
        (0..n0).filter(|&case| read(case)).count(),
        (n0..n0 + reads.positives.len())
            .filter(|&case| read(case))
            .count(),
    )
}

/// The per-reader table: for each modality, then each pair, every reader's AUCs and their
/// variances with cases random, with the cases that reader read; modalities and readers in
/// iMRMC's order (by name). One reader is enough (a model's scores, say).
pub fn reader_table(reads: &Reads) -> Result<Vec<ReaderRow>, MrmcError> {
    check_cases(reads)?;
    let readers = sorted(&reads.readers);
    let mut rows = Vec::new();
    let mut cache = ustat::Cache::new(reads);
    for (a, b) in modality_rows(reads) {
        for &reader in &readers {
            let one = [reader];
            let stats = ustat::analyse(&mut cache, &one, a, b);
            // As iMRMC: the cases this reader read (in both modalities, for a pair).
            let (n0, n1) = read_counts(reads, reader, a, b);
            rows.push(ReaderRow {
                readerID: reads.readers[reader].clone(),
                N0: n0,
                N1: n1,
                modalityA: reads.modalities[a].clone(),
                modalityB: b.map_or_else(|| NO_MOD.to_string(), |b| reads.modalities[b].clone()),
                AUCA: stats.auc_a,
                varAUCA: stats.var_a,
                AUCB: stats.auc_b,
                varAUCB: stats.var_b,
                AUCAminusAUCB: stats.auc_b.map(|auc_b| stats.auc_a - auc_b),
                varAUCAminusAUCB: stats.var_difference,
            });
        }
    }
    Ok(rows)
}

fn check_enough(reads: &Reads) -> Result<(), MrmcError> {
    check_cases(reads)?;
    if reads.readers.len() < 2 {
        return Err(MrmcError::TooFew(format!(
            "{} reader(s): readers as a random effect need at least two",
            reads.readers.len()
        )));
    }
    Ok(())
}

fn check_cases(reads: &Reads) -> Result<(), MrmcError> {
    if reads.negatives.len() < 2 || reads.positives.len() < 2 {
        return Err(MrmcError::TooFew(format!(
            "{} case(s) without and {} with the condition: at least two of each are needed for a variance",
            reads.negatives.len(),
            reads.positives.len()
        )));
    }
    if reads.modalities.is_empty() {
        return Err(MrmcError::TooFew("no scores".into()));
    }
    Ok(())
}

fn ustat_row(
    cache: &mut ustat::Cache<'_>,
    readers: &[usize],
    a: usize,
    b: Option<usize>,
) -> UstatRow {
    let reads = cache.reads();
    let stats = ustat::analyse(cache, readers, a, b);
    let (estimate, variance, null) = match (stats.auc_b, stats.var_difference) {
        (Some(auc_b), Some(var_difference)) => (stats.auc_a - auc_b, var_difference, 0.0),
        _ => (stats.auc_a, stats.var_a, 0.5),
    };
    let df = stats.df;
    let z = (estimate - null).abs() / variance.sqrt();
    // A negative variance estimate (possible for a U-statistic with few reads) makes no test:
    // its p-values, intervals and degrees of freedom are not numbers, as in iMRMC.
    let p_normal = if variance < 0.0 {
        f64::NAN
    } else {
        2.0 * (1.0 - normal_cdf(z))
    };
    let cut_normal = normal_quantile(1.0 - ALPHA / 2.0);
    // As iMRMC: Student's t with the whole degrees of freedom, the Normal above 50.
    let (p_bdg, cut_bdg) = if variance < 0.0 {
        (f64::NAN, f64::NAN)
    } else if df > NORMAL_FROM_DF || !df.is_finite() {
        (p_normal, cut_normal)
    } else {
        let whole = df.floor().max(1.0);
        (
            2.0 * (1.0 - t_cdf(z, whole)),
            t_quantile(1.0 - ALPHA / 2.0, whole),
        )
    };
    let sd = variance.sqrt();
    UstatRow {
        NR: reads.readers.len(),
        N0: reads.negatives.len(),
        N1: reads.positives.len(),
        modalityA: reads.modalities[a].clone(),
        modalityB: b.map_or_else(|| NO_MOD.to_string(), |b| reads.modalities[b].clone()),
        UstatOrMLE: "Ustat",
        AUCA: stats.auc_a,
        varAUCA: stats.var_a,
        AUCB: stats.auc_b,
        varAUCB: stats.var_b,
        AUCAminusAUCB: stats.auc_b.map(|auc_b| stats.auc_a - auc_b),
        varAUCAminusAUCB: stats.var_difference,
        pValueNormal: p_normal,
        botCInormal: estimate - sd * cut_normal,
        topCInormal: estimate + sd * cut_normal,
        rejectNormal: u8::from(p_normal <= ALPHA),
        dfBDG: df,
        pValueBDG: p_bdg,
        botCIBDG: estimate - sd * cut_bdg,
        topCIBDG: estimate + sd * cut_bdg,
        rejectBDG: u8::from(p_bdg <= ALPHA),
    }
}

/// The difference of two arms' AUCs as a study asks it: the arm defined later minus the arm
/// defined earlier (with the first arm the control, "evidence − unaided"), whatever order
/// iMRMC's table gives the pair in. The console, the tables and the charts of a study all
/// read differences through this one definition.
#[derive(Clone, Debug, PartialEq)]
pub struct ArmDifference {
    /// The arm defined later.
    pub later: String,
    /// The arm defined earlier.
    pub earlier: String,
    /// AUC(later) − AUC(earlier).
    pub estimate: f64,
    /// Its BDG 95 % interval, low end (not a number when no test could be made).
    pub low: f64,
    /// Its high end.
    pub high: f64,
    /// The BDG degrees of freedom.
    pub df: f64,
    /// The BDG p-value.
    pub p: f64,
}

/// `row`'s difference read as `later − earlier` by the arms' order of definition (`arms`);
/// `None` for a row of one arm, or of an arm `arms` does not name.
#[must_use]
pub fn arm_difference(row: &UstatRow, arms: &[&str]) -> Option<ArmDifference> {
    let difference = row.AUCAminusAUCB?;
    let a = arms.iter().position(|arm| *arm == row.modalityA)?;
    let b = arms.iter().position(|arm| *arm == row.modalityB)?;
    let (later, earlier, sign) = if a > b {
        (&row.modalityA, &row.modalityB, 1.0)
    } else {
        (&row.modalityB, &row.modalityA, -1.0)
    };
    let (low, high) = if sign > 0.0 {
        (row.botCIBDG, row.topCIBDG)
    } else {
        (-row.topCIBDG, -row.botCIBDG)
    };
    Some(ArmDifference {
        later: later.clone(),
        earlier: earlier.clone(),
        estimate: sign * difference,
        low,
        high,
        df: row.dfBDG,
        p: row.pValueBDG,
    })
}

/// A table row written as CSV with iMRMC's header.
pub trait Csv {
    /// The header, iMRMC's column names.
    const COLUMNS: &'static [&'static str];
    /// The cells, in the order of [`Csv::COLUMNS`].
    fn cells(&self) -> Vec<String>;
}

/// A number as iMRMC's R package writes it: what is not a number (a test on a negative
/// variance estimate) as `NA`.
fn number(value: f64) -> String {
    if value.is_nan() {
        "NA".to_string()
    } else {
        format!("{value}")
    }
}

/// A test's decision, `NA` when the test was not made (its p-value is not a number).
fn decision(reject: u8, p_value: f64) -> String {
    if p_value.is_nan() {
        "NA".to_string()
    } else {
        reject.to_string()
    }
}

fn maybe(value: Option<f64>) -> String {
    value.map_or_else(|| "NA".to_string(), number)
}

fn quoted(text: &str) -> String {
    crate::text::csv_quoted(text)
}

impl Csv for UstatRow {
    const COLUMNS: &'static [&'static str] = &[
        "NR",
        "N0",
        "N1",
        "modalityA",
        "modalityB",
        "UstatOrMLE",
        "AUCA",
        "varAUCA",
        "AUCB",
        "varAUCB",
        "AUCAminusAUCB",
        "varAUCAminusAUCB",
        "pValueNormal",
        "botCInormal",
        "topCInormal",
        "rejectNormal",
        "dfBDG",
        "pValueBDG",
        "botCIBDG",
        "topCIBDG",
        "rejectBDG",
    ];

    fn cells(&self) -> Vec<String> {
        vec![
            self.NR.to_string(),
            self.N0.to_string(),
            self.N1.to_string(),
            quoted(&self.modalityA),
            quoted(&self.modalityB),
            quoted(self.UstatOrMLE),
            number(self.AUCA),
            number(self.varAUCA),
            maybe(self.AUCB),
            maybe(self.varAUCB),
            maybe(self.AUCAminusAUCB),
            maybe(self.varAUCAminusAUCB),
            number(self.pValueNormal),
            number(self.botCInormal),
            number(self.topCInormal),
            decision(self.rejectNormal, self.pValueNormal),
            number(self.dfBDG),
            number(self.pValueBDG),
            number(self.botCIBDG),
            number(self.topCIBDG),
            decision(self.rejectBDG, self.pValueBDG),
        ]
    }
}

impl Csv for ReaderRow {
    const COLUMNS: &'static [&'static str] = &[
        "readerID",
        "N0",
        "N1",
        "modalityA",
        "modalityB",
        "AUCA",
        "varAUCA",
        "AUCB",
        "varAUCB",
        "AUCAminusAUCB",
        "varAUCAminusAUCB",
    ];

    fn cells(&self) -> Vec<String> {
        vec![
            quoted(&self.readerID),
            self.N0.to_string(),
            self.N1.to_string(),
            quoted(&self.modalityA),
            quoted(&self.modalityB),
            number(self.AUCA),
            number(self.varAUCA),
            maybe(self.AUCB),
            maybe(self.varAUCB),
            maybe(self.AUCAminusAUCB),
            maybe(self.varAUCAminusAUCB),
        ]
    }
}

/// A table as CSV with iMRMC's header; absent values as `NA` and text quoted, as iMRMC's R
/// package writes them.
#[must_use]
pub fn to_csv<T: Csv>(rows: &[T]) -> String {
    let header: Vec<String> = T::COLUMNS.iter().map(|column| quoted(column)).collect();
    let mut out = header.join(",");
    out.push('\n');
    for row in rows {
        out.push_str(&row.cells().join(","));
        out.push('\n');
    }
    out
}
