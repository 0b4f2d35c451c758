//! From the network's per-pixel probabilities to findings: lesions are connected components
//! of each organ's lesion mask; size from the component's largest cross-section, attenuation
//! and location by the component's mean class probabilities; the key slice is the slab with
//! the most lesion pixels (with a finder: the slab of its strongest answer, see
//! `strongest_slab` in the parent module), the box the lesion pixels' extent on it.

use keyslice_core::findings::{
    Attenuation, Findings, KidneyPole, Lesion, LesionSize, LesionSpans, Location, Organ,
    PancreasPart, TumorPresence,
};
use keyslice_core::volume::label::first_largest;

/// Per-pixel probabilities of one or more slabs, channel-major per slab:
/// `probabilities[slab][channel][row * size + column]`.
pub struct Probabilities {
    /// Pixels per side.
    pub size: usize,
    /// Pixel spacing, mm.
    pub pixel_mm: f64,
    /// Slab thickness, mm.
    pub slab_mm: f64,
    /// `[slab][channel][pixel]`; an empty channel is all zeros (the finder's decoding leaves
    /// the lesion, attenuation and location channels of slabs without a lesion empty).
    pub values: Vec<Vec<Vec<f32>>>,
}

/// One lesion found: its voxels on the model grid and what they say.
#[derive(Clone, Debug, PartialEq)]
pub struct FoundLesion {
    /// Organ.
    pub organ: Organ,
    /// `(slab, pixel)` of every voxel.
    pub voxels: Vec<(usize, usize)>,
    /// The slab with the most of its voxels.
    pub largest_slab: usize,
    /// Its long and short axes on that slab.
    pub axes: SectionAxes,
    /// Findings-style description.
    pub lesion: Lesion,
}

/// When lesion pixels make a lesion: chosen per checkpoint (in its `config.json`) on
/// training-distribution cases, never on the held-out set.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DecodeRule {
    /// Threshold on lesion probability.
    pub threshold: f32,
    /// Components with fewer voxels are noise.
    pub min_voxels: usize,
    /// Lesion voxels on slabs up to this many apart join one lesion (1: only neighbouring
    /// slabs, the 6-connected components of earlier checkpoints).
    #[serde(default = "one")]
    pub link_slabs: usize,
    /// How far apart in-plane (pixels, in either direction) lesion voxels on different slabs
    /// may lie and still join (0: straight above one another).
    #[serde(default)]
    pub link_pixels: usize,
}

fn one() -> usize {
    1
}

impl Default for DecodeRule {
    fn default() -> Self {
        Self {
            threshold: 0.5,
            min_voxels: 2,
            link_slabs: 1,
            link_pixels: 0,
        }
    }
}

/// The decoding of a finder's grown lesions: every grown pixel is a lesion pixel, and the
/// regions grown on nearby slabs join one lesion. A finder answers slab by slab, and one
/// tumor's regions need not overlap from one slab to the next (a tumor's edge slab grows a
/// few pixels from a different cell), nor does every slab through it pass the threshold: with
/// only 6-connected components, one tumor is reported as several lesions.
pub const FINDER_RULE: DecodeRule = DecodeRule {
    threshold: 0.5,
    min_voxels: 1,
    link_slabs: 2,
    link_pixels: 2,
};

/// The liver segments, pancreas parts and kidney poles, in location-channel order.
fn location_class(index: usize) -> Location {
    match index {
        0..=6 => Location::LiverSegments(vec![index as u8 + 2]),
        7 => Location::Pancreas(PancreasPart::Head),
        8 => Location::Pancreas(PancreasPart::Body),
        9 => Location::Pancreas(PancreasPart::Tail),
        10 => Location::Kidney(KidneyPole::Upper),
        11 => Location::Kidney(KidneyPole::Mid),
        _ => Location::Kidney(KidneyPole::Lower),
    }
}

/// The location-channel index of a location (the training target); `None` for segment I or
/// several segments.
#[must_use]
pub fn location_index(location: &Location) -> Option<usize> {
    match location {
        Location::LiverSegments(segments) => match segments.as_slice() {
            [segment] if (2..=8).contains(segment) => Some(usize::from(*segment) - 2),
            _ => None,
        },
        Location::Pancreas(PancreasPart::Head | PancreasPart::Uncinate) => Some(7),
        Location::Pancreas(PancreasPart::Body) => Some(8),
        Location::Pancreas(PancreasPart::Tail) => Some(9),
        Location::Kidney(KidneyPole::Upper) => Some(10),
        Location::Kidney(KidneyPole::Mid) => Some(11),
        Location::Kidney(KidneyPole::Lower) => Some(12),
    }
}

