//! Segmentations: lesion and organ masks written as a binary DICOM SEG, validated by
//! dicom3tools' `dciodvfy`, read by highdicom voxel for voxel and read back by Keyslice; a
//! SEG written by highdicom read by Keyslice; damaged and foreign segmentations refused with
//! the reason.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a helper whose input is not what the test built fails the test"
)]

use std::collections::BTreeSet;
use std::path::Path;

use dicom_core::value::PrimitiveValue;
use dicom_core::{DataElement, VR};
use dicom_dictionary_std::tags;
use keyslice_core::findings::Organ;
use keyslice_core::prediction::ModelId;
use keyslice_core::volume::Volume;
use keyslice_pacs::seg::write::{Authorship, segmentation};
use keyslice_pacs::seg::{Algorithm, SegError, Segment, SegmentOf, SourceSeries, read};
use keyslice_pacs::sr::StudyContext;
use keyslice_testkit::validators::{dciodvfy_errors, highdicom, python_json, tool};

/// The demo CT written as a DICOM series in `folder`, read back (so its slices carry their
/// SOP Instance UIDs) with its study and source series.
fn ct_series(folder: &Path) -> (Volume, StudyContext, SourceSeries) {
    let identity = keyslice_io::dicom::write::SeriesIdentity {
        patient_name: "Phantom^Seg".into(),
        patient_id: "SEG-1".into(),
        accession: "A-SEG".into(),
        study_date: "20261207".into(),
        study_description: "Segmentation test".into(),
        series_description: "Demo CT".into(),
    };
    let demo = keyslice_core::volume::demo::demo_abdomen();
    keyslice_io::dicom::write::write_ct_series(&demo, folder, &identity).unwrap();
    let volume = keyslice_io::load_study(folder, &keyslice_io::LoadOptions::default())
        .unwrap()
        .volume;
    let study = StudyContext::from_folder(folder).unwrap();
    let source = SourceSeries::of(
        &volume,
        &study.frame_of_reference_uid,
        &study.image_class_uid,
    )
    .unwrap();
    (volume, study, source)
}

/// A ball of `radius` voxels at `centre` on a grid of `dims`.
fn ball(dims: [usize; 3], centre: [usize; 3], radius: usize) -> Vec<u8> {
    let mut mask = vec![0u8; dims.iter().product()];
    for k in 0..dims[2] {
        for j in 0..dims[1] {
            for i in 0..dims[0] {
                let d = [i, j, k]
                    .iter()
                    .zip(centre)
                    .map(|(&a, c)| a.abs_diff(c).pow(2))
                    .sum::<usize>();
                if d <= radius * radius {
                    mask[(k * dims[1] + j) * dims[0] + i] = 1;
                }
            }
        }
    }
    mask
}

/// Three segments: two liver lesions (the second grown, sharing no voxel) and the left
/// kidney.
fn segments(dims: [usize; 3]) -> Vec<Segment> {
    let kidney = {
        let mut mask = vec![0u8; dims.iter().product()];
        for k in 30..36 {
            for j in 90..100 {
                for i in 130..140 {
                    mask[(k * dims[1] + j) * dims[0] + i] = 1;
                }
            }
        }
        mask
    };
    vec![
        Segment::lesion(
            Organ::Liver,
            0,
            Algorithm::Manual,
            ball(dims, [60, 70, 40], 5),
        ),
        Segment::lesion(
            Organ::Liver,
            1,
            Algorithm::Semiautomatic("Keyslice grow from box".into()),
            ball(dims, [80, 60, 50], 3),
        ),
        Segment {
            of: SegmentOf::Organ(Organ::KidneyLeft),
            label: "Left kidney".into(),
            algorithm: Algorithm::Automatic("keyslice-tiny 3".into()),
            mask: kidney,
        },
    ]
}

fn authorship() -> Authorship {
    Authorship {
        creator: "Reviewer^Ana".into(),
        model: ModelId {
            id: "keyslice-tiny".into(),
            version: "3".into(),
        },
    }
}

