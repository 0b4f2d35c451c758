//! Exports as a research team receives them: a DICOM series full of identifying values is put
//! in a workspace, reviewed, and exported in every format; no identifying value appears in any
//! exported byte (JSON, CSV, parquet, PNG). The formats are read back (the parquet with the
//! parquet crate's arrow reader), exports are byte-identical run to run, splits are seeded,
//! and a failed export leaves the earlier one in place.

mod common;

use std::path::{Path, PathBuf};

use common::files;
use dicom_core::{DataElement, PrimitiveValue, VR};
use dicom_dictionary_std::tags;
use dicom_object::{FileMetaTableBuilder, InMemDicomObject};
use keyslice::export::read::read_training_cases;
use keyslice::export::{ExportError, ExportFormat, ExportOptions, export_workspace};
use keyslice::findings::{Organ, TumorPresence};
use keyslice::io::nifti::read_nifti;
use keyslice::io::{LoadOptions, load_study};
use keyslice::review::workspace::Workspace;
use keyslice::review::{CaseReview, ReviewStatus};
use keyslice::scoring::TruthRecord;
use serde_json::json;

/// Identifying values written into the series (and its folder name).
const IDENTIFIERS: &[&str] = &[
    "DOE^JANE",
    "JANE",
    "MRN-99812345",
    "99812345",
    "19610412",
    "ACC-7730021",
    "St Elsewhere General",
    "Elsewhere",
    "HOUSE^GREGORY",
    "GREGORY",
    "20240105",
    "1.2.826.0.1.3680043.2.1125.4242",
    "1.2.826.0.1.3680043.2.1125.4243",
    "Mrs Doe",
];

const STUDY_UID: &str = "1.2.826.0.1.3680043.2.1125.4242";
const SERIES_UID: &str = "1.2.826.0.1.3680043.2.1125.4243";

fn sop_uid(index: usize) -> String {
    format!("1.2.826.0.1.3680043.2.1125.4243.{}", index + 1)
}

/// A 48×48×10 axial CT series (a water-density body in air) whose headers carry a patient's
/// name, ids, birth date, accession number, institution, physician and dates.
fn write_identified_series(folder: &Path) {
    std::fs::create_dir_all(folder).expect("folder");
    let (rows, columns) = (48u16, 48u16);
    for index in 0..10 {
        let mut object = InMemDicomObject::new_empty();
        let mut text = |tag, vr, value: &str| {
            object.put(DataElement::new(tag, vr, PrimitiveValue::from(value)));
        };
        text(tags::SOP_CLASS_UID, VR::UI, "1.2.840.10008.5.1.4.1.1.2");
        text(tags::SOP_INSTANCE_UID, VR::UI, &sop_uid(index));
        text(tags::STUDY_INSTANCE_UID, VR::UI, STUDY_UID);
        text(tags::SERIES_INSTANCE_UID, VR::UI, SERIES_UID);
        text(tags::PATIENT_NAME, VR::PN, "DOE^JANE");
        text(tags::PATIENT_ID, VR::LO, "MRN-99812345");
        text(tags::PATIENT_BIRTH_DATE, VR::DA, "19610412");
        text(tags::ACCESSION_NUMBER, VR::SH, "ACC-7730021");
        text(tags::INSTITUTION_NAME, VR::LO, "St Elsewhere General");
        text(tags::REFERRING_PHYSICIAN_NAME, VR::PN, "HOUSE^GREGORY");
        text(tags::STUDY_DATE, VR::DA, "20240105");
        text(tags::SERIES_DATE, VR::DA, "20240105");
        text(tags::MODALITY, VR::CS, "CT");
        text(tags::SERIES_DESCRIPTION, VR::LO, "ABDOMEN DOE^JANE");
        text(tags::IMAGE_TYPE, VR::CS, "ORIGINAL\\PRIMARY\\AXIAL");
        text(tags::INSTANCE_NUMBER, VR::IS, &(index + 1).to_string());
        text(
            tags::IMAGE_POSITION_PATIENT,
            VR::DS,
            &format!("-120\\-120\\{}", index as f64 * 5.0),
        );
        text(tags::IMAGE_ORIENTATION_PATIENT, VR::DS, "1\\0\\0\\0\\1\\0");
        text(tags::PIXEL_SPACING, VR::DS, "5\\5");
        text(tags::RESCALE_SLOPE, VR::DS, "1");
        text(tags::RESCALE_INTERCEPT, VR::DS, "-1024");
        text(tags::PHOTOMETRIC_INTERPRETATION, VR::CS, "MONOCHROME2");
        let short = |tag, value: u16| DataElement::new(tag, VR::US, PrimitiveValue::from(value));
        object.put(short(tags::SAMPLES_PER_PIXEL, 1));
        object.put(short(tags::ROWS, rows));
        object.put(short(tags::COLUMNS, columns));
        object.put(short(tags::BITS_ALLOCATED, 16));
        object.put(short(tags::BITS_STORED, 16));
        object.put(short(tags::HIGH_BIT, 15));
        object.put(short(tags::PIXEL_REPRESENTATION, 1));
        let mut pixels = Vec::new();
        for row in 0..i32::from(rows) {
            for column in 0..i32::from(columns) {
                let (x, y) = (column - 24, row - 24);
                let inside = x * x * 4 + y * y * 9 < 20 * 20 * 4;
                let hu: i16 = if inside { 40 } else { -1000 };
                pixels.extend((hu + 1024).to_le_bytes());
            }
        }
        object.put(DataElement::new(
            tags::PIXEL_DATA,
            VR::OW,
            PrimitiveValue::from(pixels),
        ));
        let meta = FileMetaTableBuilder::new()
            .media_storage_sop_class_uid("1.2.840.10008.5.1.4.1.1.2")
            .media_storage_sop_instance_uid(sop_uid(index))
            .transfer_syntax("1.2.840.10008.1.2.1")
            .build()
            .expect("meta");
        object
            .with_exact_meta(meta)
            .write_to_file(folder.join(format!("DOE_JANE_{index:03}.dcm")))
            .expect("written");
    }
}

