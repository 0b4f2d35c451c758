//! Whether a CT looks like the phantoms keyslice-tiny was trained on. The model has seen
//! nothing else, so on any other CT its report means nothing however confident it sounds.
//!
//! A few figures are measured on the CT as the model reads it (the finder's grid and the
//! organ network's masks) and on its native slices (the noise): the body's size and outline,
//! what share of it is fat, air and bone, the soft-tissue level, each organ's volume and
//! attenuation, the liver's texture, the noise. [`Domain`] holds the range of each figure
//! over a calibration set of phantoms (`keyslice train --stage domain`), widened by a margin;
//! a CT with any figure outside its range is out of the model's domain, and the figures that
//! are outside say why.

use serde::{Deserialize, Serialize};

use keyslice_core::volume::{Volume, Voxels};

use super::decode::FoundLesion;
use super::grid::ModelGrid;

/// A figure: its key in `config.json`, how it is named to a user, and its unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Feature {
    /// Key in `config.json`.
    pub key: &'static str,
    /// How a message names it.
    pub label: &'static str,
    /// How its values are written.
    pub unit: Unit,
}

/// How a figure's values are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Millimetres.
    Mm,
    /// A share, written as a percentage.
    Share,
    /// A plain ratio.
    Ratio,
    /// Hounsfield units.
    Hu,
    /// Millilitres.
    Ml,
}

impl Unit {
    fn write(self, value: f64) -> String {
        match self {
            Self::Mm => format!("{value:.0} mm"),
            Self::Share => format!("{:.1} %", value * 100.0),
            Self::Ratio => format!("{value:.2}"),
            Self::Hu => format!("{value:.0} HU"),
            Self::Ml => format!("{value:.0} ml"),
        }
    }
}

/// The figures, in the order [`measure`] returns them.
pub const FEATURES: [Feature; 15] = [
    Feature {
        key: "scan_length_mm",
        label: "scan length",
        unit: Unit::Mm,
    },
    Feature {
        key: "body_width_mm",
        label: "body width",
        unit: Unit::Mm,
    },
    Feature {
        key: "body_depth_ratio",
        label: "body depth to width",
        unit: Unit::Ratio,
    },
    Feature {
        key: "outline_change",
        label: "change of the body's cross-section along the scan",
        unit: Unit::Share,
    },
    Feature {
        key: "fat_share",
        label: "fat share of the body",
        unit: Unit::Share,
    },
    Feature {
        key: "air_share",
        label: "air (lung, gas) share inside the body",
        unit: Unit::Share,
    },
    Feature {
        key: "bone_share",
        label: "bone and contrast share of the body",
        unit: Unit::Share,
    },
    Feature {
        key: "soft_tissue_hu",
        label: "soft-tissue level",
        unit: Unit::Hu,
    },
    Feature {
        key: "liver_ml",
        label: "liver volume",
        unit: Unit::Ml,
    },
    Feature {
        key: "kidneys_ml",
        label: "kidney volume",
        unit: Unit::Ml,
    },
    Feature {
        key: "pancreas_ml",
        label: "pancreas volume",
        unit: Unit::Ml,
    },
    Feature {
        key: "liver_hu",
        label: "liver attenuation",
        unit: Unit::Hu,
    },
    Feature {
        key: "kidney_hu",
        label: "kidney attenuation",
        unit: Unit::Hu,
    },
    Feature {
        key: "liver_texture_hu",
        label: "liver texture (interquartile range)",
        unit: Unit::Hu,
    },
    Feature {
        key: "noise_hu",
        label: "image noise",
        unit: Unit::Hu,
    },
];

/// Below this a voxel is air, not body.
const BODY_HU: f32 = -400.0;

/// The calibrated range of one figure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FeatureRange {
    /// [`Feature::key`].
    pub feature: String,
    /// Lowest value of the calibration phantoms.
    pub min: f64,
    /// Highest value of the calibration phantoms.
    pub max: f64,
    /// Values from `min - margin` to `max + margin` are familiar.
    pub margin: f64,
}

