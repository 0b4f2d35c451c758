//! A DICOMweb client: the server and its credentials ([`Server`]), `dicomweb+http://` URLs
//! ([`DicomWebUrl`]), QIDO-RS search ([`qido`]), WADO-RS retrieve into a cache
//! ([`retrieve`]), STOW-RS store ([`stow`]) and the multipart bodies they exchange
//! ([`multipart`]).
//!
//! Every request goes through [`Server::get`] / [`Server::post`]: a timeout, retries with
//! back-off where a retry helps (a dropped connection, HTTP 429/500/502/503/504), and an
//! error that names the server (without credentials) and what was asked.

pub mod http;
pub mod multipart;
pub mod qido;
pub mod retrieve;
pub mod stow;
pub mod url;

use dicom_core::Tag;

pub use http::Server;
pub use url::{Auth, DicomWebUrl, Target};

/// What went wrong talking to a PACS.
#[derive(Debug, thiserror::Error)]
pub enum PacsError {
    /// The URL cannot be used.
    #[error("not a DICOMweb URL: {url}: {reason}")]
    Url {
        /// The URL as given (credentials removed).
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Nothing answered, or the connection broke and retries did not help.
    #[error("cannot reach the PACS at {server}: {detail}")]
    Unreachable {
        /// The server (without credentials).
        server: String,
        /// What happened.
        detail: String,
    },
    /// The server refused the credentials.
    #[error("the PACS at {server} refused the request for {what} (HTTP {status}): {detail}")]
    Refused {
        /// The server.
        server: String,
        /// What was asked.
        what: String,
        /// 401 or 403.
        status: u16,
        /// The server's words.
        detail: String,
    },
    /// The study, series or instance is not on the server.
    #[error("{what} is not on the PACS at {server} (HTTP 404)")]
    NotFound {
        /// The server.
        server: String,
        /// What was asked.
        what: String,
    },
    /// The server failed.
    #[error(
        "the PACS at {server} failed on {what} (HTTP {status}){}",
        detail.as_ref().map(|words| format!(": {words}")).unwrap_or_default()
    )]
    Server {
        /// The server.
        server: String,
        /// What was asked.
        what: String,
        /// The HTTP status.
        status: u16,
        /// The server's words, when it gave any.
        detail: Option<String>,
    },
    /// The answer is not what DICOMweb says it should be (a truncated multipart body,
    /// JSON that is not a QIDO answer).
    #[error("the PACS at {server} sent a broken answer to {what}: {detail}")]
    Answer {
        /// The server.
        server: String,
        /// What was asked.
        what: String,
        /// What is wrong with it.
        detail: String,
    },
    /// The study has no CT series to open.
    #[error("study {study} on the PACS at {server} has no CT series (it holds: {modalities})")]
    NoCt {
        /// The server.
        server: String,
        /// Study Instance UID.
        study: String,
        /// The modalities it has.
        modalities: String,
    },
    /// The server named a study, series or instance by something that is not a UID (a path,
    /// `..`, control characters): nothing of that answer is used.
    #[error(
        "the PACS at {server} answered {what} with a {field} that is not a DICOM UID: `{}`; nothing of it was used",
        keyslice_core::text::shown_short(value, 80)
    )]
    NotUid {
        /// The server.
        server: String,
        /// What was asked.
        what: String,
        /// The attribute (`Series Instance UID`).
        field: &'static str,
        /// The value it sent.
        value: String,
    },
    /// An answer is larger than what it can honestly hold.
    #[error("the PACS at {server} sent more for {what} than it can hold: {detail}")]
    TooLarge {
        /// The server.
        server: String,
        /// What was asked.
        what: String,
        /// What the limit is and why.
        detail: String,
    },
    /// The local cache could not be written.
    #[error("cannot write the DICOMweb cache: {source} ({})", path.display())]
    Cache {
        /// The file or folder.
        path: std::path::PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A document or image is not one Keyslice can read: the reason as a sentence (the
    /// structural guard's, or a value checked after parsing).
    #[error("{}: {reason}", path.display())]
    Unreadable {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// dicom-rs could not open a file.
    #[error("cannot read {}: {source}", path.display())]
    Open {
        /// The file.
        path: std::path::PathBuf,
        /// What dicom-rs said.
        source: Box<dicom_object::ReadError>,
    },
    /// An image of the study has no Study Instance UID.
    #[error("{} has no Study Instance UID: results cannot be filed with its study", .0.display())]
    NoStudyUid(std::path::PathBuf),
    /// A series folder holds no DICOM file.
    #[error("{} holds no DICOM file", .0.display())]
    NoDicomFile(std::path::PathBuf),
    /// A key-image document was asked for a key slice that is no DICOM instance.
    #[error(
        "the key slice has no DICOM instance (the volume did not come from DICOM): no key image to select"
    )]
    NoKeyImage,
    /// dicom-rs could not build a document's file meta group.
    #[error("cannot build the file meta: {0}")]
    Meta(#[source] Box<dicom_object::meta::Error>),
    /// dicom-rs could not write a document.
    #[error("cannot write the document: {0}")]
    Write(#[source] Box<dicom_object::WriteError>),
}

impl PacsError {
    /// One sentence on what to do.
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            Self::Url { .. } => {
                "write it as dicomweb+http://HOST:PORT/ROOT/studies/STUDY_UID, or dicomweb+https://HOST/ROOT?PatientID=…&StudyDate=…&ModalitiesInStudy=CT for a query"
            }
            Self::Unreachable { .. } => {
                "check the address and port, that the PACS is running and that this machine may reach it (a proxy or firewall); then run the command again: what was retrieved is kept"
            }
            Self::Refused { .. } => {
                "set KEYSLICE_DICOMWEB_TOKEN (bearer token) or KEYSLICE_DICOMWEB_USER and KEYSLICE_DICOMWEB_PASSWORD (basic authentication) to an account the PACS accepts"
            }
            Self::NotFound { .. } => {
                "check the Study Instance UID (keyslice pacs query lists the studies) and the DICOMweb root of the URL (Orthanc: /dicom-web)"
            }
            Self::NotUid { .. } | Self::TooLarge { .. } => {
                "the PACS sent an answer Keyslice will not use; nothing was written from it: ask the PACS administrator to check the study and the server"
            }
            Self::Server { .. } | Self::Answer { .. } => {
                "the PACS failed; run the command again (what was retrieved is kept), and if it persists ask its administrator to check the server's log"
            }
            Self::NoCt { .. } => "choose a study with a CT series; Keyslice reads CT only",
            Self::Cache { .. } => {
                "check that the cache folder is writable and the disk has room (--cache chooses another folder)"
            }
            Self::Unreadable { .. } | Self::Open { .. } | Self::NoDicomFile(_) => {
                "the object named above is damaged or not a Keyslice result; retrieve it again"
            }
            Self::NoStudyUid(_) => {
                "retrieve the study from the PACS again; its images must name their study"
            }
            Self::NoKeyImage => "key images are published only for CTs read from DICOM",
            Self::Meta(_) | Self::Write(_) => {
                "this is a fault in Keyslice; please report it with the case"
            }
        }
    }
}

