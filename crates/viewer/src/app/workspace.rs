//! The demo workspace that `keyslice` opens when started without arguments: a review
//! workspace (see `review::workspace`) of a few phantom cases generated on first run into the
//! user's data folder and analysed by keyslice-tiny, so a fresh machine shows a report, its
//! key slice, the verifier's local description and the consistency with no download. Later
//! starts find the cases and predictions and open at once; a case that is missing, or has no
//! prediction from the embedded model's version, is made again.
//!
//! Cases are written through temporary folders renamed into place and predictions are
//! appended line by line and synced, so a run killed midway leaves nothing half-written that
//! counts.

use std::path::{Path, PathBuf};

use keyslice_infer::embedded::{TinyDiagnoser, TinyModel, TinyVerifier};
use keyslice_infer::{Diagnoser, run_pipeline};
use keyslice_io::nifti::read_nifti;
use keyslice_phantom::write::write_case;
use keyslice_phantom::{PhantomOptions, case_id, generate};
use keyslice_review::workspace::Workspace;

/// Seed of the demo phantoms (never used for training or the held-out figures).
pub const DEMO_SEED: u64 = 2026;
/// Number of demo cases.
pub const DEMO_CASES: u32 = 3;
/// In-plane matrix of the demo phantoms: a 1.2–1.8 mm grid, quick to make on a laptop.
pub const DEMO_MATRIX: usize = 256;

/// The user's data folder for Keyslice: `$KEYSLICE_DATA_DIR`, else `%LOCALAPPDATA%\keyslice`
/// on Windows, `$XDG_DATA_HOME/keyslice`, or `~/.local/share/keyslice`.
#[must_use]
pub fn data_dir() -> Option<PathBuf> {
    let from_env = super::settings::env_folder;
    if let Some(folder) = from_env("KEYSLICE_DATA_DIR") {
        Some(folder)
    } else if cfg!(windows) {
        Some(from_env("LOCALAPPDATA")?.join("keyslice"))
    } else if let Some(data) = from_env("XDG_DATA_HOME") {
        Some(data.join("keyslice"))
    } else {
        Some(
            from_env("HOME")?
                .join(".local")
                .join("share")
                .join("keyslice"),
        )
    }
}

/// The scratch workspace of a study opened by path, `DATA/scratch/NAME-HASH` (HASH: FNV-1a of
/// the absolute path), created on first use: one per study, so what a reviewer corrects on a
/// single file is recorded like any workspace case and found again when the same study is
/// opened. A folder of case folders gives a workspace of all of them.
pub fn scratch_workspace(data: &Path, study: &Path) -> Result<PathBuf, WorkspaceError> {
    let absolute = std::path::absolute(study)
        .map_err(|error| (format!("{}: {error}", study.display()), String::new()))?;
    // A case folder's `ct.nii.gz` is named after its folder.
    let file_name = |path: &Path| {
        path.file_name()
            .map(|name| name.to_string_lossy().to_string())
            .unwrap_or_default()
    };
    let mut name = file_name(&absolute);
    if name.starts_with("ct.") {
        name = absolute.parent().map(file_name).unwrap_or(name);
    }
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let hash = keyslice_review::workspace::stable_hash(absolute.as_os_str().as_encoded_bytes());
    let root = data.join("scratch").join(format!("{name}-{hash:016x}"));
    Workspace::create_or_extend(&root, &[absolute])
        .map_err(|error| (error.to_string(), error.hint().to_string()))?;
    Ok(root)
}

/// Where the demo workspace lives.
#[must_use]
pub fn demo_dir() -> Option<PathBuf> {
    data_dir().map(|folder| folder.join("demo"))
}

/// What failed while preparing the workspace, and what to do.
pub type WorkspaceError = (String, String);

/// Where the demo workspace's phantom case folders are kept.
#[must_use]
pub fn demo_cases_folder(demo: &Path) -> PathBuf {
    demo.join("cases")
}

/// Makes sure the demo cases and their predictions exist in the workspace `folder`,
/// generating and analysing what is missing; `progress(text, fraction)` is called before each
/// step. Returns the workspace.
pub fn prepare_demo(
    folder: &Path,
    progress: &mut dyn FnMut(&str, f32),
) -> Result<Workspace, WorkspaceError> {
    let writable_hint = || {
        "set KEYSLICE_DATA_DIR to a writable folder, or open the built-in demo volume from the \
         File menu"
            .to_string()
    };
    let cases_folder = demo_cases_folder(folder);
    std::fs::create_dir_all(&cases_folder).map_err(|error| {
        (
            format!(
                "cannot create the demo workspace {}: {error}",
                folder.display()
            ),
            writable_hint(),
        )
    })?;
    let options = PhantomOptions {
        matrix: DEMO_MATRIX,
        slice_mm: None,
    };
    let total = DEMO_CASES as f32 * 2.0;
    let mut cases = Vec::new();
    for index in 0..DEMO_CASES {
        let id = case_id(DEMO_SEED, index);
        let case = cases_folder.join(&id);
        if !keyslice_io::cases::CaseFolder::new(&case).ct().is_file() {
            progress(
                &format!("generating demo case {} of {DEMO_CASES} ({id})", index + 1),
                index as f32 / total,
            );
            let phantom = generate(DEMO_SEED, index, options);
            if let Err(error) = write_case(&cases_folder, &phantom)
                && !keyslice_io::cases::CaseFolder::new(&case).ct().is_file()
            {
                return Err((error.to_string(), writable_hint()));
            }
        }
        cases.push(case);
    }
    let (workspace, _) = Workspace::create_or_extend(folder, &cases)
        .map_err(|error| (error.to_string(), error.hint().to_string()))?;
    let predictions = workspace
        .predictions()
        .map_err(|error| (error.to_string(), error.hint().to_string()))?;
    let model = TinyModel::embedded().map_err(|e| (e.to_string(), e.hint().to_string()))?;
    let current = TinyDiagnoser(&model).model_id();
    for (done, case) in workspace.manifest.cases.iter().enumerate() {
        if predictions
            .get(&case.case_id)
            .is_some_and(|saved| saved.diagnoser == current)
        {
            continue;
        }
        progress(
            &format!(
                "analysing demo case {} of {} with keyslice-tiny",
                done + 1,
                workspace.manifest.cases.len()
            ),
            (DEMO_CASES as f32 + done as f32) / total,
        );
        let volume = read_nifti(&case.volume).map_err(|error| {
            (
                format!("{}: {error}", case.volume.display()),
                format!("remove {} and start again", folder.display()),
            )
        })?;
        let prediction = run_pipeline(
            &case.case_id,
            &volume,
            &TinyDiagnoser(&model),
            Some(&TinyVerifier(&model)),
        )
        .map_err(|error| (error.to_string(), error.hint().to_string()))?;
        workspace
            .append_prediction(&prediction)
            .map_err(|error| (error.to_string(), writable_hint()))?;
    }
    progress("opening the worklist", 1.0);
    Ok(workspace)
}
