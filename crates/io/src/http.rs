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
