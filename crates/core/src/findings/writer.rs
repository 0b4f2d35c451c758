//! Findings → report text: the RadGPT/AbdomenAtlas structured style for a whole CT, and a
//! short local description of one slice (what a verifier says it sees there).
//!
//! Everything the writer emits, the reader reads back to the same Findings (tested as a
//! round trip on random Findings). Organs whose tumor status is "not mentioned" are left out,
//! which is exactly what "not mentioned" means.

use std::fmt::Write as _;

use super::{
    Attenuation, Evidence, Findings, KidneyPole, Lesion, Location, Organ, PancreasPart,
    TumorPresence,
};

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().collect::<String>() + chars.as_str())
        .unwrap_or_default()
}

/// "Liver" / "Pancreatic" / "Left kidney" as a lesion header prefix.
fn lesion_prefix(organ: Organ) -> &'static str {
    match organ {
        Organ::Liver => "Liver",
        Organ::Pancreas => "Pancreatic",
        Organ::KidneyLeft => "Left kidney",
        Organ::KidneyRight => "Right kidney",
    }
}

/// Location words as the structured report writes them.
#[must_use]
pub fn location_words(location: &Location) -> String {
    match location {
        Location::LiverSegments(segments) => {
            let list: Vec<String> = segments.iter().map(ToString::to_string).collect();
            let noun = if segments.len() > 1 {
                "segments"
            } else {
                "segment"
            };
            format!("hepatic {noun} {}", list.join("/"))
        }
        Location::Pancreas(part) => match part {
            PancreasPart::Head => "pancreatic head".into(),
            PancreasPart::Uncinate => "pancreatic uncinate process".into(),
            PancreasPart::Body => "pancreatic body".into(),
            PancreasPart::Tail => "pancreatic tail".into(),
        },
        Location::Kidney(pole) => match pole {
            KidneyPole::Upper => "upper pole".into(),
            KidneyPole::Mid => "interpolar region".into(),
            KidneyPole::Lower => "lower pole".into(),
        },
    }
}

/// Size words (`"3.1 x 2.4 cm"`).
fn size_words(lesion: &Lesion) -> Option<String> {
    lesion.size.map(|size| match size.short_cm {
        Some(short) => format!("{:.1} x {short:.1} cm", size.long_cm),
        None => format!("{:.1} cm", size.long_cm),
    })
}

fn attenuation_word(attenuation: Attenuation) -> String {
    capitalised(attenuation.word())
}

/// Renders `findings` as a structured report (FINDINGS per organ with lesion blocks,
/// IMPRESSION, key slice and box lines).
#[must_use]
pub fn write_report(findings: &Findings) -> String {
    let mut text = String::from("FINDINGS:\n");
    for organ in Organ::ALL {
        let entry = findings.organ(organ);
        let name = capitalised(organ.display_name());
        // Writing to a String cannot fail.
        match entry.tumor {
            TumorPresence::NotMentioned => continue,
            TumorPresence::No => {
                let _ = writeln!(text, "{name}: no tumor.");
                continue;
            }
            TumorPresence::Uncertain => {
                let _ = writeln!(text, "{name}: a tumor cannot be excluded.");
            }
            TumorPresence::Yes if entry.lesions.is_empty() => {
                let _ = writeln!(text, "{name}: tumor present.");
            }
            TumorPresence::Yes => {
                let _ = writeln!(text, "{} lesions:", lesion_prefix(organ));
            }
        }
        for (number, lesion) in entry.lesions.iter().enumerate() {
            let _ = writeln!(text, "{} lesion {}:", lesion_prefix(organ), number + 1);
            if let Some(location) = &lesion.location {
                let _ = writeln!(text, "Location: {}.", location_words(location));
            }
            if let Some(size) = size_words(lesion) {
                let _ = writeln!(text, "Size: {size}.");
            }
            if let Some(attenuation) = lesion.attenuation {
                let _ = writeln!(
                    text,
                    "Enhancement relative to {}: {}.",
                    if organ.is_kidney() {
                        "kidney"
                    } else {
                        organ.display_name()
                    },
                    attenuation_word(attenuation)
                );
            }
            if let Some(count) = lesion.count {
                let _ = writeln!(
                    text,
                    "Count: {count} {}.",
                    if count == 1 { "lesion" } else { "lesions" }
                );
            }
        }
    }
    let mut impression = Vec::new();
    let mut clear = Vec::new();
    for organ in Organ::ALL {
        match findings.organ(organ).tumor {
            TumorPresence::Yes => {
                impression.push(format!(
                    "{} tumor present.",
                    capitalised(organ.display_name())
                ));
            }
            TumorPresence::Uncertain => {
                impression.push(format!("Possible {} tumor.", organ.display_name()));
            }
            TumorPresence::No => clear.push(organ.display_name()),
            TumorPresence::NotMentioned => {}
        }
    }
    if !clear.is_empty() {
        impression.push(format!("No tumor in the {}.", clear.join(", ")));
    }
    // With nothing stated about any organ there is nothing to sum up.
    if !impression.is_empty() {
        text.push_str("IMPRESSION:\n");
        for line in impression {
            text.push_str(&line);
            text.push('\n');
        }
    }
    write_key_slice_lines(findings, &mut text);
    text
}

