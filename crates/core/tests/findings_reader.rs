//! The report reader: a RadGPT-style structured report, a table of narrative sentences with
//! expected results, spans that point at the right words, writer → reader round trips on
//! random findings, and no panic on arbitrary or mangled text.

use keyslice_core::findings::{
    Attenuation, Findings, KeySlice, KidneyPole, Lesion, LesionSize, Location, Organ,
    OrganFindings, PancreasPart, SliceBox, TumorPresence, read_report, write_local_description,
    write_report,
};
use proptest::prelude::*;

const STRUCTURED: &str = "FINDINGS:
Liver lesions:
Liver lesion 1:
Location: hepatic segment 7/8.
Size: 3.1 x 2.4 cm (image 123). Volume: 10.2 cm^3.
Enhancement relative to liver: Hypoattenuating (HU value is 45.2+/-12.1).
Pancreas: no focal lesion.
The spleen is normal in size.
IMPRESSION:
Multiple (3) hypoattenuating liver masses. Largest one (hepatic segment 7/8) measures 3.1 x 2.4 cm.
Key slice: 57.
";

#[test]
fn structured_radgpt_report_is_read_with_spans() {
    let read = read_report(STRUCTURED);
    let liver = read.findings.organ(Organ::Liver);
    assert_eq!(liver.tumor, TumorPresence::Yes);
    assert_eq!(
        liver.lesions.len(),
        1,
        "the IMPRESSION adds no second lesion"
    );
    let lesion = &liver.lesions[0];
    assert_eq!(lesion.location, Some(Location::LiverSegments(vec![7, 8])));
    assert_eq!(
        lesion.size,
        Some(LesionSize {
            long_cm: 3.1,
            short_cm: Some(2.4)
        })
    );
    assert_eq!(lesion.attenuation, Some(Attenuation::Hypo));
    let span = lesion.spans.size.expect("size span");
    assert_eq!(span.text(STRUCTURED), "3.1 x 2.4 cm");
    assert_eq!(
        lesion
            .spans
            .location
            .expect("location span")
            .text(STRUCTURED),
        "hepatic segment 7/8"
    );
    assert_eq!(
        read.findings.organ(Organ::Pancreas).tumor,
        TumorPresence::No
    );
    assert_eq!(
        read.findings.organ(Organ::KidneyLeft).tumor,
        TumorPresence::NotMentioned
    );
    assert_eq!(
        read.findings.key_slice.as_ref().map(|key| key.index),
        Some(57)
    );
    // The spleen sentence and the volume are not silently dropped.
    let unread: Vec<&str> = read.unread.iter().map(|u| u.text.as_str()).collect();
    assert!(unread.iter().any(|t| t.contains("spleen")), "{unread:?}");
}

struct Case {
    text: &'static str,
    organ: Organ,
    tumor: TumorPresence,
    size: Option<(f64, Option<f64>)>,
    location: Option<Location>,
    attenuation: Option<Attenuation>,
}

fn case(text: &'static str, organ: Organ, tumor: TumorPresence) -> Case {
    Case {
        text,
        organ,
        tumor,
        size: None,
        location: None,
        attenuation: None,
    }
}

