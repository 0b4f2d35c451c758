//! `keyslice batch DATASET... --out PRED.jsonl [--backend …] [--jobs N]`: a backend over a
//! whole dataset, on several servers at once when several `--url` are given (each with its
//! own requests in flight, `URL#jobs=N`; a server that stops answering hands its case back to
//! the others). Cases are found as `workspace create` finds them (case folders, a folder of
//! case folders, NIfTI files, DICOM series folders, a workspace's `workspace.json`). Cases
//! already in the output are skipped, so a stopped batch resumes; each prediction is appended
//! as one synced line, so a killed batch loses at most the cases in flight; a case that fails
//! is written to `PRED.errors.jsonl` with its error and the batch goes on. Progress with rate
//! and ETA goes to stderr; a summary at the end. With `--json` every line either stream
//! carries is a JSON object (`progress`, `error`, the summary). `keyslice score --pred PRED.jsonl` reads the
//! output.

use crate::text::shown;
use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use clap::Args;
use serde::Serialize;

use super::CliError;
use super::backend::{BackendArgs, BackendKind};
use crate::infer::backend::Backend;
use crate::infer::{InferError, ServerFault};
use crate::io::http::NetFault;
use crate::io::jsonl::append_line;
use crate::io::{LoadOptions, load_study};
use crate::review::workspace::{MANIFEST_FILE, Workspace, WorkspaceCase, discover_cases};

/// Arguments of `batch`.
#[derive(Debug, Args)]
pub struct BatchArgs {
    /// Dataset folders, case folders, NIfTI files, DICOM series folders or workspaces.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// The predictions file (JSONL), appended to.
    #[arg(long)]
    pub out: PathBuf,
    /// Cases run at once (threads; for a server, requests in flight; per server when several
    /// --url are given, unless a URL says `#jobs=N`).
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Skip the verifier.
    #[arg(long)]
    pub no_verify: bool,
    /// The model and where it runs.
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// Memory for the cases in flight, in MB (256–1048576): each case holds its CT while its
    /// requests run; cases wait for room instead of all being loaded at once, however many
    /// --jobs and --url there are. A case larger than the whole budget runs alone.
    #[arg(long, default_value_t = 2048, value_name = "MB", value_parser = clap::value_parser!(u64).range(256..=1_048_576))]
    pub memory_mb: u64,
    /// Stop the batch after this many failures of the model server in a row (errors,
    /// timeouts, refusals; a case's own bad files do not count), saying why: a server that
    /// hangs costs its timeout K times, not once per case. 0 never stops.
    #[arg(long, default_value_t = 10, value_name = "K")]
    pub stop_after_failures: usize,
}

/// What a batch did.
#[derive(Debug, Serialize)]
struct Summary {
    cases: usize,
    skipped: usize,
    done: usize,
    failed: usize,
    seconds: f64,
    cases_per_second: f64,
    /// Per server (or the one in-process model).
    endpoints: Vec<LaneSummary>,
}

