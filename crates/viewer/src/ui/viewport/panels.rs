//! The viewer's side panels: window presets and overlay opacity, the key slice, the
//! structures of the mask overlay.

use egui::{Sense, Vec2};

use super::draw::label_colour;
use super::state::{Viewer, ViewerCommand, plane_name};
use crate::render::view::Plane;

impl Viewer {
    /// The side panel: the ruler and its measurements, then the overlay structures.
    #[must_use]
    pub fn side_panel_ui(&self, ui: &mut egui::Ui) -> Vec<ViewerCommand> {
        let mut commands = Vec::new();
        ui.heading("Measurements");
        let mut ruler = self.ruler;
        if ui.toggle_value(&mut ruler, "Ruler (M)").changed() {
            commands.push(ViewerCommand::ToggleRuler);
        }
        if self.measurements.is_empty() {
            ui.label(if self.ruler {
                "Click two points on a plane."
            } else {
                "None yet."
            });
        }
        let mut box_tool = self.box_tool;
        if ui.toggle_value(&mut box_tool, "Evidence box (B)").changed() {
            commands.push(ViewerCommand::ToggleBoxTool);
        }
        if self.box_tool {
            ui.label(
                "Drag on the axial plane: a new box, or move it or a corner on the key slice;                  drag the extent's end on coronal or sagittal: its slice range.",
            );
        }
        for (index, measurement) in self.measurements.iter().enumerate() {
            ui.horizontal(|ui| {
                ui.label(format!(
                    "{} slice {}: {:.1} mm",
                    plane_name(measurement.plane),
                    measurement.slice as usize,
                    measurement.length_mm
                ));
                if ui.small_button("delete").clicked() {
                    commands.push(ViewerCommand::DeleteMeasurement(index));
                }
            });
        }
        ui.separator();
        commands.extend(self.key_slice_ui(ui));
        ui.separator();
        commands.extend(self.structures_ui(ui));
        commands
    }

    /// The key slice and lesion extents: where they are, and buttons to go there.
    #[must_use]
    pub fn key_slice_ui(&self, ui: &mut egui::Ui) -> Vec<ViewerCommand> {
        let mut commands = Vec::new();
        ui.heading("Key slice");
        match self.key_slice {
            Some(slice) => {
                ui.horizontal(|ui| {
                    ui.label(format!("axial slice {}", slice as usize));
                    if ui.small_button("go (K)").clicked() {
                        commands.push(ViewerCommand::JumpToKeySlice);
                    }
                });
                if let Some(source) = &self.key_slice_source {
                    ui.small(source.as_str());
                }
            }
            None => {
                ui.label("None set.");
            }
        }
        for mark in &self.lesion_marks {
            ui.horizontal(|ui| {
                let (swatch, _) = ui.allocate_exact_size(Vec2::new(4.0, 12.0), Sense::hover());
                ui.painter()
                    .rect_filled(swatch, 1.0, label_colour(mark.label));
                ui.label(format!(
                    "{}: axial slices {}–{}",
                    mark.name, mark.first_slice, mark.last_slice
                ));
                if ui.small_button("go").clicked() {
                    commands.push(ViewerCommand::SetSlice {
                        plane: Plane::Axial,
                        slice: usize::midpoint(mark.first_slice, mark.last_slice) as f64,
                    });
                }
            });
        }
        commands
    }

    /// The overlay section: one checkbox per structure in its colour, and the opacity.
    #[must_use]
    pub fn structures_ui(&self, ui: &mut egui::Ui) -> Vec<ViewerCommand> {
        let mut commands = Vec::new();
        ui.heading("Structures");
        if self.structures.is_empty() {
            ui.label("No masks loaded.");
            return commands;
        }
        let mut opacity = self.mask_opacity;
        if ui
            .add(egui::Slider::new(&mut opacity, 0.0..=1.0).text("opacity"))
            .changed()
        {
            commands.push(ViewerCommand::SetOpacity(opacity));
        }
        for (name, label, shown) in &self.structures {
            ui.horizontal(|ui| {
                let (swatch, _) = ui.allocate_exact_size(Vec2::splat(12.0), Sense::hover());
                ui.painter().rect_filled(swatch, 2.0, label_colour(*label));
                let mut visible = *shown;
                if ui.checkbox(&mut visible, name.as_str()).changed() {
                    commands.push(ViewerCommand::ToggleStructure(*label));
                }
            });
        }
        commands
    }
}
