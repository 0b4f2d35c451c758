//! Reviewed cases become training data: `keyslice export WORKSPACE --format FORMAT --out DIR`.
//!
//! Steps, in order: pick the cases (accepted ones; with `include_unreviewed` the others too,
//! answered by the model's prediction plus any corrections); replay each case's corrections on
//! the model's findings ([`keyslice_review::ReviewedCase`]); mark as *hard* the cases whose
//! corrected findings differ from the prediction (the paper trains its RL stage on those);
//! split train/val by a seeded hash of the case; pseudonymise ([`deid`]); sample and write
//! frames ([`keyslice_io::frames`]) and, when asked, the CT as NIfTI (`volumes/`, for the RL
//! stage's `--from-export`); write the format's files ([`formats`]); then move the finished folder
//! into place. The export is built in a temporary sibling folder, so an interrupted export
//! never leaves a half dataset where a good one was; the same workspace and options give
//! byte-identical files. `export.json` lists the SHA-256 of every file written, and an
//! existing folder is replaced only when it is empty or an export that still matches its
//! list: a folder a user made, or an export a user added files to or edited, is refused.
//!
//! Core of the export: reads workspaces and volumes, writes files; no UI.

pub mod deid;
pub mod formats;
pub mod labels;
pub mod read;
pub mod rules;

use std::path::{Path, PathBuf};

use serde::Serialize;

use deid::Pseudonyms;
use keyslice_core::findings::Findings;
use keyslice_core::volume::Volume;
use keyslice_io::frames;
use keyslice_io::nifti::{WriteOptions, write_nifti};
use keyslice_io::{LoadOptions, load_study};
use keyslice_review::workspace::{Workspace, WorkspaceError, stable_hash};
use keyslice_review::{ReviewStatus, ReviewStore, ReviewedCase, StoreError, model_findings};

/// Marker file naming a folder as a Keyslice export (only such folders are replaced).
pub const EXPORT_MANIFEST: &str = "export.json";

/// A training-data format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportFormat {
    /// LLaMA-Factory `ShareGPT` JSON with videos, plus `dataset_info.json`.
    Llamafactory,
    /// ms-swift JSONL with extra columns for reward functions.
    Swift,
    /// verl parquet rows.
    Verl,
    /// Key-slice labels as CSV and JSON.
    Keyslices,
    /// Label maps for segmentation training (nnU-Net v2 and MONAI layout): the CT and its
    /// organ and reviewed lesion masks.
    Segmentation,
}

/// What to export and how.
#[derive(Clone, Debug)]
pub struct ExportOptions {
    /// The format.
    pub format: ExportFormat,
    /// Also cases not accepted yet.
    pub include_unreviewed: bool,
    /// Fraction of cases for validation (0 = all train).
    pub val_fraction: f64,
    /// Seed of the split.
    pub seed: u64,
    /// Frames per case.
    pub frames: usize,
    /// Also write each case's CT as `volumes/<pseudonym>.nii.gz` (HU and geometry only), so
    /// `keyslice train --stage rl --from-export` can train on the reviewed cases.
    pub volumes: bool,
    /// Where the export folder will be when a framework reads it (absolute): frame paths in
    /// the rows start there. `None`: the export folder itself.
    pub frames_root: Option<PathBuf>,
}

impl Default for ExportOptions {
    fn default() -> Self {
        Self {
            format: ExportFormat::Llamafactory,
            include_unreviewed: false,
            val_fraction: 0.0,
            seed: 0,
            frames: 32,
            volumes: false,
            frames_root: None,
        }
    }
}

