//! A reader study over a workspace: who reads which case in which arm, in which order, and
//! what each read said.
//!
//! `study.json` defines it once (versioned, so it can be rerun and audited): the cases, the
//! readers, the arms (what each shows: the images only, the AI report too, or the report with
//! its evidence — key slice, verifier and consistency), the design and a seed. Each reader's
//! schedule follows from it alone: in a crossover design the reader reads every case in one
//! arm per session, the arms' order turned by one for each next reader (counterbalanced), the
//! cases shuffled for each reader and arm, and a session opens only after the washout since
//! the reader's previous one; in a sequential design each case is read unaided and then
//! aided in the same sitting. Reads are appended, one JSON line each and synced, to
//! `reads/READER.jsonl`: a killed process loses nothing recorded, and the reader resumes at
//! the first item without a read. An item is recorded only when it is the reader's next one:
//! a reader cannot go back to an earlier case, nor skip ahead.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub mod charts;
pub mod summary;

use keyslice_core::findings::{Findings, Organ};
use keyslice_core::mrmc::Reads;
use keyslice_core::rng::{Rng, mix};
use serde::{Deserialize, Serialize};

/// The study file in a study folder.
pub const STUDY_FILE: &str = "study.json";

/// The layout version of `study.json` this build writes.
pub const STUDY_VERSION: u32 = 1;

/// What an arm shows the reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shows {
    /// The images alone: no AI report, box, key slice or triage order.
    Images,
    /// The images and the AI report (its findings), without the evidence.
    Report,
    /// The report with its evidence: key slice, box, verifier's description, consistency.
    Evidence,
}

/// One arm of the study.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Arm {
    /// Its name in tables (`unaided`, `aided`, `evidence`).
    pub name: String,
    /// What it shows.
    pub shows: Shows,
}

/// What is wrong with an arm given as `NAME=SHOWS`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArmError {
    /// No `=`.
    #[error("give NAME=SHOWS, SHOWS one of images, report, evidence")]
    NotPair,
    /// What it shows is none of the three.
    #[error("`{0}` is not images, report or evidence")]
    Shows(String),
}

impl Arm {
    /// The arms of a study by default: unaided (the images) and evidence.
    #[must_use]
    pub fn defaults() -> Vec<Self> {
        vec![
            Self {
                name: "unaided".into(),
                shows: Shows::Images,
            },
            Self {
                name: "evidence".into(),
                shows: Shows::Evidence,
            },
        ]
    }

    /// An arm given as `NAME=SHOWS` (`aided=report`).
    pub fn parse(text: &str) -> Result<Self, ArmError> {
        let (name, shows) = text.split_once('=').ok_or(ArmError::NotPair)?;
        let shows = match shows {
            "images" => Shows::Images,
            "report" => Shows::Report,
            "evidence" => Shows::Evidence,
            other => return Err(ArmError::Shows(other.to_string())),
        };
        Ok(Self {
            name: name.to_string(),
            shows,
        })
    }
}

impl Design {
    /// The design named `crossover`, `split-plot` (in `groups` blocks) or `sequential`,
    /// sessions `washout_days` apart.
    #[must_use]
    pub fn named(name: &str, groups: u32, washout_days: u32) -> Option<Self> {
        match name {
            "crossover" => Some(Self::Crossover { washout_days }),
            "sequential" => Some(Self::Sequential),
            "split-plot" => Some(Self::SplitPlot {
                groups,
                washout_days,
            }),
            _ => None,
        }
    }
}

/// How readers, cases and arms are crossed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Design {
    /// Every reader reads every case in every arm, one arm per session, sessions at least
    /// `washout_days` apart.
    Crossover {
        /// Days between a reader's sessions.
        washout_days: u32,
    },
    /// Every case read in the first arm, then at once in the next (unaided, then aided).
    Sequential,
    /// Readers and cases split into `groups` blocks: each reader reads only the cases of
    /// their block, in every arm, one arm per session (as a crossover), sessions at least
    /// `washout_days` apart. Fewer reads per reader for the same number of cases; the
    /// U-statistics take the reads that are missing by design.
    SplitPlot {
        /// Blocks of readers and cases.
        groups: u32,
        /// Days between a reader's sessions.
        washout_days: u32,
    },
}

