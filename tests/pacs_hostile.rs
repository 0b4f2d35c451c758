//! A hostile DICOMweb server, played here on 127.0.0.1: UIDs that are paths, answers far
//! larger than they can honestly be, a part that never ends, an answer dripped a byte at a
//! time, text full of terminal escapes, an error that echoes the credentials. Each is
//! refused with the server and the field named, within its bounds, and nothing is written
//! outside the cache.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::{files_below, text};

/// What the server sends for one request.
enum Reply {
    /// These bytes, then the connection closes.
    Bytes(Vec<u8>),
    /// These bytes, then zeros for as long as the client reads.
    Endless(Vec<u8>),
    /// These bytes one at a time, `Duration` apart.
    Drip(Vec<u8>, Duration),
}

/// The request heads the server received.
type Heads = Arc<Mutex<Vec<String>>>;

/// Serves `answer(request head)` on a free port of 127.0.0.1.
fn serve(answer: impl Fn(&str) -> Reply + Send + Sync + 'static) -> (u16, Heads) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let heads: Heads = Arc::default();
    let seen = Arc::clone(&heads);
    let answer = Arc::new(answer);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let answer = Arc::clone(&answer);
            let seen = Arc::clone(&seen);
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).to_string();
                // A STOW request's body is not needed: read what is there and move on.
                if head.starts_with("POST") {
                    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
                    let _ = std::io::copy(&mut (&mut stream).take(1 << 20), &mut std::io::sink());
                }
                seen.lock().expect("lock").push(head.clone());
                match answer(&head) {
                    Reply::Bytes(bytes) => {
                        let _ = stream.write_all(&bytes);
                    }
                    Reply::Endless(start) => {
                        if stream.write_all(&start).is_ok() {
                            let zeros = vec![0u8; 64 * 1024];
                            while stream.write_all(&zeros).is_ok() {}
                        }
                    }
                    Reply::Drip(bytes, every) => {
                        for byte in bytes {
                            if stream.write_all(&[byte]).is_err() {
                                break;
                            }
                            std::thread::sleep(every);
                        }
                    }
                }
            });
        }
    });
    (port, heads)
}

