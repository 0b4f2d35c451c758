//! Secrets in server addresses and in what servers say: the one place they are found and
//! hidden.
//!
//! A model server's or a PACS's URL may carry credentials (`https://user:password@host/v1`)
//! or a key in its query (`…/v1?api-key=KEY`); a server may echo the request's
//! `Authorization` header in an error. [`ServerUrl`] splits a URL into what may be shown and
//! what is only sent; [`redact`] hides every secret it recognises in any text (user-info in
//! URLs, secret-named query values, the word after `Bearer` or `Basic`), and
//! [`redact_known`] also hides given values (the key and password in use). Every line
//! Keyslice prints, logs, stores in a predictions or errors file or writes into a DICOM
//! document about a server passes through them.

/// What a secret is replaced by.
pub const HIDDEN: &str = "***";

/// Whether a query parameter named `name` holds a secret (`api-key`, `access_token`,
/// `X-Amz-Signature`, `sig`, `password`, …), compared without regard to case.
#[must_use]
pub fn is_secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower == "sig"
        || lower == "code"
        || [
            "key",
            "token",
            "secret",
            "password",
            "passwd",
            "pwd",
            "auth",
            "signature",
            "credential",
            "session",
        ]
        .iter()
        .any(|word| lower.contains(word))
}

/// A server URL split into what may be shown and what is only sent.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerUrl {
    /// `scheme://host[:port]/path`, without user-info, query or trailing `/`.
    base: String,
    /// The query (after `?`, without the fragment), sent with every request.
    query: Option<String>,
    /// User and password from the URL's user-info.
    user: Option<(String, String)>,
}

impl std::fmt::Debug for ServerUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown())
    }
}

impl ServerUrl {
    /// Splits `text` (`scheme://[user[:password]@]host[:port][/path][?query][#fragment]`);
    /// the fragment is dropped. Checking the scheme is the caller's.
    #[must_use]
    pub fn parse(text: &str) -> Self {
        let text = text.split_once('#').map_or(text, |(url, _)| url);
        let (scheme, rest) = text.split_once("://").unwrap_or(("", text));
        let (user, rest) = match userinfo_end(rest) {
            Some(at) => {
                let userinfo = &rest[..at];
                let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
                (
                    Some((percent_decode(user), percent_decode(password))),
                    &rest[at + 1..],
                )
            }
            None => (None, rest),
        };
        let (location, query) = match rest.split_once('?') {
            Some((location, query)) => (location, Some(query.to_string())),
            None => (rest, None),
        };
        let location = location.trim_end_matches('/');
        let base = if scheme.is_empty() {
            location.to_string()
        } else {
            format!("{scheme}://{location}")
        };
        Self {
            base,
            query: query.filter(|query| !query.is_empty()),
            user,
        }
    }

    /// `scheme://host[:port]/path`: no credentials, no query.
    #[must_use]
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The URL as shown to people and stored: the base and the query with each secret value
    /// (see [`is_secret_name`]) as `***`; never the user-info.
    #[must_use]
    pub fn shown(&self) -> String {
        match &self.query {
            Some(query) => format!("{}?{}", self.base, redact_query(query)),
            None => self.base.clone(),
        }
    }

    /// The URL of `path` (`/chat/completions`) under the base, the query after it: a key in
    /// the query stays a query parameter of every request.
    #[must_use]
    pub fn request_url(&self, path: &str) -> String {
        match &self.query {
            Some(query) => format!("{}{path}?{query}", self.base),
            None => format!("{}{path}", self.base),
        }
    }

    /// User and password from the URL's user-info, when it has one.
    #[must_use]
    pub fn user(&self) -> Option<(&str, &str)> {
        self.user
            .as_ref()
            .map(|(user, password)| (user.as_str(), password.as_str()))
    }

    /// The secret values this URL holds (its password and secret query values, as written
    /// and decoded), for [`redact_known`]: a server that echoes them is not repeated.
    #[must_use]
    pub fn secrets(&self) -> Vec<String> {
        let mut secrets = Vec::new();
        if let Some((_, password)) = &self.user {
            secrets.push(password.clone());
        }
        for pair in self.query.iter().flat_map(|query| query.split('&')) {
            if let Some((name, value)) = pair.split_once('=')
                && is_secret_name(&percent_decode(name))
            {
                secrets.push(value.to_string());
                secrets.push(percent_decode(value));
            }
        }
        secrets.retain(|secret| !secret.is_empty());
        secrets
    }
}

