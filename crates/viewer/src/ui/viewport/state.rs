//! The viewer as a state machine without egui: three [`SliceView`]s, the shared window and
//! level, the crosshair, the ruler and its measurements, overlay structures, the key slice
//! and the evidence box, changed only by [`ViewerCommand`]s through [`Viewer::apply`].

use super::extent::{BoxDrag, Evidence};
use crate::render::view::{Plane, PlaneAxes, SliceView};
use keyslice_core::volume::Volume;

/// Window/level presets (name, width, level), on keys 1–5.
pub const WINDOW_PRESETS: [(&str, f64, f64); 5] = [
    ("soft tissue", 400.0, 40.0),
    ("liver", 150.0, 90.0),
    ("lung", 1500.0, -600.0),
    ("bone", 2500.0, 480.0),
    ("brain", 80.0, 40.0),
];

pub(super) fn plane_index(plane: Plane) -> usize {
    match plane {
        Plane::Axial => 0,
        Plane::Coronal => 1,
        Plane::Sagittal => 2,
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
    /// Multiply a plane's zoom keeping the point at `at_uv` (fractions of the pane of
    /// `pane_px` pixels) where it is on screen: zoom about the cursor, as PACS viewers do.
    ZoomAt {
        /// The plane.
        plane: Plane,
        /// The factor.
        factor: f64,
        /// Where the cursor is, as fractions of the pane's width and height.
        at_uv: [f64; 2],
        /// The pane's size in pixels.
        pane_px: [f64; 2],
    },
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
    /// Switch the box tool on or off (key `B`).
    ToggleBoxTool,
    /// The reviewer drew, moved or resized the evidence box or its slice range.
    EditEvidence(Evidence),
    /// Show the key slice in the axial plane (key `K`).
    JumpToKeySlice,
    /// Set the overlay opacity (0–1).
    SetOpacity(f32),
    /// The brush touched a voxel of a plane (each frame the button is held): the app paints
    /// the lesion being drawn, or erases it.
    Paint {
        /// The plane painted on.
        plane: Plane,
        /// Where (continuous voxel index).
        voxel: [f64; 3],
        /// Whether it erases (Shift held).
        erase: bool,
    },
    /// The brush was lifted: the stroke is one correction.
    PaintEnded,
    /// Multiply the brush's radius (keys `[` and `]`).
    BrushRadius(f64),
    /// Show the 3D view in place of the sagittal plane, or the sagittal plane again (`V`).
    Toggle3d,
    /// Turn the 3D view (degrees about the long axis, of tilt); `preview` while dragging.
    Orbit {
        /// Degrees about the patient's long axis.
        azimuth_deg: f64,
        /// Degrees of tilt.
        elevation_deg: f64,
        /// Still turning: draw the quick preview.
        preview: bool,
    },
    /// Multiply the 3D view's magnification.
    Zoom3d(f64),
    /// Switch the 3D view between maximum intensity projection and volume rendering
    /// (`Shift+V`, or its button).
    ToggleRendering,
    /// Back to the initial state.
    Reset,
}

/// The viewer's state: one [`SliceView`] per plane, shared window/level, crosshair.
#[derive(Clone, Debug)]
pub struct Viewer {
    pub(super) views: [SliceView; 3],
    pub(super) axes: [PlaneAxes; 3],
    pub(super) dims: [usize; 3],
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
    /// The evidence box on the key slice and its slice range, drawn on all three planes.
    pub evidence: Option<Evidence>,
    /// Whether primary drags edit the evidence box instead of moving the crosshair.
    pub box_tool: bool,
    /// A box tool drag in progress.
    pub(super) box_drag: Option<BoxDrag>,
    /// The mask brush, while a lesion's mask is being drawn: primary drags paint (Shift:
    /// erase) instead of moving the crosshair.
    pub brush: Option<PaintBrush>,
    /// The plane a brush stroke under way started on (the button went down there).
    pub(super) painting: Option<Plane>,
    /// The 3D view's camera, while the 3D view is shown (in place of the sagittal plane).
    pub orbit: Option<crate::render::orbit::Orbit>,
    /// Touchpad scrolling not yet worth a whole slice (in wheel lines).
    pub(super) wheel_remainder: f32,
    /// Where the crosshair was before the last single click: a double-click (whose first
    /// click moved it) puts it back, so enlarging a plane never leaves the key slice.
    pub(super) crosshair_before_click: Option<[f64; 3]>,
}

/// The mask brush: its radius and whether it is a ball through the slices or a disc on the
/// plane painted on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PaintBrush {
    /// Radius, mm.
    pub radius_mm: f64,
    /// A ball (3D) rather than a disc on the plane.
    pub ball: bool,
}

