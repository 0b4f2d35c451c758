//! Keyslice's use cases, one function each, shared by both faces: the `keyslice` command
//! parses arguments and prints what these return; the window calls the same functions.
//!
//! - [`analyze`]: analyse one case (load, run the model, keep the volume's warnings), for
//!   `analyze`, `batch`, `workspace analyze` and the window's live analysis.
//! - [`backend`]: a model backend from its settings (embedded, Qwen3-VL, a server).
//! - [`batch`]: a model over a whole dataset on several servers, resumable.
//! - [`convert`]: a CT converted to NIfTI or to a DICOM series.
//! - [`eval`]: whether the evidence tells made-up findings from real ones.
//! - [`export`]: a reviewed workspace exported as de-identified training data.
//! - [`findings`]: one report read, with the words each finding came from.
//! - [`info`]: a CT described (geometry, HU range, warnings, series).
//! - [`pacs`]: import a PACS study into a workspace, open one with its stored result,
//!   publish a workspace and a reader study's reads (one held-then-store loop).
//! - [`phantom`]: synthetic CT phantoms written as case folders.
//! - [`score`]: predictions scored against truth (the paper's metrics, each case's reward).
//! - [`train`]: keyslice-tiny trained one stage at a time.
//! - [`vlm`]: one question to a Qwen3-VL checkpoint.
//! - [`workspace`]: review workspaces made from inputs, and their worklist.
//! - [`study`]: the reader-study report (hallucinations, tables and charts as data, the
//!   tables written with the `csv` crate) and a study's reads as DICOM SR.
//!
//! What happens along the way (retrieve progress, a case that failed while the others go on,
//! warnings) is told to a [`Report`] ([`terminal`] prints it on stderr, [`Logged`] logs it); every use case returns [`Error`], whose `hint` says
//! what to do.

pub mod analyze;
pub mod backend;
pub mod batch;
pub mod convert;
mod error;
pub mod eval;
pub mod export;
pub mod findings;
pub mod info;
pub mod masks;
pub mod pacs;
pub mod phantom;
pub mod score;
pub mod study;
pub mod terminal;
pub mod train;
pub mod vlm;
pub mod workspace;

use std::time::{Duration, Instant};

use keyslice_pacs::dicomweb::retrieve::{Progress, Retrieved};

pub use error::Error;

/// What a use case tells while it runs: the terminal prints it, the window logs it.
pub trait Report: Sync {
    /// A retrieve went on: `progress` of `study`, which started at `started`.
    fn retrieving(&self, study: &str, progress: Progress, started: Instant) {
        let _ = (study, progress, started);
    }

    /// A retrieve ended (`None`: it failed, and the error follows) after `elapsed`.
    fn retrieve_ended(&self, retrieved: Option<&Retrieved>, elapsed: Duration) {
        let _ = (retrieved, elapsed);
    }

    /// Something the user should know; the work goes on.
    fn warning(&self, text: &str) {
        tracing::warn!("{text}");
    }

    /// What was done or found, for the user's information.
    fn note(&self, text: &str) {
        tracing::info!("{text}");
    }

    /// A case of a batch failed (`message`: what and what to do); the others go on.
    fn case_failed(&self, case_id: &str, message: &str) {
        tracing::warn!(case_id, "{message}");
    }

    /// `done` of `total` items finished, the first having started at `started`.
    fn progress(&self, done: usize, total: usize, started: Instant) {
        tracing::info!(
            done,
            total,
            seconds = started.elapsed().as_secs_f64(),
            "progress"
        );
    }

    /// One of several items (a case, a study: `item` names it when there is one) failed;
    /// the others go on.
    fn failed(&self, item: Option<&str>, error: &Error) {
        tracing::warn!(item, "{error} ({})", error.hint());
    }
}

/// A use case's outcome as both faces show it: one JSON object (for scripts: `--json`), or
/// lines of text for a person.
pub trait Outcome {
    /// The outcome as one JSON object, on one line.
    fn json(&self) -> String;
    /// The outcome as text.
    fn text(&self) -> String;
}

/// A [`Report`] into the log: what a window or a background task gives the use cases.
#[derive(Debug, Clone, Copy, Default)]
pub struct Logged;

impl Report for Logged {}
