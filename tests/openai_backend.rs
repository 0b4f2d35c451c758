//! The OpenAI-compatible backend and `keyslice batch` against a small HTTP/1.1 server started
//! by each test: it speaks the chat-completions protocol, records every request (so the test
//! checks what Keyslice sends: model, greedy settings, bearer key, one base64 PNG per frame
//! and the frame → slice table) and answers as scripted: a report, a local description, 429,
//! 401, a too-long-context 400, or text that is not JSON. No real model server can run here.

#[path = "common/chat_server.rs"]
mod chat_server;
mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine as _;
use chat_server::{REPORT, Script, Server, completion, good_model, images};
use serde_json::Value;

/// Small phantom cases (32 slices) in `folder`; returns their CT paths.
fn phantoms(folder: &Path, count: u32) -> Vec<PathBuf> {
    std::fs::create_dir_all(folder).expect("folder");
    (0..count)
        .map(|index| {
            let case = keyslice::phantom::generate(
                11,
                index,
                keyslice::phantom::PhantomOptions {
                    matrix: 48,
                    slice_mm: Some(8.0),
                },
            );
            let written = keyslice::phantom::write::write_case(folder, &case).expect("written");
            folder.join(written.ct)
        })
        .collect()
}

fn keyslice(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_keyslice"));
    command.args(args);
    for (name, value) in envs {
        command.env(name, value);
    }
    command.output().expect("the binary runs")
}

/// `keyslice batch DATASET --out OUT --backend openai --url … --model m --frames 4 --json`
/// and `more`.
fn batch(dataset: &Path, out: &Path, urls: &[String], more: &[&str]) -> Output {
    let mut args = vec![
        "batch",
        dataset.to_str().expect("utf-8"),
        "--out",
        out.to_str().expect("utf-8"),
        "--backend",
        "openai",
    ];
    for url in urls {
        args.extend(["--url", url.as_str()]);
    }
    args.extend(["--model", "m", "--frames", "4", "--json"]);
    args.extend_from_slice(more);
    keyslice(&args, &[])
}

/// The text of a verification request (the part after the key slice).
fn verifier_prompt(body: &Value) -> String {
    body["messages"][0]["content"][1]["text"]
        .as_str()
        .expect("the verifier's prompt")
        .to_string()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).to_string()
}

