//! WADO-RS retrieve into a local cache: parallel, resumable, never half-written.
//!
//! Layout: `CACHE/SERVER_KEY/STUDY_UID/SERIES_UID/SOP_UID.dcm`, where `SERVER_KEY` is a hash
//! of the DICOMweb root (two servers never share files). Each instance is streamed from the
//! multipart answer into `CACHE/SERVER_KEY/.incoming/…` and renamed into its series folder
//! only when its part ended cleanly, so a series folder holds only whole files and a
//! retrieve cut at any moment resumes with the instances still missing.
//!
//! Everything the server names is checked before it touches the disk: each study, series
//! and instance UID must be a DICOM UID, and each path is checked to lie inside the cache.
//! Each instance may hold at most its share of the memory budget (the budget over the
//! series' instance count, plus room for headers), so a part that never ends is cut off
//! there. A `.part` file is locked while it is written; one that no process holds (left by a
//! killed retrieve) is removed when the next retrieve starts.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use sha2::{Digest, Sha256};

use super::multipart::{MultipartError, MultipartReader, boundary};
use super::qido::{self, SeriesSummary};
use super::{PacsError, Server, is_uid};

/// The most instances one series may list (a CT of 10 000 slices is already far past any
/// scanner's).
pub const MAX_INSTANCES: usize = 10_000;

/// Room for an instance's header and padding on top of its share of the memory budget.
const INSTANCE_HEADER_ALLOWANCE: u64 = 1 << 20;

/// How far a retrieve has come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Instances in the cache (reused or fetched).
    pub done: usize,
    /// Instances in the series.
    pub total: usize,
    /// Bytes fetched over the network so far.
    pub bytes: u64,
}

/// A retrieved series.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retrieved {
    /// The series folder in the cache.
    pub folder: PathBuf,
    /// Study Instance UID.
    pub study_uid: String,
    /// The series.
    pub series: SeriesSummary,
    /// Instances in the folder.
    pub instances: usize,
    /// Of those, fetched now (the others were in the cache).
    pub fetched: usize,
    /// Bytes fetched now.
    pub bytes: u64,
}

/// The default cache: `$XDG_CACHE_HOME/keyslice/dicomweb` (or `~/.cache/…`).
#[must_use]
pub fn default_cache() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|path| path.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("keyslice")
        .join("dicomweb")
}

/// The cache folder of one server.
#[must_use]
pub fn server_cache(cache: &Path, server: &Server) -> PathBuf {
    let digest = Sha256::digest(server.name().as_bytes());
    let key = digest[..8].iter().fold(String::new(), |mut key, byte| {
        use std::fmt::Write as _;
        let _ = write!(key, "{byte:02x}");
        key
    });
    cache.join(key)
}

/// The study's CT series to open: the CT series with the most instances.
pub fn ct_series(server: &Server, study: &str) -> Result<SeriesSummary, PacsError> {
    let all = qido::series(server, study, None)?;
    if all.is_empty() {
        return Err(PacsError::NotFound {
            server: server.name().to_string(),
            what: format!("study {study}"),
        });
    }
    let best = all
        .iter()
        .filter(|series| series.modality.eq_ignore_ascii_case("CT"))
        .max_by_key(|series| (series.instances.unwrap_or(0), series.series_uid.clone()))
        .cloned();
    best.ok_or_else(|| {
        let mut modalities: Vec<&str> = all.iter().map(|s| s.modality.as_str()).collect();
        modalities.sort_unstable();
        modalities.dedup();
        PacsError::NoCt {
            server: server.name().to_string(),
            study: study.to_string(),
            modalities: modalities.join(", "),
        }
    })
}

