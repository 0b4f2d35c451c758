//! `dicomweb+http(s)://` URLs: a server's DICOMweb root plus a study, a series or a query.
//!
//! ```text
//! dicomweb+http://127.0.0.1:8042/dicom-web/studies/1.2.3              one study
//! dicomweb+http://127.0.0.1:8042/dicom-web/studies/1.2.3/series/1.2.4 one series
//! dicomweb+https://pacs.example.org/dicom-web?PatientID=P1&StudyDate=20240101-20241231
//! dicomweb+http://127.0.0.1:8042/dicom-web?StudyInstanceUID=1.2.3     also one study
//! ```
//!
//! Credentials come from `user:password@` in the URL or, better (they stay out of shell
//! history), from `KEYSLICE_DICOMWEB_TOKEN` or `KEYSLICE_DICOMWEB_USER` /
//! `KEYSLICE_DICOMWEB_PASSWORD`. They are never shown: [`DicomWebUrl::server`] is the URL
//! without them.

use super::PacsError;
pub use keyslice_io::secrets::redact_url as redact;
use keyslice_io::secrets::{is_host, percent_decode, redact_schemes, userinfo_end};

/// How to authenticate.
#[derive(Clone, PartialEq, Eq)]
pub enum Auth {
    /// No credentials.
    None,
    /// `Authorization: Bearer TOKEN`.
    Bearer(String),
    /// `Authorization: Basic …`.
    Basic {
        /// User name.
        user: String,
        /// Password.
        password: String,
    },
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Credentials never reach a log line, even a debug one.
        f.write_str(match self {
            Self::None => "Auth::None",
            Self::Bearer(_) => "Auth::Bearer(…)",
            Self::Basic { .. } => "Auth::Basic(…)",
        })
    }
}

impl Auth {
    /// Credentials from the environment: `KEYSLICE_DICOMWEB_TOKEN`, else
    /// `KEYSLICE_DICOMWEB_USER` with `KEYSLICE_DICOMWEB_PASSWORD`, else none.
    #[must_use]
    pub fn from_env() -> Self {
        if let Ok(token) = std::env::var("KEYSLICE_DICOMWEB_TOKEN")
            && !token.is_empty()
        {
            return Self::Bearer(token);
        }
        match std::env::var("KEYSLICE_DICOMWEB_USER") {
            Ok(user) if !user.is_empty() => Self::Basic {
                user,
                password: std::env::var("KEYSLICE_DICOMWEB_PASSWORD").unwrap_or_default(),
            },
            _ => Self::None,
        }
    }

    /// The `Authorization` header's value, if any.
    #[must_use]
    pub fn header(&self) -> Option<String> {
        use base64::Engine as _;
        match self {
            Self::None => None,
            Self::Bearer(token) => Some(format!("Bearer {token}")),
            Self::Basic { user, password } => Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            )),
        }
    }
}

impl Auth {
    /// `text` (a server's words) with these credentials and any `Bearer …` / `Basic …`
    /// value replaced by `***`: a server that echoes the request's headers in its error never
    /// puts a token or password on the screen or in a log.
    #[must_use]
    pub fn redacted(&self, text: &str) -> String {
        use base64::Engine as _;
        let mut secrets: Vec<String> = Vec::new();
        match self {
            Self::None => {}
            Self::Bearer(token) => secrets.push(token.clone()),
            Self::Basic { user, password } => {
                secrets.push(
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}")),
                );
                secrets.push(password.clone());
            }
        }
        let mut out = text.to_string();
        for secret in secrets.iter().filter(|secret| !secret.is_empty()) {
            out = out.replace(secret.as_str(), "***");
        }
        redact_schemes(&out)
    }
}

/// What a URL names on the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Every study (a URL with only the root).
    AllStudies,
    /// One study, optionally one series of it.
    Study {
        /// Study Instance UID.
        study: String,
        /// Series Instance UID.
        series: Option<String>,
    },
    /// A QIDO-RS study query: attribute keyword or tag → value.
    Query(Vec<(String, String)>),
}

/// A parsed `dicomweb+http(s)://` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DicomWebUrl {
    /// The DICOMweb root as an `http(s)://` URL, without credentials or trailing slash.
    pub root: String,
    /// What it names.
    pub target: Target,
    /// Credentials from the URL, else from the environment.
    pub auth: Auth,
}

/// The URL scheme prefix that marks a DICOMweb URL.
pub const SCHEME_PREFIX: &str = "dicomweb+";

