//! The demo workspace that `keyslice` opens when started without arguments: a few phantom
//! cases generated on first run into the user's data folder, each analysed by keyslice-tiny
//! with its Prediction saved beside it as `prediction.json`, so a fresh machine shows a
//! report, its key slice, the verifier's local description and the consistency with no
//! download. Later starts find the cases and predictions and open at once; a case or
//! prediction that is missing or was written by another model version is made again.
//!
//! Everything is written through temporary names renamed into place, so a run killed midway
//! leaves no half-written case behind.

use std::path::{Path, PathBuf};

use crate::infer::embedded::{TinyDiagnoser, TinyModel, TinyVerifier};
use crate::infer::{Diagnoser, Prediction, run_pipeline};
use crate::io::nifti::read_nifti;
use crate::phantom::write::write_case;
use crate::phantom::{PhantomOptions, case_id, generate};

/// Seed of the demo phantoms (never used for training or the held-out figures).
pub const DEMO_SEED: u64 = 2026;
/// Number of demo cases.
pub const DEMO_CASES: u32 = 3;
/// In-plane matrix of the demo phantoms: a 1.2–1.8 mm grid, quick to make on a laptop.
pub const DEMO_MATRIX: usize = 256;
/// A case folder's saved analysis, shown when the case is opened.
pub const PREDICTION_FILE: &str = "prediction.json";

/// The user's data folder for Keyslice: `$KEYSLICE_DATA_DIR`, else `%LOCALAPPDATA%\keyslice`
/// on Windows, `$XDG_DATA_HOME/keyslice`, or `~/.local/share/keyslice`.
#[must_use]
pub fn data_dir() -> Option<PathBuf> {
    let from_env = |name: &str| {
        std::env::var_os(name)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    };
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

/// Where the demo workspace lives.
#[must_use]
pub fn demo_dir() -> Option<PathBuf> {
    data_dir().map(|folder| folder.join("demo"))
}

/// What failed while preparing the workspace, and what to do.
pub type WorkspaceError = (String, String);

/// Makes sure the demo cases and their predictions exist in `folder`, generating and
/// analysing what is missing; `progress(text, fraction)` is called before each step. Returns
/// the case folders in order.
pub fn prepare_demo(
    folder: &Path,
    progress: &mut dyn FnMut(&str, f32),
) -> Result<Vec<PathBuf>, WorkspaceError> {
    let writable_hint = || {
        "set KEYSLICE_DATA_DIR to a writable folder, or open the built-in demo volume from the \
         File menu"
            .to_string()
    };
    std::fs::create_dir_all(folder).map_err(|error| {
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
        let case = folder.join(&id);
        if !case.join("ct.nii.gz").is_file() {
            progress(
                &format!("generating demo case {} of {DEMO_CASES} ({id})", index + 1),
                index as f32 / total,
            );
            let phantom = generate(DEMO_SEED, index, options);
            if let Err(error) = write_case(folder, &phantom)
                && !case.join("ct.nii.gz").is_file()
            {
                return Err((error.to_string(), writable_hint()));
            }
        }
        cases.push(case);
    }
    let model = TinyModel::embedded().map_err(|e| (e.to_string(), e.hint().to_string()))?;
    let current = TinyDiagnoser(&model).model_id();
    for (done, case) in cases.iter().enumerate() {
        if let Some(saved) = read_prediction(case).ok().flatten()
            && saved.diagnoser == current
        {
            continue;
        }
        let id = case
            .file_name()
            .map(|name| name.to_string_lossy().to_string())
            .unwrap_or_default();
        progress(
            &format!(
                "analysing demo case {} of {DEMO_CASES} with keyslice-tiny",
                done + 1
            ),
            (DEMO_CASES as f32 + done as f32) / total,
        );
        let ct = case.join("ct.nii.gz");
        let volume = read_nifti(&ct).map_err(|error| {
            (
                format!("{}: {error}", ct.display()),
                format!("remove {} and start again", case.display()),
            )
        })?;
        let prediction = run_pipeline(
            &id,
            &volume,
            &TinyDiagnoser(&model),
            Some(&TinyVerifier(&model)),
        )
        .map_err(|error| (error.to_string(), error.hint().to_string()))?;
        write_prediction(case, &prediction)
            .map_err(|error| (format!("{}: {error}", case.display()), writable_hint()))?;
    }
    progress("opening the first demo case", 1.0);
    Ok(cases)
}

/// The saved analysis of a case folder: `None` when there is none, an error text when the
/// file cannot be read or is not a Prediction.
pub fn read_prediction(case: &Path) -> Result<Option<Prediction>, String> {
    let path = case.join(PREDICTION_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    let text =
        std::fs::read_to_string(&path).map_err(|error| format!("{}: {error}", path.display()))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|error| format!("{}: not a Keyslice prediction: {error}", path.display()))
}

/// Saves `prediction` as the case folder's `prediction.json` (temporary file renamed into
/// place).
pub fn write_prediction(case: &Path, prediction: &Prediction) -> std::io::Result<()> {
    let path = case.join(PREDICTION_FILE);
    let temporary = case.join(format!(".{PREDICTION_FILE}.partial-{}", std::process::id()));
    let text = serde_json::to_string_pretty(prediction).map_err(std::io::Error::other)?;
    std::fs::write(&temporary, text + "\n")?;
    std::fs::rename(&temporary, &path)
}
