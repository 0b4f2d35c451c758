//! Review workspaces: the folder with its case manifest and predictions ([`workspace`]),
//! the SQLite database with each case's status and the append-only log of corrections
//! ([`store`]), a case's findings as corrected plus its undo/redo history, both worked out
//! from that log ([`reviewed`]), and one case under review with all three kept in step
//! ([`case`]). No UI crates: the app, the CLI and exports call it.

pub mod case;
pub mod reviewed;
pub mod store;
pub mod study;
pub mod workspace;

pub use case::{CaseReview, ReviewError, model_findings, model_masks};
pub use reviewed::{Field, FieldError, History, LesionPart, ReviewedCase};
pub use store::{CaseState, Correction, Edit, ReviewStatus, ReviewStore, StoreError};