/// Runs `batch`.
pub fn run(args: &BatchArgs) -> Result<(), CliError> {
    if !(1..=256).contains(&args.jobs) {
        return Err(CliError::Argument(format!(
            "--jobs {} is not between 1 and 256",
            args.jobs
        )));
    }
    if args.stop_after_failures > 100_000 {
        return Err(CliError::Argument(format!(
            "--stop-after-failures {} is not between 0 (never stop) and 100000",
            args.stop_after_failures
        )));
    }
    let mut lanes = lanes(args)?;
    let workers = cap_workers(&mut lanes, args.memory_mb, args.json);
    let mut cases = Vec::new();
    for input in &args.inputs {
        if input.join(MANIFEST_FILE).is_file() {
            cases.extend(Workspace::open(input)?.manifest.cases);
        } else {
            cases.extend(discover_cases(input)?);
        }
    }
    let done_before = finished_cases(&args.out);
    let total = cases.len();
    let todo: Vec<WorkspaceCase> = cases
        .into_iter()
        .filter(|case| !done_before.contains(&case.case_id))
        .collect();
    let skipped = total - todo.len();
    if skipped > 0 && !args.json {
        eprintln!(
            "{skipped} case(s) already in {}: skipped",
            args.out.display()
        );
    }
    let errors_path = errors_path(&args.out);
    let started = Instant::now();
    let Ran {
        finished,
        failed,
        tripped,
    } = run_cases(args, &lanes, &todo, &errors_path, workers)?;
    let seconds = started.elapsed().as_secs_f64();
    let done = finished - failed;
    let summary = Summary {
        cases: total,
        skipped,
        done,
        failed,
        seconds: (seconds * 10.0).round() / 10.0,
        cases_per_second: if seconds > 0.0 {
            ((done + failed) as f64 / seconds * 100.0).round() / 100.0
        } else {
            0.0
        },
        endpoints: lanes
            .iter()
            .map(|lane| LaneSummary {
                endpoint: lane.name.clone(),
                jobs: lane.jobs,
                done: lane.done.load(Ordering::SeqCst),
                failed: lane.failed.load(Ordering::SeqCst),
                handed_back: lane.handed_back.load(Ordering::SeqCst),
                down: lane.down.load(Ordering::SeqCst),
            })
            .collect(),
    };
    super::print_summary(args.json, &summary, || {
        format!(
            "{} case(s): {} done, {} failed{}, {} skipped (already done) in {:.1} s ({:.2} cases/s); predictions in {}",
            summary.cases,
            summary.done,
            summary.failed,
            if summary.failed > 0 {
                format!(" (see {})", errors_path.display())
            } else {
                String::new()
            },
            summary.skipped,
            summary.seconds,
            summary.cases_per_second,
            args.out.display()
        )
    })?;
    if let Some(last) = tripped {
        return Err(CliError::Stopped(format!(
            "batch stopped after {} failures of the model server in a row, {} case(s) not run; the last: {last}",
            args.stop_after_failures,
            summary.cases - summary.skipped - summary.done - summary.failed
        )));
    }
    if summary.failed > 0 {
        return Err(CliError::PartlyFailed {
            failed: summary.failed,
            total: summary.cases - summary.skipped,
        });
    }
    Ok(())
}

/// Where cases run: one backend (a server, or the model in this process) with its threads.
struct Lane {
    /// The server's URL, or the model's name.
    name: String,
    backend: Backend,
    jobs: usize,
    /// Set when the server stopped answering: its threads stop taking cases.
    down: AtomicBool,
    done: AtomicUsize,
    failed: AtomicUsize,
    handed_back: AtomicUsize,
    /// Set once its refusal of video has been said.
    video_warned: AtomicBool,
}

/// The most cases in flight at once over all servers: more would only wait, each holding
/// a thread (and its stack) and, once loaded, a CT.
const MAX_WORKERS: usize = 64;

/// Each worker thread's stack: decoders and the model's layers recurse deeper than a spawned
/// thread's 2 MiB default allows on large studies.
const WORKER_STACK: usize = 16 << 20;

/// What the process holds before any case: the binary, the embedded model, the allocator.
const BASELINE_MB: u64 = 64;

/// What a worker thread holds of its own while it runs cases (the allocator's per-thread
/// heap, request and answer buffers), beside its case's CT.
const WORKER_MB: u64 = 8;

/// How many workers `memory_mb` allows: half of what is left after the baseline goes to the
/// workers' own memory, the rest to the CTs in flight; at least one, at most
/// [`MAX_WORKERS`].
fn workers_within(memory_mb: u64) -> usize {
    let room = memory_mb.saturating_sub(BASELINE_MB) / 2 / WORKER_MB;
    usize::try_from(room)
        .unwrap_or(MAX_WORKERS)
        .clamp(1, MAX_WORKERS)
}

/// The bytes left for the CTs in flight when `workers` run within `memory_mb`.
fn case_budget_bytes(memory_mb: u64, workers: usize) -> u64 {
    memory_mb
        .saturating_sub(BASELINE_MB)
        .saturating_sub(WORKER_MB * workers as u64)
        .max(WORKER_MB)
        .saturating_mul(1 << 20)
}

