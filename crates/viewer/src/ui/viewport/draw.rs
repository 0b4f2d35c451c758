//! Drawing the planes: the layout of the three views, each plane's image through the paint
//! callback, its slice bar, and the overlays (crosshair, orientation letters, ruler,
//! slice numbers).

use egui::{Align2, Color32, FontId, Pos2, Rect, Sense, Stroke, Vec2};

use super::gpu::SlicePaint;
use super::state::{Viewer, ViewerCommand, plane_index, plane_name};
use crate::render::ViewGeometry;
use crate::render::view::Plane;
use keyslice_core::volume::Volume;
use keyslice_core::volume::geometry::dominant_letter;

impl Viewer {
    /// Draws the planes and the status line; returns the user's commands.
    #[must_use]
    pub fn viewer_ui(&mut self, ui: &mut egui::Ui, volume: &Volume) -> Vec<ViewerCommand> {
        let mut commands = Vec::new();
        let status_height = 22.0;
        let full = ui.available_rect_before_wrap();
        let area = Rect::from_min_max(full.min, Pos2::new(full.max.x, full.max.y - status_height));
        let rects: Vec<(Plane, Rect)> = if let Some(plane) = self.enlarged {
            vec![(plane, area)]
        } else {
            // Axial large on the left; coronal and sagittal stacked on the right.
            let split = area.min.x + area.width() * 0.6;
            let middle = area.center().y;
            vec![
                (
                    Plane::Axial,
                    Rect::from_min_max(area.min, Pos2::new(split - 2.0, area.max.y)),
                ),
                (
                    Plane::Coronal,
                    Rect::from_min_max(
                        Pos2::new(split + 2.0, area.min.y),
                        Pos2::new(area.max.x, middle - 2.0),
                    ),
                ),
                (
                    Plane::Sagittal,
                    Rect::from_min_max(Pos2::new(split + 2.0, middle + 2.0), area.max),
                ),
            ]
        };
        let spacing = volume.spacing_mm();
        self.hover = None;
        for (plane, rect) in rects {
            // The 3D view takes the sagittal plane's place while it is on.
            if plane == Plane::Sagittal && self.orbit.is_some() && self.enlarged.is_none() {
                self.orbit_ui(ui, volume, rect, &mut commands);
            } else {
                self.plane_ui(ui, volume, plane, rect, spacing, &mut commands);
            }
        }
        self.keyboard(ui, &mut commands);
        let status_rect =
            Rect::from_min_max(Pos2::new(full.min.x, full.max.y - status_height), full.max);
        ui.painter().text(
            status_rect.left_center() + Vec2::new(6.0, 0.0),
            Align2::LEFT_CENTER,
            self.status_text(volume),
            FontId::monospace(13.0),
            ui.visuals().text_color(),
        );
        ui.allocate_rect(full, Sense::hover());
        commands
    }

    pub(super) fn plane_ui(
        &mut self,
        ui: &mut egui::Ui,
        volume: &Volume,
        plane: Plane,
        rect: Rect,
        spacing: [f64; 3],
        commands: &mut Vec<ViewerCommand>,
    ) {
        let index = plane_index(plane);
        let response = ui.interact(
            rect,
            ui.scope_id().with(("plane", index)),
            Sense::click_and_drag(),
        );
        let geometry = ViewGeometry {
            axes: self.axes[index],
            dims: self.dims,
            spacing_mm: spacing,
            viewport_px: [f64::from(rect.width()), f64::from(rect.height())],
            inverted: volume.info().display_inverted,
            mask_opacity: self.mask_opacity,
            visible_labels: self.visible_labels(),
        };
        ui.painter().add(egui_wgpu::Callback::new_paint_callback(
            rect,
            SlicePaint {
                plane,
                view: self.views[index],
                geometry,
            },
        ));
        self.overlays_ui(ui, volume, plane, rect, spacing);
        self.evidence_overlay(ui, plane, rect, spacing);
        self.brush_outline(ui, plane, rect, spacing, &response);
        self.pointer_input(ui, volume, plane, rect, &geometry, &response, commands);
        self.slice_bar_ui(ui, plane, rect, commands);
    }

