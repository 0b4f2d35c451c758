//! Reading a reader study in the window: the study gives the reader's next item, the window
//! opens its case showing only what the item's arm allows (no AI report, box, key slice,
//! masks or worklist in an arm of the images alone; the report without its evidence in a
//! report arm), the reader records a call and a confidence per organ, a key slice and, in
//! arms that show the AI, what became of each AI finding; the time on the case counts only
//! while the reader is at the window. A submitted read is synced to the study's reads before
//! the next item opens; the reader can never go back.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use keyslice_core::findings::Organ;
use keyslice_core::prediction::Prediction;
use keyslice_review::study::{Arm, Call, Decision, Item, Next, Read, Shows, Study};

use super::loaded::{LoadedStudy, load_workspace_case};

/// Input older than this does not keep the case's clock running: the reader has left.
const IDLE_AFTER: Duration = Duration::from_mins(1);

/// The item a study gives a reader next, as the loader found it.
pub struct StudyItem {
    /// The study folder.
    pub dir: PathBuf,
    /// Who reads.
    pub reader: String,
    /// The item.
    pub item: Item,
    /// Its arm.
    pub arm: Arm,
    /// Items read before it, and in all.
    pub done: usize,
    /// See above.
    pub total: usize,
    /// The organs the AI gives a tumor, in arms that show the AI.
    pub ai_claims: Vec<Organ>,
}

/// The reader's next item and its case, with the case's AI result cut to what the arm shows;
/// a study that has nothing to read now says why.
pub fn next_item(dir: &Path, reader: &str) -> Result<(StudyItem, LoadedStudy), (String, String)> {
    let failed =
        |error: keyslice_review::study::StudyError| (error.to_string(), error.hint().to_string());
    let study = Study::open(dir).map_err(failed)?;
    if !study.definition.readers.iter().any(|name| name == reader) {
        return Err((
            format!(
                "{} is not a reader of the study {}",
                keyslice_core::text::shown(reader),
                keyslice_core::text::shown(&study.definition.name)
            ),
            format!("the readers are: {}", study.definition.readers.join(", ")),
        ));
    }
    let now = keyslice_core::date::now_seconds();
    let (item, done, total) = match study.next(reader, now).map_err(failed)? {
        Next::Item { item, done, total } => (item, done, total),
        Next::Washout { opens_at } => {
            return Err((
                format!(
                    "{reader}'s next session of the study {} opens in {:.1} days (washout)",
                    study.definition.name,
                    opens_at.saturating_sub(now) as f64 / 86_400.0
                ),
                "come back when the washout is over".into(),
            ));
        }
        Next::Done => {
            return Err((
                format!(
                    "{reader} has read every case of the study {}",
                    study.definition.name
                ),
                "thank you; the study's coordinator runs `keyslice study report`".into(),
            ));
        }
    };
    let arm = study.definition.arms[item.arm].clone();
    let (mut loaded, _masks) = load_workspace_case(&study.definition.workspace, &item.case)?;
    loaded.prediction = loaded
        .prediction
        .and_then(|prediction| shown_in(*prediction, arm.shows))
        .map(Box::new);
    let ai_claims = loaded
        .prediction
        .as_ref()
        .map_or_else(Vec::new, |prediction| prediction.findings.tumor_organs());
    loaded.title = format!(
        "study {} · {reader} · read {} of {total} · arm {}",
        study.definition.name,
        done + 1,
        arm.name
    );
    // Nothing identifies the case's place in another arm or another reader's work.
    loaded.warnings.clear();
    Ok((
        StudyItem {
            dir: dir.to_path_buf(),
            reader: reader.to_string(),
            item,
            arm,
            done,
            total,
            ai_claims,
        },
        loaded,
    ))
}

/// What a reader is told of the models in a study: nothing that names them, their seeds or
/// what was done to them (a model made to hallucinate says so in its name).
pub const BLIND_MODEL: &str = "AI model";
/// See [`BLIND_MODEL`].
pub const BLIND_VERIFIER: &str = "AI verifier";

/// The AI result as an arm shows it: none with the images alone; the report without its
/// evidence (key slice, box, lesion range, verifier, consistency) in a report arm; all of it
/// with the evidence. In every arm the models are unnamed ([`BLIND_MODEL`]) and the
/// backend's warnings, which may name them, are left out.
#[must_use]
pub fn shown_in(mut prediction: Prediction, shows: Shows) -> Option<Prediction> {
    prediction.diagnoser = keyslice_core::prediction::ModelId {
        id: BLIND_MODEL.into(),
        version: String::new(),
    };
    prediction.verifier = prediction
        .verifier
        .map(|_| keyslice_core::prediction::ModelId {
            id: BLIND_VERIFIER.into(),
            version: String::new(),
        });
    prediction.warnings.clear();
    prediction.input = None;
    if let Some(unfamiliar) = &mut prediction.out_of_domain {
        unfamiliar.model = BLIND_MODEL.into();
    }
    match shows {
        Shows::Images => None,
        Shows::Report => {
            prediction.key_slice = None;
            prediction.slice_box = None;
            prediction.local_description = None;
            prediction.local_findings = None;
            prediction.consistency = None;
            prediction.findings.key_slice = None;
            prediction.findings.slice_box = None;
            prediction.findings.lesion_slices = None;
            prediction.findings.inside_box = None;
            Some(prediction)
        }
        Shows::Evidence => Some(prediction),
    }
}

