//! A reviewed workspace exported as de-identified training data (see `keyslice_export`):
//! the workspace's own health told first, what was left out and why told after.

use std::path::{Path, PathBuf};

use keyslice_export::{ExportOptions, ExportSummary, export_workspace};
use keyslice_review::workspace::Workspace;

use crate::{Error, Outcome, Report};

/// An export done, and where.
pub struct Exported {
    /// What was written and left out.
    pub summary: ExportSummary,
    out: PathBuf,
}

/// Exports the workspace `dir` to `out`; the workspace's warnings, the cases left out with
/// their reasons and the export's notes are told to `report`.
pub fn export(
    dir: &Path,
    options: &ExportOptions,
    out: &Path,
    report: &dyn Report,
) -> Result<Exported, Error> {
    let workspace = Workspace::open(dir)?;
    let predictions = workspace.predictions()?;
    for warning in workspace.health(&predictions)?.warnings() {
        report.warning(&warning);
    }
    let summary = export_workspace(&workspace, options, out)?;
    for reason in &summary.invalid {
        report.note(&format!("left out {reason}"));
    }
    for note in &summary.notes {
        report.note(&format!("note: {note}"));
    }
    if let Some(root) = &options.frames_root {
        report.note(&format!(
            "note: the rows name their frames under {}: place the export there before training (TRAINING.md says how each framework reads it)",
            root.display()
        ));
    }
    Ok(Exported {
        summary,
        out: out.to_path_buf(),
    })
}

impl Outcome for Exported {
    fn json(&self) -> String {
        serde_json::to_string(&self.summary).unwrap_or_default()
    }

    fn text(&self) -> String {
        let summary = &self.summary;
        // The reasons are listed only when there are some.
        let invalid = match summary.invalid.len() {
            0 => String::new(),
            count => format!("; {count} left out for the reasons below"),
        };
        format!(
            "exported {} case(s) ({} train, {} val; {} hard) to {}: {} file(s); {} not accepted or flagged, left out{invalid}",
            summary.train + summary.val,
            summary.train,
            summary.val,
            summary.hard,
            self.out.display(),
            summary.files,
            summary.left_out,
        )
    }
}
