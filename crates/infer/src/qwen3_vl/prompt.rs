//! One user turn as the checkpoint's processor makes it: the chat template (Jinja, rendered
//! with minijinja the way transformers renders it: `trim_blocks`, `lstrip_blocks`), the image
//! placeholder expanded to one `<|image_pad|>` per merged patch, the video placeholder expanded
//! to `<t seconds><|vision_start|><|video_pad|>...<|vision_end|>` per temporal patch, the
//! tokenizer, and the 3-D (temporal, height, width) position of every token
//! (`get_rope_index`).

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

use super::preprocess::{self, Patches, RgbFrame};
use super::{Qwen3Vl, VlmError};

/// The picture part of a prompt.
pub enum VisualInput {
    /// Text only.
    None,
    /// One image.
    Image(RgbFrame),
    /// Video frames with their indices in the source video and its frame rate (timestamps in
    /// the prompt are `index / fps`).
    Video {
        frames: Vec<RgbFrame>,
        indices: Vec<usize>,
        fps: f64,
    },
}

/// A tokenised prompt ready for [`Qwen3Vl::prefill`].
pub struct Prompt {
    /// The text after the chat template and placeholder expansion.
    pub text: String,
    pub ids: Vec<u32>,
    /// 0 text, 1 image, 2 video, per token.
    pub types: Vec<u8>,
    pub patches: Option<Patches>,
    /// `[t, h, w]` per token.
    pub positions: Vec<[i64; 3]>,
    /// Added to a decoded token's sequence index to get its position.
    pub rope_delta: i64,
    pub preprocess_ms: f64,
}

impl Prompt {
    /// Sequence indices of the image or video placeholder tokens.
    #[must_use]
    pub fn visual_positions(&self) -> Vec<usize> {
        self.types
            .iter()
            .enumerate()
            .filter(|(_, t)| **t != 0)
            .map(|(i, _)| i)
            .collect()
    }
}

/// The chat template: `chat_template.json`, `chat_template.jinja`, or `tokenizer_config.json`'s
/// `chat_template`.
pub fn load_chat_template(dir: &Path) -> Result<String, VlmError> {
    let json_path = dir.join("chat_template.json");
    if json_path.exists() {
        let text =
            std::fs::read_to_string(&json_path).map_err(|e| VlmError::file(&json_path, e))?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| VlmError::file(&json_path, format!("not valid JSON: {e}")))?;
        return v
            .get("chat_template")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| VlmError::file(&json_path, "`chat_template` is missing"));
    }
    let jinja = dir.join("chat_template.jinja");
    if jinja.exists() {
        return std::fs::read_to_string(&jinja).map_err(|e| VlmError::file(&jinja, e));
    }
    let tc = dir.join("tokenizer_config.json");
    if let Ok(text) = std::fs::read_to_string(&tc)
        && let Ok(v) = serde_json::from_str::<Value>(&text)
        && let Some(t) = v.get("chat_template").and_then(Value::as_str)
    {
        return Ok(t.to_string());
    }
    Err(VlmError::file(
        &json_path,
        "missing: no chat template (chat_template.json, chat_template.jinja or tokenizer_config.json)",
    ))
}

/// End-of-reply token ids: `generation_config.json`'s `eos_token_id`, else the tokenizer's
/// `eos_token`, else `<|im_end|>`.
pub fn eos_ids(dir: &Path, tokenizer: &tokenizers::Tokenizer) -> Result<Vec<u32>, VlmError> {
    let read = |name: &str| -> Option<Value> {
        std::fs::read_to_string(dir.join(name))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
    };
    if let Some(gen_cfg) = read("generation_config.json")
        && let Some(v) = gen_cfg.get("eos_token_id")
    {
        let ids: Vec<u32> = match v {
            Value::Array(a) => a
                .iter()
                .filter_map(Value::as_u64)
                .map(|i| i as u32)
                .collect(),
            other => other.as_u64().map(|i| vec![i as u32]).unwrap_or_default(),
        };
        if !ids.is_empty() {
            return Ok(ids);
        }
    }
    let eos = read("tokenizer_config.json")
        .and_then(|v| match v.get("eos_token") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Object(o)) => o.get("content").and_then(Value::as_str).map(str::to_string),
            _ => None,
        })
        .unwrap_or_else(|| "<|im_end|>".into());
    tokenizer
        .token_to_id(&eos)
        .map(|id| vec![id])
        .ok_or_else(|| {
            VlmError::file(
                &dir.join("tokenizer.json"),
                format!("the end-of-turn token {eos:?} is not in the vocabulary"),
            )
        })
}