fn organ_locations(organ: Organ) -> std::ops::Range<usize> {
    match organ {
        Organ::Liver => 0..7,
        Organ::Pancreas => 7..10,
        Organ::KidneyLeft | Organ::KidneyRight => 10..13,
    }
}

/// The attenuation-channel index of an attenuation (the training target).
#[must_use]
pub fn attenuation_index(attenuation: Attenuation) -> usize {
    match attenuation {
        Attenuation::Hypo | Attenuation::Mixed => 0,
        Attenuation::Iso => 1,
        Attenuation::Hyper => 2,
    }
}

const ATTENUATIONS: [Attenuation; 3] = [Attenuation::Hypo, Attenuation::Iso, Attenuation::Hyper];

/// Finds the lesions: 3D components of each organ's lesion mask, 4-connected in-plane and
/// joined across slabs as `rule` says (6-connected with the default rule).
#[must_use]
pub fn find_lesions(probabilities: &Probabilities, rule: DecodeRule) -> Vec<FoundLesion> {
    let size = probabilities.size;
    let plane = size * size;
    let slabs = probabilities.values.len();
    let mut found = Vec::new();
    for (organ_index, organ) in Organ::ALL.into_iter().enumerate() {
        let channel = super::net::LESION.start + organ_index;
        let on = |slab: usize, pixel: usize| {
            probabilities.values[slab][channel]
                .get(pixel)
                .is_some_and(|&p| p >= rule.threshold)
        };
        let mut seen = vec![false; slabs * plane];
        for slab in 0..slabs {
            for pixel in 0..plane {
                if seen[slab * plane + pixel] || !on(slab, pixel) {
                    continue;
                }
                let mut component = Vec::new();
                let mut stack = vec![(slab, pixel)];
                seen[slab * plane + pixel] = true;
                while let Some((s, p)) = stack.pop() {
                    component.push((s, p));
                    let (column, row) = (p % size, p / size);
                    let mut neighbours = Vec::with_capacity(4);
                    if column > 0 {
                        neighbours.push((s, p - 1));
                    }
                    if column + 1 < size {
                        neighbours.push((s, p + 1));
                    }
                    if row > 0 {
                        neighbours.push((s, p - size));
                    }
                    if row + 1 < size {
                        neighbours.push((s, p + size));
                    }
                    let reach = rule.link_pixels;
                    let columns = column.saturating_sub(reach)..=(column + reach).min(size - 1);
                    let rows = row.saturating_sub(reach)..=(row + reach).min(size - 1);
                    let near =
                        s.saturating_sub(rule.link_slabs)..=(s + rule.link_slabs).min(slabs - 1);
                    for ns in near.filter(|&ns| ns != s) {
                        for r in rows.clone() {
                            for c in columns.clone() {
                                neighbours.push((ns, r * size + c));
                            }
                        }
                    }
                    for (ns, np) in neighbours {
                        if !seen[ns * plane + np] && on(ns, np) {
                            seen[ns * plane + np] = true;
                            stack.push((ns, np));
                        }
                    }
                }
                if component.len() >= rule.min_voxels {
                    found.push(describe(probabilities, organ, component));
                }
            }
        }
    }
    // Largest first within each organ, as reports list them.
    found.sort_by(|a, b| {
        a.organ.cmp(&b.organ).then(
            b.lesion
                .size
                .map_or(0.0, |size| size.long_cm)
                .total_cmp(&a.lesion.size.map_or(0.0, |size| size.long_cm)),
        )
    });
    found
}

/// A lesion's long and short axes on its largest section, in model pixels (column, row),
/// each reaching the outer edges of its end pixels (as long as the diameter it stands for).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SectionAxes {
    /// The longest diameter's two ends.
    pub long: [(f64, f64); 2],
    /// The widest extent at right angles to it, across the section's middle along the long
    /// diameter.
    pub short: [(f64, f64); 2],
}

