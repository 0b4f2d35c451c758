//! The pipeline with the embedded `keyslice-tiny`: `keyslice analyze` prints a Prediction that
//! `score` reads; DICOM key slices carry their SOP Instance UID; garbled model output and
//! impossible key slices are kept and flagged, never fatal; a bad model folder is named.

mod common;

use std::fmt::Write as _;

use common::{SliceSpec, bright_block, keyslice, score_predictions, text, write_series};
use keyslice::infer::embedded::grid::{GridSpec, ModelGrid};
use keyslice::infer::embedded::{TinyModel, TinyVerifier};
use keyslice::infer::{
    Diagnoser, Diagnosis, InferError, ModelId, PredictionKeySlice, Verifier, run_pipeline,
};
use keyslice::io::{LoadOptions, load_study};
use keyslice::volume::Volume;
use keyslice::volume::demo::demo_abdomen;

/// `cases` phantoms of seed 31 on a `matrix`² grid in `data`.
fn phantoms(data: &std::path::Path, cases: u32, matrix: u16) {
    let made = keyslice(&[
        "phantom",
        "--out",
        data.to_str().expect("utf-8"),
        "--cases",
        &cases.to_string(),
        "--seed",
        "31",
        "--matrix",
        &matrix.to_string(),
    ]);
    assert!(made.status.success(), "{}", text(&made.stderr));
}

#[test]
fn analyze_prints_a_prediction_that_score_reads() {
    let folder = tempfile::tempdir().expect("temp dir");
    let data = folder.path().join("cases");
    phantoms(&data, 2, 96);
    let mut records = Vec::new();
    for case in ["PHANTOM_31_0000", "PHANTOM_31_0001"] {
        let ct = data.join(case).join("ct.nii.gz");
        let result = keyslice(&["analyze", ct.to_str().expect("utf-8"), "--json"]);
        assert!(result.status.success(), "{}", text(&result.stderr));
        let stdout = text(&result.stdout);
        let json: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
        assert_eq!(json["version"], 1);
        assert_eq!(json["case_id"], case);
        assert_eq!(json["diagnoser"]["id"], "keyslice-tiny");
        assert_eq!(json["verifier"]["id"], "keyslice-tiny-verifier");
        assert!(
            json["report"]
                .as_str()
                .expect("text")
                .starts_with("FINDINGS:")
        );
        for organ in ["liver", "pancreas", "kidney_left", "kidney_right"] {
            let state = json["findings"]["organs"][organ]["tumor"]
                .as_str()
                .expect("state");
            assert!(["yes", "no"].contains(&state), "{organ}: {state}");
        }
        assert!(json["timings_ms"]["total"].as_f64().expect("number") > 0.0);
        if let Some(index) = json["key_slice"]["index"].as_u64() {
            assert!(json["local_description"].is_string(), "{json}");
            let score = json["consistency"]["score"].as_f64().expect("score");
            assert!((0.0..=1.0).contains(&score), "{score}");
            let manifest: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(data.join("manifest.json")).expect("manifest"),
            )
            .expect("JSON");
            let slices = manifest["cases"]
                .as_array()
                .and_then(|cases| cases.iter().find(|c| c["case_id"] == case))
                .map(|c| c["dims"][2].as_u64().expect("slices"))
                .expect("listed");
            assert!(index < slices, "{index} of {slices}");
        }
        records.push(json);
    }
    let json = score_predictions(folder.path(), &records, &data);
    assert_eq!(json["missing_cases"].as_array().map(Vec::len), Some(0));

    // The readable form names the model and what it is.
    let ct = data.join("PHANTOM_31_0000").join("ct.nii.gz");
    let readable = keyslice(&["analyze", ct.to_str().expect("utf-8")]);
    assert!(readable.status.success(), "{}", text(&readable.stderr));
    let stdout = text(&readable.stdout);
    assert!(
        stdout.contains("case PHANTOM_31_0000: keyslice-tiny"),
        "{stdout}"
    );
    assert!(stdout.contains("not for clinical use"), "{stdout}");
    assert!(stdout.contains("key slice"), "{stdout}");
}

