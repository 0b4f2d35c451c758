//! Draws a [`Chart`] with egui's painter: in a panel ([`chart_ui`]), and into a PNG image
//! with the very same drawing ([`chart_image`]): egui lays the chart out without a window,
//! and its triangles are filled on the CPU, so a headless `study report` writes the figure
//! a reader sees in the app, on a machine without a GPU. Knows charts, not studies.

use egui::epaint::{ClippedPrimitive, Primitive};
use egui::{Align2, Color32, FontId, Pos2, Rect, Shape, Vec2, pos2, vec2};
use keyslice_core::chart::{Anchor, Chart, Hue, Mark, Stroke};

/// The paper the chart is drawn on: white, as on a printed page, in the app as in the PNG.
const PAPER: Color32 = Color32::WHITE;
/// Text and emphasised marks.
const INK: Color32 = Color32::from_rgb(0x20, 0x20, 0x20);
/// References and the frame.
const GREY: Color32 = Color32::from_rgb(0x99, 0x99, 0x99);
/// Okabe and Ito's palette, without its yellow (too faint on white).
const PALETTE: [Color32; 6] = [
    Color32::from_rgb(0x00, 0x72, 0xB2),
    Color32::from_rgb(0xD5, 0x5E, 0x00),
    Color32::from_rgb(0x00, 0x9E, 0x73),
    Color32::from_rgb(0xCC, 0x79, 0xA7),
    Color32::from_rgb(0xE6, 0x9F, 0x00),
    Color32::from_rgb(0x56, 0xB4, 0xE9),
];

fn colour(hue: Hue) -> Color32 {
    match hue {
        Hue::Series(index) => PALETTE[index % PALETTE.len()],
        Hue::Grey => GREY,
        Hue::Ink => INK,
    }
}

fn stroke_of(stroke: Stroke) -> egui::Stroke {
    egui::Stroke::new(stroke.width, colour(stroke.hue))
}

/// Draws `chart` into the space left in `ui`.
pub fn chart_ui(ui: &mut egui::Ui, chart: &Chart) {
    let (rect, _) = ui.allocate_exact_size(ui.available_size(), egui::Sense::hover());
    paint(ui.painter(), rect, chart);
}

/// Paints `chart` into `rect`.
pub fn paint(painter: &egui::Painter, rect: Rect, chart: &Chart) {
    let painter = painter.with_clip_rect(rect);
    painter.rect_filled(rect, 0.0, PAPER);
    let title_font = FontId::proportional(16.0);
    let font = FontId::proportional(12.0);
    let line_height = 15.0;
    let rect = rect.shrink(10.0);
    painter.text(
        rect.center_top(),
        Align2::CENTER_TOP,
        &chart.title,
        title_font,
        INK,
    );
    // The tick labels' widest text sets the left margin.
    let widest = chart
        .y
        .ticks
        .iter()
        .map(|(_, text)| {
            painter
                .layout_no_wrap(text.clone(), font.clone(), INK)
                .size()
                .x
        })
        .fold(0.0_f32, f32::max);
    let y_title = if chart.y.title.is_empty() { 0.0 } else { 18.0 };
    #[expect(clippy::cast_precision_loss, reason = "a few caption lines")]
    let caption_height = chart.caption.len() as f32 * line_height;
    let plot = Rect::from_min_max(
        pos2(rect.left() + y_title + widest + 8.0, rect.top() + 28.0),
        pos2(
            rect.right() - 48.0,
            rect.bottom() - 40.0 - caption_height - 4.0,
        ),
    );
    if plot.width() < 20.0 || plot.height() < 20.0 {
        return;
    }
    let to_screen = |[x, y]: [f64; 2]| -> Pos2 {
        #[expect(clippy::cast_possible_truncation, reason = "screen coordinates")]
        pos2(
            plot.left() + plot.width() * chart.x.fraction(x) as f32,
            plot.bottom() - plot.height() * chart.y.fraction(y) as f32,
        )
    };
    painter.rect_stroke(
        plot,
        0.0,
        egui::Stroke::new(1.0, GREY),
        egui::StrokeKind::Middle,
    );
    for (value, text) in &chart.x.ticks {
        let at = to_screen([*value, chart.y.min]);
        painter.line_segment([at, at + vec2(0.0, 4.0)], egui::Stroke::new(1.0, GREY));
        painter.text(
            at + vec2(0.0, 6.0),
            Align2::CENTER_TOP,
            text,
            font.clone(),
            INK,
        );
    }
    for (value, text) in &chart.y.ticks {
        let at = to_screen([chart.x.min, *value]);
        painter.line_segment([at, at - vec2(4.0, 0.0)], egui::Stroke::new(1.0, GREY));
        painter.text(
            at - vec2(6.0, 0.0),
            Align2::RIGHT_CENTER,
            text,
            font.clone(),
            INK,
        );
    }
    painter.text(
        pos2(plot.center().x, plot.bottom() + 22.0),
        Align2::CENTER_TOP,
        &chart.x.title,
        font.clone(),
        INK,
    );
    if !chart.y.title.is_empty() {
        let galley = painter.layout_no_wrap(chart.y.title.clone(), font.clone(), INK);
        let at = pos2(rect.left(), plot.center().y + galley.size().x / 2.0);
        painter.add(
            egui::epaint::TextShape::new(at, galley, INK).with_angle(-std::f32::consts::FRAC_PI_2),
        );
    }
    let marks_painter = painter.with_clip_rect(plot.expand(6.0));
    for mark in &chart.marks {
        mark_shapes(&marks_painter, mark, &to_screen, &font);
    }
    legend(&painter, plot, chart, &font);
    caption(&painter, rect, chart, line_height);
}

