//! A reader study over a workspace: each reader's schedule (counterbalanced arms, shuffled
//! cases, sequential pairs), reads recorded only in order and kept through a kill, the
//! washout between sessions, and the report's MRMC analysis of the arms on phantom cases.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{keyslice, text};
use keyslice::findings::Organ;
use keyslice::review::study::{
    Arm, Call, Design, Item, Next, Read, ReaderRules, Shows, Study, StudyDefinition,
};

fn definition(design: Design, cases: usize) -> StudyDefinition {
    common::study_definition(design, cases)
}

/// A read of `item` by `reader`, calling a tumor in the liver with `confidence`.
fn read_of(study: &Study, reader: &str, item: &Item, confidence: u8) -> Read {
    Read {
        reader: reader.into(),
        case: item.case.clone(),
        arm: study.definition.arms[item.arm].name.clone(),
        session: item.session,
        calls: BTreeMap::from([(
            Organ::Liver,
            Call {
                present: confidence >= 50,
                confidence,
            },
        )]),
        key_slice: None,
        active_ms: 20_000 + u64::from(confidence) * 100,
        ai: BTreeMap::new(),
        at: "2026-12-06T10:00:00.000Z".into(),
        simulated: false,
    }
}

const NOON: u64 = 1_796_558_400; // 2026-12-06T12:00:00Z

#[test]
fn schedules_are_counterbalanced_shuffled_and_complete() {
    let crossover = definition(Design::Crossover { washout_days: 28 }, 10);
    let ana = crossover.schedule("ana");
    let ben = crossover.schedule("ben");
    assert_eq!(ana.len(), 20);
    // Ana reads unaided first, Ben the evidence arm first.
    assert_eq!((ana[0].arm, ana[10].arm), (0, 1));
    assert_eq!((ben[0].arm, ben[10].arm), (1, 0));
    // Each session holds every case once, in an order of its own.
    for session in [&ana[..10], &ana[10..], &ben[..10]] {
        let mut cases: Vec<&str> = session.iter().map(|item| item.case.as_str()).collect();
        cases.sort_unstable();
        cases.dedup();
        assert_eq!(cases.len(), 10);
    }
    let order = |items: &[Item]| {
        items
            .iter()
            .map(|item| item.case.clone())
            .collect::<Vec<_>>()
    };
    assert_ne!(order(&ana[..10]), order(&ana[10..]));
    assert_ne!(order(&ana[..10]), order(&ben[10..]));
    // The same definition gives the same schedule: a study can be rerun and audited.
    assert_eq!(crossover.schedule("ana"), ana);

    let sequential = definition(Design::Sequential, 5).schedule("cho");
    assert_eq!(sequential.len(), 10);
    for pair in sequential.chunks(2) {
        assert_eq!((pair[0].arm, pair[1].arm), (0, 1));
        assert_eq!(pair[0].case, pair[1].case);
    }
}

