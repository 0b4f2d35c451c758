//! A case as reviewed: the model's findings with the reviewer's corrections from the log
//! applied in order, and the undo/redo history, both derived from the log alone (so they
//! survive a restart: nothing about a review lives only in memory).
//!
//! A correction's `field` is a dotted path into [`Findings`] as its JSON shows it, without
//! the `organs` level: `liver.tumor`, `liver.lesions.0.size`, `pancreas.lesions.1`,
//! `key_slice`, `box`; plus `note` (the reviewer's free text) and `status` (kept in the
//! cases table, ignored here). A lesion index one past the end appends; `null` at a lesion
//! removes it. Values are the JSON of the field, so every edit goes through the same serde
//! types that read predictions: a value that does not fit is refused before it is recorded.
//! A lesion's 3D mask (`liver.lesions.0.mask`) is kept beside the findings, not in them:
//! each stroke of the mask editor records the whole mask it left (run lengths), so undo,
//! redo and a restart give back exactly what was drawn.
//!
//! Core module: no UI, no GPU.

use std::collections::BTreeMap;

use serde_json::Value;

use super::store::Correction;
use keyslice_core::findings::{Findings, Organ};
use keyslice_core::volume::mask::LesionMask;

/// Why an edit does not apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    /// The field names nothing Keyslice knows.
    #[error(
        "unknown field {0:?} (expected e.g. liver.tumor, liver.lesions.0.size, key_slice, note)"
    )]
    Unknown(String),
    /// The value does not fit the field.
    #[error("{field}: {detail}")]
    Value {
        /// The field.
        field: String,
        /// What is wrong.
        detail: String,
    },
}

/// A part of a lesion a reviewer edits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LesionPart {
    /// Its size (`LesionSize`).
    Size,
    /// Its location.
    Location,
    /// Its attenuation.
    Attenuation,
    /// Its own evidence (`Evidence`: slice, box, slices).
    Evidence,
    /// Its 3D mask on the CT's grid (`LesionMask`, run lengths): each stroke of the mask
    /// editor is one correction holding the mask it left.
    Mask,
}

/// A field a reviewer edits: the typed form of a correction's dotted path (the path is what
/// the log stores, [`Field::path`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// An organ's tumor presence.
    Tumor(Organ),
    /// A whole lesion of an organ (`null` removes it; one past the end appends).
    Lesion(Organ, usize),
    /// One part of a lesion.
    LesionPart(Organ, usize, LesionPart),
    /// The key slice.
    KeySlice,
    /// The lesion's slice range.
    LesionSlices,
    /// The key slice and the slice range in one correction.
    KeySliceAndRange,
    /// The box on the key slice.
    Box,
    /// The reviewer's note.
    Note,
}

impl Field {
    /// The dotted path the log stores (`liver.lesions.0.size`).
    #[must_use]
    pub fn path(self) -> String {
        match self {
            Self::Tumor(organ) => format!("{}.tumor", organ.key()),
            Self::Lesion(organ, index) => format!("{}.lesions.{index}", organ.key()),
            Self::LesionPart(organ, index, part) => {
                let part = match part {
                    LesionPart::Size => "size",
                    LesionPart::Location => "location",
                    LesionPart::Attenuation => "attenuation",
                    LesionPart::Evidence => "evidence",
                    LesionPart::Mask => MASK_PART,
                };
                format!("{}.lesions.{index}.{part}", organ.key())
            }
            Self::KeySlice => KEY_SLICE_FIELD.into(),
            Self::LesionSlices => LESION_SLICES_FIELD.into(),
            Self::KeySliceAndRange => KEY_SLICE_AND_RANGE_FIELD.into(),
            Self::Box => BOX_FIELD.into(),
            Self::Note => NOTE_FIELD.into(),
        }
    }
}

impl std::fmt::Display for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.path())
    }
}

