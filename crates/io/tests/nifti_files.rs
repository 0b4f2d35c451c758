//! NIfTI reading: nibabel's public samples, generated files with known truth (RAS vs LPS
//! storage, qform-only, big endian, NIfTI-2, 4D, scaling), damaged headers, and masks on
//! another grid.

#![expect(
    clippy::float_cmp,
    reason = "Decoded voxels and header values are exact; comparing them exactly is what these tests prove."
)]

use keyslice_core::volume::{Volume, Voxels};
use keyslice_io::masks::load_mask_onto;
use keyslice_io::nifti::{NiftiError, read_label_nifti, read_nifti};
use keyslice_testkit::{data, expected};

fn truth_values() -> Vec<f32> {
    expected()["nifti"]["values_lps_order"]
        .as_array()
        .expect("array")
        .iter()
        .map(|value| value.as_f64().expect("number") as f32)
        .collect()
}

fn all_values(volume: &Volume) -> Vec<f32> {
    (0..volume.voxels().len())
        .map(|index| volume.voxels().get(index).expect("in range"))
        .collect()
}

fn assert_same_patient_volume(volume: &Volume) {
    let truth = &expected()["nifti"];
    assert_eq!(volume.dims(), [6, 5, 4]);
    assert_eq!(all_values(volume), truth_values());
    let spacing = volume.spacing_mm();
    for (got, want) in spacing.iter().zip([0.9, 1.1, 2.0]) {
        assert!((got - want).abs() < 1e-5, "spacing {spacing:?}");
    }
    let origin = volume.origin_lps_mm();
    let want = truth["origin_lps"].as_array().expect("array");
    for (got, want) in origin.iter().zip(want) {
        assert!(
            (got - want.as_f64().expect("number")).abs() < 1e-4,
            "origin {origin:?}"
        );
    }
    let directions = volume.directions_lps();
    assert!((directions[0][0] - 1.0).abs() < 1e-6, "i points left");
    assert!((directions[1][1] - 1.0).abs() < 1e-6, "j points posterior");
    assert!((directions[2][2] - 1.0).abs() < 1e-6, "k points superior");
}

#[test]
fn lps_stored_nifti_gives_the_lps_voxels() {
    let volume = read_nifti(&data("generated/lps_ordered.nii.gz")).expect("loads");
    assert_same_patient_volume(&volume);
    assert!(matches!(volume.voxels(), Voxels::I16(_)));
}

#[test]
fn ras_stored_qform_only_nifti_gives_the_same_patient_voxels() {
    let volume = read_nifti(&data("generated/ras_ordered_qform.nii")).expect("loads");
    assert_same_patient_volume(&volume);
}

#[test]
fn big_endian_nifti_reads_the_same_values() {
    let volume = read_nifti(&data("generated/big_endian.nii")).expect("loads");
    assert_same_patient_volume(&volume);
}

#[test]
fn nifti2_reads_the_same_values() {
    let volume = read_nifti(&data("generated/nifti2.nii.gz")).expect("loads");
    assert_same_patient_volume(&volume);
}

#[test]
fn four_d_file_shows_the_first_volume_and_warns() {
    let volume = read_nifti(&data("generated/four_d.nii.gz")).expect("loads");
    assert_same_patient_volume(&volume);
    assert!(
        volume
            .warnings()
            .iter()
            .any(|warning| warning.contains("2 volumes")),
        "{:?}",
        volume.warnings()
    );
}

#[test]
fn scl_slope_and_inter_are_applied_as_nibabel_applies_them() {
    // Stored int16 with scl_slope 0.5, scl_inter -3: non-integral values, so float voxels.
    let volume = read_nifti(&data("generated/scaled_float.nii.gz")).expect("loads");
    assert!(matches!(volume.voxels(), Voxels::F32(_)));
    let nibabel: Vec<f32> = expected()["nifti"]["scaled_values_lps_order"]
        .as_array()
        .expect("array")
        .iter()
        .map(|value| value.as_f64().expect("number") as f32)
        .collect();
    assert_eq!(all_values(&volume), nibabel);
}

#[test]
fn nibabel_anatomical_sample_loads_with_its_geometry() {
    let volume = read_nifti(&data("nifti/anatomical.nii")).expect("loads");
    let [columns, rows, slices] = volume.dims();
    assert_eq!(columns * rows * slices, 33 * 41 * 25);
    let stats = volume.value_stats();
    assert!(stats.max > stats.min);
}

