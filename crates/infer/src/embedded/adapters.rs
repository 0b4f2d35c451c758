//! keyslice-tiny behind the pipeline's traits: [`TinyDiagnoser`] reads a volume into a report
//! with a key slice and box, [`TinyVerifier`] reads the key slice alone.

use super::anatomy::one_slice_segments;
use super::candle_message;
use super::domain;
use super::evidence::{ClaimPlace, read_claim};
use super::input::{model_pixel_of, verifier_input};
use super::lesions::finder_probabilities;
use super::model::TinyModel;

use super::decode::{
    FINDER_RULE, FoundLesion, Probabilities, SectionAxes, find_lesions, findings_of, key_slab,
    slab_box, visible_organs,
};
use super::finder::FinderConfig;
use super::grid::{GridSpec, ModelGrid};
use super::organs::Reading;
use crate::{
    Diagnoser, Diagnosis, InferError, KeySliceImage, LesionEvidence, ModelId, OutOfDomain, Verifier,
};
use keyslice_core::findings::{
    Evidence, Findings, LesionAxes, Organ, SliceBox, SliceRange, TumorPresence,
    write_local_description, write_report,
};
use keyslice_core::volume::Volume;
use keyslice_core::volume::mask::LesionMask;

/// The embedded model as a [`Diagnoser`].
pub struct TinyDiagnoser<'a>(pub &'a TinyModel);

impl Diagnoser for TinyDiagnoser<'_> {
    fn model_id(&self) -> ModelId {
        ModelId {
            id: self.0.config.model.clone(),
            version: self.0.config.version.clone(),
        }
    }

    fn diagnose(&self, volume: &Volume) -> Result<Diagnosis, InferError> {
        let model = self.0;
        let run_error = |error: candle_core::Error| InferError::Run {
            model: model.config.model.clone(),
            detail: candle_message(&error),
        };
        if volume.dims().contains(&0) {
            return Err(InferError::Volume("it has no voxels".into()));
        }
        let mut unfamiliar = familiarity(volume, &model.config.model)?;
        // Stage times go to the debug log (`KEYSLICE_LOG=debug`): what `benches/analyze.rs`
        // measures as a whole, split.
        let mut clock = std::time::Instant::now();
        let mut lap = |stage: &str| {
            tracing::debug!(
                stage,
                ms = clock.elapsed().as_secs_f64() * 1e3,
                "diagnoser stage"
            );
            clock = std::time::Instant::now();
        };
        // With a finder the CT is read once onto its finer grid and the diagnoser's grid is
        // pooled from it (when it is the same field in larger pixels).
        let fine = model.config.finder.as_ref().map(|finder| {
            ModelGrid::from_volume(volume, finder.grid).with_detail(volume, finder.detail_factor())
        });
        let coarse = fine
            .as_ref()
            .and_then(|fine| fine.pooled(model.config.grid))
            .unwrap_or_else(|| ModelGrid::from_volume(volume, model.config.grid));
        lap("grid");
        // With a finder, the decoding reads its grid; without, the diagnoser's lesion masks.
        let (grid, lesions, strongest) =
            if let (Some(finder), Some(fine)) = (&model.config.finder, fine) {
                let (lesions, strongest, masks) = model
                    .finder_lesions(&fine, &coarse, finder, &mut lap)
                    .map_err(run_error)?;
                if let Some(known) = &model.config.domain {
                    let figures = domain::measure(volume, &fine, &masks, &lesions);
                    unfamiliar.extend(known.unfamiliar(&figures));
                }
                (fine, lesions, strongest)
            } else {
                let probabilities = model.diagnose_grid(&coarse).map_err(run_error)?;
                lap("diagnoser network");
                let lesions = find_lesions(&probabilities, model.config.decode);
                (coarse, lesions, None)
            };
        lap("decoding");
        let mut findings = findings_of(&lesions);
        let key = strongest.or_else(|| key_slab(&lesions, grid.slabs));
        let mut slice_box = None;
        let mut key_slice = None;
        if let Some(slab) = key {
            let index = grid.centre_slice[slab];
            key_slice = Some(index);
            slice_box = slab_box(&lesions, slab, grid.spec.size)
                .map(|bounds| ct_box(volume, &grid, bounds, index));
            findings.lesion_slices = lesion_slices(&lesions, slab, &grid);
        }
        findings.key_slice = key_slice.map(|index| keyslice_core::findings::KeySlice {
            index,
            z_mm: Some(
                (volume
                    .patient_from_voxel()
                    .apply([0.0, 0.0, f64::from(index)])[2]
                    * 100.0)
                    .round()
                    / 100.0,
            ),
            sop_instance_uid: None,
            span: None,
        });
        findings.slice_box.clone_from(&slice_box);
        let evidence = own_evidence(volume, &grid, &lesions);
        // The report gives each lesion its own evidence line.
        for (own, found) in evidence.iter().zip(ordered(&lesions)) {
            if let Some(lesion) = findings.organ_mut(own.organ).lesions.get_mut(own.lesion) {
                lesion.evidence = Some(Evidence {
                    key_slice: own.key_slice,
                    slice_box: own.slice_box.clone(),
                    slices: own_slices(found, &grid),
                });
            }
        }
        Ok(Diagnosis {
            report: write_report(&findings),
            key_slice,
            slice_box,
            warnings: Vec::new(),
            input: None,
            video_refused: None,
            out_of_domain: (!unfamiliar.is_empty())
                .then(|| OutOfDomain::new(&model.config.model, unfamiliar)),
            lesions: evidence,
        })
    }
}

