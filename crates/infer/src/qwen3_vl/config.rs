//! `config.json` of a released Qwen3-VL checkpoint (and the `rope_parameters` spelling that
//! transformers 5 writes), and the two preprocessor files.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::VlmError;

/// The language model's settings (`text_config`).
#[derive(Debug, Clone)]
pub struct TextConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    /// Frequencies given to the temporal, height and width axes; sums to `head_dim / 2`.
    pub mrope_section: [usize; 3],
    pub attention_bias: bool,
    pub hidden_act: String,
}

/// The vision tower's settings (`vision_config`).
#[derive(Debug, Clone)]
pub struct VisionConfig {
    pub depth: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_heads: usize,
    pub in_channels: usize,
    pub patch_size: usize,
    pub spatial_merge_size: usize,
    pub temporal_patch_size: usize,
    pub out_hidden_size: usize,
    pub num_position_embeddings: usize,
    pub deepstack_visual_indexes: Vec<usize>,
    pub hidden_act: String,
    pub rope_theta: f64,
}

/// The whole `config.json`.
#[derive(Debug, Clone)]
pub struct Qwen3VlConfig {
    pub text: TextConfig,
    pub vision: VisionConfig,
    pub image_token_id: u32,
    pub video_token_id: u32,
    pub vision_start_token_id: u32,
    pub vision_end_token_id: u32,
    pub tie_word_embeddings: bool,
    /// `dtype` / `torch_dtype` as written ("bfloat16", "float32", ...).
    pub dtype: Option<String>,
}

fn field<'a>(obj: &'a Value, key: &str, at: &str) -> Result<&'a Value, String> {
    obj.get(key)
        .ok_or_else(|| format!("`{at}{key}` is missing"))
}

fn usize_of(obj: &Value, key: &str, at: &str) -> Result<usize, String> {
    field(obj, key, at)?
        .as_u64()
        .map(|v| v as usize)
        .ok_or_else(|| format!("`{at}{key}` is not a whole number"))
}

fn usize_or(obj: &Value, key: &str, default: usize) -> usize {
    obj.get(key)
        .and_then(Value::as_u64)
        .map_or(default, |v| v as usize)
}

fn f64_or(obj: &Value, key: &str, default: f64) -> f64 {
    obj.get(key).and_then(Value::as_f64).unwrap_or(default)
}

fn str_or(obj: &Value, key: &str, default: &str) -> String {
    obj.get(key)
        .and_then(Value::as_str)
        .unwrap_or(default)
        .to_string()
}

