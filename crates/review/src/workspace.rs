//! A workspace is a folder:
//!
//! - `workspace.json`: the case manifest (each case's id, volume path, optional masks folder
//!   and truth file), written through a temporary file renamed into place;
//! - `predictions.jsonl`: one Prediction per line as `keyslice analyze --json` writes them,
//!   appended and synced line by line; the last line for a case wins, a damaged line (a run
//!   killed mid-write) is reported and skipped;
//! - `review.sqlite`: review state and the corrections log ([`super::store`]).
//!
//! `keyslice workspace create DIR INPUT...` and `keyslice workspace analyze DIR` fill one
//! without the window; each holds the workspace's lock (`.keyslice.lock`, an advisory file
//! lock) while it changes the case list or analyses, so two runs at once neither lose cases
//! nor do the same work twice.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::store::{ReviewStore, StoreError};
use keyslice_core::prediction::Prediction;

/// The manifest's file name.
pub const MANIFEST_FILE: &str = "workspace.json";
/// The predictions' file name.
pub const PREDICTIONS_FILE: &str = "predictions.jsonl";
/// The review database's file name.
pub const DATABASE_FILE: &str = "review.sqlite";
/// The manifest format this build writes.
pub const MANIFEST_VERSION: u32 = 1;

/// Why a workspace could not be used.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The manifest is not a Keyslice workspace manifest.
    #[error("{path}: not a Keyslice workspace manifest: {detail}")]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The manifest was written by a newer Keyslice.
    #[error(
        "{path}: written by a newer Keyslice (workspace format {found}, this build knows {MANIFEST_VERSION})"
    )]
    Newer {
        /// The manifest.
        path: PathBuf,
        /// Its format version.
        found: u32,
    },
    /// No workspace in this folder.
    #[error("{0}: no {MANIFEST_FILE} here")]
    NotAWorkspace(PathBuf),
    /// An input is neither a case, a dataset of cases, a NIfTI file nor a folder.
    #[error("{0}: not a NIfTI file, case folder, dataset folder or DICOM folder")]
    Input(PathBuf),
    /// The review database refused.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl WorkspaceError {
    /// What the user can do about it.
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            Self::Io { .. } => "check that the path exists and the folder is writable",
            Self::Manifest { .. } => {
                "restore workspace.json from a backup, or create the workspace again with \
                 `keyslice workspace create`"
            }
            Self::Newer { .. } => "open this workspace with the newer Keyslice, or update this one",
            Self::NotAWorkspace(_) => "create one with `keyslice workspace create DIR INPUT...`",
            Self::Input(_) => {
                "give NIfTI files, DICOM series folders, case folders (ct.nii.gz + \
                 segmentations/) or a folder of case folders"
            }
            Self::Store(error) => error.hint(),
        }
    }
}

/// One case of the manifest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceCase {
    /// Unique within the workspace.
    pub case_id: String,
    /// The CT: a NIfTI file, a DICOM folder or file, or a case folder (absolute path).
    pub volume: PathBuf,
    /// The AbdomenAtlas `segmentations/` folder, when the case has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub masks: Option<PathBuf>,
    /// A phantom `truth.json`, when the case has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truth: Option<PathBuf>,
    /// The study on a PACS the case was retrieved from (`dicomweb+http://…/studies/UID`,
    /// without credentials): results and corrections are stored back there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// Whose study it is (from its DICOM header or the PACS), for the worklist; stays in the
    /// workspace, never in an export or a case id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patient: Option<keyslice_core::volume::PatientIdentity>,
}

/// `workspace.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`MANIFEST_VERSION`].
    pub keyslice_workspace: u32,
    /// The cases, in the order they were added.
    pub cases: Vec<WorkspaceCase>,
}

/// An open workspace folder.
#[derive(Debug)]
pub struct Workspace {
    /// The folder.
    pub root: PathBuf,
    /// Its manifest.
    pub manifest: Manifest,
}

/// Predictions read from `predictions.jsonl`, with the lines that could not be used.
#[derive(Debug, Default)]
pub struct Predictions {
    /// The last prediction per case, in case order of first appearance (read it; it is
    /// filled by [`Workspace::predictions`], which keeps the index beside it).
    pub by_case: Vec<Prediction>,
    /// `line N: what is wrong` for each damaged line.
    pub damaged: Vec<String>,
    /// Where each case's prediction is in `by_case`.
    index: std::collections::HashMap<String, usize>,
}