/// The slice spacing beyond which the embedded model refuses a CT: its phantoms have slices
/// 1–5 mm apart, and its grid of 5 mm slabs would grow with the gaps, not with the slices.
const MAX_SLICE_SPACING_MM: f64 = 10.0;

/// The thickest slices of the training phantoms, mm (thinner slices are averaged into the
/// model's 5 mm slabs as the phantoms' are).
const KNOWN_SLICE_MM: f64 = 5.0;

/// Whether the embedded model knows CTs like `volume` by its slices: refused when they are
/// so far apart that the model's grid (and its work) would be made of gaps, not slices; a
/// reason it is out of its depth when they are thicker than its phantoms'.
fn familiarity(volume: &Volume, model: &str) -> Result<Vec<String>, InferError> {
    let slice_mm = volume.spacing_mm()[2];
    if !slice_mm.is_finite() || slice_mm > MAX_SLICE_SPACING_MM {
        return Err(InferError::Volume(format!(
            "its slices are {slice_mm:.1} mm apart; {model} reads CTs with slices at most {MAX_SLICE_SPACING_MM} mm apart (it was trained on synthetic phantoms of 1–{KNOWN_SLICE_MM} mm): analyse it with a real model (--backend qwen3vl or openai)"
        )));
    }
    let mut unfamiliar = Vec::new();
    if slice_mm > KNOWN_SLICE_MM * 1.1 {
        unfamiliar.push(format!(
            "slices {slice_mm:.1} mm apart (training phantoms 1–{KNOWN_SLICE_MM} mm)"
        ));
    }
    Ok(unfamiliar)
}

/// The CT slices the lesion(s) on the key slab cover: from the first slice of their lowest
/// slab to the last of their highest.
fn lesion_slices(lesions: &[FoundLesion], slab: usize, grid: &ModelGrid) -> Option<SliceRange> {
    let slabs = lesions
        .iter()
        .filter(|found| found.voxels.iter().any(|(s, _)| *s == slab))
        .flat_map(|found| found.voxels.iter().map(|(s, _)| *s));
    let (low, high) = slabs.fold(None, |range: Option<(usize, usize)>, s| {
        Some(range.map_or((s, s), |(low, high)| (low.min(s), high.max(s))))
    })?;
    let (first, _) = grid.slab_slices(low);
    let (_, last) = grid.slab_slices(high);
    Some(SliceRange {
        first: u32::try_from(first).ok()?,
        last: u32::try_from(last).ok()?,
    })
}

