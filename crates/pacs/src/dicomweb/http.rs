//! The HTTP layer: one [`Server`] per DICOMweb root, requests with timeouts and retries, and
//! HTTP failures turned into [`PacsError`]s that name the server and what was asked.

use std::io::Read;
use std::time::Duration;

use super::{Auth, DicomWebUrl, PacsError};
use keyslice_io::http::{MAX_RETRY_AFTER, NetFault, asked_wait, net_fault, next_wait, redirect_of};

/// A DICOMweb server: its root, credentials, timeouts and retry policy.
#[derive(Clone, Debug)]
pub struct Server {
    root: String,
    auth: Auth,
    agent: ureq::Agent,
    /// The longest one request may take, from connecting to the last byte of its answer
    /// (a server that drips its answer a byte at a time fails after this, not never).
    pub timeout: Duration,
    /// How many times a failed request is retried (dropped connection, 429, 5xx).
    pub retries: u32,
    /// The first wait before a retry; doubled each time.
    pub backoff: Duration,
}

/// The HTTP agent of a server: `timeout` per request, no redirect followed, `tls` trusting
/// the system's certificates when given (else the compiled-in roots).
fn agent(timeout: Duration, tls: Option<ureq::tls::TlsConfig>) -> ureq::Agent {
    let mut config = ureq::Agent::config_builder()
        .timeout_connect(Some(timeout.min(Duration::from_secs(10))))
        .timeout_per_call(Some(timeout))
        .http_status_as_error(false)
        // A redirect is refused, never followed (see `answer`).
        .max_redirects(0)
        .max_idle_connections_per_host(16)
        .user_agent(concat!("keyslice/", env!("CARGO_PKG_VERSION")));
    if let Some(tls) = tls {
        config = config.tls_config(tls);
    }
    config.build().into()
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

    /// The server with another timeout: each request, answer included, must be over within
    /// `timeout`.
    #[must_use]
    pub fn with_timeout(url: &DicomWebUrl, timeout: Duration) -> Self {
        // The system's certificate store (and SSL_CERT_FILE / SSL_CERT_DIR): a PACS behind a
        // hospital's CA that the machine trusts is trusted here too.
        let tls = keyslice_io::http::tls_config(&[]).ok().flatten();
        let agent = agent(timeout, tls);
        Self {
            root: url.root.clone(),
            auth: url.auth.clone(),
            agent,
            timeout,
            retries: 3,
            backoff: Duration::from_millis(500),
        }
    }

    /// Trusts the CA certificates in `files` (PEM) beside the system's store (`--ca-cert`);
    /// a file that cannot be read or holds no certificate is an error naming it.
    pub fn trust(
        &mut self,
        files: &[std::path::PathBuf],
    ) -> Result<(), keyslice_io::http::CaCertError> {
        if !files.is_empty() {
            self.agent = agent(self.timeout, keyslice_io::http::tls_config(files)?);
        }
        Ok(())
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

    /// [`Server::get`] whose answer may take up to `timeout` in all (a whole series in one
    /// answer takes longer than one instance).
    pub fn get_within(
        &self,
        path: &str,
        accept: &str,
        what: &str,
        timeout: Duration,
    ) -> Result<Answer, PacsError> {
        let url = format!("{}/{}", self.root, path.trim_start_matches('/'));
        self.send(what, || {
            let mut request = self
                .agent
                .get(&url)
                .config()
                .timeout_per_call(Some(timeout))
                .build()
                .header("Accept", accept);
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
            } && !outcome.as_ref().is_err_and(|error| {
                // An untrusted certificate stays untrusted: never retried.
                net_fault(error) == NetFault::Certificate
            });
            if retryable && attempt < self.retries {
                let asked = asked_wait(&outcome);
                match next_wait(wait, asked) {
                    Ok(pause) => {
                        tracing::debug!(attempt, server = %self.root, what, ?pause, "PACS request failed; retrying");
                        std::thread::sleep(pause);
                        wait *= 2;
                        attempt += 1;
                        continue;
                    }
                    Err(asked) => {
                        return Err(PacsError::Server {
                            server: self.root.clone(),
                            what: what.to_string(),
                            status: outcome.as_ref().map_or(503, |r| r.status().as_u16()),
                            detail: Some(format!(
                                "busy; it asks to be asked again in {} s (Retry-After), longer than Keyslice waits ({} s): try again later",
                                asked.as_secs(),
                                MAX_RETRY_AFTER.as_secs()
                            )),
                        });
                    }
                }
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
        if let Some(refused) = redirect_of(&response) {
            return Err(PacsError::Server {
                server: self.root.clone(),
                what: what.to_string(),
                status,
                detail: Some(refused),
            });
        }
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
            .map(|text| self.auth.redacted(&first_line(&text)))
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
                detail: (!detail.is_empty()).then_some(detail),
            },
        })
    }

    fn unreachable(&self, error: &ureq::Error) -> PacsError {
        let detail = match net_fault(error) {
            NetFault::Timeout => format!(
                "no answer within {} s (after {} retries)",
                self.timeout.as_secs_f64(),
                self.retries
            ),
            NetFault::Refused => {
                "connection refused: nothing is listening at this address and port".into()
            }
            NetFault::Dns => "the host name is not known (DNS)".into(),
            NetFault::Certificate => format!(
                "its TLS certificate is not trusted ({error}): {}",
                keyslice_io::http::CERTIFICATE_HINT
            ),
            NetFault::Other => format!("{error} (after {} retries)", self.retries),
        };
        PacsError::Unreachable {
            server: self.root.clone(),
            detail,
        }
    }

    /// Reads a JSON object answer (STOW-RS) of at most [`MAX_JSON_BYTES`].
    pub fn json(&self, answer: Answer, what: &str) -> Result<serde_json::Value, PacsError> {
        let text = self.json_text(answer, what)?;
        if text.trim().is_empty() {
            return Ok(serde_json::Value::Object(serde_json::Map::new()));
        }
        serde_json::from_str(&text)
            .map_err(|error| self.broken(what, format!("not DICOM JSON ({error})")))
    }

    /// Reads a JSON array answer (QIDO-RS) of at most [`MAX_JSON_BYTES`] and
    /// [`MAX_JSON_ITEMS`] items; an empty body is an empty search.
    pub fn json_items(
        &self,
        answer: Answer,
        what: &str,
    ) -> Result<Vec<serde_json::Value>, PacsError> {
        use serde::Deserializer as _;
        let text = self.json_text(answer, what)?;
        if text.trim().is_empty() {
            // Orthanc answers an empty search with 200 and no body.
            return Ok(Vec::new());
        }
        let mut parser = serde_json::Deserializer::from_str(&text);
        let items = parser
            .deserialize_seq(BoundedItems)
            .and_then(|items| parser.end().map(|()| items))
            .map_err(|error| self.broken(what, format!("not a DICOM JSON array ({error})")))?;
        Ok(items)
    }

    /// The body of a JSON answer as text, refused past [`MAX_JSON_BYTES`] without reading
    /// further.
    fn json_text(&self, answer: Answer, what: &str) -> Result<String, PacsError> {
        let mut bytes = Vec::new();
        answer
            .body
            .take(MAX_JSON_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|error| self.broken(what, read_failure(&error, self.timeout)))?;
        if bytes.len() as u64 > MAX_JSON_BYTES {
            return Err(self.broken(
                what,
                format!(
                    "the answer is larger than {} MiB, more than any search Keyslice makes needs; narrow the query (limit=, StudyDate=, PatientID=)",
                    MAX_JSON_BYTES >> 20
                ),
            ));
        }
        String::from_utf8(bytes).map_err(|_| self.broken(what, "the answer is not UTF-8 text"))
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

/// The largest JSON answer read (QIDO-RS searches, STOW-RS replies).
pub const MAX_JSON_BYTES: u64 = 16 << 20;

/// The most items one QIDO-RS answer may hold (studies of a search, instances of a series).
pub const MAX_JSON_ITEMS: usize = 50_000;

/// What a failed read of an answer's body says: a deadline passed, or how it broke.
pub(crate) fn read_failure(error: &std::io::Error, timeout: Duration) -> String {
    if error.kind() == std::io::ErrorKind::TimedOut {
        format!(
            "the answer did not arrive within {} s",
            timeout.as_secs_f64()
        )
    } else {
        format!("the answer could not be read: {error}")
    }
}

/// A JSON array read item by item and refused at [`MAX_JSON_ITEMS`], so an answer of many
/// small items never grows past that many values.
struct BoundedItems;

impl<'de> serde::de::Visitor<'de> for BoundedItems {
    type Value = Vec<serde_json::Value>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a JSON array")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error as _;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<serde_json::Value>()? {
            if items.len() == MAX_JSON_ITEMS {
                return Err(A::Error::custom(format!(
                    "more than {MAX_JSON_ITEMS} items; narrow the query"
                )));
            }
            items.push(item);
        }
        Ok(items)
    }
}

/// The first line of a server's text, at most 200 characters, control characters removed.
fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("")
        .chars()
        .filter(|&c| !keyslice_core::text::is_control(c))
        .take(200)
        .collect()
}
