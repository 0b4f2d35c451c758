//! Findings: the checkable facts of a CT tumor report, per organ, plus the key evidence slice.
//!
//! This is the data model the whole E-MRL loop turns on: the report reader ([`reader`])
//! extracts it from free text with the character spans it came from, the writer ([`writer`])
//! renders it in the RadGPT/AbdomenAtlas structured style or as a one-slice local description,
//! `scoring` compares two of them, and review corrections edit it. Serialised as versioned
//! JSON (see "Findings JSON" in `docs/manual.md`).
//!
//! Core module: no file formats, no GPU, no UI.

pub mod evidence;
pub mod reader;
pub mod summary;
pub mod writer;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

pub use evidence::{SliceRange, evidence_problems};
pub use reader::{LesionEvidenceLine, ReadReport, UnreadSentence, read_report};
pub use writer::{evidence_words, write_local_description, write_report};

/// Version of the Findings JSON layout.
pub const FINDINGS_VERSION: u32 = 1;

fn current_version() -> u32 {
    FINDINGS_VERSION
}

/// Organs with tumor labels in the datasets Keyslice targets (AbdomenAtlas / RadGPT).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Organ {
    /// Liver.
    Liver,
    /// Pancreas.
    Pancreas,
    /// Left kidney.
    KidneyLeft,
    /// Right kidney.
    KidneyRight,
}

impl Organ {
    /// Every organ, in report order.
    pub const ALL: [Self; 4] = [
        Self::Liver,
        Self::Pancreas,
        Self::KidneyLeft,
        Self::KidneyRight,
    ];

    /// The JSON / CLI name (`"kidney_left"`).
    #[must_use]
    pub fn key(self) -> &'static str {
        match self {
            Self::Liver => "liver",
            Self::Pancreas => "pancreas",
            Self::KidneyLeft => "kidney_left",
            Self::KidneyRight => "kidney_right",
        }
    }

    /// How a report names it (`"left kidney"`).
    #[must_use]
    pub fn display_name(self) -> &'static str {
        match self {
            Self::Liver => "liver",
            Self::Pancreas => "pancreas",
            Self::KidneyLeft => "left kidney",
            Self::KidneyRight => "right kidney",
        }
    }

    /// Whether this is one of the kidneys.
    #[must_use]
    pub fn is_kidney(self) -> bool {
        matches!(self, Self::KidneyLeft | Self::KidneyRight)
    }
}

impl fmt::Display for Organ {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.display_name())
    }
}

/// Whether an organ has a tumor, as a report states it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TumorPresence {
    /// A tumor is reported.
    Yes,
    /// The report says there is none.
    No,
    /// The report hedges ("cannot exclude", "possible", "likely cyst").
    Uncertain,
    /// The report does not mention the organ; by the RadGPT convention that means no tumor.
    #[default]
    NotMentioned,
}

impl TumorPresence {
    /// `true` for a reported tumor, `false` for none; uncertain counts as reported (a reader
    /// who hedges has flagged it), not mentioned as none.
    #[must_use]
    pub fn as_positive(self) -> bool {
        matches!(self, Self::Yes | Self::Uncertain)
    }
}

/// Attenuation (enhancement) relative to the organ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attenuation {
    /// Darker than the organ.
    Hypo,
    /// Like the organ.
    Iso,
    /// Brighter than the organ.
    Hyper,
    /// Mixed or heterogeneous.
    Mixed,
}

impl Attenuation {
    /// The structured-report word (`"hypoattenuating"`).
    #[must_use]
    pub fn word(self) -> &'static str {
        match self {
            Self::Hypo => "hypoattenuating",
            Self::Iso => "isoattenuating",
            Self::Hyper => "hyperattenuating",
            Self::Mixed => "mixed attenuation",
        }
    }
}

/// Part of the pancreas.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PancreasPart {
    /// Head.
    Head,
    /// Uncinate process.
    Uncinate,
    /// Body (and neck).
    Body,
    /// Tail.
    Tail,
}

/// Pole of a kidney.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KidneyPole {
    /// Upper pole.
    Upper,
    /// Interpolar region.
    Mid,
    /// Lower pole.
    Lower,
}

/// Where a lesion sits inside its organ.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Location {
    /// Couinaud liver segments 1–8, sorted, without duplicates ("segment 7/8" → `[7, 8]`;
    /// "right lobe" → `[5, 6, 7, 8]`).
    LiverSegments(Vec<u8>),
    /// Part of the pancreas.
    Pancreas(PancreasPart),
    /// Pole of a kidney.
    Kidney(KidneyPole),
}

impl Location {
    /// Whether two locations agree: overlapping liver segments, or the same part or pole.
    #[must_use]
    pub fn agrees_with(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::LiverSegments(a), Self::LiverSegments(b)) => a.iter().any(|s| b.contains(s)),
            _ => self == other,
        }
    }
}

