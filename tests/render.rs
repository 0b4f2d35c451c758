//! The slice shader and renderer: naga validates the WGSL, and a real wgpu device (a GPU, or
//! the lavapipe software rasteriser in CI) draws axial, coronal and sagittal planes of a
//! volume with known values, read back pixel by pixel.
//!
//! Without any Vulkan/GL adapter the GPU tests say so and pass, unless
//! `KEYSLICE_REQUIRE_GPU=1` (set by `.ci/run`, which installs lavapipe) makes that a failure.

use keyslice::render::view::{Plane, PlaneAxes, SliceView};
use keyslice::render::{
    SLICE_SHADER, SliceRenderer, ViewUniforms, headless_device, render_to_rgba, upload_volume,
};
use keyslice::volume::{Affine, LabelVolume, Volume, VolumeInfo, Voxels};

#[test]
fn slice_shader_is_valid_wgsl() {
    let module = naga::front::wgsl::parse_str(SLICE_SHADER)
        .unwrap_or_else(|error| panic!("{}", error.emit_to_string(SLICE_SHADER)));
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::default(),
    )
    .validate(&module)
    .unwrap_or_else(|error| panic!("{}", error.emit_to_string(SLICE_SHADER)));
    assert!(
        module
            .entry_points
            .iter()
            .any(|entry| entry.name == "fs_main")
    );
}

const DIMS: [usize; 3] = [8, 6, 4];

/// HU = i + 10·j + 60·k, so every voxel says where it is.
fn marked_volume(inverted: bool) -> Volume {
    let mut values = Vec::new();
    for k in 0..DIMS[2] {
        for j in 0..DIMS[1] {
            for i in 0..DIMS[0] {
                values.push((i + 10 * j + 60 * k) as i16);
            }
        }
    }
    let info = VolumeInfo {
        display_inverted: inverted,
        ..VolumeInfo::default()
    };
    Volume::new(
        DIMS,
        Affine::IDENTITY,
        Voxels::I16(values),
        Vec::new(),
        info,
    )
    .expect("test volume parts agree")
}

fn device_or_skip() -> Option<(wgpu::Device, wgpu::Queue)> {
    match headless_device() {
        Ok((device, queue, info)) => {
            eprintln!("rendering on {} ({:?})", info.name, info.backend);
            Some((device, queue))
        }
        Err(error) if std::env::var_os("KEYSLICE_REQUIRE_GPU").is_none() => {
            eprintln!("no GPU adapter, skipping GPU rendering checks: {error}");
            None
        }
        Err(error) => panic!("KEYSLICE_REQUIRE_GPU is set but {error}"),
    }
}

/// Renders `plane` at viewport = plane size (one pixel per voxel) with a window mapping
/// HU 0–255 to grey 0–255; returns the red channel.
fn render_plane(
    volume: &Volume,
    labels: Option<&LabelVolume>,
    plane: Plane,
    size: [u32; 2],
) -> Option<Vec<u8>> {
    let (device, queue) = device_or_skip()?;
    let textures = upload_volume(&device, &queue, volume, labels);
    let renderer = SliceRenderer::new(&device, wgpu::TextureFormat::Rgba8Unorm);
    let view_resources = renderer.create_view(&device, &textures);
    let axes = PlaneAxes::new(plane, &volume.directions_lps());
    let mut view = SliceView::centred(plane, axes, volume.dims());
    view.window_center_hu = 127.5;
    view.window_width_hu = 255.0;
    let uniforms = ViewUniforms::new(
        &view,
        axes,
        volume,
        &textures,
        [f64::from(size[0]), f64::from(size[1])],
        1.0,
    );
    SliceRenderer::prepare(&queue, &view_resources, &uniforms);
    let rgba = render_to_rgba(&device, &queue, &renderer, &view_resources, size).expect("readback");
    Some(rgba)
}

fn red(rgba: &[u8], width: u32, x: u32, y: u32) -> u8 {
    rgba[((y * width + x) * 4) as usize]
}

/// Every pixel's grey equals `expected(x, y)` (the HU of the voxel it shows) within 1.
fn assert_plane(rgba: &[u8], size: [u32; 2], expected: impl Fn(u32, u32) -> u32) {
    for y in 0..size[1] {
        for x in 0..size[0] {
            let want = i32::try_from(expected(x, y)).expect("small");
            let got = i32::from(red(rgba, size[0], x, y));
            assert!((got - want).abs() <= 1, "({x}, {y}): {got} vs {want}");
        }
    }
}

