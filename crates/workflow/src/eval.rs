//! Evaluations on case folders with truth: whether the evidence tells a made-up finding from
//! a real one. The model answers each case once; its answer is verified as it is (its
//! natural false positives are their own row) and again with one made-up finding of each
//! kind injected ([`keyslice_infer::hallucinate::Kind`]), each re-verified on the answer's
//! key slice. Per kind and overall, per finding: the AUROC of `1 − consistency` (made-up
//! findings against the real findings of the untouched answers) with a 95 % interval that
//! resamples whole cases, the share of made-up findings shown as agreeing, the share of real
//! findings flagged, and what verifying cost. An injection that lands on a real tumor the
//! model missed is counted apart, never as made up.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use keyslice_core::findings::Findings;
use keyslice_core::mrmc::hallucination::{FindingClaim, FindingFigures, finding_figures};
use keyslice_core::prediction::Prediction;
use keyslice_core::rng::{Rng, mix};
use keyslice_core::scoring::Standing;
use keyslice_infer::backend::Backend;
use keyslice_infer::hallucinate::{Kind, inject};
use serde::Serialize;

use crate::Error;

/// The views the verifier read for `prediction`: the answer's key slice with its box, and each
/// other slice and box a lesion's own evidence names, each once.
fn views_read(prediction: &Prediction) -> usize {
    let main = prediction
        .local_description
        .as_ref()
        .and(prediction.key_slice.as_ref())
        .map(|key| (key.index, prediction.slice_box.clone()));
    let mut seen: Vec<(u32, Option<keyslice_core::findings::SliceBox>)> =
        main.into_iter().collect();
    for check in &prediction.lesion_checks {
        let view = (check.key_slice, check.slice_box.clone());
        if !seen.contains(&view) {
            seen.push(view);
        }
    }
    seen.len()
}

/// One row of the evaluation.
#[derive(Debug, Serialize)]
pub struct Row {
    /// The kind of made-up finding (or "natural": the model's own false positives).
    pub kind: &'static str,
    /// Made-up findings injected where the answer had room for one.
    pub injected: usize,
    /// Of those, the ones that landed on a real tumor the model missed (not made up).
    pub landed_on_real: usize,
    /// The per-finding figures.
    #[serde(flatten)]
    pub figures: FindingFigures,
}

/// What the evaluation found.
#[derive(Debug, Serialize)]
pub struct Evaluation {
    /// The model.
    pub model: String,
    /// Cases read.
    pub cases: usize,
    /// Real findings of the untouched answers (the negatives of every row).
    pub real_findings: usize,
    /// Slices the verifier read per untouched answer: the key slice, and each lesion's own
    /// slice when it is another.
    pub verifications_per_answer: f64,
    /// Lesions claimed per untouched answer.
    pub lesions_per_answer: f64,
    /// What verifying may cost for that many lesions: 1 + 0.6 · lesions.
    pub verification_budget: f64,
    /// Mean time verifying one answer (ms).
    pub verify_ms_per_answer: f64,
    /// Each kind, then all kinds together, then the model's own false positives.
    pub rows: Vec<Row>,
}

/// The claimed findings of a verified answer, each labelled made up when its organ has no
/// tumor in truth: lesion by lesion where the verifier spoke, unverified where it could not.
fn claims_of(case_id: &str, prediction: &Prediction, truth: &Findings) -> Vec<FindingClaim> {
    let claim = |organ: keyslice_core::findings::Organ, standing, score| FindingClaim {
        case_id: case_id.to_string(),
        organ: organ.key(),
        made_up: !truth.states_tumor(organ),
        standing,
        score,
    };
    match &prediction.consistency {
        Some(consistency) => consistency
            .findings
            .iter()
            .filter(|finding| finding.standing != Standing::NotReported)
            .map(|finding| claim(finding.organ, finding.standing, finding.score))
            .collect(),
        None => prediction
            .findings
            .tumor_organs()
            .into_iter()
            .flat_map(|organ| {
                let lesions = prediction.findings.organ(organ).lesions.len().max(1);
                (0..lesions).map(move |_| claim(organ, Standing::Unverified, 0.0))
            })
            .collect(),
    }
}

