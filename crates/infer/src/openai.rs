//! `OpenAI`-compatible chat-completions servers (vLLM, `SGLang`, llama.cpp server, Ollama) as
//! diagnoser and verifier: how a team runs a fine-tuned checkpoint on a GPU fleet and points
//! Keyslice at one URL.
//!
//! The diagnoser sends the CT as `frames` axial slices ([`crate::views::ct_frames`]: evenly
//! sampled, soft-tissue window) as one video content part (`video_url` with a Motion-JPEG AVI
//! at [`VIDEO_FPS`] as `data:video/x-msvideo;base64,…`: the server's own video reader takes
//! the frame rate from the file), or as base64 PNG `image_url` parts ([`Media`]: by default
//! video, falling back to images when the server refuses video; what was sent is recorded; a
//! video of more than [`VLLM_DEFAULT_FRAMES`] frames asks for all of them through
//! `media_io_kwargs`), then the prompt
//! (`prompts/diagnose.txt`, with the frame → slice table and the frame size filled in); the
//! verifier sends the key slice alone with its box drawn ([`crate::views::verifier_view`]) and
//! `prompts/verify.txt`. Both prompts can be replaced by files. Requests are greedy
//! (`temperature: 0`), time out, and are retried with exponential backoff on 429 and 5xx;
//! every failure names the server and says what to do (unreachable, refused key, context too
//! long, an answer that is not a chat completion).

use std::sync::OnceLock;
use std::time::Duration;

use base64::Engine as _;
use rayon::prelude::*;
use serde_json::{Value, json};

use super::{Diagnoser, Diagnosis, InferError, KeySliceImage, ModelId, ServerFault, Verifier};
use crate::views::{ct_frames, diagnose_prompt, verifier_view};
use keyslice_core::volume::Volume;
use keyslice_io::frames::{VIDEO_FPS, grey_png};
use keyslice_io::http::{MAX_RETRY_AFTER, NetFault, asked_wait, net_fault, next_wait, redirect_of};
use keyslice_io::secrets::{ServerUrl, redact_known};

/// The diagnosis prompt shipped with Keyslice (`{frames}`: the frame → slice table).
pub const DIAGNOSE_PROMPT: &str = include_str!("../../../prompts/diagnose.txt");
/// The verification prompt shipped with Keyslice (`{slice}`, `{box}`).
pub const VERIFY_PROMPT: &str = include_str!("../../../prompts/verify.txt");

/// A chat-completions endpoint.
#[derive(Clone)]
pub struct OpenAiClient {
    /// The server as shown and recorded: the base URL up to `/v1` (`http://gpu-01:8000/v1`)
    /// without user-info, secret query values as `***`.
    pub url: String,
    /// The URL as given, split into what is shown and what is only sent.
    server: ServerUrl,
    /// The HTTP agent, made at the first request (after the timeout is set) and shared by
    /// the client's clones.
    agent: std::sync::Arc<OnceLock<ureq::Agent>>,
    /// The certificates trusted: the system's store and any `--ca-cert`; `None`: the
    /// compiled-in roots.
    tls: Option<ureq::tls::TlsConfig>,
    /// The served model name.
    pub model: String,
    /// Bearer token, if the server wants one.
    pub api_key: Option<String>,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Retries after a 429 or 5xx (or a dropped connection).
    pub retries: u32,
    /// First backoff; doubled each retry.
    pub backoff: Duration,
    /// `max_tokens` of each answer.
    pub max_tokens: u32,
    /// Send images of a series marked Burned In Annotation `YES` (text drawn into its
    /// pixels) all the same: by default such a series is refused before anything is sent.
    pub allow_burned_in: bool,
}

impl std::fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key never reaches a log line, even a debug one.
        f.debug_struct("OpenAiClient")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .finish_non_exhaustive()
    }
}

impl OpenAiClient {
    /// A client with the defaults: 120 s timeout, 4 retries from 0.5 s, 1024 tokens.
    #[must_use]
    pub fn new(url: &str, model: &str, api_key: Option<String>) -> Self {
        let server = ServerUrl::parse(url);
        Self {
            url: server.shown(),
            server,
            agent: std::sync::Arc::default(),
            tls: keyslice_io::http::tls_config(&[]).ok().flatten(),
            model: model.to_string(),
            api_key,
            timeout: Duration::from_mins(2),
            retries: 4,
            backoff: Duration::from_millis(500),
            max_tokens: 1024,
            allow_burned_in: false,
        }
    }