/// Why an export failed; nothing was placed at the output.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The workspace could not be read.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// The review database could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A case's CT could not be read.
    #[error("case {case}: {detail}")]
    Volume {
        /// The case (its workspace id: this message stays on the user's machine).
        case: String,
        /// What failed.
        detail: String,
    },
    /// Writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// `--frames-root` is not an absolute path.
    #[error("--frames-root {}: not an absolute path", .0.display())]
    RelativeRoot(PathBuf),
    /// The output folder exists and is not an earlier export.
    #[error("{0}: exists and is not a Keyslice export (no {EXPORT_MANIFEST})")]
    NotAnExport(PathBuf),
    /// The output folder is an earlier export that has been changed since it was written.
    #[error(
        "{path}: an earlier Keyslice export that was changed since it was written ({detail}); it is left as it is"
    )]
    ChangedExport {
        /// The output folder.
        path: PathBuf,
        /// The first file found added, changed or missing.
        detail: String,
    },
    /// Nothing to export.
    #[error("no case to export: none is accepted yet")]
    Empty,
    /// Every case to export breaks a rule of [`rules::check`] or cannot be read.
    #[error("no case can be exported: {}", reasons.join("; "))]
    NothingValid {
        /// Each case's workspace id and the rule it breaks.
        reasons: Vec<String>,
    },
}

impl ExportError {
    /// What the user can do about it.
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            Self::Workspace(error) => error.hint(),
            Self::Store(error) => error.hint(),
            Self::Volume { .. } => "check that the case's CT is still where the workspace says",
            Self::Io { .. } => "check that the output folder is writable and the disk has space",
            Self::RelativeRoot(_) => {
                "give the absolute folder the export will be in on the training machine"
            }
            Self::NotAnExport(_) => "choose a new or empty folder, or an earlier export to replace",
            Self::ChangedExport { .. } => {
                "move the files you added or changed out of that folder, or choose another --out"
            }
            Self::NothingValid { .. } => {
                "correct the named cases in the viewer (key slice, box, tumor presence) and export again"
            }
            Self::Empty => {
                "accept reviewed cases (Ctrl+Enter), or pass --include-unreviewed to export the \
                 model's predictions"
            }
        }
    }
}

pub(crate) fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> ExportError + '_ {
    move |source| ExportError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One case as exported.
#[derive(Clone, Debug)]
pub struct ExportCase {
    /// Pseudonym (`case-…`), also the frame folder's name.
    pub pseudonym: String,
    /// The workspace's id (never written to an export).
    pub case_id: String,
    /// `train` or `val`.
    pub split: &'static str,
    /// Review status.
    pub status: ReviewStatus,
    /// The answer: corrected findings, key slice included, identifiers removed.
    pub findings: Findings,
    /// The corrected findings differ from the model's.
    pub hard: bool,
    /// Reviewer of the last change, and when.
    pub reviewer: Option<String>,
    /// When the case was last changed (RFC 3339).
    pub updated_at: Option<String>,
    /// Pseudonymous SOP Instance UID of the key slice (DICOM sources).
    pub key_slice_uid: Option<String>,
    /// Frame → slice index.
    pub frames: Vec<usize>,
    /// Columns and rows of the CT's axial slices (once its frames are written).
    pub slice_size: Option<[u32; 2]>,
    /// Axial slices of the CT (once its frames are written).
    pub slices: Option<u32>,
    /// The CT's path (never written to an export).
    pub volume_path: PathBuf,
    /// The images the prediction was made on, when it says (never written to an export).
    pub images: Option<keyslice_core::prediction::ImageBinding>,
    /// Each lesion's mask as reviewed, by organ and lesion.
    pub masks: std::collections::BTreeMap<
        (keyslice_core::findings::Organ, usize),
        keyslice_core::volume::mask::LesionMask,
    >,
}

impl ExportCase {
    /// The key slice's index.
    #[must_use]
    pub fn key_slice(&self) -> Option<u32> {
        self.findings.key_slice.as_ref().map(|key| key.index)
    }

    /// The frame showing the key slice.
    #[must_use]
    pub fn key_frame(&self) -> Option<usize> {
        self.key_slice()
            .and_then(|key| frames::frame_of(&self.frames, key as usize))
    }

