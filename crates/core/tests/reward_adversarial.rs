//! The training reward against answers a policy would learn if the reward forgave them: every
//! such answer scores below every well-formed answer that gets tumor presence right on the
//! same case, and empty or garbage text earns at most 0.1. The table of scores is
//! `docs/reward.md` (`UPDATE_DOCS=1 cargo test -p keyslice-core --test reward_adversarial` rewrites it).

use std::fmt::Write as _;
use std::path::Path;

use keyslice_core::scoring::answer::MALFORMED_CAP;
use keyslice_core::scoring::{Reference, RewardWeights, SizeTolerance, TruthRecord, score_answer};

/// A liver tumor case: one lesion in segment 5 on slices 98–106 (largest on 102), on
/// 256 × 256 slices.
const TUMOR_TRUTH: &str = r#"{"case_id":"tumor","report":"FINDINGS:\nLiver lesions:\nLiver lesion 1:\nLocation: hepatic segment 5.\nSize: 1.0 x 0.9 cm.\nEnhancement relative to liver: Hypoattenuating.\nPancreas: no tumor.\nLeft kidney: no tumor.\nRight kidney: no tumor.\nIMPRESSION:\nLiver tumor present.\nNo tumor in the pancreas, left kidney, right kidney.\nKey slice: 102.\nBox on key slice: columns 95-99, rows 93-97.",
"lesion_extents":[{"organ":"liver","first_slice":98,"last_slice":106,"largest_slice":102}],
"slice_size":[256,256],"slices":200}"#;

/// A case without a tumor: its truth report names no key slice, as a tumor-free answer need
/// not.
const CLEAN_TRUTH: &str = r#"{"case_id":"clean","report":"Liver: no tumor. Pancreas: no tumor. Left kidney: no tumor. Right kidney: no tumor.","slice_size":[256,256],"slices":200}"#;

const NEGATIVE: &str = "FINDINGS:\nLiver: no tumor.\nPancreas: no tumor.\nLeft kidney: no tumor.\nRight kidney: no tumor.\nIMPRESSION:\nNo tumor in the liver, pancreas, left kidney, right kidney.";

const PROMPT: &str = "These frames are axial slices of an abdominal CT, from inferior to superior. Frame f shows slice [0, 4, 8, 12, 16, 20, 24, 28][f]. Write a tumor report for the liver, pancreas and both kidneys (presence, size, location, attenuation of each lesion) and name the key evidence slice by its slice index.";

fn tumor_report(size: &str, segment: u8, key: u32) -> String {
    format!(
        "FINDINGS:\nLiver lesions:\nLiver lesion 1:\nLocation: hepatic segment {segment}.\nSize: {size}.\nEnhancement relative to liver: Hypoattenuating.\nPancreas: no tumor.\nLeft kidney: no tumor.\nRight kidney: no tumor.\nIMPRESSION:\nLiver tumor present.\nNo tumor in the pancreas, left kidney, right kidney.\nKey slice: {key}."
    )
}

/// Well-formed answers that get presence right, from the best to the barely right.
fn well_formed(tumor: bool) -> Vec<(&'static str, String)> {
    if tumor {
        vec![
            (
                "right, with its box",
                format!(
                    "{}\nBox on key slice: columns 95-99, rows 93-97.",
                    tumor_report("1.0 x 0.9 cm", 5, 102)
                ),
            ),
            (
                "right, with its box and the lesion's own evidence line",
                format!(
                    "{}\nBox on key slice: columns 95-99, rows 93-97.\n\
                     Liver lesion 1 evidence: slice 102, columns 95-99, rows 93-97, slices 99-105.",
                    tumor_report("1.0 x 0.9 cm", 5, 102)
                ),
            ),
            ("right, no box", tumor_report("1.0 x 0.9 cm", 5, 102)),
            (
                "narrative, right",
                "A 1 cm hypoattenuating lesion in hepatic segment 5. No pancreatic mass. \
                 Both kidneys are unremarkable without a mass. Key slice: 100."
                    .to_string(),
            ),
            (
                "presence right, size and place wrong, key slice off the lesion",
                tumor_report("4.0 x 3.0 cm", 2, 20),
            ),
        ]
    } else {
        vec![
            ("right", format!("{NEGATIVE}\nKey slice: 80.")),
            ("right, no key slice", NEGATIVE.to_string()),
            (
                "narrative, right",
                "The liver is unremarkable without focal lesion. No pancreatic mass. \
                 No renal mass on either side. Key slice: 95."
                    .to_string(),
            ),
        ]
    }
}

