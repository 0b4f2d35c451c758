//! Review workspaces without the window: made from inputs (case folders, datasets, DICOM
//! series, PACS queries), and their worklist.

use std::path::{Path, PathBuf};

use keyslice_review::workspace::{DATABASE_FILE, MANIFEST_FILE, PREDICTIONS_FILE, Workspace};

use crate::{Error, Outcome, Report};

/// What [`create_workspace`] did.
pub struct WorkspaceMade {
    dir: PathBuf,
    /// Cases added.
    pub added: usize,
    /// PACS studies that could not be retrieved.
    pub failed: usize,
    /// Cases in the workspace now.
    pub cases: usize,
}

/// Makes a workspace in `dir`, or extends the one there, with the cases of `inputs`: paths
/// (case folders, datasets, NIfTI files, DICOM series) and DICOMweb URLs (each study the URL
/// names retrieved; one that cannot be is told to `report`).
pub fn create_workspace(
    dir: &Path,
    inputs: &[PathBuf],
    report: &dyn Report,
) -> Result<WorkspaceMade, Error> {
    let (urls, paths): (Vec<&PathBuf>, Vec<&PathBuf>) = inputs
        .iter()
        .partition(|input| keyslice_pacs::DicomWebUrl::is_dicomweb(&input.to_string_lossy()));
    let (mut from_pacs, mut failed) = (0, 0);
    for url in urls {
        let imported = crate::pacs::import_studies(dir, &url.to_string_lossy(), report)?;
        from_pacs += imported.added;
        failed += imported.failed;
    }
    let paths: Vec<PathBuf> = paths.into_iter().cloned().collect();
    let (workspace, added) = if paths.is_empty() {
        (Workspace::open(dir)?, 0)
    } else {
        Workspace::create_or_extend(dir, &paths)?
    };
    Ok(WorkspaceMade {
        dir: dir.to_path_buf(),
        added: added + from_pacs,
        failed,
        cases: workspace.manifest.cases.len(),
    })
}

impl Outcome for WorkspaceMade {
    fn json(&self) -> String {
        serde_json::json!({
            "dir": self.dir,
            "added": self.added,
            "failed": self.failed,
            "cases": self.cases,
        })
        .to_string()
    }

    fn text(&self) -> String {
        format!(
            "{} case(s) added; {} in {} ({MANIFEST_FILE}, {PREDICTIONS_FILE}, {DATABASE_FILE})",
            self.added,
            self.cases,
            self.dir.display(),
        )
    }
}

/// A workspace's worklist, a line per case: a table, or with `json` one JSON object each.
/// What is wrong with the workspace itself is told to `report`.
pub fn worklist_lines(dir: &Path, json: bool, report: &dyn Report) -> Result<Vec<String>, Error> {
    use keyslice_core::text::shown;
    let workspace = Workspace::open(dir)?;
    let predictions = workspace.predictions()?;
    for warning in workspace.health(&predictions)?.warnings() {
        report.warning(&format!("{}: {warning}", dir.display()));
    }
    let rows = workspace.worklist(&predictions)?;
    let mut lines = Vec::new();
    if !json {
        lines.push(format!(
            "{:<24} {:<10} {:>11}  {:<16}  needs a look because",
            "case", "status", "consistency", "reviewer"
        ));
    }
    for row in rows {
        lines.push(if json {
            serde_json::to_string(&row).map_err(std::io::Error::from)?
        } else {
            format!(
                "{:<24} {:<10} {:>11}  {:<16}  {}",
                shown(&row.case_id),
                row.status.label(),
                row.consistency
                    .map_or("–".to_string(), |c| format!("{c:.2}")),
                shown(&row.reviewer.unwrap_or_default()),
                shown(&row.attention.unwrap_or_default())
            )
        });
    }
    Ok(lines)
}
