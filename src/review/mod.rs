//! Review workspaces: the folder with its case manifest and predictions ([`workspace`]),
//! and the SQLite database with each case's status and the append-only log of corrections
//! ([`store`]). No UI crates: the app and the CLI call it.
//!
//! Started in the review-workflow issue; the workspace folder (manifest, predictions), the
//! panels and undo/redo in the UI build on this store.

pub mod store;
pub mod workspace;

pub use store::{CaseState, Correction, Edit, ReviewStatus, ReviewStore, StoreError};
