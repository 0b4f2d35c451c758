//! `keyslice train` end to end on a small scale: phantoms in, a checkpoint out that `analyze`
//! loads; the same seed gives the same bytes; bad inputs are named.

mod common;

use std::path::Path;

use common::{keyslice, text, train_twice};
use keyslice::review::workspace::Workspace;
use keyslice::review::{CaseReview, ReviewStatus};
use serde_json::json;

/// A configuration small enough to train in seconds in a debug build (same code paths as the
/// shipped one: group normalisation, training windows smaller than the grid).
const SMALL_CONFIG: &str = r#"{
  "model": "keyslice-tiny",
  "version": "0",
  "grid": { "size": 32, "pixel_mm": 12.0, "slab_mm": 10.0 },
  "crop": 16,
  "diagnoser_widths": [4, 4, 8, 8],
  "verifier_widths": [4, 4, 8, 8],
  "windows": [[40.0, 400.0], [90.0, 150.0]],
  "norm_groups": 2,
  "train_crop": 16
}"#;

fn path_str(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// `keyslice analyze CT --model MODEL --json`, which must succeed: its prediction.
fn analyse(ct: &Path, model: &Path) -> serde_json::Value {
    let analysed = keyslice(&[
        "analyze",
        path_str(ct),
        "--model",
        path_str(model),
        "--json",
    ]);
    assert!(analysed.status.success(), "{}", text(&analysed.stderr));
    serde_json::from_str(text(&analysed.stdout).trim()).expect("one JSON line")
}

/// `keyslice train` for three small steps on `data` with `config`; `--out DIR` goes on.
fn train_args<'a>(data: &'a Path, config: &'a Path) -> Vec<&'a str> {
    vec![
        "train",
        "--data",
        path_str(data),
        "--steps",
        "3",
        "--batch",
        "2",
        "--seed",
        "5",
        "--version",
        "test",
        "--config",
        path_str(config),
    ]
}

/// [`train_args`] into `out`.
fn train(data: &Path, out: &Path, config: &Path) -> std::process::Output {
    let mut args = train_args(data, config);
    args.extend(["--out", path_str(out)]);
    keyslice(&args)
}

#[test]
fn training_is_reproducible_and_its_checkpoint_analyses() {
    let folder = tempfile::tempdir().expect("temp dir");
    let data = folder.path().join("cases");
    let made = keyslice(&[
        "phantom",
        "--out",
        path_str(&data),
        "--cases",
        "3",
        "--seed",
        "41",
        "--matrix",
        "64",
    ]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let config = folder.path().join("config.json");
    std::fs::write(&config, SMALL_CONFIG).expect("config written");

    let first = train_twice(
        folder.path(),
        "supervised",
        &train_args(&data, &config),
        &["step 3/3"],
    );
    let written: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(first.join("config.json")).expect("config.json"),
    )
    .expect("JSON");
    assert_eq!(written["version"], "test");
    assert_eq!(written["grid"]["size"], 32);
    assert_eq!(written["norm_groups"], 2);

    let ct = data.join("PHANTOM_41_0000").join("ct.nii.gz");
    let prediction = analyse(&ct, &first);
    assert_eq!(prediction["diagnoser"]["version"], "test");
    assert!(
        prediction["report"]
            .as_str()
            .expect("report")
            .starts_with("FINDINGS:")
    );

    let organs = organ_stage(folder.path(), &data, &first, &ct);
    finder_stage(folder.path(), &data, &organs, &ct);
}

/// The organ stage on top of the checkpoint `first`: two cases of `data` train it, the third
/// is held out for its Dice; reproducible, and the result analyses `ct`. Returns the
/// checkpoint folder.
fn organ_stage(folder: &Path, data: &Path, first: &Path, ct: &Path) -> std::path::PathBuf {
    let organs_config = folder.join("organs.json");
    let mut with_organs: serde_json::Value = serde_json::from_str(SMALL_CONFIG).expect("JSON");
    with_organs["organs"] = serde_json::json!({
        "grid": { "size": 32, "pixel_mm": 12.0, "slab_mm": 10.0 },
        "widths": [4, 4, 8, 8],
        "train_side": 16
    });
    std::fs::write(&organs_config, with_organs.to_string()).expect("config written");
    let organs = train_twice(
        folder,
        "organs",
        &[
            "train",
            "--stage",
            "organs",
            "--init",
            path_str(first),
            "--data",
            path_str(data),
            "--steps",
            "3",
            "--batch",
            "2",
            "--calibration",
            "1",
            "--version",
            "test-organs",
            "--config",
            path_str(&organs_config),
        ],
        &["step 3/3: organ loss", "held-out Dice"],
    );
    let written: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(organs.join("config.json")).expect("config.json"),
    )
    .expect("JSON");
    assert_eq!(written["organs"]["widths"][3], 8);
    let prediction = analyse(ct, &organs);
    assert_eq!(prediction["diagnoser"]["version"], "test-organs");
    organs
}