/// The reviewer's free-text note field.
pub const NOTE_FIELD: &str = "note";
/// The last part of a lesion's mask field (`liver.lesions.0.mask`).
pub const MASK_PART: &str = "mask";
/// The status field (kept in the cases table).
pub use crate::store::STATUS_FIELD;
/// The key-slice field.
pub const KEY_SLICE_FIELD: &str = "key_slice";
/// The correction field of the lesion's slice range (`{"first", "last"}`, or `null`).
pub const LESION_SLICES_FIELD: &str = "lesion_slices";
/// The correction field of the evidence box (`{"voxels": [c0, r0, c1, r1]}`, or `null`).
pub const BOX_FIELD: &str = "box";
/// The key slice and the lesion's slice range set together in one correction (`S` on a slice
/// outside the range widens it): one entry, so one undo. Its value is
/// `{"key_slice": …, "lesion_slices": …}`.
pub const KEY_SLICE_AND_RANGE_FIELD: &str = "key_slice_and_lesion_slices";

/// A field as a reviewer names it: `kidney_left.lesions.0.size` → "left kidney lesion 1 size".
#[must_use]
pub fn field_words(field: &str) -> String {
    if field == KEY_SLICE_AND_RANGE_FIELD {
        return "key slice and lesion slices".into();
    }
    let mut words = Vec::new();
    let mut parts = field.split('.').peekable();
    while let Some(part) = parts.next() {
        if let Some(organ) = Organ::ALL.iter().find(|organ| organ.key() == part) {
            words.push(organ.display_name().to_string());
        } else if part == "lesions" {
            match parts.peek().and_then(|index| index.parse::<usize>().ok()) {
                Some(index) => {
                    parts.next();
                    words.push(format!("lesion {}", index + 1));
                }
                None => words.push("lesions".into()),
            }
        } else if part == "tumor" {
            words.push("tumor".into());
        } else {
            words.push(part.replace('_', " "));
        }
    }
    words.join(" ")
}

/// A value as a reviewer reads it: a key slice's index, a range `a–b`, a size `a × b cm`, a
/// word for the rest.
#[must_use]
pub fn value_words(value: &Value) -> String {
    match value {
        Value::Null => "none".into(),
        Value::String(text) => text.replace('_', " "),
        Value::Object(map) => {
            if let Some(index) = map.get("index") {
                return index.to_string();
            }
            if map.contains_key("runs") {
                return serde_json::from_value::<LesionMask>(value.clone()).map_or_else(
                    |_| "a damaged mask".into(),
                    |mask| format!("a mask of {} voxels", mask.voxels()),
                );
            }
            if let (Some(first), Some(last)) = (map.get("first"), map.get("last")) {
                return format!("{first}–{last}");
            }
            if let Some(long) = map.get("long_cm") {
                return match map.get("short_cm").filter(|short| !short.is_null()) {
                    Some(short) => format!("{long} × {short} cm"),
                    None => format!("{long} cm"),
                };
            }
            if let Some(voxels) = map.get("voxels").and_then(Value::as_array)
                && voxels.len() == 4
            {
                return format!(
                    "columns {}–{}, rows {}–{}",
                    voxels[0], voxels[2], voxels[1], voxels[3]
                );
            }
            // A lesion's own evidence: its slice is a number, not a key slice's object.
            if let Some(slice) = map.get(KEY_SLICE_FIELD).and_then(Value::as_u64) {
                let mut words = vec![format!("slice {slice}")];
                if let Some(slice_box) = map.get("box") {
                    words.push(value_words(slice_box));
                }
                if let Some(slices) = map.get("slices").filter(|slices| !slices.is_null()) {
                    words.push(format!("slices {}", value_words(slices)));
                }
                return words.join(", ");
            }
            if map.contains_key(KEY_SLICE_FIELD) {
                return format!(
                    "key slice {}, lesion slices {}",
                    value_words(map.get(KEY_SLICE_FIELD).unwrap_or(&Value::Null)),
                    value_words(map.get(LESION_SLICES_FIELD).unwrap_or(&Value::Null))
                );
            }
            "set".into()
        }
        other => other.to_string(),
    }
}

