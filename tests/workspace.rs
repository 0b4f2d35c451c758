//! The demo workspace: made once (phantoms + keyslice-tiny predictions in a review
//! workspace), reused after, a torn predictions line repaired by the next start, an
//! unwritable place named; and a workspace case opens with its saved prediction.

use keyslice::app::open::{Source, load};
use keyslice::app::workspace::{DEMO_CASES, prepare_demo};
use keyslice::review::workspace::{PREDICTIONS_FILE, Workspace};

#[test]
fn the_demo_workspace_is_made_once_then_reused_and_repaired() {
    let folder = tempfile::tempdir().expect("temp dir");
    let demo = folder.path().join("demo");
    let mut steps: Vec<(String, f32)> = Vec::new();
    let workspace = prepare_demo(&demo, &mut |text, fraction| {
        steps.push((text.to_string(), fraction));
    })
    .expect("demo prepared");
    assert_eq!(workspace.manifest.cases.len(), DEMO_CASES as usize);
    let generating = steps
        .iter()
        .filter(|(t, _)| t.starts_with("generating"))
        .count();
    let analysing = steps
        .iter()
        .filter(|(t, _)| t.starts_with("analysing"))
        .count();
    assert_eq!((generating, analysing), (3, 3), "{steps:?}");
    assert!(
        steps.windows(2).all(|pair| pair[0].1 <= pair[1].1),
        "progress only grows: {steps:?}"
    );
    assert_eq!(steps.last().map(|step| step.1), Some(1.0));
    let predictions = workspace.predictions().expect("readable");
    assert!(predictions.damaged.is_empty());
    for case in &workspace.manifest.cases {
        assert!(case.volume.is_file());
        assert!(
            case.masks
                .as_ref()
                .is_some_and(|m| m.join("liver.nii.gz").is_file())
        );
        assert!(case.truth.as_ref().is_some_and(|t| t.is_file()));
        let prediction = predictions.get(&case.case_id).expect("every case analysed");
        assert_eq!(prediction.diagnoser.id, "keyslice-tiny");
        assert!(prediction.report.starts_with("FINDINGS:"));
    }
    assert!(demo.join("review.sqlite").is_file());
    // No temporary files left behind.
    let leftovers: Vec<_> = std::fs::read_dir(demo.join("cases"))
        .expect("listing")
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // A second start finds everything: no generating, no analysing.
    let mut again = Vec::new();
    let same = prepare_demo(&demo, &mut |text, _| again.push(text.to_string())).expect("reused");
    assert_eq!(same.manifest, workspace.manifest);
    assert_eq!(again, vec!["opening the worklist".to_string()]);

    // A start killed while writing the last prediction leaves a torn line: that case is
    // analysed again by the next start, the same way, and the torn line is reported.
    let path = demo.join(PREDICTIONS_FILE);
    let text = std::fs::read_to_string(&path).expect("predictions");
    let mut lines: Vec<&str> = text.lines().collect();
    let last = lines.pop().expect("three lines");
    let torn = format!("{}\n{}", lines.join("\n"), &last[..last.len() / 2]);
    std::fs::write(&path, torn).expect("torn");
    let mut repaired = Vec::new();
    let after =
        prepare_demo(&demo, &mut |text, _| repaired.push(text.to_string())).expect("repaired");
    assert_eq!(
        repaired.len(),
        2,
        "one analysis and the opening: {repaired:?}"
    );
    let reread = after.predictions().expect("readable");
    assert_eq!(reread.damaged.len(), 1, "{:?}", reread.damaged);
    for case in &workspace.manifest.cases {
        let (before, now) = (
            predictions.get(&case.case_id).expect("before"),
            reread.get(&case.case_id).expect("now"),
        );
        assert_eq!(
            (&now.report, &now.key_slice, &now.local_description),
            (&before.report, &before.key_slice, &before.local_description),
            "the same model gives the same analysis"
        );
    }

    // Opening the workspace (as a folder or through the demo source's resolution) gives the
    // lowest-consistency case with its prediction.
    let worklist = after.worklist(&reread).expect("worklist");
    let Ok((study, masks)) = load(&Source::Workspace(demo.clone())) else {
        panic!("the workspace opens");
    };
    let first = reread.get(&worklist[0].case_id).expect("first");
    assert_eq!(study.prediction.as_deref(), Some(first));
    assert!(
        study.title.starts_with(&worklist[0].case_id),
        "{}",
        study.title
    );
    assert!(masks.is_some_and(|m| !m.structures.is_empty()));
    let Ok((by_path, _)) = load(&Source::Path(demo.clone())) else {
        panic!("a workspace folder opens as a workspace");
    };
    assert_eq!(by_path.prediction.as_deref(), Some(first));
}

