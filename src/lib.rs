//! Keyslice: review AI-written CT tumor reports against the images.
//!
//! Data flow so far: a file or folder → [`io`] (DICOM or NIfTI reader) → [`volume::Volume`]
//! (HU voxels, LPS geometry, per-slice positions) → the `info` and `convert` commands in
//! [`cli`]; report text → [`findings::read_report`] → [`findings::Findings`] → [`scoring`]
//! (E-MRL rewards, dataset metrics) → the `findings` and `score` commands; a volume →
//! [`render`] (3D texture, WGSL slice shader) → [`ui::viewport`] → [`app`] (the `view`
//! window); [`phantom`] generates synthetic CTs with masks and truth; a volume →
//! [`infer`] (diagnoser → key slice → verifier → consistency, with the embedded
//! keyslice-tiny on candle) → a `Prediction` (the `analyze` command, the viewer's analysis
//! panel, the demo workspace); [`review`] keeps workspaces, the review database and the
//! corrections log; [`export`] turns reviewed cases into de-identified training data. See
//! `ARCHITECTURE.md` for the module map and dependency rule.

pub mod app;
pub mod cli;
pub mod export;
pub mod findings;
pub mod infer;
pub mod io;
pub mod phantom;
pub mod render;
pub mod review;
pub mod scoring;
pub mod ui;
pub mod volume;
