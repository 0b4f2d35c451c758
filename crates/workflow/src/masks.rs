//! Masks a study's folder holds as DICOM Segmentations, opened onto its CT: each segment
//! becomes a structure named as the case-folder masks are (`liver_lesion`, `liver`,
//! `kidney_left`, …), so a SEG drawn in Keyslice or in another viewer shows as lesion and
//! organ masks beside the AbdomenAtlas ones. A segmentation that does not fit the CT (another
//! series, damaged, fractional) is left out with its reason.

use std::path::{Path, PathBuf};

use keyslice_core::findings::Organ;
use keyslice_core::volume::{LabelVolume, Volume};
use keyslice_pacs::seg::read::{content_date_time, is_segmentation_file, segmentation_file};
use keyslice_pacs::seg::{SegmentOf, SourceSeries};
use keyslice_pacs::sr::StudyContext;

/// The segmentation files directly in `folder`, sorted.
#[must_use]
pub fn segmentation_files(folder: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_file() && is_segmentation_file(path))
        .collect();
    files.sort();
    files
}

/// The segmentations of a study retrieved from its PACS: those in the other series folders
/// beside the CT's folder `ct_folder` in the retrieve cache (a study's series are folders of
/// one study folder), newest first by their Content Date and Time.
#[must_use]
pub fn stored_segmentations(ct_folder: &Path) -> Vec<PathBuf> {
    let Some(study) = ct_folder.parent() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(study) else {
        return Vec::new();
    };
    let mut series: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_dir() && path.as_path() != ct_folder)
        .collect();
    series.sort();
    let mut files: Vec<(String, PathBuf)> = series
        .iter()
        .flat_map(|folder| segmentation_files(folder))
        .map(|file| (content_date_time(&file).unwrap_or_default(), file))
        .collect();
    // Newest first; the same moment in file order.
    files.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    files.into_iter().map(|(_, file)| file).collect()
}

/// The name a segment's structure takes.
fn structure_name(of: &SegmentOf) -> String {
    match of {
        SegmentOf::Lesion { organ, .. } => match organ {
            Organ::Liver => "liver_lesion".into(),
            Organ::Pancreas => "pancreatic_lesion".into(),
            Organ::KidneyLeft | Organ::KidneyRight => "kidney_lesion".into(),
        },
        SegmentOf::Organ(organ) => organ.key().into(),
        SegmentOf::Other(meaning) => meaning
            .trim()
            .to_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect(),
    }
}

/// The segments of `files` on `volume`'s grid, one structure per name (lesions of one organ
/// together), in the order first met; what could not be read goes to `warnings`.
pub fn segmentation_masks(
    files: &[PathBuf],
    study_folder: &Path,
    volume: &Volume,
    warnings: &mut Vec<String>,
) -> Vec<LabelVolume> {
    if files.is_empty() {
        return Vec::new();
    }
    let source = StudyContext::from_folder(study_folder)
        .map_err(|error| error.to_string())
        .and_then(|study| {
            SourceSeries::of(
                volume,
                &study.frame_of_reference_uid,
                &study.image_class_uid,
            )
            .map_err(|error| error.to_string())
        });
    let source = match source {
        Ok(source) => source,
        Err(reason) => {
            warnings.push(format!("segmentations not shown: {reason}"));
            return Vec::new();
        }
    };
    let mut structures: Vec<LabelVolume> = Vec::new();
    for file in files {
        let read = match segmentation_file(file, &source) {
            Ok(read) => read,
            Err(error) => {
                warnings.push(format!(
                    "segmentation {} not shown: {error}",
                    keyslice_core::text::shown(&file.file_name().map_or_else(
                        || file.display().to_string(),
                        |name| name.to_string_lossy().into_owned()
                    ))
                ));
                continue;
            }
        };
        warnings.extend(read.notes);
        for segment in read.segments {
            let name = structure_name(&segment.of);
            match structures
                .iter_mut()
                .find(|structure| structure.name == name)
            {
                Some(structure) => {
                    for (out, &inside) in structure.labels.iter_mut().zip(&segment.mask) {
                        *out |= u8::from(inside != 0);
                    }
                }
                None => structures.push(LabelVolume {
                    name,
                    dims: volume.dims(),
                    patient_from_voxel: *volume.patient_from_voxel(),
                    labels: segment.mask.iter().map(|&v| u8::from(v != 0)).collect(),
                }),
            }
        }
    }
    structures
}