/// Long axis × the perpendicular short axis on the axial plane, in centimetres.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LesionSize {
    /// Longest axial diameter.
    pub long_cm: f64,
    /// Longest diameter perpendicular to it; `None` when only one number was given.
    pub short_cm: Option<f64>,
}

/// Byte offsets `[start, end)` into the report text a value was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

impl Span {
    /// The covered text.
    #[must_use]
    pub fn text(self, report: &str) -> &str {
        report.get(self.start..self.end).unwrap_or("")
    }
}

/// Where each value of a lesion came from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LesionSpans {
    /// The words naming the lesion ("hypodense lesion").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lesion: Option<Span>,
    /// The size words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<Span>,
    /// The location words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<Span>,
    /// The attenuation words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attenuation: Option<Span>,
    /// The count words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<Span>,
}

/// One lesion (or a group the report describes together, with `count`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Lesion {
    /// Size, when stated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<LesionSize>,
    /// Location, when stated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
    /// Attenuation, when stated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attenuation: Option<Attenuation>,
    /// Number of lesions this entry stands for, when the report gives one ("multiple (3)").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// Its own evidence, when the report gives it one (`Liver lesion 1 evidence: …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
    /// Source spans (empty for findings that were not read from text).
    #[serde(default, skip_serializing_if = "is_default")]
    pub spans: LesionSpans,
}

/// One lesion's own evidence: the slice that shows it best, its box there and the slices it
/// is seen on (`Liver lesion 2 evidence: slice K, columns C0-C1, rows R0-R1, slices A-B`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// The slice that shows it best.
    pub key_slice: u32,
    /// Its box on that slice (voxel corners, inclusive).
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "box")]
    pub slice_box: Option<SliceBox>,
    /// The slices it is seen on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slices: Option<SliceRange>,
}

/// What a report says about one organ.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OrganFindings {
    /// Tumor present?
    pub tumor: TumorPresence,
    /// Lesions described (may be empty even when `tumor` is yes: "a liver mass").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lesions: Vec<Lesion>,
    /// The words that decided `tumor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<Span>,
}

/// The key evidence slice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeySlice {
    /// Axial slice index `k` in the volume (inferior → superior).
    pub index: u32,
    /// Patient z of that slice in millimetres, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub z_mm: Option<f64>,
    /// DICOM SOP Instance UID of that slice, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sop_instance_uid: Option<String>,
    /// Where it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<Span>,
}

/// A box on the key slice: voxel columns/rows, inclusive, and optionally millimetres.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SliceBox {
    /// `[column_min, row_min, column_max, row_max]` in voxels.
    pub voxels: [u32; 4],
    /// The same corners in patient millimetres (x, y of the two corners), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mm: Option<[f64; 4]>,
}

impl SliceBox {
    /// Intersection over union of two boxes (inclusive voxel corners), in [0, 1]; 0 when
    /// either has its corners out of order.
    #[must_use]
    pub fn iou(&self, other: &Self) -> f64 {
        let area = |[c0, r0, c1, r1]: [u32; 4]| -> f64 {
            if c1 < c0 || r1 < r0 {
                0.0
            } else {
                f64::from(c1 - c0 + 1) * f64::from(r1 - r0 + 1)
            }
        };
        let (a, b) = (self.voxels, other.voxels);
        let (sa, sb) = (area(a), area(b));
        if sa == 0.0 || sb == 0.0 {
            return 0.0;
        }
        let both = [
            a[0].max(b[0]),
            a[1].max(b[1]),
            a[2].min(b[2]),
            a[3].min(b[3]),
        ];
        let overlap = area(both);
        overlap / (sa + sb - overlap)
    }
}

impl Evidence {
    /// The evidence as the findings of a report that names only it (key slice, box and
    /// lesion slices), so that the one set of evidence checks reads it.
    #[must_use]
    pub fn as_findings(&self) -> Findings {
        Findings {
            key_slice: Some(KeySlice {
                index: self.key_slice,
                z_mm: None,
                sop_instance_uid: None,
                span: None,
            }),
            slice_box: self.slice_box.clone(),
            lesion_slices: self.slices,
            ..Findings::default()
        }
    }
}

/// A lesion's long and short axes on its slice, as a reader draws them with a ruler: each a
/// segment between two points, `[column, row]` in voxels of the slice (the first pixel's
/// centre is `[0, 0]`), reaching the outer edges of its end pixels, so that each segment is
/// as long as the diameter it stands for.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LesionAxes {
    /// The longest diameter.
    pub long: [[f64; 2]; 2],
    /// The widest extent at right angles to it.
    pub short: [[f64; 2]; 2],
}

impl LesionAxes {
    /// Whether every point is a number on a slice of `columns` × `rows` pixels (its pixels'
    /// outer edges included).
    #[must_use]
    pub fn fits(&self, columns: usize, rows: usize) -> bool {
        let inside = |[column, row]: [f64; 2]| {
            (-0.5..=columns as f64 - 0.5).contains(&column)
                && (-0.5..=rows as f64 - 0.5).contains(&row)
        };
        self.long.into_iter().chain(self.short).all(inside)
    }

