//! `keyslice vlm`: one question to a Qwen3-VL checkpoint about an image or a video (a folder of
//! frames), answered greedily; the text, or with `--json` the text, the new token ids and
//! timings.

use std::io::Write as _;
use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::infer::qwen3_vl::prompt::{read_rgb, read_video_dir};
use crate::infer::qwen3_vl::{Qwen3Vl, VisualInput, VlmError, parse_dtype, pick_device};

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
    let device = pick_device(&args.device)?;
    let dtype =
        match args.dtype.as_deref() {
            None => None,
            Some(name) => Some(parse_dtype(name).ok_or_else(|| {
                CliError::Argument(format!("--dtype {name}: use f32, bf16 or f16"))
            })?),
        };
    if args.repeats == 0 {
        return Err(CliError::Argument("--repeats must be at least 1".into()));
    }
    if args.max_new_tokens == 0 {
        return Err(CliError::Argument(
            "--max-new-tokens must be at least 1".into(),
        ));
    }
    let started = std::time::Instant::now();
    let mut model = Qwen3Vl::load(&args.model, &device, dtype)?;
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    let visual = match (&args.image, &args.video) {
        (Some(image), _) => VisualInput::Image(read_rgb(image)?),
        (None, Some(dir)) => {
            if !dir.is_dir() {
                return Err(VlmError::input_file(dir, "not a folder of frames").into());
            }
            let fps = args.fps.or(model.video_processor.fps).unwrap_or(2.0);
            if !(fps > 0.0 && fps.is_finite()) {
                return Err(CliError::Argument(format!("--fps {fps}: must be above 0")));
            }
            let max = model.video_processor.max_frames.unwrap_or(768);
            read_video_dir(dir, fps, max)?
        }
        (None, None) => VisualInput::None,
    };
    let prompt = model.prompt(visual, &args.prompt)?;
    let mut runs = Vec::with_capacity(args.repeats);
    let mut out;
    loop {
        out = model.generate(&prompt, args.max_new_tokens, !args.ignore_eos, false)?;
        runs.push(out.timings);
        if runs.len() == args.repeats {
            break;
        }
    }
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let value = serde_json::json!({
            "text": out.text,
            "token_ids": out.token_ids,
            "model": model.name(),
            "device": format!("{:?}", model.device.location()),
            "dtype": format!("{:?}", model.dtype),
            "timings": out.timings,
            "load_ms": load_ms,
            "runs": runs,
        });
        writeln!(stdout, "{value}")?;
    } else {
        writeln!(stdout, "{}", super::terminal_text(&out.text))?;
    }
    Ok(())
}
