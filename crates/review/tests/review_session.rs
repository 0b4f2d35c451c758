//! Reviewing a case through the library the findings editor uses: corrections are checked,
//! committed to the workspace's SQLite file, shown from the log, undone and redone (accept
//! included), and all of it is there again after the database is reopened — the same as
//! after a crash, since nothing is kept only in memory.

use keyslice_core::findings::{Attenuation, LesionSize, Organ, TumorPresence, read_report};
use keyslice_review::{CaseReview, ReviewError, ReviewStatus, ReviewStore};
use serde_json::json;

const REPORT: &str = "Liver: a 3.0 x 2.5 cm hypoattenuating lesion in segment 7. \
                      Pancreas: no focal lesion. Kidneys: unremarkable.";

fn base() -> keyslice_core::findings::Findings {
    let mut findings = read_report(REPORT).findings.without_spans();
    findings.key_slice = Some(keyslice_core::findings::KeySlice {
        index: 40,
        z_mm: Some(100.0),
        sop_instance_uid: None,
        span: None,
    });
    findings
}

#[test]
fn corrections_undo_redo_and_accept_survive_reopening_the_database() {
    let folder = tempfile::tempdir().expect("temp dir");
    let database = folder.path().join("review.sqlite");
    let mut review =
        CaseReview::open(&database, "case-1", "dr. a", Some(base())).expect("review opens");
    assert_eq!(review.status(), ReviewStatus::New);
    assert_eq!(
        review.case().findings.organ(Organ::Liver).tumor,
        TumorPresence::Yes
    );

    // The reviewer measures the lesion, moves the key slice, changes attenuation, accepts.
    assert!(
        review
            .set(
                "liver.lesions.0.size",
                json!({"long_cm": 3.4, "short_cm": 2.2})
            )
            .expect("size saved")
    );
    review
        .set("key_slice", json!({"index": 44, "z_mm": 110.0}))
        .expect("key slice saved");
    review
        .set("liver.lesions.0.attenuation", json!("mixed"))
        .expect("attenuation saved");
    review.set_status(ReviewStatus::Done).expect("accepted");
    assert_eq!(review.status(), ReviewStatus::Done);
    // Setting a field to what it holds records nothing.
    assert!(
        !review
            .set("liver.lesions.0.attenuation", json!("mixed"))
            .expect("no-op")
    );
    assert_eq!(review.log().len(), 4);

    // Ctrl+Z twice: the accept, then the attenuation; Ctrl+Y once brings the attenuation back.
    assert_eq!(review.undo().expect("undo").as_deref(), Some("status"));
    assert_eq!(review.status(), ReviewStatus::InReview);
    assert_eq!(
        review.undo().expect("undo").as_deref(),
        Some("liver.lesions.0.attenuation")
    );
    let lesion = review.case().findings.organ(Organ::Liver).lesions[0].clone();
    assert_eq!(lesion.attenuation, Some(Attenuation::Hypo));
    assert_eq!(
        review.redo().expect("redo").as_deref(),
        Some("liver.lesions.0.attenuation")
    );
    drop(review);

    // Reopened (as after a crash): the same findings, the same undo/redo stacks.
    let review =
        CaseReview::open(&database, "case-1", "dr. a", Some(base())).expect("review reopens");
    let lesion = &review.case().findings.organ(Organ::Liver).lesions[0];
    assert_eq!(
        lesion.size,
        Some(LesionSize {
            long_cm: 3.4,
            short_cm: Some(2.2)
        })
    );
    assert_eq!(lesion.attenuation, Some(Attenuation::Mixed));
    assert_eq!(
        review.case().findings.key_slice.as_ref().map(|k| k.index),
        Some(44)
    );
    assert_eq!(review.status(), ReviewStatus::InReview);
    assert_eq!(
        review.case().changed,
        vec![
            "key_slice".to_string(),
            "liver.lesions.0.attenuation".to_string(),
            "liver.lesions.0.size".to_string(),
        ]
    );
    assert!(review.history().undo_target().is_some());
    assert!(review.history().redo_target().is_some());

    // The log holds every step with old and new values, signed and timed.
    let store = ReviewStore::open(&database).expect("store");
    store.integrity_check().expect("database intact");
    let log = store.corrections(Some("case-1")).expect("log");
    assert_eq!(log.len(), 7);
    assert_eq!(log[0].old_value, json!({"long_cm": 3.0, "short_cm": 2.5}));
    assert!(log.iter().all(|entry| entry.reviewer == "dr. a"));
    assert_eq!(log[4].undoes, Some(log[3].id));
}

#[test]
fn a_value_that_does_not_fit_is_refused_and_nothing_is_recorded() {
    let folder = tempfile::tempdir().expect("temp dir");
    let database = folder.path().join("review.sqlite");
    let mut review = CaseReview::open(&database, "case-2", "dr. b", Some(base())).expect("open");
    let error = review
        .set("liver.lesions.0.attenuation", json!("sparkly"))
        .expect_err("refused");
    assert!(matches!(error, ReviewError::Field(_)), "{error}");
    assert!(error.to_string().contains("liver.lesions.0.attenuation"));
    let error = review
        .set("spleen.tumor", json!("yes"))
        .expect_err("refused");
    assert!(error.to_string().contains("spleen.tumor"), "{error}");
    assert!(review.log().is_empty());
    assert_eq!(review.status(), ReviewStatus::New);
}

