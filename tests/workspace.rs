//! The demo workspace: made once (phantoms + keyslice-tiny predictions), reused after, a
//! damaged prediction made again, an unwritable place named; and a case folder opens with its
//! saved analysis.

use keyslice::app::open::{Source, load};
use keyslice::app::workspace::{DEMO_CASES, PREDICTION_FILE, prepare_demo, read_prediction};
use keyslice::infer::Prediction;

#[test]
fn the_demo_workspace_is_made_once_then_reused_and_repaired() {
    let folder = tempfile::tempdir().expect("temp dir");
    let demo = folder.path().join("demo");
    let mut steps: Vec<(String, f32)> = Vec::new();
    let cases = prepare_demo(&demo, &mut |text, fraction| {
        steps.push((text.to_string(), fraction));
    })
    .expect("demo prepared");
    assert_eq!(cases.len(), DEMO_CASES as usize);
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
    let mut predictions = Vec::new();
    for case in &cases {
        assert!(case.join("ct.nii.gz").is_file());
        assert!(case.join("segmentations").join("liver.nii.gz").is_file());
        assert!(case.join("truth.json").is_file());
        let prediction: Prediction = read_prediction(case)
            .expect("readable")
            .expect("every case analysed");
        assert_eq!(
            Some(prediction.case_id.as_str()),
            case.file_name().and_then(|name| name.to_str())
        );
        assert_eq!(prediction.diagnoser.id, "keyslice-tiny");
        assert!(prediction.report.starts_with("FINDINGS:"));
        predictions.push(prediction);
    }
    // No temporary files left behind.
    let leftovers: Vec<_> = std::fs::read_dir(&demo)
        .expect("listing")
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // A second start finds everything: no generating, no analysing.
    let mut again = Vec::new();
    let same = prepare_demo(&demo, &mut |text, _| again.push(text.to_string())).expect("reused");
    assert_eq!(same, cases);
    assert_eq!(again, vec!["opening the first demo case".to_string()]);

    // A damaged prediction is named when the case is opened, and made again by the next start.
    let damaged = cases[1].join(PREDICTION_FILE);
    std::fs::write(&damaged, "{ \"case_id\": ").expect("damaged");
    let Ok((study, _)) = load(&Source::Path(cases[1].clone())) else {
        panic!("the case opens without its analysis");
    };
    assert!(study.prediction.is_none());
    assert!(
        study
            .warnings
            .iter()
            .any(|w| w.contains("saved analysis not shown") && w.contains(PREDICTION_FILE)),
        "{:?}",
        study.warnings
    );
    let mut repaired = Vec::new();
    prepare_demo(&demo, &mut |text, _| repaired.push(text.to_string())).expect("repaired");
    assert_eq!(
        repaired.len(),
        2,
        "one analysis and the opening: {repaired:?}"
    );
    let remade = read_prediction(&cases[1])
        .expect("readable")
        .expect("analysed again");
    assert_eq!(
        (&remade.report, &remade.key_slice, &remade.local_description),
        (
            &predictions[1].report,
            &predictions[1].key_slice,
            &predictions[1].local_description
        ),
        "the same model gives the same analysis"
    );

    // Opening a case folder (or its CT) brings its saved analysis.
    for source in [cases[0].clone(), cases[0].join("ct.nii.gz")] {
        let Ok((study, _)) = load(&Source::Path(source)) else {
            panic!("the case opens");
        };
        assert_eq!(study.prediction.as_deref(), Some(&predictions[0]));
    }
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
