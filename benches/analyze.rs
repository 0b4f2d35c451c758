//! Criterion benchmarks for the embedded pipeline (the goals: `analyze` on a
//! 512×512×300 volume within 3 s on two CPU cores, model load within 0.2 s): loading the
//! embedded keyslice-tiny, sampling a CT onto its grid, and the whole pipeline (diagnoser,
//! decoding, verifier, consistency) on a 512² phantom of 245 one-millimetre slices.
//! Reading the file is measured by `volume_io` (and `keyslice analyze` prints both).
//! Peak memory is measured on the command: `/usr/bin/time -v keyslice analyze CT`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use keyslice::infer::embedded::grid::ModelGrid;
use keyslice::infer::embedded::{TinyDiagnoser, TinyModel, TinyVerifier};
use keyslice::infer::run_pipeline;
use keyslice::phantom::{PhantomOptions, generate};

fn pipeline(c: &mut Criterion) {
    c.bench_function("tiny_model_load_embedded", |b| {
        b.iter(|| black_box(TinyModel::embedded().unwrap_or_else(|e| panic!("{e}"))));
    });
    // A clinical grid: 512² at 0.6–0.9 mm with 1 mm slices; this phantom's height gives
    // 245 slices.
    let case = generate(
        2026,
        0,
        PhantomOptions {
            matrix: 512,
            slice_mm: Some(1.0),
        },
    );
    let volume = case.volume;
    eprintln!("volume {:?}", volume.dims());
    let model = TinyModel::embedded().unwrap_or_else(|e| panic!("{e}"));
    let mut group = c.benchmark_group("analyze_512x512");
    group.sample_size(10);
    group.bench_function("model_grid", |b| {
        b.iter(|| black_box(ModelGrid::from_volume(&volume, model.config.grid)));
    });
    group.bench_function("pipeline", |b| {
        b.iter(|| {
            black_box(
                run_pipeline(
                    "bench",
                    &volume,
                    &TinyDiagnoser(&model),
                    Some(&TinyVerifier(&model)),
                )
                .unwrap_or_else(|e| panic!("{e}")),
            )
        });
    });
    group.finish();
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