    /// The frames' paths under `root` (`ROOT/frames/case-…/000.png`).
    #[must_use]
    pub fn frame_paths(&self, root: &Path) -> Vec<String> {
        (0..self.frames.len())
            .map(|f| {
                root.join("frames")
                    .join(&self.pseudonym)
                    .join(format!("{f:03}.png"))
                    .to_string_lossy()
                    .into_owned()
            })
            .collect()
    }

    /// The ground truth as the reward reads it ([`keyslice_core::scoring::TruthRecord`]):
    /// the corrected findings and the slice size, under the pseudonym.
    #[must_use]
    pub fn truth(&self) -> keyslice_core::scoring::TruthRecord {
        keyslice_core::scoring::TruthRecord {
            case_id: self.pseudonym.clone(),
            findings: Some(self.findings.without_spans()),
            slice_size: self.slice_size,
            slices: self.slices,
            ..Default::default()
        }
    }
}

/// What an export wrote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExportSummary {
    /// The format.
    pub format: ExportFormat,
    /// Cases in train.
    pub train: usize,
    /// Cases in val.
    pub val: usize,
    /// Hard cases (corrected ≠ predicted).
    pub hard: usize,
    /// Cases left out because they are not accepted (or are flagged).
    pub left_out: usize,
    /// Cases left out because their answer breaks a rule of [`rules::check`]: the case's
    /// workspace id and the rule, as a sentence (shown to the user, never exported).
    pub invalid: Vec<String>,
    /// What a framework needs to be told to read every row (shown to the user).
    pub notes: Vec<String>,
    /// Files written.
    pub files: usize,
}

/// Exports `workspace` into `out` (replacing an earlier export there).
pub fn export_workspace(
    workspace: &Workspace,
    options: &ExportOptions,
    out: &Path,
) -> Result<ExportSummary, ExportError> {
    // The folder itself, never where a link in its place points.
    keyslice_io::atomic::refuse_link(out).map_err(io_error(out))?;
    let out = &resolved_out(out)?;
    let root = match &options.frames_root {
        Some(root) if root.is_absolute() => root.clone(),
        Some(root) => return Err(ExportError::RelativeRoot(root.clone())),
        None => out.clone(),
    };
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = out
        .file_name()
        .map_or_else(|| "export".into(), |n| n.to_string_lossy().to_string());
    std::fs::create_dir_all(parent).map_err(io_error(parent))?;
    let _lock = lock_export(parent, &name)?;
    recover_leftovers(parent, &name, out)?;
    if out.exists() {
        check_replaceable(out)?;
    }
    let pseudonyms =
        Pseudonyms::for_workspace(&workspace.root).map_err(io_error(&workspace.root))?;
    let mut invalid = Vec::new();
    let (mut cases, left_out) = gather(workspace, options, &pseudonyms, &mut invalid)?;
    if cases.is_empty() {
        return Err(if invalid.is_empty() {
            ExportError::Empty
        } else {
            ExportError::NothingValid { reasons: invalid }
        });
    }
    let partial = parent.join(format!(".{name}.partial-{}", std::process::id()));
    if partial.exists() {
        std::fs::remove_dir_all(&partial).map_err(io_error(&partial))?;
    }
    std::fs::create_dir_all(&partial).map_err(io_error(&partial))?;
    let written = (|| -> Result<usize, ExportError> {
        let volumes = write_case_files(&mut cases, options, &partial, &mut invalid)?;
        if cases.is_empty() {
            return Err(ExportError::NothingValid {
                reasons: invalid.clone(),
            });
        }
        let mut files = formats::write(options, &cases, &partial, &root)?;
        files += write_manifest(options, &cases, &partial)?;
        Ok(files + volumes + cases.iter().map(|c| c.frames.len()).sum::<usize>())
    })();
    let files = match written {
        Ok(files) => files,
        Err(error) => {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(error);
        }
    };
    sync_folder(&partial);
    if let Err(error) = place(&partial, out) {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(error);
    }
    let count = |split| cases.iter().filter(|c| c.split == split).count();
    Ok(ExportSummary {
        format: options.format,
        train: count("train"),
        val: count("val"),
        hard: cases.iter().filter(|c| c.hard).count(),
        left_out,
        invalid,
        notes: formats::notes(options, &cases),
        files,
    })
}

