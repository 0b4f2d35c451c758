//! Synthetic abdominal CT phantoms with organ and lesion masks and their truth, written as
//! case folders (what the demo, the tests and training read).

use std::path::{Path, PathBuf};
use std::time::Instant;

use keyslice_phantom::PhantomOptions;
use keyslice_phantom::write::write_phantoms;

use crate::{Error, Outcome, Report};

/// Phantoms written.
pub struct Phantoms {
    out: PathBuf,
    seed: u64,
    case_ids: Vec<String>,
    lesions: usize,
}

/// Writes `cases` phantom case folders into `out`, numbered from `first`, drawn from
/// `seed`; each case finished is told to `report` with the pace.
pub fn make_phantoms(
    out: &Path,
    (seed, first, cases): (u64, u32, u32),
    options: PhantomOptions,
    report: &dyn Report,
) -> Result<Phantoms, Error> {
    if first.checked_add(cases.saturating_sub(1)).is_none() {
        return Err(Error::Argument(format!(
            "--first {first} with --cases {cases} runs past the last case index ({})",
            u32::MAX
        )));
    }
    if let Some(slice_mm) = options.slice_mm
        && !(0.5..=10.0).contains(&slice_mm)
    {
        return Err(Error::Argument(format!(
            "--slice-mm {slice_mm} is outside 0.5–10 mm"
        )));
    }
    let started = Instant::now();
    let manifest = write_phantoms(out, seed, first, cases, options, |done, total, case_id| {
        let seconds = started.elapsed().as_secs_f64();
        let rate = f64::from(done) / seconds.max(1e-9);
        report.note(&format!(
            "[{done}/{total}] {case_id} ({seconds:.1} s, {rate:.2} cases/s, ETA {:.0} s)",
            f64::from(total.saturating_sub(done)) / rate.max(1e-9)
        ));
    })?;
    Ok(Phantoms {
        out: out.to_path_buf(),
        seed,
        lesions: manifest.cases.iter().map(|case| case.lesions).sum(),
        case_ids: manifest
            .cases
            .into_iter()
            .map(|case| case.case_id)
            .collect(),
    })
}

impl Outcome for Phantoms {
    fn json(&self) -> String {
        serde_json::json!({
            "out": self.out,
            "cases": self.case_ids.len(),
            "lesions": self.lesions,
            "seed": self.seed,
            "case_ids": self.case_ids,
        })
        .to_string()
    }

    fn text(&self) -> String {
        format!(
            "{} phantom case(s), {} lesion(s), written to {} (manifest.json; synthetic, not patient data)",
            self.case_ids.len(),
            self.lesions,
            self.out.display()
        )
    }
}
