//! The three linked planes (axial, coronal, sagittal) drawn on the GPU through an
//! `egui_wgpu` paint callback, with crosshair, orientation letters, slice numbers and a
//! status line (slice, position in mm, HU under the cursor, window/level).
//!
//! Interaction follows PACS habits: wheel, arrow keys and PageUp/PageDown scroll slices;
//! right-drag changes window (horizontal) and level (vertical); keys 1–5 pick the presets;
//! Ctrl+wheel zooms; middle-drag pans; left click moves the crosshair (and with it the other
//! planes); double-click enlarges a view; `R` resets.
//!
//! GPU resources (pipeline, volume texture, one uniform buffer per plane) live in the
//! renderer's callback resources ([`ViewerGpu`], built once per study); each frame passes only
//! the small per-view uniforms through the callback ([`SlicePaint`]).

use egui::{Align2, Color32, FontId, Key, PointerButton, Pos2, Rect, Sense, Stroke, Vec2};

use crate::render::view::{Plane, PlaneAxes, SliceView};
use crate::render::{
    SliceRenderer, ViewGeometry, ViewResources, ViewUniforms, VolumeTextures, upload_volume,
};
use crate::volume::geometry::dominant_letter;
use crate::volume::{LabelVolume, Volume};

/// Window/level presets (name, width, level), on keys 1–5.
pub const WINDOW_PRESETS: [(&str, f64, f64); 5] = [
    ("soft tissue", 400.0, 40.0),
    ("liver", 150.0, 90.0),
    ("lung", 1500.0, -600.0),
    ("bone", 2500.0, 480.0),
    ("brain", 80.0, 40.0),
];

/// GPU state of the open study, stored in `egui_wgpu`'s callback resources.
pub struct ViewerGpu {
    renderer: SliceRenderer,
    /// The uploaded textures (and their notices).
    pub textures: VolumeTextures,
    views: [ViewResources; 3],
}

impl ViewerGpu {
    /// Uploads `volume` and builds the pipeline for `render_state`'s target, replacing any
    /// previous study. Returns the notices the user should see (downsampling and the like).
    #[must_use = "the notices tell the user the volume was downsampled or rounded"]
    pub fn install(
        render_state: &egui_wgpu::RenderState,
        volume: &Volume,
        labels: Option<&LabelVolume>,
    ) -> Vec<String> {
        let renderer = SliceRenderer::new(&render_state.device, render_state.target_format);
        let textures = upload_volume(&render_state.device, &render_state.queue, volume, labels);
        let views = [0, 1, 2].map(|_| renderer.create_view(&render_state.device, &textures));
        let notices = textures.notices.clone();
        render_state
            .renderer
            .write()
            .callback_resources
            .insert(Self {
                renderer,
                textures,
                views,
            });
        notices
    }

    /// Replaces the mask overlay of the installed study (masks that finish loading after the
    /// volume is on screen). Does nothing when no study is installed.
    pub fn set_labels(
        render_state: &egui_wgpu::RenderState,
        dims: [usize; 3],
        labels: Option<&LabelVolume>,
    ) {
        let mut renderer = render_state.renderer.write();
        let Some(gpu) = renderer.callback_resources.get_mut::<Self>() else {
            return;
        };
        crate::render::upload_labels(
            &render_state.device,
            &render_state.queue,
            &mut gpu.textures,
            dims,
            labels,
        );
        gpu.views = [0, 1, 2].map(|_| {
            gpu.renderer
                .create_view(&render_state.device, &gpu.textures)
        });
    }
}

fn plane_index(plane: Plane) -> usize {
    match plane {
        Plane::Axial => 0,
        Plane::Coronal => 1,
        Plane::Sagittal => 2,
    }
}

/// One frame's draw of one plane: its view and geometry, turned into uniforms against the
/// uploaded texture (which may be downsampled) in `prepare`.
struct SlicePaint {
    plane: Plane,
    view: SliceView,
    geometry: ViewGeometry,
}

