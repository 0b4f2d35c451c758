//! `keyslice pacs query|retrieve|publish|results|agreement`: the hospital's PACS over
//! DICOMweb (see `keyslice_pacs`). URLs are `dicomweb+http(s)://HOST/ROOT[/studies/UID]` or
//! `…/ROOT?PatientID=…`; credentials come from `KEYSLICE_DICOMWEB_TOKEN` or
//! `KEYSLICE_DICOMWEB_USER` / `KEYSLICE_DICOMWEB_PASSWORD`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use serde::Serialize;

use super::CliError;
use crate::pacs::dicomweb::retrieve::{Progress, Retrieved, default_cache, retrieve_ct};
use crate::pacs::dicomweb::{Target, qido, stow};
use crate::pacs::publish::{self, Decision, DocumentKind};
use crate::pacs::results::{StudyResults, held_documents, study_results};
use crate::pacs::sr::{CaseResult, Observer, StudyContext};
use crate::pacs::{DicomWebUrl, PacsError, Server, agreement};
use crate::review::case::{CaseReview, model_findings};
use crate::review::store::{ReviewStatus, ReviewStore};
use crate::review::workspace::{Workspace, WorkspaceCase};
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

impl Default for Connection {
    fn default() -> Self {
        Self {
            timeout_secs: 60,
            retries: 3,
            parallel: 6,
            cache: None,
            ca_cert: Vec::new(),
        }
    }
}

impl Connection {
    /// The server of `url` with these settings; a `--ca-cert` that holds no certificate is
    /// an error naming it.
    pub fn server(&self, url: &DicomWebUrl) -> Result<Server, CliError> {
        let mut server = Server::with_timeout(url, Duration::from_secs(self.timeout_secs));
        server.retries = self.retries;
        server.trust(&self.ca_cert).map_err(CliError::Argument)?;
        Ok(server)
    }

