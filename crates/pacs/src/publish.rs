//! What `pacs publish` sends for one case, and why: a typed plan decided here, so the command
//! line only gathers the inputs, writes files and talks to the server.
//!
//! A case's documents ([`DocumentKind`]): the AI result as an SR and its key slice as a Key
//! Object Selection (left out, with the reason, when the model says the CT is outside what
//! it knows, unless forced; then labelled), and once the case is accepted the reviewer's
//! correction as an SR verified by the reviewer by name, with its lesion masks, when it has
//! any, as a DICOM Segmentation. A document's UIDs follow from its
//! content, so the server's own list of a study's SR and KO instances says which are already
//! held: whatever a local machine remembers or forgets, nothing is stored twice
//! ([`Plan::decide`]).

use std::collections::BTreeSet;

use keyslice_core::findings::Findings;
use keyslice_core::prediction::{OutOfDomain, Prediction};

use crate::PacsError;
use crate::seg::write::{Authorship, segmentation};
use crate::seg::{SegError, Segment, SourceSeries};
use crate::sr::write::{Written, key_object_selection, result_sr, result_sr_at};
use crate::sr::{CaseResult, StudyContext};

/// The kinds of document Keyslice publishes for a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DocumentKind {
    /// The AI result: a TID 1500 SR, unverified.
    AiResult,
    /// The AI's key slice as a Key Object Selection.
    KeyImages,
    /// The reviewer's correction: an SR verified by the reviewer.
    Review,
    /// The lesion masks of the accepted review: a binary DICOM Segmentation.
    Masks,
}

impl DocumentKind {
    /// The kind as file names and listings show it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AiResult => "ai-result",
            Self::KeyImages => "key-images",
            Self::Review => "review",
            Self::Masks => "masks",
        }
    }
}

impl std::fmt::Display for DocumentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// Why a document of a case is not in its plan.
#[derive(Clone, Debug, PartialEq)]
pub enum LeftOut {
    /// The model said the CT is outside what it knows: no AI result goes to the PACS
    /// unless forced.
    OutOfDomain(OutOfDomain),
    /// The key slice names no SOP Instance UID (a NIfTI source): no key-image document.
    NoKeyImage,
    /// The case is not accepted yet: no reviewer's SR.
    NotAccepted,
}

impl std::fmt::Display for LeftOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::OutOfDomain(unfamiliar) => write!(
                f,
                "{}; its AI result is not published (--force publishes it, labelled)",
                unfamiliar.sentence()
            ),
            Self::NoKeyImage => f.write_str("the key slice is not a DICOM instance"),
            Self::NotAccepted => f.write_str("not accepted yet"),
        }
    }
}

/// An accepted review, as the plan needs it.
#[derive(Clone, Debug)]
pub struct AcceptedReview<'a> {
    /// Who accepted it, as the review database recorded.
    pub reviewer: Option<&'a str>,
    /// The corrected findings.
    pub findings: &'a Findings,
    /// When it was accepted, as DICOM date and time.
    pub accepted: Option<(String, String)>,
    /// Its lesion masks on the CT's series, when it has any.
    pub masks: Option<ReviewMasks<'a>>,
}

/// An accepted review's lesion masks and the series they are drawn on.
#[derive(Clone, Debug)]
pub struct ReviewMasks<'a> {
    /// The CT series.
    pub source: &'a SourceSeries,
    /// One segment per lesion.
    pub segments: &'a [Segment],
}

/// What the plan of one case is made from.
#[derive(Clone, Debug)]
pub struct CaseInput<'a> {
    /// The case's id in the workspace (for messages).
    pub case_id: &'a str,
    /// The model's prediction.
    pub prediction: &'a Prediction,
    /// The study the documents belong to.
    pub study: &'a StudyContext,
    /// The accepted review, when the case is accepted.
    pub review: Option<AcceptedReview<'a>>,
    /// Publish an AI result made outside the model's domain too (labelled).
    pub force: bool,
}