impl Predictions {
    /// The prediction for `case_id`.
    #[must_use]
    pub fn get(&self, case_id: &str) -> Option<&Prediction> {
        self.index
            .get(case_id)
            .and_then(|&at| self.by_case.get(at))
            .filter(|prediction| prediction.case_id == case_id)
    }

    /// Keeps `prediction` as its case's latest.
    fn put(&mut self, prediction: Prediction) {
        if let Some(&at) = self.index.get(&prediction.case_id) {
            self.by_case[at] = prediction;
        } else {
            self.index
                .insert(prediction.case_id.clone(), self.by_case.len());
            self.by_case.push(prediction);
        }
    }
}

/// One row of the worklist: a case with its review status and model consistency.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorklistEntry {
    /// The case.
    pub case_id: String,
    /// Where its review stands.
    pub status: super::ReviewStatus,
    /// Who last changed it.
    pub reviewer: Option<String>,
    /// The model's consistency score, when analysed with a key slice.
    pub consistency: Option<f64>,
    /// Why the case's findings are not grounded in evidence, when they are not: such cases
    /// come first in the worklist, with this reason shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention: Option<String>,
    /// Whose study it is, in one line (`DOE, JANE · ID … · …`), when the workspace knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patient: Option<String>,
    /// The model said the CT is outside what it knows (`attention` says why): listed first,
    /// never shown as agreement.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub out_of_domain: bool,
}

/// Why a case needs a look before any other, or `None` when its findings were verified on a
/// key slice and read whole. A case the model called negative has no key slice and no
/// consistency, and is exactly where a missed tumor hides: it is listed, not buried.
#[must_use]
pub fn attention(prediction: Option<&Prediction>) -> Option<String> {
    let Some(prediction) = prediction else {
        return Some("not analysed".into());
    };
    if let Some(unfamiliar) = &prediction.out_of_domain {
        return Some(unfamiliar.sentence());
    }
    let warned = |needle: &str| prediction.warnings.iter().any(|w| w.contains(needle));
    if prediction.key_slice.is_none() {
        if warned("outside the volume") {
            return Some("the model's key slice is outside the volume".into());
        }
        let any_positive = prediction
            .findings
            .organs
            .values()
            .any(|organ| organ.tumor.as_positive());
        return Some(if any_positive {
            "no key slice: the findings are not grounded".into()
        } else {
            "called negative with no evidence slice: check for a missed tumor".into()
        });
    }
    if prediction.video_refused.is_some() {
        return Some(
            "the CT went to the model as images: the server refused video (see the prediction's input)"
                .into(),
        );
    }
    let Some(consistency) = &prediction.consistency else {
        return Some("not verified: no local description of the key slice".into());
    };
    if let Some(unverified) = consistency
        .findings
        .iter()
        .find(|finding| finding.standing == keyslice_core::scoring::Standing::Unverified)
    {
        let count = consistency
            .findings
            .iter()
            .filter(|finding| finding.standing == keyslice_core::scoring::Standing::Unverified)
            .count();
        return Some(if count == 1 {
            format!(
                "unverified: the key slice does not show the {} finding",
                unverified.organ
            )
        } else {
            format!("unverified: the key slice does not show {count} of the findings")
        });
    }
    if warned("not understood") {
        return Some("part of the model's answer was not read".into());
    }
    None
}

/// Refuses a manifest whose case ids are not each unique, non-empty plain text: a damaged
/// id would silently hide one case's review behind another's.
fn check_case_ids(manifest: &Manifest) -> Result<(), String> {
    let mut seen = std::collections::HashMap::new();
    for (index, case) in manifest.cases.iter().enumerate() {
        if case.case_id.trim().is_empty()
            || case.case_id.chars().any(keyslice_core::text::is_control)
        {
            return Err(format!(
                "case {} has the id `{}`, which is empty or holds control characters (the file is damaged)",
                index + 1,
                keyslice_core::text::shown(&case.case_id)
            ));
        }
        if let Some(first) = seen.insert(case.case_id.as_str(), index) {
            return Err(format!(
                "cases {} and {} share the id `{}` (the file is damaged): one review would hide the other",
                first + 1,
                index + 1,
                keyslice_core::text::shown(&case.case_id)
            ));
        }
    }
    Ok(())
}

