//! `keyslice pacs query|retrieve|publish|results|agreement`: the hospital's PACS over
//! DICOMweb (see `keyslice_pacs`). URLs are `dicomweb+http(s)://HOST/ROOT[/studies/UID]` or
//! `…/ROOT?PatientID=…`; credentials come from `KEYSLICE_DICOMWEB_TOKEN` or
//! `KEYSLICE_DICOMWEB_USER` / `KEYSLICE_DICOMWEB_PASSWORD`.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use keyslice_workflow::pacs::{PublishOptions, PublishedDocument, one_study, studies_of};
use serde::Serialize;

use super::CliError;
use crate::pacs::results::{StudyResults, study_results};
use crate::pacs::sr::{CaseResult, Observer};
use crate::pacs::{DicomWebUrl, agreement};
use crate::text::{shown, shown_short};

/// Arguments of `pacs`.
#[derive(Debug, Args)]
pub struct PacsArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: PacsAction,
}

/// How to reach the server.
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// Seconds one request may take, from connecting to the last byte of its answer.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout_secs: u64,
    /// Retries of a failed request (dropped connection, HTTP 429/5xx, truncated answer; 0–20).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=20))]
    pub retries: u32,
    /// Instances retrieved at once when they are asked for one by one.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub parallel: u16,
    /// The retrieve cache (default: the user's cache folder, keyslice/dicomweb).
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// A CA certificate (PEM) to trust beside the system's store, for a PACS behind a
    /// hospital's own CA (repeat for several). `SSL_CERT_FILE` and `SSL_CERT_DIR` are read too.
    #[arg(long, value_name = "FILE")]
    pub ca_cert: Vec<PathBuf>,
}

impl Connection {
    /// The settings the use cases take.
    #[must_use]
    pub fn settings(&self) -> keyslice_workflow::pacs::Connection {
        keyslice_workflow::pacs::Connection {
            timeout_secs: self.timeout_secs,
            retries: self.retries,
            parallel: self.parallel,
            cache: self.cache.clone(),
            ca_cert: self.ca_cert.clone(),
        }
    }
}

/// The `pacs` subcommands.
#[derive(Debug, Subcommand)]
pub enum PacsAction {
    /// List the studies a URL names (all, one, or those matching its ?query).
    Query {
        /// `dicomweb+http(s)://HOST/ROOT[?PatientID=…&StudyDate=…&ModalitiesInStudy=CT]`.
        url: String,
        /// One JSON object per study.
        #[arg(long)]
        json: bool,
        /// Server settings.
        #[command(flatten)]
        connection: Connection,
    },
    /// Retrieve a study's CT series into the cache (resumes what an earlier run began) and
    /// print its folder.
    Retrieve {
        /// `dicomweb+http(s)://HOST/ROOT/studies/STUDY_UID`.
        url: String,
        /// Print the outcome as one JSON line (`folder`, `study_uid`, `series_uid`,
        /// `instances`, `fetched`, `bytes`); progress stays on stderr.
        #[arg(long)]
        json: bool,
        /// Server settings.
        #[command(flatten)]
        connection: Connection,
    },
    /// Store the AI results (TID 1500 SR and a Key Object Selection of the key slice) and
    /// each accepted review (an SR with the reviewer as observer) of a workspace's PACS cases
    /// in their studies with STOW-RS. Documents already stored are not sent again.
    Publish {
        /// The workspace folder (made with `workspace create DIR dicomweb+…`).
        dir: PathBuf,
        /// Only this case.
        #[arg(long)]
        case: Option<String>,
        /// Also write the documents as files into this folder.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Write the files only; store nothing (needs --out).
        #[arg(long, requires = "out")]
        no_store: bool,
        /// Also publish AI results the model made on CTs outside what it knows (the demo
        /// model on anything but its phantoms); they are labelled so in the report text.
        #[arg(long)]
        force: bool,
        /// The reviewer who accepted the cases whose review names nobody (a reviewer SR is
        /// verified by its reviewer, by name; such cases are refused without it).
        #[arg(long)]
        reviewer: Option<String>,
        /// Print the outcome as one JSON line (`documents` with each case, kind, SOP and
        /// series UID and whether it was stored; `held`, `skipped`, `failed`).
        #[arg(long)]
        json: bool,
        /// Server settings.
        #[command(flatten)]
        connection: Connection,
    },
    /// Show the Keyslice results stored in a study: the AI's and each reviewer's.
    Results {
        /// `dicomweb+http(s)://HOST/ROOT/studies/STUDY_UID`.
        url: String,
        /// One JSON object.
        #[arg(long)]
        json: bool,
        /// Server settings.
        #[command(flatten)]
        connection: Connection,
    },
    /// Agreement between the reviewers who corrected the studies a URL names: key slice
    /// distance, presence kappa per organ, attribute agreement, and the studies to adjudicate.
    Agreement {
        /// `dicomweb+http(s)://HOST/ROOT[?query]` or one study.
        url: String,
        /// Key slices further apart than this many slices disagree.
        #[arg(long, default_value_t = 5)]
        slice_tolerance: u32,
        /// One JSON object.
        #[arg(long)]
        json: bool,
        /// Server settings.
        #[command(flatten)]
        connection: Connection,
    },
}

