//! The domain check's calibration: the range of each figure the embedded model's domain
//! check measures ([`keyslice_infer::embedded::domain`]), over phantoms neither its training
//! nor its evaluation used. Only `config.json` changes; the weights are copied as they are.

use std::path::Path;

use rayon::prelude::*;

use keyslice_infer::embedded::domain::{Domain, FEATURES};
use keyslice_infer::embedded::{TinyConfig, TinyModel};
use keyslice_io::nifti::read_nifti;

use crate::tiny::{TrainError, case_folders};

/// Measures every case of `data` with the checkpoint in `init`, and writes the checkpoint
/// with the ranges ([`Domain::calibrated`]) to `out`; `progress` gets a line per range.
pub fn calibrate_domain(
    init: &Path,
    data: &Path,
    out: &Path,
    mut progress: impl FnMut(&str),
) -> Result<TinyConfig, TrainError> {
    let model = TinyModel::load(init).map_err(|error| TrainError::Case {
        path: init.to_path_buf(),
        detail: error.to_string(),
    })?;
    let folders = case_folders(data)?;
    progress(&format!(
        "measuring {} calibration cases from {}",
        folders.len(),
        data.display()
    ));
    let figures: Vec<Vec<f64>> = folders
        .par_iter()
        .map(|folder| {
            let path = keyslice_io::cases::CaseFolder::new(folder).ct();
            let volume = read_nifti(&path).map_err(|error| TrainError::Case {
                path: path.clone(),
                detail: error.to_string(),
            })?;
            model
                .domain_figures(&volume)
                .map_err(TrainError::Candle)?
                .ok_or_else(|| TrainError::Case {
                    path: init.to_path_buf(),
                    detail: "the checkpoint has no finder grid to measure on".into(),
                })
        })
        .collect::<Result<_, _>>()?;
    let domain = Domain::calibrated(&figures);
    for range in &domain.ranges {
        progress(&format!(
            "{}: {:.3}–{:.3} (± {:.3})",
            range.feature, range.min, range.max, range.margin
        ));
    }
    if domain.ranges.len() < FEATURES.len() {
        progress("some figures could not be measured on any case and are not checked");
    }
    let mut config = model.config.clone();
    config.domain = Some(domain);
    let write_error = |path: &Path, source| TrainError::Write {
        path: path.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(out).map_err(|source| write_error(out, source))?;
    // Into the checkpoint's own folder (by any spelling of its path) the weights stay as
    // they are: copying a file onto itself would empty it.
    let same_folder = match (std::fs::canonicalize(init), std::fs::canonicalize(out)) {
        (Ok(init), Ok(out)) => init == out,
        _ => false,
    };
    let weights = out.join("model.safetensors");
    if !same_folder {
        std::fs::copy(init.join("model.safetensors"), &weights)
            .map_err(|source| write_error(&weights, source))?;
    }
    let config_path = out.join("config.json");
    let text = serde_json::to_string_pretty(&config).unwrap_or_default();
    std::fs::write(&config_path, text + "\n")
        .map_err(|source| write_error(&config_path, source))?;
    Ok(config)
}