/// A workspace holding the identified series, reviewed and accepted: key slice 6 (with its
/// real SOP Instance UID, as the viewer records it), a liver lesion, and a note naming the
/// patient.
fn reviewed_workspace(root: &Path) -> (Workspace, PathBuf) {
    let series = root.parent().expect("parent").join("DOE_JANE_MRN-99812345");
    write_identified_series(&series);
    let (workspace, added) =
        Workspace::create_or_extend(root, std::slice::from_ref(&series)).expect("made");
    assert_eq!(added, 1);
    let case_id = workspace.manifest.cases[0].case_id.clone();
    assert!(case_id.contains("DOE_JANE"), "{case_id}");
    let mut review = CaseReview::open(&workspace.database_path(), &case_id, "dr. reviewer", None)
        .expect("review");
    review
        .set(
            "key_slice",
            json!({"index": 6, "z_mm": 30.0, "sop_instance_uid": sop_uid(6)}),
        )
        .expect("key slice");
    review.set("liver.tumor", json!("yes")).expect("presence");
    review
        .set(
            "liver.lesions.0",
            json!({"size": {"long_cm": 2.1, "short_cm": 1.4}, "attenuation": "hypo"}),
        )
        .expect("lesion");
    // The reviewer's evidence box on the key slice and the lesion's slice range.
    review
        .set("box", json!({"voxels": [10, 12, 30, 28]}))
        .expect("box");
    review
        .set("lesion_slices", json!({"first": 4, "last": 8}))
        .expect("range");
    review
        .set("note", json!("Mrs Doe MRN-99812345: compare with 20240105"))
        .expect("note");
    review.set_status(ReviewStatus::Done).expect("accepted");
    (workspace, series)
}

fn options(format: ExportFormat) -> ExportOptions {
    ExportOptions {
        format,
        frames: 8,
        ..ExportOptions::default()
    }
}

#[test]
fn no_identifying_value_leaves_in_any_format_and_exports_repeat_byte_for_byte() {
    let folder = tempfile::tempdir().expect("temp dir");
    let (workspace, _) = reviewed_workspace(&folder.path().join("workspace"));
    // The workspace itself (which never leaves the machine) holds them: the search finds them.
    let database = std::fs::read(workspace.database_path()).expect("database");
    for needle in ["Mrs Doe", "1.2.826.0.1.3680043.2.1125.4243.7"] {
        assert!(
            database
                .windows(needle.len())
                .any(|w| w == needle.as_bytes()),
            "{needle}"
        );
    }
    for format in [
        ExportFormat::Llamafactory,
        ExportFormat::Swift,
        ExportFormat::Verl,
        ExportFormat::Keyslices,
    ] {
        let out = folder.path().join(format!("export-{format:?}"));
        // With the CTs too: the NIfTI volumes must carry no identifier either.
        // Frame paths start at the training machine's folder: the same there, the same bytes.
        let with_volumes = ExportOptions {
            volumes: true,
            frames_root: Some(PathBuf::from("/data/keyslice-export")),
            ..options(format)
        };
        let summary = export_workspace(&workspace, &with_volumes, &out).expect("exported");
        assert_eq!((summary.train, summary.val, summary.left_out), (1, 0, 0));
        let exported = files(&out);
        assert!(exported.len() >= 2, "{format:?}: {:?}", exported.keys());
        for (path, bytes) in &exported {
            let name = path.to_string_lossy();
            for identifier in IDENTIFIERS {
                for needle in [identifier.to_string(), identifier.to_lowercase()] {
                    assert!(
                        !name.contains(&needle)
                            && !bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
                        "{format:?}: {needle:?} found in {name}"
                    );
                }
            }
        }
        // The same workspace exports to the same bytes.
        let again = folder.path().join(format!("again-{format:?}"));
        export_workspace(&workspace, &with_volumes, &again).expect("exported again");
        assert!(files(&again) == exported, "{format:?} differs between runs");
    }
}

