//! A series retrieved in one WADO-RS answer, from a DICOMweb server played here on
//! 127.0.0.1 with real DICOM files: whole, cut at every kind of place, dripped while the
//! retrieve is killed, and with parts that name no instance or never stop coming. The cache
//! holds only files identical to the server's, and the next retrieve completes.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{SliceSpec, files_below, text};

const STUDY: &str = "1.2.3";
const SERIES: &str = "1.2.3.4";

/// How the server answers a request for the whole series.
#[derive(Clone, Copy, Debug)]
enum Stream {
    /// The whole multipart answer.
    Whole,
    /// The first this many bytes of the body, then the connection closes.
    CutAt(usize),
    /// The body in chunks of this many bytes, 5 ms apart.
    Drip(usize),
    /// HTTP 406: the server does not stream a series.
    Refused,
    /// Parts whose file meta names a path for their instance.
    PathNamed,
    /// One whole part after another, never closing.
    Endless,
}

struct Server {
    port: u16,
    /// The request lines received.
    lines: Arc<Mutex<Vec<String>>>,
    /// How the series is streamed (an index into the table the server was made with).
    mode: Arc<AtomicUsize>,
}

/// The series' instances: SOP Instance UID and the Part 10 file's bytes.
fn instances(dir: &Path, count: usize) -> Vec<(String, Vec<u8>)> {
    (0..count)
        .map(|index| {
            let slice = SliceSpec::axial(SERIES, index, index as f64 * 2.0, 100 + index as i16);
            let path = dir.join(format!("source{index}.dcm"));
            slice.write(&path);
            (slice.sop_uid, std::fs::read(&path).expect("written"))
        })
        .collect()
}

fn multipart(parts: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::new();
    for part in parts {
        body.extend_from_slice(b"--XyZ\r\nContent-Type: application/dicom\r\n\r\n");
        body.extend_from_slice(part);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"--XyZ--\r\n");
    body
}

const MULTIPART_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: multipart/related; type=\"application/dicom\"; boundary=XyZ\r\nConnection: close\r\n\r\n";

fn json(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/dicom+json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Serves the series; `modes[mode]` says how the whole series is answered.
fn serve(files: Vec<(String, Vec<u8>)>, modes: Vec<Stream>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let lines: Arc<Mutex<Vec<String>>> = Arc::default();
    let mode = Arc::new(AtomicUsize::new(0));
    let (seen, current) = (Arc::clone(&lines), Arc::clone(&mode));
    let files = Arc::new(files);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (seen, current, files) =
                (Arc::clone(&seen), Arc::clone(&current), Arc::clone(&files));
            let modes = modes.clone();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                    head.push(byte[0]);
                }
                let line = String::from_utf8_lossy(&head)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_string();
                seen.lock().expect("lock").push(line.clone());
                let path = line.split(' ').nth(1).unwrap_or("").to_string();
                let answer = if path.contains("/series?") {
                    json(&format!(
                        r#"[{{"0020000E":{{"vr":"UI","Value":["{SERIES}"]}},"00080060":{{"vr":"CS","Value":["CT"]}},"00201209":{{"vr":"IS","Value":[{}]}}}}]"#,
                        files.len()
                    ))
                } else if path.contains("/instances?") {
                    let items: Vec<String> = files
                        .iter()
                        .map(|(sop, _)| {
                            format!(r#"{{"00080018":{{"vr":"UI","Value":["{sop}"]}}}}"#)
                        })
                        .collect();
                    json(&format!("[{}]", items.join(",")))
                } else if let Some(sop) = path.split("/instances/").nth(1) {
                    let Some((_, bytes)) = files.iter().find(|(uid, _)| uid == sop) else {
                        let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                        return;
                    };
                    [MULTIPART_HEAD, &multipart(&[bytes])].concat()
                } else {
                    let parts: Vec<&[u8]> =
                        files.iter().map(|(_, bytes)| bytes.as_slice()).collect();
                    let body = multipart(&parts);
                    match modes[current.load(Ordering::SeqCst).min(modes.len() - 1)] {
                        Stream::Whole => [MULTIPART_HEAD, &body].concat(),
                        Stream::CutAt(at) => [MULTIPART_HEAD, &body[..at.min(body.len())]].concat(),
                        Stream::Refused => b"HTTP/1.1 406 Not Acceptable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec(),
                        Stream::PathNamed => {
                            let renamed: Vec<Vec<u8>> = files
                                .iter()
                                .map(|(sop, bytes)| renamed_in_meta(bytes, sop, "../../../../evil"))
                                .collect();
                            let parts: Vec<&[u8]> = renamed.iter().map(Vec::as_slice).collect();
                            [MULTIPART_HEAD, &multipart(&parts)].concat()
                        }
                        Stream::Drip(chunk) => {
                            if stream.write_all(MULTIPART_HEAD).is_err() {
                                return;
                            }
                            for piece in body.chunks(chunk) {
                                if stream.write_all(piece).is_err() {
                                    return;
                                }
                                std::thread::sleep(Duration::from_millis(5));
                            }
                            return;
                        }
                        Stream::Endless => {
                            let mut part = b"--XyZ\r\nContent-Type: application/dicom\r\n\r\n".to_vec();
                            part.extend_from_slice(&files[0].1);
                            part.extend_from_slice(b"\r\n");
                            if stream.write_all(MULTIPART_HEAD).is_ok() {
                                while stream.write_all(&part).is_ok() {}
                            }
                            return;
                        }
                    }
                };
                let _ = stream.write_all(&answer);
            });
        }
    });
    Server { port, lines, mode }
}

