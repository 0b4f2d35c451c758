//! The review database: edits are logged and survive, the log cannot be rewritten, undo is an
//! entry of its own, two handles on one file work together, a newer or damaged file is
//! refused with a message; and edits acknowledged by a process killed with SIGKILL at random
//! moments are all there afterwards, in a file that passes SQLite's integrity check.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keyslice_review::{Edit, ReviewStatus, ReviewStore, StoreError};
use serde_json::json;

fn edit(case: &str, field: &str, old: serde_json::Value, new: serde_json::Value) -> Edit {
    Edit {
        case_id: case.into(),
        field: field.into(),
        old_value: old,
        new_value: new,
        reviewer: "dr.test".into(),
    }
}

#[test]
fn edits_are_logged_in_order_with_state_and_undo() {
    let folder = tempfile::tempdir().expect("temp dir");
    let path = folder.path().join("review.sqlite");
    let mut store = ReviewStore::open(&path).expect("created");
    assert_eq!(
        store.case_state("A").expect("state").status,
        ReviewStatus::New
    );
    let first = store
        .record(&edit("A", "liver.tumor", json!("yes"), json!("no")))
        .expect("recorded");
    let second = store
        .record(&edit(
            "A",
            "liver.lesions.0.size",
            json!({"long_cm": 2.5}),
            json!({"long_cm": 3.1, "short_cm": 2.0}),
        ))
        .expect("recorded");
    assert!(second > first);
    let state = store.case_state("A").expect("state");
    assert_eq!(state.status, ReviewStatus::InReview);
    assert_eq!(state.reviewer.as_deref(), Some("dr.test"));
    let undo = store.undo(second, "dr.other").expect("undone");
    assert_eq!(undo.undoes, Some(second));
    assert_eq!(undo.old_value, json!({"long_cm": 3.1, "short_cm": 2.0}));
    assert_eq!(undo.new_value, json!({"long_cm": 2.5}));
    store
        .set_status("A", ReviewStatus::Done, "dr.test")
        .expect("accepted");
    store
        .record(&edit("B", "key_slice", json!(41), json!(44)))
        .expect("recorded");
    drop(store);

    // Everything is there after reopening, in order.
    let store = ReviewStore::open(&path).expect("reopened");
    let log = store.corrections(Some("A")).expect("log");
    let fields: Vec<&str> = log.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "liver.tumor",
            "liver.lesions.0.size",
            "liver.lesions.0.size",
            "status"
        ]
    );
    assert!(log.iter().all(|c| c.at.ends_with('Z') && c.at.len() == 24));
    assert_eq!(
        store.case_state("A").expect("state").status,
        ReviewStatus::Done
    );
    assert_eq!(store.corrections(None).expect("all").len(), 5);
    store.integrity_check().expect("intact");
}

#[test]
fn the_log_is_append_only_and_bad_edits_change_nothing() {
    let folder = tempfile::tempdir().expect("temp dir");
    let path = folder.path().join("review.sqlite");
    let mut store = ReviewStore::open(&path).expect("created");
    store
        .record(&edit("A", "note", json!(null), json!("check segment 7")))
        .expect("recorded");
    let Err(StoreError::Invalid(_)) = store.record(&edit("", "note", json!(null), json!("x")))
    else {
        panic!("an edit without a case is refused");
    };
    assert!(store.undo(999, "dr.test").is_err());
    drop(store);
    // Even with SQL, the log cannot be rewritten or shortened.
    let connection = rusqlite::Connection::open(&path).expect("raw handle");
    for sql in [
        "UPDATE corrections SET new_value = '\"x\"'",
        "DELETE FROM corrections",
    ] {
        let error = connection.execute(sql, []).expect_err("refused");
        assert!(error.to_string().contains("append-only"), "{error}");
    }
    drop(connection);
    let store = ReviewStore::open(&path).expect("reopened");
    assert_eq!(store.corrections(None).expect("log").len(), 1);
}

#[test]
fn two_handles_on_one_file_both_write() {
    let folder = tempfile::tempdir().expect("temp dir");
    let path = folder.path().join("review.sqlite");
    let mut one = ReviewStore::open(&path).expect("first");
    let mut two = ReviewStore::open(&path).expect("second");
    for n in 0..20 {
        one.record(&edit("A", "note", json!(null), json!(n)))
            .expect("one");
        two.record(&edit("B", "note", json!(null), json!(n)))
            .expect("two");
    }
    assert_eq!(one.corrections(Some("B")).expect("log").len(), 20);
    assert_eq!(two.corrections(Some("A")).expect("log").len(), 20);
}

