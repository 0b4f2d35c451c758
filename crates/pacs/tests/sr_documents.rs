//! SR and KOS documents: written from a result, validated by dicom3tools' `dciodvfy`, read
//! by dcmtk's `dsrdump`, and read back by Keyslice to the same findings.
//!
//! The validators run when installed (CI installs them; `KEYSLICE_REQUIRE_DICOM_TOOLS=1`
//! makes their absence a failure).
#![allow(
    clippy::unwrap_used,
    reason = "test code: a helper whose input is not what the test built fails the test"
)]

use std::path::Path;
use std::process::Command;

use keyslice_core::findings::{
    Attenuation, Evidence, Findings, KeySlice, Lesion, LesionAxes, LesionSize, LesionSpans,
    Location, Organ, PancreasPart, SliceBox, SliceRange, TumorPresence,
};
use keyslice_core::prediction::ModelId;
use keyslice_core::scoring::{Consistency, FindingConsistency, Standing};
use keyslice_pacs::sr::read::{Document, read_bytes};
use keyslice_pacs::sr::write::{key_object_selection, result_sr};
use keyslice_pacs::sr::{CaseResult, LesionImage, Observer, StudyContext};
use keyslice_testkit::validators::{dciodvfy_errors, highdicom, tool};

fn source_ct() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/dicom/CT_small.dcm")
}

/// A liver lesion drawn on its own image, a hedged pancreatic one without an image, and
/// the key evidence on slice 57 (`sop`).
fn ai_findings(sop: &str) -> Findings {
    let mut findings = Findings::default();
    let liver = findings.organ_mut(Organ::Liver);
    liver.tumor = TumorPresence::Yes;
    liver.lesions.push(Lesion {
        size: Some(LesionSize {
            long_cm: 3.2,
            short_cm: Some(2.1),
        }),
        location: Some(Location::LiverSegments(vec![7, 8])),
        attenuation: Some(Attenuation::Hypo),
        count: None,
        // Its own evidence is the image it is drawn on.
        evidence: Some(Evidence {
            key_slice: 57,
            slice_box: Some(SliceBox {
                voxels: [34, 44, 55, 62],
                mm: None,
            }),
            slices: Some(SliceRange {
                first: 54,
                last: 60,
            }),
        }),
        spans: LesionSpans::default(),
    });
    findings.organ_mut(Organ::Pancreas).tumor = TumorPresence::Uncertain;
    findings.organ_mut(Organ::Pancreas).lesions.push(Lesion {
        size: Some(LesionSize {
            long_cm: 1.5,
            short_cm: None,
        }),
        location: Some(Location::Pancreas(PancreasPart::Tail)),
        attenuation: None,
        count: Some(2),
        // A slice without a box: no image of its own.
        evidence: Some(Evidence {
            key_slice: 60,
            slice_box: None,
            slices: None,
        }),
        spans: LesionSpans::default(),
    });
    findings.organ_mut(Organ::KidneyLeft).tumor = TumorPresence::No;
    findings.key_slice = Some(KeySlice {
        index: 57,
        z_mm: Some(-112.5),
        sop_instance_uid: Some(sop.to_string()),
        span: None,
    });
    findings.slice_box = Some(SliceBox {
        voxels: [30, 40, 61, 70],
        mm: None,
    });
    findings.lesion_slices = Some(keyslice_core::findings::SliceRange {
        first: 52,
        last: 61,
    });
    findings
}

