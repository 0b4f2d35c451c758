//! Report text → [`Findings`], deterministically, with the span of every value it extracted
//! and the sentences it could not interpret (returned, never dropped).
//!
//! How it reads, in order:
//! 1. split the text into sentences and lines (a `.` between digits is a decimal point) and
//!    clauses at ", but" / "whereas";
//! 2. follow the structure of RadGPT-style reports: `FINDINGS:` / `IMPRESSION:` sections,
//!    organ headers (`Liver lesions:`), lesion headers (`Liver lesion 1:`) and key/value lines
//!    (`Location:`, `Size:`, `Enhancement relative to liver:`, `Count:`);
//! 3. in free sentences, find the organs named (or implied by a location such as "segment
//!    VII"), then the cues: uncertainty ("cannot exclude", "possible", "likely cyst") wins over
//!    negation ("no", "without", "unremarkable"), which wins over a lesion word ("mass",
//!    "lesion", "tumor"); a lesion with any attribute (size, location, attenuation, count)
//!    becomes a lesion entry;
//! 4. the IMPRESSION confirms presence but adds no lesion to an organ already described;
//! 5. organs never mentioned are `not_mentioned` (no tumor, the RadGPT convention).
//!
//! A lesion header may carry its first attribute on the same line, as the prompts' own
//! example does (`Liver lesion 1: Location: hepatic segment 7. Size: 3.1 x 2.4 cm.
//! Enhancement relative to liver: Hypoattenuating.`); numbered items (`1. …`, `2) …`) are
//! read without their numbers; liver sub-segments (`IVa`, `4b`, `S4a`) count as their segment.
//!
//! Sizes in mm are converted to cm; `Volume: … cm^3` and HU values are not sizes; "(image
//! 123)" is RadGPT's canonical-grid slice, not the key slice, and is ignored. The key slice
//! is a 0-based index (`Key slice: 117`); PACS wording (`Key image: series 3, image 118`)
//! counts images from 1 and is read as the same slice.
//!
//! The evidence lines are read strictly: `Box on key slice: columns C0-C1, rows R0-R1` keeps
//! its corners as written (out-of-order corners are a fault for
//! [`super::evidence_problems`], not something to swap), a box given `on slice N` other than
//! the key slice is not used and named in [`ReadReport::problems`], as is a box line whose
//! numbers cannot be read; `Lesion slices: A-B` is the lesion's slice range and `Inside the
//! box: …` a verifier's answer about the box it was shown. A lesion's own evidence, one line
//! per lesion (`Liver lesion 2 evidence: slice K, columns C0-C1, rows R0-R1, slices A-B`), is
//! kept in [`ReadReport::lesion_evidence`] for that lesion alone and adds nothing else.

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use super::{
    Attenuation, Evidence, Findings, KeySlice, KidneyPole, Lesion, LesionSize, Location, Organ,
    PancreasPart, SliceBox, SliceRange, Span, TumorPresence,
};

/// A sentence the reader could not turn into findings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UnreadSentence {
    /// Where it is.
    pub span: Span,
    /// The sentence.
    pub text: String,
    /// Why it was not read.
    pub reason: String,
}

/// What [`read_report`] returns.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReadReport {
    /// The findings.
    pub findings: Findings,
    /// Sentences that said nothing Keyslice could use.
    pub unread: Vec<UnreadSentence>,
    /// Evidence the text gives but that cannot be used as written (a box on another slice
    /// than the key slice, a box line without readable corners), as sentences.
    pub problems: Vec<String>,
    /// Every key slice the text names, in order, each once (the findings keep the last).
    pub key_slices: Vec<u32>,
    /// Organs the text states both with and without a tumor, each definitely ("no other
    /// lesions" after a lesion is not a contradiction).
    pub contradictions: Vec<Organ>,
    /// Each lesion's own evidence, as its line gives it, in the order of the text.
    pub lesion_evidence: Vec<LesionEvidenceLine>,
}

/// One lesion's own evidence line: `Liver lesion 2 evidence: slice K, columns C0-C1, rows
/// R0-R1, slices A-B` (box and slices optional).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LesionEvidenceLine {
    /// The organ.
    pub organ: Organ,
    /// The lesion's index among the organ's lesions (the line counts from 1).
    pub lesion: usize,
    /// The slice that shows it best.
    pub key_slice: u32,
    /// Its box on that slice, corners as written.
    pub slice_box: Option<SliceBox>,
    /// The slices it is seen on.
    pub slices: Option<SliceRange>,
}

macro_rules! regex {
    ($name:ident, $pattern:expr) => {
        static $name: LazyLock<Regex> = LazyLock::new(|| {
            // The patterns are constants checked by the tests; an invalid one is a bug.
            Regex::new($pattern).unwrap_or_else(|error| panic!("invalid pattern: {error}"))
        });
    };
}