impl egui_wgpu::CallbackTrait for SlicePaint {
    fn prepare(
        &self,
        _device: &wgpu::Device,
        queue: &wgpu::Queue,
        _screen: &egui_wgpu::ScreenDescriptor,
        _encoder: &mut wgpu::CommandEncoder,
        resources: &mut egui_wgpu::CallbackResources,
    ) -> Vec<wgpu::CommandBuffer> {
        if let Some(gpu) = resources.get::<ViewerGpu>() {
            let uniforms = ViewUniforms::for_texture(
                &self.view,
                &self.geometry,
                gpu.textures.step,
                gpu.textures.texture_dims,
            );
            SliceRenderer::prepare(queue, &gpu.views[plane_index(self.plane)], &uniforms);
        }
        Vec::new()
    }

    fn paint(
        &self,
        _info: egui::PaintCallbackInfo,
        pass: &mut wgpu::RenderPass<'static>,
        resources: &egui_wgpu::CallbackResources,
    ) {
        if let Some(gpu) = resources.get::<ViewerGpu>() {
            gpu.renderer
                .paint(pass, &gpu.views[plane_index(self.plane)]);
        }
    }
}

/// What the user asked the viewer to do.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ViewerCommand {
    /// Move a plane by whole slices.
    Scroll {
        /// Which plane.
        plane: Plane,
        /// Slices (positive: towards higher indices).
        slices: f64,
    },
    /// Change window width and level by these amounts (HU).
    AdjustWindow {
        /// Width change.
        width_hu: f64,
        /// Level change.
        level_hu: f64,
    },
    /// Apply preset `0..5` of [`WINDOW_PRESETS`].
    Preset(usize),
    /// Multiply a plane's zoom.
    Zoom {
        /// Which plane.
        plane: Plane,
        /// Factor.
        factor: f64,
    },
    /// Pan a plane by millimetres.
    Pan {
        /// Which plane.
        plane: Plane,
        /// Right, down.
        mm: [f64; 2],
    },
    /// Put the crosshair (and the other planes) at a voxel.
    SetCrosshair([f64; 3]),
    /// Show one plane alone, or all three again.
    ToggleEnlarge(Plane),
    /// Show or hide one structure of the overlay (by label value).
    ToggleStructure(u8),
    /// Switch between navigating and measuring with the ruler.
    ToggleRuler,
    /// A ruler click at a voxel of a plane (the first click starts, the second ends).
    RulerPoint {
        /// Which plane.
        plane: Plane,
        /// Where (continuous voxel index).
        voxel: [f64; 3],
    },
    /// Remove measurement `n`.
    DeleteMeasurement(usize),
    /// Move a plane to a slice.
    SetSlice {
        /// Which plane.
        plane: Plane,
        /// Slice index.
        slice: f64,
    },
    /// Set (or clear) the key evidence slice (axial index), shown on the slice bar.
    SetKeySlice(Option<f64>),
    /// Show the key slice in the axial plane (key `K`).
    JumpToKeySlice,
    /// Set the overlay opacity (0–1).
    SetOpacity(f32),
    /// Back to the initial state.
    Reset,
}

/// The viewer's state: one [`SliceView`] per plane, shared window/level, crosshair.
#[derive(Clone, Debug)]
pub struct Viewer {
    views: [SliceView; 3],
    axes: [PlaneAxes; 3],
    dims: [usize; 3],
    /// Crosshair position (voxel index, continuous).
    pub crosshair: [f64; 3],
    /// A plane shown alone, if any.
    pub enlarged: Option<Plane>,
    /// Label overlay opacity.
    pub mask_opacity: f32,
    /// What the pointer is over: plane, voxel, value.
    pub hover: Option<(Plane, [usize; 3], f32)>,
    /// Plane that last had the pointer (keyboard scrolling goes there).
    pub active: Plane,
    /// Overlay structures: name, label value, shown.
    pub structures: Vec<(String, u8, bool)>,
    /// Whether left clicks measure instead of moving the crosshair.
    pub ruler: bool,
    /// A ruler's first point, waiting for the second.
    pub ruler_start: Option<(Plane, [f64; 3])>,
    /// Finished measurements.
    pub measurements: Vec<Measurement>,
    /// The key evidence slice (axial index), marked on the slice bar; `K` jumps to it.
    pub key_slice: Option<f64>,
    /// Where the key slice came from, shown beside it (`"most lesion voxels, from the case masks"`).
    pub key_slice_source: Option<String>,
    /// Lesion extents along the axial stack, marked beside the axial slice bar.
    pub lesion_marks: Vec<LesionMark>,
    /// Touchpad scrolling not yet worth a whole slice (in wheel lines).
    wheel_remainder: f32,
}