/// What the model knows: the range of each figure over its calibration phantoms.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Domain {
    /// How many phantoms the ranges come from.
    pub cases: usize,
    /// One range per figure of [`FEATURES`] (matched by key; a figure without one is not
    /// checked).
    pub ranges: Vec<FeatureRange>,
}

/// The share of a calibration range added on each side: the phantoms are drawn from bounded
/// distributions, so their extremes are near the bounds, and a fifth of the range keeps
/// held-out phantoms (and the same phantoms on a finer grid) inside.
pub const MARGIN_SHARE: f64 = 0.2;

impl Domain {
    /// The ranges of `samples` (each [`measure`]'s figures for one calibration phantom).
    #[must_use]
    pub fn calibrated(samples: &[Vec<f64>]) -> Self {
        let ranges = FEATURES
            .iter()
            .enumerate()
            .map(|(at, feature)| {
                let values = samples.iter().filter_map(|sample| sample.get(at).copied());
                let (min, max) = values
                    .filter(|value| value.is_finite())
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), value| {
                        (low.min(value), high.max(value))
                    });
                FeatureRange {
                    feature: feature.key.to_string(),
                    min,
                    max,
                    margin: (max - min) * MARGIN_SHARE,
                }
            })
            .filter(|range| range.min.is_finite() && range.max.is_finite())
            .collect();
        Self {
            cases: samples.len(),
            ranges,
        }
    }

    /// Why figures `values` (from [`measure`]) are outside the domain, one phrase per figure
    /// out of range ("fat share of the body 2.0 % (training phantoms 10.1 %–24.3 %)"); empty
    /// when the CT looks like a phantom.
    #[must_use]
    pub fn unfamiliar(&self, values: &[f64]) -> Vec<String> {
        FEATURES
            .iter()
            .zip(values)
            .filter_map(|(feature, &value)| {
                let range = self
                    .ranges
                    .iter()
                    .find(|range| range.feature == feature.key)?;
                let familiar =
                    value >= range.min - range.margin && value <= range.max + range.margin;
                (!familiar).then(|| {
                    format!(
                        "{} {} (training phantoms {}–{})",
                        feature.label,
                        if value.is_finite() {
                            feature.unit.write(value)
                        } else {
                            "not measurable".into()
                        },
                        feature.unit.write(range.min),
                        feature.unit.write(range.max)
                    )
                })
            })
            .collect()
    }
}