impl Design {
    /// Days between a reader's sessions, for designs with several sessions.
    #[must_use]
    pub fn washout_days(self) -> Option<u32> {
        match self {
            Self::Crossover { washout_days } | Self::SplitPlot { washout_days, .. } => {
                Some(washout_days)
            }
            Self::Sequential => None,
        }
    }
}

/// `study.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StudyDefinition {
    /// [`STUDY_VERSION`].
    pub keyslice_study: u32,
    /// The study's name.
    pub name: String,
    /// The workspace whose cases are read.
    pub workspace: PathBuf,
    /// The cases read, by workspace case id.
    pub cases: Vec<String>,
    /// The readers.
    pub readers: Vec<String>,
    /// The arms; a sequential design reads them in this order.
    pub arms: Vec<Arm>,
    /// The design.
    pub design: Design,
    /// The seed of the case orders.
    pub seed: u64,
    /// The PACS query the cases came from, when the study was defined by one
    /// (`dicomweb+http(s)://HOST/ROOT?…`, no credentials): where they can be fetched again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacs_query: Option<String>,
}

/// One thing a reader does: read `case` in `arm` (indices into the definition).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    /// The session (0 for a sequential design).
    pub session: usize,
    /// The arm's index.
    pub arm: usize,
    /// The case.
    pub case: String,
}

/// A reader's call on one organ.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Call {
    /// Tumor present?
    pub present: bool,
    /// Confidence that a tumor is present, 0–100 (for ROC).
    pub confidence: u8,
}

/// What a reader did with an AI finding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Kept as the AI said.
    Accepted,
    /// Kept with changes.
    Changed,
    /// Turned down.
    Rejected,
}

/// One read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Read {
    /// Who read.
    pub reader: String,
    /// The case.
    pub case: String,
    /// The arm's name.
    pub arm: String,
    /// The session.
    pub session: usize,
    /// Per organ: the call and its confidence.
    pub calls: BTreeMap<Organ, Call>,
    /// The key slice the reader chose, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_slice: Option<u32>,
    /// Time spent on the case while the window had the reader's attention (ms).
    pub active_ms: u64,
    /// In arms that show the AI: what became of each AI finding.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ai: BTreeMap<Organ, Decision>,
    /// When it was recorded (UTC, RFC 3339).
    pub at: String,
    /// Made by `study simulate`, not by a person: a demonstration of the workflow that
    /// measures nothing about people. Marked in every read, table and chart.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub simulated: bool,
}

impl Read {
    /// The read as findings: tumor present or absent in each organ called, and the key slice
    /// the reader chose.
    #[must_use]
    pub fn findings(&self) -> Findings {
        let mut findings = Findings::default();
        for (organ, call) in &self.calls {
            findings.organs.insert(
                *organ,
                keyslice_core::findings::OrganFindings {
                    tumor: if call.present {
                        keyslice_core::findings::TumorPresence::Yes
                    } else {
                        keyslice_core::findings::TumorPresence::No
                    },
                    lesions: Vec::new(),
                    span: None,
                },
            );
        }
        findings.key_slice = self
            .key_slice
            .map(|index| keyslice_core::findings::KeySlice {
                index,
                z_mm: None,
                sop_instance_uid: None,
                span: None,
            });
        findings
    }

    /// The read in words, for the document that keeps it: the study's arm and session, each
    /// organ's call with its confidence and what became of the AI's finding, the key slice
    /// and the active time.
    #[must_use]
    pub fn summary(&self, study: &str) -> String {
        let mut lines = vec![format!(
            "Reader study {study}, arm {}, session {}: a research read, not a clinical review.",
            self.arm,
            self.session + 1
        )];
        for (organ, call) in &self.calls {
            let decision = self.ai.get(organ).map_or(String::new(), |decision| {
                format!(
                    "; AI finding {}",
                    match decision {
                        Decision::Accepted => "accepted",
                        Decision::Changed => "changed",
                        Decision::Rejected => "rejected",
                    }
                )
            });
            lines.push(format!(
                "{}: {} (confidence {} of 100){decision}.",
                organ.display_name(),
                if call.present { "tumor" } else { "no tumor" },
                call.confidence
            ));
        }
        if let Some(index) = self.key_slice {
            lines.push(format!("Key slice: {}.", index + 1));
        }
        #[expect(clippy::cast_precision_loss, reason = "milliseconds of one read")]
        lines.push(format!(
            "Active time: {:.0} s.",
            self.active_ms as f64 / 1000.0
        ));
        lines.join("\n")
    }
}