/// The standing and score of the made-up finding (`organ`, `lesion`) in a verified answer.
fn injected_claim(
    case_id: &str,
    prediction: &Prediction,
    organ: keyslice_core::findings::Organ,
    lesion: usize,
) -> FindingClaim {
    let found = prediction.consistency.as_ref().and_then(|consistency| {
        consistency
            .findings
            .iter()
            .filter(|finding| finding.organ == organ)
            .find(|finding| finding.lesion.is_none_or(|index| index == lesion))
            .copied()
    });
    FindingClaim {
        case_id: case_id.to_string(),
        organ: organ.key(),
        made_up: true,
        standing: found.map_or(Standing::Unverified, |finding| finding.standing),
        score: found.map_or(0.0, |finding| finding.score),
    }
}

/// What the answers showed: the untouched answers' claims, each kind's made-up claims and
/// the injections that landed on a real tumor, and what verifying cost.
struct Collected {
    natural: Vec<FindingClaim>,
    injected: BTreeMap<usize, (Vec<FindingClaim>, usize)>,
    answers: usize,
    verify_ms: f64,
    /// Slices read for the untouched answers.
    natural_views: usize,
}

/// Each case answered once, verified as it is and with each kind of made-up finding.
fn collect(
    data: &Path,
    records: &[keyslice_core::scoring::TruthRecord],
    model: &Backend,
    seed: u64,
) -> Result<Collected, Error> {
    let mut natural = Vec::new();
    let mut injected: BTreeMap<usize, (Vec<FindingClaim>, usize)> = BTreeMap::new();
    let (mut answers, mut verify_ms) = (0usize, 0.0f64);
    let mut natural_views = 0;
    for record in records {
        let case_id = record.case_id.as_str();
        let truth = record
            .truth_findings()
            .map_err(|error| Error::Argument(format!("{error} ({})", data.display())))?;
        let study =
            keyslice_io::load_study(&data.join(case_id), &keyslice_io::LoadOptions::default())?;
        let volume = &study.volume;
        let diagnosis = model.diagnose(volume)?;
        let mut verified = |diagnosis| -> Result<Prediction, Error> {
            let prediction = model.verify_diagnosis(case_id, volume, diagnosis)?;
            answers += 1;
            verify_ms += prediction.timings_ms.verify;
            Ok(prediction)
        };
        let untouched = verified(diagnosis.clone())?;
        natural_views += views_read(&untouched);
        natural.extend(claims_of(case_id, &untouched, &truth));
        for (k, kind) in Kind::ALL.into_iter().enumerate() {
            let draw = case_id
                .bytes()
                .fold(mix(seed ^ (k as u64 + 1)), |hash, byte| {
                    mix(hash ^ u64::from(byte))
                });
            let Some(made_up) = inject(kind, &diagnosis, volume.dims(), &mut Rng::new(draw)) else {
                continue;
            };
            let prediction = verified(made_up.diagnosis)?;
            let entry = injected.entry(k).or_default();
            // A tumor put in an organ whose truth has one landed on a tumor the model missed.
            let moved_organ = matches!(
                kind,
                Kind::Alone | Kind::BesideReal | Kind::MadeUpEvidence | Kind::SideSwap
            );
            if moved_organ && truth.states_tumor(made_up.organ) {
                entry.1 += 1;
                continue;
            }
            entry.0.push(injected_claim(
                case_id,
                &prediction,
                made_up.organ,
                made_up.lesion,
            ));
        }
    }
    Ok(Collected {
        natural,
        injected,
        answers,
        verify_ms,
        natural_views,
    })
}