/// Render the chat template for one user turn with the generation prompt opened.
pub fn render_chat(template: &str, content: Value) -> Result<String, VlmError> {
    let mut env = minijinja::Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function(
        "raise_exception",
        |msg: String| -> Result<String, minijinja::Error> {
            Err(minijinja::Error::new(
                minijinja::ErrorKind::InvalidOperation,
                msg,
            ))
        },
    );
    env.add_template("chat", template)
        .map_err(|e| VlmError::Input(format!("the chat template does not parse: {e}")))?;
    let messages = json!([{"role": "user", "content": content}]);
    env.get_template("chat")
        .and_then(|t| {
            t.render(minijinja::context! {
                messages => messages,
                add_generation_prompt => true,
                add_vision_id => false,
            })
        })
        .map_err(|e| VlmError::Input(format!("the chat template failed: {e}")))
}

const IMAGE_PAD: &str = "<|image_pad|>";
const VIDEO_PAD: &str = "<|video_pad|>";
const VISION_START: &str = "<|vision_start|>";
const VISION_END: &str = "<|vision_end|>";

/// `get_rope_index` for one sequence: text tokens advance all three axes together; each run
/// of visual tokens (an image, or one temporal patch of a video) gets a grid of positions
/// starting at the current one, and the next text starts after its larger side.
pub fn positions(
    types: &[u8],
    grids: &[[usize; 3]],
    merge: usize,
) -> Result<Vec<[i64; 3]>, String> {
    let mut out = Vec::with_capacity(types.len());
    let mut grids = grids.iter();
    let mut current: i64 = 0;
    let mut i = 0;
    while i < types.len() {
        let kind = types[i];
        let end = i + types[i..].iter().take_while(|&&t| t == kind).count();
        if kind == 0 {
            for _ in i..end {
                out.push([current; 3]);
                current += 1;
            }
        } else {
            let &[t, h, w] = grids
                .next()
                .ok_or("more runs of visual tokens than images/frames")?;
            let (lh, lw) = (h / merge, w / merge);
            if t * lh * lw != end - i {
                return Err(format!(
                    "{} visual tokens for a {t}x{h}x{w} grid, which needs {}",
                    end - i,
                    t * lh * lw
                ));
            }
            for tt in 0..t {
                for y in 0..lh {
                    for x in 0..lw {
                        out.push([current + tt as i64, current + y as i64, current + x as i64]);
                    }
                }
            }
            current += lh.max(lw) as i64;
        }
        i = end;
    }
    Ok(out)
}