/// `query` (after `?`) with each secret value as `***`.
fn redact_query(query: &str) -> String {
    query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if is_secret_name(&percent_decode(name)) => format!("{name}={HIDDEN}"),
            _ => pair.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// `text` with each of `secrets` (at least 3 characters long; a shorter one would hide
/// ordinary words) replaced by `***`, then [`redact`]ed.
#[must_use]
pub fn redact_known(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    let mut secrets: Vec<&String> = secrets
        .iter()
        .filter(|secret| secret.chars().count() >= 3)
        .collect();
    // The longest first, so a secret that holds another is hidden whole.
    secrets.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
    for secret in secrets {
        out = out.replace(secret.as_str(), HIDDEN);
    }
    redact(&out)
}

/// `text` with the secrets it shows hidden: the user-info of every URL in it, each secret
/// query value (see [`is_secret_name`]) and the word after each `Bearer` or `Basic`.
#[must_use]
pub fn redact(text: &str) -> String {
    redact_schemes(&redact_query_values(&redact_userinfo(text)))
}

/// `url` (one URL, as given on a command line: it may hold blanks in a mistyped password)
/// without its user-info, its secret query values as `***`.
#[must_use]
pub fn redact_url(url: &str) -> String {
    let without_user = match url.split_once("://") {
        Some((scheme, rest)) => match userinfo_end(rest) {
            Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
            None => url.to_string(),
        },
        None => url.to_string(),
    };
    redact(&without_user)
}

/// Characters that end a URL inside running text.
fn ends_url(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`')
}

/// `text` with the `user[:password]@` of every `scheme://` URL in it removed.
fn redact_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(found) = rest.find("://") {
        let (before, after) = rest.split_at(found + 3);
        out.push_str(before);
        let url_end = after.find(ends_url).unwrap_or(after.len());
        let url = &after[..url_end];
        match userinfo_end(url) {
            Some(at) => {
                out.push_str(&url[at + 1..]);
            }
            None => out.push_str(url),
        }
        rest = &after[url_end..];
    }
    out.push_str(rest);
    out
}

/// `text` with the value of every `?NAME=VALUE` or `&NAME=VALUE` whose name is secret
/// replaced by `***`.
fn redact_query_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(found) = rest.find(['?', '&']) {
        let (before, after) = rest.split_at(found + 1);
        out.push_str(before);
        let name_end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '%')))
            .unwrap_or(after.len());
        let name = &after[..name_end];
        let tail = &after[name_end..];
        if !name.is_empty()
            && let Some(value) = tail.strip_prefix('=')
            && is_secret_name(&percent_decode(name))
        {
            let value_end = value
                .find(|c: char| ends_url(c) || matches!(c, '&' | '#'))
                .unwrap_or(value.len());
            out.push_str(name);
            out.push('=');
            out.push_str(HIDDEN);
            rest = &value[value_end..];
        } else {
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// `text` with the word after each `Bearer` or `Basic` (any case) replaced by `***`.
#[must_use]
pub fn redact_schemes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut words = text.split_inclusive(char::is_whitespace).peekable();
    while let Some(word) = words.next() {
        out.push_str(word);
        let trimmed = word.trim_end().to_ascii_lowercase();
        let scheme = ["bearer", "basic"].iter().any(|scheme| {
            trimmed.strip_suffix(scheme).is_some_and(|before| {
                before
                    .chars()
                    .next_back()
                    .is_none_or(|c| !c.is_alphanumeric())
            })
        });
        if scheme {
            // Skip further blanks, then hide the credential.
            while let Some(next) = words.peek() {
                if next.trim().is_empty() {
                    out.push_str(next);
                    words.next();
                } else {
                    break;
                }
            }
            if let Some(secret) = words.next() {
                let kept_tail: String = secret
                    .chars()
                    .rev()
                    .take_while(|c| c.is_whitespace())
                    .collect();
                out.push_str(HIDDEN);
                out.extend(kept_tail.chars().rev());
            }
        }
    }
    out
}

