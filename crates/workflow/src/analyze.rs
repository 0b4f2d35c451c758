//! Analyse one case: load its CT, run the model (diagnoser, key slice, verifier,
//! consistency), keep the volume's warnings. One function for `analyze`, `batch`,
//! `workspace analyze` and the window; and a workspace analysed case by case.

use std::path::Path;
use std::time::Instant;

use keyslice_core::prediction::Prediction;
use keyslice_infer::backend::Backend;
use keyslice_infer::{InferError, ServerFault};
use keyslice_io::cases::CaseFolder;
use keyslice_io::http::NetFault;
use keyslice_io::{LoadOptions, Study, load_study};
use keyslice_review::workspace::{Workspace, WorkspaceLock};
use serde::Serialize;

use crate::{Error, Report};

/// `BDMAP_0001` for `…/BDMAP_0001/ct.nii.gz`, else the file or folder name.
#[must_use]
pub fn case_name(path: &Path) -> String {
    let name = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default()
    };
    let file = name(path);
    if (file == CaseFolder::CT || file == CaseFolder::CT_UNCOMPRESSED)
        && let Some(parent) = path.parent()
    {
        return name(parent);
    }
    file.trim_end_matches(".gz")
        .trim_end_matches(".nii")
        .to_string()
}

/// Loads a case's CT; a decoder that stops on bad data is this case's error, not a crash.
pub fn load_case(path: &Path) -> Result<Study, Error> {
    keyslice_io::limits::contain(|| load_study(path, &LoadOptions::default()))?.map_err(Error::from)
}

/// Runs the model on a loaded case: the prediction, with the volume's warnings beside the
/// model's. The study is dropped before this returns.
pub fn analyse_study(
    backend: &Backend,
    case_id: &str,
    study: Study,
    verify: bool,
) -> Result<Prediction, InferError> {
    let ran = backend.run(case_id, &study.volume, verify);
    let warnings = study.volume.warnings().to_vec();
    drop(study);
    let mut prediction = ran?;
    prediction.warnings.extend(warnings);
    Ok(prediction)
}

/// Analyses one case from its files: [`load_case`] then [`analyse_study`], a panic in
/// third-party code (a codec, the model) being this case's error. Without a `case_id` the
/// case is named after its files ([`case_name`]).
pub fn analyse_case(
    backend: &Backend,
    case_id: Option<&str>,
    path: &Path,
    verify: bool,
) -> Result<Prediction, Error> {
    let study = load_case(path)?;
    let case_id = case_id.map_or_else(|| case_name(&study.path), str::to_string);
    keyslice_io::limits::contain(|| analyse_study(backend, &case_id, study, verify))?
        .map_err(Error::from)
}

/// The warning for a prediction whose CT went to `server` as images because the server
/// refused video (`reason`), when it did: a model trained on videos was not trained on
/// images.
#[must_use]
pub fn video_refused_warning(server: &str, prediction: &Prediction) -> Option<String> {
    let reason = prediction.video_refused.as_deref()?;
    let settings = if ["media_io_kwargs", "mm_kwargs", "mm-kwargs"]
        .iter()
        .any(|needle| reason.contains(needle))
    {
        " (vLLM refuses per-request media settings unless started with --trust-request-mm-kwargs; or give them server-wide: --media-io-kwargs '{\"video\": {\"num_frames\": -1}}')"
    } else {
        ""
    };
    Some(format!(
        "{server} refused the CT as a video ({reason}){settings}; its cases go as images, which a model trained on videos was not trained on; --media video makes this an error"
    ))
}

/// A prediction as `analyze` prints it: the model (with what it is not for), the report, the
/// key slice, the verifier's description, the consistency per attribute, the warnings and
/// the time taken. `embedded`: the model is keyslice-tiny, trained on phantoms.
#[must_use]
pub fn prediction_text(prediction: &Prediction, embedded: bool) -> String {
    use keyslice_core::prediction::OutOfDomain;
    use std::fmt::Write as _;
    let mut out = String::new();
    let case_id = &prediction.case_id;
    // Writing to a String cannot fail.
    let caveat = if embedded {
        " (synthetic-trained; not for clinical use)"
    } else {
        " (research model output; not for clinical use)"
    };
    let _ = writeln!(
        out,
        "case {case_id}: {} {}{caveat}",
        prediction.diagnoser.id, prediction.diagnoser.version
    );
    if let Some(unfamiliar) = &prediction.out_of_domain {
        let _ = writeln!(out, "\n{}", OutOfDomain::LABEL.to_uppercase());
        for reason in &unfamiliar.reasons {
            let _ = writeln!(out, "  {}", keyslice_core::text::shown_lines(reason));
        }
    }
    let _ = writeln!(
        out,
        "\n{}",
        keyslice_core::text::shown_lines(prediction.report.trim_end())
    );
    let _ = match &prediction.key_slice {
        Some(key) => writeln!(
            out,
            "\nkey slice     {} (z = {:.1} mm)",
            key.index, key.z_mm
        ),
        None => writeln!(
            out,
            "\nkey slice     none: the findings have no evidence slice (check the case for a missed tumor)"
        ),
    };
    if let Some(text) = &prediction.local_description {
        let _ = writeln!(
            out,
            "local         {}",
            keyslice_core::text::shown_lines(text.trim_end()).replace('\n', "\n              ")
        );
    }
    if let Some(consistency) = &prediction.consistency {
        let part = |value: Option<f64>| value.map_or("–".to_string(), |v| format!("{v:.2}"));
        let _ = writeln!(
            out,
            "consistency   {:.2} (organ {:.2}, location {}, attenuation {}, size {})",
            consistency.score,
            consistency.organ,
            part(consistency.location),
            part(consistency.attenuation),
            part(consistency.size)
        );
    }
    for warning in &prediction.warnings {
        let _ = writeln!(out, "warning       {warning}");
    }
    if prediction.out_of_domain.is_some() {
        let _ = writeln!(
            out,
            "note          the consistency above is not evidence: the model does not know CTs like this one"
        );
    }
    let _ = writeln!(
        out,
        "time          {:.0} ms (diagnose {:.0}, verify {:.0})\n",
        prediction.timings_ms.total, prediction.timings_ms.diagnose, prediction.timings_ms.verify
    );
    out
}