/// `out` as an absolute path without `.` or `..` (so `--out .` names the folder itself, and
/// its temporary sibling is made beside it, not inside it).
fn resolved_out(out: &Path) -> Result<PathBuf, ExportError> {
    if out.exists() {
        return out.canonicalize().map_err(io_error(out));
    }
    let absolute = std::path::absolute(out).map_err(io_error(out))?;
    let mut clean = PathBuf::new();
    for component in absolute.components() {
        match component {
            std::path::Component::ParentDir => {
                clean.pop();
            }
            std::path::Component::CurDir => {}
            other => clean.push(other),
        }
    }
    Ok(clean)
}

/// Whether the existing folder `out` may be replaced: it is empty, or it is a Keyslice
/// export whose files are exactly those its manifest lists, each with the SHA-256 written
/// then. Anything a user added or edited there makes the export refuse.
fn check_replaceable(out: &Path) -> Result<(), ExportError> {
    if !out.is_dir() {
        return Err(ExportError::NotAnExport(out.to_path_buf()));
    }
    let present = list_files(out).map_err(io_error(out))?;
    if present.is_empty() {
        return Ok(());
    }
    let manifest_path = out.join(EXPORT_MANIFEST);
    let changed = |detail: String| ExportError::ChangedExport {
        path: out.to_path_buf(),
        detail,
    };
    let Some(manifest) = std::fs::read_to_string(&manifest_path)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .filter(|manifest| manifest.get("keyslice_export").is_some())
    else {
        return Err(ExportError::NotAnExport(out.to_path_buf()));
    };
    let Some(listed) = manifest.get("files").and_then(serde_json::Value::as_object) else {
        return Err(changed(format!(
            "its {EXPORT_MANIFEST} lists no file checksums, so changes cannot be ruled out"
        )));
    };
    for relative in &present {
        if relative == EXPORT_MANIFEST {
            continue;
        }
        let Some(expected) = listed.get(relative).and_then(serde_json::Value::as_str) else {
            return Err(changed(format!("{relative} was added")));
        };
        let actual = file_sha256(&out.join(relative)).map_err(io_error(&out.join(relative)))?;
        if actual != expected {
            return Err(changed(format!("{relative} was edited")));
        }
    }
    if let Some(missing) = listed.keys().find(|relative| !present.contains(*relative)) {
        return Err(changed(format!("{missing} was removed")));
    }
    Ok(())
}

