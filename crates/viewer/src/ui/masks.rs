//! A lesion's mask row in the findings editor: draw it with the brush (the brush's size and
//! shape while drawing), grow it from the lesion's box, threshold the box to an HU range,
//! smooth it, keep its largest island,
//! fill between the slices drawn, clear it; what it measures (volume, the axial long axis
//! and its perpendicular, its slices), where the report disagrees with it, and a button that
//! makes those measures the lesion's size and slice range.
//!
//! Returns [`MaskCommand`]s; the app edits the mask and records each change as one
//! correction.

use egui::RichText;

use super::viewport::PaintBrush;
use keyslice_core::findings::Organ;
use keyslice_core::volume::lesion::Measures;

/// A change to a lesion's mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaskOp {
    /// Grow it from the lesion's box (its own evidence, else the key evidence) under the
    /// default HU range, within its organ.
    Grow,
    /// Inside the lesion's box, the voxels within this HU range (both ends included).
    Threshold {
        /// The range's lower end, HU.
        min_hu: i32,
        /// Its upper end, HU.
        max_hu: i32,
    },
    /// Smooth its surface.
    Smooth,
    /// Keep its largest island.
    KeepLargest,
    /// Fill the slices between those drawn, in the plane they were drawn on.
    FillBetween,
    /// Remove it.
    Clear,
}

/// What the mask row asked for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MaskCommand {
    /// Draw this lesion's mask with the brush (`None`: stop drawing).
    Draw(Option<(Organ, usize)>),
    /// The brush's size or shape changed.
    Brush(PaintBrush),
    /// Change a lesion's mask.
    Apply {
        /// The organ.
        organ: Organ,
        /// The lesion's index.
        lesion: usize,
        /// What to do.
        op: MaskOp,
    },
    /// Make the mask's measures the lesion's size and slice range.
    UseMeasures {
        /// The organ.
        organ: Organ,
        /// The lesion's index.
        lesion: usize,
    },
}

/// What the row shows for one lesion.
pub struct MaskRow<'a> {
    /// The lesion.
    pub organ: Organ,
    /// Its index.
    pub lesion: usize,
    /// What its mask measures, when it has one.
    pub measures: Option<&'a Measures>,
    /// Whether this lesion is the one being drawn, with the brush.
    pub drawing: Option<PaintBrush>,
    /// Whether a box to grow from exists (its own evidence box or the key evidence box).
    pub can_grow: bool,
    /// The lesion's size and slices already are the mask's measures.
    pub measured: bool,
    /// Where the lesion's report disagrees with its mask, in words.
    pub disagreements: Vec<String>,
    /// The mask is the one the model found, not changed yet.
    pub from_model: bool,
}