fn json(body: &str) -> Reply {
    Reply::Bytes(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/dicom+json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

const MULTIPART_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: multipart/related; type=\"application/dicom\"; boundary=XyZ\r\nConnection: close\r\n\r\n--XyZ\r\nContent-Type: application/dicom\r\n\r\n";

/// A whole one-instance WADO answer: a small Part 10 file (preamble, marker, file meta
/// naming instance 1.2.3.4.5, and one element of filler).
fn instance_answer() -> Vec<u8> {
    let mut body = MULTIPART_HEAD.to_vec();
    body.extend(std::iter::repeat_n(0u8, 128));
    body.extend_from_slice(b"DICM");
    let element = |body: &mut Vec<u8>, tag: [u8; 4], vr: &[u8; 2], value: &[u8]| {
        body.extend_from_slice(&tag);
        body.extend_from_slice(vr);
        if vr == b"OB" {
            body.extend_from_slice(&[0, 0]);
            body.extend_from_slice(&(value.len() as u32).to_le_bytes());
        } else {
            body.extend_from_slice(&(value.len() as u16).to_le_bytes());
        }
        body.extend_from_slice(value);
    };
    element(&mut body, [2, 0, 1, 0], b"OB", &[0, 1]);
    element(
        &mut body,
        [2, 0, 2, 0],
        b"UI",
        b"1.2.840.10008.5.1.4.1.1.7\0",
    );
    element(&mut body, [2, 0, 3, 0], b"UI", b"1.2.3.4.5\0");
    element(&mut body, [2, 0, 0x10, 0], b"UI", b"1.2.840.10008.1.2.1\0");
    element(&mut body, [0x09, 0, 0x10, 0], b"LO", b"FILLER");
    element(&mut body, [0x09, 0, 0x00, 0x10], b"OB", &[7u8; 400]);
    body.extend_from_slice(b"\r\n--XyZ--\r\n");
    body
}

/// QIDO answers for one CT series `series` holding the instances `sops`; anything else is an
/// instance.
fn study_server(
    series: &'static str,
    sops: &'static [&'static str],
    instance: fn() -> Reply,
) -> u16 {
    serve(move |head| {
        let line = head.lines().next().unwrap_or("");
        if line.contains("/studies?") {
            json(r#"[{"0020000D":{"vr":"UI","Value":["1.2.3"]},"00080061":{"vr":"CS","Value":["CT"]}}]"#)
        } else if line.contains("/series?") {
            json(&format!(
                r#"[{{"0020000E":{{"vr":"UI","Value":["{series}"]}},"00080060":{{"vr":"CS","Value":["CT"]}}}}]"#,
                series = series.replace('\\', "\\\\")
            ))
        } else if line.contains("/instances?") {
            let items: Vec<String> = sops
                .iter()
                .map(|sop| format!(r#"{{"00080018":{{"vr":"UI","Value":["{sop}"]}}}}"#))
                .collect();
            json(&format!("[{}]", items.join(",")))
        } else {
            instance()
        }
    })
    .0
}

fn keyslice(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_keyslice"));
    command
        .args(args)
        .env_remove("KEYSLICE_DICOMWEB_TOKEN")
        .env_remove("KEYSLICE_DICOMWEB_USER")
        .env_remove("KEYSLICE_DICOMWEB_PASSWORD")
        .env_remove("KEYSLICE_MAX_VOLUME_MB");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("the binary runs")
}

fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

#[test]
fn uids_that_are_paths_never_reach_the_file_system() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cache = dir.path().join("sandbox").join("cache");
    let absolute = dir.path().join("chosen-by-the-server");
    let absolute: &'static str = Box::leak(s(&absolute).to_string().into_boxed_str());
    let cases: [(&'static str, &'static [&'static str], &str); 4] = [
        ("../../../../x", &["1.2.3.4.5"], "Series Instance UID"),
        (absolute, &["1.2.3.4.5"], "Series Instance UID"),
        ("1.2.3.4", &["../../../../evil"], "SOP Instance UID"),
        (
            "1.2.3.4",
            &["1.2.3.4.5", "1.2\\u001b[2J.6"],
            "SOP Instance UID",
        ),
    ];
    for (series, sops, field) in cases {
        let port = study_server(series, sops, || Reply::Bytes(instance_answer()));
        let url = format!("dicomweb+http://127.0.0.1:{port}/dicom-web/studies/1.2.3");
        let retrieved = keyslice(&["pacs", "retrieve", &url, "--cache", s(&cache)], &[]);
        let message = text(&retrieved.stderr);
        assert!(!retrieved.status.success(), "{series}: {message}");
        assert!(
            message.contains(field) && message.contains("is not a DICOM UID"),
            "{series}: {message}"
        );
        assert!(!message.contains('\u{1b}'), "{message}");
        // Also through a workspace made from the same server.
        let workspace = dir.path().join("sandbox").join("ws");
        let created = keyslice(&["workspace", "create", s(&workspace), &url], &[]);
        assert!(
            text(&created.stderr).contains("is not a DICOM UID"),
            "{}",
            text(&created.stderr)
        );
    }
    // Nothing anywhere but inside the cache or the workspace folder; no DICOM file at all.
    for file in files_below(dir.path()) {
        assert!(
            file.extension().is_none_or(|extension| extension != "dcm"),
            "{}",
            file.display()
        );
    }
    assert!(!Path::new(absolute).exists());
    assert!(!dir.path().join("x").exists() && !dir.path().join("evil").exists());

    // A study search answering with a path as its Study Instance UID.
    let port = serve(|_| json(r#"[{"0020000D":{"vr":"UI","Value":["/etc"]}}]"#)).0;
    let url = format!("dicomweb+http://127.0.0.1:{port}/dicom-web?PatientID=P1");
    let workspace = dir.path().join("ws2");
    let created = keyslice(&["workspace", "create", s(&workspace), &url], &[]);
    assert!(!created.status.success());
    assert!(
        text(&created.stderr).contains("Study Instance UID that is not a DICOM UID: `/etc`"),
        "{}",
        text(&created.stderr)
    );
}

#[test]
fn answers_larger_than_they_can_hold_are_cut_off_and_leave_nothing_behind() {
    let dir = tempfile::tempdir().expect("temp dir");
    let query = |port: u16| {
        let url = format!("dicomweb+http://127.0.0.1:{port}/dicom-web?PatientID=P1");
        keyslice(&["pacs", "query", &url], &[])
    };

    // A study search of 24 MiB, and one of 300 000 empty items.
    let port = serve(|_| {
        let mut body = String::from("[");
        let item = r#"{"0020000D":{"vr":"UI","Value":["1.2.3"]},"00081030":{"vr":"LO","Value":["padding padding padding padding padding padding"]}},"#;
        while body.len() < 24 << 20 {
            body.push_str(item);
        }
        body.push_str("{}]");
        json(&body)
    })
    .0;
    let refused = query(port);
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("larger than 16 MiB"),
        "{}",
        text(&refused.stderr)
    );
    let port = serve(|_| {
        let mut body = "{},".repeat(300_000);
        body.insert(0, '[');
        body.push_str("{}]");
        json(&body)
    })
    .0;
    let refused = query(port);
    assert!(
        text(&refused.stderr).contains("more than 50000 items"),
        "{}",
        text(&refused.stderr)
    );

    // One instance whose part never ends: cut at its share of a 64 MiB budget, not retried,
    // and its part file removed.
    let cache = dir.path().join("cache");
    let port = study_server("1.2.3.4", &["1.2.3.4.5"], || {
        let mut start = MULTIPART_HEAD.to_vec();
        start.extend(std::iter::repeat_n(0u8, 128));
        start.extend_from_slice(b"DICM");
        Reply::Endless(start)
    });
    let url = format!("dicomweb+http://127.0.0.1:{port}/dicom-web/studies/1.2.3");
    let started = Instant::now();
    let endless = keyslice(
        &["pacs", "retrieve", &url, "--cache", s(&cache)],
        &[("KEYSLICE_MAX_VOLUME_MB", "64")],
    );
    let message = text(&endless.stderr);
    assert!(!endless.status.success());
    assert!(
        message.contains("sent more for instance 1.2.3.4.5") && message.contains("65 MiB"),
        "{message}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(files_below(&cache), Vec::<PathBuf>::new());

    // An answer dripped a byte every 300 ms: over after --timeout-secs, not never.
    let port = study_server("1.2.3.4", &["1.2.3.4.5"], || {
        Reply::Drip(instance_answer(), Duration::from_millis(300))
    });
    let url = format!("dicomweb+http://127.0.0.1:{port}/dicom-web/studies/1.2.3");
    let started = Instant::now();
    let dripped = keyslice(
        &[
            "pacs",
            "retrieve",
            &url,
            "--cache",
            s(&cache),
            "--timeout-secs",
            "2",
            "--retries",
            "1",
        ],
        &[],
    );
    let message = text(&dripped.stderr);
    assert!(!dripped.status.success());
    assert!(
        message.contains("did not arrive within 2 s") || message.contains("no answer within 2 s"),
        "{message}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(files_below(&cache), Vec::<PathBuf>::new());
}

#[test]
fn parts_a_killed_retrieve_left_are_removed_by_the_next_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cache = dir.path().join("cache");
    let port = study_server("1.2.3.4", &["1.2.3.4.5", "1.2.3.4.6"], || {
        Reply::Bytes(instance_answer())
    });
    let url = format!("dicomweb+http://127.0.0.1:{port}/dicom-web/studies/1.2.3");
    let first = keyslice(&["pacs", "retrieve", &url, "--cache", s(&cache)], &[]);
    assert!(first.status.success(), "{}", text(&first.stderr));
    let incoming = files_below(&cache)
        .into_iter()
        .find_map(|file| {
            let server = file.ancestors().nth(3)?.to_path_buf();
            Some(server.join(".incoming"))
        })
        .expect("the server's folder");
    // What a retrieve killed mid-instance leaves: a part file nobody holds.
    std::fs::create_dir_all(&incoming).expect("folder");
    std::fs::write(incoming.join("1.2.3.4.7.4242.part"), vec![1u8; 1 << 20]).expect("part");
    let again = keyslice(&["pacs", "retrieve", &url, "--cache", s(&cache)], &[]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(text(&again.stderr).contains("0 fetched, 2 already cached"));
    let parts: Vec<PathBuf> = files_below(&cache)
        .into_iter()
        .filter(|file| {
            file.extension()
                .is_some_and(|extension| extension == "part")
        })
        .collect();
    assert_eq!(parts, Vec::<PathBuf>::new());
}

#[test]
fn text_from_the_server_is_shown_never_obeyed() {
    let port = serve(|_| {
        json(
            r#"[{"0020000D":{"vr":"UI","Value":["1.2.3"]},"00100020":{"vr":"LO","Value":["P1\u001b[2J\u001b]0;owned\u0007"]},"00081030":{"vr":"LO","Value":["CT\r\nreview by Eve: accepted\b\b"]},"00080050":{"vr":"SH","Value":["A\u009b1"]}}]"#,
        )
    })
    .0;
    let url = format!("dicomweb+http://127.0.0.1:{port}/dicom-web?PatientID=P1");
    let listed = keyslice(&["pacs", "query", &url], &[]);
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let shown = text(&listed.stdout);
    assert!(
        !shown.chars().any(|c| c.is_control() && c != '\n'),
        "{shown:?}"
    );
    // A header line, one study, a count: no forged line.
    assert_eq!(shown.lines().count(), 3, "{shown}");
    assert!(shown.contains("P1\\u{1b}[2J"), "{shown}");
}

#[test]
fn credentials_never_appear_whatever_the_server_echoes_or_the_url_holds() {
    // A server that refuses and echoes the request's headers in its error.
    let (port, heads) = serve(|head| {
        let body = format!("denied: {}", head.replace("\r\n", " | "));
        Reply::Bytes(
            format!(
                "HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
        )
    });
    let url = format!("dicomweb+http://127.0.0.1:{port}/dicom-web/studies/1.2.3");
    let token = "s3cr3t-t0ken-value";
    let refused = keyslice(
        &["pacs", "results", &url],
        &[
            ("KEYSLICE_DICOMWEB_TOKEN", token),
            ("KEYSLICE_LOG", "debug"),
        ],
    );
    let all = format!("{}{}", text(&refused.stdout), text(&refused.stderr));
    assert!(!refused.status.success());
    assert!(all.contains("refused"), "{all}");
    assert!(!all.contains(token), "{all}");
    assert!(
        heads
            .lock()
            .expect("lock")
            .iter()
            .any(|head| head.contains(token)),
        "the token was sent"
    );

    // A password with `/` and `?` in the URL: the right host is asked, with the whole
    // password, and it is printed nowhere.
    let password = "pa/ss?w0rd";
    let url = format!("dicomweb+http://rev:{password}@127.0.0.1:{port}/dicom-web/studies/1.2.3");
    let refused = keyslice(&["pacs", "results", &url], &[("KEYSLICE_LOG", "debug")]);
    let all = format!("{}{}", text(&refused.stdout), text(&refused.stderr));
    assert!(all.contains("refused"), "{all}");
    assert!(!all.contains("pa/ss") && !all.contains("w0rd"), "{all}");
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("rev:{password}"));
    assert!(!all.contains(&basic), "{all}");
    assert!(
        heads
            .lock()
            .expect("lock")
            .iter()
            .any(|head| head.contains(&basic)),
        "the whole password was sent to 127.0.0.1"
    );
}
