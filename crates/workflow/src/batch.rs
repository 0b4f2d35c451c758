//! A model over a whole dataset into a predictions JSONL: on several servers at once (each
//! lane its own requests in flight; a server that stops answering hands its case back to the
//! others), within a memory budget for the CTs in flight, resumable (cases already in the
//! output are skipped; each prediction is one synced line), a failed case written to
//! `PRED.errors.jsonl` while the batch goes on, and a breaker that stops the batch when the
//! server keeps failing.

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use keyslice_infer::backend::Backend;
use keyslice_io::jsonl::append_line;
use keyslice_review::workspace::{MANIFEST_FILE, Workspace, WorkspaceCase, discover_cases};
use serde::Serialize;

use crate::analyze::{Fault, analyse_study, load_case, video_refused_warning};
use crate::{Error, Report};

/// What a batch runs.
#[derive(Debug, Clone, Copy)]
pub struct BatchOptions<'a> {
    /// Dataset folders, case folders, NIfTI files, DICOM series folders or workspaces.
    pub inputs: &'a [PathBuf],
    /// The predictions file (JSONL), appended to.
    pub out: &'a Path,
    /// Run the verifier.
    pub verify: bool,
    /// Memory for the cases in flight, in MB.
    pub memory_mb: u64,
    /// Stop after this many failures of the model server in a row (0: never).
    pub stop_after_failures: usize,
}

/// What a batch did.
#[derive(Debug, Serialize)]
pub struct Summary {
    /// Cases found.
    pub cases: usize,
    /// Of those, already in the output.
    pub skipped: usize,
    /// Done now.
    pub done: usize,
    /// Failed now.
    pub failed: usize,
    /// Seconds the run took.
    pub seconds: f64,
    /// Cases finished per second.
    pub cases_per_second: f64,
    /// Per server (or the one in-process model).
    pub endpoints: Vec<LaneSummary>,
    /// The errors file.
    #[serde(skip)]
    pub errors: PathBuf,
    /// The predictions file.
    #[serde(skip)]
    pub out: PathBuf,
    /// Set when the batch stopped itself (the server kept failing): the last failure.
    #[serde(skip)]
    pub tripped: Option<String>,
}

/// Runs the backends of `lanes` over every case of the inputs not yet in the output.
pub fn run_batch(
    mut lanes: Vec<Lane>,
    options: &BatchOptions<'_>,
    report: &dyn Report,
) -> Result<Summary, Error> {
    let workers = cap_workers(&mut lanes, options.memory_mb, report);
    let mut cases = Vec::new();
    for input in options.inputs {
        if input.join(MANIFEST_FILE).is_file() {
            cases.extend(Workspace::open(input)?.manifest.cases);
        } else {
            cases.extend(discover_cases(input)?);
        }
    }
    let done_before = finished_cases(options.out);
    let total = cases.len();
    let todo: Vec<WorkspaceCase> = cases
        .into_iter()
        .filter(|case| !done_before.contains(&case.case_id))
        .collect();
    let skipped = total - todo.len();
    if skipped > 0 {
        report.note(&format!(
            "{skipped} case(s) already in {}: skipped",
            options.out.display()
        ));
    }
    let errors = errors_path(options.out);
    let started = Instant::now();
    let Ran {
        finished,
        failed,
        tripped,
    } = run_cases(options, &lanes, &todo, &errors, workers, report)?;
    let seconds = started.elapsed().as_secs_f64();
    let done = finished - failed;
    Ok(Summary {
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
        errors,
        out: options.out.to_path_buf(),
        tripped,
    })
}

impl crate::Outcome for Summary {
    fn json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    fn text(&self) -> String {
        format!(
            "{} case(s): {} done, {} failed{}, {} skipped (already done) in {:.1} s ({:.2} cases/s); predictions in {}",
            self.cases,
            self.done,
            self.failed,
            if self.failed > 0 {
                format!(" (see {})", self.errors.display())
            } else {
                String::new()
            },
            self.skipped,
            self.seconds,
            self.cases_per_second,
            self.out.display()
        )
    }
}