/// The key two case ids are compared by: NFC-normalised and lower-cased, so `Case_A` and
/// `case_a`, or a "café" written composed and one written decomposed (as macOS names
/// files), are one id: two rows that look the same are never two cases.
#[must_use]
pub fn case_id_key(id: &str) -> String {
    use unicode_normalization::UnicodeNormalization as _;
    id.nfc().collect::<String>().to_lowercase()
}

/// The case ids of a workspace, by [`case_id_key`], handing out new unique ones.
struct CaseIds {
    taken: std::collections::HashSet<String>,
    /// Per wanted key, the next suffix to try: each is tried once, so adding n cases of one
    /// name costs O(n), not O(n²).
    next_suffix: std::collections::HashMap<String, usize>,
}

impl CaseIds {
    fn of(cases: &[WorkspaceCase]) -> Self {
        Self {
            taken: cases
                .iter()
                .map(|case| case_id_key(&case.case_id))
                .collect(),
            next_suffix: std::collections::HashMap::new(),
        }
    }

    /// `wanted` as a new case's id: NFC-normalised, a control character (a newline, an
    /// escape) as `_` so an id is always one line of plain text, `_2`, `_3`, … added when the
    /// id is taken.
    fn unique(&mut self, wanted: &str) -> String {
        use unicode_normalization::UnicodeNormalization as _;
        let plain: String = wanted
            .nfc()
            .map(|c| {
                if keyslice_core::text::is_control(c) {
                    '_'
                } else {
                    c
                }
            })
            .collect();
        let wanted = if plain.trim().is_empty() {
            "case".to_string()
        } else {
            plain
        };
        if self.taken.insert(case_id_key(&wanted)) {
            return wanted;
        }
        let key = case_id_key(&wanted);
        let mut suffix = self.next_suffix.get(&key).copied().unwrap_or(2);
        loop {
            let id = format!("{wanted}_{suffix}");
            suffix += 1;
            if self.taken.insert(case_id_key(&id)) {
                self.next_suffix.insert(key, suffix);
                return id;
            }
        }
    }
}

/// What is wrong with a workspace's files, found by [`Workspace::health`].
#[derive(Debug, Default)]
pub struct Health {
    /// `line N: what is wrong` for each line of `predictions.jsonl` that cannot be read.
    pub damaged_predictions: Vec<String>,
    /// Cases in review or accepted whose prediction cannot be read; with whether the review
    /// database remembers the findings the review started from (then they can be rebuilt).
    pub reviewed_without_prediction: Vec<(String, bool)>,
}

impl Health {
    /// The problems as sentences, one per line, each saying what can be recovered.
    #[must_use]
    pub fn warnings(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .damaged_predictions
            .iter()
            .map(|damaged| format!("{PREDICTIONS_FILE}: {damaged} (that line is not used)"))
            .collect();
        for (case_id, recoverable) in &self.reviewed_without_prediction {
            let case_id = keyslice_core::text::shown(case_id);
            lines.push(if *recoverable {
                format!(
                    "{case_id}: reviewed, but its prediction cannot be read from {PREDICTIONS_FILE}; its findings are rebuilt from {DATABASE_FILE}"
                )
            } else {
                format!(
                    "{case_id}: reviewed, but its prediction cannot be read from {PREDICTIONS_FILE} and {DATABASE_FILE} does not hold what the review started from: it is not exported until it is analysed again (`keyslice workspace analyze`) and checked"
                )
            });
        }
        lines
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> WorkspaceError + '_ {
    move |source| WorkspaceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The lock file's name: held while a command changes the workspace's case list or
/// analyses its cases.
pub const LOCK_FILE: &str = ".keyslice.lock";

/// An exclusive hold on a workspace, released when dropped (or when the process ends, however
/// it ends: the operating system drops the lock with the file).
#[derive(Debug)]
pub struct WorkspaceLock {
    _file: std::fs::File,
}

impl WorkspaceLock {
    /// Takes the workspace lock of `root`, calling `waiting` once first if another process
    /// holds it, then waiting for it.
    pub fn acquire(root: &Path, waiting: impl FnOnce()) -> Result<Self, WorkspaceError> {
        let path = root.join(LOCK_FILE);
        let file = keyslice_io::atomic::open_lock_file(&path).map_err(io_error(&path))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                waiting();
                file.lock().map_err(io_error(&path))?;
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(WorkspaceError::Io { path, source });
            }
        }
        Ok(Self { _file: file })
    }
}

