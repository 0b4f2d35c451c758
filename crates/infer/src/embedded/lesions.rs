//! Lesions grown on the finder's grid from its answers, each organ's reference HU, and the
//! probabilities the decoding reads.

use super::anatomy::mask_locations;
use super::grid::coarse_index;
use super::{finder, net};

use super::decode::Probabilities;
use super::finder::SlabAnswer;
use super::grid::ModelGrid;
use super::net::OUTPUTS;

/// A lesion grown on the finder's grid from one answer: its slab, organ, pixels and
/// attenuation class (0 hypo, 1 iso, 2 hyper).
pub(super) struct GrownLesion {
    pub(super) slab: usize,
    pub(super) organ: usize,
    pub(super) pixels: Vec<usize>,
    pub(super) attenuation: usize,
}

/// The lesion pixels grown from each answer at or above its organ's threshold (none where
/// they touch bone, above 400 HU), with the attenuation their contrast shows (within 12 HU
/// of the organ: iso).
pub(super) fn grown_lesions(
    fine: &ModelGrid,
    answers: &[SlabAnswer],
    masks: &[Vec<bool>],
    thresholds: [f32; 4],
) -> Vec<GrownLesion> {
    let plane = fine.spec.size * fine.spec.size;
    let mut positive = [false; 4];
    let mut called = vec![false; fine.slabs * 4];
    for answer in answers {
        let tumor = answer.probability >= thresholds[answer.organ];
        positive[answer.organ] |= tumor;
        called[answer.slab * 4 + answer.organ] = tumor;
    }
    let references = organ_references(fine, masks, positive, &called);
    let mut grown = Vec::new();
    for answer in answers {
        if answer.probability < thresholds[answer.organ] {
            continue;
        }
        let (pixels, contrast) = finder::grow_lesion(
            fine,
            &masks[answer.slab * 4 + answer.organ],
            answer,
            references[answer.slab * 4 + answer.organ],
        );
        // No tumor of these organs reaches 400 HU; a region that does lies on bone (an organ
        // mask that strays onto the spine or ribs).
        let plane_hu = &fine.hu[answer.slab * plane..(answer.slab + 1) * plane];
        if pixels.iter().any(|&pixel| plane_hu[pixel] > 400.0) {
            continue;
        }
        let attenuation = if contrast <= -finder::VISIBLE_CONTRAST_HU {
            0
        } else if contrast >= finder::VISIBLE_CONTRAST_HU {
            2
        } else {
            1
        };
        grown.push(GrownLesion {
            slab: answer.slab,
            organ: answer.organ,
            pixels,
            attenuation,
        });
    }
    grown
}

/// Interior pixels the broad slabs without a tumor call must hold to give an organ's
/// reference alone (a kidney's interior on one 5 mm slab is about 100 pixels of 3 mm).
pub(super) const MIN_REFERENCE_PIXELS: usize = 30;

