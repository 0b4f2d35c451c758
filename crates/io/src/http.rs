//! What Keyslice does with a server's redirects and `Retry-After`, the same for model servers
//! and PACS: no redirect is followed, and a server that says when to come back is believed
//! within a bound.

use std::time::Duration;

/// The longest `Retry-After` waited for; a server that asks for longer fails at once, with
/// its wish said.
pub const MAX_RETRY_AFTER: Duration = Duration::from_mins(2);

/// The wait a `Retry-After` header value asks for, when it is a number of seconds (an HTTP
/// date is not read: the backoff is used then).
#[must_use]
pub fn retry_after(value: Option<&str>) -> Option<Duration> {
    value?.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// How long to wait before the next try: the server's `Retry-After` when it gave one (as
/// long as it is within [`MAX_RETRY_AFTER`]), else `backoff`. `Err` holds the wait asked for
/// when it is longer than Keyslice waits.
pub fn next_wait(backoff: Duration, asked: Option<Duration>) -> Result<Duration, Duration> {
    match asked {
        Some(asked) if asked > MAX_RETRY_AFTER => Err(asked),
        Some(asked) => Ok(asked.max(backoff.min(Duration::from_secs(1)))),
        None => Ok(backoff),
    }
}

/// The wait a busy server asks for in its `Retry-After` header, when `outcome` is such an
/// answer.
#[must_use]
pub fn asked_wait(
    outcome: &Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Option<Duration> {
    let response = outcome.as_ref().ok()?;
    retry_after(
        response
            .headers()
            .get("Retry-After")
            .and_then(|value| value.to_str().ok()),
    )
}

/// Why `response` is not used, when it is a redirect ([`redirect_refused`]).
#[must_use]
pub fn redirect_of(response: &ureq::http::Response<ureq::Body>) -> Option<String> {
    let status = response.status().as_u16();
    (300..400).contains(&status).then(|| {
        let location = response
            .headers()
            .get("Location")
            .and_then(|value| value.to_str().ok());
        redirect_refused(status, location)
    })
}

/// A CA certificate file given to trust (`--ca-cert`) that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CaCertError {
    /// It cannot be read.
    #[error("--ca-cert {}: {source}", path.display())]
    Unreadable {
        /// The file.
        path: std::path::PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// It holds no certificate.
    #[error("--ca-cert {}: no certificate in it (a PEM file with -----BEGIN CERTIFICATE----- blocks)", path.display())]
    NoCertificate {
        /// The file.
        path: std::path::PathBuf,
    },
}

/// The TLS settings that trust [`trusted_certificates`] of `extra`; `None` when the
/// compiled-in roots are all there is to trust.
pub fn tls_config(
    extra: &[std::path::PathBuf],
) -> Result<Option<ureq::tls::TlsConfig>, CaCertError> {
    Ok(trusted_certificates(extra)?.map(|roots| {
        let certificates: Vec<ureq::tls::Certificate<'static>> = roots
            .iter()
            .map(|der| ureq::tls::Certificate::from_der(der).to_owned())
            .collect();
        ureq::tls::TlsConfig::builder()
            .root_certs(ureq::tls::RootCerts::new_with_certs(&certificates))
            .build()
    }))
}

/// Why a redirect is not followed, naming where it points (its user-info and secret query
/// values hidden): a POST would be sent again as a GET, and another host would answer in
/// this server's name.
#[must_use]
pub fn redirect_refused(status: u16, location: Option<&str>) -> String {
    let to = location.map_or_else(
        || "no Location".to_string(),
        |location| crate::secrets::redact(&keyslice_core::text::shown_short(location, 200)),
    );
    format!(
        "HTTP {status}: the server redirects to {to}; Keyslice follows no redirect (another \
         host would answer in this server's name): give the address it names, if you trust it"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_servers_wait_is_believed_within_bounds() {
        assert_eq!(retry_after(Some("3")), Some(Duration::from_secs(3)));
        assert_eq!(retry_after(Some(" 0 ")), Some(Duration::ZERO));
        assert_eq!(retry_after(Some("Wed, 21 Oct 2015 07:28:00 GMT")), None);
        assert_eq!(retry_after(None), None);
        let backoff = Duration::from_millis(500);
        assert_eq!(next_wait(backoff, None), Ok(backoff));
        assert_eq!(
            next_wait(backoff, Some(Duration::from_secs(7))),
            Ok(Duration::from_secs(7))
        );
        // "Come back now" still waits a little: no busy loop against a busy server.
        assert_eq!(next_wait(backoff, Some(Duration::ZERO)), Ok(backoff));
        assert_eq!(
            next_wait(backoff, Some(Duration::from_hours(1))),
            Err(Duration::from_hours(1))
        );
    }

    #[test]
    fn a_refused_redirect_names_where_it_points_without_secrets() {
        let said = redirect_refused(302, Some("http://other:9/v1?api-key=K9"));
        assert!(said.contains("http://other:9/v1?api-key=***"), "{said}");
        assert!(said.starts_with("HTTP 302"));
        assert!(redirect_refused(301, None).contains("no Location"));
    }
}

/// Where the operating system keeps its trusted certificates, when `SSL_CERT_FILE` names no
/// file (Debian and Ubuntu, Fedora and RHEL, Alpine and macOS, in that order).
const SYSTEM_BUNDLES: [&str; 3] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

/// The certificates to trust (DER), when there is anything beyond the compiled-in roots to
/// trust: the operating system's store (`SSL_CERT_FILE`, else its bundle file), every
/// certificate file in `SSL_CERT_DIR`, and `extra` (`--ca-cert`, a hospital's own CA). A
/// hospital adds its CA to the system store, or names it; either way it is trusted. `None`
/// when none is found (then the compiled-in roots are used). A file given in `extra` that
/// cannot be read or holds no certificate is an error naming it.
pub fn trusted_certificates(
    extra: &[std::path::PathBuf],
) -> Result<Option<Vec<Vec<u8>>>, CaCertError> {
    let mut found = Vec::new();
    let bundle = std::env::var_os("SSL_CERT_FILE")
        .map(std::path::PathBuf::from)
        .filter(|path| path.is_file())
        .or_else(|| {
            SYSTEM_BUNDLES
                .iter()
                .map(std::path::PathBuf::from)
                .find(|path| path.is_file())
        });
    if let Some(bundle) = bundle
        && let Ok(text) = crate::limits::read_text_bounded(&bundle, 64 << 20)
    {
        found.extend(pem_certificates(&text));
    }
    if let Some(dir) = std::env::var_os("SSL_CERT_DIR") {
        for folder in std::env::split_paths(&dir) {
            let Ok(entries) = std::fs::read_dir(&folder) else {
                continue;
            };
            for entry in entries.flatten() {
                if let Ok(text) = crate::limits::read_text_bounded(&entry.path(), 1 << 20) {
                    found.extend(pem_certificates(&text));
                }
            }
        }
    }
    for path in extra {
        let text = crate::limits::read_text_bounded(path, 16 << 20).map_err(|source| {
            CaCertError::Unreadable {
                path: path.clone(),
                source,
            }
        })?;
        let certificates = pem_certificates(&text);
        if certificates.is_empty() {
            return Err(CaCertError::NoCertificate { path: path.clone() });
        }
        found.extend(certificates);
    }
    Ok((!found.is_empty()).then_some(found))
}

/// The DER bytes of each `-----BEGIN CERTIFICATE-----` block of `text`; a block that is not
/// base64 is skipped.
#[must_use]
pub fn pem_certificates(text: &str) -> Vec<Vec<u8>> {
    use base64::Engine as _;
    let mut certificates = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("-----BEGIN CERTIFICATE-----") {
        let body = &rest[start + "-----BEGIN CERTIFICATE-----".len()..];
        let Some(end) = body.find("-----END CERTIFICATE-----") else {
            break;
        };
        let encoded: String = body[..end].chars().filter(|c| !c.is_whitespace()).collect();
        if let Ok(der) = base64::engine::general_purpose::STANDARD.decode(encoded) {
            certificates.push(der);
        }
        rest = &body[end..];
    }
    certificates
}

/// What kind of network failure a request met, read from the error's type (never from its
/// words), so that code can decide what to do: retry, try another server, or stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetFault {
    /// No answer within the timeout.
    Timeout,
    /// Nothing listens at the address and port.
    Refused,
    /// The host name is not known.
    Dns,
    /// The server's certificate is not one this machine trusts (or not valid for its name).
    Certificate,
    /// Another failure to connect or to exchange the request (a dropped connection).
    Other,
}

/// The kind of `error`.
#[must_use]
pub fn net_fault(error: &ureq::Error) -> NetFault {
    let certificate = |error: &rustls::Error| {
        matches!(
            error,
            rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented
        )
    };
    match error {
        ureq::Error::Timeout(_) => NetFault::Timeout,
        ureq::Error::HostNotFound => NetFault::Dns,
        ureq::Error::Rustls(tls) if certificate(tls) => NetFault::Certificate,
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            NetFault::Refused
        }
        // rustls reports a failed handshake inside the I/O error of the read or write.
        ureq::Error::Io(io)
            if io
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                .is_some_and(certificate) =>
        {
            NetFault::Certificate
        }
        _ => NetFault::Other,
    }
}

/// What to do about an untrusted server certificate.
pub const CERTIFICATE_HINT: &str = "the server's certificate is not signed by a CA this machine trusts: add your hospital's CA certificate (PEM) with --ca-cert FILE, or to the system store (update-ca-certificates), or name a bundle in SSL_CERT_FILE";

#[cfg(test)]
mod trust_tests {
    use super::*;

    #[test]
    fn certificates_are_read_from_pem_and_a_bad_file_is_named() {
        let pem = "junk\n-----BEGIN CERTIFICATE-----\nAAEC\nAwQ=\n-----END CERTIFICATE-----\n\
                   -----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n";
        assert_eq!(pem_certificates(pem), vec![vec![0, 1, 2, 3, 4]]);
        let folder = tempfile::tempdir().expect("temp dir");
        let empty = folder.path().join("ca.pem");
        std::fs::write(&empty, "not a certificate").expect("written");
        let error = trusted_certificates(&[empty]).expect_err("refused");
        assert!(
            matches!(error, CaCertError::NoCertificate { .. }),
            "{error}"
        );
        assert!(error.to_string().starts_with("--ca-cert "), "{error}");
    }

    #[test]
    fn network_failures_are_told_apart_by_type() {
        use std::io::{Error, ErrorKind};
        let unknown_issuer =
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        assert_eq!(
            net_fault(&ureq::Error::Io(Error::new(
                ErrorKind::InvalidData,
                unknown_issuer.clone()
            ))),
            NetFault::Certificate
        );
        assert_eq!(
            net_fault(&ureq::Error::Rustls(unknown_issuer)),
            NetFault::Certificate
        );
        assert_eq!(
            net_fault(&ureq::Error::Io(Error::from(ErrorKind::ConnectionRefused))),
            NetFault::Refused
        );
        assert_eq!(net_fault(&ureq::Error::HostNotFound), NetFault::Dns);
        // Words about certificates in another error do not make it one.
        assert_eq!(
            net_fault(&ureq::Error::Io(Error::other("certificate"))),
            NetFault::Other
        );
    }
}
