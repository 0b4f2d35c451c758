//! Real DICOM files from pydicom and pydicom-data (see tests/data/README.md): every transfer
//! syntax must decode to the same stored values pydicom reports (recorded in expected.json).

#![expect(
    clippy::float_cmp,
    clippy::unreadable_literal,
    reason = "Decoded voxels and header values are exact; comparing them exactly is what these tests prove."
)]

use keyslice_core::volume::Volume;
use keyslice_io::dicom::{DicomError, DicomOptions, load_dicom};
use keyslice_testkit::{data, expected};

fn load(name: &str) -> Volume {
    load_dicom(&data(&format!("dicom/{name}")), &DicomOptions::default())
        .unwrap_or_else(|error| panic!("{name}: {error}"))
        .volume
}

/// Stored values back from HU: (value − intercept) / slope, summed over all voxels.
fn stored_sum(volume: &Volume, slope: f64, intercept: f64) -> i64 {
    let count = volume.voxels().len();
    (0..count)
        .map(|index| {
            let value = f64::from(volume.voxels().get(index).expect("in range"));
            ((value - intercept) / slope).round() as i64
        })
        .sum()
}

fn check_against_pydicom(name: &str) {
    let reference = &expected()["pydicom_reference"][name];
    let volume = load(name);
    let slope = reference["slope"].as_f64().expect("slope");
    let intercept = reference["intercept"].as_f64().expect("intercept");
    assert_eq!(
        stored_sum(&volume, slope, intercept),
        reference["sum"].as_i64().expect("sum"),
        "{name}: sum of stored values"
    );
    let stats = volume.value_stats();
    assert_eq!(
        stats.min,
        reference["min"].as_f64().expect("min") * slope + intercept,
        "{name}"
    );
    assert_eq!(
        stats.max,
        reference["max"].as_f64().expect("max") * slope + intercept,
        "{name}"
    );
    // Row 3, column 5 of the first frame: voxel [5, 3, k] on the slice that was frame 0.
    let k = volume
        .slices()
        .iter()
        .position(|slice| slice.frame_number.unwrap_or(1) == 1)
        .expect("frame 1 present");
    let value = f64::from(volume.value([5, 3, k]).expect("inside"));
    assert_eq!(
        value,
        reference["value_row3_col5"].as_f64().expect("sample") * slope + intercept,
        "{name}: pixel row 3 column 5"
    );
}

#[test]
fn ct_small_explicit_little_endian_matches_pydicom() {
    check_against_pydicom("CT_small.dcm");
    let volume = load("CT_small.dcm");
    assert_eq!(volume.dims(), [128, 128, 1]);
    assert_eq!(volume.info().modality, "CT");
    // Geometry straight from the header: Image Position (Patient) and Pixel Spacing.
    assert_eq!(
        volume.origin_lps_mm(),
        [-158.135803, -179.035797, -75.699997]
    );
    let spacing = volume.spacing_mm();
    assert!((spacing[0] - 0.661468).abs() < 1e-9 && (spacing[1] - 0.661468).abs() < 1e-9);
}

#[test]
fn implicit_little_endian_matches_pydicom() {
    check_against_pydicom("MR_small_implicit.dcm");
}

#[test]
fn explicit_big_endian_matches_pydicom() {
    check_against_pydicom("MR_small_bigendian.dcm");
}

#[test]
fn deflated_explicit_little_endian_matches_pydicom() {
    check_against_pydicom("image_dfl.dcm");
}

#[test]
fn rle_lossless_matches_pydicom() {
    check_against_pydicom("MR_small_RLE.dcm");
}

#[test]
fn jpeg_lossless_process_14_matches_pydicom() {
    check_against_pydicom("JPEG-LL.dcm");
}

#[test]
fn jpeg_ls_lossless_matches_pydicom() {
    check_against_pydicom("MR_small_jpeg_ls_lossless.dcm");
}

#[test]
fn jpeg_2000_lossless_matches_pydicom() {
    check_against_pydicom("MR_small_jp2klossless.dcm");
}