/// A read in progress.
pub(super) struct Reading {
    pub item: StudyItem,
    calls: BTreeMap<Organ, Call>,
    decisions: BTreeMap<Organ, Decision>,
    key_slice: Option<u32>,
    active: Duration,
    /// egui's clock (seconds) at the last frame and at the reader's last input.
    last_frame: Option<f64>,
    last_input: Option<f64>,
}

/// What the reading panel asks for.
#[derive(Clone, Copy, Debug)]
pub(super) enum ReadingCommand {
    /// Take the axial slice on screen as the key slice.
    KeySliceHere,
    /// Record the read and go on.
    Submit,
}

impl Reading {
    pub fn new(item: StudyItem) -> Self {
        let calls = Organ::ALL
            .into_iter()
            .map(|organ| {
                (
                    organ,
                    Call {
                        present: false,
                        confidence: 0,
                    },
                )
            })
            .collect();
        Self {
            item,
            calls,
            decisions: BTreeMap::new(),
            key_slice: None,
            active: Duration::ZERO,
            last_frame: None,
            last_input: None,
        }
    }

    /// Counts this frame's time if the reader is at the window: it has the focus and the
    /// reader did something within [`IDLE_AFTER`]. A frame counts at most a second (a window
    /// left alone repaints twice a second while the reader is there). Time is egui's clock,
    /// which the platform gives each frame.
    pub fn tick(&mut self, ctx: &egui::Context) {
        let (focused, input, now) = ctx.input(|input| {
            let any =
                !input.events.is_empty() || input.pointer.is_moving() || input.pointer.any_down();
            (input.focused, any, input.time)
        });
        if input {
            self.last_input = Some(now);
        }
        let present = focused
            && self
                .last_input
                .is_some_and(|at| now - at < IDLE_AFTER.as_secs_f64());
        if let Some(before) = self.last_frame
            && present
        {
            self.active += Duration::from_secs_f64((now - before).clamp(0.0, 1.0));
        }
        self.last_frame = Some(now);
        // The clock runs on while the reader is there, even with nothing moving on screen.
        if present {
            ctx.request_repaint_after(Duration::from_millis(500));
        }
    }

    /// The time counted on this case so far.
    pub fn active(&self) -> Duration {
        self.active
    }

    pub fn set_key_slice(&mut self, slice: u32) {
        self.key_slice = Some(slice);
    }

    /// The read as it stands.
    pub fn read(&self) -> Read {
        Read {
            reader: self.item.reader.clone(),
            case: self.item.item.case.clone(),
            arm: self.item.arm.name.clone(),
            session: self.item.item.session,
            calls: self.calls.clone(),
            key_slice: self.key_slice,
            active_ms: u64::try_from(self.active.as_millis()).unwrap_or(u64::MAX),
            ai: self.decisions.clone(),
            at: keyslice_review::store::now_rfc3339(),
            simulated: false,
        }
    }

    /// Every AI finding has a decision.
    fn complete(&self) -> bool {
        self.item
            .ai_claims
            .iter()
            .all(|organ| self.decisions.contains_key(organ))
    }

    /// The panel where the reader records the read.
    pub fn ui(&mut self, ui: &mut egui::Ui) -> Option<ReadingCommand> {
        let mut command = None;
        ui.heading("Your read");
        ui.small(format!(
            "read {} of {} · arm {}",
            self.item.done + 1,
            self.item.total,
            self.item.arm.name
        ));
        for organ in Organ::ALL {
            let call = self.calls.get_mut(&organ).expect("every organ has a call");
            ui.horizontal(|ui| {
                ui.checkbox(&mut call.present, format!("tumor in the {organ}"));
            });
            ui.add(egui::Slider::new(&mut call.confidence, 0..=100).text("confidence"))
                .on_hover_text(format!("how sure you are of a tumor in the {organ}, 0–100"));
        }
        ui.horizontal(|ui| {
            ui.label(match self.key_slice {
                Some(slice) => format!("key slice {slice}"),
                None => "no key slice".to_string(),
            });
            if ui.small_button("Use the slice on screen").clicked() {
                command = Some(ReadingCommand::KeySliceHere);
            }
        });
        if !self.item.ai_claims.is_empty() {
            ui.separator();
            ui.label("The AI's findings");
            for organ in self.item.ai_claims.clone() {
                ui.label(format!("tumor in the {organ}"));
                ui.horizontal(|ui| {
                    for (decision, name) in [
                        (Decision::Accepted, "accept"),
                        (Decision::Changed, "change"),
                        (Decision::Rejected, "reject"),
                    ] {
                        if ui
                            .selectable_label(self.decisions.get(&organ) == Some(&decision), name)
                            .clicked()
                        {
                            self.decisions.insert(organ, decision);
                        }
                    }
                });
            }
        }
        ui.separator();
        let ready = self.complete();
        if ui
            .add_enabled(ready, egui::Button::new("Record and go to the next case"))
            .clicked()
        {
            command = Some(ReadingCommand::Submit);
        }
        if !ready {
            ui.small("decide on each of the AI's findings first");
        }
        ui.small(format!(
            "time on this case {:.0} s",
            self.active.as_secs_f64()
        ));
        command
    }
}