/// A lesion structure's extent along the axial stack (slice indices, inclusive).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LesionMark {
    /// Structure name (`liver_lesion`).
    pub name: String,
    /// Its label value (for the colour).
    pub label: u8,
    /// First axial slice showing it.
    pub first_slice: usize,
    /// Last axial slice showing it.
    pub last_slice: usize,
}

/// A distance measured with the ruler on one slice of one plane.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measurement {
    /// The plane it was drawn on.
    pub plane: Plane,
    /// The slice (index along the plane normal).
    pub slice: f64,
    /// End points (continuous voxel indices).
    pub from: [f64; 3],
    /// End point.
    pub to: [f64; 3],
    /// Length in millimetres, through the volume's voxel-to-patient transform.
    pub length_mm: f64,
}

impl Viewer {
    /// A viewer centred on `volume` with the soft-tissue window.
    #[must_use]
    pub fn new(volume: &Volume) -> Self {
        let dims = volume.dims();
        let directions = volume.directions_lps();
        let axes = Plane::ALL.map(|plane| PlaneAxes::new(plane, &directions));
        let views = [0, 1, 2].map(|n| SliceView::centred(Plane::ALL[n], axes[n], dims));
        let crosshair = [0, 1, 2].map(|axis| ((dims[axis].max(1) - 1) / 2) as f64);
        Self {
            views,
            axes,
            dims,
            crosshair,
            enlarged: None,
            mask_opacity: 0.5,
            hover: None,
            active: Plane::Axial,
            structures: Vec::new(),
            ruler: false,
            ruler_start: None,
            measurements: Vec::new(),
            key_slice: None,
            key_slice_source: None,
            lesion_marks: Vec::new(),
            wheel_remainder: 0.0,
        }
    }

    /// The same viewer with lesion extents on the axial slice bar and, when `key_slice` is
    /// given, a key slice with the note of where it came from.
    #[must_use]
    pub fn with_lesions(
        mut self,
        marks: Vec<LesionMark>,
        key_slice: Option<(usize, String)>,
    ) -> Self {
        self.lesion_marks = marks;
        if let Some((slice, source)) = key_slice {
            self.key_slice = Some(slice as f64);
            self.key_slice_source = Some(source);
        }
        self
    }

    /// The axis (0–2) the axial plane's slices run along.
    #[must_use]
    pub fn axial_axis(&self) -> usize {
        self.axes[plane_index(Plane::Axial)].normal
    }

    /// The same viewer with an overlay of these structures, all shown.
    #[must_use]
    pub fn with_structures(mut self, structures: &[crate::volume::Structure]) -> Self {
        self.structures = structures
            .iter()
            .map(|structure| (structure.name.clone(), structure.label, true))
            .collect();
        self
    }

    /// Bit `n` set when label `n` is shown.
    #[must_use]
    pub fn visible_labels(&self) -> u32 {
        self.structures
            .iter()
            .filter(|(_, _, shown)| *shown)
            .fold(0, |bits, (_, label, _)| {
                bits | (1u32 << u32::from(*label).min(31))
            })
    }

    /// The view of `plane`.
    #[must_use]
    pub fn view(&self, plane: Plane) -> &SliceView {
        &self.views[plane_index(plane)]
    }

    /// Window width and level (HU), shared by the three planes.
    #[must_use]
    pub fn window(&self) -> (f64, f64) {
        (
            self.views[0].window_width_hu,
            self.views[0].window_center_hu,
        )
    }