/// Answers a reward must not pay for.
fn adversarial(tumor: bool) -> Vec<(&'static str, String)> {
    let right = if tumor {
        tumor_report("1.0 x 0.9 cm", 5, 102)
    } else {
        format!("{NEGATIVE}\nKey slice: 80.")
    };
    let key = if tumor { 102 } else { 80 };
    let mut answers = vec![
        ("empty", String::new()),
        (
            "garbage",
            "qz7 vlx!! 00 -- lorem ipsum dolor ####### 3.14159 %%%% asdf".to_string(),
        ),
        (
            "a refusal",
            "I'm sorry, but I cannot provide a diagnosis from medical images. Please consult a \
             qualified radiologist."
                .to_string(),
        ),
        (
            "contradictory statements",
            format!(
                "{right}\nThe liver shows no tumor. There is a 1.0 cm hypoattenuating liver \
                 lesion in segment 5."
            ),
        ),
        (
            "several key slices",
            format!("{right}\nKey slice: 40.\nKey slice: 140."),
        ),
        (
            "a box covering the whole slice",
            format!("{right}\nBox on key slice: columns 0-255, rows 0-255."),
        ),
        ("the prompt echoed", PROMPT.to_string()),
        (
            "the prompt echoed, then an answer",
            format!("{PROMPT}\n{PROMPT}\n{right}"),
        ),
        (
            "a very long answer",
            format!(
                "{right}\n{}",
                "The study was reviewed carefully in all planes and windows. ".repeat(80)
            ),
        ),
        (
            "another language",
            format!(
                "Leber: kein Tumor. Bauchspeicheldrüse: kein Tumor. Linke Niere: kein Tumor. \
                 Rechte Niere: kein Tumor. Schlüsselschicht: {key}."
            ),
        ),
        (
            "another script",
            format!(
                "肝脏：未见肿瘤。胰腺：未见肿瘤。左肾：未见肿瘤。右肾：未见肿瘤。关键切片：{key}。"
            ),
        ),
        (
            "a lesion slice range past the end of the volume",
            format!("{right}\nLesion slices: 0-9999."),
        ),
    ];
    if tumor {
        answers.extend(unreadable_evidence(&right));
    } else {
        // Evidence of a lesion the answer does not claim.
        answers.extend([
            (
                "a tumor-free answer with a box",
                format!("{right}\nBox on key slice: columns 95-99, rows 93-97."),
            ),
            (
                "a tumor-free answer with a lesion's evidence line",
                format!("{right}\nLiver lesion 1 evidence: slice 80, columns 95-99, rows 93-97."),
            ),
        ]);
    }
    answers
}

/// Evidence the verifier cannot read, in an answer that is otherwise `right`: each would
/// skip the consistency term.
fn unreadable_evidence(right: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "a key slice outside the volume",
            tumor_report("1.0 x 0.9 cm", 5, 400),
        ),
        (
            "a lesion range that misses the key slice",
            format!("{right}\nLesion slices: 10-20."),
        ),
        (
            "a box outside the slice",
            format!("{right}\nBox on key slice: columns 250-300, rows 93-97."),
        ),
        (
            "a box with its corners out of order",
            format!("{right}\nBox on key slice: columns 99-95, rows 93-97."),
        ),
        (
            "a lesion's own evidence outside the volume",
            format!("{right}\nLiver lesion 1 evidence: slice 400, columns 95-99, rows 93-97."),
        ),
        (
            "a lesion's own box over the whole slice",
            format!("{right}\nLiver lesion 1 evidence: slice 102, columns 0-255, rows 0-255."),
        ),
        (
            "a lesion's own range that misses its slice",
            format!("{right}\nLiver lesion 1 evidence: slice 102, slices 10-20."),
        ),
        (
            "a lesion's evidence in an organ called tumor-free",
            format!("{right}\nPancreatic lesion 1 evidence: slice 102, columns 95-99, rows 93-97."),
        ),
        (
            "fifty lesions in the liver",
            (1..=50).fold(String::new(), |mut text, k| {
                let _ = writeln!(text, "Liver lesion {k}: Size: 1.0 x 0.9 cm.");
                text
            }) + "Pancreas: no tumor.\nLeft kidney: no tumor.\nRight kidney: no tumor.\nKey slice: 102.",
        ),
    ]
}

/// Hedging: "possible tumor" in every organ, with a key slice.
fn hedged(key: u32) -> String {
    format!(
        "Liver: possible tumor. Pancreas: possible tumor. Left kidney: possible tumor. \
         Right kidney: possible tumor. Key slice: {key}."
    )
}

