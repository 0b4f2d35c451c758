//! A diagnoser that hallucinates on a known share of cases, for demonstrations and reader
//! studies: it runs a real model, and for a share of cases chosen by a seed and the case id
//! alone it adds to the report a tumor in an organ the model called clean, as a model writing
//! from language priors would. The key slice stays the model's own (a slice of the volume's
//! middle half where the model named none), so the verifier, which reads that slice for real,
//! finds no such tumor there: the consistency shows whether the evidence gives the
//! hallucination away. Its model name says what it is, so its results are
//! never taken for the model's.

use keyslice_core::findings::{
    Attenuation, Findings, Lesion, LesionSize, Organ, OrganFindings, TumorPresence, read_report,
    write_report,
};
use keyslice_core::rng::{Rng, mix};
use keyslice_core::volume::Volume;

use super::{Diagnoser, Diagnosis, InferError, ModelId};

/// Which cases hallucinate: a share of them, drawn by a seed from the case id alone (so the
/// same case hallucinates in every run and on every machine).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hallucinate {
    /// The share of cases, 0–1.
    pub share: f64,
    /// The seed of the draw.
    pub seed: u64,
    /// The kind of made-up finding ([`inject`]); `None`: a tumor in an organ the model
    /// called clean, keeping the model's key slice.
    pub kind: Option<Kind>,
}

impl Hallucinate {
    /// Whether `case_id` is one of the cases that hallucinate, and the draw that decides
    /// which organ and lesion.
    #[must_use]
    pub fn draw(&self, case_id: &str) -> Option<Rng> {
        let hash = case_id
            .bytes()
            .fold(mix(self.seed ^ 0x4841_4c4c), |hash, byte| {
                mix(hash ^ u64::from(byte))
            });
        let mut rng = Rng::new(hash);
        (rng.unit() < self.share).then_some(rng)
    }

    /// The model id of `inner` with hallucinations added, as predictions record it.
    #[must_use]
    pub fn model_id(&self, inner: &ModelId) -> ModelId {
        let kind = self
            .kind
            .map(|kind| format!("{}-", kind.name()))
            .unwrap_or_default();
        ModelId {
            id: format!(
                "{}+hallucinating-{kind}{:.0}%-seed{}",
                inner.id,
                self.share * 100.0,
                self.seed
            ),
            version: inner.version.clone(),
        }
    }
}

/// `inner`, hallucinating on case `case_id` when [`Hallucinate::draw`] picks it.
pub struct Hallucinating<'a> {
    /// The real model.
    pub inner: &'a dyn Diagnoser,
    /// Which cases.
    pub plan: Hallucinate,
    /// The case being diagnosed.
    pub case_id: &'a str,
}

/// `findings` with a tumor added in an organ it calls clean (drawn by `rng`); `None` when
/// every organ already has one.
#[must_use]
pub fn with_hallucinated_tumor(findings: &Findings, rng: &mut Rng) -> Option<(Findings, Organ)> {
    let clean: Vec<Organ> = Organ::ALL
        .into_iter()
        .filter(|organ| !findings.states_tumor(*organ))
        .collect();
    if clean.is_empty() {
        return None;
    }
    let organ = clean[rng.below(clean.len())];
    let mut hallucinated = findings.clone();
    hallucinated.organs.insert(
        organ,
        OrganFindings {
            tumor: TumorPresence::Yes,
            lesions: vec![made_up_lesion(rng)],
            span: None,
        },
    );
    Some((hallucinated, organ))
}

/// The kinds of made-up finding an evaluation of the evidence injects into a model's real
/// answer, each a way a model writing from language priors goes wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A tumor in a case where the model found none.
    Alone,
    /// A tumor in a clean organ beside a finding the model made in another organ.
    BesideReal,
    /// A second lesion in an organ where the model found one.
    SecondLesion,
    /// A kidney lesion reported on the other side.
    SideSwap,
    /// A real lesion reported twice its size, its attenuation flipped.
    WrongAttributes,
    /// A tumor in a clean organ cited with evidence of its own: a plausible key slice, box
    /// and slice range.
    MadeUpEvidence,
}

