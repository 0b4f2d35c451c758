//! `keyslice phantom`: the files are in the AbdomenAtlas layout, the same seed gives the same
//! bytes, and the truth agrees with what the masks and the CT show (presence, key slice,
//! extents, sizes, locations, attenuation, organ HU).

mod common;

use std::path::Path;

use common::{keyslice, score_predictions, text};
use keyslice::findings::{Attenuation, KidneyPole, Location, Organ, PancreasPart};
use keyslice::io::cases::read_truth;
use keyslice::io::nifti::{read_label_nifti, read_nifti};
use keyslice::phantom::anatomy::Ellipsoid;
use keyslice::phantom::write::write_case;
use keyslice::phantom::{PhantomOptions, PhantomTruth, generate};
use keyslice::volume::{LabelVolume, Volume, resample_nearest};

fn files_under(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("readable") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                folders.push(path);
            } else {
                let name = path
                    .strip_prefix(root)
                    .expect("inside")
                    .display()
                    .to_string();
                files.push((name, std::fs::read(&path).expect("readable")));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn same_seed_gives_byte_identical_cases_in_the_abdomenatlas_layout() {
    let folder = tempfile::tempdir().expect("temp dir");
    let run = |out: &str, seed: &str| {
        let out = folder.path().join(out);
        let result = keyslice(&[
            "phantom",
            "--out",
            out.to_str().expect("utf-8"),
            "--cases",
            "2",
            "--seed",
            seed,
            "--matrix",
            "64",
        ]);
        assert!(result.status.success(), "{}", text(&result.stderr));
        assert!(text(&result.stdout).contains("2 phantom case(s)"));
        files_under(&out)
    };
    let first = run("a", "5");
    let names: Vec<&str> = first.iter().map(|(name, _)| name.as_str()).collect();
    for expected in [
        "manifest.json",
        "PHANTOM_5_0000/ct.nii.gz",
        "PHANTOM_5_0000/truth.json",
        "PHANTOM_5_0000/segmentations/liver.nii.gz",
        "PHANTOM_5_0000/segmentations/pancreas.nii.gz",
        "PHANTOM_5_0000/segmentations/kidney_left.nii.gz",
        "PHANTOM_5_0000/segmentations/kidney_right.nii.gz",
        "PHANTOM_5_0000/segmentations/spleen.nii.gz",
        "PHANTOM_5_0000/segmentations/liver_lesion.nii.gz",
        "PHANTOM_5_0000/segmentations/pancreatic_lesion.nii.gz",
        "PHANTOM_5_0000/segmentations/kidney_lesion.nii.gz",
        "PHANTOM_5_0001/ct.nii.gz",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    assert!(
        !names.iter().any(|name| name.contains("partial")),
        "{names:?}"
    );
    assert_eq!(first, run("b", "5"), "same seed, same bytes");
    let other = run("c", "6");
    assert_ne!(first[1].1, other[1].1, "another seed, another CT");
}

#[test]
fn existing_cases_are_never_overwritten_and_bad_arguments_are_named() {
    let folder = tempfile::tempdir().expect("temp dir");
    let out = folder.path().to_str().expect("utf-8");
    let args = ["phantom", "--out", out, "--cases", "1", "--matrix", "32"];
    assert!(keyslice(&args).status.success());
    let again = keyslice(&args);
    assert_eq!(again.status.code(), Some(1));
    let stderr = text(&again.stderr);
    assert!(stderr.contains("PHANTOM_1_0000 already exists"), "{stderr}");
    assert!(stderr.contains("hint:"), "{stderr}");
    let bad = keyslice(&["phantom", "--out", out, "--slice-mm", "40"]);
    assert_eq!(
        bad.status.code(),
        Some(2),
        "a value out of range is a usage error"
    );
    assert!(
        text(&bad.stderr).contains("--slice-mm 40"),
        "{}",
        text(&bad.stderr)
    );
}

/// A mask by name from a case folder, on the CT's grid (the reader keeps the file's own
/// voxel order, so it is resampled through both transforms, as `io::masks` does).
fn mask(case: &Path, name: &str, ct: &Volume) -> LabelVolume {
    let mask =
        read_label_nifti(&case.join("segmentations").join(format!("{name}.nii.gz"))).expect("mask");
    resample_nearest(&mask, ct.dims(), ct.patient_from_voxel()).expect("invertible")
}

/// Voxel indices (i, j, k) set in `mask`.
fn voxels(mask: &LabelVolume) -> Vec<[usize; 3]> {
    let [nx, ny, _] = mask.dims;
    mask.labels
        .iter()
        .enumerate()
        .filter(|(_, label)| **label != 0)
        .map(|(at, _)| [at % nx, (at / nx) % ny, at / (nx * ny)])
        .collect()
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, count) = values.fold((0.0, 0usize), |(sum, count), v| (sum + v, count + 1));
    sum / count.max(1) as f64
}

/// Longest in-plane distance (mm) between voxel centres of a lesion on one slice, plus one
/// pixel for the voxels' own width.
fn feret_mm(points: &[[usize; 3]], pixel_mm: f64) -> f64 {
    let mut longest = 0.0f64;
    for a in points {
        for b in points {
            let dx = a[0] as f64 - b[0] as f64;
            let dy = a[1] as f64 - b[1] as f64;
            longest = longest.max(dx.hypot(dy));
        }
    }
    (longest + 1.0) * pixel_mm
}

/// Checks one written case against its truth.
#[expect(
    clippy::too_many_lines,
    reason = "one checklist per truth field, in order"
)]
fn check_case(case: &Path, truth: &PhantomTruth) {
    let ct = read_nifti(&case.join("ct.nii.gz")).expect("ct");
    let [pixel_mm, _, _] = ct.spacing_mm();
    let liver = mask(case, "liver", &ct);
    let lesion_masks = [
        (Organ::Liver, mask(case, "liver_lesion", &ct)),
        (Organ::Pancreas, mask(case, "pancreatic_lesion", &ct)),
        (Organ::KidneyLeft, mask(case, "kidney_lesion", &ct)),
    ];
    let value = |[i, j, k]: [usize; 3]| f64::from(ct.value([i, j, k]).expect("inside"));
    // Organ attenuation is plausible for a portal venous phase.
    let liver_hu = mean(
        voxels(&liver)
            .into_iter()
            .filter(|&v| {
                lesion_masks[0].1.labels[v[0] + liver.dims[0] * (v[1] + liver.dims[1] * v[2])] == 0
            })
            .map(value),
    );
    assert!((85.0..130.0).contains(&liver_hu), "liver {liver_hu} HU");
    let spleen_hu = mean(voxels(&mask(case, "spleen", &ct)).into_iter().map(value));
    assert!(
        spleen_hu > liver_hu - 5.0,
        "spleen {spleen_hu} vs liver {liver_hu}"
    );

    for lesion in &truth.lesions {
        let kind = match lesion.organ {
            Organ::Liver => 0,
            Organ::Pancreas => 1,
            Organ::KidneyLeft | Organ::KidneyRight => 2,
        };
        let shape = Ellipsoid {
            centre: lesion.centre_mm,
            radii: lesion.radii_mm,
            angle: lesion.angle_rad,
        };
        let at_mm = |[i, j, k]: [usize; 3]| {
            ct.patient_from_voxel()
                .apply([i as f64, j as f64, k as f64])
        };
        // This lesion's voxels: the lesion mask near its own ellipsoid.
        let own: Vec<[usize; 3]> = voxels(&lesion_masks[kind].1)
            .into_iter()
            .filter(|&v| shape.level(at_mm(v)) < 1.5)
            .collect();
        assert_eq!(own.len(), lesion.voxels, "{}: voxel count", truth.case_id);
        let slices: Vec<usize> = own.iter().map(|v| v[2]).collect();
        assert_eq!(
            slices.iter().min().copied(),
            Some(lesion.first_slice as usize)
        );
        assert_eq!(
            slices.iter().max().copied(),
            Some(lesion.last_slice as usize)
        );
        // Size: the long axis measured on the largest slice agrees within the scoring
        // tolerance (20 %, at least 0.5 cm).
        let on_largest: Vec<[usize; 3]> = own
            .iter()
            .copied()
            .filter(|v| v[2] == lesion.largest_slice as usize)
            .collect();
        let measured_cm = feret_mm(&on_largest, pixel_mm) / 10.0;
        let tolerance = (0.2 * lesion.size.long_cm).max(0.5);
        assert!(
            (measured_cm - lesion.size.long_cm).abs() <= tolerance,
            "{}: {:?} long axis {} cm in truth, {measured_cm:.2} cm on the mask",
            truth.case_id,
            lesion.organ,
            lesion.size.long_cm
        );
        // Attenuation: the lesion core against its organ, where the lesion is wide enough
        // (3 pixels in radius) for partial volume to leave a core.
        if lesion.radii_mm[1] >= 3.0 * pixel_mm {
            let core = mean(
                own.iter()
                    .copied()
                    .filter(|&v| shape.level(at_mm(v)) < 0.35)
                    .map(value),
            );
            let difference = core - lesion.organ_hu;
            let agrees = match lesion.attenuation {
                Attenuation::Hypo => difference < -20.0,
                Attenuation::Hyper => difference > 20.0,
                _ => difference.abs() < 20.0,
            };
            assert!(
                agrees,
                "{}: {:?} lesion {:?}, core {core:.0} HU vs organ {:.0} HU",
                truth.case_id, lesion.organ, lesion.attenuation, lesion.organ_hu
            );
        }
        // Location, from the masks' own geometry.
        let centroid = [0, 1, 2].map(|axis| mean(own.iter().map(|v| v[axis] as f64)));
        let centroid_mm = ct.patient_from_voxel().apply(centroid);
        match &lesion.location {
            Location::LiverSegments(segments) => {
                let gallbladder = voxels(&mask(case, "gall_bladder", &ct));
                let cantlie_x = mean(gallbladder.iter().map(|&v| at_mm(v)[0]));
                let left_liver = segments.iter().all(|s| [2, 3, 4].contains(s));
                assert_eq!(
                    centroid_mm[0] > cantlie_x,
                    left_liver,
                    "{}: segment {segments:?} at x {:.1}, Cantlie's line at {cantlie_x:.1}",
                    truth.case_id,
                    centroid_mm[0]
                );
            }
            Location::Pancreas(part) => {
                let pancreas = voxels(&mask(case, "pancreas", &ct));
                let xs: Vec<f64> = pancreas.iter().map(|&v| at_mm(v)[0]).collect();
                let (low, high) = xs
                    .iter()
                    .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
                let fraction = (centroid_mm[0] - low) / (high - low);
                match part {
                    PancreasPart::Head => assert!(fraction < 0.45, "head at {fraction:.2}"),
                    PancreasPart::Tail => assert!(fraction > 0.5, "tail at {fraction:.2}"),
                    _ => assert!((0.15..0.85).contains(&fraction), "body at {fraction:.2}"),
                }
            }
            Location::Kidney(pole) => {
                let side = if lesion.organ == Organ::KidneyLeft {
                    "kidney_left"
                } else {
                    "kidney_right"
                };
                // The patient's left is +x.
                assert_eq!(centroid_mm[0] > 0.0, lesion.organ == Organ::KidneyLeft);
                let kidney = voxels(&mask(case, side, &ct));
                let zs: Vec<f64> = kidney.iter().map(|&v| at_mm(v)[2]).collect();
                let (low, high) = zs
                    .iter()
                    .fold((f64::MAX, f64::MIN), |(lo, hi), &z| (lo.min(z), hi.max(z)));
                let height = (lesion.centre_mm[2] - low) / (high - low);
                match pole {
                    KidneyPole::Upper => assert!(height > 0.55, "upper pole at {height:.2}"),
                    KidneyPole::Lower => assert!(height < 0.45, "lower pole at {height:.2}"),
                    KidneyPole::Mid => {
                        assert!((0.25..0.75).contains(&height), "mid at {height:.2}");
                    }
                }
            }
        }
    }
}

