//! The findings editor: the open case's findings as corrected so far, editable per organ
//! (tumor presence; each lesion's size, location and attenuation; add or remove a lesion),
//! the key slice ("= current slice", `S`), each lesion's own evidence (shown, with a button
//! that shows its slice; "= key evidence" makes the key slice, box and slices drawn with the
//! box tool that lesion's), a free-text note, and undo/redo (Ctrl+Z / Ctrl+Y) over all of
//! them and over accept/flag. A size is typed ("3.1 x 2.4", cm; "31 mm"
//! also reads) or filled from the latest ruler measurements on the axial plane: the lesion's
//! "ruler" button, or `L` for the selected lesion (click its name to select it; the first
//! lesion is selected until then; with no lesion yet, `L` adds one to the first organ the
//! findings give a tumor).
//!
//! Each lesion has a mask row (`masks`): draw, grow, smooth, islands, fill between, clear,
//! what the mask measures and "use as size".
//!
//! Draws and returns [`EditCommand`]s; the app records them in the review database before
//! the panel shows them, so what is on screen is what is saved.

use egui::{Color32, RichText};
use serde_json::{Value, json};

use keyslice_core::findings::summary::location_label;
use keyslice_core::findings::{
    Attenuation, Evidence, Findings, KeySlice, KidneyPole, Lesion, LesionSize, Location, Organ,
    PancreasPart, TumorPresence, evidence_words,
};
use keyslice_core::volume::lesion::Measures;
use keyslice_core::volume::mask::{disagreements, size_of, slices_of};
use keyslice_review::reviewed::{Field, LesionPart};
use keyslice_review::{History, ReviewedCase};

use super::masks::{MaskCommand, MaskRow};
use super::viewport::PaintBrush;
use std::collections::BTreeMap;

/// What the reviewer asked for.
#[derive(Clone, Debug, PartialEq)]
pub enum EditCommand {
    /// Set a field to a value.
    Set {
        /// The field.
        field: Field,
        /// The new value (JSON).
        value: Value,
    },
    /// Reverse the latest edit.
    Undo,
    /// Reapply the latest undone edit.
    Redo,
    /// Make the axial slice on screen the key slice, read once the frame's viewer commands
    /// are applied (K then S in one frame marks the model's slice).
    KeySliceHere,
    /// Show an axial slice (a lesion's evidence); changes nothing in the review.
    ShowSlice(u32),
    /// A lesion's mask: draw, grow, smooth, … (the app edits it and records the change).
    Mask(MaskCommand),
}

/// What the editor shows.
pub struct FindingsEditor<'a> {
    /// The case as corrected so far.
    pub case: &'a ReviewedCase,
    /// The model's findings (shown beside changed values), if the case was analysed.
    pub model: Option<&'a Findings>,
    /// What undo and redo would do.
    pub history: &'a History,
    /// The axial slice on screen (index, z in mm, DICOM SOP Instance UID), for "key slice =
    /// current".
    pub current_slice: KeySlice,
    /// The latest ruler measurements on the axial plane as a size, if any.
    pub ruler: Option<LesionSize>,
    /// Whether single-letter keys may change the review now: the images have the keyboard
    /// (the pointer is over them, or they were clicked last) and no menu is open. `S` and
    /// `L` act only then; Ctrl+Z and Ctrl+Y whenever no text field or menu takes the keys.
    pub review_keys: bool,
    /// What each lesion's mask measures, by organ and lesion.
    pub masks: &'a BTreeMap<(Organ, usize), Measures>,
    /// The lesion whose mask is being drawn, and the brush.
    pub drawing: Option<((Organ, usize), PaintBrush)>,
}