/// The finder stage on top of the checkpoint `first` (with an organ network, whose masks the
/// calibration and analysis use): two cases of `data` train it, the third chooses its
/// thresholds; again reproducible, and the result analyses `ct`.
fn finder_stage(folder: &Path, data: &Path, first: &Path, ct: &Path) {
    let finder_config = folder.join("finder.json");
    let mut with_finder: serde_json::Value = serde_json::from_str(SMALL_CONFIG).expect("JSON");
    with_finder["finder"] = serde_json::json!({
        "grid": { "size": 32, "pixel_mm": 12.0, "slab_mm": 10.0 },
        "crop": 16,
        "widths": [4, 4, 8],
        "thresholds": [0.5, 0.5, 0.5, 0.5]
    });
    std::fs::write(&finder_config, with_finder.to_string()).expect("config written");
    let finder_first = train_twice(
        folder,
        "finder",
        &[
            "train",
            "--stage",
            "finder",
            "--init",
            path_str(first),
            "--data",
            path_str(data),
            "--steps",
            "3",
            "--batch",
            "4",
            "--calibration",
            "1",
            "--version",
            "test-finder",
            "--config",
            path_str(&finder_config),
        ],
        &["step 3/3: finder loss", "thresholds"],
    );
    let written: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(finder_first.join("config.json")).expect("config.json"),
    )
    .expect("JSON");
    assert_eq!(written["finder"]["crop"], 16);
    assert_eq!(
        written["finder"]["thresholds"].as_array().map(Vec::len),
        Some(4)
    );
    let prediction = analyse(ct, &finder_first);
    assert_eq!(prediction["diagnoser"]["version"], "test-finder");

    calibrate_stage(folder, data, &finder_first, ct);

    // Without --init the finder stage says what it needs.
    let result = keyslice(&[
        "train",
        "--stage",
        "finder",
        "--data",
        path_str(data),
        "--out",
        path_str(&folder.join("none")),
    ]);
    assert!(!result.status.success());
    assert!(
        text(&result.stderr).contains("--init"),
        "{}",
        text(&result.stderr)
    );
}