#[test]
fn an_unwritable_workspace_is_named_with_what_to_do() {
    let folder = tempfile::tempdir().expect("temp dir");
    let blocker = folder.path().join("demo");
    std::fs::write(&blocker, "a file where the workspace folder should be").expect("file");
    let Err((message, hint)) = prepare_demo(&blocker, &mut |_, _| {}) else {
        panic!("a file is not a workspace");
    };
    assert!(message.contains("demo"), "{message}");
    assert!(hint.contains("KEYSLICE_DATA_DIR"), "{hint}");
}

#[test]
fn an_empty_workspace_says_how_to_fill_it() {
    let folder = tempfile::tempdir().expect("temp dir");
    Workspace::create_or_extend(folder.path(), &[]).expect("empty workspace");
    let Err((message, hint)) = load(&Source::Workspace(folder.path().to_path_buf())) else {
        panic!("nothing to open");
    };
    assert!(message.contains("no cases"), "{message}");
    assert!(hint.contains("keyslice workspace create"), "{hint}");
}

#[test]
fn a_study_opened_by_path_gets_one_scratch_workspace_that_keeps_its_corrections() {
    use keyslice::app::workspace::scratch_workspace;
    use keyslice::phantom::{PhantomOptions, generate, write::write_case};
    use keyslice::review::CaseReview;
    let folder = tempfile::tempdir().expect("temp dir");
    let case = generate(
        7,
        1,
        PhantomOptions {
            matrix: 64,
            slice_mm: Some(5.0),
        },
    );
    let cases = folder.path().join("cases");
    std::fs::create_dir_all(&cases).expect("cases folder");
    let written = write_case(&cases, &case).expect("written");
    let ct = cases.join(&written.ct);
    let data = folder.path().join("data");

    // The CT of a case folder: a workspace of that one case, with its masks and truth.
    let root = scratch_workspace(&data, &ct).expect("scratch workspace");
    assert!(root.starts_with(data.join("scratch")));
    let workspace = Workspace::open(&root).expect("opens");
    assert_eq!(workspace.manifest.cases.len(), 1);
    let entry = &workspace.manifest.cases[0];
    assert_eq!(entry.volume, ct);
    assert!(entry.masks.as_ref().is_some_and(|m| m.is_dir()));
    let mut review = CaseReview::open(
        &workspace.database_path(),
        &entry.case_id,
        "dr. scratch",
        None,
    )
    .expect("review");
    review
        .set("note", serde_json::json!("seen in a single-file session"))
        .expect("saved");
    drop(review);

    // Opened again: the same workspace, the note still there; the folder opens its own one.
    assert_eq!(scratch_workspace(&data, &ct).expect("again"), root);
    let again = Workspace::open(&root).expect("opens");
    assert_eq!(again.manifest, workspace.manifest);
    let review = CaseReview::open(&again.database_path(), &entry.case_id, "dr. scratch", None)
        .expect("review");
    assert_eq!(review.case().note, "seen in a single-file session");
    let other = scratch_workspace(&data, &folder.path().join("cases")).expect("dataset folder");
    assert_ne!(other, root);

    // The app opens the path as that workspace's case, masks included.
    let (study, masks) = load(&Source::Workspace(root)).expect("loads");
    assert!(study.title.starts_with(&entry.case_id));
    assert!(masks.is_some_and(|m| !m.structures.is_empty()));

    // A path that is not a study gives no workspace (the viewer opens it alone and says so).
    assert!(scratch_workspace(&data, &folder.path().join("missing.nii.gz")).is_err());
}

#[test]
fn two_creates_at_once_keep_every_case() {
    use keyslice::phantom::{PhantomOptions, generate, write::write_case};
    let folder = tempfile::tempdir().expect("temp dir");
    let options = PhantomOptions {
        matrix: 24,
        slice_mm: Some(12.0),
    };
    let inputs: Vec<std::path::PathBuf> = (0..2)
        .map(|batch| {
            let cases = folder.path().join(format!("batch{batch}"));
            for index in 0..3 {
                write_case(&cases, &generate(11, batch * 3 + index, options)).expect("written");
            }
            cases
        })
        .collect();
    for round in 0..4 {
        let root = folder.path().join(format!("ws{round}"));
        std::thread::scope(|scope| {
            for input in &inputs {
                let root = &root;
                scope.spawn(move || {
                    Workspace::create_or_extend(root, std::slice::from_ref(input))
                        .expect("created");
                });
            }
        });
        let workspace = Workspace::open(&root).expect("opens");
        assert_eq!(
            workspace.manifest.cases.len(),
            6,
            "round {round}: no case lost"
        );
    }
}