/// Retrieves the study's CT series ([`ct_series`]) into `cache`.
pub fn retrieve_ct(
    server: &Server,
    study: &str,
    cache: &Path,
    parallel: usize,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Retrieved, PacsError> {
    let series = ct_series(server, study)?;
    retrieve_series(server, study, &series, cache, parallel, progress)
}

/// Retrieves every instance of `series` that is not yet in `cache`, `parallel` at a time.
pub fn retrieve_series(
    server: &Server,
    study: &str,
    series: &SeriesSummary,
    cache: &Path,
    parallel: usize,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Retrieved, PacsError> {
    let instances = checked_instances(server, study, &series.series_uid)?;
    let root = server_cache(cache, server);
    let folder = root.join(study).join(&series.series_uid);
    let incoming = root.join(".incoming");
    for dir in [&folder, &incoming] {
        ensure_inside(&root, dir)?;
        fs::create_dir_all(dir).map_err(|source| PacsError::Cache {
            path: dir.clone(),
            source,
        })?;
    }
    remove_abandoned_parts(&incoming);
    let instance_cap = keyslice_io::limits::max_volume_bytes()
        / u64::try_from(instances.len().max(1)).unwrap_or(u64::MAX)
        + INSTANCE_HEADER_ALLOWANCE;
    let missing: Vec<&str> = instances
        .iter()
        .map(|instance| instance.sop_uid.as_str())
        .filter(|sop| !folder.join(format!("{sop}.dcm")).is_file())
        .collect();
    let total = instances.len();
    let done = AtomicUsize::new(total - missing.len());
    let bytes = AtomicU64::new(0);
    progress(Progress {
        done: done.load(Ordering::Relaxed),
        total,
        bytes: 0,
    });
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let first_error: Mutex<Option<PacsError>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..parallel.clamp(1, 16).min(missing.len().max(1)) {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(sop) = missing.get(index) else { break };
                    let place = InstancePlace {
                        study,
                        series: &series.series_uid,
                        sop,
                        folder: &folder,
                        incoming: &incoming,
                        cap_bytes: instance_cap,
                    };
                    match fetch_instance(server, &place) {
                        Ok(size) => {
                            let size = bytes.fetch_add(size, Ordering::Relaxed) + size;
                            let done = done.fetch_add(1, Ordering::Relaxed) + 1;
                            progress(Progress {
                                done,
                                total,
                                bytes: size,
                            });
                        }
                        Err(error) => {
                            stop.store(true, Ordering::Relaxed);
                            if let Ok(mut slot) = first_error.lock() {
                                slot.get_or_insert(error);
                            }
                        }
                    }
                }
            });
        }
    });
    if let Some(error) = first_error.into_inner().ok().flatten() {
        return Err(error);
    }
    Ok(Retrieved {
        folder,
        study_uid: study.to_string(),
        series: series.clone(),
        instances: total,
        fetched: missing.len(),
        bytes: bytes.into_inner(),
    })
}

/// The instances of a series, each UID checked before any of them names a file, and at
/// most [`MAX_INSTANCES`] of them.
fn checked_instances(
    server: &Server,
    study: &str,
    series: &str,
) -> Result<Vec<qido::InstanceSummary>, PacsError> {
    let what = format!("the instances of series {series} of study {study}");
    let not_uid = |field: &'static str, value: &str| PacsError::NotUid {
        server: server.name().to_string(),
        what: what.clone(),
        field,
        value: value.to_string(),
    };
    if !is_uid(study) {
        return Err(not_uid("Study Instance UID", study));
    }
    if !is_uid(series) {
        return Err(not_uid("Series Instance UID", series));
    }
    let instances = qido::instances(server, study, series)?;
    if let Some(bad) = instances.iter().find(|instance| !is_uid(&instance.sop_uid)) {
        return Err(not_uid("SOP Instance UID", &bad.sop_uid));
    }
    if instances.len() > MAX_INSTANCES {
        return Err(PacsError::TooLarge {
            server: server.name().to_string(),
            what,
            detail: format!(
                "{} instances in one series, more than the {MAX_INSTANCES} of any CT Keyslice opens",
                instances.len()
            ),
        });
    }
    Ok(instances)
}

struct InstancePlace<'a> {
    study: &'a str,
    series: &'a str,
    sop: &'a str,
    folder: &'a Path,
    incoming: &'a Path,
    /// The most bytes this instance may hold.
    cap_bytes: u64,
}

/// Refuses a path that is not inside `root` (no `..`, no absolute part): a last check after
/// every UID in it was checked.
fn ensure_inside(root: &Path, path: &Path) -> Result<(), PacsError> {
    let inside = path.strip_prefix(root).is_ok_and(|rest| {
        rest.components()
            .all(|part| matches!(part, std::path::Component::Normal(_)))
    });
    if inside {
        Ok(())
    } else {
        Err(PacsError::Cache {
            path: path.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the path would leave the cache folder",
            ),
        })
    }
}

/// Removes the `.part` files of `incoming` that no process is writing (each writer holds a
/// lock on its file): what a killed retrieve left behind.
pub fn remove_abandoned_parts(incoming: &Path) {
    let Ok(entries) = fs::read_dir(incoming) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|extension| extension != "part") {
            continue;
        }
        let Ok(file) = fs::OpenOptions::new().write(true).open(&path) else {
            continue;
        };
        if file.try_lock().is_ok() {
            tracing::debug!(path = %path.display(), "removing a part a killed retrieve left");
            let _ = fs::remove_file(&path);
        }
    }
}

/// Fetches one instance into its folder; retries a truncated answer. Returns its size.
fn fetch_instance(server: &Server, place: &InstancePlace<'_>) -> Result<u64, PacsError> {
    let mut attempt = 0;
    loop {
        match fetch_once(server, place) {
            Err(Fetch::Truncated(_)) if attempt < server.retries => {
                tracing::debug!(
                    attempt,
                    server = server.name(),
                    "truncated answer; retrying"
                );
                std::thread::sleep(server.backoff * 2u32.pow(attempt));
                attempt += 1;
            }
            Err(Fetch::Truncated(error) | Fetch::Failed(error)) => return Err(error),
            Ok(size) => return Ok(size),
        }
    }
}