/// One correction as a sentence: `liver tumor: no tumor (was yes)`.
#[must_use]
pub fn change_words(field: &str, old: &Value, new: &Value) -> String {
    if field == NOTE_FIELD {
        return "note saved".into();
    }
    format!(
        "{}: {} (was {})",
        field_words(field),
        value_words(new),
        value_words(old)
    )
}

/// The fields a correction of `field` changes (the two of [`KEY_SLICE_AND_RANGE_FIELD`]).
fn fields_of(field: &str) -> Vec<String> {
    if field == KEY_SLICE_AND_RANGE_FIELD {
        vec![KEY_SLICE_FIELD.to_string(), LESION_SLICES_FIELD.to_string()]
    } else {
        vec![field.to_string()]
    }
}

/// A case's findings after review.
#[derive(Clone, Debug, PartialEq)]
pub struct ReviewedCase {
    /// The corrected findings (spans removed: they pointed into the model's text).
    pub findings: Findings,
    /// The reviewer's note.
    pub note: String,
    /// Fields the reviewer changed (current value differs from the model's), sorted.
    pub changed: Vec<String>,
    /// Log entries that could not be applied (the model's findings changed under them).
    pub skipped: Vec<String>,
    /// Each lesion's 3D mask, by organ and lesion index, as the last stroke left it.
    pub masks: BTreeMap<(Organ, usize), LesionMask>,
}

/// Why a mask's runs do not fit its grid (they must cover it exactly), if they do not. Sums
/// and products are checked: a mask from a damaged or hostile file may name any size.
fn runs_problem(mask: &LesionMask) -> Option<String> {
    let covered = mask
        .runs
        .iter()
        .try_fold(0u64, |sum, &run| sum.checked_add(u64::from(run)));
    let grid = mask.dims.iter().try_fold(1u64, |product, &d| {
        product.checked_mul(u64::try_from(d).ok()?)
    });
    match (covered, grid) {
        (Some(covered), Some(grid)) if covered == grid => None,
        (Some(covered), Some(grid)) => Some(format!(
            "the mask's runs cover {covered} voxels; its grid has {grid}"
        )),
        _ => Some(format!(
            "the mask's grid {:?} is too large to be a CT's",
            mask.dims
        )),
    }
}

impl ReviewedCase {
    /// The model's findings (`base`, or empty findings when the case was never analysed)
    /// with `log` (one case's entries, oldest first) applied.
    #[must_use]
    pub fn replay(base: Option<&Findings>, log: &[Correction]) -> Self {
        Self::replay_with_masks(base, &BTreeMap::new(), log)
    }

