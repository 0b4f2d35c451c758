//! Qwen3-VL on candle against the reference (`transformers` 5.24, `PyTorch` 2.15, f32, CPU):
//! the tiny random-weight checkpoint and the reference's outputs in `tests/data/qwen3vl`
//! (made by `make_fixtures.py` there). Prompt token ids and pixel values must match, greedy
//! tokens must be identical, and logits (every prompt position, every decoding step) within
//! 1e-4. A bfloat16 copy of the checkpoint is held to the reference's bfloat16 run, to
//! bfloat16 precision.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a helper whose input is not what the test built fails the test"
)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};
use keyslice::infer::qwen3_vl::prompt::{read_rgb, read_video_dir};
use keyslice::infer::qwen3_vl::{Qwen3Vl, VisualInput, preprocess};
use serde_json::Value;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/qwen3vl")
}

fn reference() -> (Value, HashMap<String, Tensor>) {
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(data().join("reference.json")).unwrap())
            .unwrap();
    let tensors =
        candle_core::safetensors::load(data().join("reference.safetensors"), &Device::Cpu).unwrap();
    (json, tensors)
}

fn load() -> Qwen3Vl {
    Qwen3Vl::load(&data().join("tiny"), &Device::Cpu, None).expect("the tiny checkpoint loads")
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "lengths differ");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn check_case(name: &str, visual: VisualInput, prompt_key: &str) {
    let (json, tensors) = reference();
    let case = &json[name];
    let mut model = load();
    let prompt = model
        .prompt(visual, json[prompt_key].as_str().unwrap())
        .unwrap();
    assert_eq!(
        prompt.ids,
        ids(&case["prompt_ids"]),
        "{name}: prompt token ids"
    );
    let patches = prompt.patches.as_ref().unwrap();
    let grid: Vec<usize> = ids(&case["grid_thw"]).iter().map(|&g| g as usize).collect();
    assert_eq!(patches.grid_thw.to_vec(), grid, "{name}: grid");
    let reference_pixels = tensors[&format!("{name}.pixel_values")]
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    let d = max_abs_diff(&patches.values, &reference_pixels);
    assert!(d < 1e-6, "{name}: pixel values differ by {d}");

    let logits = model.prefill(&prompt).unwrap();
    let reference_logits = &tensors[&format!("{name}.prefill_logits")];
    assert_eq!(
        logits.dims(),
        reference_logits.dims(),
        "{name}: prefill logits shape"
    );
    let d = max_abs_diff(
        &logits.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
        &reference_logits
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap(),
    );
    assert!(d < 1e-4, "{name}: prefill logits differ by {d}");

    let new = case["greedy_tokens"].as_array().unwrap().len();
    let out = model.generate(&prompt, new, false, true).unwrap();
    assert_eq!(
        out.token_ids,
        ids(&case["greedy_tokens"]),
        "{name}: greedy tokens"
    );
    let steps = tensors[&format!("{name}.step_logits")]
        .to_vec2::<f32>()
        .unwrap();
    for (i, (ours, theirs)) in out.step_logits.iter().zip(&steps).enumerate() {
        let d = max_abs_diff(ours, theirs);
        assert!(d < 1e-4, "{name}: step {i} logits differ by {d}");
    }
    assert_eq!(
        out.text,
        case["greedy_text"].as_str().unwrap(),
        "{name}: decoded text"
    );
}

#[test]
fn image_prompt_matches_the_reference() {
    let image = read_rgb(&data().join("image.png")).unwrap();
    check_case("image", VisualInput::Image(image), "image_prompt");
}

#[test]
fn video_prompt_with_timestamps_matches_the_reference() {
    let (json, _) = reference();
    let fps = json["video_fps"].as_f64().unwrap();
    let video = read_video_dir(&data().join("video"), fps, 768).unwrap();
    check_case("video", video, "video_prompt");
}

#[test]
fn chat_template_renders_as_the_reference() {
    let (json, _) = reference();
    let model = load();
    let prompt = model
        .prompt(
            VisualInput::Image(read_rgb(&data().join("image.png")).unwrap()),
            json["image_prompt"].as_str().unwrap(),
        )
        .unwrap();
    let expected = json["image_chat"]
        .as_str()
        .unwrap()
        .replace("<|image_pad|>", &"<|image_pad|>".repeat(6));
    assert_eq!(prompt.text, expected);
}

#[test]
fn resized_image_is_within_one_grey_level_of_the_reference() {
    // odd.png is 70x50: bicubic with antialiasing to 64x64 on 8-bit pixels. PIL's fixed-point
    // algorithm against torchvision's: values may differ by one grey level (2/255 after the
    // 0.5/0.5 normalisation) at a few pixels.
    let (json, tensors) = reference();
    let model = load();
    let image = read_rgb(&data().join("odd.png")).unwrap();
    let patches = preprocess::image_patches(&image, &model.image_processor).unwrap();
    let grid: Vec<usize> = ids(&json["odd"]["grid_thw"])
        .iter()
        .map(|&g| g as usize)
        .collect();
    assert_eq!(patches.grid_thw.to_vec(), grid);
    let theirs = tensors["odd.pixel_values"]
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    let d = max_abs_diff(&patches.values, &theirs);
    let exact = patches
        .values
        .iter()
        .zip(&theirs)
        .filter(|(a, b)| (*a - *b).abs() < 1e-6)
        .count();
    let share = exact as f64 / theirs.len() as f64;
    assert!(d <= 2.0 / 255.0 + 1e-6, "largest difference {d}");
    assert!(share > 0.95, "only {share:.3} of values identical");
}

