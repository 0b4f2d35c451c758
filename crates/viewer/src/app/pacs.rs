//! A study opened from a PACS: looked up, then shown while it arrives, then opened as a case
//! of the PACS workspace with its review and the stored AI result (the use case itself is
//! `keyslice_workflow::pacs`).

use std::path::Path;
use std::sync::Arc;

use keyslice_workflow::pacs::Opened;
use keyslice_workflow::{Error, Report};

use super::arrival::Arrival;

/// Opens the study a `dicomweb+http(s)://…/studies/UID` URL names as it arrives. Before the
/// window opens: the study's stored Keyslice documents (small) and its CT series are looked
/// up. Then, behind the window, the key image of the stored AI result is fetched first, the
/// series streamed into the PACS workspace's cache (made on first use), and the case added to
/// that workspace; the window shows the images as they come and opens the case when the
/// retrieve has ended. What happens on the way (each reviewer's stored correction among it)
/// is told to `report`. The case joins the workspace `workspace` (usually
/// `keyslice_workflow::pacs::pacs_workspace()`); `open` makes what to open of it.
pub fn arriving<T: Send + 'static>(
    url: &str,
    workspace: &Path,
    report: Arc<dyn Report + Send>,
    open: fn(Opened) -> T,
) -> Result<Arrival<T>, Error> {
    let located = keyslice_workflow::pacs::locate_study(url, workspace)?;
    let arrival = Arrival::new(
        located.folder.clone(),
        located.instances,
        located
            .key_sop
            .as_ref()
            .map(|sop| located.folder.join(format!("{sop}.dcm"))),
        format!("study {} from {}", located.study, located.server.name()),
    );
    let handle = arrival.clone();
    std::thread::spawn(move || {
        located.fetch_key_image();
        let outcome = located
            .open(report.as_ref())
            .map(open)
            .map_err(|error| (error.to_string(), error.hint()));
        handle.finish(outcome);
    });
    Ok(arrival)
}