    /// Applies one command.
    pub fn apply(&mut self, command: ViewerCommand, volume: &Volume) {
        match command {
            ViewerCommand::Scroll { plane, slices } => {
                let n = plane_index(plane);
                let last = (self.dims[self.axes[n].normal].max(1) - 1) as f64;
                let slice = (self.views[n].slice + slices).round().clamp(0.0, last);
                self.views[n].slice = slice;
                self.crosshair[self.axes[n].normal] = slice;
            }
            ViewerCommand::AdjustWindow { width_hu, level_hu } => {
                for view in &mut self.views {
                    view.window_width_hu = (view.window_width_hu + width_hu).max(1.0);
                    view.window_center_hu += level_hu;
                }
            }
            ViewerCommand::Preset(index) => {
                if let Some(&(_, width, level)) = WINDOW_PRESETS.get(index) {
                    for view in &mut self.views {
                        view.window_width_hu = width;
                        view.window_center_hu = level;
                    }
                }
            }
            ViewerCommand::Zoom { plane, factor } => {
                let view = &mut self.views[plane_index(plane)];
                view.zoom = (view.zoom * factor).clamp(0.25, 32.0);
            }
            ViewerCommand::Pan { plane, mm } => {
                let view = &mut self.views[plane_index(plane)];
                view.pan_mm[0] += mm[0];
                view.pan_mm[1] += mm[1];
            }
            ViewerCommand::SetCrosshair(voxel) => {
                for axis in 0..3 {
                    self.crosshair[axis] = voxel[axis]
                        .round()
                        .clamp(0.0, (self.dims[axis].max(1) - 1) as f64);
                }
                for n in 0..3 {
                    self.views[n].slice = self.crosshair[self.axes[n].normal];
                }
            }
            ViewerCommand::ToggleEnlarge(plane) => {
                self.enlarged = if self.enlarged == Some(plane) {
                    None
                } else {
                    Some(plane)
                };
            }
            ViewerCommand::ToggleStructure(label) => {
                for structure in &mut self.structures {
                    if structure.1 == label {
                        structure.2 = !structure.2;
                    }
                }
            }
            ViewerCommand::SetOpacity(opacity) => self.mask_opacity = opacity.clamp(0.0, 1.0),
            ViewerCommand::ToggleRuler => {
                self.ruler = !self.ruler;
                self.ruler_start = None;
            }
            ViewerCommand::RulerPoint { plane, voxel } => self.ruler_point(plane, voxel, volume),
            ViewerCommand::SetSlice { plane, slice } => {
                let index = plane_index(plane);
                let current = self.views[index].slice;
                self.apply(
                    ViewerCommand::Scroll {
                        plane,
                        slices: slice - current,
                    },
                    volume,
                );
            }
            ViewerCommand::SetKeySlice(slice) => self.key_slice = slice,
            ViewerCommand::JumpToKeySlice => {
                if let Some(slice) = self.key_slice {
                    self.apply(
                        ViewerCommand::SetSlice {
                            plane: Plane::Axial,
                            slice,
                        },
                        volume,
                    );
                }
            }
            ViewerCommand::DeleteMeasurement(index) => {
                if index < self.measurements.len() {
                    self.measurements.remove(index);
                }
            }
            ViewerCommand::Reset => self.reset(volume),
        }
    }

    /// A ruler click: the first starts a measurement, the second (on the same plane) ends it.
    fn ruler_point(&mut self, plane: Plane, voxel: [f64; 3], volume: &Volume) {
        match self.ruler_start.take() {
            Some((start_plane, from)) if start_plane == plane => {
                let patient = volume.patient_from_voxel();
                let a = patient.apply(from);
                let b = patient.apply(voxel);
                let length_mm =
                    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt();
                self.measurements.push(Measurement {
                    plane,
                    slice: self.views[plane_index(plane)].slice,
                    from,
                    to: voxel,
                    length_mm,
                });
            }
            _ => self.ruler_start = Some((plane, voxel)),
        }
    }

    /// Back to the initial views, keeping the structures, measurements and key slice.
    fn reset(&mut self, volume: &Volume) {
        let structures = std::mem::take(&mut self.structures);
        let measurements = std::mem::take(&mut self.measurements);
        let key_slice = self.key_slice;
        let key_slice_source = self.key_slice_source.take();
        let lesion_marks = std::mem::take(&mut self.lesion_marks);
        let mask_opacity = self.mask_opacity;
        *self = Self::new(volume);
        self.structures = structures;
        self.measurements = measurements;
        self.key_slice = key_slice;
        self.key_slice_source = key_slice_source;
        self.lesion_marks = lesion_marks;
        self.mask_opacity = mask_opacity;
    }

