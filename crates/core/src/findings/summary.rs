//! Findings in a few words, for lists, buttons and one-line summaries ("liver: tumor ·
//! 3.1×2.4 cm, hypoattenuating, segment 7"), and what one reading changed from another.
//! The structured report's own wording is [`crate::findings::writer`].

use super::{
    Findings, KidneyPole, Lesion, LesionSize, Location, Organ, PancreasPart, TumorPresence,
};

/// "liver: tumor · 3.1×2.4 cm, hypoattenuating, segment 7".
#[must_use]
pub fn organ_summary(organ: Organ, findings: &Findings) -> String {
    format!("{organ}: {}", organ_words(organ, findings))
}

/// What `findings` say of `organ`: "tumor · 3.1×2.4 cm, hypoattenuating, segment 7".
fn organ_words(organ: Organ, findings: &Findings) -> String {
    let entry = findings.organ(organ);
    let presence = match entry.tumor {
        TumorPresence::Yes => "tumor",
        TumorPresence::No => "no tumor",
        TumorPresence::Uncertain => "possible tumor",
        TumorPresence::NotMentioned => "not mentioned",
    };
    let lesions: Vec<String> = entry.lesions.iter().map(lesion_summary).collect();
    if lesions.is_empty() {
        presence.to_string()
    } else {
        format!("{presence} · {}", lesions.join("; "))
    }
}

/// "3.1×2.4 cm", or "3.1 cm" with no short axis.
#[must_use]
pub fn size_label(size: LesionSize) -> String {
    match size.short_cm {
        Some(short) => format!("{:.1}×{short:.1} cm", size.long_cm),
        None => format!("{:.1} cm", size.long_cm),
    }
}

/// "3.1×2.4 cm, hypoattenuating, segment 7".
#[must_use]
pub fn lesion_summary(lesion: &Lesion) -> String {
    let mut parts = Vec::new();
    if let Some(size) = lesion.size {
        parts.push(size_label(size));
    }
    if let Some(attenuation) = lesion.attenuation {
        parts.push(attenuation.word().to_string());
    }
    if let Some(location) = &lesion.location {
        parts.push(location_label(location));
    }
    if parts.is_empty() {
        "lesion".to_string()
    } else {
        parts.join(", ")
    }
}

/// "segment 7/8", "pancreatic head", "upper pole".
#[must_use]
pub fn location_label(location: &Location) -> String {
    match location {
        Location::LiverSegments(segments) => {
            let list: Vec<String> = segments.iter().map(ToString::to_string).collect();
            if list.len() == 1 {
                format!("segment {}", list[0])
            } else {
                format!("segments {}", list.join("/"))
            }
        }
        // The words of the report (`writer`), so the editor and the report never disagree.
        Location::Pancreas(part) => match part {
            PancreasPart::Head => "head",
            PancreasPart::Uncinate => "uncinate process",
            PancreasPart::Body => "body",
            PancreasPart::Tail => "tail",
        }
        .into(),
        Location::Kidney(pole) => match pole {
            KidneyPole::Upper => "upper pole",
            KidneyPole::Mid => "interpolar region",
            KidneyPole::Lower => "lower pole",
        }
        .into(),
    }
}

/// What `corrected` says differently from `original`, one phrase per organ whose presence or
/// lesions differ and one for a moved key slice ("liver: no tumor (was: tumor · 3.0×2.5 cm,
/// hypoattenuating, segment 7)", "key slice 34 (was 30)"); empty when they agree. Report
/// spans are not compared.
#[must_use]
pub fn changes(original: &Findings, corrected: &Findings) -> Vec<String> {
    let original = original.without_spans();
    let corrected = corrected.without_spans();
    let mut changed: Vec<String> = Organ::ALL
        .iter()
        .filter(|&&organ| original.organ(organ) != corrected.organ(organ))
        .map(|&organ| {
            format!(
                "{} (was: {})",
                organ_summary(organ, &corrected),
                organ_words(organ, &original)
            )
        })
        .collect();
    let index = |findings: &Findings| findings.key_slice.as_ref().map(|key| key.index);
    match (index(&original), index(&corrected)) {
        (Some(was), Some(now)) if was != now => {
            changed.push(format!("key slice {now} (was {was})"));
        }
        (None, Some(now)) => changed.push(format!("key slice {now} (was none)")),
        _ => {}
    }
    if original.slice_box.as_ref().map(|b| b.voxels)
        != corrected.slice_box.as_ref().map(|b| b.voxels)
        && corrected.slice_box.is_some()
    {
        changed.push("box on the key slice moved".into());
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::{Attenuation, KeySlice};

    fn liver_tumor() -> Findings {
        let mut findings = Findings::default();
        let liver = findings.organ_mut(Organ::Liver);
        liver.tumor = TumorPresence::Yes;
        liver.lesions.push(Lesion {
            size: Some(LesionSize {
                long_cm: 3.0,
                short_cm: Some(2.5),
            }),
            attenuation: Some(Attenuation::Hypo),
            location: Some(Location::LiverSegments(vec![7])),
            ..Lesion::default()
        });
        findings.organ_mut(Organ::Pancreas).tumor = TumorPresence::No;
        findings.key_slice = Some(KeySlice {
            index: 30,
            z_mm: None,
            sop_instance_uid: None,
            span: None,
        });
        findings
    }

    #[test]
    fn a_summary_names_presence_and_each_lesions_size_attenuation_and_place() {
        let findings = liver_tumor();
        assert_eq!(
            organ_summary(Organ::Liver, &findings),
            "liver: tumor · 3.0×2.5 cm, hypoattenuating, segment 7"
        );
        assert_eq!(
            organ_summary(Organ::Pancreas, &findings),
            "pancreas: no tumor"
        );
    }

    #[test]
    fn changes_name_each_organ_that_differs_and_a_moved_key_slice_only() {
        let original = liver_tumor();
        assert!(changes(&original, &original).is_empty());
        let mut corrected = original.clone();
        corrected.organ_mut(Organ::Liver).lesions[0].attenuation = Some(Attenuation::Hyper);
        if let Some(key) = corrected.key_slice.as_mut() {
            key.index = 34;
        }
        assert_eq!(
            changes(&original, &corrected),
            [
                "liver: tumor · 3.0×2.5 cm, hyperattenuating, segment 7 (was: tumor · 3.0×2.5 cm, hypoattenuating, segment 7)",
                "key slice 34 (was 30)",
            ]
        );
    }
}