#[test]
fn reads_are_recorded_in_order_only_survive_a_kill_and_wait_for_the_washout() {
    let folder = tempfile::tempdir().expect("temp dir");
    let dir = folder.path().join("trial");
    let study = Study::create(&dir, definition(Design::Crossover { washout_days: 28 }, 4))
        .expect("created");
    assert!(
        Study::create(&dir, definition(Design::Sequential, 4)).is_err(),
        "a study folder is never overwritten"
    );
    let mut escaped = definition(Design::Sequential, 4);
    escaped.readers[0] = "an\u{1b}[2Ja".into();
    let refused = Study::create(&folder.path().join("escaped"), escaped)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        refused.contains("control character") && !refused.contains('\u{1b}'),
        "{refused}"
    );
    let schedule = study.definition.schedule("ana");
    // Only the study's readers have reads: no other name ever becomes a path.
    let stranger = study
        .reads("../../evil")
        .expect_err("not a reader")
        .to_string();
    assert!(
        stranger.contains("not a reader of this study"),
        "{stranger}"
    );
    // Ahead of the next item: refused, with what is next.
    let ahead = study
        .record(&read_of(&study, "ana", &schedule[1], 80), NOON)
        .expect_err("ahead");
    assert!(
        ahead
            .to_string()
            .contains(&format!("next item is case {}", schedule[0].case)),
        "{ahead}"
    );
    study
        .record(&read_of(&study, "ana", &schedule[0], 80), NOON)
        .expect("recorded");
    // Back to the item already read: refused.
    let back = study
        .record(&read_of(&study, "ana", &schedule[0], 10), NOON)
        .expect_err("back");
    assert!(back.to_string().contains("never back or ahead"), "{back}");
    // A kill in the middle of writing the next read leaves a torn line: it is not a read,
    // the reader resumes at the same item, and the next read lands after it cleanly.
    let reads = dir.join("reads").join("ana.jsonl");
    let mut torn = std::fs::read(&reads).expect("reads");
    torn.extend_from_slice(br#"{"reader":"ana","case":"#);
    std::fs::write(&reads, torn).expect("torn");
    let reopened = Study::open(&dir).expect("opens");
    assert_eq!(reopened.reads("ana").expect("reads").len(), 1);
    let Next::Item { item, done, total } = reopened.next("ana", NOON).expect("next") else {
        panic!("an item is next");
    };
    assert_eq!((item, done, total), (schedule[1].clone(), 1, 8));
    for item in &schedule[1..4] {
        reopened
            .record(&read_of(&reopened, "ana", item, 60), NOON)
            .expect("recorded");
    }
    assert_eq!(reopened.reads("ana").expect("reads").len(), 4);
    // A line damaged on disk in the middle sends the reader back to that item alone.
    let text = std::fs::read_to_string(&reads).expect("reads");
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let second = lines
        .iter()
        .position(|line| line.contains(&format!("\"case\":\"{}\"", schedule[1].case)))
        .expect("the second read");
    let kept = lines[second].clone();
    lines[second] = "{damaged".into();
    std::fs::write(&reads, lines.join("\n") + "\n").expect("damaged");
    let Next::Item { item, done, .. } = reopened.next("ana", NOON).expect("next") else {
        panic!("an item is next");
    };
    assert_eq!((item, done), (schedule[1].clone(), 3));
    lines[second] = kept;
    std::fs::write(&reads, lines.join("\n") + "\n").expect("mended");
    // The second session opens 28 days after the last read of the first.
    assert!(matches!(
        reopened.next("ana", NOON).expect("next"),
        Next::Washout { .. }
    ));
    let later = NOON + 29 * 86_400;
    assert!(matches!(
        reopened.next("ana", later).expect("next"),
        Next::Item { done: 4, .. }
    ));
    assert!(
        reopened
            .record(&read_of(&reopened, "ana", &schedule[4], 60), NOON)
            .is_err()
    );
    reopened
        .record(&read_of(&reopened, "ana", &schedule[4], 60), later)
        .expect("after the washout");
}