#[test]
fn axial_plane_shows_the_middle_slice_with_left_on_the_right() {
    let Some(rgba) = render_plane(&marked_volume(false), None, Plane::Axial, [8, 6]) else {
        return;
    };
    // Middle slice k = 1: pixel (x, y) = voxel (x, y, 1) → HU x + 10y + 60.
    assert_plane(&rgba, [8, 6], |x, y| x + 10 * y + 60);
}

#[test]
fn coronal_plane_has_superior_at_the_top() {
    let Some(rgba) = render_plane(&marked_volume(false), None, Plane::Coronal, [8, 4]) else {
        return;
    };
    // Middle coronal slice j = 2; screen row y shows k = 3 − y.
    assert_plane(&rgba, [8, 4], |x, y| x + 20 + 60 * (3 - y));
}

#[test]
fn sagittal_plane_has_anterior_on_the_left() {
    let Some(rgba) = render_plane(&marked_volume(false), None, Plane::Sagittal, [6, 4]) else {
        return;
    };
    // Middle sagittal slice i = 3; screen column x is j = x (posterior to the right).
    assert_plane(&rgba, [6, 4], |x, y| 3 + 10 * x + 60 * (3 - y));
}

#[test]
fn monochrome1_is_inverted_on_screen() {
    let Some(rgba) = render_plane(&marked_volume(true), None, Plane::Axial, [8, 6]) else {
        return;
    };
    let got = i32::from(red(&rgba, 8, 2, 3));
    assert!((got - (255 - (2 + 30 + 60))).abs() <= 1, "{got}");
}

#[test]
fn lesion_labels_are_drawn_in_their_colour() {
    let mut labels = vec![0u8; DIMS.iter().product()];
    labels[2 + DIMS[0] * (3 + DIMS[1])] = 9; // voxel (2, 3, 1): liver lesion colour
    let mask = LabelVolume {
        name: "liver_lesion".into(),
        dims: DIMS,
        patient_from_voxel: Affine::IDENTITY,
        labels,
    };
    let Some(rgba) = render_plane(&marked_volume(false), Some(&mask), Plane::Axial, [8, 6]) else {
        return;
    };
    let pixel = |x: u32, y: u32| {
        let at = ((y * 8 + x) * 4) as usize;
        [rgba[at], rgba[at + 1], rgba[at + 2]]
    };
    // Opacity 1 over the label colour (1.0, 0.1, 0.1): 0.1 · 255 = 25.5 rounds either way.
    let [r, g, b] = pixel(2, 3);
    assert!(
        r == 255 && (25..=26).contains(&g) && (25..=26).contains(&b),
        "{:?}",
        pixel(2, 3)
    );
    // Its neighbours keep their grey.
    let [r, g, b] = pixel(3, 3);
    assert!(r == g && g == b, "{:?}", pixel(3, 3));
}

#[test]
fn the_3d_view_and_canvas_shaders_are_valid_wgsl() {
    use keyslice::render::MIP_SHADER;
    use keyslice::render::canvas::BLIT_SHADER;
    for source in [MIP_SHADER, BLIT_SHADER] {
        let module = naga::front::wgsl::parse_str(source)
            .unwrap_or_else(|error| panic!("{}", error.emit_to_string(source)));
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::default(),
        )
        .validate(&module)
        .unwrap_or_else(|error| panic!("{}", error.emit_to_string(source)));
    }
}

/// A 40 mm cube of air with a bright ball on the patient's left and high up, and a liver
/// lesion mask on the right and low down.
fn ball_and_lesion() -> (Volume, LabelVolume) {
    let dims = [40usize, 40, 40];
    let mut values = vec![0i16; 40 * 40 * 40];
    let mut labels = vec![0u8; 40 * 40 * 40];
    for k in 0..40usize {
        for j in 0..40usize {
            for i in 0..40usize {
                let n = i + 40 * (j + 40 * k);
                let d = |c: [usize; 3]| {
                    [i, j, k]
                        .iter()
                        .zip(c)
                        .map(|(&a, b)| (a as f64 - b as f64).powi(2))
                        .sum::<f64>()
                };
                if d([30, 20, 30]) <= 16.0 {
                    values[n] = 1000; // bone-bright, left and superior
                }
                if d([10, 20, 10]) <= 9.0 {
                    labels[n] = 9; // a liver lesion, right and inferior
                }
            }
        }
    }
    let volume = Volume::new(
        dims,
        Affine::IDENTITY,
        Voxels::I16(values),
        Vec::new(),
        VolumeInfo::default(),
    )
    .expect("volume");
    let mask = LabelVolume {
        name: "liver_lesion".into(),
        dims,
        patient_from_voxel: Affine::IDENTITY,
        labels,
    };
    (volume, mask)
}

