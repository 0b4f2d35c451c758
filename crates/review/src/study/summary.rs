//! The study's table per reader and arm, and pooled over the readers of each arm:
//! sensitivity, specificity and balanced accuracy of the calls, AUC of the confidences, and
//! the median active time per case. One unit is a (case, organ) whose truth is known.

use std::collections::BTreeMap;

use keyslice_core::findings::{Findings, Organ};
use keyslice_core::mrmc::{roc_area, roc_curve};
use serde::Serialize;

use super::{Read, Study, StudyError};

/// The name of the pooled rows.
pub const ALL_READERS: &str = "all readers";

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReaderSummary {
    /// The reader, or [`ALL_READERS`].
    pub reader: String,
    /// The arm.
    pub arm: String,
    /// Reads (cases read).
    pub reads: usize,
    /// Of the units with a tumor, the share called present.
    pub sensitivity: Option<f64>,
    /// Of the units without, the share called absent.
    pub specificity: Option<f64>,
    /// Their mean.
    pub balanced_accuracy: Option<f64>,
    /// Area under the ROC curve of the confidences (pooled rows: the readers' average, as
    /// the MRMC analysis gives it).
    pub auc: Option<f64>,
    /// Median active time per case, in seconds.
    pub median_seconds: Option<f64>,
}

impl Study {
    /// Each reader's row in each arm, then each arm's pooled row.
    pub fn summaries(
        &self,
        truth: &BTreeMap<String, Findings>,
    ) -> Result<Vec<ReaderSummary>, StudyError> {
        let mut by_reader = BTreeMap::new();
        for reader in &self.definition.readers {
            by_reader.insert(reader.clone(), self.reads(reader)?);
        }
        let averaged = super::charts::arm_aucs(&self.mrmc_reads(truth)?);
        let mut rows = Vec::new();
        for reader in &self.definition.readers {
            for arm in &self.definition.arms {
                let reads: Vec<&Read> = by_reader[reader]
                    .iter()
                    .filter(|read| read.arm == arm.name)
                    .collect();
                let mut row = summary(reader, &arm.name, &reads, truth);
                row.auc = Some(roc_area(&roc_curve(&super::charts::unit_scores(
                    reads.iter().copied(),
                    truth,
                ))))
                .filter(|_| row.sensitivity.is_some() && row.specificity.is_some());
                rows.push(row);
            }
        }
        for arm in &self.definition.arms {
            let reads: Vec<&Read> = by_reader
                .values()
                .flatten()
                .filter(|read| read.arm == arm.name)
                .collect();
            let mut row = summary(ALL_READERS, &arm.name, &reads, truth);
            row.auc = averaged.get(&arm.name).copied();
            rows.push(row);
        }
        Ok(rows)
    }
}

fn summary(
    reader: &str,
    arm: &str,
    reads: &[&Read],
    truth: &BTreeMap<String, Findings>,
) -> ReaderSummary {
    let (mut true_positives, mut positives, mut true_negatives, mut negatives) = (0, 0, 0, 0);
    for read in reads {
        let Some(findings) = truth.get(&read.case) else {
            continue;
        };
        for organ in Organ::ALL {
            let Some(call) = read.calls.get(&organ) else {
                continue;
            };
            if findings.states_tumor(organ) {
                positives += 1;
                true_positives += usize::from(call.present);
            } else {
                negatives += 1;
                true_negatives += usize::from(!call.present);
            }
        }
    }
    #[expect(clippy::cast_precision_loss, reason = "counts of reads")]
    let ratio = |part: usize, whole: usize| (whole > 0).then(|| part as f64 / whole as f64);
    let (sensitivity, specificity) = (
        ratio(true_positives, positives),
        ratio(true_negatives, negatives),
    );
    #[expect(clippy::cast_precision_loss, reason = "milliseconds of one read")]
    let mut seconds: Vec<f64> = reads
        .iter()
        .map(|read| read.active_ms as f64 / 1000.0)
        .collect();
    ReaderSummary {
        reader: reader.to_string(),
        arm: arm.to_string(),
        reads: reads.len(),
        sensitivity,
        specificity,
        balanced_accuracy: sensitivity
            .zip(specificity)
            .map(|(sensitivity, specificity)| f64::midpoint(sensitivity, specificity)),
        auc: None,
        median_seconds: super::charts::median(&mut seconds),
    }
}