/// Runs `pacs`.
pub fn run(args: &PacsArgs) -> Result<(), CliError> {
    match &args.action {
        PacsAction::Query {
            url,
            json,
            connection,
        } => query(url, *json, connection),
        PacsAction::Retrieve {
            url,
            json,
            connection,
        } => {
            let url = DicomWebUrl::parse(url)?;
            let connection = connection.settings();
            let server = connection.server(&url)?;
            let study = one_study(&url, "retrieve")?;
            let retrieved = keyslice_workflow::pacs::retrieve(
                &server,
                study,
                &connection,
                &super::Terminal::default(),
            )?;
            let summary = serde_json::json!({
                "folder": retrieved.folder,
                "study_uid": retrieved.study_uid,
                "series_uid": retrieved.series.series_uid,
                "instances": retrieved.instances,
                "fetched": retrieved.fetched,
                "bytes": retrieved.bytes,
            });
            super::print_summary(*json, &summary, || retrieved.folder.display().to_string())
        }
        PacsAction::Publish {
            dir,
            case,
            out,
            no_store,
            force,
            reviewer,
            json,
            connection,
        } => {
            let published = keyslice_workflow::pacs::publish_workspace(
                dir,
                PublishOptions {
                    only: case.as_deref(),
                    out: out.as_deref(),
                    no_store: *no_store,
                    force: *force,
                    reviewer: reviewer.as_deref(),
                },
                &connection.settings(),
                &super::Terminal::default(),
            )?;
            print_published(
                &published.documents,
                (published.held, published.skipped, published.failed),
                *json,
            )?;
            if published.failed > 0 {
                return Err(CliError::PartlyFailed {
                    failed: published.failed,
                    total: published.documents.len() + published.failed,
                });
            }
            Ok(())
        }
        PacsAction::Results {
            url,
            json,
            connection,
        } => results(url, *json, connection),
        PacsAction::Agreement {
            url,
            slice_tolerance,
            json,
            connection,
        } => agreement_of(url, *slice_tolerance, *json, connection),
    }
}

fn query(url: &str, json: bool, connection: &Connection) -> Result<(), CliError> {
    let url = DicomWebUrl::parse(url)?;
    let server = connection.settings().server(&url)?;
    let studies = studies_of(&url, &server)?;
    let mut out = std::io::stdout().lock();
    if !json {
        writeln!(
            out,
            "{:<10} {:<14} {:<16} {:<24} {:<10} {:>9}  {:<28} study",
            "date",
            "accession",
            "patient id",
            "patient name",
            "modality",
            "instances",
            "description"
        )?;
    }
    for study in &studies {
        if json {
            writeln!(out, "{}", serde_json::to_string(study).unwrap_or_default())?;
        } else {
            writeln!(
                out,
                "{:<10} {:<14} {:<16} {:<24} {:<10} {:>9}  {:<28} {}",
                shown(&study.date),
                shown(&study.accession),
                shown(&study.patient_id),
                shown_short(&study.patient_name, 24),
                shown(&study.modalities.join(",")),
                study.instances.map_or("–".into(), |n| n.to_string()),
                shown_short(&study.description, 28),
                study.study_uid
            )?;
        }
    }
    if !json {
        writeln!(out, "{} study(ies) on {}", studies.len(), server.name())?;
    }
    Ok(())
}

/// What `pacs publish` did: a line per document and a total, or with `--json` one line.
fn print_published(
    documents: &[PublishedDocument],
    (held, skipped, failed): (usize, usize, usize),
    json: bool,
) -> Result<(), CliError> {
    if json {
        let summary = serde_json::json!({
            "documents": documents,
            "held": held,
            "skipped": skipped,
            "failed": failed,
        });
        return super::print_summary(true, &summary, String::new);
    }
    let mut stdout = std::io::stdout().lock();
    for document in documents {
        writeln!(
            stdout,
            "{:<16} {:<10} {} {}",
            shown(&document.case_id),
            document.kind,
            if document.stored {
                "stored "
            } else {
                "written"
            },
            document.sop_uid
        )?;
    }
    writeln!(
        stdout,
        "{} document(s); {held} already on the PACS; {skipped} case(s) without a PACS origin or analysis skipped; {failed} failed",
        documents.len()
    )?;
    Ok(())
}

#[derive(Serialize)]
struct ResultsSummary<'a> {
    study_uid: &'a str,
    ai: Vec<serde_json::Value>,
    reviews: Vec<serde_json::Value>,
    key_images: Vec<serde_json::Value>,
    skipped: &'a [String],
    study_reads: usize,
}

fn result_json(stored: &crate::pacs::sr::read::Stored<CaseResult>) -> serde_json::Value {
    let result = &stored.content;
    let observer = match &result.observer {
        Observer::Device { model } => format!("{} {}", model.id, model.version),
        Observer::Person { name } => name.clone(),
    };
    serde_json::json!({
        "sop_uid": stored.sop_uid,
        "series_uid": stored.series_uid,
        "content_date_time": stored.content_date_time,
        "observer": observer,
        "algorithm": result.algorithm,
        "findings": result.findings,
        "consistency": result.consistency,
        "local_description": result.local_description,
        "out_of_domain": result.out_of_domain,
    })
}