#[test]
fn each_format_reads_back_with_frames_key_slice_and_answer() {
    let folder = tempfile::tempdir().expect("temp dir");
    let (workspace, _) = reviewed_workspace(&folder.path().join("workspace"));

    // LLaMA-Factory: one <video> tag, frames that exist, the key slice among them.
    let out = folder.path().join("lf");
    export_workspace(&workspace, &options(ExportFormat::Llamafactory), &out).expect("exported");
    let rows: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("train.json")).expect("train.json"))
            .expect("json");
    let row = &rows[0];
    let user = row["messages"][0]["content"].as_str().expect("user text");
    assert_eq!(user.matches("<video>").count(), 1);
    assert_eq!(row["messages"][1]["role"], "assistant");
    let answer = row["messages"][1]["content"].as_str().expect("answer");
    assert!(answer.contains("Key slice: 6"), "{answer}");
    assert!(answer.contains("2.1 x 1.4 cm"), "{answer}");
    let videos = row["videos"][0].as_array().expect("one video");
    assert_eq!(videos.len(), 8);
    for frame in videos {
        // Absolute, under the export: found from any working folder.
        let path = Path::new(frame.as_str().expect("path"));
        assert!(
            path.is_absolute() && path.starts_with(&out),
            "{}",
            path.display()
        );
        let image = image::open(path).expect("a PNG");
        assert_eq!((image.width(), image.height()), (48, 48));
    }
    let guide = std::fs::read_to_string(out.join("TRAINING.md")).expect("TRAINING.md");
    assert!(guide.contains("video_fps: 2"), "{guide}");
    assert!(
        guide.contains(&format!("dataset_dir: {}", out.display())),
        "{guide}"
    );
    let info: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("dataset_info.json")).expect("info"))
            .expect("json");
    assert_eq!(info["keyslice_train"]["formatting"], "sharegpt");
    assert_eq!(info["keyslice_train"]["columns"]["videos"], "videos");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("export.json")).expect("manifest"))
            .expect("json");
    let case = &manifest["cases"][0];
    let key_frame = case["key_frame"].as_u64().expect("key frame") as usize;
    assert_eq!(case["frame_slices"][key_frame], 6, "{case}");
    assert_eq!(case["hard"], false, "no model prediction to differ from");

    // ms-swift: extra columns for reward functions.
    let out = folder.path().join("swift");
    export_workspace(&workspace, &options(ExportFormat::Swift), &out).expect("exported");
    let line = std::fs::read_to_string(out.join("train.jsonl")).expect("jsonl");
    let row: serde_json::Value = serde_json::from_str(line.trim()).expect("one row");
    assert_eq!(row["key_slice"], 6);
    // One video of frames, as for the other frameworks (ms-swift's Qwen3-VL template reads
    // a list of frames as a video at 2 frames per second).
    let videos = row["videos"][0].as_array().expect("one video of frames");
    assert_eq!(videos.len(), 8);
    assert!(
        videos
            .iter()
            .all(|frame| Path::new(frame.as_str().unwrap_or("")).is_file())
    );
    let user = row["messages"][0]["content"].as_str().expect("user text");
    assert_eq!(user.matches("<video>").count(), 1);
    assert!(row.get("images").is_none());
    // The ground truth the reward reads: findings and the slice size.
    let truth_text = row["truth"].as_str().expect("the truth as JSON text");
    let truth = TruthRecord::from_value(serde_json::from_str(truth_text).expect("JSON"))
        .expect("a truth record");
    assert_eq!(truth.slice_size, Some([48, 48]));
    assert_eq!(truth.case_id, row["case"]);
    assert_eq!(row["organs"]["liver"], "yes");
    assert_eq!(row["organs"]["pancreas"], "not_mentioned");
    let findings: serde_json::Value =
        serde_json::from_str(row["findings"].as_str().expect("JSON text")).expect("JSON");
    assert_eq!(
        findings["organs"]["liver"]["lesions"][0]["attenuation"],
        "hypo"
    );
    assert!(
        row["solution"]
            .as_str()
            .is_some_and(|s| s.contains("Key slice: 6"))
    );
}

#[test]
fn verl_rows_carry_the_ground_truth_and_the_frame_rate() {
    let folder = tempfile::tempdir().expect("temp dir");
    let (workspace, _) = reviewed_workspace(&folder.path().join("workspace"));
    // verl: parquet rows with the columns verl reads.
    let out = folder.path().join("verl");
    export_workspace(&workspace, &options(ExportFormat::Verl), &out).expect("exported");
    let file = std::fs::File::open(out.join("train.parquet")).expect("parquet");
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .expect("parquet header")
        .build()
        .expect("reader");
    let batches: Vec<_> = reader.map(|batch| batch.expect("batch")).collect();
    let batch = &batches[0];
    let names: Vec<String> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(
        names,
        [
            "data_source",
            "prompt",
            "videos",
            "ability",
            "reward_model",
            "extra_info"
        ]
    );
    assert_eq!(batch.num_rows(), 1);
    let reward = batch
        .column(4)
        .as_any()
        .downcast_ref::<arrow_array::StructArray>()
        .expect("struct");
    let truth = reward
        .column(1)
        .as_any()
        .downcast_ref::<arrow_array::StringArray>()
        .expect("strings")
        .value(0);
    let findings = TruthRecord::from_json(truth)
        .and_then(|truth| truth.truth_findings())
        .expect("the ground truth as the reward reads it");
    let videos = batch
        .column(2)
        .as_any()
        .downcast_ref::<arrow_array::ListArray>()
        .expect("a list of videos")
        .value(0);
    let video = videos
        .as_any()
        .downcast_ref::<arrow_array::StructArray>()
        .expect("a video struct");
    let fps = video
        .column_by_name("sample_fps")
        .and_then(|column| column.as_any().downcast_ref::<arrow_array::Float64Array>())
        .expect("sample_fps");
    assert!((fps.value(0) - 2.0).abs() < f64::EPSILON);
    assert_eq!(findings.key_slice.map(|k| k.index), Some(6));
    // The corrected box and extent are the ground truth of the reward.
    assert_eq!(findings.slice_box.map(|b| b.voxels), Some([10, 12, 30, 28]));
    assert_eq!(
        findings.lesion_slices,
        Some(keyslice::findings::SliceRange { first: 4, last: 8 })
    );
}

#[test]
fn key_slice_rows_carry_a_pseudonymous_uid_and_the_reviewer() {
    let folder = tempfile::tempdir().expect("temp dir");
    let (workspace, _) = reviewed_workspace(&folder.path().join("workspace"));
    let out = folder.path().join("keys");
    export_workspace(&workspace, &options(ExportFormat::Keyslices), &out).expect("exported");
    let csv = std::fs::read_to_string(out.join("keyslices.csv")).expect("csv");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 2, "{csv}");
    let cells: Vec<&str> = lines[1].split(',').collect();
    assert!(cells[0].starts_with("case-"));
    assert_eq!((cells[2], cells[3]), ("6", "30.00"));
    assert!(cells[4].starts_with("2.25."), "{csv}");
    assert_eq!(
        &cells[5..11],
        &["10", "12", "30", "28", "4", "8"],
        "the box and the slice range: {csv}"
    );
    // The reviewer as a pseudonym, the same in every export of the workspace; never a name.
    assert!(cells[11].starts_with("reviewer-"), "{csv}");
    assert!(!csv.contains("dr. reviewer"), "{csv}");
    let again = folder.path().join("again");
    export_workspace(&workspace, &options(ExportFormat::Keyslices), &again).expect("exported");
    let csv_again = std::fs::read_to_string(again.join("keyslices.csv")).expect("csv");
    assert_eq!(
        csv_again
            .lines()
            .nth(1)
            .and_then(|line| line.split(',').nth(11)),
        Some(cells[11])
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("keyslices.json")).expect("json"))
            .expect("JSON");
    assert_eq!(json[0]["lesion_slices"], json!({"first": 4, "last": 8}));
    assert!(!out.join("frames").exists(), "key slices need no frames");
}

