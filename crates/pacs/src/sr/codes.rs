//! The coded concepts Keyslice's SR and KOS documents use.
//!
//! Standard codes (DICOM `DCM`, SNOMED CT `SCT`, UCUM, UMLS) wherever DICOM's templates name
//! one; the few facts no standard code covers (Couinaud segment numbers, pancreas parts and
//! kidney poles as Keyslice reads them, the attenuation words, the E-MRL consistency terms)
//! use the private scheme `99KSL`, declared in each document's Coding Scheme Identification
//! Sequence so any reader knows whose codes they are.

use keyslice_core::findings::{
    Attenuation, KidneyPole, Location, Organ, PancreasPart, TumorPresence,
};

/// A coded concept: value, scheme designator, meaning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Code {
    /// Code Value.
    pub value: String,
    /// Coding Scheme Designator.
    pub scheme: String,
    /// Code Meaning.
    pub meaning: String,
}

impl Code {
    /// A code.
    #[must_use]
    pub fn new(value: &str, scheme: &str, meaning: &str) -> Self {
        Self {
            value: value.to_string(),
            scheme: scheme.to_string(),
            meaning: meaning.to_string(),
        }
    }

    /// Whether this is `value` in `scheme` (the meaning is not compared).
    #[must_use]
    pub fn is(&self, value: &str, scheme: &str) -> bool {
        self.value == value && self.scheme == scheme
    }
}

/// The private coding scheme.
pub const KSL: &str = "99KSL";
/// Its name in the Coding Scheme Identification Sequence.
pub const KSL_NAME: &str = "Keyslice E-MRL concepts";

macro_rules! code {
    ($name:ident, $value:literal, $scheme:literal, $meaning:literal) => {
        #[doc = concat!("(", $value, ", ", $scheme, ", \"", $meaning, "\")")]
        #[must_use]
        pub fn $name() -> Code {
            Code::new($value, $scheme, $meaning)
        }
    };
}