/// `--stage calibrate` on the finder checkpoint `finder_first`: new thresholds from every
/// case of `data`, the weights unchanged, and the result analyses `ct`.
fn calibrate_stage(folder: &Path, data: &Path, finder_first: &Path, ct: &Path) {
    let calibrated = folder.join("calibrated");
    let result = keyslice(&[
        "train",
        "--stage",
        "calibrate",
        "--init",
        path_str(finder_first),
        "--data",
        path_str(data),
        "--out",
        path_str(&calibrated),
        "--version",
        "test-calibrated",
    ]);
    assert!(result.status.success(), "{}", text(&result.stderr));
    assert!(
        text(&result.stderr).contains("thresholds"),
        "{}",
        text(&result.stderr)
    );
    let recalibrated: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(calibrated.join("config.json")).expect("config.json"),
    )
    .expect("JSON");
    assert_eq!(recalibrated["version"], "test-calibrated");
    assert_eq!(recalibrated["finder"]["crop"], 16);
    let tensors = |out: &Path| {
        let loaded = candle_core::safetensors::load(
            out.join("model.safetensors"),
            &candle_core::Device::Cpu,
        )
        .expect("safetensors");
        let mut named: Vec<(String, Vec<f32>)> = loaded
            .into_iter()
            .map(|(name, t)| {
                (
                    name,
                    t.flatten_all().and_then(|t| t.to_vec1()).expect("f32"),
                )
            })
            .collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        named
    };
    assert_eq!(tensors(finder_first), tensors(&calibrated));
    assert_eq!(
        analyse(ct, &calibrated)["diagnoser"]["version"],
        "test-calibrated"
    );
    rl_stage(folder, data, &calibrated, ct, tensors);
}

/// `--stage rl` on the calibrated checkpoint: reproducible, a metrics row per step with
/// every reward in [0, 1], a reward plot, only the finder's top changed, and the result
/// analyses `ct`.
fn rl_stage(
    folder: &Path,
    data: &Path,
    calibrated: &Path,
    ct: &Path,
    tensors: impl Fn(&Path) -> Vec<(String, Vec<f32>)>,
) {
    let base = [
        "train",
        "--stage",
        "rl",
        "--init",
        path_str(calibrated),
        "--data",
        path_str(data),
        "--steps",
        "3",
        "--batch",
        "2",
        "--group",
        "4",
        "--lr",
        "0.01",
        "--updates",
        "2",
        "--version",
        "test-rl",
    ];
    let rl = |out: &Path, extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend(["--out", path_str(out)]);
        args.extend_from_slice(extra);
        keyslice(&args)
    };
    let first = train_twice(
        folder,
        "rl",
        &base,
        &["step 3/3: reward", "supervised model's mean reward"],
    );
    let before = tensors(calibrated);
    let after = tensors(&first);
    assert_eq!(
        before.iter().map(|t| &t.0).collect::<Vec<_>>(),
        after.iter().map(|t| &t.0).collect::<Vec<_>>()
    );
    for ((name, old), (_, new)) in before.iter().zip(&after) {
        let trainable = (name.starts_with("finder.block3.") || name.starts_with("finder.head."))
            && !name.contains("running_");
        if !trainable {
            assert_eq!(old, new, "{name} must not change");
        }
    }
    let metrics = std::fs::read_to_string(first.join("rl_metrics.csv")).expect("metrics");
    let lines: Vec<&str> = metrics.lines().collect();
    assert!(
        lines[0].starts_with("step,reward,format,existence"),
        "{metrics}"
    );
    assert_eq!(lines.len(), 4, "{metrics}");
    for line in &lines[1..] {
        let reward: f64 = line
            .split(',')
            .nth(1)
            .expect("reward")
            .parse()
            .expect("number");
        assert!((0.0..=1.0).contains(&reward), "{line}");
    }
    let plot = image::open(first.join("rl_rewards.png")).expect("a PNG");
    assert!(plot.width() > 300 && plot.height() > 200);
    assert_eq!(analyse(ct, &first)["diagnoser"]["version"], "test-rl");

    // A reward weight that names no term is named.
    let result = rl(
        &folder.join("rl-bad"),
        &["--rewards", "existence=1,grounding=2"],
    );
    assert!(!result.status.success());
    assert!(
        text(&result.stderr).contains("grounding"),
        "{}",
        text(&result.stderr)
    );

    // The presences' own KL coefficient: a stronger anchor moves the weights differently; a
    // negative one is named.
    let anchored = folder.join("rl-anchored");
    let result = rl(&anchored, &["--presence-kl", "5"]);
    assert!(result.status.success(), "{}", text(&result.stderr));
    assert_ne!(tensors(&anchored), tensors(&first));
    let result = rl(&folder.join("rl-bad-kl"), &["--presence-kl=-1"]);
    assert!(!result.status.success());
    assert!(
        text(&result.stderr).contains("--presence-kl -1"),
        "{}",
        text(&result.stderr)
    );

    rl_from_export(folder, data, calibrated);
}