/// Long and short diameters of a lesion's largest section, mm, as a reader measures them
/// with a ruler: the longest distance across the section, and its widest extent at right
/// angles to that line; with the two lines as a reader draws them. Pixel centres are
/// measured and one pixel added to each (a section of one pixel is one pixel across). The
/// short diameter of an ellipse of the section's area reads 4 mm too short on the seed-13
/// phantoms (the grown region misses the tumor's partial-volume edge, which costs area in
/// both directions; the extent loses it once).
fn section_diameters(section: &[(f64, f64)], pixel_mm: f64) -> (f64, f64, SectionAxes) {
    let mut longest = 0.0f64;
    let first = section.first().copied().unwrap_or((0.0, 0.0));
    let mut ends = (first, first);
    // Each pair once; the first of equally long pairs is the one the full square meets first.
    for (i, a) in section.iter().enumerate() {
        for b in &section[i + 1..] {
            let distance = (a.0 - b.0).hypot(a.1 - b.1);
            if distance > longest {
                longest = distance;
                ends = (*a, *b);
            }
        }
    }
    // Unit vectors along the long diameter and at right angles to it (a one-pixel section
    // lies along the rows).
    let along = if longest > 0.0 {
        (
            (ends.1.0 - ends.0.0) / longest,
            (ends.1.1 - ends.0.1) / longest,
        )
    } else {
        (1.0, 0.0)
    };
    let across = (-along.1, along.0);
    let offset =
        |p: &(f64, f64), axis: (f64, f64)| (p.0 - ends.0.0) * axis.0 + (p.1 - ends.0.1) * axis.1;
    let (low, high) = section
        .iter()
        .map(|p| offset(p, across))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    let (low, high) = if low.is_finite() {
        (low, high)
    } else {
        (0.0, 0.0)
    };
    let width = high - low;
    let long_px = longest + 1.0;
    let short_px = (width + 1.0).min(long_px);
    // The short axis is drawn across the band the section fills at right angles to the
    // long one (a caliper's width, which may be wider than any one chord of a tilted
    // section), crossing the long axis at the section's middle along it.
    let middle = if section.is_empty() {
        0.0
    } else {
        section.iter().map(|p| offset(p, along)).sum::<f64>() / section.len() as f64
    };
    let centre = f64::midpoint(low, high);
    let point = |t: f64, s: f64| {
        (
            ends.0.0 + t * along.0 + s * across.0,
            ends.0.1 + t * along.1 + s * across.1,
        )
    };
    let axes = SectionAxes {
        long: [point(-0.5, 0.0), point(longest + 0.5, 0.0)],
        short: [
            point(middle, centre - short_px / 2.0),
            point(middle, centre + short_px / 2.0),
        ],
    };
    (long_px * pixel_mm, short_px * pixel_mm, axes)
}

/// A channel's value at `pixel` (0 in an empty channel).
fn value(channel: &[f32], pixel: usize) -> f32 {
    channel.get(pixel).copied().unwrap_or(0.0)
}

fn describe(
    probabilities: &Probabilities,
    organ: Organ,
    voxels: Vec<(usize, usize)>,
) -> FoundLesion {
    let size = probabilities.size;
    let slabs = probabilities.values.len();
    let mut per_slab = vec![0usize; slabs];
    for (slab, _) in &voxels {
        per_slab[*slab] += 1;
    }
    let largest_slab = first_largest(&per_slab).unwrap_or(0);
    let section: Vec<(f64, f64)> = voxels
        .iter()
        .filter(|(slab, _)| *slab == largest_slab)
        .map(|(_, pixel)| ((pixel % size) as f64, (pixel / size) as f64))
        .collect();
    let (long_mm, short_mm, axes) = section_diameters(&section, probabilities.pixel_mm);
    let mut attenuation = [0f64; 3];
    let locations = organ_locations(organ);
    let mut location = vec![0f64; locations.len()];
    for (slab, pixel) in &voxels {
        let values = &probabilities.values[*slab];
        for (n, sum) in attenuation.iter_mut().enumerate() {
            *sum += f64::from(value(&values[super::net::ATTENUATION.start + n], *pixel));
        }
        for (n, sum) in location.iter_mut().enumerate() {
            *sum += f64::from(value(
                &values[super::net::LOCATION.start + locations.start + n],
                *pixel,
            ));
        }
    }
    let best = |scores: &[f64]| {
        scores
            .iter()
            .enumerate()
            .max_by(|(_, a), (_, b)| a.total_cmp(b))
            .map_or(0, |(index, _)| index)
    };
    let round = |mm: f64| (mm.max(1.0)).round() / 10.0;
    FoundLesion {
        organ,
        largest_slab,
        axes,
        lesion: Lesion {
            size: Some(LesionSize {
                long_cm: round(long_mm),
                short_cm: Some(round(short_mm)),
            }),
            location: Some(location_class(locations.start + best(&location))),
            attenuation: Some(ATTENUATIONS[best(&attenuation)]),
            count: None,
            evidence: None,
            spans: LesionSpans::default(),
        },
        voxels,
    }
}