impl Kind {
    /// Every kind, in the order reports list them.
    pub const ALL: [Self; 6] = [
        Self::Alone,
        Self::BesideReal,
        Self::SecondLesion,
        Self::SideSwap,
        Self::WrongAttributes,
        Self::MadeUpEvidence,
    ];

    /// The kind named `name` ([`Self::name`]).
    #[must_use]
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.name() == name)
    }

    /// Its name in reports and on the command line.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Alone => "alone",
            Self::BesideReal => "beside-real",
            Self::SecondLesion => "second-lesion",
            Self::SideSwap => "side-swap",
            Self::WrongAttributes => "wrong-attributes",
            Self::MadeUpEvidence => "made-up-evidence",
        }
    }
}

/// A model's answer with one made-up finding in it, and where: the finding (organ and lesion
/// index) whose claim is made up.
#[derive(Clone, Debug, PartialEq)]
pub struct Injected {
    /// The changed answer.
    pub diagnosis: Diagnosis,
    /// The organ of the made-up finding.
    pub organ: Organ,
    /// Its lesion's index among the organ's lesions.
    pub lesion: usize,
}

/// A made-up lesion of 1.5–3.5 cm, hypoattenuating, as a model writing from priors would.
fn made_up_lesion(rng: &mut Rng) -> Lesion {
    let long_cm = (rng.uniform(1.5, 3.5) * 10.0).round() / 10.0;
    let short_cm = (long_cm * rng.uniform(0.6, 0.9) * 10.0).round() / 10.0;
    Lesion {
        size: Some(LesionSize {
            long_cm,
            short_cm: Some(short_cm),
        }),
        location: None,
        attenuation: Some(Attenuation::Hypo),
        count: None,
        evidence: None,
        spans: keyslice_core::findings::LesionSpans::default(),
    }
}

/// `diagnosis` (a model's real answer on a CT of `dims` voxels) with a made-up finding of
/// `kind`, drawn by `rng`; `None` when the answer has no place for that kind (no finding to
/// stand beside, no kidney to swap).
#[must_use]
pub fn inject(
    kind: Kind,
    diagnosis: &Diagnosis,
    dims: [usize; 3],
    rng: &mut Rng,
) -> Option<Injected> {
    let read = read_report(&diagnosis.report);
    let mut findings = read.findings.without_spans();
    let claimed = findings.tumor_organs();
    let clean: Vec<Organ> = Organ::ALL
        .into_iter()
        .filter(|organ| !findings.organ(*organ).tumor.as_positive())
        .collect();
    let with_lesion: Vec<Organ> = claimed
        .iter()
        .copied()
        .filter(|organ| !findings.organ(*organ).lesions.is_empty())
        .collect();
    let add_to_clean = |findings: &mut Findings, rng: &mut Rng| {
        let organ = clean[rng.below(clean.len())];
        findings.organs.insert(
            organ,
            OrganFindings {
                tumor: TumorPresence::Yes,
                lesions: vec![made_up_lesion(rng)],
                span: None,
            },
        );
        (organ, 0)
    };
    let mut changed = diagnosis.clone();
    let (organ, lesion) = match kind {
        Kind::Alone if claimed.is_empty() => add_to_clean(&mut findings, rng),
        Kind::BesideReal | Kind::MadeUpEvidence if !claimed.is_empty() && !clean.is_empty() => {
            add_to_clean(&mut findings, rng)
        }
        Kind::SecondLesion if !with_lesion.is_empty() => {
            let organ = with_lesion[rng.below(with_lesion.len())];
            let lesions = &mut findings.organ_mut(organ).lesions;
            lesions.push(made_up_lesion(rng));
            (organ, lesions.len() - 1)
        }
        Kind::SideSwap => {
            let (from, to) = match (
                findings.states_tumor(Organ::KidneyLeft),
                findings.states_tumor(Organ::KidneyRight),
            ) {
                (true, false) => (Organ::KidneyLeft, Organ::KidneyRight),
                (false, true) => (Organ::KidneyRight, Organ::KidneyLeft),
                _ => return None,
            };
            let moved = std::mem::take(findings.organ_mut(from));
            findings.organ_mut(from).tumor = TumorPresence::No;
            let mut moved = moved;
            if moved.lesions.is_empty() {
                moved.lesions.push(made_up_lesion(rng));
            }
            // A pole stays a pole; the side is what is wrong. The lesion's own evidence (the
            // real lesion's slice) goes with the claim.
            findings.organs.insert(to, moved);
            for evidence in &mut changed.lesions {
                if evidence.organ == from {
                    evidence.organ = to;
                }
            }
            (to, 0)
        }
        Kind::WrongAttributes if !with_lesion.is_empty() => {
            let organ = with_lesion[rng.below(with_lesion.len())];
            let lesions = &mut findings.organ_mut(organ).lesions;
            let index = rng.below(lesions.len());
            let lesion = &mut lesions[index];
            lesion.size = Some(lesion.size.map_or(
                LesionSize {
                    long_cm: 4.0,
                    short_cm: Some(3.0),
                },
                |size| LesionSize {
                    long_cm: size.long_cm * 2.0,
                    short_cm: size.short_cm.map(|short| short * 2.0),
                },
            ));
            lesion.attenuation = Some(match lesion.attenuation {
                Some(Attenuation::Hyper) => Attenuation::Hypo,
                _ => Attenuation::Hyper,
            });
            (organ, index)
        }
        _ => return None,
    };
    cite_evidence(&mut changed, &mut findings, kind, dims, rng);
    // The key slice and box are the answer's own fields; the text says the findings.
    findings.key_slice = None;
    findings.slice_box = None;
    if kind != Kind::MadeUpEvidence
        && changed
            .key_slice
            .zip(findings.lesion_slices)
            .is_some_and(|(key, range)| !range.contains(key))
    {
        findings.lesion_slices = None;
    }
    changed.report = write_report(&findings);
    Some(Injected {
        diagnosis: changed,
        organ,
        lesion,
    })
}