/// The file with `from` replaced by `to` in its file meta (the meta's lengths fixed up).
fn renamed_in_meta(bytes: &[u8], from: &str, to: &str) -> Vec<u8> {
    let object = dicom_object::from_reader(&bytes[128..]).expect("parses");
    let mut meta = object.meta().clone();
    meta.media_storage_sop_instance_uid = to.to_string();
    meta.update_information_group_length();
    let mut out = vec![0u8; 128];
    out.extend_from_slice(b"DICM");
    meta.write(&mut out).expect("meta");
    let dataset_at = 132 + object.meta().information_group_length as usize + 12;
    out.extend_from_slice(&bytes[dataset_at..]);
    assert!(
        !out.windows(from.len())
            .take(300)
            .any(|window| window == from.as_bytes())
    );
    out
}

fn retrieve(port: u16, cache: &Path) -> Output {
    command(port, cache).output().expect("the binary runs")
}

fn command(port: u16, cache: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_keyslice"));
    command
        .args([
            "pacs",
            "retrieve",
            &format!("dicomweb+http://127.0.0.1:{port}/dicom-web/studies/{STUDY}"),
            "--cache",
            cache.to_str().expect("utf-8 path"),
            "--retries",
            "1",
        ])
        .env_remove("KEYSLICE_DICOMWEB_TOKEN")
        .env_remove("KEYSLICE_DICOMWEB_USER")
        .env_remove("KEYSLICE_DICOMWEB_PASSWORD");
    command
}

/// The `.dcm` files of the cache by SOP Instance UID; every one must be byte for byte the
/// server's, and nothing else may be there but `.part` files when `parts_allowed`.
fn cached(cache: &Path, files: &[(String, Vec<u8>)], parts_allowed: bool) -> BTreeSet<String> {
    let sources: BTreeMap<&str, &[u8]> = files
        .iter()
        .map(|(sop, bytes)| (sop.as_str(), bytes.as_slice()))
        .collect();
    let mut found = BTreeSet::new();
    for file in files_below(cache) {
        let name = file
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or("")
            .to_string();
        if let Some(sop) = name.strip_suffix(".dcm") {
            let source = sources
                .get(sop)
                .unwrap_or_else(|| panic!("a file of no instance: {}", file.display()));
            let bytes = std::fs::read(&file).expect("readable");
            assert!(
                bytes == *source,
                "{} differs from the server's ({} of {} bytes)",
                file.display(),
                bytes.len(),
                source.len()
            );
            found.insert(sop.to_string());
        } else {
            assert!(
                parts_allowed && Path::new(&name).extension().is_some_and(|e| e == "part"),
                "unexpected {}",
                file.display()
            );
        }
    }
    found
}

