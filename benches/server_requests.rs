//! Criterion benchmark: Keyslice's own work per case when a server runs the model — the
//! diagnosis request of 32 frames from a 512 × 512 CT (frames sampled and windowed, PNG
//! encoding, base64, the JSON body) and the verifier's request (the key slice with its box
//! drawn). Target: under 50 ms per case on 2 cores. Requests in flight against several
//! servers are measured by `benches/batch_endpoints.py`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use keyslice::findings::SliceBox;
use keyslice::infer::KeySliceImage;
use keyslice::infer::openai::{
    DIAGNOSE_PROMPT, Media, OpenAiClient, OpenAiDiagnoser, VERIFY_PROMPT,
};
use keyslice::infer::views::verifier_view;
use keyslice::io::frames::grey_png;
use keyslice::phantom::{PhantomOptions, generate};

fn bench(c: &mut Criterion) {
    // A clinical grid: 512 × 512, 2.5 mm slices (about 150 slices).
    let volume = generate(
        7,
        0,
        PhantomOptions {
            matrix: 512,
            slice_mm: Some(2.5),
        },
    )
    .volume;
    let diagnoser = OpenAiDiagnoser::new(
        OpenAiClient::new("http://127.0.0.1:9/v1", "bench", None),
        32,
        DIAGNOSE_PROMPT.to_string(),
        Media::Auto,
    );
    let mut group = c.benchmark_group("server_requests");
    group.sample_size(20);
    for (name, video) in [
        ("diagnosis_request_32_frames_512_video", true),
        ("diagnosis_request_32_frames_512_images", false),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let parts = diagnoser
                    .request_parts(black_box(&volume), video)
                    .expect("parts");
                black_box(diagnoser.client.body(&parts).to_string())
            });
        });
    }
    let slice = KeySliceImage::extract(
        &volume,
        60,
        Some(SliceBox {
            voxels: [200, 180, 260, 240],
            mm: None,
        }),
    )
    .expect("slice 60");
    group.bench_function("verification_request_512", |b| {
        b.iter(|| {
            let view = verifier_view(black_box(&slice), VERIFY_PROMPT);
            black_box(grey_png(&view.grey, view.columns, view.rows).expect("png"))
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