/// Build a prompt for `model` (see the module text).
pub fn build(model: &Qwen3Vl, visual: VisualInput, text: &str) -> Result<Prompt, VlmError> {
    let started = Instant::now();
    let cfg = &model.config;
    let merge = model.config.vision.spatial_merge_size;
    let (content, patches, expansion) = match visual {
        VisualInput::None => (json!([{"type": "text", "text": text}]), None, None),
        VisualInput::Image(image) => {
            let patches = preprocess::image_patches(&image, &model.image_processor)
                .map_err(|e| VlmError::Input(format!("image: {e}")))?;
            let [t, h, w] = patches.grid_thw;
            let n = t * h * w / (merge * merge);
            (
                json!([{"type": "image"}, {"type": "text", "text": text}]),
                Some(patches),
                Some((IMAGE_PAD, IMAGE_PAD.repeat(n))),
            )
        }
        VisualInput::Video {
            frames,
            indices,
            fps,
        } => {
            let patches = preprocess::video_patches(&frames, &model.video_processor)
                .map_err(|e| VlmError::Input(format!("video: {e}")))?;
            let [t, h, w] = patches.grid_thw;
            let per_frame = h * w / (merge * merge);
            let stamps =
                preprocess::timestamps(&indices, fps, model.video_processor.temporal_patch_size);
            let mut expanded = String::new();
            for stamp in stamps.iter().take(t) {
                let _ = write!(expanded, "<{stamp:.1} seconds>");
                expanded.push_str(VISION_START);
                expanded.push_str(&VIDEO_PAD.repeat(per_frame));
                expanded.push_str(VISION_END);
            }
            (
                json!([{"type": "video"}, {"type": "text", "text": text}]),
                Some(patches),
                Some((VIDEO_PAD, expanded)),
            )
        }
    };
    let mut rendered = render_chat(&model.chat_template, content)?;
    if let Some((pad, expanded)) = expansion {
        let at = rendered.find(pad).ok_or_else(|| {
            VlmError::Input(format!(
                "the chat template wrote no {pad} placeholder for the picture"
            ))
        })?;
        rendered.replace_range(at..at + pad.len(), &expanded);
    }
    let encoding = model
        .tokenizer
        .encode(rendered.as_str(), true)
        .map_err(|e| VlmError::Input(format!("tokenizing the prompt: {e}")))?;
    let ids = encoding.get_ids().to_vec();
    let types: Vec<u8> = ids
        .iter()
        .map(|&id| {
            if id == cfg.image_token_id {
                1
            } else if id == cfg.video_token_id {
                2
            } else {
                0
            }
        })
        .collect();
    let grids: Vec<[usize; 3]> = match &patches {
        // A video's grid is split per temporal patch: timestamps separate them.
        Some(p) if types.contains(&2) => vec![[1, p.grid_thw[1], p.grid_thw[2]]; p.grid_thw[0]],
        Some(p) => vec![p.grid_thw],
        None => Vec::new(),
    };
    let positions = positions(&types, &grids, merge).map_err(VlmError::Input)?;
    let max = positions.iter().flatten().copied().max().unwrap_or(-1);
    let rope_delta = max + 1 - ids.len() as i64;
    Ok(Prompt {
        text: rendered,
        ids,
        types,
        patches,
        positions,
        rope_delta,
        preprocess_ms: started.elapsed().as_secs_f64() * 1e3,
    })
}

/// Read a PNG or JPEG file as RGB.
pub fn read_rgb(path: &Path) -> Result<RgbFrame, VlmError> {
    let img = image::open(path)
        .map_err(|e| VlmError::input_file(path, format!("not a readable PNG or JPEG image: {e}")))?
        .to_rgb8();
    Ok(RgbFrame {
        width: img.width() as usize,
        height: img.height() as usize,
        pixels: img.into_raw(),
    })
}

/// A folder of frames (PNG or JPEG, in file-name order) as a video at `fps`, evenly sampled
/// down to `max_frames`.
pub fn read_video_dir(dir: &Path, fps: f64, max_frames: usize) -> Result<VisualInput, VlmError> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| VlmError::input_file(dir, e))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "png" | "jpg" | "jpeg"))
        })
        .collect();
    files.sort();
    if files.len() < 2 {
        return Err(VlmError::input_file(
            dir,
            format!(
                "{} frame image(s) found; a video needs at least 2 PNG or JPEG files",
                files.len()
            ),
        ));
    }
    let indices = preprocess::sample_indices(files.len(), max_frames);
    let frames = indices
        .iter()
        .map(|&i| read_rgb(&files[i]))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(VisualInput::Video {
        frames,
        indices,
        fps,
    })
}
