//! A workspace whose files were damaged (a torn, emptied or bit-flipped `predictions.jsonl`,
//! a duplicated case id in `workspace.json`, a corrupted `review.sqlite`) and an export that
//! was killed: an accepted review is never silently dropped or exported as an empty answer.
//! It is rebuilt from the review database, or refused with what was damaged and what to do.

mod common;

use std::path::Path;

use common::{files, keyslice, text};
use keyslice::review::ReviewStatus;
use keyslice::review::case::{CaseReview, model_findings};
use keyslice::review::workspace::{DATABASE_FILE, MANIFEST_FILE, PREDICTIONS_FILE, Workspace};
use serde_json::json;

fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// A workspace of one small phantom, with a model prediction (a 1.0 cm liver lesion) that a
/// reviewer corrected (2.4 cm) and accepted.
fn accepted_workspace(root: &Path) -> Workspace {
    let dataset = root.join("dataset");
    let made = keyslice(&[
        "phantom",
        "--out",
        s(&dataset),
        "--cases",
        "1",
        "--seed",
        "7",
        "--matrix",
        "48",
    ]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let (workspace, added) =
        Workspace::create_or_extend(&root.join("ws"), &[dataset]).expect("workspace");
    assert_eq!(added, 1);
    let case_id = workspace.manifest.cases[0].case_id.clone();
    let prediction = common::saved_prediction(
        &case_id,
        "Liver lesion 1: Size: 1.0 x 0.7 cm. Key slice: 3",
        None,
    );
    workspace.append_prediction(&prediction).expect("appended");
    let mut review = CaseReview::open(
        &workspace.database_path(),
        &case_id,
        "Ana",
        Some(model_findings(&prediction)),
    )
    .expect("review");
    review
        .set(
            "liver.lesions.0.size",
            json!({"long_cm": 2.4, "short_cm": 1.9}),
        )
        .expect("size");
    review.set_status(ReviewStatus::Done).expect("accepted");
    workspace
}

/// Exports with the frames named under one training folder, so exports written to different
/// folders compare byte for byte.
fn export(workspace: &Path, out: &Path) -> std::process::Output {
    keyslice(&[
        "export",
        s(workspace),
        "--format",
        "swift",
        "--frames",
        "4",
        "--frames-root",
        "/data/keyslice-export",
        "--out",
        s(out),
    ])
}

#[test]
fn a_damaged_predictions_file_never_turns_an_accepted_review_into_an_empty_answer() {
    let dir = tempfile::tempdir().expect("temp dir");
    let workspace = accepted_workspace(dir.path());
    let root = workspace.root.clone();
    let good_out = dir.path().join("good");
    let exported = export(&root, &good_out);
    assert!(exported.status.success(), "{}", text(&exported.stderr));
    let good = files(&good_out);
    let answers = String::from_utf8_lossy(&good[Path::new("train.jsonl")]).to_string();
    assert!(answers.contains("2.4"), "{answers}");

    let predictions = root.join(PREDICTIONS_FILE);
    let original = std::fs::read(&predictions).expect("predictions");
    let damages: [(&str, Vec<u8>); 4] = [
        ("emptied", Vec::new()),
        ("torn mid-line", original[..original.len() / 2].to_vec()),
        ("a block of NULs", {
            let mut bytes = original.clone();
            let middle = bytes.len() / 3;
            bytes[middle..middle + 64].fill(0);
            bytes
        }),
        ("one byte changed", {
            let mut bytes = original.clone();
            let at = bytes.iter().position(|&b| b == b'{').expect("a brace");
            bytes[at] = b'}';
            bytes
        }),
    ];
    for (damage, bytes) in damages {
        std::fs::write(&predictions, &bytes).expect("damaged");
        let out = dir.path().join(format!("out-{}", damage.replace(' ', "-")));
        let exported = export(&root, &out);
        let warnings = text(&exported.stderr);
        assert!(exported.status.success(), "{damage}: {warnings}");
        assert!(
            warnings.contains("its findings are rebuilt from review.sqlite"),
            "{damage}: {warnings}"
        );
        assert_eq!(files(&out), good, "{damage}: the same training data");
        let listed = keyslice(&["workspace", "list", s(&root)]);
        assert!(
            text(&listed.stderr).contains("reviewed, but its prediction cannot be read"),
            "{damage}: {}",
            text(&listed.stderr)
        );
    }

    // Without the remembered starting point, the case is refused, never exported empty.
    let connection = rusqlite::Connection::open(root.join(DATABASE_FILE)).expect("sqlite");
    connection
        .execute("DELETE FROM bases", [])
        .expect("cleared");
    drop(connection);
    std::fs::write(&predictions, b"").expect("emptied");
    let out = dir.path().join("refused");
    let exported = export(&root, &out);
    let message = text(&exported.stderr);
    assert!(!exported.status.success(), "{message}");
    assert!(
        message.contains("its prediction cannot be read") && message.contains("analyse it again"),
        "{message}"
    );
    assert!(!out.exists());
}

#[test]
fn a_duplicated_case_id_or_a_corrupted_review_database_is_refused_by_name() {
    let dir = tempfile::tempdir().expect("temp dir");
    let workspace = accepted_workspace(dir.path());
    let root = workspace.root.clone();

    // One flipped bit turned a second case's id into the first one's.
    let manifest_path = root.join(MANIFEST_FILE);
    let original_manifest = std::fs::read_to_string(&manifest_path).expect("manifest");
    let mut manifest: serde_json::Value = serde_json::from_str(&original_manifest).expect("JSON");
    let cases = manifest["cases"].as_array_mut().expect("cases");
    let mut twin = cases[0].clone();
    twin["volume"] = json!("/elsewhere/ct.nii.gz");
    cases.push(twin);
    std::fs::write(&manifest_path, manifest.to_string()).expect("written");
    let nowhere = dir.path().join("x");
    for args in [
        vec!["workspace", "list", s(&root)],
        vec![
            "export",
            s(&root),
            "--format",
            "swift",
            "--out",
            s(&nowhere),
        ],
    ] {
        let refused = keyslice(&args);
        let message = text(&refused.stderr);
        assert!(!refused.status.success(), "{args:?}: {message}");
        assert!(message.contains("share the id"), "{args:?}: {message}");
    }
    std::fs::write(&manifest_path, &original_manifest).expect("restored");

    // Bytes of the corrections log's pages overwritten: SQLite's own check fails.
    let database = root.join(DATABASE_FILE);
    let checkpoint = rusqlite::Connection::open(&database).expect("sqlite");
    checkpoint
        .pragma_update(None, "journal_mode", "DELETE")
        .expect("no WAL");
    drop(checkpoint);
    let mut bytes = std::fs::read(&database).expect("database");
    let page = 4096;
    assert!(bytes.len() >= 3 * page, "{} bytes", bytes.len());
    // The b-tree page headers of two tables: an invalid page type and cell count.
    for start in [page, 2 * page] {
        bytes[start] ^= 0x5a;
        bytes[start + 3] ^= 0xa5;
    }
    std::fs::write(&database, &bytes).expect("corrupted");
    let out = dir.path().join("out");
    let refused = export(&root, &out);
    let message = text(&refused.stderr);
    assert!(!refused.status.success(), "{message}");
    assert!(message.contains("review.sqlite"), "{message}");
    assert!(!out.exists());
    let listed = keyslice(&["workspace", "list", s(&root)]);
    assert!(!listed.status.success(), "{}", text(&listed.stdout));
}

#[test]
fn what_a_killed_export_left_is_cleaned_and_an_export_moved_aside_is_put_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let workspace = accepted_workspace(dir.path());
    let out = dir.path().join("train");
    let exported = export(&workspace.root, &out);
    assert!(exported.status.success(), "{}", text(&exported.stderr));
    let first = files(&out);

    // Killed after moving the earlier export aside, before putting the new one in place.
    let aside = dir.path().join(".train.previous-4242");
    std::fs::rename(&out, &aside).expect("moved aside");
    let partial = dir.path().join(".train.partial-4242");
    std::fs::create_dir_all(partial.join("frames")).expect("partial");
    std::fs::write(partial.join("train.jsonl"), b"{\"half").expect("half a file");
    std::fs::create_dir_all(dir.path().join(".train.partial-77")).expect("another");

    let exported = export(&workspace.root, &out);
    assert!(exported.status.success(), "{}", text(&exported.stderr));
    assert_eq!(files(&out), first);
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .expect("listing")
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().to_string())
        .filter(|name| name.contains(".partial-") || name.contains(".previous-"))
        .collect();
    assert_eq!(left, Vec::<String>::new());
}