fn ai_result(sop: &str) -> CaseResult {
    let findings = ai_findings(sop);
    let model = ModelId {
        id: "keyslice-tiny".into(),
        version: "3".into(),
    };
    CaseResult {
        observer: Observer::Device {
            model: model.clone(),
        },
        algorithm: model,
        verifier: Some(ModelId {
            id: "keyslice-tiny".into(),
            version: "3".into(),
        }),
        findings,
        report: Some("Liver: a 3.2 x 2.1 cm hypoattenuating lesion in segment 7/8. Pancreas: possible 1.5 cm lesions in the tail (2). Kidneys: no tumor.".into()),
        local_description: Some("A hypoattenuating liver lesion, 3.1 cm.".into()),
        consistency: Some(Consistency {
            score: 0.75,
            organ: 1.0,
            location: Some(1.0),
            attenuation: Some(1.0),
            size: None,
            region: Some(1.0),
            // Each finding's own standing travels in its measurement group: the liver lesion
            // agrees, the pancreatic one is denied by its evidence.
            findings: vec![
                FindingConsistency {
                    organ: Organ::Liver,
                    lesion: Some(0),
                    standing: Standing::Agrees,
                    score: 0.75,
                },
                FindingConsistency {
                    organ: Organ::Pancreas,
                    lesion: Some(0),
                    standing: Standing::Denied,
                    score: 0.0,
                },
            ],
        }),
        out_of_domain: None,
        // The liver lesion is drawn on its own image; the pancreatic one has none.
        lesion_images: vec![LesionImage {
            organ: Organ::Liver,
            lesion: 0,
            slice: 57,
            sop_instance_uid: sop.to_string(),
            slice_box: SliceBox {
                voxels: [34, 44, 55, 62],
                mm: None,
            },
            axes: Some(LesionAxes {
                long: [[35.5, 45.25], [53.75, 61.5]],
                short: [[49.5, 47.75], [40.25, 58.5]],
            }),
        }],
    }
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one document set through four readers, in turn"
)]
fn result_sr_and_key_images_pass_dciodvfy_dsrdump_and_read_back_to_the_same_findings() {
    let study = StudyContext::from_file(&source_ct()).unwrap();
    assert!(!study.study_uid.is_empty());
    let sop = "1.3.6.1.4.1.5962.1.1.1.1.1.20040119072730.12322";
    let ai = ai_result(sop);
    let sr = result_sr(&study, &ai).unwrap();
    let kos = key_object_selection(&study, &ai).unwrap();
    let mut correction_findings = ai.findings.clone();
    correction_findings.organ_mut(Organ::Pancreas).tumor = TumorPresence::No;
    correction_findings
        .organ_mut(Organ::Pancreas)
        .lesions
        .clear();
    let review = CaseResult::correction(&ai, "Reviewer^Ana", &correction_findings);
    let review_sr = result_sr(&study, &review).unwrap();
    assert_ne!(review_sr.series_uid, sr.series_uid);

    let dir = tempfile::tempdir().unwrap();
    let keep = std::env::var_os("KEYSLICE_KEEP_SR").map(std::path::PathBuf::from);
    let out = keep.as_deref().unwrap_or(dir.path());
    std::fs::create_dir_all(out).unwrap();
    let paths: Vec<_> = [
        ("ai_sr.dcm", &sr),
        ("ai_kos.dcm", &kos),
        ("review_sr.dcm", &review_sr),
    ]
    .iter()
    .map(|(name, written)| {
        let path = out.join(name);
        std::fs::write(&path, &written.bytes).unwrap();
        path
    })
    .collect();

    // Read back by Keyslice.
    let Document::Result(read) = read_bytes(&sr.bytes).unwrap() else {
        panic!("the SR reads as a result")
    };
    assert_eq!(read.study_uid, study.study_uid);
    assert_eq!(read.content.findings, ai.findings);
    assert_eq!(read.content.consistency, ai.consistency);
    assert_eq!(read.content.local_description, ai.local_description);
    assert_eq!(read.content.report, ai.report);
    assert_eq!(read.content.algorithm, ai.algorithm);
    assert_eq!(read.content.verifier, ai.verifier);
    assert_eq!(read.content.observer, ai.observer);
    assert_eq!(read.content.lesion_images, ai.lesion_images);
    assert_eq!(read.content, ai, "the whole result reads back");
    let Document::Result(read_review) = read_bytes(&review_sr.bytes).unwrap() else {
        panic!("the review SR reads as a result")
    };
    assert_eq!(
        read_review.content.observer,
        Observer::Person {
            name: "Reviewer^Ana".into()
        }
    );
    assert_eq!(read_review.content.findings, review.findings);
    // The liver lesion the reviewer kept is still drawn on its image.
    assert_eq!(read_review.content.lesion_images, ai.lesion_images);
    // The reviewer's document cites the AI result it started from once, not in every
    // finding group as a device's result does.
    assert_eq!(read_review.content.algorithm, ai.algorithm);
    let mentions = |bytes: &[u8]| {
        bytes
            .windows(ai.algorithm.id.len())
            .filter(|window| *window == ai.algorithm.id.as_bytes())
            .count()
    };
    assert!(
        mentions(&review_sr.bytes) + 3 <= mentions(&sr.bytes),
        "review {} against AI {}",
        mentions(&review_sr.bytes),
        mentions(&sr.bytes)
    );
    let Document::KeyImages(keys) = read_bytes(&kos.bytes).unwrap() else {
        panic!("the KOS reads as key images")
    };
    assert_eq!(keys.content.images, vec![sop.to_string()]);
    assert_eq!(keys.content.title, "Of Interest");

    if tool("dciodvfy") {
        for path in &paths {
            let (errors, text) = dciodvfy_errors(path);
            assert!(errors.is_empty(), "{}:\n{text}", path.display());
        }
    }
    if tool("dsrdump") {
        for path in &paths {
            let output = Command::new("dsrdump")
                .args(["+Pu", "+Pt"])
                .arg(path)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&output.stdout);
            assert!(
                output.status.success(),
                "{}: {}",
                path.display(),
                String::from_utf8_lossy(&output.stderr)
            );
            if path.ends_with("ai_sr.dcm") {
                assert!(text.contains("Imaging Measurement Report"), "{text}");
                assert!(text.contains("TID 1500"), "{text}");
                assert!(text.contains("Long Axis") && text.contains("3.2"), "{text}");
                assert!(text.contains(sop), "{text}");
            }
        }
    }
    if highdicom() {
        let parsed = read_with_highdicom(&paths[0]);
        assert_eq!(parsed["class"], "Comprehensive3DSR");
        // The liver lesion measured as a reader measures it, on its own image: each axis a
        // length with the line it was measured along, the box its slice index comes from.
        let on_image = |points: serde_json::Value| serde_json::json!([["POLYLINE", points, sop]]);
        assert_eq!(
            parsed["groups"],
            serde_json::json!([{
                "tracking_identifier": "liver lesion 1, 3.2 cm",
                "finding_sites": ["Liver"],
                "measurements": {
                    "Long Axis": [3.2, "cm"],
                    "Short Axis": [2.1, "cm"],
                    "Key evidence slice index": [57.0, "1"],
                    "First slice index of the lesion": [54.0, "1"],
                    "Last slice index of the lesion": [60.0, "1"],
                    "Report-evidence consistency": [0.75, "1"],
                },
                "drawn": {
                    "Long Axis": on_image(serde_json::json!([36.0, 45.75, 54.25, 62.0])),
                    "Short Axis": on_image(serde_json::json!([50.0, 48.25, 40.75, 59.0])),
                    "Key evidence slice index": on_image(serde_json::json!(
                        [34.0, 44.0, 56.0, 44.0, 56.0, 63.0, 34.0, 63.0, 34.0, 44.0]
                    )),
                },
                "qualitative": [
                    ["Attenuation", "Hypoattenuating"],
                    ["Location in organ", "Couinaud segment 7"],
                    ["Location in organ", "Couinaud segment 8"]
                ],
            }]),
            "{parsed}"
        );
        // Presence per organ, and the lesion without an image, are qualitative evaluations.
        assert_eq!(
            parsed["evaluations"],
            serde_json::json!([
                ["Tumor presence", "Present", "Liver"],
                ["Tumor presence", "Equivocal", "Pancreas"],
                ["Finding", "Neoplasm", "Pancreas"],
                ["Tumor presence", "Absent", "Kidney"],
            ]),
            "{parsed}"
        );
        let roi_of = |id: &str| {
            parsed["rois"]
                .as_array()
                .unwrap()
                .iter()
                .find(|g| g["tracking_identifier"] == id)
                .unwrap_or_else(|| panic!("no region group {id}: {parsed}"))
                .clone()
        };
        let roi = roi_of("key evidence (the slice the report rests on)");
        assert_eq!(roi["image"], sop);
        assert_eq!(roi["graphic_type"], "POLYLINE");
        assert_eq!(
            roi["points"],
            serde_json::json!([30.0, 40.0, 62.0, 40.0, 62.0, 71.0, 30.0, 71.0, 30.0, 40.0])
        );
        assert_eq!(
            roi["measurements"]["Report-evidence consistency"],
            serde_json::json!([0.75, "1"])
        );
    }
}