enum Fetch {
    Truncated(PacsError),
    Failed(PacsError),
}

fn fetch_once(server: &Server, place: &InstancePlace<'_>) -> Result<u64, Fetch> {
    let InstancePlace {
        study,
        series,
        sop,
        folder,
        incoming,
        cap_bytes,
    } = *place;
    let what = format!("instance {sop} of study {study}");
    let answer = server
        .get(
            &format!("studies/{study}/series/{series}/instances/{sop}"),
            "multipart/related; type=\"application/dicom\"; transfer-syntax=*",
            &what,
        )
        .map_err(Fetch::Failed)?;
    let boundary = boundary(&answer.content_type)
        .map_err(|e| Fetch::Failed(server.broken(&what, e.to_string())))?;
    let temporary = incoming.join(format!("{sop}.{}.part", std::process::id()));
    let cache_error = |source| {
        Fetch::Failed(PacsError::Cache {
            path: temporary.clone(),
            source,
        })
    };
    let file = fs::File::create(&temporary).map_err(cache_error)?;
    // Held until the file is renamed or removed: a retrieve starting meanwhile leaves it be.
    file.lock().map_err(cache_error)?;
    let mut sink = CountingWriter {
        inner: BufWriter::new(file),
        written: 0,
        cap: cap_bytes,
    };
    let mut reader = MultipartReader::new(answer.body, &boundary);
    let outcome = reader.next_part(&mut sink);
    let result = match outcome {
        Ok(Some(_)) => {
            // The rest of the body must close properly too.
            match reader.next_part(&mut std::io::sink()) {
                Ok(None) => Ok(()),
                Ok(Some(_)) => Err(Fetch::Failed(
                    server.broken(&what, "more than one part for one instance"),
                )),
                Err(error) => Err(multipart_failure(server, &what, error)),
            }
        }
        Ok(None) => Err(Fetch::Failed(server.broken(&what, "no part in the answer"))),
        Err(error) => Err(multipart_failure(server, &what, error)),
    };
    let written = sink.written;
    let flushed = sink
        .inner
        .into_inner()
        .map_err(std::io::IntoInnerError::into_error)
        .and_then(|file| file.sync_data());
    let result = result
        .and_then(|()| flushed.map_err(cache_error))
        .and_then(|()| {
            if is_part10(&temporary) {
                Ok(())
            } else {
                Err(Fetch::Failed(server.broken(
                    &what,
                    "the part is not a DICOM file (no DICM marker)",
                )))
            }
        });
    if let Err(error) = result {
        let _ = fs::remove_file(&temporary);
        return Err(error);
    }
    let destination = folder.join(format!("{sop}.dcm"));
    fs::rename(&temporary, &destination).map_err(|source| {
        let _ = fs::remove_file(&temporary);
        Fetch::Failed(PacsError::Cache {
            path: destination.clone(),
            source,
        })
    })?;
    Ok(written)
}

fn multipart_failure(server: &Server, what: &str, error: MultipartError) -> Fetch {
    match error {
        MultipartError::Io(ref io) if io.kind() == std::io::ErrorKind::FileTooLarge => {
            Fetch::Failed(PacsError::TooLarge {
                server: server.name().to_string(),
                what: what.to_string(),
                detail: io.to_string(),
            })
        }
        // A deadline that passed is not helped by asking again at the same pace.
        MultipartError::Io(ref io) if io.kind() == std::io::ErrorKind::TimedOut => {
            Fetch::Failed(server.broken(what, super::http::read_failure(io, server.timeout)))
        }
        MultipartError::Truncated { .. } => {
            Fetch::Truncated(server.broken(what, error.to_string()))
        }
        // A dropped connection mid-body reads as an IO error: as good as a truncation.
        MultipartError::Io(ref io) if io.kind() != std::io::ErrorKind::StorageFull => {
            Fetch::Truncated(server.broken(what, error.to_string()))
        }
        other => Fetch::Failed(server.broken(what, other.to_string())),
    }
}

fn is_part10(path: &Path) -> bool {
    use std::io::Read as _;
    let mut head = [0u8; 132];
    fs::File::open(path)
        .and_then(|mut file| file.read_exact(&mut head))
        .is_ok_and(|()| &head[128..] == b"DICM")
}

struct CountingWriter<W> {
    inner: W,
    written: u64,
    /// The most bytes the part may hold.
    cap: u64,
}

impl<W: Write> Write for CountingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.written + buf.len() as u64 > self.cap {
            return Err(std::io::Error::new(
                std::io::ErrorKind::FileTooLarge,
                format!(
                    "one instance passed {} MiB, its share of the memory budget (KEYSLICE_MAX_VOLUME_MB) for a series of this many instances",
                    self.cap >> 20
                ),
            ));
        }
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