regex!(
    KEY_SLICE,
    r"(?i)\bkey(?:\s+evidence)?\s+slice\s*(?:index\s*)?(?:is\s*)?[:#=]?\s*(\d+)|\bslice\s+(\d+)\s+is\s+the\s+key(?:\s+evidence)?\s+slice"
);
regex!(KEY_Z, r"(?i)\bz\s*=\s*(-?\d+(?:\.\d+)?)\s*mm");
regex!(
    KEY_UID,
    r"(?i)sop\s+instance\s+uid\s*:?\s*([0-9]+(?:\.[0-9]+)*)"
);
regex!(
    BOX,
    r"(?i)columns\s+(\d+)\s*[-–]\s*(\d+)\s*,\s*rows\s+(\d+)\s*[-–]\s*(\d+)"
);
regex!(
    BOX_LINE,
    r"(?i)^\s*(?:evidence\s+)?box\b|\bbox\s+on\s+(?:the\s+)?(?:key\s+)?slice\b"
);
regex!(BOX_SLICE, r"(?i)\bbox\s+on\s+slice\s+(\d+)");
regex!(
    LESION_SLICES,
    r"(?i)\blesion\s+slices?\s*(?:are|is)?\s*[:=]?\s*(\d+)\s*(?:-|–|to)\s*(\d+)"
);
regex!(
    LESION_EVIDENCE,
    r"(?im)^[ \t]*(liver|pancreas|pancreatic|left\s+kidney|right\s+kidney|kidney\s+left|kidney\s+right)\s+lesion\s+(\d{1,4})\s+evidence\s*:\s*(?:key\s+)?slice\s+(\d{1,9})(?:\s*,\s*columns\s+(\d{1,9})\s*[-–]\s*(\d{1,9})\s*,\s*rows\s+(\d{1,9})\s*[-–]\s*(\d{1,9}))?(?:\s*,\s*slices\s+(\d{1,9})\s*[-–]\s*(\d{1,9}))?[ \t.\r]*$"
);
regex!(INSIDE_BOX, r"(?i)\binside\s+the\s+box\s*[:,-]\s*(.+)$");
regex!(
    SLICE_PREFIX,
    r"(?i)^\s*(?:on\s+)?(?:this\s+|the\s+)?(?:slice|image)(?:\s+\d+)?\s*[:,-]?\s*"
);
regex!(
    ABNORMAL,
    r"(?i)\babnormal(?:ity|ities)?\b|\bsuspicious\b|\bfindings?\b"
);
regex!(
    BARE_NEGATIVE,
    r"(?i)^\s*(?:unremarkable|normal|none|negative|nothing|clear|clean)\s*\.?\s*$"
);
regex!(
    NOT_ON_SLICE,
    r"(?i)\bnot\s+(?:on|in|visible|included|shown|seen|imaged|captured|depicted)\b.*\b(?:slice|image|section|field\s+of\s+view)\b|\boutside\s+(?:this|the)\s+(?:slice|image|section|field)|\bdoes\s+not\s+(?:include|show|contain|cover)\s+the\b|\bnot\s+included\b|\bnot\s+in\s+(?:the\s+)?field\b"
);
regex!(
    BOX_MM,
    r"(?i)x\s+(-?\d+(?:\.\d+)?)\s+to\s+(-?\d+(?:\.\d+)?)\s*mm\s*,\s*y\s+(-?\d+(?:\.\d+)?)\s+to\s+(-?\d+(?:\.\d+)?)\s*mm"
);
regex!(
    SIZE_PAIR,
    r"(?i)(\d+(?:\.\d+)?)\s*(cm|mm)?\s*(?:x|×|by)\s*(\d+(?:\.\d+)?)(?:\s*(?:cm|mm)?\s*(?:x|×|by)\s*\d+(?:\.\d+)?)?\s*(cm|mm)\b"
);
regex!(
    SIZE_SINGLE,
    r"(?i)(\d+(?:\.\d+)?)\s*-?\s*(cm|mm)\b(\s*\^?\s*[23]|\s*3\b)?"
);
regex!(
    LIVER_SEGMENTS,
    r"(?i)\b(?:hepatic\s+)?segments?\s+((?:[1-8]|viii|vii|vi|iv|v|iii|ii|i)[ab]?\b(?:\s*(?:/|,|and|&|-|to)\s*(?:[1-8]|viii|vii|vi|iv|v|iii|ii|i)[ab]?\b)*)"
);
regex!(
    LIVER_SHORT,
    r"(?i)\bs([1-8])[ab]?(?:\s*/\s*s?([1-8])[ab]?)?\b"
);
regex!(
    LIVER_LOBE,
    r"(?i)\b(right|left)\s+(?:hepatic\s+)?lobe\b|\bcaudate\b|\bleft\s+lateral\s+segment\b"
);
regex!(PANCREAS_PART, r"(?i)\b(head|uncinate|neck|body|tail)\b");
regex!(
    KIDNEY_POLE,
    r"(?i)\b(upper|superior|lower|inferior)\s+pole\b|\binterpolar\b|\bmid(?:dle)?\s*(?:pole|portion|kidney)\b"
);
regex!(
    ATTENUATION,
    r"(?i)\b(hypo(?:-)?(?:attenuating|dense|density|enhancing|attenuation)|low[- ](?:attenuation|density)|iso(?:-)?(?:attenuating|dense|enhancing)|hyper(?:-)?(?:attenuating|dense|density|enhancing|vascular)|(?:mixed|heterogeneous)(?:\s+attenuation|\s+enhancement)?)\b"
);
regex!(
    COUNT,
    r"(?i)\bmultiple\s*\((\d+)\)|\bcount\s*:\s*(\d+)|\b(\d+|two|three|four|five|six|several)\s+(?:\w+\s+){0,2}(?:lesions|masses|nodules|tumou?rs|metastases|hypodensities)\b"
);
regex!(
    ORGAN,
    r"(?i)\b(?:(left|right)\s+(?:kidney|renal)|(kidneys|bilateral\s+renal|renal|kidney)|(liver|hepatic)|(pancreas|pancreatic))\b"
);
regex!(
    UNCERTAIN,
    r"(?i)\bcan\s*not\s+(?:be\s+)?exclude|\bcannot\s+(?:be\s+)?(?:excluded|exclude)|\bnot\s+(?:be\s+)?excluded|\bpossibl[ey]\b|\bprobabl[ey]\b|\bmay\s+(?:represent|be|harbou?r|contain)\b|\blikely\s+(?:a\s+)?(?:cyst|hemangioma|haemangioma|benign)|\bindeterminate\b|\bquestionable\b|\bequivocal\b|\bcould\s+represent\b|\btoo\s+small\s+to\s+characteri[sz]e\b"
);
regex!(
    NEGATION,
    r"(?i)\bno\b|\bnot\s+(?:seen|identified|visuali[sz]ed|present|detected)\b|\bwithout\b|\bnegative\s+for\b|\bfree\s+of\b|\babsence\s+of\b|\bunremarkable\b|\bnormal\b|\bnone\b|\bnothing\b"
);
regex!(
    LESION,
    r"(?i)\b(?:lesions?|mass(?:es)?|tumou?rs?|nodules?|neoplasms?|carcinomas?|metastas[ie]s|hypodensit(?:y|ies)|cancer|malignan(?:cy|t)|hcc|rcc|pdac)\b"
);
regex!(CYST, r"(?i)\bcysts?\b|\bcystic\b");
regex!(OTHER, r"(?i)\b(?:other|additional|further|new)\b");
regex!(SECTION, r"(?i)^\s*(findings|impression)\s*(?::\s*|$)");
regex!(
    LESION_HEADER,
    r"(?i)^\s*(liver|hepatic|pancreatic|pancreas|left\s+kidney|right\s+kidney|left\s+renal|right\s+renal)\s+lesion\s+(\d+)\s*:\s*"
);
regex!(LIST_NUMBER, r"^\s*\(?\d{1,2}[.)]\s+");
regex!(
    KEY_IMAGE,
    r"(?i)\bkey\s+image\s*[:#=]?\s*(?:series\s+\d+\s*,\s*)?(?:image|slice|instance)\s*(?:number\s*)?[:#]?\s*(\d+)"
);
regex!(
    ORGAN_HEADER,
    r"(?i)^\s*(liver|hepatic|pancreatic|pancreas|left\s+kidney|right\s+kidney|kidney|renal)\s+lesions\s*:\s*$"
);
regex!(
    KEY_VALUE,
    r"(?i)^\s*(location|size|enhancement(?:\s+relative\s+to\s+\w+)?|attenuation|count|number)\s*:\s*"
);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    Findings,
    Impression,
}

