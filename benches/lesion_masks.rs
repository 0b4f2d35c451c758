//! What a lesion mask costs on a 512×512×300 CT (0.7 × 0.7 × 1 mm): growing it from its box
//! (and from a box as large as the CT),
//! one frame of a brush drag (the disc painted along the way and the box it touched written
//! into the label texture, on whatever adapter wgpu finds: lavapipe on the CI machine), and
//! what lifting the brush costs (the mask as run lengths for its correction, and what it
//! measures).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use keyslice::render::{headless_device, upload_volume, write_labels_box};
use keyslice::volume::lesion::{GrowOptions, VoxelBox, grow_from_box, measure};
use keyslice::volume::mask::{Brush, LesionMask, Plane, paint};
use keyslice::volume::{Affine, LabelVolume, Volume, VolumeInfo, Voxels};

const DIMS: [usize; 3] = [512, 512, 300];
const SPACING: [f64; 3] = [0.7, 0.7, 1.0];
/// The lesion: a 30 mm ball at 40 HU in 100 HU liver.
const CENTRE: [usize; 3] = [200, 260, 150];

fn ct() -> Volume {
    let radius_mm = 15.0;
    let values: Vec<i16> = (0..DIMS.iter().product::<usize>())
        .map(|n| {
            let voxel = [n % 512, (n / 512) % 512, n / (512 * 512)];
            let d2: f64 = (0..3)
                .map(|a| ((voxel[a] as f64 - CENTRE[a] as f64) * SPACING[a]).powi(2))
                .sum();
            let noise = ((n * 2_654_435_761) % 21) as i16 - 10;
            if d2 <= radius_mm * radius_mm {
                40 + noise
            } else {
                100 + noise
            }
        })
        .collect();
    Volume::new(
        DIMS,
        Affine::from_axes(
            [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            SPACING,
            [0.0; 3],
        ),
        Voxels::I16(values),
        Vec::new(),
        VolumeInfo::default(),
    )
    .unwrap_or_else(|error| panic!("benchmark volume: {error}"))
}

fn masks(c: &mut Criterion) {
    let volume = ct();
    let lesion_box = VoxelBox {
        min: [200 - 22, 260 - 22, 150 - 15],
        max: [200 + 22, 260 + 22, 150 + 15],
    };
    let mut group = c.benchmark_group("lesion masks 512x512x300");
    group.sample_size(10);
    group.bench_function("grow from its box (3 cm lesion)", |b| {
        b.iter(|| {
            black_box(grow_from_box(
                &volume,
                lesion_box,
                None,
                &GrowOptions::default(),
            ))
        });
    });
    // The worst a box can be: the whole CT (the in-plane filter and the flood reach every
    // voxel).
    let whole = VoxelBox {
        min: [0; 3],
        max: [DIMS[0] - 1, DIMS[1] - 1, DIMS[2] - 1],
    };
    group.bench_function("grow from a box the size of the CT", |b| {
        b.iter(|| black_box(grow_from_box(&volume, whole, None, &GrowOptions::default())));
    });
    let grown = grow_from_box(&volume, lesion_box, None, &GrowOptions::default())
        .unwrap_or_else(|error| panic!("grown: {error}"));
    let mut mask = grown.mask.clone();
    // One frame of a drag: 5 mm disc, painted every half radius along 20 voxels.
    group.bench_function("one frame of a brush drag (5 mm disc, 20 voxels)", |b| {
        b.iter(|| {
            for step in 0..6 {
                let centre = [CENTRE[0] + 10 + step * 4, CENTRE[1], CENTRE[2]];
                black_box(paint(
                    &mut mask,
                    DIMS,
                    SPACING,
                    centre,
                    5.0,
                    Brush::Disc(Plane::Axial),
                    step % 2 == 0,
                ))
                .ok();
            }
        });
    });
    group.bench_function("brush lifted: the mask as run lengths", |b| {
        b.iter(|| black_box(LesionMask::from_dense(&mask, DIMS)));
    });
    let compact = LesionMask::from_dense(&mask, DIMS);
    group.bench_function("brush lifted: measured from its run lengths", |b| {
        b.iter(|| black_box(compact.measure(SPACING)));
    });
    group.bench_function("brush lifted: measured from the whole mask", |b| {
        b.iter(|| black_box(measure(&mask, DIMS, SPACING)));
    });
    match headless_device() {
        Ok((device, queue, info)) => {
            eprintln!("label texture on {} ({:?})", info.name, info.backend);
            let labels = LabelVolume {
                name: "labels".into(),
                dims: DIMS,
                patient_from_voxel: *volume.patient_from_voxel(),
                labels: mask.clone(),
            };
            let textures = upload_volume(&device, &queue, &volume, Some(&labels));
            // The box a 20-voxel drag of a 5 mm disc touches.
            let min = [CENTRE[0] + 2, CENTRE[1] - 8, CENTRE[2]];
            let max = [CENTRE[0] + 38, CENTRE[1] + 8, CENTRE[2]];
            group.bench_function("one frame of a brush drag: its box to the GPU", |b| {
                b.iter(|| {
                    assert!(write_labels_box(&queue, &textures, &labels, min, max));
                    queue.submit(std::iter::empty());
                    let _ = device.poll(wgpu::PollType::wait_indefinitely());
                });
            });
        }
        Err(error) => eprintln!("no GPU adapter, the texture write is not measured: {error}"),
    }
    group.finish();
}

criterion_group!(benches, masks);
criterion_main!(benches);
