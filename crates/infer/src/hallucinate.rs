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
        ModelId {
            id: format!(
                "{}+hallucinating-{:.0}%-seed{}",
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
    let long_cm = (rng.uniform(1.5, 3.5) * 10.0).round() / 10.0;
    let short_cm = (long_cm * rng.uniform(0.6, 0.9) * 10.0).round() / 10.0;
    let mut hallucinated = findings.clone();
    hallucinated.organs.insert(
        organ,
        OrganFindings {
            tumor: TumorPresence::Yes,
            lesions: vec![Lesion {
                size: Some(LesionSize {
                    long_cm,
                    short_cm: Some(short_cm),
                }),
                location: None,
                attenuation: Some(Attenuation::Hypo),
                count: None,
                spans: keyslice_core::findings::LesionSpans::default(),
            }],
            span: None,
        },
    );
    Some((hallucinated, organ))
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
                seed: 9
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
}