/// The figures of [`FEATURES`] for `volume`, read onto `grid` (the finder's), with the organ
/// masks the organ network drew there (`[slab * 4 + organ][pixel]`; liver, pancreas, left
/// and right kidney) and the `lesions` found on it, which the organs' attenuation and
/// texture leave out (with a pixel around them): a large tumor would otherwise move its
/// organ's figures out of range on a phantom. A figure that cannot be measured (no body, no
/// organ) is NaN, which no range holds.
#[must_use]
pub fn measure(
    volume: &Volume,
    grid: &ModelGrid,
    masks: &[Vec<bool>],
    lesions: &[FoundLesion],
) -> Vec<f64> {
    let n = grid.spec.size;
    let plane = n * n;
    let pixel_mm = grid.spec.pixel_mm;
    let mut widths = Vec::new();
    let mut ratios = Vec::new();
    let mut areas = Vec::new();
    let (mut body, mut fat, mut bone, mut air_inside) = (0usize, 0usize, 0usize, 0usize);
    let mut inside_rows = 0usize;
    let mut soft = Vec::new();
    for slab in 0..grid.slabs {
        let hu = &grid.hu[slab * plane..(slab + 1) * plane];
        let (mut first_column, mut last_column) = (n, 0);
        let (mut first_row, mut last_row) = (n, 0);
        let mut area = 0usize;
        for row in 0..n {
            let line = &hu[row * n..(row + 1) * n];
            let Some(left) = line.iter().position(|&v| v > BODY_HU) else {
                continue;
            };
            let right = line.iter().rposition(|&v| v > BODY_HU).unwrap_or(left);
            first_column = first_column.min(left);
            last_column = last_column.max(right);
            first_row = first_row.min(row);
            last_row = last_row.max(row);
            for &value in &line[left..=right] {
                inside_rows += 1;
                if value <= BODY_HU {
                    air_inside += 1;
                    continue;
                }
                area += 1;
                body += 1;
                if (-250.0..-40.0).contains(&value) {
                    fat += 1;
                } else if value >= 300.0 {
                    bone += 1;
                } else if value >= -40.0 {
                    soft.push(value);
                }
            }
        }
        if area > 0 {
            let width = (last_column - first_column + 1) as f64 * pixel_mm;
            let depth = (last_row - first_row + 1) as f64 * pixel_mm;
            widths.push(width);
            ratios.push(depth / width);
            areas.push(area as f64);
        }
    }
    let share = |count: usize, of: usize| {
        if of == 0 {
            f64::NAN
        } else {
            count as f64 / of as f64
        }
    };
    let outline_change = match (
        areas.iter().copied().reduce(f64::min),
        areas.iter().copied().reduce(f64::max),
        median(&mut areas.clone()),
    ) {
        (Some(low), Some(high), Some(middle)) if middle > 0.0 => (high - low) / middle,
        _ => f64::NAN,
    };
    // In the order of FEATURES: the body's figures, the organs', the noise.
    let mut figures = vec![
        grid.slabs as f64 * grid.spec.slab_mm,
        median(&mut widths).unwrap_or(f64::NAN),
        median(&mut ratios).unwrap_or(f64::NAN),
        outline_change,
        share(fat, body),
        share(air_inside, inside_rows),
        share(bone, body),
        f64::from(quantile(&mut soft, 0.5)),
    ];
    figures.extend(organ_figures(grid, masks, &lesion_voxels(grid, lesions)));
    figures.push(noise_hu(volume));
    figures
}

/// The voxels of `lesions` on `grid` and their in-plane neighbours, `[slab * plane + pixel]`.
fn lesion_voxels(grid: &ModelGrid, lesions: &[FoundLesion]) -> Vec<bool> {
    let n = grid.spec.size;
    let plane = n * n;
    let mut inside = vec![false; grid.slabs * plane];
    for &(slab, pixel) in lesions.iter().flat_map(|lesion| &lesion.voxels) {
        let (row, column) = (pixel / n, pixel % n);
        for r in row.saturating_sub(1)..=(row + 1).min(n - 1) {
            for c in column.saturating_sub(1)..=(column + 1).min(n - 1) {
                if let Some(voxel) = inside.get_mut(slab * plane + r * n + c) {
                    *voxel = true;
                }
            }
        }
    }
    inside
}

/// Liver, kidney and pancreas volume (ml), the liver's and kidneys' median HU, and the
/// liver's interquartile range, from the organ masks on `grid`; the volumes count every
/// mask voxel, the attenuation and texture only those outside `lesion` voxels.
fn organ_figures(grid: &ModelGrid, masks: &[Vec<bool>], lesion: &[bool]) -> [f64; 6] {
    let plane = grid.spec.size * grid.spec.size;
    let voxel_ml = grid.spec.pixel_mm * grid.spec.pixel_mm * grid.spec.slab_mm / 1000.0;
    let voxels = |organs: &[usize]| -> usize {
        (0..grid.slabs)
            .flat_map(|slab| organs.iter().map(move |&organ| slab * 4 + organ))
            .filter_map(|at| masks.get(at))
            .map(|mask| mask.iter().filter(|inside| **inside).count())
            .sum()
    };
    let organ_values = |organs: &[usize]| -> Vec<f32> {
        let mut values = Vec::new();
        for slab in 0..grid.slabs {
            for &organ in organs {
                let Some(mask) = masks.get(slab * 4 + organ) else {
                    continue;
                };
                let hu = &grid.hu[slab * plane..(slab + 1) * plane];
                let lesion = &lesion[slab * plane..(slab + 1) * plane];
                values.extend(
                    mask.iter()
                        .zip(hu)
                        .zip(lesion)
                        .filter(|((inside, _), in_lesion)| **inside && !**in_lesion)
                        .map(|((_, value), _)| *value),
                );
            }
        }
        values
    };
    let mut liver = organ_values(&[0]);
    let mut kidneys = organ_values(&[2, 3]);
    let liver_texture = quantile(&mut liver, 0.75) - quantile(&mut liver, 0.25);
    [
        voxels(&[0]) as f64 * voxel_ml,
        voxels(&[2, 3]) as f64 * voxel_ml,
        voxels(&[1]) as f64 * voxel_ml,
        f64::from(quantile(&mut liver, 0.5)),
        f64::from(quantile(&mut kidneys, 0.5)),
        f64::from(liver_texture),
    ]
}

