//! Keyslice in the hospital: the PACS over DICOMweb, and AI results as DICOM objects.
//!
//! - [`dicomweb`]: a DICOMweb client (QIDO-RS search, WADO-RS retrieve of a study's CT series
//!   into a resumable cache, STOW-RS store) with bearer or basic authentication, retries and
//!   errors that name the server and the study. `dicomweb+http://…` URLs name a study or a
//!   query ([`dicomweb::DicomWebUrl`]).
//! - [`sr`]: one case's AI result as a TID 1500 Measurement Report in a Comprehensive 3D SR,
//!   the key slice as a Key Object Selection document, a reviewer's correction as a new SR
//!   with the reviewer as person observer; and the reader that gives them back.
//! - [`seg`]: lesion and organ masks as a binary DICOM Segmentation that references the CT
//!   series, written and read back onto the CT's grid.
//! - [`results`]: a study's Keyslice documents on the PACS, sorted into AI results,
//!   reviewers' corrections and key images.
//! - [`publish`]: what `pacs publish` sends for a case and why (a typed plan), and which of
//!   its documents the server already holds.
//! - [`agreement`]: agreement between reviewers who labelled the same studies.
//!
//! This crate knows DICOM and HTTP; it knows nothing of the viewer, the review database or
//! inference. Patient data goes only to the server the user names; nothing identifying is
//! logged (servers are named without credentials, studies by their UID).

pub mod agreement;
pub mod dicomweb;
pub mod publish;
pub mod results;
pub mod seg;
pub mod sr;

pub use dicomweb::{DicomWebUrl, PacsError, Server};
