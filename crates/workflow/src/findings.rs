//! One report read: the findings, the words each value came from, and the sentences the
//! reader could not read.

use std::fmt::Write as _;
use std::io::Read as _;
use std::path::Path;

use keyslice_core::findings::writer::location_words;
use keyslice_core::findings::{
    Findings, Organ, ReadReport, TumorPresence, UnreadSentence, read_report,
};
use serde::Serialize;

use crate::Error;

/// The findings and the sentences not read, as one JSON object.
#[derive(Serialize)]
pub struct FindingsJson<'a> {
    #[serde(flatten)]
    findings: &'a Findings,
    unread: &'a [UnreadSentence],
}

/// The largest report `findings` reads, bytes (a model's answer is capped at 10 MB too).
const MAX_REPORT_BYTES: u64 = 10 << 20;

/// A report and what the reader found in it.
pub struct ReportRead {
    /// The report's text.
    pub text: String,
    /// What was read.
    pub read: ReadReport,
}

/// Reads the report in the file `path` (`-`: standard input), at most a few pages.
pub fn read_report_file(path: &Path) -> Result<ReportRead, Error> {
    // A report is at most a few pages; what is larger is not one (and is not read whole).
    let text = if path.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .take(MAX_REPORT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|source| Error::Input {
                path: path.to_path_buf(),
                source,
            })?;
        if bytes.len() as u64 > MAX_REPORT_BYTES {
            return Err(Error::Argument(format!(
                "the report on standard input is larger than {} MiB, more than a report holds",
                MAX_REPORT_BYTES >> 20
            )));
        }
        String::from_utf8_lossy(&bytes).into_owned()
    } else {
        keyslice_io::limits::read_text_bounded(path, MAX_REPORT_BYTES).map_err(|source| {
            Error::Input {
                path: path.to_path_buf(),
                source,
            }
        })?
    };
    let read = read_report(&text);
    Ok(ReportRead { text, read })
}

impl ReportRead {
    /// The findings as JSON shows them, with the sentences not read (`unread`).
    #[must_use]
    pub fn findings_json(&self) -> FindingsJson<'_> {
        FindingsJson {
            findings: &self.read.findings,
            unread: &self.read.unread,
        }
    }

    /// The readable form: organ by organ, each value followed by the words it came from.
    #[must_use]
    pub fn describe(&self) -> String {
        describe(&self.text, &self.read)
    }
}

/// The readable form of `read`, the reading of `text`.
fn describe(text: &str, read: &ReadReport) -> String {
    let mut out = String::new();
    let quote = |span: Option<keyslice_core::findings::Span>| {
        span.map(|span| format!("  «{}»", span.text(text)))
            .unwrap_or_default()
    };
    for organ in Organ::ALL {
        let entry = read.findings.organ(organ);
        let status = match entry.tumor {
            TumorPresence::Yes => "tumor: yes",
            TumorPresence::No => "tumor: no",
            TumorPresence::Uncertain => "tumor: uncertain",
            TumorPresence::NotMentioned => "not mentioned (no tumor)",
        };
        // Writing to a String cannot fail.
        let _ = writeln!(out, "{:<13} {status}{}", organ.key(), quote(entry.span));
        for (number, lesion) in entry.lesions.iter().enumerate() {
            let _ = writeln!(out, "  lesion {}", number + 1);
            if let Some(size) = lesion.size {
                let short = size
                    .short_cm
                    .map(|s| format!(" x {s:.1}"))
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "    size         {:.1}{short} cm{}",
                    size.long_cm,
                    quote(lesion.spans.size)
                );
            }
            if let Some(location) = &lesion.location {
                let _ = writeln!(
                    out,
                    "    location     {}{}",
                    location_words(location),
                    quote(lesion.spans.location)
                );
            }
            if let Some(attenuation) = lesion.attenuation {
                let _ = writeln!(
                    out,
                    "    attenuation  {}{}",
                    attenuation.word(),
                    quote(lesion.spans.attenuation)
                );
            }
            if let Some(count) = lesion.count {
                let _ = writeln!(out, "    count        {count}{}", quote(lesion.spans.count));
            }
        }
    }
    match &read.findings.key_slice {
        Some(key) => {
            let _ = writeln!(out, "key slice     {}{}", key.index, quote(key.span));
        }
        None => out.push_str("key slice     not given\n"),
    }
    for unread in &read.unread {
        let _ = writeln!(out, "unread        «{}» ({})", unread.text, unread.reason);
    }
    out
}
