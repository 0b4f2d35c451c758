//! Series assembly on generated series with known truth: ordering by position, localizers,
//! irregular spacing, gantry tilt, mixed sizes, damaged files, series choice.

#![expect(
    clippy::float_cmp,
    reason = "Decoded voxels and header values are exact; comparing them exactly is what these tests prove."
)]

use keyslice_core::volume::Voxels;
use keyslice_io::dicom::{DicomError, DicomOptions, load_dicom};
use keyslice_testkit::{SliceSpec, truncated_copy, write_series};

/// Five axial slices 2.5 mm apart, z from -10 upwards; slice k's stored marker is 100·k.
fn axial_slices(series: &str) -> Vec<SliceSpec> {
    (0..5)
        .map(|k| SliceSpec::axial(series, k, -10.0 + 2.5 * k as f64, 100 * k as i16))
        .collect()
}

/// The five axial slices of `series`, named `{prefix}{k}`, each passed through `edit`.
fn named_slices(
    series: &str,
    prefix: &str,
    edit: impl Fn(usize, &mut SliceSpec),
) -> Vec<(String, SliceSpec)> {
    axial_slices(series)
        .into_iter()
        .enumerate()
        .map(|(k, mut slice)| {
            edit(k, &mut slice);
            (format!("{prefix}{k}"), slice)
        })
        .collect()
}

fn first_voxel_of_each_slice(volume: &keyslice_core::volume::Volume) -> Vec<f32> {
    (0..volume.dims()[2])
        .map(|k| volume.value([0, 0, k]).expect("inside"))
        .collect()
}

#[test]
fn shuffled_names_and_reversed_instance_numbers_sort_by_position() {
    let folder = tempfile::tempdir().expect("temp dir");
    let mut slices = axial_slices("1.9.1");
    let count = slices.len();
    for (k, slice) in slices.iter_mut().enumerate() {
        slice.instance_number = (count - k) as i32; // reversed
    }
    // Names sort in an order unrelated to position.
    let names = ["c.dcm", "a.dcm", "e.dcm", "b.dcm", "d.dcm"];
    let named: Vec<(String, SliceSpec)> =
        names.iter().map(ToString::to_string).zip(slices).collect();
    write_series(folder.path(), &named);

    let study = load_dicom(folder.path(), &DicomOptions::default()).expect("loads");
    let volume = &study.volume;
    assert_eq!(volume.dims(), [8, 6, 5]);
    // HU = marker − 1024, ascending along +z (inferior → superior).
    assert_eq!(
        first_voxel_of_each_slice(volume),
        vec![-1024.0, -924.0, -824.0, -724.0, -624.0]
    );
    assert_eq!(volume.spacing_mm(), [1.0, 1.0, 2.5]);
    assert_eq!(volume.origin_lps_mm(), [-4.0, -3.0, -10.0]);
    assert_eq!(volume.slices()[4].position_lps_mm, [-4.0, -3.0, 0.0]);
    assert_eq!(
        volume.slices()[4].sop_instance_uid.as_deref(),
        Some("1.9.1.4")
    );
    assert!(matches!(volume.voxels(), Voxels::I16(_)));
    assert!(volume.warnings().is_empty(), "{:?}", volume.warnings());
}

#[test]
fn feet_first_descending_positions_still_run_inferior_to_superior() {
    let folder = tempfile::tempdir().expect("temp dir");
    let slices: Vec<(String, SliceSpec)> = axial_slices("1.9.2")
        .into_iter()
        .rev()
        .enumerate()
        .map(|(n, slice)| (format!("{n:03}"), slice))
        .collect();
    write_series(folder.path(), &slices);
    let volume = load_dicom(folder.path(), &DicomOptions::default())
        .expect("loads")
        .volume;
    assert_eq!(volume.slices()[0].position_lps_mm[2], -10.0);
    assert_eq!(first_voxel_of_each_slice(&volume)[0], -1024.0);
}

