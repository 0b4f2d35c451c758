//! Which GPU adapter wgpu finds on this machine, and the slice renderer's frame time on it:
//! a 512×512×300 volume uploaded once, then 1024×1024 axial frames drawn while scrolling one
//! slice at a time, each read back (so a frame's time is an upper bound on its draw). Prints
//! the adapter, the upload time and the median and 90th-percentile frame times.
//!
//! `cargo run --release --example gpu_check [FRAMES]` (default 200 frames). `WGPU_BACKEND`
//! picks a backend (`vulkan`, `gl`); without a GPU wgpu falls back to a software adapter.

use std::process::ExitCode;
use std::time::Instant;

use keyslice::render::view::{Plane, PlaneAxes, SliceView};
use keyslice::render::{
    SliceRenderer, ViewUniforms, headless_device, render_to_rgba, upload_volume,
};
use keyslice::volume::{Affine, Volume, VolumeInfo, Voxels};

fn main() -> ExitCode {
    let frames: usize = std::env::args()
        .nth(1)
        .and_then(|value| value.parse().ok())
        .unwrap_or(200)
        .max(1);
    let (device, queue, info) = match headless_device() {
        Ok(found) => found,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(1);
        }
    };
    println!(
        "adapter: {} ({:?}, {:?}), driver {} {}",
        info.name, info.backend, info.device_type, info.driver, info.driver_info
    );
    let dims = [512, 512, 300];
    let values: Vec<i16> = (0..dims.iter().product::<usize>())
        .map(|n| ((n % 512) as i16 - 256) * 4)
        .collect();
    let volume = match Volume::new(
        dims,
        Affine::from_axes(
            [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            [0.7, 0.7, 1.0],
            [0.0; 3],
        ),
        Voxels::I16(values),
        Vec::new(),
        VolumeInfo::default(),
    ) {
        Ok(volume) => volume,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(1);
        }
    };
    let started = Instant::now();
    let textures = upload_volume(&device, &queue, &volume, None);
    let renderer = SliceRenderer::new(&device, wgpu::TextureFormat::Rgba8Unorm);
    let view_resources = renderer.create_view(&device, &textures);
    println!(
        "upload of 512x512x300 i16 and pipeline: {:.1} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
    let axes = PlaneAxes::new(Plane::Axial, &volume.directions_lps());
    let mut view = SliceView::centred(Plane::Axial, axes, dims);
    let mut times_ms = Vec::with_capacity(frames);
    let mut checksum = 0u64;
    for _ in 0..frames + 5 {
        view.slice = (view.slice + 1.0) % 300.0;
        let frame_started = Instant::now();
        let uniforms = ViewUniforms::new(&view, axes, &volume, &textures, [1024.0, 1024.0], 0.5);
        SliceRenderer::prepare(&queue, &view_resources, &uniforms);
        match render_to_rgba(&device, &queue, &renderer, &view_resources, [1024, 1024]) {
            Ok(pixels) => checksum += pixels.iter().map(|&byte| u64::from(byte)).sum::<u64>(),
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(1);
            }
        }
        times_ms.push(frame_started.elapsed().as_secs_f64() * 1000.0);
    }
    // The first five frames warm the pipeline and are not counted.
    let mut counted = times_ms.split_off(5);
    counted.sort_by(f64::total_cmp);
    let at = |q: f64| counted[((counted.len() - 1) as f64 * q).round() as usize];
    println!(
        "{frames} frames 1024x1024, draw + read back: median {:.2} ms, 90th percentile {:.2} ms, min {:.2} ms (checksum {checksum})",
        at(0.5),
        at(0.9),
        at(0.0)
    );
    ExitCode::SUCCESS
}