/// Caps the lanes' threads at what the memory budget allows ([`workers_within`]) in all,
/// each lane keeping a share in proportion to what it asked (at least one), with a message
/// saying so. Returns the workers in all.
fn cap_workers(lanes: &mut [Lane], memory_mb: u64, json: bool) -> usize {
    let asked: usize = lanes.iter().map(|lane| lane.jobs).sum();
    let most = workers_within(memory_mb);
    if asked <= most {
        return asked;
    }
    for lane in lanes.iter_mut() {
        lane.jobs = (lane.jobs * most / asked).max(1);
    }
    let given: usize = lanes.iter().map(|lane| lane.jobs).sum();
    let message = format!(
        "{asked} requests in flight asked for over {} server(s); {given} run at once: --memory-mb {memory_mb} allows {most} (at most {MAX_WORKERS}; more would only wait, each holding memory)",
        lanes.len()
    );
    if json {
        eprintln!("{}", serde_json::json!({"warning": message}));
    } else {
        eprintln!("warning: {message}");
    }
    given
}

/// Memory for the cases in flight: a worker takes its case's share before the case runs and
/// gives it back after. Loading is one case at a time, and the loader holds the gate until
/// its case has room, so at most one CT is held outside the budget.
struct Budget {
    free: Mutex<u64>,
    room: std::sync::Condvar,
    total: u64,
    loading: Mutex<()>,
}

impl Budget {
    fn new(total: u64) -> Self {
        Self {
            free: Mutex::new(total),
            room: std::sync::Condvar::new(),
            total,
            loading: Mutex::new(()),
        }
    }

    /// Waits until `bytes` (at most the whole budget) are free and takes them, until the
    /// share is dropped (a case that fails or panics gives its share back too).
    fn take(&self, bytes: u64) -> Share<'_> {
        let bytes = bytes.min(self.total);
        let mut free = self
            .free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while *free < bytes {
            free = self
                .room
                .wait(free)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        *free -= bytes;
        Share {
            budget: self,
            bytes,
        }
    }
}

/// Bytes taken from a [`Budget`], given back when dropped.
struct Share<'a> {
    budget: &'a Budget,
    bytes: u64,
}

impl Drop for Share<'_> {
    fn drop(&mut self) {
        *self
            .budget
            .free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) += self.bytes;
        self.budget.room.notify_all();
    }
}

/// What one case in flight holds, from its CT: the volume, the frames and their encodings, the
/// request bodies; three times the voxels' bytes.
fn case_bytes(volume: &crate::volume::Volume) -> u64 {
    let voxels = volume.voxels();
    let bytes_per = match voxels {
        crate::volume::Voxels::I16(_) => 2,
        crate::volume::Voxels::F32(_) => 4,
    };
    (voxels.len() as u64)
        .saturating_mul(bytes_per)
        .saturating_mul(3)
}

/// What one lane did, in the summary.
#[derive(Debug, Serialize)]
struct LaneSummary {
    endpoint: String,
    jobs: usize,
    done: usize,
    failed: usize,
    /// Cases given back to the other servers when this one stopped answering.
    handed_back: usize,
    down: bool,
}

/// The lanes of a batch: one per `--url` with `--backend openai` (each `#jobs=N`, else
/// `--jobs`), else the one backend with `--jobs` threads.
fn lanes(args: &BatchArgs) -> Result<Vec<Lane>, CliError> {
    let lane = |name: String, backend: Backend, jobs: usize| Lane {
        name,
        backend,
        jobs,
        down: AtomicBool::new(false),
        done: AtomicUsize::new(0),
        failed: AtomicUsize::new(0),
        handed_back: AtomicUsize::new(0),
        video_warned: AtomicBool::new(false),
    };
    if args.backend.backend == BackendKind::Openai {
        return args
            .backend
            .endpoints()?
            .into_iter()
            .map(|endpoint| {
                let backend = args.backend.server(&endpoint.url)?;
                Ok(lane(
                    endpoint.shown(),
                    backend,
                    endpoint.jobs.unwrap_or(args.jobs),
                ))
            })
            .collect();
    }
    let backend = args.backend.backend()?;
    Ok(vec![lane(backend.model_id().id, backend, args.jobs)])
}

/// A case's outcome: its prediction line, or why it failed and whose fault it was.
type Outcome = Result<String, (String, Fault)>;

/// Whose fault a failed case is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// The case's own (its files, its volume).
    Case,
    /// The model server's (an error status, a garbled answer).
    Server,
    /// The server cannot be reached now: the case can go to another server.
    Unreachable,
}