/// A workspace of `cases` phantom cases; its folder and the phantoms' folder (their truth).
fn phantom_workspace(folder: &Path, cases: usize) -> (PathBuf, PathBuf) {
    let dataset = folder.join("dataset");
    let made = keyslice(&[
        "phantom",
        "--out",
        dataset.to_str().expect("utf-8"),
        "--cases",
        &cases.to_string(),
        "--seed",
        "90",
        "--matrix",
        "64",
    ]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let workspace = folder.join("ws");
    let created = keyslice(&[
        "workspace",
        "create",
        workspace.to_str().expect("utf-8"),
        dataset.to_str().expect("utf-8"),
    ]);
    assert!(created.status.success(), "{}", text(&created.stderr));
    (workspace, dataset)
}

#[test]
fn the_report_analyses_the_arms_with_readers_and_cases_random() {
    let folder = tempfile::tempdir().expect("temp dir");
    let (workspace, dataset) = phantom_workspace(folder.path(), 8);
    let dir = folder.path().join("trial");
    let created = common::create_study(
        &workspace,
        &dir,
        &["ana", "ben", "cho"],
        &["--design", "sequential"],
    );
    assert!(created.contains("3 readers × 8 cases × 2 arms (unaided, evidence)"));
    let study = Study::open(&dir).expect("opens");
    // Readers who see the evidence are more sure where truth has a tumor: confidence from
    // the truth, a reader's skill and the arm, plus a fixed per-read wobble.
    let truth = keyslice::io::cases::read_truth(&dataset).expect("truth");
    let has_tumor = |case: &str, organ: Organ| {
        truth
            .iter()
            .find(|record| record.case_id == case)
            .and_then(|record| record.truth_findings().ok())
            .is_some_and(|findings| {
                findings
                    .organs
                    .get(&organ)
                    .is_some_and(|o| o.tumor == keyslice::findings::TumorPresence::Yes)
            })
    };
    for (skill, reader) in [(10_i32, "ana"), (20, "ben"), (15, "cho")] {
        for (n, item) in study.definition.schedule(reader).iter().enumerate() {
            let mut read = read_of(&study, reader, item, 50);
            read.calls = Organ::ALL
                .into_iter()
                .map(|organ| {
                    let boost = if item.arm == 1 { 15 } else { 0 };
                    let wobble = ((n * 37 + organ as usize * 11) % 41) as i32 - 20;
                    let centre = if has_tumor(&item.case, organ) {
                        50 + skill + boost
                    } else {
                        50 - skill - boost
                    };
                    let confidence = u8::try_from((centre + wobble).clamp(0, 100)).expect("0-100");
                    (
                        organ,
                        Call {
                            present: confidence >= 50,
                            confidence,
                        },
                    )
                })
                .collect();
            study.record(&read, NOON).expect("recorded in order");
        }
    }
    let out = folder.path().join("report");
    let reported = keyslice(&[
        "study",
        "report",
        dir.to_str().expect("utf-8"),
        "--truth",
        dataset.to_str().expect("utf-8"),
        "--out",
        out.to_str().expect("utf-8"),
    ]);
    let printed = text(&reported.stdout);
    assert!(reported.status.success(), "{}", text(&reported.stderr));
    eprintln!("{printed}");
    assert!(
        printed.contains("3 readers, 8 cases (32 case/organ units with truth)"),
        "{printed}"
    );
    assert!(
        printed.contains("AUC evidence − unaided = +"),
        "the evidence arm reads better: {printed}"
    );
    let written = ["reads.imrmc", "mrmc.csv", "readers.csv"];
    for name in written.iter().chain(&["roc.png", "forest.png", "time.png"]) {
        assert!(out.join(name).is_file(), "{name}");
    }
    // The reads written for iMRMC give the same table through `study mrmc`.
    let checked = keyslice(&[
        "study",
        "mrmc",
        out.join("reads.imrmc").to_str().expect("utf-8"),
    ]);
    assert_eq!(
        text(&checked.stdout),
        std::fs::read_to_string(out.join("mrmc.csv")).expect("table")
    );
    let readers = std::fs::read_to_string(out.join("readers.csv")).expect("readers");
    // A row per reader and arm, then each arm's pooled row with the readers' average AUC.
    assert_eq!(readers.lines().count(), 1 + 3 * 2 + 2, "{readers}");
}

#[test]
fn the_ai_hallucinations_kept_are_counted_per_arm() {
    use keyslice::review::study::Decision;
    let folder = tempfile::tempdir().expect("temp dir");
    let study = Study::create(
        &folder.path().join("trial"),
        definition(Design::Sequential, 2),
    )
    .expect("created");
    // case0: the AI claims a liver tumor that truth does not have.
    let hallucinated = BTreeMap::from([("case0".to_string(), vec![Organ::Liver])]);
    // Ana calls no tumor unaided and rejects the AI's; Ben calls one unaided and accepts the
    // AI's; Cho calls none unaided and changes the AI's (keeping the tumor).
    let choices = [
        ("ana", false, Decision::Rejected),
        ("ben", true, Decision::Accepted),
        ("cho", false, Decision::Changed),
    ];
    for (reader, unaided_call, decision) in choices {
        for item in study.definition.schedule(reader) {
            let mut read = read_of(&study, reader, &item, 50);
            let evidence = item.arm == 1;
            let present = if evidence {
                decision != Decision::Rejected
            } else {
                unaided_call
            };
            read.calls.insert(
                Organ::Liver,
                Call {
                    present,
                    confidence: if present { 80 } else { 20 },
                },
            );
            if evidence && item.case == "case0" {
                read.ai.insert(Organ::Liver, decision);
            }
            study.record(&read, NOON).expect("recorded");
        }
    }
    let uptake = study.uptake(&hallucinated).expect("uptake");
    let counts: Vec<(&str, usize, usize)> = uptake
        .iter()
        .map(|arm| (arm.arm.as_str(), arm.hallucinations_read, arm.kept))
        .collect();
    assert_eq!(counts, [("unaided", 3, 1), ("evidence", 3, 2)]);
}

#[test]
fn simulated_readers_follow_their_rules_and_the_evidence_catches_hallucinations() {
    let folder = tempfile::tempdir().expect("temp dir");
    let mut three = definition(Design::Crossover { washout_days: 14 }, 30);
    three.arms.insert(
        1,
        Arm {
            name: "aided".into(),
            shows: Shows::Report,
        },
    );
    let study = Study::create(&folder.path().join("trial"), three).expect("created");
    // Truth: a liver tumor in every third case. The AI claims one everywhere: grounded with a
    // consistent key slice where it is real, hallucinated and inconsistent elsewhere.
    let (truth, ai) = common::liver_truth_and_ai(&study.definition.cases, |k| k % 3 == 0);
    let mut hallucinated = BTreeMap::new();
    for (k, case) in study.definition.cases.iter().enumerate() {
        let real = k % 3 == 0;
        if !real {
            hallucinated.insert(case.clone(), vec![Organ::Liver]);
        }
    }
    let recorded = study
        .simulate(&truth, &ai, ReaderRules::default(), NOON, &[])
        .expect("simulated")
        .recorded;
    assert_eq!(recorded, 3 * 3 * 30);
    // Every reader is done, every read marked simulated and dated by the clock, never ahead
    // of it (a simulated reader has no memory to wash out).
    assert!(matches!(study.next("cho", NOON).expect("next"), Next::Done));
    for reader in &study.definition.readers {
        for read in study.reads(reader).expect("reads") {
            assert!(read.simulated, "{read:?}");
            assert_eq!(read.at, "2026-12-06T12:00:00.000Z");
        }
    }
    let share = |arm: &str| {
        let uptake = study.uptake(&hallucinated).expect("uptake");
        let arm = uptake.iter().find(|a| a.arm == arm).expect("arm");
        arm.kept as f64 / arm.hallucinations_read as f64
    };
    let (unaided, aided, evidence) = (share("unaided"), share("aided"), share("evidence"));
    // Shown the report alone the readers take up hallucinations; shown the inconsistent
    // evidence they re-read and keep as few as reading alone.
    assert!(aided > unaided + 0.1, "aided {aided}, unaided {unaided}");
    assert!(
        (evidence - unaided).abs() < 1e-12,
        "evidence {evidence}, unaided {unaided}"
    );
    let reads = study.mrmc_reads(&truth).expect("reads");
    assert_eq!(reads.readers.len(), 3);
    assert!(keyslice::mrmc::ustat_table(&reads).is_ok());
}

#[test]
fn a_hallucinating_model_adds_one_made_up_tumor_to_the_cases_drawn_and_names_a_key_slice() {
    let folder = tempfile::tempdir().expect("temp dir");
    let (workspace, _) = phantom_workspace(folder.path(), 4);
    let made_up = folder.path().join("made-up");
    let copied = keyslice(&[
        "workspace",
        "create",
        made_up.to_str().expect("utf-8"),
        folder.path().join("dataset").to_str().expect("utf-8"),
    ]);
    assert!(copied.status.success(), "{}", text(&copied.stderr));
    for (ws, extra) in [
        (&workspace, &[][..]),
        (
            &made_up,
            &["--hallucinate", "1", "--hallucinate-seed", "2"][..],
        ),
    ] {
        let mut args = vec!["workspace", "analyze", ws.to_str().expect("utf-8")];
        args.extend_from_slice(extra);
        let analysed = keyslice(&args);
        assert!(analysed.status.success(), "{}", text(&analysed.stderr));
    }
    let predictions = |ws: &Path| {
        keyslice::review::workspace::Workspace::open(ws)
            .expect("workspace")
            .predictions()
            .expect("predictions")
    };
    let (plain, hallucinating) = (predictions(&workspace), predictions(&made_up));
    assert_eq!(hallucinating.by_case.len(), 4);
    for prediction in &hallucinating.by_case {
        let case = &prediction.case_id;
        let real = plain.get(case).expect("the same cases");
        assert_eq!(
            prediction.diagnoser.id,
            format!("{}+hallucinating-100%-seed2", real.diagnoser.id)
        );
        let before = real.findings.tumor_organs();
        let after = prediction.findings.tumor_organs();
        if before.len() < Organ::ALL.len() {
            // Exactly one organ more, the rest as the model said.
            assert_eq!(
                after.len(),
                before.len() + 1,
                "{case}: {before:?} → {after:?}"
            );
            assert!(before.iter().all(|organ| after.contains(organ)));
            // Named on a slice the verifier read.
            assert!(prediction.key_slice.is_some(), "{case}");
            assert!(prediction.local_description.is_some(), "{case}");
        }
    }
    // Without --hallucinate the same model writes the same reports as before.
    let again = folder.path().join("again");
    assert!(
        keyslice(&[
            "workspace",
            "create",
            again.to_str().expect("utf-8"),
            folder.path().join("dataset").to_str().expect("utf-8"),
        ])
        .status
        .success()
    );
    assert!(
        keyslice(&["workspace", "analyze", again.to_str().expect("utf-8")])
            .status
            .success()
    );
    for prediction in &predictions(&again).by_case {
        let plain = plain.get(&prediction.case_id).expect("case");
        assert_eq!(prediction.report, plain.report);
    }
}

#[test]
fn a_kind_of_made_up_finding_changes_one_lesion_of_each_answer_with_room_for_it() {
    let folder = tempfile::tempdir().expect("temp dir");
    let (workspace, _) = phantom_workspace(folder.path(), 4);
    let analysed = keyslice(&["workspace", "analyze", workspace.to_str().expect("utf-8")]);
    assert!(analysed.status.success(), "{}", text(&analysed.stderr));
    let predictions = |ws: &Path| {
        keyslice::review::workspace::Workspace::open(ws)
            .expect("workspace")
            .predictions()
            .expect("predictions")
    };
    let plain = predictions(&workspace);

    // A kind of made-up finding: each real lesion answer gets one lesion twice its size with
    // its attenuation flipped; answers without a lesion stay as the model wrote them.
    let wrong = folder.path().join("wrong");
    assert!(
        keyslice(&[
            "workspace",
            "create",
            wrong.to_str().expect("utf-8"),
            folder.path().join("dataset").to_str().expect("utf-8"),
        ])
        .status
        .success()
    );
    let analysed = keyslice(&[
        "workspace",
        "analyze",
        wrong.to_str().expect("utf-8"),
        "--hallucinate",
        "1",
        "--hallucinate-kind",
        "wrong-attributes",
    ]);
    assert!(analysed.status.success(), "{}", text(&analysed.stderr));
    for prediction in &predictions(&wrong).by_case {
        let real = plain.get(&prediction.case_id).expect("case");
        assert_eq!(
            prediction.diagnoser.id,
            format!(
                "{}+hallucinating-wrong-attributes-100%-seed1",
                real.diagnoser.id
            )
        );
        // Where each value stood in the report text is not part of the comparison.
        let lesions = |findings: &keyslice::findings::Findings| -> Vec<keyslice::findings::Lesion> {
            let findings = findings.without_spans();
            Organ::ALL
                .into_iter()
                .flat_map(|organ| findings.organ(organ).lesions.clone())
                .collect()
        };
        let (before, after) = (lesions(&real.findings), lesions(&prediction.findings));
        assert_eq!(before.len(), after.len(), "{}", prediction.case_id);
        let changed = before.iter().zip(&after).filter(|(a, b)| a != b).count();
        assert_eq!(
            changed,
            usize::from(!before.is_empty()),
            "{}: {before:?} → {after:?}",
            prediction.case_id
        );
    }
    // A kind that does not exist is refused, naming the kinds there are.
    let refused = keyslice(&[
        "workspace",
        "analyze",
        wrong.to_str().expect("utf-8"),
        "--hallucinate",
        "1",
        "--hallucinate-kind",
        "everything",
    ]);
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("side-swap"),
        "{}",
        text(&refused.stderr)
    );
}