/// What a reader has next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// This item, the `done`-th of `total` (0-based count of items done before it).
    Item {
        /// The item.
        item: Item,
        /// Items already read.
        done: usize,
        /// Items in all.
        total: usize,
    },
    /// The next session opens after the washout: at this many seconds since the epoch.
    Washout {
        /// When the session opens.
        opens_at: u64,
    },
    /// Every item is read.
    Done,
}

/// What went wrong with a study.
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// `study.json` is not a study.
    #[error("{}: {reason}", path.display())]
    Definition {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Someone who is not a reader of the study.
    #[error("`{}` is not a reader of this study", .0.escape_debug())]
    NotAReader(String),
    /// A study is already defined in the folder.
    #[error("{}: a study is already defined here", .0.display())]
    Exists(PathBuf),
    /// A read that is not the reader's next item.
    #[error("{0}")]
    OutOfOrder(String),
}

impl StudyError {
    /// What to do.
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            Self::Io { .. } => "check that the study folder exists and is writable",
            Self::Definition { .. } => {
                "fix the field named in study.json, or make the study again with `keyslice study create` in a new folder"
            }
            Self::NotAReader(_) => "give one of the readers in study.json",
            Self::Exists(_) => {
                "give another folder: a study's folder is never overwritten, so no read is orphaned"
            }
            Self::OutOfOrder(_) => "read the item the study gives next (`keyslice study status`)",
        }
    }
}

impl StudyDefinition {
    /// Checks the definition: at least two readers, cases and arms, no name twice, a
    /// sequential design of two arms.
    fn check(&self) -> Result<(), String> {
        if self.keyslice_study != STUDY_VERSION {
            return Err(format!(
                "keyslice_study {} is not the layout this build reads ({STUDY_VERSION})",
                self.keyslice_study
            ));
        }
        for (what, names) in [
            ("reader", self.readers.clone()),
            ("case", self.cases.clone()),
            (
                "arm",
                self.arms.iter().map(|arm| arm.name.clone()).collect(),
            ),
        ] {
            if names.len() < 2 {
                return Err(format!(
                    "at least two {what}s are needed, {} given",
                    names.len()
                ));
            }
            if let Some(bad) = names.iter().find(|name| {
                name.is_empty()
                    || name.contains([',', '/', '\\'])
                    || name.chars().any(char::is_control)
                    || name.starts_with('.')
            }) {
                return Err(format!(
                    "the {what} name `{}` cannot be used (empty, or with a comma, a slash or a control character, or starting with a dot)",
                    bad.escape_debug()
                ));
            }
            let mut sorted = names.clone();
            sorted.sort();
            if let Some([twice, _]) = sorted.windows(2).find(|pair| pair[0] == pair[1]) {
                return Err(format!("the {what} `{twice}` is named twice"));
            }
        }
        if let Design::SplitPlot { groups, .. } = self.design {
            let groups = groups as usize;
            if groups < 2 || self.readers.len() < groups || self.cases.len() < 2 * groups {
                return Err(format!(
                    "a split-plot design of {groups} groups needs at least 2 groups, a reader per group and two cases per group; {} readers and {} cases given",
                    self.readers.len(),
                    self.cases.len()
                ));
            }
        }
        if matches!(self.design, Design::Sequential) && self.arms.len() != 2 {
            return Err(format!(
                "a sequential design reads each case in two arms (unaided, then aided); {} given",
                self.arms.len()
            ));
        }
        Ok(())
    }

