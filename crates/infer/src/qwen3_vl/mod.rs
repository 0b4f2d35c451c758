//! Qwen3-VL in-process on candle: load a checkpoint folder as released on model hubs, turn an
//! image or a video (a folder of frames, or a CT's slices) and a text into the prompt the
//! checkpoint's chat template and processors make, and generate greedily with a KV cache.
//!
//! Written against the reference implementation (`transformers`' `modeling_qwen3_vl.py` and
//! its processors) and checked against it numerically: `tests/qwen3_vl.rs` runs the tiny
//! random-weight checkpoint made by `tests/data/qwen3vl/make_fixtures.py` and requires the
//! reference's greedy tokens and logits within 1e-4.
//!
//! - [`config`]: `config.json` and the preprocessor files;
//! - [`preprocess`]: resize, normalise and cut images and videos into patches;
//! - [`vision`]: the vision tower (2-D rotary attention per frame, merger, deepstack);
//! - [`text`]: the language model (interleaved M-RoPE, deepstack injection, KV cache);
//! - [`prompt`]: chat template, placeholder expansion (video timestamps), tokenizer, and the
//!   3-D positions of every prompt token;
//! - [`pipeline`]: the model as a [`Diagnoser`](super::Diagnoser) and
//!   [`Verifier`](super::Verifier).

#![expect(
    clippy::many_single_char_names,
    clippy::needless_pass_by_value,
    reason = "Tensor code reads best with the reference's short names (q, k, v, x, b, h, w), and candle's `VarBuilder` is passed by value by convention."
)]

pub mod config;
pub mod kernels;
pub mod linear;
pub mod pipeline;
pub mod preprocess;
pub mod prompt;
pub mod text;
pub mod vision;

use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use serde_json::Value;

pub use config::{ProcessorConfig, Qwen3VlConfig};
pub use preprocess::{Patches, RgbFrame};
pub use prompt::{Prompt, VisualInput};

use text::{Deepstack, Logits, TextModel};
use vision::VisionModel;

/// What went wrong loading or running a checkpoint; names the file or field.
#[derive(Debug, thiserror::Error)]
pub enum VlmError {
    /// A checkpoint file is missing or wrong.
    #[error("{path}: {detail}")]
    File { path: PathBuf, detail: String },
    /// An image or frames folder cannot be read.
    #[error("{path}: {detail}")]
    InputFile { path: PathBuf, detail: String },
    /// The input (image, video, prompt) cannot be used.
    #[error("{0}")]
    Input(String),
    /// The asked-for device is not there.
    #[error("{0}")]
    Device(String),
    /// The network failed (shapes, device).
    #[error("model run failed: {0}")]
    Run(String),
}

impl VlmError {
    /// What the user can do about it.
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            Self::File { .. } => {
                "give a Qwen3-VL checkpoint folder as released (config.json, model.safetensors or its index, tokenizer.json, preprocessor_config.json, chat template)"
            }
            Self::InputFile { .. } | Self::Input(_) => {
                "check the image, the frames folder or the prompt named above"
            }
            Self::Device(_) => {
                "use --device cpu, or a build with --features cuda (or metal) on a machine with that GPU"
            }
            Self::Run(_) => {
                "rerun with KEYSLICE_LOG=debug; on a GPU try --device cpu to rule out the driver"
            }
        }
    }

    pub(crate) fn file(path: &Path, detail: impl std::fmt::Display) -> Self {
        Self::File {
            path: path.to_path_buf(),
            detail: detail.to_string(),
        }
    }

    /// An input file (image, video frame folder) that cannot be read.
    pub fn input_file(path: &Path, detail: impl std::fmt::Display) -> Self {
        Self::InputFile {
            path: path.to_path_buf(),
            detail: detail.to_string(),
        }
    }
}

impl From<candle_core::Error> for VlmError {
    fn from(e: candle_core::Error) -> Self {
        Self::Run(e.to_string())
    }
}