fn write_key_slice_lines(findings: &Findings, text: &mut String) {
    if let Some(key) = &findings.key_slice {
        let _ = write!(text, "Key slice: {}", key.index);
        let mut details = Vec::new();
        if let Some(z) = key.z_mm {
            details.push(format!("z = {z:.2} mm"));
        }
        if let Some(uid) = &key.sop_instance_uid {
            details.push(format!("SOP Instance UID {uid}"));
        }
        if !details.is_empty() {
            let _ = write!(text, " ({})", details.join(", "));
        }
        text.push_str(".\n");
    }
    if let Some(slice_box) = &findings.slice_box {
        let [c0, r0, c1, r1] = slice_box.voxels;
        let _ = write!(text, "Box on key slice: columns {c0}-{c1}, rows {r0}-{r1}");
        if let Some([x0, y0, x1, y1]) = slice_box.mm {
            let _ = write!(text, " (x {x0:.2} to {x1:.2} mm, y {y0:.2} to {y1:.2} mm)");
        }
        text.push_str(".\n");
    }
    if let Some(range) = findings.lesion_slices {
        let _ = writeln!(text, "Lesion slices: {range}.");
    }
    // Each lesion's own evidence, named as its findings are.
    for organ in Organ::ALL {
        for (number, lesion) in findings.organ(organ).lesions.iter().enumerate() {
            if let Some(evidence) = &lesion.evidence {
                let _ = writeln!(
                    text,
                    "{} lesion {} evidence: {}.",
                    lesion_prefix(organ),
                    number + 1,
                    evidence_words(evidence)
                );
            }
        }
    }
}

/// A lesion's evidence as its line says it: `slice K, columns C0-C1, rows R0-R1, slices A-B`.
#[must_use]
pub fn evidence_words(evidence: &Evidence) -> String {
    let mut words = format!("slice {}", evidence.key_slice);
    if let Some(slice_box) = &evidence.slice_box {
        let [c0, r0, c1, r1] = slice_box.voxels;
        let _ = write!(words, ", columns {c0}-{c1}, rows {r0}-{r1}");
    }
    if let Some(range) = evidence.slices {
        let _ = write!(words, ", slices {}-{}", range.first, range.last);
    }
    words
}

/// Renders what one slice shows: one sentence per lesion, or which organs show none.
/// `findings` holds only what is visible on that slice.
#[must_use]
pub fn write_local_description(slice_index: u32, findings: &Findings) -> String {
    let mut text = String::new();
    let mut clear = Vec::new();
    for organ in Organ::ALL {
        let entry = findings.organ(organ);
        match entry.tumor {
            TumorPresence::NotMentioned => {}
            TumorPresence::No => clear.push(organ.display_name()),
            TumorPresence::Uncertain | TumorPresence::Yes => {
                let hedge = if entry.tumor == TumorPresence::Uncertain {
                    "possible "
                } else {
                    ""
                };
                if entry.lesions.is_empty() {
                    let _ = writeln!(
                        text,
                        "Slice {slice_index}: {hedge}lesion in the {}.",
                        organ.display_name()
                    );
                }
                for lesion in &entry.lesions {
                    let mut parts = vec![format!("Slice {slice_index}: {hedge}")];
                    if let Some(attenuation) = lesion.attenuation {
                        parts.push(format!("{} ", attenuation.word()));
                    }
                    parts.push(format!("lesion in the {}", organ.display_name()));
                    if let Some(location) = &lesion.location {
                        parts.push(format!(" ({})", location_words(location)));
                    }
                    if let Some(size) = size_words(lesion) {
                        parts.push(format!(", {size}"));
                    }
                    let _ = writeln!(text, "{}.", parts.concat());
                }
            }
        }
    }
    if !clear.is_empty() {
        let _ = writeln!(
            text,
            "Slice {slice_index}: no lesion in the {}.",
            clear.join(", ")
        );
    }
    if text.is_empty() {
        // Nothing stated of any organ: the organs are not on the slice, which is not the same
        // as showing them clean (a claim there is unverified, not denied).
        let _ = writeln!(
            text,
            "Slice {slice_index}: the liver, pancreas and kidneys are not on this slice."
        );
    }
    match findings.inside_box {
        Some(TumorPresence::Yes) => text.push_str("Inside the box: lesion.\n"),
        Some(TumorPresence::Uncertain) => text.push_str("Inside the box: possible lesion.\n"),
        Some(TumorPresence::No | TumorPresence::NotMentioned) => {
            text.push_str("Inside the box: no lesion.\n");
        }
        None => {}
    }
    text
}
