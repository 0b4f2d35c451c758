//! A model backend from its settings: the embedded keyslice-tiny (or a checkpoint folder of
//! it), a Qwen3-VL checkpoint in-process, or an `OpenAI`-compatible server (one, or several
//! for a batch), hallucinating on purpose when a demonstration asks.

use std::path::PathBuf;
use std::time::Duration;

use keyslice_infer::backend::Backend;
use keyslice_infer::embedded::TinyModel;
use keyslice_infer::hallucinate::Hallucinate;
use keyslice_infer::openai::{
    DIAGNOSE_PROMPT, Media, OpenAiClient, OpenAiDiagnoser, OpenAiVerifier, VERIFY_PROMPT,
};
use keyslice_infer::qwen3_vl::pipeline::Qwen3VlPipeline;
use keyslice_infer::qwen3_vl::{Qwen3Vl, pick_device};

use clap::{Args, ValueEnum};

use crate::Error;

/// Which backend runs the model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum BackendKind {
    /// keyslice-tiny on candle, in this process (CPU).
    #[default]
    Embedded,
    /// An `OpenAI`-compatible chat-completions server (vLLM, `SGLang`, llama.cpp, Ollama).
    Openai,
    /// A Qwen3-VL checkpoint folder (`--model DIR`) on candle, in this process.
    Qwen3vl,
}

/// How the CT goes to a server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum MediaArg {
    /// A video content part; images when the server refuses video.
    #[default]
    Auto,
    /// A video content part only.
    Video,
    /// One image content part per frame.
    Images,
}

/// A backend's settings: the `--backend` options of the commands that run a model, and what
/// the window's live analysis runs.
#[derive(Clone, Debug, Args)]
pub struct BackendSpec {
    /// The backend.
    #[arg(long, value_enum, default_value_t = BackendKind::Embedded)]
    pub backend: BackendKind,
    /// Embedded: a keyslice-tiny checkpoint folder (default: the model compiled in).
    /// With `openai`: the served model name. With `qwen3vl`: the checkpoint folder.
    #[arg(long)]
    pub model: Option<String>,
    /// With `openai`: the server's base URL, up to `/v1` (`http://gpu-01:8000/v1`). `batch`
    /// takes several, each with its own requests in flight as `URL#jobs=N` (default: --jobs).
    #[arg(long)]
    pub url: Vec<String>,
    /// With `openai`: the environment variable holding the API key (sent as a bearer token).
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// With `qwen3vl`: auto, cpu, cuda or metal.
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// With `qwen3vl`: most new tokens per answer.
    #[arg(long, default_value_t = 512)]
    pub max_new_tokens: usize,
    /// With `openai` and `qwen3vl`: axial slices sent per case (evenly spread).
    #[arg(long, default_value_t = 32)]
    pub frames: usize,
    /// With `openai`: how the CT goes to the server: `video` (one video content part),
    /// `images` (one image part per frame) or `auto` (video, images when the server refuses
    /// video). What was sent is recorded with each prediction (`input`).
    #[arg(long, value_enum, default_value_t = MediaArg::Auto)]
    pub media: MediaArg,
    /// With `openai`: seconds to wait for one answer (1–3600).
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout_secs: u64,
    /// With `openai`: retries after HTTP 429/5xx or a dropped connection (backoff from 0.5 s,
    /// doubling; 0–20).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(0..=20))]
    pub retries: u32,
    /// With `openai`: another server for the verifier (base URL up to `/v1`), so the claim is
    /// read back by another model than the one that made it; without it, the diagnosis
    /// server verifies. Each prediction names its verifier.
    #[arg(long, requires = "verifier_model")]
    pub verifier_url: Option<String>,
    /// With `--verifier-url`: the model that server serves.
    #[arg(long, requires = "verifier_url")]
    pub verifier_model: Option<String>,
    /// With `--verifier-url`: the environment variable holding that server's API key.
    #[arg(long, requires = "verifier_url")]
    pub verifier_api_key_env: Option<String>,
    /// With `openai`: a CA certificate (PEM) to trust beside the system's store, for a
    /// server behind a hospital's own CA (repeat for several). `SSL_CERT_FILE` and
    /// `SSL_CERT_DIR` are read too.
    #[arg(long, value_name = "FILE")]
    pub ca_cert: Vec<PathBuf>,
    /// With `openai`: send a series whose header says Burned In Annotation YES (text drawn
    /// into its pixels: a name, a date, an instruction) all the same; without it such a
    /// series is refused before anything is sent.
    #[arg(long)]
    pub allow_burned_in: bool,
    /// With `openai`/`qwen3vl`: the diagnosis prompt file (default: `prompts/diagnose.txt`, compiled in).
    #[arg(long)]
    pub diagnose_prompt: Option<PathBuf>,
    /// With `openai`/`qwen3vl`: the verification prompt file (default: `prompts/verify.txt`, compiled in).
    #[arg(long)]
    pub verify_prompt: Option<PathBuf>,
    /// For demonstrations and reader studies: make up a tumor in this share of cases (0–1),
    /// in an organ the model called clean, keeping the model's key slice. The cases are drawn
    /// by --hallucinate-seed and the case id; the model's name says so in every prediction.
    #[arg(long, value_parser = share)]
    pub hallucinate: Option<f64>,
    /// The seed of the cases --hallucinate draws.
    #[arg(long, default_value_t = 1, requires = "hallucinate")]
    pub hallucinate_seed: u64,
    /// The kind of made-up finding --hallucinate puts in: alone (a tumor where the model
    /// found none), beside-real, second-lesion, side-swap, wrong-attributes or
    /// made-up-evidence (as `eval evidence` injects them); without it, a tumor in an organ the
    /// model called clean.
    #[arg(long, value_parser = hallucination_kind, requires = "hallucinate")]
    pub hallucinate_kind: Option<keyslice_infer::hallucinate::Kind>,
}

