//! The `keyslice` binary: parses arguments, sets up logging, runs the command, and turns an
//! error into `error: …` / `hint: …` on stderr with exit code 1 (2 for a usage error).

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use keyslice::cli::{Cli, run};

/// mimalloc instead of the system allocator: candle allocates and frees tensors of tens of
/// megabytes at every step, which glibc serves with `mmap`/`munmap` (page faults and TLB
/// flushes on every step; `docs/performance.md` has the measurements).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `purge_delay` option (its index in `mi_option_t`, the same in mimalloc 2 and 3).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Freed memory stays with the process for 10 s before mimalloc returns it to the OS (its
/// default is 1 s for pages, longer for arenas): a Qwen3-VL prefill frees and reallocates the
/// same tens of megabytes every layer, and each return would make the next use fault in and
/// zero fresh pages. Idle memory still goes back after 10 s.
#[expect(
    unsafe_code,
    reason = "mimalloc's option setter, before any allocation"
)]
fn configure_allocator() {
    // SAFETY: `mi_option_set` takes two integers and only stores the value in mimalloc's
    // option table (atomically); it is called once, before any other thread starts.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 10_000) };
}

/// For `batch`: freed memory goes back to the OS at once. Its workers each free a case's CT
/// and requests (tens of MB) when the case ends; kept 10 s in each worker's heap, they would
/// hold several cases' memory apiece, past the batch's `--memory-mb`.
#[expect(
    unsafe_code,
    reason = "mimalloc's option setter, before any worker starts"
)]
fn release_freed_memory_promptly() {
    // SAFETY: as in `configure_allocator`: one integer stored in mimalloc's option table,
    // before the batch's threads start.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
}

/// Mesa's window-system code and Wayland want a private runtime folder and complain on every
/// frame where the session has none (a bare X server, a container, `su`). For a window, a
/// private folder of this process is made and named instead, before any thread starts.
#[cfg(unix)]
#[expect(
    unsafe_code,
    reason = "setting an environment variable before any thread starts"
)]
fn ensure_runtime_folder() {
    use std::os::unix::fs::DirBuilderExt;
    let usable = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|folder| !folder.is_empty())
        .is_some_and(|folder| std::path::Path::new(&folder).is_dir());
    if usable {
        return;
    }
    let folder = std::env::temp_dir().join(format!("keyslice-runtime-{}", std::process::id()));
    // Only a folder this process made, readable by its user alone.
    if std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&folder)
        .is_ok()
    {
        // SAFETY: called from `main` before any other thread exists, so nothing reads the
        // environment while it changes.
        unsafe { std::env::set_var("XDG_RUNTIME_DIR", &folder) };
    }
}

fn main() -> ExitCode {
    configure_allocator();
    let cli = Cli::parse();
    if matches!(cli.command, Some(keyslice::cli::Command::Batch(_))) {
        release_freed_memory_promptly();
    }
    #[cfg(unix)]
    if matches!(cli.command, None | Some(keyslice::cli::Command::View(_))) {
        ensure_runtime_folder();
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colour only on a terminal, and never when NO_COLOR is set (no-color.org).
        .with_ansi(
            std::io::stderr().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty()),
        )
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KEYSLICE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // The message may quote a server, a file or a header: shown as text, never as control.
            eprintln!("error: {}", keyslice::text::shown(&error.to_string()));
            eprintln!("hint: {}", error.hint());
            // A value outside its range is a usage error, like the ones clap reports: 2.
            if error.is_usage() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
