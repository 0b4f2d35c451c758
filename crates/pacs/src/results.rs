//! A study's Keyslice documents on the PACS: find its SR and KO series, retrieve them into the
//! cache, read them ([`crate::sr::read`]) and sort them into the AI results, the reviewers'
//! corrections and the key-image selections.

use std::path::Path;

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
}

/// Retrieves and reads the SR and KO series of `study`.
pub fn study_results(
    server: &Server,
    study: &str,
    cache: &Path,
    parallel: usize,
) -> Result<StudyResults, PacsError> {
    let mut results = StudyResults::default();
    let quiet = |_: Progress| {};
    for modality in ["SR", "KO"] {
        for series in qido::series(server, study, Some(modality))? {
            let retrieved = retrieve_series(server, study, &series, cache, parallel, &quiet)?;
            let mut files: Vec<_> = std::fs::read_dir(&retrieved.folder)
                .map_err(|source| PacsError::Cache {
                    path: retrieved.folder.clone(),
                    source,
                })?
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .collect();
            files.sort();
            for file in files {
                match read_file(&file) {
                    Ok(Document::Result(result)) => {
                        if matches!(result.content.observer, Observer::Person { .. }) {
                            results.reviews.push(*result);
                        } else {
                            results.ai.push(*result);
                        }
                    }
                    Ok(Document::KeyImages(keys)) => results.key_images.push(keys),
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
