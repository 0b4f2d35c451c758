//! The embedded demo model says when a CT is outside what it knows. CTs that are not its
//! phantoms (drawn by an independent generator, `tests/python/unfamiliar_cts.py`, written as
//! DICOM by pydicom: other body shapes, organ intensities, contrast phases, noise, slice
//! counts, a chest and a pelvis) are each labelled "demo model: not meaningful for this CT"
//! in `batch`, `analyze` and the workspace, and their AI result is not published without
//! `--force`; held-out phantoms pass. The python part needs Python 3 with pydicom and numpy;
//! skipped without them unless `KEYSLICE_REQUIRE_PYTHON` is set (CI sets it).

mod common;

use std::path::Path;
use std::process::Command;

use common::{keyslice, text};
use keyslice::infer::embedded::{TinyDiagnoser, TinyModel, TinyVerifier};
use keyslice::infer::{OutOfDomain, Prediction, run_pipeline};
use keyslice::phantom::{PhantomOptions, generate};

fn pydicom_available() -> bool {
    let found = Command::new("python3")
        .args(["-c", "import pydicom, numpy"])
        .output()
        .is_ok_and(|output| output.status.success());
    assert!(
        found || std::env::var_os("KEYSLICE_REQUIRE_PYTHON").is_none(),
        "python3 with pydicom and numpy is required (KEYSLICE_REQUIRE_PYTHON is set)"
    );
    found
}

fn path(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// Writes the unfamiliar CTs into `out`; returns their names.
fn unfamiliar_cts(out: &Path) -> Vec<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/unfamiliar_cts.py");
    let made = Command::new("python3")
        .arg(&script)
        .arg(out)
        .output()
        .expect("python3 runs");
    assert!(made.status.success(), "{}", text(&made.stderr));
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(out.join("manifest.json")).expect("the manifest is written"),
    )
    .expect("the manifest is JSON");
    manifest
        .as_array()
        .expect("a list")
        .iter()
        .map(|case| case["name"].as_str().expect("a name").to_string())
        .collect()
}

