//! The model in use: the diagnoser, verifier, finder and organ networks run on a model grid,
//! and the probabilities they give.

use super::grid::coarse_index;
use super::input::{body_box, diagnoser_input};
use super::lesions::{grown_lesions, probabilities_with, strongest_slab};
use super::{decode, domain, finder, net};
use candle_core::{Device, Tensor};
use keyslice_core::volume::Volume;

use super::decode::{FINDER_RULE, Probabilities, find_lesions};
use super::finder::{FinderConfig, FinderNet, SlabAnswer};
use super::grid::ModelGrid;
use super::net::{OUTPUTS, SliceNet, probabilities_of};
use super::organs::{OrganNet, Reading};
use super::weights::TinyConfig;

/// Organ masks on a grid, `[slab * 4 + organ][pixel]`.
pub type OrganMasks = Vec<Vec<bool>>;

/// The two networks with their configuration.
pub struct TinyModel {
    /// Configuration.
    pub config: TinyConfig,
    /// Reads the volume.
    pub diagnoser: SliceNet,
    /// Reads the key-slice crop.
    pub verifier: SliceNet,
    /// Decides tumor presence per organ and slab (version 2 on).
    pub finder: Option<FinderNet>,
    /// The organ network, when the checkpoint has one.
    pub organs: Option<OrganNet>,
    /// The evidence reader (keyslice-tiny's own verifier), when the checkpoint has one.
    pub evidence: Option<SliceNet>,
    pub(super) device: Device,
}

