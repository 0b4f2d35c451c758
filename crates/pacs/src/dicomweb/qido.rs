//! QIDO-RS search: studies matching a query, a study's series, a series' instances.

use dicom_dictionary_std::tags;
use serde::Serialize;

use super::url::percent_encode;
use super::{PacsError, Server, is_uid, json_string, json_strings};

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
    /// Patient's Name (`FAMILY^GIVEN`), when the server gives it.
    pub patient_name: String,
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
    let mut studies = Vec::with_capacity(items.len());
    for item in &items {
        let Some(study_uid) = uid_of(
            server,
            item,
            tags::STUDY_INSTANCE_UID,
            "Study Instance UID",
            what,
        )?
        else {
            continue;
        };
        studies.push(StudySummary {
            study_uid,
            date: json_string(item, tags::STUDY_DATE).unwrap_or_default(),
            accession: json_string(item, tags::ACCESSION_NUMBER).unwrap_or_default(),
            patient_id: json_string(item, tags::PATIENT_ID).unwrap_or_default(),
            patient_name: json_string(item, tags::PATIENT_NAME).unwrap_or_default(),
            description: json_string(item, tags::STUDY_DESCRIPTION).unwrap_or_default(),
            modalities: json_strings(item, tags::MODALITIES_IN_STUDY),
            instances: json_string(item, tags::NUMBER_OF_STUDY_RELATED_INSTANCES)
                .and_then(|n| n.parse().ok()),
        });
    }
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
    let mut series = Vec::with_capacity(items.len());
    for item in &items {
        let Some(series_uid) = uid_of(
            server,
            item,
            tags::SERIES_INSTANCE_UID,
            "Series Instance UID",
            &what,
        )?
        else {
            continue;
        };
        series.push(SeriesSummary {
            series_uid,
            modality: json_string(item, tags::MODALITY).unwrap_or_default(),
            description: json_string(item, tags::SERIES_DESCRIPTION).unwrap_or_default(),
            instances: json_string(item, tags::NUMBER_OF_SERIES_RELATED_INSTANCES)
                .and_then(|n| n.parse().ok()),
        });
    }
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
    let mut instances = Vec::with_capacity(items.len());
    for item in &items {
        let Some(sop_uid) = uid_of(
            server,
            item,
            tags::SOP_INSTANCE_UID,
            "SOP Instance UID",
            &what,
        )?
        else {
            continue;
        };
        instances.push(InstanceSummary {
            sop_uid,
            sop_class_uid: json_string(item, tags::SOP_CLASS_UID).unwrap_or_default(),
        });
    }
    instances.sort_by(|a, b| a.sop_uid.cmp(&b.sop_uid));
    instances.dedup();
    Ok(instances)
}

/// The UID in `tag` of a QIDO item: `None` when the item has none (it is skipped), an error
/// when it is anything but a DICOM UID (a path, `..`, a control character): such an answer is
/// refused whole before any of it reaches the file system.
fn uid_of(
    server: &Server,
    item: &serde_json::Value,
    tag: dicom_core::Tag,
    field: &'static str,
    what: &str,
) -> Result<Option<String>, PacsError> {
    match json_string(item, tag) {
        None => Ok(None),
        Some(uid) if is_uid(&uid) => Ok(Some(uid)),
        Some(value) => Err(PacsError::NotUid {
            server: server.name().to_string(),
            what: what.to_string(),
            field,
            value,
        }),
    }
}

/// `GET` a QIDO-RS `path` and its answer's items (an empty search is an empty list).
fn search(server: &Server, path: &str, what: &str) -> Result<Vec<serde_json::Value>, PacsError> {
    let answer = server.get(path, ACCEPT_JSON, what)?;
    server.json_items(answer, what)
}