/// What highdicom reads in the SR at `path` (`tests/pacs/read_with_highdicom.py`).
fn read_with_highdicom(path: &Path) -> serde_json::Value {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/pacs/read_with_highdicom.py");
    let output = Command::new("python3")
        .arg(&script)
        .arg(path)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// A result whose values no real finding has is refused with the field named.
#[test]
fn values_outside_their_meaning_are_refused_with_the_field_named() {
    type Damage = fn(&mut CaseResult);
    let study = StudyContext::from_file(&source_ct()).unwrap();
    let sop = "1.3.6.1.4.1.5962.1.1.1.1.1.20040119072730.12322";
    let damages: [(Damage, &str); 6] = [
        (
            |result| {
                result.findings.organ_mut(Organ::Liver).lesions[0].size = Some(LesionSize {
                    long_cm: 1e300,
                    short_cm: None,
                });
            },
            "the long axis is 1e300",
        ),
        (
            |result| {
                result.findings.organ_mut(Organ::Liver).lesions[0].size = Some(LesionSize {
                    long_cm: 2.0,
                    short_cm: Some(-1.0),
                });
            },
            "the short axis is -1",
        ),
        (
            |result| result.consistency.as_mut().unwrap().score = 1e30,
            "the consistency is 1e30",
        ),
        (
            |result| result.consistency.as_mut().unwrap().location = Some(f64::NAN),
            "the location consistency is NaN",
        ),
        (
            |result| result.findings.key_slice.as_mut().unwrap().index = u32::MAX,
            "the key slice index is 4.294967295e9",
        ),
        (
            |result| {
                result.findings.lesion_slices = Some(keyslice_core::findings::SliceRange {
                    first: 61,
                    last: 52,
                });
            },
            "runs backwards",
        ),
    ];
    for (damage, named) in damages {
        let mut result = ai_result(sop);
        damage(&mut result);
        let written = result_sr(&study, &result).unwrap();
        let error = read_bytes(&written.bytes).unwrap_err();
        assert!(error.reason.contains(named), "{named}: {error}");
    }
}

/// Explicit VR little endian element bytes: tag, VR, length (long form for SQ, UT, UN, OB).
fn element(group: u16, element: u16, vr: [u8; 2], value: &[u8], length: Option<u32>) -> Vec<u8> {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&group.to_le_bytes());
    bytes.extend_from_slice(&element.to_le_bytes());
    bytes.extend_from_slice(&vr);
    let length = length.unwrap_or(u32::try_from(value.len()).unwrap());
    if matches!(&vr, b"SQ" | b"UT" | b"UN" | b"OB") {
        bytes.extend_from_slice(&[0, 0]);
        bytes.extend_from_slice(&length.to_le_bytes());
    } else {
        bytes.extend_from_slice(&u16::try_from(length).unwrap().to_le_bytes());
    }
    bytes.extend_from_slice(value);
    bytes
}

