//! Frame time of the slice renderer: one 1024×1024 axial view of a 512×512×300 volume drawn
//! and read back, on whatever adapter wgpu finds (lavapipe on the CI machine; a real GPU
//! elsewhere). The read-back is included, so this is an upper bound on the draw itself.
//! Scrolling a slice changes only the uniforms, as in the viewer. The 3D view is measured
//! the same way: the full projection at every pixel, and as the viewer casts it on a
//! software adapter (a still frame and the preview while turning, each within its sample
//! budget into a smaller canvas shown scaled up).

use std::hint::black_box;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, criterion_group, criterion_main};
use keyslice::render::canvas::Canvas;
use keyslice::render::orbit::{
    Orbit, Projection, Rendering, SOFTWARE_PREVIEW_SAMPLES, SOFTWARE_STILL_SAMPLES, render_size,
};
use keyslice::render::pooled::{POOLED_SIDE, upload_pooled};
use keyslice::render::view::{Plane, PlaneAxes, SliceView};
use keyslice::render::{
    SliceRenderer, ViewUniforms, VolumeTextures, draw_to_rgba, headless_device, render_to_rgba,
    upload_volume,
};
use keyslice::volume::{Affine, Volume, VolumeInfo, Voxels};

fn scroll_frames(c: &mut Criterion) {
    let (device, queue, info) = match headless_device() {
        Ok(found) => found,
        Err(error) => {
            eprintln!("skipping the render benchmark: {error}");
            return;
        }
    };
    eprintln!("rendering on {} ({:?})", info.name, info.backend);
    let dims = [512, 512, 300];
    let values: Vec<i16> = (0..dims.iter().product::<usize>())
        .map(|n| ((n % 512) as i16 - 256) * 4)
        .collect();
    let volume = Volume::new(
        dims,
        Affine::from_axes(
            [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            [0.7, 0.7, 1.0],
            [0.0; 3],
        ),
        Voxels::I16(values),
        Vec::new(),
        VolumeInfo::default(),
    )
    .unwrap_or_else(|error| panic!("benchmark volume: {error}"));
    let textures = upload_volume(&device, &queue, &volume, None);
    let renderer = SliceRenderer::new(&device, wgpu::TextureFormat::Rgba8Unorm);
    let view_resources = renderer.create_view(&device, &textures);
    let axes = PlaneAxes::new(Plane::Axial, &volume.directions_lps());
    let mut view = SliceView::centred(Plane::Axial, axes, dims);
    let mut group = c.benchmark_group("render");
    group.sample_size(10);
    group.bench_function("scroll one axial slice, 1024x1024, draw + read back", |b| {
        b.iter(|| {
            view.slice = (view.slice + 1.0) % 300.0;
            let uniforms =
                ViewUniforms::new(&view, axes, &volume, &textures, [1024.0, 1024.0], 0.5);
            SliceRenderer::prepare(&queue, &view_resources, &uniforms);
            black_box(
                render_to_rgba(&device, &queue, &renderer, &view_resources, [1024, 1024])
                    .map(|pixels| pixels.len()),
            )
        });
    });
    orbit_frames(&mut group, &device, &queue, &volume, &textures);
    group.finish();
}

/// The 3D view's frames, on the slice benchmark's device and volume.
fn orbit_frames(
    group: &mut BenchmarkGroup<'_, WallTime>,
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    volume: &Volume,
    textures: &VolumeTextures,
) {
    let dims = volume.dims();
    // The 3D view: a maximum intensity projection of the whole CT at 1280×800, turned one
    // degree a frame, at every pixel.
    let mip = SliceRenderer::mip(device, wgpu::TextureFormat::Rgba8Unorm);
    let mip_view = mip.create_view(device, textures);
    let projection = Projection {
        dims,
        spacing_mm: [0.7, 0.7, 1.0],
        step: textures.step,
        texture_dims: textures.texture_dims,
        viewport_px: [1280.0, 800.0],
        window_hu: [40.0, 400.0],
        inverted: false,
        mask_opacity: 0.5,
        visible_labels: u32::MAX,
        key_plane: Some((2, 150.0)),
        pooled: false,
    };
    for rendering in [Rendering::Mip, Rendering::Volume] {
        let mut orbit = Orbit {
            rendering,
            ..Orbit::default()
        };
        let name = format!(
            "3D view ({}) 1280x800 every pixel, draw + read back",
            rendering.label()
        );
        group.bench_function(name, |b| {
            b.iter(|| {
                orbit.rotate(1.0, 0.0);
                SliceRenderer::prepare(queue, &mip_view, &orbit.uniforms(&projection));
                black_box(
                    render_to_rgba(device, queue, &mip, &mip_view, [1280, 800])
                        .map(|pixels| pixels.len()),
                )
            });
        });
    }
    // As the viewer draws it on a software adapter: cast within the sample budget into the
    // canvas, shown at 1280×800; while turning through the coarse copy.
    let pooled = upload_pooled(device, queue, volume, textures, None, POOLED_SIDE)
        .unwrap_or_else(|| panic!("a 512x512x300 volume has a coarse copy"));
    let pooled_view = mip.create_view(device, &pooled);
    let mut canvas = Canvas::new(device, wgpu::TextureFormat::Rgba8Unorm);
    for preview in [false, true] {
        let (cast_textures, cast_view, budget) = if preview {
            (&pooled, &pooled_view, SOFTWARE_PREVIEW_SAMPLES)
        } else {
            (textures, &mip_view, SOFTWARE_STILL_SAMPLES)
        };
        let projection = Projection {
            step: cast_textures.step,
            texture_dims: cast_textures.texture_dims,
            pooled: preview,
            ..projection
        };
        let mut orbit = Orbit {
            preview,
            ..Orbit::default()
        };
        let name = if preview {
            "3D view (MIP) 1280x800 as a software adapter turns it (coarse preview), cast + show + read back"
        } else {
            "3D view (MIP) 1280x800 as a software adapter shows it still, cast + show + read back"
        };
        group.bench_function(name, |b| {
            b.iter(|| {
                orbit.rotate(1.0, 0.0);
                let uniforms = orbit.uniforms(&projection);
                let size = render_size([1280.0, 800.0], uniforms.visible_labels[1], Some(budget));
                let mut encoder =
                    device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
                let key = orbit.azimuth_deg.to_le_bytes();
                canvas.update(device, &mut encoder, size, &key, |pass| {
                    SliceRenderer::prepare(queue, cast_view, &uniforms);
                    mip.paint(pass, cast_view);
                });
                queue.submit([encoder.finish()]);
                black_box(
                    draw_to_rgba(device, queue, [1280, 800], |pass| canvas.paint(pass))
                        .map(|pixels| pixels.len()),
                )
            });
        });
    }
    // What showing the canvas costs alone (nothing changed, nothing cast): the blit to
    // 1280×800 and the read-back, the part of the figures above that is not the 3D view.
    group.bench_function(
        "3D view canvas shown unchanged at 1280x800, show + read back",
        |b| {
            b.iter(|| {
                black_box(
                    draw_to_rgba(device, queue, [1280, 800], |pass| canvas.paint(pass))
                        .map(|pixels| pixels.len()),
                )
            });
        },
    );
}

criterion_group!(benches, scroll_frames);
criterion_main!(benches);