    fn cache(&self) -> PathBuf {
        self.cache.clone().unwrap_or_else(default_cache)
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
            let server = connection.server(&url)?;
            let Target::Study { study, .. } = &url.target else {
                return Err(CliError::Argument(
                    "retrieve needs a URL that names one study (…/studies/STUDY_UID)".into(),
                ));
            };
            let retrieved = retrieve_with_progress(&server, study, connection)?;
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
        } => publish(
            dir,
            case.as_deref(),
            PublishOptions {
                out: out.as_deref(),
                no_store: *no_store,
                force: *force,
                reviewer: reviewer.as_deref(),
                json: *json,
            },
            connection,
        ),
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

impl From<PacsError> for CliError {
    fn from(error: PacsError) -> Self {
        Self::Pacs(error)
    }
}

/// The studies a URL names: the one study, or a QIDO search.
pub fn studies_of(
    url: &DicomWebUrl,
    server: &Server,
) -> Result<Vec<qido::StudySummary>, PacsError> {
    match &url.target {
        Target::Study { study, .. } => {
            qido::studies(server, &[("StudyInstanceUID".to_string(), study.clone())]).and_then(
                |found| {
                    if found.is_empty() {
                        Err(PacsError::NotFound {
                            server: server.name().to_string(),
                            what: format!("study {study}"),
                        })
                    } else {
                        Ok(found)
                    }
                },
            )
        }
        Target::Query(pairs) => qido::studies(server, pairs),
        Target::AllStudies => qido::studies(server, &[]),
    }
}

fn query(url: &str, json: bool, connection: &Connection) -> Result<(), CliError> {
    let url = DicomWebUrl::parse(url)?;
    let server = connection.server(&url)?;
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

/// Retrieves a study's CT series with a progress line on stderr (study UID only: no PHI).
pub fn retrieve_with_progress(
    server: &Server,
    study: &str,
    connection: &Connection,
) -> Result<Retrieved, PacsError> {
    use std::io::IsTerminal as _;
    let started = Instant::now();
    let last = std::sync::Mutex::new(None::<Instant>);
    // On a terminal one line rewritten in place; in a log, a plain line every 5 s.
    let terminal = std::io::stderr().is_terminal();
    let every = if terminal {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(5)
    };
    let progress = |p: Progress| {
        let Ok(mut last) = last.lock() else { return };
        if p.done == p.total || last.is_none_or(|at| at.elapsed() >= every) {
            *last = Some(Instant::now());
            let seconds = started.elapsed().as_secs_f64().max(1e-3);
            let rate = p.done as f64 / seconds;
            let eta = (p.total.saturating_sub(p.done)) as f64 / rate.max(1e-9);
            let line = format!(
                "retrieving study {study}: {}/{} instances, {:.1} MB, {rate:.1} instances/s, ETA {eta:.0} s",
                p.done,
                p.total,
                p.bytes as f64 / 1e6
            );
            if terminal {
                eprint!("\r{line}");
            } else {
                eprintln!("{line}");
            }
        }
    };
    let result = retrieve_ct(
        server,
        study,
        &connection.cache(),
        usize::from(connection.parallel),
        &progress,
    );
    if terminal {
        eprintln!();
    }
    let retrieved = result?;
    eprintln!(
        "{} instance(s) of series {} ({} fetched, {} already cached) in {:.1} s",
        retrieved.instances,
        retrieved.series.series_uid,
        retrieved.fetched,
        retrieved.instances - retrieved.fetched,
        started.elapsed().as_secs_f64()
    );
    Ok(retrieved)
}

/// Adds the CT of each study a URL names to the workspace `dir` (retrieved into
/// `dir/dicomweb`); returns how many were added and how many failed (each reported).
pub fn add_to_workspace(dir: &Path, url: &str) -> Result<(usize, usize), CliError> {
    let url = DicomWebUrl::parse(url)?;
    let connection = Connection {
        cache: Some(dir.join("dicomweb")),
        ..Connection::default()
    };
    let server = connection.server(&url)?;
    let studies = studies_of(&url, &server)?;
    let mut cases = Vec::new();
    let mut failed = 0;
    for study in &studies {
        match retrieve_with_progress(&server, &study.study_uid, &connection) {
            Ok(retrieved) => cases.push(WorkspaceCase {
                case_id: case_id_of(&study.study_uid),
                volume: retrieved.folder,
                masks: None,
                truth: None,
                origin: Some(url.study_url(&study.study_uid)),
                // What the PACS says of the study, for the worklist (never exported).
                patient: Some(crate::volume::PatientIdentity {
                    name: study.patient_name.clone(),
                    id: study.patient_id.clone(),
                    study_date: study.date.clone(),
                    accession: study.accession.clone(),
                    ..crate::volume::PatientIdentity::default()
                }),
            }),
            Err(error) => {
                eprintln!(
                    "error: {}\nhint: {}",
                    shown(&error.to_string()),
                    error.hint()
                );
                failed += 1;
            }
        }
    }
    let (_, added) = Workspace::add_cases(dir, cases)?;
    Ok((added, failed))
}

/// A pseudonymous case id for a study: `pacs-` and 10 hex digits of a hash of its UID
/// (stable, and free of the accession number or patient identity).
#[must_use]
pub fn case_id_of(study_uid: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(study_uid.as_bytes());
    let hex = hex(&digest[..5]);
    format!("pacs-{hex}")
}

#[derive(Debug, Serialize)]
struct PublishedDocument {
    case_id: String,
    kind: DocumentKind,
    sop_uid: String,
    series_uid: String,
    stored: bool,
}

/// How one case's documents went.
#[derive(Default)]
struct CaseOutcome {
    /// Stored now, or written to `--out` only.
    documents: Vec<PublishedDocument>,
    /// Already on the PACS (the same content, so the same UIDs): not stored again.
    held: usize,
}

/// What `pacs publish` writes and stores.
#[derive(Clone, Copy)]
struct PublishOptions<'a> {
    /// Also write the documents here.
    out: Option<&'a Path>,
    /// Store nothing.
    no_store: bool,
    /// Publish AI results made outside the model's domain too.
    force: bool,
    /// Who accepted the cases whose review names nobody.
    reviewer: Option<&'a str>,
    /// One JSON line instead of the table.
    json: bool,
}

fn publish(
    dir: &Path,
    only: Option<&str>,
    options: PublishOptions<'_>,
    connection: &Connection,
) -> Result<(), CliError> {
    if let Some(name) = options.reviewer
        && let Some(reason) = publish::reviewer_problem("--reviewer", name)
    {
        return Err(CliError::Argument(shown(&reason).into_owned()));
    }
    let out = options.out;
    let workspace = Workspace::open(dir)?;
    let predictions = workspace.predictions()?;
    for warning in workspace.health(&predictions)?.warnings() {
        eprintln!("warning: {}", shown(&warning));
    }
    let store = ReviewStore::open(&workspace.database_path())
        .map_err(crate::review::workspace::WorkspaceError::from)?;
    if let Some(out) = out {
        std::fs::create_dir_all(out).map_err(|source| CliError::Input {
            path: out.to_path_buf(),
            source,
        })?;
    }
    let cases: Vec<&WorkspaceCase> = workspace
        .manifest
        .cases
        .iter()
        .filter(|case| only.is_none_or(|id| case.case_id == id))
        .collect();
    if cases.is_empty() {
        return Err(CliError::Argument(format!(
            "no case {} in {}",
            only.unwrap_or("at all"),
            dir.display()
        )));
    }
    let (mut documents, mut held, mut failed, mut skipped) = (Vec::new(), 0, 0, 0);
    for case in cases {
        let outcome = publish_case(
            case,
            predictions.get(&case.case_id),
            &store,
            &workspace,
            options,
            connection,
        );
        match outcome {
            Ok(Some(mut outcome)) => {
                documents.append(&mut outcome.documents);
                held += outcome.held;
            }
            Ok(None) => skipped += 1,
            Err(error) => {
                eprintln!(
                    "error: {}: {}\nhint: {}",
                    shown(&case.case_id),
                    shown(&error.to_string()),
                    error.hint()
                );
                failed += 1;
            }
        }
    }
    print_published(&documents, (held, skipped, failed), options.json)?;
    if failed > 0 {
        return Err(CliError::PartlyFailed {
            failed,
            total: documents.len() + failed,
        });
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

/// Gathers one case's inputs, has [`publish::plan`] decide its documents, writes them to
/// `out`, asks the PACS which it already holds (their UIDs follow from their content, so a
/// document stored before, by this machine or another, or by a run killed before it heard the
/// answer, is recognised) and stores the rest.
fn publish_case(
    case: &WorkspaceCase,
    prediction: Option<&crate::prediction::Prediction>,
    store: &ReviewStore,
    workspace: &Workspace,
    options: PublishOptions<'_>,
    connection: &Connection,
) -> Result<Option<CaseOutcome>, CliError> {
    let Some(prediction) = prediction else {
        return Ok(None);
    };
    if case.origin.is_none() && options.out.is_none() {
        return Ok(None);
    }
    let study = StudyContext::from_folder(&case.volume)?;
    let state = store
        .case_state(&case.case_id)
        .map_err(crate::review::workspace::WorkspaceError::from)?;
    let accepted = if state.status == ReviewStatus::Done {
        Some(accepted_review(
            workspace,
            case,
            prediction,
            state.reviewer.as_deref(),
            options.reviewer,
        )?)
    } else {
        None
    };
    let plan = publish::plan(&publish::CaseInput {
        case_id: &case.case_id,
        prediction,
        study: &study,
        review: accepted
            .as_ref()
            .map(|(reviewer, findings, at)| publish::AcceptedReview {
                reviewer: reviewer.as_deref(),
                findings,
                accepted: at.clone(),
            }),
        force: options.force,
    })?;
    for (kind, reason) in &plan.left_out {
        if matches!(reason, publish::LeftOut::OutOfDomain(_)) && *kind == DocumentKind::AiResult {
            eprintln!(
                "warning: {}: {}",
                shown(&case.case_id),
                shown(&reason.to_string())
            );
        }
    }
    if let Some(out) = options.out {
        for document in &plan.documents {
            let path = out.join(format!("{}-{}.dcm", case.case_id, document.kind));
            crate::io::atomic::write_atomically(&path, &document.written.bytes)
                .map_err(|source| CliError::Input { path, source })?;
        }
    }
    let server = match (&case.origin, options.no_store) {
        (Some(origin), false) => Some(connection.server(&DicomWebUrl::parse(origin)?)?),
        _ => None,
    };
    let held = server
        .as_ref()
        .map(|server| held_documents(server, &study.study_uid))
        .transpose()?;
    let mut outcome = CaseOutcome::default();
    let mut to_store = Vec::new();
    for (document, decision) in plan.decide(held.as_ref()) {
        if decision == Decision::Held {
            outcome.held += 1;
            continue;
        }
        outcome.documents.push(PublishedDocument {
            case_id: case.case_id.clone(),
            kind: document.kind,
            sop_uid: document.written.sop_uid.clone(),
            series_uid: document.written.series_uid.clone(),
            stored: false,
        });
        if decision == Decision::Store {
            to_store.push(document.written.bytes.clone());
        }
    }
    if let Some(server) = &server
        && !to_store.is_empty()
    {
        stow::store(server, &study.study_uid, &to_store)?;
        for document in &mut outcome.documents {
            document.stored = true;
        }
    }
    Ok(Some(outcome))
}

/// An accepted case's reviewer (the one recorded, else `--reviewer`), corrected findings,
/// and when it was accepted (DICOM date and time).
type Accepted = (
    Option<String>,
    crate::findings::Findings,
    Option<(String, String)>,
);

fn accepted_review(
    workspace: &Workspace,
    case: &WorkspaceCase,
    prediction: &crate::prediction::Prediction,
    recorded: Option<&str>,
    given: Option<&str>,
) -> Result<Accepted, CliError> {
    // A recorded name that cannot sign is replaced by --reviewer when given; else it goes on,
    // to be refused with what is wrong with it.
    let reviewer = recorded
        .filter(|name| publish::is_named(name))
        .or(given)
        .or(recorded);
    let review = CaseReview::open(
        &workspace.database_path(),
        &case.case_id,
        reviewer.unwrap_or_default(),
        Some(model_findings(prediction)),
    )
    .map_err(crate::review::workspace::WorkspaceError::from)?;
    // Dated when the reviewer accepted it, not when it is sent.
    let at = review
        .log()
        .iter()
        .rev()
        .find(|entry| entry.field == "status" && entry.new_value == "done")
        .and_then(|entry| keyslice_core::date::dicom_from_rfc3339(&entry.at));
    // The record holds what the reviewer set or accepted: the model's box and range leave
    // it when they no longer describe the reviewer's key slice, as in every export.
    let mut findings = review.case().findings.clone();
    crate::export::rules::reconcile(
        &mut findings,
        Some(&model_findings(prediction)),
        &review.case().changed,
    );
    Ok((reviewer.map(str::to_string), findings, at))
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
    let Target::Study { study, .. } = &url.target else {
        return Err(CliError::Argument(
            "results needs a URL that names one study (…/studies/STUDY_UID)".into(),
        ));
    };
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
    let url = DicomWebUrl::parse(url)?;
    let server = connection.server(&url)?;
    let studies = studies_of(&url, &server)?;
    let mut labels = Vec::new();
    for study in &studies {
        let found = study_results(
            &server,
            &study.study_uid,
            &connection.cache(),
            usize::from(connection.parallel),
        )?;
        for (reviewer, review) in found.latest_reviews() {
            labels.push(agreement::Label {
                study: study.study_uid.clone(),
                reviewer: reviewer.to_string(),
                findings: review.content.findings.clone(),
            });
        }
    }
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
        studies.len(),
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

/// Bytes as lower-case hex digits.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut text, byte| {
        let _ = write!(text, "{byte:02x}");
        text
    })
}