fn item_tag(element: u16, length: u32) -> Vec<u8> {
    let mut bytes = 0xFFFEu16.to_le_bytes().to_vec();
    bytes.extend_from_slice(&element.to_le_bytes());
    bytes.extend_from_slice(&length.to_le_bytes());
    bytes
}

/// A Comprehensive 3D SR file: a valid header, then `content` as the dataset's tail.
fn hostile_sr(content: &[u8]) -> Vec<u8> {
    let syntax = b"1.2.840.10008.1.2.1\0";
    let class = b"1.2.840.10008.5.1.4.1.1.88.34\0";
    let mut meta = element(0x0002, 0x0001, *b"OB", &[0, 1], None);
    meta.extend(element(0x0002, 0x0002, *b"UI", class, None));
    meta.extend(element(0x0002, 0x0003, *b"UI", b"1.2.3.4\0", None));
    meta.extend(element(0x0002, 0x0010, *b"UI", syntax, None));
    let mut file = vec![0u8; 128];
    file.extend_from_slice(b"DICM");
    file.extend(element(
        0x0002,
        0x0000,
        *b"UL",
        &u32::try_from(meta.len()).unwrap().to_le_bytes(),
        None,
    ));
    file.extend(meta);
    file.extend(element(0x0008, 0x0016, *b"UI", class, None));
    file.extend(element(0x0008, 0x0018, *b"UI", b"1.2.3.4\0", None));
    file.extend(element(0x0040, 0xA040, *b"CS", b"CONTAINER ", None));
    file.extend_from_slice(content);
    file
}

