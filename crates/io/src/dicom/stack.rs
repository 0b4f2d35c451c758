//! Turns the images of one series into an ordered stack of slices with one geometry:
//! drops localizers, checks sizes and orientations, sorts by position along the slice normal
//! (never by file name or Instance Number), detects gantry tilt and irregular spacing.

use std::path::PathBuf;

use super::DicomError;
use super::header::FileHeader;
use keyslice_core::volume::geometry::{Vec3, cross, dot, norm, normalized, sub};

/// One slice to decode: which file and frame, and where it sits.
#[derive(Clone, Debug)]
pub(crate) struct SliceSource {
    /// Index into the series' file list.
    pub file: usize,
    /// 0-based frame inside that file.
    pub frame_index: u32,
    /// Image Position (Patient), LPS mm.
    pub position_lps_mm: Vec3,
    /// Position along the slice normal, mm.
    pub along_normal_mm: f64,
    pub rescale_slope: f64,
    pub rescale_intercept: f64,
}

/// An ordered, geometrically consistent stack.
#[derive(Clone, Debug)]
pub(crate) struct Stack {
    pub slices: Vec<SliceSource>,
    pub rows: u32,
    pub columns: u32,
    /// Unit directions of `i` (along a row), `j` (down a column) and `k` (the normal).
    pub directions: [Vec3; 3],
    /// Spacing along `i`, `j`, `k`, mm.
    pub spacing_mm: Vec3,
    pub warnings: Vec<String>,
}

/// Positions closer than this along the normal are "the same place".
const SAME_POSITION_MM: f64 = 0.01;

