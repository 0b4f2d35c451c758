//! The 3D view's camera: the CT seen from the front (patient's right on the screen's left,
//! head up) turned about its long axis and tilted, zoomed; the uniforms that make the maximum
//! intensity projection or the volume rendering (`shaders/mip.wgsl`) of it; and the
//! resolution it is drawn at on an adapter that cannot afford every pixel.
//!
//! Knows volumes' grids and nothing of egui.

use super::ViewUniforms;

/// The camera of the 3D view.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Orbit {
    /// Turn about the patient's long axis, degrees (0: from the front).
    pub azimuth_deg: f64,
    /// Tilt, degrees (positive: from above), within ±89.
    pub elevation_deg: f64,
    /// Magnification (1: the whole CT fits).
    pub zoom: f64,
    /// Fewer samples per ray while it is being turned (a software renderer stays fluid).
    pub preview: bool,
    /// What each ray shows.
    pub rendering: Rendering,
}

/// What a ray of the 3D view shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Rendering {
    /// The brightest voxel along it (vessels, bone and contrast stand out), the lesions it
    /// crosses tinting it.
    #[default]
    Mip,
    /// Tissue above the window's centre built up front to back, lesions nearly opaque in
    /// their colour: what lies in front hides what lies behind.
    Volume,
}

impl Rendering {
    /// The name shown in the view.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::Mip => "MIP",
            Self::Volume => "volume",
        }
    }

    /// The other one.
    #[must_use]
    pub fn toggled(self) -> Self {
        match self {
            Self::Mip => Self::Volume,
            Self::Volume => Self::Mip,
        }
    }
}

impl Default for Orbit {
    fn default() -> Self {
        Self {
            azimuth_deg: 0.0,
            elevation_deg: 0.0,
            zoom: 1.0,
            preview: false,
            rendering: Rendering::Mip,
        }
    }
}

/// What the projection needs of the volume and the screen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Projection {
    /// Volume dimensions, voxels.
    pub dims: [usize; 3],
    /// Voxel spacing, mm.
    pub spacing_mm: [f64; 3],
    /// Volume voxels per texture voxel (1 unless downsampled).
    pub step: [usize; 3],
    /// Texture dimensions.
    pub texture_dims: [usize; 3],
    /// The view's size, pixels.
    pub viewport_px: [f64; 2],
    /// Window centre and width, HU.
    pub window_hu: [f64; 2],
    /// Grey inverted (MONOCHROME1).
    pub inverted: bool,
    /// Mask opacity.
    pub mask_opacity: f32,
    /// Bit n set: label n shown.
    pub visible_labels: u32,
    /// The key slice's plane: the voxel axis it cuts and its index along it.
    pub key_plane: Option<(usize, f64)>,
    /// The textures are the coarse copy made for turning.
    pub pooled: bool,
}

impl Orbit {
    /// Turns and tilts the camera by these many degrees.
    pub fn rotate(&mut self, azimuth_deg: f64, elevation_deg: f64) {
        self.azimuth_deg = (self.azimuth_deg + azimuth_deg).rem_euclid(360.0);
        self.elevation_deg = (self.elevation_deg + elevation_deg).clamp(-89.0, 89.0);
    }

    /// Screen right, screen up and the viewing direction, in the volume's voxel axes (x to
    /// the patient's left, y posterior, z superior), unit length.
    #[must_use]
    pub fn basis(&self) -> [[f64; 3]; 3] {
        let (a, e) = (
            self.azimuth_deg.to_radians(),
            self.elevation_deg.to_radians(),
        );
        let right = [a.cos(), -a.sin(), 0.0];
        let flat = [a.sin(), a.cos(), 0.0];
        let up = [e.sin() * flat[0], e.sin() * flat[1], e.cos()];
        let forward = [e.cos() * flat[0], e.cos() * flat[1], -e.sin()];
        [right, up, forward]
    }