impl FindingsEditor<'_> {
    /// Draws the editor.
    #[must_use]
    pub fn ui(&self, ui: &mut egui::Ui) -> Vec<EditCommand> {
        let mut commands = Vec::new();
        ui.horizontal_wrapped(|ui| {
            ui.heading("Findings");
            let undo = ui.add_enabled(
                self.history.undo_target().is_some(),
                egui::Button::new("Undo (Ctrl+Z)").small(),
            );
            if undo.clicked() {
                commands.push(EditCommand::Undo);
            }
            let redo = ui.add_enabled(
                self.history.redo_target().is_some(),
                egui::Button::new("Redo (Ctrl+Y)").small(),
            );
            if redo.clicked() {
                commands.push(EditCommand::Redo);
            }
        });
        if !self.case.changed.is_empty() {
            let fields: Vec<String> = self
                .case
                .changed
                .iter()
                .map(|field| keyslice_review::reviewed::field_words(field))
                .collect();
            ui.small(format!("corrected: {} (saved)", fields.join(", ")));
        }
        for skipped in &self.case.skipped {
            ui.colored_label(Color32::from_rgb(230, 180, 60), skipped);
        }
        let selected = self.selected_lesion(ui);
        for organ in Organ::ALL {
            self.organ_ui(ui, organ, selected, &mut commands);
        }
        ui.separator();
        self.key_slice_ui(ui, &mut commands);
        self.note_ui(ui, &mut commands);
        self.keyboard(ui, selected, &mut commands);
        commands
    }

    /// The selected lesion (organ, index): the one clicked last if it still exists, else the
    /// first lesion of any organ.
    fn selected_lesion(&self, ui: &egui::Ui) -> Option<(Organ, usize)> {
        let all: Vec<(Organ, usize)> = Organ::ALL
            .iter()
            .flat_map(|&organ| {
                (0..self.case.findings.organ(organ).lesions.len()).map(move |index| (organ, index))
            })
            .collect();
        let clicked = ui.data(|data| data.get_temp::<(Organ, usize)>(selection_id()));
        clicked
            .filter(|lesion| all.contains(lesion))
            .or_else(|| all.first().copied())
    }

    fn organ_ui(
        &self,
        ui: &mut egui::Ui,
        organ: Organ,
        selected: Option<(Organ, usize)>,
        commands: &mut Vec<EditCommand>,
    ) {
        let entry = self.case.findings.organ(organ);
        let field = Field::Tumor(organ);
        ui.horizontal_wrapped(|ui| {
            let changed = self.case.changed.contains(&field.path());
            let name = RichText::new(organ.display_name()).strong();
            ui.label(if changed { name.underline() } else { name });
            let mut tumor = entry.tumor;
            egui::ComboBox::from_id_salt(("presence", organ.key()))
                .selected_text(presence_words(tumor))
                .width(110.0)
                .show_ui(ui, |ui| {
                    for option in [
                        TumorPresence::Yes,
                        TumorPresence::No,
                        TumorPresence::Uncertain,
                        TumorPresence::NotMentioned,
                    ] {
                        ui.selectable_value(&mut tumor, option, presence_words(option));
                    }
                })
                .response
                .accessible_name(format!("{} tumor presence", organ.display_name()));
            if tumor != entry.tumor {
                commands.push(EditCommand::Set {
                    field,
                    value: json!(tumor),
                });
            }
            if let Some(model) = self.model
                && changed
            {
                ui.weak(format!(
                    "model: {}",
                    presence_words(model.organ(organ).tumor)
                ));
            }
        });
        for (index, lesion) in entry.lesions.iter().enumerate() {
            self.lesion_ui(ui, organ, index, lesion, selected, commands);
        }
        super::indented_row(ui, 12.0, |ui| {
            if ui.small_button("+ lesion").clicked() {
                // A lesion means a tumor: presence follows (a separate, undoable edit).
                if !entry.tumor.as_positive() {
                    commands.push(EditCommand::Set {
                        field,
                        value: json!(TumorPresence::Yes),
                    });
                }
                let mut lesion = json!({});
                if let Some(size) = self.ruler {
                    lesion = json!({ "size": size });
                }
                commands.push(EditCommand::Set {
                    field: Field::Lesion(organ, entry.lesions.len()),
                    value: lesion,
                });
            }
        });
    }

    fn lesion_ui(
        &self,
        ui: &mut egui::Ui,
        organ: Organ,
        index: usize,
        lesion: &Lesion,
        selected: Option<(Organ, usize)>,
        commands: &mut Vec<EditCommand>,
    ) {
        let prefix = Field::Lesion(organ, index).path();
        let part = |part| Field::LesionPart(organ, index, part);
        super::indented_row(ui, 12.0, |ui| {
            let is_selected = selected == Some((organ, index));
            let name = ui
                .selectable_label(is_selected, format!("lesion {}", index + 1))
                .on_hover_text("select: L fills its size from the ruler");
            if name.clicked() {
                ui.data_mut(|data| data.insert_temp(selection_id(), (organ, index)));
            }
            size_field_ui(ui, part(LesionPart::Size), lesion.size, commands);
            if let Some(size) = self.ruler {
                let button = ui
                    .small_button("ruler")
                    .on_hover_text(format!("use the ruler: {}", size_words(Some(size))));
                if button.clicked() && lesion.size != Some(size) {
                    commands.push(EditCommand::Set {
                        field: part(LesionPart::Size),
                        value: json!(size),
                    });
                }
            }
            if ui.small_button("remove").clicked() {
                commands.push(EditCommand::Set {
                    field: Field::Lesion(organ, index),
                    value: Value::Null,
                });
            }
        });
        super::indented_row(ui, 24.0, |ui| {
            let mut location = lesion.location.clone();
            egui::ComboBox::from_id_salt(("location", &prefix))
                .selected_text(location.as_ref().map_or("location?".into(), location_label))
                .width(120.0)
                .show_ui(ui, |ui| {
                    ui.selectable_value(&mut location, None, "not stated");
                    for option in location_options(organ) {
                        let words = location_label(&option);
                        ui.selectable_value(&mut location, Some(option), words);
                    }
                })
                .response
                .accessible_name(format!("lesion {} location", index + 1));
            if location != lesion.location {
                commands.push(EditCommand::Set {
                    field: part(LesionPart::Location),
                    value: location.map_or(Value::Null, |l| json!(l)),
                });
            }
            let mut attenuation = lesion.attenuation;
            egui::ComboBox::from_id_salt(("attenuation", &prefix))
                .selected_text(attenuation.map_or("attenuation?", Attenuation::word))
                .width(120.0)
                .show_ui(ui, |ui| {
                    ui.selectable_value(&mut attenuation, None, "not stated");
                    for option in [
                        Attenuation::Hypo,
                        Attenuation::Iso,
                        Attenuation::Hyper,
                        Attenuation::Mixed,
                    ] {
                        ui.selectable_value(&mut attenuation, Some(option), option.word());
                    }
                })
                .response
                .accessible_name(format!("lesion {} attenuation", index + 1));
            if attenuation != lesion.attenuation {
                commands.push(EditCommand::Set {
                    field: part(LesionPart::Attenuation),
                    value: attenuation.map_or(Value::Null, |a| json!(a)),
                });
            }
        });
        self.lesion_evidence_ui(ui, index, lesion, part(LesionPart::Evidence), commands);
        self.mask_row_ui(ui, organ, index, lesion, commands);
    }

    /// The lesion's mask row (`masks`).
    fn mask_row_ui(
        &self,
        ui: &mut egui::Ui,
        organ: Organ,
        index: usize,
        lesion: &Lesion,
        commands: &mut Vec<EditCommand>,
    ) {
        let measures = self.masks.get(&(organ, index));
        let findings = &self.case.findings;
        let row = MaskRow {
            organ,
            lesion: index,
            measures,
            drawing: self
                .drawing
                .filter(|(target, _)| *target == (organ, index))
                .map(|(_, brush)| brush),
            can_grow: lesion
                .evidence
                .as_ref()
                .is_some_and(|evidence| evidence.slice_box.is_some())
                || findings.slice_box.is_some(),
            measured: measures.is_some_and(|measures| {
                lesion.size == Some(size_of(measures))
                    && lesion
                        .evidence
                        .as_ref()
                        .is_none_or(|evidence| evidence.slices == Some(slices_of(measures)))
            }),
            disagreements: measures
                .map(|m| disagreements(lesion, m))
                .unwrap_or_default(),
            from_model: measures.is_some()
                && !self
                    .case
                    .changed
                    .iter()
                    .any(|field| *field == format!("{}.lesions.{index}.mask", organ.key())),
        };
        let mut mask_commands = Vec::new();
        row.ui(ui, &mut mask_commands);
        commands.extend(mask_commands.into_iter().map(EditCommand::Mask));
    }

    /// A lesion's own evidence: where it is (a button that shows its slice), made from the
    /// key evidence on screen (the slice, box and range drawn with the box tool), or cleared.
    fn lesion_evidence_ui(
        &self,
        ui: &mut egui::Ui,
        index: usize,
        lesion: &Lesion,
        field: Field,
        commands: &mut Vec<EditCommand>,
    ) {
        // Wrapped: a narrow panel keeps every button of the row on screen.
        super::indented_row(ui, 24.0, |ui| {
            ui.label("evidence");
            match &lesion.evidence {
                Some(evidence) => {
                    let go = ui
                        .small_button(format!("slice {}", evidence.key_slice))
                        .on_hover_text(format!("{}: show it", evidence_words(evidence)));
                    if go.clicked() {
                        commands.push(EditCommand::ShowSlice(evidence.key_slice));
                    }
                }
                None => {
                    ui.label(RichText::new("none").weak());
                }
            }
            let findings = &self.case.findings;
            let key = findings.key_slice.as_ref().map(|key| Evidence {
                key_slice: key.index,
                slice_box: findings.slice_box.clone(),
                slices: findings.lesion_slices,
            });
            let differs = key.is_some() && key != lesion.evidence;
            let take = ui
                .add_enabled(differs, egui::Button::new("= key evidence").small())
                .on_hover_text(
                    "make the key slice, box and slices (draw them with B) this lesion's evidence",
                )
                .on_disabled_hover_text("no key slice, or it is this lesion's evidence already");
            if take.clicked()
                && let Some(key) = key
            {
                commands.push(EditCommand::Set {
                    field,
                    value: json!(key),
                });
            }
            if lesion.evidence.is_some()
                && ui
                    .small_button("clear")
                    .on_hover_text(format!("lesion {}: no evidence of its own", index + 1))
                    .clicked()
            {
                commands.push(EditCommand::Set {
                    field,
                    value: Value::Null,
                });
            }
        });
    }

    fn key_slice_ui(&self, ui: &mut egui::Ui, commands: &mut Vec<EditCommand>) {
        let current = self.current_slice.index;
        ui.horizontal_wrapped(|ui| {
            match &self.case.findings.key_slice {
                Some(key) => ui.label(format!("key slice {}", key.index)),
                None => ui.label("key slice: none"),
            };
            let already = self
                .case
                .findings
                .key_slice
                .as_ref()
                .is_some_and(|key| key.index == current);
            let button = ui.add_enabled(
                !already,
                egui::Button::new(format!("= current, slice {current} (S)")).small(),
            );
            if button.clicked() {
                commands.push(EditCommand::KeySliceHere);
            }
        });
    }

    fn note_ui(&self, ui: &mut egui::Ui, commands: &mut Vec<EditCommand>) {
        ui.label("Note (saved when you leave the field):");
        let id = ui.make_persistent_id("note-draft");
        let mut draft: String = ui
            .data(|data| data.get_temp::<String>(id))
            .unwrap_or_else(|| self.case.note.clone());
        let response = ui.add(
            egui::TextEdit::multiline(&mut draft)
                .desired_rows(2)
                .desired_width(f32::INFINITY)
                .hint_text("what the model got wrong, what to check"),
        );
        if response.has_focus() {
            ui.data_mut(|data| data.insert_temp(id, draft.clone()));
        }
        if response.lost_focus() {
            ui.data_mut(|data| data.remove::<String>(id));
            if draft != self.case.note {
                commands.push(EditCommand::Set {
                    field: Field::Note,
                    value: json!(draft),
                });
            }
        }
    }

    fn keyboard(
        &self,
        ui: &egui::Ui,
        selected: Option<(Organ, usize)>,
        commands: &mut Vec<EditCommand>,
    ) {
        if ui.ctx().egui_wants_keyboard_input() || egui::Popup::is_any_open(ui.ctx()) {
            return;
        }
        let from_ruler = self
            .ruler
            .and_then(|size| self.ruler_command(size, selected));
        ui.input_mut(|input| {
            let redo = input.consume_key(egui::Modifiers::COMMAND, egui::Key::Y)
                || input.consume_key(
                    egui::Modifiers::COMMAND | egui::Modifiers::SHIFT,
                    egui::Key::Z,
                );
            if redo {
                commands.push(EditCommand::Redo);
            } else if input.consume_key(egui::Modifiers::COMMAND, egui::Key::Z) {
                commands.push(EditCommand::Undo);
            }
            if !self.review_keys {
                return;
            }
            if input.consume_key(egui::Modifiers::NONE, egui::Key::S) {
                commands.push(EditCommand::KeySliceHere);
            }
            if input.consume_key(egui::Modifiers::NONE, egui::Key::L)
                && let Some(command) = from_ruler
            {
                commands.push(command);
            }
        });
    }

    /// What `L` does with a ruler size: the selected lesion's size, or a new lesion in the
    /// first organ with a tumor; nothing when no organ has one.
    fn ruler_command(
        &self,
        size: LesionSize,
        selected: Option<(Organ, usize)>,
    ) -> Option<EditCommand> {
        if let Some((organ, index)) = selected {
            return Some(EditCommand::Set {
                field: Field::LesionPart(organ, index, LesionPart::Size),
                value: json!(size),
            });
        }
        let organ = Organ::ALL
            .into_iter()
            .find(|organ| self.case.findings.organ(*organ).tumor.as_positive())?;
        Some(EditCommand::Set {
            field: Field::Lesion(organ, 0),
            value: json!({ "size": size }),
        })
    }
}