fn score(answer: &str, truth: &TruthRecord) -> (f64, Vec<String>) {
    let findings = truth.truth_findings().expect("a truth with findings");
    let reference = Reference {
        findings: &findings,
        lesion_extents: &truth.lesion_extents,
    };
    let scored = score_answer(
        answer,
        None,
        &reference,
        &RewardWeights::default(),
        SizeTolerance::default(),
        truth.volume_size(),
    );
    (
        scored.rewards.total,
        scored.faults.iter().map(ToString::to_string).collect(),
    )
}

#[test]
fn no_adversarial_answer_scores_like_a_right_one() {
    let mut table = String::from(
        "| case | answer | kind | reward | why it is not well-formed |\n|---|---|---|---|---|\n",
    );
    for (case, truth_text, tumor) in [
        ("tumor", TUMOR_TRUTH, true),
        ("no tumor", CLEAN_TRUTH, false),
    ] {
        let truth = TruthRecord::from_json(truth_text).expect("the suite's truth reads");
        let mut lowest_right = f64::INFINITY;
        for (name, answer) in well_formed(tumor) {
            let (total, faults) = score(&answer, &truth);
            assert!(
                faults.is_empty(),
                "{case}/{name} is well-formed: {faults:?}"
            );
            lowest_right = lowest_right.min(total);
            let _ = writeln!(table, "| {case} | {name} | well-formed | {total:.3} | |");
        }
        let hallucinated = if tumor {
            format!("{NEGATIVE}\nKey slice: 60.")
        } else {
            tumor_report("2.0 x 1.5 cm", 7, 60)
        };
        let (hallucinated_total, faults) = score(&hallucinated, &truth);
        assert!(faults.is_empty(), "{faults:?}");
        let _ = writeln!(
            table,
            "| {case} | presence wrong (hallucinated or missed) | well-formed | {hallucinated_total:.3} | |"
        );
        if tumor {
            // The boilerplate tumor-free answer is well-formed: on a tumor case it is a miss.
            let (missed, faults) = score(NEGATIVE, &truth);
            assert!(faults.is_empty(), "{faults:?}");
            assert!(missed < lowest_right, "{missed} against {lowest_right}");
            let _ = writeln!(
                table,
                "| {case} | boilerplate tumor-free, no key slice (a miss) | well-formed | {missed:.3} | |"
            );
        }
        let (hedge, faults) = score(&hedged(if tumor { 102 } else { 80 }), &truth);
        assert!(faults.is_empty(), "{faults:?}");
        assert!(
            hedge < lowest_right,
            "{case}: hedging in every organ scores {hedge} against {lowest_right} for the lowest right answer"
        );
        let _ = writeln!(
            table,
            "| {case} | possible tumor in every organ | well-formed, hedged | {hedge:.3} | |"
        );
        for (name, answer) in adversarial(tumor) {
            let (total, faults) = score(&answer, &truth);
            let _ = writeln!(
                table,
                "| {case} | {name} | adversarial | {total:.3} | {} |",
                faults.join("; ")
            );
            assert!(!faults.is_empty(), "{case}/{name} passed the form check");
            assert!(
                total < lowest_right,
                "{case}/{name} scores {total} against {lowest_right} for the lowest right answer"
            );
            assert!(total <= MALFORMED_CAP, "{case}/{name} scores {total}");
            if ["empty", "garbage", "a refusal"].contains(&name) {
                assert!(total <= 0.1, "{case}/{name} scores {total}");
            }
            assert!(
                total < hallucinated_total,
                "{case}/{name} ({total}) scores no lower than a well-formed wrong answer \
                 ({hallucinated_total}): a policy would learn to say nothing"
            );
        }
    }
    let page = format!(
        "# The training reward against adversarial answers\n\nWhat `keyslice score --per-case`, \
         verl's `compute_score` and the ms-swift plugin `keyslice` give each answer of the \
         adversarial suite (`crates/core/tests/reward_adversarial.rs`, which asserts the ordering and \
         rewrites this page with `UPDATE_DOCS=1`). The formula is in the manual, section \
         \"The training reward\".\n\n{table}"
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/reward.md");
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &page).expect("docs/reward.md written");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == page,
        "docs/reward.md differs from the suite's scores; rerun with UPDATE_DOCS=1 and review the diff"
    );
}

/// A truth's own report is the best answer there is: it scores 1.0 on its case, tumor or not.
#[test]
fn every_truth_report_scores_one_on_its_own_case() {
    for truth_text in [TUMOR_TRUTH, CLEAN_TRUTH] {
        let truth = TruthRecord::from_json(truth_text).expect("the suite's truth reads");
        let report = truth.report.clone().expect("a truth report");
        let (total, faults) = score(&report, &truth);
        assert!(faults.is_empty(), "{}: {faults:?}", truth.case_id);
        assert!((total - 1.0).abs() < 1e-12, "{}: {total}", truth.case_id);
    }
}