#[test]
fn every_encoding_of_mr_small_decodes_to_the_same_voxels() {
    let reference = load("MR_small.dcm");
    for name in [
        "MR_small_implicit.dcm",
        "MR_small_bigendian.dcm",
        "MR_small_RLE.dcm",
        "MR_small_jp2klossless.dcm",
        "MR_small_jpeg_ls_lossless.dcm",
    ] {
        let other = load(name);
        assert_eq!(other.voxels(), reference.voxels(), "{name}");
        assert_eq!(
            other.patient_from_voxel(),
            reference.patient_from_voxel(),
            "{name}"
        );
    }
}

#[test]
fn jpeg_extended_12_bit_is_refused_with_a_clear_error() {
    // The pure-Rust JPEG decoder handles 8-bit baseline/extended and lossless, not 12-bit
    // extended (process 4); the user is told which file and how to convert it.
    let error = load_dicom(&data("dicom/JPGExtended.dcm"), &DicomOptions::default())
        .expect_err("12-bit JPEG extended is not decoded");
    let message = error.to_string();
    assert!(message.contains("JPGExtended.dcm"), "{message}");
    assert!(message.contains("SamplePrecision(12)"), "{message}");
    assert!(message.contains("1.2.840.10008.1.2.4.51"), "{message}");
    assert!(error.hint().contains("dcmdjpeg"), "{}", error.hint());
}

#[test]
fn jpeg_baseline_8_bit_is_close_to_pydicom() {
    let reference = &expected()["jpeg_baseline"];
    let volume = load_dicom(
        &data("generated/jpeg_baseline.dcm"),
        &DicomOptions::default(),
    )
    .expect("loads")
    .volume;
    assert_eq!(volume.dims(), [48, 32, 1]);
    let mean = volume.value_stats().mean;
    let reference_mean = reference["sum"].as_f64().expect("sum") / (48.0 * 32.0);
    assert!(
        (mean - reference_mean).abs() < 0.5,
        "mean {mean} vs {reference_mean}"
    );
    let sample = f64::from(volume.value([7, 5, 0]).expect("inside"));
    assert!((sample - reference["value_row5_col7"].as_f64().expect("sample")).abs() <= 2.0);
}

#[test]
fn enhanced_ct_frames_take_geometry_from_functional_groups() {
    check_against_pydicom("eCT_Supplemental.dcm");
    let volume = load("eCT_Supplemental.dcm");
    assert_eq!(volume.dims(), [512, 512, 2]);
    // Each frame keeps its own position from the Per-Frame Functional Groups, and slices
    // are ordered along the normal.
    let first = volume.slices()[0].position_lps_mm;
    let second = volume.slices()[1].position_lps_mm;
    assert_ne!(first, second);
    let normal = volume.directions_lps()[2];
    let along = |p: [f64; 3]| p[0] * normal[0] + p[1] * normal[1] + p[2] * normal[2];
    assert!(along(second) > along(first));
    assert!((volume.spacing_mm()[2] - (along(second) - along(first))).abs() < 1e-9);
    assert!(
        volume
            .slices()
            .iter()
            .all(|slice| slice.frame_number.is_some())
    );
}

#[test]
fn truncated_file_names_the_file_and_says_truncated() {
    let path = data("dicom/MR_truncated.dcm");
    let error = load_dicom(&path, &DicomOptions::default()).expect_err("truncated");
    let message = error.to_string();
    assert!(matches!(error, DicomError::Unreadable { .. }), "{message}");
    assert!(message.contains("MR_truncated.dcm"), "{message}");
    assert!(
        message.contains("(7FE0,0010)") && message.contains("8130"),
        "{message}"
    );
    assert!(message.contains("truncated"), "{message}");
    assert!(error.hint().contains("truncated"), "{}", error.hint());
}

#[test]
fn dicomdir_is_followed_to_its_images() {
    let study = load_dicom(
        &data("generated/dicomdir/DICOMDIR"),
        &DicomOptions::default(),
    )
    .expect("DICOMDIR loads");
    let volume = study.volume;
    assert_eq!(volume.dims(), [8, 8, 3]);
    let values: Vec<f32> = (0..3)
        .map(|k| volume.value([0, 0, k]).expect("inside"))
        .collect();
    assert_eq!(values, vec![0.0, 10.0, 20.0]);
    assert_eq!(volume.spacing_mm()[2], 5.0);
}

