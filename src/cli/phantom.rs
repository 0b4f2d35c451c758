//! `keyslice phantom --out DIR --cases N --seed S`: synthetic abdominal CT phantoms with masks
//! and truth in the AbdomenAtlas layout (see `phantom::write` for the files).

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::phantom::PhantomOptions;

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
    let options = PhantomOptions {
        matrix: usize::from(args.matrix),
        slice_mm: args.slice_mm,
    };
    let phantoms = keyslice_workflow::phantom::make_phantoms(
        &args.out,
        (args.seed, args.first, args.cases),
        options,
        &super::Terminal::default(),
    )?;
    super::print_outcome(args.json, &phantoms)
}
