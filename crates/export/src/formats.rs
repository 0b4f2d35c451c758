//! The four export formats, each written from the same [`ExportCase`]s:
//!
//! | format | files | rows |
//! |---|---|---|
//! | `llamafactory` | `train.json` (`val.json`), `dataset_info.json` | `ShareGPT`: `messages` (user: `<video>` + prompt; assistant: corrected report), `videos` (one list of frame paths) |
//! | `swift` | `train.jsonl` (`val.jsonl`) | `messages` (user: `<video>` + prompt; assistant: corrected report), `videos` (one list of frame paths), and for reward functions `truth` (the ground truth the reward reads, as JSON text), `solution`, `key_slice`, `key_frame`, `organs`, `findings` (JSON text), `hard` |
//! | `verl` | `train.parquet` (`val.parquet`) | `data_source`, `prompt`, `videos` (`[{video: [frames], sample_fps}]`), `ability`, `reward_model {style, ground_truth}` (the ground truth the reward reads), `extra_info {split, index, case, key_slice, key_frame, hard}` |
//! | `keyslices` | `keyslices.csv`, `keyslices.json` | case, slice index, z (mm), pseudonymous SOP Instance UID, box, lesion slice range, reviewer, time |
//!
//! Every format gives the CT as one video of frames at [`VIDEO_FPS`] (the rate the video sent
//! to model servers states), so training and serving show the model the same timestamps. Frame
//! paths are absolute, under the export folder or `--frames-root` (where the export will be
//! on the training machine): a framework finds them from any working folder. JSON is written
//! with sorted keys where maps are involved and a fixed field order elsewhere, so exports are
//! byte-identical.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{
    ArrayBuilder, BooleanBuilder, Float64Builder, Int64Builder, ListBuilder, StringBuilder,
    StructBuilder,
};
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Fields, Schema};
use serde_json::{Value, json};

use super::{ExportCase, ExportError, ExportFormat, ExportOptions, answer_text, io_error};
use keyslice_core::findings::Organ;
use keyslice_io::frames::VIDEO_FPS;

/// What the model is asked, after the `<video>` tag.
#[must_use]
pub fn prompt_text(case: &ExportCase) -> String {
    let mut text = String::from(
        "These frames are axial slices of an abdominal CT, from inferior to superior. \
         Frame f shows slice ",
    );
    let list: Vec<String> = case.frames.iter().map(ToString::to_string).collect();
    let _ = write!(
        text,
        "[{}][f]. Write a tumor report for the liver, pancreas and both kidneys (presence, \
         size, location, attenuation of each lesion) and name the key evidence slice by its \
         slice index.",
        list.join(", ")
    );
    text
}

/// Writes the format's files into `folder`, frame paths under `root`; returns how many.
pub fn write(
    options: &ExportOptions,
    cases: &[ExportCase],
    folder: &Path,
    root: &Path,
) -> Result<usize, ExportError> {
    let splits: Vec<&str> = ["train", "val"]
        .into_iter()
        .filter(|split| cases.iter().any(|case| case.split == *split))
        .collect();
    let of = |split: &str| -> Vec<&ExportCase> {
        cases.iter().filter(|case| case.split == split).collect()
    };
    let guide = training_guide(options, cases, root, &splits);
    if !guide.is_empty() {
        let path = folder.join("TRAINING.md");
        std::fs::write(&path, guide).map_err(io_error(&path))?;
    }
    let guides = usize::from(!matches!(
        options.format,
        ExportFormat::Keyslices | ExportFormat::Segmentation
    ));
    match options.format {
        ExportFormat::Llamafactory => {
            let mut info = serde_json::Map::new();
            for split in &splits {
                let rows: Vec<Value> = of(split).iter().map(|c| sharegpt_row(c, root)).collect();
                write_json(&folder.join(format!("{split}.json")), &Value::Array(rows))?;
                info.insert(
                    format!("keyslice_{split}"),
                    json!({
                        "file_name": format!("{split}.json"),
                        "formatting": "sharegpt",
                        "columns": {"messages": "messages", "videos": "videos"},
                        "tags": {
                            "role_tag": "role",
                            "content_tag": "content",
                            "user_tag": "user",
                            "assistant_tag": "assistant"
                        }
                    }),
                );
            }
            write_json(&folder.join("dataset_info.json"), &Value::Object(info))?;
            Ok(splits.len() + 1 + guides)
        }
        ExportFormat::Swift => {
            for split in &splits {
                let mut text = String::new();
                for case in of(split) {
                    text.push_str(&swift_row(case, root).to_string());
                    text.push('\n');
                }
                let path = folder.join(format!("{split}.jsonl"));
                std::fs::write(&path, text).map_err(io_error(&path))?;
            }
            Ok(splits.len() + guides)
        }
        ExportFormat::Verl => {
            for split in &splits {
                write_verl(&of(split), &folder.join(format!("{split}.parquet")), root)?;
            }
            Ok(splits.len() + guides)
        }
        ExportFormat::Keyslices => write_keyslices(cases, folder),
        ExportFormat::Segmentation => {
            let (dataset, datalist) = super::labels::descriptions(cases);
            write_json(&folder.join("dataset.json"), &dataset)?;
            write_json(&folder.join("datalist.json"), &datalist)?;
            // Two descriptions, and each case's image and label map.
            Ok(2 + 2 * cases.len())
        }
    }
}

