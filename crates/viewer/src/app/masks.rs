//! Lesion masks in the window: the lesion being drawn with the brush (its working mask,
//! painted each frame and shown at once by writing only the box the stroke touched into the
//! label texture), the overlay of every lesion mask of the case over its organ masks, what
//! each mask measures, and the grow, smooth, islands, fill and clear operations. A stroke, or
//! an operation, becomes one correction of the review (the whole mask it left); the overlay
//! and the measures follow the review's masks, so undo, redo and reopening show what was
//! saved. A stroke whose case is no longer the one under review is dropped with a notice,
//! never recorded on another case.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::ui::masks::MaskOp;
use crate::ui::viewport::{PaintBrush, Viewer, ViewerGpu};
use keyslice_core::findings::{Findings, Organ};
use keyslice_core::volume::lesion::{GrowOptions, Measures, VoxelBox, grow_from_box};
use keyslice_core::volume::mask::{
    Brush, Islands, LesionMask, Plane, drawn_plane, fill_between, islands, paint, size_of,
    slices_of, smooth, threshold,
};
use keyslice_core::volume::{LabelVolume, Volume};
use keyslice_review::reviewed::{Field, LesionPart, ReviewedCase};

/// The label value lesion masks are shown with (green in the overlay's colours), which no
/// loaded structure takes.
pub const MASK_LABEL: u8 = keyslice_core::volume::label::DRAWN_MASK_LABEL;
/// The overlay structure name of the lesion masks.
pub const MASK_STRUCTURE: &str = "lesion masks";

/// The lesion masks of the study on screen.
#[derive(Default)]
pub(super) struct LesionMasks {
    /// The case's organ masks as loaded, with the volume (its address) they lie on.
    base: Option<(usize, LabelVolume)>,
    /// The volume (its address) the overlay was last made for.
    volume: usize,
    /// The review's masks the overlay shows.
    shown_masks: BTreeMap<(Organ, usize), LesionMask>,
    /// The overlay: organ masks with every lesion mask over them (kept to write boxes of it
    /// while a stroke is drawn).
    shown: Option<LabelVolume>,
    /// What each mask measures.
    pub(super) measures: BTreeMap<(Organ, usize), Measures>,
    /// The lesion being drawn.
    drawing: Option<Drawing>,
    /// The brush.
    pub(super) brush: PaintBrush,
    /// The lesion whose stroke was just handed to the review: its overlay is on screen
    /// already, so recording it uploads nothing again.
    just_stroked: Option<(Organ, usize)>,
}

/// A lesion being drawn: its case, which lesion, and its mask as the stroke leaves it.
struct Drawing {
    case_id: String,
    target: (Organ, usize),
    mask: Vec<u8>,
    /// Whether the stroke under way changed anything.
    stroked: bool,
    /// Where the stroke under way last painted: the next touch paints the way from there.
    last: Option<[f64; 3]>,
}

fn address(volume: &Arc<Volume>) -> usize {
    Arc::as_ptr(volume) as usize
}

impl LesionMasks {
    /// The case's organ masks arrived for `volume`.
    pub(super) fn set_base(&mut self, volume: &Arc<Volume>, labels: Option<LabelVolume>) {
        self.base = labels.map(|labels| (address(volume), labels));
        // The overlay is made again at the next sync.
        self.shown_masks.clear();
        self.shown = None;
    }

    /// The lesion being drawn, and the brush.
    pub(super) fn drawing(&self) -> Option<((Organ, usize), PaintBrush)> {
        self.drawing
            .as_ref()
            .map(|drawing| (drawing.target, self.brush))
    }

    /// Starts drawing `target` of case `case_id` (from its saved mask), or stops.
    pub(super) fn draw(
        &mut self,
        target: Option<(Organ, usize)>,
        case_id: &str,
        case: &ReviewedCase,
        volume: &Volume,
        viewer: &mut Viewer,
    ) {
        self.drawing = target.map(|target| Drawing {
            case_id: case_id.to_string(),
            target,
            mask: saved_mask(case, target, volume),
            stroked: false,
            last: None,
        });
        viewer.brush = self.drawing.as_ref().map(|_| self.brush);
        if viewer.brush.is_some() {
            viewer.box_tool = false;
            viewer.ruler = false;
        }
    }

