//! Training of the embedded keyslice-tiny model, on synthetic phantoms and on exported
//! reviewed cases.
//!
//! - [`tiny`]: supervised training of the diagnoser and verifier networks, checkpoints, and
//!   the training cases (phantom folders or exports).
//! - [`evidence`]: the evidence reader, keyslice-tiny's own verifier of each claimed lesion
//!   in three planes.
//! - [`finder`]: the lesion finder on top of a trained diagnoser.
//! - [`domain`]: the ranges of the domain check, measured on calibration phantoms.
//! - [`organs`]: the organ network on top of a checkpoint.
//! - [`rl`]: GRPO with the E-MRL reward (existence, attributes, localisation and
//!   cross-view consistency), with its reward curve.
//!
//! The networks themselves live in `keyslice_infer::embedded`; this crate only changes their
//! weights. It may read exports (`keyslice_export::read`); nothing reads it but the CLI.

pub mod domain;
pub mod evidence;
pub mod finder;
pub mod organs;
pub mod rl;
pub mod tiny;