/// Every file under `folder` (links included, not followed), as `/`-separated relative
/// paths, sorted.
fn list_files(folder: &Path) -> std::io::Result<Vec<String>> {
    fn walk(root: &Path, folder: &Path, files: &mut Vec<String>) -> std::io::Result<()> {
        for entry in std::fs::read_dir(folder)? {
            let entry = entry?;
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                walk(root, &path, files)?;
            } else {
                let relative = path.strip_prefix(root).unwrap_or(&path);
                let parts: Vec<String> = relative
                    .components()
                    .map(|part| part.as_os_str().to_string_lossy().to_string())
                    .collect();
                files.push(parts.join("/"));
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    walk(folder, folder, &mut files)?;
    files.sort();
    Ok(files)
}

/// Lower-case hex SHA-256 of a file's bytes.
fn file_sha256(path: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    use std::fmt::Write as _;
    let mut hasher = Sha256::new();
    let mut file = std::fs::File::open(path)?;
    std::io::copy(&mut file, &mut hasher)?;
    let mut hex = String::with_capacity(64);
    for byte in hasher.finalize() {
        let _ = write!(hex, "{byte:02x}");
    }
    Ok(hex)
}

/// Holds `.NAME.lock` beside the export folder for as long as the export runs: a second
/// export to the same folder waits, and whatever temporary folder is found while the lock is
/// held was left by a run that no longer exists.
fn lock_export(parent: &Path, name: &str) -> Result<std::fs::File, ExportError> {
    let path = parent.join(format!(".{name}.lock"));
    let file = keyslice_io::atomic::open_lock_file(&path).map_err(io_error(&path))?;
    file.lock().map_err(io_error(&path))?;
    Ok(file)
}

/// Cleans up after an export that was killed: when `out` is gone but an earlier export was
/// moved aside (`.NAME.previous-PID`), that one is put back; then every `.NAME.partial-PID`
/// and `.NAME.previous-PID` folder is removed. Called with the export lock held.
fn recover_leftovers(parent: &Path, name: &str, out: &Path) -> Result<(), ExportError> {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Ok(());
    };
    let partial_prefix = format!(".{name}.partial-");
    let previous_prefix = format!(".{name}.previous-");
    let mut partials = Vec::new();
    let mut previous = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let file_name = entry.file_name().to_string_lossy().to_string();
        if file_name.starts_with(&partial_prefix) {
            partials.push(entry.path());
        } else if file_name.starts_with(&previous_prefix) {
            previous.push(entry.path());
        }
    }
    previous.sort();
    if !out.exists()
        && let Some(earlier) = previous.pop()
    {
        tracing::info!(from = %earlier.display(), "putting back the export a killed run moved aside");
        std::fs::rename(&earlier, out).map_err(io_error(out))?;
    }
    for leftover in partials.iter().chain(&previous) {
        tracing::info!(folder = %leftover.display(), "removing what a killed export left");
        std::fs::remove_dir_all(leftover).map_err(io_error(leftover))?;
    }
    Ok(())
}

/// Moves the finished `partial` folder to `out`; an earlier export there is moved aside
/// first and removed only after the new one is in place.
fn place(partial: &Path, out: &Path) -> Result<(), ExportError> {
    if out.exists() {
        let aside = out.with_file_name(format!(
            ".{}.previous-{}",
            out.file_name()
                .map_or_else(|| "export".into(), |n| n.to_string_lossy().to_string()),
            std::process::id()
        ));
        std::fs::rename(out, &aside).map_err(io_error(out))?;
        if let Err(source) = std::fs::rename(partial, out) {
            // Put the good one back.
            let _ = std::fs::rename(&aside, out);
            return Err(ExportError::Io {
                path: out.to_path_buf(),
                source,
            });
        }
        let _ = std::fs::remove_dir_all(&aside);
    } else {
        std::fs::rename(partial, out).map_err(io_error(out))?;
    }
    Ok(())
}

/// Flushes every file under `folder` to disk before it is moved into place.
fn sync_folder(folder: &Path) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            sync_folder(&path);
        } else if let Ok(file) = std::fs::File::open(&path) {
            let _ = file.sync_all();
        }
    }
}