    /// The uniforms of the projection: `voxel_from_uvt` maps the viewport (u, v) and the
    /// depth t ∈ [0, 1] to texture voxels; `visible_labels[1]` is the samples per ray.
    #[must_use]
    pub fn uniforms(&self, projection: &Projection) -> ViewUniforms {
        let [right, up, forward] = self.basis();
        let size: [f64; 3] =
            std::array::from_fn(|a| projection.dims[a] as f64 * projection.spacing_mm[a]);
        let diagonal = size.iter().map(|s| s * s).sum::<f64>().sqrt().max(1e-6);
        let centre: [f64; 3] = std::array::from_fn(|a| {
            (projection.dims[a].max(1) - 1) as f64 / 2.0 * projection.spacing_mm[a]
        });
        let aspect = projection.viewport_px[0].max(1.0) / projection.viewport_px[1].max(1.0);
        let half = diagonal / 2.0 / self.zoom.max(1e-3);
        let (half_width, half_height) = (half * aspect.max(1.0), half * (1.0 / aspect).max(1.0));
        // Millimetres of one texture voxel along each axis.
        let texel: [f64; 3] =
            std::array::from_fn(|a| projection.spacing_mm[a] * projection.step[a] as f64);
        let column = |vector: [f64; 3]| -> [f32; 4] {
            [
                (vector[0] / texel[0]) as f32,
                (vector[1] / texel[1]) as f32,
                (vector[2] / texel[2]) as f32,
                0.0,
            ]
        };
        let scaled = |vector: [f64; 3], by: f64| vector.map(|v| v * by);
        let origin: [f64; 3] = std::array::from_fn(|a| {
            centre[a] - half_width * right[a] + half_height * up[a] - 0.5 * diagonal * forward[a]
        });
        let mut translation = column(origin);
        translation[3] = 1.0;
        let finest = texel.iter().copied().fold(f64::MAX, f64::min).max(1e-6);
        let full = (diagonal / finest).ceil().clamp(16.0, 768.0);
        // While turning: a third of the samples, or half of them through the coarse copy
        // (whose every texel already holds the brightest of its block).
        let samples = match (self.preview, projection.pooled) {
            (false, _) => full,
            (true, false) => (full / 3.0).max(16.0),
            (true, true) => (full / 2.0).max(16.0),
        };
        let (plane_position, plane_flags) = match projection.key_plane {
            Some((axis, index)) if axis < 3 => (
                ((index / projection.step[axis] as f64) as f32).to_bits(),
                axis as u32 + 1,
            ),
            _ => (0, 0),
        };
        let rendering_flag = match self.rendering {
            Rendering::Mip => 0,
            Rendering::Volume => 4,
        };
        ViewUniforms {
            voxel_from_uv: [
                column(scaled(right, 2.0 * half_width)),
                column(scaled(up, -2.0 * half_height)),
                column(scaled(forward, diagonal)),
                translation,
            ],
            window: [
                projection.window_hu[0] as f32,
                projection.window_hu[1] as f32,
                if projection.inverted { 1.0 } else { 0.0 },
                projection.mask_opacity,
            ],
            dims: [
                projection.texture_dims[0] as f32,
                projection.texture_dims[1] as f32,
                projection.texture_dims[2] as f32,
                (diagonal / samples) as f32,
            ],
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "a sample count clamped to 16–768 above"
            )]
            visible_labels: [
                projection.visible_labels,
                samples as u32,
                plane_position,
                plane_flags | rendering_flag,
            ],
        }
    }
}

/// Samples a software adapter (lavapipe, llvmpipe) is given for one frame of the 3D view
/// while it is being turned (about a sixth of a second on two cores, with the image shown).
pub const SOFTWARE_PREVIEW_SAMPLES: f64 = 8e6;
/// … and for a still frame (about a second, once after each change).
pub const SOFTWARE_STILL_SAMPLES: f64 = 100e6;