/// `--stage rl --from-export`: the phantoms become a reviewed workspace (each case's
/// truth entered as a reviewer would, and accepted), exported as swift with `--volumes`; the
/// RL stage trains on that export. An export without volumes is refused with what to do.
fn rl_from_export(folder: &Path, data: &Path, calibrated: &Path) {
    let root = folder.join("workspace");
    reviewed_phantom_workspace(&root, data);
    let export = |out: &Path, extra: &[&str]| {
        let mut args = vec![
            "export",
            path_str(&root),
            "--format",
            "swift",
            "--frames",
            "4",
            "--out",
            path_str(out),
        ];
        args.extend_from_slice(extra);
        let result = keyslice(&args);
        assert!(result.status.success(), "{}", text(&result.stderr));
    };
    let with_volumes = folder.join("export-volumes");
    export(&with_volumes, &["--volumes"]);
    let rl = |export: &Path, out: &Path| {
        keyslice(&[
            "train",
            "--stage",
            "rl",
            "--init",
            path_str(calibrated),
            "--from-export",
            path_str(export),
            "--out",
            path_str(out),
            "--steps",
            "2",
            "--batch",
            "2",
            "--group",
            "4",
            "--version",
            "test-rl-export",
        ])
    };
    let out = folder.join("rl-export");
    let result = rl(&with_volumes, &out);
    assert!(result.status.success(), "{}", text(&result.stderr));
    let log = text(&result.stderr);
    assert!(log.contains("the train split of the export"), "{log}");
    assert!(log.contains("step 2/2: reward"), "{log}");
    let metrics = std::fs::read_to_string(out.join("rl_metrics.csv")).expect("metrics");
    assert_eq!(metrics.lines().count(), 3, "{metrics}");
    assert!(out.join("rl_rewards.png").is_file());

    let without = folder.join("export-frames-only");
    export(&without, &[]);
    let result = rl(&without, &folder.join("rl-refused"));
    assert!(!result.status.success());
    let message = text(&result.stderr);
    assert!(message.contains("export.json"), "{message}");
    assert!(message.contains("--volumes"), "{message}");
}

#[test]
fn training_names_a_bad_config_and_a_folder_without_cases() {
    let folder = tempfile::tempdir().expect("temp dir");
    let config = folder.path().join("config.json");
    std::fs::write(&config, "{ \"model\": ").expect("config written");
    let out = folder.path().join("out");
    let result = train(folder.path(), &out, &config);
    assert_eq!(result.status.code(), Some(1));
    let stderr = text(&result.stderr);
    assert!(stderr.contains("not a keyslice-tiny config"), "{stderr}");
    assert!(stderr.contains("config.json"), "{stderr}");

    std::fs::write(&config, SMALL_CONFIG).expect("config written");
    let result = train(folder.path(), &out, &config);
    assert_eq!(result.status.code(), Some(1));
    let stderr = text(&result.stderr);
    assert!(stderr.contains("no case folders"), "{stderr}");
    assert!(stderr.contains("hint:"), "{stderr}");
    assert!(!out.exists(), "nothing written when nothing was trained");
}