/// A slice of the middle half of a volume of `slices` slices, as a model guessing would name.
#[must_use]
pub fn guessed_slice(slices: usize, rng: &mut Rng) -> usize {
    (slices / 4 + rng.below((slices / 2).max(1))).min(slices.saturating_sub(1))
}

/// A box a tenth of a `columns` × `rows` slice wide somewhere in its middle half, as a model
/// guessing would draw one.
#[must_use]
pub fn guessed_box(
    columns: usize,
    rows: usize,
    rng: &mut Rng,
) -> keyslice_core::findings::SliceBox {
    let side = (columns.min(rows) / 10).max(4);
    let c0 = columns / 4 + rng.below((columns / 2).saturating_sub(side).max(1));
    let r0 = rows / 4 + rng.below((rows / 2).saturating_sub(side).max(1));
    let voxel = |value: usize| u32::try_from(value).unwrap_or(u32::MAX);
    keyslice_core::findings::SliceBox {
        voxels: [
            voxel(c0),
            voxel(r0),
            voxel(c0 + side - 1),
            voxel(r0 + side - 1),
        ],
        mm: None,
    }
}

/// The evidence an injected claim cites: the model's own key slice where it named one; else,
/// and always for [`Kind::MadeUpEvidence`], a slice of the volume's middle half, as a model
/// guessing would name; for made-up evidence also a box of a lesion's size and a slice range
/// around the key slice, evidence that looks like evidence.
fn cite_evidence(
    changed: &mut Diagnosis,
    findings: &mut Findings,
    kind: Kind,
    dims: [usize; 3],
    rng: &mut Rng,
) {
    let [columns, rows, slices] = dims;
    if kind == Kind::MadeUpEvidence || changed.key_slice.is_none() {
        let key = guessed_slice(slices, rng);
        changed.key_slice = u32::try_from(key).ok();
        if kind == Kind::MadeUpEvidence {
            // A box of a lesion's size and a range around the key slice: evidence that looks
            // like evidence.
            let voxel = |value: usize| u32::try_from(value).unwrap_or(u32::MAX);
            changed.slice_box = Some(guessed_box(columns, rows, rng));
            findings.lesion_slices = Some(keyslice_core::findings::SliceRange {
                first: voxel(key.saturating_sub(3)),
                last: voxel((key + 3).min(slices.saturating_sub(1))),
            });
        }
    }
}