impl Workspace {
    /// Opens the workspace in `root`.
    pub fn open(root: &Path) -> Result<Self, WorkspaceError> {
        let path = root.join(MANIFEST_FILE);
        if !path.is_file() {
            return Err(WorkspaceError::NotAWorkspace(root.to_path_buf()));
        }
        let text = std::fs::read_to_string(&path).map_err(io_error(&path))?;
        let manifest: Manifest =
            serde_json::from_str(&text).map_err(|error| WorkspaceError::Manifest {
                path: path.clone(),
                detail: error.to_string(),
            })?;
        if manifest.keyslice_workspace > MANIFEST_VERSION {
            return Err(WorkspaceError::Newer {
                path,
                found: manifest.keyslice_workspace,
            });
        }
        check_case_ids(&manifest).map_err(|detail| WorkspaceError::Manifest {
            path: path.clone(),
            detail,
        })?;
        Ok(Self {
            root: root.to_path_buf(),
            manifest,
        })
    }

    /// Creates the workspace in `root` (or opens it when it exists) and adds the cases found
    /// in `inputs` that it does not hold yet (same volume path). Returns the workspace and
    /// the number of cases added.
    pub fn create_or_extend(
        root: &Path,
        inputs: &[PathBuf],
    ) -> Result<(Self, usize), WorkspaceError> {
        let mut found = Vec::new();
        for input in inputs {
            found.extend(discover_cases(input)?);
        }
        Self::add_cases(root, found)
    }

    /// Creates the workspace in `root` if needed and adds `cases` (made by the caller, as for
    /// studies retrieved from a PACS); a case whose volume is already listed is skipped.
    pub fn add_cases(
        root: &Path,
        cases: Vec<WorkspaceCase>,
    ) -> Result<(Self, usize), WorkspaceError> {
        std::fs::create_dir_all(root).map_err(io_error(root))?;
        // Read, extend and write the case list under the lock: two runs at once each add
        // their cases instead of one overwriting the other's.
        let _lock = WorkspaceLock::acquire(root, || {})?;
        let workspace = if root.join(MANIFEST_FILE).is_file() {
            Self::open(root)?
        } else {
            Self {
                root: root.to_path_buf(),
                manifest: Manifest {
                    keyslice_workspace: MANIFEST_VERSION,
                    cases: Vec::new(),
                },
            }
        };
        workspace.extend(cases)
    }

    /// Adds `found` (under the caller's lock), saves the manifest, makes the database. In
    /// time linear in the cases, however many share a name.
    fn extend(mut self, found: Vec<WorkspaceCase>) -> Result<(Self, usize), WorkspaceError> {
        let mut volumes: std::collections::HashSet<PathBuf> = self
            .manifest
            .cases
            .iter()
            .map(|case| case.volume.clone())
            .collect();
        let mut ids = CaseIds::of(&self.manifest.cases);
        let mut added = 0;
        for mut case in found {
            if !volumes.insert(case.volume.clone()) {
                continue;
            }
            case.case_id = ids.unique(&case.case_id);
            self.manifest.cases.push(case);
            added += 1;
        }
        self.save_manifest()?;
        // The database is made with the workspace, so a reviewer finds it ready.
        ReviewStore::open(&self.database_path())?;
        Ok((self, added))
    }

    /// Writes `workspace.json` (temporary file, synced, renamed into place).
    pub fn save_manifest(&self) -> Result<(), WorkspaceError> {
        let path = self.root.join(MANIFEST_FILE);
        let text = serde_json::to_string_pretty(&self.manifest).map_err(|error| {
            WorkspaceError::Manifest {
                path: path.clone(),
                detail: error.to_string(),
            }
        })?;
        keyslice_io::atomic::write_atomically(&path, format!("{text}\n").as_bytes())
            .map_err(io_error(&path))
    }

    /// `review.sqlite`.
    #[must_use]
    pub fn database_path(&self) -> PathBuf {
        self.root.join(DATABASE_FILE)
    }

    /// `predictions.jsonl`.
    #[must_use]
    pub fn predictions_path(&self) -> PathBuf {
        self.root.join(PREDICTIONS_FILE)
    }