/// Findings from found lesions: each organ with lesions is "yes", the rest "no".
#[must_use]
pub fn findings_of(lesions: &[FoundLesion]) -> Findings {
    let mut findings = Findings::default();
    for organ in Organ::ALL {
        let entry = findings.organ_mut(organ);
        entry.tumor = TumorPresence::No;
        for found in lesions.iter().filter(|found| found.organ == organ) {
            entry.tumor = TumorPresence::Yes;
            entry.lesions.push(found.lesion.clone());
        }
    }
    findings
}

/// The slab with the most lesion voxels (the first on a tie), if any lesion was found.
#[must_use]
pub fn key_slab(lesions: &[FoundLesion], slabs: usize) -> Option<usize> {
    let mut counts = vec![0usize; slabs];
    for found in lesions {
        for (slab, _) in &found.voxels {
            counts[*slab] += 1;
        }
    }
    first_largest(&counts)
}

/// The model pixels (column, row) bounding every lesion voxel on `slab`:
/// `[column_min, row_min, column_max, row_max]`.
#[must_use]
pub fn slab_box(lesions: &[FoundLesion], slab: usize, size: usize) -> Option<[usize; 4]> {
    let mut bounds: Option<[usize; 4]> = None;
    for found in lesions {
        for (s, pixel) in &found.voxels {
            if *s != slab {
                continue;
            }
            let (column, row) = (pixel % size, pixel / size);
            bounds = Some(match bounds {
                None => [column, row, column, row],
                Some([c0, r0, c1, r1]) => {
                    [c0.min(column), r0.min(row), c1.max(column), r1.max(row)]
                }
            });
        }
    }
    bounds
}