/// Whether the evidence tells a made-up finding from a real one, on the case folders with
/// truth in `data`: each case answered once by `model`, verified as it is and with one
/// made-up finding of each kind injected (drawn from `seed`, the case and the kind).
pub fn evaluate_evidence(data: &Path, model: &Backend, seed: u64) -> Result<Evaluation, Error> {
    if !data.is_dir() {
        return Err(Error::Argument(format!(
            "--data {}: not a folder of case folders (keyslice phantom --out DIR makes one)",
            data.display()
        )));
    }
    let records = keyslice_io::cases::read_truth(data)?;
    // Each case is a folder of `data`: an id that is not one plain name (a `..`, a slash)
    // would read a CT from elsewhere.
    if let Some(bad) = records.iter().find(|record| {
        let mut parts = std::path::Path::new(&record.case_id).components();
        !matches!(
            (parts.next(), parts.next()),
            (Some(std::path::Component::Normal(_)), None)
        )
    }) {
        return Err(Error::Argument(format!(
            "{}: the case id {} is not the name of a case folder in it",
            data.display(),
            keyslice_core::text::shown(&format!("{:?}", bad.case_id))
        )));
    }
    if records.is_empty() {
        return Err(Error::Argument(format!(
            "{}: no case folders with truth (keyslice phantom --out DIR makes some)",
            data.display()
        )));
    }
    let Collected {
        natural,
        mut injected,
        answers,
        verify_ms,
        natural_views,
    } = collect(data, &records, model, seed)?;
    let real: Vec<FindingClaim> = natural
        .iter()
        .filter(|claim| !claim.made_up)
        .cloned()
        .collect();
    // Each kind's made-up findings against the real findings of the untouched answers; the
    // row lists the made-up ones (the real ones are the natural row's).
    let with_real = |made_up: Vec<FindingClaim>| {
        let mut all = made_up;
        all.extend(real.iter().cloned());
        let mut figures = finding_figures(all);
        figures.claims.retain(|claim| claim.made_up);
        figures
    };
    let mut rows = Vec::new();
    let mut every = Vec::new();
    let mut landed_all = 0;
    for (k, kind) in Kind::ALL.into_iter().enumerate() {
        let (claims, landed) = injected.remove(&k).unwrap_or_default();
        every.extend(claims.iter().cloned());
        landed_all += landed;
        rows.push(Row {
            kind: kind.name(),
            injected: claims.len() + landed,
            landed_on_real: landed,
            figures: with_real(claims),
        });
    }
    rows.push(Row {
        kind: "all kinds",
        injected: every.len() + landed_all,
        landed_on_real: landed_all,
        figures: with_real(every),
    });
    let natural_made_up = natural.iter().filter(|claim| claim.made_up).count();
    rows.push(Row {
        kind: "natural",
        injected: natural_made_up,
        landed_on_real: 0,
        figures: finding_figures(natural.clone()),
    });
    let evaluation = Evaluation {
        model: model.model_id().id,
        cases: records.len(),
        real_findings: real.len(),
        verifications_per_answer: natural_views as f64 / records.len() as f64,
        lesions_per_answer: natural.len() as f64 / records.len() as f64,
        verification_budget: 1.0 + 0.6 * natural.len() as f64 / records.len() as f64,
        verify_ms_per_answer: verify_ms / answers.max(1) as f64,
        rows,
    };
    Ok(evaluation)
}

impl Evaluation {
    /// The evaluation as a table: a line on the model and the cost of verifying, then a row
    /// per kind.
    pub fn write_table(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let evaluation = self;
        writeln!(
            out,
            "{}: {} cases, {} real findings; {:.2} slices verified per answer for {:.2} lesions claimed (budget 1 + 0.6 · lesions = {:.2}), {:.1} ms verifying an answer",
            keyslice_core::text::shown(&evaluation.model),
            evaluation.cases,
            evaluation.real_findings,
            evaluation.verifications_per_answer,
            evaluation.lesions_per_answer,
            evaluation.verification_budget,
            evaluation.verify_ms_per_answer
        )?;
        writeln!(
            out,
            "{:<18} {:>8} {:>7} {:>7} {:>15} {:>16} {:>12}",
            "kind", "made up", "landed", "AUROC", "95 % CI", "shown agreeing", "real flagged"
        )?;
        let number =
            |value: Option<f64>| value.map_or_else(|| "–".to_string(), |v| format!("{v:.3}"));
        let share = |value: Option<f64>| {
            value.map_or_else(|| "–".to_string(), |v| format!("{:.0} %", 100.0 * v))
        };
        for row in &evaluation.rows {
            let figures = &row.figures;
            writeln!(
                out,
                "{:<18} {:>8} {:>7} {:>7} {:>15} {:>16} {:>12}",
                row.kind,
                figures.made_up,
                row.landed_on_real,
                number(figures.auroc),
                figures.auroc_ci.map_or_else(
                    || "–".to_string(),
                    |[low, high]| format!("{low:.3}–{high:.3}")
                ),
                share(figures.made_up_shown_agreeing),
                share(figures.real_flagged)
            )?;
        }
        Ok(())
    }
}
