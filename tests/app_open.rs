//! Opening a study the way the window does (`app::open::load`, run on its worker thread):
//! an AbdomenAtlas case folder brings its masks, the lesion extents for the slice bar and the
//! reference key slice; a bad path gives a message and a hint, not a panic.

mod common;

use keyslice::app::open::{Source, load};

#[test]
fn case_folder_brings_masks_lesion_extents_and_the_key_slice() {
    let folder = tempfile::tempdir().expect("temp dir");
    let case = folder.path().join("BDMAP_00000002");
    let (dims, affine) = common::write_lesion_case(&case);
    common::write_mask(
        &case.join("segmentations").join("liver.nii.gz"),
        dims,
        affine,
        |i, _, k| i < 8 && (3..=10).contains(&k),
    );

    let Ok((study, Some(masks))) = load(&Source::Path(case.join("ct.nii.gz"))) else {
        panic!("the case opens, with masks");
    };
    assert!(study.warnings.is_empty(), "{:?}", study.warnings);
    let study = masks;
    let names: Vec<&str> = study.structures.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["kidney_lesion", "liver", "liver_lesion"]);
    assert!(study.labels.is_some());
    let extents: Vec<(&str, usize, usize)> = study
        .lesion_marks
        .iter()
        .map(|mark| (mark.name.as_str(), mark.first_slice, mark.last_slice))
        .collect();
    assert_eq!(extents, [("kidney_lesion", 12, 13), ("liver_lesion", 5, 8)]);
    // The kidney lesion covers 3 × 16 = 48 voxels per slice, more than the liver lesion's
    // 16 on slice 7, so the reference key slice is the kidney lesion's first slice.
    let (slice, source) = study.key_slice.expect("a key slice from the masks");
    assert_eq!(slice, 12);
    assert!(source.contains("most lesion voxels"), "{source}");
    assert!(study.warnings.is_empty(), "{:?}", study.warnings);
}

#[test]
fn a_missing_path_gives_a_message_and_a_hint() {
    let Err((message, hint)) = load(&Source::Path("/no/such/study.nii.gz".into())) else {
        panic!("a missing file must not open");
    };
    assert!(message.contains("/no/such/study.nii.gz"), "{message}");
    assert!(!hint.is_empty());
}

#[test]
fn the_demo_opens_without_any_file() {
    let Ok((study, None)) = load(&Source::Demo) else {
        panic!("the demo always opens, without masks");
    };
    assert_eq!(study.volume.dims(), [192, 160, 80]);
    assert!(study.title.contains("not patient data"));
}

#[test]
fn a_workspace_cases_prediction_is_shown_only_over_the_images_it_was_made_on() {
    use keyslice::io::{LoadOptions, load_study};
    use keyslice::prediction::ImageBinding;
    use keyslice::review::workspace::Workspace;
    let folder = tempfile::tempdir().expect("temp dir");
    let case = folder.path().join("BDMAP_00000009");
    common::write_lesion_case(&case);
    let (workspace, _) =
        Workspace::create_or_extend(&folder.path().join("ws"), std::slice::from_ref(&case))
            .expect("workspace");
    let case_id = workspace.manifest.cases[0].case_id.clone();
    let volume = load_study(&case, &LoadOptions::default())
        .expect("loads")
        .volume;
    let mut prediction = common::saved_prediction(&case_id, "Liver: no tumor. Key slice: 3", None);
    prediction.images = Some(ImageBinding::of(&volume));
    workspace.append_prediction(&prediction).expect("appended");
    let source = Source::WorkspaceCase {
        root: workspace.root.clone(),
        case_id: case_id.clone(),
    };
    let Ok((study, _)) = load(&source) else {
        panic!("the case opens");
    };
    assert!(study.prediction.is_some(), "{:?}", study.warnings);

    // The CT is replaced by another (a voxel changed): the prediction is not drawn over it.
    let ct = case.join("ct.nii.gz");
    let before = keyslice::io::nifti::read_nifti(&ct).expect("reads");
    let voxels = match before.voxels().clone() {
        keyslice::volume::Voxels::I16(mut values) => {
            values[0] = values[0].wrapping_add(7);
            keyslice::volume::Voxels::I16(values)
        }
        keyslice::volume::Voxels::F32(mut values) => {
            values[0] += 7.0;
            keyslice::volume::Voxels::F32(values)
        }
    };
    let other = keyslice::volume::Volume::new(
        before.dims(),
        *before.patient_from_voxel(),
        voxels,
        Vec::new(),
        before.info().clone(),
    )
    .expect("a volume");
    keyslice::io::nifti::write_nifti(&other, &ct, keyslice::io::nifti::WriteOptions::default())
        .expect("written");
    let Ok((study, _)) = load(&source) else {
        panic!("the case still opens");
    };
    assert!(study.prediction.is_none());
    assert!(
        study.warnings[0].contains("other values than when it was analysed")
            && study.warnings[0].contains("analyse it again"),
        "{:?}",
        study.warnings
    );
}