impl PaintBrush {
    /// The smallest and largest radius, mm.
    pub const RADIUS_MM: (f64, f64) = (0.5, 50.0);
}

impl Default for PaintBrush {
    fn default() -> Self {
        Self {
            radius_mm: 5.0,
            ball: false,
        }
    }
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
            evidence: None,
            box_tool: false,
            box_drag: None,
            brush: None,
            painting: None,
            orbit: None,
            wheel_remainder: 0.0,
            crosshair_before_click: None,
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

    /// Shows the key slice in the axial plane.
    fn jump_to_key_slice(&mut self, volume: &Volume) {
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

    /// The 3D view's commands, and the brush's size.
    fn orbit_command(&mut self, command: ViewerCommand) {
        match command {
            ViewerCommand::Toggle3d => {
                self.orbit = match self.orbit {
                    Some(_) => None,
                    None => Some(crate::render::orbit::Orbit::default()),
                };
            }
            ViewerCommand::Orbit {
                azimuth_deg,
                elevation_deg,
                preview,
            } => {
                if let Some(orbit) = &mut self.orbit {
                    orbit.rotate(azimuth_deg, elevation_deg);
                    orbit.preview = preview;
                }
            }
            ViewerCommand::Zoom3d(factor) => {
                if let Some(orbit) = &mut self.orbit {
                    orbit.zoom = (orbit.zoom * factor).clamp(0.5, 8.0);
                }
            }
            ViewerCommand::ToggleRendering => {
                if let Some(orbit) = &mut self.orbit {
                    orbit.rendering = orbit.rendering.toggled();
                }
            }
            ViewerCommand::BrushRadius(factor) => self.resize_brush(factor),
            _ => {}
        }
    }

    /// Multiplies the brush's radius, within its bounds.
    fn resize_brush(&mut self, factor: f64) {
        if let Some(brush) = &mut self.brush {
            let (min, max) = PaintBrush::RADIUS_MM;
            brush.radius_mm = (brush.radius_mm * factor).clamp(min, max);
        }
    }

    /// The axis (0–2) a plane's slices run along.
    #[must_use]
    pub fn normal_axis(&self, plane: Plane) -> usize {
        self.axes[plane_index(plane)].normal
    }

    /// The axis (0–2) the axial plane's slices run along.
    #[must_use]
    pub fn axial_axis(&self) -> usize {
        self.axes[plane_index(Plane::Axial)].normal
    }

    /// The same viewer with an overlay of these structures, all shown.
    #[must_use]
    pub fn with_structures(mut self, structures: &[keyslice_core::volume::Structure]) -> Self {
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

    /// The voxel (continuous index) at `at_uv` (fractions of a pane of `pane_px` pixels) of
    /// `plane`.
    #[must_use]
    pub(super) fn voxel_at_uv(
        &self,
        plane: Plane,
        at_uv: [f64; 2],
        pane_px: [f64; 2],
        spacing: [f64; 3],
    ) -> [f64; 3] {
        let n = plane_index(plane);
        let matrix = self.views[n].voxel_from_uv(self.axes[n], self.dims, spacing, pane_px);
        [0, 1, 2].map(|row| {
            f64::from(matrix[0][row]) * at_uv[0]
                + f64::from(matrix[1][row]) * at_uv[1]
                + f64::from(matrix[3][row])
        })
    }

    /// Zooms `plane` by `factor`, then pans so that the voxel under `at_uv` stays under it.
    /// The pane's voxel at a point is affine in the pan, so two probes of the pan give the
    /// pan that puts it back.
    fn zoom_at(
        &mut self,
        plane: Plane,
        factor: f64,
        at_uv: [f64; 2],
        pane_px: [f64; 2],
        spacing: [f64; 3],
    ) {
        let n = plane_index(plane);
        let voxel_under = |viewer: &Self| viewer.voxel_at_uv(plane, at_uv, pane_px, spacing);
        let before = voxel_under(self);
        let view = &mut self.views[n];
        view.zoom = (view.zoom * factor).clamp(0.25, 32.0);
        let after = voxel_under(self);
        let (across, _) = self.axes[n].horizontal;
        let (down, _) = self.axes[n].vertical;
        let probe = |viewer: &mut Self, axis: usize| {
            viewer.views[n].pan_mm[axis] += 1.0;
            let moved = voxel_under(viewer);
            viewer.views[n].pan_mm[axis] -= 1.0;
            [moved[across] - after[across], moved[down] - after[down]]
        };
        // Columns: what one millimetre of pan along each screen axis does to the voxel.
        let [u_across, u_down] = probe(self, 0);
        let [v_across, v_down] = probe(self, 1);
        let want = [before[across] - after[across], before[down] - after[down]];
        let determinant = u_across * v_down - v_across * u_down;
        if determinant.abs() < 1e-12 || !determinant.is_finite() {
            return;
        }
        let pan_u = (want[0] * v_down - v_across * want[1]) / determinant;
        let pan_v = (u_across * want[1] - u_down * want[0]) / determinant;
        if pan_u.is_finite() && pan_v.is_finite() {
            self.views[n].pan_mm[0] += pan_u;
            self.views[n].pan_mm[1] += pan_v;
        }
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
            ViewerCommand::ZoomAt {
                plane,
                factor,
                at_uv,
                pane_px,
            } => self.zoom_at(plane, factor, at_uv, pane_px, volume.spacing_mm()),
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
            ViewerCommand::ToggleRuler => self.toggle_tool(true),
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
            // The app paints; the viewer only shows where the brush is.
            ViewerCommand::Paint { .. } | ViewerCommand::PaintEnded => {}
            ViewerCommand::Toggle3d
            | ViewerCommand::Orbit { .. }
            | ViewerCommand::Zoom3d(_)
            | ViewerCommand::ToggleRendering
            | ViewerCommand::BrushRadius(_) => self.orbit_command(command),
            ViewerCommand::ToggleBoxTool => self.toggle_tool(false),
            // Shown at once; the app records it and shows what was recorded next frame.
            ViewerCommand::EditEvidence(evidence) => self.evidence = Some(evidence),
            ViewerCommand::JumpToKeySlice => self.jump_to_key_slice(volume),
            ViewerCommand::DeleteMeasurement(index) => {
                if index < self.measurements.len() {
                    self.measurements.remove(index);
                }
            }
            ViewerCommand::Reset => self.reset(volume),
        }
    }

    /// Switches the ruler (`true`) or the box tool on or off; one tool at a time.
    fn toggle_tool(&mut self, ruler: bool) {
        let on = !if ruler { self.ruler } else { self.box_tool };
        self.ruler = ruler && on;
        self.box_tool = !ruler && on;
        self.ruler_start = None;
        self.box_drag = None;
    }

    /// A ruler click: the first starts a measurement, the second (on the same plane) ends it.
    pub(super) fn ruler_point(&mut self, plane: Plane, voxel: [f64; 3], volume: &Volume) {
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
    pub(super) fn reset(&mut self, volume: &Volume) {
        // The slices on screen stay (the key slice the reviewer is on); zoom, pan and window go
        // back.
        let crosshair = self.crosshair;
        let slices = self.views.map(|view| view.slice);
        let structures = std::mem::take(&mut self.structures);
        let measurements = std::mem::take(&mut self.measurements);
        let key_slice = self.key_slice;
        let key_slice_source = self.key_slice_source.take();
        let lesion_marks = std::mem::take(&mut self.lesion_marks);
        let mask_opacity = self.mask_opacity;
        let (evidence, box_tool) = (self.evidence, self.box_tool);
        *self = Self::new(volume);
        self.structures = structures;
        self.measurements = measurements;
        self.key_slice = key_slice;
        self.key_slice_source = key_slice_source;
        self.lesion_marks = lesion_marks;
        self.mask_opacity = mask_opacity;
        self.evidence = evidence;
        self.box_tool = box_tool;
        self.crosshair = crosshair;
        for (view, slice) in self.views.iter_mut().zip(slices) {
            view.slice = slice;
        }
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

pub(super) fn plane_name(plane: Plane) -> &'static str {
    match plane {
        Plane::Axial => "axial",
        Plane::Coronal => "coronal",
        Plane::Sagittal => "sagittal",
    }
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::float_cmp,
        reason = "Slice indices are whole numbers held in f64; exact comparison is the point."
    )]

    use super::*;
    use keyslice_core::volume::{Affine, VolumeInfo, Voxels};

    /// 20 × 10 × 8 voxels of 0.5 × 0.5 × 2 mm along the LPS axes.
    fn volume() -> Volume {
        let affine = Affine::from_axes(
            [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            [0.5, 0.5, 2.0],
            [0.0; 3],
        );
        Volume::new(
            [20, 10, 8],
            affine,
            Voxels::I16(vec![0; 20 * 10 * 8]),
            Vec::new(),
            VolumeInfo::default(),
        )
        .expect("parts agree")
    }

    /// R (reset) puts zoom, pan and window back but leaves the slices where they are.
    #[test]
    fn reset_keeps_the_slices_on_screen() {
        let volume = volume();
        let mut viewer = Viewer::new(&volume);
        viewer.apply(ViewerCommand::SetCrosshair([17.0, 2.0, 6.0]), &volume);
        viewer.apply(
            ViewerCommand::Zoom {
                plane: Plane::Axial,
                factor: 2.0,
            },
            &volume,
        );
        viewer.apply(ViewerCommand::Preset(2), &volume);
        viewer.apply(ViewerCommand::Reset, &volume);
        assert_eq!(viewer.crosshair, [17.0, 2.0, 6.0]);
        assert_eq!(viewer.view(Plane::Axial).slice, 6.0);
        assert_eq!(viewer.views[0].zoom, 1.0);
        assert_eq!(viewer.window(), Viewer::new(&volume).window());
    }

    /// Zooming about a point keeps the voxel under it where it was, in every plane.
    #[test]
    fn zoom_about_the_cursor_keeps_the_point_under_it() {
        let volume = volume();
        let spacing = volume.spacing_mm();
        let pane_px = [400.0, 300.0];
        let at_uv = [0.8, 0.3];
        for plane in [Plane::Axial, Plane::Coronal, Plane::Sagittal] {
            let mut viewer = Viewer::new(&volume);
            let n = plane_index(plane);
            let under = |viewer: &Viewer| viewer.voxel_at_uv(plane, at_uv, pane_px, spacing);
            let before = under(&viewer);
            for factor in [1.2, 1.44, 3.0, 0.5] {
                viewer.apply(
                    ViewerCommand::ZoomAt {
                        plane,
                        factor,
                        at_uv,
                        pane_px,
                    },
                    &volume,
                );
                let after = under(&viewer);
                for axis in 0..3 {
                    assert!(
                        (after[axis] - before[axis]).abs() < 1e-3,
                        "{plane:?} ×{factor}: {before:?} → {after:?}"
                    );
                }
            }
            assert!(viewer.views[n].zoom > 1.0);
        }
    }

    /// Scrolling moves one plane and the crosshair with it, never past the stack's ends.
    #[test]
    fn scrolling_stays_inside_the_stack() {
        let volume = volume();
        let mut viewer = Viewer::new(&volume);
        assert_eq!(viewer.view(Plane::Axial).slice, 3.0);
        let scroll = |slices| ViewerCommand::Scroll {
            plane: Plane::Axial,
            slices,
        };
        viewer.apply(scroll(2.0), &volume);
        assert_eq!(viewer.view(Plane::Axial).slice, 5.0);
        assert_eq!(viewer.crosshair[viewer.axial_axis()], 5.0);
        viewer.apply(scroll(100.0), &volume);
        assert_eq!(viewer.view(Plane::Axial).slice, 7.0);
        viewer.apply(scroll(-100.0), &volume);
        assert_eq!(viewer.view(Plane::Axial).slice, 0.0);
        assert_eq!(viewer.view(Plane::Coronal).slice, 4.0, "other planes stay");
    }

    /// A crosshair click moves every plane through the voxel; presets and drags set the one
    /// window all planes share, whose width stays positive.
    #[test]
    fn crosshair_and_window_are_shared() {
        let volume = volume();
        let mut viewer = Viewer::new(&volume);
        viewer.apply(ViewerCommand::SetCrosshair([12.4, 2.6, 6.0]), &volume);
        assert_eq!(viewer.crosshair, [12.0, 3.0, 6.0]);
        assert_eq!(viewer.view(Plane::Axial).slice, 6.0);
        assert_eq!(viewer.view(Plane::Coronal).slice, 3.0);
        assert_eq!(viewer.view(Plane::Sagittal).slice, 12.0);
        viewer.apply(ViewerCommand::Preset(2), &volume);
        assert_eq!(viewer.window(), (1500.0, -600.0));
        viewer.apply(
            ViewerCommand::AdjustWindow {
                width_hu: -5000.0,
                level_hu: 100.0,
            },
            &volume,
        );
        assert_eq!(viewer.window(), (1.0, -500.0));
        viewer.apply(ViewerCommand::Reset, &volume);
        assert_eq!(viewer.window(), (400.0, 40.0));
    }

    /// Two ruler clicks on one plane make a measurement in millimetres through the voxel
    /// size; a click on another plane starts afresh.
    #[test]
    fn the_ruler_measures_in_millimetres() {
        let volume = volume();
        let mut viewer = Viewer::new(&volume);
        viewer.apply(ViewerCommand::ToggleRuler, &volume);
        let point = |plane, voxel| ViewerCommand::RulerPoint { plane, voxel };
        viewer.apply(point(Plane::Axial, [2.0, 2.0, 3.0]), &volume);
        viewer.apply(point(Plane::Coronal, [0.0, 4.0, 0.0]), &volume);
        assert!(viewer.measurements.is_empty());
        viewer.apply(point(Plane::Coronal, [6.0, 4.0, 3.0]), &volume);
        assert_eq!(viewer.measurements.len(), 1);
        let measured = viewer.measurements[0];
        // 6 voxels of 0.5 mm across, 3 slices of 2 mm up: √(3² + 6²) mm.
        assert!((measured.length_mm - 45f64.sqrt()).abs() < 1e-9);
        assert_eq!(measured.plane, Plane::Coronal);
        viewer.apply(ViewerCommand::DeleteMeasurement(0), &volume);
        assert!(viewer.measurements.is_empty());
    }

    /// `K` goes to the key slice when there is one, and does nothing otherwise.
    #[test]
    fn jumping_to_the_key_slice() {
        let volume = volume();
        let mut viewer = Viewer::new(&volume);
        viewer.apply(ViewerCommand::JumpToKeySlice, &volume);
        assert_eq!(viewer.view(Plane::Axial).slice, 3.0);
        viewer.apply(ViewerCommand::SetKeySlice(Some(6.0)), &volume);
        viewer.apply(ViewerCommand::JumpToKeySlice, &volume);
        assert_eq!(viewer.view(Plane::Axial).slice, 6.0);
    }
}
