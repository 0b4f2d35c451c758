//! Shared helpers of the end-to-end tests: the binary, masks, lesion cases, studies and
//! workspaces; the committed fixtures and the synthetic series writer come from
//! `keyslice-testkit`, which the crates' own tests use too.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Runs the `keyslice` binary with `args`.
pub fn keyslice(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_keyslice"))
        .args(args)
        .output()
        .expect("the binary runs")
}

/// Bytes as (lossy) UTF-8 text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).to_string()
}

#[allow(unused_imports, reason = "each test file uses some of the fixtures")]
pub use keyslice_testkit::{SliceSpec, data, expected, truncated_copy, write_series};

/// Writes a binary mask (value 1 where `on(i, j, k)`) as NIfTI on the grid `dims`, `affine`;
/// with `on` never true it writes an all-zero volume (a stand-in CT for mask tests).
pub fn write_mask(
    path: &Path,
    dims: [usize; 3],
    affine: keyslice::volume::Affine,
    on: impl Fn(usize, usize, usize) -> bool,
) {
    use keyslice::io::nifti::{WriteOptions, write_nifti};
    use keyslice::volume::{Volume, VolumeInfo, Voxels};
    let mut values = vec![0i16; dims[0] * dims[1] * dims[2]];
    for k in 0..dims[2] {
        for j in 0..dims[1] {
            for i in 0..dims[0] {
                if on(i, j, k) {
                    values[i + dims[0] * (j + dims[1] * k)] = 1;
                }
            }
        }
    }
    let volume = Volume::new(
        dims,
        affine,
        Voxels::I16(values),
        Vec::new(),
        VolumeInfo::default(),
    )
    .expect("mask parts agree");
    write_nifti(&volume, path, WriteOptions::default()).expect("write mask");
}

/// A small AbdomenAtlas case folder `case` (16 × 16 × 20 voxels of 2 × 2 × 3 mm): an empty
/// CT, a liver lesion on slices 5–8 (16 voxels on slice 7, 8 on the others) and a kidney
/// lesion on the patient's left (+x, high i) on slices 12–13 (48 voxels each). Returns the
/// grid's dims and transform for further masks.
pub fn write_lesion_case(case: &Path) -> ([usize; 3], keyslice::volume::Affine) {
    let segmentations = case.join("segmentations");
    std::fs::create_dir_all(&segmentations).expect("mkdir");
    let dims = [16, 16, 20];
    let affine = keyslice::volume::Affine::from_axes(
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
        [2.0, 2.0, 3.0],
        [-16.0, -16.0, 0.0],
    );
    write_mask(&case.join("ct.nii.gz"), dims, affine, |_, _, _| false);
    write_mask(
        &segmentations.join("liver_lesion.nii.gz"),
        dims,
        affine,
        |i, j, k| (5..=8).contains(&k) && i < 4 && j < if k == 7 { 4 } else { 2 },
    );
    write_mask(
        &segmentations.join("kidney_lesion.nii.gz"),
        dims,
        affine,
        |i, _, k| (12..=13).contains(&k) && i > 12,
    );
    (dims, affine)
}

/// A block of `hu` in air (−1000 HU): `dims` voxels of `spacing_mm` along the LPS axes from
/// the origin, the block over the voxel ranges `block` (i, j, k); with its mask (label 1 on
/// the block) named `name`.
pub fn bright_block(
    dims: [usize; 3],
    spacing_mm: [f64; 3],
    block: &[std::ops::Range<usize>; 3],
    hu: i16,
    name: &str,
) -> (keyslice::volume::Volume, keyslice::volume::LabelVolume) {
    use keyslice::volume::{Affine, LabelVolume, Volume, VolumeInfo, Voxels};
    let mut values = vec![-1000i16; dims[0] * dims[1] * dims[2]];
    let mut labels = vec![0u8; values.len()];
    for k in block[2].clone() {
        for j in block[1].clone() {
            for i in block[0].clone() {
                values[i + dims[0] * (j + dims[1] * k)] = hu;
                labels[i + dims[0] * (j + dims[1] * k)] = 1;
            }
        }
    }
    let affine = Affine::from_axes(
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
        spacing_mm,
        [0.0; 3],
    );
    let volume = Volume::new(
        dims,
        affine,
        Voxels::I16(values),
        Vec::new(),
        VolumeInfo::default(),
    )
    .expect("block parts agree");
    let mask = LabelVolume {
        name: name.into(),
        dims,
        patient_from_voxel: affine,
        labels,
    };
    (volume, mask)
}