    /// Maps a point in a view's rect to a continuous voxel index.
    fn voxel_at(&self, plane: Plane, rect: Rect, pos: Pos2, spacing: [f64; 3]) -> [f64; 3] {
        let n = plane_index(plane);
        let matrix = self.views[n].voxel_from_uv(
            self.axes[n],
            self.dims,
            spacing,
            [f64::from(rect.width()), f64::from(rect.height())],
        );
        let u = f64::from((pos.x - rect.min.x) / rect.width().max(1.0));
        let v = f64::from((pos.y - rect.min.y) / rect.height().max(1.0));
        [0, 1, 2].map(|row| {
            f64::from(matrix[0][row]) * u
                + f64::from(matrix[1][row]) * v
                + f64::from(matrix[3][row])
        })
    }

    /// Maps a voxel to a point in a view's rect (its in-plane coordinates).
    fn point_of(&self, plane: Plane, rect: Rect, voxel: [f64; 3], spacing: [f64; 3]) -> Pos2 {
        let index = plane_index(plane);
        let matrix = self.views[index].voxel_from_uv(
            self.axes[index],
            self.dims,
            spacing,
            [f64::from(rect.width()), f64::from(rect.height())],
        );
        let (across, _) = self.axes[index].horizontal;
        let (down, _) = self.axes[index].vertical;
        let u = (voxel[across] - f64::from(matrix[3][across])) / f64::from(matrix[0][across]);
        let v = (voxel[down] - f64::from(matrix[3][down])) / f64::from(matrix[1][down]);
        Pos2::new(
            rect.min.x + (u as f32) * rect.width(),
            rect.min.y + (v as f32) * rect.height(),
        )
    }

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
            self.plane_ui(ui, volume, plane, rect, spacing, &mut commands);
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

    fn plane_ui(
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
        self.pointer_input(ui, volume, plane, rect, &geometry, &response, commands);
        self.slice_bar_ui(ui, plane, rect, commands);
    }