#[test]
fn unreviewed_cases_are_left_out_unless_asked_and_splits_are_seeded() {
    let folder = tempfile::tempdir().expect("temp dir");
    let cases = folder.path().join("cases");
    std::fs::create_dir_all(&cases).expect("cases");
    for index in 0..6 {
        let case = keyslice::phantom::generate(
            3,
            index,
            keyslice::phantom::PhantomOptions {
                matrix: 48,
                slice_mm: Some(8.0),
            },
        );
        keyslice::phantom::write::write_case(&cases, &case).expect("written");
    }
    let (workspace, _) =
        Workspace::create_or_extend(&folder.path().join("ws"), &[cases]).expect("workspace");
    let out = folder.path().join("out");
    let error = export_workspace(&workspace, &options(ExportFormat::Swift), &out)
        .expect_err("nothing accepted");
    assert!(matches!(error, ExportError::Empty), "{error}");
    assert!(!out.exists());
    // Not analysed: nothing to export, not even asked for unreviewed cases (an empty answer
    // would teach the model to say nothing).
    let unanalysed = ExportOptions {
        include_unreviewed: true,
        ..options(ExportFormat::Swift)
    };
    let error = export_workspace(&workspace, &unanalysed, &out).expect_err("nothing analysed");
    assert!(
        matches!(&error, ExportError::NothingValid { reasons } if reasons.len() == 6
            && reasons[0].contains("not analysed")),
        "{error}"
    );
    assert!(!out.exists());
    for case in &workspace.manifest.cases {
        append_prediction_for(&workspace, &case.case_id);
    }
    let split = ExportOptions {
        include_unreviewed: true,
        val_fraction: 0.5,
        seed: 7,
        ..options(ExportFormat::Swift)
    };
    let split = ExportOptions {
        frames_root: Some(PathBuf::from("/data/keyslice-export")),
        ..split
    };
    let summary = export_workspace(&workspace, &split, &out).expect("exported");
    assert_eq!((summary.train, summary.val), (3, 3), "{summary:?}");
    let first = files(&out);
    // Another seed splits differently; the same seed again the same.
    let other = folder.path().join("other");
    export_workspace(
        &workspace,
        &ExportOptions {
            seed: 8,
            ..split.clone()
        },
        &other,
    )
    .expect("exported");
    let same = folder.path().join("same");
    export_workspace(&workspace, &split, &same).expect("exported");
    assert!(files(&same) == first);
    assert!(files(&other) != first);
}

#[test]
fn a_failed_export_leaves_the_earlier_one_and_no_half_dataset() {
    let folder = tempfile::tempdir().expect("temp dir");
    let (workspace, series) = reviewed_workspace(&folder.path().join("workspace"));
    let out = folder.path().join("export");
    export_workspace(&workspace, &options(ExportFormat::Llamafactory), &out).expect("exported");
    let good = files(&out);
    // The CT goes missing: the next export fails while writing frames.
    std::fs::rename(&series, folder.path().join("moved")).expect("moved");
    let error = export_workspace(&workspace, &options(ExportFormat::Llamafactory), &out)
        .expect_err("the CT is gone");
    assert!(matches!(error, ExportError::Volume { .. }), "{error}");
    assert!(files(&out) == good, "the earlier export is untouched");
    let leftovers: Vec<_> = std::fs::read_dir(folder.path())
        .expect("listing")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // A folder that is not an export is never replaced.
    let mine = folder.path().join("mine");
    std::fs::create_dir_all(&mine).expect("folder");
    std::fs::write(mine.join("thesis.tex"), "keep").expect("file");
    let error = export_workspace(&workspace, &options(ExportFormat::Keyslices), &mine)
        .expect_err("refused");
    assert!(matches!(error, ExportError::NotAnExport(_)), "{error}");
}