/// The median of `values` (reordered); `None` when empty.
fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let middle = values.len() / 2;
    values.select_nth_unstable_by(middle, f64::total_cmp);
    Some(values[middle])
}

/// The `q` quantile of `values` (reordered); NaN when empty.
fn quantile(values: &mut [f32], q: f64) -> f32 {
    if values.is_empty() {
        return f32::NAN;
    }
    let at = ((values.len() - 1) as f64 * q).round() as usize;
    values.select_nth_unstable_by(at, f32::total_cmp);
    values[at]
}

/// Slices the noise is measured on.
const NOISE_SLICES: usize = 5;

/// The noise of the CT's own voxels (HU, one standard deviation): from the differences of
/// horizontally neighbouring soft-tissue voxels on a few slices spread over the middle of
/// the scan, by their median absolute deviation (which edges barely move). A noise-free
/// rendering gives 0, a smooth (correlated) noise a value below its true level.
fn noise_hu(volume: &Volume) -> f64 {
    let [columns, rows, slices] = volume.dims();
    if columns < 2 || rows == 0 || slices == 0 {
        return f64::NAN;
    }
    let plane = columns * rows;
    let mut differences = Vec::new();
    for step in 1..=NOISE_SLICES {
        let slice = slices * (step + 1) / (NOISE_SLICES + 3);
        let value = |at: usize| -> f32 {
            match volume.voxels() {
                Voxels::I16(values) => f32::from(values[at]),
                Voxels::F32(values) => values[at],
            }
        };
        for row in 0..rows {
            let start = slice * plane + row * columns;
            for column in 0..columns - 1 {
                let (a, b) = (value(start + column), value(start + column + 1));
                if (-40.0..300.0).contains(&a) && (-40.0..300.0).contains(&b) {
                    differences.push(f64::from(b - a).abs());
                }
            }
        }
    }
    // The differences of two independent noisy voxels have √2 times the noise; their
    // median absolute value is 0.6745 of their standard deviation.
    median(&mut differences).map_or(f64::NAN, |middle| middle / 0.6745 / 2f64.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(fat: f64) -> Vec<f64> {
        let mut values = vec![1.0; FEATURES.len()];
        values[4] = fat;
        values
    }

    #[test]
    fn a_figure_outside_the_widened_range_is_named_with_the_range() {
        let domain = Domain::calibrated(&[sample(0.10), sample(0.20)]);
        assert_eq!(domain.cases, 2);
        // 0.10–0.20 widened by a fifth: 0.08–0.22.
        assert!(domain.unfamiliar(&sample(0.085)).is_empty());
        assert!(domain.unfamiliar(&sample(0.215)).is_empty());
        let why = domain.unfamiliar(&sample(0.02));
        assert_eq!(
            why,
            ["fat share of the body 2.0 % (training phantoms 10.0 %–20.0 %)"]
        );
        let nan = domain.unfamiliar(&sample(f64::NAN));
        assert_eq!(
            nan,
            ["fat share of the body not measurable (training phantoms 10.0 %–20.0 %)"]
        );
    }
}
