//! A keyslice-tiny checkpoint: its `config.json` ([`TinyConfig`]), the weights compiled into
//! the binary, and loading either into a [`TinyModel`].

use super::decode::DecodeRule;
use super::domain::Domain;
use super::finder;
use candle_core::DType;
use std::path::Path;

use candle_core::{Device, Tensor};
use candle_nn::VarBuilder;
use serde::{Deserialize, Serialize};

use super::batch_norm::NormMode;
use super::finder::{FinderConfig, FinderNet};
use super::grid::GridSpec;
use super::model::TinyModel;
use super::net::SliceNet;
use super::organs::{OrganNet, OrgansConfig};
use crate::InferError;

/// candle's error text without the backtrace it may carry.
#[must_use]
pub fn candle_message(error: &candle_core::Error) -> String {
    error
        .to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The weights and configuration compiled into the binary.
pub(super) const EMBEDDED_CONFIG: &str =
    include_str!("../../../../models/keyslice-tiny/config.json");
pub(super) const EMBEDDED_WEIGHTS: &[u8] =
    include_bytes!("../../../../models/keyslice-tiny/model.safetensors");

/// `config.json` of a keyslice-tiny checkpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TinyConfig {
    /// `"keyslice-tiny"`.
    pub model: String,
    /// Checkpoint version (bumped at each retraining).
    pub version: String,
    /// The diagnoser's grid.
    pub grid: GridSpec,
    /// Pixels per side of the verifier's crop (on the same pixel spacing).
    pub crop: usize,
    /// Channel widths of the diagnoser at full, ½, ¼, ⅛ resolution.
    pub diagnoser_widths: [usize; 4],
    /// Channel widths of the verifier.
    pub verifier_widths: [usize; 4],
    /// Window centre and width (HU) of each input window.
    pub windows: Vec<[f32; 2]>,
    /// Groups of the group normalisation after each convolution (0: none, as in version 1).
    #[serde(default)]
    pub norm_groups: usize,
    /// Side of the square windows of the grid the diagnoser is trained on (0: whole slabs);
    /// it always reads whole slabs when analysing.
    #[serde(default)]
    pub train_crop: usize,
    /// When lesion pixels make a lesion.
    #[serde(default)]
    pub decode: DecodeRule,
    /// The lesion finder (version 2 on): when present it decides which organs show a tumor
    /// and where, and the diagnoser's lesion masks are not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finder: Option<FinderConfig>,
    /// The organ network (version 3 on): when present its masks, on the finder's grid,
    /// replace the diagnoser's for the finder and the decoding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organs: Option<OrgansConfig>,
    /// The range of each figure of the domain check over the calibration phantoms
    /// (`keyslice train --stage domain`); without it no CT is called unfamiliar but for its
    /// slice spacing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<Domain>,
}

impl TinyConfig {
    /// The configuration a fresh training run starts from.
    #[must_use]
    pub fn initial() -> Self {
        Self {
            model: "keyslice-tiny".into(),
            version: "0".into(),
            // 128 × 3 mm = 384 mm field, fine enough for 1 cm tumors; the diagnoser trains
            // on 64² windows of it so that training fits well under an hour on two CPU cores
            // (about 1.3 s a step). Group normalisation learned more slowly per step and
            // cost a third more time in a 150-step trial, so it is off.
            grid: GridSpec {
                size: 128,
                pixel_mm: 3.0,
                slab_mm: 5.0,
            },
            crop: 48,
            diagnoser_widths: [8, 16, 32, 48],
            verifier_widths: [8, 16, 24, 32],
            windows: vec![[40.0, 400.0], [90.0, 150.0]],
            norm_groups: 0,
            train_crop: 64,
            decode: DecodeRule::default(),
            finder: None,
            organs: None,
            domain: None,
        }
    }

    /// Diagnoser input channels: three slabs × windows, plus x, y and height features.
    #[must_use]
    pub fn diagnoser_inputs(&self) -> usize {
        3 * self.windows.len() + 3
    }

    /// Verifier input channels: one slice × windows, plus x, y and height features.
    #[must_use]
    pub fn verifier_inputs(&self) -> usize {
        self.windows.len() + 3
    }
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