/// `--hallucinate-kind`: a kind named.
fn hallucination_kind(text: &str) -> Result<keyslice_infer::hallucinate::Kind, String> {
    keyslice_infer::hallucinate::Kind::named(text).ok_or_else(|| {
        let names: Vec<&str> = keyslice_infer::hallucinate::Kind::ALL
            .iter()
            .map(|kind| kind.name())
            .collect();
        format!(
            "`{text}` is not a kind of made-up finding: {}",
            names.join(", ")
        )
    })
}

/// A share between 0 and 1.
fn share(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if (0.0..=1.0).contains(&value) => Ok(value),
        _ => Err(format!("`{text}` is not a share between 0 and 1")),
    }
}

impl Default for BackendSpec {
    /// The command line's defaults: the options' own, said in one place.
    fn default() -> Self {
        #[derive(clap::Parser)]
        struct Defaults {
            #[command(flatten)]
            backend: BackendSpec,
        }
        <Defaults as clap::Parser>::try_parse_from(["keyslice"]).map_or_else(
            |error| unreachable!("every backend option has a default: {error}"),
            |defaults| defaults.backend,
        )
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
        client.trust(&self.ca_cert)?;
        let media = match self.media {
            MediaArg::Auto => Media::Auto,
            MediaArg::Video => Media::Video,
            MediaArg::Images => Media::Images,
        };
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
                verifier.trust(&self.ca_cert)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_the_command_lines() {
        let backend = BackendSpec::default();
        assert_eq!(backend.backend, BackendKind::Embedded);
        assert_eq!(
            (
                backend.device.as_str(),
                backend.max_new_tokens,
                backend.frames
            ),
            ("auto", 512, 32)
        );
        assert_eq!((backend.timeout_secs, backend.retries), (120, 4));
        assert_eq!(backend.hallucinate, None);
        let connection = crate::pacs::Connection::default();
        assert_eq!(
            (
                connection.timeout_secs,
                connection.retries,
                connection.parallel
            ),
            (60, 3, 6)
        );
        assert!(connection.cache.is_none() && connection.ca_cert.is_empty());
    }
}