    /// The cases `reader` reads: all of them, or in a split-plot design those of the
    /// reader's block (readers dealt to blocks in turn, cases shuffled by the seed and then
    /// dealt in turn).
    #[must_use]
    pub fn cases_of(&self, reader: &str) -> Vec<String> {
        let Design::SplitPlot { groups, .. } = self.design else {
            return self.cases.clone();
        };
        let groups = (groups as usize).max(1);
        let index = self.readers.iter().position(|r| r == reader).unwrap_or(0);
        let mut order: Vec<usize> = (0..self.cases.len()).collect();
        let mut rng = Rng::new(mix(self.seed ^ 0x0053_504c_4954));
        for k in (1..order.len()).rev() {
            order.swap(k, rng.below(k + 1));
        }
        let mut cases: Vec<usize> = order
            .into_iter()
            .enumerate()
            .filter(|(dealt, _)| dealt % groups == index % groups)
            .map(|(_, case)| case)
            .collect();
        cases.sort_unstable();
        cases
            .into_iter()
            .map(|case| self.cases[case].clone())
            .collect()
    }

    /// The reader's items in order.
    #[must_use]
    pub fn schedule(&self, reader: &str) -> Vec<Item> {
        let index = self.readers.iter().position(|r| r == reader).unwrap_or(0);
        let own = self.cases_of(reader);
        let shuffled = |arm: usize| {
            let mut cases = own.clone();
            let mut rng = Rng::new(mix(self.seed
                ^ mix(index as u64 + 1)
                ^ mix(arm as u64 + 101)));
            for k in (1..cases.len()).rev() {
                cases.swap(k, rng.below(k + 1));
            }
            cases
        };
        match self.design {
            Design::Crossover { .. } | Design::SplitPlot { .. } => {
                let arms = self.arms.len();
                // Within a split-plot block the readers are counterbalanced among themselves.
                let turn = match self.design {
                    Design::SplitPlot { groups, .. } => index / (groups as usize).max(1),
                    _ => index,
                };
                (0..arms)
                    .flat_map(|session| {
                        let arm = (session + turn) % arms;
                        shuffled(arm)
                            .into_iter()
                            .map(move |case| Item { session, arm, case })
                    })
                    .collect()
            }
            Design::Sequential => shuffled(0)
                .into_iter()
                .flat_map(|case| {
                    (0..self.arms.len()).map(move |arm| Item {
                        session: 0,
                        arm,
                        case: case.clone(),
                    })
                })
                .collect(),
        }
    }
}

/// An open study folder.
pub struct Study {
    dir: PathBuf,
    /// Its definition.
    pub definition: StudyDefinition,
}