fn selection_id() -> egui::Id {
    egui::Id::unique("keyslice-selected-lesion")
}

/// The edit that makes `current` the key slice (z rounded to 0.01 mm, no span).
#[must_use]
pub fn set_key_slice(current: &KeySlice) -> EditCommand {
    let mut key = current.clone();
    key.z_mm = key.z_mm.map(|z| (z * 100.0).round() / 100.0);
    key.span = None;
    EditCommand::Set {
        field: Field::KeySlice,
        value: json!(key),
    }
}

/// The edits of `S` on `current`: the key slice alone. The lesion's slice range is left as
/// it was, even when the new key slice lies outside it: a range is the reviewer's only when
/// they draw it (the box tool), and a range the key slice has left is not part of the record
/// (`export::rules::reconcile`); [`key_slice_note`] says so.
#[must_use]
pub fn key_slice_here(current: &KeySlice, _findings: &Findings) -> Vec<EditCommand> {
    vec![set_key_slice(current)]
}

/// What `S` on `current` leaves for the reviewer to do, as a sentence, when the new key slice
/// lies outside the lesion's slice range: the range is left as it was.
#[must_use]
pub fn key_slice_note(current: &KeySlice, findings: &Findings) -> Option<String> {
    let range = findings.lesion_slices?;
    (!range.contains(current.index)).then(|| {
        format!(
            "key slice {} lies outside the lesion slices {}–{}, which are left as they were; \
             draw the lesion's extent with the box tool (B) to record a range that holds it",
            current.index, range.first, range.last
        )
    })
}