#[test]
fn a_newer_or_damaged_database_is_refused_with_a_message() {
    let folder = tempfile::tempdir().expect("temp dir");
    let newer = folder.path().join("newer.sqlite");
    drop(ReviewStore::open(&newer).expect("created"));
    rusqlite::Connection::open(&newer)
        .and_then(|c| c.pragma_update(None, "user_version", 99))
        .expect("bumped");
    let Err(error) = ReviewStore::open(&newer) else {
        panic!("a newer schema is refused");
    };
    assert!(
        matches!(error, StoreError::Newer { found: 99, .. }),
        "{error}"
    );
    assert!(error.to_string().contains("newer Keyslice"), "{error}");

    let garbage = folder.path().join("garbage.sqlite");
    std::fs::write(&garbage, vec![0x5a; 8192]).expect("written");
    let Err(error) = ReviewStore::open(&garbage) else {
        panic!("garbage is refused");
    };
    assert!(matches!(error, StoreError::Damaged { .. }), "{error}");
    assert!(error.to_string().contains("garbage.sqlite"), "{error}");
    assert!(error.hint().contains("move it aside"));
    assert_eq!(
        std::fs::read(&garbage).expect("still there"),
        vec![0x5a; 8192],
        "a refused file is left as it was"
    );
}

/// The child half of the kill test: records edits to `KEYSLICE_KILL_DB` and prints
/// `ack N` after each one is committed, until killed.
#[test]
fn kill_test_child_writer() {
    let Some(path) = std::env::var_os("KEYSLICE_KILL_DB") else {
        return;
    };
    let mut store = ReviewStore::open(std::path::Path::new(&path)).expect("opened");
    let start: u64 = std::env::var("KEYSLICE_KILL_FROM")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(0);
    let mut stdout = std::io::stdout().lock();
    for n in start.. {
        store
            .record(&edit(
                &format!("case{}", n % 7),
                "note",
                json!(null),
                json!(n),
            ))
            .expect("recorded");
        writeln!(stdout, "ack {n}").expect("stdout");
        stdout.flush().expect("flushed");
    }
}

#[test]
fn acknowledged_edits_survive_sigkill_at_random_moments() {
    let folder = tempfile::tempdir().expect("temp dir");
    let path = folder.path().join("review.sqlite");
    let mut acknowledged: Vec<u64> = Vec::new();
    let mut next = 0u64;
    // A fixed pseudo-random sequence of kill delays, 5–80 ms.
    let mut state = 0x2545_f491_u64;
    for round in 0..25 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        let delay = Duration::from_millis(5 + (state >> 33) % 76);
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "kill_test_child_writer",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("KEYSLICE_KILL_DB", &path)
            .env("KEYSLICE_KILL_FROM", next.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("child starts");
        let stdout = child.stdout.take().expect("stdout");
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .filter_map(|line| line.strip_prefix("ack ").and_then(|n| n.parse().ok()))
                .collect::<Vec<u64>>()
        });
        // Kill after the random delay, whatever the child is doing then.
        let started = Instant::now();
        std::thread::sleep(delay);
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        let acks = reader.join().expect("reader");
        assert!(started.elapsed() < Duration::from_mins(1));
        if let Some(last) = acks.last() {
            next = last + 1;
        }
        acknowledged.extend(acks);
        let store = ReviewStore::open(&path)
            .unwrap_or_else(|error| panic!("round {round}: reopened: {error}"));
        store
            .integrity_check()
            .unwrap_or_else(|error| panic!("round {round}: {error}"));
        let logged: std::collections::HashSet<u64> = store
            .corrections(None)
            .expect("log")
            .iter()
            .filter_map(|c| c.new_value.as_u64())
            .collect();
        let missing: Vec<&u64> = acknowledged
            .iter()
            .filter(|n| !logged.contains(n))
            .collect();
        assert!(
            missing.is_empty(),
            "round {round}: acknowledged but lost: {missing:?}"
        );
    }
    assert!(
        acknowledged.len() > 25,
        "the child made too few edits to test anything: {}",
        acknowledged.len()
    );
}