#[test]
fn deep_huge_or_endless_sr_documents_are_refused_before_they_are_parsed() {
    let dir = tempfile::tempdir().unwrap();
    let check = |name: &str, bytes: &[u8], named: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let started = std::time::Instant::now();
        let error = keyslice_pacs::sr::read::read_file(&path)
            .unwrap_err()
            .to_string();
        assert!(error.contains(named), "{name}: {error}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "{name}"
        );
    };
    // Content items each inside the last: 1 000, and 100 000.
    let nested = |depth: usize| {
        let mut nested = Vec::new();
        for _ in 0..depth {
            nested.extend(element(0x0040, 0xA730, *b"SQ", &[], Some(u32::MAX)));
            nested.extend(item_tag(0xE000, u32::MAX));
            nested.extend(element(0x0040, 0xA040, *b"CS", b"CONTAINER ", None));
        }
        for _ in 0..depth {
            nested.extend(item_tag(0xE00D, 0));
            nested.extend(item_tag(0xE0DD, 0));
        }
        nested
    };
    check(
        "nested.dcm",
        &hostile_sr(&nested(1_000)),
        "nested more than",
    );
    check(
        "deep.dcm",
        &hostile_sr(&nested(100_000)),
        "more than the 4 MiB",
    );
    // The last element declares nearly 4 GiB.
    let huge = element(0x0040, 0xA160, *b"UT", b"lesion", Some(0xFFFF_FFF0));
    check("huge.dcm", &hostile_sr(&huge), "(0040,A160)");
    // 30 000 content items side by side, and a million.
    let flat = |count: usize| {
        let mut items = element(0x0040, 0xA730, *b"SQ", &[], Some(u32::MAX));
        for _ in 0..count {
            items.extend(item_tag(0xE000, u32::MAX));
            items.extend(element(0x0040, 0xA040, *b"CS", b"TEXT", None));
            items.extend(item_tag(0xE00D, 0));
        }
        items.extend(item_tag(0xE0DD, 0));
        items
    };
    check(
        "many.dcm",
        &hostile_sr(&flat(30_000)),
        "more than 20000 sequence items",
    );
    check(
        "million.dcm",
        &hostile_sr(&flat(1_000_000)),
        "more than the 4 MiB",
    );
}

#[test]
fn a_signed_review_never_says_no_tumor_beside_a_lesion() {
    let study = StudyContext::from_file(&source_ct()).unwrap();
    let sop = "1.3.6.1.4.1.5962.1.1.1.1.1.20040119072730.12322";
    let ai = ai_result(sop);
    // The reviewer set the liver to no tumor; the model's lesion was still in the findings.
    let mut reviewed = ai.findings.clone();
    reviewed.organ_mut(Organ::Liver).tumor = TumorPresence::No;
    let correction = CaseResult::correction(&ai, "Ana", &reviewed);
    assert!(correction.findings.organ(Organ::Liver).lesions.is_empty());
    let written = result_sr(&study, &correction).unwrap();
    let Document::Result(read) = read_bytes(&written.bytes).unwrap() else {
        panic!("a result");
    };
    assert!(read.content.findings.organ(Organ::Liver).lesions.is_empty());
    assert!(
        !read.content.summary().contains("no tumor ("),
        "{}",
        read.content.summary()
    );
    // A document written elsewhere that does say it is refused, naming the organ.
    let mut contradicting = correction.clone();
    contradicting.findings = reviewed;
    let written = result_sr(&study, &contradicting).unwrap();
    let error = read_bytes(&written.bytes).unwrap_err();
    assert!(
        error
            .reason
            .contains("liver has no tumor but lists a lesion"),
        "{error}"
    );
}

