//! SR and KOS documents: written from a result, validated by dicom3tools' `dciodvfy`, read
//! by dcmtk's `dsrdump`, and read back by Keyslice to the same findings.
//!
//! The validators run when installed (CI installs them; `KEYSLICE_REQUIRE_DICOM_TOOLS=1`
//! makes their absence a failure).

use std::path::Path;
use std::process::Command;

use keyslice_core::findings::{
    Attenuation, Findings, KeySlice, Lesion, LesionSize, LesionSpans, Location, Organ,
    PancreasPart, SliceBox, TumorPresence,
};
use keyslice_core::prediction::ModelId;
use keyslice_core::scoring::Consistency;
use keyslice_pacs::sr::read::{Document, read_bytes};
use keyslice_pacs::sr::write::{key_object_selection, result_sr};
use keyslice_pacs::sr::{CaseResult, Observer, StudyContext};

fn source_ct() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/dicom/CT_small.dcm")
}

fn ai_result(sop: &str) -> CaseResult {
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
        }),
    }
}

fn tool(name: &str) -> bool {
    let found = Command::new(name).arg("-h").output().is_ok();
    assert!(
        found || std::env::var_os("KEYSLICE_REQUIRE_DICOM_TOOLS").is_none(),
        "{name} is required (KEYSLICE_REQUIRE_DICOM_TOOLS is set) but not installed"
    );
    found
}

/// dciodvfy's errors (lines starting with `Error`); it prints warnings too, which are kept
/// for the message.
fn dciodvfy_errors(path: &Path) -> (Vec<String>, String) {
    let output = Command::new("dciodvfy")
        .arg(path)
        .output()
        .expect("dciodvfy runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let errors = text
        .lines()
        .filter(|line| line.starts_with("Error"))
        .map(str::to_string)
        .collect();
    (errors, text)
}

#[test]
#[allow(clippy::too_many_lines)] // one document set through four readers, in turn
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
    assert_eq!(read_review.content.algorithm, ai.algorithm);
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
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/pacs/read_with_highdicom.py");
        let output = Command::new("python3")
            .arg(&script)
            .arg(&paths[0])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let parsed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(parsed["class"], "Comprehensive3DSR");
        let group = |id: &str| {
            parsed["groups"]
                .as_array()
                .unwrap()
                .iter()
                .find(|g| g["tracking_identifier"] == id)
                .unwrap_or_else(|| panic!("no group {id}: {parsed}"))
                .clone()
        };
        assert_eq!(
            group("liver")["qualitative"],
            serde_json::json!([["Tumor presence", "Present"]])
        );
        assert_eq!(
            group("pancreas")["qualitative"],
            serde_json::json!([["Tumor presence", "Equivocal"]])
        );
        assert_eq!(
            group("kidney_left")["finding_sites"],
            serde_json::json!(["Left Kidney"])
        );
        let lesion = group("liver lesion 1");
        assert_eq!(
            lesion["measurements"]["Long Axis"],
            serde_json::json!([3.2, "cm"])
        );
        assert_eq!(
            lesion["measurements"]["Short Axis"],
            serde_json::json!([2.1, "cm"])
        );
        assert_eq!(
            lesion["qualitative"],
            serde_json::json!([
                ["Attenuation", "Hypoattenuating"],
                ["Location in organ", "Couinaud segment 7"],
                ["Location in organ", "Couinaud segment 8"]
            ])
        );
        let roi = &parsed["rois"][0];
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

/// Whether python3 with highdicom is there (required with `KEYSLICE_REQUIRE_DICOM_TOOLS`).
fn highdicom() -> bool {
    let found = Command::new("python3")
        .args(["-c", "import highdicom"])
        .output()
        .is_ok_and(|output| output.status.success());
    assert!(
        found || std::env::var_os("KEYSLICE_REQUIRE_DICOM_TOOLS").is_none(),
        "python3 with highdicom is required (KEYSLICE_REQUIRE_DICOM_TOOLS is set): pip install highdicom"
    );
    found
}