impl Study {
    /// Writes `definition` into `dir` (made if needed); a folder that already holds a study
    /// is refused, so no reads are ever orphaned.
    pub fn create(dir: &Path, definition: StudyDefinition) -> Result<Self, StudyError> {
        let path = dir.join(STUDY_FILE);
        definition
            .check()
            .map_err(|reason| StudyError::Definition {
                path: path.clone(),
                reason,
            })?;
        if path.exists() {
            return Err(StudyError::Exists(path));
        }
        let io = |source| StudyError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(dir.join("reads")).map_err(io)?;
        let text = serde_json::to_string_pretty(&definition)
            .map_err(std::io::Error::from)
            .map_err(io)?;
        keyslice_io::atomic::write_atomically(&path, text.as_bytes()).map_err(io)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            definition,
        })
    }

    /// Opens the study in `dir`.
    pub fn open(dir: &Path) -> Result<Self, StudyError> {
        let path = dir.join(STUDY_FILE);
        let text = std::fs::read_to_string(&path).map_err(|source| StudyError::Io {
            path: path.clone(),
            source,
        })?;
        let definition: StudyDefinition =
            serde_json::from_str(&text).map_err(|error| StudyError::Definition {
                path: path.clone(),
                reason: error.to_string(),
            })?;
        definition
            .check()
            .map_err(|reason| StudyError::Definition { path, reason })?;
        Ok(Self {
            dir: dir.to_path_buf(),
            definition,
        })
    }

    /// The reads file of `reader`, one of the study's (whose names were checked: no path
    /// can come of them).
    fn reads_path(&self, reader: &str) -> Result<PathBuf, StudyError> {
        if self.definition.readers.iter().any(|name| name == reader) {
            Ok(self.dir.join("reads").join(format!("{reader}.jsonl")))
        } else {
            Err(StudyError::NotAReader(reader.to_string()))
        }
    }

    /// The reader's reads so far: each line that is a read of this study by this reader.
    pub fn reads(&self, reader: &str) -> Result<Vec<Read>, StudyError> {
        let path = self.reads_path(reader)?;
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(StudyError::Io { path, source }),
        };
        // A line is a read of this study only if it names this reader, one of its cases and
        // one of its arms: a line torn by a kill, damaged or written by anything else is left
        // out, and no name in it ever reaches a table, a document or a path.
        let cases: std::collections::HashSet<&str> =
            self.definition.cases.iter().map(String::as_str).collect();
        Ok(text
            .lines()
            .filter_map(|line| serde_json::from_str::<Read>(line).ok())
            .filter(|read| {
                read.reader == reader
                    && cases.contains(read.case.as_str())
                    && self.definition.arms.iter().any(|arm| arm.name == read.arm)
            })
            .collect())
    }

    /// What `reader` has next at `now` (seconds since the epoch).
    pub fn next(&self, reader: &str, now: u64) -> Result<Next, StudyError> {
        let schedule = self.definition.schedule(reader);
        let reads = self.reads(reader)?;
        // An item is done when a read of it was kept: a line damaged on disk sends the reader
        // back to that item only, never shifts the rest.
        let read_items: std::collections::HashSet<(&str, &str, usize)> = reads
            .iter()
            .map(|read| (read.case.as_str(), read.arm.as_str(), read.session))
            .collect();
        let is_read = |item: &Item| {
            let arm = &self.definition.arms[item.arm].name;
            read_items.contains(&(item.case.as_str(), arm.as_str(), item.session))
        };
        let done = schedule.iter().filter(|item| is_read(item)).count();
        let Some(item) = schedule.iter().find(|item| !is_read(item)).cloned() else {
            return Ok(Next::Done);
        };
        // A person's memory of the cases washes out; a simulated reader has none to lose.
        if let (Some(washout_days), Some(last)) =
            (self.definition.design.washout_days(), reads.last())
            && item.session > last.session
            && !last.simulated
        {
            let opens_at = seconds_of(&last.at).saturating_add(u64::from(washout_days) * 86_400);
            if now < opens_at {
                return Ok(Next::Washout { opens_at });
            }
        }
        Ok(Next::Item {
            item,
            done,
            total: schedule.len(),
        })
    }

    /// Records `read` if it is the reader's next item at `now`: synced before this returns.
    pub fn record(&self, read: &Read, now: u64) -> Result<(), StudyError> {
        let expected = match self.next(&read.reader, now)? {
            Next::Item { item, .. } => item,
            Next::Washout { .. } => {
                return Err(StudyError::OutOfOrder(format!(
                    "{}'s next session has not opened yet (washout)",
                    read.reader
                )));
            }
            Next::Done => {
                return Err(StudyError::OutOfOrder(format!(
                    "{} has read every item of the study",
                    read.reader
                )));
            }
        };
        let arm = &self.definition.arms[expected.arm].name;
        if read.case != expected.case || &read.arm != arm || read.session != expected.session {
            return Err(StudyError::OutOfOrder(format!(
                "{}'s next item is case {} in arm {} (session {}), not case {} in arm {}: reads are recorded in the study's order, never back or ahead",
                read.reader,
                expected.case,
                arm,
                expected.session + 1,
                read.case,
                read.arm
            )));
        }
        let path = self.reads_path(&read.reader)?;
        let line = serde_json::to_string(read)
            .map_err(std::io::Error::from)
            .map_err(|source| StudyError::Io {
                path: path.clone(),
                source,
            })?;
        keyslice_io::jsonl::append_line(&path, &line)
            .map_err(|source| StudyError::Io { path, source })
    }

    /// Every reader's reads as MRMC reads: one unit per (case, organ) whose truth is known,
    /// the confidence of a tumor as the score, the arm as the modality.
    pub fn mrmc_reads(&self, truth: &BTreeMap<String, Findings>) -> Result<Reads, StudyError> {
        let definition_error = |error: keyslice_core::mrmc::MrmcError| StudyError::Definition {
            path: self.dir.join(STUDY_FILE),
            reason: error.to_string(),
        };
        let mut reads = Reads::default();
        for case in &self.definition.cases {
            let Some(findings) = truth.get(case) else {
                continue;
            };
            for organ in Organ::ALL {
                reads
                    .add_truth(
                        &format!("{case}/{}", organ.key()),
                        findings.states_tumor(organ),
                    )
                    .map_err(definition_error)?;
            }
        }
        // A reader at a time: memory holds one reader's reads, never every reader's.
        for reader in &self.definition.readers {
            for read in self.reads(reader)? {
                if !truth.contains_key(&read.case) {
                    continue;
                }
                for (organ, call) in &read.calls {
                    reads
                        .add_score(
                            &read.reader,
                            &format!("{}/{}", read.case, organ.key()),
                            &read.arm,
                            f64::from(call.confidence),
                        )
                        .map_err(definition_error)?;
                }
            }
        }
        Ok(reads)
    }
}

