//! `keyslice findings REPORT.txt [--json]`: what the reader finds in one report, with the words
//! each value came from and the sentences it could not read.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use super::CliError;
use crate::findings::writer::location_words;
use crate::findings::{Findings, Organ, ReadReport, TumorPresence, UnreadSentence, read_report};

/// Arguments of `findings`.
#[derive(Debug, Args)]
pub struct FindingsArgs {
    /// The report text file, or `-` for standard input.
    pub report: PathBuf,
    /// Print the Findings object as JSON (plus `unread`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct FindingsJson<'a> {
    #[serde(flatten)]
    findings: &'a Findings,
    unread: &'a [UnreadSentence],
}

/// The largest report `findings` reads, bytes (a model's answer is capped at 10 MB too).
const MAX_REPORT_BYTES: u64 = 10 << 20;

/// Runs `findings`.
pub fn run(args: &FindingsArgs) -> Result<(), CliError> {
    // A report is at most a few pages; what is larger is not one (and is not read whole).
    let text = if args.report.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .take(MAX_REPORT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|source| CliError::Input {
                path: args.report.clone(),
                source,
            })?;
        if bytes.len() as u64 > MAX_REPORT_BYTES {
            return Err(CliError::Argument(format!(
                "the report on standard input is larger than {} MiB, more than a report holds",
                MAX_REPORT_BYTES >> 20
            )));
        }
        String::from_utf8_lossy(&bytes).into_owned()
    } else {
        crate::io::limits::read_text_bounded(&args.report, MAX_REPORT_BYTES).map_err(|source| {
            CliError::Input {
                path: args.report.clone(),
                source,
            }
        })?
    };
    let read = read_report(&text);
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let json = FindingsJson {
            findings: &read.findings,
            unread: &read.unread,
        };
        serde_json::to_writer_pretty(&mut stdout, &json).map_err(std::io::Error::from)?;
        writeln!(stdout)?;
    } else {
        write!(stdout, "{}", describe(&text, &read))?;
    }
    Ok(())
}

/// The readable form: organ by organ, each value followed by the words it came from.
#[must_use]
pub fn describe(text: &str, read: &ReadReport) -> String {
    let mut out = String::new();
    let quote = |span: Option<crate::findings::Span>| {
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