    /// Reads the predictions (none when the file does not exist yet).
    pub fn predictions(&self) -> Result<Predictions, WorkspaceError> {
        let path = self.predictions_path();
        let mut predictions = Predictions::default();
        if !path.is_file() {
            return Ok(predictions);
        }
        // Read as bytes: a damaged byte spoils its line, never the whole file.
        let bytes = std::fs::read(&path).map_err(io_error(&path))?;
        for (index, line) in bytes.split(|&byte| byte == b'\n').enumerate() {
            let line = String::from_utf8_lossy(line);
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Prediction>(&line) {
                Ok(mut prediction) => {
                    // However it was written, what the window and the exports hold is bounded.
                    prediction.bound();
                    predictions.put(prediction);
                }
                Err(error) => predictions
                    .damaged
                    .push(format!("line {}: {error}", index + 1)),
            }
        }
        Ok(predictions)
    }

    /// Checks the workspace's files: SQLite's integrity check of `review.sqlite` (an error
    /// when it fails: nothing read from a damaged database can be trusted), the lines of
    /// `predictions.jsonl`, and every case in review or accepted that has no prediction.
    pub fn health(&self, predictions: &Predictions) -> Result<Health, WorkspaceError> {
        let store = ReviewStore::open(&self.database_path())?;
        store.integrity_check()?;
        let mut health = Health {
            damaged_predictions: predictions.damaged.clone(),
            ..Health::default()
        };
        for case in &self.manifest.cases {
            let state = store.case_state(&case.case_id)?;
            if state.status != super::store::ReviewStatus::New
                && predictions.get(&case.case_id).is_none()
            {
                let remembered = store.base(&case.case_id)?.is_some();
                health
                    .reviewed_without_prediction
                    .push((case.case_id.clone(), remembered));
            }
        }
        Ok(health)
    }

    /// The cases with status and consistency in triage order ([`triage_order`]).
    pub fn worklist(
        &self,
        predictions: &Predictions,
    ) -> Result<Vec<WorklistEntry>, WorkspaceError> {
        let store = ReviewStore::open(&self.database_path())?;
        let mut rows = Vec::with_capacity(self.manifest.cases.len());
        for case in &self.manifest.cases {
            let state = store.case_state(&case.case_id)?;
            let prediction = predictions.get(&case.case_id);
            rows.push(WorklistEntry {
                case_id: case.case_id.clone(),
                status: state.status,
                reviewer: state.reviewer,
                consistency: prediction
                    .and_then(|p| p.consistency.as_ref())
                    .map(|c| c.score),
                attention: files_changed(case, prediction).or_else(|| attention(prediction)),
                out_of_domain: prediction.is_some_and(|p| p.out_of_domain.is_some()),
                patient: case
                    .patient
                    .as_ref()
                    .map(keyslice_core::volume::PatientIdentity::line)
                    .filter(|line| !line.is_empty()),
            });
        }
        rows.sort_by(triage_order);
        Ok(rows)
    }

    /// The manifest entry of `case_id`.
    #[must_use]
    pub fn case(&self, case_id: &str) -> Option<&WorkspaceCase> {
        self.manifest
            .cases
            .iter()
            .find(|case| case.case_id == case_id)
    }

    /// Appends `prediction` as one line and syncs it to disk before returning. A line torn
    /// by an earlier crash is closed first, so it damages only itself.
    pub fn append_prediction(&self, prediction: &Prediction) -> Result<(), WorkspaceError> {
        let path = self.predictions_path();
        // The case's files as they are now, for the worklist's first look.
        let mut prediction = prediction.clone();
        if let (Some(images), Some(case)) =
            (prediction.images.as_mut(), self.case(&prediction.case_id))
            && images.files.is_none()
        {
            images.files = keyslice_io::files_stamp(&case.volume);
        }
        let line =
            serde_json::to_string(&prediction).map_err(|error| WorkspaceError::Manifest {
                path: path.clone(),
                detail: error.to_string(),
            })?;
        keyslice_io::jsonl::append_line(&path, &line).map_err(io_error(&path))
    }
}

/// Why `case` needs a look because its files are not as they were when its prediction was
/// saved (a larger series landed in its folder, a file was replaced or removed): the window
/// and the exports then check its images themselves.
fn files_changed(case: &WorkspaceCase, prediction: Option<&Prediction>) -> Option<String> {
    let saved = prediction?.images.as_ref()?.files?;
    (keyslice_io::files_stamp(&case.volume) != Some(saved)).then(|| {
        "its files changed since it was analysed: open it to check, or analyse it again".into()
    })
}

