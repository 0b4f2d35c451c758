//! The OpenAI-compatible backend and `keyslice batch` against a small HTTP/1.1 server started
//! by each test: it speaks the chat-completions protocol, records every request (so the test
//! checks what Keyslice sends: model, greedy settings, bearer key, one base64 PNG per frame
//! and the frame → slice table) and answers as scripted: a report, a local description, 429,
//! 401, a too-long-context 400, or text that is not JSON. No real model server can run here.

#[path = "common/chat_server.rs"]
mod chat_server;

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
    let parts = diagnosis.body["messages"][0]["content"]
        .as_array()
        .expect("parts");
    let prompt = parts.last().expect("text")["text"]
        .as_str()
        .expect("prompt");
    assert!(prompt.contains("[0, 4, 9, 13, 18, 22, 27, 31]"), "{prompt}");
    // Each image is a PNG of the slice.
    let url = parts[0]["image_url"]["url"].as_str().expect("data url");
    let png = base64::engine::general_purpose::STANDARD
        .decode(
            url.strip_prefix("data:image/png;base64,")
                .expect("PNG data URL"),
        )
        .expect("base64");
    let image = image::load_from_memory(&png).expect("a PNG");
    assert_eq!((image.width(), image.height()), (48, 48));
    // The verifier sees the key slice alone.
    assert_eq!(images(&seen[1].body), 1);
    let local_prompt = seen[1].body["messages"][0]["content"][1]["text"]
        .as_str()
        .expect("text");
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
fn batch_runs_in_parallel_resumes_and_records_a_failing_case() {
    let folder = tempfile::tempdir().expect("temp dir");
    let dataset = folder.path().join("dataset");
    let cts = phantoms(&dataset, 4);
    let server = Server::start(good_model());
    let out = folder.path().join("pred.jsonl");
    let args = |out: &Path| -> Vec<String> {
        [
            "batch",
            dataset.to_str().expect("utf-8"),
            "--out",
            out.to_str().expect("utf-8"),
            "--backend",
            "openai",
            "--url",
            &server.url,
            "--model",
            "m",
            "--frames",
            "4",
            "--jobs",
            "4",
            "--json",
        ]
        .iter()
        .map(ToString::to_string)
        .collect()
    };
    let run = |out: &Path| {
        let args = args(out);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        keyslice(&args, &[])
    };
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