fn ball_projection() -> keyslice::render::orbit::Projection {
    keyslice::render::orbit::Projection {
        dims: [40, 40, 40],
        spacing_mm: [1.0; 3],
        step: [1; 3],
        texture_dims: [40, 40, 40],
        viewport_px: [64.0, 64.0],
        window_hu: [500.0, 1000.0],
        inverted: false,
        mask_opacity: 1.0,
        visible_labels: u32::MAX,
        key_plane: None,
        pooled: false,
    }
}

fn pixel(rgba: &[u8], x: usize, y: usize) -> [u8; 3] {
    let at = (y * 64 + x) * 4;
    [rgba[at], rgba[at + 1], rgba[at + 2]]
}

/// The volume's 69 mm diagonal spans a 64-pixel view: voxel i lies at pixel
/// 32 + (i − 19.5)·64/69.
fn px(i: f64) -> usize {
    (32.0 + (i - 19.5) * 64.0 / 69.28) as usize
}

/// The 3D view projects the brightest voxel along each ray: a bright ball on the patient's
/// left and high up shows at the top right from the front, at the middle from the left side;
/// a lesion mask inside the body shows through it in its colour.
#[test]
fn the_3d_view_projects_the_brightest_voxels_and_the_lesions_through_the_body() {
    use keyslice::render::orbit::Orbit;
    let Some((device, queue)) = device_or_skip() else {
        return;
    };
    let (volume, mask) = ball_and_lesion();
    let textures = upload_volume(&device, &queue, &volume, Some(&mask));
    let renderer = SliceRenderer::mip(&device, wgpu::TextureFormat::Rgba8Unorm);
    let view = renderer.create_view(&device, &textures);
    let projection = ball_projection();
    let draw = |orbit: Orbit| {
        SliceRenderer::prepare(&queue, &view, &orbit.uniforms(&projection));
        render_to_rgba(&device, &queue, &renderer, &view, [64, 64]).expect("rendered")
    };
    let front = draw(Orbit::default());
    assert_eq!(
        pixel(&front, px(30.0), 64 - px(30.0)),
        [255, 255, 255],
        "the ball, top right"
    );
    assert_eq!(
        pixel(&front, px(30.0), px(30.0)),
        [0, 0, 0],
        "nothing bottom right"
    );
    let lesion = pixel(&front, px(10.0), px(30.0));
    assert_eq!(lesion[0], 255, "the lesion in its colour: {lesion:?}");
    assert!(lesion[1] < 60, "{lesion:?}");
    // From the patient's left (a quarter turn), the ball is in the middle column.
    let mut side = Orbit::default();
    side.rotate(90.0, 0.0);
    let side = draw(side);
    assert_eq!(pixel(&side, px(20.0), 64 - px(30.0)), [255, 255, 255]);
}

