//! Criterion benchmarks for volume IO: NIfTI read (.nii, .nii.gz), NIfTI write, mask
//! resampling, reorientation and statistics on a synthetic 512×512×120 CT, and DICOM series
//! loading when `bench-data/series` exists (make it with `benches/make_bench_data.py`).
//! Peer comparisons (dcm2niix, gzip, nibabel) live in `benches/compare_peers.py`.

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use keyslice::io::dicom::{DicomOptions, load_dicom};
use keyslice::io::nifti::{WriteOptions, read_nifti, write_nifti};
use keyslice::volume::orient::reorient_towards_lps;
use keyslice::volume::{Affine, LabelVolume, Volume, VolumeInfo, Voxels, resample_nearest};

const DIMS: [usize; 3] = [512, 512, 120];

/// An abdomen-like phantom: air outside an ellipse of soft tissue with a brighter disc.
fn synthetic_ct() -> Volume {
    let [columns, rows, slices] = DIMS;
    let mut values = Vec::with_capacity(columns * rows * slices);
    let mut noise: u32 = 12345;
    for k in 0..slices {
        for j in 0..rows {
            for i in 0..columns {
                let x = (i as f64 - 256.0) / 200.0;
                let y = (j as f64 - 256.0) / 150.0;
                noise = noise.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                let jitter = i16::try_from(noise >> 28).unwrap_or(0) - 8;
                let value = if x * x + y * y > 1.0 {
                    -1000
                } else if (x + 0.3).powi(2) + y * y < 0.1 + 0.0001 * k as f64 {
                    60 + jitter
                } else {
                    35 + jitter
                };
                values.push(value);
            }
        }
    }
    let affine = Affine::from_axes(
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
        [0.75, 0.75, 2.5],
        [-192.0, -192.0, -150.0],
    );
    Volume::new(
        DIMS,
        affine,
        Voxels::I16(values),
        Vec::new(),
        VolumeInfo::default(),
    )
    .unwrap_or_else(|error| panic!("synthetic volume: {error}"))
}

fn nifti(c: &mut Criterion) {
    let folder = tempfile::tempdir().unwrap_or_else(|error| panic!("temp dir: {error}"));
    let volume = synthetic_ct();
    let plain = folder.path().join("ct.nii");
    let gzip = folder.path().join("ct.nii.gz");
    for path in [&plain, &gzip] {
        write_nifti(&volume, path, WriteOptions::default())
            .unwrap_or_else(|error| panic!("write: {error}"));
    }
    let mut group = c.benchmark_group("nifti");
    group.sample_size(10);
    group.bench_function("read .nii.gz 512x512x120", |b| {
        b.iter(|| black_box(read_nifti(&gzip).map(|v| v.dims())));
    });
    group.bench_function("read .nii 512x512x120", |b| {
        b.iter(|| black_box(read_nifti(&plain).map(|v| v.dims())));
    });
    let out = folder.path().join("out.nii");
    group.bench_function("write .nii 512x512x120", |b| {
        b.iter(|| black_box(write_nifti(&volume, &out, WriteOptions::default()).is_ok()));
    });
    group.finish();
}

fn volume_operations(c: &mut Criterion) {
    let volume = synthetic_ct();
    let mut group = c.benchmark_group("volume");
    group.sample_size(10);
    group.bench_function("value stats 512x512x120", |b| {
        b.iter(|| black_box(volume.value_stats()));
    });
    // The same CT stored RAS (i → R, j → A): reorienting flips two axes.
    let ras = {
        let affine = Affine::from_axes(
            [[-1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, 1.0]],
            [0.75, 0.75, 2.5],
            [192.0, 192.0, -150.0],
        );
        Volume::new(
            DIMS,
            affine,
            volume.voxels().clone(),
            Vec::new(),
            VolumeInfo::default(),
        )
        .unwrap_or_else(|error| panic!("ras volume: {error}"))
    };
    group.bench_function("reorient RAS to LPS 512x512x120", |b| {
        b.iter(|| {
            let mut copy = ras.clone();
            black_box(reorient_towards_lps(&mut copy))
        });
    });
    // A half-resolution lesion mask on a shifted grid, resampled onto the CT grid.
    let mask = LabelVolume {
        name: "liver_lesion".into(),
        dims: [256, 256, 60],
        patient_from_voxel: Affine::from_axes(
            [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            [1.5, 1.5, 5.0],
            [-191.0, -190.0, -149.0],
        ),
        labels: (0..256 * 256 * 60).map(|n| u8::from(n % 97 == 0)).collect(),
    };
    group.bench_function("resample mask 256x256x60 onto 512x512x120", |b| {
        b.iter(|| {
            black_box(resample_nearest(&mask, DIMS, volume.patient_from_voxel()).map(|m| m.dims))
        });
    });
    group.finish();
}

fn dicom(c: &mut Criterion) {
    let series = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench-data/series");
    if !series.is_dir() {
        eprintln!(
            "skipping DICOM benchmarks: run `python3 benches/make_bench_data.py bench-data` first"
        );
        return;
    }
    let mut group = c.benchmark_group("dicom");
    group.sample_size(10);
    group.bench_function("load series 512x512x300 + localizer", |b| {
        b.iter(|| {
            black_box(load_dicom(&series, &DicomOptions::default()).map(|s| s.volume.dims()))
        });
    });
    group.finish();
}

criterion_group!(benches, nifti, volume_operations, dicom);
criterion_main!(benches);