impl DicomWebUrl {
    /// Whether `text` is meant as a DICOMweb URL (starts with `dicomweb+`).
    #[must_use]
    pub fn is_dicomweb(text: &str) -> bool {
        text.starts_with(SCHEME_PREFIX)
    }

    /// Parses a `dicomweb+http(s)://` URL.
    pub fn parse(text: &str) -> Result<Self, PacsError> {
        // A URL pasted with a page of text after it is named by its start, not echoed whole.
        let fail = |reason: &str| PacsError::Url {
            url: keyslice_core::text::shown_short(&redact(text), 200),
            reason: reason.to_string(),
        };
        let rest = text
            .strip_prefix(SCHEME_PREFIX)
            .ok_or_else(|| fail("it must start with dicomweb+http:// or dicomweb+https://"))?;
        let (scheme, rest) = if let Some(rest) = rest.strip_prefix("http://") {
            ("http", rest)
        } else if let Some(rest) = rest.strip_prefix("https://") {
            ("https", rest)
        } else {
            return Err(fail(
                "it must start with dicomweb+http:// or dicomweb+https://",
            ));
        };
        let (userinfo, rest) = match userinfo_end(rest) {
            Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
            None => (None, rest),
        };
        let (location, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (host, path) = location.split_once('/').unwrap_or((location, ""));
        if host.is_empty() || !is_host(host) {
            return Err(fail(
                "it names no host (HOST or HOST:PORT after the scheme)",
            ));
        }
        let auth = match userinfo {
            Some(userinfo) => {
                let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
                Auth::Basic {
                    user: percent_decode(user),
                    password: percent_decode(password),
                }
            }
            None => Auth::from_env(),
        };
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let studies_at = segments.iter().position(|s| *s == "studies");
        let root_segments = &segments[..studies_at.unwrap_or(segments.len())];
        let mut root = format!("{scheme}://{host}");
        for segment in root_segments {
            root.push('/');
            root.push_str(segment);
        }
        let mut target = match studies_at {
            Some(at) => match &segments[at + 1..] {
                [] => Target::AllStudies,
                [study] => Target::Study {
                    study: check_uid(study).map_err(|r| fail(&r))?,
                    series: None,
                },
                [study, "series", series] => Target::Study {
                    study: check_uid(study).map_err(|r| fail(&r))?,
                    series: Some(check_uid(series).map_err(|r| fail(&r))?),
                },
                _ => {
                    return Err(fail(
                        "after /studies it may name only STUDY_UID or STUDY_UID/series/SERIES_UID",
                    ));
                }
            },
            None => Target::AllStudies,
        };
        let pairs: Vec<(String, String)> = query
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                (percent_decode(key), percent_decode(value))
            })
            .collect();
        if !pairs.is_empty() {
            if !matches!(target, Target::AllStudies) {
                return Err(fail("a URL names either a study or a ?query, not both"));
            }
            target = match pairs.as_slice() {
                [(key, value)]
                    if key == "StudyInstanceUID"
                        || *key
                            == super::json_key(dicom_dictionary_std::tags::STUDY_INSTANCE_UID) =>
                {
                    Target::Study {
                        study: check_uid(value).map_err(|r| fail(&r))?,
                        series: None,
                    }
                }
                _ => Target::Query(pairs),
            };
        }
        Ok(Self { root, target, auth })
    }

    /// The server as shown to people: the root URL, never with credentials.
    #[must_use]
    pub fn server(&self) -> &str {
        &self.root
    }

    /// The `dicomweb+` URL of one study on this server (credentials left out).
    #[must_use]
    pub fn study_url(&self, study: &str) -> String {
        format!("{SCHEME_PREFIX}{}/studies/{study}", self.root)
    }
}

fn check_uid(text: &str) -> Result<String, String> {
    let uid = percent_decode(text);
    if !super::is_uid(&uid) {
        let uid = keyslice_core::text::shown_short(&uid, 80);
        return Err(format!(
            "`{uid}` is not a DICOM UID (digits and dots, at most 64 characters)"
        ));
    }
    Ok(uid)
}

