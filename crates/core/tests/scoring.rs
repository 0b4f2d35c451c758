//! Reward terms and dataset metrics on small examples computed by hand.

#![expect(
    clippy::float_cmp,
    reason = "Every expected value below is an exact binary fraction computed by hand."
)]

use keyslice_core::findings::{
    Attenuation, Findings, Lesion, LesionSize, Location, Organ, OrganFindings, TumorPresence,
    read_report,
};
use keyslice_core::scoring::metrics::{MissingCase, ScoredCase, dataset_metrics};
use keyslice_core::scoring::{
    LesionExtent, Prediction, Reference, RewardWeights, SizeTolerance, Standing, attribute_score,
    consistency, consistency_with_views, existence_score, localization_score, rewards,
};

fn lesion(long: f64, segments: &[u8], attenuation: Attenuation) -> Lesion {
    Lesion {
        size: Some(LesionSize {
            long_cm: long,
            short_cm: None,
        }),
        location: Some(Location::LiverSegments(segments.to_vec())),
        attenuation: Some(attenuation),
        ..Lesion::default()
    }
}

fn with_liver(tumor: TumorPresence, lesions: Vec<Lesion>) -> Findings {
    let mut findings = Findings::default();
    for organ in Organ::ALL {
        findings.organ_mut(organ).tumor = TumorPresence::No;
    }
    *findings.organ_mut(Organ::Liver) = OrganFindings {
        tumor,
        lesions,
        span: None,
    };
    findings
}

#[test]
fn existence_scores_each_organ() {
    let truth = with_liver(TumorPresence::Yes, vec![]);
    // Liver right, pancreas wrong (says yes), kidneys: one not mentioned (= no, right), one
    // uncertain (½).
    let mut predicted = with_liver(TumorPresence::Yes, vec![]);
    predicted.organ_mut(Organ::Pancreas).tumor = TumorPresence::Yes;
    predicted.organ_mut(Organ::KidneyLeft).tumor = TumorPresence::NotMentioned;
    predicted.organ_mut(Organ::KidneyRight).tumor = TumorPresence::Uncertain;
    assert_eq!(
        existence_score(&predicted, &truth),
        (1.0 + 0.0 + 1.0 + 0.5) / 4.0
    );
}

#[test]
fn attributes_match_lesions_by_content_not_order() {
    let truth = with_liver(
        TumorPresence::Yes,
        vec![
            lesion(3.0, &[7], Attenuation::Hypo),
            lesion(1.0, &[2], Attenuation::Hyper),
        ],
    );
    // Same lesions in the other order; the second has the wrong attenuation.
    let predicted = with_liver(
        TumorPresence::Yes,
        vec![
            lesion(1.2, &[2, 3], Attenuation::Hypo),
            lesion(3.4, &[7, 8], Attenuation::Hypo),
        ],
    );
    let score = attribute_score(&predicted, &truth, SizeTolerance::default());
    // Pair (3.0/7/hypo ↔ 3.4/7-8/hypo): size |0.4| ≤ max(0.5, 0.6) ✓, location ✓, attenuation ✓ → 1.
    // Pair (1.0/2/hyper ↔ 1.2/2-3/hypo): size ✓, location ✓, attenuation ✗ → 2/3.
    assert!((score.score - f64::midpoint(1.0, 2.0 / 3.0)).abs() < 1e-12);
    assert_eq!(score.counts.size, (2, 2));
    assert_eq!(score.counts.attenuation, (1, 2));
}

#[test]
fn extra_predicted_lesions_dilute_the_attribute_score() {
    let truth = with_liver(
        TumorPresence::Yes,
        vec![lesion(2.0, &[6], Attenuation::Hypo)],
    );
    let predicted = with_liver(
        TumorPresence::Yes,
        vec![
            lesion(2.0, &[6], Attenuation::Hypo),
            lesion(5.0, &[1], Attenuation::Iso),
        ],
    );
    assert_eq!(
        attribute_score(&predicted, &truth, SizeTolerance::default()).score,
        0.5
    );
    // Neither side describes a lesion: nothing to get wrong.
    let empty = with_liver(TumorPresence::No, vec![]);
    assert_eq!(
        attribute_score(&empty, &empty, SizeTolerance::default()).score,
        1.0
    );
}

#[test]
fn localization_is_graded_by_distance_to_the_largest_slice() {
    let extents = [LesionExtent {
        organ: Organ::Liver,
        first_slice: 40,
        last_slice: 60,
        largest_slice: 50,
    }];
    assert_eq!(localization_score(Some(50), &extents), Some(1.0));
    assert_eq!(localization_score(Some(55), &extents), Some(0.75));
    assert_eq!(localization_score(Some(60), &extents), Some(0.5));
    assert_eq!(localization_score(Some(61), &extents), Some(0.0));
    assert_eq!(localization_score(None, &extents), Some(0.0));
    assert_eq!(localization_score(Some(50), &[]), None);
}