#[expect(
    clippy::too_many_lines,
    reason = "one ordered pass of checks, as the module doc lists them"
)]
pub(crate) fn build_stack(series_uid: &str, files: &[FileHeader]) -> Result<Stack, DicomError> {
    let mut warnings = Vec::new();
    let image_files: Vec<usize> = (0..files.len())
        .filter(|&index| files[index].has_pixel_data)
        .collect();
    let localizers: Vec<usize> = image_files
        .iter()
        .copied()
        .filter(|&index| files[index].is_localizer())
        .collect();
    let kept: Vec<usize> = if localizers.is_empty() || localizers.len() == image_files.len() {
        image_files
    } else {
        warnings.push(format!(
            "left out {} localizer image(s) of this series: {}",
            localizers.len(),
            name_list(localizers.iter().map(|&index| &files[index].path))
        ));
        image_files
            .into_iter()
            .filter(|index| !localizers.contains(index))
            .collect()
    };
    let Some(&first) = kept.first() else {
        return Err(DicomError::NoImages {
            path: files
                .first()
                .map(|file| file.path.clone())
                .unwrap_or_default(),
            non_dicom_files: 0,
            unreadable: 0,
        });
    };
    check_same_size(series_uid, files, &kept)?;
    check_same_subject(series_uid, files, &kept)?;
    let rows = files[first].rows;
    let columns = files[first].columns;

    // Every frame becomes a candidate slice.
    let mut candidates = Vec::new();
    for &file_index in &kept {
        for frame in &files[file_index].frames {
            candidates.push((file_index, frame));
        }
    }
    let single = candidates.len() == 1;
    let reference = candidates[0].1;
    let orientation = match reference.orientation {
        Some(orientation) => orientation,
        None if single => {
            warnings.push(
                "the image has no Image Orientation (Patient): assuming an axial slice".into(),
            );
            [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
        }
        None => {
            return Err(DicomError::InvalidField {
                path: files[candidates[0].0].path.clone(),
                field: "Image Orientation (Patient)",
                detail: "missing, so the slices cannot be ordered".into(),
            });
        }
    };
    let row_direction = normalized([orientation[0], orientation[1], orientation[2]]);
    let column_direction = normalized([orientation[3], orientation[4], orientation[5]]);
    let normal = normalized(cross(row_direction, column_direction));
    if norm(normal) < 0.5 {
        return Err(DicomError::InvalidField {
            path: files[candidates[0].0].path.clone(),
            field: "Image Orientation (Patient)",
            detail: format!("{orientation:?} does not describe two independent directions"),
        });
    }
    let mut slices = Vec::with_capacity(candidates.len());
    let mut odd_orientation = Vec::new();
    for &(file_index, frame) in &candidates {
        if let Some(other) = frame.orientation {
            let other_row = normalized([other[0], other[1], other[2]]);
            let other_column = normalized([other[3], other[4], other[5]]);
            if dot(other_row, row_direction) < 0.9999
                || dot(other_column, column_direction) < 0.9999
            {
                odd_orientation.push(files[file_index].path.clone());
                continue;
            }
        }
        let position = match frame.position_lps_mm {
            Some(position) => position,
            None if single => {
                warnings.push(
                    "the image has no Image Position (Patient): placing it at the origin".into(),
                );
                [0.0; 3]
            }
            None => {
                return Err(DicomError::InvalidField {
                    path: files[file_index].path.clone(),
                    field: "Image Position (Patient)",
                    detail: "missing, so the slices cannot be ordered".into(),
                });
            }
        };
        check_rescale(
            &files[file_index].path,
            frame.rescale_slope,
            frame.rescale_intercept,
        )?;
        slices.push(SliceSource {
            file: file_index,
            frame_index: frame.frame_index,
            position_lps_mm: position,
            along_normal_mm: dot(position, normal),
            rescale_slope: frame.rescale_slope,
            rescale_intercept: frame.rescale_intercept,
        });
    }
    if !odd_orientation.is_empty() {
        odd_orientation.insert(0, files[candidates[0].0].path.clone());
        return Err(DicomError::MixedOrientations {
            series_uid: series_uid.to_string(),
            files: odd_orientation,
        });
    }
    slices.sort_by(|a, b| {
        a.along_normal_mm
            .total_cmp(&b.along_normal_mm)
            .then(a.file.cmp(&b.file))
            .then(a.frame_index.cmp(&b.frame_index))
    });
    check_duplicates(series_uid, files, &slices)?;
    check_gantry_tilt(series_uid, files, &slices, normal)?;

    let gaps: Vec<f64> = slices
        .windows(2)
        .map(|pair| pair[1].along_normal_mm - pair[0].along_normal_mm)
        .collect();
    let slice_spacing_mm = if gaps.is_empty() {
        reference
            .slice_thickness_mm
            .filter(|thickness| *thickness > 0.0)
            .unwrap_or(1.0)
    } else {
        let spacing = regular_spacing(&gaps);
        warnings.extend(spacing_warnings(&slices, &gaps, spacing));
        spacing
    };
    let pixel_spacing = match reference.pixel_spacing_mm {
        Some(spacing) if spacing.iter().all(|value| *value > 0.0) => spacing,
        _ => {
            warnings.push("no valid Pixel Spacing: assuming 1 mm pixels".into());
            [1.0, 1.0]
        }
    };
    Ok(Stack {
        slices,
        rows,
        columns,
        directions: [row_direction, column_direction, normal],
        // Pixel Spacing lists the row spacing (along j) first, then the column spacing (along i).
        spacing_mm: [pixel_spacing[1], pixel_spacing[0], slice_spacing_mm],
        warnings,
    })
}

fn check_same_size(
    series_uid: &str,
    files: &[FileHeader],
    kept: &[usize],
) -> Result<(), DicomError> {
    let first = &files[kept[0]];
    let odd: Vec<&FileHeader> = kept
        .iter()
        .map(|&index| &files[index])
        .filter(|file| file.rows != first.rows || file.columns != first.columns)
        .collect();
    if odd.is_empty() {
        return Ok(());
    }
    let mut sizes = vec![format!("{}×{}", first.columns, first.rows)];
    for file in &odd {
        let size = format!("{}×{}", file.columns, file.rows);
        if !sizes.contains(&size) {
            sizes.push(size);
        }
    }
    let mut named = vec![first.path.clone()];
    named.extend(odd.iter().map(|file| file.path.clone()));
    Err(DicomError::MixedImageSizes {
        series_uid: series_uid.to_string(),
        sizes: sizes.join(", "),
        files: named,
    })
}

/// The largest magnitude a rescaled voxel may reach: far past any CT value (the densest
/// metal is some tens of thousands of HU), far below where `f32` overflows.
const MAX_RESCALED_MAGNITUDE: f64 = 1.0e9;

/// Refuses a Rescale Slope or Intercept that is not finite, or that would take a 16-bit
/// stored value past [`MAX_RESCALED_MAGNITUDE`] (a damaged header: `1e38` makes every voxel
/// infinite).
fn check_rescale(path: &std::path::Path, slope: f64, intercept: f64) -> Result<(), DicomError> {
    let reach = slope.abs() * 65_536.0 + intercept.abs();
    if slope.is_finite() && intercept.is_finite() && reach <= MAX_RESCALED_MAGNITUDE {
        return Ok(());
    }
    Err(DicomError::InvalidField {
        path: path.to_path_buf(),
        field: "Rescale Slope (0028,1053) / Rescale Intercept (0028,1052)",
        detail: format!(
            "{} / {}, which would put voxels beyond ±{MAX_RESCALED_MAGNITUDE:e} (no CT holds such values: the header is damaged)",
            readable(slope),
            readable(intercept)
        ),
    })
}

/// A number as people write it: `1e38` rather than thirty-nine digits.
fn readable(value: f64) -> String {
    if value.abs() >= 1e6 {
        format!("{value:e}")
    } else {
        format!("{value}")
    }
}

/// One attribute of a file's header.
type FieldOf = fn(&FileHeader) -> &str;

/// Refuses slices that disagree with the first on Patient ID, Study Instance UID or Frame of
/// Reference UID: a series that mixes them is never made into one volume.
fn check_same_subject(
    series_uid: &str,
    files: &[FileHeader],
    kept: &[usize],
) -> Result<(), DicomError> {
    let first = &files[kept[0]];
    let fields: [(&'static str, FieldOf); 3] = [
        ("Patient ID", |file| &file.patient_id),
        ("Study Instance UID", |file| &file.study_uid),
        ("Frame of Reference UID", |file| {
            &file.frame_of_reference_uid
        }),
    ];
    for (field, value_of) in fields {
        let odd: Vec<&FileHeader> = kept
            .iter()
            .map(|&index| &files[index])
            .filter(|file| value_of(file) != value_of(first))
            .collect();
        if odd.is_empty() {
            continue;
        }
        let mut values = vec![value_of(first)];
        for file in &odd {
            if !values.contains(&value_of(file)) {
                values.push(value_of(file));
            }
        }
        let values: Vec<String> = values
            .iter()
            .map(|value| {
                if value.is_empty() {
                    "none".to_string()
                } else {
                    format!("`{}`", keyslice_core::text::shown_short(value, 64))
                }
            })
            .collect();
        let mut named = vec![first.path.clone()];
        named.extend(odd.iter().map(|file| file.path.clone()));
        return Err(DicomError::MixedSubjects {
            series_uid: series_uid.to_string(),
            field,
            values: values.join(", "),
            files: named,
        });
    }
    Ok(())
}

fn check_duplicates(
    series_uid: &str,
    files: &[FileHeader],
    slices: &[SliceSource],
) -> Result<(), DicomError> {
    for pair in slices.windows(2) {
        if (pair[1].along_normal_mm - pair[0].along_normal_mm).abs() < SAME_POSITION_MM {
            let same: Vec<PathBuf> = slices
                .iter()
                .filter(|slice| {
                    (slice.along_normal_mm - pair[0].along_normal_mm).abs() < SAME_POSITION_MM
                })
                .map(|slice| files[slice.file].path.clone())
                .collect();
            return Err(DicomError::DuplicatePositions {
                series_uid: series_uid.to_string(),
                position_mm: pair[0].along_normal_mm,
                files: same,
            });
        }
    }
    Ok(())
}

fn check_gantry_tilt(
    series_uid: &str,
    files: &[FileHeader],
    slices: &[SliceSource],
    normal: Vec3,
) -> Result<(), DicomError> {
    let (Some(first), Some(last)) = (slices.first(), slices.last()) else {
        return Ok(());
    };
    let travel = sub(last.position_lps_mm, first.position_lps_mm);
    let along = dot(travel, normal);
    let sideways = norm(sub(travel, normal.map(|value| value * along)));
    if along.abs() < SAME_POSITION_MM {
        return Ok(());
    }
    let angle_degrees = sideways.atan2(along.abs()).to_degrees();
    if sideways > 0.1 && angle_degrees > 0.1 {
        return Err(DicomError::GantryTilt {
            series_uid: series_uid.to_string(),
            angle_degrees,
            files: vec![
                files[first.file].path.clone(),
                files[last.file].path.clone(),
            ],
        });
    }
    Ok(())
}

/// The slice spacing of a stack from the gaps between neighbours: when every gap is a whole
/// multiple of the smallest (slices missing from a regular series), the mean of the gaps of
/// one step; otherwise the median gap.
pub(crate) fn regular_spacing(gaps: &[f64]) -> f64 {
    let smallest = gaps.iter().copied().fold(f64::INFINITY, f64::min);
    if smallest > SAME_POSITION_MM {
        let steps: Vec<f64> = gaps.iter().map(|gap| gap / smallest).collect();
        if steps.iter().all(|step| (step - step.round()).abs() < 0.02) {
            let single: Vec<f64> = gaps
                .iter()
                .zip(&steps)
                .filter(|(_, step)| step.round() < 1.5)
                .map(|(gap, _)| *gap)
                .collect();
            return single.iter().sum::<f64>() / single.len() as f64;
        }
    }
    median(gaps)
}

/// Median of a non-empty list.
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) {
        f64::midpoint(sorted[middle - 1], sorted[middle])
    } else {
        sorted[middle]
    }
}