#[test]
fn an_export_with_volumes_reads_back_as_training_cases() {
    let folder = tempfile::tempdir().expect("temp dir");
    let (workspace, series) = reviewed_workspace(&folder.path().join("workspace"));
    let source = load_study(&series, &LoadOptions::default())
        .expect("series")
        .volume;
    for format in [ExportFormat::Swift, ExportFormat::Verl] {
        let out = folder.path().join(format!("{format:?}"));
        let with_volumes = ExportOptions {
            volumes: true,
            ..options(format)
        };
        export_workspace(&workspace, &with_volumes, &out).expect("exported");
        let cases = read_training_cases(&out).expect("read back");
        assert_eq!(cases.len(), 1, "{format:?}");
        let case = &cases[0];
        assert!(case.case.starts_with("case-"), "{}", case.case);
        assert!(!case.hard, "no prediction to differ from");
        assert_eq!(case.findings.key_slice.as_ref().map(|k| k.index), Some(6));
        assert_eq!(case.findings.organ(Organ::Liver).tumor, TumorPresence::Yes);
        assert_eq!(
            case.findings.organ(Organ::Liver).lesions[0]
                .size
                .map(|size| size.long_cm),
            Some(2.1)
        );
        // The CT comes back voxel for voxel, on the same grid: slice 6 is the key slice.
        let volume = read_nifti(&case.volume).expect("NIfTI");
        assert_eq!(volume.dims(), source.dims());
        for (read, made) in volume.spacing_mm().iter().zip(source.spacing_mm()) {
            assert!((read - made).abs() < 1e-6, "spacing {read} ≠ {made}");
        }
        let [columns, rows, slices] = source.dims();
        for k in 0..slices {
            for j in 0..rows {
                for i in 0..columns {
                    assert_eq!(volume.value([i, j, k]), source.value([i, j, k]));
                }
            }
        }
        let manifest: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.join("export.json")).expect("manifest"),
        )
        .expect("JSON");
        assert_eq!(
            manifest["cases"][0]["volume"],
            format!("volumes/{}.nii.gz", case.case)
        );
    }

    // Without volumes, or in a format without answers to train on, the reason is named.
    let plain = folder.path().join("plain");
    export_workspace(&workspace, &options(ExportFormat::Swift), &plain).expect("exported");
    let error = read_training_cases(&plain).expect_err("no volumes");
    assert!(error.path.ends_with("export.json"), "{error}");
    assert!(error.to_string().contains("--volumes"), "{error}");
    assert!(error.hint.contains("--volumes"), "{}", error.hint);
    let sharegpt = folder.path().join("sharegpt");
    let with_volumes = ExportOptions {
        volumes: true,
        ..options(ExportFormat::Llamafactory)
    };
    export_workspace(&workspace, &with_volumes, &sharegpt).expect("exported");
    let error = read_training_cases(&sharegpt).expect_err("not swift or verl");
    assert!(error.to_string().contains("swift or verl"), "{error}");
    // A volume gone missing is named.
    let swift = folder.path().join("Swift");
    let volume = read_training_cases(&swift).expect("read")[0].volume.clone();
    std::fs::remove_file(&volume).expect("removed");
    let error = read_training_cases(&swift).expect_err("missing volume");
    assert_eq!(error.path, volume, "{error}");
    let error = read_training_cases(&folder.path().join("workspace")).expect_err("not an export");
    assert!(
        error.to_string().contains("not a Keyslice export"),
        "{error}"
    );
}

/// The model's prediction for the reviewed case: a liver lesion on slice 3 with a box there.
fn append_model_prediction(workspace: &Workspace) {
    append_prediction_for(workspace, &workspace.manifest.cases[0].case_id.clone());
}

/// That prediction, for case `case_id`.
fn append_prediction_for(workspace: &Workspace, case_id: &str) {
    let prediction = common::saved_prediction(
        case_id,
        "Liver lesion 1: Size: 1.0 x 0.7 cm. Key slice: 3",
        Some([5, 5, 10, 10]),
    );
    workspace.append_prediction(&prediction).expect("appended");
}

#[test]
fn exports_never_contradict_themselves_in_any_format() {
    let folder = tempfile::tempdir().expect("temp dir");
    let (workspace, _) = reviewed_workspace(&folder.path().join("workspace"));
    append_model_prediction(&workspace);
    let case_id = workspace.manifest.cases[0].case_id.clone();
    let mut review = CaseReview::open(&workspace.database_path(), &case_id, "dr. reviewer", None)
        .expect("review");
    // The reviewer moved the key slice (to 6, in the shared setup), says the liver has no
    // tumor after all (its lesion left in place), and puts the tumor in the pancreas.
    review.set("liver.tumor", json!("no")).expect("no tumor");
    review
        .set("pancreas.tumor", json!("yes"))
        .expect("pancreas");
    review
        .set(
            "pancreas.lesions.0",
            json!({"size": {"long_cm": 2.0, "short_cm": 1.5}}),
        )
        .expect("pancreas lesion");
    review.set_status(ReviewStatus::Done).expect("accepted");
    for format in [
        ExportFormat::Llamafactory,
        ExportFormat::Swift,
        ExportFormat::Verl,
        ExportFormat::Keyslices,
    ] {
        let out = folder.path().join(format!("out-{format:?}"));
        let summary = export_workspace(
            &workspace,
            &ExportOptions {
                volumes: true,
                ..options(format)
            },
            &out,
        )
        .expect("exported");
        assert!(
            summary.invalid.is_empty(),
            "{format:?}: {:?}",
            summary.invalid
        );
        for (path, bytes) in files(&out) {
            let text = String::from_utf8_lossy(&bytes);
            assert!(
                !text.contains("Liver lesion") && !text.contains("columns 5"),
                "{format:?} {}: the liver lesion or the model's box survived",
                path.display()
            );
        }
        if matches!(format, ExportFormat::Swift | ExportFormat::Verl) {
            let cases = read_training_cases(&out).expect("reads back");
            let answer = &cases[0].findings;
            assert!(answer.organ(Organ::Liver).lesions.is_empty(), "{format:?}");
            assert_eq!(answer.organ(Organ::Pancreas).lesions.len(), 1, "{format:?}");
            // The reviewer's own box (shared setup) replaces the model's.
            assert_eq!(
                answer.slice_box.as_ref().map(|b| b.voxels),
                Some([10, 12, 30, 28]),
                "{format:?}"
            );
            assert_eq!(answer.key_slice.as_ref().map(|key| key.index), Some(6));
        }
    }
    // A key slice outside the 10-slice volume breaks a rule: the case is left out, named.
    review
        .set("key_slice", json!({"index": 40, "z_mm": 200.0}))
        .expect("key slice");
    let error = export_workspace(
        &workspace,
        &options(ExportFormat::Swift),
        &folder.path().join("bad"),
    )
    .expect_err("nothing valid");
    assert!(
        error
            .to_string()
            .contains("key slice 40 is outside the volume's 10 axial slices"),
        "{error}"
    );
    // A flagged case is never training data, not even with --include-unreviewed.
    review
        .set("key_slice", json!({"index": 6, "z_mm": 30.0}))
        .expect("key slice");
    review.set_status(ReviewStatus::Flagged).expect("flagged");
    let error = export_workspace(
        &workspace,
        &ExportOptions {
            include_unreviewed: true,
            ..options(ExportFormat::Swift)
        },
        &folder.path().join("flagged"),
    )
    .expect_err("flagged cases are left out");
    assert!(matches!(error, ExportError::Empty), "{error}");
}