/// The caption's lines at the bottom of `rect`.
fn caption(painter: &egui::Painter, rect: Rect, chart: &Chart, line_height: f32) {
    #[expect(clippy::cast_precision_loss, reason = "a few caption lines")]
    let caption_height = chart.caption.len() as f32 * line_height;
    let small = FontId::proportional(11.0);
    for (index, line) in chart.caption.iter().enumerate() {
        #[expect(clippy::cast_precision_loss, reason = "a few caption lines")]
        let y = rect.bottom() - caption_height + index as f32 * line_height;
        painter.text(
            pos2(rect.left(), y),
            Align2::LEFT_TOP,
            line,
            small.clone(),
            INK,
        );
    }
}

fn mark_shapes(
    painter: &egui::Painter,
    mark: &Mark,
    to_screen: &impl Fn([f64; 2]) -> Pos2,
    font: &FontId,
) {
    match mark {
        Mark::Line { points, stroke } => {
            let points: Vec<Pos2> = points.iter().map(|point| to_screen(*point)).collect();
            line(painter, points, *stroke);
        }
        Mark::Segment { from, to, stroke } => {
            line(painter, vec![to_screen(*from), to_screen(*to)], *stroke);
        }
        Mark::Points {
            points,
            radius,
            hue,
        } => {
            for point in points {
                painter.circle_filled(to_screen(*point), *radius, colour(*hue));
            }
        }
        Mark::Label { at, text, anchor } => {
            let align = match anchor {
                Anchor::Left => Align2::LEFT_CENTER,
                Anchor::Right => Align2::RIGHT_CENTER,
            };
            painter.text(to_screen(*at), align, text, font.clone(), INK);
        }
    }
}

fn line(painter: &egui::Painter, points: Vec<Pos2>, stroke: Stroke) {
    if stroke.dashed {
        painter.extend(Shape::dashed_line(&points, stroke_of(stroke), 6.0, 4.0));
    } else {
        painter.add(Shape::line(points, stroke_of(stroke)));
    }
}

fn legend(painter: &egui::Painter, plot: Rect, chart: &Chart, font: &FontId) {
    if chart.legend.is_empty() {
        return;
    }
    let widest = chart
        .legend
        .iter()
        .map(|entry| {
            painter
                .layout_no_wrap(entry.text.clone(), font.clone(), INK)
                .size()
                .x
        })
        .fold(0.0_f32, f32::max);
    #[expect(clippy::cast_precision_loss, reason = "a few legend entries")]
    let size = vec2(widest + 40.0, chart.legend.len() as f32 * 16.0 + 8.0);
    // Bottom right: where ROC curves and time dots leave room.
    let frame = Rect::from_min_size(plot.right_bottom() - size - Vec2::splat(8.0), size);
    painter.rect_filled(frame, 2.0, PAPER);
    painter.rect_stroke(
        frame,
        2.0,
        egui::Stroke::new(1.0, GREY),
        egui::StrokeKind::Middle,
    );
    for (index, entry) in chart.legend.iter().enumerate() {
        #[expect(clippy::cast_precision_loss, reason = "a few legend entries")]
        let y = frame.top() + 12.0 + index as f32 * 16.0;
        let start = pos2(frame.left() + 6.0, y);
        line(painter, vec![start, start + vec2(22.0, 0.0)], entry.stroke);
        painter.text(
            start + vec2(28.0, 0.0),
            Align2::LEFT_CENTER,
            &entry.text,
            font.clone(),
            INK,
        );
    }
}