/// How the readers of one arm took the AI's hallucinated findings (a tumor the AI claims in an
/// organ whose truth has none).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Uptake {
    /// The arm.
    pub arm: String,
    /// What it shows.
    pub shows: Shows,
    /// Reads of an organ where the AI hallucinated a tumor.
    pub hallucinations_read: usize,
    /// Of those, the reads that kept the tumor: in an arm that shows the AI, accepted or
    /// changed (or called present without a decision); with the images alone, the reader
    /// called a tumor there on their own.
    pub kept: usize,
}

impl Study {
    /// For each arm, how the readers took the AI's hallucinated findings (`hallucinated`:
    /// per case, the organs the AI gives a tumor that truth does not have).
    pub fn uptake(
        &self,
        hallucinated: &BTreeMap<String, Vec<Organ>>,
    ) -> Result<Vec<Uptake>, StudyError> {
        let mut reads = Vec::new();
        for reader in &self.definition.readers {
            reads.extend(self.reads(reader)?);
        }
        Ok(self
            .definition
            .arms
            .iter()
            .map(|arm| {
                let (mut read, mut kept) = (0, 0);
                for one in reads.iter().filter(|one| one.arm == arm.name) {
                    for organ in hallucinated.get(&one.case).into_iter().flatten() {
                        read += 1;
                        let called = one.calls.get(organ).is_some_and(|call| call.present);
                        kept += usize::from(match (arm.shows, one.ai.get(organ)) {
                            (Shows::Images, _) | (_, None) => called,
                            (_, Some(decision)) => *decision != Decision::Rejected,
                        });
                    }
                }
                Uptake {
                    arm: arm.name.clone(),
                    shows: arm.shows,
                    hallucinations_read: read,
                    kept,
                }
            })
            .collect())
    }
}

/// What a simulated reader knows of the AI's result for one case.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AiResult {
    /// Organs the AI gives a tumor.
    pub claims: Vec<Organ>,
    /// What the evidence display says of each organ's finding (the verifier's standing on
    /// it, as the evidence panel lists it); empty when the verifier was not asked.
    pub shown: BTreeMap<Organ, keyslice_core::scoring::Standing>,
}

impl AiResult {
    /// The AI's result for a case as a simulated reader sees it: the organs it claims and
    /// the evidence display's standing on each finding.
    #[must_use]
    pub fn of(prediction: &keyslice_core::prediction::Prediction) -> Self {
        let mut shown = BTreeMap::new();
        if let Some(consistency) = &prediction.consistency {
            for finding in &consistency.findings {
                // An organ with several lesions stands as its weakest one.
                let weaker = shown
                    .get(&finding.organ)
                    .is_some_and(|standing| *standing != keyslice_core::scoring::Standing::Agrees);
                if !weaker {
                    shown.insert(finding.organ, finding.standing);
                }
            }
        }
        Self {
            claims: prediction.findings.tumor_organs(),
            shown,
        }
    }
}

/// The rules simulated readers follow (documented in the manual).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReaderRules {
    /// How far the AI's call moves a reader's belief (in units of the perception noise).
    pub pull: f64,
}

impl Default for ReaderRules {
    fn default() -> Self {
        Self { pull: 1.0 }
    }
}

