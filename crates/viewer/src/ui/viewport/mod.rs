//! The three linked planes (axial, coronal, sagittal) drawn on the GPU through an
//! `egui_wgpu` paint callback, with crosshair, orientation letters, slice numbers and a
//! status line (slice, position in mm, HU under the cursor, window/level).
//!
//! Interaction follows PACS habits: wheel, arrow keys and PageUp/PageDown scroll slices;
//! right-drag changes window (horizontal) and level (vertical); keys 1–5 pick the presets;
//! Ctrl+wheel zooms; middle-drag pans; left click moves the crosshair (and with it the other
//! planes); double-click enlarges a view; `R` resets. While a lesion's mask is drawn, left
//! drags paint with the brush (Shift erases) and `[` / `]` shrink and grow it. `V` shows the
//! 3D view (a maximum intensity projection with the lesion masks, `orbit`) in place of the
//! sagittal plane: left-drag turns it, the wheel zooms.
//!
//! The state ([`Viewer`], in `state`) knows nothing of egui: the panels turn input into
//! [`ViewerCommand`]s and the state applies them, so its behaviour is tested without a
//! window. GPU resources (pipeline, volume texture, one uniform buffer per plane) live in
//! the renderer's callback resources ([`ViewerGpu`], built once per study); each frame passes
//! only the small per-view uniforms through the paint callback (`gpu`).

mod draw;
mod evidence;
mod extent;
mod gpu;
mod input;
mod orbit;
mod paint;
mod panels;
mod screen;
mod state;

pub use extent::Evidence;
pub use gpu::ViewerGpu;
pub use state::{LesionMark, Measurement, PaintBrush, Viewer, ViewerCommand, WINDOW_PRESETS};