code!(
    measurement_report,
    "126000",
    "DCM",
    "Imaging Measurement Report"
);
code!(
    language,
    "121049",
    "DCM",
    "Language of Content Item and Descendants"
);
code!(english, "en-US", "RFC5646", "English (United States)");
code!(observer_type, "121005", "DCM", "Observer Type");
code!(person, "121006", "DCM", "Person");
code!(device, "121007", "DCM", "Device");
code!(
    person_observer_name,
    "121008",
    "DCM",
    "Person Observer Name"
);
code!(device_observer_uid, "121012", "DCM", "Device Observer UID");
code!(
    device_observer_name,
    "121013",
    "DCM",
    "Device Observer Name"
);
code!(
    device_observer_model_name,
    "121015",
    "DCM",
    "Device Observer Model Name"
);
code!(procedure_reported, "121058", "DCM", "Procedure reported");
code!(
    ct_procedure,
    "77477000",
    "SCT",
    "Computerized axial tomography"
);
code!(image_library, "111028", "DCM", "Image Library");
code!(image_library_group, "126200", "DCM", "Image Library Group");
code!(
    imaging_measurements,
    "126010",
    "DCM",
    "Imaging Measurements"
);
code!(measurement_group, "125007", "DCM", "Measurement Group");
code!(
    qualitative_evaluations,
    "C0034375",
    "UMLS",
    "Qualitative Evaluations"
);
code!(tracking_identifier, "112039", "DCM", "Tracking Identifier");
code!(tracking_uid, "112040", "DCM", "Tracking Unique Identifier");
code!(finding, "121071", "DCM", "Finding");
code!(findings_text, "121070", "DCM", "Findings");
code!(neoplasm, "108369006", "SCT", "Neoplasm");
code!(finding_site, "363698007", "SCT", "Finding Site");
code!(laterality, "272741003", "SCT", "Laterality");
code!(left, "7771000", "SCT", "Left");
code!(right, "24028007", "SCT", "Right");
code!(image_region, "111030", "DCM", "Image Region");
code!(source, "260753009", "SCT", "Source");
code!(
    source_of_measurement,
    "121112",
    "DCM",
    "Source of Measurement"
);
code!(algorithm_name, "111001", "DCM", "Algorithm Name");
code!(algorithm_version, "111003", "DCM", "Algorithm Version");
code!(long_axis, "103339001", "SCT", "Long Axis");
code!(short_axis, "103340004", "SCT", "Short Axis");
code!(centimeter, "cm", "UCUM", "centimeter");
code!(no_units, "1", "UCUM", "no units");
code!(lesions_unit, "{lesions}", "UCUM", "lesions");
code!(present, "52101004", "SCT", "Present");
code!(absent, "2667000", "SCT", "Absent");
code!(equivocal, "42425007", "SCT", "Equivocal");
code!(of_interest, "113000", "DCM", "Of Interest");
code!(for_research, "113009", "DCM", "For Research");
code!(
    key_object_description,
    "113012",
    "DCM",
    "Key Object Description"
);
code!(tumor_presence, "tumor-presence", "99KSL", "Tumor presence");
code!(location_in_organ, "location", "99KSL", "Location in organ");
code!(attenuation, "attenuation", "99KSL", "Attenuation");
code!(lesion_count, "lesion-count", "99KSL", "Number of lesions");
code!(key_slice, "key-slice", "99KSL", "Key evidence slice");
code!(
    key_slice_index,
    "key-slice-index",
    "99KSL",
    "Key evidence slice index"
);
code!(
    key_slice_z,
    "key-slice-z",
    "99KSL",
    "Key evidence slice position (patient z)"
);
code!(
    lesion_first_slice,
    "lesion-first",
    "99KSL",
    "First slice index of the lesion"
);
code!(
    lesion_last_slice,
    "lesion-last",
    "99KSL",
    "Last slice index of the lesion"
);
code!(millimeter, "mm", "UCUM", "millimeter");
code!(evidence_group, "evidence", "99KSL", "Key evidence");
code!(
    verifier_description,
    "verifier-text",
    "99KSL",
    "Verifier description of the key slice"
);
code!(verifier_name, "verifier", "99KSL", "Verifier model");
code!(
    ai_result_reviewed,
    "ai-reviewed",
    "99KSL",
    "AI result reviewed"
);
code!(
    result_standing,
    "standing",
    "99KSL",
    "Standing of the AI result"
);
code!(
    finding_standing,
    "finding-standing",
    "99KSL",
    "Standing of the finding against its evidence"
);
code!(
    consistency,
    "consistency",
    "99KSL",
    "Report-evidence consistency"
);
code!(
    consistency_organ,
    "cons-organ",
    "99KSL",
    "Consistency of organ"
);
code!(
    consistency_location,
    "cons-location",
    "99KSL",
    "Consistency of location"
);
code!(
    consistency_attenuation,
    "cons-attenuation",
    "99KSL",
    "Consistency of attenuation"
);
code!(
    consistency_size,
    "cons-size",
    "99KSL",
    "Consistency of size"
);
code!(
    consistency_region,
    "cons-region",
    "99KSL",
    "Consistency of the box region"
);

/// The organ as a Finding Site code, and its laterality for a kidney.
#[must_use]
pub fn organ_site(organ: Organ) -> (Code, Option<Code>) {
    match organ {
        Organ::Liver => (Code::new("10200004", "SCT", "Liver"), None),
        Organ::Pancreas => (Code::new("15776009", "SCT", "Pancreas"), None),
        Organ::KidneyLeft => (Code::new("64033007", "SCT", "Kidney"), Some(left())),
        Organ::KidneyRight => (Code::new("64033007", "SCT", "Kidney"), Some(right())),
    }
}

/// The organ of a Finding Site code and laterality.
#[must_use]
pub fn organ_of(site: &Code, laterality: Option<&Code>) -> Option<Organ> {
    if site.is("10200004", "SCT") {
        Some(Organ::Liver)
    } else if site.is("15776009", "SCT") {
        Some(Organ::Pancreas)
    } else if site.is("64033007", "SCT") {
        match laterality {
            Some(code) if code.is("7771000", "SCT") => Some(Organ::KidneyLeft),
            Some(code) if code.is("24028007", "SCT") => Some(Organ::KidneyRight),
            _ => None,
        }
    } else {
        None
    }
}