/// A model-pixel box on the key slice as CT voxels (outer edges of the model pixels) and mm.
pub(super) fn ct_box(
    volume: &Volume,
    grid: &ModelGrid,
    [c0, r0, c1, r1]: [usize; 4],
    index: u32,
) -> SliceBox {
    let [nx, ny, _] = volume.dims();
    let half = [
        grid.spec.pixel_mm / 2.0 / grid.ct_spacing_mm[0],
        grid.spec.pixel_mm / 2.0 / grid.ct_spacing_mm[1],
    ];
    let (low_i, low_j) = grid.ct_pixel(c0, r0);
    let (high_i, high_j) = grid.ct_pixel(c1, r1);
    let clamp = |value: f64, size: usize| value.round().clamp(0.0, (size - 1) as f64);
    let voxels = [
        clamp(low_i - half[0], nx),
        clamp(low_j - half[1], ny),
        clamp(high_i + half[0], nx),
        clamp(high_j + half[1], ny),
    ];
    let corner = |i: f64, j: f64| volume.patient_from_voxel().apply([i, j, f64::from(index)]);
    let (low, high) = (corner(voxels[0], voxels[1]), corner(voxels[2], voxels[3]));
    let round = |value: f64| (value * 100.0).round() / 100.0;
    SliceBox {
        voxels: voxels.map(|value| value as u32),
        mm: Some([round(low[0]), round(low[1]), round(high[0]), round(high[1])]),
    }
}

/// The found lesions in report order: by organ, then as found (largest first).
fn ordered(lesions: &[FoundLesion]) -> impl Iterator<Item = &FoundLesion> {
    Organ::ALL
        .into_iter()
        .flat_map(|organ| lesions.iter().filter(move |found| found.organ == organ))
}

/// The CT slices a found lesion covers: from the first slice of its lowest slab to the last
/// of its highest.
fn own_slices(found: &FoundLesion, grid: &ModelGrid) -> Option<SliceRange> {
    let low = found.voxels.iter().map(|(slab, _)| *slab).min()?;
    let high = found.voxels.iter().map(|(slab, _)| *slab).max()?;
    Some(SliceRange {
        first: u32::try_from(grid.slab_slices(low).0).ok()?,
        last: u32::try_from(grid.slab_slices(high).1).ok()?,
    })
}

/// Every lesion's own evidence, in report order: the slab it is largest on, its box and
/// axes there.
fn own_evidence(volume: &Volume, grid: &ModelGrid, lesions: &[FoundLesion]) -> Vec<LesionEvidence> {
    let mut counted = std::collections::BTreeMap::new();
    ordered(lesions)
        .map(|found| {
            let count = counted.entry(found.organ).or_insert(0usize);
            let lesion = *count;
            *count += 1;
            let index = grid.centre_slice[found.largest_slab];
            LesionEvidence {
                organ: found.organ,
                lesion,
                key_slice: index,
                slice_box: slab_box(
                    std::slice::from_ref(found),
                    found.largest_slab,
                    grid.spec.size,
                )
                .map(|bounds| ct_box(volume, grid, bounds, index)),
                axes: Some(ct_axes(grid, found.axes)),
                mask: ct_mask(grid, found),
            }
        })
        .collect()
}

/// A found lesion as a mask on the CT's grid: each of its model pixels fills the CT voxels
/// its footprint covers, on every slice of its slab. Blocky at the finder's resolution (3 mm
/// pixels, 5 mm slabs): the starting mask a reviewer grows, smooths or erases from. `None`
/// when the lesion covers no voxel.
fn ct_mask(grid: &ModelGrid, found: &FoundLesion) -> Option<LesionMask> {
    let dims = grid.ct_dims;
    if dims.contains(&0) || found.voxels.is_empty() {
        return None;
    }
    let n = grid.spec.size.max(1);
    let half = [
        grid.spec.pixel_mm / 2.0 / grid.ct_spacing_mm[0].max(1e-6),
        grid.spec.pixel_mm / 2.0 / grid.ct_spacing_mm[1].max(1e-6),
    ];
    // The voxel indices whose centres lie within the footprint [centre − half, centre + half).
    let span = |centre: f64, half: f64, size: usize| -> std::ops::Range<usize> {
        let first = (centre - half).ceil().max(0.0);
        let end = (centre + half).ceil().clamp(0.0, size as f64);
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "clamped to the CT's size above"
        )]
        let range = first as usize..end as usize;
        range
    };
    let mut dense = vec![0u8; dims.iter().product()];
    for &(slab, pixel) in &found.voxels {
        let (i, j) = grid.ct_pixel(pixel % n, pixel / n);
        let (first, last) = grid.slab_slices(slab);
        for k in first..=last.min(dims[2] - 1) {
            for y in span(j, half[1], dims[1]) {
                let row = dims[0] * (y + dims[1] * k);
                dense[row..][span(i, half[0], dims[0])].fill(1);
            }
        }
    }
    let mask = LesionMask::from_dense(&dense, dims);
    (mask.voxels() > 0).then_some(mask)
}

