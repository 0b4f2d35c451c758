//! `keyslice phantom --out DIR --cases N --seed S`: synthetic abdominal CT phantoms with masks
//! and truth in the AbdomenAtlas layout (see `phantom::write` for the files).

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::phantom::PhantomOptions;
use crate::phantom::write::write_phantoms;

/// Arguments of `phantom`.
#[derive(Debug, Args)]
pub struct PhantomArgs {
    /// Output folder (created if needed); existing cases are never overwritten.
    #[arg(long)]
    pub out: PathBuf,
    /// How many cases (at least 1).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub cases: u32,
    /// Seed of the set: the same seed gives byte-identical cases.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Index of the first case (to extend a set).
    #[arg(long, default_value_t = 0)]
    pub first: u32,
    /// In-plane matrix; smaller grids keep the same field of view with larger pixels.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u16).range(32..=1024))]
    pub matrix: u16,
    /// Slice spacing in mm for every case (default: drawn per case from 1–5 mm).
    #[arg(long)]
    pub slice_mm: Option<f64>,
    /// Print what was written as one JSON line (`out`, `cases`, `lesions`, `seed`,
    /// `case_ids`).
    #[arg(long)]
    pub json: bool,
}

/// Runs `phantom`.
pub fn run(args: &PhantomArgs) -> Result<(), CliError> {
    if args.first.checked_add(args.cases - 1).is_none() {
        return Err(CliError::Argument(format!(
            "--first {} with --cases {} runs past the last case index ({})",
            args.first,
            args.cases,
            u32::MAX
        )));
    }
    if let Some(slice_mm) = args.slice_mm
        && !(0.5..=10.0).contains(&slice_mm)
    {
        return Err(CliError::Argument(format!(
            "--slice-mm {slice_mm} is outside 0.5–10 mm"
        )));
    }
    let options = PhantomOptions {
        matrix: usize::from(args.matrix),
        slice_mm: args.slice_mm,
    };
    let started = std::time::Instant::now();
    let manifest = write_phantoms(
        &args.out,
        args.seed,
        args.first,
        args.cases,
        options,
        |done, total, case_id| {
            let seconds = started.elapsed().as_secs_f64();
            let rate = f64::from(done) / seconds.max(1e-9);
            eprintln!(
                "[{done}/{total}] {case_id} ({seconds:.1} s, {rate:.2} cases/s, ETA {:.0} s)",
                f64::from(total.saturating_sub(done)) / rate.max(1e-9)
            );
        },
    )?;
    let lesions: usize = manifest.cases.iter().map(|case| case.lesions).sum();
    let summary = serde_json::json!({
        "out": args.out,
        "cases": manifest.cases.len(),
        "lesions": lesions,
        "seed": args.seed,
        "case_ids": manifest.cases.iter().map(|case| case.case_id.as_str()).collect::<Vec<_>>(),
    });
    super::print_summary(args.json, &summary, || {
        format!(
            "{} phantom case(s), {lesions} lesion(s), written to {} (manifest.json; synthetic, not patient data)",
            manifest.cases.len(),
            args.out.display()
        )
    })
}