    /// A failure of this server, its text with every secret hidden: the key and password in
    /// use, and any credential a server echoes.
    /// Trusts the CA certificates in `files` (PEM) beside the system's store: a server whose
    /// certificate a hospital's own CA signed. A file that cannot be read or holds no
    /// certificate is an error naming it.
    pub fn trust(
        &mut self,
        files: &[std::path::PathBuf],
    ) -> Result<(), keyslice_io::http::CaCertError> {
        if files.is_empty() {
            return Ok(());
        }
        self.tls = keyslice_io::http::tls_config(files)?;
        self.agent = std::sync::Arc::default();
        Ok(())
    }

    /// Refuses `volume` when its pixels carry burned-in text and that was not allowed: what
    /// is drawn into them (a name, a date, an instruction to the model) would leave the
    /// machine. Checked before a request is made.
    pub fn check_burned_in(&self, volume: &Volume) -> Result<(), InferError> {
        if volume.info().burned_in_annotation && !self.allow_burned_in {
            return Err(InferError::BurnedIn(format!(
                "the series says Burned In Annotation (0028,0301) YES: text is drawn into its pixels, and nothing of it is sent to the model server at {} without --allow-burned-in",
                self.url
            )));
        }
        Ok(())
    }

    /// An error of this server whose answer was not what was asked.
    pub(crate) fn error(&self, detail: impl Into<String>) -> InferError {
        self.error_of(ServerFault::Answer, detail)
    }

    /// An error of this server of the kind `fault`.
    pub(crate) fn error_of(&self, fault: ServerFault, detail: impl Into<String>) -> InferError {
        let mut secrets = self.server.secrets();
        secrets.extend(self.api_key.iter().cloned());
        InferError::Server {
            url: self.url.clone(),
            detail: redact_known(&detail.into(), &secrets),
            fault,
        }
    }