/// A result the model called meaningless for its CT (published only when forced) says so in
/// its SR and its key images: read back with the label and reasons, titled "For Research",
/// its consistency never claimed; and both documents stay valid.
#[test]
fn a_result_out_of_the_models_depth_carries_its_standing_into_both_documents() {
    use keyslice_core::prediction::OutOfDomain;
    let study = StudyContext::from_file(&source_ct()).unwrap();
    let sop = "1.3.6.1.4.1.5962.1.1.1.1.1.20040119072730.12322";
    let mut ai = ai_result(sop);
    ai.out_of_domain = Some(OutOfDomain::new(
        "keyslice-tiny",
        vec![
            "voxels 0.66 mm, trained on 1.5 mm".into(),
            "no kidneys found".into(),
        ],
    ));
    let sr = result_sr(&study, &ai).unwrap();
    let kos = key_object_selection(&study, &ai).unwrap();
    let Document::Result(read) = read_bytes(&sr.bytes).unwrap() else {
        panic!("the SR reads as a result")
    };
    let standing = read
        .content
        .out_of_domain
        .clone()
        .expect("the standing read back");
    assert_eq!(standing.label, OutOfDomain::LABEL);
    assert_eq!(
        standing.reasons,
        ["voxels 0.66 mm, trained on 1.5 mm", "no kidneys found"]
    );
    assert_eq!(
        read.content
            .to_prediction("c", keyslice_core::prediction::StoredResult::default())
            .out_of_domain,
        Some(standing)
    );
    let Document::KeyImages(keys) = read_bytes(&kos.bytes).unwrap() else {
        panic!("the KOS reads as key images")
    };
    assert_eq!(keys.content.title, "For Research");
    assert!(keys.content.description.starts_with(OutOfDomain::LABEL));
    assert!(!keys.content.description.contains("consistency"));
    // A result within the model's depth has no standing line.
    let Document::Result(plain) =
        read_bytes(&result_sr(&study, &ai_result(sop)).unwrap().bytes).unwrap()
    else {
        panic!("the SR reads as a result")
    };
    assert!(plain.content.out_of_domain.is_none());
    if tool("dciodvfy") {
        let folder = tempfile::tempdir().unwrap();
        for (name, written) in [("sr.dcm", &sr), ("kos.dcm", &kos)] {
            let path = folder.path().join(name);
            std::fs::write(&path, &written.bytes).unwrap();
            let (errors, text) = dciodvfy_errors(&path);
            assert!(errors.is_empty(), "{name}:\n{text}");
        }
    }
}

