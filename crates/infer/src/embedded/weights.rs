//! A keyslice-tiny checkpoint: its `config.json` ([`TinyConfig`]) and the weights compiled
//! into the binary (`load` makes either into a `TinyModel`).

use serde::{Deserialize, Serialize};

use super::decode::DecodeRule;
use super::domain::Domain;
use super::finder::FinderConfig;
use super::grid::GridSpec;
use super::organs::OrgansConfig;

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
    /// The evidence reader (`keyslice train --stage evidence`): when present it verifies each
    /// claim in three planes instead of the diagnoser's networks reading the key slice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<super::evidence::EvidenceConfig>,
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
            evidence: None,
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