/// A workspace of the phantoms in `data`, each case's truth entered as a reviewer would
/// (presence, lesions, key slice) and accepted.
fn reviewed_phantom_workspace(root: &Path, data: &Path) {
    let mut cts: Vec<std::path::PathBuf> = std::fs::read_dir(data)
        .expect("cases")
        .map(|entry| entry.expect("entry").path().join("ct.nii.gz"))
        .filter(|path| path.is_file())
        .collect();
    cts.sort();
    let (workspace, added) = Workspace::create_or_extend(root, &cts).expect("workspace");
    assert_eq!(added, cts.len());
    for entry in &workspace.manifest.cases {
        let truth_path = entry
            .volume
            .parent()
            .expect("case folder")
            .join("truth.json");
        let truth: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&truth_path).expect("truth"))
                .expect("JSON");
        let findings = &truth["findings"];
        let mut review =
            CaseReview::open(&workspace.database_path(), &entry.case_id, "dr. test", None)
                .expect("review");
        for (organ, found) in findings["organs"].as_object().expect("organs") {
            review
                .set(&format!("{organ}.tumor"), found["tumor"].clone())
                .expect("presence");
            for (index, lesion) in found["lesions"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                review
                    .set(&format!("{organ}.lesions.{index}"), lesion.clone())
                    .expect("lesion");
            }
        }
        if !findings["key_slice"].is_null() {
            review
                .set(
                    "key_slice",
                    json!({"index": findings["key_slice"]["index"]}),
                )
                .expect("key slice");
        }
        review.set_status(ReviewStatus::Done).expect("accepted");
    }
}

#[test]
fn the_domain_stage_writes_ranges_and_keeps_the_weights_even_into_its_own_folder() {
    let folder = tempfile::tempdir().expect("temp dir");
    let data = folder.path().join("data");
    let made = keyslice(&[
        "phantom",
        "--out",
        path_str(&data),
        "--cases",
        "2",
        "--seed",
        "13",
        "--matrix",
        "64",
    ]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let model = folder.path().join("model");
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/keyslice-tiny");
    std::fs::create_dir_all(&model).expect("model folder");
    for file in ["config.json", "model.safetensors"] {
        std::fs::copy(shipped.join(file), model.join(file)).expect("copied");
    }
    let weights = std::fs::read(model.join("model.safetensors")).expect("weights");
    // The same folder, spelt differently: the weights must not be copied onto themselves.
    let spelt = model.join(".");
    let calibrated = keyslice(&[
        "train",
        "--stage",
        "domain",
        "--init",
        path_str(&model),
        "--data",
        path_str(&data),
        "--out",
        path_str(&spelt),
    ]);
    assert!(calibrated.status.success(), "{}", text(&calibrated.stderr));
    assert_eq!(
        std::fs::read(model.join("model.safetensors")).expect("weights"),
        weights
    );
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(model.join("config.json")).expect("config"))
            .expect("JSON");
    assert_eq!(config["domain"]["cases"], 2);
    assert_eq!(
        config["domain"]["ranges"].as_array().map(Vec::len),
        Some(keyslice::infer::embedded::domain::FEATURES.len())
    );
}

#[test]
fn the_evidence_stage_adds_a_reader_of_its_own_and_names_a_case_without_truth() {
    let folder = tempfile::tempdir().expect("temp dir");
    let data = folder.path().join("data");
    let made = keyslice(&[
        "phantom",
        "--out",
        path_str(&data),
        "--cases",
        "4",
        "--seed",
        "17",
        "--matrix",
        "64",
    ]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/keyslice-tiny");
    let args = [
        "train",
        "--stage",
        "evidence",
        "--init",
        path_str(&shipped),
        "--data",
        path_str(&data),
        "--steps",
        "2",
        "--batch",
        "3",
        "--seed",
        "5",
        "--version",
        "evidence-test",
        "--calibration",
        "1",
    ];
    let trained = train_twice(
        folder.path(),
        "evidence",
        &args,
        &["step 2/2", "held out (1 case(s), 400 claims)"],
    );
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(trained.join("config.json")).expect("config"))
            .expect("JSON");
    assert_eq!(config["version"], "evidence-test");
    assert_eq!(config["evidence"]["side"], 48);
    // The reader's weights are its own: the diagnoser's networks are the shipped ones, as
    // they were.
    let tensors = |folder: &Path| {
        candle_core::safetensors::load(folder.join("model.safetensors"), &candle_core::Device::Cpu)
            .expect("weights")
    };
    let (before, after) = (tensors(&shipped), tensors(&trained));
    assert!(after.keys().any(|name| name.starts_with("evidence.")));
    for (name, tensor) in &before {
        if name.starts_with("evidence.") {
            continue;
        }
        let same = after[name]
            .flatten_all()
            .and_then(|t| t.to_vec1::<f32>())
            .expect("values")
            == tensor
                .flatten_all()
                .and_then(|t| t.to_vec1::<f32>())
                .expect("values");
        assert!(same, "{name} changed");
    }
    let ct = data.join("PHANTOM_17_0000").join("ct.nii.gz");
    let prediction = analyse(&ct, &trained);
    assert_eq!(prediction["diagnoser"]["version"], "evidence-test");

    // A case folder without its truth is named, with what the stage needs.
    std::fs::remove_file(data.join("PHANTOM_17_0002").join("truth.json")).expect("removed");
    let mut refused_args = args.to_vec();
    let out = folder.path().join("refused");
    refused_args.extend(["--out", path_str(&out)]);
    let refused = keyslice(&refused_args);
    assert!(!refused.status.success());
    let message = text(&refused.stderr);
    assert!(
        message.contains("PHANTOM_17_0002") && message.contains("truth.json"),
        "{message}"
    );
    assert!(!out.exists(), "nothing is written for a refused run");
}

