//! How good a starting mask the embedded model gives: on held-out phantom cases, each lesion
//! the model finds (with its 3D mask on the CT's grid) is matched to the true lesion of the
//! same organ it overlaps most; the figures are the mask's Dice against that lesion's true
//! mask, as the model gives it and after one `grow` from the model's own box (the first
//! correction an annotator makes), and the share of true lesions of at least 1 cm that the
//! model gave a mask for. Means carry a 95 % bootstrap interval over the masks.
//!
//! `cargo run --release --example model_masks -- [SEED] [CASES]` (defaults: seed 4242, 20
//! cases; training's phantoms use other seeds).

use keyslice::infer::Diagnoser;
use keyslice::infer::embedded::{TinyDiagnoser, TinyModel};
use keyslice::phantom::{PhantomOptions, generate};
use keyslice::volume::lesion::{GrowOptions, VoxelBox, dice, grow_from_box};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let seed: u64 = args
        .next()
        .and_then(|text| text.parse().ok())
        .unwrap_or(4242);
    let cases: u32 = args.next().and_then(|text| text.parse().ok()).unwrap_or(20);
    let model = TinyModel::embedded()?;
    let (mut as_given, mut grown, mut seconds) = (Vec::new(), Vec::new(), Vec::new());
    let (mut true_lesions, mut masked) = (0usize, 0usize);
    for index in 0..cases {
        let case = generate(seed, index, PhantomOptions::default());
        let dims = case.volume.dims();
        let started = std::time::Instant::now();
        let diagnosis = TinyDiagnoser(&model).diagnose(&case.volume)?;
        seconds.push(started.elapsed().as_secs_f64());
        let truths: Vec<(usize, Vec<u8>)> = (0..case.truth.lesions.len())
            .filter_map(|number| Some((number, case.lesion_mask(number)?)))
            .collect();
        let mut matched = std::collections::BTreeSet::new();
        for evidence in &diagnosis.lesions {
            let Some(mask) = &evidence.mask else { continue };
            let dense = mask.to_dense(dims)?;
            let best = truths
                .iter()
                .filter(|(number, _)| case.truth.lesions[*number].organ == evidence.organ)
                .map(|(number, truth)| (*number, dice(&dense, truth)))
                .max_by(|a, b| a.1.total_cmp(&b.1));
            let Some((number, overlap)) = best.filter(|(_, overlap)| *overlap > 0.0) else {
                continue;
            };
            let Some((_, truth)) = truths.iter().find(|(n, _)| *n == number) else {
                continue;
            };
            matched.insert(number);
            as_given.push(overlap);
            // One grow from the model's box: its columns and rows on the key slice, over the
            // slices its mask covers.
            let bounds = keyslice::volume::mask::bounds(&dense, dims);
            if let (Some(slice_box), Some(bounds)) = (&evidence.slice_box, bounds) {
                let [c0, r0, c1, r1] = slice_box.voxels.map(|v| v as usize);
                let within = VoxelBox {
                    min: [c0, r0, bounds.min[2]],
                    max: [c1, r1, bounds.max[2]],
                };
                if let Ok(result) =
                    grow_from_box(&case.volume, within, None, &GrowOptions::default())
                {
                    grown.push(dice(&result.mask, truth));
                }
            }
        }
        for (number, _) in &truths {
            if case.truth.lesions[*number].size.long_cm >= 1.0 {
                true_lesions += 1;
                masked += usize::from(matched.contains(number));
            }
        }
    }
    let summary = |name: &str, values: &mut Vec<f64>| {
        if values.is_empty() {
            println!("{name}: none");
            return;
        }
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let mean = values.iter().sum::<f64>() / n as f64;
        // 95 % interval of the mean: 2000 resamples of the masks, a fixed seed.
        let (low, high) = keyslice::rng::mean_interval_95(values, 1).unwrap_or((mean, mean));
        println!(
            "{name}: {n} masks, Dice mean {mean:.3} (95 % CI {low:.3}–{high:.3}), median {:.3}",
            values[n / 2]
        );
    };
    println!("seed {seed}, {cases} cases");
    summary("the model's mask as given", &mut as_given);
    summary("after one grow from its box", &mut grown);
    println!(
        "true lesions of at least 1 cm with a model mask: {masked} of {true_lesions}; analysis {:.2} s per case",
        seconds.iter().sum::<f64>() / seconds.len().max(1) as f64
    );
    Ok(())
}