#[test]
fn oblique_series_geometry_matches_the_headers() {
    let truth = &expected()["oblique_series"];
    let study =
        load_dicom(&data("generated/oblique_series"), &DicomOptions::default()).expect("loads");
    assert_eq!(study.non_dicom_files, 1, "notes.txt is skipped");
    let volume = study.volume;
    assert_eq!(volume.dims(), [20, 16, 6]);
    let vector = |key: &str| -> Vec<f64> {
        truth[key]
            .as_array()
            .expect("array")
            .iter()
            .map(|value| value.as_f64().expect("number"))
            .collect()
    };
    let directions = volume.directions_lps();
    for (axis, key) in ["row_direction", "column_direction", "normal"]
        .iter()
        .enumerate()
    {
        for (got, want) in directions[axis].iter().zip(vector(key)) {
            assert!((got - want).abs() < 1e-6, "{key}: {got} vs {want}");
        }
    }
    for (got, want) in volume
        .origin_lps_mm()
        .iter()
        .zip(vector("first_slice_position"))
    {
        assert!((got - want).abs() < 1e-6);
    }
    let spacing = volume.spacing_mm();
    assert!((spacing[0] - 0.8).abs() < 1e-9 && (spacing[1] - 0.7).abs() < 1e-9);
    assert!((spacing[2] - 2.5).abs() < 1e-6);
    let sum: f64 = (0..volume.voxels().len())
        .map(|index| f64::from(volume.voxels().get(index).expect("in range")))
        .sum();
    assert_eq!(sum as i64, truth["hu_sum"].as_i64().expect("sum"));
}

#[test]
fn a_dicomdir_that_points_outside_its_folder_is_refused() {
    let folder = tempfile::tempdir().expect("temp dir");
    let study = folder.path().join("study");
    let source = data("generated/dicomdir");
    for entry in ["DICOMDIR", "PT000000/ST000000/SE000000/IM000000"] {
        let target = study.join(entry);
        std::fs::create_dir_all(target.parent().expect("parent")).expect("folders");
        std::fs::copy(source.join(entry), &target).expect("copied");
    }
    // Another patient's image beside the study folder, and a DICOMDIR record that climbs to it
    // (same length as the original value, so the file stays well formed).
    let other = folder.path().join("XXXXXXXXXXXXXXXXXXXXXXX");
    std::fs::create_dir_all(&other).expect("folder");
    std::fs::copy(
        source.join("PT000000/ST000000/SE000000/IM000001"),
        other.join("IM000000"),
    )
    .expect("copied");
    let original = b"PT000000\\ST000000\\SE000000\\IM000000";
    let climbing = b"..\\XXXXXXXXXXXXXXXXXXXXXXX\\IM000000";
    assert_eq!(original.len(), climbing.len());
    let mut bytes = std::fs::read(study.join("DICOMDIR")).expect("read");
    let at = bytes
        .windows(original.len())
        .position(|window| window == original)
        .expect("the first record's file id");
    bytes[at..at + climbing.len()].copy_from_slice(climbing);
    std::fs::write(study.join("DICOMDIR"), &bytes).expect("written");
    let error = load_dicom(&study.join("DICOMDIR"), &DicomOptions::default())
        .expect_err("a record outside the folder");
    let message = error.to_string();
    assert!(
        message.contains("leaves the DICOMDIR's folder") && message.contains("DICOMDIR"),
        "{message}"
    );
}

/// `CT_small.dcm` with one header value replaced, written to `folder`.
fn edited_ct(
    folder: &std::path::Path,
    tag: dicom_core::Tag,
    vr: dicom_core::VR,
    value: &str,
) -> std::path::PathBuf {
    use dicom_core::{DataElement, PrimitiveValue};
    let mut object = dicom_object::OpenFileOptions::new()
        .open_file(data("dicom/CT_small.dcm"))
        .expect("sample opens");
    object.put(DataElement::new(tag, vr, PrimitiveValue::from(value)));
    let path = folder.join("edited.dcm");
    object.write_to_file(&path).expect("written");
    path
}

#[test]
fn a_number_of_frames_the_file_cannot_hold_is_refused_from_the_header() {
    let folder = tempfile::tempdir().expect("temp dir");
    let path = edited_ct(
        folder.path(),
        dicom_dictionary_std::tags::NUMBER_OF_FRAMES,
        dicom_core::VR::IS,
        "2147483647",
    );
    let error = load_dicom(&path, &DicomOptions::default()).expect_err("refused");
    let message = error.to_string();
    assert!(
        message.contains("Number of Frames (0028,0008) is 2147483647")
            && message.contains("edited.dcm"),
        "{message}"
    );
}

