//! Shared test helpers: paths to committed fixtures, the reference values recorded by
//! `tests/data/make_fixtures.py`, and a writer for synthetic CT series (written through
//! dicom-object, so the reader sees real DICOM files).
#![allow(dead_code)]

pub mod mutate;

use std::path::{Path, PathBuf};

use dicom_core::value::PrimitiveValue;
use dicom_core::{DataElement, VR};
use dicom_dictionary_std::tags;
use dicom_object::{FileMetaTableBuilder, InMemDicomObject};

/// Runs the `keyslice` binary with `args`.
pub fn keyslice(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_keyslice"))
        .args(args)
        .output()
        .expect("the binary runs")
}

/// Bytes as (lossy) UTF-8 text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).to_string()
}

/// `tests/data/<relative>`.
pub fn data(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(relative)
}

/// The reference values in `tests/data/expected.json`.
pub fn expected() -> serde_json::Value {
    let text = std::fs::read_to_string(data("expected.json")).expect("expected.json is committed");
    serde_json::from_str(&text).expect("expected.json is valid JSON")
}

/// One synthetic CT slice to write.
#[derive(Clone, Debug)]
pub struct SliceSpec {
    pub series_uid: String,
    pub sop_uid: String,
    pub instance_number: i32,
    pub position: [f64; 3],
    pub orientation: [f64; 6],
    pub rows: u16,
    pub columns: u16,
    pub pixel_spacing: [f64; 2],
    pub slope: f64,
    pub intercept: f64,
    pub image_type: &'static str,
    pub description: &'static str,
    pub photometric: &'static str,
    /// Stored values, row by row.
    pub stored: Vec<i16>,
}

impl SliceSpec {
    /// An axial 1 mm-pixel slice at height `z_mm` whose stored values encode `marker`
    /// (every pixel = marker + column index).
    pub fn axial(series: &str, index: usize, z_mm: f64, marker: i16) -> Self {
        let rows = 6;
        let columns = 8;
        Self {
            series_uid: series.to_string(),
            sop_uid: format!("{series}.{index}"),
            instance_number: index as i32 + 1,
            position: [-4.0, -3.0, z_mm],
            orientation: [1.0, 0.0, 0.0, 0.0, 1.0, 0.0],
            rows,
            columns,
            pixel_spacing: [1.0, 1.0],
            slope: 1.0,
            intercept: -1024.0,
            image_type: "ORIGINAL\\PRIMARY\\AXIAL",
            description: "SYNTHETIC",
            photometric: "MONOCHROME2",
            stored: (0..rows as i16 * columns as i16)
                .map(|n| marker + n % columns as i16)
                .collect(),
        }
    }

    /// Writes the slice as Explicit VR Little Endian CT Image Storage.
    pub fn write(&self, path: &Path) {
        let mut object = InMemDicomObject::new_empty();
        let text = |tag, vr, value: &str| DataElement::new(tag, vr, PrimitiveValue::from(value));
        object.put(text(
            tags::SOP_CLASS_UID,
            VR::UI,
            "1.2.840.10008.5.1.4.1.1.2",
        ));
        object.put(text(tags::SOP_INSTANCE_UID, VR::UI, &self.sop_uid));
        object.put(text(tags::STUDY_INSTANCE_UID, VR::UI, "1.2.3.4.5"));
        object.put(text(tags::SERIES_INSTANCE_UID, VR::UI, &self.series_uid));
        object.put(text(tags::MODALITY, VR::CS, "CT"));
        object.put(text(tags::SERIES_DESCRIPTION, VR::LO, self.description));
        object.put(text(tags::IMAGE_TYPE, VR::CS, self.image_type));
        object.put(text(
            tags::INSTANCE_NUMBER,
            VR::IS,
            &self.instance_number.to_string(),
        ));
        object.put(text(
            tags::IMAGE_POSITION_PATIENT,
            VR::DS,
            &decimals(&self.position),
        ));
        object.put(text(
            tags::IMAGE_ORIENTATION_PATIENT,
            VR::DS,
            &decimals(&self.orientation),
        ));
        object.put(text(
            tags::PIXEL_SPACING,
            VR::DS,
            &decimals(&self.pixel_spacing),
        ));
        object.put(text(tags::RESCALE_SLOPE, VR::DS, &self.slope.to_string()));
        object.put(text(
            tags::RESCALE_INTERCEPT,
            VR::DS,
            &self.intercept.to_string(),
        ));
        object.put(text(
            tags::PHOTOMETRIC_INTERPRETATION,
            VR::CS,
            self.photometric,
        ));
        let short = |tag, value: u16| DataElement::new(tag, VR::US, PrimitiveValue::from(value));
        object.put(short(tags::SAMPLES_PER_PIXEL, 1));
        object.put(short(tags::ROWS, self.rows));
        object.put(short(tags::COLUMNS, self.columns));
        object.put(short(tags::BITS_ALLOCATED, 16));
        object.put(short(tags::BITS_STORED, 16));
        object.put(short(tags::HIGH_BIT, 15));
        object.put(short(tags::PIXEL_REPRESENTATION, 1));
        let bytes: Vec<u8> = self
            .stored
            .iter()
            .flat_map(|value| value.to_le_bytes())
            .collect();
        object.put(DataElement::new(
            tags::PIXEL_DATA,
            VR::OW,
            PrimitiveValue::from(bytes),
        ));
        let meta = FileMetaTableBuilder::new()
            .media_storage_sop_class_uid("1.2.840.10008.5.1.4.1.1.2")
            .media_storage_sop_instance_uid(self.sop_uid.as_str())
            .transfer_syntax("1.2.840.10008.1.2.1")
            .build()
            .expect("complete meta table");
        object
            .with_exact_meta(meta)
            .write_to_file(path)
            .expect("test folder is writable");
    }
}