#[test]
fn a_diverged_run_writes_no_checkpoint_and_a_broken_one_does_not_load() {
    let folder = tempfile::tempdir().expect("temp dir");
    let data = folder.path().join("cases");
    let made = keyslice(&[
        "phantom",
        "--out",
        path_str(&data),
        "--cases",
        "2",
        "--seed",
        "41",
        "--matrix",
        "64",
    ]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let config = folder.path().join("config.json");
    std::fs::write(&config, SMALL_CONFIG).expect("config written");
    // A learning rate that is not a number is refused before anything runs.
    for lr in ["NaN", "inf", "0", "-1"] {
        let mut args = train_args(&data, &config);
        let out = folder.path().join(format!("lr-{lr}"));
        let flag = format!("--lr={lr}");
        args.extend([flag.as_str(), "--out", path_str(&out)]);
        let refused = keyslice(&args);
        assert!(!refused.status.success(), "--lr {lr}");
        assert!(
            text(&refused.stderr).contains("--lr"),
            "{}",
            text(&refused.stderr)
        );
        assert!(!out.exists());
    }
    // One so large the loss leaves the numbers: stopped, named, nothing written.
    let mut args = train_args(&data, &config);
    let out = folder.path().join("diverged");
    args.extend(["--lr", "1e30", "--out", path_str(&out)]);
    let diverged = keyslice(&args);
    assert!(!diverged.status.success());
    let message = text(&diverged.stderr);
    assert!(
        message.contains("diverged") && message.contains("--lr"),
        "{message}"
    );
    assert!(!out.join("model.safetensors").exists());

    // A checkpoint with a weight that is not a number does not load; the weight is named.
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/keyslice-tiny");
    let broken = folder.path().join("broken");
    std::fs::create_dir_all(&broken).expect("folder");
    std::fs::copy(shipped.join("config.json"), broken.join("config.json")).expect("config");
    let device = candle_core::Device::Cpu;
    let mut tensors = candle_core::safetensors::load(shipped.join("model.safetensors"), &device)
        .expect("weights");
    let name = "diagnoser.head.bias".to_string();
    let count = tensors[&name].elem_count();
    tensors.insert(
        name.clone(),
        candle_core::Tensor::from_vec(vec![f32::NAN; count], count, &device).expect("tensor"),
    );
    candle_core::safetensors::save(&tensors, broken.join("model.safetensors")).expect("saved");
    let ct = data.join("PHANTOM_41_0000").join("ct.nii.gz");
    let analysed = keyslice(&["analyze", path_str(&ct), "--model", path_str(&broken)]);
    assert!(!analysed.status.success());
    let message = text(&analysed.stderr);
    assert!(
        message.contains(&name) && message.contains("finite"),
        "{message}"
    );
}