#[test]
fn removing_a_lesion_and_undoing_puts_it_back_in_place() {
    let folder = tempfile::tempdir().expect("temp dir");
    let database = folder.path().join("review.sqlite");
    let mut review = CaseReview::open(&database, "case-3", "dr. c", Some(base())).expect("open");
    review
        .set("liver.lesions.1", json!({"attenuation": "hyper"}))
        .expect("second lesion added");
    review
        .set("liver.lesions.0", json!(null))
        .expect("first removed");
    let lesions = &review.case().findings.organ(Organ::Liver).lesions;
    assert_eq!(lesions.len(), 1);
    assert_eq!(lesions[0].attenuation, Some(Attenuation::Hyper));
    review.undo().expect("undo removal");
    let lesions = &review.case().findings.organ(Organ::Liver).lesions;
    assert_eq!(lesions.len(), 2);
    assert_eq!(lesions[0].attenuation, Some(Attenuation::Hypo));
    assert_eq!(lesions[1].attenuation, Some(Attenuation::Hyper));
}

#[test]
fn a_fresh_analysis_keeps_the_reviewers_corrections_on_top() {
    let folder = tempfile::tempdir().expect("temp dir");
    let database = folder.path().join("review.sqlite");
    let mut review = CaseReview::open(&database, "case-4", "dr. d", Some(base())).expect("open");
    review
        .set("pancreas.tumor", json!("uncertain"))
        .expect("saved");
    review
        .set("note", json!("check the pancreatic duct"))
        .expect("note");
    // The model is run again and now says something else about the liver.
    let mut fresh = read_report("Liver: no focal lesion.")
        .findings
        .without_spans();
    fresh.key_slice = None;
    review.set_base(Some(fresh));
    assert_eq!(
        review.case().findings.organ(Organ::Pancreas).tumor,
        TumorPresence::Uncertain
    );
    assert_eq!(
        review.case().findings.organ(Organ::Liver).tumor,
        TumorPresence::No
    );
    assert_eq!(review.case().note, "check the pancreatic duct");
}

/// A ball of `radius` voxels at `centre` on a 24³ grid, as the mask editor leaves it.
fn ball_mask(centre: [usize; 3], radius: f64) -> serde_json::Value {
    use keyslice_core::volume::mask::{Brush, LesionMask, paint};
    let dims = [24, 24, 24];
    let mut mask = vec![0u8; 24 * 24 * 24];
    paint(&mut mask, dims, [1.0; 3], centre, radius, Brush::Ball, true).expect("painted");
    serde_json::to_value(LesionMask::from_dense(&mask, dims)).expect("json")
}

#[test]
fn mask_strokes_are_corrections_undone_redone_and_kept_across_a_restart_on_their_case_only() {
    use keyslice_review::reviewed::{Field, LesionPart};
    let folder = tempfile::tempdir().expect("temp dir");
    let database = folder.path().join("review.sqlite");
    let mask_of = |review: &CaseReview, lesion: usize| {
        review
            .case()
            .masks
            .get(&(Organ::Liver, lesion))
            .map(keyslice_core::volume::mask::LesionMask::voxels)
    };
    let field = Field::LesionPart(Organ::Liver, 0, LesionPart::Mask);
    let mut review =
        CaseReview::open(&database, "case-1", "dr. a", Some(base())).expect("review opens");
    // Grow, then erase: two strokes, two corrections.
    let grown = ball_mask([12, 12, 12], 5.0);
    let erased = ball_mask([12, 12, 12], 3.0);
    assert!(review.set_field(field, grown).expect("stroke saved"));
    assert!(review.set_field(field, erased).expect("stroke saved"));
    assert_eq!(mask_of(&review, 0), Some(123));
    assert_eq!(review.log().len(), 2);
    assert_eq!(review.log()[1].field, "liver.lesions.0.mask");
    // Undo gives the grown mask back; redo the erased one.
    review.undo().expect("undo");
    assert_eq!(mask_of(&review, 0), Some(515));
    review.redo().expect("redo");
    review.undo().expect("undo");
    drop(review);

    // After a restart (or a crash), the mask is what the last stroke in effect left.
    let mut review = CaseReview::open(&database, "case-1", "dr. a", Some(base())).expect("reopens");
    assert_eq!(mask_of(&review, 0), Some(515));
    assert!(!review.history().redoable.is_empty());
    // Another case of the same workspace has no mask.
    let other = CaseReview::open(&database, "case-2", "dr. a", Some(base())).expect("opens");
    assert!(other.case().masks.is_empty());

    // A mask for a lesion that does not exist, or runs that do not cover their grid, are
    // refused and nothing is recorded.
    let before = review.log().len();
    let error = review
        .set_field(
            Field::LesionPart(Organ::Liver, 3, LesionPart::Mask),
            ball_mask([5, 5, 5], 2.0),
        )
        .expect_err("no lesion 4");
    assert!(error.to_string().contains("no lesion 4"), "{error}");
    let error = review
        .set_field(field, json!({"dims": [24, 24, 24], "runs": [5, 3]}))
        .expect_err("short runs");
    assert!(error.to_string().contains("cover 8 voxels"), "{error}");
    assert_eq!(review.log().len(), before);

    // A second lesion with its mask; removing the first moves the second's mask with it,
    // and "no tumor" takes every mask of the organ.
    review
        .set(
            "liver.lesions.1",
            json!({"size": {"long_cm": 1.0, "short_cm": null}}),
        )
        .expect("lesion added");
    review
        .set_field(
            Field::LesionPart(Organ::Liver, 1, LesionPart::Mask),
            ball_mask([4, 4, 4], 1.0),
        )
        .expect("stroke saved");
    review.set("liver.lesions.0", json!(null)).expect("removed");
    assert_eq!(mask_of(&review, 0), Some(7));
    assert_eq!(mask_of(&review, 1), None);
    review.undo().expect("undo the removal");
    assert_eq!(mask_of(&review, 0), Some(515));
    assert_eq!(mask_of(&review, 1), Some(7));
    review.set("liver.tumor", json!("no")).expect("no tumor");
    assert!(review.case().masks.is_empty());
    review.undo().expect("undo");
    assert_eq!(review.case().masks.len(), 2);
}