/// A mask's voxels as (source SOP Instance UID, row, column).
fn voxels_of(mask: &[u8], volume: &Volume) -> BTreeSet<(String, usize, usize)> {
    let [columns, rows, _] = volume.dims();
    mask.iter()
        .enumerate()
        .filter(|(_, v)| **v != 0)
        .map(|(n, _)| {
            let slice = n / (rows * columns);
            let uid = volume.slices()[slice].sop_instance_uid.clone().unwrap();
            (uid, (n / columns) % rows, n % columns)
        })
        .collect()
}

fn json_voxels(list: &serde_json::Value) -> BTreeSet<(String, usize, usize)> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v[0].as_str().unwrap().to_string(),
                usize::try_from(v[1].as_u64().unwrap()).unwrap(),
                usize::try_from(v[2].as_u64().unwrap()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn masks_written_as_seg_pass_dciodvfy_and_read_back_voxel_identical_in_highdicom_and_keyslice() {
    let dir = tempfile::tempdir().unwrap();
    let (volume, study, source) = ct_series(&dir.path().join("ct"));
    let segments = segments(volume.dims());
    let written = segmentation(&study, &source, &segments, &authorship()).unwrap();
    // The same masks are one document, whenever they are written.
    assert_eq!(
        segmentation(&study, &source, &segments, &authorship())
            .unwrap()
            .sop_uid,
        written.sop_uid
    );
    let path = dir.path().join("seg.dcm");
    std::fs::write(&path, &written.bytes).unwrap();

    if tool("dciodvfy") {
        let (errors, text) = dciodvfy_errors(&path);
        assert!(errors.is_empty(), "dciodvfy: {errors:#?}\n{text}");
    }

    if highdicom() {
        let read = python_json(
            "seg_with_highdicom.py",
            &["read".as_ref(), path.as_os_str()],
        );
        let listed = read["segments"].as_array().unwrap();
        assert_eq!(listed.len(), 3);
        for (segment, theirs) in segments.iter().zip(listed) {
            assert_eq!(theirs["label"], segment.label.as_str());
            assert_eq!(
                json_voxels(&theirs["voxels"]),
                voxels_of(&segment.mask, &volume),
                "{}",
                segment.label
            );
        }
        assert_eq!(listed[0]["type"][0], "108369006");
        assert_eq!(listed[0]["regions"][0][0], "10200004");
        assert_eq!(listed[1]["algorithm"], "SEMIAUTOMATIC");
        assert_eq!(listed[2]["type"][0], "64033007");
    }

    let back = read::segmentation(&written.bytes, &source).unwrap();
    assert_eq!(back.sop_uid, written.sop_uid);
    assert_eq!(back.segments, segments);
    assert!(back.notes.is_empty(), "{:?}", back.notes);
}

#[test]
fn a_seg_written_by_highdicom_opens_as_a_lesion_and_an_organ_of_another_kind() {
    if !highdicom() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("ct");
    let (volume, _, source) = ct_series(&folder);
    let path = dir.path().join("theirs.dcm");
    let expected = python_json(
        "seg_with_highdicom.py",
        &["write".as_ref(), folder.as_os_str(), path.as_os_str()],
    );
    let back = read::segmentation(&std::fs::read(&path).unwrap(), &source).unwrap();
    assert_eq!(back.segments.len(), 2);
    let tumor = &back.segments[0];
    assert_eq!(
        tumor.of,
        SegmentOf::Lesion {
            organ: Organ::Liver,
            lesion: 0
        }
    );
    assert_eq!(tumor.label, "Liver tumor");
    assert_eq!(
        voxels_of(&tumor.mask, &volume),
        json_voxels(&expected["Liver tumor"])
    );
    let spleen = &back.segments[1];
    assert_eq!(spleen.of, SegmentOf::Other("Spleen".into()));
    assert_eq!(
        voxels_of(&spleen.mask, &volume),
        json_voxels(&expected["Spleen"])
    );
}

/// `bytes` with `change` made to its data set, written again.
fn altered(bytes: &[u8], change: impl FnOnce(&mut dicom_object::InMemDicomObject)) -> Vec<u8> {
    let mut object = dicom_object::OpenFileOptions::new()
        .from_reader(&bytes[128..])
        .unwrap();
    change(&mut object);
    let mut out = Vec::new();
    object.write_all(&mut out).unwrap();
    out
}

#[test]
fn damaged_and_foreign_segmentations_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (volume, study, source) = ct_series(&dir.path().join("ct"));
    let segments = segments(volume.dims());
    let bytes = segmentation(&study, &source, &segments, &authorship())
        .unwrap()
        .bytes;
    let refused = |bytes: &[u8]| read::segmentation(bytes, &source).unwrap_err();

    // Another series of the same frame of reference.
    let mut other = source.clone();
    other.series_uid = "1.2.3.4".into();
    let error = read::segmentation(&bytes, &other).unwrap_err();
    assert!(matches!(error, SegError::OtherSeries { .. }), "{error}");
    assert!(error.to_string().contains("1.2.3.4"), "{error}");
    // Another frame of reference.
    let mut other = source.clone();
    other.frame_of_reference_uid = "1.2.3.5".into();
    assert!(matches!(
        read::segmentation(&bytes, &other).unwrap_err(),
        SegError::OtherSeries { .. }
    ));
    // A CT of another size.
    let mut other = source.clone();
    other.dims = [96, 80, 80];
    let error = read::segmentation(&bytes, &other).unwrap_err();
    assert_eq!(
        error.to_string(),
        "its frames are 192×160; the CT's slices are 96×80, so its masks do not lie on the CT's grid"
    );

    // Fractional.
    let fractional = altered(&bytes, |object| {
        object.put(DataElement::new(
            tags::SEGMENTATION_TYPE,
            VR::CS,
            PrimitiveValue::from("FRACTIONAL"),
        ));
        object.put(DataElement::new(
            tags::SEGMENTATION_FRACTIONAL_TYPE,
            VR::CS,
            PrimitiveValue::from("PROBABILITY"),
        ));
    });
    let error = refused(&fractional);
    assert!(matches!(error, SegError::Fractional(_)), "{error}");
    assert!(error.to_string().contains("probability"), "{error}");

    // A frame's functional groups missing.
    let missing = altered(&bytes, |object| {
        let mut element = object
            .take_element(tags::PER_FRAME_FUNCTIONAL_GROUPS_SEQUENCE)
            .unwrap();
        let items = element.items_mut().unwrap();
        items.pop();
        object.put(element);
    });
    let error = refused(&missing);
    assert!(matches!(error, SegError::FramesMissing { .. }), "{error}");

    // Pixel data cut short of rows × columns × frames.
    let short = altered(&bytes, |object| {
        let pixels = object
            .element(tags::PIXEL_DATA)
            .unwrap()
            .to_bytes()
            .unwrap();
        let half = pixels[..pixels.len() / 2].to_vec();
        object.put(DataElement::new(
            tags::PIXEL_DATA,
            VR::OB,
            PrimitiveValue::from(half),
        ));
    });
    let error = refused(&short);
    assert!(matches!(error, SegError::PixelCount { .. }), "{error}");
    assert!(error.to_string().contains("192 columns"), "{error}");

    // A frame that lies between slices.
    let off_grid = altered(&bytes, |object| {
        let mut element = object
            .take_element(tags::PER_FRAME_FUNCTIONAL_GROUPS_SEQUENCE)
            .unwrap();
        let first = &mut element.items_mut().unwrap()[0];
        let mut plane = first.take_element(tags::PLANE_POSITION_SEQUENCE).unwrap();
        plane.items_mut().unwrap()[0].put(DataElement::new(
            tags::IMAGE_POSITION_PATIENT,
            VR::DS,
            PrimitiveValue::from("0\\0\\1.5"),
        ));
        first.put(plane);
        object.put(element);
    });
    let error = refused(&off_grid);
    assert!(matches!(error, SegError::Frame { frame: 1, .. }), "{error}");

    // Not a segmentation, and not DICOM.
    let sr = altered(&bytes, |object| {
        object.put(DataElement::new(
            tags::SOP_CLASS_UID,
            VR::UI,
            PrimitiveValue::from(dicom_dictionary_std::uids::COMPREHENSIVE3_DSR_STORAGE),
        ));
    });
    assert!(matches!(refused(&sr), SegError::NotSegmentation(_)));
    for cut in [0, 100, 400, bytes.len() / 3, bytes.len() - 7] {
        let error = refused(&bytes[..cut]);
        assert!(!error.to_string().is_empty());
    }
}