#[test]
fn localizer_series_in_the_folder_is_listed_but_not_loaded() {
    let folder = tempfile::tempdir().expect("temp dir");
    let mut named: Vec<(String, SliceSpec)> = named_slices("1.9.3", "ax", |_, _| {});
    for n in 0..2 {
        let mut scout = SliceSpec::axial("1.9.99", n, 0.0, 7);
        scout.orientation = [0.0, 1.0, 0.0, 0.0, 0.0, -1.0];
        scout.position = [n as f64 * 10.0, -100.0, 100.0];
        scout.image_type = "ORIGINAL\\PRIMARY\\LOCALIZER";
        scout.description = "SCOUT";
        named.push((format!("scout{n}"), scout));
    }
    write_series(folder.path(), &named);
    let study = load_dicom(folder.path(), &DicomOptions::default()).expect("loads");
    assert_eq!(study.volume.info().series_uid, "1.9.3");
    assert_eq!(study.series.len(), 2);
    let selected: Vec<&str> = study
        .series
        .iter()
        .filter(|series| series.selected)
        .map(|series| series.series_uid.as_str())
        .collect();
    assert_eq!(selected, vec!["1.9.3"]);

    // The scout can still be chosen explicitly: two sagittal images 10 mm apart along x.
    let scout = load_dicom(
        folder.path(),
        &DicomOptions {
            series_uid: Some("1.9.99".into()),
        },
    )
    .expect("the scout series loads when asked for");
    assert_eq!(scout.volume.dims()[2], 2);
    assert_eq!(scout.volume.spacing_mm()[2], 10.0);
}

#[test]
fn localizer_inside_the_series_is_left_out_with_a_warning() {
    let folder = tempfile::tempdir().expect("temp dir");
    let mut named: Vec<(String, SliceSpec)> = named_slices("1.9.4", "ax", |_, _| {});
    let mut scout = SliceSpec::axial("1.9.4", 9, 0.0, 7);
    scout.orientation = [0.0, 1.0, 0.0, 0.0, 0.0, -1.0];
    scout.image_type = "ORIGINAL\\PRIMARY\\LOCALIZER";
    scout.rows = 4;
    scout.columns = 4;
    scout.stored = vec![0; 16];
    named.push(("scout".into(), scout));
    write_series(folder.path(), &named);
    let volume = load_dicom(folder.path(), &DicomOptions::default())
        .expect("loads")
        .volume;
    assert_eq!(volume.dims()[2], 5);
    assert!(
        volume
            .warnings()
            .iter()
            .any(|warning| warning.contains("localizer") && warning.contains("scout")),
        "{:?}",
        volume.warnings()
    );
}

#[test]
fn missing_slice_loads_and_warns_with_positions() {
    let folder = tempfile::tempdir().expect("temp dir");
    let named: Vec<(String, SliceSpec)> = axial_slices("1.9.5")
        .into_iter()
        .enumerate()
        .filter(|(k, _)| *k != 2)
        .map(|(k, slice)| (format!("s{k}"), slice))
        .collect();
    write_series(folder.path(), &named);
    let volume = load_dicom(folder.path(), &DicomOptions::default())
        .expect("loads")
        .volume;
    assert_eq!(volume.dims()[2], 4);
    assert_eq!(volume.spacing_mm()[2], 2.5);
    // Slices keep their true positions across the gap.
    assert_eq!(volume.slices()[2].position_lps_mm[2], -2.5);
    let warning = volume.warnings().join("\n");
    assert!(
        warning.contains("5.00 mm between slice 1 (at -7.50 mm) and slice 2 (at -2.50 mm)"),
        "{warning}"
    );
    assert!(warning.contains("about 1 slice(s) missing"), "{warning}");
}

#[test]
fn gantry_tilt_is_refused_naming_the_files() {
    let folder = tempfile::tempdir().expect("temp dir");
    let named: Vec<(String, SliceSpec)> = named_slices("1.9.6", "t", |k, slice| {
        // Each slice shifts 0.5 mm posterior per 2.5 mm up: an 11° tilt.
        slice.position[1] += 0.5 * k as f64;
    });
    write_series(folder.path(), &named);
    let error = load_dicom(folder.path(), &DicomOptions::default()).expect_err("tilted");
    let message = error.to_string();
    assert!(matches!(error, DicomError::GantryTilt { .. }), "{message}");
    assert!(message.contains("11.3°"), "{message}");
    assert!(
        message.contains("t0") && message.contains("t4"),
        "{message}"
    );
    assert!(error.hint().contains("dcm2niix"));
}

#[test]
fn mixed_image_sizes_are_refused_naming_the_odd_file() {
    let folder = tempfile::tempdir().expect("temp dir");
    let mut named: Vec<(String, SliceSpec)> = named_slices("1.9.7", "m", |_, _| {});
    named[3].1.rows = 3;
    named[3].1.stored.truncate(24);
    write_series(folder.path(), &named);
    let error = load_dicom(folder.path(), &DicomOptions::default()).expect_err("mixed sizes");
    let message = error.to_string();
    assert!(message.contains("8×6, 8×3"), "{message}");
    assert!(message.contains("m3"), "{message}");
}