/// Where to run: the CPU, or a GPU when built with the `cuda` or `metal` feature.
pub fn pick_device(name: &str) -> Result<Device, VlmError> {
    match name {
        "cpu" => Ok(Device::Cpu),
        "cuda" => cuda_device(),
        "metal" => {
            Device::new_metal(0).map_err(|e| VlmError::Device(format!("no Metal device: {e}")))
        }
        // A GPU build may run where there is no GPU (or no driver): it says so and takes the
        // CPU.
        "auto" => {
            if candle_core::utils::cuda_is_available() {
                match cuda_device() {
                    Ok(device) => return Ok(device),
                    Err(error) => tracing::warn!(
                        "this build can use CUDA but no CUDA device was found ({error}); running on the CPU"
                    ),
                }
            }
            if candle_core::utils::metal_is_available() {
                match Device::new_metal(0) {
                    Ok(device) => return Ok(device),
                    Err(error) => tracing::warn!(
                        "this build can use Metal but no Metal device was found ({error}); running on the CPU"
                    ),
                }
            }
            Ok(Device::Cpu)
        }
        other => Err(VlmError::Device(format!(
            "unknown device {other:?}: use auto, cpu, cuda or metal"
        ))),
    }
}

/// The first CUDA device, checked: the driver and cuBLAS are loaded when first asked for
/// (not linked), and the library that loads them panics when one is missing; that becomes an
/// error that says what to install.
fn cuda_device() -> Result<Device, VlmError> {
    let probe = || -> candle_core::Result<Device> {
        let device = Device::new_cuda(0)?;
        let square = candle_core::Tensor::ones((2, 2), DType::F32, &device)?;
        square.matmul(&square)?.to_vec2::<f32>()?;
        Ok(device)
    };
    match keyslice_io::limits::catch_quietly(probe) {
        Ok(Ok(device)) => Ok(device),
        Ok(Err(error)) => Err(VlmError::Device(format!("no CUDA device: {error}"))),
        Err(missing) => Err(VlmError::Device(format!(
            "no CUDA device: {}; a CUDA run needs the NVIDIA driver (libcuda.so.1) and cuBLAS (libcublas.so.13) on the library path",
            missing
                .message
                .split(" - searched for")
                .next()
                .unwrap_or_default()
        ))),
    }
}

/// A dtype by its checkpoint or command-line name (`bfloat16`, `bf16`, ...).
#[must_use]
pub fn parse_dtype(name: &str) -> Option<DType> {
    match name {
        "float32" | "f32" => Some(DType::F32),
        "bfloat16" | "bf16" => Some(DType::BF16),
        "float16" | "f16" => Some(DType::F16),
        _ => None,
    }
}

/// The safetensors files of a checkpoint: `model.safetensors`, or the shards listed in
/// `model.safetensors.index.json`.
fn weight_files(dir: &Path) -> Result<Vec<PathBuf>, VlmError> {
    let single = dir.join("model.safetensors");
    if single.exists() {
        return Ok(vec![single]);
    }
    let index = dir.join("model.safetensors.index.json");
    if !index.exists() {
        return Err(VlmError::file(
            &single,
            "missing (and no model.safetensors.index.json for sharded weights)",
        ));
    }
    let text = std::fs::read_to_string(&index).map_err(|e| VlmError::file(&index, e))?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| VlmError::file(&index, format!("not valid JSON: {e}")))?;
    let map = v
        .get("weight_map")
        .and_then(Value::as_object)
        .ok_or_else(|| VlmError::file(&index, "`weight_map` is missing"))?;
    let mut files: Vec<String> = map
        .values()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    files.sort();
    files.dedup();
    files
        .into_iter()
        .map(|f| {
            let p = dir.join(&f);
            if p.exists() {
                Ok(p)
            } else {
                Err(VlmError::file(&p, "listed in the index but missing"))
            }
        })
        .collect()
}

/// The weights, memory-mapped: each tensor is copied once, to its own storage on `device`, when
/// the model is built, so a checkpoint never needs twice its size in memory.
#[expect(
    unsafe_code,
    reason = "memory-mapping checkpoint weights, as the module text explains"
)]
fn map_weights(
    files: &[PathBuf],
    dtype: DType,
    device: &Device,
) -> Result<VarBuilder<'static>, VlmError> {
    // SAFETY: the files are mapped read-only for the duration of loading; the model copies
    // every tensor it keeps. A checkpoint rewritten while it loads can give wrong weights (not
    // memory unsafety in this process beyond what `memmap2` documents); users are told to load
    // finished checkpoints.
    unsafe { VarBuilder::from_mmaped_safetensors(files, dtype, device) }
        .map_err(|e| VlmError::file(&files[0], format!("not readable safetensors: {e}")))
}

/// Timings of one generation, in milliseconds, and token counts.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct GenTimings {
    pub preprocess_ms: f64,
    pub prefill_ms: f64,
    pub decode_ms: f64,
    pub prompt_tokens: usize,
    pub new_tokens: usize,
}