/// Where cases run: one backend (a server, or the model in this process) with its threads.
pub struct Lane {
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

impl Lane {
    /// A lane named `name` (a server's URL, or the model's name) running `jobs` cases at once.
    #[must_use]
    pub fn new(name: String, backend: Backend, jobs: usize) -> Self {
        Self {
            name,
            backend,
            jobs,
            down: AtomicBool::new(false),
            done: AtomicUsize::new(0),
            failed: AtomicUsize::new(0),
            handed_back: AtomicUsize::new(0),
            video_warned: AtomicBool::new(false),
        }
    }
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
fn cap_workers(lanes: &mut [Lane], memory_mb: u64, report: &dyn Report) -> usize {
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
    report.warning(&message);
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
fn case_bytes(volume: &keyslice_core::volume::Volume) -> u64 {
    let voxels = volume.voxels();
    let bytes_per = match voxels {
        keyslice_core::volume::Voxels::I16(_) => 2,
        keyslice_core::volume::Voxels::F32(_) => 4,
    };
    (voxels.len() as u64)
        .saturating_mul(bytes_per)
        .saturating_mul(3)
}

/// What one lane did, in the summary.
#[derive(Debug, Serialize)]
pub struct LaneSummary {
    /// The server's URL, or the model's name.
    pub endpoint: String,
    /// Cases it ran at once.
    pub jobs: usize,
    /// Cases done.
    pub done: usize,
    /// Cases failed.
    pub failed: usize,
    /// Cases given back to the other servers when this one stopped answering.
    pub handed_back: usize,
    /// Whether it stopped answering.
    pub down: bool,
}

/// A case's outcome: its prediction line, or why it failed and whose fault it was.
type Outcome = Result<String, (String, Fault)>;

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

/// Runs `todo` on every lane's threads, appending each result as it comes; returns how many
/// finished and how many of those failed. A server that stops answering hands its case back
/// and takes no more while another server is up. Stops taking cases when the output cannot
/// be written.
#[expect(
    clippy::too_many_lines,
    reason = "one scheduling loop with its bookkeeping"
)]
fn run_cases(
    options: &BatchOptions<'_>,
    lanes: &[Lane],
    todo: &[WorkspaceCase],
    errors_path: &Path,
    workers: usize,
    report: &dyn Report,
) -> Result<Ran, Error> {
    let queue = Mutex::new((0..todo.len()).collect::<VecDeque<usize>>());
    let finished = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    // Server failures in a row (any lane); a success resets it.
    let in_a_row = AtomicUsize::new(0);
    let tripped = Mutex::new(None);
    let write_lock = Mutex::new(());
    let out_error = Mutex::new(None);
    let started = Instant::now();
    let budget = Budget::new(case_budget_bytes(options.memory_mb, workers));
    let work = |lane: &Lane, case: &WorkspaceCase| -> Outcome {
        let backend = &lane.backend;
        // A case that fails, even inside a third-party decoder, is one failed case.
        let (study, taken) = {
            let _gate = budget
                .loading
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let study = load_case(&case.volume)
                .map_err(|e| (format!("{e} ({})", e.hint()), Fault::Case))?;
            let taken = budget.take(case_bytes(&study.volume));
            (study, taken)
        };
        let ran = keyslice_io::limits::contain(|| {
            analyse_study(backend, &case.case_id, study, options.verify)
        })
        .map_err(|failed| (failed.to_string(), Fault::Case))?;
        drop(taken);
        let prediction = ran.map_err(|e| (format!("{e} ({})", e.hint()), Fault::of(&e)))?;
        if let Some(warning) = video_refused_warning(&lane.name, &prediction)
            && !lane.video_warned.swap(true, Ordering::SeqCst)
        {
            report.warning(&warning);
        }
        if let Some(unfamiliar) = &prediction.out_of_domain {
            report.warning(&format!(
                "{}: {}",
                keyslice_core::text::shown(&case.case_id),
                unfamiliar.sentence()
            ));
        }
        serde_json::to_string(&prediction).map_err(|e| (e.to_string(), Fault::Case))
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
                                report.warning(&format!(
                                    "{} stopped answering ({message}); its cases go to the other server(s)",
                                    lane.name
                                ));
                            }
                            break;
                        }
                        let _guard = write_lock
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        let written = match &result {
                            Ok(line) => {
                                lane.done.fetch_add(1, Ordering::SeqCst);
                                append_line(options.out, line)
                            }
                            Err((message, _)) => {
                                failed.fetch_add(1, Ordering::SeqCst);
                                lane.failed.fetch_add(1, Ordering::SeqCst);
                                report_failure(report, errors_path, case, message)
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
                        report.progress(count, todo.len(), started);
                        match &result {
                            Err((message, Fault::Server | Fault::Unreachable)) => {
                                let row = in_a_row.fetch_add(1, Ordering::SeqCst) + 1;
                                if options.stop_after_failures > 0
                                    && row >= options.stop_after_failures
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
                    report.warning(&format!(
                        "a worker could not be started ({error}); going on with fewer"
                    ));
                    break;
                }
            }
        }
    });
    if let Some(error) = out_error
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
    {
        return Err(Error::Write {
            path: options.out.to_path_buf(),
            source: error,
        });
    }
    Ok(Ran {
        finished: finished.into_inner(),
        failed: failed.into_inner(),
        tripped: tripped
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    })
}

/// Tells a failed case and appends it to the errors file.
fn report_failure(
    report: &dyn Report,
    errors_path: &Path,
    case: &WorkspaceCase,
    message: &str,
) -> std::io::Result<()> {
    report.case_failed(&case.case_id, message);
    let line = serde_json::json!({
        "case_id": case.case_id,
        "volume": case.volume,
        "error": message,
    });
    append_line(errors_path, &line.to_string())
}

/// `PRED.errors.jsonl` beside `PRED.jsonl`.
#[must_use]
pub fn errors_path(out: &Path) -> PathBuf {
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