    /// [`Self::replay`] from the model's findings and the lesion masks the model found
    /// (`base_masks`: the starting masks a reviewer corrects). A base mask for a lesion the
    /// findings lack, or whose runs do not cover its grid, is left out.
    #[must_use]
    pub fn replay_with_masks(
        base: Option<&Findings>,
        base_masks: &BTreeMap<(Organ, usize), LesionMask>,
        log: &[Correction],
    ) -> Self {
        let base = base.map(Findings::without_spans).unwrap_or_default();
        let masks: BTreeMap<(Organ, usize), LesionMask> = base_masks
            .iter()
            .filter(|((organ, index), mask)| {
                runs_problem(mask).is_none() && *index < base.organ(*organ).lesions.len()
            })
            .map(|(key, mask)| (*key, mask.clone()))
            .collect();
        let mut case = Self {
            findings: base.clone(),
            note: String::new(),
            changed: Vec::new(),
            skipped: Vec::new(),
            masks: masks.clone(),
        };
        // An undo entry takes its target's effect away (and an undo of an undo gives it
        // back): the findings are the base with the edits still in effect, in log order. So
        // undoing "no tumor" brings back the lesions that change took with it.
        let by_id: std::collections::HashMap<i64, &Correction> =
            log.iter().map(|entry| (entry.id, entry)).collect();
        let mut in_effect: std::collections::HashMap<i64, bool> = std::collections::HashMap::new();
        for entry in log {
            match entry.undoes {
                None => {
                    in_effect.insert(entry.id, true);
                }
                Some(mut target) => {
                    // Follow undo → undone undo → … down to the edit, at most the log's length.
                    for _ in 0..log.len() {
                        match by_id.get(&target).and_then(|undone| undone.undoes) {
                            Some(deeper) => target = deeper,
                            None => break,
                        }
                    }
                    if let Some(state) = in_effect.get_mut(&target) {
                        *state = !*state;
                    }
                }
            }
        }
        let mut touched = Vec::new();
        for entry in log {
            if entry.field == STATUS_FIELD
                || entry.undoes.is_some()
                || !in_effect.get(&entry.id).copied().unwrap_or(false)
            {
                if entry.undoes.is_some() && entry.field != STATUS_FIELD {
                    touched.extend(fields_of(&entry.field));
                }
                continue;
            }
            match case.apply(&entry.field, &entry.old_value, &entry.new_value) {
                Ok(()) => touched.extend(fields_of(&entry.field)),
                Err(error) => case
                    .skipped
                    .push(format!("correction {}: {error}", entry.id)),
            }
        }
        touched.sort();
        touched.dedup();
        let original = Self {
            findings: base,
            note: String::new(),
            changed: Vec::new(),
            skipped: Vec::new(),
            masks,
        };
        case.changed = touched
            .into_iter()
            .filter(|field| original.get(field).ok() != case.get(field).ok())
            .collect();
        case
    }

    /// The current value of `field` (`null` when it has none).
    pub fn get(&self, field: &str) -> Result<Value, FieldError> {
        if field == NOTE_FIELD {
            return Ok(Value::from(self.note.clone()));
        }
        if field == KEY_SLICE_AND_RANGE_FIELD {
            return Ok(serde_json::json!({
                KEY_SLICE_FIELD: self.get(KEY_SLICE_FIELD)?,
                LESION_SLICES_FIELD: self.get(LESION_SLICES_FIELD)?,
            }));
        }
        if let Some(lesion) = mask_field(field) {
            return Ok(self
                .masks
                .get(&lesion)
                .and_then(|mask| serde_json::to_value(mask).ok())
                .unwrap_or(Value::Null));
        }
        let path = findings_path(field)?;
        let json = serde_json::to_value(&self.findings).map_err(|e| FieldError::Value {
            field: field.into(),
            detail: e.to_string(),
        })?;
        let mut node = &json;
        for segment in &path {
            let next = match node {
                Value::Object(map) => map.get(segment.as_str()),
                Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            };
            match next {
                Some(value) => node = value,
                None => return Ok(Value::Null),
            }
        }
        Ok(node.clone())
    }