    /// The `Authorization` header: the API key as a bearer token, else the URL's user-info.
    fn authorization(&self) -> Option<String> {
        if let Some(key) = &self.api_key {
            return Some(format!("Bearer {key}"));
        }
        self.server.user().map(|(user, password)| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            )
        })
    }

    /// The request body of one user turn of `parts`: greedy, at most `max_tokens`. The video
    /// carries its frame rate itself, so a stock vLLM reads it at [`VIDEO_FPS`] without any
    /// request setting. Only a video of more frames than vLLM keeps by default
    /// ([`VLLM_DEFAULT_FRAMES`]) asks for every frame through `media_io_kwargs`, which a
    /// vLLM server accepts when started with `--trust-request-mm-kwargs` (else it answers
    /// HTTP 400, and the CT goes as images or the case fails, as `--media` says).
    #[must_use]
    pub fn body(&self, parts: &[Value]) -> Value {
        let mut body = json!({
            "model": self.model,
            "messages": [{"role": "user", "content": parts}],
            "temperature": 0,
            "max_tokens": self.max_tokens,
        });
        if let Some(frames) = parts
            .iter()
            .find_map(video_frames)
            .filter(|&frames| frames > VLLM_DEFAULT_FRAMES)
        {
            body["media_io_kwargs"] = json!({"video": {"num_frames": frames}});
        }
        body
    }

    /// Sends one user turn of `parts` and returns the answer's text.
    pub fn complete(&self, parts: &[Value]) -> Result<String, InferError> {
        let body = self.body(parts);
        let endpoint = self.server.request_url("/chat/completions");
        // One agent per client (and its clones): its TLS setup and connection pool are made
        // once, not per request.
        let agent = self.agent.get_or_init(|| {
            let mut config = ureq::Agent::config_builder()
                .timeout_global(Some(self.timeout))
                .http_status_as_error(false)
                // A redirect is refused, never followed (see `answer`).
                .max_redirects(0);
            if let Some(tls) = &self.tls {
                config = config.tls_config(tls.clone());
            }
            config.build().into()
        });
        let mut wait = self.backoff;
        let mut attempt = 0;
        loop {
            let mut request = agent.post(&endpoint);
            if let Some(authorization) = self.authorization() {
                request = request.header("Authorization", &authorization);
            }
            let outcome = request
                .header("Content-Type", "application/json")
                .send(body.to_string().as_bytes());
            let retryable = match &outcome {
                Ok(response) => {
                    let status = response.status().as_u16();
                    status == 429 || status >= 500
                }
                // A dropped connection (a server restarting) is worth a retry; a refused one
                // means nothing listens there, and is reported at once.
                // An untrusted certificate stays untrusted: never retried.
                Err(error) if net_fault(error) == NetFault::Certificate => false,
                Err(ureq::Error::Io(error)) => {
                    error.kind() != std::io::ErrorKind::ConnectionRefused
                }
                Err(_) => false,
            };
            if retryable && attempt < self.retries {
                let asked = asked_wait(&outcome);
                match next_wait(wait, asked) {
                    Ok(pause) => {
                        // Retries are routine; only the final outcome is reported to the user.
                        tracing::debug!(attempt, url = %self.url, ?pause, "server busy or failing; retrying");
                        std::thread::sleep(pause);
                        wait *= 2;
                        attempt += 1;
                        continue;
                    }
                    Err(asked) => {
                        return Err(self.error(format!(
                            "the server is busy and asks to be asked again in {} s (Retry-After), longer than Keyslice waits ({} s); try again later",
                            asked.as_secs(),
                            MAX_RETRY_AFTER.as_secs()
                        )));
                    }
                }
            }
            return self.answer(outcome);
        }
    }

    fn answer(
        &self,
        outcome: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<String, InferError> {
        let mut response = match outcome {
            Ok(response) => response,
            Err(error) => {
                let fault = net_fault(&error);
                let detail = match fault {
                    NetFault::Timeout => format!("no answer within {} s", self.timeout.as_secs()),
                    NetFault::Refused => {
                        "connection refused: no server is listening at this address and port".into()
                    }
                    NetFault::Certificate => {
                        format!("its TLS certificate is not trusted: {error}")
                    }
                    NetFault::Dns | NetFault::Other => format!("unreachable: {error}"),
                };
                return Err(self.error_of(ServerFault::Net(fault), detail));
            }
        };
        let status = response.status().as_u16();
        if let Some(refused) = redirect_of(&response) {
            return Err(self.error(refused));
        }
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| self.error(format!("the answer could not be read: {e}")))?;
        match status {
            200..=299 => {}
            401 | 403 => {
                return Err(self.error_of(
                    ServerFault::Status(status),
                    format!("the server refused the API key (HTTP {status})"),
                ));
            }
            // The server's own words are all there is to tell a context overflow by.
            400 | 413 if is_context_error(&text) => {
                return Err(self.error_of(
                    ServerFault::ContextTooLong(status),
                    format!(
                        "the request is longer than the model's context: {}",
                        first_line(&text)
                    ),
                ));
            }
            404 if !self.server.base().ends_with("/v1") => {
                return Err(self.error_of(ServerFault::Status(status), format!(
                    "HTTP 404 Not Found for {}/chat/completions{}: the URL should be the API base, which ends in /v1 (e.g. http://localhost:8000/v1)",
                    self.server.base(),
                    detail_suffix(&text)
                )));
            }
            _ => {
                return Err(self.error_of(
                    ServerFault::Status(status),
                    format!("HTTP {status}{}", detail_suffix(&text)),
                ));
            }
        }
        let value: Value = serde_json::from_str(&text).map_err(|e| {
            self.error(format!(
                "the answer is not a chat completion ({e}): {}",
                first_line(&text)
            ))
        })?;
        value["choices"][0]["message"]["content"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| {
                self.error(format!(
                    "the answer has no choices[0].message.content: {}",
                    first_line(&text)
                ))
            })
    }
}

fn is_context_error(text: &str) -> bool {
    let lower = text.to_lowercase();
    [
        "context length",
        "maximum context",
        "too long",
        "max_model_len",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

/// The first line of a server's text, at most 200 characters, control characters removed
/// (an answer is shown in a terminal).
fn first_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or("")
        .chars()
        .filter(|&c| !keyslice_core::text::is_control(c))
        .take(200)
        .collect()
}

/// `": <first line>"`, or `" (empty body)"`.
fn detail_suffix(text: &str) -> String {
    let line = first_line(text);
    if line.trim().is_empty() {
        " (empty body)".into()
    } else {
        format!(": {line}")
    }
}

fn image_part(png: &[u8]) -> Value {
    png_part(&base64::engine::general_purpose::STANDARD.encode(png))
}

/// The frames vLLM keeps of a video when nothing asks for more (its `num_frames` default):
/// evenly sampled, each stamped at its own time, so the prompt's frame table would name frames
/// the model never saw.
pub const VLLM_DEFAULT_FRAMES: usize = 32;

/// The media type of the video Keyslice sends: Motion-JPEG in AVI ([`keyslice_io::avi`]).
pub const VIDEO_MEDIA_TYPE: &str = "video/x-msvideo";

/// The number of frames of a `video_url` part, read from the AVI's main header (the first
/// bytes of its base64).
fn video_frames(part: &Value) -> Option<usize> {
    let url = part.get("video_url")?.get("url")?.as_str()?;
    let (_, data) = url.split_once(";base64,")?;
    // 96 base64 characters are the first 72 bytes: the RIFF and main headers.
    let head = base64::engine::general_purpose::STANDARD
        .decode(data.get(..96)?)
        .ok()?;
    let (frames, _) = keyslice_io::avi::avi_header(&head)?;
    usize::try_from(frames).ok()
}

/// An `image_url` part of base64 PNG data.
fn png_part(data: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{data}")}})
}

/// How the diagnoser sends the CT to a server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Media {
    /// As one video content part; as images when the server refuses video (and from then
    /// on for this run).
    #[default]
    Auto,
    /// As one video content part only; a server that refuses it is an error.
    Video,
    /// As one image content part per frame.
    Images,
}