/// One warning per irregular gap (at most five, then a count), naming both slices.
fn spacing_warnings(slices: &[SliceSource], gaps: &[f64], spacing: f64) -> Vec<String> {
    let tolerance = (spacing * 0.01).max(0.01);
    let irregular: Vec<usize> = (0..gaps.len())
        .filter(|&index| (gaps[index] - spacing).abs() > tolerance)
        .collect();
    let mut warnings: Vec<String> = irregular
        .iter()
        .take(5)
        .map(|&index| {
            let gap = gaps[index];
            let missing = (gap / spacing).round() as i64 - 1;
            let what = if missing >= 1 {
                format!("; about {missing} slice(s) missing there")
            } else {
                String::new()
            };
            format!(
                "irregular slice spacing: {gap:.2} mm between slice {k0} (at {p0:.2} mm) and slice {k1} (at {p1:.2} mm), {spacing:.2} mm elsewhere{what}; slices keep their own positions, distances across the gap are approximate",
                k0 = index,
                k1 = index + 1,
                p0 = slices[index].along_normal_mm,
                p1 = slices[index + 1].along_normal_mm,
            )
        })
        .collect();
    if irregular.len() > 5 {
        warnings.push(format!(
            "{} more irregular slice gaps not listed",
            irregular.len() - 5
        ));
    }
    warnings
}

/// "a, b, c and 4 more" from file names.
pub(crate) fn name_list<'a>(paths: impl Iterator<Item = &'a PathBuf>) -> String {
    let paths: Vec<&PathBuf> = paths.collect();
    let mut shown: Vec<String> = paths
        .iter()
        .take(3)
        .map(|path| path.display().to_string())
        .collect();
    if paths.len() > 3 {
        shown.push(format!("and {} more", paths.len() - 3));
    }
    shown.join(", ")
}

#[cfg(test)]
#[expect(clippy::float_cmp, reason = "spacings here are exact binary fractions")]
mod tests {
    use super::*;

    #[test]
    fn missing_slices_do_not_change_the_spacing() {
        assert_eq!(regular_spacing(&[2.5, 5.0]), 2.5);
        assert_eq!(regular_spacing(&[1.25, 1.25, 3.75, 1.25]), 1.25);
    }

    #[test]
    fn irregular_gaps_fall_back_to_the_median() {
        assert_eq!(regular_spacing(&[1.0, 1.5, 1.5]), 1.5);
    }
}