#[test]
fn duplicate_positions_are_refused() {
    let folder = tempfile::tempdir().expect("temp dir");
    let mut named: Vec<(String, SliceSpec)> = named_slices("1.9.8", "d", |_, _| {});
    named[4].1.position = named[3].1.position;
    write_series(folder.path(), &named);
    let error = load_dicom(folder.path(), &DicomOptions::default()).expect_err("duplicates");
    assert!(
        matches!(error, DicomError::DuplicatePositions { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("d3") && error.to_string().contains("d4"));
}

#[test]
fn truncated_and_garbage_files_are_reported_and_the_rest_loads() {
    let folder = tempfile::tempdir().expect("temp dir");
    let named: Vec<(String, SliceSpec)> = named_slices("1.9.9", "g", |k, slice| {
        if k == 4 {
            // A consistent file whose Pixel Data is shorter than Rows × Columns needs:
            // it parses, but its pixels are too few.
            slice.stored.truncate(40);
        }
    });
    write_series(folder.path(), &named);
    // Cut slice 2 inside its pixel data, and add a file of garbage behind a DICM marker.
    let whole = folder.path().join("g2");
    let cut = folder.path().join("g2_cut");
    let length = std::fs::metadata(&whole).expect("exists").len() as usize;
    truncated_copy(&whole, &cut, length - 40);
    std::fs::rename(&cut, &whole).expect("rename");
    let mut garbage = vec![0u8; 128];
    garbage.extend_from_slice(b"DICM");
    garbage.extend((0..500u32).map(|n| (n * 7919 % 251) as u8));
    std::fs::write(folder.path().join("garbage.dcm"), garbage).expect("write");
    std::fs::write(folder.path().join("README.txt"), "not dicom").expect("write");

    let study = load_dicom(folder.path(), &DicomOptions::default()).expect("the rest loads");
    assert_eq!(study.volume.dims()[2], 3);
    assert_eq!(study.non_dicom_files, 1);
    // The remaining slices are 0, 1 and 3, with their own positions and pixels.
    let positions: Vec<f64> = study
        .volume
        .slices()
        .iter()
        .map(|slice| slice.position_lps_mm[2])
        .collect();
    assert_eq!(positions, vec![-10.0, -7.5, -2.5]);
    assert_eq!(study.volume.value([0, 0, 2]), Some(300.0 - 1024.0));
    let skipped: Vec<String> = study
        .unreadable
        .iter()
        .map(|file| {
            file.path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string()
        })
        .collect();
    assert!(skipped.contains(&"garbage.dcm".to_string()), "{skipped:?}");
    assert!(skipped.contains(&"g2".to_string()), "{skipped:?}");
    assert!(skipped.contains(&"g4".to_string()), "{skipped:?}");
    let warnings = study.volume.warnings().join("\n");
    assert!(
        warnings.contains("left out the slice at 0.00 mm"),
        "{warnings}"
    );
    assert!(
        warnings.contains("g4): pixel data holds 80 bytes, the image needs 96"),
        "{warnings}"
    );
    // Spacing stays 2.5 mm; the gap where g2 was is reported with both positions.
    assert_eq!(study.volume.spacing_mm()[2], 2.5);
    assert!(
        warnings.contains("5.00 mm between slice 1 (at -7.50 mm) and slice 2 (at -2.50 mm), 2.50 mm elsewhere; about 1 slice(s) missing"),
        "{warnings}"
    );
}

#[test]
fn non_integral_rescale_gives_float_voxels() {
    let folder = tempfile::tempdir().expect("temp dir");
    let named: Vec<(String, SliceSpec)> = named_slices("1.9.10", "f", |_, slice| {
        slice.slope = 0.5;
        slice.intercept = -1000.25;
    });
    write_series(folder.path(), &named);
    let volume = load_dicom(folder.path(), &DicomOptions::default())
        .expect("loads")
        .volume;
    assert!(matches!(volume.voxels(), Voxels::F32(_)));
    assert_eq!(volume.value([3, 0, 1]), Some((100.0 + 3.0) * 0.5 - 1000.25));
}

#[test]
fn values_beyond_int16_fall_back_to_float() {
    let folder = tempfile::tempdir().expect("temp dir");
    let named: Vec<(String, SliceSpec)> = named_slices("1.9.11", "w", |_, slice| {
        slice.slope = 4.0;
        slice.intercept = 0.0;
        slice.stored[0] = 10_000; // 40 000 after rescale
    });
    write_series(folder.path(), &named);
    let volume = load_dicom(folder.path(), &DicomOptions::default())
        .expect("loads")
        .volume;
    assert!(matches!(volume.voxels(), Voxels::F32(_)));
    assert_eq!(volume.value([0, 0, 0]), Some(40_000.0));
}

#[test]
fn monochrome1_is_flagged_for_inverted_display() {
    let folder = tempfile::tempdir().expect("temp dir");
    let named: Vec<(String, SliceSpec)> = named_slices("1.9.12", "p", |_, slice| {
        slice.photometric = "MONOCHROME1";
    });
    write_series(folder.path(), &named);
    let volume = load_dicom(folder.path(), &DicomOptions::default())
        .expect("loads")
        .volume;
    assert!(volume.info().display_inverted);
    // Values are not inverted: HU stay HU.
    assert_eq!(volume.value([0, 0, 0]), Some(-1024.0));
}

#[test]
fn unknown_series_uid_lists_the_available_ones() {
    let folder = tempfile::tempdir().expect("temp dir");
    let named: Vec<(String, SliceSpec)> = named_slices("1.9.13", "u", |_, _| {});
    write_series(folder.path(), &named);
    let error = load_dicom(
        folder.path(),
        &DicomOptions {
            series_uid: Some("1.2.3.nothing".into()),
        },
    )
    .expect_err("unknown series");
    assert!(error.to_string().contains("1.2.3.nothing"));
    assert!(error.hint().contains("1.9.13"));
}

#[test]
fn folder_without_dicom_says_so() {
    let folder = tempfile::tempdir().expect("temp dir");
    std::fs::write(folder.path().join("a.txt"), "hello").expect("write");
    let error = load_dicom(folder.path(), &DicomOptions::default()).expect_err("nothing there");
    assert!(
        matches!(
            error,
            DicomError::NoImages {
                non_dicom_files: 1,
                ..
            }
        ),
        "{error}"
    );
}

/// Puts `value` into attribute `tag` of the DICOM file at `path`.
fn rewrite(path: &std::path::Path, tag: dicom_core::Tag, value: &str) {
    use dicom_core::{DataElement, PrimitiveValue, VR};
    let mut object = dicom_object::open_file(path).expect("readable");
    let vr = if tag == dicom_dictionary_std::tags::PATIENT_ID {
        VR::LO
    } else {
        VR::UI
    };
    object.put(DataElement::new(tag, vr, PrimitiveValue::from(value)));
    object.write_to_file(path).expect("written");
}

#[test]
fn slices_of_another_patient_study_or_frame_of_reference_never_become_one_volume() {
    use dicom_dictionary_std::tags;
    let cases = [
        (tags::PATIENT_ID, "Patient ID", "OTHER-PATIENT"),
        (tags::STUDY_INSTANCE_UID, "Study Instance UID", "1.2.9.9"),
        (
            tags::FRAME_OF_REFERENCE_UID,
            "Frame of Reference UID",
            "1.2.9.8",
        ),
    ];
    for (tag, field, other) in cases {
        let folder = tempfile::tempdir().expect("temp dir");
        let slices = named_slices("1.9.40", "s", |_, _| {});
        write_series(folder.path(), &slices);
        for k in 0..5 {
            let value = if tag == tags::PATIENT_ID {
                "P1"
            } else {
                "1.2.9.1"
            };
            rewrite(&folder.path().join(format!("s{k}")), tag, value);
        }
        // Two of five slices belong elsewhere.
        for k in [1, 3] {
            rewrite(&folder.path().join(format!("s{k}")), tag, other);
        }
        let error = load_dicom(folder.path(), &DicomOptions::default()).expect_err("refused");
        assert!(
            matches!(&error, DicomError::MixedSubjects { field: f, files, .. } if *f == field && files.len() == 3),
            "{error}"
        );
        let message = error.to_string();
        assert!(
            message.contains(other) && message.contains("s1"),
            "{message}"
        );
    }
}

#[test]
fn a_rescale_slope_that_makes_voxels_infinite_is_refused() {
    let folder = tempfile::tempdir().expect("temp dir");
    let slices = named_slices("1.9.41", "s", |k, slice| {
        if k == 2 {
            slice.slope = 1e38;
        }
    });
    write_series(folder.path(), &slices);
    let error = load_dicom(folder.path(), &DicomOptions::default()).expect_err("refused");
    let message = error.to_string();
    assert!(
        message.contains("Rescale Slope") && message.contains("1e38") && message.contains("s2"),
        "{message}"
    );
}