/// The diagnoser: the CT as sampled frames, the report back.
pub struct OpenAiDiagnoser {
    /// The endpoint.
    pub client: OpenAiClient,
    /// Frames sent per case.
    pub frames: usize,
    /// The prompt (`{frames}` is replaced by the frame → slice table).
    pub prompt: String,
    /// Video or images.
    pub media: Media,
    /// Why the server refused video, once it has: later cases go as images at once.
    video_refused: OnceLock<String>,
}

/// JPEG quality of video frames: grey CT frames come back within a few grey levels.
const VIDEO_JPEG_QUALITY: u8 = 95;

impl OpenAiDiagnoser {
    /// A diagnoser on `client` sending `frames` frames as `media`, with `prompt`.
    #[must_use]
    pub fn new(client: OpenAiClient, frames: usize, prompt: String, media: Media) -> Self {
        Self {
            client,
            frames,
            prompt,
            media,
            video_refused: OnceLock::new(),
        }
    }

    /// The content parts of the diagnosis request for `volume`: the frames (encoded in
    /// parallel) as one `video_url` part (a Motion-JPEG AVI at [`VIDEO_FPS`] as a base64 data
    /// URL, which vLLM decodes with its own video reader and stamps at the rate the file
    /// states) or as one PNG `image_url` part each, then the prompt. All of Keyslice's own work
    /// per request.
    pub fn request_parts(&self, volume: &Volume, video: bool) -> Result<Vec<Value>, InferError> {
        let frames = ct_frames(volume, self.frames)?;
        let encode = |(grey, slice): (&Vec<u8>, &usize)| {
            if video {
                jpeg(grey, frames.columns, frames.rows)
            } else {
                grey_png(grey, frames.columns, frames.rows)
            }
            .map_err(|e| InferError::Volume(format!("slice {slice}: {e}")))
        };
        let encoded = frames
            .grey
            .par_iter()
            .zip(&frames.slices)
            .map(encode)
            .collect::<Result<Vec<Vec<u8>>, InferError>>()?;
        let base64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        let mut parts = if video {
            let size = |n: usize| u32::try_from(n).map_err(|e| InferError::Volume(e.to_string()));
            let avi = keyslice_io::avi::mjpeg_avi(
                &encoded,
                size(frames.columns)?,
                size(frames.rows)?,
                VIDEO_FPS,
            )
            .map_err(|e| InferError::Volume(e.to_string()))?;
            vec![json!({
                "type": "video_url",
                "video_url": {"url": format!("data:{VIDEO_MEDIA_TYPE};base64,{}", base64(&avi))}
            })]
        } else {
            encoded.iter().map(|png| png_part(&base64(png))).collect()
        };
        let prompt = diagnose_prompt(&self.prompt, &frames);
        parts.push(json!({"type": "text", "text": prompt}));
        Ok(parts)
    }
}

/// 8-bit grey pixels as JPEG bytes.
fn jpeg(pixels: &[u8], columns: usize, rows: usize) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let width = u16::try_from(columns).map_err(std::io::Error::other)?;
    let height = u16::try_from(rows).map_err(std::io::Error::other)?;
    jpeg_encoder::Encoder::new(&mut bytes, VIDEO_JPEG_QUALITY)
        .encode(pixels, width, height, jpeg_encoder::ColorType::Luma)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(bytes)
}

/// Whether a server's failure `detail` is a refusal of the request's content (a 4xx that no
/// retry or credential fixes, and not a context-length error), as from a server without
/// video input.
fn refused_content(fault: ServerFault) -> bool {
    matches!(fault, ServerFault::Status(400 | 415 | 422 | 501))
}

impl Diagnoser for OpenAiDiagnoser {
    fn model_id(&self) -> ModelId {
        ModelId {
            id: self.client.model.clone(),
            version: format!("openai {}", self.client.url),
        }
    }