    /// Keeps the overlay and the measures in step with the review's masks (after an edit,
    /// an undo, another case), and stops drawing a lesion that no longer exists.
    pub(super) fn sync(
        &mut self,
        render_state: Option<&egui_wgpu::RenderState>,
        volume: &Arc<Volume>,
        viewer: &mut Viewer,
        review: Option<(&str, &ReviewedCase)>,
    ) {
        let empty = BTreeMap::new();
        let masks = review.map_or(&empty, |(_, case)| &case.masks);
        let same_volume = self.volume == address(volume);
        let stroked = self.just_stroked.take();
        // Unchanged: nothing to do (a stroke under way paints over what was saved). A stroke
        // that was not saved is taken off the screen below.
        if same_volume && stroked.is_none() && *masks == self.shown_masks {
            return;
        }
        // The stroke just saved is on screen as it was drawn: only its measures change.
        if let Some(target) = stroked
            && same_volume
            && self.shown.is_some()
            && let Some(saved) = masks.get(&target)
            && masks
                .keys()
                .chain(self.shown_masks.keys())
                .all(|key| *key == target || masks.get(key) == self.shown_masks.get(key))
        {
            self.shown_masks.insert(target, saved.clone());
            match saved.measure(volume.spacing_mm()) {
                Some(measures) => self.measures.insert(target, measures),
                None => self.measures.remove(&target),
            };
            return;
        }
        if !same_volume {
            self.drawing = None;
            viewer.brush = None;
        }
        self.volume = address(volume);
        if self
            .base
            .as_ref()
            .is_some_and(|(owner, _)| *owner != self.volume)
        {
            self.base = None;
        }
        // A lesion drawn goes on from what was saved (an undo takes its stroke away too).
        if let (Some(drawing), Some((case_id, case))) = (&mut self.drawing, review) {
            let exists = drawing.case_id == case_id
                && drawing.target.1 < case.findings.organ(drawing.target.0).lesions.len();
            if exists {
                drawing.mask = saved_mask(case, drawing.target, volume);
            } else {
                self.drawing = None;
                viewer.brush = None;
            }
        }
        self.shown_masks.clone_from(masks);
        self.measures = masks
            .iter()
            .filter(|(_, mask)| mask.dims == volume.dims())
            .filter_map(|(&lesion, mask)| Some((lesion, mask.measure(volume.spacing_mm())?)))
            .collect();
        let had_overlay = self.shown.is_some();
        self.shown = (!masks.is_empty()).then(|| self.overlay(volume));
        if let Some(render_state) = render_state {
            match &self.shown {
                Some(shown) => ViewerGpu::set_labels(render_state, volume.dims(), Some(shown)),
                // The last mask went: the organ masks alone again.
                None if had_overlay => ViewerGpu::set_labels(
                    render_state,
                    volume.dims(),
                    self.base.as_ref().map(|(_, labels)| labels),
                ),
                None => {}
            }
        }
        if self.shown.is_some() {
            show_structure(viewer);
        }
    }

    /// The case's organ masks, or an empty label volume on `volume`'s grid.
    fn base_labels(&self, volume: &Volume) -> LabelVolume {
        self.base.as_ref().map_or_else(
            || LabelVolume {
                name: MASK_STRUCTURE.into(),
                dims: volume.dims(),
                patient_from_voxel: *volume.patient_from_voxel(),
                labels: vec![0; volume.dims().iter().product()],
            },
            |(_, base)| base.clone(),
        )
    }

    /// The organ masks with every saved lesion mask over them.
    fn overlay(&self, volume: &Volume) -> LabelVolume {
        let mut labels = self.base_labels(volume);
        for mask in self.shown_masks.values() {
            if mask.dims != labels.dims {
                continue;
            }
            for (first, length) in mask.inside_runs() {
                labels.labels[first..first + length].fill(MASK_LABEL);
            }
        }
        labels
    }

