//! WADO-RS retrieve into a local cache: streamed, resumable, never half-written.
//!
//! Layout: `CACHE/SERVER_KEY/STUDY_UID/SERIES_UID/SOP_UID.dcm`, where `SERVER_KEY` is a hash
//! of the DICOMweb root (two servers never share files). A series comes in one multipart
//! answer where the server allows it, else one instance per request, several at once. Each
//! part is written into `CACHE/SERVER_KEY/.incoming/…` and renamed into its series folder
//! only when it ended cleanly, so a series folder holds only whole files and a retrieve cut
//! at any moment resumes with the instances still missing. Files are not forced to disk one
//! by one (that would cost more than the transfer); instead a file is reused only when its
//! structure is whole, so one that a power cut left short is fetched again.
//!
//! Everything the server names is checked before it touches the disk: each study, series
//! and instance UID must be a DICOM UID, and each path is checked to lie inside the cache.
//! Each instance may hold at most its share of the memory budget (the budget over the
//! series' instance count, plus room for headers), so a part that never ends is cut off
//! there. A `.part` file is locked while it is written; one that no process holds (left by a
//! killed retrieve) is removed when the next retrieve starts.

use std::collections::BTreeSet;
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

/// Retrieves every instance of `series` that is not yet in `cache`.
///
/// A series the cache has none of, whose size the search gave, comes in one WADO-RS answer
/// (each instance written to the cache as its part ends), without listing its instances
/// first. Whatever is still missing then (the answer was cut, the server does not stream a
/// series, or the retrieve resumes one begun earlier) is listed and fetched one instance
/// per request, `parallel` at a time; more than half a series missing is streamed again
/// first.
pub fn retrieve_series(
    server: &Server,
    study: &str,
    series: &SeriesSummary,
    cache: &Path,
    parallel: usize,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Retrieved, PacsError> {
    let (folder, incoming) = prepare_folders(server, study, &series.series_uid, &[], cache)?;
    remove_abandoned_parts(&incoming);
    let held = whole_instances(&folder);
    let mut place = SeriesPlace {
        study,
        series: &series.series_uid,
        folder: &folder,
        incoming: &incoming,
        cap_bytes: 0,
        expected: None,
    };
    let mut fetched = Fetched::default();
    let announced = series
        .instances
        .and_then(|count| usize::try_from(count).ok())
        .filter(|count| (1..=MAX_INSTANCES).contains(count));
    let mut streamed = false;
    if held.is_empty()
        && let Some(count) = announced
    {
        place.cap_bytes = instance_cap(count);
        streamed = true;
        let stored = stream_series(server, &place, count, progress, &mut fetched)?;
        if stored >= count {
            return Ok(Retrieved {
                folder,
                study_uid: study.to_string(),
                series: series.clone(),
                instances: stored,
                fetched: fetched.instances,
                bytes: fetched.bytes,
            });
        }
    }
    let instances = checked_instances(server, study, &series.series_uid)?;
    let total = instances.len();
    place.cap_bytes = instance_cap(total);
    let mut held = whole_instances(&folder);
    let missing = |held: &BTreeSet<String>| -> Vec<String> {
        instances
            .iter()
            .map(|instance| instance.sop_uid.clone())
            .filter(|sop| !held.contains(sop))
            .collect()
    };
    let mut still = missing(&held);
    if !streamed && still.len() > 1 && still.len() * 2 > total {
        place.expected = Some(instances.iter().map(|i| i.sop_uid.clone()).collect());
        stream_series(server, &place, total, progress, &mut fetched)?;
        held = whole_instances(&folder);
        still = missing(&held);
    }
    fetch_each(
        server,
        &place,
        &still,
        (total - still.len(), total),
        parallel,
        progress,
        &mut fetched,
    )?;
    Ok(Retrieved {
        folder,
        study_uid: study.to_string(),
        series: series.clone(),
        instances: total,
        fetched: fetched.instances,
        bytes: fetched.bytes,
    })
}

/// The cache folder of one series.
#[must_use]
pub fn series_folder(cache: &Path, server: &Server, study: &str, series: &str) -> PathBuf {
    server_cache(cache, server).join(study).join(series)
}

/// Fetches the named instances of a series into the cache before the rest (the key image
/// of a stored result, so that a viewer shows it while the series arrives). Instances
/// already there are kept.
pub fn retrieve_instances(
    server: &Server,
    study: &str,
    series: &str,
    sops: &[String],
    cache: &Path,
) -> Result<(), PacsError> {
    let (folder, incoming) = prepare_folders(server, study, series, sops, cache)?;
    let place = SeriesPlace {
        study,
        series,
        folder: &folder,
        incoming: &incoming,
        cap_bytes: instance_cap(1),
        expected: None,
    };
    let held = whole_instances(&folder);
    for sop in sops.iter().filter(|sop| !held.contains(*sop)) {
        fetch_instance(server, &place, sop)?;
    }
    Ok(())
}

/// Checks every UID that will name a folder or file, then makes the series folder and the
/// server's `.incoming` folder (each checked to lie inside the cache); returns both.
fn prepare_folders(
    server: &Server,
    study: &str,
    series: &str,
    sops: &[String],
    cache: &Path,
) -> Result<(PathBuf, PathBuf), PacsError> {
    for (field, uid) in [
        ("Study Instance UID", study),
        ("Series Instance UID", series),
    ]
    .into_iter()
    .chain(sops.iter().map(|sop| ("SOP Instance UID", sop.as_str())))
    {
        if !is_uid(uid) {
            return Err(PacsError::NotUid {
                server: server.name().to_string(),
                what: format!("series {series} of study {study}"),
                field,
                value: uid.to_string(),
            });
        }
    }
    let root = server_cache(cache, server);
    let folder = root.join(study).join(series);
    let incoming = root.join(".incoming");
    for dir in [&folder, &incoming] {
        ensure_inside(&root, dir)?;
        fs::create_dir_all(dir).map_err(|source| PacsError::Cache {
            path: dir.clone(),
            source,
        })?;
    }
    Ok((folder, incoming))
}

/// What a retrieve has fetched so far.
#[derive(Clone, Copy, Debug, Default)]
struct Fetched {
    instances: usize,
    bytes: u64,
}

/// The most bytes one instance of a series of `count` may hold.
fn instance_cap(count: usize) -> u64 {
    keyslice_io::limits::max_volume_bytes() / u64::try_from(count.max(1)).unwrap_or(u64::MAX)
        + INSTANCE_HEADER_ALLOWANCE
}

/// The SOP Instance UIDs whose file in `folder` is whole (a file a crash cut is not).
fn whole_instances(folder: &Path) -> BTreeSet<String> {
    let Ok(entries) = fs::read_dir(folder) else {
        return BTreeSet::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let path = entry.path();
            let sop = path
                .file_name()?
                .to_str()?
                .strip_suffix(".dcm")?
                .to_string();
            keyslice_io::dicom::is_whole_file(&path).then_some(sop)
        })
        .collect()
}