#[test]
fn a_dicom_key_slice_carries_its_sop_instance_uid_and_z() {
    let folder = tempfile::tempdir().expect("temp dir");
    let slices: Vec<(String, SliceSpec)> = (0..3)
        .map(|n| {
            (
                format!("IMG{}", 9 - n),
                SliceSpec::axial("1.2.3.9", n, 10.0 + 2.5 * n as f64, 100),
            )
        })
        .collect();
    write_series(folder.path(), &slices);
    let study = load_study(folder.path(), &LoadOptions::default()).expect("series loads");
    let key = PredictionKeySlice::of(&study.volume, 1);
    assert_eq!(key.sop_instance_uid.as_deref(), Some("1.2.3.9.1"));
    assert!((key.z_mm - 12.5).abs() < 1e-6, "{}", key.z_mm);
}

/// A diagnoser that writes what it is given: stands in for a misbehaving model (a real
/// network cannot be made to write nonsense on demand).
struct Scripted(&'static str, Option<u32>);

impl Diagnoser for Scripted {
    fn model_id(&self) -> ModelId {
        ModelId {
            id: "scripted".into(),
            version: "0".into(),
        }
    }

    fn diagnose(&self, _volume: &Volume) -> Result<Diagnosis, InferError> {
        Ok(Diagnosis {
            report: self.0.to_string(),
            key_slice: self.1,
            ..Diagnosis::default()
        })
    }
}

#[test]
fn garbled_output_is_kept_and_flagged_and_a_bad_key_slice_is_a_warning() {
    let model = TinyModel::embedded().expect("the embedded model loads");
    let verifier = TinyVerifier(&model);
    let volume = demo_abdomen();
    let garbled = "Liver: 2.1 cm hypodense lesion in segment 7. zxq ~~ lorem ipsum.";
    let prediction = run_pipeline(
        "demo",
        &volume,
        &Scripted(garbled, Some(46)),
        Some(&verifier as &dyn Verifier),
    )
    .expect("never fatal");
    assert_eq!(
        prediction.report, garbled,
        "the model's text is kept as written"
    );
    assert!(
        prediction
            .warnings
            .iter()
            .any(|w| w.contains("not understood") && w.contains("lorem")),
        "{:?}",
        prediction.warnings
    );
    assert!(
        prediction
            .findings
            .organ(keyslice::findings::Organ::Liver)
            .tumor
            .as_positive()
    );
    assert_eq!(prediction.key_slice.as_ref().map(|k| k.index), Some(46));
    assert!(prediction.local_description.is_some());
    assert!(prediction.consistency.is_some());

    let outside = run_pipeline(
        "demo",
        &volume,
        &Scripted("No tumor.", Some(500)),
        Some(&verifier),
    )
    .expect("never fatal");
    assert!(outside.key_slice.is_none());
    assert!(outside.local_description.is_none());
    assert!(
        outside
            .warnings
            .iter()
            .any(|w| w.contains("500") && w.contains("outside")),
        "{:?}",
        outside.warnings
    );

    // Sixty lesions in the liver and a box around the whole slice: capped and refused, the
    // organ named, never shown as agreeing.
    let [columns, rows, _] = volume.dims();
    let mut flood = String::new();
    for k in 1..=60 {
        let _ = writeln!(flood, "Liver lesion {k}: Size: 1.{} x 1.0 cm.", k % 10);
    }
    let _ = write!(
        flood,
        "Key slice: 46.\nBox on key slice: columns 0-{}, rows 0-{}.",
        columns - 1,
        rows - 1
    );
    let flood: &'static str = Box::leak(flood.into_boxed_str());
    let flooded = run_pipeline("demo", &volume, &Scripted(flood, Some(46)), Some(&verifier))
        .expect("never fatal");
    let liver = flooded.findings.organ(keyslice::findings::Organ::Liver);
    assert_eq!(liver.lesions.len(), 20);
    let said = flooded.warnings.join("\n");
    assert!(
        said.contains("liver: the report lists 60 lesions; the first 20 are kept"),
        "{said}"
    );
    assert!(said.contains("covers 100% of the slice"), "{said}");
    assert!(flooded.slice_box.is_none());
    let consistency = flooded.consistency.expect("verified");
    assert!(consistency.score < 0.75, "{consistency:?}");
}

#[test]
fn a_missing_or_broken_model_folder_is_named_with_a_hint() {
    let folder = tempfile::tempdir().expect("temp dir");
    let cases = tempfile::tempdir().expect("temp dir");
    let case = keyslice::phantom::generate(
        8,
        0,
        keyslice::phantom::PhantomOptions {
            matrix: 48,
            slice_mm: Some(8.0),
        },
    );
    keyslice::phantom::write::write_case(cases.path(), &case).expect("written");
    let study = cases.path().join("PHANTOM_8_0000/ct.nii.gz");
    let analyze = || {
        keyslice(&[
            "analyze",
            study.to_str().expect("utf-8"),
            "--model",
            folder.path().to_str().expect("utf-8"),
        ])
    };
    // No config.json, then a config.json of the wrong shape: both name the file.
    for broken_config in [None, Some("{\"model\": 3}")] {
        if let Some(text) = broken_config {
            std::fs::write(folder.path().join("config.json"), text).expect("write");
        }
        let result = analyze();
        assert_eq!(result.status.code(), Some(1));
        let stderr = text(&result.stderr);
        assert!(stderr.contains("config.json"), "{stderr}");
        assert!(stderr.contains("hint:"), "{stderr}");
    }
    // Several studies, one missing: it is named once, the others are analysed, exit 1.
    let missing = folder.path().join("missing.nii.gz");
    let result = keyslice(&[
        "analyze",
        study.to_str().expect("utf-8"),
        missing.to_str().expect("utf-8"),
        "--json",
    ]);
    assert_eq!(result.status.code(), Some(1));
    let stderr = text(&result.stderr);
    assert_eq!(stderr.matches("missing.nii.gz").count(), 1, "{stderr}");
    assert!(stderr.contains("1 of 2 inputs"), "{stderr}");
    assert_eq!(text(&result.stdout).lines().count(), 1);
}

#[test]
fn the_model_grid_keeps_millimetres_and_maps_back_to_ct_slices() {
    // 100 × 80 × 40 voxels of 2 × 2 × 2.5 mm with a bright block 20 mm wide at the centre
    // column/row, on slices 20–23.
    let (volume, mask) = bright_block(
        [100, 80, 40],
        [2.0, 2.0, 2.5],
        &[45..55, 35..45, 20..24],
        500,
        "block",
    );
    let spec = GridSpec {
        size: 32,
        pixel_mm: 5.0,
        slab_mm: 5.0,
    };
    let grid = ModelGrid::from_volume(&volume, spec);
    // 40 × 2.5 mm = 100 mm → 20 slabs of 5 mm; slab s holds slices 2s and 2s + 1, and its
    // centre (52.5 mm for slab 10) lies half-way between their centres; the upper one is named.
    assert_eq!(grid.slabs, 20);
    assert_eq!(grid.centre_slice[10], 21);
    let at = |slab: usize, column: usize, row: usize| grid.hu[slab * 1024 + column + 32 * row];
    // Slabs 10 and 11 (slices 20–23) show the block at the centre, 20 mm = 4 pixels wide.
    assert!(at(10, 16, 16) > 400.0 && at(11, 16, 16) > 400.0);
    assert!(at(9, 16, 16) < -900.0 && at(12, 16, 16) < -900.0);
    let bright: usize = (0..32).filter(|&column| at(10, column, 16) > 0.0).count();
    assert!(
        (4..=5).contains(&bright),
        "{bright} pixels across 20 mm at 5 mm"
    );
    let sampled = grid.sample_labels(&mask);
    assert_eq!(sampled[10 * 1024 + 16 + 32 * 16], 1);
    assert_eq!(sampled[10 * 1024], 0);
    // The centre model pixel sits on the CT's centre.
    let (i, j) = grid.ct_pixel(16, 16);
    // Model pixel 16 is 2.5 mm right of the field's centre: CT column 49.5 + 1.25.
    assert!(
        (i - 50.75).abs() < 1e-9 && (j - 40.75).abs() < 1e-9,
        "{i} {j}"
    );
}

#[test]
fn the_embedded_model_refuses_slices_far_apart_instead_of_analysing_the_gaps() {
    let folder = tempfile::tempdir().expect("temp dir");
    // Thirty small slices 100 mm apart: 2.9 m of patient in 30 slices.
    let slices: Vec<(String, SliceSpec)> = (0..30)
        .map(|k| {
            (
                format!("s{k:02}.dcm"),
                SliceSpec::axial("1.9.77", k, 100.0 * k as f64, 40),
            )
        })
        .collect();
    write_series(folder.path(), &slices);
    let started = std::time::Instant::now();
    let analysed = keyslice(&["analyze", folder.path().to_str().expect("utf-8")]);
    let message = text(&analysed.stderr);
    assert!(!analysed.status.success(), "{message}");
    assert!(
        message.contains("slices are 100.0 mm apart") && message.contains("real model"),
        "{message}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

/// `eval evidence` on a few phantoms: every kind of made-up finding has its row beside the
/// model's own false positives, each made-up finding is counted once (made up or landed on a
/// real tumor), no figure leaves its range, and the same seed gives the same figures.
#[test]
fn the_evidence_evaluation_reports_every_kind_per_finding() {
    let folder = tempfile::tempdir().expect("temp dir");
    let data = folder.path().join("cases");
    phantoms(&data, 6, 64);
    let run = || {
        let output = keyslice(&[
            "eval",
            "evidence",
            "--data",
            data.to_str().expect("utf-8"),
            "--seed",
            "5",
            "--json",
        ]);
        assert!(output.status.success(), "{}", text(&output.stderr));
        serde_json::from_slice::<serde_json::Value>(&output.stdout).expect("JSON")
    };
    let evaluation = run();
    assert_eq!(evaluation["cases"], 6);
    let rows = evaluation["rows"].as_array().expect("rows");
    let kinds: Vec<&str> = rows.iter().filter_map(|row| row["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "alone",
            "beside-real",
            "second-lesion",
            "side-swap",
            "wrong-attributes",
            "made-up-evidence",
            "all kinds",
            "natural"
        ]
    );
    let count = |row: &serde_json::Value, key: &str| row[key].as_u64().unwrap_or(u64::MAX);
    let mut made_up_sum = 0;
    for row in &rows[..6] {
        assert_eq!(
            count(row, "injected"),
            count(row, "made_up") + count(row, "landed_on_real"),
            "{row:#}"
        );
        assert_eq!(
            count(row, "real"),
            evaluation["real_findings"].as_u64().expect("a count")
        );
        made_up_sum += count(row, "made_up");
        for key in ["auroc", "made_up_shown_agreeing", "real_flagged"] {
            if let Some(value) = row[key].as_f64() {
                assert!((0.0..=1.0).contains(&value), "{key} {value}");
            }
        }
    }
    assert_eq!(count(&rows[6], "made_up"), made_up_sum);
    // The same seed, the same figures (all but the time verifying took).
    let without_time = |mut value: serde_json::Value| {
        value["verify_ms_per_answer"] = serde_json::Value::Null;
        value
    };
    assert_eq!(without_time(run()), without_time(evaluation));
}

/// [`Scripted`] naming evidence of its own for each lesion.
struct WithLesionEvidence(Scripted, Vec<keyslice::infer::LesionEvidence>);

impl Diagnoser for WithLesionEvidence {
    fn model_id(&self) -> ModelId {
        self.0.model_id()
    }

    fn diagnose(&self, volume: &Volume) -> Result<Diagnosis, InferError> {
        let mut diagnosis = self.0.diagnose(volume)?;
        diagnosis.lesions.clone_from(&self.1);
        Ok(diagnosis)
    }
}

/// Each lesion with evidence of its own is verified on its own slice (once per slice; the
/// answer's key slice is not read twice, and is its lesion's reading), its standing decided
/// there; evidence outside the
/// volume, or for a lesion the report does not list, is named or left, never read.
#[test]
fn each_lesion_is_verified_on_its_own_key_slice() {
    use keyslice::findings::Organ;
    use keyslice::infer::LesionEvidence;
    let model = TinyModel::embedded().expect("the embedded model loads");
    let verifier = TinyVerifier(&model);
    let volume = demo_abdomen();
    let evidence = |organ, lesion, key_slice| LesionEvidence {
        organ,
        lesion,
        key_slice,
        slice_box: None,
        axes: None,
        mask: None,
    };
    let answer = Scripted(
        "Liver lesion 1: Size: 2.0 x 1.5 cm.\nLiver lesion 2: Size: 1.0 x 0.8 cm.\n\
         Left kidney lesion 1: Size: 1.5 x 1.0 cm.\nPancreas: no tumor.\n\
         Right kidney: no tumor.\nKey slice: 46.",
        Some(46),
    );
    let diagnoser = WithLesionEvidence(
        answer,
        vec![
            evidence(Organ::Liver, 0, 46),
            evidence(Organ::Liver, 1, 30),
            evidence(Organ::KidneyLeft, 0, 30),
            evidence(Organ::KidneyLeft, 3, 20),
            evidence(Organ::Pancreas, 0, 5000),
        ],
    );
    let prediction = run_pipeline(
        "demo",
        &volume,
        &diagnoser,
        Some(&verifier as &dyn Verifier),
    )
    .expect("never fatal");
    let checked: Vec<(Organ, usize, u32)> = prediction
        .lesion_checks
        .iter()
        .map(|check| (check.organ, check.lesion, check.key_slice))
        .collect();
    // The first liver lesion's evidence is the answer's key slice: that reading is its own.
    assert_eq!(
        checked,
        [
            (Organ::Liver, 0, 46),
            (Organ::Liver, 1, 30),
            (Organ::KidneyLeft, 0, 30)
        ],
        "{:?}",
        prediction.warnings
    );
    assert_eq!(
        prediction.lesion_checks[0].local_description,
        prediction
            .local_description
            .clone()
            .expect("the key slice read")
    );
    // Slice 30 was read once for both lesions.
    assert_eq!(
        prediction.lesion_checks[1].local_description,
        prediction.lesion_checks[2].local_description
    );
    let consistency = prediction.consistency.expect("verified");
    for (organ, lesion) in [(Organ::Liver, 0), (Organ::Liver, 1), (Organ::KidneyLeft, 0)] {
        let view = keyslice::findings::read_report(
            &prediction
                .lesion_checks
                .iter()
                .find(|check| check.organ == organ && check.lesion == lesion)
                .expect("checked")
                .local_description,
        )
        .findings;
        let finding = consistency
            .findings
            .iter()
            .find(|finding| finding.organ == organ && finding.lesion == Some(lesion))
            .expect("a finding");
        // Where its own slice speaks of the organ, that slice decides.
        if view.organ(organ).tumor != keyslice::findings::TumorPresence::NotMentioned {
            assert_ne!(finding.standing, keyslice::scoring::Standing::Unverified);
        }
    }
}

/// `eval evidence` on what is not a folder of case folders, or on a truth whose case id
/// points out of the folder: refused with the path or id named, nothing read elsewhere.
#[test]
fn the_evidence_evaluation_refuses_what_is_not_a_case_folder() {
    let folder = tempfile::tempdir().expect("temp dir");
    let file = folder.path().join("truth.jsonl");
    std::fs::write(&file, "{}\n").expect("written");
    let hostile = folder.path().join("hostile");
    let case = hostile.join("case");
    std::fs::create_dir_all(&case).expect("folder");
    std::fs::write(
        case.join("truth.json"),
        r#"{"case_id": "../../elsewhere\u001b[2J", "report": "Liver: no tumor."}"#,
    )
    .expect("written");
    for (data, said) in [
        (
            folder.path().join("missing"),
            "not a folder of case folders",
        ),
        (file, "not a folder of case folders"),
        (hostile, "is not the name of a case folder"),
    ] {
        let output = keyslice(&["eval", "evidence", "--data", data.to_str().expect("utf-8")]);
        assert_eq!(output.status.code(), Some(2));
        let stderr = text(&output.stderr);
        assert!(stderr.contains(said), "{stderr}");
        assert!(
            !stderr.contains('\u{1b}'),
            "an escape code reached the terminal: {stderr}"
        );
    }
}

/// Every lesion the embedded model finds carries its long and short axes on its own key
/// slice: at right angles, as long as the sizes its report gives, inside the lesion's box.
#[test]
fn each_lesion_the_embedded_model_finds_is_drawn_as_it_was_measured_with_its_mask() {
    use keyslice::infer::embedded::TinyDiagnoser;
    let model = TinyModel::embedded().expect("the embedded model loads");
    let volume = demo_abdomen();
    let diagnosis = TinyDiagnoser(&model)
        .diagnose(&volume)
        .expect("the demo case is read");
    let findings = keyslice::findings::read_report(&diagnosis.report).findings;
    assert!(!diagnosis.lesions.is_empty(), "the demo case has lesions");
    let [sx, sy, _] = volume.spacing_mm();
    let [columns, rows, _] = volume.dims();
    for evidence in &diagnosis.lesions {
        let axes = evidence.axes.expect("measured on its slice");
        assert!(axes.fits(columns, rows), "{axes:?}");
        let size = findings.organ(evidence.organ).lesions[evidence.lesion]
            .size
            .expect("a size");
        let mm = |[a, b]: [[f64; 2]; 2]| ((a[0] - b[0]) * sx).hypot((a[1] - b[1]) * sy);
        // The report rounds to whole millimetres; the axes are kept to a hundredth of a voxel.
        assert!(
            (mm(axes.long) - size.long_cm * 10.0).abs() <= 0.6,
            "{:?} lesion {}: long axis {:.2} mm, report {} cm",
            evidence.organ,
            evidence.lesion,
            mm(axes.long),
            size.long_cm
        );
        let short_cm = size.short_cm.expect("a short axis");
        assert!(
            (mm(axes.short) - short_cm * 10.0).abs() <= 0.6,
            "short axis {:.2} mm, report {short_cm} cm",
            mm(axes.short)
        );
        let direction = |[a, b]: [[f64; 2]; 2]| ((b[0] - a[0]) * sx, (b[1] - a[1]) * sy);
        let (long, short) = (direction(axes.long), direction(axes.short));
        let cosine = (long.0 * short.0 + long.1 * short.1) / (mm(axes.long) * mm(axes.short));
        assert!(cosine.abs() < 0.05, "at right angles: cos {cosine}");
        // The long axis lies in the lesion's box; the short one crosses it inside the box
        // (it spans the lesion's width at right angles, which a tilted lesion's box may be
        // narrower than).
        let slice_box = evidence.slice_box.as_ref().expect("a box").voxels;
        let inside = |[column, row]: [f64; 2]| {
            (f64::from(slice_box[0]) - 1.0..=f64::from(slice_box[2]) + 1.0).contains(&column)
                && (f64::from(slice_box[1]) - 1.0..=f64::from(slice_box[3]) + 1.0).contains(&row)
        };
        let middle = |[a, b]: [[f64; 2]; 2]| [f64::midpoint(a[0], b[0]), f64::midpoint(a[1], b[1])];
        assert!(
            axes.long.into_iter().all(inside) && inside(middle(axes.short)),
            "{axes:?} against the box {slice_box:?}"
        );
        // The two lines cross: the short one's ends lie on either side of the long one.
        let side = |[column, row]: [f64; 2]| {
            let [a, b] = axes.long;
            (b[0] - a[0]) * (row - a[1]) - (b[1] - a[1]) * (column - a[0])
        };
        assert!(side(axes.short[0]) * side(axes.short[1]) < 0.0, "{axes:?}");
        // Its 3D mask, the reviewer's starting mask: on the CT's grid, on its key slice
        // within its box (a model pixel's footprint beyond at most).
        let mask = evidence.mask.as_ref().expect("a mask");
        let dense = mask.to_dense(volume.dims()).expect("on the CT's grid");
        let bounds = keyslice::volume::mask::bounds(&dense, volume.dims()).expect("not empty");
        let key = evidence.key_slice as usize;
        assert!(
            bounds.min[2] <= key && key <= bounds.max[2],
            "{bounds:?} against key slice {key}"
        );
        let plane = columns * rows;
        let on_key: Vec<usize> = (0..plane)
            .filter(|&p| dense[key * plane + p] != 0)
            .collect();
        assert!(!on_key.is_empty(), "the mask reaches its key slice");
        let margin = 3.0 / sx.min(sy);
        assert!(
            on_key.iter().all(|&p| {
                let (column, row) = ((p % columns) as f64, (p / columns) as f64);
                (f64::from(slice_box[0]) - margin..=f64::from(slice_box[2]) + margin)
                    .contains(&column)
                    && (f64::from(slice_box[1]) - margin..=f64::from(slice_box[3]) + margin)
                        .contains(&row)
            }),
            "the mask on the key slice lies in the box {slice_box:?}"
        );
    }
}