/// Encodes a query value for a URL (everything but unreserved characters).
#[must_use]
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~' | b'*') {
            out.push(byte as char);
        } else {
            use std::fmt::Write as _;
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_study_url_gives_root_and_study() {
        let url =
            DicomWebUrl::parse("dicomweb+http://127.0.0.1:8042/dicom-web/studies/1.2.3").unwrap();
        assert_eq!(url.root, "http://127.0.0.1:8042/dicom-web");
        assert_eq!(
            url.target,
            Target::Study {
                study: "1.2.3".into(),
                series: None
            }
        );
    }

    #[test]
    fn a_query_url_keeps_its_pairs_and_credentials_stay_out_of_the_server_name() {
        let url = DicomWebUrl::parse(
            "dicomweb+https://rev:s%40cret@pacs.example.org/dicom-web?PatientID=P%201&StudyDate=20240101-",
        )
        .unwrap();
        assert_eq!(url.server(), "https://pacs.example.org/dicom-web");
        assert_eq!(
            url.auth,
            Auth::Basic {
                user: "rev".into(),
                password: "s@cret".into()
            }
        );
        assert_eq!(
            url.target,
            Target::Query(vec![
                ("PatientID".into(), "P 1".into()),
                ("StudyDate".into(), "20240101-".into())
            ])
        );
        assert_eq!(format!("{:?}", url.auth), "Auth::Basic(…)");
    }

    #[test]
    fn credentials_become_the_authorization_header() {
        assert_eq!(
            Auth::Basic {
                user: "alice".into(),
                password: "wonder-land".into()
            }
            .header()
            .as_deref(),
            Some("Basic YWxpY2U6d29uZGVyLWxhbmQ=")
        );
        assert_eq!(
            Auth::Bearer("t0k3n".into()).header().as_deref(),
            Some("Bearer t0k3n")
        );
        assert_eq!(Auth::None.header(), None);
    }

    #[test]
    fn study_instance_uid_query_names_one_study() {
        let url =
            DicomWebUrl::parse("dicomweb+http://h/dicom-web?StudyInstanceUID=1.2.840.1").unwrap();
        assert!(matches!(url.target, Target::Study { ref study, .. } if study == "1.2.840.1"));
    }

    #[test]
    fn a_password_holding_slash_question_mark_or_at_stays_whole_and_unseen() {
        for (text, password) in [
            (
                "dicomweb+http://rev:pa/ss@127.0.0.1:8042/dicom-web/studies/1.2.3",
                "pa/ss",
            ),
            (
                "dicomweb+http://rev:p?w@pacs.example.org/dicom-web?PatientID=1",
                "p?w",
            ),
            ("dicomweb+http://rev:p@w/x@[::1]:8042/dicom-web", "p@w/x"),
        ] {
            let url = DicomWebUrl::parse(text).unwrap();
            assert_eq!(
                url.auth,
                Auth::Basic {
                    user: "rev".into(),
                    password: password.into()
                },
                "{text}"
            );
            assert!(!url.server().contains("rev"), "{}", url.server());
            assert!(!redact(text).contains(password), "{}", redact(text));
        }
        let url = DicomWebUrl::parse("dicomweb+http://h:8042/dw?PatientName=a@b").unwrap();
        assert_eq!(url.server(), "http://h:8042/dw");
        assert_eq!(url.auth, Auth::from_env());
        let error = DicomWebUrl::parse("dicomweb+http://rev:pa ss@h/dw/studies/x").unwrap_err();
        assert!(!error.to_string().contains("pa ss"), "{error}");
    }

    #[test]
    fn a_server_echoing_the_authorization_header_is_redacted() {
        let basic = Auth::Basic {
            user: "alice".into(),
            password: "wonder-land".into(),
        };
        let echoed = format!(
            "denied: Authorization: {} (password wonder-land)",
            basic.header().unwrap()
        );
        let shown = basic.redacted(&echoed);
        assert!(
            !shown.contains("wonder-land") && !shown.contains("YWxp"),
            "{shown}"
        );
        let bearer = Auth::Bearer("t0k3n-secret".into());
        assert_eq!(
            bearer.redacted("bad token t0k3n-secret; got authorization=Bearer abc.def"),
            "bad token ***; got authorization=Bearer ***"
        );
    }

    #[test]
    fn bad_urls_say_what_is_wrong_without_the_password() {
        let error = DicomWebUrl::parse("dicomweb+ftp://h/x").unwrap_err();
        assert!(error.to_string().contains("dicomweb+http://"), "{error}");
        let error =
            DicomWebUrl::parse("dicomweb+http://u:pw@h/dicom-web/studies/1.2.x").unwrap_err();
        let text = error.to_string();
        assert!(text.contains("not a DICOM UID"), "{text}");
        assert!(!text.contains("pw"), "{text}");
        let long = format!("dicomweb+http://h/dicom-web/studies/{}", "9.".repeat(5000));
        let text = DicomWebUrl::parse(&long).unwrap_err().to_string();
        assert!(text.len() < 600, "{} characters", text.len());
        assert!(text.contains("dicomweb+http://h/dicom-web/studies/9.9.") && text.contains('…'));
    }
}
