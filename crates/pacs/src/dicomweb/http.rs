//! The HTTP layer: one [`Server`] per DICOMweb root, requests with timeouts and retries, and
//! HTTP failures turned into [`PacsError`]s that name the server and what was asked.

use std::io::Read;
use std::time::Duration;

use super::{Auth, DicomWebUrl, PacsError};

/// A DICOMweb server: its root, credentials, timeouts and retry policy.
#[derive(Clone, Debug)]
pub struct Server {
    root: String,
    auth: Auth,
    agent: ureq::Agent,
    /// How long one request may wait for the server before it counts as failed.
    pub timeout: Duration,
    /// How many times a failed request is retried (dropped connection, 429, 5xx).
    pub retries: u32,
    /// The first wait before a retry; doubled each time.
    pub backoff: Duration,
}

/// A response whose status was 2xx.
pub struct Answer {
    /// The `Content-Type` header.
    pub content_type: String,
    /// The body, streamed.
    pub body: Box<dyn Read + Send>,
}

impl Server {
    /// The server of a parsed URL, with 60 s timeouts and 3 retries from 0.5 s.
    #[must_use]
    pub fn new(url: &DicomWebUrl) -> Self {
        Self::with_timeout(url, Duration::from_mins(1))
    }

    /// The server with another per-request timeout (connect, each read, the whole answer's
    /// start).
    #[must_use]
    pub fn with_timeout(url: &DicomWebUrl, timeout: Duration) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_connect(Some(timeout.min(Duration::from_secs(10))))
            .timeout_recv_response(Some(timeout))
            .timeout_per_read(Some(timeout))
            .http_status_as_error(false)
            .max_idle_connections_per_host(16)
            .user_agent(concat!("keyslice/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Self {
            root: url.root.clone(),
            auth: url.auth.clone(),
            agent,
            timeout,
            retries: 3,
            backoff: Duration::from_millis(500),
        }
    }

    /// The DICOMweb root as shown to people (never with credentials).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.root
    }

    /// `GET {root}/{path}` with `Accept: accept`; `what` names the request in errors.
    pub fn get(&self, path: &str, accept: &str, what: &str) -> Result<Answer, PacsError> {
        let url = format!("{}/{}", self.root, path.trim_start_matches('/'));
        self.send(what, || {
            let mut request = self.agent.get(&url).header("Accept", accept);
            if let Some(value) = self.auth.header() {
                request = request.header("Authorization", &value);
            }
            request.call()
        })
    }

    /// `POST {root}/{path}` with a body of `content_type`.
    pub fn post(
        &self,
        path: &str,
        content_type: &str,
        body: &[u8],
        what: &str,
    ) -> Result<Answer, PacsError> {
        let url = format!("{}/{}", self.root, path.trim_start_matches('/'));
        self.send(what, || {
            let mut request = self
                .agent
                .post(&url)
                .header("Content-Type", content_type)
                .header("Accept", "application/dicom+json");
            if let Some(value) = self.auth.header() {
                request = request.header("Authorization", &value);
            }
            request.send(body)
        })
    }

    /// Runs `call` with retries; a 2xx answer comes back, anything else as an error.
    fn send(
        &self,
        what: &str,
        call: impl Fn() -> Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<Answer, PacsError> {
        let mut wait = self.backoff;
        let mut attempt = 0;
        loop {
            let outcome = call();
            let retryable = match &outcome {
                Ok(response) => matches!(response.status().as_u16(), 429 | 500 | 502 | 503 | 504),
                Err(ureq::Error::Io(error)) => {
                    error.kind() != std::io::ErrorKind::ConnectionRefused
                }
                Err(ureq::Error::Timeout(_)) => true,
                Err(_) => false,
            };
            if retryable && attempt < self.retries {
                tracing::debug!(attempt, server = %self.root, what, "PACS request failed; retrying");
                std::thread::sleep(wait);
                wait *= 2;
                attempt += 1;
                continue;
            }
            return self.answer(outcome, what);
        }
    }

    fn answer(
        &self,
        outcome: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
        what: &str,
    ) -> Result<Answer, PacsError> {
        let response = outcome.map_err(|error| self.unreachable(&error))?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("Content-Type")
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
            .to_string();
        let mut body = response.into_body();
        if (200..300).contains(&status) {
            return Ok(Answer {
                content_type,
                body: Box::new(body.into_reader()),
            });
        }
        let detail = body
            .with_config()
            .limit(64 * 1024)
            .read_to_string()
            .map(|text| first_line(&text))
            .unwrap_or_default();
        let server = self.root.clone();
        let what = what.to_string();
        Err(match status {
            401 | 403 => PacsError::Refused {
                server,
                what,
                status,
                detail: if detail.is_empty() {
                    "no or wrong credentials".into()
                } else {
                    detail
                },
            },
            404 => PacsError::NotFound { server, what },
            _ => PacsError::Server {
                server,
                what,
                status,
                detail: if detail.is_empty() {
                    String::new()
                } else {
                    format!(": {detail}")
                },
            },
        })
    }

    fn unreachable(&self, error: &ureq::Error) -> PacsError {
        let detail = match error {
            ureq::Error::Timeout(_) => format!(
                "no answer within {} s (after {} retries)",
                self.timeout.as_secs_f64(),
                self.retries
            ),
            ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
                "connection refused: nothing is listening at this address and port".into()
            }
            ureq::Error::HostNotFound => "the host name is not known (DNS)".into(),
            other => format!("{other} (after {} retries)", self.retries),
        };
        PacsError::Unreachable {
            server: self.root.clone(),
            detail,
        }
    }

    /// Reads a JSON answer (QIDO-RS, STOW-RS) of at most 256 MiB.
    pub fn json(&self, answer: Answer, what: &str) -> Result<serde_json::Value, PacsError> {
        let mut text = String::new();
        answer
            .body
            .take(256 << 20)
            .read_to_string(&mut text)
            .map_err(|error| self.broken(what, format!("the answer could not be read: {error}")))?;
        if text.trim().is_empty() {
            // Orthanc answers an empty search with 200 and no body.
            return Ok(serde_json::Value::Array(Vec::new()));
        }
        serde_json::from_str(&text)
            .map_err(|error| self.broken(what, format!("not DICOM JSON ({error})")))
    }

    /// A broken-answer error.
    #[must_use]
    pub fn broken(&self, what: &str, detail: impl Into<String>) -> PacsError {
        PacsError::Answer {
            server: self.root.clone(),
            what: what.to_string(),
            detail: detail.into(),
        }
    }
}

/// The first line of a server's text, at most 200 characters, control characters removed.
fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("")
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect()
}