#[test]
fn a_series_comes_in_one_answer_and_an_answer_cut_anywhere_is_completed_with_whole_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let files = instances(dir.path(), 24);
    let parts: Vec<&[u8]> = files.iter().map(|(_, bytes)| bytes.as_slice()).collect();
    let body = multipart(&parts);
    let part_length = files[0].1.len();

    // Whole: the series search, then the series in one answer; nothing else asked.
    let server = serve(files.clone(), vec![Stream::Whole]);
    let cache = dir.path().join("whole");
    let output = retrieve(server.port, &cache);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(cached(&cache, &files, false).len(), files.len());
    let lines = server.lines.lock().expect("lock").clone();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[1].contains(&format!("/studies/{STUDY}/series/{SERIES} ")),
        "{lines:?}"
    );

    // Cut in the first delimiter, in a part's headers, in its DICOM preamble, in its pixels,
    // just before a delimiter, just after one, and before the closing delimiter.
    let first_part = body.windows(4).position(|w| w == b"DICM").expect("marker") - 128;
    let cuts = [
        3,
        first_part - 10,
        first_part + 60,
        first_part + part_length - 5,
        first_part + part_length + 2,
        body.len() / 2,
        body.len() / 2 + part_length / 3,
        body.len() - 4,
    ];
    for cut in cuts {
        let server = serve(files.clone(), vec![Stream::CutAt(cut)]);
        let cache = dir.path().join(format!("cut{cut}"));
        let output = retrieve(server.port, &cache);
        assert!(
            output.status.success(),
            "cut at {cut}: {}",
            text(&output.stderr)
        );
        assert_eq!(
            cached(&cache, &files, false).len(),
            files.len(),
            "cut at {cut}"
        );
        // What the cut answer delivered whole was not asked for again.
        let lines = server.lines.lock().expect("lock").clone();
        let one_by_one = lines
            .iter()
            .filter(|line| line.contains("/instances/"))
            .count();
        let delivered = body[..cut]
            .windows(7)
            .filter(|w| *w == b"\r\n--XyZ")
            .count();
        assert!(
            one_by_one <= files.len() - delivered.saturating_sub(1),
            "cut at {cut}: {one_by_one} asked one by one after {delivered} delimiters: {lines:?}"
        );
    }

    // A server that does not stream a series: each instance is asked for.
    let server = serve(files.clone(), vec![Stream::Refused]);
    let cache = dir.path().join("refused");
    let output = retrieve(server.port, &cache);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(cached(&cache, &files, false).len(), files.len());
}

#[test]
fn a_retrieve_killed_at_any_moment_leaves_only_whole_files_and_the_next_one_completes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let files = instances(dir.path(), 40);
    // Dripped: the whole series takes about a second and a half to arrive.
    let server = serve(files.clone(), vec![Stream::Drip(200), Stream::Whole]);
    let cache = dir.path().join("cache");
    let mut seen_between = Vec::new();
    for after_ms in [30, 120, 260, 420, 700, 950] {
        let mut child = command(server.port, &cache)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starts");
        std::thread::sleep(Duration::from_millis(after_ms));
        let _ = child.kill();
        let _ = child.wait();
        seen_between.push(cached(&cache, &files, true).len());
    }
    assert!(
        seen_between
            .iter()
            .any(|&count| count > 0 && count < files.len()),
        "some kill fell in the middle of the series: {seen_between:?}"
    );
    server.mode.store(1, Ordering::SeqCst);
    let started = Instant::now();
    let output = retrieve(server.port, &cache);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(
        cached(&cache, &files, false).len(),
        files.len(),
        "after kills {seen_between:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn parts_that_name_a_path_or_never_stop_coming_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let files = instances(dir.path(), 6);
    let sandbox = dir.path().join("sandbox");
    let cache = sandbox.join("cache");

    // Parts whose file meta names a path: not used as a name; the instances come by name.
    let server = serve(files.clone(), vec![Stream::PathNamed]);
    let output = retrieve(server.port, &cache);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(cached(&cache, &files, false).len(), files.len());
    assert!(!dir.path().join("evil").exists() && !sandbox.join("evil").exists());

    // One part after another, for ever: stopped at twice the series and a margin.
    let server = serve(files.clone(), vec![Stream::Endless]);
    let cache = sandbox.join("endless");
    let started = Instant::now();
    let output = retrieve(server.port, &cache);
    let message = text(&output.stderr);
    assert!(!output.status.success());
    assert!(
        message.contains("more than 28 parts for a series of 6 instances"),
        "{message}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    cached(&cache, &files, false);
}