/// A lesion's axes in model pixels as CT voxel positions on its slice, rounded to a
/// hundredth of a voxel.
fn ct_axes(grid: &ModelGrid, axes: SectionAxes) -> LesionAxes {
    let point = |(column, row): (f64, f64)| {
        let (column, row) = grid.ct_point(column, row);
        [
            (column * 100.0).round() / 100.0,
            (row * 100.0).round() / 100.0,
        ]
    };
    LesionAxes {
        long: axes.long.map(point),
        short: axes.short.map(point),
    }
}

/// The embedded model as a [`Verifier`].
pub struct TinyVerifier<'a>(pub &'a TinyModel);

impl Verifier for TinyVerifier<'_> {
    fn model_id(&self) -> ModelId {
        ModelId {
            id: format!("{}-verifier", self.0.config.model),
            version: self.0.config.version.clone(),
        }
    }

    /// With an evidence reader and a box, the claim read in three planes by it; otherwise
    /// the key slice alone ([`Self::describe`]).
    fn describe_claim(
        &self,
        volume: &Volume,
        index: u32,
        slice_box: Option<&SliceBox>,
    ) -> Result<String, InferError> {
        let model = self.0;
        if let (Some(network), Some(config), Some(slice_box)) =
            (&model.evidence, &model.config.evidence, slice_box)
            && (index as usize) < volume.dims()[2]
        {
            let place = ClaimPlace::of(volume, index, Some(slice_box));
            let local = read_claim(
                network,
                config,
                &model.config.windows,
                volume,
                &place,
                model.device(),
            )
            .map_err(|error| InferError::Run {
                model: format!("{}-verifier", model.config.model),
                detail: candle_message(&error),
            })?;
            return Ok(write_local_description(index, &local));
        }
        crate::describe_key_slice(self, volume, index, slice_box)
    }

    fn describe(&self, slice: &KeySliceImage) -> Result<String, InferError> {
        let model = self.0;
        let run_error = |error: candle_core::Error| InferError::Run {
            model: format!("{}-verifier", model.config.model),
            detail: candle_message(&error),
        };
        // The slice alone, as a one-slab volume on the model grid.
        let volume = slice_volume(slice).map_err(InferError::Volume)?;
        if let Some(finder) = &model.config.finder {
            let local = read_slice_with_finder(model, finder, &volume, slice.from_top_mm)
                .map_err(run_error)?;
            return Ok(write_local_description(slice.index, &local));
        }
        // The one-slice volume is 1 mm thick: a 1 mm slab holds exactly that slice.
        let spec = GridSpec {
            slab_mm: 1.0,
            ..model.config.grid
        };
        let grid = ModelGrid::from_volume(&volume, spec);
        let n = grid.spec.size;
        let centre = slice.slice_box.as_ref().map_or((n / 2, n / 2), |b| {
            model_pixel_of(
                &grid,
                f64::midpoint(f64::from(b.voxels[0]), f64::from(b.voxels[2])),
                f64::midpoint(f64::from(b.voxels[1]), f64::from(b.voxels[3])),
            )
        });
        let (input, _) = verifier_input(&grid, 0, centre, model.config.crop, &model.config.windows);
        let values = model.verify_crop(&input).map_err(run_error)?;
        let probabilities = Probabilities {
            size: model.config.crop,
            pixel_mm: grid.spec.pixel_mm,
            slab_mm: grid.spec.slab_mm,
            values: vec![values],
        };
        let lesions = find_lesions(&probabilities, model.config.decode);
        let mut local: Findings = findings_of(&lesions);
        // Organs neither shown with a lesion nor visible in the crop are not mentioned.
        let visible = visible_organs(&probabilities.values[0], 20);
        for organ in keyslice_core::findings::Organ::ALL {
            let entry = local.organ_mut(organ);
            if entry.tumor == TumorPresence::No && !visible.contains(&organ) {
                entry.tumor = TumorPresence::NotMentioned;
            }
        }
        Ok(write_local_description(slice.index, &local))
    }
}

