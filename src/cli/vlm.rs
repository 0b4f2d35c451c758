//! `keyslice vlm`: one question to a Qwen3-VL checkpoint about an image or a video (a folder of
//! frames), answered greedily; the text, or with `--json` the text, the new token ids and
//! timings.

use std::path::PathBuf;

use clap::Args;

use super::CliError;

/// Arguments of `keyslice vlm`.
#[derive(Debug, Args)]
pub struct VlmArgs {
    /// The checkpoint folder (config.json, model.safetensors or shards, tokenizer.json,
    /// `preprocessor_config.json`, chat template).
    #[arg(long)]
    pub model: PathBuf,
    /// A PNG or JPEG image.
    #[arg(long, conflicts_with = "video", required_unless_present = "video")]
    pub image: Option<PathBuf>,
    /// A folder of frames (PNG or JPEG, taken in file-name order).
    #[arg(long)]
    pub video: Option<PathBuf>,
    /// Frames per second of the frames folder (timestamps in the prompt are frame / fps);
    /// default: the checkpoint's `video_preprocessor_config.json` `fps`, else 2.
    #[arg(long)]
    pub fps: Option<f64>,
    /// The question.
    #[arg(long)]
    pub prompt: String,
    /// Most new tokens (generation also stops at the end-of-turn token).
    #[arg(long, default_value_t = 256)]
    pub max_new_tokens: usize,
    /// Generate exactly --max-new-tokens, past the end-of-turn token (for benchmarks).
    #[arg(long)]
    pub ignore_eos: bool,
    /// auto (a GPU when built with `cuda`/`metal` and present, else the CPU), cpu, cuda, metal.
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// Override the checkpoint's dtype: f32, bf16 or f16.
    #[arg(long)]
    pub dtype: Option<String>,
    /// Print a JSON object (`text`, `token_ids`, `timings`) instead of the text.
    #[arg(long)]
    pub json: bool,
    /// Answer the same question this many times with the model loaded once (for benchmarks:
    /// the first run pays for first-touch memory, later ones show the steady state a batch
    /// or the viewer sees); with `--json`, `runs` holds every run's timings.
    #[arg(long, default_value_t = 1)]
    pub repeats: usize,
}

/// Runs `keyslice vlm`.
pub fn run(args: &VlmArgs) -> Result<(), CliError> {
    let answer = keyslice_workflow::vlm::ask(&keyslice_workflow::vlm::Question {
        model: args.model.clone(),
        image: args.image.clone(),
        video: args.video.clone(),
        fps: args.fps,
        prompt: args.prompt.clone(),
        max_new_tokens: args.max_new_tokens,
        ignore_eos: args.ignore_eos,
        device: args.device.clone(),
        dtype: args.dtype.clone(),
        repeats: args.repeats,
    })?;
    super::print_outcome(args.json, &answer)
}