#[test]
fn analyze_sends_frames_and_the_key_slice_to_the_server_and_reads_its_answers() {
    let folder = tempfile::tempdir().expect("temp dir");
    let ct = &phantoms(folder.path(), 1)[0];
    let server = Server::start(good_model());
    let output = keyslice(
        &[
            "analyze",
            ct.to_str().expect("utf-8"),
            "--backend",
            "openai",
            "--url",
            &server.url,
            "--model",
            "emrl-qwen3vl",
            "--api-key-env",
            "KEYSLICE_TEST_KEY",
            "--frames",
            "8",
            "--json",
        ],
        &[("KEYSLICE_TEST_KEY", "sk-test-123")],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let prediction: Value = serde_json::from_slice(&output.stdout).expect("one prediction");
    assert_eq!(prediction["key_slice"]["index"], 5);
    assert_eq!(prediction["diagnoser"]["id"], "emrl-qwen3vl");
    assert_eq!(prediction["findings"]["organs"]["liver"]["tumor"], "yes");
    // The verifier's answer is the prompt's own example line: every attribute is read
    // back, so each agrees with the report on its own (a lost one would be null).
    let local = &prediction["local_findings"]["organs"]["liver"]["lesions"][0];
    assert_eq!(local["size"]["long_cm"], 3.1);
    assert_eq!(local["size"]["short_cm"], 2.4);
    assert_eq!(local["attenuation"], "hypo");
    assert_eq!(local["location"]["liver_segments"], serde_json::json!([7]));
    for attribute in ["organ", "location", "attenuation", "size"] {
        assert_eq!(
            prediction["consistency"][attribute].as_f64(),
            Some(1.0),
            "{attribute}: {}",
            prediction["consistency"]
        );
    }

    let seen = server.seen();
    assert_eq!(seen.len(), 2, "a diagnosis and a verification");
    let diagnosis = &seen[0];
    assert_eq!(diagnosis.path, "/v1/chat/completions");
    assert_eq!(
        diagnosis.authorization.as_deref(),
        Some("Bearer sk-test-123")
    );
    assert_eq!(diagnosis.body["model"], "emrl-qwen3vl");
    assert_eq!(diagnosis.body["temperature"], 0);
    assert_eq!(images(&diagnosis.body), 8);
    assert_eq!(prediction["input"], "video (8 frames)");
    let parts = diagnosis.body["messages"][0]["content"]
        .as_array()
        .expect("parts");
    assert_eq!(parts.len(), 2, "one video part and the prompt");
    assert_eq!(parts[0]["type"], "video_url");
    let prompt = parts.last().expect("text")["text"]
        .as_str()
        .expect("prompt");
    assert!(prompt.contains("[0, 4, 9, 13, 18, 22, 27, 31]"), "{prompt}");
    // Each frame of the video is a JPEG of the slice.
    let frames = chat_server::video_frames(&diagnosis.body);
    assert_eq!(frames.len(), 8);
    assert!(frames.iter().all(|(w, h, _)| (*w, *h) == (48, 48)));
    // The video states the frame rate the exports train at, so a stock server stamps the
    // frames right; 8 frames are fewer than vLLM keeps by default, so nothing else is asked.
    let video = &parts[0];
    assert!((chat_server::avi_video(video).1 - 2.0).abs() < 1e-9);
    assert!(
        diagnosis.body.get("media_io_kwargs").is_none(),
        "{}",
        diagnosis.body
    );
    // The verifier sees the key slice alone.
    assert_eq!(images(&seen[1].body), 1);
    let local_prompt = verifier_prompt(&seen[1].body);
    assert!(local_prompt.contains("slice 5"), "{local_prompt}");
}

#[test]
fn busy_servers_are_retried_and_failures_say_what_to_do() {
    let folder = tempfile::tempdir().expect("temp dir");
    let ct = phantoms(folder.path(), 1)[0].to_string_lossy().to_string();
    let run = |url: &str, retries: &str| {
        keyslice(
            &[
                "analyze",
                &ct,
                "--backend",
                "openai",
                "--url",
                url,
                "--model",
                "m",
                "--frames",
                "4",
                "--retries",
                retries,
                "--no-verify",
                "--json",
            ],
            &[],
        )
    };
    // Two 429s, then an answer.
    let busy = Server::start(Box::new(|n, _| {
        if n < 2 {
            (429, r#"{"error":{"message":"rate limited"}}"#.into())
        } else {
            (200, completion(REPORT))
        }
    }));
    let output = run(&busy.url, "3");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(busy.seen().len(), 3);

    let cases: [(Box<Script>, &str, &str); 4] = [
        (
            Box::new(|_, _| (401, r#"{"error":"invalid key"}"#.into())),
            "refused the API key",
            "--api-key-env",
        ),
        (
            Box::new(|_, _| {
                (
                    400,
                    r#"{"error":{"message":"This model's maximum context length is 4096 tokens"}}"#
                        .into(),
                )
            }),
            "longer than the model's context",
            "--frames",
        ),
        (
            Box::new(|_, _| (200, "<html>proxy error</html>".into())),
            "not a chat completion",
            "reachable",
        ),
        (
            Box::new(|_, _| (503, "overloaded".into())),
            "HTTP 503",
            "reachable",
        ),
    ];
    for (script, message, hint) in cases {
        let server = Server::start(script);
        let output = run(&server.url, "1");
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(message) && stderr.contains(hint),
            "{stderr}"
        );
        assert!(
            stderr.contains(&server.url),
            "the server is named: {stderr}"
        );
    }
    // Nobody listening.
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("port")
        .local_addr()
        .expect("address")
        .port();
    let output = run(&format!("http://127.0.0.1:{port}/v1"), "3");
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("connection refused"), "{stderr}");
    assert!(
        !stderr.contains("WARN") && stderr.lines().count() == 2,
        "one error and one hint, no retry chatter: {stderr}"
    );
    // A URL without /v1: the 404 says what the URL should be.
    let not_found = Server::start(Box::new(|_, _| (404, String::new())));
    let base = not_found.url.trim_end_matches("/v1").to_string();
    let output = run(&base, "0");
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("HTTP 404") && stderr.contains("ends in /v1"),
        "{stderr}"
    );
}

#[test]
fn credentials_never_leave_in_output_errors_or_predictions() {
    let folder = tempfile::tempdir().expect("temp dir");
    let ct = phantoms(folder.path(), 1)[0].to_string_lossy().to_string();
    let analyze = |url: &str, envs: &[(&str, &str)], more: &[&str]| {
        let mut args = vec![
            "analyze",
            &ct,
            "--backend",
            "openai",
            "--url",
            url,
            "--model",
            "m",
            "--frames",
            "4",
            "--retries",
            "0",
            "--json",
        ];
        args.extend_from_slice(more);
        keyslice(&args, envs)
    };
    // A server that echoes the request's path and Authorization header in its error.
    let echo = Server::start_full(Box::new(|_, seen| {
        (
            500,
            Vec::new(),
            format!(
                "{{\"error\": \"bad request {} with Authorization: {}\"}}",
                seen.path,
                seen.authorization.clone().unwrap_or_default()
            ),
        )
    }));
    let secret_url = echo
        .url
        .replace("http://", "http://ana:hunter2pw@")
        .replace("/v1", "/v1?api-key=QKEY123");
    for (envs, more) in [
        (vec![], vec![]),
        (
            vec![("MY_KEY", "sk-SECRET-777")],
            vec!["--api-key-env", "MY_KEY"],
        ),
    ] {
        let output = analyze(&secret_url, &envs, &more);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("HTTP 500"), "{stderr}");
        for secret in [
            "hunter2pw",
            "QKEY123",
            "sk-SECRET-777",
            "YW5hOmh1bnRlcjJwdw",
        ] {
            assert!(!stderr.contains(secret), "{secret} shown: {stderr}");
        }
        assert!(stderr.contains("api-key=***"), "{stderr}");
    }
    // A batch writes the same failure to its errors file, without the secrets.
    let dataset = folder.path().join("dataset");
    phantoms(&dataset, 1);
    let out = folder.path().join("pred.jsonl");
    let batched = batch(
        &dataset,
        &out,
        std::slice::from_ref(&secret_url),
        &["--retries", "0"],
    );
    assert_eq!(batched.status.code(), Some(1));
    let errors = std::fs::read_to_string(folder.path().join("pred.errors.jsonl")).expect("errors");
    let printed = format!("{}{}", text(&batched.stdout), text(&batched.stderr));
    for secret in ["hunter2pw", "QKEY123", "YW5hOmh1bnRlcjJwdw"] {
        assert!(
            !errors.contains(secret),
            "{secret} in the errors file: {errors}"
        );
        assert!(!printed.contains(secret), "{secret} printed: {printed}");
    }
    assert!(errors.contains("HTTP 500"), "{errors}");
    let seen = echo.seen();
    // The key stays a query parameter of the request, after the path.
    assert_eq!(seen[0].path, "/v1/chat/completions?api-key=QKEY123");
    // User-info goes as Basic credentials; an API key as a bearer token.
    let basic = base64::engine::general_purpose::STANDARD.encode("ana:hunter2pw");
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(format!("Basic {basic}").as_str())
    );
    assert_eq!(
        seen[1].authorization.as_deref(),
        Some("Bearer sk-SECRET-777")
    );
}

