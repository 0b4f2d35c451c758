//! Reads an export back as training cases: the reviewed answers of a `swift` or `verl`
//! export with the CTs its `--volumes` wrote. This is how radiologists' corrections reach
//! `keyslice train --stage rl --from-export`.
//!
//! The answer of a case is its `findings` column (swift) or `reward_model.ground_truth`
//! (verl, the ground truth as the reward reads it): the corrected findings, key slice
//! included. Only the `train` split is read; the
//! `val` split stays for evaluation.

use std::path::{Path, PathBuf};

use arrow_array::{Array, BooleanArray, RecordBatch, StringArray, StructArray};
use serde_json::Value;

use super::{EXPORT_MANIFEST, volume_file};
use keyslice_core::findings::Findings;
use keyslice_core::scoring::TruthRecord;

/// One training case of an export.
#[derive(Clone, Debug)]
pub struct ExportedCase {
    /// The case's pseudonym.
    pub case: String,
    /// The answer: the reviewed findings.
    pub findings: Findings,
    /// The reviewer changed the model's findings (the export's `hard`).
    pub hard: bool,
    /// The CT (`volumes/<case>.nii.gz` in the export).
    pub volume: PathBuf,
}

/// Why an export could not be read; `path` is the file at fault.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {detail}")]
pub struct ReadError {
    /// The file or folder.
    pub path: PathBuf,
    /// What is wrong.
    pub detail: String,
    /// What the user can do.
    pub hint: &'static str,
}

const REEXPORT: &str = "export the reviewed workspace again with `keyslice export WORKSPACE \
                        --format swift --volumes --out DIR` and pass that folder";

/// The `train` cases of the export in `folder`, in the export's order.
pub fn read_training_cases(folder: &Path) -> Result<Vec<ExportedCase>, ReadError> {
    let manifest_path = folder.join(EXPORT_MANIFEST);
    let error = |path: &Path, detail: String| ReadError {
        path: path.to_path_buf(),
        detail,
        hint: REEXPORT,
    };
    let manifest: Value = std::fs::read_to_string(&manifest_path)
        .map_err(|e| e.to_string())
        .and_then(|text| serde_json::from_str(&text).map_err(|e| e.to_string()))
        .map_err(|detail| {
            error(
                &manifest_path,
                format!("{detail} (not a Keyslice export: it has no readable {EXPORT_MANIFEST})"),
            )
        })?;
    if manifest["volumes"].is_null() {
        return Err(error(
            &manifest_path,
            "this export was made without --volumes: it holds frames but not the CTs the \
             model reads"
                .into(),
        ));
    }
    let rows = match manifest["format"].as_str() {
        Some("swift") => read_swift(&folder.join("train.jsonl"))?,
        Some("verl") => read_verl(&folder.join("train.parquet"))?,
        other => {
            return Err(error(
                &manifest_path,
                format!(
                    "a {} export; training reads swift or verl exports",
                    other.unwrap_or("unknown")
                ),
            ));
        }
    };
    rows.into_iter()
        .map(|(case, findings, hard)| {
            let volume = folder.join(volume_file(&case));
            if !volume.is_file() {
                return Err(error(&volume, "missing: the export is incomplete".into()));
            }
            Ok(ExportedCase {
                case,
                findings,
                hard,
                volume,
            })
        })
        .collect()
}

type Row = (String, Findings, bool);

/// The rows of a swift `train.jsonl`.
fn read_swift(path: &Path) -> Result<Vec<Row>, ReadError> {
    let error = |detail: String| ReadError {
        path: path.to_path_buf(),
        detail,
        hint: REEXPORT,
    };
    let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(number, line)| {
            let at = |detail: String| error(format!("line {}: {detail}", number + 1));
            let row: Value = serde_json::from_str(line).map_err(|e| at(e.to_string()))?;
            let case = row["case"]
                .as_str()
                .ok_or_else(|| at("no \"case\"".into()))?
                .to_string();
            // JSON text; an object in exports written before the findings were text.
            let findings = match &row["findings"] {
                Value::String(text) => serde_json::from_str::<Findings>(text),
                other => serde_json::from_value::<Findings>(other.clone()),
            }
            .map_err(|e| at(format!("\"findings\": {e}")))?;
            Ok((case, findings, row["hard"].as_bool().unwrap_or(false)))
        })
        .collect()
}

/// The rows of a verl `train.parquet`.
fn read_verl(path: &Path) -> Result<Vec<Row>, ReadError> {
    let error = |detail: String| ReadError {
        path: path.to_path_buf(),
        detail,
        hint: REEXPORT,
    };
    let file = std::fs::File::open(path).map_err(|e| error(e.to_string()))?;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::build)
        .map_err(|e| error(e.to_string()))?;
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| error(e.to_string()))?;
        rows.extend(verl_rows(&batch).map_err(error)?);
    }
    Ok(rows)
}

fn verl_rows(batch: &RecordBatch) -> Result<Vec<Row>, String> {
    let structure = |name: &str| {
        batch
            .column_by_name(name)
            .and_then(|column| column.as_any().downcast_ref::<StructArray>())
            .ok_or_else(|| format!("no \"{name}\" struct column"))
    };
    let reward = structure("reward_model")?;
    let extra = structure("extra_info")?;
    let strings = |parent: &StructArray, name: &str| -> Result<StringArray, String> {
        parent
            .column_by_name(name)
            .and_then(|column| column.as_any().downcast_ref::<StringArray>())
            .cloned()
            .ok_or_else(|| format!("no string field \"{name}\""))
    };
    let truth = strings(reward, "ground_truth")?;
    let cases = strings(extra, "case")?;
    let hard = extra
        .column_by_name("hard")
        .and_then(|column| column.as_any().downcast_ref::<BooleanArray>())
        .ok_or("no boolean field \"hard\"")?;
    (0..batch.num_rows())
        .map(|row| {
            let findings = TruthRecord::from_json(truth.value(row))
                .and_then(|truth| truth.truth_findings())
                .map_err(|e| format!("row {row}: ground_truth: {e}"))?;
            let hard = hard.is_valid(row) && hard.value(row);
            Ok((cases.value(row).to_string(), findings, hard))
        })
        .collect()
}