/// Writes `records` (one JSON value a line) to `folder/pred.jsonl` and scores them with
/// `keyslice score --json` against `truth` (case folders), which must succeed: its report.
pub fn score_predictions(
    folder: &Path,
    records: &[serde_json::Value],
    truth: &Path,
) -> serde_json::Value {
    let pred = folder.join("pred.jsonl");
    let mut lines = String::new();
    for record in records {
        lines.push_str(&record.to_string());
        lines.push('\n');
    }
    std::fs::write(&pred, lines).expect("predictions written");
    let scored = keyslice(&[
        "score",
        "--pred",
        pred.to_str().expect("utf-8 path"),
        "--truth",
        truth.to_str().expect("utf-8 path"),
        "--json",
    ]);
    assert!(scored.status.success(), "{}", text(&scored.stderr));
    serde_json::from_slice(&scored.stdout).expect("score prints JSON")
}

/// Runs `keyslice ARGS --out DIR` twice, into `folder/NAME-first` and `folder/NAME-second`:
/// both must succeed and log each of `logged`, and both checkpoints must be the same bytes
/// (training is reproducible). Returns the first folder.
pub fn train_twice(folder: &Path, name: &str, args: &[&str], logged: &[&str]) -> PathBuf {
    let outs = [
        folder.join(format!("{name}-first")),
        folder.join(format!("{name}-second")),
    ];
    for out in &outs {
        let mut all = args.to_vec();
        all.extend(["--out", out.to_str().expect("utf-8 path")]);
        let result = keyslice(&all);
        assert!(result.status.success(), "{}", text(&result.stderr));
        let log = text(&result.stderr);
        for line in logged {
            assert!(log.contains(line), "{line:?} not in: {log}");
        }
    }
    let weights = |out: &Path| std::fs::read(out.join("model.safetensors")).expect("weights");
    assert!(
        weights(&outs[0]) == weights(&outs[1]),
        "{name}: the same seed must give the same checkpoint"
    );
    let [first, _] = outs;
    first
}

/// A prediction as a backend saves it for `case_id`: the findings read from `report` (key
/// slice 3 at z = 15 mm), with the evidence box `box_voxels` if given.
#[allow(dead_code)] // not every test file uses every helper
pub fn saved_prediction(
    case_id: &str,
    report: &str,
    box_voxels: Option<[u32; 4]>,
) -> keyslice::infer::Prediction {
    let findings = keyslice::findings::reader::read_report(report)
        .findings
        .without_spans();
    serde_json::from_value(serde_json::json!({
        "version": 1,
        "case_id": case_id,
        "diagnoser": {"id": "keyslice-tiny", "version": "test"},
        "verifier": null,
        "report": report,
        "findings": findings,
        "key_slice": {"index": 3, "z_mm": 15.0},
        "box": box_voxels.map(|voxels| serde_json::json!({"voxels": voxels})),
        "local_description": null,
        "local_findings": null,
        "consistency": null,
        "timings_ms": {"diagnose": 1.0, "verify": 0.0, "total": 1.0},
        "warnings": []
    }))
    .expect("a prediction")
}

/// Every file under `folder`, relative path → bytes.
pub fn files(folder: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut found = std::collections::BTreeMap::new();
    let mut stack = vec![folder.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("listing") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let relative = path.strip_prefix(folder).expect("inside").to_path_buf();
                found.insert(relative, std::fs::read(&path).expect("readable"));
            }
        }
    }
    found
}

/// Whether a GPU adapter exists; without one (and without `KEYSLICE_REQUIRE_GPU`) the
/// window and viewer checks are skipped with a message.
pub fn gpu_available() -> bool {
    match keyslice::render::headless_device() {
        Ok(_) => true,
        Err(error) => {
            assert!(
                std::env::var_os("KEYSLICE_REQUIRE_GPU").is_none(),
                "KEYSLICE_REQUIRE_GPU is set but {error}"
            );
            eprintln!("no GPU adapter, skipping window checks: {error}");
            false
        }
    }
}

/// Every file below `root`, folders walked (links not followed).
pub fn files_below(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    if let Ok(entries) = std::fs::read_dir(root) {
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                found.extend(files_below(&path));
            } else {
                found.push(path);
            }
        }
    }
    found
}