    /// Paints (or erases) the lesion being drawn at `voxel` of `plane` (by the axis it is
    /// normal to), and shows the box it touched.
    pub(super) fn paint(
        &mut self,
        render_state: Option<&egui_wgpu::RenderState>,
        volume: &Volume,
        viewer: &mut Viewer,
        normal_axis: usize,
        voxel: [f64; 3],
        erase: bool,
    ) {
        let Some(drawing) = &mut self.drawing else {
            return;
        };
        let dims = volume.dims();
        if (0..3).any(|a| voxel[a] < 0.0 || voxel[a] >= dims[a] as f64) {
            return;
        }
        let brush = if self.brush.ball {
            Brush::Ball
        } else {
            Brush::Disc(match normal_axis {
                0 => Plane::Sagittal,
                1 => Plane::Coronal,
                _ => Plane::Axial,
            })
        };
        let spacing = volume.spacing_mm();
        let radius = self.brush.radius_mm;
        // The way from the last touch, in steps of half the brush: a fast drag paints a
        // line, not beads.
        let from = drawing.last.replace(voxel).unwrap_or(voxel);
        let step_voxels =
            (radius / spacing.iter().copied().fold(f64::MAX, f64::min).max(1e-6) / 2.0).max(0.5);
        let length = (0..3)
            .map(|a| (voxel[a] - from[a]).powi(2))
            .sum::<f64>()
            .sqrt();
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a count of steps along a drag inside the CT"
        )]
        let steps = (length / step_voxels).ceil().max(1.0) as usize;
        let mut changed = 0;
        let mut within: Option<VoxelBox> = None;
        for n in 1..=steps {
            let share = n as f64 / steps as f64;
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "between two points checked to lie inside the volume"
            )]
            let centre: [usize; 3] =
                std::array::from_fn(|a| (from[a] + (voxel[a] - from[a]) * share).round() as usize);
            let Ok(count) = paint(
                &mut drawing.mask,
                dims,
                spacing,
                centre,
                radius,
                brush,
                !erase,
            ) else {
                continue;
            };
            changed += count;
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "a reach in voxels, positive and bounded by the CT"
            )]
            let reach: [usize; 3] =
                std::array::from_fn(|a| (radius / spacing[a].max(1e-6)).ceil() as usize);
            let touched = VoxelBox {
                min: std::array::from_fn(|a| centre[a].saturating_sub(reach[a])),
                max: std::array::from_fn(|a| (centre[a] + reach[a]).min(dims[a] - 1)),
            };
            within = Some(within.map_or(touched, |box_| VoxelBox {
                min: std::array::from_fn(|a| box_.min[a].min(touched.min[a])),
                max: std::array::from_fn(|a| box_.max[a].max(touched.max[a])),
            }));
        }
        let Some(within) = within.filter(|_| changed > 0) else {
            return;
        };
        drawing.stroked = true;
        self.show_box(render_state, volume, within);
        show_structure(viewer);
    }

    /// Shows the lesion being drawn inside `within` over the overlay, writing that box of
    /// the label texture.
    fn show_box(
        &mut self,
        render_state: Option<&egui_wgpu::RenderState>,
        volume: &Volume,
        within: VoxelBox,
    ) {
        let Some(drawing) = &self.drawing else {
            return;
        };
        let dims = volume.dims();
        let first_stroke = self.shown.is_none();
        if self.shown.is_none() {
            self.shown = Some(self.base_labels(volume));
        }
        let Some(shown) = self.shown.as_mut() else {
            return;
        };
        for z in within.min[2]..=within.max[2] {
            for y in within.min[1]..=within.max[1] {
                for x in within.min[0]..=within.max[0] {
                    let i = x + dims[0] * (y + dims[1] * z);
                    let base = self.base.as_ref().map_or(0, |(_, labels)| labels.labels[i]);
                    shown.labels[i] = if drawing.mask[i] != 0 {
                        MASK_LABEL
                    } else if shown.labels[i] == MASK_LABEL {
                        base
                    } else {
                        shown.labels[i]
                    };
                }
            }
        }
        if let Some(render_state) = render_state {
            if first_stroke {
                ViewerGpu::set_labels(render_state, dims, Some(shown));
            } else {
                ViewerGpu::update_labels(render_state, shown, within.min, within.max);
            }
        }
    }

    /// The brush was lifted: the mask it left, as the correction to record, when the case
    /// drawn on is still `case_id` (else the stroke is dropped and the reason given).
    pub(super) fn stroke_ended(
        &mut self,
        case_id: Option<&str>,
        dims: [usize; 3],
    ) -> Result<Option<(Field, Value)>, String> {
        let Some(drawing) = &mut self.drawing else {
            return Ok(None);
        };
        drawing.last = None;
        if !std::mem::take(&mut drawing.stroked) {
            return Ok(None);
        }
        if case_id != Some(drawing.case_id.as_str()) {
            let dropped = drawing.case_id.clone();
            self.drawing = None;
            return Err(format!(
                "brush stroke not saved: the case changed while it was drawn ({dropped} is no longer open)"
            ));
        }
        let (organ, lesion) = drawing.target;
        self.just_stroked = Some(drawing.target);
        Ok(Some((
            Field::LesionPart(organ, lesion, LesionPart::Mask),
            mask_value(&drawing.mask, dims),
        )))
    }

    /// `op` on a lesion's saved mask: the correction to record (`None`: nothing changed).
    pub(super) fn apply(
        &self,
        (organ, lesion): (Organ, usize),
        op: MaskOp,
        case: &ReviewedCase,
        volume: &Volume,
        viewer: &Viewer,
    ) -> Result<Option<(Field, Value)>, String> {
        let field = Field::LesionPart(organ, lesion, LesionPart::Mask);
        let dims = volume.dims();
        let mut mask = saved_mask(case, (organ, lesion), volume);
        let changed = match op {
            MaskOp::Clear => {
                return Ok(case
                    .masks
                    .contains_key(&(organ, lesion))
                    .then_some((field, Value::Null)));
            }
            MaskOp::Grow => {
                let within = lesion_box(&case.findings, organ, lesion, volume)
                    .ok_or("the lesion has no box to grow from: draw one with B")?;
                let organ_mask = self.organ_mask(organ, viewer);
                let grown = grow_from_box(
                    volume,
                    within,
                    organ_mask.as_deref(),
                    &GrowOptions::default(),
                )
                .map_err(|error| error.to_string())?;
                mask = grown.mask;
                1
            }
            MaskOp::Threshold { min_hu, max_hu } => {
                let within = lesion_box(&case.findings, organ, lesion, volume)
                    .ok_or("the lesion has no box to threshold in: draw one with B")?;
                #[expect(
                    clippy::cast_precision_loss,
                    reason = "HU are small integers, exact in f32"
                )]
                let hu = (min_hu as f32, max_hu as f32);
                threshold(&mut mask, volume, within, hu).map_err(|e| e.to_string())?
            }
            MaskOp::Smooth => smooth(&mut mask, dims).map_err(|e| e.to_string())?,
            MaskOp::KeepLargest => {
                islands(&mut mask, dims, Islands::KeepLargest).map_err(|e| e.to_string())?
            }
            MaskOp::FillBetween => {
                let plane = drawn_plane(&mask, dims);
                fill_between(&mut mask, dims, volume.spacing_mm(), plane)
                    .map_err(|e| e.to_string())?
            }
        };
        Ok((changed > 0).then(|| (field, mask_value(&mask, dims))))
    }

    /// The organ's mask (one byte per voxel) from the case's organ masks, when loaded.
    fn organ_mask(&self, organ: Organ, viewer: &Viewer) -> Option<Vec<u8>> {
        let (_, base) = self.base.as_ref()?;
        let (_, label, _) = viewer
            .structures
            .iter()
            .find(|(name, _, _)| name == organ.key())?;
        Some(
            base.labels
                .iter()
                .map(|&value| u8::from(value == *label))
                .collect(),
        )
    }

    /// The lesion with its size and slice range from its mask's measures: the value that
    /// makes them the lesion's.
    pub(super) fn measured_lesion(
        &self,
        (organ, lesion): (Organ, usize),
        case: &ReviewedCase,
    ) -> Option<(Field, Value)> {
        let measures = self.measures.get(&(organ, lesion))?;
        let mut updated = case.findings.organ(organ).lesions.get(lesion)?.clone();
        updated.size = Some(size_of(measures));
        if let Some(evidence) = &mut updated.evidence {
            evidence.slices = Some(slices_of(measures));
        }
        Some((Field::Lesion(organ, lesion), json!(updated)))
    }
}