#[test]
fn split_plot_readers_read_their_block_in_every_arm_and_the_mrmc_takes_the_gaps() {
    let folder = tempfile::tempdir().expect("temp dir");
    let mut split = definition(
        Design::SplitPlot {
            groups: 2,
            washout_days: 14,
        },
        20,
    );
    split.readers.push("dan".into());
    let study = Study::create(&folder.path().join("trial"), split).expect("created");
    let blocks: Vec<Vec<String>> = study
        .definition
        .readers
        .iter()
        .map(|reader| study.definition.cases_of(reader))
        .collect();
    // Readers 0 and 2 share a block, 1 and 3 the other; the blocks split the cases in halves.
    assert_eq!(blocks[0], blocks[2]);
    assert_eq!(blocks[1], blocks[3]);
    assert_eq!(blocks[0].len(), 10);
    assert!(blocks[0].iter().all(|case| !blocks[1].contains(case)));
    for (number, reader) in study.definition.readers.iter().enumerate() {
        let schedule = study.definition.schedule(reader);
        assert_eq!(schedule.len(), 20, "{reader}: 10 cases × 2 arms");
        assert!(
            schedule
                .iter()
                .all(|item| blocks[number].contains(&item.case))
        );
    }
    // Within a block the arm order is counterbalanced.
    let first_arm = |reader: &str| study.definition.schedule(reader)[0].arm;
    assert_ne!(first_arm("ana"), first_arm("cho"));
    assert_ne!(first_arm("ben"), first_arm("dan"));
    // Simulated to the end, then analysed with readers and cases random.
    let (truth, ai) = common::liver_truth_and_ai(&study.definition.cases, |k| k % 2 == 0);
    let recorded = study
        .simulate(&truth, &ai, ReaderRules::default(), NOON, &[])
        .expect("simulated")
        .recorded;
    assert_eq!(recorded, 4 * 20);
    let reads = study.mrmc_reads(&truth).expect("reads");
    let rows = keyslice::mrmc::ustat_table(&reads).expect("an analysis of the split-plot reads");
    let difference = rows.iter().find(|row| row.AUCB.is_some()).expect("a pair");
    assert!(
        difference
            .varAUCAminusAUCB
            .is_some_and(|v| v > 0.0 && v.is_finite())
    );
    assert!(difference.dfBDG.is_finite() && difference.dfBDG > 0.0);
    // Each case was read by its block's two readers in each arm: 2 × 2 reads of each unit.
    let imrmc = reads.to_imrmc(&[]);
    let case = &blocks[1][0];
    let of_case = imrmc
        .lines()
        .filter(|line| line.contains(&format!(",{case}/liver,")) && !line.starts_with("truth"))
        .count();
    assert_eq!(of_case, 4, "{imrmc}");
}