/// Makes every file and folder under `root` read-only (or writable again), as a user
/// protecting a finished workspace does.
#[cfg(unix)]
fn set_read_only(root: &Path, read_only: bool) {
    use std::os::unix::fs::PermissionsExt as _;
    let mut paths = common::files_below(root);
    paths.push(root.to_path_buf());
    for path in paths {
        let mode = if path.is_dir() {
            if read_only { 0o555 } else { 0o755 }
        } else if read_only {
            0o444
        } else {
            0o644
        };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("mode");
    }
}

#[cfg(unix)]
#[test]
fn a_read_only_workspace_is_browsed_and_exported_never_changed() {
    let folder = tempfile::tempdir().expect("temp dir");
    let workspace = accepted_workspace(folder.path());
    let root = workspace.root.clone();
    // The export secret is made while it may be: a read-only workspace keeps its pseudonyms.
    let first = export(&root, &folder.path().join("first"));
    assert!(first.status.success(), "{}", text(&first.stderr));
    set_read_only(&root, true);
    let before = files(&root);

    let listed = keyslice(&["workspace", "list", s(&root)]);
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let exported = export(&root, &folder.path().join("second"));
    assert!(exported.status.success(), "{}", text(&exported.stderr));
    assert_eq!(
        files(&folder.path().join("first")),
        files(&folder.path().join("second")),
        "the same export"
    );
    // A change is refused, saying what is true and what to do.
    let case_id = &workspace.manifest.cases[0].case_id;
    let mut review =
        CaseReview::open(&workspace.database_path(), case_id, "Ana", None).expect("opened to read");
    assert_eq!(review.status(), ReviewStatus::Done);
    let error = review
        .set_status(ReviewStatus::InReview)
        .expect_err("refused");
    assert!(
        error.to_string().contains("the workspace is read-only"),
        "{error}"
    );
    assert!(!error.hint().contains("backup"), "{}", error.hint());
    assert_eq!(files(&root), before, "nothing in it changed");
    set_read_only(&root, false);
}