    /// Sets `field` from `old` to `value`; the findings are unchanged when it does not fit.
    /// A whole lesion whose old value is `null` is inserted at its position (undoing a
    /// removal puts it back where it was); `null` removes it.
    pub fn apply(&mut self, field: &str, old: &Value, value: &Value) -> Result<(), FieldError> {
        if field == KEY_SLICE_AND_RANGE_FIELD {
            // Both or neither: checked on a copy.
            let mut changed = self.clone();
            for part in [KEY_SLICE_FIELD, LESION_SLICES_FIELD] {
                let part_of = |whole: &Value| whole.get(part).cloned().unwrap_or(Value::Null);
                changed.apply(part, &part_of(old), &part_of(value))?;
            }
            *self = changed;
            return Ok(());
        }
        if field == NOTE_FIELD {
            self.note = match value {
                Value::Null => String::new(),
                Value::String(text) => text.clone(),
                other => {
                    return Err(FieldError::Value {
                        field: field.into(),
                        detail: format!("a note is text, not {other}"),
                    });
                }
            };
            return Ok(());
        }
        let invalid = |detail: String| FieldError::Value {
            field: field.into(),
            detail,
        };
        if let Some(lesion) = mask_field(field) {
            return self.apply_mask(lesion, value).map_err(invalid);
        }
        let path = findings_path(field)?;
        let mut json = serde_json::to_value(&self.findings).map_err(|e| invalid(e.to_string()))?;
        set_at(&mut json, &path, value.clone(), old.is_null()).map_err(invalid)?;
        self.findings = serde_json::from_value(json).map_err(|e| invalid(e.to_string()))?;
        // A lesion removed or put back takes its mask with it; the masks of the lesions
        // after it move with their lesions.
        if let [_, organ, lesions, index] = path.as_slice()
            && lesions == "lesions"
            && let (Some(organ), Ok(index)) = (
                Organ::ALL.iter().find(|o| o.key() == organ.as_str()),
                index.parse::<usize>(),
            )
        {
            self.shift_masks(*organ, index, value.is_null(), old.is_null());
        }
        // "No tumor" takes the organ's lesions with it in the same change: one undo brings
        // them back. (A box and slice range stay while the reviewer works; an answer without
        // any tumor loses them when it is exported or stored, by the same rule.)
        if path.len() == 3 && path[2] == "tumor" {
            let organ = &mut self.findings.organs;
            for finding in organ.values_mut() {
                if !finding.tumor.as_positive() {
                    finding.lesions.clear();
                }
            }
            let findings = &self.findings;
            self.masks
                .retain(|(organ, index), _| *index < findings.organ(*organ).lesions.len());
        }
        Ok(())
    }

    /// Sets (or, with `null`, removes) a lesion's mask; the lesion must exist.
    fn apply_mask(&mut self, (organ, index): (Organ, usize), value: &Value) -> Result<(), String> {
        if index >= self.findings.organ(organ).lesions.len() {
            return Err(format!(
                "no lesion {} in the {organ} to hold a mask",
                index + 1
            ));
        }
        if value.is_null() {
            self.masks.remove(&(organ, index));
            return Ok(());
        }
        let mask: LesionMask =
            serde_json::from_value(value.clone()).map_err(|e| format!("not a mask: {e}"))?;
        if let Some(problem) = runs_problem(&mask) {
            return Err(problem);
        }
        self.masks.insert((organ, index), mask);
        Ok(())
    }

    /// Moves masks after lesion `index` of `organ` when that lesion was removed
    /// (`removed`) or inserted (`inserted`).
    fn shift_masks(&mut self, organ: Organ, index: usize, removed: bool, inserted: bool) {
        if !(removed || inserted) {
            // A lesion replaced whole keeps its mask.
            return;
        }
        let moved: Vec<((Organ, usize), LesionMask)> = self
            .masks
            .extract_if(.., |&(o, i), _| o == organ && i >= index)
            .collect();
        for ((_, i), mask) in moved {
            match (removed, inserted) {
                (true, _) if i == index => {}
                (true, _) => {
                    self.masks.insert((organ, i - 1), mask);
                }
                (false, _) => {
                    self.masks.insert((organ, i + 1), mask);
                }
            }
        }
    }
}

/// The lesion a mask field names (`liver.lesions.0.mask`).
fn mask_field(field: &str) -> Option<(Organ, usize)> {
    let mut parts = field.split('.');
    let organ = parts.next()?;
    let organ = *Organ::ALL.iter().find(|o| o.key() == organ)?;
    (parts.next()? == "lesions").then_some(())?;
    let index = parts.next()?.parse::<usize>().ok()?;
    (parts.next()? == MASK_PART && parts.next().is_none()).then_some((organ, index))
}

/// `liver.lesions.0.size` → `["organs", "liver", "lesions", "0", "size"]`.
fn findings_path(field: &str) -> Result<Vec<String>, FieldError> {
    let unknown = || FieldError::Unknown(field.to_string());
    let segments: Vec<&str> = field.split('.').collect();
    let first = *segments.first().ok_or_else(unknown)?;
    if first == KEY_SLICE_FIELD || first == "box" || first == LESION_SLICES_FIELD {
        return Ok(segments.iter().map(|s| (*s).to_string()).collect());
    }
    if !Organ::ALL.iter().any(|organ| organ.key() == first) {
        return Err(unknown());
    }
    match segments.get(1).copied() {
        Some("tumor") if segments.len() == 2 => {}
        Some("lesions") if segments.len() <= 4 => {
            if let Some(index) = segments.get(2)
                && index.parse::<usize>().is_err()
            {
                return Err(unknown());
            }
        }
        _ => return Err(unknown()),
    }
    Ok(std::iter::once("organs")
        .chain(segments)
        .map(str::to_string)
        .collect())
}