#[test]
fn a_panel_truth_takes_the_majority_and_waits_for_the_adjudicator_on_a_split() {
    let folder = tempfile::tempdir().expect("temp dir");
    let ana = panelist(folder.path(), "ana.jsonl", [true, true, false, false]);
    let ben = panelist(folder.path(), "ben.jsonl", [true, false, false, true]);
    let cho = panelist(folder.path(), "cho.jsonl", [true, true, false, true]);
    let out = folder.path().join("truth.jsonl");
    let s = |path: &Path| path.to_str().expect("utf-8").to_string();
    let three = keyslice(&[
        "study",
        "truth",
        "--panel",
        &s(&ana),
        "--panel",
        &s(&ben),
        "--panel",
        &s(&cho),
        "--out",
        &s(&out),
    ]);
    let printed = text(&three.stdout);
    assert!(three.status.success(), "{}", text(&three.stderr));
    assert!(
        printed.contains("panel of 3: 4 case(s) with truth"),
        "{printed}"
    );
    let truth = keyslice::io::cases::read_truth(&out).expect("truth reads back");
    let liver: Vec<bool> = truth
        .iter()
        .map(|record| {
            record
                .truth_findings()
                .expect("findings")
                .states_tumor(Organ::Liver)
        })
        .collect();
    assert_eq!(liver, [true, true, false, true], "the majority");
    // Two panelists split on cases 1 and 3: left out, named, until an adjudicator decides.
    let two = keyslice(&[
        "study",
        "truth",
        "--panel",
        &s(&ana),
        "--panel",
        &s(&ben),
        "--out",
        &s(&out),
    ]);
    let printed = text(&two.stdout);
    assert!(printed.contains("2 case(s) with truth"), "{printed}");
    assert!(
        printed.contains("unresolved: case1 liver: 1 of 2"),
        "{printed}"
    );
    assert!(printed.contains("--adjudicator"), "{printed}");
    let settled = keyslice(&[
        "study",
        "truth",
        "--panel",
        &s(&ana),
        "--panel",
        &s(&ben),
        "--adjudicator",
        &s(&cho),
        "--out",
        &s(&out),
    ]);
    assert!(text(&settled.stdout).contains("4 case(s) with truth"));
    assert!(text(&settled.stdout).contains("adjudicated 2"));
    // A damaged panel file is named with its line.
    let first = std::fs::read_to_string(&ana).expect("read");
    let first = first.lines().next().expect("a line");
    std::fs::write(
        folder.path().join("bad.jsonl"),
        format!("{first}\nnot json\n"),
    )
    .expect("written");
    let bad = keyslice(&[
        "study",
        "truth",
        "--panel",
        &s(&ana),
        "--panel",
        &s(&folder.path().join("bad.jsonl")),
        "--out",
        &s(&out),
    ]);
    assert!(!bad.status.success());
    let said = text(&bad.stderr);
    assert!(
        said.contains("bad.jsonl") && said.contains("line 2"),
        "{said}"
    );
}