#[cfg(unix)]
#[test]
fn links_in_a_workspaces_place_are_refused_never_written_through() {
    let folder = tempfile::tempdir().expect("temp dir");
    let workspace = accepted_workspace(folder.path());
    let root = workspace.root.clone();
    let outside = folder.path().join("outside");
    std::fs::create_dir(&outside).expect("made");
    let victim = outside.join("victim.txt");
    std::fs::write(&victim, "someone else's file\n").expect("written");

    // predictions.jsonl as a link: never appended through.
    let predictions = root.join(PREDICTIONS_FILE);
    std::fs::remove_file(&predictions).expect("removed");
    std::os::unix::fs::symlink(&victim, &predictions).expect("linked");
    let prediction = common::saved_prediction("other", "Liver: no tumor. Key slice: 3", None);
    let error = workspace
        .append_prediction(&prediction)
        .expect_err("refused");
    assert!(error.to_string().contains("is a symbolic link"), "{error}");

    // review.sqlite as a link: never turned into a database, even by a listing.
    let database = root.join(DATABASE_FILE);
    std::fs::rename(&database, outside.join("review.sqlite")).expect("moved");
    for journal in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{journal}", database.display()));
    }
    std::os::unix::fs::symlink(&victim, &database).expect("linked");
    let listed = keyslice(&["workspace", "list", s(&root)]);
    assert!(!listed.status.success());
    assert!(
        text(&listed.stderr).contains("is a symbolic link"),
        "{}",
        text(&listed.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&victim).expect("kept"),
        "someone else's file\n"
    );

    // The lock file and an export folder as links: refused, nothing written where they point.
    std::fs::remove_file(&database).expect("removed");
    std::fs::rename(outside.join("review.sqlite"), &database).expect("back");
    std::fs::remove_file(&predictions).expect("removed");
    let lock = root.join(keyslice::review::workspace::LOCK_FILE);
    let _ = std::fs::remove_file(&lock);
    std::os::unix::fs::symlink(&victim, &lock).expect("linked");
    let error =
        keyslice::review::workspace::WorkspaceLock::acquire(&root, || {}).expect_err("refused");
    assert!(error.to_string().contains("is a symbolic link"), "{error}");
    std::fs::remove_file(&lock).expect("removed");
    let target = outside.join("export-target");
    std::fs::create_dir(&target).expect("made");
    let out = folder.path().join("out-link");
    std::os::unix::fs::symlink(&target, &out).expect("linked");
    let exported = export(&root, &out);
    assert!(!exported.status.success());
    assert!(
        text(&exported.stderr).contains("is a symbolic link"),
        "{}",
        text(&exported.stderr)
    );
    assert_eq!(std::fs::read_dir(&target).expect("listed").count(), 0);
    assert_eq!(
        std::fs::read_dir(&outside).expect("listed").count(),
        2,
        "no lock beside it"
    );
}