/// Whether `text` is a DICOM UID (PS3.5 9.1): components of digits joined by single dots,
/// at most 64 characters. Only such a UID is ever used in a file name.
#[must_use]
pub fn is_uid(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 64
        && text
            .split('.')
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
}

/// The key of `tag` in DICOM JSON (PS3.18 F.2): eight upper-case hex digits, `0020000D`.
#[must_use]
pub fn json_key(tag: Tag) -> String {
    format!("{:04X}{:04X}", tag.group(), tag.element())
}

/// A DICOM JSON attribute's first value as text (`tags::STUDY_INSTANCE_UID` → the Study
/// Instance UID). Person names give their alphabetic form.
#[must_use]
pub fn json_string(object: &serde_json::Value, tag: Tag) -> Option<String> {
    let value = object.get(json_key(tag))?.get("Value")?.get(0)?;
    match value {
        serde_json::Value::String(text) => Some(text.clone()),
        serde_json::Value::Number(number) => Some(number.to_string()),
        serde_json::Value::Object(name) => name
            .get("Alphabetic")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string),
        _ => None,
    }
}

/// Every value of a DICOM JSON attribute as text (`ModalitiesInStudy`).
#[must_use]
pub fn json_strings(object: &serde_json::Value, tag: Tag) -> Vec<String> {
    object
        .get(json_key(tag))
        .and_then(|attribute| attribute.get("Value"))
        .and_then(serde_json::Value::as_array)
        .map(|values| {
            values
                .iter()
                .filter_map(|value| match value {
                    serde_json::Value::String(text) => Some(text.clone()),
                    serde_json::Value::Number(number) => Some(number.to_string()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}