/// Why a case cannot be planned.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// An accepted case whose reviewer is not named: a reviewer SR is a verified statement
    /// signed by name, never by a placeholder.
    #[error(
        "case {case_id} was accepted without a reviewer name; a reviewer SR is stored as VERIFIED by its reviewer, by name"
    )]
    UnnamedReviewer {
        /// The case.
        case_id: String,
    },
    /// An accepted case whose reviewer's name cannot sign a DICOM document.
    #[error("case {case_id}: {reason}")]
    InvalidReviewer {
        /// The case.
        case_id: String,
        /// What is wrong with the name.
        reason: String,
    },
    /// A document could not be written.
    #[error(transparent)]
    Document(#[from] PacsError),
    /// The masks could not be written as a segmentation.
    #[error("case {case_id}: its lesion masks: {source}")]
    Masks {
        /// The case.
        case_id: String,
        /// Why.
        source: SegError,
    },
}

impl PlanError {
    /// What the user can do about it.
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            Self::UnnamedReviewer { .. } => {
                "pass --reviewer NAME to name who accepted it (or set KEYSLICE_REVIEWER before reviewing)"
            }
            Self::InvalidReviewer { .. } => {
                "pass --reviewer NAME with the reviewer's name as it should be signed (no backslash, at most 64 characters)"
            }
            Self::Document(error) => error.hint(),
            Self::Masks { source, .. } => source.hint(),
        }
    }
}

/// A planned document.
#[derive(Clone, Debug)]
pub struct Planned {
    /// Its kind.
    pub kind: DocumentKind,
    /// The DICOM file and its UIDs.
    pub written: Written,
}

/// One case's plan: the documents it has, and those left out with the reason.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The documents, in the order they are stored.
    pub documents: Vec<Planned>,
    /// The documents left out.
    pub left_out: Vec<(DocumentKind, LeftOut)>,
}

/// What becomes of a planned document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The server holds it already (the same content, so the same UID): not stored again.
    Held,
    /// To be stored.
    Store,
    /// Written to a folder only (no server).
    WriteOnly,
}

/// Names that are no reviewer's name: what a tool fills in when it knows none.
const PLACEHOLDER_NAMES: &[&str] = &["reviewer", "unknown", "anonymous"];

/// What is wrong with `name` as the name a reviewer signs with, if anything (`field` says
/// where it came from): blank, a placeholder, or not writable as one DICOM person name (a
/// backslash, a control character, over 64 characters), said as such.
#[must_use]
pub fn reviewer_problem(field: &str, name: &str) -> Option<String> {
    let name = name.trim();
    if let Err(error) = keyslice_io::dicom::write::check_person_name(field, name) {
        return Some(error.to_string());
    }
    is_placeholder(name)
        .then(|| format!("{field} \"{name}\" is a placeholder, not a person's name"))
}

/// Whether `name` is what a tool fills in when it knows no reviewer.
fn is_placeholder(name: &str) -> bool {
    let name = name.trim();
    PLACEHOLDER_NAMES
        .iter()
        .any(|placeholder| name.eq_ignore_ascii_case(placeholder))
}

/// Whether `name` names a person: see [`reviewer_problem`].
#[must_use]
pub fn is_named(name: &str) -> bool {
    reviewer_problem("the name", name).is_none()
}

