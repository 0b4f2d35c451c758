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
    let volume = keyslice::volume::demo::demo_abdomen();
    keyslice::io::dicom::write::write_ct_series(&volume, &series, &identity)
        .expect("series written");
    let (seg, _) = demo_segmentation(&series, [70, 70, 40]);
    std::fs::write(series.join("seg.dcm"), &seg).expect("saved");
    // A damaged one: cut in the middle.
    std::fs::write(series.join("seg-cut.dcm"), &seg[..seg.len() / 2]).expect("saved");

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

/// A segmentation of the demo CT written as `series` (a DICOM folder): one liver lesion, a
/// ball of 7 mm at `centre`; with its mask.
fn demo_segmentation(series: &std::path::Path, centre: [usize; 3]) -> (Vec<u8>, Vec<u8>) {
    use keyslice::findings::Organ;
    use keyslice::pacs::seg::write::{Authorship, segmentation};
    use keyslice::pacs::seg::{Algorithm, Segment, SourceSeries};
    use keyslice::pacs::sr::StudyContext;
    use keyslice::volume::mask::{Brush, paint};
    let volume = keyslice::io::load_study(series, &keyslice::io::LoadOptions::default())
        .expect("loaded")
        .volume;
    let study = StudyContext::from_folder(series).expect("study");
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
        centre,
        7.0,
        Brush::Ball,
        true,
    )
    .expect("painted");
    let seg = segmentation(
        &study,
        &source,
        &[Segment::lesion(
            Organ::Liver,
            0,
            Algorithm::Manual,
            mask.clone(),
        )],
        &Authorship {
            creator: "Reviewer^Ana".into(),
            model: keyslice::prediction::ModelId {
                id: "keyslice-tiny".into(),
                version: "3".into(),
            },
        },
    )
    .expect("written");
    (seg.bytes, mask)
}

/// Saves a segmentation's bytes at `path` with its Content Date set to `date`.
fn save_dated(bytes: &[u8], path: &std::path::Path, date: &str) {
    use dicom_core::{DataElement, VR};
    let scratch = path.with_extension("undated");
    std::fs::write(&scratch, bytes).expect("saved");
    let mut object = dicom_object::open_file(&scratch).expect("a DICOM file");
    object.put(DataElement::new(
        dicom_dictionary_std::tags::CONTENT_DATE,
        VR::DA,
        date,
    ));
    object.write_to_file(path).expect("saved");
    std::fs::remove_file(&scratch).expect("removed");
}

/// A study opened from a PACS brings the segmentations stored with it, retrieved into the
/// cache beside its CT series. The newest that reads onto the CT is shown (each one Keyslice
/// stores holds all of the case's masks then); a newer damaged one is named and passed over,
/// and the older ones are said to be left out.
#[test]
fn a_pacs_cases_stored_segmentations_show_the_newest_that_fits() {
    use keyslice::review::workspace::{Workspace, WorkspaceCase};
    let dir = tempfile::tempdir().expect("temp dir");
    let study = dir.path().join("cache").join("2.25.1");
    let ct = study.join("2.25.2");
    let identity = keyslice::io::dicom::write::SeriesIdentity {
        patient_name: "Phantom^Stored".into(),
        patient_id: "SEG-3".into(),
        accession: "A-SEG3".into(),
        study_date: "20261207".into(),
        study_description: "Segmentation".into(),
        series_description: "Demo CT".into(),
    };
    keyslice::io::dicom::write::write_ct_series(
        &keyslice::volume::demo::demo_abdomen(),
        &ct,
        &identity,
    )
    .expect("series written");
    let (old, _) = demo_segmentation(&ct, [70, 70, 40]);
    let (new, drawn) = demo_segmentation(&ct, [90, 80, 40]);
    let segs = study.join("2.25.3");
    std::fs::create_dir_all(&segs).expect("folder");
    save_dated(&old, &segs.join("a.dcm"), "20250101");
    save_dated(&new, &segs.join("b.dcm"), "20261207");
    let damaged = study.join("2.25.4");
    std::fs::create_dir_all(&damaged).expect("folder");
    save_dated(&new, &damaged.join("cut.dcm"), "20991231");
    let cut = std::fs::read(damaged.join("cut.dcm")).expect("read");
    std::fs::write(damaged.join("cut.dcm"), &cut[..cut.len() * 2 / 3]).expect("cut");

    let root = dir.path().join("ws");
    Workspace::add_cases(
        &root,
        vec![WorkspaceCase {
            case_id: "pacs-stored".into(),
            volume: ct,
            masks: None,
            truth: None,
            origin: Some("dicomweb+http://pacs.example/dicom-web/studies/2.25.1".into()),
            patient: None,
        }],
    )
    .expect("workspace");
    let (_, masks) = load(&Source::WorkspaceCase {
        root,
        case_id: "pacs-stored".into(),
    })
    .expect("loaded");
    let masks = masks.expect("the stored segmentation shown");
    let labels = masks.labels.expect("labels");
    let shown: Vec<u8> = labels.labels.iter().map(|&l| u8::from(l != 0)).collect();
    assert_eq!(shown, drawn, "the newest segmentation that reads, alone");
    let warnings = masks.warnings.join(" | ");
    assert!(warnings.contains("cut.dcm"), "{warnings}");
    assert!(warnings.contains("1 older one(s)"), "{warnings}");
}