    fn diagnose(&self, volume: &Volume) -> Result<Diagnosis, InferError> {
        self.client.check_burned_in(volume)?;
        let diagnosis = |report, input| Diagnosis {
            report,
            key_slice: None,
            slice_box: None,
            warnings: Vec::new(),
            input: Some(input),
            video_refused: None,
            out_of_domain: None,
            lesions: Vec::new(),
        };
        let video = match self.media {
            Media::Images => false,
            Media::Video => true,
            Media::Auto => self.video_refused.get().is_none(),
        };
        if video {
            match self.client.complete(&self.request_parts(volume, true)?) {
                Ok(report) => {
                    return Ok(diagnosis(report, format!("video ({} frames)", self.frames)));
                }
                Err(InferError::Server { detail, fault, .. })
                    if self.media == Media::Auto && refused_content(fault) =>
                {
                    // The prediction's `input` says so; the command that runs it warns.
                    tracing::info!(url = %self.client.url, reason = %detail, "video refused; sending images");
                    self.video_refused.get_or_init(|| detail);
                }
                Err(InferError::Server { detail, fault, .. }) if refused_content(fault) => {
                    return Err(self.client.error_of(fault, format!(
                        "{detail}; the server does not take this video input (--media images sends the frames as images)"
                    )));
                }
                Err(error) => return Err(error),
            }
        }
        let refused = match (self.media, self.video_refused.get()) {
            (Media::Auto, Some(reason)) => format!("; the server refused video: {reason}"),
            _ => String::new(),
        };
        let report = self.client.complete(&self.request_parts(volume, false)?)?;
        Ok(Diagnosis {
            video_refused: match self.media {
                Media::Auto => self.video_refused.get().cloned(),
                _ => None,
            },
            ..diagnosis(report, format!("images ({} frames{refused})", self.frames))
        })
    }
}

/// The verifier: the key slice alone, its local description back.
pub struct OpenAiVerifier {
    /// The endpoint.
    pub client: OpenAiClient,
    /// The prompt (`{slice}` and `{box}` are filled in).
    pub prompt: String,
}

impl Verifier for OpenAiVerifier {
    fn model_id(&self) -> ModelId {
        ModelId {
            id: self.client.model.clone(),
            version: format!("openai {}", self.client.url),
        }
    }

    fn describe_claim(
        &self,
        volume: &Volume,
        index: u32,
        slice_box: Option<&keyslice_core::findings::SliceBox>,
    ) -> Result<String, InferError> {
        self.client.check_burned_in(volume)?;
        crate::describe_key_slice(self, volume, index, slice_box)
    }

    fn describe(&self, slice: &KeySliceImage) -> Result<String, InferError> {
        let view = verifier_view(slice, &self.prompt);
        let png = grey_png(&view.grey, view.columns, view.rows)
            .map_err(|e| InferError::Volume(format!("slice {}: {e}", slice.index)))?;
        self.client.complete(&[
            image_part(&png),
            json!({"type": "text", "text": view.prompt}),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `video_url` part of `frames` one-pixel JPEGs in an AVI, as `request_parts` makes it.
    fn video_part(frames: usize) -> Value {
        let pixel = jpeg(&[128], 1, 1).expect("a JPEG");
        let avi =
            keyslice_io::avi::mjpeg_avi(&vec![pixel; frames], 1, 1, VIDEO_FPS).expect("an AVI");
        let data = base64::engine::general_purpose::STANDARD.encode(avi);
        json!({"type": "video_url", "video_url": {"url": format!("data:{VIDEO_MEDIA_TYPE};base64,{data}")}})
    }

    #[test]
    fn only_a_video_longer_than_vllm_keeps_asks_for_more_frames() {
        let client = OpenAiClient::new("http://127.0.0.1:9/v1", "m", None);
        for frames in [1, 8, VLLM_DEFAULT_FRAMES] {
            let body = client.body(&[video_part(frames)]);
            assert!(body.get("media_io_kwargs").is_none(), "{frames} frames");
        }
        for frames in [VLLM_DEFAULT_FRAMES + 1, 48, 200] {
            assert_eq!(video_frames(&video_part(frames)), Some(frames));
            let body = client.body(&[video_part(frames)]);
            assert_eq!(
                body["media_io_kwargs"],
                json!({"video": {"num_frames": frames}})
            );
        }
        // Images never ask for media settings.
        let body = client.body(&[png_part("AAAA")]);
        assert!(body.get("media_io_kwargs").is_none());
    }
}
