//! `keyslice-tiny`, the embedded default model: trained by this project on synthetic
//! phantoms (`keyslice train`), shipped in `models/keyslice-tiny/` and compiled into the
//! binary, so analysis works on a fresh machine with no download and no GPU.
//!
//! Two networks of the same shape ([`net::SliceNet`]): the **diagnoser** reads every axial
//! slab of the volume on the model grid ([`grid`]) with its neighbours and position features
//! and marks organs and lesions per pixel; [`decode`] turns that into findings, a report (the
//! project's report writer), the key slice and a box. The **verifier** sees only a crop of the
//! key slice around the box and describes what is visible there, through the same decoding,
//! as a local description. A third network, the **finder** ([`finder`]), decides which
//! organs show a tumor and where: for every organ and slab an organ mask covers, it answers
//! "tumor here?" on a finer grid, and the decoding grows the lesion from the cell that
//! decided. A fourth, the **organ network** ([`organs`]), draws those organ masks on the
//! finer grid. The **evidence reader** ([`evidence`]), with weights of its own, reads each
//! claimed lesion in three planes through its box and is the verifier when the checkpoint has
//! one. It is honest about what it is: trained only on synthetic phantoms, not for
//! clinical use (see `MODEL_CARD.md`).

mod adapters;
mod anatomy;
pub mod batch_norm;
pub mod conv;
pub mod decode;
pub mod domain;
pub mod evidence;
pub mod finder;
pub mod grid;
pub mod input;
mod lesions;
mod load;
mod model;
pub mod net;
pub mod organs;
mod weights;

pub use adapters::{TinyDiagnoser, TinyVerifier};
pub use input::{diagnoser_input, verifier_input};
pub use lesions::{finder_probabilities, organ_references};
pub use model::TinyModel;
pub use weights::TinyConfig;

/// Whether every value of `tensor` is a finite number (no NaN, no infinity).
pub fn all_finite(tensor: &candle_core::Tensor) -> candle_core::Result<bool> {
    let values = tensor
        .flatten_all()?
        .to_dtype(candle_core::DType::F32)?
        .to_vec1::<f32>()?;
    Ok(values.iter().all(|value| value.is_finite()))
}

/// candle's error text without the backtrace it may carry.
#[must_use]
pub fn candle_message(error: &candle_core::Error) -> String {
    error
        .to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}