#[test]
fn an_export_folder_is_replaced_only_while_unchanged() {
    let folder = tempfile::tempdir().expect("temp dir");
    let (workspace, _) = reviewed_workspace(&folder.path().join("workspace"));
    let out = folder.path().join("export");
    let format = options(ExportFormat::Llamafactory);
    export_workspace(&workspace, &format, &out).expect("exported");
    export_workspace(&workspace, &format, &out).expect("an unchanged export is replaced");
    // A file the user added inside the export: refused, and the file stays.
    std::fs::write(out.join("my_notes.txt"), "keep").expect("note");
    let error = export_workspace(&workspace, &format, &out).expect_err("refused");
    assert!(
        matches!(&error, ExportError::ChangedExport { detail, .. } if detail.contains("my_notes.txt")),
        "{error}"
    );
    assert_eq!(
        std::fs::read(out.join("my_notes.txt")).expect("kept"),
        b"keep"
    );
    std::fs::remove_file(out.join("my_notes.txt")).expect("removed");
    // An exported file the user edited: refused too.
    let manifest = out.join("export.json");
    let dataset = std::fs::read_dir(&out)
        .expect("listing")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.is_file() && *path != manifest)
        .expect("a dataset file");
    std::fs::write(&dataset, "edited").expect("edit");
    let error = export_workspace(&workspace, &format, &out).expect_err("refused");
    assert!(
        matches!(error, ExportError::ChangedExport { .. }),
        "{error}"
    );
    // Any folder that holds a file named export.json is not thereby an export.
    let mine = folder.path().join("mine");
    std::fs::create_dir_all(&mine).expect("folder");
    std::fs::write(mine.join("export.json"), "{}").expect("file");
    std::fs::write(mine.join("thesis.tex"), "keep").expect("file");
    let error = export_workspace(&workspace, &format, &mine).expect_err("refused");
    assert!(matches!(error, ExportError::NotAnExport(_)), "{error}");
    assert!(mine.join("thesis.tex").is_file());
}

#[test]
fn exporting_into_the_current_folder_leaves_no_temporary_folder() {
    let folder = tempfile::tempdir().expect("temp dir");
    let (workspace, _) = reviewed_workspace(&folder.path().join("workspace"));
    let out = folder.path().join("here");
    std::fs::create_dir_all(&out).expect("folder");
    // `--out .` run from inside `here`: the path has no file name of its own.
    let dotted = out.join(".");
    export_workspace(&workspace, &options(ExportFormat::Keyslices), &dotted).expect("exported");
    assert!(out.join("export.json").is_file());
    let leftovers: Vec<_> = std::fs::read_dir(folder.path())
        .expect("listing")
        .chain(std::fs::read_dir(&out).expect("listing"))
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn an_export_keeps_to_the_images_a_case_was_analysed_on() {
    use keyslice::prediction::ImageBinding;
    let folder = tempfile::tempdir().expect("temp dir");
    let (workspace, series) = reviewed_workspace(&folder.path().join("workspace"));
    let case_id = workspace.manifest.cases[0].case_id.clone();
    let analysed = load_study(&series, &LoadOptions::default()).expect("loads");
    let mut prediction = common::saved_prediction(
        &case_id,
        "Liver lesion 1: Size: 1.0 x 0.7 cm. Key slice: 3",
        None,
    );
    prediction.images = Some(ImageBinding::of(&analysed.volume));
    workspace.append_prediction(&prediction).expect("appended");
    let export = |name: &str| {
        export_workspace(
            &workspace,
            &ExportOptions {
                volumes: true,
                ..options(ExportFormat::Swift)
            },
            &folder.path().join(name),
        )
    };
    export("first").expect("exported");
    let attention = |workspace: &Workspace| {
        let predictions = workspace.predictions().expect("predictions");
        workspace.worklist(&predictions).expect("worklist")[0]
            .attention
            .clone()
            .unwrap_or_default()
    };
    assert!(!attention(&workspace).contains("files changed"));

    // A larger series of the same study lands in the case's folder: the loader alone would
    // now take it; the export keeps to the series the case was analysed on.
    let template = dicom_object::open_file(series.join("DOE_JANE_000.dcm")).expect("a slice");
    for index in 0..20 {
        let mut object = template.clone();
        let uid = format!("1.2.826.0.1.3680043.2.1125.5555.{}", index + 1);
        let mut text = |tag, vr, value: &str| {
            object.put(DataElement::new(tag, vr, PrimitiveValue::from(value)));
        };
        text(
            tags::SERIES_INSTANCE_UID,
            VR::UI,
            "1.2.826.0.1.3680043.2.1125.5555",
        );
        text(tags::SOP_INSTANCE_UID, VR::UI, &uid);
        text(tags::INSTANCE_NUMBER, VR::IS, &(index + 1).to_string());
        text(
            tags::IMAGE_POSITION_PATIENT,
            VR::DS,
            &format!("-120\\-120\\{}", f64::from(index) * 2.5),
        );
        object.meta_mut().media_storage_sop_instance_uid = uid.clone();
        object
            .write_to_file(series.join(format!("LATER_{index:03}.dcm")))
            .expect("written");
    }
    assert_eq!(
        load_study(&series, &LoadOptions::default())
            .expect("loads")
            .volume
            .dims()[2],
        20,
        "the folder's largest series is now the later one"
    );
    // The worklist says so at a glance, without reading any image.
    assert_eq!(
        attention(&workspace),
        "its files changed since it was analysed: open it to check, or analyse it again"
    );
    export("second").expect("exported on the analysed series");
    let volumes = folder.path().join("second").join("volumes");
    let exported = std::fs::read_dir(&volumes)
        .expect("volumes")
        .next()
        .expect("one")
        .expect("entry")
        .path();
    let volume = read_nifti(&exported).expect("reads");
    assert_eq!(
        volume.dims()[2],
        10,
        "the analysed series, not the later one"
    );

    // A file of the analysed series changed: the export refuses, naming the case.
    let changed = series.join("DOE_JANE_003.dcm");
    let mut object = dicom_object::open_file(&changed).expect("a slice");
    object.put(DataElement::new(
        tags::RESCALE_INTERCEPT,
        VR::DS,
        PrimitiveValue::from("-1000"),
    ));
    object.write_to_file(&changed).expect("written");
    let error = export("third").expect_err("refused");
    let said = error.to_string();
    assert!(
        said.contains(&case_id) && said.contains("other values than when it was analysed"),
        "{said}"
    );
    assert!(!folder.path().join("third").exists(), "nothing written");
}

/// The shape of a JSON value (object keys, array element shapes, scalar kinds), merged over
/// rows: a null takes any shape, an empty array any element shape. `Err` names where two rows
/// disagree, which is what makes ms-swift refuse to join two `--dataset` files.
fn merge_shape(
    into: &serde_json::Value,
    row: &serde_json::Value,
    at: &str,
) -> Result<serde_json::Value, String> {
    use serde_json::Value;
    Ok(match (into, row) {
        (Value::Null, other) | (other, Value::Null) => other.clone(),
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            let mut merged = serde_json::Map::new();
            for key in keys {
                let (Some(x), Some(y)) = (a.get(key), b.get(key)) else {
                    return Err(format!("{at}.{key} is in some rows only"));
                };
                merged.insert(key.clone(), merge_shape(x, y, &format!("{at}.{key}"))?);
            }
            Value::Object(merged)
        }
        (Value::Array(a), Value::Array(b)) => {
            let mut element = Value::Null;
            for item in a.iter().chain(b) {
                element = merge_shape(&element, item, &format!("{at}[]"))?;
            }
            Value::Array(vec![element])
        }
        (Value::String(_), Value::String(_)) => json!(""),
        (Value::Bool(_), Value::Bool(_)) => json!(false),
        (Value::Number(a), Value::Number(b)) if a.is_f64() == b.is_f64() => {
            Value::Number(a.clone())
        }
        (a, b) => return Err(format!("{at} is {a} in one row and {b} in another")),
    })
}