    /// A slice bar along the right edge of a plane: the position of the current slice
    /// (superior at the top for axial), the key slice as a mark, drag or click to move.
    pub(super) fn slice_bar_ui(
        &self,
        ui: &egui::Ui,
        plane: Plane,
        rect: Rect,
        commands: &mut Vec<ViewerCommand>,
    ) {
        let index = plane_index(plane);
        let count = self.dims[self.axes[index].normal].max(1);
        let bar = Rect::from_min_max(
            Pos2::new(rect.max.x - 12.0, rect.min.y + 26.0),
            Pos2::new(rect.max.x - 5.0, rect.max.y - 26.0),
        );
        if bar.height() < 20.0 || count < 2 {
            return;
        }
        let last = (count - 1) as f32;
        // Higher slice indices at the top, as for the superior end of an axial stack.
        let y_of = |slice: f64| bar.max.y - (slice as f32 / last) * bar.height();
        let painter = ui.painter_at(rect);
        painter.rect_filled(bar, 3.0, Color32::from_rgba_unmultiplied(90, 90, 90, 170));
        if plane == Plane::Axial {
            // Each lesion structure's extent as a coloured stripe left of the bar.
            for (n, mark) in self.lesion_marks.iter().enumerate() {
                let x = bar.min.x - 5.0 - 4.0 * (n % 3) as f32;
                painter.line_segment(
                    [
                        Pos2::new(x, y_of(mark.first_slice as f64) + 1.0),
                        Pos2::new(x, y_of(mark.last_slice as f64) - 1.0),
                    ],
                    Stroke::new(3.0, label_colour(mark.label)),
                );
            }
        }
        if plane == Plane::Axial
            && let Some(key) = self.key_slice
        {
            let y = y_of(key);
            painter.line_segment(
                [Pos2::new(bar.min.x - 4.0, y), Pos2::new(bar.max.x + 2.0, y)],
                Stroke::new(2.0, Color32::from_rgb(255, 80, 80)),
            );
        }
        let thumb = y_of(self.views[index].slice);
        painter.rect_filled(
            Rect::from_center_size(
                Pos2::new(bar.center().x, thumb),
                Vec2::new(bar.width() + 2.0, 6.0),
            ),
            2.0,
            Color32::from_rgb(80, 200, 255),
        );
        let response = ui.interact(
            bar,
            ui.scope_id().with(("slice-bar", index)),
            Sense::click_and_drag(),
        );
        if (response.clicked() || response.dragged())
            && let Some(pos) = response.interact_pointer_pos()
        {
            let fraction = ((bar.max.y - pos.y) / bar.height()).clamp(0.0, 1.0);
            commands.push(ViewerCommand::SetSlice {
                plane,
                slice: f64::from((fraction * last).round()),
            });
        }
    }

    /// Crosshair, orientation letters and the slice number over a plane.
    pub(super) fn overlays_ui(
        &self,
        ui: &egui::Ui,
        volume: &Volume,
        plane: Plane,
        rect: Rect,
        spacing: [f64; 3],
    ) {
        let index = plane_index(plane);
        let painter = ui.painter_at(rect);
        let centre = self.point_of(plane, rect, self.crosshair, spacing);
        let stroke = Stroke::new(1.0, Color32::from_rgba_unmultiplied(80, 200, 255, 140));
        painter.line_segment(
            [
                Pos2::new(rect.min.x, centre.y),
                Pos2::new(rect.max.x, centre.y),
            ],
            stroke,
        );
        painter.line_segment(
            [
                Pos2::new(centre.x, rect.min.y),
                Pos2::new(centre.x, rect.max.y),
            ],
            stroke,
        );
        // Measurements on this slice of this plane.
        let ruler_stroke = Stroke::new(2.0, Color32::from_rgb(120, 255, 120));
        let mut placed: Vec<egui::Rect> = Vec::new();
        for measurement in &self.measurements {
            if measurement.plane == plane
                && (measurement.slice - self.views[index].slice).abs() < 0.5
            {
                let a = self.point_of(plane, rect, measurement.from, spacing);
                let b = self.point_of(plane, rect, measurement.to, spacing);
                painter.line_segment([a, b], ruler_stroke);
                let colour = Color32::from_rgb(120, 255, 120);
                let galley = painter.layout_no_wrap(
                    format!("{:.1} mm", measurement.length_mm),
                    FontId::proportional(13.0),
                    colour,
                );
                let at = ruler_label_rect(a, b, galley.size(), rect, &placed);
                placed.push(at);
                label_box(&painter, at, galley, colour);
            }
        }
        if let Some((start_plane, from)) = self.ruler_start
            && start_plane == plane
        {
            painter.circle_filled(
                self.point_of(plane, rect, from, spacing),
                3.0,
                Color32::from_rgb(120, 255, 120),
            );
        }
        self.letters_and_title_ui(&painter, volume, plane, rect);
    }