fn decimals(values: &[f64]) -> String {
    values
        .iter()
        .map(|value| format!("{value}"))
        .collect::<Vec<_>>()
        .join("\\")
}

/// Writes `slices` into `folder` under the given file names.
pub fn write_series(folder: &Path, slices: &[(String, SliceSpec)]) {
    std::fs::create_dir_all(folder).expect("test folder is writable");
    for (name, slice) in slices {
        slice.write(&folder.join(name));
    }
}

/// Copies `source` to `target`, keeping only the first `keep` bytes.
pub fn truncated_copy(source: &Path, target: &Path, keep: usize) {
    let bytes = std::fs::read(source).expect("source exists");
    std::fs::write(target, &bytes[..keep.min(bytes.len())]).expect("target is writable");
}

/// Writes a binary mask (value 1 where `on(i, j, k)`) as NIfTI on the grid `dims`, `affine`;
/// with `on` never true it writes an all-zero volume (a stand-in CT for mask tests).
pub fn write_mask(
    path: &Path,
    dims: [usize; 3],
    affine: keyslice::volume::Affine,
    on: impl Fn(usize, usize, usize) -> bool,
) {
    use keyslice::io::nifti::{WriteOptions, write_nifti};
    use keyslice::volume::{Volume, VolumeInfo, Voxels};
    let mut values = vec![0i16; dims[0] * dims[1] * dims[2]];
    for k in 0..dims[2] {
        for j in 0..dims[1] {
            for i in 0..dims[0] {
                if on(i, j, k) {
                    values[i + dims[0] * (j + dims[1] * k)] = 1;
                }
            }
        }
    }
    let volume = Volume::new(
        dims,
        affine,
        Voxels::I16(values),
        Vec::new(),
        VolumeInfo::default(),
    )
    .expect("mask parts agree");
    write_nifti(&volume, path, WriteOptions::default()).expect("write mask");
}

/// A small AbdomenAtlas case folder `case` (16 × 16 × 20 voxels of 2 × 2 × 3 mm): an empty
/// CT, a liver lesion on slices 5–8 (16 voxels on slice 7, 8 on the others) and a kidney
/// lesion on the patient's left (+x, high i) on slices 12–13 (48 voxels each). Returns the
/// grid's dims and transform for further masks.
pub fn write_lesion_case(case: &Path) -> ([usize; 3], keyslice::volume::Affine) {
    let segmentations = case.join("segmentations");
    std::fs::create_dir_all(&segmentations).expect("mkdir");
    let dims = [16, 16, 20];
    let affine = keyslice::volume::Affine::from_axes(
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
        [2.0, 2.0, 3.0],
        [-16.0, -16.0, 0.0],
    );
    write_mask(&case.join("ct.nii.gz"), dims, affine, |_, _, _| false);
    write_mask(
        &segmentations.join("liver_lesion.nii.gz"),
        dims,
        affine,
        |i, j, k| (5..=8).contains(&k) && i < 4 && j < if k == 7 { 4 } else { 2 },
    );
    write_mask(
        &segmentations.join("kidney_lesion.nii.gz"),
        dims,
        affine,
        |i, _, k| (12..=13).contains(&k) && i > 12,
    );
    (dims, affine)
}

