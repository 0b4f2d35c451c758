//! Pointer and keyboard input of the planes turned into [`ViewerCommand`]s, following PACS
//! habits (see the module above).

use egui::{Key, PointerButton, Rect};

use super::state::{Viewer, ViewerCommand, plane_index};
use crate::render::ViewGeometry;
use crate::render::view::Plane;
use keyslice_core::volume::Volume;

impl Viewer {
    /// Hover read-out, wheel, clicks and drags over a plane.
    #[expect(
        clippy::too_many_arguments,
        reason = "one plane's full context; splitting it hides the flow"
    )]
    pub(super) fn pointer_input(
        &mut self,
        ui: &egui::Ui,
        volume: &Volume,
        plane: Plane,
        rect: Rect,
        geometry: &ViewGeometry,
        response: &egui::Response,
        commands: &mut Vec<ViewerCommand>,
    ) {
        let index = plane_index(plane);
        let spacing = geometry.spacing_mm;
        if let Some(pos) = response.hover_pos() {
            self.active = plane;
            let voxel = self.voxel_at(plane, rect, pos, spacing).map(f64::round);
            if (0..3).all(|axis| voxel[axis] >= 0.0 && voxel[axis] < self.dims[axis] as f64) {
                let voxel = voxel.map(|value| value as usize);
                if let Some(value) = volume.value(voxel) {
                    self.hover = Some((plane, voxel, value));
                }
            }
            let (lines, zoom_lines) = ui.input(|input| wheel_lines(&input.events));
            if zoom_lines != 0.0 {
                // About the cursor: the lesion under it stays under it.
                commands.push(ViewerCommand::ZoomAt {
                    plane,
                    factor: 1.2f64.powf(f64::from(zoom_lines)),
                    at_uv: [
                        f64::from((pos.x - rect.min.x) / rect.width().max(1.0)),
                        f64::from((pos.y - rect.min.y) / rect.height().max(1.0)),
                    ],
                    pane_px: [f64::from(rect.width()), f64::from(rect.height())],
                });
            }
            // One wheel notch is one slice; touchpad pixels add up until they make one.
            self.wheel_remainder += lines;
            let slices = self.wheel_remainder.trunc();
            if slices != 0.0 {
                self.wheel_remainder -= slices;
                commands.push(ViewerCommand::Scroll {
                    plane,
                    slices: f64::from(slices),
                });
            }
        }
        let box_tool = self.box_tool_input(plane, rect, response, spacing, commands)
            || self.paint_input(ui, plane, rect, response, spacing, commands);
        if response.double_clicked() {
            // The double-click's first click moved the crosshair: it goes back.
            if let Some(before) = self.crosshair_before_click.take() {
                commands.push(ViewerCommand::SetCrosshair(before));
            }
            commands.push(ViewerCommand::ToggleEnlarge(plane));
        } else if !box_tool
            && response.clicked_by(PointerButton::Primary)
            && let Some(pos) = response.interact_pointer_pos()
        {
            let voxel = self.voxel_at(plane, rect, pos, spacing);
            if self.ruler {
                commands.push(ViewerCommand::RulerPoint { plane, voxel });
            } else {
                self.crosshair_before_click = Some(self.crosshair);
                commands.push(ViewerCommand::SetCrosshair(voxel));
            }
        }
        if response.dragged_by(PointerButton::Secondary) {
            let delta = response.drag_delta();
            commands.push(ViewerCommand::AdjustWindow {
                width_hu: f64::from(delta.x) * 4.0,
                level_hu: f64::from(-delta.y) * 2.0,
            });
        }
        if response.dragged_by(PointerButton::Middle) {
            let delta = response.drag_delta();
            let mm_per_pixel = self.views[index].mm_per_pixel(
                self.axes[index],
                self.dims,
                spacing,
                geometry.viewport_px,
            );
            commands.push(ViewerCommand::Pan {
                plane,
                mm: [
                    f64::from(delta.x) * mm_per_pixel,
                    f64::from(delta.y) * mm_per_pixel,
                ],
            });
        }
    }

    pub(super) fn keyboard(&self, ui: &egui::Ui, commands: &mut Vec<ViewerCommand>) {
        // Letters and digits typed into a text field (a note, a size) are text, not
        // shortcuts: "3.1 x 2.4" must not switch to the lung window.
        // Nor are keys typed while a menu is open (a path typed into the File menu).
        if ui.ctx().egui_wants_keyboard_input() || egui::Popup::is_any_open(ui.ctx()) {
            return;
        }
        let plane = self.active;
        // In the order pressed: K then ↑ in one frame is the slice above the key slice.
        ui.input(|input| {
            for event in &input.events {
                let egui::Event::Key {
                    key,
                    pressed: true,
                    modifiers,
                    ..
                } = event
                else {
                    continue;
                };
                let command = match key {
                    Key::Num1 => ViewerCommand::Preset(0),
                    Key::Num2 => ViewerCommand::Preset(1),
                    Key::Num3 => ViewerCommand::Preset(2),
                    Key::Num4 => ViewerCommand::Preset(3),
                    Key::Num5 => ViewerCommand::Preset(4),
                    Key::ArrowUp => ViewerCommand::Scroll { plane, slices: 1.0 },
                    Key::ArrowDown => ViewerCommand::Scroll {
                        plane,
                        slices: -1.0,
                    },
                    Key::PageUp => ViewerCommand::Scroll {
                        plane,
                        slices: 10.0,
                    },
                    Key::PageDown => ViewerCommand::Scroll {
                        plane,
                        slices: -10.0,
                    },
                    Key::R => ViewerCommand::Reset,
                    Key::M => ViewerCommand::ToggleRuler,
                    Key::K => ViewerCommand::JumpToKeySlice,
                    Key::B => ViewerCommand::ToggleBoxTool,
                    Key::V if modifiers.shift && self.orbit.is_some() => {
                        ViewerCommand::ToggleRendering
                    }
                    Key::V => ViewerCommand::Toggle3d,
                    Key::OpenBracket if self.brush.is_some() => ViewerCommand::BrushRadius(0.8),
                    Key::CloseBracket if self.brush.is_some() => ViewerCommand::BrushRadius(1.25),
                    _ => continue,
                };
                commands.push(command);
            }
        });
    }
}

/// Wheel movement this frame in lines (one notch of a mouse wheel): `(scroll, zoom)`, zoom
/// being the part with Ctrl/Cmd held. Read from the raw events, not egui's smoothed delta,
/// which spreads one notch over several frames; touchpad points count 40 to a line.
pub(super) fn wheel_lines(events: &[egui::Event]) -> (f32, f32) {
    let mut scroll = 0.0;
    let mut zoom = 0.0;
    for event in events {
        if let egui::Event::MouseWheel {
            unit,
            delta,
            modifiers,
            ..
        } = event
        {
            tracing::trace!(?unit, ?delta, "wheel");
            let lines = match unit {
                egui::MouseWheelUnit::Line => delta.y,
                egui::MouseWheelUnit::Point => delta.y / 40.0,
                egui::MouseWheelUnit::Page => delta.y * 10.0,
            };
            if modifiers.command {
                zoom += lines;
            } else {
                scroll += lines;
            }
        }
    }
    (scroll, zoom)
}