#[test]
#[expect(clippy::too_many_lines, reason = "a table of cases")]
fn narrative_sentences_read_as_a_radiologist_means_them() {
    use TumorPresence::{No, Uncertain, Yes};
    let cases = vec![
        Case {
            size: Some((2.3, None)),
            location: Some(Location::LiverSegments(vec![7])),
            attenuation: Some(Attenuation::Hypo),
            ..case(
                "There is a 2.3 cm hypodense lesion in segment VII.",
                Organ::Liver,
                Yes,
            )
        },
        case("No focal pancreatic mass.", Organ::Pancreas, No),
        case("The kidneys are unremarkable.", Organ::KidneyLeft, No),
        case("The kidneys are unremarkable.", Organ::KidneyRight, No),
        Case {
            size: Some((1.5, Some(1.2))),
            location: Some(Location::Pancreas(PancreasPart::Head)),
            ..case(
                "15 x 12 mm mass in the pancreatic head.",
                Organ::Pancreas,
                Yes,
            )
        },
        Case {
            location: Some(Location::LiverSegments(vec![8])),
            attenuation: Some(Attenuation::Hyper),
            ..case(
                "Hyperenhancing nodule in S8 of the liver.",
                Organ::Liver,
                Yes,
            )
        },
        Case {
            location: Some(Location::LiverSegments(vec![5, 6, 7, 8])),
            ..case(
                "A 4 cm mass in the right lobe of the liver.",
                Organ::Liver,
                Yes,
            )
        },
        case("No evidence of hepatic metastases.", Organ::Liver, No),
        case(
            "A small renal lesion in the left kidney cannot be excluded.",
            Organ::KidneyLeft,
            Uncertain,
        ),
        case(
            "Left renal hypodensity, likely cyst.",
            Organ::KidneyLeft,
            Uncertain,
        ),
        case("Simple cyst in the right kidney.", Organ::KidneyRight, No),
        Case {
            location: Some(Location::Kidney(KidneyPole::Lower)),
            size: Some((3.0, None)),
            ..case(
                "3 cm solid mass in the lower pole of the right kidney.",
                Organ::KidneyRight,
                Yes,
            )
        },
        case(
            "Possible lesion in the pancreatic tail.",
            Organ::Pancreas,
            Uncertain,
        ),
        case("Liver is normal without focal lesions.", Organ::Liver, No),
        Case {
            location: Some(Location::Pancreas(PancreasPart::Uncinate)),
            attenuation: Some(Attenuation::Iso),
            ..case(
                "Isoattenuating mass of the uncinate process.",
                Organ::Pancreas,
                Yes,
            )
        },
        Case {
            location: Some(Location::LiverSegments(vec![7, 8])),
            ..case(
                "Lesion spanning segments 7 and 8 of the liver.",
                Organ::Liver,
                Yes,
            )
        },
    ];
    for case in cases {
        let read = read_report(case.text);
        let organ = read.findings.organ(case.organ);
        assert_eq!(organ.tumor, case.tumor, "{}: {:?}", case.text, organ);
        let lesion = organ.lesions.first();
        if let Some((long, short)) = case.size {
            let size = lesion
                .and_then(|l| l.size)
                .unwrap_or_else(|| panic!("{}: no size", case.text));
            assert!(
                (size.long_cm - long).abs() < 1e-9,
                "{}: {size:?}",
                case.text
            );
            assert_eq!(
                size.short_cm.map(|s| (s * 10.0).round() / 10.0),
                short,
                "{}",
                case.text
            );
        }
        if let Some(location) = &case.location {
            assert_eq!(
                lesion.and_then(|l| l.location.as_ref()),
                Some(location),
                "{}",
                case.text
            );
        }
        if let Some(attenuation) = case.attenuation {
            assert_eq!(
                lesion.and_then(|l| l.attenuation),
                Some(attenuation),
                "{}",
                case.text
            );
        }
    }
}

#[test]
fn a_size_after_a_segment_list_is_not_a_segment() {
    let read = read_report("Hypodense liver lesion in segment 7, 3 cm.");
    let lesion = &read.findings.organ(Organ::Liver).lesions[0];
    assert_eq!(lesion.location, Some(Location::LiverSegments(vec![7])));
    assert_eq!(lesion.size.map(|size| size.long_cm), Some(3.0));
}

#[test]
fn negation_of_one_organ_does_not_touch_another() {
    let read = read_report("No liver lesion, but a 2 cm pancreatic body mass.");
    assert_eq!(read.findings.organ(Organ::Liver).tumor, TumorPresence::No);
    let pancreas = read.findings.organ(Organ::Pancreas);
    assert_eq!(pancreas.tumor, TumorPresence::Yes);
    assert_eq!(
        pancreas.lesions[0].location,
        Some(Location::Pancreas(PancreasPart::Body))
    );
}

#[test]
fn no_other_lesions_keeps_the_described_one() {
    let read = read_report("2 cm hypodense liver lesion in segment 6. No other liver lesions.");
    assert_eq!(read.findings.organ(Organ::Liver).tumor, TumorPresence::Yes);
    assert_eq!(read.findings.organ(Organ::Liver).lesions.len(), 1);
}