/// Where the `user:password` of `rest` (a URL after `scheme://`) ends: the last `@` that is
/// followed by a host (and port) and then `/`, `?` or the end, with no `=` before it (that
/// would be a query value holding an `@`). A password holding `/` or `?` is found whole, so
/// no part of it is ever taken for the host, looked up or shown. When no `@` fits, the last
/// `@` before the first `/` or `?`.
#[must_use]
pub fn userinfo_end(rest: &str) -> Option<usize> {
    let fits = rest.rmatch_indices('@').map(|(at, _)| at).find(|&at| {
        let after = &rest[at + 1..];
        let host_end = after.find(['/', '?', '#']).unwrap_or(after.len());
        !rest[..at].contains('=') && is_host(&after[..host_end])
    });
    fits.or_else(|| {
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        rest[..authority_end].rfind('@')
    })
}

/// Whether `text` reads as `HOST` or `HOST:PORT` (a name, an IPv4 address or a bracketed
/// IPv6 address).
#[must_use]
pub fn is_host(text: &str) -> bool {
    let (name, port) = if let Some(inner) = text.strip_prefix('[') {
        match inner.split_once(']') {
            Some((address, rest)) => (address, rest.strip_prefix(':')),
            None => return false,
        }
    } else {
        match text.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (text, None),
        }
    };
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'))
        && port.is_none_or(|port| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
}

/// `%XX` decoded, `+` as a space (a URL's user-info and query as written).
#[must_use]
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = text
                    .get(i + 1..i + 3)
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                if let Some(byte) = hex {
                    out.push(byte);
                    i += 3;
                } else {
                    out.push(b'%');
                    i += 1;
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_url_shows_no_credentials_and_keeps_its_query_in_requests() {
        let url = ServerUrl::parse("https://ana:p%40ss/word@gpu-01:8000/v1/?api-key=SECRET1&x=1");
        assert_eq!(url.base(), "https://gpu-01:8000/v1");
        assert_eq!(url.shown(), "https://gpu-01:8000/v1?api-key=***&x=1");
        assert_eq!(
            url.request_url("/chat/completions"),
            "https://gpu-01:8000/v1/chat/completions?api-key=SECRET1&x=1"
        );
        assert_eq!(url.user(), Some(("ana", "p@ss/word")));
        assert_eq!(format!("{url:?}"), url.shown());
        let secrets = url.secrets();
        assert!(secrets.contains(&"p@ss/word".to_string()));
        assert!(secrets.contains(&"SECRET1".to_string()));

        let plain = ServerUrl::parse("http://127.0.0.1:8000/v1#jobs=4");
        assert_eq!(plain.shown(), "http://127.0.0.1:8000/v1");
        assert_eq!(plain.user(), None);
        assert!(plain.secrets().is_empty());
    }

    #[test]
    fn every_kind_of_secret_in_running_text_is_hidden() {
        let echoed = "error: bad request to https://ana:hunter2@gpu:8000/v1/chat/completions?api-key=K123&model=m \
                      headers {\"Authorization\": \"Bearer sk-abc.def\"} basic   YW5hOmh1bnRlcjI= \
                      sas https://store/x?sv=1&sig=ZZZ%2B&se=2 done";
        let shown = redact(echoed);
        for secret in [
            "hunter2",
            "ana:",
            "K123",
            "sk-abc.def",
            "YW5hOmh1bnRlcjI",
            "ZZZ",
        ] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(shown.contains("https://gpu:8000/v1/chat/completions?api-key=***&model=m"));
        assert!(shown.contains("sv=1&sig=***&se=2"));
        // Ordinary text and URLs pass as they are.
        let plain = "HTTP 500 at http://host/v1?model=m&n=2: out of memory";
        assert_eq!(redact(plain), plain);
        assert_eq!(redact("no server here"), "no server here");
        // A whole URL as given, a blank in its password included.
        assert_eq!(
            redact_url("http://rev:pa ss@h/dw?token=T1"),
            "http://h/dw?token=***"
        );
        // Known values go wherever they are, the longest first.
        assert_eq!(
            redact_known(
                "key abcdef echoed, and abc",
                &["abc".into(), "abcdef".into()]
            ),
            "key *** echoed, and ***"
        );
        // Too short to hide without hiding words.
        assert_eq!(redact_known("a b", &["a".into()]), "a b");
    }
}