/// The cases to export, sorted by pseudonym, and how many were left out.
/// A case whose prediction cannot be read is rebuilt from the findings the review database
/// remembers the review started from; when it holds none, the case is refused (named in
/// `unreadable`), never exported as if the model had said nothing. A review database that
/// fails SQLite's integrity check refuses the whole export.
fn gather(
    workspace: &Workspace,
    options: &ExportOptions,
    pseudonyms: &Pseudonyms,
    unreadable: &mut Vec<String>,
) -> Result<(Vec<ExportCase>, usize), ExportError> {
    let predictions = workspace.predictions()?;
    workspace.health(&predictions)?;
    let store = ReviewStore::open(&workspace.database_path())?;
    let mut cases = Vec::new();
    let mut left_out = 0;
    for entry in &workspace.manifest.cases {
        let state = store.case_state(&entry.case_id)?;
        // A flagged case is one a reviewer marked as wrong or unsure: never training data,
        // not even with --include-unreviewed.
        if state.status == ReviewStatus::Flagged
            || (state.status != ReviewStatus::Done && !options.include_unreviewed)
        {
            left_out += 1;
            continue;
        }
        let remembered = match predictions.get(&entry.case_id) {
            Some(prediction) => Some(Some(model_findings(prediction))),
            None => store
                .base(&entry.case_id)?
                .map(serde_json::from_value::<Option<Findings>>)
                .transpose()
                .map_err(|error| StoreError::Damaged {
                    path: workspace.database_path(),
                    detail: format!(
                        "the remembered findings of {} cannot be read: {error}",
                        entry.case_id
                    ),
                })?,
        };
        let Some(base) = remembered else {
            unreadable.push(if state.status == ReviewStatus::New {
                format!(
                    "{}: not analysed, so there is no answer to export",
                    keyslice_core::text::shown(&entry.case_id)
                )
            } else {
                format!(
                    "{}: its prediction cannot be read from {} and the review database does not hold what the review started from; analyse it again and check it",
                    keyslice_core::text::shown(&entry.case_id),
                    keyslice_review::workspace::PREDICTIONS_FILE
                )
            });
            continue;
        };
        let log = store.corrections(Some(&entry.case_id))?;
        // The model's lesion masks are each lesion's mask until the reviewer changed it.
        let model_masks = predictions
            .get(&entry.case_id)
            .map(keyslice_review::model_masks)
            .unwrap_or_default();
        let reviewed = ReviewedCase::replay_with_masks(base.as_ref(), &model_masks, &log);
        let mut findings = reviewed.findings.clone();
        rules::reconcile(&mut findings, base.as_ref(), &reviewed.changed);
        let hard = base.as_ref().is_some_and(|model| *model != findings);
        let original_uid = findings
            .key_slice
            .as_ref()
            .and_then(|key| key.sop_instance_uid.clone());
        // The answer carries no DICOM identifiers; the key slice keeps index and z.
        if let Some(key) = findings.key_slice.as_mut() {
            key.sop_instance_uid = None;
            key.span = None;
        }
        let pseudonym = pseudonyms.case(&entry.case_id);
        cases.push(ExportCase {
            split: "train",
            pseudonym,
            case_id: entry.case_id.clone(),
            status: state.status,
            findings,
            hard,
            // Who reviewed, as a pseudonym: exports carry no names.
            reviewer: state.reviewer.map(|name| pseudonyms.reviewer(&name)),
            updated_at: state.updated_at,
            key_slice_uid: original_uid.map(|uid| pseudonyms.uid(&uid)),
            frames: Vec::new(),
            slice_size: None,
            slices: None,
            volume_path: entry.volume.clone(),
            images: predictions
                .get(&entry.case_id)
                .and_then(|prediction| prediction.images.clone()),
            masks: reviewed.masks.clone(),
        });
    }
    cases.sort_by(|a, b| a.pseudonym.cmp(&b.pseudonym));
    assign_splits(&mut cases, options);
    Ok((cases, left_out))
}

/// Assigns splits: the cases are ordered by a seeded hash ([`stable_hash`] of seed and
/// pseudonym) and the first `round(fraction · n)` go to `val` (at
/// least one when the fraction is above 0 and there are two cases or more).
fn assign_splits(cases: &mut [ExportCase], options: &ExportOptions) {
    if options.val_fraction <= 0.0 || cases.len() < 2 {
        return;
    }
    let seed = options.seed.to_le_bytes();
    let hash = |pseudonym: &str| stable_hash(seed.iter().chain(pseudonym.as_bytes()));
    let mut order: Vec<(u64, usize)> = cases
        .iter()
        .enumerate()
        .map(|(index, case)| (hash(&case.pseudonym), index))
        .collect();
    order.sort_unstable();
    let val =
        ((cases.len() as f64 * options.val_fraction).round() as usize).clamp(1, cases.len() - 1);
    for &(_, index) in order.iter().take(val) {
        cases[index].split = "val";
    }
}