struct State {
    findings: Findings,
    explicit: [bool; 4],
    /// Per organ: stated definitely with a tumor, and definitely without one.
    definite: [[bool; 2]; 4],
    key_slices: Vec<u32>,
    unread: Vec<UnreadSentence>,
    section: Section,
    context_organ: Option<Organ>,
    /// Organ and index of the lesion that key/value lines fill.
    current_lesion: Option<(Organ, usize)>,
    /// The slice a box line names (`Box on slice N`), checked against the key slice at the
    /// end.
    box_slice: Option<u32>,
    problems: Vec<String>,
}

fn organ_index(organ: Organ) -> usize {
    match organ {
        Organ::Liver => 0,
        Organ::Pancreas => 1,
        Organ::KidneyLeft => 2,
        Organ::KidneyRight => 3,
    }
}

/// Reads a report (structured or narrative) into findings.
#[must_use]
pub fn read_report(text: &str) -> ReadReport {
    let mut state = State {
        findings: Findings::default(),
        explicit: [false; 4],
        definite: [[false; 2]; 4],
        key_slices: Vec::new(),
        unread: Vec::new(),
        section: Section::Findings,
        context_organ: None,
        current_lesion: None,
        box_slice: None,
        problems: Vec::new(),
    };
    let (lesion_evidence, evidence_lines) = lesion_evidence_lines(text);
    for segment in segments(text) {
        // A lesion's evidence line speaks of that lesion's evidence alone.
        if evidence_lines
            .iter()
            .any(|line| line.start <= segment.start && segment.end <= line.end)
        {
            continue;
        }
        read_segment(text, segment, &mut state);
    }
    if let (Some(slice), Some(slice_box)) = (state.box_slice, &state.findings.slice_box) {
        let key = state.findings.key_slice.as_ref().map(|key| key.index);
        if key != Some(slice) {
            let [c0, r0, c1, r1] = slice_box.voxels;
            state.problems.push(format!(
                "the box (columns {c0}-{c1}, rows {r0}-{r1}) is given on slice {slice}, {}; it is not used",
                key.map_or_else(
                    || "and no key slice is named".to_string(),
                    |key| format!("not on the key slice {key}")
                )
            ));
            state.findings.slice_box = None;
        }
    }
    // Each lesion keeps its own evidence (the first line naming it).
    for line in lesion_evidence.iter().rev() {
        if let Some(lesion) = state
            .findings
            .organ_mut(line.organ)
            .lesions
            .get_mut(line.lesion)
        {
            lesion.evidence = Some(Evidence {
                key_slice: line.key_slice,
                slice_box: line.slice_box.clone(),
                slices: line.slices,
            });
        }
    }
    let contradictions = Organ::ALL
        .into_iter()
        .filter(|&organ| state.definite[organ_index(organ)] == [true, true])
        .collect();
    ReadReport {
        findings: state.findings,
        unread: state.unread,
        problems: state.problems,
        key_slices: state.key_slices,
        contradictions,
        lesion_evidence,
    }
}

