//! The 3D view in a pane: a maximum intensity projection or a volume rendering of the CT
//! with its lesion masks and the key slice's plane, turned by a left drag (quick preview
//! while turning), zoomed by the wheel, drawn through the paint callback like the planes.

use egui::{Align2, Color32, FontId, Rect, Sense, Vec2};

use super::gpu::OrbitPaint;
use super::input::wheel_lines;
use super::state::{Viewer, ViewerCommand};
use crate::render::orbit::Projection;
use keyslice_core::volume::Volume;

impl Viewer {
    /// Draws the 3D view into `rect` and turns its input into commands.
    pub(super) fn orbit_ui(
        &self,
        ui: &mut egui::Ui,
        volume: &Volume,
        rect: Rect,
        commands: &mut Vec<ViewerCommand>,
    ) {
        let Some(orbit) = self.orbit else {
            return;
        };
        let response = ui.interact(rect, ui.scope_id().with("3d view"), Sense::click_and_drag());
        let view = &self.views[0];
        let projection = Projection {
            dims: self.dims,
            spacing_mm: volume.spacing_mm(),
            step: [1; 3],
            texture_dims: self.dims,
            viewport_px: [f64::from(rect.width()), f64::from(rect.height())],
            window_hu: [view.window_center_hu, view.window_width_hu],
            inverted: volume.info().display_inverted,
            mask_opacity: self.mask_opacity,
            visible_labels: self.visible_labels(),
            key_plane: self.key_slice.map(|slice| (self.axial_axis(), slice)),
            pooled: false,
        };
        ui.painter().add(egui_wgpu::Callback::new_paint_callback(
            rect,
            OrbitPaint { orbit, projection },
        ));
        if response.dragged_by(egui::PointerButton::Primary) {
            let delta = response.drag_delta();
            commands.push(ViewerCommand::Orbit {
                azimuth_deg: f64::from(delta.x) * 0.5,
                elevation_deg: f64::from(delta.y) * 0.5,
                preview: true,
            });
        } else if orbit.preview {
            // Let go: the full projection again.
            commands.push(ViewerCommand::Orbit {
                azimuth_deg: 0.0,
                elevation_deg: 0.0,
                preview: false,
            });
        }
        if response.hovered() {
            let (lines, zoom) = ui.input(|input| wheel_lines(&input.events));
            let notches = lines + zoom;
            if notches != 0.0 {
                commands.push(ViewerCommand::Zoom3d(1.1f64.powf(f64::from(notches))));
            }
        }
        let painter = ui.painter_at(rect);
        let key = if self.key_slice.is_some() {
            " · key slice in yellow"
        } else {
            ""
        };
        painter.text(
            rect.left_top() + Vec2::new(6.0, 4.0),
            Align2::LEFT_TOP,
            format!(
                "3D ({}) · {:.0}° · tilt {:.0}°{key} · drag to turn, V for sagittal",
                orbit.rendering.label(),
                orbit.azimuth_deg,
                orbit.elevation_deg
            ),
            FontId::proportional(13.0),
            Color32::from_rgb(200, 200, 200),
        );
        let other = orbit.rendering.toggled();
        let button = egui::Rect::from_min_size(
            rect.right_bottom() - Vec2::new(118.0, 30.0),
            Vec2::new(112.0, 24.0),
        );
        if ui
            .put(button, egui::Button::new(format!("show {}", other.label())))
            .on_hover_text("Shift+V")
            .clicked()
        {
            commands.push(ViewerCommand::ToggleRendering);
        }
    }
}
