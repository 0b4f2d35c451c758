//! QIDO-RS search: studies matching a query, a study's series, a series' instances.

use serde::Serialize;

use super::url::percent_encode;
use super::{PacsError, Server, json_string, json_strings};

/// One study a search found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StudySummary {
    /// Study Instance UID.
    pub study_uid: String,
    /// Study Date (`YYYYMMDD`).
    pub date: String,
    /// Accession Number.
    pub accession: String,
    /// Patient ID.
    pub patient_id: String,
    /// Study Description.
    pub description: String,
    /// Modalities in Study.
    pub modalities: Vec<String>,
    /// Number of Study Related Instances, when the server gives it.
    pub instances: Option<u32>,
}

/// One series of a study.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SeriesSummary {
    /// Series Instance UID.
    pub series_uid: String,
    /// Modality.
    pub modality: String,
    /// Series Description.
    pub description: String,
    /// Number of Series Related Instances, when the server gives it.
    pub instances: Option<u32>,
}

/// One instance of a series.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InstanceSummary {
    /// SOP Instance UID.
    pub sop_uid: String,
    /// SOP Class UID.
    pub sop_class_uid: String,
}

const ACCEPT_JSON: &str = "application/dicom+json";

/// The query attributes Keyslice accepts by keyword (a tag in hex is passed on as is).
const QUERY_KEYS: [&str; 9] = [
    "PatientID",
    "PatientName",
    "StudyDate",
    "ModalitiesInStudy",
    "AccessionNumber",
    "StudyDescription",
    "StudyInstanceUID",
    "limit",
    "offset",
];

/// Studies matching `query` (attribute keyword → value, QIDO-RS matching: `*` wildcards,
/// date ranges `20240101-20241231`).
pub fn studies(
    server: &Server,
    query: &[(String, String)],
) -> Result<Vec<StudySummary>, PacsError> {
    let mut path = String::from("studies?includefield=00081030&includefield=00201208");
    for (key, value) in query {
        let is_tag = key.len() == 8 && key.chars().all(|c| c.is_ascii_hexdigit());
        if !is_tag && !QUERY_KEYS.contains(&key.as_str()) {
            return Err(PacsError::Url {
                url: format!("{}?{key}=…", server.name()),
                reason: format!(
                    "`{key}` is not a study query key; use one of {} or a tag in hex",
                    QUERY_KEYS.join(", ")
                ),
            });
        }
        path.push('&');
        path.push_str(&percent_encode(key));
        path.push('=');
        path.push_str(&percent_encode(value));
    }
    let what = "the study search";
    let items = search(server, &path, what)?;
    let mut studies: Vec<StudySummary> = items
        .iter()
        .filter_map(|item| {
            Some(StudySummary {
                study_uid: json_string(item, "0020000D")?,
                date: json_string(item, "00080020").unwrap_or_default(),
                accession: json_string(item, "00080050").unwrap_or_default(),
                patient_id: json_string(item, "00100020").unwrap_or_default(),
                description: json_string(item, "00081030").unwrap_or_default(),
                modalities: json_strings(item, "00080061"),
                instances: json_string(item, "00201208").and_then(|n| n.parse().ok()),
            })
        })
        .collect();
    studies.sort_by(|a, b| (&a.date, &a.study_uid).cmp(&(&b.date, &b.study_uid)));
    Ok(studies)
}

/// The series of `study`, optionally only those of `modality`.
pub fn series(
    server: &Server,
    study: &str,
    modality: Option<&str>,
) -> Result<Vec<SeriesSummary>, PacsError> {
    let mut path = format!("studies/{study}/series?includefield=0008103E&includefield=00201209");
    if let Some(modality) = modality {
        path.push_str("&Modality=");
        path.push_str(&percent_encode(modality));
    }
    let what = format!("the series of study {study}");
    let items = search(server, &path, &what)?;
    let mut series: Vec<SeriesSummary> = items
        .iter()
        .filter_map(|item| {
            Some(SeriesSummary {
                series_uid: json_string(item, "0020000E")?,
                modality: json_string(item, "00080060").unwrap_or_default(),
                description: json_string(item, "0008103E").unwrap_or_default(),
                instances: json_string(item, "00201209").and_then(|n| n.parse().ok()),
            })
        })
        .collect();
    series.sort_by(|a, b| a.series_uid.cmp(&b.series_uid));
    Ok(series)
}

/// The instances of one series, sorted by SOP Instance UID.
pub fn instances(
    server: &Server,
    study: &str,
    series: &str,
) -> Result<Vec<InstanceSummary>, PacsError> {
    let path = format!("studies/{study}/series/{series}/instances?includefield=00080016");
    let what = format!("the instances of series {series} of study {study}");
    let items = search(server, &path, &what)?;
    let mut instances: Vec<InstanceSummary> = items
        .iter()
        .filter_map(|item| {
            Some(InstanceSummary {
                sop_uid: json_string(item, "00080018")?,
                sop_class_uid: json_string(item, "00080016").unwrap_or_default(),
            })
        })
        .collect();
    instances.sort_by(|a, b| a.sop_uid.cmp(&b.sop_uid));
    instances.dedup();
    Ok(instances)
}

/// `GET` a QIDO-RS `path` and its answer's items (an empty search is an empty list).
fn search(server: &Server, path: &str, what: &str) -> Result<Vec<serde_json::Value>, PacsError> {
    let answer = server.get(path, ACCEPT_JSON, what)?;
    match server.json(answer, what)? {
        serde_json::Value::Array(items) => Ok(items),
        _ => Err(server.broken(what, "the answer is not a JSON array")),
    }
}