/// `chart` drawn at `size` points and `pixels_per_point`, as an RGBA image: laid out by egui
/// without a window, its triangles filled on the CPU.
#[must_use]
pub fn chart_image(chart: &Chart, size: Vec2, pixels_per_point: f32) -> image::RgbaImage {
    let ctx = egui::Context::default();
    let mut input = egui::RawInput {
        screen_rect: Some(Rect::from_min_size(Pos2::ZERO, size)),
        ..egui::RawInput::default()
    };
    input
        .viewports
        .entry(egui::ViewportId::ROOT)
        .or_default()
        .native_pixels_per_point = Some(pixels_per_point);
    let mut output = ctx.run_ui(input, |ui| {
        paint(ui.painter(), Rect::from_min_size(Pos2::ZERO, size), chart);
    });
    let mut textures = std::collections::HashMap::new();
    for (id, deltas) in &output.textures_delta.set {
        for delta in deltas {
            let egui::ImageData::Color(patch) = &delta.image;
            let texture = textures
                .entry(*id)
                .or_insert_with(|| egui::ColorImage::filled(patch.size, Color32::TRANSPARENT));
            let Some([x0, y0]) = delta.pos else {
                *texture = (**patch).clone();
                continue;
            };
            for row in 0..patch.size[1].min(texture.size[1].saturating_sub(y0)) {
                for column in 0..patch.size[0].min(texture.size[0].saturating_sub(x0)) {
                    texture.pixels[(y0 + row) * texture.size[0] + x0 + column] =
                        patch.pixels[row * patch.size[0] + column];
                }
            }
        }
    }
    // Applied above, into `textures`.
    output.textures_delta.clear();
    let primitives = ctx.tessellate(output.shapes, output.pixels_per_point);
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a chart's size in pixels, small and positive"
    )]
    let (width, height) = (
        (size.x * pixels_per_point).round().max(1.0) as u32,
        (size.y * pixels_per_point).round().max(1.0) as u32,
    );
    let mut canvas = Canvas::new(width, height);
    for primitive in &primitives {
        canvas.fill(primitive, output.pixels_per_point, &textures);
    }
    canvas.into_image()
}

/// `chart` drawn at `size` points (`[width, height]`) and `pixels_per_point`, as PNG bytes.
pub fn chart_png(
    chart: &Chart,
    size: [f32; 2],
    pixels_per_point: f32,
) -> Result<Vec<u8>, image::ImageError> {
    let image = chart_image(chart, Vec2::from(size), pixels_per_point);
    let mut png = Vec::new();
    image.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)?;
    Ok(png)
}

/// Premultiplied RGBA in 0–1, filled triangle by triangle on the chart's paper.
struct Canvas {
    width: u32,
    height: u32,
    pixels: Vec<[f32; 4]>,
}

impl Canvas {
    fn new(width: u32, height: u32) -> Self {
        Self {
            width,
            height,
            pixels: vec![PAPER.to_normalized_gamma_f32(); width as usize * height as usize],
        }
    }

