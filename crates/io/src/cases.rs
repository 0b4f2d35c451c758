//! Case files for scoring: prediction JSONL, truth JSONL, and truth folders (one folder per
//! case holding `truth.json`, or AbdomenAtlas masks from which truth is derived).
//!
//! Prediction line: `{"case_id": "…", "report": "…", "findings": {…}?, "key_slice": 57 |
//! {"index": 57, …}?, "local_description": "…"?}`: `findings` wins over `report` when both
//! are given; the key slice defaults to the one the report names.
//! Truth line (and `truth.json`, where `case_id` defaults to the folder name):
//! `{"case_id": "…", "findings": {…}? | "report": "…"?, "lesion_extents": [{"organ",
//! "first_slice", "last_slice", "largest_slice"}]?}`.
//! From masks: `<case>/segmentations/{liver_lesion, pancreatic_lesion, kidney_lesion}.nii.gz`
//! resampled onto `<case>/ct.nii.gz`'s grid; a lesion is a run of consecutive slices with
//! lesion voxels; kidney lesions go to the side whose kidney mask they overlap most (or, without
//! kidney masks, the side of the patient they lie on).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::nifti::{NiftiError, read_label_nifti, read_nifti_grid};
use keyslice_core::findings::{
    Findings, KeySlice, LesionExtent, Organ, TumorPresence, read_report,
};
use keyslice_core::volume::label::first_largest;
use keyslice_core::volume::{Affine, LabelVolume, resample_nearest};

/// The layout of a case folder, as phantoms are written and AbdomenAtlas cases come: the CT
/// as `ct.nii.gz` (or `ct.nii`), organ and lesion masks in `segmentations/`, and the truth in
/// `truth.json`. The one place these names are spelled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaseFolder(PathBuf);

impl CaseFolder {
    /// The CT's file name as written.
    pub const CT: &'static str = "ct.nii.gz";
    /// The CT's file name, uncompressed, as also read.
    pub const CT_UNCOMPRESSED: &'static str = "ct.nii";
    /// The masks' folder.
    pub const MASKS: &'static str = "segmentations";
    /// The truth's file name.
    pub const TRUTH: &'static str = "truth.json";

    /// The case folder at `root`.
    #[must_use]
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self(root.into())
    }

    /// The folder itself.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.0
    }

    /// Where the CT is written (`ct.nii.gz`).
    #[must_use]
    pub fn ct(&self) -> PathBuf {
        self.0.join(Self::CT)
    }

    /// The CT that is there: `ct.nii.gz`, else `ct.nii`.
    #[must_use]
    pub fn ct_found(&self) -> Option<PathBuf> {
        [Self::CT, Self::CT_UNCOMPRESSED]
            .iter()
            .map(|name| self.0.join(name))
            .find(|path| path.is_file())
    }

    /// The masks' folder.
    #[must_use]
    pub fn masks(&self) -> PathBuf {
        self.0.join(Self::MASKS)
    }

    /// The truth file.
    #[must_use]
    pub fn truth(&self) -> PathBuf {
        self.0.join(Self::TRUTH)
    }
}

/// Errors reading case files; each names the file and, for JSONL, the line.
#[derive(Debug, thiserror::Error)]
pub enum CasesError {
    /// The file system refused.
    #[error("cannot read: {source} ({})", path.display())]
    Io {
        /// File or folder.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A prediction line is not a valid record.
    #[error("line {line} is not a valid record: {source} ({})", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What serde said.
        source: serde_json::Error,
    },
    /// A truth line (or `truth.json`) is not a truth Keyslice can score against.
    #[error("line {line} is not a valid record: {source} ({})", path.display())]
    Truth {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        source: TruthError,
    },
    /// A case folder has neither `truth.json` nor lesion masks.
    #[error("case folder has neither truth.json nor segmentations/ with ct.nii.gz ({})", path.display())]
    NoTruth {
        /// The case folder.
        path: PathBuf,
    },
    /// A mask or CT could not be read.
    #[error(transparent)]
    Nifti(#[from] NiftiError),
}

impl CasesError {
    /// What a user can do about it.
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            Self::Io { .. } => "check the path",
            Self::Line { .. } | Self::Truth { .. } => {
                "each line must be one JSON object with at least \"case_id\" (see docs/manual.md)"
            }
            Self::NoTruth { .. } => {
                "give a truth JSONL file, or folders in the phantom/AbdomenAtlas layout"
            }
            Self::Nifti(error) => error.hint(),
        }
    }
}