/// Every lesion evidence line of `text` ([`LESION_EVIDENCE`]) and where each stands.
fn lesion_evidence_lines(text: &str) -> (Vec<LesionEvidenceLine>, Vec<Span>) {
    let mut lines = Vec::new();
    let mut spans = Vec::new();
    for captures in LESION_EVIDENCE.captures_iter(text) {
        let number = |at: usize| {
            captures
                .get(at)
                .and_then(|m| m.as_str().parse::<u32>().ok())
        };
        let organ_words = captures[1].to_ascii_lowercase();
        let organ = if organ_words.starts_with("liver") {
            Organ::Liver
        } else if organ_words.starts_with("pancrea") {
            Organ::Pancreas
        } else if organ_words.contains("left") {
            Organ::KidneyLeft
        } else {
            Organ::KidneyRight
        };
        let (Some(lesion), Some(key_slice)) = (number(2), number(3)) else {
            continue;
        };
        if lesion == 0 {
            continue;
        }
        let slice_box = match (number(4), number(5), number(6), number(7)) {
            (Some(c0), Some(c1), Some(r0), Some(r1)) => Some(SliceBox {
                voxels: [c0, r0, c1, r1],
                mm: None,
            }),
            _ => None,
        };
        let slices = number(8)
            .zip(number(9))
            .map(|(first, last)| SliceRange { first, last });
        if let Some(whole) = captures.get(0) {
            spans.push(Span {
                start: whole.start(),
                end: whole.end(),
            });
        }
        lines.push(LesionEvidenceLine {
            organ,
            lesion: lesion as usize - 1,
            key_slice,
            slice_box,
            slices,
        });
    }
    (lines, spans)
}

/// Splits into sentences/lines/clauses, trimmed, as spans.
fn segments(text: &str) -> Vec<Span> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut start = 0;
    let push = |start: usize, end: usize, spans: &mut Vec<Span>| {
        let piece = &text[start..end];
        let leading = piece.len() - piece.trim_start().len();
        let trailing = piece.len() - piece.trim_end().len();
        if leading + trailing < piece.len() {
            spans.push(Span {
                start: start + leading,
                end: end - trailing,
            });
        }
    };
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        let decimal = byte == b'.'
            && index > 0
            && bytes[index - 1].is_ascii_digit()
            && bytes.get(index + 1).is_some_and(u8::is_ascii_digit);
        // "1. Hepatic metastasis": a list item's number is not a sentence.
        let item_number = byte == b'.' && {
            let before = text[start..index].trim();
            !before.is_empty() && before.len() <= 2 && before.bytes().all(|b| b.is_ascii_digit())
        };
        let ends = matches!(byte, b'\n' | b';' | b'!' | b'?')
            || (byte == b'.' && !decimal && !item_number);
        if ends {
            push(start, index, &mut spans);
            start = index + 1;
        }
        index += 1;
    }
    push(start, bytes.len(), &mut spans);
    // Clauses joined by "but" / "whereas" state different things about different organs.
    let mut clauses = Vec::with_capacity(spans.len());
    for span in spans {
        let piece = &text[span.start..span.end];
        let lower = piece.to_ascii_lowercase();
        let mut cut = span.start;
        for separator in [", but ", " but ", ", whereas ", " whereas ", ", while "] {
            if let Some(position) = lower.find(separator) {
                let at = span.start + position;
                if at > cut {
                    push(cut, at, &mut clauses);
                    cut = at + separator.len();
                }
                break;
            }
        }
        push(cut, span.end, &mut clauses);
    }
    clauses
}