impl Diagnoser for Hallucinating<'_> {
    fn model_id(&self) -> ModelId {
        self.plan.model_id(&self.inner.model_id())
    }

    fn diagnose(&self, volume: &Volume) -> Result<Diagnosis, InferError> {
        let mut diagnosis = self.inner.diagnose(volume)?;
        let Some(mut rng) = self.plan.draw(self.case_id) else {
            return Ok(diagnosis);
        };
        if let Some(kind) = self.plan.kind {
            // A kind with no place in this answer (no finding to stand beside, no kidney
            // lesion to swap) leaves it as the model wrote it.
            if let Some(injected) = inject(kind, &diagnosis, volume.dims(), &mut rng) {
                tracing::debug!(case = self.case_id, kind = kind.name(), organ = %injected.organ, "made up a finding");
                diagnosis = injected.diagnosis;
            }
            return Ok(diagnosis);
        }
        let read = read_report(&diagnosis.report);
        if let Some((findings, organ)) = with_hallucinated_tumor(&read.findings, &mut rng) {
            tracing::debug!(case = self.case_id, %organ, "hallucinated a tumor");
            let mut report = write_report(&findings.without_spans());
            // The key slice and box lines the model wrote stay as they were.
            for line in diagnosis.report.lines().filter(|line| {
                let lower = line.to_ascii_lowercase();
                lower.starts_with("key slice") || lower.starts_with("box")
            }) {
                if !report.contains(line) {
                    report.push_str(line);
                    report.push('\n');
                }
            }
            diagnosis.report = report;
            // A model that names a tumor names a slice for it: where it had none (it saw no
            // tumor at all), a slice of the volume's middle half, as a model guessing would.
            if diagnosis.key_slice.is_none() {
                let [_, _, slices] = volume.dims();
                let quarter = slices / 4;
                let index = quarter + rng.below((slices / 2).max(1));
                diagnosis.key_slice = u32::try_from(index.min(slices.saturating_sub(1))).ok();
            }
        }
        Ok(diagnosis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_of_cases_drawn_is_the_share_asked() {
        let plan = Hallucinate {
            share: 0.25,
            seed: 9,
            kind: None,
        };
        let drawn = (0..4000)
            .filter(|k| plan.draw(&format!("CASE_{k:04}")).is_some())
            .count();
        assert!((900..1100).contains(&drawn), "{drawn}");
        // The same case is drawn the same way every time.
        assert_eq!(
            plan.draw("CASE_0001").is_some(),
            plan.draw("CASE_0001").is_some()
        );
        assert!(
            Hallucinate {
                share: 0.0,
                seed: 9,
                kind: None,
            }
            .draw("CASE_0001")
            .is_none()
        );
    }

    #[test]
    fn the_tumor_goes_to_an_organ_called_clean() {
        let mut findings = Findings::default();
        for organ in [Organ::Liver, Organ::Pancreas, Organ::KidneyRight] {
            findings.organs.insert(
                organ,
                OrganFindings {
                    tumor: TumorPresence::Yes,
                    lesions: Vec::new(),
                    span: None,
                },
            );
        }
        let (hallucinated, organ) =
            with_hallucinated_tumor(&findings, &mut Rng::new(1)).expect("one clean organ");
        assert_eq!(organ, Organ::KidneyLeft);
        assert!(hallucinated.states_tumor(Organ::KidneyLeft));
        // Written and read back, the report states it.
        let text = write_report(&hallucinated);
        assert!(
            read_report(&text).findings.states_tumor(Organ::KidneyLeft),
            "{text}"
        );
        findings.organs.insert(
            Organ::KidneyLeft,
            hallucinated.organs[&Organ::KidneyLeft].clone(),
        );
        assert!(with_hallucinated_tumor(&findings, &mut Rng::new(1)).is_none());
    }

    fn answer(report: &str, key: Option<u32>) -> Diagnosis {
        Diagnosis {
            report: report.to_string(),
            key_slice: key,
            ..Diagnosis::default()
        }
    }

    /// Each kind makes up the finding it names, where the answer has room for it, and the
    /// made-up finding is in the changed report.
    #[test]
    fn each_kind_makes_up_its_finding_and_says_where() {
        let dims = [64, 64, 40];
        let liver = answer(
            "Liver lesion 1: Location: hepatic segment 7. Size: 2.0 x 1.5 cm. Enhancement \
             relative to liver: Hypoattenuating.\nPancreas: no tumor.\nLeft kidney: no \
             tumor.\nRight kidney: no tumor.",
            Some(20),
        );
        let clean = answer(
            "Liver: no tumor.\nPancreas: no tumor.\nLeft kidney: no tumor.\nRight kidney: no tumor.",
            None,
        );
        let kidney = answer(
            "Liver: no tumor.\nPancreas: no tumor.\nLeft kidney lesion 1: Location: lower \
             pole. Size: 3.0 x 2.0 cm.\nRight kidney: no tumor.",
            Some(12),
        );
        let mut rng = Rng::new(3);
        let made = |kind, diagnosis: &Diagnosis, rng: &mut Rng| inject(kind, diagnosis, dims, rng);
        // Alone only where the model found nothing; beside a real finding only where it found one.
        assert!(made(Kind::Alone, &liver, &mut rng).is_none());
        let alone = made(Kind::Alone, &clean, &mut rng).expect("room");
        assert!(
            read_report(&alone.diagnosis.report)
                .findings
                .states_tumor(alone.organ)
        );
        assert!(alone.diagnosis.key_slice.is_some(), "a claim names a slice");
        assert!(made(Kind::BesideReal, &clean, &mut rng).is_none());
        let beside = made(Kind::BesideReal, &liver, &mut rng).expect("room");
        assert_ne!(beside.organ, Organ::Liver);
        assert_eq!(
            beside.diagnosis.key_slice,
            Some(20),
            "the model's own slice"
        );
        let second = made(Kind::SecondLesion, &liver, &mut rng).expect("room");
        assert_eq!((second.organ, second.lesion), (Organ::Liver, 1));
        let read = read_report(&second.diagnosis.report).findings;
        assert_eq!(read.organ(Organ::Liver).lesions.len(), 2);
        let swapped = made(Kind::SideSwap, &kidney, &mut rng).expect("room");
        assert_eq!(swapped.organ, Organ::KidneyRight);
        let read = read_report(&swapped.diagnosis.report).findings;
        assert!(read.states_tumor(Organ::KidneyRight) && !read.states_tumor(Organ::KidneyLeft));
        assert!(made(Kind::SideSwap, &liver, &mut rng).is_none());
        let wrong = made(Kind::WrongAttributes, &liver, &mut rng).expect("room");
        let wrong_read = read_report(&wrong.diagnosis.report).findings;
        let lesion = &wrong_read.organ(Organ::Liver).lesions[0];
        assert_eq!(lesion.size.map(|size| size.long_cm), Some(4.0));
        assert_eq!(lesion.attenuation, Some(Attenuation::Hyper));
        let cited = made(Kind::MadeUpEvidence, &liver, &mut rng).expect("room");
        let slice_box = cited.diagnosis.slice_box.expect("a box of its own");
        assert!(slice_box.voxels[2] < 64 && slice_box.voxels[3] < 64);
        let key = cited.diagnosis.key_slice.expect("a key slice of its own");
        assert!((10..30).contains(&key), "{key}");
        let range = read_report(&cited.diagnosis.report)
            .findings
            .lesion_slices
            .expect("a range");
        assert!(range.contains(key));
    }
}