#[test]
fn a_prediction_records_its_server_without_secrets() {
    let folder = tempfile::tempdir().expect("temp dir");
    let ct = phantoms(folder.path(), 1)[0].to_string_lossy().to_string();
    // A good server behind the same kind of URL: the prediction records no secret.
    let good = Server::start(good_model());
    let good_url = good.url.replace("http://", "http://ana:hunter2pw@") + "?api-key=QKEY123";
    let output = keyslice(
        &[
            "analyze",
            &ct,
            "--backend",
            "openai",
            "--url",
            &good_url,
            "--model",
            "m",
            "--frames",
            "4",
            "--json",
        ],
        &[],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(
        !all.contains("hunter2pw") && !all.contains("QKEY123"),
        "{all}"
    );
    assert!(
        all.contains("api-key=***"),
        "the server is still named: {all}"
    );
}

#[test]
fn an_answer_of_megabytes_is_cut_to_bounds_with_the_cut_said() {
    let folder = tempfile::tempdir().expect("temp dir");
    let ct = phantoms(folder.path(), 1)[0].to_string_lossy().to_string();
    let flood: String = (1..=60_000)
        .map(|n| format!("Liver lesion {n}:\nSize: 1.0 x 1.0 cm.\n"))
        .chain(std::iter::repeat_n("gibberish line\n".to_string(), 1000))
        .collect();
    let answer = format!("{flood}Key slice: 5\n");
    let server = Server::start(Box::new(move |_, _| (200, completion(&answer))));
    let output = keyslice(
        &[
            "analyze",
            &ct,
            "--backend",
            "openai",
            "--url",
            &server.url,
            "--model",
            "m",
            "--frames",
            "4",
            "--json",
        ],
        &[],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let prediction: Value = serde_json::from_slice(&output.stdout).expect("a prediction");
    let report = prediction["report"].as_str().expect("report");
    assert!(report.len() <= 64 * 1024, "{}", report.len());
    let lesions = prediction["findings"]["organs"]["liver"]["lesions"]
        .as_array()
        .map_or(0, Vec::len);
    assert!((1..=20).contains(&lesions), "{lesions}");
    let warnings = prediction["warnings"].as_array().expect("warnings");
    assert!(warnings.len() <= 50, "{}", warnings.len());
    assert!(
        warnings[0]
            .as_str()
            .is_some_and(|w| w.starts_with("the model's answer is ") && w.contains("bytes")),
        "{warnings:?}"
    );
}

#[test]
fn a_series_with_burned_in_text_is_never_sent_unless_allowed() {
    use dicom_core::{DataElement, PrimitiveValue, VR};
    let folder = tempfile::tempdir().expect("temp dir");
    let ct = phantoms(folder.path(), 1)[0].to_string_lossy().to_string();
    let series = folder.path().join("series");
    let converted = keyslice(
        &["convert", &ct, series.to_str().expect("utf-8"), "--dicom"],
        &[],
    );
    assert!(converted.status.success(), "{}", text(&converted.stderr));
    // One slice of the series has text drawn into it, and says so.
    let slice = series.join("slice_0003.dcm");
    let mut object = dicom_object::open_file(&slice).expect("a slice");
    object.put(DataElement::new(
        dicom_dictionary_std::tags::BURNED_IN_ANNOTATION,
        VR::CS,
        PrimitiveValue::from("YES"),
    ));
    object.write_to_file(&slice).expect("written");
    let server = Server::start(good_model());
    let analyze = |more: &[&str]| {
        let mut args = vec![
            "analyze",
            series.to_str().expect("utf-8"),
            "--backend",
            "openai",
            "--url",
            &server.url,
            "--model",
            "m",
            "--frames",
            "4",
            "--json",
        ];
        args.extend_from_slice(more);
        keyslice(&args, &[])
    };
    let refused = analyze(&[]);
    let stderr = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("Burned In Annotation (0028,0301) YES"),
        "{stderr}"
    );
    assert!(stderr.contains("--allow-burned-in"), "{stderr}");
    assert!(server.seen().is_empty(), "nothing was sent");
    let allowed = analyze(&["--allow-burned-in"]);
    assert!(allowed.status.success(), "{}", text(&allowed.stderr));
    assert!(!server.seen().is_empty());
    // The model on this machine reads it: nothing leaves.
    let local = keyslice(&["analyze", series.to_str().expect("utf-8"), "--json"], &[]);
    assert!(local.status.success(), "{}", text(&local.stderr));
}

#[test]
fn another_server_can_verify_and_the_prediction_names_it() {
    let folder = tempfile::tempdir().expect("temp dir");
    let ct = phantoms(folder.path(), 1)[0].to_string_lossy().to_string();
    let diagnosing = Server::start(good_model());
    let verifying = Server::start(good_model());
    let output = keyslice(
        &[
            "analyze",
            &ct,
            "--backend",
            "openai",
            "--url",
            &diagnosing.url,
            "--model",
            "reporter",
            "--verifier-url",
            &verifying.url,
            "--verifier-model",
            "checker",
            "--frames",
            "4",
            "--json",
        ],
        &[],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let prediction: Value = serde_json::from_slice(&output.stdout).expect("a prediction");
    assert_eq!(prediction["diagnoser"]["id"], "reporter");
    assert_eq!(prediction["verifier"]["id"], "checker");
    assert!(
        prediction["verifier"]["version"]
            .as_str()
            .is_some_and(|version| version.contains(&verifying.url)),
        "{prediction}"
    );
    // Each server was asked only its own part.
    assert_eq!(diagnosing.seen().len(), 1, "the diagnosis only");
    assert!(!verifying.seen().is_empty());
    assert!(
        verifying
            .seen()
            .iter()
            .all(|seen| seen.body["model"] == "checker" && images(&seen.body) == 1),
        "the verifier gets the key slice alone"
    );
    // Half a verifier is refused, naming what is missing.
    let half = keyslice(
        &[
            "analyze",
            &ct,
            "--backend",
            "openai",
            "--url",
            &diagnosing.url,
            "--model",
            "m",
            "--verifier-url",
            &verifying.url,
        ],
        &[],
    );
    assert_eq!(half.status.code(), Some(2));
    assert!(
        text(&half.stderr).contains("--verifier-model"),
        "{}",
        text(&half.stderr)
    );
}

/// A chat-completions server over HTTPS whose certificate a test CA signed (made here with
/// openssl), answering every request with `REPORT`: its port, the CA's PEM and the process.
fn tls_server(folder: &Path) -> Option<(u16, PathBuf, std::process::Child)> {
    if !common::test_ca(folder) {
        return None;
    }
    let script = r#"
import http.server, json, ssl, sys
report = sys.argv[1]
class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps({"choices": [{"message": {"role": "assistant", "content": report}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain("server.pem", "server.key")
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;
    let mut child = Command::new("python3")
        .args(["-c", script, REPORT])
        .current_dir(folder)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().expect("stdout")),
        &mut line,
    )
    .expect("the port");
    let port = line.trim().parse().expect("a port number");
    Some((port, folder.join("ca.pem"), child))
}

#[test]
fn a_server_behind_a_hospital_ca_is_trusted_once_its_ca_is_named() {
    let folder = tempfile::tempdir().expect("temp dir");
    let ct = phantoms(folder.path(), 1)[0].to_string_lossy().to_string();
    let Some((port, ca, mut server)) = tls_server(folder.path()) else {
        return;
    };
    let url = format!("https://localhost:{port}/v1");
    let analyze = |more: &[&str], envs: &[(&str, &str)]| {
        let mut args = vec![
            "analyze",
            &ct,
            "--backend",
            "openai",
            "--url",
            &url,
            "--model",
            "m",
            "--frames",
            "4",
            "--no-verify",
            "--json",
            "--retries",
            "3",
        ];
        args.extend_from_slice(more);
        keyslice(&args, envs)
    };
    // Unknown to this machine: said as a certificate problem with what to do, not retried.
    let started = std::time::Instant::now();
    let refused = analyze(&[], &[]);
    let stderr = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("certificate is not trusted"), "{stderr}");
    assert!(stderr.contains("--ca-cert FILE"), "{stderr}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(3),
        "no backoff of 0.5 + 1 + 2 s"
    );
    // Named with --ca-cert, or in SSL_CERT_FILE: trusted.
    let ca = ca.to_str().expect("utf-8");
    let trusted = analyze(&["--ca-cert", ca], &[]);
    assert!(trusted.status.success(), "{}", text(&trusted.stderr));
    let by_environment = analyze(&[], &[("SSL_CERT_FILE", ca)]);
    assert!(
        by_environment.status.success(),
        "{}",
        text(&by_environment.stderr)
    );
    // A file that is no certificate is refused, named.
    let wrong = analyze(&["--ca-cert", &ct], &[]);
    assert!(
        text(&wrong.stderr).contains("--ca-cert"),
        "{}",
        text(&wrong.stderr)
    );
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
fn redirects_are_refused_and_a_servers_wait_is_kept() {
    let folder = tempfile::tempdir().expect("temp dir");
    let ct = phantoms(folder.path(), 1)[0].to_string_lossy().to_string();
    let analyze = |url: &str| {
        keyslice(
            &[
                "analyze",
                &ct,
                "--backend",
                "openai",
                "--url",
                url,
                "--model",
                "m",
                "--frames",
                "4",
                "--retries",
                "2",
                "--no-verify",
                "--json",
            ],
            &[],
        )
    };
    // Another host would answer in this server's name: the redirect is named, not followed.
    let other = Server::start(good_model());
    let location = format!("{}/chat/completions", other.url);
    let redirecting = Server::start_full(Box::new(move |_, _| {
        (
            302,
            vec![("Location".into(), location.clone())],
            String::new(),
        )
    }));
    let output = analyze(&redirecting.url);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("HTTP 302") && stderr.contains(&other.url),
        "{stderr}"
    );
    assert_eq!(redirecting.seen().len(), 1, "not retried");
    assert!(other.seen().is_empty(), "never followed");

    // Retry-After is honoured: the second try comes no sooner than asked.
    let stamps = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = std::sync::Arc::clone(&stamps);
    let busy = Server::start_full(Box::new(move |n, _| {
        record.lock().expect("lock").push(std::time::Instant::now());
        if n == 0 {
            (503, vec![("Retry-After".into(), "2".into())], "busy".into())
        } else {
            (200, Vec::new(), completion(REPORT))
        }
    }));
    let output = analyze(&busy.url);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stamps = stamps.lock().expect("lock").clone();
    assert_eq!(stamps.len(), 2);
    assert!(stamps[1] - stamps[0] >= std::time::Duration::from_secs(2));

    // A wait longer than Keyslice waits fails at once, saying so.
    let away = Server::start_full(Box::new(|_, _| {
        (
            429,
            vec![("Retry-After".into(), "86400".into())],
            "later".into(),
        )
    }));
    let output = analyze(&away.url);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("86400 s (Retry-After)"), "{stderr}");
    assert_eq!(away.seen().len(), 1);
}

#[test]
fn a_batch_stops_after_the_server_fails_k_times_in_a_row() {
    let folder = tempfile::tempdir().expect("temp dir");
    let dataset = folder.path().join("dataset");
    phantoms(&dataset, 6);
    let failing = Server::start(Box::new(|_, _| (500, "model crashed".into())));
    let out = folder.path().join("pred.jsonl");
    let output = batch(
        &dataset,
        &out,
        std::slice::from_ref(&failing.url),
        &["--retries", "0", "--stop-after-failures", "2"],
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "batch stopped after 2 failures of the model server in a row, 4 case(s) not run"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("model crashed"),
        "the last failure is said: {stderr}"
    );
    assert_eq!(
        failing.seen().len(),
        2,
        "no case went to the server after that"
    );
    // Out of range is refused, named.
    let output = batch(
        &dataset,
        &out,
        std::slice::from_ref(&failing.url),
        &["--stop-after-failures", "1000000"],
    );
    assert!(text(&output.stderr).contains("--stop-after-failures"));
}

#[test]
fn batch_runs_in_parallel_resumes_and_records_a_failing_case() {
    let folder = tempfile::tempdir().expect("temp dir");
    let dataset = folder.path().join("dataset");
    let cts = phantoms(&dataset, 4);
    let server = Server::start(good_model());
    let out = folder.path().join("pred.jsonl");
    let urls = [server.url.clone()];
    let run = |out: &Path| batch(&dataset, out, &urls, &["--jobs", "4"]);
    let output = run(&out);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let summary: Value = serde_json::from_slice(&output.stdout).expect("summary");
    assert_eq!(
        (summary["done"].as_u64(), summary["failed"].as_u64()),
        (Some(4), Some(0))
    );
    let lines = std::fs::read_to_string(&out).expect("predictions");
    assert_eq!(lines.lines().count(), 4);
    assert_eq!(server.seen().len(), 8);
    // With --json, progress is JSON too: every line of both streams parses.
    let progress: Vec<Value> = text(&output.stderr)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON progress line"))
        .collect();
    assert_eq!(progress.len(), 4, "one line per case");
    assert!(
        progress
            .iter()
            .any(|line| line["progress"]["done"] == 4 && line["progress"]["total"] == 4)
    );

    // Again: everything is there, nothing is sent.
    let output = run(&out);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let summary: Value = serde_json::from_slice(&output.stdout).expect("summary");
    assert_eq!(summary["skipped"], 4);
    assert_eq!(server.seen().len(), 8);

    // A damaged CT: recorded with its error, the others done, exit 1.
    std::fs::write(&cts[2], b"not a nifti file").expect("damaged");
    let fresh = folder.path().join("fresh.jsonl");
    let output = run(&fresh);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let summary: Value = serde_json::from_slice(&output.stdout).expect("summary");
    assert_eq!(
        (summary["done"].as_u64(), summary["failed"].as_u64()),
        (Some(3), Some(1))
    );
    let errors = std::fs::read_to_string(folder.path().join("fresh.errors.jsonl")).expect("errors");
    let error: Value = serde_json::from_str(errors.trim()).expect("one error line");
    assert!(error["error"].as_str().is_some_and(|e| !e.is_empty()));
    // score reads the batch output.
    let scored = keyslice(
        &[
            "score",
            "--pred",
            out.to_str().expect("utf-8"),
            "--truth",
            dataset.to_str().expect("utf-8"),
        ],
        &[],
    );
    assert!(scored.status.success(), "{}", text(&scored.stderr));
}

/// The grey pixels of the PNG data URL in `part`.
fn png_grey(part: &Value) -> (u32, u32, Vec<u8>) {
    let url = part["image_url"]["url"].as_str().expect("data url");
    let png = base64::engine::general_purpose::STANDARD
        .decode(
            url.strip_prefix("data:image/png;base64,")
                .expect("PNG data URL"),
        )
        .expect("base64");
    let image = image::load_from_memory(&png).expect("a PNG").to_luma8();
    (image.width(), image.height(), image.into_raw())
}

/// A model whose report carries `evidence` lines and whose verifier answers `local`.
fn model_with(evidence: &'static str, local: &'static str) -> Box<Script> {
    Box::new(move |_, body| {
        let text = if images(body) > 1 {
            format!("{REPORT}{evidence}")
        } else {
            local.to_string()
        };
        (200, completion(&text))
    })
}

fn analyze_json(ct: &Path, server: &Server) -> Value {
    analyze_json_with(ct, server, &[])
}

fn analyze_json_with(ct: &Path, server: &Server, more: &[&str]) -> Value {
    let mut args = vec![
        "analyze",
        ct.to_str().expect("utf-8"),
        "--backend",
        "openai",
        "--url",
        &server.url,
        "--model",
        "emrl-qwen3vl",
        "--frames",
        "8",
        "--json",
    ];
    args.extend_from_slice(more);
    let output = keyslice(&args, &[]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("one prediction")
}

#[test]
fn the_models_box_is_drawn_for_the_verifier_asked_about_and_scored() {
    let folder = tempfile::tempdir().expect("temp dir");
    let ct = &phantoms(folder.path(), 1)[0];
    let server = Server::start(model_with(
        "Box on key slice: columns 10-20, rows 12-22\nLesion slices: 3-8\n",
        "Liver lesion 1: Location: hepatic segment 7. Size: 3.1 x 2.4 cm. Enhancement relative to liver: Hypoattenuating.\nInside the box: lesion.",
    ));
    let prediction = analyze_json(ct, &server);
    assert_eq!(
        prediction["box"]["voxels"],
        serde_json::json!([10, 12, 20, 22]),
        "{prediction}"
    );
    assert_eq!(
        prediction["findings"]["box"]["voxels"],
        serde_json::json!([10, 12, 20, 22])
    );
    assert_eq!(
        prediction["findings"]["lesion_slices"],
        serde_json::json!({"first": 3, "last": 8})
    );
    assert_eq!(prediction["local_findings"]["inside_box"], "yes");
    assert_eq!(prediction["consistency"]["region"], 1.0);

    let seen = server.seen();
    let diagnosis_prompt = seen[0].body["messages"][0]["content"]
        .as_array()
        .and_then(|parts| parts.last())
        .and_then(|part| part["text"].as_str())
        .expect("prompt");
    assert!(
        diagnosis_prompt.contains("48 × 48 pixels") && diagnosis_prompt.contains("C1 < 48"),
        "{diagnosis_prompt}"
    );
    let parts = &seen[1].body["messages"][0]["content"];
    let prompt = parts[1]["text"].as_str().expect("verifier prompt");
    assert!(
        prompt.contains("a white box marks the region of interest, columns 10-20, rows 12-22")
            && prompt.contains("Inside the box:"),
        "{prompt}"
    );
    // The whole slice with the box's border drawn white.
    let (width, height, grey) = png_grey(&parts[0]);
    assert_eq!((width, height), (48, 48));
    let at = |column: usize, row: usize| grey[row * 48 + column];
    for (column, row) in [(10, 12), (20, 22), (15, 12), (10, 17), (20, 17), (15, 22)] {
        assert_eq!(at(column, row), 255, "border pixel ({column}, {row})");
    }
    assert_eq!(
        at(9, 12),
        at(9, 12).min(254),
        "outside the border is the slice"
    );
}

#[test]
fn a_lesions_own_evidence_line_is_verified_on_its_own_slice_and_box() {
    let folder = tempfile::tempdir().expect("temp dir");
    let ct = &phantoms(folder.path(), 1)[0];
    let server = Server::start(model_with(
        "Box on key slice: columns 10-20, rows 12-22\nLiver lesion 1 evidence: slice 2, columns 30-40, rows 5-15, slices 1-3\nLiver lesion 9 evidence: slice 7\n",
        "Liver lesion 1: Size: 3.1 x 2.4 cm. Enhancement relative to liver: Hypoattenuating.\nInside the box: lesion.",
    ));
    let prediction = analyze_json(ct, &server);
    // The evidence line is the lesion's, not a sentence left unread.
    let warnings = prediction["warnings"].to_string();
    assert!(!warnings.contains("evidence:"), "{warnings}");
    let checks = prediction["lesion_checks"].as_array().expect("checks");
    assert_eq!(checks.len(), 1, "{prediction}");
    assert_eq!(checks[0]["organ"], "liver");
    assert_eq!(checks[0]["key_slice"], 2);
    assert_eq!(
        checks[0]["slice_box"]["voxels"],
        serde_json::json!([30, 5, 40, 15])
    );
    // Diagnosis, the answer's key slice, then the lesion's own slice with its own box.
    let seen = server.seen();
    assert_eq!(seen.len(), 3);
    let prompt = verifier_prompt(&seen[2].body);
    assert!(
        prompt.contains("slice 2") && prompt.contains("columns 30-40, rows 5-15"),
        "{prompt}"
    );
    assert_eq!(
        prediction["consistency"]["findings"][0]["standing"],
        "agrees"
    );
}

#[test]
fn a_faulty_box_or_slice_range_is_reported_not_used() {
    let folder = tempfile::tempdir().expect("temp dir");
    let ct = &phantoms(folder.path(), 1)[0];
    let cases: [(&'static str, &[&str]); 3] = [
        (
            "Box on key slice: columns 30-60, rows 12-22\nLesion slices: 8-3\n",
            &["reaches outside the 48 × 48 slice", "inverted"],
        ),
        (
            "Box on key slice: columns 20-10, rows 12-22\nLesion slices: 6-9\n",
            &["corners out of order", "does not hold the key slice 5"],
        ),
        (
            "Box on slice 9: columns 10-20, rows 12-22\nBox: somewhere left\n",
            &["not on the key slice 5", "no readable corners"],
        ),
    ];
    for (evidence, reasons) in cases {
        let server = Server::start(model_with(evidence, chat_server::LOCAL));
        let prediction = analyze_json(ct, &server);
        let warnings = prediction["warnings"].to_string();
        for reason in reasons {
            assert!(
                warnings.contains(reason),
                "{evidence}: {reason} in {warnings}"
            );
        }
        assert!(prediction["box"].is_null(), "{evidence}");
        assert!(prediction["findings"]["box"].is_null(), "{evidence}");
        // The report's findings are still read and verified on the key slice.
        assert_eq!(prediction["key_slice"]["index"], 5);
        let prompt = verifier_prompt(&server.seen()[1].body);
        assert!(prompt.contains("no region is marked"), "{prompt}");
    }
}

#[test]
fn the_in_process_qwen3_vl_and_the_server_are_shown_the_same_frames_and_prompts() {
    use keyslice::infer::openai::{DIAGNOSE_PROMPT, VERIFY_PROMPT};
    use keyslice::infer::qwen3_vl::{Qwen3Vl, pipeline::Qwen3VlPipeline};
    use keyslice::infer::{KeySliceImage, Verifier as _};
    let folder = tempfile::tempdir().expect("temp dir");
    let ct = &phantoms(folder.path(), 1)[0];
    let volume = keyslice::io::nifti::read_nifti(ct).expect("phantom opens");
    let model = Qwen3Vl::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/qwen3vl/tiny"),
        &candle_core::Device::Cpu,
        None,
    )
    .expect("the tiny checkpoint loads");
    let pipeline = Qwen3VlPipeline::new(
        model,
        8,
        4,
        DIAGNOSE_PROMPT.to_string(),
        VERIFY_PROMPT.to_string(),
    );
    let (frames, prompt) = pipeline.diagnosis_input(&volume).expect("frames");

    let server = Server::start(model_with(
        "Box on key slice: columns 10-20, rows 12-22\n",
        chat_server::LOCAL,
    ));
    // As a video: the same frames, through JPEG (within a few grey levels).
    let _ = analyze_json(ct, &server);
    let video = chat_server::video_frames(&server.seen()[0].body);
    assert_eq!(video.len(), frames.grey.len());
    for (index, ((_, _, sent), grey)) in video.iter().zip(&frames.grey).enumerate() {
        let differences: Vec<u32> = sent
            .iter()
            .zip(grey)
            .map(|(a, b)| u32::from(a.abs_diff(*b)))
            .collect();
        let mean = f64::from(differences.iter().sum::<u32>()) / differences.len() as f64;
        let most = differences.iter().copied().max().unwrap_or(0);
        assert!(
            mean < 1.5 && most <= 24,
            "frame {index}: mean {mean:.2}, max {most}"
        );
    }
    // As images: the same frames, pixel for pixel.
    let server = Server::start(model_with(
        "Box on key slice: columns 10-20, rows 12-22\n",
        chat_server::LOCAL,
    ));
    let prediction = analyze_json_with(ct, &server, &["--media", "images"]);
    assert_eq!(prediction["input"], "images (8 frames)");
    let seen = server.seen();
    let parts = seen[0].body["messages"][0]["content"]
        .as_array()
        .expect("parts");
    assert_eq!(parts.len(), frames.grey.len() + 1);
    for (index, (part, grey)) in parts.iter().zip(&frames.grey).enumerate() {
        let (width, height, sent) = png_grey(part);
        assert_eq!(
            (width as usize, height as usize),
            (frames.columns, frames.rows)
        );
        assert!(&sent == grey, "frame {index} differs");
    }
    assert_eq!(
        parts.last().and_then(|p| p["text"].as_str()),
        Some(prompt.as_str())
    );

    // The verifier: the key slice with the same box drawn, the same prompt.
    let slice_box: keyslice::findings::SliceBox =
        serde_json::from_value(prediction["box"].clone()).expect("a box");
    let image = KeySliceImage::extract(&volume, 5, Some(slice_box)).expect("slice 5");
    let view = pipeline.verification_input(&image);
    let sent = &seen[1].body["messages"][0]["content"];
    let (_, _, grey) = png_grey(&sent[0]);
    assert!(grey == view.grey, "the verifier's slice differs");
    assert_eq!(sent[1]["text"].as_str(), Some(view.prompt.as_str()));
    // And the in-process verifier runs on that view.
    let _ = pipeline
        .verifier()
        .describe(&image)
        .expect("the tiny model answers");
}

/// A good model that answers after `delay` and counts the requests it holds at once.
fn counting_model(
    delay: std::time::Duration,
    now: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    most: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> Box<Script> {
    use std::sync::atomic::Ordering;
    Box::new(move |_, body| {
        let holding = now.fetch_add(1, Ordering::SeqCst) + 1;
        most.fetch_max(holding, Ordering::SeqCst);
        std::thread::sleep(delay);
        now.fetch_sub(1, Ordering::SeqCst);
        let text = if images(body) > 1 {
            REPORT
        } else {
            chat_server::LOCAL
        };
        (200, completion(text))
    })
}

#[test]
fn batch_spreads_cases_over_several_servers_each_at_its_own_concurrency() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let folder = tempfile::tempdir().expect("temp dir");
    let dataset = folder.path().join("dataset");
    phantoms(&dataset, 12);
    let counters = || (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (a_now, a_most) = counters();
    let (b_now, b_most) = counters();
    let delay = std::time::Duration::from_millis(60);
    let a = Server::start(counting_model(delay, a_now, Arc::clone(&a_most)));
    let b = Server::start(counting_model(delay, b_now, Arc::clone(&b_most)));
    // A third server that is gone: nothing listens on its port.
    let gone = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
        format!("http://{}/v1", listener.local_addr().expect("address"))
    };
    let out = folder.path().join("pred.jsonl");
    let urls = [
        format!("{}#jobs=2", a.url),
        format!("{}#jobs=3", b.url),
        format!("{gone}#jobs=2"),
    ];
    let run = || batch(&dataset, &out, &urls, &["--retries", "0"]);
    let output = run();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let summary: Value = serde_json::from_slice(&output.stdout).expect("summary");
    assert_eq!(
        (summary["done"].as_u64(), summary["failed"].as_u64()),
        (Some(12), Some(0))
    );
    let endpoints = summary["endpoints"].as_array().expect("per server");
    let done = |index: usize| endpoints[index]["done"].as_u64().unwrap_or(0);
    assert_eq!(done(0) + done(1), 12, "{summary}");
    assert!(done(0) > 0 && done(1) > 0, "both servers work: {summary}");
    assert_eq!(endpoints[2]["down"], true, "{summary}");
    assert!(endpoints[2]["handed_back"].as_u64() >= Some(1), "{summary}");
    assert_eq!(done(2), 0);
    // Each server held at most its own number of requests at once, and was kept busy.
    assert!(a_most.load(Ordering::SeqCst) <= 2 && b_most.load(Ordering::SeqCst) <= 3);
    assert_eq!(b_most.load(Ordering::SeqCst), 3, "B was given 3 at once");
    let stderr = text(&output.stderr);
    assert!(stderr.contains("stopped answering"), "{stderr}");
    let lines = std::fs::read_to_string(&out).expect("predictions");
    assert_eq!(lines.lines().count(), 12);
    // Resumable: a rerun sends nothing.
    let before = a.seen().len() + b.seen().len();
    let output = run();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let summary: Value = serde_json::from_slice(&output.stdout).expect("summary");
    assert_eq!(summary["skipped"], 12);
    assert_eq!(a.seen().len() + b.seen().len(), before);
}

#[test]
fn a_server_without_video_gets_images_and_the_choice_is_recorded() {
    let folder = tempfile::tempdir().expect("temp dir");
    let dataset = folder.path().join("dataset");
    let cts = phantoms(&dataset, 3);
    // vLLM's answer for a model served without video input.
    let no_video: Box<Script> = Box::new(|_, body| {
        let video = body["messages"][0]["content"]
            .as_array()
            .is_some_and(|parts| parts.iter().any(|p| p["type"] == "video_url"));
        if video {
            return (
                400,
                r#"{"object":"error","message":"At most 0 video(s) may be provided in one prompt.","type":"BadRequestError","code":400}"#
                    .to_string(),
            );
        }
        let text = if images(body) > 1 {
            REPORT
        } else {
            chat_server::LOCAL
        };
        (200, completion(text))
    });
    let server = Server::start(no_video);
    let out = folder.path().join("pred.jsonl");
    let output = batch(&dataset, &out, std::slice::from_ref(&server.url), &[]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let predictions: Vec<Value> = std::fs::read_to_string(&out)
        .expect("predictions")
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON"))
        .collect();
    assert_eq!(predictions.len(), 3);
    for prediction in &predictions {
        let input = prediction["input"].as_str().expect("recorded");
        assert!(
            input.starts_with("images (4 frames; the server refused video: HTTP 400")
                && input.contains("At most 0 video(s)"),
            "{input}"
        );
        assert_eq!(prediction["key_slice"]["index"], 5);
    }
    // Video is tried once; after the refusal every case goes as images at once.
    let videos = server
        .seen()
        .iter()
        .filter(|seen| seen.body.to_string().contains("video_url"))
        .count();
    assert_eq!(videos, 1, "one refused video request");
    assert_eq!(server.seen().len(), 1 + 3 * 2);
    // Said once on stderr, as JSON like every other line there, and in the worklist's terms.
    let warnings: Vec<Value> = text(&output.stderr)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("a JSON line"))
        .filter(|line| line.get("warning").is_some())
        .collect();
    assert_eq!(warnings.len(), 1, "{}", text(&output.stderr));
    assert!(
        warnings[0]["warning"]
            .as_str()
            .is_some_and(|w| w.contains("refused the CT as a video") && w.contains("--media video")),
        "{warnings:?}"
    );

    // Told to send video only, the refusal is an error that says what to do.
    let ct = &cts[0];
    let output = keyslice(
        &[
            "analyze",
            ct.to_str().expect("utf-8"),
            "--backend",
            "openai",
            "--url",
            &server.url,
            "--model",
            "m",
            "--media",
            "video",
        ],
        &[],
    );
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("At most 0 video(s)") && stderr.contains("--media images"),
        "{stderr}"
    );
}

/// The video a server receives is read by `OpenCV`'s stream reader, called as vLLM calls it
/// (the first stream-buffered backend, a `BytesIO`): every frame, at the frame rate the
/// exports train at, each within a few grey levels of the slice. Needs python3 with
/// `opencv-python-headless` (CI installs it); skipped without unless `KEYSLICE_REQUIRE_PYTHON`.
#[test]
fn the_video_sent_is_read_by_opencv_as_vllm_reads_it_at_the_training_frame_rate() {
    use keyslice::infer::openai::{DIAGNOSE_PROMPT, Media, OpenAiClient, OpenAiDiagnoser};
    let has_cv2 = Command::new("python3")
        .args(["-c", "import cv2, cv2.videoio_registry"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !has_cv2 {
        assert!(
            std::env::var_os("KEYSLICE_REQUIRE_PYTHON").is_none(),
            "python3 with opencv-python-headless is required (KEYSLICE_REQUIRE_PYTHON is set)"
        );
        return;
    }
    let volume =
        keyslice::phantom::generate(31, 0, keyslice::phantom::PhantomOptions::default()).volume;
    let client = OpenAiClient::new("http://127.0.0.1:9/v1", "m", None);
    let diagnoser = OpenAiDiagnoser::new(client, 12, DIAGNOSE_PROMPT.to_string(), Media::Video);
    let parts = diagnoser.request_parts(&volume, true).expect("parts");
    let (jpegs, fps) = chat_server::avi_video(&parts[0]);
    assert_eq!((jpegs.len(), fps), (12, 2.0));
    let url = parts[0]["video_url"]["url"].as_str().expect("url");
    let avi = base64::engine::general_purpose::STANDARD
        .decode(url.split_once(";base64,").expect("data URL").1)
        .expect("base64");
    let folder = tempfile::tempdir().expect("temp dir");
    let path = folder.path().join("ct.avi");
    std::fs::write(&path, &avi).expect("written");
    let script = r#"
import io, json, sys
import cv2, cv2.videoio_registry as vr
data = open(sys.argv[1], "rb").read()
api = next(b for b in vr.getStreamBufferedBackends() if vr.hasBackend(b))
cap = cv2.VideoCapture(io.BytesIO(data), api, [])
assert cap.isOpened(), "not opened"
count, fps = int(cap.get(cv2.CAP_PROP_FRAME_COUNT)), cap.get(cv2.CAP_PROP_FPS)
means = []
while True:
    ok, frame = cap.read()
    if not ok:
        break
    means.append(float(cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY).mean()))
print(json.dumps({"count": count, "fps": fps, "read": len(means), "means": means,
                  "size": [int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))]}))
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(&path)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        (read["count"].as_u64(), read["read"].as_u64()),
        (Some(12), Some(12))
    );
    assert_eq!(read["fps"].as_f64(), Some(2.0));
    // Each frame OpenCV decodes is the slice Keyslice encoded (mean grey within a level).
    let frames = keyslice::infer::views::ct_frames(&volume, 12).expect("frames");
    assert_eq!(
        read["size"],
        serde_json::json!([frames.columns, frames.rows])
    );
    for (index, (grey, mean)) in frames
        .grey
        .iter()
        .zip(read["means"].as_array().expect("means"))
        .enumerate()
    {
        let ours = grey.iter().map(|&g| f64::from(g)).sum::<f64>() / grey.len() as f64;
        let theirs = mean.as_f64().expect("a number");
        assert!(
            (ours - theirs).abs() < 1.0,
            "frame {index}: {ours:.2} against {theirs:.2}"
        );
    }
}