/// The "lesion masks" overlay structure, shown.
fn show_structure(viewer: &mut Viewer) {
    if !viewer
        .structures
        .iter()
        .any(|(_, label, _)| *label == MASK_LABEL)
    {
        viewer
            .structures
            .push((MASK_STRUCTURE.to_string(), MASK_LABEL, true));
    }
}

/// A lesion's saved mask on `volume`'s grid (empty when it has none, or one of another grid).
fn saved_mask(case: &ReviewedCase, target: (Organ, usize), volume: &Volume) -> Vec<u8> {
    case.masks
        .get(&target)
        .and_then(|mask| mask.to_dense(volume.dims()).ok())
        .unwrap_or_else(|| vec![0; volume.dims().iter().product()])
}

/// A mask as the value of its correction.
fn mask_value(mask: &[u8], dims: [usize; 3]) -> Value {
    serde_json::to_value(LesionMask::from_dense(mask, dims)).unwrap_or(Value::Null)
}

/// The lesion's box in voxels: its own evidence's box and slices, else the key evidence's;
/// without a slice range, the key slice with as many slices either side as the box is wide
/// in millimetres.
fn lesion_box(
    findings: &Findings,
    organ: Organ,
    lesion: usize,
    volume: &Volume,
) -> Option<VoxelBox> {
    let own = findings
        .organ(organ)
        .lesions
        .get(lesion)?
        .evidence
        .as_ref()
        .filter(|evidence| evidence.slice_box.is_some());
    let (key, slice_box, slices) = match own {
        Some(evidence) => (
            evidence.key_slice,
            evidence.slice_box.clone()?,
            evidence.slices,
        ),
        None => (
            findings.key_slice.as_ref()?.index,
            findings.slice_box.clone()?,
            findings.lesion_slices,
        ),
    };
    let dims = volume.dims();
    let [c0, r0, c1, r1] = slice_box.voxels;
    let (first, last) = if let Some(range) = slices {
        (range.first as usize, range.last as usize)
    } else {
        let spacing = volume.spacing_mm();
        let half_mm = (f64::from(c1.saturating_sub(c0)) * spacing[0]) / 2.0;
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a count of slices, positive and small"
        )]
        let half = (half_mm / spacing[2].max(1e-6)).round() as usize;
        ((key as usize).saturating_sub(half), key as usize + half)
    };
    let within = VoxelBox {
        min: [c0 as usize, r0 as usize, first],
        max: [
            (c1 as usize).min(dims[0] - 1),
            (r1 as usize).min(dims[1] - 1),
            last.min(dims[2] - 1),
        ],
    };
    (within.min[0] <= within.max[0]
        && within.min[1] <= within.max[1]
        && within.min[2] <= within.max[2])
        .then_some(within)
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyslice_core::findings::{Lesion, TumorPresence};
    use keyslice_core::volume::demo::demo_abdomen;

    fn case_with_a_liver_lesion() -> ReviewedCase {
        let mut findings = Findings::default();
        let liver = findings.organ_mut(Organ::Liver);
        liver.tumor = TumorPresence::Yes;
        liver.lesions.push(Lesion::default());
        ReviewedCase::replay(Some(&findings), &[])
    }

    #[test]
    fn a_stroke_is_recorded_on_its_own_case_only() {
        let volume = demo_abdomen();
        let mut viewer = Viewer::new(&volume);
        let case = case_with_a_liver_lesion();
        let mut masks = LesionMasks::default();
        masks.draw(
            Some((Organ::Liver, 0)),
            "case-1",
            &case,
            &volume,
            &mut viewer,
        );
        assert!(viewer.brush.is_some(), "drawing turns the brush on");
        masks.paint(None, &volume, &mut viewer, 2, [60.0, 60.0, 40.0], false);
        let (field, value) = masks
            .stroke_ended(Some("case-1"), volume.dims())
            .expect("its own case")
            .expect("a stroke");
        assert_eq!(field.path(), "liver.lesions.0.mask");
        let saved: LesionMask = serde_json::from_value(value).expect("a mask");
        assert!(saved.voxels() > 0);
        // Lifting the brush again without painting records nothing.
        assert_eq!(masks.stroke_ended(Some("case-1"), volume.dims()), Ok(None));

        // The case changes under a stroke: it is dropped, with the reason, never recorded.
        masks.paint(None, &volume, &mut viewer, 2, [80.0, 60.0, 40.0], false);
        let refused = masks
            .stroke_ended(Some("case-2"), volume.dims())
            .expect_err("another case");
        assert!(refused.contains("the case changed"), "{refused}");
        assert!(masks.drawing().is_none());
    }

    #[test]
    fn operations_that_cannot_apply_say_why_and_change_nothing() {
        let volume = demo_abdomen();
        let viewer = Viewer::new(&volume);
        let case = case_with_a_liver_lesion();
        let masks = LesionMasks::default();
        // No box to grow from, no mask to smooth or fill.
        let no_box = masks
            .apply((Organ::Liver, 0), MaskOp::Grow, &case, &volume, &viewer)
            .expect_err("no box");
        assert!(no_box.contains("no box"), "{no_box}");
        let empty = masks
            .apply((Organ::Liver, 0), MaskOp::Smooth, &case, &volume, &viewer)
            .expect_err("empty");
        assert!(empty.contains("empty"), "{empty}");
        assert_eq!(
            masks.apply((Organ::Liver, 0), MaskOp::Clear, &case, &volume, &viewer),
            Ok(None),
            "nothing to clear"
        );
        let threshold = MaskOp::Threshold {
            min_hu: 0,
            max_hu: 150,
        };
        let no_box = masks
            .apply((Organ::Liver, 0), threshold, &case, &volume, &viewer)
            .expect_err("no box");
        assert!(no_box.contains("no box to threshold"), "{no_box}");
    }

    #[test]
    fn a_threshold_keeps_the_boxs_voxels_in_the_range_and_refuses_a_swapped_one() {
        use keyslice_core::findings::{Evidence, SliceBox};
        let volume = demo_abdomen();
        let viewer = Viewer::new(&volume);
        let mut findings = Findings::default();
        let liver = findings.organ_mut(Organ::Liver);
        liver.tumor = TumorPresence::Yes;
        liver.lesions.push(Lesion {
            evidence: Some(Evidence {
                key_slice: 40,
                slice_box: Some(SliceBox {
                    voxels: [50, 50, 70, 70],
                    mm: None,
                }),
                slices: None,
            }),
            ..Lesion::default()
        });
        let case = ReviewedCase::replay(Some(&findings), &[]);
        let masks = LesionMasks::default();
        let everything = MaskOp::Threshold {
            min_hu: -1024,
            max_hu: 3071,
        };
        let (field, value) = masks
            .apply((Organ::Liver, 0), everything, &case, &volume, &viewer)
            .expect("applies")
            .expect("a change");
        assert_eq!(field.path(), "liver.lesions.0.mask");
        let mask: LesionMask = serde_json::from_value(value).expect("a mask");
        let dense = mask.to_dense(volume.dims()).expect("on the CT's grid");
        let bounds = keyslice_core::volume::mask::bounds(&dense, volume.dims()).expect("not empty");
        // The whole box, columns and rows 50–70, and nothing beyond it.
        assert_eq!((bounds.min[0], bounds.max[0]), (50, 70), "{bounds:?}");
        assert_eq!((bounds.min[1], bounds.max[1]), (50, 70), "{bounds:?}");
        assert!(bounds.min[2] <= 40 && bounds.max[2] >= 40, "{bounds:?}");
        let swapped = MaskOp::Threshold {
            min_hu: 200,
            max_hu: -100,
        };
        let refused = masks
            .apply((Organ::Liver, 0), swapped, &case, &volume, &viewer)
            .expect_err("an empty range");
        assert!(refused.contains("min must not exceed max"), "{refused}");
    }
}
