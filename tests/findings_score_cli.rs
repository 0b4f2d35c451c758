//! `keyslice findings` and `keyslice score` as a user runs them: JSON keys, values on a small
//! hand-checked set, truth from AbdomenAtlas-style masks, and clear errors for bad lines.

mod common;

use std::path::Path;

use common::{keyslice, text};

#[test]
fn findings_json_has_organs_with_tumor_states() {
    let folder = tempfile::tempdir().expect("temp dir");
    let report = folder.path().join("report.txt");
    std::fs::write(
        &report,
        "A 2.3 cm hypodense lesion in segment VII. No focal pancreatic mass.",
    )
    .expect("write");
    let result = keyslice(&["findings", report.to_str().expect("utf-8"), "--json"]);
    assert!(result.status.success(), "{}", text(&result.stderr));
    let json: serde_json::Value = serde_json::from_slice(&result.stdout).expect("JSON");
    assert_eq!(json["organs"]["liver"]["tumor"], "yes");
    assert_eq!(json["organs"]["pancreas"]["tumor"], "no");
    assert_eq!(json["organs"]["kidney_left"]["tumor"], "not_mentioned");
    assert_eq!(
        json["organs"]["liver"]["lesions"][0]["size"]["long_cm"],
        2.3
    );
    assert_eq!(json["version"], 1);
}

/// Runs `keyslice score` on two files (or a truth folder), with extra arguments.
fn score(pred: &Path, truth: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "score",
        "--pred",
        pred.to_str().expect("utf-8"),
        "--truth",
        truth.to_str().expect("utf-8"),
    ];
    args.extend_from_slice(extra);
    keyslice(&args)
}

fn write_lines(path: &Path, lines: &[serde_json::Value]) {
    let body: Vec<String> = lines.iter().map(ToString::to_string).collect();
    std::fs::write(path, body.join("\n") + "\n").expect("write");
}

#[test]
fn score_json_has_exactly_the_documented_keys_and_values() {
    let folder = tempfile::tempdir().expect("temp dir");
    let truth = folder.path().join("truth.jsonl");
    let pred = folder.path().join("pred.jsonl");
    write_lines(
        &truth,
        &[
            serde_json::json!({"case_id": "a", "report": "Liver lesion 1:\nSize: 3.0 cm.\nKey slice: 40.", "lesion_extents": [{"organ": "liver", "first_slice": 35, "last_slice": 45, "largest_slice": 40}]}),
            serde_json::json!({"case_id": "b", "report": "Liver: no tumor. Pancreas: no tumor. Kidneys unremarkable."}),
            serde_json::json!({"case_id": "c", "report": "No liver lesion."}),
        ],
    );
    write_lines(
        &pred,
        &[
            serde_json::json!({"case_id": "a", "report": "3.2 cm liver mass. Key slice: 42.", "local_description": "Slice 42: lesion in the liver, 3.1 cm."}),
            serde_json::json!({"case_id": "b", "report": "Possible pancreatic tail lesion.", "key_slice": 10}),
            serde_json::json!({"case_id": "z", "report": "No liver lesion."}),
        ],
    );
    let result = score(&pred, &truth, &["--json"]);
    assert!(result.status.success(), "{}", text(&result.stderr));
    let json: serde_json::Value = serde_json::from_slice(&result.stdout).expect("JSON");
    let keys: Vec<&String> = json.as_object().expect("object").keys().collect();
    assert_eq!(
        keys,
        vec![
            "attributes",
            "consistency_mean",
            "hallucination_rate",
            "key_slice",
            "missing_cases",
            "organs",
            "overall"
        ]
    );
    for organ in ["liver", "pancreas", "kidney_left", "kidney_right", "kidney"] {
        let entry = json["organs"][organ].as_object().expect("organ");
        let keys: Vec<&String> = entry.keys().collect();
        assert_eq!(
            keys,
            vec!["balanced_accuracy", "sensitivity", "specificity"],
            "{organ}"
        );
    }
    assert_eq!(json["organs"]["liver"]["sensitivity"], 1.0);
    assert_eq!(json["organs"]["liver"]["specificity"], 1.0);
    // b: the uncertain pancreas counts as reported, on a pancreas without tumor.
    assert_eq!(json["organs"]["pancreas"]["specificity"], 0.5);
    assert_eq!(json["attributes"]["size"], 1.0);
    assert_eq!(json["key_slice"]["hit_rate"], 1.0);
    assert_eq!(json["key_slice"]["mean_error_slices"], 2.0);
    assert_eq!(json["consistency_mean"], 1.0);
    // 2 scored cases × 4 organs: 1 positive (a liver); 7 negatives, 1 reported (b pancreas).
    assert_eq!(json["hallucination_rate"], 1.0 / 7.0);
    let missing = json["missing_cases"].as_array().expect("array");
    assert_eq!(missing.len(), 2);
    assert_eq!(missing[0]["case_id"], "c");
    assert_eq!(missing[0]["missing_from"], "predictions");
    assert_eq!(missing[1]["case_id"], "z");
    assert_eq!(missing[1]["missing_from"], "truth");

    let table = score(&pred, &truth, &[]);
    let stdout = text(&table.stdout);
    assert!(stdout.contains("2 case(s) scored"), "{stdout}");
    assert!(
        stdout.contains("missing       c (not in predictions)"),
        "{stdout}"
    );
}