#[test]
fn a_compressed_frame_of_another_size_than_the_header_is_refused_not_decoded() {
    // The JPEG frame is 1024 rows tall; the header is changed to say 512.
    let folder = tempfile::tempdir().expect("temp dir");
    let mut object = dicom_object::OpenFileOptions::new()
        .open_file(data("dicom/JPGExtended.dcm"))
        .expect("sample opens");
    let rows = object
        .element(dicom_dictionary_std::tags::ROWS)
        .expect("rows")
        .to_int::<u16>()
        .expect("a number");
    object.put(dicom_core::DataElement::new(
        dicom_dictionary_std::tags::ROWS,
        dicom_core::VR::US,
        dicom_core::PrimitiveValue::from(rows / 2),
    ));
    let path = folder.path().join("half_rows.dcm");
    object.write_to_file(&path).expect("written");
    let error = load_dicom(&path, &DicomOptions::default()).expect_err("refused");
    let message = error.to_string();
    assert!(
        message.contains("the compressed frame is") && message.contains("half_rows.dcm"),
        "{message}"
    );
}

#[test]
fn a_deflated_file_hiding_far_more_pixel_data_than_its_image_is_refused() {
    use std::io::{Read, Write};
    // image_dfl.dcm: the meta group, then the dataset as one raw deflate stream. Its 512×512
    // 8-bit Pixel Data is replaced by 200 MB of zeros, which deflate to a few hundred KB.
    let original = std::fs::read(data("dicom/image_dfl.dcm")).expect("sample");
    let group_length =
        u32::from_le_bytes([original[140], original[141], original[142], original[143]]);
    let start = 144 + group_length as usize;
    let mut dataset = Vec::new();
    flate2::read::DeflateDecoder::new(&original[start..])
        .read_to_end(&mut dataset)
        .expect("inflates");
    let pixel_data = dataset
        .windows(4)
        .position(|window| window == [0xE0, 0x7F, 0x10, 0x00])
        .expect("Pixel Data");
    let huge: u32 = 200 << 20;
    dataset.truncate(pixel_data + 8);
    dataset.extend_from_slice(&huge.to_le_bytes());
    dataset.resize(dataset.len() + huge as usize, 0);
    let mut encoder =
        flate2::write::DeflateEncoder::new(original[..start].to_vec(), flate2::Compression::fast());
    encoder.write_all(&dataset).expect("deflates");
    let bomb = encoder.finish().expect("deflated");
    assert!(bomb.len() < 2 << 20, "{} bytes", bomb.len());
    let folder = tempfile::tempdir().expect("temp dir");
    let path = folder.path().join("bomb.dcm");
    std::fs::write(&path, &bomb).expect("written");
    let error = load_dicom(&path, &DicomOptions::default()).expect_err("refused");
    let message = error.to_string();
    assert!(
        message.contains("Pixel Data (7FE0,0010) holds 209715200 bytes")
            && message.contains("bomb.dcm"),
        "{message}"
    );
}

#[test]
fn sequences_nested_beyond_reason_are_refused_before_parsing() {
    // CT_small.dcm followed by a private sequence nested 200 deep (item in sequence in item…):
    // a parser that descends recursively would run out of stack on such a file.
    let mut bytes = std::fs::read(data("dicom/CT_small.dcm")).expect("sample");
    for _ in 0..200 {
        bytes.extend_from_slice(&[
            0xE1, 0x7F, 0x10, 0x10, b'S', b'Q', 0, 0, 0xFF, 0xFF, 0xFF, 0xFF,
        ]);
        bytes.extend_from_slice(&[0xFE, 0xFF, 0x00, 0xE0, 0xFF, 0xFF, 0xFF, 0xFF]);
    }
    let folder = tempfile::tempdir().expect("temp dir");
    let path = folder.path().join("nested.dcm");
    std::fs::write(&path, &bytes).expect("written");
    let error = load_dicom(&path, &DicomOptions::default()).expect_err("refused");
    let message = error.to_string();
    assert!(
        message.contains("nested more than 64 deep") && message.contains("nested.dcm"),
        "{message}"
    );
}