/// A size field: shows the size, takes typed text, records it when the field is left.
fn size_field_ui(
    ui: &mut egui::Ui,
    field: Field,
    size: Option<LesionSize>,
    commands: &mut Vec<EditCommand>,
) {
    let id = ui.make_persistent_id(("size-draft", field));
    let error_id = ui.make_persistent_id(("size-error", field));
    let mut draft: String = ui
        .data(|data| data.get_temp::<String>(id))
        .unwrap_or_else(|| size.map(|s| size_words(Some(s))).unwrap_or_default());
    let response = ui.add(
        egui::TextEdit::singleline(&mut draft)
            .desired_width(90.0)
            .hint_text("size, cm"),
    );
    if response.has_focus() {
        ui.data_mut(|data| data.insert_temp(id, draft.clone()));
    }
    if response.lost_focus() {
        ui.data_mut(|data| data.remove::<String>(id));
        match parse_size(&draft) {
            Ok(parsed) => {
                ui.data_mut(|data| data.remove::<String>(error_id));
                if parsed != size {
                    commands.push(EditCommand::Set {
                        field,
                        value: parsed.map_or(Value::Null, |s| json!(s)),
                    });
                }
            }
            Err(message) => ui.data_mut(|data| {
                data.insert_temp(error_id, message);
            }),
        }
    }
    if let Some(message) = ui.data(|data| data.get_temp::<String>(error_id)) {
        ui.colored_label(Color32::from_rgb(230, 90, 80), message);
    }
}