impl Qwen3VlConfig {
    /// Parse a `config.json` value; errors name the field.
    #[expect(
        clippy::too_many_lines,
        reason = "one field after another, each with its error"
    )]
    pub(crate) fn from_value(v: &Value) -> Result<Self, String> {
        let model_type = v.get("model_type").and_then(Value::as_str).unwrap_or("");
        if model_type != "qwen3_vl" {
            return Err(format!(
                "`model_type` is {model_type:?}, expected \"qwen3_vl\" (a Qwen3-VL dense checkpoint)"
            ));
        }
        let t = field(v, "text_config", "")?;
        let at = "text_config.";
        let hidden_size = usize_of(t, "hidden_size", at)?;
        let num_attention_heads = usize_of(t, "num_attention_heads", at)?;
        let head_dim = usize_or(t, "head_dim", hidden_size / num_attention_heads.max(1));
        // Released checkpoints: `rope_scaling` + `rope_theta`; transformers 5: `rope_parameters`.
        let rope = t
            .get("rope_scaling")
            .filter(|r| !r.is_null())
            .or_else(|| t.get("rope_parameters"))
            .ok_or_else(|| format!("`{at}rope_scaling` is missing (it holds `mrope_section`)"))?;
        let section = rope
            .get("mrope_section")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("`{at}rope_scaling.mrope_section` is missing"))?;
        let section: Vec<usize> = section
            .iter()
            .filter_map(Value::as_u64)
            .map(|s| s as usize)
            .collect();
        if section.len() != 3 || section.iter().sum::<usize>() != head_dim / 2 {
            return Err(format!(
                "`{at}rope_scaling.mrope_section` is {section:?}: expected three numbers adding up to head_dim/2 = {}",
                head_dim / 2
            ));
        }
        if rope.get("mrope_interleaved").and_then(Value::as_bool) == Some(false) {
            return Err(format!(
                "`{at}rope_scaling.mrope_interleaved` is false: Qwen3-VL interleaves its M-RoPE axes"
            ));
        }
        let rope_theta = t
            .get("rope_theta")
            .and_then(Value::as_f64)
            .or_else(|| rope.get("rope_theta").and_then(Value::as_f64))
            .unwrap_or(5_000_000.0);
        let text = TextConfig {
            vocab_size: usize_of(t, "vocab_size", at)?,
            hidden_size,
            intermediate_size: usize_of(t, "intermediate_size", at)?,
            num_hidden_layers: usize_of(t, "num_hidden_layers", at)?,
            num_attention_heads,
            num_key_value_heads: usize_or(t, "num_key_value_heads", num_attention_heads),
            head_dim,
            rms_norm_eps: f64_or(t, "rms_norm_eps", 1e-6),
            rope_theta,
            mrope_section: [section[0], section[1], section[2]],
            attention_bias: t
                .get("attention_bias")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            hidden_act: str_or(t, "hidden_act", "silu"),
        };
        let vc = field(v, "vision_config", "")?;
        let at = "vision_config.";
        let vision = VisionConfig {
            depth: usize_of(vc, "depth", at)?,
            hidden_size: usize_of(vc, "hidden_size", at)?,
            intermediate_size: usize_of(vc, "intermediate_size", at)?,
            num_heads: usize_of(vc, "num_heads", at)?,
            in_channels: usize_or(vc, "in_channels", 3),
            patch_size: usize_or(vc, "patch_size", 16),
            spatial_merge_size: usize_or(vc, "spatial_merge_size", 2),
            temporal_patch_size: usize_or(vc, "temporal_patch_size", 2),
            out_hidden_size: usize_of(vc, "out_hidden_size", at)?,
            num_position_embeddings: usize_of(vc, "num_position_embeddings", at)?,
            deepstack_visual_indexes: field(vc, "deepstack_visual_indexes", at)?
                .as_array()
                .ok_or_else(|| format!("`{at}deepstack_visual_indexes` is not a list"))?
                .iter()
                .filter_map(Value::as_u64)
                .map(|i| i as usize)
                .collect(),
            hidden_act: str_or(vc, "hidden_act", "gelu_pytorch_tanh"),
            rope_theta: vc
                .get("rope_parameters")
                .and_then(|r| r.get("rope_theta"))
                .and_then(Value::as_f64)
                .unwrap_or(10_000.0),
        };
        if vision.out_hidden_size != text.hidden_size {
            return Err(format!(
                "`vision_config.out_hidden_size` ({}) differs from `text_config.hidden_size` ({})",
                vision.out_hidden_size, text.hidden_size
            ));
        }
        // Heads split the width evenly; the vision rotary needs a head size divisible by 4
        // (row and column angles, each a cos/sin half); query heads share key/value heads
        // in equal groups.
        if vision.num_heads == 0
            || !vision.hidden_size.is_multiple_of(vision.num_heads)
            || !(vision.hidden_size / vision.num_heads).is_multiple_of(4)
        {
            return Err(format!(
                "`vision_config.num_heads` ({}) must split `vision_config.hidden_size` ({}) into heads of a multiple of 4",
                vision.num_heads, vision.hidden_size
            ));
        }
        if text.num_key_value_heads == 0
            || !text
                .num_attention_heads
                .is_multiple_of(text.num_key_value_heads)
        {
            return Err(format!(
                "`text_config.num_attention_heads` ({}) is not a multiple of `text_config.num_key_value_heads` ({})",
                text.num_attention_heads, text.num_key_value_heads
            ));
        }
        if vision.deepstack_visual_indexes.len() > text.num_hidden_layers {
            return Err("more deepstack levels than language-model layers".into());
        }
        let side = (vision.num_position_embeddings as f64).sqrt() as usize;
        if side * side != vision.num_position_embeddings {
            return Err("`vision_config.num_position_embeddings` is not a square".into());
        }
        let id = |key: &str| -> Result<u32, String> { Ok(usize_of(v, key, "")? as u32) };
        Ok(Self {
            text,
            vision,
            image_token_id: id("image_token_id")?,
            video_token_id: id("video_token_id")?,
            vision_start_token_id: id("vision_start_token_id")?,
            vision_end_token_id: id("vision_end_token_id")?,
            tie_word_embeddings: v
                .get("tie_word_embeddings")
                .or_else(|| t.get("tie_word_embeddings"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
            dtype: v
                .get("dtype")
                .or_else(|| v.get("torch_dtype"))
                .or_else(|| t.get("dtype"))
                .or_else(|| t.get("torch_dtype"))
                .and_then(Value::as_str)
                .map(str::to_string),
        })
    }
}