/// Tumor presence as a qualitative value (`None` for "not mentioned": no statement).
#[must_use]
pub fn presence_code(presence: TumorPresence) -> Option<Code> {
    match presence {
        TumorPresence::Yes => Some(present()),
        TumorPresence::No => Some(absent()),
        TumorPresence::Uncertain => Some(equivocal()),
        TumorPresence::NotMentioned => None,
    }
}

/// The presence a qualitative value stands for.
#[must_use]
pub fn presence_of(code: &Code) -> Option<TumorPresence> {
    if code.is("52101004", "SCT") {
        Some(TumorPresence::Yes)
    } else if code.is("2667000", "SCT") {
        Some(TumorPresence::No)
    } else if code.is("42425007", "SCT") {
        Some(TumorPresence::Uncertain)
    } else {
        None
    }
}

/// The attenuation word as a code.
#[must_use]
pub fn attenuation_code(attenuation: Attenuation) -> Code {
    let (value, meaning) = match attenuation {
        Attenuation::Hypo => ("hypo", "Hypoattenuating"),
        Attenuation::Iso => ("iso", "Isoattenuating"),
        Attenuation::Hyper => ("hyper", "Hyperattenuating"),
        Attenuation::Mixed => ("mixed", "Mixed attenuation"),
    };
    Code::new(value, KSL, meaning)
}

/// The attenuation a code stands for.
#[must_use]
pub fn attenuation_of(code: &Code) -> Option<Attenuation> {
    if code.scheme != KSL {
        return None;
    }
    match code.value.as_str() {
        "hypo" => Some(Attenuation::Hypo),
        "iso" => Some(Attenuation::Iso),
        "hyper" => Some(Attenuation::Hyper),
        "mixed" => Some(Attenuation::Mixed),
        _ => None,
    }
}

/// A location as one or more codes (a liver lesion in segments 7 and 8: two codes).
#[must_use]
pub fn location_codes(location: &Location) -> Vec<Code> {
    match location {
        Location::LiverSegments(segments) => segments
            .iter()
            .map(|segment| {
                Code::new(
                    &format!("liver-segment-{segment}"),
                    KSL,
                    &format!("Couinaud segment {segment}"),
                )
            })
            .collect(),
        Location::Pancreas(part) => {
            let (value, meaning) = match part {
                PancreasPart::Head => ("pancreas-head", "Head of pancreas"),
                PancreasPart::Uncinate => ("pancreas-uncinate", "Uncinate process of pancreas"),
                PancreasPart::Body => ("pancreas-body", "Body of pancreas"),
                PancreasPart::Tail => ("pancreas-tail", "Tail of pancreas"),
            };
            vec![Code::new(value, KSL, meaning)]
        }
        Location::Kidney(pole) => {
            let (value, meaning) = match pole {
                KidneyPole::Upper => ("kidney-upper", "Upper pole of kidney"),
                KidneyPole::Mid => ("kidney-mid", "Interpolar region of kidney"),
                KidneyPole::Lower => ("kidney-lower", "Lower pole of kidney"),
            };
            vec![Code::new(value, KSL, meaning)]
        }
    }
}

/// The location that codes stand for (`None` when there are none or they do not fit).
#[must_use]
pub fn location_of(codes: &[&Code]) -> Option<Location> {
    let first = codes.first()?;
    if first.scheme != KSL {
        return None;
    }
    if first.value.starts_with("liver-segment-") {
        let mut segments: Vec<u8> = codes
            .iter()
            .filter_map(|code| code.value.strip_prefix("liver-segment-")?.parse().ok())
            .filter(|segment| (1..=8).contains(segment))
            .collect();
        segments.sort_unstable();
        segments.dedup();
        return (!segments.is_empty()).then_some(Location::LiverSegments(segments));
    }
    Some(match first.value.as_str() {
        "pancreas-head" => Location::Pancreas(PancreasPart::Head),
        "pancreas-uncinate" => Location::Pancreas(PancreasPart::Uncinate),
        "pancreas-body" => Location::Pancreas(PancreasPart::Body),
        "pancreas-tail" => Location::Pancreas(PancreasPart::Tail),
        "kidney-upper" => Location::Kidney(KidneyPole::Upper),
        "kidney-mid" => Location::Kidney(KidneyPole::Mid),
        "kidney-lower" => Location::Kidney(KidneyPole::Lower),
        _ => return None,
    })
}
