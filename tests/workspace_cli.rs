//! `keyslice workspace create|analyze|list`: a workspace made from a dataset folder and a
//! NIfTI file, analysed once (a second run skips what is done), a torn predictions line
//! (a run killed mid-write) skipped and not spreading, review status shown, bad inputs named.

mod common;

use std::path::Path;

use common::{data, keyslice, text};
use keyslice::review::workspace::{PREDICTIONS_FILE, Workspace};
use keyslice::review::{Edit, ReviewStore};

fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

#[test]
#[expect(clippy::too_many_lines, reason = "one user's scenario, step by step")]
fn a_workspace_is_created_analysed_and_listed() {
    let folder = tempfile::tempdir().expect("temp dir");
    let dataset = folder.path().join("dataset");
    let made = keyslice(&[
        "phantom",
        "--out",
        s(&dataset),
        "--cases",
        "2",
        "--seed",
        "43",
        "--matrix",
        "64",
    ]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    // A loose NIfTI CT beside the dataset: another phantom's ct.nii.gz.
    let loose = folder.path().join("loose");
    let made = keyslice(&[
        "phantom",
        "--out",
        s(&loose),
        "--cases",
        "1",
        "--seed",
        "44",
        "--matrix",
        "64",
    ]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let nifti = folder.path().join("loose_ct.nii.gz");
    std::fs::copy(loose.join("PHANTOM_44_0000/ct.nii.gz"), &nifti).expect("copied");
    let dir = folder.path().join("ws");

    let created = keyslice(&["workspace", "create", s(&dir), s(&dataset)]);
    assert!(created.status.success(), "{}", text(&created.stderr));
    assert!(
        text(&created.stdout).starts_with("2 case(s) added"),
        "{}",
        text(&created.stdout)
    );
    // Adding the same dataset again adds nothing.
    let again = keyslice(&["workspace", "create", s(&dir), s(&dataset)]);
    assert!(
        text(&again.stdout).starts_with("0 case(s) added"),
        "{}",
        text(&again.stdout)
    );
    let workspace = Workspace::open(&dir).expect("opens");
    let ids: Vec<&str> = workspace
        .manifest
        .cases
        .iter()
        .map(|c| c.case_id.as_str())
        .collect();
    assert_eq!(ids, ["PHANTOM_43_0000", "PHANTOM_43_0001"]);
    let first = &workspace.manifest.cases[0];
    assert!(first.volume.is_absolute() && first.volume.ends_with("ct.nii.gz"));
    assert!(
        first
            .masks
            .as_ref()
            .is_some_and(|m| m.ends_with("segmentations"))
    );
    assert!(
        first
            .truth
            .as_ref()
            .is_some_and(|t| t.ends_with("truth.json"))
    );
    assert!(dir.join("review.sqlite").is_file());
    if nifti.is_file() {
        let added = keyslice(&["workspace", "create", s(&dir), s(&nifti)]);
        assert!(added.status.success(), "{}", text(&added.stderr));
    }

    // Two analyses started at once: the workspace lock makes the second wait, then find
    // every case done; each case is analysed once.
    let spawn = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_keyslice"))
            .args(["workspace", "analyze", s(&dir)])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("started")
    };
    let (first, second) = (spawn(), spawn());
    let outputs = [first, second].map(|child| child.wait_with_output().expect("finished"));
    let cases = Workspace::open(&dir).expect("opens").manifest.cases.len();
    for output in &outputs {
        assert!(output.status.success(), "{}", text(&output.stderr));
    }
    let summaries: Vec<String> = outputs.iter().map(|o| text(&o.stdout)).collect();
    assert!(
        summaries
            .iter()
            .any(|s| s.starts_with(&format!("{cases} analysed, 0 already")))
            && summaries
                .iter()
                .any(|s| s.starts_with(&format!("0 analysed, {cases} already"))),
        "{summaries:?}"
    );
    let lines = std::fs::read_to_string(dir.join(PREDICTIONS_FILE)).expect("predictions");
    assert_eq!(lines.lines().count(), cases, "each case analysed once");
    let rerun = keyslice(&["workspace", "analyze", s(&dir)]);
    assert!(
        text(&rerun.stdout).starts_with(&format!("0 analysed, {cases} already")),
        "{}",
        text(&rerun.stdout)
    );

    // A run killed mid-line leaves a torn line: it is reported and skipped, and the next
    // line is not glued to it.
    let predictions = dir.join(PREDICTIONS_FILE);
    let mut bytes = std::fs::read(&predictions).expect("predictions");
    bytes.extend_from_slice(b"{\"version\": 1, \"case_id\": \"PHAN");
    std::fs::write(&predictions, &bytes).expect("torn");
    let forced = keyslice(&["workspace", "analyze", s(&dir), "--force"]);
    assert!(forced.status.success(), "{}", text(&forced.stderr));
    assert!(
        text(&forced.stderr).contains("skipped"),
        "{}",
        text(&forced.stderr)
    );
    let read = Workspace::open(&dir)
        .expect("opens")
        .predictions()
        .expect("read");
    assert_eq!(read.by_case.len(), cases);
    assert_eq!(read.damaged.len(), 1, "{:?}", read.damaged);
    assert!(
        read.damaged[0].starts_with(&format!("line {}", cases + 1)),
        "{:?}",
        read.damaged
    );

    // Review status from the database shows in the list; lowest consistency first.
    let mut store = ReviewStore::open(&dir.join("review.sqlite")).expect("store");
    store
        .record(&Edit {
            case_id: "PHANTOM_43_0001".into(),
            field: "liver.tumor".into(),
            old_value: serde_json::json!("yes"),
            new_value: serde_json::json!("no"),
            reviewer: "dr.list".into(),
        })
        .expect("recorded");
    let listed = keyslice(&["workspace", "list", s(&dir), "--json"]);
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let rows: Vec<serde_json::Value> = text(&listed.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON line"))
        .collect();
    assert_eq!(rows.len(), cases);
    // Cases that need a look (with the reason) first, then the lowest consistency.
    let needs_look = rows
        .iter()
        .take_while(|r| r["attention"].is_string())
        .count();
    assert!(
        rows[needs_look..].iter().all(|r| r["attention"].is_null()),
        "{rows:?}"
    );
    let scores: Vec<f64> = rows[needs_look..]
        .iter()
        .filter_map(|r| r["consistency"].as_f64())
        .collect();
    assert!(scores.windows(2).all(|w| w[0] <= w[1]), "{scores:?}");
    let edited = rows
        .iter()
        .find(|r| r["case_id"] == "PHANTOM_43_0001")
        .expect("listed");
    assert_eq!(edited["status"], "in_review");
    assert_eq!(edited["reviewer"], "dr.list");
}

#[test]
fn workspace_commands_name_bad_inputs() {
    let folder = tempfile::tempdir().expect("temp dir");
    let missing = folder.path().join("missing.nii.gz");
    let dir = folder.path().join("ws");
    let result = keyslice(&["workspace", "create", s(&dir), s(&missing)]);
    assert_eq!(result.status.code(), Some(1));
    let stderr = text(&result.stderr);
    assert!(
        stderr.contains("missing.nii.gz") && stderr.contains("hint:"),
        "{stderr}"
    );

    // A NIfTI that is not a CT in HU (nibabel's small example image): reported as not
    // analysed, with the reason, instead of "no lesion found".
    let not_ct = folder.path().join("not_ct");
    let made = keyslice(&[
        "workspace",
        "create",
        s(&not_ct),
        s(&data("nifti/standard.nii.gz")),
    ]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let result = keyslice(&["workspace", "analyze", s(&not_ct)]);
    assert_eq!(result.status.code(), Some(1));
    let stderr = text(&result.stderr);
    assert!(
        stderr.contains("standard: not analysed") && stderr.contains("Hounsfield"),
        "{stderr}"
    );

    let result = keyslice(&["workspace", "analyze", s(folder.path())]);
    assert_eq!(result.status.code(), Some(1));
    let stderr = text(&result.stderr);
    assert!(stderr.contains("no workspace.json here"), "{stderr}");
    assert!(stderr.contains("keyslice workspace create"), "{stderr}");

    std::fs::create_dir_all(&dir).expect("folder");
    std::fs::write(dir.join("workspace.json"), "{ \"cases\": 3 }").expect("written");
    let result = keyslice(&["workspace", "list", s(&dir)]);
    assert_eq!(result.status.code(), Some(1));
    let stderr = text(&result.stderr);
    assert!(
        stderr.contains("not a Keyslice workspace manifest"),
        "{stderr}"
    );
}

#[test]
fn a_file_name_with_control_characters_gives_a_plain_case_id() {
    let folder = tempfile::tempdir().expect("temp dir");
    let hostile = folder.path().join("evil\nreview by Eve\u{1b}[2J");
    let made = keyslice(&[
        "phantom",
        "--out",
        s(&hostile),
        "--cases",
        "1",
        "--seed",
        "5",
        "--matrix",
        "32",
    ]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let ct = std::fs::read_dir(&hostile)
        .expect("cases")
        .next()
        .expect("a case")
        .expect("entry")
        .path()
        .join("ct.nii.gz");
    let named = hostile.join("patient\r\nline.nii.gz");
    std::fs::copy(&ct, &named).expect("copied");
    let ws = folder.path().join("ws");
    let created = keyslice(&["workspace", "create", s(&ws), s(&named)]);
    assert!(created.status.success(), "{}", text(&created.stderr));
    let listed = keyslice(&["workspace", "list", s(&ws)]);
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let shown = text(&listed.stdout);
    assert_eq!(shown.lines().count(), 2, "{shown:?}");
    assert!(
        !shown.contains('\r') && !shown.contains('\u{1b}'),
        "{shown:?}"
    );
    let info = keyslice(&["info", s(&named)]);
    assert!(info.status.success(), "{}", text(&info.stderr));
    assert!(
        !text(&info.stdout).contains('\r') && text(&info.stdout).contains("patient\\r\\nline"),
        "{}",
        text(&info.stdout)
    );
}
