//! What a use case tells, on a terminal: progress, warnings and the items that failed while
//! the others went on, on stderr (stdout is the command's own output).

use std::time::Instant;

use crate::{Error, Report};

/// What a use case tells, on the terminal (stderr): progress, warnings, and the items that
/// failed while the others went on, each with its hint.
#[derive(Default)]
pub struct Terminal {
    /// When the last progress line was printed.
    last_progress: std::sync::Mutex<Option<std::time::Instant>>,
}

impl Report for Terminal {
    fn retrieving(
        &self,
        study: &str,
        p: keyslice_pacs::dicomweb::retrieve::Progress,
        started: std::time::Instant,
    ) {
        use std::io::IsTerminal as _;
        // On a terminal one line rewritten in place; in a log, a plain line every 5 s.
        let terminal = std::io::stderr().is_terminal();
        let every = if terminal {
            std::time::Duration::from_millis(500)
        } else {
            std::time::Duration::from_secs(5)
        };
        let Ok(mut last) = self.last_progress.lock() else {
            return;
        };
        if p.done == p.total || last.is_none_or(|at| at.elapsed() >= every) {
            *last = Some(std::time::Instant::now());
            let seconds = started.elapsed().as_secs_f64().max(1e-3);
            let rate = p.done as f64 / seconds;
            let eta = (p.total.saturating_sub(p.done)) as f64 / rate.max(1e-9);
            // The study's UID only: no patient data on the terminal.
            let line = format!(
                "retrieving study {study}: {}/{} instances, {:.1} MB, {rate:.1} instances/s, ETA {eta:.0} s",
                p.done,
                p.total,
                p.bytes as f64 / 1e6
            );
            if terminal {
                eprint!("\r{line}");
            } else {
                eprintln!("{line}");
            }
        }
    }

    fn retrieve_ended(
        &self,
        retrieved: Option<&keyslice_pacs::dicomweb::retrieve::Retrieved>,
        elapsed: std::time::Duration,
    ) {
        use std::io::IsTerminal as _;
        if std::io::stderr().is_terminal() {
            eprintln!();
        }
        if let Some(retrieved) = retrieved {
            eprintln!(
                "{} instance(s) of series {} ({} fetched, {} already cached) in {:.1} s",
                retrieved.instances,
                retrieved.series.series_uid,
                retrieved.fetched,
                retrieved.instances - retrieved.fetched,
                elapsed.as_secs_f64()
            );
        }
        if let Ok(mut last) = self.last_progress.lock() {
            *last = None;
        }
    }

    fn warning(&self, text: &str) {
        eprintln!("warning: {}", keyslice_core::text::shown(text));
    }

    fn note(&self, text: &str) {
        eprintln!("{}", keyslice_core::text::shown(text));
    }

    fn failed(&self, item: Option<&str>, error: &Error) {
        let item = item.map_or_else(String::new, |item| {
            format!("{}: ", keyslice_core::text::shown(item))
        });
        eprintln!(
            "error: {item}{}\nhint: {}",
            keyslice_core::text::shown(&error.to_string()),
            error.hint()
        );
    }
}

/// A batch on the terminal: progress with rate and ETA, warnings and failed cases on
/// stderr; with `--json` each a JSON object, so that stdout and stderr together are JSON
/// lines.
pub struct BatchTerminal {
    /// Each line a JSON object.
    pub json: bool,
}

impl Report for BatchTerminal {
    fn warning(&self, text: &str) {
        if self.json {
            eprintln!("{}", serde_json::json!({"warning": text}));
        } else {
            eprintln!("warning: {text}");
        }
    }

    fn note(&self, text: &str) {
        if !self.json {
            eprintln!("{text}");
        }
    }

    fn case_failed(&self, case_id: &str, message: &str) {
        if self.json {
            let line = serde_json::json!({
                "error": {"case_id": case_id, "message": message}
            });
            eprintln!("{line}");
        } else {
            eprintln!("error: case {case_id}: {message}");
        }
    }

    fn progress(&self, done: usize, total: usize, started: Instant) {
        let seconds = started.elapsed().as_secs_f64();
        let rate = done as f64 / seconds.max(1e-9);
        let eta = (total - done) as f64 / rate.max(1e-9);
        if self.json {
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
}
