//! UTC calendar dates and times from seconds since the epoch and back, in the proleptic
//! Gregorian calendar (Howard Hinnant's algorithms): the one place the review log, reader
//! studies and DICOM documents take their dates from.

/// Days since 1970-01-01 as (year, month, day).
#[must_use]
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    // Both fit: a day is 1–31 and a month 1–12.
    let day = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let month = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// (year, month, day) as days since 1970-01-01.
#[must_use]
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let (month, day) = (i64::from(month), i64::from(day));
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Seconds since the epoch as UTC (year, month, day, hour, minute, second).
#[must_use]
pub fn utc_from_seconds(seconds: u64) -> (i64, u32, u32, u64, u64, u64) {
    let (year, month, day) = civil_from_days(i64::try_from(seconds / 86_400).unwrap_or(0));
    let rest = seconds % 86_400;
    (year, month, day, rest / 3600, rest % 3600 / 60, rest % 60)
}

/// Seconds since the epoch now (0 on a clock set before 1970).
#[must_use]
pub fn now_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// Seconds since the epoch, with `millis` milliseconds, as RFC 3339 UTC:
/// `YYYY-MM-DDTHH:MM:SS.mmmZ` (what the review log and reader studies write).
#[must_use]
pub fn rfc3339(seconds: u64, millis: u32) -> String {
    let (year, month, day, hour, minute, second) = utc_from_seconds(seconds);
    format!(
        "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{:03}Z",
        millis.min(999)
    )
}

/// The time now as [`rfc3339`], to the millisecond.
#[must_use]
pub fn now_rfc3339() -> String {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(since.as_secs(), since.subsec_millis())
}

/// The date and time fields of `YYYY-MM-DDTHH:MM:SS…` (RFC 3339 UTC, the fraction and zone
/// ignored): year, month, day, hour, minute, second; `None` unless each is digits.
fn rfc3339_fields(text: &str) -> Option<[&str; 6]> {
    let field = |range: std::ops::Range<usize>| {
        text.get(range)
            .filter(|part| part.bytes().all(|byte| byte.is_ascii_digit()))
    };
    Some([
        field(0..4)?,
        field(5..7)?,
        field(8..10)?,
        field(11..13)?,
        field(14..16)?,
        field(17..19)?,
    ])
}

/// Seconds since the epoch of an RFC 3339 UTC time (`2026-12-06T13:51:17Z`); `None` when it
/// is not one.
#[must_use]
pub fn seconds_from_rfc3339(text: &str) -> Option<u64> {
    let [year, month, day, hour, minute, second] = rfc3339_fields(text)?;
    let number = |digits: &str| digits.parse::<u32>().ok();
    let (month, day) = (number(month)?, number(day)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let days = days_from_civil(i64::from(number(year)?), month, day);
    let seconds = days * 86_400
        + i64::from(number(hour)?) * 3600
        + i64::from(number(minute)?) * 60
        + i64::from(number(second)?);
    u64::try_from(seconds).ok()
}

/// Seconds since the epoch as DICOM date and time (`YYYYMMDD`, `HHMMSS`), UTC.
#[must_use]
pub fn dicom_date_time(seconds: u64) -> (String, String) {
    let (year, month, day, hour, minute, second) = utc_from_seconds(seconds);
    (
        format!("{year:04}{month:02}{day:02}"),
        format!("{hour:02}{minute:02}{second:02}"),
    )
}

/// An RFC 3339 UTC time (`2026-12-06T06:05:03.273Z`) as DICOM date and time (`YYYYMMDD`,
/// `HHMMSS`).
#[must_use]
pub fn dicom_from_rfc3339(text: &str) -> Option<(String, String)> {
    let [year, month, day, hour, minute, second] = rfc3339_fields(text)?;
    Some((
        format!("{year}{month}{day}"),
        format!("{hour}{minute}{second}"),
    ))
}

/// A DICOM date and time (`YYYYMMDDHHMM…`) as `YYYY-MM-DD HH:MM UTC`; anything else as it
/// is.
#[must_use]
pub fn readable_dicom(text: &str) -> String {
    match text.get(..12) {
        Some(head) if head.bytes().all(|c| c.is_ascii_digit()) => format!(
            "{}-{}-{} {}:{} UTC",
            &head[0..4],
            &head[4..6],
            &head[6..8],
            &head[8..10],
            &head[10..12]
        ),
        _ => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_and_read_in_each_form() {
        assert_eq!(rfc3339(1_796_565_077, 273), "2026-12-06T13:51:17.273Z");
        assert_eq!(seconds_from_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            seconds_from_rfc3339("2026-12-06T13:51:17Z"),
            Some(1_796_565_077)
        );
        assert_eq!(
            seconds_from_rfc3339(&rfc3339(951_782_400, 0)),
            Some(951_782_400)
        ); // 2000-02-29
        assert_eq!(seconds_from_rfc3339("garbage"), None);
        assert_eq!(seconds_from_rfc3339("2026-13-06T13:51:17Z"), None);
        assert_eq!(
            dicom_date_time(1_796_565_077),
            ("20261206".into(), "135117".into())
        );
        assert_eq!(
            dicom_from_rfc3339("2026-12-06T06:05:03.273Z"),
            Some(("20261206".into(), "060503".into()))
        );
        assert_eq!(dicom_from_rfc3339("2026-12-06"), None);
        assert_eq!(readable_dicom("20261205111825"), "2026-12-05 11:18 UTC");
        assert_eq!(readable_dicom("unknown"), "unknown");
    }

    #[test]
    fn days_and_dates_go_both_ways_across_leap_days_and_the_epoch() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_787), (2026, 11, 30));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        for days in [-800_000, -1, 0, 11_016, 20_787, 2_000_000] {
            let (year, month, day) = civil_from_days(days);
            assert_eq!(days_from_civil(year, month, day), days);
        }
        assert_eq!(utc_from_seconds(1_796_565_077), (2026, 12, 6, 13, 51, 17));
    }
}