/// The result of [`Qwen3Vl::generate`].
#[derive(Debug, Clone)]
pub struct Generation {
    /// The new text (special tokens removed).
    pub text: String,
    /// The new token ids (the prompt's not included).
    pub token_ids: Vec<u32>,
    /// Logits (f32) that chose each new token, when asked for.
    pub step_logits: Vec<Vec<f32>>,
    pub timings: GenTimings,
}

/// A loaded checkpoint.
pub struct Qwen3Vl {
    pub config: Qwen3VlConfig,
    pub image_processor: ProcessorConfig,
    pub video_processor: ProcessorConfig,
    pub tokenizer: tokenizers::Tokenizer,
    pub chat_template: String,
    /// Token ids that end a reply.
    pub eos_ids: Vec<u32>,
    pub dir: PathBuf,
    pub device: Device,
    pub dtype: DType,
    vision: VisionModel,
    text: TextModel,
}

impl Qwen3Vl {
    /// Load a checkpoint folder on `device`; `dtype` overrides the checkpoint's own.
    pub fn load(dir: &Path, device: &Device, dtype: Option<DType>) -> Result<Self, VlmError> {
        if !dir.is_dir() {
            return Err(VlmError::file(
                dir,
                "not a folder: give the checkpoint folder (config.json, model.safetensors, tokenizer.json, ...)",
            ));
        }
        let config_path = dir.join("config.json");
        let text =
            std::fs::read_to_string(&config_path).map_err(|e| VlmError::file(&config_path, e))?;
        let raw: Value = serde_json::from_str(&text)
            .map_err(|e| VlmError::file(&config_path, format!("not valid JSON: {e}")))?;
        let config =
            Qwen3VlConfig::from_value(&raw).map_err(|e| VlmError::file(&config_path, e))?;
        let dtype = match dtype {
            Some(d) => d,
            None => match config.dtype.as_deref() {
                Some(name) => parse_dtype(name).ok_or_else(|| {
                    VlmError::file(
                        &config_path,
                        format!("dtype {name:?} is not float32, bfloat16 or float16"),
                    )
                })?,
                None => DType::F32,
            },
        };
        // bf16/f16 matrix products are slow on CPU; run those checkpoints in f32 there.
        let dtype = if device.is_cpu() && dtype == DType::F16 {
            DType::F32
        } else {
            dtype
        };
        let (image_processor, video_processor) = ProcessorConfig::load(dir)?;
        let tok_path = dir.join("tokenizer.json");
        if !tok_path.exists() {
            return Err(VlmError::file(&tok_path, "missing (the tokenizer)"));
        }
        let tokenizer = tokenizers::Tokenizer::from_file(&tok_path)
            .map_err(|e| VlmError::file(&tok_path, e))?;
        let chat_template = prompt::load_chat_template(dir)?;
        let eos_ids = prompt::eos_ids(dir, &tokenizer)?;
        let files = weight_files(dir)?;
        let vb = map_weights(&files, dtype, device)?;
        let model_vb = vb.pp("model");
        let visual_vb = if model_vb.contains_tensor("visual.patch_embed.proj.weight") {
            model_vb.pp("visual")
        } else {
            vb.pp("visual")
        };
        let weights_err = |e: candle_core::Error| {
            VlmError::file(&files[0], format!("weights do not match config.json: {e}"))
        };
        let vision = VisionModel::new(&config.vision, visual_vb).map_err(weights_err)?;
        let lm_vb = if model_vb.contains_tensor("language_model.embed_tokens.weight") {
            model_vb.pp("language_model")
        } else {
            model_vb.clone()
        };
        let text = TextModel::new(
            &config.text,
            config.tie_word_embeddings,
            lm_vb,
            vb.pp("lm_head"),
        )
        .map_err(weights_err)?;
        Ok(Self {
            config,
            image_processor,
            video_processor,
            tokenizer,
            chat_template,
            eos_ids,
            dir: dir.to_path_buf(),
            device: device.clone(),
            dtype,
            vision,
            text,
        })
    }