    /// The two segments' lengths in voxels (long, short).
    #[must_use]
    pub fn lengths(&self) -> (f64, f64) {
        let length = |[a, b]: [[f64; 2]; 2]| (a[0] - b[0]).hypot(a[1] - b[1]);
        (length(self.long), length(self.short))
    }
}

/// Everything Keyslice extracts from a report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Findings {
    /// Layout version ([`FINDINGS_VERSION`]; the current one when left out).
    #[serde(default = "current_version")]
    pub version: u32,
    /// One entry per organ in [`Organ::ALL`], sorted by organ.
    pub organs: BTreeMap<Organ, OrganFindings>,
    /// The key evidence slice, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_slice: Option<KeySlice>,
    /// A box on the key slice, when given.
    #[serde(default, rename = "box", skip_serializing_if = "Option::is_none")]
    pub slice_box: Option<SliceBox>,
    /// The axial slices the key lesion covers (its 3D extent along the slice axis), when
    /// given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lesion_slices: Option<SliceRange>,
    /// What a verifier saw inside the box it was shown (`Inside the box: …`), when asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inside_box: Option<TumorPresence>,
}

impl Default for Findings {
    fn default() -> Self {
        Self {
            version: FINDINGS_VERSION,
            organs: Organ::ALL
                .iter()
                .map(|&organ| (organ, OrganFindings::default()))
                .collect(),
            key_slice: None,
            slice_box: None,
            lesion_slices: None,
            inside_box: None,
        }
    }
}

impl Findings {
    /// Makes the findings keep the rule no report may break, and says what that dropped, one
    /// sentence each: an organ without a tumor (no, not mentioned) holds no lesion, and
    /// findings without any tumor have no evidence box and no lesion slice range (what the
    /// diagnosis prompt asks: "when no organ has a tumor, give no box and no lesion slices";
    /// a key slice is then optional, the one rule the reward's form check keeps too). The
    /// editor, the exports and the SR writer all go through it; the SR reader refuses a
    /// document that breaks it.
    pub fn drop_contradictions(&mut self) -> Vec<String> {
        let mut dropped = Vec::new();
        for (organ, finding) in &mut self.organs {
            if !finding.tumor.as_positive() && !finding.lesions.is_empty() {
                dropped.push(format!(
                    "{}: no tumor, so its {} lesion(s) are dropped",
                    organ.key(),
                    finding.lesions.len()
                ));
                finding.lesions.clear();
            }
        }
        let any_tumor = self
            .organs
            .values()
            .any(|finding| finding.tumor.as_positive());
        if !any_tumor {
            if self.slice_box.take().is_some() {
                dropped.push("no organ has a tumor, so the evidence box is dropped".into());
            }
            if let Some(range) = self.lesion_slices.take() {
                dropped.push(format!(
                    "no organ has a tumor, so the lesion slice range {}–{} is dropped",
                    range.first, range.last
                ));
            }
        }
        dropped
    }

    /// The entry for `organ` (every organ has one).
    #[must_use]
    pub fn organ(&self, organ: Organ) -> &OrganFindings {
        static EMPTY: OrganFindings = OrganFindings {
            tumor: TumorPresence::NotMentioned,
            lesions: Vec::new(),
            span: None,
        };
        self.organs.get(&organ).unwrap_or(&EMPTY)
    }

    /// Mutable entry for `organ`, created if missing.
    pub fn organ_mut(&mut self, organ: Organ) -> &mut OrganFindings {
        self.organs.entry(organ).or_default()
    }

    /// The same findings with every span removed (for comparing content only).
    #[must_use]
    pub fn without_spans(&self) -> Self {
        let mut copy = self.clone();
        for organ in copy.organs.values_mut() {
            organ.span = None;
            for lesion in &mut organ.lesions {
                lesion.spans = LesionSpans::default();
            }
        }
        if let Some(key) = copy.key_slice.as_mut() {
            key.span = None;
        }
        copy
    }

    /// Whether a tumor is stated in `organ` without hedging (yes; not uncertain).
    #[must_use]
    pub fn states_tumor(&self, organ: Organ) -> bool {
        self.organ(organ).tumor == TumorPresence::Yes
    }

    /// The organs a tumor is stated in without hedging, in report order.
    #[must_use]
    pub fn tumor_organs(&self) -> Vec<Organ> {
        Organ::ALL
            .into_iter()
            .filter(|&organ| self.states_tumor(organ))
            .collect()
    }

    /// Whether any organ has a tumor reported (yes or uncertain).
    #[must_use]
    pub fn any_tumor(&self) -> bool {
        self.organs.values().any(|organ| organ.tumor.as_positive())
    }
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// The axial slices a true lesion covers, from its mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LesionExtent {
    /// Organ of the lesion.
    pub organ: Organ,
    /// First slice (inclusive).
    pub first_slice: u32,
    /// Last slice (inclusive).
    pub last_slice: u32,
    /// Slice with the largest lesion area (the training key slice).
    pub largest_slice: u32,
}