#[test]
fn nibabel_nifti2_sample_loads() {
    let volume = read_nifti(&data("nifti/example_nifti2.nii.gz")).expect("loads");
    assert!(volume.dims().iter().product::<usize>() > 1);
}

#[test]
fn coarse_ras_mask_lands_on_the_voxels_nibabel_computes() {
    let ct = read_nifti(&data("generated/lps_ordered.nii.gz")).expect("ct loads");
    let mask = load_mask_onto(&data("generated/mask_coarse.nii.gz"), &ct).expect("mask loads");
    assert_eq!(mask.dims, ct.dims());
    assert_eq!(mask.name, "mask_coarse");
    let mut covered: Vec<[usize; 3]> = Vec::new();
    for k in 0..4 {
        for j in 0..5 {
            for i in 0..6 {
                if mask.labels[i + 6 * (j + 5 * k)] != 0 {
                    covered.push([i, j, k]);
                }
            }
        }
    }
    let truth: Vec<[usize; 3]> = expected()["nifti"]["mask_covered_voxels"]
        .as_array()
        .expect("array")
        .iter()
        .map(|voxel| {
            let v = voxel.as_array().expect("triple");
            [0, 1, 2].map(|axis| v[axis].as_u64().expect("index") as usize)
        })
        .collect();
    assert!(!truth.is_empty());
    assert_eq!(covered, truth);
}

fn write_temp(bytes: &[u8], name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let folder = tempfile::tempdir().expect("temp dir");
    let path = folder.path().join(name);
    std::fs::write(&path, bytes).expect("write");
    (folder, path)
}

fn header_of(name: &str) -> Vec<u8> {
    std::fs::read(data(name)).expect("fixture exists")
}

#[test]
fn wrong_sizeof_hdr_is_a_header_error_naming_the_file() {
    let mut bytes = header_of("generated/big_endian.nii");
    bytes[0..4].copy_from_slice(&123i32.to_le_bytes());
    let (_folder, path) = write_temp(&bytes, "bad.nii");
    let error = read_nifti(&path).expect_err("bad header");
    let message = error.to_string();
    assert!(matches!(error, NiftiError::Header { .. }), "{message}");
    assert!(
        message.contains("sizeof_hdr") && message.contains("bad.nii"),
        "{message}"
    );
}

#[test]
fn unsupported_datatype_is_named() {
    let mut bytes = header_of("generated/ras_ordered_qform.nii");
    bytes[70..72].copy_from_slice(&128i16.to_le_bytes()); // RGB24
    let (_folder, path) = write_temp(&bytes, "rgb.nii");
    let message = read_nifti(&path).expect_err("rgb").to_string();
    assert!(message.contains("datatype 128 (RGB24)"), "{message}");
}

#[test]
fn zero_dimension_is_named() {
    let mut bytes = header_of("generated/ras_ordered_qform.nii");
    bytes[44..46].copy_from_slice(&0i16.to_le_bytes()); // dim[2]
    let (_folder, path) = write_temp(&bytes, "zero.nii");
    let message = read_nifti(&path).expect_err("zero dim").to_string();
    assert!(message.contains("dim[2] = 0"), "{message}");
}

#[test]
fn truncated_voxels_are_a_data_error_not_a_panic() {
    let bytes = header_of("generated/ras_ordered_qform.nii");
    let (_folder, path) = write_temp(&bytes[..bytes.len() - 30], "short.nii");
    let error = read_nifti(&path).expect_err("short");
    assert!(matches!(error, NiftiError::Data { .. }), "{error}");
    assert!(error.to_string().contains("short.nii"));
}