/// A lesion whose axes were not measured on its image (a vision-language model's evidence),
/// or whose size a reviewer changed, is drawn by its box alone as the group's image region;
/// the axes of a lesion whose size the reviewer kept stay.
#[test]
fn a_lesion_without_axes_is_drawn_by_its_box() {
    let study = StudyContext::from_file(&source_ct()).unwrap();
    let sop = "1.3.6.1.4.1.5962.1.1.1.1.1.20040119072730.12322";
    let ai = ai_result(sop);
    let mut resized = ai.findings.clone();
    if let Some(size) = &mut resized.organ_mut(Organ::Liver).lesions[0].size {
        size.long_cm = 3.6;
    }
    let review = CaseResult::correction(&ai, "Reviewer^Ana", &resized);
    assert_eq!(
        review.lesion_images[0].axes, None,
        "the axes no longer measure it"
    );
    let kept = CaseResult::correction(&ai, "Reviewer^Ana", &ai.findings);
    assert_eq!(kept.lesion_images, ai.lesion_images);
    let mut no_axes = ai.clone();
    no_axes.lesion_images[0].axes = None;
    let dir = tempfile::tempdir().unwrap();
    for (name, result, label) in [
        ("review", &review, "liver lesion 1, 3.6 cm"),
        ("no_axes", &no_axes, "liver lesion 1, 3.2 cm"),
    ] {
        let sr = result_sr(&study, result).unwrap();
        let Document::Result(read) = read_bytes(&sr.bytes).unwrap() else {
            panic!("the SR reads as a result")
        };
        assert_eq!(read.content.lesion_images, result.lesion_images);
        let path = dir.path().join(format!("{name}.dcm"));
        std::fs::write(&path, &sr.bytes).unwrap();
        if tool("dciodvfy") {
            let (errors, text) = dciodvfy_errors(&path);
            assert!(errors.is_empty(), "{text}");
        }
        if highdicom() {
            let parsed = read_with_highdicom(&path);
            assert_eq!(parsed["groups"], serde_json::json!([]), "{parsed}");
            let lesion = parsed["rois"]
                .as_array()
                .unwrap()
                .iter()
                .find(|group| group["tracking_identifier"] == label)
                .unwrap_or_else(|| panic!("no region group {label}: {parsed}"));
            assert_eq!(lesion["image"], sop);
            assert_eq!(
                lesion["points"],
                serde_json::json!([34.0, 44.0, 56.0, 44.0, 56.0, 63.0, 34.0, 63.0, 34.0, 44.0])
            );
            assert_eq!(lesion["finding_sites"], serde_json::json!(["Liver"]));
            assert_eq!(
                lesion["measurements"]["Short Axis"],
                serde_json::json!([2.1, "cm"])
            );
        }
    }
}

/// A key slice without a box is still drawn (a point at the slice's centre, selected from
/// it): no measurement group without an image region, and the document stays valid and reads
/// back the same.
#[test]
fn a_key_slice_without_a_box_is_marked_on_its_image() {
    let study = StudyContext::from_file(&source_ct()).unwrap();
    assert!(study.image_size.is_some(), "the CT states its size");
    let sop = "1.3.6.1.4.1.5962.1.1.1.1.1.20040119072730.12322";
    let mut ai = ai_result(sop);
    ai.findings.slice_box = None;
    // No box anywhere: the lesion's evidence is its slice and slices alone.
    ai.lesion_images.clear();
    for lesion in &mut ai.findings.organ_mut(Organ::Liver).lesions {
        if let Some(evidence) = &mut lesion.evidence {
            evidence.slice_box = None;
        }
    }
    let sr = result_sr(&study, &ai).unwrap();
    let Document::Result(read) = read_bytes(&sr.bytes).unwrap() else {
        panic!("the SR reads as a result")
    };
    assert_eq!(read.content, ai);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no_box.dcm");
    std::fs::write(&path, &sr.bytes).unwrap();
    if tool("dciodvfy") {
        let (errors, text) = dciodvfy_errors(&path);
        assert!(errors.is_empty(), "{text}");
    }
    if highdicom() {
        let parsed = read_with_highdicom(&path);
        let groups = parsed["groups"].as_array().unwrap();
        assert_eq!(groups.len(), 1, "{parsed}");
        assert_eq!(
            groups[0]["tracking_identifier"],
            "key evidence (the slice the report rests on)"
        );
    }
    // Every group has a region selected from an image.
    let text = String::from_utf8_lossy(&sr.bytes);
    assert!(text.contains("POINT"), "the slice is marked");
}

/// Whether OHIF's SR extension is installed for `scripts/ohif/check_sr.js` (required with
/// `KEYSLICE_REQUIRE_DICOM_TOOLS`: `npm ci --prefix scripts/ohif --legacy-peer-deps`).
fn ohif() -> bool {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/ohif");
    let found = root
        .join("node_modules/@ohif/extension-cornerstone-dicom-sr")
        .is_dir()
        && Command::new("node").arg("--version").output().is_ok();
    assert!(
        found || std::env::var_os("KEYSLICE_REQUIRE_DICOM_TOOLS").is_none(),
        "OHIF's SR extension is required (KEYSLICE_REQUIRE_DICOM_TOOLS is set): npm ci --prefix scripts/ohif --legacy-peer-deps"
    );
    found
}

