//! How well a lesion's mask grows from the box an annotator draws around it, on held-out
//! phantom lesions: for each lesion of at least 1 cm, the box is its true extent (every slice
//! it is on, its columns and rows), the mask is grown with the defaults within its organ, and
//! Dice against the true mask, the time taken, the volume against the true mask's and the
//! axial longest diameter against the true mask's are reported, per attenuation and overall.
//!
//! `cargo run --release -p keyslice-phantom --example lesion_grow -- [SEED] [CASES]`
//! (defaults: seed 4242, 40 cases; training's phantoms use other seeds). With
//! `KEYSLICE_GROW_DETAIL=1`, a line per lesion on stderr.

use std::time::Instant;

use keyslice_core::findings::{Attenuation, Organ};
use keyslice_core::volume::lesion::{GrowOptions, VoxelBox, dice, grow_from_box, measure};
use keyslice_phantom::{PhantomCase, PhantomOptions, generate};

/// One lesion's figures.
struct Row {
    attenuation: Attenuation,
    dice: f64,
    seconds: f64,
    volume_error: f64,
    diameter_error_voxels: f64,
}

/// The figures of each lesion of at least 1 cm in `case`; lesions with no mask grown are
/// counted in `failed`.
fn lesion_rows(case: &PhantomCase, failed: &mut usize) -> Vec<Row> {
    let dims = case.volume.dims();
    let spacing = case.volume.spacing_mm();
    let mut rows = Vec::new();
    for (number, lesion) in case.truth.lesions.iter().enumerate() {
        if lesion.size.long_cm < 1.0 {
            continue;
        }
        let Some(truth) = case.lesion_mask(number) else {
            continue;
        };
        let Some(truth_measures) = measure(&truth, dims, spacing) else {
            continue;
        };
        let extent = truth_measures.extent;
        let bounds = VoxelBox {
            min: [extent[0][0], extent[1][0], extent[2][0]],
            max: [extent[0][1], extent[1][1], extent[2][1]],
        };
        let organ_name = match lesion.organ {
            Organ::Liver => "liver",
            Organ::Pancreas => "pancreas",
            Organ::KidneyLeft => "kidney_left",
            Organ::KidneyRight => "kidney_right",
        };
        // The organ as a segmentation gives it: its tissue and the lesions in it.
        let organ = case.mask(organ_name).map(|mask| mask.labels);
        let started = Instant::now();
        let grown = grow_from_box(
            &case.volume,
            bounds,
            organ.as_deref(),
            &GrowOptions::default(),
        );
        let seconds = started.elapsed().as_secs_f64();
        let measured = grown
            .as_ref()
            .ok()
            .and_then(|grown| measure(&grown.mask, dims, spacing).map(|m| (grown, m)));
        let Some((grown, grown_measures)) = measured else {
            eprintln!(
                "{} lesion {number}: no mask grown ({grown:?})",
                case.truth.case_id
            );
            *failed += 1;
            continue;
        };
        let row = Row {
            attenuation: lesion.attenuation,
            dice: dice(&grown.mask, &truth),
            seconds,
            volume_error: (grown_measures.volume_ml - truth_measures.volume_ml).abs()
                / truth_measures.volume_ml,
            diameter_error_voxels: (grown_measures.long_axis_mm - truth_measures.long_axis_mm)
                .abs()
                / spacing[0].min(spacing[1]),
        };
        if std::env::var_os("KEYSLICE_GROW_DETAIL").is_some() {
            eprintln!(
                "{} lesion {number} {} {:.1} cm: Dice {:.3}, {} of {} voxels, HU range {:?}, lesion {:.0} HU in organ {:.0} HU",
                case.truth.case_id,
                lesion.attenuation.word(),
                lesion.size.long_cm,
                row.dice,
                grown_measures.voxels,
                truth_measures.voxels,
                grown.hu,
                lesion.hu,
                lesion.organ_hu
            );
        }
        rows.push(row);
    }
    rows
}

/// A line of figures for `rows`.
fn report(name: &str, rows: &[&Row]) {
    if rows.is_empty() {
        return;
    }
    let n = rows.len() as f64;
    let mut dices: Vec<f64> = rows.iter().map(|row| row.dice).collect();
    dices.sort_by(f64::total_cmp);
    let mean = |pick: fn(&Row) -> f64| rows.iter().map(|row| pick(row)).sum::<f64>() / n;
    let share = |pick: fn(&Row) -> bool| rows.iter().filter(|row| pick(row)).count() as f64 / n;
    // 95 % intervals over the lesions: 2000 resamples, a fixed seed.
    let interval = |values: Vec<f64>| {
        keyslice_core::rng::mean_interval_95(&values, 1).unwrap_or((f64::NAN, f64::NAN))
    };
    let dice = interval(rows.iter().map(|row| row.dice).collect());
    let volume = interval(
        rows.iter()
            .map(|row| f64::from(u8::from(row.volume_error <= 0.05)))
            .collect(),
    );
    let axis = interval(
        rows.iter()
            .map(|row| f64::from(u8::from(row.diameter_error_voxels <= 1.0)))
            .collect(),
    );
    println!(
        "{name:<18} {:>3} lesions  Dice mean {:.3} ({:.3}–{:.3}) median {:.3}  {:.3} s/lesion (max {:.3})  volume within 5 %: {:.0} % ({:.0}–{:.0})  long axis within one voxel: {:.0} % ({:.0}–{:.0})",
        rows.len(),
        mean(|row| row.dice),
        dice.0,
        dice.1,
        dices[dices.len() / 2],
        mean(|row| row.seconds),
        rows.iter().map(|row| row.seconds).fold(0.0, f64::max),
        100.0 * share(|row| row.volume_error <= 0.05),
        100.0 * volume.0,
        100.0 * volume.1,
        100.0 * share(|row| row.diameter_error_voxels <= 1.0),
        100.0 * axis.0,
        100.0 * axis.1,
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let seed: u64 = args
        .next()
        .and_then(|text| text.parse().ok())
        .unwrap_or(4242);
    let cases: u32 = args.next().and_then(|text| text.parse().ok()).unwrap_or(40);
    let mut failed = 0;
    let rows: Vec<Row> = (0..cases)
        .flat_map(|index| {
            lesion_rows(
                &generate(seed, index, PhantomOptions::default()),
                &mut failed,
            )
        })
        .collect();
    println!("seed {seed}, {cases} cases; {failed} lesion(s) with no mask grown");
    for attenuation in [
        Attenuation::Hypo,
        Attenuation::Hyper,
        Attenuation::Mixed,
        Attenuation::Iso,
    ] {
        let chosen: Vec<&Row> = rows
            .iter()
            .filter(|row| row.attenuation == attenuation)
            .collect();
        report(attenuation.word(), &chosen);
    }
    report("all", &rows.iter().collect::<Vec<_>>());
}