/// A swift row's answer is well-formed and scores 1.0 against the row's own ground truth.
fn assert_best_answer(row: &serde_json::Value) {
    let truth = TruthRecord::from_value(
        serde_json::from_str(row["truth"].as_str().expect("text")).expect("JSON"),
    )
    .expect("a truth record");
    let findings = truth.truth_findings().expect("findings");
    let scored = keyslice::scoring::score_answer(
        row["solution"].as_str().expect("the answer"),
        None,
        &keyslice::scoring::Reference {
            findings: &findings,
            lesion_extents: &truth.lesion_extents,
        },
        &keyslice::scoring::RewardWeights::default(),
        keyslice::scoring::SizeTolerance::default(),
        truth.volume_size(),
    );
    assert!(
        scored.faults.is_empty(),
        "{}: {:?}",
        row["case"],
        scored.faults
    );
    assert!((scored.rewards.total - 1.0).abs() < 1e-9, "{}", row["case"]);
}

/// The rows of an export's train and val files (JSON lines, or a JSON list).
fn split_rows(out: &Path, format: &str) -> Vec<serde_json::Value> {
    let mut rows = Vec::new();
    for split in ["train", "val"] {
        if let Ok(text) = std::fs::read_to_string(out.join(format!("{split}.jsonl"))) {
            rows.extend(
                text.lines()
                    .map(|line| serde_json::from_str(line).expect("a JSON row")),
            );
        } else if let Ok(text) = std::fs::read_to_string(out.join(format!("{split}.json"))) {
            let list: Vec<serde_json::Value> = serde_json::from_str(&text).expect("rows");
            rows.extend(list);
        } else {
            panic!("{format}: no {split} split");
        }
    }
    rows
}

