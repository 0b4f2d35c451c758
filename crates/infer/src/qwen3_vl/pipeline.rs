//! A Qwen3-VL checkpoint as the E-MRL diagnoser and verifier.
//!
//! Diagnoser: the CT becomes a video. `frames` axial slices are sampled evenly from inferior
//! to superior (`io::frames::sample_slices`), windowed to soft tissue (400/40 HU) as 8-bit grey,
//! and given as a video at [`VIDEO_FPS`] frames per second (the rate the exports train at and
//! vLLM is asked to serve at), so temporal patch `p` (frames `2p`, `2p + 1`) is stamped
//! `<p + 0.25 seconds>` (shown with one decimal). The prompt (`prompts/diagnose.txt`, `{frames}` replaced
//! by the frame → slice table) asks for the report and `Key slice: K` with `K` a slice index;
//! the findings reader parses the answer. Verifier: the key slice alone as an image with
//! `prompts/verify.txt` (`{slice}`, `{box}` filled in) and the box drawn
//! ([`crate::views`]: the same frames and prompts as the server backend).

use std::sync::Mutex;

use super::preprocess::RgbFrame;
use super::{Qwen3Vl, VisualInput, VlmError};
use crate::views::{CtFrames, VerifierView, ct_frames, diagnose_prompt, verifier_view};
use crate::{Diagnoser, Diagnosis, InferError, KeySliceImage, ModelId, Verifier};
use keyslice_core::volume::Volume;
use keyslice_io::frames::VIDEO_FPS;

/// The model with the settings of both roles; shared by the diagnoser and the verifier.
pub struct Qwen3VlPipeline {
    model: Mutex<Qwen3Vl>,
    /// Slices sent as video frames per case.
    pub frames: usize,
    /// Most new tokens per answer.
    pub max_new_tokens: usize,
    /// Diagnoser prompt (`{frames}`).
    pub diagnose_prompt: String,
    /// Verifier prompt (`{slice}`, `{box}`).
    pub verify_prompt: String,
}

impl Qwen3VlPipeline {
    /// Wrap a loaded model.
    pub fn new(
        model: Qwen3Vl,
        frames: usize,
        max_new_tokens: usize,
        diagnose_prompt: String,
        verify_prompt: String,
    ) -> Self {
        Self {
            model: Mutex::new(model),
            frames,
            max_new_tokens,
            diagnose_prompt,
            verify_prompt,
        }
    }

    fn id(&self) -> ModelId {
        let model = self
            .model
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        ModelId {
            id: model.name(),
            version: format!(
                "qwen3-vl candle {:?} {:?}",
                model.device.location(),
                model.dtype
            ),
        }
    }

    fn ask(&self, visual: VisualInput, text: &str) -> Result<String, InferError> {
        let mut model = self
            .model
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let name = model.name();
        let run = |e: VlmError| InferError::Run {
            model: name.clone(),
            detail: e.to_string(),
        };
        let prompt = model.prompt(visual, text).map_err(run)?;
        let out = model
            .generate(&prompt, self.max_new_tokens, true, false)
            .map_err(run)?;
        Ok(out.text)
    }

    /// The diagnoser role.
    pub fn diagnoser(&self) -> impl Diagnoser + '_ {
        Role(self)
    }

    /// The verifier role.
    pub fn verifier(&self) -> impl Verifier + '_ {
        Role(self)
    }

    /// What the diagnoser is shown for `volume`: the frames and the prompt (the same as the
    /// server backend sends, from [`crate::views`]).
    pub fn diagnosis_input(&self, volume: &Volume) -> Result<(CtFrames, String), InferError> {
        let sent = ct_frames(volume, self.frames.max(2))?;
        if sent.slices.len() < 2 {
            return Err(InferError::Volume(
                "a CT video needs at least 2 slices".into(),
            ));
        }
        let prompt = diagnose_prompt(&self.diagnose_prompt, &sent);
        Ok((sent, prompt))
    }

    /// What the verifier is shown for `slice`: the slice with its box drawn, and the prompt.
    #[must_use]
    pub fn verification_input(&self, slice: &KeySliceImage) -> VerifierView {
        verifier_view(slice, &self.verify_prompt)
    }

    /// Name and device, for the window.
    pub fn describe(&self) -> String {
        let id = self.id();
        format!("{} ({})", id.id, id.version)
    }
}

struct Role<'a>(&'a Qwen3VlPipeline);

impl Diagnoser for Role<'_> {
    fn model_id(&self) -> ModelId {
        self.0.id()
    }

    fn diagnose(&self, volume: &Volume) -> Result<Diagnosis, InferError> {
        let (sent, prompt) = self.0.diagnosis_input(volume)?;
        let frames: Vec<RgbFrame> = sent
            .grey
            .iter()
            .map(|grey| RgbFrame::from_grey(sent.columns, sent.rows, grey))
            .collect();
        let indices = (0..frames.len()).collect();
        let report = self.0.ask(
            VisualInput::Video {
                frames,
                indices,
                fps: VIDEO_FPS,
            },
            &prompt,
        )?;
        Ok(Diagnosis {
            report,
            key_slice: None,
            slice_box: None,
            warnings: Vec::new(),
            out_of_domain: None,
            lesions: Vec::new(),
            video_refused: None,
            input: Some(format!(
                "video ({} frames, in this process)",
                sent.slices.len()
            )),
        })
    }
}

impl Verifier for Role<'_> {
    fn model_id(&self) -> ModelId {
        self.0.id()
    }

    fn describe(&self, slice: &KeySliceImage) -> Result<String, InferError> {
        let view = self.0.verification_input(slice);
        self.0.ask(
            VisualInput::Image(RgbFrame::from_grey(view.columns, view.rows, &view.grey)),
            &view.prompt,
        )
    }
}