/// Per slab and organ (`[slab * 4 + organ]`), the organ's HU across the scan: the median of
/// its interior pixels (all eight neighbours in the mask) on its broad slabs, for every slab
/// at least half as broad as those. The broad slabs are those where the finder called no
/// tumor (`called[slab * 4 + organ]` false or absent) and the mask covers at least half of
/// their largest section; when they hold fewer than [`MIN_REFERENCE_PIXELS`] or that section
/// is under a third of the organ's largest (only tips are clear), all slabs showing at least
/// half of the organ's largest section. `None` on smaller sections (an organ's tip, darker by
/// partial volume along the scan, keeps its own slab's median; see [`finder::grow_lesion`])
/// and for the organs `wanted` leaves out (only organs with a lesion to grow need it).
///
/// A large tumor swells the organ's mask and can fill most of it on every slab it crosses:
/// a 4.7 cm hyperattenuating kidney tumor was the median of the kidney's interior there,
/// showed no contrast, and the cortex and medulla around it grew as "hypoattenuating
/// lesions".
#[must_use]
pub fn organ_references(
    fine: &ModelGrid,
    masks: &[Vec<bool>],
    wanted: [bool; 4],
    called: &[bool],
) -> Vec<Option<f32>> {
    let n = fine.spec.size;
    let plane = n * n;
    let mut references = vec![None; fine.slabs * 4];
    for organ in (0..4).filter(|&organ| wanted[organ]) {
        let areas: Vec<usize> = (0..fine.slabs)
            .map(|slab| {
                masks
                    .get(slab * 4 + organ)
                    .map_or(0, |m| m.iter().filter(|&&on| on).count())
            })
            .collect();
        let interior = |slabs: &[usize]| {
            let mut values = Vec::new();
            for &slab in slabs {
                let mask = &masks[slab * 4 + organ];
                let hu = &fine.hu[slab * plane..(slab + 1) * plane];
                values.extend(
                    (0..plane)
                        .filter(|&pixel| mask[pixel] && finder::surrounded(pixel, n, mask))
                        .map(|pixel| hu[pixel]),
                );
            }
            values
        };
        // The slabs `keep` accepts that are at least half as broad as the broadest of them.
        let broad_among = |keep: &dyn Fn(usize) -> bool| {
            let slabs: Vec<usize> = (0..fine.slabs)
                .filter(|&slab| areas[slab] > 0 && keep(slab))
                .collect();
            let largest = slabs.iter().map(|&slab| areas[slab]).max().unwrap_or(0);
            let broad: Vec<usize> = slabs
                .into_iter()
                .filter(|&slab| areas[slab] * 2 >= largest)
                .collect();
            (broad, largest)
        };
        let (broad, largest) = broad_among(&|_| true);
        if largest == 0 {
            continue;
        }
        // A tumor also swells the organ's mask: the slabs without one are measured against
        // their own broadest section, if that is not a mere tip.
        let called_at = |slab: usize| called.get(slab * 4 + organ).copied().unwrap_or(false);
        let (clear, clear_largest) = broad_among(&|slab| !called_at(slab));
        let mut values = if clear_largest * 3 >= largest {
            interior(&clear)
        } else {
            Vec::new()
        };
        let broad = if values.len() >= MIN_REFERENCE_PIXELS {
            // Every slab as broad as those, the swollen ones with the tumor included.
            (0..fine.slabs)
                .filter(|&slab| areas[slab] > 0 && areas[slab] * 2 >= clear_largest)
                .collect()
        } else {
            values = interior(&broad);
            broad
        };
        if values.is_empty() {
            continue;
        }
        let middle = values.len() / 2;
        let median = *values.select_nth_unstable_by(middle, f32::total_cmp).1;
        for &slab in &broad {
            references[slab * 4 + organ] = Some(median);
        }
    }
    references
}

/// Probabilities on the finder's grid for the decoding ([`find_lesions`](super::decode::find_lesions)): organ masks and
/// location classes from the diagnoser (resampled), and the lesions [`grown_lesions`] grows
/// from the finder's answers.
#[must_use]
pub fn finder_probabilities(
    fine: &ModelGrid,
    coarse: &Probabilities,
    answers: &[SlabAnswer],
    masks: &[Vec<bool>],
    thresholds: [f32; 4],
) -> Probabilities {
    let grown = grown_lesions(fine, answers, masks, thresholds);
    probabilities_with(fine, coarse, &grown, masks)
}