/// What `scripts/ohif/check_sr.js` says of each document, beside the source CT.
fn ohif_results(documents: &[(&str, keyslice_pacs::sr::write::Written)]) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let ct = dir.path().join("ct");
    std::fs::create_dir_all(&ct).unwrap();
    std::fs::copy(source_ct(), ct.join("CT_small.dcm")).unwrap();
    let mut command = Command::new("node");
    command
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/ohif/check_sr.js"))
        .arg(&ct);
    for (name, written) in documents {
        let path = dir.path().join(format!("{name}.dcm"));
        std::fs::write(&path, &written.bytes).unwrap();
        command.arg(path);
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Every SR Keyslice writes (the AI's, a reviewer's, a reader study's read, one whose key
/// slice has no box) loads in OHIF v3's own SR loader, and each lesion with an image of its
/// own and the key evidence are drawn on their images with their labels.
#[test]
fn ohif_loads_every_sr_and_draws_each_lesion_on_its_image() {
    use keyslice_pacs::sr::StudyReadMark;
    use keyslice_pacs::sr::write::study_read_sr;
    if !ohif() {
        return;
    }
    let study = StudyContext::from_file(&source_ct()).unwrap();
    let sop = "1.3.6.1.4.1.5962.1.1.1.1.1.20040119072730.12322";
    let ai = ai_result(sop);
    let mut corrected = ai.findings.clone();
    corrected.organ_mut(Organ::Pancreas).tumor = TumorPresence::No;
    corrected.organ_mut(Organ::Pancreas).lesions.clear();
    let review = CaseResult::correction(&ai, "Reviewer^Ana", &corrected);
    let mut no_box = ai.clone();
    no_box.findings.slice_box = None;
    let mut read = CaseResult::correction(&ai, "Reader^Ben", &ai.findings);
    read.lesion_images.clear();
    read.findings.slice_box = None;
    for organ in [Organ::Liver, Organ::Pancreas] {
        read.findings.organ_mut(organ).lesions.clear();
    }
    let mark = StudyReadMark {
        study: "trial".into(),
        arm: "evidence".into(),
        session: 0,
        case: "case0".into(),
    };
    let documents = [
        ("ai", result_sr(&study, &ai).unwrap()),
        ("review", result_sr(&study, &review).unwrap()),
        ("no-box", result_sr(&study, &no_box).unwrap()),
        (
            "read",
            study_read_sr(&study, &read, &mark, ("20261207".into(), "101500".into())).unwrap(),
        ),
    ];
    let results = ohif_results(&documents);
    assert_eq!(results.len(), documents.len());
    let drawn = |result: &serde_json::Value, label: &str| {
        result["drawn"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["label"] == label && d["image"] == sop)
    };
    for result in &results {
        assert!(result.get("error").is_none(), "{result}");
        let measurements = result["measurements"].as_array().unwrap();
        assert!(!measurements.is_empty(), "{result}");
        // Every measurement OHIF found is drawn on the image it names.
        assert_eq!(
            result["drawn"].as_array().unwrap().len(),
            measurements.len(),
            "{result}"
        );
        assert!(
            measurements
                .iter()
                .any(|m| m["tracking"] == "key evidence (the slice the report rests on)"),
            "{result}"
        );
    }
    // The liver lesion, labelled with its size, on its own image, in the AI's and the
    // reviewer's documents: its long and short axes and its box, three lines.
    for result in &results[..2] {
        assert!(drawn(result, "3.20 cm"), "{result}");
        assert!(
            result["drawn"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d["label"] == "3.20 cm"
                    && d["shapes"] == serde_json::json!({"POLYLINE": 3})),
            "{result}"
        );
        assert!(
            result["measurements"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["tracking"] == "liver lesion 1, 3.2 cm" && m["image"] == sop),
            "{result}"
        );
    }
    // A key slice without a box, and a reader's key slice, are marked by a point.
    for result in &results[2..] {
        assert!(
            result["drawn"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d["graphicType"] == "POINT" && d["image"] == sop),
            "{result}"
        );
    }
}