/// Triage order: cases the model is out of its depth on first, then those without grounded
/// evidence (see [`attention`]), in the order they come, then the lowest consistency (likely
/// hallucinations); use it with a stable sort.
#[must_use]
pub fn triage_order(a: &WorklistEntry, b: &WorklistEntry) -> std::cmp::Ordering {
    if a.out_of_domain != b.out_of_domain {
        return b.out_of_domain.cmp(&a.out_of_domain);
    }
    match (a.attention.is_some(), b.attention.is_some()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        (false, false) => {
            let key = |entry: &WorklistEntry| entry.consistency.unwrap_or(f64::INFINITY);
            key(a).total_cmp(&key(b))
        }
    }
}

/// The file's last byte (`None` when it is empty).
/// FNV-1a (64 bit) of `bytes`: stable across builds and machines, unlike std's hasher. Names
/// scratch workspaces and orders export splits.
#[must_use]
pub fn stable_hash<'a>(bytes: impl IntoIterator<Item = &'a u8>) -> u64 {
    bytes
        .into_iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// The cases an input names: a case folder (`ct.nii.gz`/`ct.nii`, optional
/// `segmentations/` and `truth.json`), a folder of case folders, a NIfTI file, or any other
/// folder as a DICOM series folder.
pub fn discover_cases(input: &Path) -> Result<Vec<WorkspaceCase>, WorkspaceError> {
    let absolute = std::path::absolute(input).map_err(io_error(input))?;
    if !absolute.exists() {
        return Err(WorkspaceError::Io {
            path: input.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file or folder"),
        });
    }
    let name = |path: &Path| {
        path.file_name()
            .map_or_else(|| "case".into(), |name| name.to_string_lossy().to_string())
    };
    if absolute.is_file() {
        // The CT of a case folder brings the folder's masks and truth along.
        if let Some(case) = absolute
            .parent()
            .and_then(case_folder)
            .filter(|case| case.volume == absolute)
        {
            return Ok(vec![case]);
        }
        if keyslice_io::nifti::is_nifti_path(&absolute) {
            let id = name(&absolute)
                .trim_end_matches(".gz")
                .trim_end_matches(".nii")
                .to_string();
            return Ok(vec![WorkspaceCase {
                case_id: id,
                volume: absolute,
                masks: None,
                truth: None,
                origin: None,
                patient: None,
            }]);
        }
        return Err(WorkspaceError::Input(input.to_path_buf()));
    }
    if let Some(case) = case_folder(&absolute) {
        return Ok(vec![case]);
    }
    let mut children: Vec<PathBuf> = std::fs::read_dir(&absolute)
        .map_err(io_error(&absolute))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_dir())
        .collect();
    children.sort();
    let cases: Vec<WorkspaceCase> = children.iter().filter_map(|c| case_folder(c)).collect();
    if !cases.is_empty() {
        return Ok(cases);
    }
    Ok(vec![WorkspaceCase {
        case_id: name(&absolute),
        patient: keyslice_io::dicom::patient_identity(&absolute),
        volume: absolute,
        masks: None,
        truth: None,
        origin: None,
    }])
}