    fn fill(
        &mut self,
        primitive: &ClippedPrimitive,
        pixels_per_point: f32,
        textures: &std::collections::HashMap<egui::TextureId, egui::ColorImage>,
    ) {
        let Primitive::Mesh(mesh) = &primitive.primitive else {
            return;
        };
        let Some(texture) = textures.get(&mesh.texture_id) else {
            return;
        };
        let clip = primitive.clip_rect;
        #[expect(clippy::cast_precision_loss, reason = "image sizes are small")]
        let bounds = [
            (clip.left() * pixels_per_point).max(0.0),
            (clip.top() * pixels_per_point).max(0.0),
            (clip.right() * pixels_per_point).min(self.width as f32),
            (clip.bottom() * pixels_per_point).min(self.height as f32),
        ];
        for triangle in mesh.indices.chunks_exact(3) {
            let corners = [
                &mesh.vertices[triangle[0] as usize],
                &mesh.vertices[triangle[1] as usize],
                &mesh.vertices[triangle[2] as usize],
            ];
            self.triangle(corners, pixels_per_point, bounds, texture);
        }
    }

    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "pixel indices inside the clipped image"
    )]
    fn triangle(
        &mut self,
        corners: [&egui::epaint::Vertex; 3],
        pixels_per_point: f32,
        bounds: [f32; 4],
        texture: &egui::ColorImage,
    ) {
        let [a, b, c] = corners.map(|vertex| vertex.pos.to_vec2() * pixels_per_point);
        let area = (b - a).x * (c - a).y - (b - a).y * (c - a).x;
        if area.abs() < 1e-12 {
            return;
        }
        let left = a.x.min(b.x).min(c.x).max(bounds[0]).floor();
        let top = a.y.min(b.y).min(c.y).max(bounds[1]).floor();
        let right = a.x.max(b.x).max(c.x).min(bounds[2]).ceil();
        let bottom = a.y.max(b.y).max(c.y).min(bounds[3]).ceil();
        if right <= left || bottom <= top {
            return;
        }
        let colours = corners.map(|vertex| vertex.color.to_array().map(|v| f32::from(v) / 255.0));
        let uvs = corners.map(|vertex| vertex.uv);
        let [texture_width, texture_height] = texture.size;
        for y in top as u32..bottom as u32 {
            for x in left as u32..right as u32 {
                let point = vec2(x as f32 + 0.5, y as f32 + 0.5);
                let weight_a =
                    ((b - point).x * (c - point).y - (b - point).y * (c - point).x) / area;
                let weight_b =
                    ((c - point).x * (a - point).y - (c - point).y * (a - point).x) / area;
                let weight_c = 1.0 - weight_a - weight_b;
                if weight_a < 0.0 || weight_b < 0.0 || weight_c < 0.0 {
                    continue;
                }
                let weights = [weight_a, weight_b, weight_c];
                let texture_x = (0..3).map(|k| uvs[k].x * weights[k]).sum::<f32>();
                let texture_y = (0..3).map(|k| uvs[k].y * weights[k]).sum::<f32>();
                let texel = texture.pixels[((texture_y * texture_height as f32) as usize)
                    .min(texture_height - 1)
                    * texture_width
                    + ((texture_x * texture_width as f32) as usize).min(texture_width - 1)]
                .to_array();
                let pixel = &mut self.pixels[y as usize * self.width as usize + x as usize];
                let source: [f32; 4] = std::array::from_fn(|channel| {
                    (0..3)
                        .map(|k| colours[k][channel] * weights[k])
                        .sum::<f32>()
                        * f32::from(texel[channel])
                        / 255.0
                });
                for channel in 0..4 {
                    pixel[channel] = source[channel] + pixel[channel] * (1.0 - source[3]);
                }
            }
        }
    }

    fn into_image(self) -> image::RgbaImage {
        let bytes = self
            .pixels
            .iter()
            .flat_map(|pixel| {
                let alpha = pixel[3].clamp(0.0, 1.0);
                #[expect(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    reason = "clamped to 0–255"
                )]
                let byte = |value: f32| (value.clamp(0.0, 1.0) * 255.0).round() as u8;
                let straight = |value: f32| if alpha > 0.0 { value / alpha } else { 0.0 };
                [
                    byte(straight(pixel[0])),
                    byte(straight(pixel[1])),
                    byte(straight(pixel[2])),
                    byte(alpha),
                ]
            })
            .collect();
        image::RgbaImage::from_raw(self.width, self.height, bytes)
            .unwrap_or_else(|| image::RgbaImage::new(self.width, self.height))
    }
}

/// A set of charts, one shown at a time, chosen by tabs (a study's results).
pub struct ChartsView {
    /// The charts.
    pub charts: Vec<Chart>,
    /// The chart shown.
    pub shown: usize,
}

impl ChartsView {
    /// Tabs with the charts' titles, and the chosen chart below.
    pub fn charts_ui(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            for (index, chart) in self.charts.iter().enumerate() {
                if ui
                    .selectable_label(self.shown == index, &chart.title)
                    .clicked()
                {
                    self.shown = index;
                }
            }
        });
        ui.separator();
        if let Some(chart) = self.charts.get(self.shown) {
            chart_ui(ui, chart);
        } else {
            ui.label("no chart");
        }
    }
}