    /// A short name for records: the folder's name.
    pub fn name(&self) -> String {
        self.dir.file_name().map_or_else(
            || self.dir.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    }

    /// Build the prompt for one user turn: the image or video first, then `text`.
    pub fn prompt(&self, visual: VisualInput, text: &str) -> Result<Prompt, VlmError> {
        prompt::build(self, visual, text)
    }

    /// Run the whole prompt (clearing the cache first); returns the logits of every prompt
    /// position, `(tokens, vocab)` f32, and leaves the prompt in the cache.
    pub fn prefill(&mut self, prompt: &Prompt) -> Result<Tensor, VlmError> {
        self.run_prompt(prompt, Logits::All)
    }

    /// [`Self::prefill`], returning the logits of the positions `which` asks for.
    fn run_prompt(&mut self, prompt: &Prompt, which: Logits) -> Result<Tensor, VlmError> {
        self.text.clear_cache();
        let embeds = self.text.embed(&prompt.ids, &self.device)?;
        let (embeds, visual_positions, deepstack) = match &prompt.patches {
            Some(patches) => {
                let values = Tensor::from_slice(
                    &patches.values,
                    (patches.values.len() / patches.patch_len, patches.patch_len),
                    &self.device,
                )?;
                let grids = [patches.grid_thw];
                let started = Instant::now();
                let out = self.vision.forward(&values, &grids)?;
                tracing::debug!(
                    "vision tower: {} patches in {:.1} ms",
                    patches.values.len() / patches.patch_len,
                    started.elapsed().as_secs_f64() * 1e3
                );
                let positions = prompt.visual_positions();
                if positions.len() != out.embeds.dim(0)? {
                    return Err(VlmError::Run(format!(
                        "{} placeholder tokens for {} visual features",
                        positions.len(),
                        out.embeds.dim(0)?
                    )));
                }
                let embeds = text::scatter_rows(&embeds, &positions, &out.embeds)?;
                (embeds, positions, out.deepstack)
            }
            None => (embeds, Vec::new(), Vec::new()),
        };
        let ds = (!visual_positions.is_empty()).then_some(Deepstack {
            positions: &visual_positions,
            features: &deepstack,
        });
        let started = Instant::now();
        let logits = self.text.forward(&embeds, &prompt.positions, ds, which)?;
        tracing::debug!(
            "language model: {} prompt tokens in {:.1} ms",
            prompt.ids.len(),
            started.elapsed().as_secs_f64() * 1e3
        );
        Ok(logits)
    }

    /// One decoding step after the cache: the logits for the token after `id`.
    fn step(&mut self, id: u32, rope_delta: i64) -> Result<Vec<f32>, VlmError> {
        let pos = self.text.cached() as i64 + rope_delta;
        let embeds = self.text.embed(&[id], &self.device)?;
        let logits = self.text.forward(&embeds, &[[pos; 3]], None, Logits::All)?;
        Ok(logits.squeeze(0)?.to_vec1::<f32>()?)
    }

    /// Greedy generation of up to `max_new` tokens, stopping at an end-of-turn token when
    /// `stop_at_eos`; `keep_logits` records the logits of every step.
    pub fn generate(
        &mut self,
        prompt: &Prompt,
        max_new: usize,
        stop_at_eos: bool,
        keep_logits: bool,
    ) -> Result<Generation, VlmError> {
        let started = Instant::now();
        // Only the last position's logits: a released checkpoint's vocabulary has 151 936
        // entries, so all of them would cost a (prompt × 151 936) product (a seventh of a 2B
        // model's prefill) and 600 KB of memory per prompt token (1.2 GB for a 2 000-token CT
        // video).
        let logits = self.run_prompt(prompt, Logits::Last)?;
        let mut current = logits.squeeze(0)?.to_vec1::<f32>()?;
        let prefill_ms = started.elapsed().as_secs_f64() * 1e3;
        let decode_start = Instant::now();
        let mut ids = Vec::new();
        let mut step_logits = Vec::new();
        for n in 0..max_new {
            let next = argmax(&current);
            if keep_logits {
                step_logits.push(std::mem::take(&mut current));
            }
            ids.push(next);
            if stop_at_eos && self.eos_ids.contains(&next) {
                break;
            }
            if n + 1 < max_new {
                current = self.step(next, prompt.rope_delta)?;
            }
        }
        let text = self
            .tokenizer
            .decode(&ids, true)
            .map_err(|e| VlmError::Run(format!("decoding the tokens: {e}")))?;
        Ok(Generation {
            text,
            token_ids: ids.clone(),
            step_logits,
            timings: GenTimings {
                preprocess_ms: prompt.preprocess_ms,
                prefill_ms,
                decode_ms: decode_start.elapsed().as_secs_f64() * 1e3,
                prompt_tokens: prompt.ids.len(),
                new_tokens: ids.len(),
            },
        })
    }
}

/// The first index of the largest value (as `torch.argmax`).
#[must_use]
pub fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as u32
}