/// A folder in the AbdomenAtlas layout as a case.
fn case_folder(folder: &Path) -> Option<WorkspaceCase> {
    let case = keyslice_io::cases::CaseFolder::new(folder);
    let ct = case.ct_found()?;
    let masks = case.masks();
    let truth = case.truth();
    Some(WorkspaceCase {
        case_id: folder
            .file_name()
            .map_or_else(|| "case".into(), |name| name.to_string_lossy().to_string()),
        volume: ct,
        masks: masks.is_dir().then_some(masks),
        truth: truth.is_file().then_some(truth),
        origin: None,
        patient: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ReviewStatus;
    use keyslice_core::prediction::OutOfDomain;

    fn entry(case_id: &str, consistency: Option<f64>, attention: Option<&str>) -> WorklistEntry {
        WorklistEntry {
            case_id: case_id.into(),
            status: ReviewStatus::New,
            reviewer: None,
            consistency,
            attention: attention.map(str::to_string),
            patient: None,
            out_of_domain: false,
        }
    }

    #[test]
    fn case_ids_that_look_the_same_are_one_id_and_new_ids_are_unique() {
        let case = |id: &str| WorkspaceCase {
            case_id: id.into(),
            volume: PathBuf::from(format!("/data/{id}.nii.gz")),
            masks: None,
            truth: None,
            origin: None,
            patient: None,
        };
        let mut ids = CaseIds::of(&[case("Case_A")]);
        assert_eq!(ids.unique("case_a"), "case_a_2");
        // Composed and decomposed "café" are one name; the id is stored composed.
        assert_eq!(ids.unique("caf\u{e9}"), "caf\u{e9}");
        assert_eq!(ids.unique("cafe\u{301}"), "caf\u{e9}_2");
        assert_eq!(ids.unique("CAF\u{c9}_2"), "CAF\u{c9}_2_2");
        assert_eq!(ids.unique("line\nbreak"), "line_break");
        assert_eq!(ids.unique(" "), "case");
        // Many cases of one name: every id distinct, each found without rescanning.
        let many: Vec<String> = (0..4000).map(|_| ids.unique("ct")).collect();
        let distinct: std::collections::HashSet<String> =
            many.iter().map(|id| case_id_key(id)).collect();
        assert_eq!(distinct.len(), 4000);
        assert_eq!(many[0], "ct");
        assert_eq!(many[3999], "ct_4000");
    }

    #[test]
    fn cases_without_grounded_evidence_come_first_then_the_lowest_consistency() {
        let mut rows = [
            entry("verified-high", Some(0.9), None),
            entry("verified-low", Some(0.2), None),
            entry(
                "negative",
                None,
                Some("called negative with no evidence slice"),
            ),
            entry(
                "unread",
                Some(0.95),
                Some("part of the model's answer was not read"),
            ),
        ];
        rows.sort_by(triage_order);
        let order: Vec<&str> = rows.iter().map(|row| row.case_id.as_str()).collect();
        assert_eq!(
            order,
            ["negative", "unread", "verified-low", "verified-high"]
        );
        // A case the model is out of its depth on comes before all of them, however high
        // its consistency.
        let mut unfamiliar = entry("unfamiliar", Some(0.99), Some(OutOfDomain::LABEL));
        unfamiliar.out_of_domain = true;
        let mut with_unfamiliar = rows.to_vec();
        with_unfamiliar.push(unfamiliar);
        with_unfamiliar.sort_by(triage_order);
        assert_eq!(with_unfamiliar[0].case_id, "unfamiliar");
        assert_eq!(with_unfamiliar[1].case_id, "negative");
        rows.swap(0, 1);
        rows.sort_by(triage_order);
        assert_eq!(
            rows[0].case_id, "unread",
            "cases that need a look keep their order"
        );
    }

    #[test]
    fn a_case_out_of_the_models_depth_needs_a_look_whatever_its_consistency() {
        let prediction: Prediction = serde_json::from_value(serde_json::json!({
            "version": 1,
            "case_id": "c",
            "diagnoser": {"id": "keyslice-tiny", "version": "6-rl"},
            "verifier": null,
            "report": "Liver: no tumor.",
            "findings": keyslice_core::findings::Findings::default(),
            "key_slice": {"index": 3, "z_mm": 15.0},
            "box": null,
            "local_description": "No lesion is visible on this slice.",
            "local_findings": null,
            "consistency": {"score": 1.0, "organ": 1.0},
            "timings_ms": {"diagnose": 1.0, "verify": 1.0, "total": 2.0},
            "warnings": [],
            "out_of_domain": {"label": OutOfDomain::LABEL, "model": "keyslice-tiny",
                              "reasons": ["image noise 0 HU (training phantoms 9 HU–21 HU)"]}
        }))
        .expect("a prediction");
        let reason = attention(Some(&prediction)).expect("needs a look");
        assert_eq!(
            reason,
            "demo model: not meaningful for this CT: image noise 0 HU (training phantoms 9 HU–21 HU)"
        );
    }

    #[test]
    fn a_case_called_negative_is_flagged_for_a_missed_tumor() {
        assert_eq!(attention(None).as_deref(), Some("not analysed"));
        let prediction: Prediction = serde_json::from_value(serde_json::json!({
            "version": 1,
            "case_id": "c",
            "diagnoser": {"id": "m", "version": "1"},
            "verifier": null,
            "report": "Liver: no tumor.",
            "findings": keyslice_core::findings::Findings::default(),
            "key_slice": null,
            "box": null,
            "local_description": null,
            "local_findings": null,
            "consistency": null,
            "timings_ms": {"diagnose": 0.0, "verify": 0.0, "total": 0.0},
            "warnings": ["the model named no key slice; nothing to verify"]
        }))
        .expect("a prediction");
        let reason = attention(Some(&prediction)).expect("needs a look");
        assert!(reason.contains("missed tumor"), "{reason}");
    }
}