/// Sets `value` at `path` inside `json`, creating missing objects and arrays. At a list
/// position: `null` removes the entry, `insert` puts a new one there (shifting the rest),
/// otherwise the entry is replaced; the position one past the end appends. At an object
/// key, `null` removes the key (an absent optional field).
fn set_at(json: &mut Value, path: &[String], value: Value, insert: bool) -> Result<(), String> {
    let Some((last, parents)) = path.split_last() else {
        *json = value;
        return Ok(());
    };
    let mut node = json;
    for (depth, segment) in parents.iter().enumerate() {
        let next_is_index = path[depth + 1].parse::<usize>().is_ok();
        node = match node {
            Value::Object(map) => map.entry(segment.clone()).or_insert_with(|| {
                if next_is_index {
                    Value::Array(Vec::new())
                } else {
                    Value::Object(serde_json::Map::new())
                }
            }),
            Value::Array(items) => {
                let index: usize = segment
                    .parse()
                    .map_err(|_| format!("{segment:?} is not a position in a list"))?;
                let length = items.len();
                items
                    .get_mut(index)
                    .ok_or_else(|| format!("no entry {index} (there are {length})"))?
            }
            Value::Null => {
                return Err(format!("{segment:?} is inside a value that is not set"));
            }
            _ => return Err(format!("{segment:?} is inside a plain value")),
        };
    }
    match node {
        Value::Object(map) => {
            if value.is_null() {
                map.remove(last);
            } else {
                map.insert(last.clone(), value);
            }
            Ok(())
        }
        Value::Array(items) => {
            let index: usize = last
                .parse()
                .map_err(|_| format!("{last:?} is not a position in a list"))?;
            match (index.cmp(&items.len()), value.is_null()) {
                (std::cmp::Ordering::Less, true) => {
                    items.remove(index);
                }
                (std::cmp::Ordering::Less, false) if insert => items.insert(index, value),
                (std::cmp::Ordering::Less, false) => items[index] = value,
                (std::cmp::Ordering::Equal, false) => items.push(value),
                (std::cmp::Ordering::Equal, true) => {}
                (std::cmp::Ordering::Greater, _) => {
                    return Err(format!("no entry {index} (there are {})", items.len()));
                }
            }
            Ok(())
        }
        _ => Err(format!("{last:?} is inside a plain value")),
    }
}

/// Which log entries Ctrl+Z and Ctrl+Y act on, worked out from one case's log: an undo
/// appends the reverse of the latest effective edit; a redo appends the reverse of the
/// latest undo; a new edit clears what could be redone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// Entries an undo would reverse, latest last.
    pub undoable: Vec<i64>,
    /// Undo entries a redo would reverse, latest last.
    pub redoable: Vec<i64>,
}

impl History {
    /// The history of one case's log (oldest first).
    #[must_use]
    pub fn of(log: &[Correction]) -> Self {
        let mut history = Self::default();
        for entry in log {
            match entry.undoes {
                None => {
                    history.undoable.push(entry.id);
                    history.redoable.clear();
                }
                Some(target) if history.undoable.last() == Some(&target) => {
                    history.undoable.pop();
                    history.redoable.push(entry.id);
                }
                Some(target) if history.redoable.last() == Some(&target) => {
                    history.redoable.pop();
                    history.undoable.push(entry.id);
                }
                // An undo out of order (another reviewer, an older build): it is applied to
                // the findings like any edit but leaves the stacks alone.
                Some(_) => {}
            }
        }
        history
    }