/// What a simulation did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Simulation {
    /// Reads recorded.
    pub recorded: usize,
    /// Readers left alone because they have reads of their own (a person's), not named to
    /// be simulated.
    pub left_alone: Vec<String>,
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SS.000Z`.
fn rfc3339(seconds: u64) -> String {
    keyslice_core::date::rfc3339(seconds, 0)
}

impl Study {
    /// Reads the whole study with simulated readers, dated `start` (seconds since the epoch,
    /// the clock's now): reader k has a perception skill d′ of 1.5 + 0.5·k and calls a tumor
    /// when its perception passes d′/2; its perception of an organ is d′ (with a tumor) or 0,
    /// plus a standard normal draw fixed by the seed, the reader, the case and the organ —
    /// the same in every arm. Shown the AI's report, its belief moves by `pull` towards the
    /// AI's call on every organ. Shown the evidence, it follows what the display shows of
    /// each finding, never a threshold on a score: a claimed finding the display shows
    /// agreeing with its key slice moves it towards the AI as the report does; a claim the
    /// display shows denied, unverified or without evidence, and an organ where it shows a
    /// lesion the report lacks, it re-reads with its own eyes (keeps its own perception);
    /// the AI's call of an organ clean moves it as the report does. Its confidence is
    /// 100·Φ(belief − d′/2); it accepts an AI finding it calls too and rejects the others.
    /// Its active time on a case is 30 s, plus 15 s for each organ it re-reads (all four with
    /// the images alone), times a pace of 0.8 + 0.2·k, times e^(0.25·z) for a standard normal
    /// z fixed by the seed, the reader, the case and the arm. Every read is marked
    /// simulated.
    ///
    /// Only readers without reads of their own are simulated: a reader with a read not made
    /// by a simulation (a person's) is left alone unless named in `named`, so a study is
    /// never silently filled in around a person's reads. A simulation stopped part way
    /// resumes where it stopped, and gives the same reads.
    pub fn simulate(
        &self,
        truth: &BTreeMap<String, Findings>,
        ai: &BTreeMap<String, AiResult>,
        rules: ReaderRules,
        start: u64,
        named: &[String],
    ) -> Result<Simulation, StudyError> {
        let mut simulation = Simulation::default();
        for (k, reader) in self.definition.readers.iter().enumerate() {
            // A simulation that was stopped resumes: the items already read are kept.
            let done = self.reads(reader)?;
            let by_a_person = done.iter().any(|read| !read.simulated);
            if by_a_person && !named.contains(reader) {
                simulation.left_alone.push(reader.clone());
                continue;
            }
            let read_items: std::collections::HashSet<(&str, &str, usize)> = done
                .iter()
                .map(|read| (read.case.as_str(), read.arm.as_str(), read.session))
                .collect();
            // The reads go in schedule order, as `record` takes them, written a block at a
            // time (one synced write each): time and memory linear in the reads. A reader a
            // person has read for goes through `record`, which keeps their washout.
            let path = self.reads_path(reader)?;
            let mut pending: Vec<String> = Vec::new();
            // A reader's first [`SINGLY_SAVED`] reads are saved one by one, then blocks grow
            // to [`SIMULATED_BLOCK`]: a small study is saved read by read, a large one in a
            // few thousand writes.
            let mut block = 1;
            let mut written = 0;
            let flush = |pending: &mut Vec<String>| -> Result<(), StudyError> {
                if pending.is_empty() {
                    return Ok(());
                }
                keyslice_io::jsonl::append_line(&path, &pending.join("\n")).map_err(|source| {
                    StudyError::Io {
                        path: path.clone(),
                        source,
                    }
                })?;
                pending.clear();
                Ok(())
            };
            for item in self.definition.schedule(reader) {
                let arm = &self.definition.arms[item.arm];
                if read_items.contains(&(item.case.as_str(), arm.name.as_str(), item.session)) {
                    continue;
                }
                let result = ai.get(&item.case).cloned().unwrap_or_default();
                let now = start;
                let read = self.simulated_read(k, reader, &item, &result, truth, rules, now);
                if by_a_person {
                    self.record(&read, now)?;
                } else {
                    pending.push(
                        serde_json::to_string(&read).map_err(|error| StudyError::Io {
                            path: path.clone(),
                            source: error.into(),
                        })?,
                    );
                    if pending.len() >= block {
                        written += pending.len();
                        flush(&mut pending)?;
                        if written >= SINGLY_SAVED {
                            block = (block * 2).min(SIMULATED_BLOCK);
                        }
                    }
                }
                simulation.recorded += 1;
            }
            flush(&mut pending)?;
        }
        Ok(simulation)
    }

    /// Reader `k`'s simulated read of `item`, shown `result` (see [`Study::simulate`]).
    #[expect(
        clippy::too_many_arguments,
        reason = "the simulation's parameters, passed through"
    )]
    fn simulated_read(
        &self,
        k: usize,
        reader: &str,
        item: &Item,
        result: &AiResult,
        truth: &BTreeMap<String, Findings>,
        rules: ReaderRules,
        now: u64,
    ) -> Read {
        let skill = 1.5 + 0.5 * k as f64;
        let threshold = skill / 2.0;
        let arm = &self.definition.arms[item.arm];
        // Whether the reader takes the AI's call on an organ, or re-reads it.
        let follows = |organ: Organ| match arm.shows {
            Shows::Images => false,
            Shows::Report => true,
            Shows::Evidence => {
                use keyslice_core::scoring::Standing;
                match result.shown.get(&organ) {
                    Some(Standing::Agrees) => true,
                    Some(_) => false,
                    // A claim with no evidence shown; a clean call stands as said.
                    None => !result.claims.contains(&organ),
                }
            }
        };
        let rereads = Organ::ALL
            .into_iter()
            .filter(|&organ| !follows(organ))
            .count();
        let mut calls = BTreeMap::new();
        let mut decisions = BTreeMap::new();
        for organ in Organ::ALL {
            let tumor = truth
                .get(&item.case)
                .is_some_and(|findings| findings.states_tumor(organ));
            let noise = keyslice_core::rng::normal_at(
                self.definition.seed ^ mix(k as u64 + 1),
                mix(item.case.bytes().fold(0, |h, b| mix(h ^ u64::from(b))) ^ organ as u64),
            );
            let claimed = result.claims.contains(&organ);
            let mut belief = if tumor { skill } else { 0.0 } + noise;
            if follows(organ) {
                belief += if claimed { rules.pull } else { -rules.pull };
            }
            let present = belief > threshold;
            let confidence = (100.0 * keyslice_core::mrmc::normal_cdf(belief - threshold))
                .round()
                .clamp(0.0, 100.0) as u8;
            calls.insert(
                organ,
                Call {
                    present,
                    confidence,
                },
            );
            if claimed && arm.shows != Shows::Images {
                decisions.insert(
                    organ,
                    if present {
                        Decision::Accepted
                    } else {
                        Decision::Rejected
                    },
                );
            }
        }
        let spread = keyslice_core::rng::normal_at(
            self.definition.seed ^ mix(k as u64 + 101),
            mix(item.case.bytes().fold(0, |h, b| mix(h ^ u64::from(b))) ^ item.arm as u64),
        );
        let seconds = (30.0 + 15.0 * rereads as f64 / Organ::ALL.len() as f64)
            * (0.8 + 0.2 * k as f64)
            * (0.25 * spread).exp();
        Read {
            reader: reader.to_string(),
            case: item.case.clone(),
            arm: arm.name.clone(),
            session: item.session,
            calls,
            key_slice: None,
            active_ms: (seconds * 1000.0).round() as u64,
            ai: decisions,
            at: rfc3339(now),
            simulated: true,
        }
    }
}

/// Simulated reads each reader saves one at a time before blocks grow.
const SINGLY_SAVED: usize = 64;

/// The most simulated reads written per synced write: a stopped simulation loses at most
/// this many, and resumes after the last block written.
const SIMULATED_BLOCK: usize = 1000;

/// Seconds since the epoch of an RFC 3339 UTC time (`2026-12-06T13:51:17Z`); 0 if unreadable.
fn seconds_of(text: &str) -> u64 {
    keyslice_core::date::seconds_from_rfc3339(text).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_back_as_seconds_since_the_epoch() {
        assert_eq!(seconds_of("1970-01-01T00:00:00Z"), 0);
        assert_eq!(seconds_of("2026-12-06T13:51:17Z"), 1_796_565_077);
        assert_eq!(seconds_of("garbage"), 0);
        assert_eq!(rfc3339(1_796_565_077), "2026-12-06T13:51:17.000Z");
        assert_eq!(seconds_of(&rfc3339(951_782_400)), 951_782_400); // 2000-02-29
    }
}
