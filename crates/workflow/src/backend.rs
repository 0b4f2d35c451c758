//! A model backend from its settings: the embedded keyslice-tiny (or a checkpoint folder of
//! it), a Qwen3-VL checkpoint in-process, or an `OpenAI`-compatible server (one, or several
//! for a batch), hallucinating on purpose when a demonstration asks.

use std::path::PathBuf;
use std::time::Duration;

use keyslice_infer::backend::Backend;
use keyslice_infer::embedded::TinyModel;
use keyslice_infer::hallucinate::{Hallucinate, Kind};
use keyslice_infer::openai::{
    DIAGNOSE_PROMPT, Media, OpenAiClient, OpenAiDiagnoser, OpenAiVerifier, VERIFY_PROMPT,
};
use keyslice_infer::qwen3_vl::pipeline::Qwen3VlPipeline;
use keyslice_infer::qwen3_vl::{Qwen3Vl, pick_device};

use crate::Error;

/// Which backend runs the model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BackendKind {
    /// keyslice-tiny on candle, in this process (CPU).
    #[default]
    Embedded,
    /// An `OpenAI`-compatible chat-completions server.
    Openai,
    /// A Qwen3-VL checkpoint folder on candle, in this process.
    Qwen3vl,
}

/// A backend's settings (the command line's `--backend` options; each field's meaning is
/// that flag's).
#[derive(Clone, Debug)]
pub struct BackendSpec {
    /// The backend.
    pub backend: BackendKind,
    /// A checkpoint folder (embedded, qwen3vl) or the served model name (openai).
    pub model: Option<String>,
    /// The servers' base URLs, each `URL#jobs=N` optionally.
    pub url: Vec<String>,
    /// The environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// Qwen3-VL's device: auto, cpu, cuda or metal.
    pub device: String,
    /// Qwen3-VL: most new tokens per answer.
    pub max_new_tokens: usize,
    /// Axial slices sent per case.
    pub frames: usize,
    /// How the CT goes to a server.
    pub media: Media,
    /// Seconds to wait for one answer.
    pub timeout_secs: u64,
    /// Retries after HTTP 429/5xx or a dropped connection.
    pub retries: u32,
    /// Another server for the verifier.
    pub verifier_url: Option<String>,
    /// The model that server serves.
    pub verifier_model: Option<String>,
    /// The environment variable holding that server's API key.
    pub verifier_api_key_env: Option<String>,
    /// CA certificates to trust beside the system's store.
    pub ca_cert: Vec<PathBuf>,
    /// Send a series with burned-in annotation all the same.
    pub allow_burned_in: bool,
    /// The diagnosis prompt file (default: compiled in).
    pub diagnose_prompt: Option<PathBuf>,
    /// The verification prompt file (default: compiled in).
    pub verify_prompt: Option<PathBuf>,
    /// Make up a tumor in this share of cases.
    pub hallucinate: Option<f64>,
    /// The seed of the cases made up.
    pub hallucinate_seed: u64,
    /// The kind of made-up finding.
    pub hallucinate_kind: Option<Kind>,
}

impl Default for BackendSpec {
    fn default() -> Self {
        Self {
            backend: BackendKind::Embedded,
            model: None,
            url: Vec::new(),
            api_key_env: None,
            device: "auto".into(),
            max_new_tokens: 512,
            frames: 32,
            media: Media::Auto,
            timeout_secs: 120,
            retries: 4,
            verifier_url: None,
            verifier_model: None,
            verifier_api_key_env: None,
            ca_cert: Vec::new(),
            allow_burned_in: false,
            diagnose_prompt: None,
            verify_prompt: None,
            hallucinate: None,
            hallucinate_seed: 1,
            hallucinate_kind: None,
        }
    }
}

fn read_prompt(file: Option<&PathBuf>, default: &str) -> Result<String, Error> {
    file.map_or_else(
        || Ok(default.to_string()),
        |path| {
            // A prompt is a page of text: 1 MiB is far more than any needs.
            keyslice_io::limits::read_text_bounded(path, 1 << 20).map_err(|source| Error::Input {
                path: path.clone(),
                source,
            })
        },
    )
}

/// One server of a batch: its base URL and how many requests it takes at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Base URL up to `/v1`.
    pub url: String,
    /// Requests in flight (`#jobs=N`), when given.
    pub jobs: Option<usize>,
}

impl Endpoint {
    /// The server as shown: no user-info, secret query values as `***`.
    #[must_use]
    pub fn shown(&self) -> String {
        keyslice_io::secrets::ServerUrl::parse(&self.url).shown()
    }
}

/// `http://gpu-01:8000/v1#jobs=8` → the URL and 8; `flag` names the setting in errors.
fn endpoint(text: &str, flag: &str) -> Result<Endpoint, Error> {
    let (url, fragment) = text.split_once('#').unwrap_or((text, ""));
    // Every message below shows the URL without its secrets.
    let text = &keyslice_io::secrets::redact_url(text);
    let jobs = if fragment.is_empty() {
        None
    } else {
        let value = fragment.strip_prefix("jobs=").ok_or_else(|| {
            Error::Argument(format!(
                "{flag} {text}: after # only jobs=N is understood (requests in flight)"
            ))
        })?;
        match value.parse::<usize>() {
            Ok(jobs) if (1..=256).contains(&jobs) => Some(jobs),
            _ => {
                return Err(Error::Argument(format!(
                    "{flag} {text}: jobs={value} is not a number between 1 and 256"
                )));
            }
        }
    };
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(Error::Argument(format!(
            "{flag} {}: not an http:// or https:// URL (e.g. http://host:8000/v1)",
            keyslice_io::secrets::redact_url(url)
        )));
    }
    Ok(Endpoint {
        url: url.to_string(),
        jobs,
    })
}

