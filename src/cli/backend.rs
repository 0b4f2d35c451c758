//! The backend options shared by `analyze` and `batch`: the embedded keyslice-tiny (or a
//! checkpoint folder of it), or an `OpenAI`-compatible server.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::CliError;
use crate::infer::backend::Backend;
use crate::infer::embedded::TinyModel;
use crate::infer::openai::{
    DIAGNOSE_PROMPT, OpenAiClient, OpenAiDiagnoser, OpenAiVerifier, VERIFY_PROMPT,
};

/// Which backend runs the model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum BackendKind {
    /// keyslice-tiny on candle, in this process (CPU).
    #[default]
    Embedded,
    /// An `OpenAI`-compatible chat-completions server (vLLM, `SGLang`, llama.cpp, Ollama).
    Openai,
}

/// Backend options.
#[derive(Debug, Default, Args)]
pub struct BackendArgs {
    /// The backend.
    #[arg(long, value_enum, default_value_t = BackendKind::Embedded)]
    pub backend: BackendKind,
    /// Embedded: a keyslice-tiny checkpoint folder (default: the model compiled in).
    /// With `openai`: the served model name.
    #[arg(long)]
    pub model: Option<String>,
    /// With `openai`: the server's base URL, up to `/v1` (`http://gpu-01:8000/v1`).
    #[arg(long)]
    pub url: Option<String>,
    /// With `openai`: the environment variable holding the API key (sent as a bearer token).
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// With `openai`: axial slices sent per case (evenly spread).
    #[arg(long, default_value_t = 32)]
    pub frames: usize,
    /// With `openai`: seconds to wait for one answer.
    #[arg(long, default_value_t = 120)]
    pub timeout_secs: u64,
    /// With `openai`: retries after HTTP 429/5xx or a dropped connection (backoff from 0.5 s, doubling).
    #[arg(long, default_value_t = 4)]
    pub retries: u32,
    /// With `openai`: the diagnosis prompt file (default: `prompts/diagnose.txt`, compiled in).
    #[arg(long)]
    pub diagnose_prompt: Option<PathBuf>,
    /// With `openai`: the verification prompt file (default: `prompts/verify.txt`, compiled in).
    #[arg(long)]
    pub verify_prompt: Option<PathBuf>,
}

impl BackendArgs {
    /// Loads the model or sets up the server client.
    pub fn backend(&self) -> Result<Backend, CliError> {
        match self.backend {
            BackendKind::Embedded => {
                let model = match &self.model {
                    Some(folder) => TinyModel::load(&PathBuf::from(folder))?,
                    None => TinyModel::embedded()?,
                };
                Ok(Backend::Embedded(Box::new(model)))
            }
            BackendKind::Openai => {
                let url = self.url.as_deref().ok_or_else(|| {
                    CliError::Argument(
                        "--backend openai needs --url (e.g. http://host:8000/v1)".into(),
                    )
                })?;
                let model = self.model.as_deref().ok_or_else(|| {
                    CliError::Argument(
                        "--backend openai needs --model (the served model name)".into(),
                    )
                })?;
                let api_key = match &self.api_key_env {
                    Some(name) => Some(std::env::var(name).map_err(|_| {
                        CliError::Argument(format!("--api-key-env {name}: the variable is not set"))
                    })?),
                    None => None,
                };
                let mut client = OpenAiClient::new(url, model, api_key);
                client.timeout = Duration::from_secs(self.timeout_secs.max(1));
                client.retries = self.retries;
                let read = |file: &Option<PathBuf>, default: &str| -> Result<String, CliError> {
                    file.as_ref().map_or_else(
                        || Ok(default.to_string()),
                        |path| {
                            std::fs::read_to_string(path).map_err(|source| CliError::Input {
                                path: path.clone(),
                                source,
                            })
                        },
                    )
                };
                let diagnoser = OpenAiDiagnoser {
                    client: client.clone(),
                    frames: self.frames.clamp(1, 512),
                    prompt: read(&self.diagnose_prompt, DIAGNOSE_PROMPT)?,
                };
                let verifier = OpenAiVerifier {
                    client,
                    prompt: read(&self.verify_prompt, VERIFY_PROMPT)?,
                };
                Ok(Backend::Openai(Box::new((diagnoser, verifier))))
            }
        }
    }
}