#[test]
fn consistency_breaks_down_by_attribute() {
    let report = read_report(
        "Liver lesion 1:\nLocation: hepatic segment 7.\nSize: 3.0 x 2.0 cm.\nEnhancement relative to liver: Hypoattenuating.\n",
    )
    .findings;
    // The slice shows a hyperattenuating 3.2 cm lesion in segment 7.
    let local =
        read_report("Slice 57: hyperattenuating lesion in the liver (hepatic segment 7), 3.2 cm.")
            .findings;
    let result = consistency(&report, &local, SizeTolerance::default());
    assert_eq!(result.organ, 1.0);
    assert_eq!(result.location, Some(1.0));
    assert_eq!(result.attenuation, Some(0.0));
    assert_eq!(result.size, Some(1.0));
    assert_eq!(result.score, 0.75);

    // The slice shows nothing, but the report claims a tumor: not grounded.
    let nothing = read_report("Slice 57: no lesion in the liver.").findings;
    let ungrounded = consistency(&report, &nothing, SizeTolerance::default());
    assert_eq!(ungrounded.score, 0.0);
    // The slice shows a pancreatic lesion the report does not mention.
    let elsewhere = read_report("Slice 57: lesion in the pancreas (pancreatic tail).").findings;
    assert_eq!(
        consistency(&report, &elsewhere, SizeTolerance::default()).organ,
        0.0
    );
}

#[test]
fn each_lesion_is_judged_on_its_own_evidence_and_one_without_any_is_unverified() {
    // Two real liver lesions, each with its own evidence, and a third made up without any.
    let report = read_report(
        "Liver lesion 1: Size: 3.0 x 2.0 cm. Enhancement relative to liver: Hypoattenuating.\nLiver lesion 2: Size: 1.0 x 1.0 cm. Enhancement relative to liver: Hyperattenuating.\nLiver lesion 3: Size: 2.0 x 1.5 cm. Enhancement relative to liver: Hypoattenuating.\n",
    )
    .findings;
    let first = read_report(
        "Slice 40: hypoattenuating lesion in the liver, 3.1 x 2.0 cm.\nInside the box: lesion.",
    )
    .findings;
    let second = read_report(
        "Slice 12: hyperattenuating lesion in the liver, 1.0 x 0.9 cm.\nInside the box: lesion.",
    )
    .findings;
    let views = [(Organ::Liver, 0, &first), (Organ::Liver, 1, &second)];
    // The answer's key slice is the first lesion's evidence: what it shows is that lesion.
    let result = consistency_with_views(&report, &first, &views, SizeTolerance::default());
    let standing = |lesion: usize| {
        result
            .findings
            .iter()
            .find(|finding| finding.lesion == Some(lesion))
            .map(|finding| (finding.standing, finding.score))
    };
    assert_eq!(standing(0), Some((Standing::Agrees, 1.0)));
    // The second view's lesion pairs with the second lesion alone, though the first lesion
    // would not fit it: each is read on its own.
    assert_eq!(standing(1), Some((Standing::Agrees, 1.0)));
    assert_eq!(standing(2), Some((Standing::Unverified, 0.0)));
    assert_eq!(result.score, 0.0);

    // A view whose box holds nothing denies its lesion, whatever the key slice shows.
    let clean =
        read_report("Slice 12: no lesion in the liver.\nInside the box: no lesion.").findings;
    let views = [(Organ::Liver, 0, &first), (Organ::Liver, 1, &clean)];
    let denied = consistency_with_views(&report, &first, &views, SizeTolerance::default());
    assert!(
        denied
            .findings
            .iter()
            .any(|f| f.lesion == Some(1) && f.standing == Standing::Denied)
    );

    // Without evidence per lesion the key slice speaks for every claim, as before.
    let two = read_report(
        "Liver lesion 1: Size: 3.0 x 2.0 cm. Enhancement relative to liver: Hypoattenuating.\n",
    )
    .findings;
    let plain = consistency_with_views(&two, &first, &[], SizeTolerance::default());
    assert_eq!(plain, consistency(&two, &first, SizeTolerance::default()));
    assert_eq!(plain.findings[0].standing, Standing::Agrees);
}

#[test]
fn total_is_the_weighted_mean_of_scored_terms() {
    let truth = with_liver(
        TumorPresence::Yes,
        vec![lesion(3.0, &[7], Attenuation::Hypo)],
    );
    let predicted = with_liver(
        TumorPresence::Yes,
        vec![lesion(3.0, &[7], Attenuation::Hypo)],
    );
    let extents = [LesionExtent {
        organ: Organ::Liver,
        first_slice: 10,
        last_slice: 20,
        largest_slice: 15,
    }];
    let prediction = Prediction {
        report: &predicted,
        key_slice: Some(20), // edge of the lesion: localization ½
        slice_box: None,
        local_description: None,
    };
    let reference = Reference {
        findings: &truth,
        lesion_extents: &extents,
    };
    let result = rewards(
        &prediction,
        &reference,
        &RewardWeights::default(),
        SizeTolerance::default(),
    );
    assert_eq!(result.format, 1.0);
    assert_eq!(result.existence, 1.0);
    assert_eq!(result.attributes, 1.0);
    assert_eq!(result.localization, Some(0.5));
    assert!(result.consistency.is_none());
    assert_eq!(result.total, 3.5 / 4.0);
    let weights = RewardWeights {
        localization: 3.0,
        ..RewardWeights::default()
    };
    let weighted = rewards(&prediction, &reference, &weights, SizeTolerance::default());
    assert_eq!(weighted.total, (3.0 + 1.5) / 6.0);
}

