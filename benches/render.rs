//! Frame time of the slice renderer: one 1024×1024 axial view of a 512×512×300 volume drawn
//! and read back, on whatever adapter wgpu finds (lavapipe on the CI machine; a real GPU
//! elsewhere). The read-back is included, so this is an upper bound on the draw itself.
//! Scrolling a slice changes only the uniforms, as in the viewer. The 3D view's maximum
//! intensity projection is measured the same way.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use keyslice::render::orbit::{Orbit, Projection};
use keyslice::render::view::{Plane, PlaneAxes, SliceView};
use keyslice::render::{
    SliceRenderer, ViewUniforms, headless_device, render_to_rgba, upload_volume,
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
    // The 3D view: a maximum intensity projection of the whole CT at 1280×800, turned one
    // degree a frame; in full and as the preview drawn while the view is being turned.
    let mip = SliceRenderer::mip(&device, wgpu::TextureFormat::Rgba8Unorm);
    let mip_view = mip.create_view(&device, &textures);
    for preview in [false, true] {
        let mut orbit = Orbit {
            preview,
            ..Orbit::default()
        };
        let name = if preview {
            "3D view (MIP) 1280x800 while turning (preview), draw + read back"
        } else {
            "3D view (MIP) 1280x800, draw + read back"
        };
        group.bench_function(name, |b| {
            b.iter(|| {
                orbit.rotate(1.0, 0.0);
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
                };
                SliceRenderer::prepare(&queue, &mip_view, &orbit.uniforms(&projection));
                black_box(
                    render_to_rgba(&device, &queue, &mip, &mip_view, [1280, 800])
                        .map(|pixels| pixels.len()),
                )
            });
        });
    }
    group.finish();
}

criterion_group!(benches, scroll_frames);
criterion_main!(benches);