impl BackendSpec {
    /// The servers given with `--url` (at least one with `--backend openai`).
    pub fn endpoints(&self) -> Result<Vec<Endpoint>, Error> {
        if self.url.is_empty() {
            return Err(Error::Argument(
                "--backend openai needs --url (e.g. http://host:8000/v1)".into(),
            ));
        }
        let endpoints = self
            .url
            .iter()
            .map(|text| endpoint(text, "--url"))
            .collect::<Result<Vec<_>, _>>()?;
        for (index, endpoint) in endpoints.iter().enumerate() {
            if endpoints[..index].iter().any(|e| e.url == endpoint.url) {
                return Err(Error::Argument(format!(
                    "--url {} is given twice; give it once with #jobs=N for more requests in flight",
                    endpoint.shown()
                )));
            }
        }
        Ok(endpoints)
    }

    /// The server backend on `url`.
    pub fn server(&self, url: &str) -> Result<Backend, Error> {
        let model = self.model.as_deref().ok_or_else(|| {
            Error::Argument("--backend openai needs --model (the served model name)".into())
        })?;
        let api_key = match &self.api_key_env {
            Some(name) => Some(std::env::var(name).map_err(|_| {
                Error::Argument(format!("--api-key-env {name}: the variable is not set"))
            })?),
            None => None,
        };
        let mut client = OpenAiClient::new(url, model, api_key);
        client.timeout = Duration::from_secs(self.timeout_secs.max(1));
        client.retries = self.retries;
        client.allow_burned_in = self.allow_burned_in;
        client.trust(&self.ca_cert).map_err(Error::Argument)?;
        let media = self.media;
        let diagnoser = OpenAiDiagnoser::new(
            client.clone(),
            self.frames.clamp(1, 512),
            read_prompt(self.diagnose_prompt.as_ref(), DIAGNOSE_PROMPT)?,
            media,
        );
        let verifier_client = match (&self.verifier_url, &self.verifier_model) {
            (Some(url), Some(model)) => {
                // Checked as --url is, and named as the flag it came from.
                let url = endpoint(url, "--verifier-url")?.url;
                let api_key = match &self.verifier_api_key_env {
                    Some(name) => Some(std::env::var(name).map_err(|_| {
                        Error::Argument(format!(
                            "--verifier-api-key-env {name}: the variable is not set"
                        ))
                    })?),
                    None => None,
                };
                let mut verifier = OpenAiClient::new(&url, model, api_key);
                verifier.timeout = client.timeout;
                verifier.retries = client.retries;
                verifier.allow_burned_in = client.allow_burned_in;
                verifier.trust(&self.ca_cert).map_err(Error::Argument)?;
                verifier
            }
            _ => client,
        };
        let verifier = OpenAiVerifier {
            client: verifier_client,
            prompt: read_prompt(self.verify_prompt.as_ref(), VERIFY_PROMPT)?,
        };
        Ok(self.hallucinating(Backend::Openai(Box::new((diagnoser, verifier)))))
    }

    /// `backend`, hallucinating as --hallucinate asks.
    fn hallucinating(&self, backend: Backend) -> Backend {
        match self.hallucinate {
            Some(share) => Backend::Hallucinating(
                Box::new(backend),
                Hallucinate {
                    share,
                    seed: self.hallucinate_seed,
                    kind: self.hallucinate_kind,
                },
            ),
            None => backend,
        }
    }

    /// Loads the model or sets up the server client.
    pub fn backend(&self) -> Result<Backend, Error> {
        let backend = match self.backend {
            BackendKind::Embedded => {
                let model = match &self.model {
                    Some(folder) => TinyModel::load(&PathBuf::from(folder))?,
                    None => TinyModel::embedded()?,
                };
                Backend::Embedded(Box::new(model))
            }
            BackendKind::Openai => {
                let endpoints = self.endpoints()?;
                let [endpoint] = &endpoints[..] else {
                    return Err(Error::Argument(format!(
                        "{} --url given: only `keyslice batch` spreads cases over several servers",
                        endpoints.len()
                    )));
                };
                // Already hallucinating when asked.
                return self.server(&endpoint.url);
            }
            BackendKind::Qwen3vl => {
                let folder = self.model.as_deref().ok_or_else(|| {
                    Error::Argument(
                        "--backend qwen3vl needs --model (the checkpoint folder)".into(),
                    )
                })?;
                let device = pick_device(&self.device)?;
                let model = Qwen3Vl::load(&PathBuf::from(folder), &device, None)?;
                Backend::Qwen3vl(Box::new(Qwen3VlPipeline::new(
                    model,
                    self.frames.clamp(2, 768),
                    self.max_new_tokens.max(1),
                    read_prompt(self.diagnose_prompt.as_ref(), DIAGNOSE_PROMPT)?,
                    read_prompt(self.verify_prompt.as_ref(), VERIFY_PROMPT)?,
                )))
            }
        };
        Ok(self.hallucinating(backend))
    }
}