/// "3.1 × 2.4 cm" (or "" for none).
#[must_use]
pub fn size_words(size: Option<LesionSize>) -> String {
    match size {
        Some(LesionSize {
            long_cm,
            short_cm: Some(short),
        }) => format!("{long_cm:.1} × {short:.1} cm"),
        Some(LesionSize { long_cm, .. }) => format!("{long_cm:.1} cm"),
        None => String::new(),
    }
}

/// Reads a typed size: "3.1 x 2.4", "3.1×2.4 cm", "31 x 24 mm", "3.1"; empty clears it.
/// The larger number is the long axis.
fn parse_size(text: &str) -> Result<Option<LesionSize>, String> {
    let lower = text.trim().to_lowercase();
    if lower.is_empty() {
        return Ok(None);
    }
    let (numbers, per_cm) = if let Some(rest) = lower.strip_suffix("mm") {
        (rest, 10.0)
    } else {
        (lower.strip_suffix("cm").unwrap_or(&lower), 1.0)
    };
    let values: Result<Vec<f64>, _> = numbers
        .split(['x', '×', '*'])
        .map(|part| part.trim().replace(',', ".").parse::<f64>())
        .collect();
    let bad = || format!("{text:?}: type a size like 3.1 x 2.4 (cm) or 31 x 24 mm");
    let values = values.map_err(|_| bad())?;
    if values
        .iter()
        .any(|v| !v.is_finite() || *v <= 0.0 || *v / per_cm > 100.0)
    {
        return Err(bad());
    }
    let round = |v: f64| (v / per_cm * 10.0).round() / 10.0;
    match values.as_slice() {
        [long] => Ok(Some(LesionSize {
            long_cm: round(*long),
            short_cm: None,
        })),
        [a, b] => Ok(Some(LesionSize {
            long_cm: round(a.max(*b)),
            short_cm: Some(round(a.min(*b))),
        })),
        _ => Err(bad()),
    }
}