#[test]
fn every_ct_that_is_not_a_phantom_is_labelled_and_its_ai_result_is_kept_off_the_pacs() {
    if !pydicom_available() {
        return;
    }
    let folder = tempfile::tempdir().expect("temp dir");
    let cts = folder.path().join("cts");
    let names = unfamiliar_cts(&cts);
    assert!(names.len() >= 20, "{names:?}");

    // batch: every one analysed, every one labelled, with the reasons in the record.
    let predictions = folder.path().join("predictions.jsonl");
    let mut args = vec![
        "batch".to_string(),
        "--out".into(),
        path(&predictions).into(),
        "--jobs".into(),
        "2".into(),
    ];
    args.extend(names.iter().map(|name| path(&cts.join(name)).to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let batch = keyslice(&args);
    let log = text(&batch.stderr);
    assert!(batch.status.success(), "{log}");
    let lines = std::fs::read_to_string(&predictions).expect("predictions written");
    let records: Vec<Prediction> = lines
        .lines()
        .map(|line| serde_json::from_str(line).expect("a prediction"))
        .collect();
    assert_eq!(records.len(), names.len());
    for record in &records {
        let unfamiliar = record
            .out_of_domain
            .as_ref()
            .unwrap_or_else(|| panic!("{} passed as a phantom", record.case_id));
        assert_eq!(unfamiliar.label, OutOfDomain::LABEL);
        assert_eq!(unfamiliar.model, "keyslice-tiny");
        assert!(!unfamiliar.reasons.is_empty());
        assert_eq!(record.warnings[0], unfamiliar.sentence());
        assert!(
            log.contains(&format!("{}: {}", record.case_id, OutOfDomain::LABEL)),
            "{log}"
        );
    }

    // analyze: the label heads the answer.
    let abdomen = cts.join("tumor_free_abdomen");
    let analysed = keyslice(&["analyze", path(&abdomen)]);
    let answer = text(&analysed.stdout);
    assert!(analysed.status.success(), "{}", text(&analysed.stderr));
    assert!(
        answer.contains("DEMO MODEL: NOT MEANINGFUL FOR THIS CT"),
        "{answer}"
    );
    assert!(answer.contains("training phantoms"), "{answer}");

    workspace_lists_them_and_publishing_leaves_them_out(folder.path(), &cts);
}

/// A workspace of two of them flags both, and publishing leaves their AI results out
/// unless forced, then labels them.
fn workspace_lists_them_and_publishing_leaves_them_out(folder: &Path, cts: &Path) {
    let abdomen = cts.join("tumor_free_abdomen");
    let workspace = folder.join("workspace");
    let created = keyslice(&[
        "workspace",
        "create",
        path(&workspace),
        path(&abdomen),
        path(&cts.join("chest")),
    ]);
    assert!(created.status.success(), "{}", text(&created.stderr));
    let analysed = keyslice(&["workspace", "analyze", path(&workspace)]);
    assert!(analysed.status.success(), "{}", text(&analysed.stderr));
    let listed = keyslice(&["workspace", "list", path(&workspace), "--json"]);
    let rows: Vec<serde_json::Value> = text(&listed.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON row"))
        .collect();
    assert_eq!(rows.len(), 2);
    for row in &rows {
        assert_eq!(row["out_of_domain"], true, "{row}");
        let attention = row["attention"].as_str().expect("a reason");
        assert!(attention.starts_with(OutOfDomain::LABEL), "{attention}");
    }
    let documents = folder.join("documents");
    let publish = |force: bool| {
        let mut args = vec![
            "pacs",
            "publish",
            path(&workspace),
            "--out",
            path(&documents),
            "--no-store",
        ];
        if force {
            args.push("--force");
        }
        keyslice(&args)
    };
    let refused = publish(false);
    let log = text(&refused.stderr);
    assert!(refused.status.success(), "{log}");
    assert!(log.contains("is not published (--force"), "{log}");
    assert!(
        common::files(&documents).is_empty(),
        "no AI result of a CT the model does not know is written"
    );
    let forced = publish(true);
    assert!(forced.status.success(), "{}", text(&forced.stderr));
    let written = common::files(&documents);
    let (_, sr) = written
        .iter()
        .find(|(name, _)| name.to_string_lossy().ends_with("-ai-result.dcm"))
        .unwrap_or_else(|| panic!("an AI result among {:?}", written.keys()));
    assert!(
        sr.windows(OutOfDomain::LABEL.len())
            .any(|window| window == OutOfDomain::LABEL.as_bytes()),
        "a forced AI result carries the model's own word in its report"
    );
    // Read back, the result keeps its standing, and its key images claim no interest.
    let Ok(keyslice::pacs::sr::read::Document::Result(read)) =
        keyslice::pacs::sr::read::read_bytes(sr)
    else {
        panic!("the forced SR reads back as a result");
    };
    assert!(read.content.out_of_domain.is_some(), "the standing is lost");
    if let Some((_, kos)) = written
        .iter()
        .find(|(name, _)| name.to_string_lossy().ends_with("-key-images.dcm"))
    {
        let Ok(keyslice::pacs::sr::read::Document::KeyImages(keys)) =
            keyslice::pacs::sr::read::read_bytes(kos)
        else {
            panic!("the key images read back");
        };
        assert_eq!(keys.content.title, "For Research");
    }
}

#[test]
fn held_out_phantoms_are_inside_the_demo_models_domain() {
    let model = TinyModel::embedded().expect("the embedded model loads");
    // Seed 999 is the evaluation set, never used to calibrate, at the training and the demo
    // matrix; and the demo workspace's case with a 4.6 cm kidney tumor, whose kidney would
    // look unlike the phantoms' were the tumor not left out of the organ's figures.
    for (seed, index, matrix) in [
        (999, 0, 128),
        (999, 1, 128),
        (999, 2, 128),
        (999, 3, 256),
        (999, 4, 128),
        (2026, 2, 256),
    ] {
        let phantom = generate(
            seed,
            index,
            PhantomOptions {
                matrix,
                slice_mm: None,
            },
        );
        let prediction = run_pipeline(
            "phantom",
            &phantom.volume,
            &TinyDiagnoser(&model),
            Some(&TinyVerifier(&model)),
        )
        .expect("analysed");
        assert_eq!(
            prediction.out_of_domain, None,
            "phantom {seed}/{index} at {matrix}"
        );
    }
}
