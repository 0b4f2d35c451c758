//! The mask brush over a plane: a drag paints (Shift erases) the lesion being drawn, one
//! [`ViewerCommand::Paint`] per frame the button is held and [`ViewerCommand::PaintEnded`]
//! when it is lifted; its outline follows the pointer at its size in millimetres.

use egui::{Color32, Rect, Stroke};

use super::state::{Viewer, ViewerCommand, plane_index};
use crate::render::view::Plane;

impl Viewer {
    /// Brush input over one plane; whether the brush took the pointer (it is on).
    pub(super) fn paint_input(
        &mut self,
        ui: &egui::Ui,
        plane: Plane,
        rect: Rect,
        response: &egui::Response,
        spacing: [f64; 3],
        commands: &mut Vec<ViewerCommand>,
    ) -> bool {
        if self.brush.is_none() {
            if self.painting.take().is_some() {
                commands.push(ViewerCommand::PaintEnded);
            }
            return false;
        }
        // A stroke starts with a press on this plane and lasts while the button is held,
        // wherever the pointer goes; it paints on the plane it started on.
        let (held, at) =
            ui.input(|input| (input.pointer.primary_down(), input.pointer.latest_pos()));
        if self.painting.is_none() && held && response.is_pointer_button_down_on() {
            self.painting = Some(plane);
        }
        if self.painting == Some(plane) {
            if held {
                if let Some(pos) = at {
                    let erase = ui.input(|input| input.modifiers.shift);
                    commands.push(ViewerCommand::Paint {
                        plane,
                        voxel: self.voxel_at(plane, rect, pos, spacing).map(f64::round),
                        erase,
                    });
                }
            } else {
                self.painting = None;
                commands.push(ViewerCommand::PaintEnded);
            }
        }
        true
    }

    /// The brush's outline where the pointer is, at its radius on this plane.
    pub(super) fn brush_outline(
        &self,
        ui: &egui::Ui,
        plane: Plane,
        rect: Rect,
        spacing: [f64; 3],
        response: &egui::Response,
    ) {
        let (Some(brush), Some(pos)) = (self.brush, response.hover_pos()) else {
            return;
        };
        let index = plane_index(plane);
        let mm_per_pixel = self.views[index].mm_per_pixel(
            self.axes[index],
            self.dims,
            spacing,
            [f64::from(rect.width()), f64::from(rect.height())],
        );
        let radius = (brush.radius_mm / mm_per_pixel.max(1e-6)) as f32;
        let erase = ui.input(|input| input.modifiers.shift);
        let colour = if erase {
            Color32::from_rgb(255, 120, 120)
        } else {
            Color32::from_rgb(0, 255, 128)
        };
        ui.painter_at(rect)
            .circle_stroke(pos, radius, Stroke::new(1.5, colour));
    }
}