#[test]
fn dataset_metrics_on_four_cases() {
    // Truth: case a liver tumor; b none; c liver tumor; d left kidney tumor.
    let a_truth = with_liver(
        TumorPresence::Yes,
        vec![lesion(3.0, &[7], Attenuation::Hypo)],
    );
    let none = with_liver(TumorPresence::No, vec![]);
    let mut c_truth = with_liver(
        TumorPresence::Yes,
        vec![lesion(2.0, &[4], Attenuation::Hyper)],
    );
    c_truth.key_slice = Some(keyslice_core::findings::KeySlice {
        index: 30,
        z_mm: None,
        sop_instance_uid: None,
        span: None,
    });
    let mut d_truth = with_liver(TumorPresence::No, vec![]);
    d_truth.organ_mut(Organ::KidneyLeft).tumor = TumorPresence::Yes;
    // Predictions: a right (size and location right, attenuation wrong); b hallucinates a
    // pancreas tumor; c misses the liver tumor; d puts it in the right kidney.
    let a_pred = with_liver(
        TumorPresence::Yes,
        vec![lesion(3.2, &[7], Attenuation::Iso)],
    );
    let mut b_pred = with_liver(TumorPresence::No, vec![]);
    b_pred.organ_mut(Organ::Pancreas).tumor = TumorPresence::Yes;
    let c_pred = with_liver(TumorPresence::No, vec![]);
    let mut d_pred = with_liver(TumorPresence::No, vec![]);
    d_pred.organ_mut(Organ::KidneyRight).tumor = TumorPresence::Yes;
    let a_extents = [LesionExtent {
        organ: Organ::Liver,
        first_slice: 5,
        last_slice: 9,
        largest_slice: 7,
    }];
    let cases = [
        ScoredCase {
            case_id: "a",
            truth: &a_truth,
            extents: &a_extents,
            predicted: &a_pred,
            key_slice: Some(8),
            local: None,
        },
        ScoredCase {
            case_id: "b",
            truth: &none,
            extents: &[],
            predicted: &b_pred,
            key_slice: Some(3),
            local: None,
        },
        ScoredCase {
            case_id: "c",
            truth: &c_truth,
            extents: &[],
            predicted: &c_pred,
            key_slice: None,
            local: None,
        },
        ScoredCase {
            case_id: "d",
            truth: &d_truth,
            extents: &[],
            predicted: &d_pred,
            key_slice: Some(1),
            local: None,
        },
    ];
    let missing = vec![MissingCase {
        case_id: "e".into(),
        missing_from: "predictions".into(),
    }];
    let metrics = dataset_metrics(&cases, missing, SizeTolerance::default(), 2);
    let liver = metrics.organs["liver"];
    assert_eq!(liver.sensitivity, Some(0.5)); // a found, c missed
    assert_eq!(liver.specificity, Some(1.0)); // b, d
    assert_eq!(liver.balanced_accuracy, Some(0.75));
    let pancreas = metrics.organs["pancreas"];
    assert_eq!(pancreas.sensitivity, None); // no true pancreas tumor
    assert_eq!(pancreas.specificity, Some(0.75)); // b hallucinated
    assert_eq!(metrics.organs["kidney_left"].sensitivity, Some(0.0));
    // Either-side kidney: d counts as found.
    assert_eq!(metrics.organs["kidney"].sensitivity, Some(1.0));
    assert_eq!(metrics.organs["kidney"].specificity, Some(1.0));
    // Pooled over 16 (case, organ) pairs: 3 positives, 1 found; 13 negatives, 2 false alarms.
    assert_eq!(metrics.overall.sensitivity, Some(1.0 / 3.0));
    assert_eq!(metrics.overall.specificity, Some(11.0 / 13.0));
    assert_eq!(metrics.hallucination_rate, Some(2.0 / 13.0));
    // Attributes over true lesions a and c: size 1/2, location 1/2, attenuation 0/2.
    assert_eq!(metrics.attributes.size, Some(0.5));
    assert_eq!(metrics.attributes.location, Some(0.5));
    assert_eq!(metrics.attributes.attenuation, Some(0.0));
    // Key slice: a is a hit (8 in 5..9, error 1); c has a true key slice but no prediction:
    // a miss without error; d has neither extents nor a true key slice: not judged.
    assert_eq!(metrics.key_slice.mean_error_slices, Some(1.0));
    assert_eq!(metrics.key_slice.hit_rate, Some(0.5));
    assert_eq!(metrics.missing_cases.len(), 1);
    assert!(metrics.consistency_mean.is_none());
}