/// What [`run_cases`] did.
struct Ran {
    /// Cases finished (done or failed).
    finished: usize,
    /// Of those, failed.
    failed: usize,
    /// Set when the batch stopped after `--stop-after-failures` server failures in a row:
    /// the last one's message.
    tripped: Option<String>,
}

/// Whose fault `error` is: the server cannot be reached now (refused, unreachable, no
/// answer), it failed otherwise (or the model did), or the case's volume is not one the model
/// reads.
fn fault(error: &InferError) -> Fault {
    match error {
        InferError::Server {
            fault: ServerFault::Net(net),
            ..
        } if *net != NetFault::Certificate => Fault::Unreachable,
        InferError::Volume(_) | InferError::NotAnalysable(_) => Fault::Case,
        InferError::Server { .. } | InferError::Model { .. } | InferError::Run { .. } => {
            Fault::Server
        }
    }
}

/// Runs `todo` on every lane's threads, appending each result as it comes; returns how many
/// finished and how many of those failed. A server that stops answering hands its case back
/// and takes no more while another server is up. Stops taking cases when the output cannot
/// be written.
#[expect(
    clippy::too_many_lines,
    reason = "one scheduling loop with its bookkeeping"
)]
fn run_cases(
    args: &BatchArgs,
    lanes: &[Lane],
    todo: &[WorkspaceCase],
    errors_path: &Path,
    workers: usize,
) -> Result<Ran, CliError> {
    let queue = Mutex::new((0..todo.len()).collect::<VecDeque<usize>>());
    let finished = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    // Server failures in a row (any lane); a success resets it.
    let in_a_row = AtomicUsize::new(0);
    let tripped = Mutex::new(None);
    let write_lock = Mutex::new(());
    let out_error = Mutex::new(None);
    let started = Instant::now();
    let budget = Budget::new(case_budget_bytes(args.memory_mb, workers));
    let work = |lane: &Lane, case: &WorkspaceCase| -> Outcome {
        let backend = &lane.backend;
        // A case that fails, even inside a third-party decoder, is one failed case.
        crate::io::limits::contain(|| {
            let (study, taken) = {
                let _gate = budget
                    .loading
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let study = load_study(&case.volume, &LoadOptions::default())
                    .map_err(|e| (format!("{e} ({})", e.hint()), Fault::Case))?;
                let taken = budget.take(case_bytes(&study.volume));
                (study, taken)
            };
            let ran = backend.run(&case.case_id, &study.volume, !args.no_verify);
            let warnings = study.volume.warnings().to_vec();
            drop(study);
            drop(taken);
            let mut prediction = ran.map_err(|e| (format!("{e} ({})", e.hint()), fault(&e)))?;
            prediction.warnings.extend(warnings);
            if let Some(warning) =
                super::backend::video_refused_warning(&lane.name, prediction.input.as_deref())
                && !lane.video_warned.swap(true, Ordering::SeqCst)
            {
                if args.json {
                    eprintln!("{}", serde_json::json!({"warning": warning}));
                } else {
                    eprintln!("warning: {warning}");
                }
            }
            if let Some(unfamiliar) = &prediction.out_of_domain {
                eprintln!(
                    "warning: {}: {}",
                    shown(&case.case_id),
                    unfamiliar.sentence()
                );
            }
            serde_json::to_string(&prediction).map_err(|e| (e.to_string(), Fault::Case))
        })
        .unwrap_or_else(|message| Err((message, Fault::Case)))
    };
    let take = || {
        queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop_front()
    };
    let others_up = |me: &Lane| {
        lanes
            .iter()
            .any(|lane| !std::ptr::eq(lane, me) && !lane.down.load(Ordering::SeqCst))
    };
    std::thread::scope(|scope| {
        for lane in lanes {
            for _ in 0..lane.jobs.min(todo.len().max(1)) {
                let worker = std::thread::Builder::new()
                    .name("batch".into())
                    .stack_size(WORKER_STACK);
                let spawned = worker.spawn_scoped(scope, || {
                    while !lane.down.load(Ordering::SeqCst) {
                        let Some(index) = take() else { break };
                        let case = &todo[index];
                        let result = work(lane, case);
                        if let Err((message, Fault::Unreachable)) = &result
                            && others_up(lane)
                        {
                            // This server is gone: the case goes to the others.
                            queue
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .push_back(index);
                            lane.handed_back.fetch_add(1, Ordering::SeqCst);
                            if !lane.down.swap(true, Ordering::SeqCst) {
                                eprintln!(
                                    "warning: {} stopped answering ({message}); its cases go to the other server(s)",
                                    lane.name
                                );
                            }
                            break;
                        }
                        let _guard = write_lock
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        let written = match &result {
                            Ok(line) => {
                                lane.done.fetch_add(1, Ordering::SeqCst);
                                append_line(&args.out, line)
                            }
                            Err((message, _)) => {
                                failed.fetch_add(1, Ordering::SeqCst);
                                lane.failed.fetch_add(1, Ordering::SeqCst);
                                report_failure(args, errors_path, case, message)
                            }
                        };
                        if let Err(error) = written {
                            *out_error
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(error);
                            // Nothing more can be saved: stop taking cases.
                            queue
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .clear();
                            break;
                        }
                        let count = finished.fetch_add(1, Ordering::SeqCst) + 1;
                        progress(count, todo.len(), started, args.json);
                        match &result {
                            Err((message, Fault::Server | Fault::Unreachable)) => {
                                let row = in_a_row.fetch_add(1, Ordering::SeqCst) + 1;
                                if args.stop_after_failures > 0 && row >= args.stop_after_failures
                                {
                                    // The breaker: no more cases go to a failing server.
                                    tripped
                                        .lock()
                                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                                        .get_or_insert_with(|| message.clone());
                                    queue
                                        .lock()
                                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                                        .clear();
                                    break;
                                }
                            }
                            Ok(_) => in_a_row.store(0, Ordering::SeqCst),
                            Err((_, Fault::Case)) => {}
                        }
                    }
                });
                if let Err(error) = spawned {
                    // The system gives no more threads: the ones running do the cases.
                    eprintln!(
                        "warning: a worker could not be started ({error}); going on with fewer"
                    );
                    break;
                }
            }
        }
    });
    if let Some(error) = out_error
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
    {
        return Err(CliError::Output(std::io::Error::new(
            error.kind(),
            format!("{}: {error}", args.out.display()),
        )));
    }
    Ok(Ran {
        finished: finished.into_inner(),
        failed: failed.into_inner(),
        tripped: tripped
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    })
}