/// Vision tokens `qwen_vl_utils` gives each pair of frames at the least
/// (`VIDEO_MIN_TOKEN_NUM`): Qwen3-VL's processor never gives a video fewer.
const MIN_TOKENS_PER_FRAME_PAIR: usize = 128;

/// A lower estimate of the longest prompt of `cases` in Qwen3-VL tokens: the vision tokens
/// at their least, and the text at about three characters a token plus the chat template.
#[must_use]
pub fn prompt_tokens_at_least(cases: &[ExportCase]) -> usize {
    cases
        .iter()
        .map(|case| {
            MIN_TOKENS_PER_FRAME_PAIR * case.frames.len().div_ceil(2)
                + prompt_text(case).len() / 3
                + 16
        })
        .max()
        .unwrap_or(0)
}

/// What the user must set for a framework to keep every row.
#[must_use]
pub fn notes(options: &ExportOptions, cases: &[ExportCase]) -> Vec<String> {
    let tokens = prompt_tokens_at_least(cases);
    match options.format {
        ExportFormat::Verl => vec![format!(
            "verl drops every prompt longer than data.max_prompt_length (512 by default) when \
             data.filter_overlong_prompts is on: these prompts are {tokens} tokens or more with \
             Qwen3-VL, so set data.max_prompt_length above that (TRAINING.md)"
        )],
        ExportFormat::Swift | ExportFormat::Llamafactory => vec![format!(
            "these prompts are {tokens} tokens or more with Qwen3-VL: keep max_length \
             (ms-swift) or cutoff_len (LLaMA-Factory) above that, or rows are cut or dropped"
        )],
        ExportFormat::Keyslices | ExportFormat::Segmentation => Vec::new(),
    }
}