/// A panelist's findings of four cases (`case0`…`case3`): a liver tumor or not in each.
fn panelist(folder: &Path, name: &str, liver: [bool; 4]) -> PathBuf {
    let path = folder.join(name);
    let lines: Vec<String> = liver
        .iter()
        .enumerate()
        .map(|(k, tumor)| {
            let findings = common::liver_findings(*tumor);
            serde_json::json!({"case_id": format!("case{k}"), "findings": findings}).to_string()
        })
        .collect();
    std::fs::write(&path, lines.join("\n")).expect("written");
    path
}

#[test]
fn a_study_killed_at_any_moment_loses_no_read_and_resumes_where_it_stopped() {
    let folder = tempfile::tempdir().expect("temp dir");
    let (workspace, dataset) = phantom_workspace(folder.path(), 10);
    let (killed, whole) = (
        crossover_of_three(&workspace, &folder.path().join("killed")),
        crossover_of_three(&workspace, &folder.path().join("whole")),
    );
    let simulate = |dir: &Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_keyslice"))
            .args([
                "study",
                "simulate",
                dir.to_str().expect("utf-8"),
                "--truth",
                dataset.to_str().expect("utf-8"),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("starts")
    };
    assert!(simulate(&whole).wait().expect("runs").success());
    // Killed again and again at moments spread over the run, until one run finishes.
    let mut rng = keyslice::rng::Rng::new(11);
    let mut kills = 0;
    let mut partial = std::collections::BTreeSet::new();
    let mut delay_us = 1_000;
    loop {
        let mut child = simulate(&killed);
        std::thread::sleep(std::time::Duration::from_micros(
            delay_us + rng.below(1_000) as u64,
        ));
        if child
            .try_wait()
            .expect("status")
            .is_some_and(|status| status.success())
        {
            break;
        }
        child.kill().expect("killed");
        child.wait().expect("reaped");
        kills += 1;
        // Each kill lands a little later, so the kills spread over the whole run.
        delay_us += 600;
        let opened = Study::open(&killed).expect("opens");
        let read: usize = ["ana", "ben", "cho"]
            .iter()
            .map(|reader| opened.reads(reader).expect("reads").len())
            .sum();
        partial.insert(read);
        assert!(kills < 400, "the simulation never finished between kills");
    }
    eprintln!("{kills} kills; reads found after them: {partial:?}");
    assert!(
        partial
            .iter()
            .filter(|&&read| read > 0 && read < 60)
            .count()
            >= 3,
        "kills in the middle of the run: {partial:?}"
    );
    // Nothing lost, nothing twice: each reader's reads are the uninterrupted run's.
    let (killed, whole) = (
        Study::open(&killed).expect("opens"),
        Study::open(&whole).expect("opens"),
    );
    for reader in ["ana", "ben", "cho"] {
        let strip = |reads: Vec<Read>| -> Vec<_> {
            reads
                .into_iter()
                .map(|read| {
                    (
                        read.case,
                        read.arm,
                        read.session,
                        read.calls,
                        read.active_ms,
                    )
                })
                .collect()
        };
        let (after_kills, uninterrupted) = (
            strip(killed.reads(reader).expect("reads")),
            strip(whole.reads(reader).expect("reads")),
        );
        assert_eq!(after_kills.len(), 20, "{reader}");
        assert_eq!(after_kills, uninterrupted, "{reader}");
        assert!(matches!(
            killed.next(reader, NOON + 400 * 86_400).expect("next"),
            Next::Done
        ));
    }
}

/// A crossover study of ana, ben and cho over `workspace`, made in `dir` by `study create`.
fn crossover_of_three(workspace: &Path, dir: &Path) -> PathBuf {
    common::create_study(
        workspace,
        dir,
        &["ana", "ben", "cho"],
        &["--washout-days", "14"],
    );
    dir.to_path_buf()
}

#[test]
fn reads_of_nifti_cases_are_not_published_and_the_command_says_why() {
    let folder = tempfile::tempdir().expect("temp dir");
    let (workspace, _) = phantom_workspace(folder.path(), 2);
    let dir = crossover_of_three(&workspace, &folder.path().join("trial"));
    let study = Study::open(&dir).expect("opens");
    let first = study.definition.schedule("ana")[0].clone();
    study
        .record(&read_of(&study, "ana", &first, 70), NOON)
        .expect("recorded");
    let out = folder.path().join("documents");
    let published = keyslice(&[
        "study",
        "publish",
        dir.to_str().expect("utf-8"),
        "--out",
        out.to_str().expect("utf-8"),
    ]);
    assert!(published.status.success(), "{}", text(&published.stderr));
    assert!(
        text(&published.stdout).starts_with("0 study read(s) as SR; 0 stored"),
        "{}",
        text(&published.stdout)
    );
    assert!(
        text(&published.stderr).contains("1 case(s) are not DICOM series"),
        "{}",
        text(&published.stderr)
    );
}

#[test]
fn lines_that_are_not_this_studys_reads_never_reach_a_table_or_a_path() {
    let folder = tempfile::tempdir().expect("temp dir");
    let dir = folder.path().join("trial");
    let study = Study::create(&dir, definition(Design::Sequential, 4)).expect("created");
    let first = study.definition.schedule("ana")[0].clone();
    let good = read_of(&study, "ana", &first, 70);
    study.record(&good, NOON).expect("recorded");
    // Lines another tool wrote into ana's file: a path for an arm, another reader, a case
    // outside the study, escape codes in a name.
    let reads = dir.join("reads").join("ana.jsonl");
    let mut text = std::fs::read_to_string(&reads).expect("reads");
    for (field, value) in [
        ("arm", "../../../../escaped"),
        ("reader", "ben"),
        ("case", "case99"),
        ("case", "case0\u{1b}[2J"),
    ] {
        let mut hostile = serde_json::to_value(&good).expect("JSON");
        hostile[field] = serde_json::Value::String(value.into());
        text.push_str(&(hostile.to_string() + "\n"));
    }
    std::fs::write(&reads, text).expect("written");
    let kept = study.reads("ana").expect("reads");
    assert_eq!(kept, vec![good], "only the study's own read");
    let truth: BTreeMap<_, _> = study
        .definition
        .cases
        .iter()
        .map(|case| (case.clone(), common::liver_findings(true)))
        .collect();
    let mrmc = study.mrmc_reads(&truth).expect("reads");
    assert_eq!(mrmc.modalities, ["unaided"]);
    assert!(!dir.parent().expect("parent").join("escaped").exists());
}

/// A person's reads are never filled in around: a simulation leaves a reader with reads of
/// their own alone unless named, and a named one's simulated reads are marked as such beside
/// the person's.
#[test]
fn a_simulation_leaves_a_persons_reads_alone_unless_the_reader_is_named() {
    let folder = tempfile::tempdir().expect("temp dir");
    let mut definition = common::study_definition(Design::Crossover { washout_days: 14 }, 6);
    definition.seed = 9;
    let study = Study::create(&folder.path().join("trial"), definition).expect("created");
    let (truth, ai) = common::liver_truth_and_ai(&study.definition.cases, |k| k % 2 == 0);
    // Two real reads by the first reader.
    let person = study.definition.readers[0].clone();
    for _ in 0..2 {
        let Next::Item { item, .. } = study.next(&person, NOON).expect("next") else {
            panic!("an item to read");
        };
        study
            .record(&read_of(&study, &person, &item, 80), NOON)
            .expect("recorded");
    }
    let simulation = study
        .simulate(&truth, &ai, ReaderRules::default(), NOON, &[])
        .expect("simulated");
    assert_eq!(simulation.left_alone, std::slice::from_ref(&person));
    let own = study.reads(&person).expect("reads");
    assert_eq!(own.len(), 2);
    assert!(own.iter().all(|read| !read.simulated));
    // Named, the rest of that reader's items are simulated, and marked so.
    let again = study
        .simulate(
            &truth,
            &ai,
            ReaderRules::default(),
            NOON,
            std::slice::from_ref(&person),
        )
        .expect("simulated");
    assert!(again.left_alone.is_empty());
    let reads = study.reads(&person).expect("reads");
    assert_eq!(reads.iter().filter(|read| !read.simulated).count(), 2);
    assert_eq!(reads.len(), 2 + again.recorded);
    let charts = study.charts(&truth).expect("charts");
    for chart in &charts {
        assert!(
            chart.caption[0].contains("measure nothing about people"),
            "{:?}",
            chart.caption
        );
    }
}

/// Each step from phantoms to a study report can say what it did as one JSON line (a
/// script's only contract), with the progress left on stderr.
#[test]
fn every_step_from_phantoms_to_the_report_prints_json_when_asked() {
    let folder = tempfile::tempdir().expect("temp dir");
    let path = |name: &str| {
        folder
            .path()
            .join(name)
            .to_str()
            .expect("utf-8")
            .to_string()
    };
    let json = |args: &[&str]| -> serde_json::Value {
        let out = keyslice(args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        let stdout = text(&out.stdout);
        assert_eq!(stdout.lines().count(), 1, "{args:?}: one line: {stdout}");
        serde_json::from_str(stdout.trim()).expect("JSON")
    };
    let (dataset, ws, trial) = (path("dataset"), path("ws"), path("trial"));
    let made = json(&[
        "phantom", "--out", &dataset, "--cases", "4", "--seed", "91", "--matrix", "64", "--json",
    ]);
    assert_eq!(made["cases"], 4);
    assert_eq!(made["case_ids"].as_array().map(Vec::len), Some(4));

    let first = made["case_ids"][0].as_str().expect("a case id");
    let ct = folder.path().join("dataset").join(first).join("ct.nii.gz");
    let converted = json(&[
        "convert",
        ct.to_str().expect("utf-8"),
        &path("copy.nii.gz"),
        "--json",
    ]);
    assert_eq!(converted["format"], "nifti");
    assert_eq!(converted["dims"][0], 64);

    let created = json(&["workspace", "create", &ws, &dataset, "--json"]);
    assert_eq!(
        (created["added"].clone(), created["cases"].clone()),
        (4.into(), 4.into())
    );
    let analysed = json(&["workspace", "analyze", &ws, "--json"]);
    assert_eq!(analysed["analysed"], 4, "{analysed}");
    assert_eq!(analysed["model"]["id"], "keyslice-tiny");
    let again = json(&["workspace", "analyze", &ws, "--json"]);
    assert_eq!(
        (again["analysed"].clone(), again["skipped"].clone()),
        (0.into(), 4.into())
    );

    let study = json(&[
        "study",
        "create",
        &trial,
        "--workspace",
        &ws,
        "--reader",
        "ana",
        "--reader",
        "ben",
        "--design",
        "sequential",
        "--json",
    ]);
    assert_eq!(study["cases"], 4);
    let simulated = json(&["study", "simulate", &trial, "--truth", &dataset, "--json"]);
    assert!(simulated["recorded"].as_u64() > Some(0), "{simulated}");
    assert!(
        simulated["note"]
            .as_str()
            .is_some_and(|note| note.contains("measure nothing about people"))
    );
    let report = json(&["study", "report", &trial, "--truth", &dataset, "--json"]);
    assert_eq!(report["readers"], 2);
    assert!(report["simulated"].is_string(), "{report}");
    let files: Vec<&str> = report["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter_map(serde_json::Value::as_str)
        .collect();
    for file in &files {
        let written = Path::new(report["out"].as_str().expect("out")).join(file);
        assert!(written.is_file(), "{}", written.display());
    }
    assert!(
        files.contains(&"reads.imrmc") && files.contains(&"roc.png"),
        "{files:?}"
    );
}