/// Fetches `missing`, one instance per request, `parallel` at a time. `(done, total)`: where
/// the progress stands.
fn fetch_each(
    server: &Server,
    place: &SeriesPlace<'_>,
    missing: &[String],
    (done, total): (usize, usize),
    parallel: usize,
    progress: &(dyn Fn(Progress) + Sync),
    fetched: &mut Fetched,
) -> Result<(), PacsError> {
    let done = AtomicUsize::new(done);
    let bytes = AtomicU64::new(fetched.bytes);
    let count = AtomicUsize::new(0);
    progress(Progress {
        done: done.load(Ordering::Relaxed),
        total,
        bytes: fetched.bytes,
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
                    match fetch_instance(server, place, sop) {
                        Ok(size) => {
                            let size = bytes.fetch_add(size, Ordering::Relaxed) + size;
                            count.fetch_add(1, Ordering::Relaxed);
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
    fetched.instances += count.into_inner();
    fetched.bytes = bytes.into_inner();
    match first_error.into_inner().ok().flatten() {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// Streams the whole series in one WADO-RS answer; each part is renamed into the folder when
/// it ended cleanly. Returns how many parts were stored. A server that refuses to stream a
/// series, an answer cut short and a part that does not name its instance leave the rest to
/// the caller (what was stored stays); a part that is too large, or far more parts than the
/// series holds, is an error.
fn stream_series(
    server: &Server,
    place: &SeriesPlace<'_>,
    total: usize,
    progress: &(dyn Fn(Progress) + Sync),
    fetched: &mut Fetched,
) -> Result<usize, PacsError> {
    let SeriesPlace {
        study,
        series,
        folder,
        incoming,
        cap_bytes,
        ..
    } = *place;
    let what = format!("series {series} of study {study}");
    // The time one instance may take, for each instance of the series.
    let timeout = server.timeout * u32::try_from(total.max(1)).unwrap_or(u32::MAX);
    let answer = match server.get_within(
        &format!("studies/{study}/series/{series}"),
        "multipart/related; type=\"application/dicom\"; transfer-syntax=*",
        &what,
        timeout,
    ) {
        Ok(answer) => answer,
        Err(error) => {
            tracing::debug!(%error, "the server does not stream the series; fetching each instance");
            return Ok(0);
        }
    };
    let Ok(boundary) = boundary(&answer.content_type) else {
        tracing::debug!(
            content_type = answer.content_type,
            "not a multipart answer; fetching each instance"
        );
        return Ok(0);
    };
    let mut reader = MultipartReader::new(answer.body, &boundary);
    let mut stored = BTreeSet::new();
    progress(Progress {
        done: 0,
        total,
        bytes: fetched.bytes,
    });
    let most_parts = total * 2 + 16;
    for part in 1.. {
        if part > most_parts {
            return Err(PacsError::TooLarge {
                server: server.name().to_string(),
                what,
                detail: format!("more than {most_parts} parts for a series of {total} instances"),
            });
        }
        let temporary = incoming.join(format!("stream.{}.{part}.part", std::process::id()));
        let written = match receive_part(&mut reader, &temporary, cap_bytes) {
            Ok(Some(written)) => written,
            Ok(None) => break,
            Err(error) => {
                let _ = fs::remove_file(&temporary);
                return match multipart_failure(server, &what, &temporary, error) {
                    Fetch::Truncated(error) => {
                        tracing::debug!(%error, stored = stored.len(), "the series answer was cut; fetching the rest");
                        Ok(stored.len())
                    }
                    Fetch::Failed(error) => Err(error),
                };
            }
        };
        let Some(sop) = written.sop.filter(|sop| is_uid(sop)) else {
            // Without its UID a part cannot be named: the instances still missing are asked
            // for one by one, by name.
            tracing::debug!(
                part,
                "a part without a SOP Instance UID in its file meta; fetching the rest one by one"
            );
            let _ = fs::remove_file(&temporary);
            return Ok(stored.len());
        };
        if place
            .expected
            .as_ref()
            .is_some_and(|expected| !expected.contains(&sop))
        {
            tracing::debug!(
                sop,
                "a part that is not an instance of the series; left out"
            );
            let _ = fs::remove_file(&temporary);
            continue;
        }
        let destination = folder.join(format!("{sop}.dcm"));
        fs::rename(&temporary, &destination).map_err(|source| {
            let _ = fs::remove_file(&temporary);
            PacsError::Cache {
                path: destination.clone(),
                source,
            }
        })?;
        stored.insert(sop);
        fetched.instances += 1;
        fetched.bytes += written.bytes;
        progress(Progress {
            done: stored.len().min(total),
            total,
            bytes: fetched.bytes,
        });
    }
    Ok(stored.len())
}

/// A part received whole into its temporary file.
struct Received {
    bytes: u64,
    /// Media Storage SOP Instance UID from its file meta information.
    sop: Option<String>,
}

/// Writes the next part of `reader` into `temporary` (locked while written); `None` after
/// the last part.
fn receive_part<R: std::io::Read>(
    reader: &mut MultipartReader<R>,
    temporary: &Path,
    cap: u64,
) -> Result<Option<Received>, MultipartError> {
    let file = fs::File::create(temporary)?;
    file.lock()?;
    let mut sink = CountingWriter {
        inner: BufWriter::with_capacity(256 * 1024, file),
        written: 0,
        cap,
        head: Vec::new(),
    };
    let Some(_) = reader.next_part(&mut sink)? else {
        drop(sink);
        let _ = fs::remove_file(temporary);
        return Ok(None);
    };
    sink.inner
        .into_inner()
        .map_err(std::io::IntoInnerError::into_error)?;
    Ok(Some(Received {
        bytes: sink.written,
        sop: meta_sop_instance_uid(&sink.head),
    }))
}

/// The Media Storage SOP Instance UID (0002,0003) of a Part 10 file that starts with `head`:
/// read from the file meta group (explicit VR little endian) by hand, so nothing a server
/// declares is allocated.
fn meta_sop_instance_uid(head: &[u8]) -> Option<String> {
    if head.get(128..132)? != b"DICM" {
        return None;
    }
    let mut at = 132;
    loop {
        let header = head.get(at..at + 8)?;
        let group = u16::from_le_bytes([header[0], header[1]]);
        let element = u16::from_le_bytes([header[2], header[3]]);
        if group != 0x0002 {
            return None;
        }
        let (length, value_at) = if matches!(&header[4..6], b"OB" | b"OW" | b"SQ" | b"UN" | b"UT") {
            let bytes = head.get(at + 8..at + 12)?;
            (
                u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize,
                at + 12,
            )
        } else {
            (
                usize::from(u16::from_le_bytes([header[6], header[7]])),
                at + 8,
            )
        };
        let value = head.get(value_at..value_at.checked_add(length)?)?;
        if element == 0x0003 {
            let text = std::str::from_utf8(value).ok()?;
            return Some(text.trim_end_matches(['\0', ' ']).to_string());
        }
        at = value_at + length;
    }
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

/// Where a series' instances go.
struct SeriesPlace<'a> {
    study: &'a str,
    series: &'a str,
    folder: &'a Path,
    incoming: &'a Path,
    /// The most bytes one instance may hold.
    cap_bytes: u64,
    /// The instances a search listed, when it was asked: a streamed part of another is left
    /// out.
    expected: Option<BTreeSet<String>>,
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
fn fetch_instance(server: &Server, place: &SeriesPlace<'_>, sop: &str) -> Result<u64, PacsError> {
    let mut attempt = 0;
    loop {
        match fetch_once(server, place, sop) {
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

fn fetch_once(server: &Server, place: &SeriesPlace<'_>, sop: &str) -> Result<u64, Fetch> {
    let SeriesPlace {
        study,
        series,
        folder,
        incoming,
        cap_bytes,
        ..
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
        head: Vec::new(),
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
                Err(error) => Err(multipart_failure(server, &what, &temporary, error)),
            }
        }
        Ok(None) => Err(Fetch::Failed(server.broken(&what, "no part in the answer"))),
        Err(error) => Err(multipart_failure(server, &what, &temporary, error)),
    };
    let written = sink.written;
    let flushed = sink
        .inner
        .into_inner()
        .map(drop)
        .map_err(std::io::IntoInnerError::into_error);
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

/// What a failure while receiving into `file` means: a full disk is the cache's, said as
/// such (never the PACS's); a cut answer can be asked again; the rest is the server's.
fn multipart_failure(server: &Server, what: &str, file: &Path, error: MultipartError) -> Fetch {
    match error {
        MultipartError::Io(io) if io.kind() == std::io::ErrorKind::StorageFull => {
            Fetch::Failed(PacsError::Cache {
                path: file.to_path_buf(),
                source: std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    format!("the disk is full ({io}); nothing was wrong with the PACS's answer"),
                ),
            })
        }
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
    /// The part's first bytes (its file meta group).
    head: Vec<u8>,
}

/// How much of a part's start is kept to read its file meta group from.
const HEAD_BYTES: usize = 16 * 1024;

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
        if self.head.len() < HEAD_BYTES {
            let keep = (HEAD_BYTES - self.head.len()).min(n);
            self.head.extend_from_slice(&buf[..keep]);
        }
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_said_as_such_and_never_blamed_on_the_pacs() {
        let url = super::super::DicomWebUrl::parse("dicomweb+http://127.0.0.1:9/dicom-web")
            .expect("a URL");
        let server = Server::new(&url);
        let file = Path::new("/cache/incoming/stream.1.part");
        let full = MultipartError::Io(std::io::Error::from(std::io::ErrorKind::StorageFull));
        let Fetch::Failed(error) = multipart_failure(&server, "the series", file, full) else {
            panic!("a full disk is not a cut answer to ask again");
        };
        let said = error.to_string();
        assert!(
            said.starts_with("cannot write the DICOMweb cache: the disk is full"),
            "{said}"
        );
        assert!(said.contains("/cache/incoming/stream.1.part"), "{said}");
        assert!(error.hint().contains("disk has room"), "{}", error.hint());
        // A dropped connection is still a cut answer, asked again.
        let dropped = MultipartError::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(matches!(
            multipart_failure(&server, "the series", file, dropped),
            Fetch::Truncated(_)
        ));
    }
}
