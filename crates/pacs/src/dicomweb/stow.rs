//! STOW-RS store: DICOM objects sent to the server in one `multipart/related` request.

use super::multipart::related_dicom;
use super::{PacsError, Server, json_string};
use dicom_dictionary_std::tags;

/// What the server did with a store request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stored {
    /// SOP Instance UIDs the server accepted.
    pub accepted: Vec<String>,
}

/// Stores `objects` (DICOM Part 10 files) in `study` on `server`. Any object the server
/// refuses makes the whole call an error naming it and the server's reason.
pub fn store(server: &Server, study: &str, objects: &[Vec<u8>]) -> Result<Stored, PacsError> {
    let boundary = format!("keyslice-{:016x}", rand_u64());
    let (content_type, body) = related_dicom(objects, &boundary);
    let what = format!("storing {} object(s) in study {study}", objects.len());
    let answer = server.post(&format!("studies/{study}"), &content_type, &body, &what)?;
    let json = server.json(answer, &what)?;
    let sequence = |tag: dicom_core::Tag| {
        json.get(super::json_key(tag))
            .and_then(|attribute| attribute.get("Value"))
            .and_then(serde_json::Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let failed: Vec<String> = sequence(tags::FAILED_SOP_SEQUENCE)
        .iter()
        .map(|item| {
            format!(
                "{} (failure reason {})",
                json_string(item, tags::REFERENCED_SOP_INSTANCE_UID)
                    .unwrap_or_else(|| "an object".into()),
                json_string(item, tags::FAILURE_REASON).unwrap_or_else(|| "not given".into())
            )
        })
        .collect();
    if !failed.is_empty() {
        return Err(server.broken(&what, format!("the server refused {}", failed.join(", "))));
    }
    let mut accepted: Vec<String> = sequence(tags::REFERENCED_SOP_SEQUENCE)
        .iter()
        .filter_map(|item| json_string(item, tags::REFERENCED_SOP_INSTANCE_UID))
        .collect();
    accepted.sort();
    Ok(Stored { accepted })
}

/// A boundary that does not occur in the parts (a 64-bit value from the clock and the
/// process; the parts are DICOM binary, where a collision is as good as impossible).
fn rand_u64() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    (nanos as u64) ^ (u64::from(std::process::id()) << 32) ^ 0x9e37_79b9_7f4a_7c15
}