/// A DICOM folder holding a segmentation beside the CT (as a PACS export or another viewer
/// leaves it) opens with its segments as lesion masks: the lesion's extent on the slice bar,
/// the key slice where it is largest; a second, damaged segmentation is named and left out.
#[test]
fn a_dicom_folder_with_a_segmentation_opens_with_its_lesions_as_masks() {
    use keyslice::findings::Organ;
    use keyslice::pacs::seg::write::{Authorship, segmentation};
    use keyslice::pacs::seg::{Algorithm, Segment, SourceSeries};
    use keyslice::pacs::sr::StudyContext;
    use keyslice::volume::mask::{Brush, paint};
    let folder = tempfile::tempdir().expect("temp dir");
    let series = folder.path().join("series");
    let identity = keyslice::io::dicom::write::SeriesIdentity {
        patient_name: "Phantom^Seg".into(),
        patient_id: "SEG-2".into(),
        accession: "A-SEG2".into(),
        study_date: "20261207".into(),
        study_description: "Segmentation".into(),
        series_description: "Demo CT".into(),
    };
    keyslice::io::dicom::write::write_ct_series(
        &keyslice::volume::demo::demo_abdomen(),
        &series,
        &identity,
    )
    .expect("series written");
    let volume = keyslice::io::load_study(&series, &keyslice::io::LoadOptions::default())
        .expect("loaded")
        .volume;
    let study = StudyContext::from_folder(&series).expect("study");
    let source = SourceSeries::of(
        &volume,
        &study.frame_of_reference_uid,
        &study.image_class_uid,
    )
    .expect("source");
    let mut mask = vec![0u8; volume.dims().iter().product()];
    paint(
        &mut mask,
        volume.dims(),
        volume.spacing_mm(),
        [70, 70, 40],
        7.0,
        Brush::Ball,
        true,
    )
    .expect("painted");
    let seg = segmentation(
        &study,
        &source,
        &[Segment::lesion(Organ::Liver, 0, Algorithm::Manual, mask)],
        &Authorship {
            creator: "Reviewer^Ana".into(),
            model: keyslice::prediction::ModelId {
                id: "keyslice-tiny".into(),
                version: "3".into(),
            },
        },
    )
    .expect("written");
    std::fs::write(series.join("seg.dcm"), &seg.bytes).expect("saved");
    // A damaged one: cut in the middle.
    std::fs::write(
        series.join("seg-cut.dcm"),
        &seg.bytes[..seg.bytes.len() / 2],
    )
    .expect("saved");

    let Ok((study, Some(masks))) = load(&Source::Path(series.clone())) else {
        panic!("the series opens, with masks");
    };
    assert_eq!(
        study.volume.dims(),
        volume.dims(),
        "the CT, not the segmentation"
    );
    let names: Vec<&str> = masks.structures.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["liver_lesion"]);
    let extents: Vec<(&str, usize, usize)> = masks
        .lesion_marks
        .iter()
        .map(|mark| (mark.name.as_str(), mark.first_slice, mark.last_slice))
        .collect();
    // 7 mm on 3 mm slices: slices 38–42.
    assert_eq!(extents, [("liver_lesion", 38, 42)]);
    assert_eq!(masks.key_slice.as_ref().map(|(slice, _)| *slice), Some(40));
    assert!(
        masks
            .warnings
            .iter()
            .any(|warning| warning.contains("seg-cut.dcm")),
        "{:?}",
        masks.warnings
    );
}
