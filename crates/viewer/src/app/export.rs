//! Exporting the open workspace's accepted cases from the File menu, as a job; the outcome
//! is shown as a notice.

use std::path::Path;

use super::job::{Job, Polled};
use keyslice_export::{ExportError, ExportFormat, ExportOptions, export_workspace};
use keyslice_review::workspace::Workspace;

/// A running export, if any.
#[derive(Default)]
pub(super) struct ExportJob {
    job: Option<Job<String>>,
}

impl ExportJob {
    /// Whether an export is running.
    pub(super) fn running(&self) -> bool {
        self.job.is_some()
    }

    /// Exports the accepted cases of the workspace at `root` into `ROOT/exports/NAME` off the
    /// UI thread. Returns the notice to show meanwhile.
    pub(super) fn start(
        &mut self,
        ctx: &egui::Context,
        root: &Path,
        format: ExportFormat,
        name: &str,
    ) -> String {
        let root = root.to_path_buf();
        let out = root.join("exports").join(name);
        self.job = Some(Job::spawn(ctx, move |send| {
            let options = ExportOptions {
                format,
                ..ExportOptions::default()
            };
            let line = match Workspace::open(&root)
                .map_err(ExportError::from)
                .and_then(|workspace| export_workspace(&workspace, &options, &out))
            {
                Ok(summary) => format!(
                    "exported {} case(s) ({} hard) to {}",
                    summary.train + summary.val,
                    summary.hard,
                    out.display()
                ),
                Err(error) => format!("export failed: {error} ({})", error.hint()),
            };
            send(line);
        }));
        format!("exporting {name}…")
    }

    /// Replaces the "exporting…" notice with the outcome once it has come.
    pub(super) fn poll(&mut self, notices: &mut Vec<String>) {
        let Some(job) = &self.job else {
            return;
        };
        match job.poll() {
            Polled::Pending => {}
            Polled::Message(line) => {
                self.job = None;
                notices.retain(|notice| !notice.starts_with("exporting "));
                tracing::info!(%line, "export finished");
                notices.push(line);
            }
            Polled::Ended => {
                self.job = None;
                notices.push("the export stopped unexpectedly".into());
            }
        }
    }
}