/// A block of `hu` in air (−1000 HU): `dims` voxels of `spacing_mm` along the LPS axes from
/// the origin, the block over the voxel ranges `block` (i, j, k); with its mask (label 1 on
/// the block) named `name`.
pub fn bright_block(
    dims: [usize; 3],
    spacing_mm: [f64; 3],
    block: &[std::ops::Range<usize>; 3],
    hu: i16,
    name: &str,
) -> (keyslice::volume::Volume, keyslice::volume::LabelVolume) {
    use keyslice::volume::{Affine, LabelVolume, Volume, VolumeInfo, Voxels};
    let mut values = vec![-1000i16; dims[0] * dims[1] * dims[2]];
    let mut labels = vec![0u8; values.len()];
    for k in block[2].clone() {
        for j in block[1].clone() {
            for i in block[0].clone() {
                values[i + dims[0] * (j + dims[1] * k)] = hu;
                labels[i + dims[0] * (j + dims[1] * k)] = 1;
            }
        }
    }
    let affine = Affine::from_axes(
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
        spacing_mm,
        [0.0; 3],
    );
    let volume = Volume::new(
        dims,
        affine,
        Voxels::I16(values),
        Vec::new(),
        VolumeInfo::default(),
    )
    .expect("block parts agree");
    let mask = LabelVolume {
        name: name.into(),
        dims,
        patient_from_voxel: affine,
        labels,
    };
    (volume, mask)
}

/// Writes `records` (one JSON value a line) to `folder/pred.jsonl` and scores them with
/// `keyslice score --json` against `truth` (case folders), which must succeed: its report.
pub fn score_predictions(
    folder: &Path,
    records: &[serde_json::Value],
    truth: &Path,
) -> serde_json::Value {
    let pred = folder.join("pred.jsonl");
    let mut lines = String::new();
    for record in records {
        lines.push_str(&record.to_string());
        lines.push('\n');
    }
    std::fs::write(&pred, lines).expect("predictions written");
    let scored = keyslice(&[
        "score",
        "--pred",
        pred.to_str().expect("utf-8 path"),
        "--truth",
        truth.to_str().expect("utf-8 path"),
        "--json",
    ]);
    assert!(scored.status.success(), "{}", text(&scored.stderr));
    serde_json::from_slice(&scored.stdout).expect("score prints JSON")
}

/// Runs `keyslice ARGS --out DIR` twice, into `folder/NAME-first` and `folder/NAME-second`:
/// both must succeed and log each of `logged`, and both checkpoints must be the same bytes
/// (training is reproducible). Returns the first folder.
pub fn train_twice(folder: &Path, name: &str, args: &[&str], logged: &[&str]) -> PathBuf {
    let outs = [
        folder.join(format!("{name}-first")),
        folder.join(format!("{name}-second")),
    ];
    for out in &outs {
        let mut all = args.to_vec();
        all.extend(["--out", out.to_str().expect("utf-8 path")]);
        let result = keyslice(&all);
        assert!(result.status.success(), "{}", text(&result.stderr));
        let log = text(&result.stderr);
        for line in logged {
            assert!(log.contains(line), "{line:?} not in: {log}");
        }
    }
    let weights = |out: &Path| std::fs::read(out.join("model.safetensors")).expect("weights");
    assert!(
        weights(&outs[0]) == weights(&outs[1]),
        "{name}: the same seed must give the same checkpoint"
    );
    let [first, _] = outs;
    first
}

/// A prediction as a backend saves it for `case_id`: the findings read from `report` (key
/// slice 3 at z = 15 mm), with the evidence box `box_voxels` if given.
#[allow(dead_code)] // not every test file uses every helper
pub fn saved_prediction(
    case_id: &str,
    report: &str,
    box_voxels: Option<[u32; 4]>,
) -> keyslice::infer::Prediction {
    let findings = keyslice::findings::reader::read_report(report)
        .findings
        .without_spans();
    serde_json::from_value(serde_json::json!({
        "version": 1,
        "case_id": case_id,
        "diagnoser": {"id": "keyslice-tiny", "version": "test"},
        "verifier": null,
        "report": report,
        "findings": findings,
        "key_slice": {"index": 3, "z_mm": 15.0},
        "box": box_voxels.map(|voxels| serde_json::json!({"voxels": voxels})),
        "local_description": null,
        "local_findings": null,
        "consistency": null,
        "timings_ms": {"diagnose": 1.0, "verify": 0.0, "total": 1.0},
        "warnings": []
    }))
    .expect("a prediction")
}

/// Every file under `folder`, relative path → bytes.
pub fn files(folder: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut found = std::collections::BTreeMap::new();
    let mut stack = vec![folder.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("listing") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let relative = path.strip_prefix(folder).expect("inside").to_path_buf();
                found.insert(relative, std::fs::read(&path).expect("readable"));
            }
        }
    }
    found
}

/// Whether a GPU adapter exists; without one (and without `KEYSLICE_REQUIRE_GPU`) the
/// window and viewer checks are skipped with a message.
pub fn gpu_available() -> bool {
    match keyslice::render::headless_device() {
        Ok(_) => true,
        Err(error) => {
            assert!(
                std::env::var_os("KEYSLICE_REQUIRE_GPU").is_none(),
                "KEYSLICE_REQUIRE_GPU is set but {error}"
            );
            eprintln!("no GPU adapter, skipping window checks: {error}");
            false
        }
    }
}