#[test]
fn narrative_report_with_inline_sections() {
    let text = "FINDINGS: The liver is normal in size. There is a 2.1 x 1.7 cm hypoattenuating lesion in hepatic segment 6, consistent with metastasis. A second 8 mm lesion in segment 2 is too small to characterize. The pancreas is atrophic without a discrete mass. The right kidney contains a 3.4 cm exophytic enhancing mass arising from the lower pole. The left kidney is unremarkable. IMPRESSION: 2.1 cm hepatic metastasis. Right renal mass, concerning for RCC.";
    let read = read_report(text);
    let liver = read.findings.organ(Organ::Liver);
    assert_eq!(liver.tumor, TumorPresence::Yes);
    // Two described lesions; the IMPRESSION adds none.
    assert_eq!(liver.lesions.len(), 2, "{:?}", liver.lesions);
    assert_eq!(
        liver.lesions[1].location,
        Some(Location::LiverSegments(vec![2]))
    );
    assert_eq!(
        read.findings.organ(Organ::Pancreas).tumor,
        TumorPresence::No
    );
    let right = read.findings.organ(Organ::KidneyRight);
    assert_eq!(right.tumor, TumorPresence::Yes);
    assert_eq!(
        right.lesions[0].location,
        Some(Location::Kidney(KidneyPole::Lower))
    );
    assert_eq!(
        read.findings.organ(Organ::KidneyLeft).tumor,
        TumorPresence::No
    );
}

#[test]
fn key_slice_phrasings_are_read() {
    for text in [
        "Key evidence slice: 57.",
        "key slice = 57",
        "Slice 57 is the key slice.",
        "KEY SLICE 57",
    ] {
        let read = read_report(text);
        assert_eq!(
            read.findings.key_slice.map(|key| key.index),
            Some(57),
            "{text}"
        );
    }
    // RadGPT's "(image 123)" is a canonical-grid slice, not the key slice.
    assert!(
        read_report("Size: 2 cm (image 123).")
            .findings
            .key_slice
            .is_none()
    );
}

#[test]
fn multiple_with_a_count_is_read() {
    let read = read_report("Multiple (3) hypoattenuating liver masses.");
    let lesion = &read.findings.organ(Organ::Liver).lesions[0];
    assert_eq!(lesion.count, Some(3));
    assert_eq!(lesion.attenuation, Some(Attenuation::Hypo));
}

#[test]
fn key_slice_with_position_and_uid() {
    let read = read_report("Key slice: 57 (z = -120.50 mm, SOP Instance UID 1.2.840.1.7).");
    let key = read.findings.key_slice.expect("key slice");
    assert_eq!(key.index, 57);
    assert_eq!(key.z_mm, Some(-120.5));
    assert_eq!(key.sop_instance_uid.as_deref(), Some("1.2.840.1.7"));
}

#[test]
fn unrelated_sentences_are_returned_unread() {
    let read = read_report("The gallbladder is distended. Mild atherosclerosis.");
    assert_eq!(read.unread.len(), 2);
    assert!(
        read.findings
            .organs
            .values()
            .all(|o| o.tumor == TumorPresence::NotMentioned)
    );
}

fn lesion_strategy(organ: Organ) -> impl Strategy<Value = Lesion> {
    let location = match organ {
        Organ::Liver => prop::collection::btree_set(1u8..=8, 1..3)
            .prop_map(|set| Location::LiverSegments(set.into_iter().collect()))
            .boxed(),
        Organ::Pancreas => prop_oneof![
            Just(PancreasPart::Head),
            Just(PancreasPart::Uncinate),
            Just(PancreasPart::Body),
            Just(PancreasPart::Tail)
        ]
        .prop_map(Location::Pancreas)
        .boxed(),
        _ => prop_oneof![
            Just(KidneyPole::Upper),
            Just(KidneyPole::Mid),
            Just(KidneyPole::Lower)
        ]
        .prop_map(Location::Kidney)
        .boxed(),
    };
    let size = (1u32..=90, prop::option::of(1u32..=90)).prop_map(|(long, short)| LesionSize {
        long_cm: f64::from(long) / 10.0,
        short_cm: short.map(|s| f64::from(s) / 10.0),
    });
    let attenuation = prop_oneof![
        Just(Attenuation::Hypo),
        Just(Attenuation::Iso),
        Just(Attenuation::Hyper),
        Just(Attenuation::Mixed)
    ];
    (
        prop::option::of(size),
        prop::option::of(location),
        prop::option::of(attenuation),
        prop::option::of(1u32..=9),
    )
        .prop_map(|(size, location, attenuation, count)| Lesion {
            size,
            location,
            attenuation,
            count,
            ..Lesion::default()
        })
}