fn presence_words(presence: TumorPresence) -> &'static str {
    match presence {
        TumorPresence::Yes => "tumor",
        TumorPresence::No => "no tumor",
        TumorPresence::Uncertain => "uncertain",
        TumorPresence::NotMentioned => "not mentioned",
    }
}

fn location_options(organ: Organ) -> Vec<Location> {
    match organ {
        Organ::Liver => (1..=8).map(|s| Location::LiverSegments(vec![s])).collect(),
        Organ::Pancreas => [
            PancreasPart::Head,
            PancreasPart::Uncinate,
            PancreasPart::Body,
            PancreasPart::Tail,
        ]
        .map(Location::Pancreas)
        .to_vec(),
        Organ::KidneyLeft | Organ::KidneyRight => {
            [KidneyPole::Upper, KidneyPole::Mid, KidneyPole::Lower]
                .map(Location::Kidney)
                .to_vec()
        }
    }
}

/// The latest one or two axial ruler measurements as a size (long × short, cm).
#[must_use]
pub fn ruler_size(lengths_mm: &[f64]) -> Option<LesionSize> {
    // Millimetres to centimetres with one decimal.
    let round = |mm: f64| mm.round() / 10.0;
    match lengths_mm {
        [] => None,
        [only] => Some(LesionSize {
            long_cm: round(*only),
            short_cm: None,
        }),
        [.., a, b] => Some(LesionSize {
            long_cm: round(a.max(*b)),
            short_cm: Some(round(a.min(*b))),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_sizes_read_in_centimetres_with_the_long_axis_first() {
        let size = |long_cm, short_cm| Ok(Some(LesionSize { long_cm, short_cm }));
        assert_eq!(parse_size("2.4 x 3.1"), size(3.1, Some(2.4)));
        assert_eq!(parse_size("31×24 mm"), size(3.1, Some(2.4)));
        assert_eq!(parse_size(" 1,5 cm "), size(1.5, None));
        assert_eq!(parse_size(""), Ok(None));
        assert!(parse_size("big").is_err());
        assert!(parse_size("0 x 2").is_err());
        assert!(parse_size("1 x 2 x 3").is_err());
    }

    #[test]
    fn ruler_lengths_become_long_and_short_axes() {
        assert_eq!(ruler_size(&[]), None);
        assert_eq!(
            ruler_size(&[50.0, 23.46, 31.04]),
            Some(LesionSize {
                long_cm: 3.1,
                short_cm: Some(2.3)
            })
        );
    }
}