/// Organs with at least `min_pixels` organ-mask pixels in a slab (what the verifier can
/// say "no tumor" about).
#[must_use]
pub fn visible_organs(slab: &[Vec<f32>], min_pixels: usize) -> Vec<Organ> {
    Organ::ALL
        .into_iter()
        .enumerate()
        .filter(|(index, _)| {
            slab[super::net::ORGAN.start + index]
                .iter()
                .filter(|&&p| p >= 0.5)
                .count()
                >= min_pixels
        })
        .map(|(_, organ)| organ)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty(slabs: usize, size: usize) -> Probabilities {
        Probabilities {
            size,
            pixel_mm: 4.0,
            slab_mm: 5.0,
            values: vec![vec![vec![0.0; size * size]; super::super::net::OUTPUTS]; slabs],
        }
    }

    #[test]
    fn a_lesion_blob_becomes_one_lesion_with_size_location_and_attenuation() {
        let mut p = empty(4, 16);
        let liver_lesion = super::super::net::LESION.start;
        // A 5 × 3 pixel blob on slabs 1–2, larger on slab 2; hyperattenuating; segment VII.
        for slab in 1..=2 {
            for row in 6..9 {
                for column in 4..(if slab == 2 { 9 } else { 7 }) {
                    let pixel = column + 16 * row;
                    p.values[slab][liver_lesion][pixel] = 0.9;
                    p.values[slab][super::super::net::ATTENUATION.start + 2][pixel] = 0.8;
                    p.values[slab][super::super::net::LOCATION.start + 5][pixel] = 0.7;
                }
            }
        }
        // A single stray pixel in the pancreas channel is noise.
        p.values[0][liver_lesion + 1][0] = 0.9;
        let lesions = find_lesions(&p, DecodeRule::default());
        assert_eq!(lesions.len(), 1);
        let found = &lesions[0];
        assert_eq!(found.organ, Organ::Liver);
        assert_eq!(found.largest_slab, 2);
        let size = found.lesion.size.expect("size");
        // Longest distance between pixel centres on slab 2: hypot(4, 2) + 1 pixel, × 4 mm.
        assert!((size.long_cm - 2.2).abs() < 0.05, "{size:?}");
        assert_eq!(found.lesion.attenuation, Some(Attenuation::Hyper));
        assert_eq!(
            found.lesion.location,
            Some(Location::LiverSegments(vec![7]))
        );
        let findings = findings_of(&lesions);
        assert_eq!(findings.organ(Organ::Liver).tumor, TumorPresence::Yes);
        assert_eq!(findings.organ(Organ::Pancreas).tumor, TumorPresence::No);
        assert_eq!(key_slab(&lesions, 4), Some(2));
        assert_eq!(slab_box(&lesions, 2, 16), Some([4, 6, 8, 8]));
    }

    #[test]
    fn the_finder_rule_joins_regions_on_nearby_slabs_that_do_not_overlap() {
        let mut p = empty(6, 16);
        let liver_lesion = super::super::net::LESION.start;
        // Slab 1: columns 4–6; slab 2: columns 8–10, two pixels right of it; slab 4 (slab 3
        // missed): columns 8–9; slab 5 nothing. Row 6 throughout.
        for (slab, columns) in [(1, 4..7), (2, 8..11), (4, 8..10)] {
            for column in columns {
                p.values[slab][liver_lesion][column + 16 * 6] = 1.0;
            }
        }
        // Far off on slab 2: another tumor.
        p.values[2][liver_lesion][14 + 16 * 14] = 1.0;
        assert_eq!(
            find_lesions(
                &p,
                DecodeRule {
                    min_voxels: 1,
                    ..DecodeRule::default()
                }
            )
            .len(),
            4
        );
        let joined = find_lesions(&p, FINDER_RULE);
        assert_eq!(joined.len(), 2);
        assert_eq!(joined[0].voxels.len(), 8);
        assert_eq!(joined[1].voxels, vec![(2, 14 + 16 * 14)]);
    }

    #[test]
    fn a_section_is_measured_across_its_long_diameter_as_with_a_ruler() {
        // An ellipse 12 × 6 pixels across, tilted by 30°: the pixel centres inside it.
        let (half_long, half_short, angle) = (6.0f64, 3.0f64, 30f64.to_radians());
        let mut section = Vec::new();
        for y in -10..=10 {
            for x in -10..=10 {
                let (x, y) = (f64::from(x), f64::from(y));
                let along = x * angle.cos() + y * angle.sin();
                let across = -x * angle.sin() + y * angle.cos();
                if (along / half_long).powi(2) + (across / half_short).powi(2) <= 1.0 {
                    section.push((x, y));
                }
            }
        }
        let (long_mm, short_mm, axes) = section_diameters(&section, 2.0);
        assert!((long_mm - 24.0).abs() <= 2.0, "long {long_mm} mm");
        assert!((short_mm - 12.0).abs() <= 2.0, "short {short_mm} mm");
        // The lines drawn are as long as the diameters, at right angles, the long one along
        // the ellipse's own axis and the short one crossing it inside the section.
        let length = |[a, b]: [(f64, f64); 2]| (a.0 - b.0).hypot(a.1 - b.1);
        assert!((length(axes.long) * 2.0 - long_mm).abs() < 1e-9);
        assert!((length(axes.short) * 2.0 - short_mm).abs() < 1e-9);
        let direction = |[a, b]: [(f64, f64); 2]| (b.0 - a.0, b.1 - a.1);
        let (long, short) = (direction(axes.long), direction(axes.short));
        assert!((long.0 * short.0 + long.1 * short.1).abs() < 1e-9);
        let tilt = long.1.atan2(long.0).to_degrees().rem_euclid(180.0);
        assert!((tilt - 30.0).abs() < 8.0, "long axis at {tilt}°");
        let middle = |[a, b]: [(f64, f64); 2]| (f64::midpoint(a.0, b.0), f64::midpoint(a.1, b.1));
        let (m, n) = (middle(axes.long), middle(axes.short));
        assert!(m.0.hypot(m.1) < 1.0 && n.0.hypot(n.1) < 1.0, "{m:?} {n:?}");
        // The ellipse of the same area across the same long diameter reads the short side
        // a pixel or more short.
        let area_short = 4.0 * section.len() as f64 * 4.0 / (std::f64::consts::PI * long_mm);
        assert!(
            short_mm - area_short >= 1.5,
            "{short_mm} against {area_short}"
        );
        // One pixel: one pixel across both ways, its edges the ends.
        let (long_mm, short_mm, axes) = section_diameters(&[(3.0, 4.0)], 2.5);
        assert_eq!((long_mm, short_mm), (2.5, 2.5));
        assert_eq!(axes.long, [(2.5, 4.0), (3.5, 4.0)]);
        assert_eq!(axes.short, [(3.0, 3.5), (3.0, 4.5)]);
        // A straight line of 5 pixels: 5 long, 1 across.
        let line: Vec<(f64, f64)> = (0..5).map(|x| (f64::from(x), 2.0)).collect();
        let (long_mm, short_mm, axes) = section_diameters(&line, 1.0);
        assert_eq!((long_mm, short_mm), (5.0, 1.0));
        assert_eq!(axes.long, [(-0.5, 2.0), (4.5, 2.0)]);
        assert_eq!(axes.short, [(2.0, 1.5), (2.0, 2.5)]);
    }

    #[test]
    fn location_indices_round_trip() {
        for index in 0..13 {
            assert_eq!(location_index(&location_class(index)), Some(index));
        }
        assert_eq!(location_index(&Location::LiverSegments(vec![1])), None);
    }
}