/// Whose fault a failed case is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The case's own (its files, its volume).
    Case,
    /// The model server's (an error status, a garbled answer).
    Server,
    /// The server cannot be reached now: the case can go to another server.
    Unreachable,
}

impl Fault {
    /// Whose fault `error` is: the server cannot be reached now (refused, unreachable, no
    /// answer), it failed otherwise (or the model did), or the case's volume is not one the
    /// model reads.
    #[must_use]
    pub fn of(error: &InferError) -> Self {
        match error {
            InferError::Server {
                fault: ServerFault::Net(net),
                ..
            } if *net != NetFault::Certificate => Self::Unreachable,
            InferError::Volume(_) | InferError::NotAnalysable(_) | InferError::BurnedIn(_) => {
                Self::Case
            }
            InferError::Server { .. } | InferError::Model { .. } | InferError::Run { .. } => {
                Self::Server
            }
        }
    }
}

/// A case of [`analyse_workspace`] that failed.
#[derive(Debug, Clone, Serialize)]
pub struct CaseFailure {
    /// The case.
    pub case: String,
    /// What went wrong (shown as text).
    pub error: String,
    /// What to do.
    pub hint: String,
}

/// What [`analyse_workspace`] did.
#[derive(Debug, Clone, Serialize)]
pub struct WorkspaceAnalysis {
    /// The workspace.
    pub dir: std::path::PathBuf,
    /// The model that analysed.
    pub model: keyslice_core::prediction::ModelId,
    /// Cases analysed now.
    pub analysed: usize,
    /// Cases the same model had analysed already.
    pub skipped: usize,
    /// Cases that failed.
    pub failures: Vec<CaseFailure>,
}

impl crate::Outcome for WorkspaceAnalysis {
    fn json(&self) -> String {
        serde_json::json!({
            "dir": self.dir,
            "analysed": self.analysed,
            "skipped": self.skipped,
            "failed": self.failures.len(),
            "model": {"id": self.model.id, "version": self.model.version},
            "failures": self.failures,
        })
        .to_string()
    }

    fn text(&self) -> String {
        format!(
            "{} analysed, {} already analysed by {} {}, {} failed",
            self.analysed,
            self.skipped,
            self.model.id,
            self.model.version,
            self.failures.len()
        )
    }
}

/// Analyses a workspace's cases that the backend's model has not analysed yet (all with
/// `force`), appending each prediction as it comes. One analysis of a workspace at a time:
/// a second waits, then finds the cases done. A case that fails is told to `report` and the
/// others go on.
pub fn analyse_workspace(
    dir: &Path,
    backend: &Backend,
    force: bool,
    report: &dyn Report,
) -> Result<WorkspaceAnalysis, Error> {
    use keyslice_core::text::shown;
    let workspace = Workspace::open(dir)?;
    let _lock = WorkspaceLock::acquire(dir, || {
        report.note(&format!(
            "waiting: another keyslice is analysing {}; this run continues when it ends",
            dir.display()
        ));
    })?;
    let current = backend.model_id();
    let predictions = workspace.predictions()?;
    for damaged in &predictions.damaged {
        report.warning(&format!(
            "{}: {damaged} (skipped)",
            workspace.predictions_path().display()
        ));
    }
    let total = workspace.manifest.cases.len();
    let started = Instant::now();
    let mut analysis = WorkspaceAnalysis {
        dir: dir.to_path_buf(),
        model: current.clone(),
        analysed: 0,
        skipped: 0,
        failures: Vec::new(),
    };
    for (index, case) in workspace.manifest.cases.iter().enumerate() {
        if !force
            && predictions
                .get(&case.case_id)
                .is_some_and(|p| p.diagnoser == current)
        {
            analysis.skipped += 1;
            continue;
        }
        let finished = analysis.analysed + analysis.failures.len();
        let seconds = started.elapsed().as_secs_f64();
        let pace = if finished > 0 {
            let rate = finished as f64 / seconds.max(1e-9);
            // The cases left, as if none of them were analysed already (an upper bound).
            let left = total - index;
            format!(", {rate:.2} cases/s, ETA {:.0} s", left as f64 / rate)
        } else {
            String::new()
        };
        report.note(&format!(
            "[{}/{total}] {}{pace}",
            index + 1,
            shown(&case.case_id)
        ));
        let result =
            analyse_case(backend, Some(&case.case_id), &case.volume, true).and_then(|prediction| {
                if let Some(unfamiliar) = &prediction.out_of_domain {
                    report.warning(&format!(
                        "{}: {}",
                        shown(&case.case_id),
                        unfamiliar.sentence()
                    ));
                }
                Ok(workspace.append_prediction(&prediction)?)
            });
        match result {
            Ok(()) => analysis.analysed += 1,
            Err(error) => {
                report.failed(Some(&case.case_id), &error);
                analysis.failures.push(CaseFailure {
                    case: case.case_id.clone(),
                    error: shown(&error.to_string()).into_owned(),
                    hint: error.hint(),
                });
            }
        }
    }
    Ok(analysis)
}