#[test]
fn truth_agrees_with_masks_and_image_over_many_cases() {
    let folder = tempfile::tempdir().expect("temp dir");
    let options = PhantomOptions {
        matrix: 128,
        slice_mm: Some(2.5),
    };
    let mut lesion_count = 0;
    let mut organs_seen = std::collections::BTreeSet::new();
    let mut attenuations_seen = std::collections::BTreeSet::new();
    let mut truths = Vec::new();
    for index in 0..16 {
        let case = generate(21, index, options);
        let written = write_case(folder.path(), &case).expect("written");
        assert_eq!(written.lesions, case.truth.lesions.len());
        check_case(&folder.path().join(&written.case_id), &case.truth);
        lesion_count += case.truth.lesions.len();
        for lesion in &case.truth.lesions {
            organs_seen.insert(lesion.organ);
            attenuations_seen.insert(format!("{:?}", lesion.attenuation));
        }
        truths.push(case.truth);
    }
    assert!(lesion_count >= 12, "{lesion_count} lesions in 16 cases");
    assert!(organs_seen.len() >= 3, "{organs_seen:?}");
    assert!(attenuations_seen.len() >= 2, "{attenuations_seen:?}");

    // `score` reads the same folder: truth.json records agree with truth derived from the
    // masks alone (presence per organ, key slice), once truth.json is set aside.
    let from_json = read_truth(folder.path()).expect("truth.json records");
    for truth in &truths {
        std::fs::remove_file(folder.path().join(&truth.case_id).join("truth.json")).expect("rm");
    }
    let from_masks = read_truth(folder.path()).expect("mask truth");
    assert_eq!(from_json.len(), 16);
    for ((json, masks), truth) in from_json.iter().zip(&from_masks).zip(&truths) {
        assert_eq!(json.case_id, truth.case_id);
        let (json, masks) = (
            json.truth_findings().expect("findings"),
            masks.truth_findings().expect("findings"),
        );
        for organ in Organ::ALL {
            assert_eq!(
                json.organ(organ).tumor,
                masks.organ(organ).tumor,
                "{} {organ}",
                truth.case_id
            );
        }
        assert_eq!(
            json.key_slice.as_ref().map(|key| key.index),
            masks.key_slice.as_ref().map(|key| key.index),
            "{} key slice",
            truth.case_id
        );
    }
}