fn keyslice(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_keyslice"))
        .args(args)
        .output()
        .unwrap()
}

/// Runs a command that must succeed and print one JSON value.
fn keyslice_json(args: &[&str]) -> Value {
    let out = keyslice(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn vlm_command_prints_the_reference_tokens_as_json() {
    let (json, _) = reference();
    let d = data();
    let v = keyslice_json(&[
        "vlm",
        "--model",
        d.join("tiny").to_str().unwrap(),
        "--image",
        d.join("image.png").to_str().unwrap(),
        "--prompt",
        json["image_prompt"].as_str().unwrap(),
        "--max-new-tokens",
        "12",
        "--ignore-eos",
        "--device",
        "cpu",
        "--json",
        "--repeats",
        "3",
    ]);
    assert_eq!(ids(&v["token_ids"]), ids(&json["image"]["greedy_tokens"]));
    assert_eq!(v["text"], json["image"]["greedy_text"]);
    assert_eq!(v["timings"]["prompt_tokens"], 24);
    // --repeats: the same answer three times with the model loaded once, each run's timings
    // kept (the cache is cleared between runs, so the last answer is still the reference's).
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for run in runs {
        assert_eq!(run["prompt_tokens"], 24);
        assert_eq!(run["new_tokens"], 12);
        assert!(run["prefill_ms"].as_f64().unwrap() > 0.0);
    }

    // Without --json: the text alone.
    let out = keyslice(&[
        "vlm",
        "--model",
        d.join("tiny").to_str().unwrap(),
        "--video",
        d.join("video").to_str().unwrap(),
        "--fps",
        "2",
        "--prompt",
        json["video_prompt"].as_str().unwrap(),
        "--max-new-tokens",
        "12",
        "--ignore-eos",
    ]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end_matches('\n'),
        json["video"]["greedy_text"].as_str().unwrap()
    );
}

#[test]
fn vlm_command_names_the_wrong_file() {
    let d = data();
    // The fixture folder itself is not a checkpoint: config.json is missing there.
    let out = keyslice(&[
        "vlm",
        "--model",
        d.to_str().unwrap(),
        "--image",
        d.join("image.png").to_str().unwrap(),
        "--prompt",
        "x",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("config.json") && err.contains("hint:"),
        "{err}"
    );

    // A frames folder without frames.
    let out = keyslice(&[
        "vlm",
        "--model",
        d.join("tiny").to_str().unwrap(),
        "--video",
        d.join("tiny").to_str().unwrap(),
        "--prompt",
        "x",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("0 frame image(s) found"), "{err}");

    // A checkpoint whose config lacks the M-RoPE sections.
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(d.join("tiny")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), tmp.path().join(entry.file_name())).unwrap();
    }
    let config = tmp.path().join("config.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    v["text_config"]["rope_scaling"]
        .as_object_mut()
        .unwrap()
        .remove("mrope_section");
    std::fs::write(&config, v.to_string()).unwrap();
    let err = Qwen3Vl::load(tmp.path(), &Device::Cpu, None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("mrope_section") && err.contains("config.json"),
        "{err}"
    );

    // Head counts that do not split the width, or query heads that do not share key/value
    // heads evenly, are named before any weight is read.
    let tiny: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("tiny/config.json")).unwrap())
            .unwrap();
    for (section, key, value, named) in [
        ("vision_config", "num_heads", 3, "vision_config.num_heads"),
        (
            "text_config",
            "num_key_value_heads",
            3,
            "num_key_value_heads",
        ),
    ] {
        let mut v = tiny.clone();
        v[section][key] = value.into();
        std::fs::write(&config, v.to_string()).unwrap();
        let err = Qwen3Vl::load(tmp.path(), &Device::Cpu, None)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains(named) && err.contains("config.json"), "{err}");
    }
}

#[test]
fn analyze_runs_a_qwen3_vl_checkpoint_as_diagnoser_and_verifier() {
    // The tiny checkpoint writes gibberish: the pipeline keeps it, flags it and still records a
    // prediction naming the model.
    let tmp = tempfile::tempdir().unwrap();
    let phantom = keyslice(&[
        "phantom",
        "--out",
        tmp.path().to_str().unwrap(),
        "--cases",
        "1",
        "--matrix",
        "64",
        "--slice-mm",
        "8",
    ]);
    assert!(phantom.status.success());
    let ct = std::fs::read_dir(tmp.path())
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| e.path().is_dir())
        .unwrap()
        .path()
        .join("ct.nii.gz");
    let v = keyslice_json(&[
        "analyze",
        ct.to_str().unwrap(),
        "--backend",
        "qwen3vl",
        "--model",
        data().join("tiny").to_str().unwrap(),
        "--frames",
        "6",
        "--max-new-tokens",
        "16",
        "--json",
    ]);
    assert_eq!(v["diagnoser"]["id"], "tiny");
    assert!(
        v["diagnoser"]["version"]
            .as_str()
            .unwrap()
            .starts_with("qwen3-vl candle")
    );
    assert!(!v["report"].as_str().unwrap().is_empty());
    assert!(!v["warnings"].as_array().unwrap().is_empty());
}