/// The plan of one case (see the module text).
pub fn plan(input: &CaseInput<'_>) -> Result<Plan, PlanError> {
    let ai = CaseResult::from_prediction(input.prediction);
    let mut documents = Vec::new();
    let mut left_out = Vec::new();
    match (&input.prediction.out_of_domain, input.force) {
        (Some(unfamiliar), false) => {
            left_out.push((
                DocumentKind::AiResult,
                LeftOut::OutOfDomain(unfamiliar.clone()),
            ));
            left_out.push((
                DocumentKind::KeyImages,
                LeftOut::OutOfDomain(unfamiliar.clone()),
            ));
        }
        (unfamiliar, _) => {
            let mut labelled = ai.clone();
            if let Some(unfamiliar) = unfamiliar {
                labelled.report = Some(format!(
                    "{}\n\n{}",
                    unfamiliar.sentence(),
                    ai.report.as_deref().unwrap_or_default()
                ));
            }
            documents.push(Planned {
                kind: DocumentKind::AiResult,
                written: result_sr(input.study, &labelled)?,
            });
            if ai
                .findings
                .key_slice
                .as_ref()
                .is_some_and(|key| key.sop_instance_uid.is_some())
            {
                documents.push(Planned {
                    kind: DocumentKind::KeyImages,
                    written: key_object_selection(input.study, &ai)?,
                });
            } else {
                left_out.push((DocumentKind::KeyImages, LeftOut::NoKeyImage));
            }
        }
    }
    match &input.review {
        Some(review) => {
            // Nobody, or what a tool fills in when it knows nobody: unnamed.
            let reviewer = review
                .reviewer
                .filter(|name| !name.trim().is_empty() && !is_placeholder(name))
                .ok_or_else(|| PlanError::UnnamedReviewer {
                    case_id: input.case_id.to_string(),
                })?;
            if let Some(reason) = reviewer_problem("the reviewer's name", reviewer) {
                return Err(PlanError::InvalidReviewer {
                    case_id: input.case_id.to_string(),
                    reason,
                });
            }
            let correction = CaseResult::correction(&ai, reviewer.trim(), review.findings);
            documents.push(Planned {
                kind: DocumentKind::Review,
                written: result_sr_at(input.study, &correction, review.accepted.clone())?,
            });
            if let Some(masks) = &review.masks {
                let authorship = Authorship {
                    creator: reviewer.trim().to_string(),
                    model: input.prediction.diagnoser.clone(),
                };
                let written = segmentation(input.study, masks.source, masks.segments, &authorship)
                    .map_err(|source| PlanError::Masks {
                        case_id: input.case_id.to_string(),
                        source,
                    })?;
                documents.push(Planned {
                    kind: DocumentKind::Masks,
                    written,
                });
            }
        }
        None => left_out.push((DocumentKind::Review, LeftOut::NotAccepted)),
    }
    Ok(Plan {
        documents,
        left_out,
    })
}

impl Plan {
    /// What becomes of each document, given the SOP Instance UIDs the server holds for the
    /// study (`None`: no server to store to).
    #[must_use]
    pub fn decide(&self, held: Option<&BTreeSet<String>>) -> Vec<(&Planned, Decision)> {
        self.documents
            .iter()
            .map(|document| {
                let decision = match held {
                    None => Decision::WriteOnly,
                    Some(held) if held.contains(&document.written.sop_uid) => Decision::Held,
                    Some(_) => Decision::Store,
                };
                (document, decision)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(kind: DocumentKind, uid: &str) -> Planned {
        Planned {
            kind,
            written: Written {
                sop_uid: uid.into(),
                series_uid: "2.25.1".into(),
                class_uid: crate::sr::COMPREHENSIVE_3D_SR.into(),
                bytes: Vec::new(),
            },
        }
    }

    #[test]
    fn placeholders_name_nobody() {
        let long = "A".repeat(65);
        for name in [
            "",
            "  ",
            "reviewer",
            "Reviewer",
            "unknown",
            "anonymous",
            "\u{1b}[31mAna",
            "Ana\\Evil^Q",
            &long,
        ] {
            assert!(!is_named(name), "{name:?}");
        }
        // What is wrong is said, not taken for a missing name.
        assert_eq!(
            reviewer_problem("--reviewer", &long).unwrap(),
            "--reviewer is 65 characters long; a DICOM person name holds at most 64 per group"
        );
        assert!(
            reviewer_problem("--reviewer", "Ana\\Evil^Q")
                .unwrap()
                .contains("backslash")
        );
        for name in ["Ana", "Dr. Ben Reviewer", "reviewer 2"] {
            assert!(is_named(name), "{name:?}");
        }
    }

    #[test]
    fn what_the_server_holds_is_not_stored_again() {
        let plan = Plan {
            documents: vec![
                planned(DocumentKind::AiResult, "2.25.10"),
                planned(DocumentKind::Review, "2.25.11"),
            ],
            left_out: vec![(DocumentKind::KeyImages, LeftOut::NoKeyImage)],
        };
        let held: BTreeSet<String> = std::iter::once("2.25.10".to_string()).collect();
        let decided: Vec<(DocumentKind, Decision)> = plan
            .decide(Some(&held))
            .into_iter()
            .map(|(document, decision)| (document.kind, decision))
            .collect();
        assert_eq!(
            decided,
            [
                (DocumentKind::AiResult, Decision::Held),
                (DocumentKind::Review, Decision::Store)
            ]
        );
        // Without a server everything is written only.
        assert!(
            plan.decide(None)
                .iter()
                .all(|(_, decision)| *decision == Decision::WriteOnly)
        );
        assert_eq!(format!("{:<10}|", DocumentKind::Review), "review    |");
    }
}