#[test]
fn a_set_covers_the_hard_cases_organs_attenuations_and_grids() {
    let options = PhantomOptions {
        matrix: 32,
        slice_mm: None,
    };
    let cases: Vec<PhantomTruth> = (0..80)
        .map(|index| generate(3, index, options).truth)
        .collect();
    let lesions: Vec<_> = cases.iter().flat_map(|truth| &truth.lesions).collect();
    let count =
        |predicate: &dyn Fn(&PhantomTruth) -> bool| cases.iter().filter(|t| predicate(t)).count();
    assert!(
        count(&|t| t.lesions.is_empty()) >= 10,
        "cases without tumor"
    );
    assert!(
        count(&|t| t.lesions.len() >= 2) >= 10,
        "cases with several tumors"
    );
    for organ in Organ::ALL {
        assert!(
            lesions.iter().filter(|l| l.organ == organ).count() >= 5,
            "{organ}"
        );
    }
    for attenuation in [Attenuation::Hypo, Attenuation::Iso, Attenuation::Hyper] {
        assert!(
            lesions
                .iter()
                .filter(|l| l.attenuation == attenuation)
                .count()
                >= 3,
            "{attenuation:?}"
        );
    }
    let sizes: Vec<f64> = lesions.iter().map(|l| l.size.long_cm).collect();
    assert!(sizes.iter().any(|&s| s < 1.0), "small tumors (under 1 cm)");
    assert!(sizes.iter().any(|&s| s > 3.0), "large tumors");
    assert!(sizes.iter().all(|&s| (0.4..=6.1).contains(&s)), "{sizes:?}");
    let mut spacings: Vec<u64> = cases
        .iter()
        .map(|t| (t.spacing_mm[2] * 100.0) as u64)
        .collect();
    spacings.sort_unstable();
    spacings.dedup();
    assert!(spacings.len() >= 5, "slice spacings {spacings:?}");
    let pixels: Vec<f64> = cases
        .iter()
        .map(|t| t.spacing_mm[0] * 32.0 / 512.0)
        .collect();
    assert!(
        pixels.iter().all(|&p| (0.6..=0.9).contains(&p)),
        "512-equivalent pixels {pixels:?}"
    );
    // Every case with a tumor has a key slice inside one of its lesions' extents.
    for truth in &cases {
        match &truth.findings.key_slice {
            Some(key) => assert!(
                truth
                    .lesion_extents
                    .iter()
                    .any(|e| (e.first_slice..=e.last_slice).contains(&key.index))
            ),
            None => assert!(truth.lesions.is_empty()),
        }
    }
}