#[test]
fn truncated_gzip_is_a_data_error() {
    let bytes = header_of("generated/lps_ordered.nii.gz");
    let (_folder, path) = write_temp(&bytes[..bytes.len() / 2], "cut.nii.gz");
    let error = read_nifti(&path).expect_err("cut");
    assert!(
        matches!(error, NiftiError::Data { .. } | NiftiError::Header { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("cut.nii.gz"));
}

#[test]
fn huge_dimensions_in_a_small_file_are_refused_before_allocating() {
    let mut bytes = header_of("generated/ras_ordered_qform.nii");
    for n in 1..=3 {
        bytes[40 + 2 * n..42 + 2 * n].copy_from_slice(&30_000i16.to_le_bytes());
    }
    let (_folder, path) = write_temp(&bytes, "huge.nii");
    let error = read_nifti(&path).expect_err("huge");
    assert!(matches!(error, NiftiError::TooLarge { .. }), "{error}");
    assert!(
        error.to_string().contains("KEYSLICE_MAX_VOLUME_MB"),
        "{error}"
    );
    // Within the memory budget but more than the file can hold: refused as well.
    for n in 1..=3 {
        bytes[40 + 2 * n..42 + 2 * n].copy_from_slice(&300i16.to_le_bytes());
    }
    let (_folder, path) = write_temp(&bytes, "large.nii");
    let message = read_nifti(&path).expect_err("large").to_string();
    assert!(message.contains("the file holds 592"), "{message}");
}

#[test]
fn garbage_bytes_are_refused() {
    let (_folder, path) = write_temp(&[0x42; 1000], "garbage.nii");
    assert!(matches!(read_nifti(&path), Err(NiftiError::Header { .. })));
    let (_folder, path) = write_temp(&[0x1f, 0x8b, 0x08, 0, 1, 2, 3], "garbage.nii.gz");
    assert!(read_nifti(&path).is_err());
}

#[test]
fn ct_is_not_a_label_mask() {
    let error = read_label_nifti(&data("generated/lps_ordered.nii.gz")).expect_err("HU values");
    assert!(matches!(error, NiftiError::NotLabels { .. }), "{error}");
}

/// `generated/ras_ordered_qform.nii` with `edit` applied to its bytes, written to `folder`.
fn edited_nifti(
    folder: &std::path::Path,
    name: &str,
    edit: impl FnOnce(&mut Vec<u8>),
) -> std::path::PathBuf {
    let mut bytes = std::fs::read(data("generated/ras_ordered_qform.nii")).expect("fixture");
    edit(&mut bytes);
    let path = folder.join(name);
    std::fs::write(&path, &bytes).expect("written");
    path
}

fn put_i16(bytes: &mut [u8], offset: usize, value: i16) {
    bytes[offset..offset + 2].copy_from_slice(&value.to_le_bytes());
}

fn put_f32(bytes: &mut [u8], offset: usize, value: f32) {
    bytes[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
}

#[test]
fn nonsense_geometry_is_refused_with_the_field_named() {
    let folder = tempfile::tempdir().expect("temp dir");
    let cases: [(&str, f32, &str); 3] = [
        ("inf_spacing.nii", f32::INFINITY, "voxel size of inf mm"),
        ("huge_spacing.nii", 1e29, "voxel size of 1"),
        ("nan_origin.nii", f32::NAN, "position has"),
    ];
    for (name, value, expected) in cases {
        let path = edited_nifti(folder.path(), name, |bytes| {
            put_i16(bytes, 254, 1); // sform_code: the srow rows are the transform
            for (row, offset) in [280usize, 296, 312].into_iter().enumerate() {
                for column in 0..4 {
                    let identity = if row == column { 1.0 } else { 0.0 };
                    put_f32(bytes, offset + 4 * column, identity);
                }
            }
            if name == "nan_origin.nii" {
                put_f32(bytes, 280 + 12, value); // srow_x[3]: the x of the first voxel
            } else {
                put_f32(bytes, 312 + 8, value); // srow_z[2]: the slice spacing
            }
        });
        let message = read_nifti(&path).expect_err(name).to_string();
        assert!(
            message.contains(expected) && message.contains(name),
            "{message}"
        );
    }
    // A zero voxel size where only pixdim places the volume: shown, with a warning.
    let path = edited_nifti(folder.path(), "zero_pixdim.nii", |bytes| {
        put_i16(bytes, 252, 1); // qform: pixdim gives the spacing
        put_i16(bytes, 254, 0);
        put_f32(bytes, 76 + 12, 0.0); // pixdim[3]
    });
    let volume = read_nifti(&path).expect("shown");
    assert!(
        volume.warnings().iter().any(|w| w.contains("pixdim[3]")),
        "{:?}",
        volume.warnings()
    );
}

#[test]
fn nan_voxels_are_shown_as_the_lowest_value_with_a_warning() {
    let folder = tempfile::tempdir().expect("temp dir");
    let original = read_nifti(&data("generated/ras_ordered_qform.nii")).expect("fixture");
    let count: usize = original.dims().iter().product();
    let path = edited_nifti(folder.path(), "nan.nii", |bytes| {
        let offset = f32::from_le_bytes([bytes[108], bytes[109], bytes[110], bytes[111]]) as usize;
        bytes.truncate(offset);
        put_i16(bytes, 70, 16); // float32
        put_i16(bytes, 72, 32);
        put_f32(bytes, 112, 1.0);
        put_f32(bytes, 116, 0.0);
        for index in 0..count {
            let value = if index == 3 { f32::NAN } else { index as f32 };
            bytes.extend_from_slice(&value.to_le_bytes());
        }
    });
    let volume = read_nifti(&path).expect("loads");
    let stats = volume.value_stats();
    assert!(stats.mean.is_finite(), "{stats:?}");
    assert_eq!(stats.min, 0.0);
    assert!(
        volume
            .warnings()
            .iter()
            .any(|w| w.contains("1 voxel(s) are NaN")),
        "{:?}",
        volume.warnings()
    );
}

#[test]
fn a_nifti_gz_whose_checksum_does_not_match_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut bytes = std::fs::read(data("generated/lps_ordered.nii.gz")).expect("sample");
    // The gzip trailer: CRC-32 then length; the CRC no longer matches the voxels.
    let crc = bytes.len() - 8;
    bytes[crc] ^= 0xff;
    let path = dir.path().join("damaged.nii.gz");
    std::fs::write(&path, &bytes).expect("written");
    let error = read_nifti(&path).expect_err("refused");
    assert!(matches!(error, NiftiError::Data { .. }), "{error}");
    assert!(error.to_string().contains("checksum"), "{error}");
}

#[test]
fn a_qform_quaternion_that_is_not_a_rotation_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut bytes = std::fs::read(data("generated/ras_ordered_qform.nii")).expect("sample");
    assert_eq!(i32::from_le_bytes(bytes[0..4].try_into().expect("4")), 348);
    // quatern_b, quatern_c, quatern_d at bytes 256, 260, 264: b²+c²+d² = 1.92.
    for offset in [256, 260, 264] {
        bytes[offset..offset + 4].copy_from_slice(&0.8f32.to_le_bytes());
    }
    let path = dir.path().join("bad_qform.nii");
    std::fs::write(&path, &bytes).expect("written");
    let error = read_nifti(&path).expect_err("refused");
    assert!(matches!(error, NiftiError::Header { .. }), "{error}");
    assert!(
        error.to_string().contains("qform quaternion") && error.to_string().contains("more than 1"),
        "{error}"
    );
}

/// A FIFO (or a device) under an image's name is refused at once, naming it: opening it would
/// wait for a writer and freeze whatever reads it (the window's mask loader, a DICOM folder
/// scan).
#[test]
fn a_fifo_under_an_image_name_is_refused_without_waiting() {
    let folder = tempfile::tempdir().expect("temp dir");
    let fifo = folder.path().join("liver.nii.gz");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|status| status.success()) {
        eprintln!("mkfifo is not available here; skipped");
        return;
    }
    let dicom = folder.path().join("IM0001.dcm");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&dicom)
            .status()
            .is_ok_and(|status| status.success())
    );
    let (sender, receiver) = std::sync::mpsc::channel();
    let paths = (fifo.clone(), dicom.clone(), folder.path().to_path_buf());
    std::thread::spawn(move || {
        let (fifo, dicom, folder) = paths;
        let nifti = read_nifti(&fifo).map(|_| ()).map_err(|e| e.to_string());
        let label = read_label_nifti(&fifo)
            .map(|_| ())
            .map_err(|e| e.to_string());
        let series =
            keyslice_io::dicom::load_dicom(&dicom, &keyslice_io::dicom::DicomOptions::default())
                .map(|_| ())
                .map_err(|e| e.to_string());
        let whole =
            keyslice_io::dicom::load_dicom(&folder, &keyslice_io::dicom::DicomOptions::default())
                .map(|_| ())
                .map_err(|e| e.to_string());
        let _ = sender.send((nifti, label, series, whole));
    });
    let (nifti, label, series, whole) = receiver
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("refused at once, not left waiting for a writer");
    for result in [nifti, label] {
        let message = result.expect_err("a FIFO is not an image");
        assert!(
            message.contains("liver.nii.gz") && message.contains("not a regular file"),
            "{message}"
        );
    }
    assert!(series.is_err(), "{series:?}");
    assert!(whole.is_err(), "{whole:?}");
}
