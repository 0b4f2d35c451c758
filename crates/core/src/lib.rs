//! The core of Keyslice: the types every other crate speaks, with no file formats, no
//! models and no UI.
//!
//! - [`volume`]: a CT volume in Hounsfield units with its LPS geometry, label volumes,
//!   resampling and window presets.
//! - [`date`]: UTC dates and times from seconds since the epoch and back.
//! - [`chart`]: a chart as plain data (axes, lines, points, labels), drawn by the viewer.
//! - [`findings`]: what a report says (per organ: tumor presence, lesions with size,
//!   location and attenuation), the report writer and the report reader with spans.
//! - [`scoring`]: the E-MRL reward terms, report–description consistency and dataset
//!   metrics.
//! - [`prediction`]: the record one pipeline run produces for a case, and
//!   [`key_slice`]: the slice a verifier is shown.
//! - [`rng`]: the small deterministic random number generator behind phantoms and training.
//! - [`text`]: text from outside made safe to show (control characters as escapes).

pub mod chart;
pub mod date;
pub mod findings;
pub mod key_slice;
pub mod mrmc;
pub mod prediction;
pub mod rng;
pub mod scoring;
pub mod text;
pub mod volume;
