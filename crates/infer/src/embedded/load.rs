//! Loading a keyslice-tiny checkpoint (the one compiled in, or a folder) into a
//! [`TinyModel`]: the configuration checked, then every network's weights.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;

use super::batch_norm::NormMode;
use super::candle_message;
use super::finder::{self, FinderConfig, FinderNet};
use super::model::TinyModel;
use super::net::SliceNet;
use super::organs::OrganNet;
use super::weights::{EMBEDDED_CONFIG, EMBEDDED_WEIGHTS, TinyConfig};
use crate::InferError;

/// A diverged training run's weights answer "no tumor" everywhere: refused, the first weight
/// that is not a finite number named.
fn refuse_non_finite(
    tensors: &std::collections::HashMap<String, Tensor>,
) -> candle_core::Result<()> {
    let mut names: Vec<&String> = tensors.keys().collect();
    names.sort();
    for name in names {
        if !super::all_finite(&tensors[name])? {
            candle_core::bail!(
                "the weight `{name}` is not a finite number (a training run that diverged); use another checkpoint"
            );
        }
    }
    Ok(())
}

impl TinyModel {
    /// The model compiled into the binary.
    pub fn embedded() -> Result<Self, InferError> {
        let error = |detail: String| InferError::Model {
            path: "embedded keyslice-tiny".into(),
            detail,
        };
        let config: TinyConfig =
            serde_json::from_str(EMBEDDED_CONFIG).map_err(|e| error(e.to_string()))?;
        let device = Device::Cpu;
        let tensors = candle_core::safetensors::load_buffer(EMBEDDED_WEIGHTS, &device)
            .map_err(|e| error(candle_message(&e)))?;
        Self::from_tensors(config, tensors, device).map_err(|e| error(candle_message(&e)))
    }

    /// A checkpoint folder (`config.json`, `model.safetensors`).
    pub fn load(folder: &Path) -> Result<Self, InferError> {
        let error = |path: &Path, detail: String| InferError::Model {
            path: path.to_path_buf(),
            detail,
        };
        let config_path = folder.join("config.json");
        let text = std::fs::read_to_string(&config_path)
            .map_err(|e| error(&config_path, e.to_string()))?;
        let config: TinyConfig =
            serde_json::from_str(&text).map_err(|e| error(&config_path, e.to_string()))?;
        if let Some(problem) = config
            .finder
            .as_ref()
            .and_then(FinderConfig::detail_problem)
        {
            return Err(error(&config_path, problem));
        }
        let weights = folder.join("model.safetensors");
        let device = Device::Cpu;
        let tensors = candle_core::safetensors::load(&weights, &device)
            .map_err(|e| error(&weights, candle_message(&e)))?;
        Self::from_tensors(config, tensors, device).map_err(|e| error(&weights, candle_message(&e)))
    }

    pub fn from_tensors(
        config: TinyConfig,
        tensors: std::collections::HashMap<String, Tensor>,
        device: Device,
    ) -> candle_core::Result<Self> {
        let wants_stem = config
            .finder
            .as_ref()
            .is_some_and(|f| f.detail_factor() >= 2);
        if wants_stem && !tensors.contains_key("finder.stem.conv_a.weight") {
            candle_core::bail!(
                "config.json gives the finder a detail stem (\"detail\") that these weights do \
                 not hold; use the weights it was trained with, or remove \"detail\""
            );
        }
        refuse_non_finite(&tensors)?;
        let vb = VarBuilder::from_tensors(tensors, DType::F32, &device);
        Ok(Self {
            diagnoser: SliceNet::new(
                config.diagnoser_inputs(),
                config.diagnoser_widths,
                config.norm_groups,
                &vb.pp("diagnoser"),
            )?,
            verifier: SliceNet::new(
                config.verifier_inputs(),
                config.verifier_widths,
                config.norm_groups,
                &vb.pp("verifier"),
            )?,
            finder: match &config.finder {
                None => None,
                Some(finder) => {
                    if (finder.grid.slab_mm - config.grid.slab_mm).abs() > 1e-9 {
                        candle_core::bail!(
                            "the finder's slabs ({} mm) must be the diagnoser's ({} mm)",
                            finder.grid.slab_mm,
                            config.grid.slab_mm
                        );
                    }
                    if finder.crop == 0
                        || !finder.crop.is_multiple_of(finder::STRIDE)
                        || finder.crop > finder.grid.size
                    {
                        candle_core::bail!(
                            "the finder's crop ({}) must be a multiple of {} and fit its grid",
                            finder.crop,
                            finder::STRIDE
                        );
                    }
                    if let Some(problem) = finder.detail_problem() {
                        candle_core::bail!("{problem}");
                    }
                    Some(FinderNet::new(
                        FinderConfig::inputs(config.windows.len()),
                        finder,
                        &vb.pp("finder"),
                        NormMode::Infer,
                    )?)
                }
            },
            organs: match &config.organs {
                None => None,
                Some(organs) => {
                    if config
                        .finder
                        .as_ref()
                        .is_some_and(|f| f.grid != organs.grid)
                    {
                        candle_core::bail!("the organ network's grid must be the finder's");
                    }
                    if (organs.grid.slab_mm - config.grid.slab_mm).abs() > 1e-9
                        || !organs.grid.size.is_multiple_of(8)
                    {
                        candle_core::bail!(
                            "the organ network's grid needs the diagnoser's slabs ({} mm) and a size divisible by 8",
                            config.grid.slab_mm
                        );
                    }
                    Some(OrganNet::new(
                        config.diagnoser_inputs(),
                        organs.widths,
                        &vb.pp("organs"),
                        NormMode::Infer,
                    )?)
                }
            },
            evidence: match &config.evidence {
                None => None,
                Some(evidence) => {
                    if let Some(problem) = evidence.problem() {
                        candle_core::bail!("{problem}");
                    }
                    Some(SliceNet::new(
                        super::evidence::EvidenceConfig::inputs(config.windows.len()),
                        evidence.widths,
                        0,
                        &vb.pp("evidence"),
                    )?)
                }
            },
            config,
            device,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detail_setting_the_weights_or_the_range_do_not_allow_is_named_at_load() {
        let device = Device::Cpu;
        let mut config: TinyConfig = serde_json::from_str(EMBEDDED_CONFIG).unwrap();
        let finder = config.finder.as_mut().unwrap();
        let tensors = || candle_core::safetensors::load_buffer(EMBEDDED_WEIGHTS, &device).unwrap();
        // The shipped weights hold no detail stem.
        finder.detail = Some(finder::FinderDetail {
            factor: 2,
            width: 8,
        });
        let Err(missing) = TinyModel::from_tensors(config.clone(), tensors(), device.clone())
        else {
            panic!("weights without a stem loaded for a finder with detail");
        };
        assert!(missing.to_string().contains("detail stem"), "{missing}");
        // Factors outside 2–4 and stems without channels are refused before any weight.
        for (factor, width) in [(1, 8), (5, 8), (2, 0)] {
            let finder = config.finder.as_mut().unwrap();
            finder.detail = Some(finder::FinderDetail { factor, width });
            let problem = finder.detail_problem().expect("a problem");
            assert!(
                problem.contains(&format!("factor {factor} and width {width}")),
                "{problem}"
            );
        }
        config.finder.as_mut().unwrap().detail = None;
        assert!(config.finder.as_ref().unwrap().detail_problem().is_none());
        assert!(TinyModel::from_tensors(config, tensors(), device.clone()).is_ok());
    }
}