fn match_span(found: &regex::Match<'_>, offset: usize) -> Span {
    Span {
        start: found.start() + offset,
        end: found.end() + offset,
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "one ordered pass over the kinds of line a report has"
)]
fn read_segment(text: &str, span: Span, state: &mut State) {
    let sentence = &text[span.start..span.end];
    let offset = span.start;
    if let Some(captures) = SECTION.captures(sentence) {
        state.section = if captures[1].eq_ignore_ascii_case("impression") {
            Section::Impression
        } else {
            Section::Findings
        };
        state.current_lesion = None;
        state.context_organ = None;
        // "IMPRESSION: Hepatic metastasis." on one line: read the rest in the new section.
        let heading_end = captures.get(0).map_or(sentence.len(), |found| found.end());
        let rest = Span {
            start: offset + heading_end,
            end: span.end,
        };
        if rest.start < rest.end {
            read_segment(text, rest, state);
        }
        return;
    }
    // "1. Hepatic metastasis": the item number is not a sentence of its own.
    if let Some(number) = LIST_NUMBER.find(sentence) {
        let rest = Span {
            start: offset + number.end(),
            end: span.end,
        };
        if rest.start < rest.end {
            read_segment(text, rest, state);
        }
        return;
    }
    let mut used = read_key_slice(sentence, offset, state);
    if let Some(captures) = LESION_HEADER.captures(sentence) {
        let Some(organ) = organ_from_header(&captures[1]) else {
            return;
        };
        // "Liver lesion 1: Location: hepatic segment 7": the rest of the line is the first
        // attribute of the lesion the header opens.
        let header_end = captures.get(0).map_or(sentence.len(), |found| found.end());
        let rest = Span {
            start: offset + header_end,
            end: span.end,
        };
        state.context_organ = Some(organ);
        if state.section == Section::Impression && !state.findings.organ(organ).lesions.is_empty() {
            return;
        }
        mark(state, organ, TumorPresence::Yes, span, false);
        state.definite[organ_index(organ)][0] = true;
        let entry = state.findings.organ_mut(organ);
        entry.lesions.push(Lesion {
            evidence: None,
            spans: super::LesionSpans {
                lesion: Some(span),
                ..super::LesionSpans::default()
            },
            ..Lesion::default()
        });
        state.current_lesion = Some((organ, entry.lesions.len() - 1));
        if rest.start < rest.end {
            read_segment(text, rest, state);
        }
        return;
    }
    if let Some(captures) = ORGAN_HEADER.captures(sentence) {
        state.current_lesion = None;
        match organ_from_header(&captures[1]) {
            Some(organ) => state.context_organ = Some(organ),
            None => state.context_organ = None,
        }
        return;
    }
    if let Some(found) = KEY_VALUE.find(sentence)
        && let Some((organ, index)) = state.current_lesion
    {
        let value_offset = offset + found.end();
        let value = &sentence[found.end()..];
        let key = found.as_str().to_ascii_lowercase();
        let lesion = &mut state.findings.organ_mut(organ).lesions[index];
        let read = if key.starts_with("location") {
            read_location(value, value_offset, Some(organ), lesion)
        } else if key.starts_with("size") {
            read_size(value, value_offset, lesion)
        } else if key.starts_with("count") || key.starts_with("number") {
            read_count(sentence, offset, lesion)
        } else {
            read_attenuation(value, value_offset, lesion)
        };
        if !read {
            unread(
                state,
                text,
                span,
                "a lesion attribute line whose value was not understood",
            );
        }
        return;
    }
    // "The pancreas is not on this slice.": the organ is spoken of, and nothing is said of a
    // tumor in it (a claim there stays unverified, not denied).
    if !LESION.is_match(sentence) && NOT_ON_SLICE.is_match(sentence) && ORGAN.is_match(sentence) {
        return;
    }
    // "No lesion is visible on this slice.", "Slice 40: no lesion." (what the verifier prompt
    // asks for when there is none): every organ the text has not spoken of has no tumor.
    if whole_slice_negative(sentence) {
        for organ in Organ::ALL {
            let finding = state.findings.organ_mut(organ);
            if finding.tumor == TumorPresence::NotMentioned {
                finding.tumor = TumorPresence::No;
            }
        }
        return;
    }
    used |= read_statement(sentence, offset, span, state);
    if !used {
        let reason = if ORGAN.is_match(sentence) {
            "names an organ but states nothing about a tumor"
        } else {
            "mentions no organ, lesion or key slice that Keyslice tracks"
        };
        unread(state, text, span, reason);
    }
}

/// Whether `sentence` says that the slice as a whole shows no lesion: it names no organ,
/// hedges nothing and speaks of no "other" lesion, and negates a lesion or an abnormality
/// ("No focal lesion is identified.", "Slice 40: nothing abnormal."), or, after a slice
/// prefix, is a bare negative ("Slice 40: unremarkable.").
fn whole_slice_negative(sentence: &str) -> bool {
    let prefix = SLICE_PREFIX.find(sentence).map_or(0, |found| found.end());
    let rest = &sentence[prefix..];
    if ORGAN.is_match(rest)
        || UNCERTAIN.is_match(rest)
        || OTHER.is_match(rest)
        || INSIDE_BOX.is_match(sentence)
    {
        return false;
    }
    if prefix > 0 && BARE_NEGATIVE.is_match(rest) {
        return true;
    }
    NEGATION.is_match(rest) && (LESION.is_match(rest) || ABNORMAL.is_match(rest))
}

fn unread(state: &mut State, text: &str, span: Span, reason: &str) {
    state.unread.push(UnreadSentence {
        span,
        text: span.text(text).to_string(),
        reason: reason.to_string(),
    });
}

fn organ_from_header(words: &str) -> Option<Organ> {
    let lower = words.to_ascii_lowercase();
    if lower.contains("left") {
        Some(Organ::KidneyLeft)
    } else if lower.contains("right") {
        Some(Organ::KidneyRight)
    } else if lower.starts_with("liver") || lower.starts_with("hepatic") {
        Some(Organ::Liver)
    } else if lower.starts_with("pancrea") {
        Some(Organ::Pancreas)
    } else {
        None
    }
}

/// Sets an organ's presence. Explicit statements are not overridden by weaker ones: a
/// definite lesion keeps "yes" against a later "no other lesions", and an explicit
/// "uncertain" is not promoted by a lesion header.
fn mark(
    state: &mut State,
    organ: Organ,
    presence: TumorPresence,
    span: Span,
    from_statement: bool,
) {
    let index = organ_index(organ);
    let entry = state.findings.organ_mut(organ);
    let current = entry.tumor;
    let replace = match (current, presence) {
        (TumorPresence::NotMentioned, _)
        | (TumorPresence::No, TumorPresence::Yes | TumorPresence::Uncertain) => true,
        (TumorPresence::Uncertain, TumorPresence::Yes) => !state.explicit[index],
        _ => false,
    };
    if replace {
        entry.tumor = presence;
        entry.span = Some(span);
        if from_statement && presence == TumorPresence::Uncertain {
            state.explicit[index] = true;
        }
    }
}

fn note_key_slice(state: &mut State, index: u32) {
    if !state.key_slices.contains(&index) {
        state.key_slices.push(index);
    }
}