#[test]
fn overlapping_lesions_are_read_each_whole_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let (volume, study, source) = ct_series(&dir.path().join("ct"));
    let dims = volume.dims();
    let segments = vec![
        Segment::lesion(
            Organ::Liver,
            0,
            Algorithm::Manual,
            ball(dims, [60, 70, 40], 4),
        ),
        Segment::lesion(
            Organ::Liver,
            1,
            Algorithm::Manual,
            ball(dims, [63, 70, 40], 4),
        ),
    ];
    let bytes = segmentation(&study, &source, &segments, &authorship())
        .unwrap()
        .bytes;
    let back = read::segmentation(&bytes, &source).unwrap();
    assert_eq!(back.segments, segments);
    assert_eq!(back.notes.len(), 1);
    assert!(back.notes[0].contains("overlap"), "{:?}", back.notes);

    // Nothing to write, and a mask of another CT, are refused.
    let empty = vec![Segment::lesion(
        Organ::Liver,
        0,
        Algorithm::Manual,
        vec![0; dims.iter().product()],
    )];
    assert!(matches!(
        segmentation(&study, &source, &empty, &authorship()),
        Err(SegError::Empty)
    ));
    let wrong = vec![Segment::lesion(
        Organ::Liver,
        0,
        Algorithm::Manual,
        vec![1; 10],
    )];
    assert!(matches!(
        segmentation(&study, &source, &wrong, &authorship()),
        Err(SegError::MaskSize { .. })
    ));
}