/// Every file below `root`, folders walked (links not followed).
pub fn files_below(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    if let Ok(entries) = std::fs::read_dir(root) {
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                found.extend(files_below(&path));
            } else {
                found.push(path);
            }
        }
    }
    found
}

/// Findings that say a liver tumor is there (`tumor`) or not, and nothing of other organs.
pub fn liver_findings(tumor: bool) -> keyslice::findings::Findings {
    use keyslice::findings::{Findings, Organ, OrganFindings, TumorPresence};
    let mut findings = Findings::default();
    findings.organs.insert(
        Organ::Liver,
        OrganFindings {
            tumor: if tumor {
                TumorPresence::Yes
            } else {
                TumorPresence::No
            },
            lesions: Vec::new(),
            span: None,
        },
    );
    findings
}

/// A simulated study's truth and AI results: a liver tumor in the cases where `real(k)` (k
/// their index); the AI claims one in every case, which the evidence display shows agreeing
/// with its key slice where it is real and denied by the verifier where it is a
/// hallucination.
pub fn liver_truth_and_ai(
    cases: &[String],
    real: impl Fn(usize) -> bool,
) -> (
    std::collections::BTreeMap<String, keyslice::findings::Findings>,
    std::collections::BTreeMap<String, keyslice::review::study::AiResult>,
) {
    let mut truth = std::collections::BTreeMap::new();
    let mut ai = std::collections::BTreeMap::new();
    for (k, case) in cases.iter().enumerate() {
        truth.insert(case.clone(), liver_findings(real(k)));
        ai.insert(
            case.clone(),
            keyslice::review::study::AiResult {
                claims: vec![keyslice::findings::Organ::Liver],
                shown: [(
                    keyslice::findings::Organ::Liver,
                    if real(k) {
                        keyslice::scoring::Standing::Agrees
                    } else {
                        keyslice::scoring::Standing::Denied
                    },
                )]
                .into(),
            },
        );
    }
    (truth, ai)
}

/// `keyslice study create DIR --workspace WORKSPACE --reader R… ARGS…`, which must succeed;
/// what it printed.
pub fn create_study(workspace: &Path, dir: &Path, readers: &[&str], args: &[&str]) -> String {
    let mut all = vec![
        "study".to_string(),
        "create".into(),
        dir.to_str().expect("utf-8").into(),
        "--workspace".into(),
        workspace.to_str().expect("utf-8").into(),
    ];
    for reader in readers {
        all.extend(["--reader".to_string(), (*reader).to_string()]);
    }
    all.extend(args.iter().map(|arg| (*arg).to_string()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let created = keyslice(&all);
    assert!(created.status.success(), "{}", text(&created.stderr));
    text(&created.stdout)
}

/// A study of readers ana, ben and cho over `cases` cases named `case0`…, in two arms
/// (`unaided` shows the images, `evidence` everything), with seed 3.
pub fn study_definition(
    design: keyslice::review::study::Design,
    cases: usize,
) -> keyslice::review::study::StudyDefinition {
    use keyslice::review::study::{Arm, STUDY_VERSION, Shows, StudyDefinition};
    StudyDefinition {
        keyslice_study: STUDY_VERSION,
        name: "trial".into(),
        workspace: PathBuf::from("/nowhere"),
        cases: (0..cases).map(|k| format!("case{k}")).collect(),
        readers: vec!["ana".into(), "ben".into(), "cho".into()],
        arms: vec![
            Arm {
                name: "unaided".into(),
                shows: Shows::Images,
            },
            Arm {
                name: "evidence".into(),
                shows: Shows::Evidence,
            },
        ],
        design,
        seed: 3,
        pacs_query: None,
    }
}

/// A test hospital CA and a server certificate it signed for `localhost` and 127.0.0.1, made
/// with openssl in `folder`: `ca.pem`, `server.pem`, `server.key`. False without openssl
/// (a failure when `KEYSLICE_REQUIRE_PYTHON` is set).
pub fn test_ca(folder: &Path) -> bool {
    let run = |args: &[&str]| {
        std::process::Command::new("openssl")
            .args(args)
            .current_dir(folder)
            .output()
            .is_ok_and(|output| output.status.success())
    };
    std::fs::write(
        folder.join("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .expect("written");
    let made = run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=Keyslice Test Hospital CA",
    ]) && run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    ]) && run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    ]);
    if !made {
        assert!(
            std::env::var_os("KEYSLICE_REQUIRE_PYTHON").is_none(),
            "openssl is needed to make the test CA"
        );
    }
    made
}