/// The size, in pixels, to draw a 3D view of `viewport_px` at, with `samples` per ray,
/// within `budget` samples a frame (none: every pixel). The aspect is kept; the image is
/// scaled up to the view when shown.
#[must_use]
pub fn render_size(viewport_px: [f64; 2], samples: u32, budget: Option<f64>) -> [u32; 2] {
    let [width, height] = viewport_px.map(|side| side.max(1.0));
    let scale = budget.map_or(1.0, |budget| {
        (budget / (width * height * f64::from(samples.max(1))))
            .sqrt()
            .min(1.0)
    });
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "positive sizes below the view's, which fits a texture"
    )]
    [width, height].map(|side| (side * scale).round().clamp(1.0, 8192.0) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_front_view_looks_posterior_with_the_head_up_and_turns_about_the_long_axis() {
        let mut orbit = Orbit::default();
        let near = |a: [f64; 3], b: [f64; 3]| (0..3).all(|n| (a[n] - b[n]).abs() < 1e-12);
        let [right, up, forward] = orbit.basis();
        assert!(near(right, [1.0, 0.0, 0.0]), "{right:?}");
        assert!(near(up, [0.0, 0.0, 1.0]), "{up:?}");
        assert!(near(forward, [0.0, 1.0, 0.0]), "{forward:?}");
        // A quarter turn: from the patient's left side.
        orbit.rotate(90.0, 0.0);
        let [_, _, forward] = orbit.basis();
        assert!((forward[0] - 1.0).abs() < 1e-9, "{forward:?}");
        orbit.rotate(0.0, 200.0);
        assert!((orbit.elevation_deg - 89.0).abs() < 1e-9);
        orbit.rotate(300.0, 0.0);
        assert!((orbit.azimuth_deg - 30.0).abs() < 1e-9);
    }

    #[test]
    fn the_rays_cross_the_whole_volume_and_the_preview_samples_less() {
        let projection = Projection {
            dims: [100, 100, 50],
            spacing_mm: [1.0, 1.0, 2.0],
            step: [1, 1, 1],
            texture_dims: [100, 100, 50],
            viewport_px: [400.0, 400.0],
            window_hu: [40.0, 400.0],
            inverted: false,
            mask_opacity: 0.5,
            visible_labels: u32::MAX,
            key_plane: None,
            pooled: false,
        };
        let orbit = Orbit::default();
        let uniforms = orbit.uniforms(&projection);
        let at = |u: f32, v: f32, t: f32| -> [f32; 3] {
            let m = uniforms.voxel_from_uv;
            std::array::from_fn(|a| m[0][a] * u + m[1][a] * v + m[2][a] * t + m[3][a])
        };
        // The centre ray runs from in front of the volume to behind it, through its centre.
        let front = at(0.5, 0.5, 0.0);
        let back = at(0.5, 0.5, 1.0);
        assert!(front[1] < 0.0 && back[1] > 99.0, "{front:?} {back:?}");
        let middle = at(0.5, 0.5, 0.5);
        assert!((middle[0] - 49.5).abs() < 1e-3 && (middle[2] - 24.5).abs() < 1e-3);
        // Screen up is superior: the top of the view is at higher slices.
        assert!(at(0.5, 0.0, 0.5)[2] > at(0.5, 1.0, 0.5)[2]);
        let preview = Orbit {
            preview: true,
            ..orbit
        }
        .uniforms(&projection);
        assert!(preview.visible_labels[1] < uniforms.visible_labels[1]);
    }

    #[test]
    fn a_software_adapter_draws_fewer_pixels_in_the_views_aspect() {
        assert_eq!(render_size([1280.0, 800.0], 500, None), [1280, 800]);
        let [width, height] = render_size([1280.0, 800.0], 200, Some(SOFTWARE_PREVIEW_SAMPLES));
        assert!(width < 1280 && height < 800, "{width}×{height}");
        let drawn = f64::from(width) * f64::from(height) * 200.0;
        assert!(drawn <= SOFTWARE_PREVIEW_SAMPLES * 1.02, "{drawn}");
        assert!((f64::from(width) / f64::from(height) - 1.6).abs() < 0.02);
        // A small view within the budget is drawn whole; nothing is ever empty.
        assert_eq!(render_size([100.0, 50.0], 100, Some(1e9)), [100, 50]);
        assert_eq!(render_size([0.0, 0.0], 0, Some(1.0)), [1, 1]);
    }

    #[test]
    fn the_key_plane_and_the_rendering_travel_in_the_uniforms() {
        let projection = Projection {
            dims: [100, 100, 50],
            spacing_mm: [1.0, 1.0, 2.0],
            step: [2, 2, 2],
            texture_dims: [50, 50, 25],
            viewport_px: [400.0, 400.0],
            window_hu: [40.0, 400.0],
            inverted: false,
            mask_opacity: 0.5,
            visible_labels: u32::MAX,
            key_plane: Some((2, 30.0)),
            pooled: true,
        };
        let orbit = Orbit {
            rendering: Rendering::Volume,
            preview: true,
            ..Orbit::default()
        };
        let uniforms = orbit.uniforms(&projection);
        // Slice 30 is texel 15 of a texture at every second slice.
        assert!((f32::from_bits(uniforms.visible_labels[2]) - 15.0).abs() < 1e-6);
        assert_eq!(uniforms.visible_labels[3], 3 | 4);
        // A pooled preview has half the samples of a still view of the same textures.
        let full = Orbit::default().uniforms(&projection).visible_labels[1];
        assert_eq!(uniforms.visible_labels[1], full / 2);
        assert!(
            uniforms.dims[3] > 1.9 && uniforms.dims[3] < 4.1,
            "{:?}",
            uniforms.dims
        );
    }
}
