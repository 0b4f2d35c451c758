//! The `segmentation` format: label maps for segmentation training, in the layout nnU-Net
//! (v2) and MONAI read. Each case is its CT (`imagesTr/CASE_0000.nii.gz`, HU and geometry
//! only) and one label map on the CT's grid (`labelsTr/CASE.nii.gz`, `uint8`): the organ
//! masks of its case folder and, over them, the lesion masks the reviewer drew or accepted.
//! `dataset.json` is nnU-Net's description (channel names, label values, training count,
//! file ending); `datalist.json` is MONAI's (training and validation pairs, by split).
//!
//! A case is a complete label map or is left out: every lesion its findings keep must have
//! a mask, since a lesion without one would teach "background" where a tumor is.

use std::path::Path;

use serde_json::{Value, json};

use super::ExportCase;
use keyslice_core::findings::Organ;
use keyslice_core::volume::{LabelVolume, Volume};

/// The label values, in order: background 0, organs, then lesions by organ.
pub const LABELS: [(&str, u8); 8] = [
    ("background", 0),
    ("liver", 1),
    ("pancreas", 2),
    ("kidney_left", 3),
    ("kidney_right", 4),
    ("liver_lesion", 5),
    ("pancreatic_lesion", 6),
    ("kidney_lesion", 7),
];

/// The label value of a lesion of `organ`.
fn lesion_label(organ: Organ) -> u8 {
    match organ {
        Organ::Liver => 5,
        Organ::Pancreas => 6,
        Organ::KidneyLeft | Organ::KidneyRight => 7,
    }
}

/// The label value of an organ mask named `name` (an AbdomenAtlas file stem), if it is one
/// of the organs labelled.
fn organ_label(name: &str) -> Option<u8> {
    LABELS[1..5]
        .iter()
        .find(|(label, _)| *label == name)
        .map(|(_, value)| *value)
}

/// The case's CT file in the export.
#[must_use]
pub fn image_file(pseudonym: &str) -> String {
    format!("imagesTr/{pseudonym}_0000.nii.gz")
}

/// The case's label map file in the export.
#[must_use]
pub fn label_file(pseudonym: &str) -> String {
    format!("labelsTr/{pseudonym}.nii.gz")
}

/// The case's label map on `volume`'s grid: its organ masks (`organs`, from its case
/// folder, already on the grid), then its lesion masks; or why the case cannot be one.
pub(crate) fn label_map(
    case: &ExportCase,
    volume: &Volume,
    organs: &[LabelVolume],
) -> Result<LabelVolume, String> {
    let dims = volume.dims();
    let mut labels = vec![0u8; dims.iter().product()];
    for organ in organs {
        let Some(value) = organ_label(&organ.name) else {
            continue;
        };
        if organ.dims != dims {
            return Err(format!("its {} mask is not on the CT's grid", organ.name));
        }
        for (out, &inside) in labels.iter_mut().zip(&organ.labels) {
            if inside != 0 {
                *out = value;
            }
        }
    }
    for organ in Organ::ALL {
        for (index, _) in case.findings.organ(organ).lesions.iter().enumerate() {
            let mask = case.masks.get(&(organ, index)).ok_or_else(|| {
                format!(
                    "{} lesion {} has no mask, so its label map would call the tumor background; draw or grow its mask",
                    organ,
                    index + 1
                )
            })?;
            let dense = mask
                .to_dense(dims)
                .map_err(|error| format!("{organ} lesion {}: {error}", index + 1))?;
            let value = lesion_label(organ);
            for (out, &inside) in labels.iter_mut().zip(&dense) {
                if inside != 0 {
                    *out = value;
                }
            }
        }
    }
    Ok(LabelVolume {
        name: "labels".into(),
        dims,
        patient_from_voxel: *volume.patient_from_voxel(),
        labels,
    })
}

/// `dataset.json` (nnU-Net v2) and `datalist.json` (MONAI) for the exported cases.
#[must_use]
pub fn descriptions(cases: &[ExportCase]) -> (Value, Value) {
    let labels: serde_json::Map<String, Value> = LABELS
        .iter()
        .map(|(name, value)| ((*name).to_string(), json!(value)))
        .collect();
    let dataset = json!({
        "name": "Keyslice reviewed lesions",
        "description": "Abdominal CT with organ masks and reviewer-drawn lesion masks, exported by Keyslice (pseudonymised).",
        "channel_names": {"0": "CT"},
        "labels": labels,
        "numTraining": cases.len(),
        "file_ending": ".nii.gz",
    });
    let pairs = |split: &str| -> Vec<Value> {
        cases
            .iter()
            .filter(|case| case.split == split)
            .map(|case| {
                json!({
                    "image": image_file(&case.pseudonym),
                    "label": label_file(&case.pseudonym),
                })
            })
            .collect()
    };
    let datalist = json!({
        "training": pairs("train"),
        "validation": pairs("val"),
    });
    (dataset, datalist)
}

/// Writes the case's CT and label map into `folder`.
pub fn write_case(
    case: &ExportCase,
    volume: &Volume,
    labels: &LabelVolume,
    folder: &Path,
) -> Result<(), super::ExportError> {
    super::write_volume(volume, &folder.join(image_file(&case.pseudonym)))?;
    let path = folder.join(label_file(&case.pseudonym));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(super::io_error(parent))?;
    }
    keyslice_io::nifti::write_label_nifti(
        labels,
        &path,
        keyslice_io::nifti::WriteOptions::default(),
    )
    .map_err(|error| super::ExportError::Io {
        path: path.clone(),
        source: std::io::Error::other(error.to_string()),
    })
}