    /// The orientation letters on each edge, from the volume's real axes, and the plane's
    /// title with its slice number.
    fn letters_and_title_ui(
        &self,
        painter: &egui::Painter,
        volume: &Volume,
        plane: Plane,
        rect: Rect,
    ) {
        let index = plane_index(plane);
        // Letters from the volume's real axis directions: the patient side each edge faces.
        let directions = volume.directions_lps();
        let letter = |(axis, backwards): (usize, bool), towards_higher_screen: bool| {
            let sign = if backwards == towards_higher_screen {
                -1.0
            } else {
                1.0
            };
            dominant_letter(directions[axis].map(|value| value * sign)).to_string()
        };
        let font = FontId::proportional(14.0);
        let colour = Color32::from_rgb(255, 210, 90);
        let count = self.dims[self.axes[index].normal];
        // Slice numbers are 0-based indices, as in the report, the CLI and exports.
        let title = format!(
            "{} {} of 0–{}",
            plane_name(plane),
            self.views[index].slice as usize,
            count.saturating_sub(1)
        );
        let title_font = FontId::proportional(13.0);
        // The top letter moves below the title when a narrow plane would put them together.
        let title_right = rect.left()
            + 6.0
            + painter
                .layout_no_wrap(title.clone(), title_font.clone(), Color32::WHITE)
                .size()
                .x;
        let top_letter_y = if title_right + 10.0 > rect.center().x - 8.0 {
            24.0
        } else {
            4.0
        };
        let horizontal = self.axes[index].horizontal;
        let vertical = self.axes[index].vertical;
        let edges = [
            (
                rect.left_center() + Vec2::new(6.0, 0.0),
                Align2::LEFT_CENTER,
                letter(horizontal, false),
            ),
            (
                rect.right_center() - Vec2::new(20.0, 0.0), // clear of the slice bar
                Align2::RIGHT_CENTER,
                letter(horizontal, true),
            ),
            (
                rect.center_top() + Vec2::new(0.0, top_letter_y),
                Align2::CENTER_TOP,
                letter(vertical, false),
            ),
            (
                rect.center_bottom() - Vec2::new(0.0, 4.0),
                Align2::CENTER_BOTTOM,
                letter(vertical, true),
            ),
        ];
        for (position, anchor, text) in edges {
            label(painter, position, anchor, text, font.clone(), colour);
        }
        label(
            painter,
            rect.left_top() + Vec2::new(6.0, 4.0),
            Align2::LEFT_TOP,
            title,
            title_font,
            Color32::from_gray(230),
        );
    }
}

/// The overlay colour of a label value, as the shader draws it.
pub(super) fn label_colour(label: u8) -> Color32 {
    let [r, g, b, _] = crate::render::LABEL_COLOURS[usize::from(label).min(15)];
    Color32::from_rgb((r * 255.0) as u8, (g * 255.0) as u8, (b * 255.0) as u8)
}

/// Text on a dark backing, readable over any window/level.
/// Where a ruler's length label goes: beyond the ruler's end `b` (away from `a`), inside
/// the pane `pane`, and below any label already `placed` that it would cover, so two
/// rulers' figures never print over each other.
pub(super) fn ruler_label_rect(
    a: Pos2,
    b: Pos2,
    text: Vec2,
    pane: egui::Rect,
    placed: &[egui::Rect],
) -> egui::Rect {
    let size = text + Vec2::splat(4.0);
    let along = (b - a).normalized();
    let anchor = if along.x >= 0.0 {
        Align2::LEFT_CENTER
    } else {
        Align2::RIGHT_CENTER
    };
    let start = b + Vec2::new(if along.x >= 0.0 { 8.0 } else { -8.0 }, 0.0);
    let mut at = anchor.anchor_size(start, size);
    for _ in 0..=placed.len() {
        let inside = egui::Rect::from_min_size(
            at.min.clamp(pane.min, (pane.max - size).max(pane.min)),
            size,
        );
        match placed.iter().find(|other| other.intersects(inside)) {
            Some(other) => {
                at = inside.translate(Vec2::new(0.0, other.bottom() - inside.top() + 2.0));
            }
            None => return inside,
        }
    }
    at
}

pub(super) fn label(
    painter: &egui::Painter,
    position: Pos2,
    anchor: Align2,
    text: String,
    font: FontId,
    colour: Color32,
) {
    let galley = painter.layout_no_wrap(text, font, colour);
    let rect = anchor.anchor_size(position, galley.size()).expand(2.0);
    label_box(painter, rect, galley, colour);
}

/// Text laid out as `galley` on a dark box `rect` (the text's size and 2 points around it).
fn label_box(
    painter: &egui::Painter,
    rect: egui::Rect,
    galley: std::sync::Arc<egui::Galley>,
    colour: Color32,
) {
    painter.rect_filled(rect, 3.0, Color32::from_black_alpha(150));
    painter.galley(rect.min + Vec2::splat(2.0), galley, colour);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ruler_labels_that_would_cover_each_other_are_stacked_inside_the_pane() {
        let pane = egui::Rect::from_min_size(Pos2::ZERO, Vec2::new(400.0, 300.0));
        let text = Vec2::new(50.0, 14.0);
        // Two rulers ending at the same point, and a third at the pane's right edge.
        let first = ruler_label_rect(
            Pos2::new(100.0, 100.0),
            Pos2::new(200.0, 100.0),
            text,
            pane,
            &[],
        );
        let second = ruler_label_rect(
            Pos2::new(200.0, 50.0),
            Pos2::new(200.0, 100.0),
            text,
            pane,
            &[first],
        );
        assert!(!first.intersects(second), "{first:?} {second:?}");
        let edge = ruler_label_rect(
            Pos2::new(300.0, 200.0),
            Pos2::new(398.0, 200.0),
            text,
            pane,
            &[first, second],
        );
        assert!(pane.contains_rect(edge), "{edge:?}");
        // A ruler drawn leftwards has its figure on its left.
        let left = ruler_label_rect(
            Pos2::new(300.0, 250.0),
            Pos2::new(200.0, 250.0),
            text,
            pane,
            &[],
        );
        assert!(left.right() < 200.0, "{left:?}");
    }
}