#[test]
fn truth_reports_read_back_and_score_perfectly_against_their_case_folders() {
    let folder = tempfile::tempdir().expect("temp dir");
    let out = folder.path().join("set");
    let out_text = out.to_str().expect("utf-8");
    let made = keyslice(&[
        "phantom", "--out", out_text, "--cases", "8", "--seed", "9", "--matrix", "48",
    ]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let records: Vec<serde_json::Value> = read_truth(&out)
        .expect("truth")
        .into_iter()
        .map(|truth| serde_json::json!({"case_id": truth.case_id, "report": truth.report}))
        .collect();
    let json = score_predictions(folder.path(), &records, &out);
    assert_eq!(json["missing_cases"].as_array().map(Vec::len), Some(0));
    assert_eq!(json["overall"]["sensitivity"], 1.0);
    assert_eq!(json["overall"]["specificity"], 1.0);
    for attribute in ["size", "location", "attenuation"] {
        let value = &json["attributes"][attribute];
        assert!(value.is_null() || value == 1.0, "{attribute}: {value}");
    }
    assert_eq!(json["key_slice"]["hit_rate"], 1.0);
    assert_eq!(json["hallucination_rate"], 0.0);
}

#[test]
fn the_manifest_keeps_earlier_cases_and_never_replaces_a_users_file() {
    use keyslice::phantom::write::{PhantomError, write_phantoms};
    let folder = tempfile::tempdir().expect("temp dir");
    let options = PhantomOptions {
        matrix: 32,
        slice_mm: Some(10.0),
    };
    let out = folder.path().join("set");
    write_phantoms(&out, 4, 0, 1, options, |_, _, _| {}).expect("first case");
    // A planted link at a temporary name must not be followed outside the folder.
    let outside = folder.path().join("outside.txt");
    std::fs::write(&outside, "untouched").expect("file");
    #[cfg(unix)]
    for name in [".manifest.json.partial", "manifest.json.partial"] {
        std::os::unix::fs::symlink(&outside, out.join(name)).expect("link");
    }
    let manifest = write_phantoms(&out, 4, 1, 1, options, |_, _, _| {}).expect("second case");
    let ids: Vec<&str> = manifest
        .cases
        .iter()
        .map(|case| case.case_id.as_str())
        .collect();
    assert_eq!(
        ids,
        ["PHANTOM_4_0000", "PHANTOM_4_0001"],
        "--first adds to the list"
    );
    assert_eq!(
        std::fs::read_to_string(&outside).expect("read"),
        "untouched"
    );
    // Another seed into the same folder, or a manifest.json the user wrote: refused, kept.
    let error = write_phantoms(&out, 5, 0, 1, options, |_, _, _| {}).expect_err("other seed");
    assert!(
        matches!(error, PhantomError::ForeignManifest { .. }),
        "{error}"
    );
    let mine = folder.path().join("mine");
    std::fs::create_dir_all(&mine).expect("folder");
    std::fs::write(mine.join("manifest.json"), "my own list").expect("file");
    let error = write_phantoms(&mine, 4, 0, 1, options, |_, _, _| {}).expect_err("foreign");
    assert!(
        error
            .to_string()
            .contains("not written by keyslice phantom"),
        "{error}"
    );
    assert_eq!(
        std::fs::read_to_string(mine.join("manifest.json")).expect("read"),
        "my own list"
    );
    assert!(
        !mine.join("PHANTOM_4_0000").exists(),
        "refused before generating"
    );
}