/// A key slice given as a number or as an object.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum KeySliceField {
    /// `57`.
    Index(u32),
    /// `{"index": 57, "z_mm": …}`.
    Full(KeySlice),
}

/// One prediction line.
#[derive(Clone, Debug, Deserialize)]
pub struct PredictionRecord {
    /// Case identifier.
    pub case_id: String,
    /// Report text.
    #[serde(default)]
    pub report: Option<String>,
    /// Findings (instead of, or besides, the text).
    #[serde(default)]
    pub findings: Option<Findings>,
    /// Key slice.
    #[serde(default)]
    pub key_slice: Option<KeySliceField>,
    /// The verifier's description of the key slice.
    #[serde(default)]
    pub local_description: Option<String>,
}

impl PredictionRecord {
    /// The predicted findings (given, or read from the report).
    #[must_use]
    pub fn predicted_findings(&self) -> Findings {
        findings_or_report(self.findings.as_ref(), self.report.as_deref())
    }

    /// The key slice index: given, else the one the findings name.
    #[must_use]
    pub fn key_slice_index(&self, findings: &Findings) -> Option<u32> {
        match &self.key_slice {
            Some(KeySliceField::Index(index)) => Some(*index),
            Some(KeySliceField::Full(key)) => Some(key.index),
            None => findings.key_slice.as_ref().map(|key| key.index),
        }
    }
}

pub use keyslice_core::scoring::truth::{TruthError, TruthRecord};

/// Given findings win; otherwise the report is read; with neither, nothing is stated.
fn findings_or_report(findings: Option<&Findings>, report: Option<&str>) -> Findings {
    findings.cloned().unwrap_or_else(|| {
        report
            .map(|text| read_report(text).findings)
            .unwrap_or_default()
    })
}

fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>, CasesError> {
    let text = std::fs::read_to_string(path).map_err(|source| CasesError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(number, line)| {
            serde_json::from_str(line).map_err(|source| CasesError::Line {
                path: path.to_path_buf(),
                line: number + 1,
                source,
            })
        })
        .collect()
}

/// Reads a prediction JSONL file.
pub fn read_predictions(path: &Path) -> Result<Vec<PredictionRecord>, CasesError> {
    read_jsonl(path)
}