/// The volume rendering builds the ball up as grey light and the lesion as nearly opaque
/// red; the key slice's plane, seen from above, is a yellow sheet across the volume in both
/// renderings, and absent without a key slice.
#[test]
fn the_volume_rendering_and_the_key_slice_plane_show_in_3d() {
    use keyslice::render::orbit::{Orbit, Rendering};
    let Some((device, queue)) = device_or_skip() else {
        return;
    };
    let (volume, mask) = ball_and_lesion();
    let textures = upload_volume(&device, &queue, &volume, Some(&mask));
    let renderer = SliceRenderer::mip(&device, wgpu::TextureFormat::Rgba8Unorm);
    let view = renderer.create_view(&device, &textures);
    let draw = |orbit: Orbit, key_plane: Option<(usize, f64)>| {
        let projection = keyslice::render::orbit::Projection {
            key_plane,
            ..ball_projection()
        };
        SliceRenderer::prepare(&queue, &view, &orbit.uniforms(&projection));
        render_to_rgba(&device, &queue, &renderer, &view, [64, 64]).expect("rendered")
    };
    let volume_rendering = Orbit {
        rendering: Rendering::Volume,
        ..Orbit::default()
    };
    let front = draw(volume_rendering, None);
    let ball = pixel(&front, px(30.0), 64 - px(30.0));
    assert!(
        ball[0] > 60 && ball[0] == ball[1] && ball[1] == ball[2],
        "{ball:?}"
    );
    let lesion = pixel(&front, px(10.0), px(30.0));
    assert!(lesion[0] > 150 && lesion[1] < 60, "{lesion:?}");
    assert_eq!(pixel(&front, px(30.0), px(30.0)), [0, 0, 0]);
    // From above, the middle of the view (empty) crosses the plane of slice 20: yellow.
    for rendering in [Rendering::Mip, Rendering::Volume] {
        let mut above = Orbit {
            rendering,
            ..Orbit::default()
        };
        above.rotate(0.0, 45.0);
        let without = pixel(&draw(above, None), 32, 32);
        assert_eq!(without, [0, 0, 0], "{rendering:?}");
        let with = pixel(&draw(above, Some((2, 20.0))), 32, 32);
        assert!(
            with[0] > 40 && with[1] > 30 && with[2] < with[1] / 2,
            "{rendering:?}: {with:?}"
        );
    }
}

/// While the view turns on a software adapter it is cast through a coarse copy (the
/// brightest HU of each block, a lesion before the organ around it) into a small canvas,
/// shown scaled up: the ball and the lesion are where they were, and the canvas is cast
/// again only when what it shows changes.
#[test]
fn the_turning_preview_keeps_the_ball_and_the_lesion_and_is_cast_only_on_change() {
    use keyslice::render::canvas::Canvas;
    use keyslice::render::draw_to_rgba;
    use keyslice::render::orbit::Orbit;
    use keyslice::render::pooled::upload_pooled;
    let Some((device, queue)) = device_or_skip() else {
        return;
    };
    let (volume, mask) = ball_and_lesion();
    let textures = upload_volume(&device, &queue, &volume, Some(&mask));
    let pooled = upload_pooled(&device, &queue, &volume, &textures, Some(&mask), 10)
        .expect("a 40-voxel volume is pooled to 10");
    assert_eq!(pooled.texture_dims, [10, 10, 10]);
    assert_eq!(pooled.step, [4, 4, 4]);
    let renderer = SliceRenderer::mip(&device, wgpu::TextureFormat::Rgba8Unorm);
    let view = renderer.create_view(&device, &pooled);
    let orbit = Orbit {
        preview: true,
        ..Orbit::default()
    };
    let projection = keyslice::render::orbit::Projection {
        step: pooled.step,
        texture_dims: pooled.texture_dims,
        pooled: true,
        ..ball_projection()
    };
    let uniforms = orbit.uniforms(&projection);
    let mut canvas = Canvas::new(&device, wgpu::TextureFormat::Rgba8Unorm);
    let mut cast = |key: &[u8]| {
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        let drawn = canvas.update(&device, &mut encoder, [16, 16], key, |pass| {
            SliceRenderer::prepare(&queue, &view, &uniforms);
            renderer.paint(pass, &view);
        });
        queue.submit([encoder.finish()]);
        drawn
    };
    assert!(cast(b"front"), "the first frame is cast");
    assert!(!cast(b"front"), "an unchanged view is not");
    assert!(cast(b"turned"), "a changed one is");
    assert!(cast(b"front"));
    assert_eq!(canvas.size(), Some([16, 16]));
    let shown = draw_to_rgba(&device, &queue, [64, 64], |pass| canvas.paint(pass)).expect("shown");
    let ball = pixel(&shown, px(30.0), 64 - px(30.0));
    assert!(
        ball[0] > 200 && ball[0] == ball[2],
        "the ball, top right: {ball:?}"
    );
    let lesion = pixel(&shown, px(10.0), px(30.0));
    assert!(lesion[0] > 200 && lesion[1] < 80, "the lesion: {lesion:?}");
    assert_eq!(pixel(&shown, px(30.0), px(30.0)), [0, 0, 0]);
}