impl MaskRow<'_> {
    /// Draws the row.
    pub fn ui(&self, ui: &mut egui::Ui, commands: &mut Vec<MaskCommand>) {
        let (organ, lesion) = (self.organ, self.lesion);
        let apply = |op| MaskCommand::Apply { organ, lesion, op };
        super::indented_row(ui, 24.0, |ui| {
            if self.from_model {
                ui.label("mask (the model's)").on_hover_text(
                    "the mask the model found: correct it with the brush or the operations; each change is yours",
                );
            } else {
                ui.label("mask");
            }
            match self.drawing {
                Some(_) => {
                    if ui
                        .selectable_label(true, "drawing")
                        .on_hover_text("stop drawing: left drags move the crosshair again")
                        .clicked()
                    {
                        commands.push(MaskCommand::Draw(None));
                    }
                }
                None => {
                    if ui
                        .small_button("draw")
                        .on_hover_text(
                            "paint this lesion's mask: left drag paints, Shift erases, [ and ] size the brush",
                        )
                        .clicked()
                    {
                        commands.push(MaskCommand::Draw(Some((organ, lesion))));
                    }
                }
            }
            if ui
                .add_enabled(self.can_grow, egui::Button::new("grow").small())
                .on_hover_text("grow the mask from the lesion's box, within its organ")
                .on_disabled_hover_text("draw the lesion's box first (B)")
                .clicked()
            {
                commands.push(apply(MaskOp::Grow));
            }
            let has_mask = self.measures.is_some();
            for (label, op, hover) in [
                ("smooth", MaskOp::Smooth, "smooth the mask's surface"),
                (
                    "largest island",
                    MaskOp::KeepLargest,
                    "keep the largest island only",
                ),
                (
                    "fill between",
                    MaskOp::FillBetween,
                    "fill the slices between those drawn, in the plane they were drawn on",
                ),
                ("clear mask", MaskOp::Clear, "remove the mask"),
            ] {
                if ui
                    .add_enabled(has_mask, egui::Button::new(label).small())
                    .on_hover_text(hover)
                    .on_disabled_hover_text("no mask yet: draw or grow one")
                    .clicked()
                {
                    commands.push(apply(op));
                }
            }
        });
        super::indented_row(ui, 36.0, |ui| {
            self.threshold_ui(ui, commands);
        });
        self.measures_ui(ui, commands);
        self.brush_ui(ui, commands);
    }

    /// An HU range (kept per lesion while the window is open) and the button that makes the
    /// mask those voxels of the lesion's box. A range whose ends are swapped is sent as it
    /// is: the edit refuses it and says why.
    fn threshold_ui(&self, ui: &mut egui::Ui, commands: &mut Vec<MaskCommand>) {
        let (organ, lesion) = (self.organ, self.lesion);
        let id = egui::Id::unique("keyslice-mask-threshold").with((organ.key(), lesion));
        let mut range: [i32; 2] = ui.data(|data| data.get_temp(id)).unwrap_or([0, 150]);
        let before = range;
        ui.add(
            egui::DragValue::new(&mut range[0])
                .range(-1024..=3071)
                .suffix(" HU"),
        )
        .on_hover_text("the threshold's lower end");
        ui.label("to");
        ui.add(
            egui::DragValue::new(&mut range[1])
                .range(-1024..=3071)
                .suffix(" HU"),
        )
        .on_hover_text("the threshold's upper end");
        if range != before {
            ui.data_mut(|data| data.insert_temp(id, range));
        }
        if ui
            .add_enabled(self.can_grow, egui::Button::new("threshold").small())
            .on_hover_text("inside the lesion's box, the mask becomes the voxels in this HU range")
            .on_disabled_hover_text("draw the lesion's box first (B)")
            .clicked()
        {
            commands.push(MaskCommand::Apply {
                organ,
                lesion,
                op: MaskOp::Threshold {
                    min_hu: range[0],
                    max_hu: range[1],
                },
            });
        }
    }

    /// What the mask measures, "use as size", and where the report disagrees with it.
    fn measures_ui(&self, ui: &mut egui::Ui, commands: &mut Vec<MaskCommand>) {
        let (organ, lesion) = (self.organ, self.lesion);
        if let Some(measures) = self.measures {
            super::indented_row(ui, 36.0, |ui| {
                ui.label(format!(
                    "{:.2} mL · {:.1} × {:.1} mm · slices {}–{}",
                    measures.volume_ml,
                    measures.long_axis_mm,
                    measures.short_axis_mm,
                    measures.extent[2][0],
                    measures.extent[2][1]
                ));
                if ui
                    .add_enabled(!self.measured, egui::Button::new("use as size").small())
                    .on_hover_text("make these the lesion's size and slice range")
                    .on_disabled_hover_text("the lesion's size and slices are these already")
                    .clicked()
                {
                    commands.push(MaskCommand::UseMeasures { organ, lesion });
                }
            });
            for disagreement in &self.disagreements {
                super::indented_row(ui, 36.0, |ui| {
                    ui.colored_label(
                        egui::Color32::from_rgb(230, 180, 60),
                        format!("the mask disagrees: {disagreement}"),
                    );
                });
            }
        }
    }

    /// The brush's size and shape, while this lesion is drawn.
    fn brush_ui(&self, ui: &mut egui::Ui, commands: &mut Vec<MaskCommand>) {
        if let Some(mut brush) = self.drawing {
            super::indented_row(ui, 36.0, |ui| {
                let (min, max) = PaintBrush::RADIUS_MM;
                let radius = ui.add(
                    egui::Slider::new(&mut brush.radius_mm, min..=max)
                        .logarithmic(true)
                        .suffix(" mm")
                        .text("brush"),
                );
                let ball = ui
                    .checkbox(&mut brush.ball, "ball")
                    .on_hover_text("a ball through the slices instead of a disc on the plane");
                if radius.changed() || ball.changed() {
                    commands.push(MaskCommand::Brush(brush));
                }
                ui.label(RichText::new("Shift erases · [ ] size").weak());
            });
        }
    }
}
