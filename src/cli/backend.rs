//! The backend options shared by `analyze`, `batch`, `workspace analyze` and `view`: the
//! embedded keyslice-tiny (or a checkpoint folder of it), a Qwen3-VL checkpoint in-process,
//! or an `OpenAI`-compatible server.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use keyslice_workflow::backend::{self, BackendSpec};

use super::CliError;
use crate::infer::backend::Backend;
use crate::infer::openai::Media;

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

/// Backend options.
#[derive(Debug, Default, Args)]
pub struct BackendArgs {
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
    pub hallucinate_kind: Option<crate::infer::hallucinate::Kind>,
}

fn hallucination_kind(text: &str) -> Result<crate::infer::hallucinate::Kind, String> {
    crate::infer::hallucinate::Kind::named(text).ok_or_else(|| {
        let names: Vec<&str> = crate::infer::hallucinate::Kind::ALL
            .iter()
            .map(|kind| kind.name())
            .collect();
        format!(
            "`{text}` is not a kind of made-up finding: {}",
            names.join(", ")
        )
    })
}

fn share(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if (0.0..=1.0).contains(&value) => Ok(value),
        _ => Err(format!("`{text}` is not a share between 0 and 1")),
    }
}

impl BackendArgs {
    /// The settings the use cases take.
    #[must_use]
    pub fn spec(&self) -> BackendSpec {
        BackendSpec {
            backend: match self.backend {
                BackendKind::Embedded => backend::BackendKind::Embedded,
                BackendKind::Openai => backend::BackendKind::Openai,
                BackendKind::Qwen3vl => backend::BackendKind::Qwen3vl,
            },
            model: self.model.clone(),
            url: self.url.clone(),
            api_key_env: self.api_key_env.clone(),
            device: self.device.clone(),
            max_new_tokens: self.max_new_tokens,
            frames: self.frames,
            media: match self.media {
                MediaArg::Auto => Media::Auto,
                MediaArg::Video => Media::Video,
                MediaArg::Images => Media::Images,
            },
            timeout_secs: self.timeout_secs,
            retries: self.retries,
            verifier_url: self.verifier_url.clone(),
            verifier_model: self.verifier_model.clone(),
            verifier_api_key_env: self.verifier_api_key_env.clone(),
            ca_cert: self.ca_cert.clone(),
            allow_burned_in: self.allow_burned_in,
            diagnose_prompt: self.diagnose_prompt.clone(),
            verify_prompt: self.verify_prompt.clone(),
            hallucinate: self.hallucinate,
            hallucinate_seed: self.hallucinate_seed,
            hallucinate_kind: self.hallucinate_kind,
        }
    }

    /// Loads the model or sets up the server client.
    pub fn backend(&self) -> Result<Backend, CliError> {
        self.spec().backend()
    }
}