/// `TRAINING.md`: the settings under which a framework reads this export as Keyslice serves
/// the model (frame rate, frame paths, reward), with this export's paths filled in.
fn training_guide(
    options: &ExportOptions,
    cases: &[ExportCase],
    root: &Path,
    splits: &[&str],
) -> String {
    let root = root.display();
    let frames = cases
        .iter()
        .map(|case| case.frames.len())
        .max()
        .unwrap_or(0);
    let tokens = prompt_tokens_at_least(cases);
    // The train split trains; the validation split, when there is one, only evaluates.
    let has_val = splits.contains(&"val");
    let train = |extension: &str| format!("{root}/train.{extension}");
    let val = |extension: &str| format!("{root}/val.{extension}");
    let mut text = format!(
        "# Training on this export\n\nEach case is one video of up to {frames} frames (axial \
         slices, inferior to superior), referenced by absolute paths under `{root}`: move the \
         export there, or export again with `--frames-root`. The frames are a video at \
         {VIDEO_FPS} frames per second, the rate written into the video `keyslice analyze --url` \
         sends a server, so the timestamps the model is trained on (`<0.2 \
         seconds>`, `<1.2 seconds>`, ...) are the ones it is served with. Serve with the same \
         `--frames {frames}`.\n\n"
    );
    let reward = "The reward: `pip install keyslice_reward-*.whl` (built by `maturin build \
                  --release --manifest-path crates/python/Cargo.toml`).";
    match options.format {
        ExportFormat::Verl => {
            let _ = write!(
                text,
                "## verl\n\n```\ndata.train_files={}{} data.video_key=videos \\\n  \
                 data.max_prompt_length={} data.filter_overlong_prompts=True \\\n  \
                 custom_reward_function.path=$(python -c 'import keyslice_reward.verl_reward as v; print(v.__file__)') \\\n  \
                 custom_reward_function.name=compute_score\n```\n\nEach video carries \
                 `sample_fps: {VIDEO_FPS}`. The prompts are {tokens} tokens or more with \
                 Qwen3-VL (each pair of frames is at least {MIN_TOKENS_PER_FRAME_PAIR} vision \
                 tokens): verl drops every row longer than `data.max_prompt_length` (512 by \
                 default) when the filter is on; the value above leaves room. \
                 `reward_model.ground_truth` is the ground truth the reward reads. {reward}\n",
                train("parquet"),
                if has_val {
                    format!(" data.val_files={}", val("parquet"))
                } else {
                    String::new()
                },
                (tokens * 2).next_power_of_two()
            );
        }
        ExportFormat::Swift => {
            let _ = write!(
                text,
                "## ms-swift (3.x and 4.x)\n\n```\nswift rlhf --rlhf_type grpo --model <Qwen3-VL> \\\n  \
                 --dataset {}{} --max_length {} \\\n  \
                 --external_plugins $(python -c 'import keyslice_reward.swift_plugin as p; print(p.__file__)') \\\n  \
                 --reward_funcs keyslice\n```\n\nms-swift's Qwen3-VL template reads a list of \
                 frames at {VIDEO_FPS} frames per second. The prompts are {tokens} tokens or \
                 more with Qwen3-VL: a row longer than `--max_length` (4096 by default) is \
                 refused, so the value above leaves room. Its template numbers the video token \
                 as the released Qwen3-VL tokenizers do (151656): a checkpoint whose tokenizer \
                 numbers `<|video_pad|>` otherwise is shown one video token per video. The \
                 `truth` column is the ground truth the reward reads. {reward}\n",
                train("jsonl"),
                if has_val {
                    format!(" --val_dataset {}", val("jsonl"))
                } else {
                    String::new()
                },
                (tokens * 2).next_power_of_two()
            );
        }
        ExportFormat::Llamafactory => {
            let _ = write!(
                text,
                "## LLaMA-Factory\n\n```yaml\ndataset_dir: {root}\ndataset: keyslice_train\n{}\
                 template: qwen3_vl\nvideo_fps: {VIDEO_FPS}\nvideo_maxlen: {frames}\n```\n",
                if has_val {
                    "eval_dataset: keyslice_val\n"
                } else {
                    ""
                }
            );
        }
        ExportFormat::Keyslices | ExportFormat::Segmentation => return String::new(),
    }
    text
}

fn write_json(path: &Path, value: &Value) -> Result<(), ExportError> {
    let text = serde_json::to_string_pretty(value).map_err(|e| ExportError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(e),
    })?;
    std::fs::write(path, text + "\n").map_err(io_error(path))
}

fn messages(case: &ExportCase) -> Value {
    json!([
        {"role": "user", "content": format!("<video>{}", prompt_text(case))},
        {"role": "assistant", "content": answer_text(&case.findings)}
    ])
}

fn sharegpt_row(case: &ExportCase, root: &Path) -> Value {
    json!({
        "messages": messages(case),
        "videos": [case.frame_paths(root)],
    })
}

/// Per-organ labels for reward functions: `yes`, `no`, `uncertain`, `not_mentioned`.
fn organ_labels(case: &ExportCase) -> Value {
    let mut labels = serde_json::Map::new();
    for organ in Organ::ALL {
        labels.insert(
            organ.key().to_string(),
            serde_json::to_value(case.findings.organ(organ).tumor).unwrap_or(Value::Null),
        );
    }
    Value::Object(labels)
}