#[test]
fn text_from_a_hostile_segmentation_is_shown_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let (volume, study, source) = ct_series(&dir.path().join("ct"));
    let bytes = segmentation(&study, &source, &segments(volume.dims()), &authorship())
        .unwrap()
        .bytes;
    let refused = |bytes: &[u8]| read::segmentation(bytes, &source).unwrap_err();
    // Text from the file with escape codes is shown as text, never as terminal control.
    let hostile = altered(&bytes, |object| {
        object.put(DataElement::new(
            tags::SOP_CLASS_UID,
            VR::UI,
            PrimitiveValue::from("1.2.3\u{1b}[2J"),
        ));
    });
    let said = refused(&hostile).to_string();
    assert!(!said.contains('\u{1b}'), "{said:?}");
    let relabelled = altered(&bytes, |object| {
        let mut element = object.take_element(tags::SEGMENT_SEQUENCE).unwrap();
        element.items_mut().unwrap()[0].put(DataElement::new(
            tags::SEGMENT_LABEL,
            VR::LO,
            PrimitiveValue::from("Liver\u{1b}[31m lesion"),
        ));
        object.put(element);
    });
    let read = read::segmentation(&relabelled, &source).unwrap();
    assert!(
        !read.segments[0].label.contains('\u{1b}'),
        "{:?}",
        read.segments[0].label
    );
    // A CT so long that the segments' masks would take gigabytes: refused, not allocated.
    let mut huge = source.clone();
    huge.dims[2] = 80_000;
    let error = read::segmentation(&bytes, &huge).unwrap_err();
    assert!(
        matches!(error, SegError::TooLarge { segments: 3, .. }),
        "{error}"
    );
}