fn results(url: &str, json: bool, connection: &Connection) -> Result<(), CliError> {
    let url = DicomWebUrl::parse(url)?;
    let study = one_study(&url, "results")?;
    let connection = connection.settings();
    let server = connection.server(&url)?;
    let found = study_results(
        &server,
        study,
        &connection.cache(),
        usize::from(connection.parallel),
    )?;
    let mut out = std::io::stdout().lock();
    if json {
        let summary = ResultsSummary {
            study_uid: study,
            ai: found.ai.iter().map(result_json).collect(),
            reviews: found.reviews.iter().map(result_json).collect(),
            key_images: found
                .key_images
                .iter()
                .map(|k| {
                    serde_json::json!({"sop_uid": k.sop_uid, "title": k.content.title,
                        "description": k.content.description, "images": k.content.images})
                })
                .collect(),
            skipped: &found.skipped,
            study_reads: found.study_reads,
        };
        writeln!(
            out,
            "{}",
            serde_json::to_string(&summary).unwrap_or_default()
        )?;
        return Ok(());
    }
    write_results(&mut out, study, &found)?;
    Ok(())
}

fn write_results(out: &mut impl Write, study: &str, found: &StudyResults) -> std::io::Result<()> {
    writeln!(out, "study {study}")?;
    for stored in &found.ai {
        let result = &stored.content;
        writeln!(
            out,
            "  AI result {} {} ({}): {}{}",
            shown(&result.algorithm.id),
            shown(&result.algorithm.version),
            shown(&stored.content_date_time),
            shown(&result.summary()),
            // A result out of the model's depth claims no agreement, whatever its figures.
            match (&result.out_of_domain, &result.consistency) {
                (Some(unfamiliar), _) => format!("; {}", shown(&unfamiliar.sentence())),
                (None, Some(c)) => format!("; consistency {:.2}", c.score),
                (None, None) => String::new(),
            }
        )?;
    }
    for stored in &found.reviews {
        if let Observer::Person { name } = &stored.content.observer {
            writeln!(
                out,
                "  review by {} ({}): {}",
                crate::text::person_name(name),
                shown(&stored.content_date_time),
                shown(&stored.content.summary())
            )?;
        }
    }
    for keys in &found.key_images {
        writeln!(
            out,
            "  key images \"{}\": {} image(s) — {}",
            shown(&keys.content.title),
            keys.content.images.len(),
            shown(&keys.content.description)
        )?;
    }
    for skipped in &found.skipped {
        writeln!(out, "  skipped: {}", shown(skipped))?;
    }
    if found.study_reads > 0 {
        writeln!(
            out,
            "  {} reader study read(s): research, not shown as reviews (`keyslice study`)",
            found.study_reads
        )?;
    }
    if found.ai.is_empty() && found.reviews.is_empty() {
        writeln!(out, "  no Keyslice results stored")?;
    }
    Ok(())
}

fn agreement_of(
    url: &str,
    slice_tolerance: u32,
    json: bool,
    connection: &Connection,
) -> Result<(), CliError> {
    let (studies, labels) = keyslice_workflow::pacs::stored_reviews(url, &connection.settings())?;
    let report = agreement::agreement(&labels, slice_tolerance);
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(
            out,
            "{}",
            serde_json::to_string(&report).unwrap_or_default()
        )?;
        return Ok(());
    }
    writeln!(
        out,
        "{} study(ies), {} review(s) by {} reviewer(s)",
        studies,
        labels.len(),
        {
            let mut names: Vec<&str> = labels.iter().map(|l| l.reviewer.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            names.len()
        }
    )?;
    for pair in &report.pairs {
        let kappas: Vec<String> = pair
            .presence_kappa
            .iter()
            .map(|(organ, kappa)| {
                format!(
                    "{}={}",
                    organ.key(),
                    kappa.map_or("n/a".into(), |k| format!("{k:.2}"))
                )
            })
            .collect();
        writeln!(
            out,
            "{} vs {}: {} common study(ies); presence agreement {:.2}; kappa {}; mean key slice distance {}; attribute agreement {}",
            shown(&pair.reviewer_a),
            shown(&pair.reviewer_b),
            pair.studies,
            pair.presence_agreement,
            kappas.join(" "),
            pair.mean_key_slice_distance
                .map_or("n/a".into(), |d| format!("{d:.1} slices")),
            pair.attribute_agreement
                .map_or("n/a".into(), |a| format!("{a:.2}"))
        )?;
    }
    if report.disagreements.is_empty() {
        writeln!(out, "no studies to adjudicate")?;
    } else {
        writeln!(out, "to adjudicate:")?;
        for disagreement in &report.disagreements {
            writeln!(
                out,
                "  {} ({}): {}",
                disagreement.study,
                shown(&disagreement.reviewers.join(" vs ")),
                shown(&disagreement.reasons.join("; "))
            )?;
        }
    }
    Ok(())
}