fn read_key_slice(sentence: &str, offset: usize, state: &mut State) -> bool {
    let mut used = false;
    if let Some(captures) = KEY_SLICE.captures(sentence)
        && let (Some(whole), Ok(index)) = (
            captures.get(0),
            captures
                .get(1)
                .or_else(|| captures.get(2))
                .map_or("", |found| found.as_str())
                .parse::<u32>(),
        )
    {
        let z_mm = KEY_Z
            .captures(sentence)
            .and_then(|found| found[1].parse::<f64>().ok());
        let sop_instance_uid = KEY_UID.captures(sentence).map(|found| found[1].to_string());
        note_key_slice(state, index);
        state.findings.key_slice = Some(KeySlice {
            index,
            z_mm,
            sop_instance_uid,
            span: Some(match_span(&whole, offset)),
        });
        used = true;
    } else if let Some(captures) = KEY_IMAGE.captures(sentence)
        && let (Some(whole), Ok(number)) = (captures.get(0), captures[1].parse::<u32>())
        && number >= 1
    {
        // PACS words: image N counts from 1 along the stack, the key slice index from 0.
        note_key_slice(state, number - 1);
        state.findings.key_slice = Some(KeySlice {
            index: number - 1,
            z_mm: None,
            sop_instance_uid: None,
            span: Some(match_span(&whole, offset)),
        });
        used = true;
    }
    if let Some(captures) = BOX.captures(sentence) {
        let numbers: Vec<u32> = (1..=4)
            .filter_map(|group| captures[group].parse().ok())
            .collect();
        if let [c0, c1, r0, r1] = numbers[..] {
            let mm = BOX_MM.captures(sentence).and_then(|found| {
                let values: Vec<f64> = (1..=4)
                    .filter_map(|group| found[group].parse().ok())
                    .collect();
                match values[..] {
                    [x0, x1, y0, y1] => Some([x0, y0, x1, y1]),
                    _ => None,
                }
            });
            state.findings.slice_box = Some(SliceBox {
                voxels: [c0, r0, c1, r1],
                mm,
            });
            state.box_slice = BOX_SLICE
                .captures(sentence)
                .and_then(|found| found[1].parse().ok());
            used = true;
        }
    } else if BOX_LINE.is_match(sentence) {
        state.problems.push(format!(
            "the box line {:?} has no readable corners (columns C0-C1, rows R0-R1); no box is used",
            sentence.trim()
        ));
        used = true;
    }
    if let Some(captures) = LESION_SLICES.captures(sentence)
        && let (Ok(first), Ok(last)) = (captures[1].parse(), captures[2].parse())
    {
        state.findings.lesion_slices = Some(SliceRange { first, last });
        used = true;
    }
    if let Some(captures) = INSIDE_BOX.captures(sentence) {
        let answer = &captures[1];
        state.findings.inside_box = Some(if UNCERTAIN.is_match(answer) {
            TumorPresence::Uncertain
        } else if NEGATION.is_match(answer) {
            TumorPresence::No
        } else if LESION.is_match(answer) || answer.trim_start().to_lowercase().starts_with("yes") {
            TumorPresence::Yes
        } else {
            state.problems.push(format!(
                "the answer about the box {:?} says neither lesion nor no lesion",
                answer.trim()
            ));
            return true;
        });
        used = true;
    }
    used
}

/// A free sentence: organs, cues, attributes. Returns whether it said anything usable.
fn read_statement(sentence: &str, offset: usize, span: Span, state: &mut State) -> bool {
    let mut organs = organs_named(sentence);
    let mut lesion = Lesion::default();
    let location_read = read_location(sentence, offset, None, &mut lesion);
    if organs.is_empty()
        && let Some(implied) = lesion.location.as_ref().and_then(organ_of_location)
    {
        organs.push(implied);
    }
    let has_lesion_word = LESION.is_match(sentence);
    let has_cyst = CYST.is_match(sentence);
    let uncertain = UNCERTAIN.is_match(sentence);
    let negated = NEGATION.is_match(sentence) && !uncertain;
    if organs.is_empty() {
        // "A 2 cm hypodense lesion." under a "Liver lesions:" header.
        match state.context_organ {
            Some(organ) if has_lesion_word || has_cyst => organs.push(organ),
            _ => return false,
        }
    }
    // A kidney pole says nothing about which kidney unless the sentence does.
    let has_size = read_size(sentence, offset, &mut lesion);
    let has_attenuation = read_attenuation(sentence, offset, &mut lesion);
    let has_count = read_count(sentence, offset, &mut lesion);
    let described = location_read || has_size || has_attenuation || has_count;
    if !(has_lesion_word || has_cyst || negated || uncertain) {
        return false;
    }
    let presence = if uncertain {
        TumorPresence::Uncertain
    } else if negated {
        TumorPresence::No
    } else if has_lesion_word {
        TumorPresence::Yes
    } else {
        // A cyst, stated plainly, is not a tumor.
        TumorPresence::No
    };
    let about_others = OTHER.is_match(sentence);
    for &organ in &organs {
        if presence == TumorPresence::No && about_others {
            // "No other liver lesions": says nothing against the ones already described.
            if state.findings.organ(organ).tumor == TumorPresence::NotMentioned {
                mark(state, organ, TumorPresence::No, span, true);
            }
            continue;
        }
        mark(state, organ, presence, span, true);
        // A plain cyst is "no tumor" but not a statement against one.
        match presence {
            TumorPresence::Yes => state.definite[organ_index(organ)][0] = true,
            TumorPresence::No if negated => state.definite[organ_index(organ)][1] = true,
            _ => {}
        }
        // The IMPRESSION repeats what FINDINGS described: it adds no lesion to such an organ.
        let repeats_findings =
            state.section == Section::Impression && !state.findings.organ(organ).lesions.is_empty();
        let adds_lesion =
            described && presence != TumorPresence::No && organs.len() == 1 && !repeats_findings;
        if adds_lesion {
            let mut entry = lesion.clone();
            if entry
                .location
                .as_ref()
                .and_then(organ_of_location)
                .is_some_and(|implied| implied != organ)
                && !matches!((implied_kidney(&entry), organ.is_kidney()), (true, true))
            {
                entry.location = None;
                entry.spans.location = None;
            }
            if entry.spans.lesion.is_none() {
                entry.spans.lesion = LESION
                    .find(sentence)
                    .map(|found| match_span(&found, offset));
            }
            state.findings.organ_mut(organ).lesions.push(entry);
        }
    }
    true
}

