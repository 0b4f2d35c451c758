//! A study's Keyslice documents on the PACS: find its SR and KO series, retrieve them into the
//! cache, read them ([`crate::sr::read`]) and sort them into the AI results, the reviewers'
//! corrections and the key-image selections.

use std::path::Path;

use keyslice_core::findings::summary::changes;
use keyslice_core::prediction::{Prediction, StoredResult, StoredReview};

use crate::dicomweb::qido;
use crate::dicomweb::retrieve::{Progress, retrieve_series};
use crate::sr::read::{Document, KeyImages, Stored, read_file};
use crate::sr::{CaseResult, Observer};
use crate::{PacsError, Server};

/// Everything Keyslice stored for one study.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StudyResults {
    /// AI results, oldest first.
    pub ai: Vec<Stored<CaseResult>>,
    /// Reviewers' corrections, oldest first.
    pub reviews: Vec<Stored<CaseResult>>,
    /// Key Object Selections.
    pub key_images: Vec<Stored<KeyImages>>,
    /// SR or KO objects that are not Keyslice documents or could not be read (file: reason).
    pub skipped: Vec<String>,
    /// Reads of reader studies: research, kept apart and never shown as reviews.
    pub study_reads: usize,
    /// The study's segmentations, retrieved into the cache (read against the CT with
    /// [`crate::seg::read::segmentation`] once it is loaded), oldest series first.
    pub segmentations: Vec<std::path::PathBuf>,
}

impl StudyResults {
    /// The newest AI result.
    #[must_use]
    pub fn latest_ai(&self) -> Option<&Stored<CaseResult>> {
        self.ai.last()
    }

    /// Each reviewer's newest correction, by reviewer name.
    #[must_use]
    pub fn latest_reviews(&self) -> Vec<(&str, &Stored<CaseResult>)> {
        let mut latest: std::collections::BTreeMap<&str, &Stored<CaseResult>> =
            std::collections::BTreeMap::new();
        for review in &self.reviews {
            if let Observer::Person { name } = &review.content.observer {
                latest.insert(name.as_str(), review);
            }
        }
        latest.into_iter().collect()
    }

    /// The newest AI result as the prediction of case `case_id`, marked with the document and
    /// the server (`server`, its root URL) it came from and carrying each reviewer's newest
    /// correction: what the viewer shows for a study opened from the PACS. `None` when the
    /// study holds no AI result.
    #[must_use]
    pub fn prediction(&self, case_id: &str, server: &str) -> Option<Prediction> {
        let ai = self.latest_ai()?;
        let reviews = self
            .latest_reviews()
            .into_iter()
            .map(|(reviewer, review)| StoredReview {
                reviewer: reviewer.to_string(),
                stored: readable_date_time(&review.content_date_time),
                summary: review.content.summary(),
                changes: changes(&ai.content.findings, &review.content.findings),
            })
            .collect();
        let stored = StoredResult {
            document: format!("SR of {}", readable_date_time(&ai.content_date_time)),
            server: server.to_string(),
            reviews,
        };
        Some(ai.content.to_prediction(case_id, stored))
    }
}

/// A DICOM `YYYYMMDDHHMMSS` date and time as `YYYY-MM-DD HH:MM UTC`; anything else as it is.
#[must_use]
pub fn readable_date_time(text: &str) -> String {
    keyslice_core::date::readable_dicom(text)
}

/// The SOP Instance UIDs of the SR, KO and SEG instances `study` holds on `server`: what a
/// publish must not store again (every document's UIDs follow from its content).
pub fn held_documents(
    server: &Server,
    study: &str,
) -> Result<std::collections::BTreeSet<String>, PacsError> {
    let mut held = std::collections::BTreeSet::new();
    for series in qido::series(server, study, None)? {
        if ["SR", "KO", "SEG"]
            .iter()
            .any(|modality| series.modality.eq_ignore_ascii_case(modality))
        {
            held.extend(
                qido::instances(server, study, &series.series_uid)?
                    .into_iter()
                    .map(|instance| instance.sop_uid),
            );
        }
    }
    Ok(held)
}

/// Retrieves and reads the SR and KO series of `study`, and retrieves its SEG series.
pub fn study_results(
    server: &Server,
    study: &str,
    cache: &Path,
    parallel: usize,
) -> Result<StudyResults, PacsError> {
    let mut results = StudyResults::default();
    let quiet = |_: Progress| {};
    // The files of one series, retrieved into the cache, in name order.
    let retrieved_files =
        |series: &qido::SeriesSummary| -> Result<Vec<std::path::PathBuf>, PacsError> {
            let retrieved = retrieve_series(server, study, series, cache, parallel, &quiet)?;
            let mut files: Vec<_> = std::fs::read_dir(&retrieved.folder)
                .map_err(|source| PacsError::Cache {
                    path: retrieved.folder.clone(),
                    source,
                })?
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .collect();
            files.sort();
            Ok(files)
        };
    for series in qido::series(server, study, Some("SEG"))? {
        results.segmentations.extend(retrieved_files(&series)?);
    }
    for modality in ["SR", "KO"] {
        for series in qido::series(server, study, Some(modality))? {
            for file in retrieved_files(&series)? {
                match read_file(&file) {
                    Ok(Document::Result(result)) => {
                        if matches!(result.content.observer, Observer::Person { .. }) {
                            results.reviews.push(*result);
                        } else {
                            results.ai.push(*result);
                        }
                    }
                    Ok(Document::KeyImages(keys)) => results.key_images.push(keys),
                    Ok(Document::StudyRead { .. }) => results.study_reads += 1,
                    Err(error) => results.skipped.push(error.to_string()),
                }
            }
        }
    }
    let by_time = |a: &Stored<CaseResult>, b: &Stored<CaseResult>| {
        (&a.content_date_time, &a.sop_uid).cmp(&(&b.content_date_time, &b.sop_uid))
    };
    results.ai.sort_by(by_time);
    results.reviews.sort_by(by_time);
    Ok(results)
}
