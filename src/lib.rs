//! Keyslice: review AI-written CT tumor reports against the images.
//!
//! This crate is the `keyslice` command ([`cli`]) and a facade over the workspace's crates,
//! under the names the rest of the code and the tests use. The data flow: a file or folder
//! → [`io`] (DICOM or NIfTI reader) → [`volume::Volume`] → [`infer`] (diagnoser → key slice
//! → verifier → consistency, with the embedded keyslice-tiny on candle) → a
//! [`prediction::Prediction`] → [`review`] (workspaces, the review database, corrections) →
//! [`export`] (de-identified training data) → [`train`]. The viewer ([`render`], [`ui`],
//! [`app`]) shows all of it. See `ARCHITECTURE.md` for the crate map and dependency rule.

pub mod cli;

pub use keyslice_core::{
    chart, date, findings, key_slice, mrmc, prediction, rng, scoring, text, volume,
};
pub use keyslice_export as export;
pub use keyslice_infer as infer;
pub use keyslice_io as io;
pub use keyslice_pacs as pacs;
pub use keyslice_phantom as phantom;
pub use keyslice_review as review;
pub use keyslice_train as train;
pub use keyslice_viewer::{app, render, ui};