    /// The entry to reverse for Ctrl+Z.
    #[must_use]
    pub fn undo_target(&self) -> Option<i64> {
        self.undoable.last().copied()
    }

    /// The entry to reverse for Ctrl+Y.
    #[must_use]
    pub fn redo_target(&self) -> Option<i64> {
        self.redoable.last().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyslice_core::findings::{Attenuation, Lesion, LesionSize, TumorPresence};
    use serde_json::json;

    fn entry(id: i64, field: &str, new_value: Value, undoes: Option<i64>) -> Correction {
        Correction {
            id,
            case_id: "c".into(),
            field: field.into(),
            old_value: Value::Null,
            new_value,
            reviewer: "r".into(),
            at: String::new(),
            undoes,
        }
    }

    #[test]
    fn no_tumor_takes_the_organs_lesions_with_it_and_undo_brings_them_back() {
        let mut base = Findings::default();
        base.organ_mut(Organ::Liver).tumor = TumorPresence::Yes;
        base.organ_mut(Organ::Liver).lesions.push(Lesion {
            size: Some(LesionSize {
                long_cm: 2.6,
                short_cm: Some(1.4),
            }),
            ..Lesion::default()
        });
        base.slice_box = Some(keyslice_core::findings::SliceBox {
            voxels: [1, 2, 3, 4],
            mm: None,
        });
        base.lesion_slices = Some(keyslice_core::findings::SliceRange { first: 3, last: 9 });
        let set_no = entry(1, "liver.tumor", json!("no"), None);
        let case = ReviewedCase::replay(Some(&base), std::slice::from_ref(&set_no));
        let liver = case.findings.organ(Organ::Liver);
        assert_eq!(liver.tumor, TumorPresence::No);
        assert!(liver.lesions.is_empty());
        assert_eq!(case.findings.slice_box, base.slice_box);
        // One undo (the reverse entry) and all of it is back.
        let mut undo = entry(2, "liver.tumor", json!("yes"), Some(1));
        undo.old_value = json!("no");
        let case = ReviewedCase::replay(Some(&base), &[set_no, undo]);
        assert_eq!(case.findings, base);
        assert_eq!(History::of(&[]).undo_target(), None);
    }

    #[test]
    fn the_key_slice_with_its_widened_range_is_one_correction() {
        let base = Findings {
            lesion_slices: Some(keyslice_core::findings::SliceRange { first: 3, last: 9 }),
            ..Findings::default()
        };
        let case = ReviewedCase::replay(Some(&base), &[]);
        let old = case.get(KEY_SLICE_AND_RANGE_FIELD).unwrap();
        assert_eq!(
            old,
            json!({"key_slice": null, "lesion_slices": {"first": 3, "last": 9}})
        );
        let mut both = entry(
            1,
            KEY_SLICE_AND_RANGE_FIELD,
            json!({"key_slice": {"index": 12}, "lesion_slices": {"first": 3, "last": 12}}),
            None,
        );
        both.old_value = old;
        let case = ReviewedCase::replay(Some(&base), std::slice::from_ref(&both));
        assert_eq!(
            case.findings.key_slice.as_ref().map(|key| key.index),
            Some(12)
        );
        assert_eq!(
            case.findings.lesion_slices,
            Some(keyslice_core::findings::SliceRange { first: 3, last: 12 })
        );
        assert_eq!(case.changed, ["key_slice", "lesion_slices"]);
        // One undo takes both back.
        let undo = entry(2, KEY_SLICE_AND_RANGE_FIELD, json!(null), Some(1));
        let case = ReviewedCase::replay(Some(&base), &[both.clone(), undo.clone()]);
        assert_eq!(case.findings, base);
        assert_eq!(History::of(&[both, undo]).undo_target(), None);
    }

    #[test]
    fn lesion_size_edit_applies_and_is_listed_as_changed() {
        let mut base = Findings::default();
        base.organ_mut(Organ::Liver).tumor = TumorPresence::Yes;
        base.organ_mut(Organ::Liver).lesions.push(Lesion {
            size: Some(LesionSize {
                long_cm: 2.0,
                short_cm: None,
            }),
            attenuation: Some(Attenuation::Hypo),
            ..Lesion::default()
        });
        let log = [entry(
            1,
            "liver.lesions.0.size",
            json!({"long_cm": 3.1, "short_cm": 2.4}),
            None,
        )];
        let case = ReviewedCase::replay(Some(&base), &log);
        let lesion = &case.findings.organ(Organ::Liver).lesions[0];
        assert_eq!(
            lesion.size,
            Some(LesionSize {
                long_cm: 3.1,
                short_cm: Some(2.4)
            })
        );
        assert_eq!(lesion.attenuation, Some(Attenuation::Hypo));
        assert_eq!(case.changed, vec!["liver.lesions.0.size".to_string()]);
        assert!(case.skipped.is_empty());
    }

    #[test]
    fn lesion_added_to_an_organ_without_lesions_and_removed_again() {
        let mut case = ReviewedCase::replay(None, &[]);
        let hypo = json!({"attenuation": "hypo"});
        let iso = json!({"attenuation": "iso"});
        case.apply("pancreas.lesions.0", &Value::Null, &hypo)
            .unwrap();
        case.apply("pancreas.lesions.1", &Value::Null, &iso)
            .unwrap();
        case.apply("pancreas.tumor", &json!("not_mentioned"), &json!("yes"))
            .unwrap();
        assert_eq!(case.findings.organ(Organ::Pancreas).lesions.len(), 2);
        assert_eq!(case.get("pancreas.tumor").unwrap(), json!("yes"));
        // Removing the first and undoing it puts it back in first place.
        case.apply("pancreas.lesions.0", &hypo, &Value::Null)
            .unwrap();
        assert_eq!(case.get("pancreas.lesions.0").unwrap(), iso);
        case.apply("pancreas.lesions.0", &Value::Null, &hypo)
            .unwrap();
        assert_eq!(case.get("pancreas.lesions.0").unwrap(), hypo);
        assert_eq!(case.get("pancreas.lesions.1").unwrap(), iso);
    }

    #[test]
    fn values_that_do_not_fit_are_refused_and_change_nothing() {
        let mut case = ReviewedCase::replay(None, &[]);
        let before = case.clone();
        let null = Value::Null;
        assert!(matches!(
            case.apply("liver.tumor", &null, &json!("maybe")),
            Err(FieldError::Value { .. })
        ));
        assert!(matches!(
            case.apply("spleen.tumor", &null, &json!("yes")),
            Err(FieldError::Unknown(_))
        ));
        assert!(matches!(
            case.apply("liver.lesions.3.size", &null, &json!({"long_cm": 1.0})),
            Err(FieldError::Value { .. })
        ));
        assert!(matches!(
            case.apply("note", &null, &json!(3)),
            Err(FieldError::Value { .. })
        ));
        assert_eq!(case, before);
    }

    #[test]
    fn undo_and_redo_follow_the_log() {
        let log = [
            entry(1, "liver.tumor", json!("yes"), None),
            entry(2, "note", json!("check"), None),
            entry(3, "note", json!(""), Some(2)),
            entry(4, "liver.tumor", json!("not_mentioned"), Some(1)),
            entry(5, "liver.tumor", json!("yes"), Some(4)),
        ];
        let history = History::of(&log);
        assert_eq!(history.undoable, vec![5]);
        assert_eq!(history.redoable, vec![3]);
        let case = ReviewedCase::replay(None, &log);
        assert_eq!(case.findings.organ(Organ::Liver).tumor, TumorPresence::Yes);
        assert_eq!(case.note, "");
        assert_eq!(case.changed, vec!["liver.tumor".to_string()]);
        // A new edit clears what could be redone.
        let mut longer = log.to_vec();
        longer.push(entry(6, "key_slice", json!({"index": 12}), None));
        assert_eq!(History::of(&longer).redoable, Vec::<i64>::new());
    }
}