impl TinyModel {
    /// The device the weights live on.
    #[must_use]
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Per-pixel probabilities of every slab of `grid` (sigmoid for masks, softmax for
    /// the class groups). The network runs only on the in-plane box that holds the body in
    /// any slab (plus a margin, rounded to the network's stride of 8): air costs nothing,
    /// and the position planes keep their values, so the result is that of the whole slab
    /// up to the network's border effects. Outside the box every probability is 0.
    pub fn diagnose_grid(&self, grid: &ModelGrid) -> candle_core::Result<Probabilities> {
        self.diagnose_slabs(grid, &vec![true; grid.slabs])
    }

    /// [`Self::diagnose_grid`] on the slabs where `wanted` is true; the others' channels are
    /// left empty (all zeros, as [`Probabilities`] reads an empty channel).
    pub fn diagnose_slabs(
        &self,
        grid: &ModelGrid,
        wanted: &[bool],
    ) -> candle_core::Result<Probabilities> {
        let n = grid.spec.size;
        let plane = n * n;
        let ([column0, row0], [width, height]) = body_box(grid);
        let channels = self.config.diagnoser_inputs();
        let mut values = vec![vec![Vec::new(); OUTPUTS]; grid.slabs];
        let slabs: Vec<usize> = (0..grid.slabs)
            .filter(|&slab| wanted.get(slab).copied().unwrap_or(false))
            .collect();
        for batch in slabs.chunks(16) {
            let mut inputs = Vec::with_capacity(batch.len() * channels * width * height);
            for &slab in batch {
                let full = diagnoser_input(grid, slab, &self.config.windows);
                for channel in 0..channels {
                    for row in row0..row0 + height {
                        let start = channel * plane + row * n + column0;
                        inputs.extend_from_slice(&full[start..start + width]);
                    }
                }
            }
            let x = Tensor::from_vec(inputs, (batch.len(), channels, height, width), &self.device)?;
            let logits = self.diagnoser.forward(&x)?;
            for (&slab, cropped) in batch.iter().zip(probabilities_of(&logits)?) {
                values[slab] = cropped
                    .into_iter()
                    .map(|channel| {
                        let mut whole = vec![0f32; plane];
                        for row in 0..height {
                            let at = (row0 + row) * n + column0;
                            whole[at..at + width]
                                .copy_from_slice(&channel[row * width..(row + 1) * width]);
                        }
                        whole
                    })
                    .collect();
            }
        }
        Ok(Probabilities {
            size: n,
            pixel_mm: grid.spec.pixel_mm,
            slab_mm: grid.spec.slab_mm,
            values,
        })
    }

    /// The finder's answer for every organ and slab of `fine` (the finder's grid) where the
    /// organ's mask covers at least 4 pixels, and those masks on `fine` (`[slab * 4 +
    /// organ][pixel]`). The masks are the organ network's when the model has one, else the
    /// diagnoser's (`coarse`, on the diagnoser's grid). Empty without a finder.
    pub fn find(
        &self,
        fine: &ModelGrid,
        coarse: &Probabilities,
        reading: Reading,
    ) -> candle_core::Result<(Vec<SlabAnswer>, Vec<Vec<bool>>)> {
        if self.finder.is_none() {
            return Ok((Vec::new(), Vec::new()));
        }
        let masks = self.organ_masks(fine, coarse, reading)?;
        Ok((self.answers(fine, &masks)?, masks))
    }

    /// The finder's answer for every organ and slab of `fine` where the organ's mask in
    /// `masks` (`[slab * 4 + organ][pixel]`) covers at least 4 pixels. Empty without a
    /// finder.
    pub fn answers(
        &self,
        fine: &ModelGrid,
        masks: &[Vec<bool>],
    ) -> candle_core::Result<Vec<SlabAnswer>> {
        let (Some(net), Some(config)) = (&self.finder, &self.config.finder) else {
            return Ok(Vec::new());
        };
        let crop = config.crop.min(fine.spec.size);
        let jobs = finder::jobs(masks, fine.spec.size, crop);
        let mut answers = Vec::with_capacity(jobs.len());
        for batch in jobs.chunks(32) {
            let (x, m, detail) =
                finder::batch_inputs(fine, masks, batch, crop, &self.config.windows, &self.device)?;
            let organs: Vec<usize> = batch.iter().map(|job| job.organ).collect();
            let cells =
                finder::organ_cells(&net.forward(&x, detail.as_ref(), false)?, &organs, &m)?
                    .to_vec2::<f32>()?;
            for (job, row) in batch.iter().zip(cells) {
                answers.push(finder::answer(job, &row, crop));
            }
        }
        Ok(answers)
    }

    /// An analysis with a finder: the lesions on `fine` (the finder's grid), the key slab
    /// (that of the strongest answer kept) and the organ masks the finder worked in. With an organ network the diagnoser (on
    /// `coarse`) runs last, and only on the slabs that hold a lesion: from version 3 the
    /// decoding reads nothing of it but location classes on lesion pixels. `lap` marks the
    /// end of each stage (for the debug log).
    pub(super) fn finder_lesions(
        &self,
        fine: &ModelGrid,
        coarse: &ModelGrid,
        finder: &FinderConfig,
        lap: &mut dyn FnMut(&str),
    ) -> candle_core::Result<(Vec<decode::FoundLesion>, Option<usize>, OrganMasks)> {
        let (masks, diagnosed) = if let Some(organs) = &self.organs {
            let masks =
                organs.masks(fine, &self.config.windows, &self.device, Reading::Alternate)?;
            (masks, None)
        } else {
            let probabilities = self.diagnose_grid(coarse)?;
            let masks = self.organ_masks(fine, &probabilities, Reading::Alternate)?;
            (masks, Some(probabilities))
        };
        lap("organ masks");
        let answers = self.answers(fine, &masks)?;
        lap("finder");
        let grown = grown_lesions(fine, &answers, &masks, finder.thresholds);
        let probabilities = if let Some(probabilities) = diagnosed {
            probabilities
        } else {
            let mut wanted = vec![false; coarse.slabs];
            for lesion in &grown {
                wanted[lesion.slab.min(coarse.slabs.saturating_sub(1))] = true;
            }
            self.diagnose_slabs(coarse, &wanted)?
        };
        lap("diagnoser network");
        let decoded = probabilities_with(fine, &probabilities, &grown, &masks);
        let lesions = find_lesions(&decoded, FINDER_RULE);
        let strongest = strongest_slab(&answers, finder.thresholds, &lesions);
        Ok((lesions, strongest, masks))
    }

    /// The organ masks on `fine` (`[slab * 4 + organ][pixel]`) the finder works in: the organ
    /// network's when the model has one, else the diagnoser's (`coarse`). Empty without a
    /// finder.
    pub fn organ_masks(
        &self,
        fine: &ModelGrid,
        coarse: &Probabilities,
        reading: Reading,
    ) -> candle_core::Result<Vec<Vec<bool>>> {
        let Some(config) = &self.config.finder else {
            return Ok(Vec::new());
        };
        match &self.organs {
            Some(organs) => organs.masks(fine, &self.config.windows, &self.device, reading),
            None => Ok(organ_masks_on(fine, coarse, config.mask_thresholds)),
        }
    }

    /// The figures [`domain::measure`] takes of `volume`, on the finder's grid with the organ
    /// masks drawn there and the lesions found (what calibrating the domain check reads);
    /// `None` for a checkpoint without a finder.
    pub fn domain_figures(&self, volume: &Volume) -> candle_core::Result<Option<Vec<f64>>> {
        let Some(finder) = &self.config.finder else {
            return Ok(None);
        };
        // The grids and the lesions as an analysis finds them: the organ figures leave the
        // lesions out.
        let fine =
            ModelGrid::from_volume(volume, finder.grid).with_detail(volume, finder.detail_factor());
        let coarse = fine
            .pooled(self.config.grid)
            .unwrap_or_else(|| ModelGrid::from_volume(volume, self.config.grid));
        let (lesions, _, masks) = self.finder_lesions(&fine, &coarse, finder, &mut |_| {})?;
        Ok(Some(domain::measure(volume, &fine, &masks, &lesions)))
    }

    /// Per-pixel probabilities (`[channel][pixel]`) of the verifier on one crop, as made by
    /// [`verifier_input`](super::input::verifier_input).
    pub fn verify_crop(&self, crop: &[f32]) -> candle_core::Result<Vec<Vec<f32>>> {
        let c = self.config.crop;
        let x = Tensor::from_vec(
            crop.to_vec(),
            (1, self.config.verifier_inputs(), c, c),
            &self.device,
        )?;
        let logits = self.verifier.forward(&x)?;
        Ok(probabilities_of(&logits)?.remove(0))
    }
}

/// The diagnoser's organ masks (probability ≥ the organ's threshold) resampled (nearest)
/// onto `fine`: `[slab * 4 + organ][pixel]`.
pub(super) fn organ_masks_on(
    fine: &ModelGrid,
    coarse: &Probabilities,
    thresholds: [f32; 4],
) -> Vec<Vec<bool>> {
    let n = fine.spec.size;
    let lookup: Vec<usize> = (0..n)
        .map(|i| coarse_index(i, n, fine.spec.pixel_mm, coarse.size, coarse.pixel_mm))
        .collect();
    let mut masks = Vec::with_capacity(fine.slabs * finder::ORGANS);
    for slab in 0..fine.slabs {
        let values = &coarse.values[slab.min(coarse.values.len().saturating_sub(1))];
        for organ in 0..finder::ORGANS {
            let channel = &values[net::ORGAN.start + organ];
            masks.push(
                (0..n * n)
                    .map(|pixel| {
                        channel[lookup[pixel / n] * coarse.size + lookup[pixel % n]]
                            >= thresholds[organ]
                    })
                    .collect(),
            );
        }
    }
    masks
}
