//! A small HTTP/1.1 chat-completions server for tests: it records every request and answers
//! as a script says. Used by `tests/openai_backend.rs` and the real-window test.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// One request the server received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub path: String,
    pub authorization: Option<String>,
    pub body: Value,
}

/// What the server answers to request number `n` (from 0) with `body`.
pub type Script = dyn Fn(usize, &Value) -> (u16, String) + Send + Sync;

/// What the server answers to request number `n` (from 0), seeing the whole request: the
/// status, extra headers and the body.
pub type FullScript = dyn Fn(usize, &Seen) -> (u16, Vec<(String, String)>, String) + Send + Sync;

pub struct Server {
    pub url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    pub fn start(script: Box<Script>) -> Self {
        Self::start_full(Box::new(move |n, seen| {
            let (status, body) = script(n, &seen.body);
            (status, Vec::new(), body)
        }))
    }

    pub fn start_full(script: Box<FullScript>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let url = format!("http://{}/v1", listener.local_addr().expect("address"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        let script: Arc<FullScript> = Arc::from(script);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let record = Arc::clone(&record);
                let script = Arc::clone(&script);
                std::thread::spawn(move || serve(stream, &record, &*script));
            }
        });
        Self { url, seen }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
}

/// Reads one request, records it, writes the scripted answer, closes.
fn serve(stream: TcpStream, record: &Mutex<Vec<Seen>>, script: &FullScript) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_string();
    let mut length = 0;
    let mut authorization = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        let (name, value) = line.split_once(':').unwrap_or((&line, ""));
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap_or(0),
            "authorization" => authorization = Some(value.trim().to_string()),
            _ => {}
        }
    }
    let mut body = vec![0u8; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let request = Seen {
        path,
        authorization,
        body,
    };
    let n = {
        let mut seen = record.lock().expect("lock");
        seen.push(request.clone());
        seen.len() - 1
    };
    let (status, headers, answer) = script(n, &request);
    let headers = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect::<Vec<_>>()
        .concat();
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{headers}Connection: close\r\n\r\n{answer}",
        answer.len()
    );
}

pub const REPORT: &str = "FINDINGS:\nLiver lesion 1:\nLocation: hepatic segment 7.\nSize: 3.0 x 2.5 cm.\nEnhancement relative to liver: Hypoattenuating.\nPancreas: no tumor.\nLeft kidney: no tumor.\nRight kidney: no tumor.\nKey slice: 5\n";
pub const LOCAL: &str = "Liver lesion 1: Location: hepatic segment 7. Size: 3.1 x 2.4 cm. Enhancement relative to liver: Hypoattenuating.";

pub fn completion(text: &str) -> String {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]
    })
    .to_string()
}

/// Frames in a request's user turn: image parts, and the frames of a video part (a
/// Motion-JPEG AVI).
pub fn images(body: &Value) -> usize {
    body["messages"][0]["content"]
        .as_array()
        .map_or(0, |parts| {
            parts
                .iter()
                .map(|p| match p["type"].as_str() {
                    Some("image_url") => 1,
                    Some("video_url") => avi_frames(p).len(),
                    _ => 0,
                })
                .sum()
        })
}

/// The JPEG frames of a `video_url` part holding a Motion-JPEG AVI data URL, read by walking
/// its RIFF chunks (the `00dc` chunks of its `movi` list); the frame rate its stream header
/// states.
pub fn avi_video(part: &Value) -> (Vec<Vec<u8>>, f64) {
    use base64::Engine as _;
    let url = part["video_url"]["url"].as_str().expect("a video URL");
    let data = url
        .strip_prefix("data:video/x-msvideo;base64,")
        .expect("a Motion-JPEG AVI data URL");
    let avi = base64::engine::general_purpose::STANDARD
        .decode(data)
        .expect("base64");
    assert_eq!((&avi[0..4], &avi[8..12]), (&b"RIFF"[..], &b"AVI "[..]));
    let word = |bytes: &[u8], at: usize| {
        u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes")) as usize
    };
    // (code, body) of each chunk of a list body.
    let chunks = |mut body: &[u8]| {
        let mut out = Vec::new();
        while body.len() >= 8 {
            let size = word(body, 4);
            out.push((body[0..4].to_vec(), body[8..8 + size].to_vec()));
            body = &body[(8 + size + size % 2).min(body.len())..];
        }
        out
    };
    let top = chunks(&avi[12..]);
    let list = |kind: &[u8]| {
        top.iter()
            .find(|(id, body)| id == b"LIST" && &body[0..4] == kind)
            .map(|(_, body)| body[4..].to_vec())
            .expect("the list")
    };
    let hdrl = chunks(&list(b"hdrl"));
    let strl = chunks(&hdrl.iter().find(|(id, _)| id == b"LIST").expect("strl").1[4..]);
    let strh = &strl[0].1;
    let fps = word(strh, 24) as f64 / word(strh, 20) as f64;
    let frames = chunks(&list(b"movi"))
        .into_iter()
        .filter(|(id, _)| id == b"00dc")
        .map(|(_, body)| body)
        .collect();
    (frames, fps)
}

fn avi_frames(part: &Value) -> Vec<Vec<u8>> {
    avi_video(part).0
}

/// The frames of the video part of a request, decoded to grey pixels.
pub fn video_frames(body: &Value) -> Vec<(u32, u32, Vec<u8>)> {
    let parts = body["messages"][0]["content"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let Some(part) = parts.iter().find(|p| p["type"] == "video_url") else {
        return Vec::new();
    };
    avi_frames(part)
        .iter()
        .map(|bytes| {
            let image = image::load_from_memory(bytes).expect("a JPEG").to_luma8();
            (image.width(), image.height(), image.into_raw())
        })
        .collect()
}

/// A model that reports a segment-7 liver lesion on slice 5 and, shown one slice, sees it.
pub fn good_model() -> Box<Script> {
    Box::new(|_, body| {
        let text = if images(body) > 1 { REPORT } else { LOCAL };
        (200, completion(text))
    })
}