/// The model's lesion masks are each lesion's mask until the reviewer changes it: shown
/// from the start (not a change), the first stroke starts from and replaces it, undo brings
/// it back, clearing takes it away; a model mask for a lesion the findings lack, or whose
/// runs do not cover their grid, is left out.
#[test]
fn the_models_lesion_masks_are_the_starting_masks_a_reviewer_corrects() {
    use keyslice_core::volume::mask::LesionMask;
    use keyslice_review::reviewed::{Field, LesionPart};
    let folder = tempfile::tempdir().expect("temp dir");
    let database = folder.path().join("review.sqlite");
    let model_mask: LesionMask =
        serde_json::from_value(ball_mask([12, 12, 12], 5.0)).expect("a mask");
    let mut model_masks = std::collections::BTreeMap::new();
    model_masks.insert((Organ::Liver, 0), model_mask.clone());
    model_masks.insert((Organ::Liver, 4), model_mask.clone());
    // A grid no CT has (from a damaged or hostile prediction file): left out, no overflow.
    model_masks.insert(
        (Organ::KidneyLeft, 0),
        LesionMask {
            dims: [usize::MAX, usize::MAX, 2],
            runs: vec![u32::MAX, u32::MAX],
        },
    );
    model_masks.insert(
        (Organ::Pancreas, 0),
        LesionMask {
            dims: [24, 24, 24],
            runs: vec![5, 3],
        },
    );
    let mut review =
        CaseReview::open(&database, "case-1", "dr. a", Some(base())).expect("review opens");
    review.set_base_masks(model_masks);
    let voxels = |review: &CaseReview| {
        review
            .case()
            .masks
            .get(&(Organ::Liver, 0))
            .map(LesionMask::voxels)
    };
    assert_eq!(voxels(&review), Some(515));
    assert_eq!(review.case().masks.len(), 1, "only the liver's lesion 1");
    assert!(
        review.case().changed.is_empty(),
        "{:?}",
        review.case().changed
    );
    // An erase stroke on the model's mask is the reviewer's correction.
    let field = Field::LesionPart(Organ::Liver, 0, LesionPart::Mask);
    assert!(
        review
            .set_field(field, ball_mask([12, 12, 12], 3.0))
            .expect("stroke saved")
    );
    assert_eq!(voxels(&review), Some(123));
    assert_eq!(
        review.case().changed,
        vec!["liver.lesions.0.mask".to_string()]
    );
    let huge = review
        .set_field(
            field,
            json!({"dims": [u64::MAX, u64::MAX, 2], "runs": [4_294_967_295_u32]}),
        )
        .expect_err("too large");
    assert!(huge.to_string().contains("too large"), "{huge}");
    review.undo().expect("undo");
    assert_eq!(voxels(&review), Some(515), "the model's mask again");
    review.redo().expect("redo");
    review
        .set_field(field, serde_json::Value::Null)
        .expect("cleared");
    assert_eq!(voxels(&review), None);
    // After a restart on the same prediction: the reviewer's last word, not the model's.
    drop(review);
    let mut review = CaseReview::open(&database, "case-1", "dr. a", Some(base())).expect("reopens");
    let mut model_masks = std::collections::BTreeMap::new();
    model_masks.insert((Organ::Liver, 0), model_mask);
    review.set_base_masks(model_masks);
    assert_eq!(voxels(&review), None);
}