/// Findings that say a liver tumor is there (`tumor`) or not, and nothing of other organs.
pub fn liver_findings(tumor: bool) -> keyslice::findings::Findings {
    use keyslice::findings::{Findings, Organ, OrganFindings, TumorPresence};
    let mut findings = Findings::default();
    findings.organs.insert(
        Organ::Liver,
        OrganFindings {
            tumor: if tumor {
                TumorPresence::Yes
            } else {
                TumorPresence::No
            },
            lesions: Vec::new(),
            span: None,
        },
    );
    findings
}

/// A simulated study's truth and AI results: a liver tumor in the cases where `real(k)` (k
/// their index); the AI claims one in every case, which the evidence display shows agreeing
/// with its key slice where it is real and denied by the verifier where it is a
/// hallucination.
pub fn liver_truth_and_ai(
    cases: &[String],
    real: impl Fn(usize) -> bool,
) -> (
    std::collections::BTreeMap<String, keyslice::findings::Findings>,
    std::collections::BTreeMap<String, keyslice::review::study::AiResult>,
) {
    let mut truth = std::collections::BTreeMap::new();
    let mut ai = std::collections::BTreeMap::new();
    for (k, case) in cases.iter().enumerate() {
        truth.insert(case.clone(), liver_findings(real(k)));
        ai.insert(
            case.clone(),
            keyslice::review::study::AiResult {
                claims: vec![keyslice::findings::Organ::Liver],
                shown: [(
                    keyslice::findings::Organ::Liver,
                    if real(k) {
                        keyslice::scoring::Standing::Agrees
                    } else {
                        keyslice::scoring::Standing::Denied
                    },
                )]
                .into(),
            },
        );
    }
    (truth, ai)
}

/// `keyslice study create DIR --workspace WORKSPACE --reader R… ARGS…`, which must succeed;
/// what it printed.
pub fn create_study(workspace: &Path, dir: &Path, readers: &[&str], args: &[&str]) -> String {
    let mut all = vec![
        "study".to_string(),
        "create".into(),
        dir.to_str().expect("utf-8").into(),
        "--workspace".into(),
        workspace.to_str().expect("utf-8").into(),
    ];
    for reader in readers {
        all.extend(["--reader".to_string(), (*reader).to_string()]);
    }
    all.extend(args.iter().map(|arg| (*arg).to_string()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let created = keyslice(&all);
    assert!(created.status.success(), "{}", text(&created.stderr));
    text(&created.stdout)
}

/// A study of readers ana, ben and cho over `cases` cases named `case0`…, in two arms
/// (`unaided` shows the images, `evidence` everything), with seed 3.
pub fn study_definition(
    design: keyslice::review::study::Design,
    cases: usize,
) -> keyslice::review::study::StudyDefinition {
    use keyslice::review::study::{Arm, STUDY_VERSION, Shows, StudyDefinition};
    StudyDefinition {
        keyslice_study: STUDY_VERSION,
        name: "trial".into(),
        workspace: PathBuf::from("/nowhere"),
        cases: (0..cases).map(|k| format!("case{k}")).collect(),
        readers: vec!["ana".into(), "ben".into(), "cho".into()],
        arms: vec![
            Arm {
                name: "unaided".into(),
                shows: Shows::Images,
            },
            Arm {
                name: "evidence".into(),
                shows: Shows::Evidence,
            },
        ],
        design,
        seed: 3,
        pacs_query: None,
    }
}

/// A test hospital CA and a server certificate it signed for `localhost` and 127.0.0.1, made
/// with openssl in `folder`: `ca.pem`, `server.pem`, `server.key`. False without openssl
/// (a failure when `KEYSLICE_REQUIRE_PYTHON` is set).
pub fn test_ca(folder: &Path) -> bool {
    let run = |args: &[&str]| {
        std::process::Command::new("openssl")
            .args(args)
            .current_dir(folder)
            .output()
            .is_ok_and(|output| output.status.success())
    };
    std::fs::write(
        folder.join("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .expect("written");
    let made = run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=Keyslice Test Hospital CA",
    ]) && run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    ]) && run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    ]);
    if !made {
        assert!(
            std::env::var_os("KEYSLICE_REQUIRE_PYTHON").is_none(),
            "openssl is needed to make the test CA"
        );
    }
    made
}