/// Reads truth from a JSONL file or a folder of case folders (sorted by name).
pub fn read_truth(path: &Path) -> Result<Vec<TruthRecord>, CasesError> {
    if path.is_file() {
        let text = std::fs::read_to_string(path).map_err(|source| CasesError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        return text
            .lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .map(|(number, line)| {
                TruthRecord::from_json(line).map_err(|source| CasesError::Truth {
                    path: path.to_path_buf(),
                    line: number + 1,
                    source,
                })
            })
            .collect();
    }
    let entries = std::fs::read_dir(path).map_err(|source| CasesError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut folders: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|entry| entry.is_dir())
        .collect();
    folders.sort();
    folders
        .iter()
        .map(|folder| truth_from_folder(folder))
        .collect()
}

fn truth_from_folder(folder: &Path) -> Result<TruthRecord, CasesError> {
    let case_id = folder
        .file_name()
        .map(|name| name.to_string_lossy().to_string())
        .unwrap_or_default();
    let case = CaseFolder::new(folder);
    let truth_file = case.truth();
    if truth_file.is_file() {
        let text = std::fs::read_to_string(&truth_file).map_err(|source| CasesError::Io {
            path: truth_file.clone(),
            source,
        })?;
        // The folder names the case when the file does not: an empty truth names it too.
        let named = |error: TruthError| match error {
            TruthError::Empty(id) if id.is_empty() => TruthError::Empty(case_id.clone()),
            other => other,
        };
        let mut record = TruthRecord::from_json(&text).map_err(|error| CasesError::Truth {
            path: truth_file.clone(),
            line: 1,
            source: named(error),
        })?;
        if record.case_id.is_empty() {
            record.case_id = case_id;
        }
        return Ok(record);
    }
    let ct = case.ct_found();
    let segmentations = case.masks();
    match ct {
        Some(ct) if segmentations.is_dir() => truth_from_masks(case_id, &ct, &segmentations),
        _ => Err(CasesError::NoTruth {
            path: folder.to_path_buf(),
        }),
    }
}

fn first_existing(folder: &Path, names: &[&str]) -> Option<PathBuf> {
    names
        .iter()
        .flat_map(|name| [format!("{name}.nii.gz"), format!("{name}.nii")])
        .map(|name| folder.join(name))
        .find(|path| path.is_file())
}

fn load_onto(path: &Path, dims: [usize; 3], grid: &Affine) -> Result<LabelVolume, CasesError> {
    let mask = read_label_nifti(path)?;
    resample_nearest(&mask, dims, grid).ok_or_else(|| {
        CasesError::Nifti(NiftiError::Header {
            path: path.to_path_buf(),
            detail: "the mask's voxel-to-patient transform is singular".into(),
        })
    })
}

const LIVER_LESION: &[&str] = &["liver_lesion", "liver_tumor"];
const PANCREAS_LESION: &[&str] = &["pancreatic_lesion", "pancreas_lesion", "pancreatic_tumor"];
const KIDNEY_LESION: &[&str] = &["kidney_lesion", "kidney_tumor"];

/// Truth derived from AbdomenAtlas lesion masks on the CT grid: presence per organ, one
/// extent per run of slices, and the key slice = the axial slice with the most lesion voxels
/// (all lesion masks together; the first such slice on a tie).
fn truth_from_masks(
    case_id: String,
    ct: &Path,
    segmentations: &Path,
) -> Result<TruthRecord, CasesError> {
    let (dims, grid) = read_nifti_grid(ct)?;
    let plane = dims[0] * dims[1];
    let mut findings = Findings::default();
    for organ in Organ::ALL {
        findings.organ_mut(organ).tumor = TumorPresence::No;
    }
    let mut extents = Vec::new();
    // Lesion voxels per slice, all lesion masks together: the key slice is where the most
    // tumor is visible (the same rule as the phantoms' truth and the viewer's reference).
    let mut total = vec![0usize; dims[2]];
    let mut add_lesion_areas = |per_slice: &[usize]| {
        for (sum, area) in total.iter_mut().zip(per_slice) {
            *sum += area;
        }
    };
    for (organ, names) in [
        (Organ::Liver, LIVER_LESION),
        (Organ::Pancreas, PANCREAS_LESION),
    ] {
        if let Some(path) = first_existing(segmentations, names) {
            let per_slice = load_onto(&path, dims, &grid)?.foreground_per_slice();
            add_lesion_areas(&per_slice);
            extents.extend(runs(&per_slice, organ));
        }
    }
    if let Some(path) = first_existing(segmentations, KIDNEY_LESION) {
        // One mask holds both kidneys' lesions: each voxel goes to the kidney whose mask it
        // lies in, else to the side of the grid's middle it lies on (+x is the patient's
        // left), so bilateral tumors on the same slices are both found.
        let lesions = load_onto(&path, dims, &grid)?;
        add_lesion_areas(&lesions.foreground_per_slice());
        let kidney = |name: &str| {
            first_existing(segmentations, &[name])
                .map(|path| load_onto(&path, dims, &grid))
                .transpose()
        };
        let (left, right) = (kidney("kidney_left")?, kidney("kidney_right")?);
        let in_mask = |kidney: &Option<LabelVolume>, index: usize| {
            kidney
                .as_ref()
                .is_some_and(|kidney| kidney.labels[index] != 0)
        };
        let middle_x = grid.apply([(dims[0] as f64 - 1.0) / 2.0, 0.0, 0.0])[0];
        let mut left_per_slice = vec![0usize; dims[2]];
        let mut right_per_slice = vec![0usize; dims[2]];
        for (index, &label) in lesions.labels.iter().enumerate() {
            if label == 0 {
                continue;
            }
            let is_left = match (in_mask(&left, index), in_mask(&right, index)) {
                (true, false) => true,
                (false, true) => false,
                _ => {
                    let i = index % dims[0];
                    let j = (index % plane) / dims[0];
                    let k = index / plane;
                    grid.apply([i as f64, j as f64, k as f64])[0] >= middle_x
                }
            };
            let per_slice = if is_left {
                &mut left_per_slice
            } else {
                &mut right_per_slice
            };
            per_slice[index / plane] += 1;
        }
        extents.extend(runs(&left_per_slice, Organ::KidneyLeft));
        extents.extend(runs(&right_per_slice, Organ::KidneyRight));
    }
    for extent in &extents {
        findings.organ_mut(extent.organ).tumor = TumorPresence::Yes;
    }
    findings.key_slice = first_largest(&total)
        .map(|slice| slice as u32)
        .map(|index| KeySlice {
            index,
            z_mm: Some(grid.apply([0.0, 0.0, f64::from(index)])[2]),
            sop_instance_uid: None,
            span: None,
        });
    Ok(TruthRecord {
        case_id,
        findings: Some(findings),
        report: None,
        lesion_extents: extents,
        slice_size: u32::try_from(dims[0])
            .ok()
            .zip(u32::try_from(dims[1]).ok())
            .map(|(columns, rows)| [columns, rows]),
        slices: u32::try_from(dims[2]).ok(),
    })
}

/// Runs of consecutive slices with foreground, each with its largest-area slice.
fn runs(per_slice: &[usize], organ: Organ) -> Vec<LesionExtent> {
    let mut extents = Vec::new();
    let mut start = None;
    for (slice, &area) in per_slice.iter().chain(std::iter::once(&0)).enumerate() {
        match (area > 0, start) {
            (true, None) => start = Some(slice),
            (false, Some(first)) => {
                let largest = (first..slice)
                    .max_by_key(|&k| (per_slice[k], std::cmp::Reverse(k)))
                    .unwrap_or(first);
                extents.push(LesionExtent {
                    organ,
                    first_slice: first as u32,
                    last_slice: (slice - 1) as u32,
                    largest_slice: largest as u32,
                });
                start = None;
            }
            _ => {}
        }
    }
    extents
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_truth_line_without_findings_or_report_is_refused_with_its_line() {
        let folder = tempfile::tempdir().expect("temp dir");
        let path = folder.path().join("truth.jsonl");
        std::fs::write(
            &path,
            "{\"case_id\":\"w\",\"report\":\"No tumor.\"}\n{\"case_id\":\"x\"}\n",
        )
        .expect("write");
        let error = read_truth(&path).expect_err("the second line has nothing to score against");
        assert!(
            matches!(
                &error,
                CasesError::Truth { line: 2, source: TruthError::Empty(case), .. } if case == "x"
            ),
            "{error:?}"
        );
    }

    use super::*;

    #[test]
    fn runs_split_at_empty_slices_and_find_the_largest() {
        let extents = runs(&[0, 2, 5, 5, 0, 0, 1, 0], Organ::Liver);
        assert_eq!(extents.len(), 2);
        assert_eq!(
            (
                extents[0].first_slice,
                extents[0].last_slice,
                extents[0].largest_slice
            ),
            (1, 3, 2)
        );
        assert_eq!(
            (
                extents[1].first_slice,
                extents[1].last_slice,
                extents[1].largest_slice
            ),
            (6, 6, 6)
        );
    }
}