    /// A slice bar along the right edge of a plane: the position of the current slice
    /// (superior at the top for axial), the key slice as a mark, drag or click to move.
    fn slice_bar_ui(
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
    fn overlays_ui(
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
        for measurement in &self.measurements {
            if measurement.plane == plane
                && (measurement.slice - self.views[index].slice).abs() < 0.5
            {
                let a = self.point_of(plane, rect, measurement.from, spacing);
                let b = self.point_of(plane, rect, measurement.to, spacing);
                painter.line_segment([a, b], ruler_stroke);
                label(
                    &painter,
                    b + Vec2::new(6.0, 0.0),
                    Align2::LEFT_CENTER,
                    format!("{:.1} mm", measurement.length_mm),
                    FontId::proportional(13.0),
                    Color32::from_rgb(120, 255, 120),
                );
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
                rect.center_top() + Vec2::new(0.0, 4.0),
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
            label(&painter, position, anchor, text, font.clone(), colour);
        }
        let count = self.dims[self.axes[index].normal];
        label(
            &painter,
            rect.left_top() + Vec2::new(6.0, 4.0),
            Align2::LEFT_TOP,
            // Slice numbers are 0-based indices, as in the report, the CLI and exports.
            format!(
                "{} {} of 0–{}",
                plane_name(plane),
                self.views[index].slice as usize,
                count.saturating_sub(1)
            ),
            FontId::proportional(13.0),
            Color32::from_gray(230),
        );
    }

    /// Hover read-out, wheel, clicks and drags over a plane.
    #[allow(clippy::too_many_arguments)] // one plane's full context; splitting it hides the flow
    fn pointer_input(
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
                commands.push(ViewerCommand::Zoom {
                    plane,
                    factor: 1.2f64.powf(f64::from(zoom_lines)),
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
        if response.double_clicked() {
            commands.push(ViewerCommand::ToggleEnlarge(plane));
        } else if response.clicked_by(PointerButton::Primary)
            && let Some(pos) = response.interact_pointer_pos()
        {
            let voxel = self.voxel_at(plane, rect, pos, spacing);
            commands.push(if self.ruler {
                ViewerCommand::RulerPoint { plane, voxel }
            } else {
                ViewerCommand::SetCrosshair(voxel)
            });
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

    fn keyboard(&self, ui: &egui::Ui, commands: &mut Vec<ViewerCommand>) {
        // Letters and digits typed into a text field (a note, a size) are text, not
        // shortcuts: "3.1 x 2.4" must not switch to the lung window.
        if ui.ctx().egui_wants_keyboard_input() {
            return;
        }
        let plane = self.active;
        ui.input(|input| {
            let keys = [Key::Num1, Key::Num2, Key::Num3, Key::Num4, Key::Num5];
            for (index, key) in keys.iter().enumerate() {
                if input.key_pressed(*key) {
                    commands.push(ViewerCommand::Preset(index));
                }
            }
            let steps = [
                (Key::ArrowUp, 1.0),
                (Key::ArrowDown, -1.0),
                (Key::PageUp, 10.0),
                (Key::PageDown, -10.0),
            ];
            for (key, slices) in steps {
                if input.key_pressed(key) {
                    commands.push(ViewerCommand::Scroll { plane, slices });
                }
            }
            if input.key_pressed(Key::R) {
                commands.push(ViewerCommand::Reset);
            }
            if input.key_pressed(Key::M) {
                commands.push(ViewerCommand::ToggleRuler);
            }
            if input.key_pressed(Key::K) {
                commands.push(ViewerCommand::JumpToKeySlice);
            }
        });
    }

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

    /// The status line: active slice and its position, HU under the cursor, window/level.
    #[must_use]
    pub fn status_text(&self, volume: &Volume) -> String {
        let n = plane_index(self.active);
        let slice = self.views[n].slice as usize;
        let normal = self.axes[n].normal;
        let mut voxel = [0.0; 3];
        voxel[normal] = slice as f64;
        let position = volume.patient_from_voxel().apply(voxel);
        // The patient axis the plane normal points along most (z for axial, y for coronal…).
        let direction = volume.directions_lps()[normal];
        let patient_axis = (0..3)
            .max_by(|&a, &b| direction[a].abs().total_cmp(&direction[b].abs()))
            .unwrap_or(2);
        let (width, level) = self.window();
        let hover = match self.hover {
            Some((_, [i, j, k], value)) => format!("HU {value:.0} at ({i}, {j}, {k})"),
            None => "HU –".to_string(),
        };
        format!(
            "{} slice {} of 0–{}  ·  {:+.1} mm  ·  {hover}  ·  W {width:.0} L {level:.0}",
            plane_name(self.active),
            slice,
            self.dims[normal].saturating_sub(1),
            position[patient_axis],
        )
    }
}

/// Wheel movement this frame in lines (one notch of a mouse wheel): `(scroll, zoom)`, zoom
/// being the part with Ctrl/Cmd held. Read from the raw events, not egui's smoothed delta,
/// which spreads one notch over several frames; touchpad points count 40 to a line.
fn wheel_lines(events: &[egui::Event]) -> (f32, f32) {
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

/// The overlay colour of a label value, as the shader draws it.
fn label_colour(label: u8) -> Color32 {
    let [r, g, b, _] = crate::render::LABEL_COLOURS[usize::from(label).min(15)];
    Color32::from_rgb((r * 255.0) as u8, (g * 255.0) as u8, (b * 255.0) as u8)
}

/// Text on a dark backing, readable over any window/level.
fn label(
    painter: &egui::Painter,
    position: Pos2,
    anchor: Align2,
    text: String,
    font: FontId,
    colour: Color32,
) {
    let galley = painter.layout_no_wrap(text, font, colour);
    let rect = anchor.anchor_size(position, galley.size()).expand(2.0);
    painter.rect_filled(rect, 3.0, Color32::from_black_alpha(150));
    painter.galley(rect.min + Vec2::splat(2.0), galley, colour);
}

fn plane_name(plane: Plane) -> &'static str {
    match plane {
        Plane::Axial => "axial",
        Plane::Coronal => "coronal",
        Plane::Sagittal => "sagittal",
    }
}