fn implied_kidney(lesion: &Lesion) -> bool {
    matches!(lesion.location, Some(Location::Kidney(_)))
}

fn organ_of_location(location: &Location) -> Option<Organ> {
    match location {
        Location::LiverSegments(_) => Some(Organ::Liver),
        Location::Pancreas(_) => Some(Organ::Pancreas),
        Location::Kidney(_) => None,
    }
}

/// Organs a sentence names, in report order. "Kidneys", "bilateral renal" and a side-less
/// "kidney"/"renal" name both kidneys (the side is not known); a sided mention names one.
fn organs_named(sentence: &str) -> Vec<Organ> {
    let mut sides = Vec::new();
    let mut both_kidneys = false;
    let mut unsided_kidney = false;
    let mut others = Vec::new();
    for captures in ORGAN.captures_iter(sentence) {
        if let Some(side) = captures.get(1) {
            sides.push(if side.as_str().eq_ignore_ascii_case("left") {
                Organ::KidneyLeft
            } else {
                Organ::KidneyRight
            });
        } else if let Some(kidney) = captures.get(2) {
            let words = kidney.as_str().to_ascii_lowercase();
            if words == "kidneys" || words.starts_with("bilateral") {
                both_kidneys = true;
            } else {
                unsided_kidney = true;
            }
        } else if captures.get(3).is_some() {
            others.push(Organ::Liver);
        } else {
            others.push(Organ::Pancreas);
        }
    }
    let kidneys = if both_kidneys || (sides.is_empty() && unsided_kidney) {
        vec![Organ::KidneyLeft, Organ::KidneyRight]
    } else {
        sides
    };
    Organ::ALL
        .into_iter()
        .filter(|organ| others.contains(organ) || kidneys.contains(organ))
        .collect()
}

fn roman_or_digit(token: &str) -> Option<u8> {
    // Sub-segments (IVa, 4b) are read as their segment.
    let lower = token.to_ascii_lowercase();
    let bare = lower
        .strip_suffix(['a', 'b'])
        .filter(|rest| !rest.is_empty())
        .unwrap_or(&lower);
    Some(match bare {
        "1" | "i" => 1,
        "2" | "ii" => 2,
        "3" | "iii" => 3,
        "4" | "iv" => 4,
        "5" | "v" => 5,
        "6" | "vi" => 6,
        "7" | "vii" => 7,
        "8" | "viii" => 8,
        _ => return None,
    })
}

#[expect(
    clippy::too_many_lines,
    reason = "one block per organ's location vocabulary"
)]
fn read_location(text: &str, offset: usize, organ: Option<Organ>, lesion: &mut Lesion) -> bool {
    let allow = |candidate: Organ| {
        organ.is_none_or(|organ| organ == candidate || (organ.is_kidney() && candidate.is_kidney()))
    };
    if allow(Organ::Liver) {
        if let Some(captures) = LIVER_SEGMENTS.captures(text) {
            let mut list = &captures[1];
            let list_start = captures.get(1).map_or(0, |found| found.start());
            // "segment 7, 3 cm": the last number is a size, not a segment.
            let after = text[list_start + list.len()..]
                .trim_start()
                .to_ascii_lowercase();
            let size_follows = after.starts_with("cm")
                || after.starts_with("mm")
                || after.starts_with('x')
                || (after.starts_with('.') && after[1..].starts_with(|c: char| c.is_ascii_digit()));
            if size_follows
                && let Some(cut) =
                    list.rfind(|c: char| matches!(c, ',' | '/' | '&' | '-') || c.is_whitespace())
            {
                list = list[..cut].trim_end_matches(|c: char| {
                    matches!(c, ',' | '/' | '&' | '-') || c.is_whitespace()
                });
                list = list.strip_suffix(" and").unwrap_or(list);
            }
            let mut segments: Vec<u8> = Vec::new();
            let tokens: Vec<&str> = list
                .split(|c: char| c == '/' || c == ',' || c == '&' || c.is_whitespace())
                .filter(|token| !token.is_empty() && !token.eq_ignore_ascii_case("and"))
                .collect();
            for token in tokens {
                if let Some((from, to)) = token.split_once('-') {
                    if let (Some(from), Some(to)) = (roman_or_digit(from), roman_or_digit(to)) {
                        segments.extend(from.min(to)..=from.max(to));
                    }
                } else if let Some(segment) = roman_or_digit(token) {
                    segments.push(segment);
                }
            }
            if !segments.is_empty() {
                segments.sort_unstable();
                segments.dedup();
                lesion.location = Some(Location::LiverSegments(segments));
                lesion.spans.location = captures.get(0).map(|found| Span {
                    start: found.start() + offset,
                    end: list_start + list.len() + offset,
                });
                return true;
            }
        }
        if let Some(captures) = LIVER_SHORT.captures(text) {
            let mut segments: Vec<u8> = [captures.get(1), captures.get(2)]
                .into_iter()
                .flatten()
                .filter_map(|found| found.as_str().parse().ok())
                .collect();
            segments.sort_unstable();
            segments.dedup();
            lesion.location = Some(Location::LiverSegments(segments));
            lesion.spans.location = captures.get(0).map(|found| match_span(&found, offset));
            return true;
        }
        if let Some(found) = LIVER_LOBE.find(text) {
            let words = found.as_str().to_ascii_lowercase();
            let segments = if words.contains("caudate") {
                vec![1]
            } else if words.contains("lateral") {
                vec![2, 3]
            } else if words.starts_with("right") {
                vec![5, 6, 7, 8]
            } else {
                vec![2, 3, 4]
            };
            lesion.location = Some(Location::LiverSegments(segments));
            lesion.spans.location = Some(match_span(&found, offset));
            return true;
        }
    }
    let pancreas_context = organ == Some(Organ::Pancreas)
        || (organ.is_none()
            && (text.to_ascii_lowercase().contains("pancrea")
                || text.to_ascii_lowercase().contains("uncinate")));
    if pancreas_context && let Some(found) = PANCREAS_PART.find(text) {
        let part = match found.as_str().to_ascii_lowercase().as_str() {
            "head" => PancreasPart::Head,
            "uncinate" => PancreasPart::Uncinate,
            "tail" => PancreasPart::Tail,
            _ => PancreasPart::Body,
        };
        lesion.location = Some(Location::Pancreas(part));
        lesion.spans.location = Some(match_span(&found, offset));
        return true;
    }
    if organ.is_none_or(Organ::is_kidney)
        && let Some(found) = KIDNEY_POLE.find(text)
    {
        let words = found.as_str().to_ascii_lowercase();
        let pole = if words.starts_with("upper") || words.starts_with("superior") {
            KidneyPole::Upper
        } else if words.starts_with("lower") || words.starts_with("inferior") {
            KidneyPole::Lower
        } else {
            KidneyPole::Mid
        };
        lesion.location = Some(Location::Kidney(pole));
        lesion.spans.location = Some(match_span(&found, offset));
        return true;
    }
    false
}

