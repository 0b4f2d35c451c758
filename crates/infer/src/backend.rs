//! A ready backend: the embedded keyslice-tiny (or a checkpoint of it), a Qwen3-VL checkpoint
//! in-process, or an `OpenAI`-compatible server, behind one `run` that the CLI's
//! `analyze`/`batch`/`workspace analyze` and the window's live analysis all call. Shared
//! across threads (`Sync`).

use super::embedded::{TinyDiagnoser, TinyModel, TinyVerifier};
use super::hallucinate::{Hallucinate, Hallucinating};
use super::openai::{OpenAiDiagnoser, OpenAiVerifier};
use super::qwen3_vl::pipeline::Qwen3VlPipeline;
use super::{Diagnoser, Diagnosis, InferError, ModelId, Prediction, Verifier, run_pipeline};
use keyslice_core::volume::Volume;

/// A ready backend.
pub enum Backend {
    /// keyslice-tiny.
    Embedded(Box<TinyModel>),
    /// A server.
    Openai(Box<(OpenAiDiagnoser, OpenAiVerifier)>),
    /// A Qwen3-VL checkpoint in this process.
    Qwen3vl(Box<Qwen3VlPipeline>),
    /// Another backend that hallucinates on a known share of cases (demonstrations and
    /// reader studies).
    Hallucinating(Box<Backend>, Hallucinate),
}

impl Backend {
    /// The diagnoser's name and version, as recorded in predictions.
    #[must_use]
    pub fn model_id(&self) -> ModelId {
        match self {
            Self::Embedded(model) => TinyDiagnoser(model).model_id(),
            Self::Openai(pair) => pair.0.model_id(),
            Self::Qwen3vl(pipeline) => pipeline.diagnoser().model_id(),
            Self::Hallucinating(inner, plan) => plan.model_id(&inner.model_id()),
        }
    }

    /// Runs the pipeline on one volume (`verify`: with the verifier).
    pub fn run(
        &self,
        case_id: &str,
        volume: &Volume,
        verify: bool,
    ) -> Result<Prediction, InferError> {
        self.run_hallucinating(case_id, volume, verify, None)
    }

    fn run_hallucinating(
        &self,
        case_id: &str,
        volume: &Volume,
        verify: bool,
        plan: Option<Hallucinate>,
    ) -> Result<Prediction, InferError> {
        let pipeline = |diagnoser: &dyn Diagnoser, verifier: Option<&dyn Verifier>| match plan {
            Some(plan) => run_pipeline(
                case_id,
                volume,
                &Hallucinating {
                    inner: diagnoser,
                    plan,
                    case_id,
                },
                verifier,
            ),
            None => run_pipeline(case_id, volume, diagnoser, verifier),
        };
        match self {
            Self::Embedded(model) => {
                let verifier = TinyVerifier(model);
                pipeline(
                    &TinyDiagnoser(model),
                    verify.then_some(&verifier as &dyn Verifier),
                )
            }
            Self::Openai(pair) => pipeline(&pair.0, verify.then_some(&pair.1 as &dyn Verifier)),
            Self::Qwen3vl(qwen) => {
                let verifier = qwen.verifier();
                pipeline(
                    &qwen.diagnoser(),
                    verify.then_some(&verifier as &dyn Verifier),
                )
            }
            Self::Hallucinating(inner, plan) => {
                inner.run_hallucinating(case_id, volume, verify, Some(*plan))
            }
        }
    }

    /// The diagnoser's answer alone (the report and its evidence), before any verification:
    /// what [`Self::verify_diagnosis`] verifies, as it is or changed (an evaluation injecting
    /// made-up findings into real answers).
    pub fn diagnose(&self, volume: &Volume) -> Result<Diagnosis, InferError> {
        match self {
            Self::Embedded(model) => TinyDiagnoser(model).diagnose(volume),
            Self::Openai(pair) => pair.0.diagnose(volume),
            Self::Qwen3vl(qwen) => qwen.diagnoser().diagnose(volume),
            Self::Hallucinating(inner, _) => inner.diagnose(volume),
        }
    }

    /// The rest of the pipeline on `diagnosis` (read, evidence checked, verified on its key
    /// slice by this backend's verifier, consistency), as [`Self::run`] does after diagnosing.
    pub fn verify_diagnosis(
        &self,
        case_id: &str,
        volume: &Volume,
        diagnosis: Diagnosis,
    ) -> Result<Prediction, InferError> {
        let given = Given {
            diagnosis,
            id: self.model_id(),
        };
        match self {
            Self::Embedded(model) => {
                run_pipeline(case_id, volume, &given, Some(&TinyVerifier(model)))
            }
            Self::Openai(pair) => run_pipeline(case_id, volume, &given, Some(&pair.1)),
            Self::Qwen3vl(qwen) => run_pipeline(case_id, volume, &given, Some(&qwen.verifier())),
            Self::Hallucinating(inner, _) => {
                inner.verify_diagnosis(case_id, volume, given.diagnosis)
            }
        }
    }

    /// One line for the window: which model runs where.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            Self::Embedded(_) => "keyslice-tiny (synthetic-trained, not for clinical use)".into(),
            Self::Openai(pair) => {
                format!("{} on {} (server)", pair.0.client.model, pair.0.client.url)
            }
            Self::Qwen3vl(pipeline) => pipeline.describe(),
            Self::Hallucinating(inner, plan) => format!(
                "{}, with a tumor made up in {:.0} % of cases (demonstration)",
                inner.describe(),
                plan.share * 100.0
            ),
        }
    }

    /// The embedded keyslice-tiny.
    pub fn embedded() -> Result<Self, InferError> {
        TinyModel::embedded().map(|model| Self::Embedded(Box::new(model)))
    }
}

/// A diagnoser whose answer is already known.
struct Given {
    diagnosis: Diagnosis,
    id: ModelId,
}

impl Diagnoser for Given {
    fn model_id(&self) -> ModelId {
        self.id.clone()
    }

    fn diagnose(&self, _volume: &Volume) -> Result<Diagnosis, InferError> {
        Ok(self.diagnosis.clone())
    }
}