/// The relative path of a case's CT in an export with volumes (`volumes/case-….nii.gz`).
#[must_use]
pub fn volume_file(pseudonym: &str) -> String {
    format!("volumes/{pseudonym}.nii.gz")
}

/// Loads each case's CT where the export needs it: samples and writes its frames (every
/// format but `keyslices`, whose rows need none) and, with `options.volumes`, writes the CT
/// itself. Returns how many volumes were written.
fn write_case_files(
    cases: &mut Vec<ExportCase>,
    options: &ExportOptions,
    folder: &Path,
    invalid: &mut Vec<String>,
) -> Result<usize, ExportError> {
    let frames_wanted = !matches!(
        options.format,
        ExportFormat::Keyslices | ExportFormat::Segmentation
    );
    let mut volumes = 0;
    let mut kept = Vec::with_capacity(cases.len());
    for mut case in cases.drain(..) {
        case.frames.clear();
        let volume = load_volume(&case)?;
        // Every format's answers pass the same rules before anything of the case is written.
        if let Err(rule) = rules::check(&case.findings, volume.dims()) {
            invalid.push(format!("{}: {rule}", case.case_id));
            continue;
        }
        let [columns, rows, slices] = volume.dims();
        case.slices = u32::try_from(slices).ok();
        case.slice_size = u32::try_from(columns)
            .ok()
            .zip(u32::try_from(rows).ok())
            .map(|(columns, rows)| [columns, rows]);
        if frames_wanted {
            let slices = volume.dims()[2];
            case.frames =
                frames::sample_slices(slices, options.frames, case.key_slice().map(|k| k as usize));
            let frame_folder = folder.join("frames").join(&case.pseudonym);
            std::fs::create_dir_all(&frame_folder).map_err(io_error(&frame_folder))?;
            for (f, &slice) in case.frames.iter().enumerate() {
                let path = frame_folder.join(format!("{f:03}.png"));
                frames::write_frame(&volume, slice, &path).map_err(io_error(&path))?;
            }
        }
        if options.format == ExportFormat::Segmentation {
            let organs = organ_masks(&case, &volume);
            match labels::label_map(&case, &volume, &organs) {
                Ok(map) => labels::write_case(&case, &volume, &map, folder)?,
                Err(reason) => {
                    invalid.push(format!("{}: {reason}", case.case_id));
                    continue;
                }
            }
        }
        if options.volumes {
            write_volume(&volume, &folder.join(volume_file(&case.pseudonym)))?;
            volumes += 1;
        }
        kept.push(case);
    }
    *cases = kept;
    Ok(volumes)
}

/// The organ masks of the case's folder (`segmentations/` beside its `ct.nii.gz`) on the
/// CT's grid; none for a case without such a folder, or whose masks cannot be read.
fn organ_masks(case: &ExportCase, volume: &Volume) -> Vec<keyslice_core::volume::LabelVolume> {
    let Some(folder) = case
        .volume_path
        .parent()
        .filter(|_| case.volume_path.is_file())
        .map(|parent| keyslice_io::cases::CaseFolder::new(parent).masks())
        .filter(|folder| folder.is_dir())
    else {
        return Vec::new();
    };
    keyslice_io::masks::load_masks_onto(&folder, volume).unwrap_or_else(|error| {
        tracing::warn!(case = case.case_id, %error, "organ masks left out");
        Vec::new()
    })
}

