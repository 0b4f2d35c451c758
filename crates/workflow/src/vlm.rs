//! One question to a Qwen3-VL checkpoint about an image or a video (greedy): the first thing
//! to run on a new checkpoint.

use std::path::PathBuf;

use keyslice_infer::qwen3_vl::prompt::{read_rgb, read_video_dir};
use keyslice_infer::qwen3_vl::{Qwen3Vl, VisualInput, VlmError, parse_dtype, pick_device};

use crate::{Error, Outcome};

/// The question and how to ask it.
#[derive(Clone, Debug)]
pub struct Question {
    /// The checkpoint folder.
    pub model: PathBuf,
    /// An image file.
    pub image: Option<PathBuf>,
    /// A folder of video frames.
    pub video: Option<PathBuf>,
    /// Frames per second of the video (default: the checkpoint's).
    pub fps: Option<f64>,
    /// The question.
    pub prompt: String,
    /// Most new tokens.
    pub max_new_tokens: usize,
    /// Go on past the end-of-sequence token.
    pub ignore_eos: bool,
    /// auto, cpu, cuda or metal.
    pub device: String,
    /// f32, bf16 or f16 (default: the checkpoint's).
    pub dtype: Option<String>,
    /// How many times to answer (the timings of each kept).
    pub repeats: usize,
}

/// The answer, with what it cost.
pub struct Answer {
    json: serde_json::Value,
    text: String,
}

/// Asks the checkpoint the question, greedily, `repeats` times.
pub fn ask(question: &Question) -> Result<Answer, Error> {
    let device = pick_device(&question.device)?;
    let dtype = match question.dtype.as_deref() {
        None => None,
        Some(name) => Some(
            parse_dtype(name)
                .ok_or_else(|| Error::Argument(format!("--dtype {name}: use f32, bf16 or f16")))?,
        ),
    };
    if question.repeats == 0 {
        return Err(Error::Argument("--repeats must be at least 1".into()));
    }
    if question.max_new_tokens == 0 {
        return Err(Error::Argument(
            "--max-new-tokens must be at least 1".into(),
        ));
    }
    let started = std::time::Instant::now();
    let mut model = Qwen3Vl::load(&question.model, &device, dtype)?;
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    let visual = match (&question.image, &question.video) {
        (Some(image), _) => VisualInput::Image(read_rgb(image)?),
        (None, Some(dir)) => {
            if !dir.is_dir() {
                return Err(VlmError::input_file(dir, "not a folder of frames").into());
            }
            let fps = question.fps.or(model.video_processor.fps).unwrap_or(2.0);
            if !(fps > 0.0 && fps.is_finite()) {
                return Err(Error::Argument(format!("--fps {fps}: must be above 0")));
            }
            let max = model.video_processor.max_frames.unwrap_or(768);
            read_video_dir(dir, fps, max)?
        }
        (None, None) => VisualInput::None,
    };
    let prompt = model.prompt(visual, &question.prompt)?;
    let mut runs = Vec::with_capacity(question.repeats);
    let mut out;
    loop {
        out = model.generate(
            &prompt,
            question.max_new_tokens,
            !question.ignore_eos,
            false,
        )?;
        runs.push(out.timings);
        if runs.len() == question.repeats {
            break;
        }
    }
    let json = serde_json::json!({
        "text": out.text,
        "token_ids": out.token_ids,
        "model": model.name(),
        "device": format!("{:?}", model.device.location()),
        "dtype": format!("{:?}", model.dtype),
        "timings": out.timings,
        "load_ms": load_ms,
        "runs": runs,
    });
    Ok(Answer {
        json,
        text: keyslice_core::text::shown_lines(&out.text),
    })
}

impl Outcome for Answer {
    fn json(&self) -> String {
        self.json.to_string()
    }

    fn text(&self) -> String {
        self.text.clone()
    }
}