/// Train and validation splits that differ (tumor-free cases on one side only is what broke
/// ms-swift) still have one schema: every row of every file has the same nested fields.
#[test]
fn every_row_of_every_split_has_one_schema() {
    let folder = tempfile::tempdir().expect("temp dir");
    let path = |name: &str| {
        folder
            .path()
            .join(name)
            .to_str()
            .expect("utf-8")
            .to_string()
    };
    for args in [
        vec![
            "phantom",
            "--out",
            &path("ph"),
            "--cases",
            "10",
            "--seed",
            "12",
            "--matrix",
            "64",
        ],
        vec!["workspace", "create", &path("ws"), &path("ph")],
        vec!["workspace", "analyze", &path("ws")],
    ] {
        let out = common::keyslice(&args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            common::text(&out.stderr)
        );
    }
    // A reviewer finds no tumor in three cases: their answers have no lesion, box or range.
    let workspace = Workspace::open(Path::new(&path("ws"))).expect("workspace");
    for case in workspace.manifest.cases.iter().take(3) {
        let mut review = CaseReview::open(
            &workspace.database_path(),
            &case.case_id,
            "dr. reviewer",
            None,
        )
        .expect("review");
        for organ in Organ::ALL {
            review
                .set(&format!("{}.tumor", organ.key()), json!("no"))
                .expect("no tumor");
        }
        review.set_status(ReviewStatus::Done).expect("accepted");
    }
    for format in ["swift", "llamafactory"] {
        let out = path(format);
        let exported = common::keyslice(&[
            "export",
            &path("ws"),
            "--format",
            format,
            "--out",
            &out,
            "--include-unreviewed",
            "--frames",
            "4",
            "--split",
            "0.5",
            "--seed",
            "3",
        ]);
        assert!(
            exported.status.success(),
            "{}",
            common::text(&exported.stderr)
        );
        let rows = split_rows(Path::new(&out), format);
        assert!(rows.len() >= 8, "{format}: {} rows", rows.len());
        if format == "swift" {
            // Every exported answer, tumor-free ones included, is well-formed and is the best
            // answer to its own ground truth.
            rows.iter().for_each(assert_best_answer);
            // Findings without any lesion beside findings with lesions: nested fields differ.
            let free = rows
                .iter()
                .filter(|row| !row["findings"].as_str().unwrap_or("").contains("lesions"))
                .count();
            let all: Vec<String> = rows.iter().map(|row| row["findings"].to_string()).collect();
            assert!(free > 0 && free < rows.len(), "{free} tumor-free: {all:?}");
        }
        // The validation split evaluates and never trains.
        let guide = std::fs::read_to_string(Path::new(&out).join("TRAINING.md")).expect("guide");
        let expected = if format == "swift" {
            format!("--dataset {out}/train.jsonl --val_dataset {out}/val.jsonl")
        } else {
            "dataset: keyslice_train\neval_dataset: keyslice_val\n".to_string()
        };
        assert!(guide.contains(&expected), "{guide}");
        let mut shape = serde_json::Value::Null;
        for row in &rows {
            shape = merge_shape(&shape, row, format).unwrap_or_else(|why| panic!("{why}"));
        }
    }
}

/// The segmentation format: a reviewed lesion without a mask keeps its case out (its label
/// map would call the tumor background); with its mask, the case is the CT and a label map
/// that nibabel reads on the same grid, in nnU-Net's layout with MONAI's datalist, and no
/// identifying value is in any byte.
#[test]
fn a_segmentation_export_holds_each_reviewed_mask_as_a_label_map_nnunet_and_monai_read() {
    use keyslice::volume::mask::{Brush, LesionMask, paint};
    let folder = tempfile::tempdir().expect("temp dir");
    let (workspace, _) = reviewed_workspace(&folder.path().join("workspace"));
    let out = folder.path().join("segmentation");
    let error = export_workspace(&workspace, &options(ExportFormat::Segmentation), &out)
        .expect_err("a lesion without a mask");
    assert!(
        error.to_string().contains("liver lesion 1 has no mask"),
        "{error}"
    );
    assert!(!out.exists());

    // The reviewer draws the lesion: a ball of 4 voxels' radius (5 mm voxels) on slice 6.
    let case_id = workspace.manifest.cases[0].case_id.clone();
    let dims = [48, 48, 10];
    let mut mask = vec![0u8; 48 * 48 * 10];
    let painted = paint(
        &mut mask,
        dims,
        [5.0, 5.0, 5.0],
        [20, 20, 6],
        20.0,
        Brush::Ball,
        true,
    )
    .expect("painted");
    let mut review = CaseReview::open(&workspace.database_path(), &case_id, "dr. reviewer", None)
        .expect("review");
    review
        .set(
            "liver.lesions.0.mask",
            serde_json::to_value(LesionMask::from_dense(&mask, dims)).expect("json"),
        )
        .expect("mask saved");
    drop(review);
    let summary =
        export_workspace(&workspace, &options(ExportFormat::Segmentation), &out).expect("exported");
    assert_eq!((summary.train, summary.invalid.len()), (1, 0));
    let exported = files(&out);
    let names: Vec<String> = exported
        .keys()
        .map(|path| path.to_string_lossy().replace('\\', "/"))
        .collect();
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("imagesTr/case-") && n.ends_with("_0000.nii.gz")),
        "{names:?}"
    );
    assert!(
        names.iter().any(|n| n.starts_with("labelsTr/case-")),
        "{names:?}"
    );
    assert!(names.contains(&"dataset.json".to_string()), "{names:?}");
    assert!(names.contains(&"datalist.json".to_string()), "{names:?}");
    for (path, bytes) in &exported {
        let name = path.to_string_lossy();
        for identifier in IDENTIFIERS {
            assert!(
                !name.contains(identifier)
                    && !bytes
                        .windows(identifier.len())
                        .any(|w| w == identifier.as_bytes()),
                "{identifier:?} found in {name}"
            );
        }
    }
    // Read as the training frameworks read it.
    let python = std::process::Command::new("python3")
        .args(["-c", "import nibabel"])
        .output()
        .is_ok_and(|output| output.status.success());
    assert!(
        python || std::env::var_os("KEYSLICE_REQUIRE_PYTHON").is_none(),
        "python3 with nibabel is required (KEYSLICE_REQUIRE_PYTHON is set): pip install nibabel"
    );
    if python {
        let output = std::process::Command::new("python3")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/segmentation_export.py"))
            .arg(&out)
            .output()
            .expect("python3 runs");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let read: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
        assert_eq!(read["labels"]["liver_lesion"], 5);
        let cases = read["cases"].as_object().expect("cases");
        assert_eq!(cases.len(), 1);
        let counts = cases.values().next().expect("one case");
        assert_eq!(
            counts["5"], painted,
            "every lesion voxel, and no other, is labelled 5"
        );
    }
}