/// The finder's reading of one slice alone (`volume` holds just that slice, `from_top_mm`
/// below the top of its scan): the organ masks on it, then the finder per organ,
/// decoded as for a volume. Organs the slice does not show are not mentioned.
pub(super) fn read_slice_with_finder(
    model: &TinyModel,
    finder: &FinderConfig,
    volume: &Volume,
    from_top_mm: f64,
) -> candle_core::Result<Findings> {
    // The one-slice volume is 1 mm thick: a 1 mm slab holds exactly that slice.
    let slab = |grid: GridSpec| {
        let mut one = ModelGrid::from_volume(
            volume,
            GridSpec {
                slab_mm: 1.0,
                ..grid
            },
        );
        one.above_mm = from_top_mm;
        one
    };
    let coarse = slab(model.config.grid);
    let probabilities = model.diagnose_grid(&coarse)?;
    let fine = slab(finder.grid).with_detail(volume, finder.detail_factor());
    let (answers, masks) = model.find(&fine, &probabilities, Reading::Alternate)?;
    let decoded = finder_probabilities(&fine, &probabilities, &answers, &masks, finder.thresholds);
    let mut local = findings_of(&find_lesions(&decoded, FINDER_RULE));
    // One slice shows which side of the falciform ligament and of Cantlie's line a liver
    // lesion lies and whether it is anterior or posterior, not whether it lies above or below
    // the right part's middle (the whole liver's business): the segment pair it can name.
    for lesion in &mut local
        .organ_mut(keyslice_core::findings::Organ::Liver)
        .lesions
    {
        if let Some(keyslice_core::findings::Location::LiverSegments(segments)) =
            &mut lesion.location
        {
            *segments = one_slice_segments(segments);
        }
    }
    let visible = visible_organs(&decoded.values[0], 4);
    for organ in keyslice_core::findings::Organ::ALL {
        let entry = local.organ_mut(organ);
        if entry.tumor == TumorPresence::No && !visible.contains(&organ) {
            entry.tumor = TumorPresence::NotMentioned;
        }
    }
    Ok(local)
}

/// A one-slice volume from a key-slice image (what the verifier's grid sampling reads).
pub(super) fn slice_volume(slice: &KeySliceImage) -> Result<Volume, String> {
    use keyslice_core::volume::{Affine, VolumeInfo, Voxels};
    let affine = Affine::from_axes(
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
        [slice.spacing_mm[0], slice.spacing_mm[1], 1.0],
        slice.origin_mm,
    );
    Volume::new(
        [slice.dims[0], slice.dims[1], 1],
        affine,
        Voxels::F32(slice.hu.clone()),
        Vec::new(),
        VolumeInfo::default(),
    )
    .map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use crate::embedded::decode;
    use crate::embedded::finder::SlabAnswer;
    use crate::embedded::lesions::strongest_slab;

    #[test]
    fn the_key_slab_of_saturated_answers_is_the_largest_section() {
        let answer = |slab: usize, probability: f32| SlabAnswer {
            organ: 2,
            slab,
            probability,
            cell: (0, 0),
        };
        // A tumor on slabs 3–5, largest on slab 4; the finder saturates on all three, a
        // hair higher at the edge. A weaker answer on slab 9 has a larger region.
        let answers = [
            answer(3, 0.999_96),
            answer(4, 0.999_91),
            answer(5, 0.999_93),
            answer(9, 0.97),
        ];
        let section = |slab: usize, pixels: usize| (0..pixels).map(move |pixel| (slab, pixel));
        let voxels: Vec<(usize, usize)> = section(3, 4)
            .chain(section(4, 12))
            .chain(section(5, 6))
            .chain(section(9, 30))
            .collect();
        let lesion = decode::FoundLesion {
            organ: keyslice_core::findings::Organ::KidneyLeft,
            voxels,
            largest_slab: 4,
            axes: decode::SectionAxes {
                long: [(0.0, 0.0); 2],
                short: [(0.0, 0.0); 2],
            },
            lesion: keyslice_core::findings::Lesion::default(),
        };
        let thresholds = [0.5; 4];
        assert_eq!(strongest_slab(&answers, thresholds, &[lesion]), Some(4));
        // Below the threshold nothing is key.
        assert_eq!(strongest_slab(&answers, [1.0; 4], &[]), None);
    }
}