fn to_cm(value: f64, unit: &str) -> f64 {
    if unit.eq_ignore_ascii_case("mm") {
        value / 10.0
    } else {
        value
    }
}

fn read_size(text: &str, offset: usize, lesion: &mut Lesion) -> bool {
    if let Some(captures) = SIZE_PAIR.captures(text) {
        let unit = captures.get(4).map_or("cm", |found| found.as_str());
        let first_unit = captures.get(2).map_or(unit, |found| found.as_str());
        if let (Ok(long), Ok(short)) = (captures[1].parse::<f64>(), captures[3].parse::<f64>()) {
            lesion.size = Some(LesionSize {
                long_cm: to_cm(long, first_unit),
                short_cm: Some(to_cm(short, unit)),
            });
            lesion.spans.size = captures.get(0).map(|found| match_span(&found, offset));
            return true;
        }
    }
    for captures in SIZE_SINGLE.captures_iter(text) {
        if captures.get(3).is_some() {
            continue; // cm^3, cm3: a volume
        }
        let Some(whole) = captures.get(0) else {
            continue;
        };
        let after = &text[whole.end()..];
        if after.trim_start().starts_with('^') || after.starts_with('3') {
            continue;
        }
        if let Ok(value) = captures[1].parse::<f64>() {
            lesion.size = Some(LesionSize {
                long_cm: to_cm(value, &captures[2]),
                short_cm: None,
            });
            lesion.spans.size = Some(match_span(&whole, offset));
            return true;
        }
    }
    false
}

fn read_attenuation(text: &str, offset: usize, lesion: &mut Lesion) -> bool {
    let Some(found) = ATTENUATION.find(text) else {
        return false;
    };
    let words = found.as_str().to_ascii_lowercase();
    lesion.attenuation = Some(if words.starts_with("hypo") || words.starts_with("low") {
        Attenuation::Hypo
    } else if words.starts_with("iso") {
        Attenuation::Iso
    } else if words.starts_with("hyper") {
        Attenuation::Hyper
    } else {
        Attenuation::Mixed
    });
    lesion.spans.attenuation = Some(match_span(&found, offset));
    true
}

fn read_count(text: &str, offset: usize, lesion: &mut Lesion) -> bool {
    let Some(captures) = COUNT.captures(text) else {
        return false;
    };
    let number = captures
        .get(1)
        .or_else(|| captures.get(2))
        .or_else(|| captures.get(3))
        .map(|found| found.as_str().to_ascii_lowercase());
    let count = match number.as_deref() {
        Some("two") => Some(2),
        Some("three") => Some(3),
        Some("four") => Some(4),
        Some("five") => Some(5),
        Some("six") => Some(6),
        Some("several") | None => None,
        Some(digits) => digits.parse().ok(),
    };
    let Some(count) = count else {
        return false;
    };
    lesion.count = Some(count);
    lesion.spans.count = captures.get(0).map(|found| match_span(&found, offset));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_do_not_split_sentences() {
        let text = "Size: 3.1 x 2.4 cm. Next one";
        let spans = segments(text);
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[0].text(text), "Size: 3.1 x 2.4 cm");
    }

    #[test]
    fn but_splits_clauses() {
        let text = "No liver lesion, but a pancreatic mass";
        let spans: Vec<&str> = segments(text).into_iter().map(|s| s.text(text)).collect();
        assert_eq!(spans, vec!["No liver lesion", "a pancreatic mass"]);
    }
}