/// [`finder_probabilities`] with the lesions already grown. On slabs without a lesion only
/// the organ channels are filled, the others left empty (all zeros): the decoding reads
/// lesion, attenuation and location channels only on lesion pixels.
pub(super) fn probabilities_with(
    fine: &ModelGrid,
    coarse: &Probabilities,
    grown: &[GrownLesion],
    masks: &[Vec<bool>],
) -> Probabilities {
    let n = fine.spec.size;
    let plane = n * n;
    let lookup: Vec<usize> = (0..n)
        .map(|i| coarse_index(i, n, fine.spec.pixel_mm, coarse.size, coarse.pixel_mm))
        .collect();
    let mut with_lesion = vec![false; fine.slabs];
    for lesion in grown {
        with_lesion[lesion.slab] = true;
    }
    let mut values: Vec<Vec<Vec<f32>>> = (0..fine.slabs)
        .map(|slab| {
            let source = &coarse.values[slab.min(coarse.values.len().saturating_sub(1))];
            (0..OUTPUTS)
                .map(|channel| {
                    if net::ORGAN.contains(&channel) {
                        masks[slab * 4 + channel - net::ORGAN.start]
                            .iter()
                            .map(|&on| if on { 1.0 } else { 0.0 })
                            .collect()
                    } else if !with_lesion[slab] {
                        // All zeros: nothing of a slab without a lesion but its organs is read.
                        Vec::new()
                    } else if net::LOCATION.contains(&channel) {
                        // An empty channel (a slab the diagnoser did not read) is all zeros.
                        let channel = &source[channel];
                        (0..plane)
                            .map(|pixel| {
                                let at = lookup[pixel / n] * coarse.size + lookup[pixel % n];
                                channel.get(at).copied().unwrap_or(0.0)
                            })
                            .collect()
                    } else {
                        vec![0.0; plane]
                    }
                })
                .collect()
        })
        .collect();
    mask_locations(masks, n, &mut values);
    for lesion in grown {
        let slab = &mut values[lesion.slab];
        for &pixel in &lesion.pixels {
            slab[net::LESION.start + lesion.organ][pixel] = 1.0;
            slab[net::ATTENUATION.start + lesion.attenuation][pixel] = 1.0;
        }
    }
    Probabilities {
        size: n,
        pixel_mm: fine.spec.pixel_mm,
        slab_mm: fine.spec.slab_mm,
        values,
    }
}

/// Answers whose probabilities differ by less than this are equally strong for the key
/// slab. A large tumor saturates the finder on every slab it crosses (0.99991 against
/// 0.99996), and the exact value then picked the slab, often the tumor's edge: with
/// probabilities compared to the hundredth the slab with the larger lesion section wins,
/// and on the 200 held-out phantoms the key slice lies 3.8 slices from the largest section
/// instead of 4.5 (consistency 0.77 instead of 0.75; the hit rate within one case).
pub(super) const KEY_PROBABILITY_STEP: f32 = 0.01;