/// Mean absolute differences of two sets of logit rows, and the largest.
fn differences(a: &[Vec<f32>], b: &[Vec<f32>]) -> (f64, f32) {
    assert_eq!(a.len(), b.len(), "positions differ");
    let (mut sum, mut count, mut worst) = (0f64, 0usize, 0f32);
    for (x, y) in a.iter().zip(b) {
        worst = worst.max(max_abs_diff(x, y));
        sum += x
            .iter()
            .zip(y)
            .map(|(p, q)| f64::from((p - q).abs()))
            .sum::<f64>();
        count += x.len();
    }
    (sum / count as f64, worst)
}

/// bfloat16 keeps 8 significant bits: near the largest logits here (|x| ≈ 4) one step is
/// 1/32. Both sides round every layer's output, at places and in orders that differ (fused
/// kernels), so they agree to a few steps, not to 1e-4 as in f32: the reference's own bf16
/// and f32 runs differ by 0.067 at most, 0.012 on average.
const BF16_MAX: f32 = 5.0 / 32.0;
const BF16_MEAN: f64 = 0.03;

/// A `"dtype": "bfloat16"` checkpoint runs in bfloat16 (and not silently in f32) and agrees
/// with the reference run in bfloat16 (`make_fixtures.py --bf16`) to bfloat16 precision: the
/// prompt's logits, and teacher-forced logits over the f32 run's greedy continuation, whose
/// top token is the reference's wherever the reference's top two are clearly apart.
#[test]
fn bfloat16_checkpoint_matches_the_bfloat16_reference() {
    let (json, f32_tensors) = reference();
    let tensors =
        candle_core::safetensors::load(data().join("reference-bf16.safetensors"), &Device::Cpu)
            .unwrap();
    let mut model = Qwen3Vl::load(&data().join("tiny-bf16"), &Device::Cpu, None).unwrap();
    assert_eq!(
        model.dtype,
        candle_core::DType::BF16,
        "dtype from config.json"
    );
    let image = read_rgb(&data().join("image.png")).unwrap();
    let mut prompt = model
        .prompt(
            VisualInput::Image(image),
            json["image_prompt"].as_str().unwrap(),
        )
        .unwrap();
    let to_rows = |t: &Tensor| {
        t.to_dtype(candle_core::DType::F32)
            .unwrap()
            .to_vec2::<f32>()
            .unwrap()
    };
    let logits = to_rows(&model.prefill(&prompt).unwrap());
    let (mean, worst) = differences(&logits, &to_rows(&tensors["image.prefill_logits"]));
    eprintln!("bf16 prompt logits against the bf16 reference: mean {mean:.4}, max {worst:.4}");
    assert!(
        worst < BF16_MAX && mean < BF16_MEAN,
        "prompt logits differ by {mean} on average, {worst} at most"
    );
    let (from_f32, _) = differences(&logits, &to_rows(&f32_tensors["image.prefill_logits"]));
    assert!(
        from_f32 > 1e-3,
        "the logits are f32's ({from_f32}): not run in bf16"
    );

    // The prompt followed by the f32 run's greedy tokens, as plain text positions.
    for &token in &ids(&json["image"]["greedy_tokens"]) {
        let index = prompt.ids.len() as i64;
        prompt.ids.push(token);
        prompt.types.push(0);
        prompt.positions.push([index + prompt.rope_delta; 3]);
    }
    let logits = to_rows(&model.prefill(&prompt).unwrap());
    let reference_logits = to_rows(&tensors["image.forced_logits"]);
    let (mean, worst) = differences(&logits, &reference_logits);
    eprintln!("bf16 forced logits: mean {mean:.4}, max {worst:.4}");
    assert!(worst < BF16_MAX && mean < BF16_MEAN);
    let mut compared = 0;
    for (position, (ours, theirs)) in logits.iter().zip(&reference_logits).enumerate() {
        let mut sorted = theirs.clone();
        sorted.sort_by(|a, b| b.total_cmp(a));
        if sorted[0] - sorted[1] > 2.0 * BF16_MAX {
            assert_eq!(
                keyslice::infer::qwen3_vl::argmax(ours),
                keyslice::infer::qwen3_vl::argmax(theirs),
                "position {position}: top token"
            );
            compared += 1;
        }
    }
    eprintln!(
        "bf16 forced logits: top token compared at {compared} of {} positions",
        logits.len()
    );
    assert!(
        compared >= 10,
        "too few positions with a clear top token: {compared}"
    );
}
