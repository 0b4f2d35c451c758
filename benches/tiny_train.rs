//! Criterion benchmarks of `keyslice-tiny` training speed on the CPU: one 3×3 convolution
//! forwards and backwards (this project's `im2col` + GEMM op against candle's `conv2d`), and
//! one optimisation step of the diagnoser network on a batch of 16 windows of 64² (the
//! shipped widths). Run with `cargo bench --bench tiny_train`.

use std::hint::black_box;

use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{AdamW, Optimizer, VarBuilder, VarMap};
use criterion::{Criterion, criterion_group, criterion_main};
use keyslice::infer::embedded::conv::conv3x3;
use keyslice::infer::embedded::net::SliceNet;

/// The binary's allocator, so that the figures are the ones `keyslice train` sees.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[expect(
    clippy::needless_pass_by_value,
    reason = "used as `unwrap_or_else(fail)`"
)]
fn fail<T>(error: candle_core::Error) -> T {
    panic!("{error}")
}

fn convolution(c: &mut Criterion) {
    let device = Device::Cpu;
    let x =
        Var::from_tensor(&Tensor::randn(0f32, 1.0, (16, 16, 64, 64), &device).unwrap_or_else(fail))
            .unwrap_or_else(fail);
    let w =
        Var::from_tensor(&Tensor::randn(0f32, 0.1, (16, 16, 3, 3), &device).unwrap_or_else(fail))
            .unwrap_or_else(fail);
    let probe = Tensor::randn(0f32, 1.0, (16, 16, 64, 64), &device).unwrap_or_else(fail);
    let mut group = c.benchmark_group("conv3x3_16x16ch_16x64x64_fwd_bwd");
    group.sample_size(20);
    group.bench_function("candle_conv2d", |b| {
        b.iter(|| {
            let y = x
                .as_tensor()
                .conv2d(w.as_tensor(), 1, 1, 1, 1)
                .unwrap_or_else(fail);
            black_box(
                (y * &probe)
                    .and_then(|l| l.sum_all()?.backward())
                    .unwrap_or_else(fail),
            )
        });
    });
    group.bench_function("keyslice_im2col_gemm", |b| {
        b.iter(|| {
            let y = conv3x3(x.as_tensor(), w.as_tensor(), None).unwrap_or_else(fail);
            black_box(
                (y * &probe)
                    .and_then(|l| l.sum_all()?.backward())
                    .unwrap_or_else(fail),
            )
        });
    });
    group.finish();
}

fn training_step(c: &mut Criterion) {
    let device = Device::Cpu;
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
    let net = SliceNet::new(9, [8, 16, 32, 48], 0, &vb).unwrap_or_else(fail);
    let x = Tensor::randn(0f32, 1.0, (16, 9, 64, 64), &device).unwrap_or_else(fail);
    let mut optimizer = AdamW::new_lr(varmap.all_vars(), 1e-3).unwrap_or_else(fail);
    let mut group = c.benchmark_group("tiny_diagnoser");
    group.sample_size(10);
    group.bench_function("train_step_16x64x64", |b| {
        b.iter(|| {
            let loss = net
                .forward(&x)
                .and_then(|y| y.sqr()?.mean_all())
                .unwrap_or_else(fail);
            optimizer.backward_step(&loss).unwrap_or_else(fail);
        });
    });
    group.finish();
}

criterion_group!(benches, convolution, training_step);
criterion_main!(benches);
