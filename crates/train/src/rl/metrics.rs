//! Figures of each step: the mean reward and its terms, their moving averages for the
//! curve, and the `metrics.jsonl` written as training goes.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::tiny::TrainError;

/// Figures of one step.
#[derive(Clone, Debug, Default)]
pub(super) struct StepFigures {
    pub(super) reward: f64,
    pub(super) terms: [Option<f64>; 5],
    pub(super) kl: f64,
    pub(super) advantage_spread: f64,
    pub(super) flat_groups: f64,
    pub(super) loss: f64,
}

impl StepFigures {
    /// The progress line's figures.
    pub(super) fn summary(&self) -> String {
        let show = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.3}"));
        format!(
            "reward {:.3} (format {}, existence {}, attributes {}, localization {}, consistency {}), KL {:.4}, |advantage| {:.2}, flat groups {:.0} %",
            self.reward,
            show(self.terms[0]),
            show(self.terms[1]),
            show(self.terms[2]),
            show(self.terms[3]),
            show(self.terms[4]),
            self.kl,
            self.advantage_spread,
            self.flat_groups * 100.0
        )
    }
}

/// Mean of the values present.
pub(super) fn mean_of(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let (sum, count) = values
        .flatten()
        .fold((0.0, 0usize), |(sum, count), v| (sum + v, count + 1));
    (count > 0).then(|| sum / count as f64)
}

/// The curves of the plot: the total and each term per step, each a moving mean over the
/// last `window` steps that scored it.
pub(super) fn history_series(
    history: &[StepFigures],
    window: usize,
) -> Vec<(&'static str, Vec<f64>)> {
    let names = std::iter::once("total").chain(keyslice_core::scoring::RewardWeights::TERMS);
    let value = |figures: &StepFigures, index: usize| {
        if index == 0 {
            Some(figures.reward)
        } else {
            figures.terms[index - 1]
        }
    };
    names
        .enumerate()
        .map(|(index, name)| {
            let present: Vec<f64> = history.iter().filter_map(|f| value(f, index)).collect();
            let mut seen = 0;
            let values = history
                .iter()
                .map(|f| {
                    seen += usize::from(value(f, index).is_some());
                    let upto = seen.max(1).min(present.len());
                    let recent = &present[upto.saturating_sub(window.max(1))..upto];
                    recent.iter().sum::<f64>() / recent.len().max(1) as f64
                })
                .collect();
            (name, values)
        })
        .collect()
}

/// `rl_metrics.csv`, written a row per step and flushed, so an interrupted run keeps its
/// curve.
pub(super) struct MetricsFile {
    pub(super) path: PathBuf,
    pub(super) file: std::fs::File,
}

impl MetricsFile {
    const HEADER: &'static str = "step,reward,format,existence,attributes,localization,consistency,kl,advantage_abs_mean,flat_groups,loss,seconds";

    pub(super) fn create(path: &Path) -> Result<Self, TrainError> {
        let write_error = |source| TrainError::Write {
            path: path.to_path_buf(),
            source,
        };
        let mut file = std::fs::File::create(path).map_err(write_error)?;
        writeln!(file, "{}", Self::HEADER).map_err(write_error)?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
        })
    }

    pub(super) fn row(
        &mut self,
        step: usize,
        figures: &StepFigures,
        seconds: f64,
    ) -> Result<(), TrainError> {
        let cell = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.5}"));
        let terms: Vec<String> = figures.terms.iter().map(|&t| cell(t)).collect();
        writeln!(
            self.file,
            "{step},{:.5},{},{:.6},{:.5},{:.4},{:.6},{seconds:.1}",
            figures.reward,
            terms.join(","),
            figures.kl,
            figures.advantage_spread,
            figures.flat_groups,
            figures.loss
        )
        .and_then(|()| self.file.flush())
        .map_err(|source| TrainError::Write {
            path: self.path.clone(),
            source,
        })
    }
}