fn findings_json(case: &ExportCase) -> Value {
    serde_json::to_value(case.findings.without_spans()).unwrap_or(Value::Null)
}

fn truth_json(case: &ExportCase) -> Value {
    serde_json::to_value(case.truth()).unwrap_or(Value::Null)
}

/// One ms-swift row. Every row of every split has the same columns of the same types
/// (`key_slice` and `key_frame` are null without a tumor): the ground truth and the findings,
/// whose nested fields differ from case to case (a tumor-free case has no lesions, box or
/// range), are JSON text, as verl's `ground_truth` is. ms-swift loads each `--dataset` file
/// on its own and joins them only when their nested fields agree.
fn swift_row(case: &ExportCase, root: &Path) -> Value {
    json!({
        "messages": messages(case),
        "videos": [case.frame_paths(root)],
        "truth": truth_json(case).to_string(),
        "solution": answer_text(&case.findings),
        "key_slice": case.key_slice(),
        "key_frame": case.key_frame(),
        "organs": organ_labels(case),
        "findings": findings_json(case).to_string(),
        "hard": case.hard,
        "case": case.pseudonym,
    })
}

/// verl rows through the arrow writer.
fn write_verl(cases: &[&ExportCase], path: &Path, root: &Path) -> Result<(), ExportError> {
    let message_fields = Fields::from(vec![
        Field::new("role", DataType::Utf8, false),
        Field::new("content", DataType::Utf8, false),
    ]);
    let video_fields = Fields::from(vec![
        Field::new(
            "video",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            false,
        ),
        Field::new("sample_fps", DataType::Float64, false),
    ]);
    let reward_fields = Fields::from(vec![
        Field::new("style", DataType::Utf8, false),
        Field::new("ground_truth", DataType::Utf8, false),
    ]);
    let extra_fields = Fields::from(vec![
        Field::new("split", DataType::Utf8, false),
        Field::new("index", DataType::Int64, false),
        Field::new("case", DataType::Utf8, false),
        Field::new("key_slice", DataType::Int64, true),
        Field::new("key_frame", DataType::Int64, true),
        Field::new("hard", DataType::Boolean, false),
    ]);

    let mut prompt = ListBuilder::new(StructBuilder::from_fields(message_fields.clone(), 2));
    let mut videos = ListBuilder::new(StructBuilder::from_fields(video_fields.clone(), 2));
    let mut reward = StructBuilder::from_fields(reward_fields.clone(), cases.len());
    let mut extra = StructBuilder::from_fields(extra_fields.clone(), cases.len());
    for (index, case) in cases.iter().enumerate() {
        let messages = prompt.values();
        string_field(messages, 0).append_value("user");
        string_field(messages, 1).append_value(format!("<video>{}", prompt_text(case)));
        messages.append(true);
        prompt.append(true);

        append_video(videos.values(), &case.frame_paths(root));
        videos.append(true);

        string_field(&mut reward, 0).append_value("rule");
        string_field(&mut reward, 1).append_value(truth_json(case).to_string());
        reward.append(true);

        string_field(&mut extra, 0).append_value(case.split);
        int_field(&mut extra, 1).append_value(index as i64);
        string_field(&mut extra, 2).append_value(&case.pseudonym);
        int_field(&mut extra, 3).append_option(case.key_slice().map(i64::from));
        int_field(&mut extra, 4).append_option(case.key_frame().map(|f| f as i64));
        if let Some(hard) = extra.field_builder::<BooleanBuilder>(5) {
            hard.append_value(case.hard);
        }
        extra.append(true);
    }
    let rows = cases.len();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec!["keyslice"; rows])),
        Arc::new(prompt.finish()),
        Arc::new(videos.finish()),
        Arc::new(StringArray::from(vec!["radiology"; rows])),
        Arc::new(reward.finish()),
        Arc::new(extra.finish()),
    ];
    let schema = Schema::new(
        columns
            .iter()
            .zip([
                "data_source",
                "prompt",
                "videos",
                "ability",
                "reward_model",
                "extra_info",
            ])
            .map(|(column, name)| Field::new(name, column.data_type().clone(), true))
            .collect::<Vec<_>>(),
    );
    let failed = |detail: String| ExportError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(detail),
    };
    let batch =
        RecordBatch::try_new(Arc::new(schema), columns).map_err(|e| failed(e.to_string()))?;
    let file = std::fs::File::create(path).map_err(io_error(path))?;
    let properties = parquet::file::properties::WriterProperties::builder()
        .set_compression(parquet::basic::Compression::SNAPPY)
        .build();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(properties))
        .map_err(|e| failed(e.to_string()))?;
    writer.write(&batch).map_err(|e| failed(e.to_string()))?;
    writer.close().map_err(|e| failed(e.to_string()))?;
    Ok(())
}