/// The key slab with a finder: that of the strongest answer at or above its organ's
/// threshold whose lesion was kept (the mode of the policy the RL stage trains), if any;
/// among answers equally strong to [`KEY_PROBABILITY_STEP`], the one with more lesion voxels
/// on its slab.
pub(super) fn strongest_slab(
    answers: &[SlabAnswer],
    thresholds: [f32; 4],
    lesions: &[super::decode::FoundLesion],
) -> Option<usize> {
    let voxels = |answer: &SlabAnswer| {
        lesions
            .iter()
            .filter(|found| found.organ as usize == answer.organ)
            .map(|found| {
                found
                    .voxels
                    .iter()
                    .filter(|(slab, _)| *slab == answer.slab)
                    .count()
            })
            .sum::<usize>()
    };
    answers
        .iter()
        .filter(|answer| answer.probability >= thresholds[answer.organ])
        .map(|answer| (answer, voxels(answer)))
        .filter(|(_, count)| *count > 0)
        .max_by(|a, b| {
            let level = |answer: &SlabAnswer| (answer.probability / KEY_PROBABILITY_STEP).round();
            level(a.0).total_cmp(&level(b.0)).then(a.1.cmp(&b.1))
        })
        .map(|(answer, _)| answer.slab)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::grid::GridSpec;

    /// A model grid of `slabs` slabs with these HU, as read from a CT of the grid's own
    /// pixels and 5 mm slices.
    fn square_grid(spec: GridSpec, slabs: usize, hu: Vec<f32>) -> ModelGrid {
        let n = spec.size;
        ModelGrid {
            spec,
            slabs,
            hu,
            centre_slice: (0..slabs as u32).collect(),
            ct_spacing_mm: [spec.pixel_mm, spec.pixel_mm, 5.0],
            ct_dims: [n, n, slabs],
            z_range_mm: (0.0, 5.0 * (slabs - 1) as f64),
            above_mm: 0.0,
            detail: None,
        }
    }

    #[test]
    fn organ_references_are_the_interior_median_over_the_broad_sections() {
        let n = 16;
        let slabs = 4;
        let spec = GridSpec {
            size: n,
            pixel_mm: 3.0,
            slab_mm: 5.0,
        };
        // Liver (organ 0): 8 × 8 at 100 HU on slabs 0–2, but slab 1 at 60 HU (a tumor filling
        // it), and a 3 × 3 tip at 40 HU on slab 3 (under half the largest section).
        let mut hu = vec![-95f32; slabs * n * n];
        let mut masks = vec![vec![false; n * n]; slabs * 4];
        for slab in 0..slabs {
            let (side, value) = match slab {
                1 => (8, 60.0),
                3 => (3, 40.0),
                _ => (8, 100.0),
            };
            for row in 4..4 + side {
                for column in 4..4 + side {
                    masks[slab * 4][row * n + column] = true;
                    hu[slab * n * n + row * n + column] = value;
                }
            }
        }
        let grid = square_grid(spec, slabs, hu);
        let references = organ_references(&grid, &masks, [true; 4], &[]);
        for slab in 0..3 {
            assert_eq!(references[slab * 4], Some(100.0), "slab {slab}");
        }
        assert_eq!(references[3 * 4], None, "the tip keeps its own median");
        assert!(
            (1..4).all(|organ| references[organ].is_none()),
            "no other organ"
        );
        let unwanted = organ_references(&grid, &masks, [false, true, true, true], &[]);
        assert!(
            unwanted.iter().all(Option::is_none),
            "the liver was not asked for"
        );
    }

    #[test]
    fn organ_references_leave_out_the_slabs_where_a_tumor_swells_the_organ() {
        let n = 24;
        let slabs = 6;
        // Left kidney (organ 2): 8 × 8 of parenchyma at 170 HU on slabs 0–2; on slabs 3–5 a
        // tumor of 220 HU swells the mask to 13 × 13 and fills most of it, with a 3-pixel
        // rim of parenchyma on two sides. The finder called a tumor on slabs 3–5.
        let mut hu = vec![-95f32; slabs * n * n];
        let mut masks = vec![vec![false; n * n]; slabs * 4];
        for slab in 0..slabs {
            let side = if slab < 3 { 8 } else { 13 };
            for row in 4..4 + side {
                for column in 4..4 + side {
                    masks[slab * 4 + 2][row * n + column] = true;
                    let tumor = slab >= 3 && row >= 7 && column >= 7;
                    hu[slab * n * n + row * n + column] = if tumor { 220.0 } else { 170.0 };
                }
            }
        }
        let spec = GridSpec {
            size: n,
            pixel_mm: 3.0,
            slab_mm: 5.0,
        };
        let grid = square_grid(spec, slabs, hu);
        let mut called = vec![false; slabs * 4];
        for slab in 3..slabs {
            called[slab * 4 + 2] = true;
        }
        let wanted = [false, false, true, false];
        let references = organ_references(&grid, &masks, wanted, &called);
        for slab in 0..slabs {
            assert_eq!(references[slab * 4 + 2], Some(170.0), "slab {slab}");
        }
        // Without the calls the swollen slabs are the broad ones, and the tumor their median.
        let blind = organ_references(&grid, &masks, wanted, &[]);
        assert_eq!(blind[4 * 4 + 2], Some(220.0));
        assert_eq!(blind[2], None, "slab 0 is under half the swollen section");
    }
}