fn organ_strategy(organ: Organ) -> impl Strategy<Value = OrganFindings> {
    prop_oneof![
        Just(OrganFindings::default()),
        Just(OrganFindings {
            tumor: TumorPresence::No,
            ..OrganFindings::default()
        }),
        prop::collection::vec(lesion_strategy(organ), 0..3).prop_map(|lesions| OrganFindings {
            tumor: TumorPresence::Yes,
            lesions,
            span: None,
        }),
        prop::collection::vec(lesion_strategy(organ), 0..2).prop_map(|lesions| OrganFindings {
            tumor: TumorPresence::Uncertain,
            lesions,
            span: None,
        }),
    ]
}

fn findings_strategy() -> impl Strategy<Value = Findings> {
    (
        organ_strategy(Organ::Liver),
        organ_strategy(Organ::Pancreas),
        organ_strategy(Organ::KidneyLeft),
        organ_strategy(Organ::KidneyRight),
        prop::option::of((
            0u32..600,
            prop::option::of(-50_000i32..50_000),
            any::<bool>(),
        )),
        prop::option::of((0u32..256, 0u32..256, 1u32..200, 1u32..200, any::<bool>())),
    )
        .prop_map(|(liver, pancreas, left, right, key, slice_box)| {
            let mut findings = Findings::default();
            *findings.organ_mut(Organ::Liver) = liver;
            *findings.organ_mut(Organ::Pancreas) = pancreas;
            *findings.organ_mut(Organ::KidneyLeft) = left;
            *findings.organ_mut(Organ::KidneyRight) = right;
            findings.key_slice = key.map(|(index, z, uid)| KeySlice {
                index,
                z_mm: z.map(|z| f64::from(z) / 100.0),
                sop_instance_uid: uid.then(|| format!("1.2.826.0.1.{index}")),
                span: None,
            });
            findings.slice_box = slice_box.map(|(c, r, w, h, mm)| SliceBox {
                voxels: [c, r, c + w, r + h],
                mm: mm.then(|| {
                    let to_mm = |v: u32| f64::from(v) * 0.75 - 100.0;
                    [to_mm(c), to_mm(r), to_mm(c + w), to_mm(r + h)]
                }),
            });
            findings
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn writer_then_reader_is_the_identity(findings in findings_strategy()) {
        let text = write_report(&findings);
        let read = read_report(&text);
        prop_assert_eq!(read.findings.without_spans(), findings, "report:\n{}", text);
        prop_assert!(read.unread.is_empty(), "unread {:?} in\n{}", read.unread, text);
    }

    #[test]
    fn local_description_reads_back(findings in findings_strategy()) {
        let mut local = findings.clone();
        local.key_slice = None;
        local.slice_box = None;
        for organ in local.organs.values_mut() {
            for lesion in &mut organ.lesions {
                lesion.count = None; // a single slice shows lesions, not counts
            }
            // "Lesion in the left kidney" with nothing more reads back as presence alone.
            organ.lesions.retain(|lesion| {
                lesion.size.is_some() || lesion.location.is_some() || lesion.attenuation.is_some()
            });
        }
        let text = write_local_description(42, &local);
        let read = read_report(&text).findings.without_spans();
        for organ in Organ::ALL {
            prop_assert_eq!(read.organ(organ).tumor, local.organ(organ).tumor, "{}", text);
            prop_assert_eq!(&read.organ(organ).lesions, &local.organ(organ).lesions, "{}", text);
        }
    }

    #[test]
    fn reader_never_panics_on_arbitrary_text(text in "\\PC{0,400}") {
        let read = read_report(&text);
        for unread in &read.unread {
            prop_assert!(unread.span.end <= text.len());
        }
    }

    #[test]
    fn reader_never_panics_on_mangled_reports(cut in 0usize..400, noise in "[0-9x.:/ ]{0,12}", at in 0usize..400) {
        let mut text: String = STRUCTURED.chars().take(cut).collect();
        let at = text.char_indices().map(|(i, _)| i).nth(at).unwrap_or(text.len());
        text.insert_str(at, &noise);
        let _ = read_report(&text);
    }
}

/// The example answer lines of the shipped prompts, as a model copies them.
fn prompt_example(file: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../prompts")
        .join(file);
    let text = std::fs::read_to_string(path).expect("prompt is committed");
    let start = text
        .find("Liver lesion 1:")
        .expect("the prompt shows a lesion line");
    let end = text[start..]
        .find("Hypoattenuating.")
        .expect("the example ends with its attenuation")
        + start
        + "Hypoattenuating.".len();
    text[start..end].to_string()
}

fn assert_segment_seven_lesion(answer: &str) {
    let read = read_report(answer);
    assert!(
        read.unread.is_empty(),
        "all of {answer:?} is read: {:?}",
        read.unread
    );
    let liver = read.findings.organ(Organ::Liver);
    assert_eq!(liver.tumor, TumorPresence::Yes);
    assert_eq!(liver.lesions.len(), 1, "{answer:?}");
    let lesion = &liver.lesions[0];
    assert_eq!(lesion.location, Some(Location::LiverSegments(vec![7])));
    assert_eq!(
        lesion.size,
        Some(LesionSize {
            long_cm: 3.1,
            short_cm: Some(2.4)
        })
    );
    assert_eq!(lesion.attenuation, Some(Attenuation::Hypo));
}

#[test]
fn the_diagnose_prompts_example_line_reads_back_whole() {
    let example = prompt_example("diagnose.txt");
    assert_segment_seven_lesion(&example);
    assert_segment_seven_lesion(&format!(
        "FINDINGS:\n{example}\nPancreas: no tumor.\nLeft kidney: no tumor.\nRight kidney: no tumor.\nKey slice: 41"
    ));
}

/// A lesion evidence line as plain values: organ, lesion index, slice, box, slices.
type EvidenceLine = (Organ, usize, u32, Option<[u32; 4]>, Option<(u32, u32)>);

#[test]
fn each_lesions_evidence_line_is_kept_for_that_lesion_and_adds_nothing_else() {
    let answer = "FINDINGS:\nLiver lesion 1: Location: hepatic segment 7. Size: 3.1 x 2.4 cm. Enhancement relative to liver: Hypoattenuating.\nLiver lesion 2: Size: 1.2 x 1.0 cm.\nPancreas: no tumor.\nLeft kidney lesion 1: Size: 2.0 x 1.8 cm.\nRight kidney: no tumor.\nKey slice: 41\nBox on key slice: columns 10-30, rows 40-60\nLesion slices: 38-44\nLiver lesion 1 evidence: slice 41, columns 10-30, rows 40-60, slices 38-44\nLiver lesion 2 evidence: slice 12, columns 70-77, rows 20-26.\r\nleft kidney lesion 1 evidence: key slice 30\n";
    let read = read_report(answer);
    assert!(read.unread.is_empty(), "{:?}", read.unread);
    assert_eq!(read.findings.organ(Organ::Liver).lesions.len(), 2);
    assert_eq!(read.findings.organ(Organ::KidneyLeft).lesions.len(), 1);
    assert_eq!(read.findings.key_slice.as_ref().map(|k| k.index), Some(41));
    let lines: Vec<EvidenceLine> = read
        .lesion_evidence
        .iter()
        .map(|line| {
            (
                line.organ,
                line.lesion,
                line.key_slice,
                line.slice_box.as_ref().map(|b| b.voxels),
                line.slices.map(|range| (range.first, range.last)),
            )
        })
        .collect();
    assert_eq!(
        lines,
        vec![
            (Organ::Liver, 0, 41, Some([10, 40, 30, 60]), Some((38, 44))),
            (Organ::Liver, 1, 12, Some([70, 20, 77, 26]), None),
            (Organ::KidneyLeft, 0, 30, None, None),
        ]
    );
    // An evidence line says nothing else of the findings: without it the same findings are
    // read, less that lesion's own evidence.
    let without = answer
        .lines()
        .filter(|line| !line.to_ascii_lowercase().contains("evidence:"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut bare = read.findings.without_spans();
    for organ in Organ::ALL {
        for lesion in &mut bare.organ_mut(organ).lesions {
            assert!(
                lesion.evidence.take().is_some(),
                "{organ}: its own evidence"
            );
        }
    }
    assert_eq!(read_report(&without).findings.without_spans(), bare);
    // Each lesion keeps its line, and the report written from the findings gives it back.
    let liver = read.findings.organ(Organ::Liver);
    assert_eq!(
        liver.lesions[1].evidence.as_ref().map(|e| e.key_slice),
        Some(12)
    );
    let written = keyslice_core::findings::write_report(&read.findings);
    assert!(
        written.contains("Liver lesion 2 evidence: slice 12, columns 70-77, rows 20-26."),
        "{written}"
    );
    assert_eq!(
        read_report(&written).findings.without_spans(),
        read.findings.without_spans()
    );
    // Lesion 0 does not exist: the line is not evidence (and is read as a sentence).
    assert!(
        read_report("Liver lesion 0 evidence: slice 3")
            .lesion_evidence
            .is_empty()
    );
}

#[test]
fn the_verify_prompts_example_line_reads_back_whole() {
    assert_segment_seven_lesion(&prompt_example("verify.txt"));
}

#[test]
fn liver_sub_segments_count_as_their_segment() {
    for (text, segments) in [
        ("Hypodense liver lesion in segment IVa, 2.1 cm.", vec![4]),
        (
            "Liver lesion in hepatic segment 4a measuring 1.5 cm.",
            vec![4],
        ),
        ("Liver mass spanning segments IVb/V, 5 cm.", vec![4, 5]),
        ("Hepatic lesion in S4a, 12 mm.", vec![4]),
    ] {
        let read = read_report(text);
        let liver = read.findings.organ(Organ::Liver);
        assert_eq!(
            liver
                .lesions
                .first()
                .and_then(|lesion| lesion.location.clone()),
            Some(Location::LiverSegments(segments)),
            "{text}"
        );
    }
}

#[test]
fn a_pacs_key_image_is_the_key_slice_counted_from_one() {
    let read = read_report("Liver: no tumor.\nKey image: series 3, image 112.");
    let key = read.findings.key_slice.expect("key image read");
    assert_eq!(key.index, 111);
    assert!(read.unread.is_empty(), "{:?}", read.unread);
}

#[test]
fn numbered_impression_items_are_read_without_their_numbers() {
    let report = "IMPRESSION:\n1. Hypoattenuating pancreatic mass in the head, 2.8 x 2.0 cm.\n2. No liver lesion.\n3) Right renal cyst, likely benign.";
    let read = read_report(report);
    assert!(read.unread.is_empty(), "{:?}", read.unread);
    let pancreas = read.findings.organ(Organ::Pancreas);
    assert_eq!(pancreas.tumor, TumorPresence::Yes);
    assert_eq!(
        pancreas.lesions[0].size,
        Some(LesionSize {
            long_cm: 2.8,
            short_cm: Some(2.0)
        })
    );
    assert_eq!(read.findings.organ(Organ::Liver).tumor, TumorPresence::No);
    assert_eq!(
        read.findings.organ(Organ::KidneyRight).tumor,
        TumorPresence::Uncertain
    );
}

#[test]
fn evidence_lines_are_read_as_written_and_faults_named() {
    use keyslice_core::findings::TumorPresence;
    let read = read_report(
        "Liver: 3 cm lesion in segment 7.\nKey slice: 40\nBox on key slice: columns 120-100, rows 80-90\nLesion slices: 35-46",
    );
    let slice_box = read.findings.slice_box.as_ref().expect("a box");
    assert_eq!(
        slice_box.voxels,
        [120, 80, 100, 90],
        "corners kept as written"
    );
    let range = read.findings.lesion_slices.expect("a range");
    assert_eq!((range.first, range.last), (35, 46));
    assert!(read.problems.is_empty());
    let faults = keyslice_core::findings::evidence_problems(&read.findings, [512, 512, 80]);
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert!(faults[0].contains("out of order"), "{faults:?}");

    let elsewhere = read_report("Key slice: 40. Box on slice 41: columns 1-5, rows 1-5.");
    assert!(elsewhere.findings.slice_box.is_none());
    assert!(elsewhere.problems[0].contains("slice 41, not on the key slice 40"));
    let garbled = read_report("Key slice: 40\nBox: upper left corner");
    assert!(garbled.findings.slice_box.is_none());
    assert!(garbled.problems[0].contains("no readable corners"));

    let asked = |answer: &str| read_report(answer).findings.inside_box;
    assert_eq!(asked("Inside the box: lesion."), Some(TumorPresence::Yes));
    assert_eq!(asked("Inside the box: no lesion."), Some(TumorPresence::No));
    assert_eq!(
        asked("Inside the box: possible lesion."),
        Some(TumorPresence::Uncertain)
    );
    assert_eq!(asked("No lesion is visible inside the box."), None);
    assert!(read_report("Inside the box: hard to say").problems[0].contains("neither"));
}

/// Every sentence form the shipped prompts ask a model for, with its placeholders filled in.
fn prompt_sentence_forms() -> Vec<String> {
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../prompts");
    let mut forms = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&folder)
        .expect("prompts folder")
        .map(|entry| entry.expect("entry").path())
        .collect();
    files.sort();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("prompt");
        // Quoted answers: "…".
        forms.extend(
            text.split('"')
                .skip(1)
                .step_by(2)
                .filter(|quoted| quoted.trim_end().ends_with('.'))
                .map(str::to_string),
        );
        // The report template: the lines after FINDINGS: up to the explanation.
        if let Some(template) = text.split("FINDINGS:\n").nth(1) {
            for line in template
                .lines()
                .take_while(|line| !line.starts_with("where "))
            {
                for form in line.split(" (or) ").filter(|form| !form.contains("...")) {
                    forms.push(
                        form.replace("C0-C1", "10-20")
                            .replace("R0-R1", "30-40")
                            .replace("A-B", "50-60")
                            .replace("slice: K", "slice: 57"),
                    );
                }
            }
        }
    }
    assert!(forms.len() >= 8, "{forms:?}");
    forms
}

#[test]
fn every_sentence_form_the_shipped_prompts_ask_for_reads_back() {
    for form in prompt_sentence_forms() {
        let read = keyslice_core::findings::reader::read_report(&form);
        assert!(
            read.unread.is_empty(),
            "{form:?} is not read: {:?}",
            read.unread
        );
    }
    let nothing =
        keyslice_core::findings::reader::read_report("No lesion is visible on this slice.");
    for organ in keyslice_core::findings::Organ::ALL {
        assert_eq!(
            nothing.findings.organ(organ).tumor,
            keyslice_core::findings::TumorPresence::No
        );
    }
}

/// The sentences a verifier may write about one slice (`crates/core/tests/data/verifier_sentences.tsv`:
/// whole-slice and per-organ absence, presence, hedges, an organ that is not on the slice, and
/// the answer about the box) are read as meant: at least 99 % of them, every miss listed.
#[test]
fn a_verifiers_sentences_about_one_slice_are_read_as_meant() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/verifier_sentences.tsv"
    );
    let table = std::fs::read_to_string(path).expect("the sentence table");
    let state = |symbol: &str| match symbol {
        "y" => Some(TumorPresence::Yes),
        "n" => Some(TumorPresence::No),
        "u" => Some(TumorPresence::Uncertain),
        "-" => None,
        other => panic!("unknown state {other:?}"),
    };
    let mut total = 0usize;
    let mut misses = Vec::new();
    for line in table.lines().filter(|line| !line.starts_with('#')) {
        let (expected, sentence) = line.split_once('\t').expect("a tab after the states");
        let symbols: Vec<&str> = expected.split_whitespace().collect();
        assert_eq!(symbols.len(), 5, "{line}");
        let read = read_report(sentence);
        let organs_right = Organ::ALL.iter().zip(&symbols).all(|(&organ, symbol)| {
            read.findings.organ(organ).tumor == state(symbol).unwrap_or(TumorPresence::NotMentioned)
        });
        let box_right = read.findings.inside_box == state(symbols[4]);
        // Whatever a verifier writes about a slice is understood, never left unread.
        if !(organs_right && box_right && read.unread.is_empty() && read.problems.is_empty()) {
            misses.push(format!(
                "{sentence:?}: expected {expected}, read {:?} / box {:?} / unread {}",
                Organ::ALL.map(|organ| read.findings.organ(organ).tumor),
                read.findings.inside_box,
                read.unread.len()
            ));
        }
        total += 1;
    }
    assert!(total >= 200, "only {total} sentences");
    assert!(
        misses.len() * 100 <= total,
        "{} of {total} misread:\n{}",
        misses.len(),
        misses.join("\n")
    );
}