/// Writes a CT as NIfTI-1: voxels in HU and the patient geometry, nothing else (the
/// header's description is "Keyslice"; no DICOM field is carried over).
pub(crate) fn write_volume(volume: &Volume, path: &Path) -> Result<(), ExportError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io_error(parent))?;
    }
    write_nifti(volume, path, WriteOptions::default()).map_err(|error| ExportError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(error.to_string()),
    })
}

/// The case's CT: the series its prediction was made on (not whichever series its folder
/// holds most of now), refused when its images are not those any more. An answer is never
/// written beside frames of other images.
fn load_volume(case: &ExportCase) -> Result<Volume, ExportError> {
    let options = LoadOptions {
        series_uid: case
            .images
            .as_ref()
            .map(|images| images.series_uid.clone())
            .filter(|uid| !uid.is_empty()),
    };
    let volume = load_study(&case.volume_path, &options)
        .map(|study| study.volume)
        .map_err(|error| ExportError::Volume {
            case: case.case_id.clone(),
            detail: error.to_string(),
        })?;
    if let Some(changed) = case
        .images
        .as_ref()
        .and_then(|images| images.changed(&volume))
    {
        return Err(ExportError::Volume {
            case: case.case_id.clone(),
            detail: format!(
                "{changed}; its prediction and review belong to the images it was analysed on: restore them, or analyse the case again (keyslice workspace analyze --force) and check its review"
            ),
        });
    }
    Ok(volume)
}

/// `export.json`: what was exported and how (no dates, no paths: deterministic and
/// de-identified).
fn write_manifest(
    options: &ExportOptions,
    cases: &[ExportCase],
    folder: &Path,
) -> Result<usize, ExportError> {
    #[derive(Serialize)]
    struct CaseIndex<'a> {
        case: &'a str,
        split: &'a str,
        status: ReviewStatus,
        hard: bool,
        key_slice: Option<u32>,
        key_frame: Option<usize>,
        frame_slices: &'a [usize],
        #[serde(skip_serializing_if = "Option::is_none")]
        volume: Option<String>,
    }
    let manifest = serde_json::json!({
        "keyslice_export": 1,
        "keyslice_version": env!("CARGO_PKG_VERSION"),
        "format": options.format,
        "include_unreviewed": options.include_unreviewed,
        "val_fraction": options.val_fraction,
        "seed": options.seed,
        "frames_per_case": options.frames,
        "volumes": options.volumes.then_some("volumes/<case>.nii.gz: the CT in HU with its geometry (NIfTI-1), no other field"),
        "frame_sampling": "evenly from the first to the last axial slice, the frame nearest the key slice moved onto it; grey PNG, window 400/40 HU",
        "cases": cases.iter().map(|case| CaseIndex {
            case: &case.pseudonym,
            split: case.split,
            status: case.status,
            hard: case.hard,
            key_slice: case.key_slice(),
            key_frame: case.key_frame(),
            frame_slices: &case.frames,
            volume: options.volumes.then(|| volume_file(&case.pseudonym)),
        }).collect::<Vec<_>>(),
    });
    // The checksum of every file written so far (all but this manifest): only an export
    // that still matches them is ever replaced.
    let mut checksums = serde_json::Map::new();
    for relative in list_files(folder).map_err(io_error(folder))? {
        let file = folder.join(&relative);
        checksums.insert(
            relative,
            serde_json::Value::String(file_sha256(&file).map_err(io_error(&file))?),
        );
    }
    let mut manifest = manifest;
    manifest["files"] = serde_json::Value::Object(checksums);
    let path = folder.join(EXPORT_MANIFEST);
    let text = serde_json::to_string_pretty(&manifest).map_err(|e| ExportError::Io {
        path: path.clone(),
        source: std::io::Error::other(e),
    })?;
    std::fs::write(&path, text + "\n").map_err(io_error(&path))?;
    Ok(1)
}

/// The answer text: `findings` (key slice included) as the model's output format writes it.
#[must_use]
pub fn answer_text(findings: &Findings) -> String {
    keyslice_core::findings::write_report(findings)
}
