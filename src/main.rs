//! The `keyslice` binary: parses arguments, sets up logging, runs the command, and turns an
//! error into `error: …` / `hint: …` on stderr with exit code 1.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use keyslice::cli::{Cli, run};

/// mimalloc instead of the system allocator: candle allocates and frees tensors of tens of
/// megabytes at every step, which glibc serves with `mmap`/`munmap` (page faults and TLB
/// flushes that made up a third of a training step's time).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KEYSLICE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            eprintln!("hint: {}", error.hint());
            ExitCode::from(1)
        }
    }
}