/// Prints a failed case and appends it to the errors file.
fn report_failure(
    args: &BatchArgs,
    errors_path: &Path,
    case: &WorkspaceCase,
    message: &str,
) -> std::io::Result<()> {
    if args.json {
        let line = serde_json::json!({
            "error": {"case_id": case.case_id, "message": message}
        });
        eprintln!("{line}");
    } else {
        eprintln!("error: case {}: {message}", case.case_id);
    }
    let line = serde_json::json!({
        "case_id": case.case_id,
        "volume": case.volume,
        "error": message,
    });
    append_line(errors_path, &line.to_string())
}

/// `PRED.errors.jsonl` beside `PRED.jsonl`.
fn errors_path(out: &Path) -> PathBuf {
    let stem = out
        .file_stem()
        .map_or_else(|| "predictions".into(), |s| s.to_string_lossy().to_string());
    out.with_file_name(format!("{stem}.errors.jsonl"))
}

/// Case ids with a complete line in `out` (a torn last line does not count).
fn finished_cases(out: &Path) -> BTreeSet<String> {
    let Ok(text) = std::fs::read_to_string(out) else {
        return BTreeSet::new();
    };
    text.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|value| value["case_id"].as_str().map(str::to_string))
        .collect()
}

/// One progress line on stderr: count, rate, ETA; with `--json` a JSON object, so that
/// stdout and stderr together are JSON lines.
fn progress(done: usize, total: usize, started: Instant, json: bool) {
    let seconds = started.elapsed().as_secs_f64();
    let rate = done as f64 / seconds.max(1e-9);
    let eta = (total - done) as f64 / rate.max(1e-9);
    if json {
        let line = serde_json::json!({
            "progress": {
                "done": done,
                "total": total,
                "cases_per_second": (rate * 100.0).round() / 100.0,
                "eta_seconds": eta.round(),
            }
        });
        eprintln!("{line}");
        return;
    }
    eprintln!(
        "[{done}/{total}] {:.0} %, {rate:.2} cases/s, ETA {eta:.0} s",
        done as f64 * 100.0 / total.max(1) as f64
    );
}