/// One verl video: its frame paths and their frame rate.
fn append_video(video: &mut StructBuilder, paths: &[String]) {
    let frames = video
        .field_builder::<ListBuilder<Box<dyn ArrayBuilder>>>(0)
        .unwrap_or_else(|| unreachable!("field 0 is a list"));
    let items = frames
        .values()
        .as_any_mut()
        .downcast_mut::<StringBuilder>()
        .unwrap_or_else(|| unreachable!("a list of strings"));
    for frame in paths {
        items.append_value(frame);
    }
    frames.append(true);
    if let Some(fps) = video.field_builder::<Float64Builder>(1) {
        fps.append_value(VIDEO_FPS);
    }
    video.append(true);
}

fn string_field(builder: &mut StructBuilder, index: usize) -> &mut StringBuilder {
    // The fields were declared as Utf8 above; a mismatch is a bug caught by the tests.
    builder
        .field_builder::<StringBuilder>(index)
        .unwrap_or_else(|| unreachable!("field {index} is a string"))
}

fn int_field(builder: &mut StructBuilder, index: usize) -> &mut Int64Builder {
    builder
        .field_builder::<Int64Builder>(index)
        .unwrap_or_else(|| unreachable!("field {index} is an integer"))
}

/// `keyslices.csv` and `keyslices.json`: one row per case with a key slice.
fn write_keyslices(cases: &[ExportCase], folder: &Path) -> Result<usize, ExportError> {
    let mut rows = Vec::new();
    let mut csv = String::from(
        "case,split,slice_index,z_mm,sop_instance_uid,box_columns_min,box_rows_min,\
         box_columns_max,box_rows_max,lesion_first_slice,lesion_last_slice,reviewer,time,hard\n",
    );
    for case in cases {
        let Some(key) = case.findings.key_slice.as_ref() else {
            continue;
        };
        let slice_box = case.findings.slice_box.as_ref().map(|b| b.voxels);
        let row = json!({
            "case": case.pseudonym,
            "split": case.split,
            "slice_index": key.index,
            "z_mm": key.z_mm,
            "sop_instance_uid": case.key_slice_uid,
            "box": slice_box,
            "lesion_slices": case.findings.lesion_slices,
            "reviewer": case.reviewer,
            "time": case.updated_at,
            "hard": case.hard,
        });
        let field = |value: Option<String>| csv_field(&value.unwrap_or_default());
        let range = case.findings.lesion_slices;
        let corners: [String; 4] = std::array::from_fn(|i| {
            slice_box.map_or_else(String::new, |corners| corners[i].to_string())
        });
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            case.pseudonym,
            case.split,
            key.index,
            key.z_mm.map_or_else(String::new, |z| format!("{z:.2}")),
            field(case.key_slice_uid.clone()),
            corners[0],
            corners[1],
            corners[2],
            corners[3],
            range.map_or_else(String::new, |r| r.first.to_string()),
            range.map_or_else(String::new, |r| r.last.to_string()),
            field(case.reviewer.clone()),
            field(case.updated_at.clone()),
            case.hard
        );
        rows.push(row);
    }
    write_json(&folder.join("keyslices.json"), &Value::Array(rows))?;
    let path = folder.join("keyslices.csv");
    std::fs::write(&path, csv).map_err(io_error(&path))?;
    Ok(2)
}

/// A CSV field: see [`keyslice_core::text::csv_cell`].
fn csv_field(text: &str) -> String {
    keyslice_core::text::csv_cell(text)
}