/// Image and video preprocessing settings (`preprocessor_config.json`,
/// `video_preprocessor_config.json`, or the two halves of transformers 5's
/// `processor_config.json`).
#[derive(Debug, Clone, Deserialize)]
pub struct ProcessorConfig {
    #[serde(default = "default_patch")]
    pub patch_size: usize,
    #[serde(default = "default_two")]
    pub temporal_patch_size: usize,
    #[serde(default = "default_two")]
    pub merge_size: usize,
    pub size: Option<SizeBounds>,
    pub min_pixels: Option<usize>,
    pub max_pixels: Option<usize>,
    #[serde(default = "default_half")]
    pub image_mean: [f32; 3],
    #[serde(default = "default_half")]
    pub image_std: [f32; 3],
    #[serde(default = "default_rescale")]
    pub rescale_factor: f64,
    #[serde(default = "default_true")]
    pub do_resize: bool,
    /// Video only: frames per second the folder's frames are taken to be sampled at.
    pub fps: Option<f64>,
    pub max_frames: Option<usize>,
}

/// `size`: pixel-count bounds of a resized image (or of all frames of a video together).
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct SizeBounds {
    pub shortest_edge: usize,
    pub longest_edge: usize,
}

fn default_patch() -> usize {
    16
}
fn default_two() -> usize {
    2
}
fn default_half() -> [f32; 3] {
    [0.5, 0.5, 0.5]
}
fn default_rescale() -> f64 {
    1.0 / 255.0
}
fn default_true() -> bool {
    true
}

impl ProcessorConfig {
    /// `(min_pixels, max_pixels)`.
    #[must_use]
    pub fn pixel_bounds(&self, video: bool) -> (usize, usize) {
        let (lo, hi) = if video {
            (128 * 32 * 32, 768 * 32 * 32)
        } else {
            (56 * 56, 28 * 28 * 1280)
        };
        match self.size {
            Some(s) => (s.shortest_edge, s.longest_edge),
            None => (self.min_pixels.unwrap_or(lo), self.max_pixels.unwrap_or(hi)),
        }
    }

    /// Read the image and video settings from a checkpoint folder.
    pub fn load(dir: &Path) -> Result<(Self, Self), VlmError> {
        let read = |name: &str| -> Result<Option<Value>, VlmError> {
            let path = dir.join(name);
            if !path.exists() {
                return Ok(None);
            }
            let text = std::fs::read_to_string(&path).map_err(|e| VlmError::file(&path, e))?;
            serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| VlmError::file(&path, format!("not valid JSON: {e}")))
        };
        let parse = |v: Value, name: &str| -> Result<Self, VlmError> {
            serde_json::from_value(v).map_err(|e| VlmError::file(&dir.join(name), e))
        };
        let (image, video) = if let Some(combined) = read("processor_config.json")? {
            let image = combined.get("image_processor").cloned();
            let video = combined.get("video_processor").cloned();
            (image, video)
        } else {
            (None, None)
        };
        let image = match read("preprocessor_config.json")?.or(image) {
            Some(v) => parse(v, "preprocessor_config.json")?,
            None => {
                return Err(VlmError::file(
                    &dir.join("preprocessor_config.json"),
                    "missing (the image preprocessor's settings)",
                ));
            }
        };
        let video = match read("video_preprocessor_config.json")?.or(video) {
            Some(v) => parse(v, "video_preprocessor_config.json")?,
            None => image.clone(),
        };
        Ok((image, video))
    }
}