#[test]
fn truth_folder_in_abdomenatlas_layout_gives_extents_and_sides() {
    let folder = tempfile::tempdir().expect("temp dir");
    // Liver lesion on slices 5..=8, largest on 7; a kidney lesion on the patient's left on
    // slices 12..=13.
    common::write_lesion_case(&folder.path().join("BDMAP_00000001"));
    let pred = folder.path().join("pred.jsonl");
    write_lines(
        &pred,
        &[
            serde_json::json!({"case_id": "BDMAP_00000001", "report": "Liver mass. Left renal mass. Key slice: 7."}),
        ],
    );
    let result = score(&pred, folder.path(), &["--json"]);
    assert!(result.status.success(), "{}", text(&result.stderr));
    let json: serde_json::Value = serde_json::from_slice(&result.stdout).expect("JSON");
    assert_eq!(json["organs"]["liver"]["sensitivity"], 1.0);
    assert_eq!(json["organs"]["kidney_left"]["sensitivity"], 1.0);
    assert_eq!(json["organs"]["kidney_right"]["specificity"], 1.0);
    assert_eq!(json["key_slice"]["hit_rate"], 1.0);
    assert_eq!(json["key_slice"]["mean_error_slices"], 0.0);
}

#[test]
fn a_bad_prediction_line_names_the_file_and_line() {
    let folder = tempfile::tempdir().expect("temp dir");
    let pred = folder.path().join("pred.jsonl");
    std::fs::write(&pred, "{\"case_id\": \"a\"}\n{not json}\n").expect("write");
    let truth = folder.path().join("truth.jsonl");
    std::fs::write(&truth, "{\"case_id\": \"a\"}\n").expect("write");
    let result = score(&pred, &truth, &[]);
    assert_eq!(result.status.code(), Some(1));
    let stderr = text(&result.stderr);
    assert!(
        stderr.starts_with("error: line 2 is not a valid record"),
        "{stderr}"
    );
    assert!(stderr.contains("pred.jsonl"), "{stderr}");
    assert!(stderr.contains("hint: "), "{stderr}");
}

#[test]
fn a_truth_with_nothing_to_score_against_is_an_error_not_no_tumor() {
    // The same definition as the Python reward, which refuses it too: a misspelt or missing
    // "findings" is never read as "no tumor anywhere".
    let folder = tempfile::tempdir().expect("temp dir");
    let pred = folder.path().join("pred.jsonl");
    std::fs::write(&pred, "{\"case_id\": \"x\", \"report\": \"No tumor.\"}\n").expect("write");
    let truth = folder.path().join("truth.jsonl");
    std::fs::write(
        &truth,
        "{\"case_id\": \"w\", \"report\": \"Liver: no tumor.\"}\n{\"case_id\": \"x\"}\n",
    )
    .expect("write");
    let result = score(&pred, &truth, &["--json"]);
    assert_eq!(result.status.code(), Some(1));
    let stderr = text(&result.stderr);
    assert!(stderr.contains("line 2"), "{stderr}");
    assert!(stderr.contains("case \"x\""), "{stderr}");
    assert!(
        stderr.contains("neither \"findings\" nor \"report\""),
        "{stderr}"
    );
    // ms-swift's nulls are absent keys: the same truth with its holes filled by nulls scores.
    std::fs::write(
        &truth,
        "{\"case_id\": \"x\", \"findings\": {\"organs\": {\"liver\": {\"tumor\": \"no\", \"lesions\": null}}, \"box\": null}, \"report\": null, \"lesion_extents\": null}\n",
    )
    .expect("write");
    let result = score(&pred, &truth, &["--per-case"]);
    assert_eq!(result.status.code(), Some(0), "{}", text(&result.stderr));
}
