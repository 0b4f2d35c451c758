//! The PACS use cases: import a study into a workspace, open one with its stored result,
//! publish a workspace's results and a reader study's reads (one held-then-store loop), and
//! gather the reviews stored for agreement.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use keyslice_core::prediction::Prediction;
use keyslice_pacs::dicomweb::qido::StudySummary;
use keyslice_pacs::dicomweb::retrieve::{Progress, Retrieved, default_cache, retrieve_ct};
use keyslice_pacs::dicomweb::{Target, qido, stow};
use keyslice_pacs::publish::{self, DocumentKind};
use keyslice_pacs::results::{StudyResults, held_documents, study_results};
use keyslice_pacs::seg::{Algorithm, Segment, SourceSeries};
use keyslice_pacs::sr::write::Written;
use keyslice_pacs::sr::{CaseResult, Observer, StudyContext};
use keyslice_pacs::{DicomWebUrl, PacsError, Server, agreement};
use keyslice_review::case::{CaseReview, model_findings, model_masks};
use keyslice_review::store::{ReviewStatus, ReviewStore};
use keyslice_review::workspace::{Workspace, WorkspaceCase, WorkspaceError};
use serde::Serialize;

use crate::{Error, Report};

/// How to reach a server: the settings behind every request of a use case (the `pacs`
/// commands' options).
#[derive(Debug, Clone, clap::Args)]
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
    /// The command line's defaults: the options' own, said in one place.
    fn default() -> Self {
        #[derive(clap::Parser)]
        struct Defaults {
            #[command(flatten)]
            connection: Connection,
        }
        <Defaults as clap::Parser>::try_parse_from(["keyslice"]).map_or_else(
            |error| unreachable!("every connection option has a default: {error}"),
            |defaults| defaults.connection,
        )
    }
}

impl Connection {
    /// The server of `url` with these settings; a CA file that holds no certificate is an
    /// error naming it.
    pub fn server(&self, url: &DicomWebUrl) -> Result<Server, Error> {
        let mut server = Server::with_timeout(url, Duration::from_secs(self.timeout_secs));
        server.retries = self.retries;
        server.trust(&self.ca_cert)?;
        Ok(server)
    }

    /// The retrieve cache.
    #[must_use]
    pub fn cache(&self) -> PathBuf {
        self.cache.clone().unwrap_or_else(default_cache)
    }
}

/// Whether `text` names a study or search on a PACS (`dicomweb+http(s)://…`).
#[must_use]
pub fn is_pacs_url(text: &str) -> bool {
    DicomWebUrl::is_dicomweb(text)
}

/// The studies a URL names: the one study, or a QIDO search.
pub fn studies_of(url: &DicomWebUrl, server: &Server) -> Result<Vec<StudySummary>, PacsError> {
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

/// The one study a URL names, or an error saying what `use_case` needs.
pub fn one_study<'a>(url: &'a DicomWebUrl, use_case: &str) -> Result<&'a str, Error> {
    match &url.target {
        Target::Study { study, .. } => Ok(study),
        _ => Err(Error::Argument(format!(
            "{use_case} needs a URL that names one study (…/studies/STUDY_UID)"
        ))),
    }
}

/// Retrieves a study's CT series into the connection's cache, telling `report` how far it is.
pub fn retrieve(
    server: &Server,
    study: &str,
    connection: &Connection,
    report: &dyn Report,
) -> Result<Retrieved, PacsError> {
    let started = Instant::now();
    let progress = |p: Progress| report.retrieving(study, p, started);
    let result = retrieve_ct(
        server,
        study,
        &connection.cache(),
        usize::from(connection.parallel),
        &progress,
    );
    report.retrieve_ended(result.as_ref().ok(), started.elapsed());
    result
}

/// A study's CT retrieved into the cache.
pub struct RetrievedStudy(pub Retrieved);

/// Retrieves the CT of the one study `url` names into the connection's cache.
pub fn retrieve_url(
    url: &str,
    connection: &Connection,
    report: &dyn Report,
) -> Result<RetrievedStudy, Error> {
    let url = DicomWebUrl::parse(url)?;
    let server = connection.server(&url)?;
    let study = one_study(&url, "retrieve")?;
    Ok(RetrievedStudy(retrieve(
        &server, study, connection, report,
    )?))
}

impl crate::Outcome for RetrievedStudy {
    fn json(&self) -> String {
        let retrieved = &self.0;
        serde_json::json!({
            "folder": retrieved.folder,
            "study_uid": retrieved.study_uid,
            "series_uid": retrieved.series.series_uid,
            "instances": retrieved.instances,
            "fetched": retrieved.fetched,
            "bytes": retrieved.bytes,
        })
        .to_string()
    }

    fn text(&self) -> String {
        self.0.folder.display().to_string()
    }
}

/// What [`import_studies`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Imported {
    /// Studies added to the workspace (a study it held already is not counted).
    pub added: usize,
    /// Studies that could not be retrieved (each told to the report).
    pub failed: usize,
}

/// Adds the CT of each study a URL names to the workspace `dir` (retrieved into
/// `dir/dicomweb`, made on first use); a study that cannot be retrieved is told to `report`
/// and the others go on.
pub fn import_studies(dir: &Path, url: &str, report: &dyn Report) -> Result<Imported, Error> {
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
        match retrieve(&server, &study.study_uid, &connection, report) {
            Ok(retrieved) => cases.push(WorkspaceCase {
                case_id: case_id_of(&study.study_uid),
                volume: retrieved.folder,
                masks: None,
                truth: None,
                origin: Some(url.study_url(&study.study_uid)),
                // What the PACS says of the study, for the worklist (never exported).
                patient: Some(keyslice_core::volume::PatientIdentity {
                    name: study.patient_name.clone(),
                    id: study.patient_id.clone(),
                    study_date: study.date.clone(),
                    accession: study.accession.clone(),
                    ..keyslice_core::volume::PatientIdentity::default()
                }),
            }),
            Err(error) => {
                report.failed(None, &Error::from(error));
                failed += 1;
            }
        }
    }
    let (_, added) = Workspace::add_cases(dir, cases)?;
    Ok(Imported { added, failed })
}

/// A pseudonymous case id for a study: `pacs-` and 10 hex digits of a hash of its UID
/// (stable, and free of the accession number or patient identity).
#[must_use]
pub fn case_id_of(study_uid: &str) -> String {
    use sha2::Digest as _;
    use std::fmt::Write as _;
    let digest = sha2::Sha256::digest(study_uid.as_bytes());
    digest[..5]
        .iter()
        .fold(String::from("pacs-"), |mut text, byte| {
            let _ = write!(text, "{byte:02x}");
            text
        })
}

/// The PACS workspace: where studies opened from a PACS are kept with their reviews
/// (`KEYSLICE_PACS_WORKSPACE`, else `workspace` in the retrieve cache).
#[must_use]
pub fn pacs_workspace() -> PathBuf {
    std::env::var_os("KEYSLICE_PACS_WORKSPACE")
        .map_or_else(|| default_cache().join("workspace"), PathBuf::from)
}

/// A PACS study found and about to be opened: what the window shows while it arrives.
pub struct Located {
    /// The URL as given.
    pub url: String,
    /// The Study Instance UID.
    pub study: String,
    /// The server, with the default connection settings.
    pub server: Server,
    /// The study's Keyslice documents.
    pub found: StudyResults,
    /// The CT series' UID.
    pub series_uid: String,
    /// How many instances the series has, when the PACS says.
    pub instances: Option<usize>,
    /// The folder its instances arrive in.
    pub folder: PathBuf,
    /// The stored AI result's key image, to be fetched first.
    pub key_sop: Option<String>,
    /// The PACS workspace the case joins.
    pub workspace: PathBuf,
}

/// Looks a study of a PACS up before it is opened into the workspace `workspace` (usually
/// [`pacs_workspace`]): its stored Keyslice documents (small) and its CT series.
pub fn locate_study(url: &str, workspace: &Path) -> Result<Located, Error> {
    use keyslice_pacs::dicomweb::retrieve::{ct_series, series_folder};
    let parsed = DicomWebUrl::parse(url)?;
    let study = match &parsed.target {
        Target::Study { study, .. } => study.clone(),
        _ => {
            return Err(Error::Argument(
                "view needs a URL that names one study (…/studies/STUDY_UID); list studies with `keyslice pacs query`".into(),
            ));
        }
    };
    let workspace = workspace.to_path_buf();
    let cache = workspace.join("dicomweb");
    let server = Connection::default().server(&parsed)?;
    let found = study_results(&server, &study, &cache, 6)?;
    let series = ct_series(&server, &study)?;
    let folder = series_folder(&cache, &server, &study, &series.series_uid);
    let key_sop = found
        .latest_ai()
        .and_then(|stored| stored.content.findings.key_slice.as_ref())
        .and_then(|key| key.sop_instance_uid.clone())
        .filter(|sop| keyslice_pacs::dicomweb::is_uid(sop));
    Ok(Located {
        url: url.to_string(),
        study,
        server,
        found,
        series_uid: series.series_uid,
        instances: series
            .instances
            .and_then(|count| usize::try_from(count).ok()),
        folder,
        key_sop,
        workspace,
    })
}

/// A study opened from a PACS: the workspace and the case in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// The PACS workspace.
    pub root: PathBuf,
    /// The study's case.
    pub case_id: String,
}

impl Located {
    /// Fetches the stored AI result's key image ahead of the series (so it shows first).
    pub fn fetch_key_image(&self) {
        use keyslice_pacs::dicomweb::retrieve::retrieve_instances;
        if let Some(sop) = &self.key_sop
            && let Err(error) = retrieve_instances(
                &self.server,
                &self.study,
                &self.series_uid,
                std::slice::from_ref(sop),
                &self.workspace.join("dicomweb"),
            )
        {
            tracing::debug!(%error, "the key image could not be fetched first");
        }
    }

    /// Retrieves the study into the PACS workspace, makes the stored AI result the case's
    /// prediction (unless the case was analysed here since: this machine's own prediction
    /// wins until the next PACS result), tells `report` the stored reviews, and returns the
    /// case to open.
    pub fn open(&self, report: &dyn Report) -> Result<Opened, Error> {
        use keyslice_pacs::results::readable_date_time;
        let imported = import_studies(&self.workspace, &self.url, report)?;
        if imported.failed > 0 {
            return Err(Error::PartlyFailed {
                failed: imported.failed,
                total: imported.added + imported.failed,
            });
        }
        let case_id = case_id_of(&self.study);
        let workspace = Workspace::open(&self.workspace)?;
        let predictions = workspace.predictions()?;
        let from_pacs = predictions
            .get(&case_id)
            .is_none_or(|prediction| prediction.stored.is_some());
        if from_pacs
            && let Some(prediction) = self.found.prediction(&case_id, self.server.name())
            && predictions.get(&case_id) != Some(&prediction)
        {
            match slice_outside(&workspace, &case_id, &prediction)? {
                Some((index, slices)) => report.warning(&format!(
                    "the AI result stored on the PACS names slice {index}, outside this study's {slices} slices: it is not shown"
                )),
                None => workspace.append_prediction(&prediction)?,
            }
        }
        for (reviewer, review) in self.found.latest_reviews() {
            report.note(&format!(
                "review by {} stored on the PACS ({}): {}",
                keyslice_core::text::person_name(reviewer),
                keyslice_core::text::shown(&readable_date_time(&review.content_date_time)),
                keyslice_core::text::shown(&review.content.summary())
            ));
        }
        report.note(&format!(
            "case {case_id} in the PACS workspace {} (`keyslice pacs publish` stores reviews back)",
            self.workspace.display()
        ));
        Ok(Opened {
            root: self.workspace.clone(),
            case_id,
        })
    }
}

/// The first slice a stored prediction names outside the case's series as retrieved, with
/// the series' slice count (read from its headers, as the viewer will stack them).
fn slice_outside(
    workspace: &Workspace,
    case_id: &str,
    prediction: &Prediction,
) -> Result<Option<(u32, usize)>, Error> {
    let Some(case) = workspace.case(case_id) else {
        return Ok(None);
    };
    let slices = keyslice_io::dicom::series_slice_count(
        &case.volume,
        prediction
            .images
            .as_ref()
            .map(|images| images.series_uid.as_str())
            .filter(|uid| !uid.is_empty()),
    )
    .map_err(keyslice_io::IoError::from)?;
    Ok(prediction
        .key_slice
        .as_ref()
        .map(|key| key.index)
        .into_iter()
        .chain(
            prediction
                .findings
                .lesion_slices
                .as_ref()
                .map(|range| range.last),
        )
        .find(|&index| index as usize >= slices)
        .map(|index| (index, slices)))
}

/// One document on its way to a study on a PACS.
pub struct Pending {
    /// What it is, as a line of the run's output says it (case, kind or reader).
    pub what: String,
    /// The written document.
    pub document: Written,
}

/// What [`store_new`] did with one study's documents.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StoreOutcome {
    /// Stored now: what each was, and its SOP Instance UID.
    pub stored: Vec<(String, String)>,
    /// Already on the PACS (the same content, so the same UIDs): not stored again.
    pub held: usize,
}

/// The one held-then-store loop: asks the PACS which of a study's documents it holds
/// already (their UIDs follow from their content, so a document stored before, by this
/// machine or another, or by a run killed before it heard the answer, is recognised) and
/// stores the rest in one request.
pub fn store_new(
    server: &Server,
    study_uid: &str,
    documents: Vec<Pending>,
) -> Result<StoreOutcome, Error> {
    let on_server = held_documents(server, study_uid)?;
    let mut outcome = StoreOutcome::default();
    let mut to_store = Vec::new();
    for pending in documents {
        if on_server.contains(&pending.document.sop_uid) {
            outcome.held += 1;
        } else {
            outcome
                .stored
                .push((pending.what, pending.document.sop_uid));
            to_store.push(pending.document.bytes);
        }
    }
    if !to_store.is_empty() {
        stow::store(server, study_uid, &to_store)?;
    }
    Ok(outcome)
}

/// One document `pacs publish` wrote or stored.
#[derive(Debug, Clone, Serialize)]
pub struct PublishedDocument {
    /// The case.
    pub case_id: String,
    /// AI result, review or key images.
    pub kind: DocumentKind,
    /// Its SOP Instance UID.
    pub sop_uid: String,
    /// Its series.
    pub series_uid: String,
    /// Stored on the PACS (else written to the folder only).
    pub stored: bool,
}

/// What a workspace's publishing does.
#[derive(Debug, Clone, Copy, Default)]
pub struct PublishOptions<'a> {
    /// Only this case.
    pub only: Option<&'a str>,
    /// Also write the documents here.
    pub out: Option<&'a Path>,
    /// Store nothing.
    pub no_store: bool,
    /// Publish AI results made outside the model's domain too.
    pub force: bool,
    /// Who accepted the cases whose review names nobody.
    pub reviewer: Option<&'a str>,
}

/// What [`publish_workspace`] did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Published {
    /// Stored now, or written to the folder only.
    pub documents: Vec<PublishedDocument>,
    /// Already on the PACS: not stored again.
    pub held: usize,
    /// Cases without a PACS origin (and no folder to write to) or without an analysis.
    pub skipped: usize,
    /// Cases that failed (each told to the report).
    pub failed: usize,
}

/// Publishes a workspace: each case's AI result, its accepted review and key images as
/// DICOM SR and KOS, to the PACS the case came from (and `out`). A case that fails is told to
/// `report` and the others go on.
pub fn publish_workspace(
    dir: &Path,
    options: PublishOptions<'_>,
    connection: &Connection,
    report: &dyn Report,
) -> Result<Published, Error> {
    if let Some(name) = options.reviewer
        && let Some(reason) = publish::reviewer_problem("--reviewer", name)
    {
        return Err(Error::Argument(
            keyslice_core::text::shown(&reason).into_owned(),
        ));
    }
    let workspace = Workspace::open(dir)?;
    let predictions = workspace.predictions()?;
    for warning in workspace.health(&predictions)?.warnings() {
        report.warning(&warning);
    }
    let store = ReviewStore::open(&workspace.database_path()).map_err(WorkspaceError::from)?;
    if let Some(out) = options.out {
        std::fs::create_dir_all(out).map_err(|source| Error::Write {
            path: out.to_path_buf(),
            source,
        })?;
    }
    let cases: Vec<&WorkspaceCase> = workspace
        .manifest
        .cases
        .iter()
        .filter(|case| options.only.is_none_or(|id| case.case_id == id))
        .collect();
    if cases.is_empty() {
        return Err(Error::Argument(format!(
            "no case {} in {}",
            options.only.unwrap_or("at all"),
            dir.display()
        )));
    }
    let mut published = Published::default();
    for case in cases {
        let case_input = CaseToPublish {
            case,
            prediction: predictions.get(&case.case_id),
            store: &store,
            workspace: &workspace,
        };
        match publish_case(&case_input, options, connection, report) {
            Ok(Some((mut documents, held))) => {
                published.documents.append(&mut documents);
                published.held += held;
            }
            Ok(None) => published.skipped += 1,
            Err(error) => {
                report.failed(Some(&case.case_id), &error);
                published.failed += 1;
            }
        }
    }
    Ok(published)
}

/// One case of a workspace being published, with what its documents are made from.
struct CaseToPublish<'a> {
    case: &'a WorkspaceCase,
    prediction: Option<&'a Prediction>,
    store: &'a ReviewStore,
    workspace: &'a Workspace,
}

/// Gathers one case's inputs, has [`publish::plan`] decide its documents, writes them to
/// `out`, and stores those the PACS does not hold yet. `None`: nothing to publish.
fn publish_case(
    input: &CaseToPublish<'_>,
    options: PublishOptions<'_>,
    connection: &Connection,
    report: &dyn Report,
) -> Result<Option<(Vec<PublishedDocument>, usize)>, Error> {
    let case = input.case;
    let Some(prediction) = input.prediction else {
        return Ok(None);
    };
    if case.origin.is_none() && options.out.is_none() {
        return Ok(None);
    }
    let study = StudyContext::from_folder(&case.volume)?;
    let state = input
        .store
        .case_state(&case.case_id)
        .map_err(WorkspaceError::from)?;
    let accepted = if state.status == ReviewStatus::Done {
        Some(accepted_review(
            input.workspace,
            case,
            prediction,
            state.reviewer.as_deref(),
            options.reviewer,
        )?)
    } else {
        None
    };
    // The reviewer's lesion masks go as a segmentation of the CT series they were drawn on.
    let masks = match &accepted {
        Some(accepted) if !accepted.masks.is_empty() => {
            Some(mask_segments(case, prediction, &study, &accepted.masks)?)
        }
        _ => None,
    };
    let plan = publish::plan(&publish::CaseInput {
        case_id: &case.case_id,
        prediction,
        study: &study,
        review: accepted.as_ref().map(|accepted| publish::AcceptedReview {
            reviewer: accepted.reviewer.as_deref(),
            findings: &accepted.findings,
            accepted: accepted.at.clone(),
            masks: masks
                .as_ref()
                .map(|(source, segments)| publish::ReviewMasks { source, segments }),
        }),
        force: options.force,
    })?;
    for (kind, reason) in &plan.left_out {
        if matches!(reason, publish::LeftOut::OutOfDomain(_)) && *kind == DocumentKind::AiResult {
            report.warning(&format!(
                "{}: {}",
                keyslice_core::text::shown(&case.case_id),
                reason
            ));
        }
    }
    if let Some(out) = options.out {
        for document in &plan.documents {
            let path = out.join(format!("{}-{}.dcm", case.case_id, document.kind));
            keyslice_io::atomic::write_atomically(&path, &document.written.bytes)
                .map_err(|source| Error::Write { path, source })?;
        }
    }
    let server = match (&case.origin, options.no_store) {
        (Some(origin), false) => Some(connection.server(&DicomWebUrl::parse(origin)?)?),
        _ => None,
    };
    let mut documents: Vec<PublishedDocument> = plan
        .documents
        .iter()
        .map(|document| PublishedDocument {
            case_id: case.case_id.clone(),
            kind: document.kind,
            sop_uid: document.written.sop_uid.clone(),
            series_uid: document.written.series_uid.clone(),
            stored: false,
        })
        .collect();
    let Some(server) = &server else {
        return Ok(Some((documents, 0)));
    };
    let pending = plan
        .documents
        .iter()
        .map(|document| Pending {
            what: document.kind.to_string(),
            document: document.written.clone(),
        })
        .collect();
    let outcome = store_new(server, &study.study_uid, pending)?;
    let stored: std::collections::HashSet<&str> =
        outcome.stored.iter().map(|(_, sop)| sop.as_str()).collect();
    documents.retain_mut(|document| {
        document.stored = stored.contains(document.sop_uid.as_str());
        document.stored
    });
    Ok(Some((documents, outcome.held)))
}

/// The CT series a case's masks were drawn on (the series its prediction was made on), and
/// one segment per lesion mask.
fn mask_segments(
    case: &WorkspaceCase,
    prediction: &Prediction,
    study: &StudyContext,
    masks: &BTreeMap<
        (keyslice_core::findings::Organ, usize),
        keyslice_core::volume::mask::LesionMask,
    >,
) -> Result<(SourceSeries, Vec<Segment>), Error> {
    let options = keyslice_io::LoadOptions {
        series_uid: prediction
            .images
            .as_ref()
            .map(|images| images.series_uid.clone())
            .filter(|uid| !uid.is_empty()),
    };
    let volume = keyslice_io::load_study(&case.volume, &options)?.volume;
    let source = SourceSeries::of(
        &volume,
        &study.frame_of_reference_uid,
        &study.image_class_uid,
    )
    .map_err(|source| publish::PlanError::Masks {
        case_id: case.case_id.clone(),
        source,
    })?;
    let mut segments = Vec::with_capacity(masks.len());
    // A mask the reviewer left as the model found it is the model's; any other, the editor's.
    let from_model = model_masks(prediction);
    for (&(organ, lesion), mask) in masks {
        let dense = mask.to_dense(volume.dims()).map_err(|error| {
            Error::Argument(format!(
                "case {}: the {organ} lesion {} mask: {error}",
                keyslice_core::text::shown(&case.case_id),
                lesion + 1
            ))
        })?;
        let algorithm = if from_model.values().any(|model| model == mask) {
            Algorithm::Automatic(prediction.diagnoser.id.clone())
        } else {
            Algorithm::Semiautomatic("Keyslice mask editor".into())
        };
        segments.push(Segment::lesion(organ, lesion, algorithm, dense));
    }
    Ok((source, segments))
}

/// An accepted case's reviewer (the one recorded, else the one given), corrected findings,
/// lesion masks, and when it was accepted (DICOM date and time).
struct Accepted {
    reviewer: Option<String>,
    findings: keyslice_core::findings::Findings,
    masks:
        BTreeMap<(keyslice_core::findings::Organ, usize), keyslice_core::volume::mask::LesionMask>,
    at: Option<(String, String)>,
}

fn accepted_review(
    workspace: &Workspace,
    case: &WorkspaceCase,
    prediction: &Prediction,
    recorded: Option<&str>,
    given: Option<&str>,
) -> Result<Accepted, Error> {
    // A recorded name that cannot sign is replaced by the given one; else it goes on, to be
    // refused with what is wrong with it.
    let reviewer = recorded
        .filter(|name| publish::is_named(name))
        .or(given)
        .or(recorded);
    let mut review = CaseReview::open(
        &workspace.database_path(),
        &case.case_id,
        reviewer.unwrap_or_default(),
        Some(model_findings(prediction)),
    )
    .map_err(WorkspaceError::from)?;
    review.set_base_masks(model_masks(prediction));
    // Dated when the reviewer accepted it, not when it is sent.
    let at = review
        .log()
        .iter()
        .rev()
        .find(|entry| entry.sets_status(ReviewStatus::Done))
        .and_then(|entry| keyslice_core::date::dicom_from_rfc3339(&entry.at));
    // The record holds what the reviewer set or accepted: the model's box and range leave
    // it when they no longer describe the reviewer's key slice, as in every export.
    let mut findings = review.case().findings.clone();
    keyslice_export::rules::reconcile(
        &mut findings,
        Some(&model_findings(prediction)),
        &review.case().changed,
    );
    Ok(Accepted {
        reviewer: reviewer.map(str::to_string),
        findings,
        masks: review.case().masks.clone(),
        at,
    })
}

/// Documents to store, by (PACS origin, Study Instance UID).
pub type Batches = BTreeMap<(String, String), Vec<Pending>>;

/// Stores each study's documents that its PACS does not hold yet, study by study.
pub fn store_batches(batches: Batches, connection: &Connection) -> Result<StoreOutcome, Error> {
    let mut total = StoreOutcome::default();
    for ((origin, study_uid), documents) in batches {
        let server = connection.server(&DicomWebUrl::parse(&origin)?)?;
        let mut outcome = store_new(&server, &study_uid, documents)?;
        total.stored.append(&mut outcome.stored);
        total.held += outcome.held;
    }
    Ok(total)
}

/// The latest review of each reviewer of each study a URL names, for agreement; with the
/// number of studies.
pub fn stored_reviews(
    url: &str,
    connection: &Connection,
) -> Result<(usize, Vec<agreement::Label>), Error> {
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
    Ok((studies.len(), labels))
}

/// The studies of a search as `pacs query` prints them: a table (with `json`, one JSON
/// object a line), the patient's fields shown as text, never as terminal control.
pub fn write_studies(
    out: &mut dyn Write,
    studies: &[StudySummary],
    server: &str,
    json: bool,
) -> std::io::Result<()> {
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
    for study in studies {
        if json {
            writeln!(out, "{}", serde_json::to_string(study)?)?;
        } else {
            writeln!(
                out,
                "{:<10} {:<14} {:<16} {:<24} {:<10} {:>9}  {:<28} {}",
                keyslice_core::text::shown(&study.date),
                keyslice_core::text::shown(&study.accession),
                keyslice_core::text::shown(&study.patient_id),
                keyslice_core::text::shown_short(&study.patient_name, 24),
                keyslice_core::text::shown(&study.modalities.join(",")),
                study.instances.map_or("–".into(), |n| n.to_string()),
                keyslice_core::text::shown_short(&study.description, 28),
                study.study_uid
            )?;
        }
    }
    if !json {
        writeln!(out, "{} study(ies) on {}", studies.len(), server)?;
    }
    Ok(())
}

impl crate::Outcome for Published {
    fn json(&self) -> String {
        serde_json::json!({
            "documents": self.documents,
            "held": self.held,
            "skipped": self.skipped,
            "failed": self.failed,
        })
        .to_string()
    }

    fn text(&self) -> String {
        let mut text = Vec::new();
        // Writing to memory cannot fail.
        let _ = self.write_text(&mut text);
        String::from_utf8_lossy(&text).trim_end().to_string()
    }
}

impl Published {
    /// What `pacs publish` prints: a line per document and a total.
    pub fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let Self {
            documents,
            held,
            skipped,
            failed,
        } = self;
        for document in documents {
            writeln!(
                out,
                "{:<16} {:<10} {} {}",
                keyslice_core::text::shown(&document.case_id),
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
            out,
            "{} document(s); {held} already on the PACS; {skipped} case(s) without a PACS origin or analysis skipped; {failed} failed",
            documents.len()
        )?;
        Ok(())
    }
}

/// What `pacs results --json` prints.
#[derive(Serialize)]
struct ResultsSummary<'a> {
    study_uid: &'a str,
    ai: Vec<serde_json::Value>,
    reviews: Vec<serde_json::Value>,
    key_images: Vec<serde_json::Value>,
    skipped: &'a [String],
    study_reads: usize,
}

fn result_json(stored: &keyslice_pacs::sr::read::Stored<CaseResult>) -> serde_json::Value {
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

/// A study's Keyslice documents as `pacs results --json` prints them.
pub fn results_json(study: &str, found: &StudyResults) -> serde_json::Value {
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
    serde_json::to_value(summary).unwrap_or_default()
}

/// A study's Keyslice documents as `pacs results` prints them.
pub fn write_results(
    out: &mut dyn Write,
    study: &str,
    found: &StudyResults,
) -> std::io::Result<()> {
    writeln!(out, "study {study}")?;
    for stored in &found.ai {
        let result = &stored.content;
        writeln!(
            out,
            "  AI result {} {} ({}): {}{}",
            keyslice_core::text::shown(&result.algorithm.id),
            keyslice_core::text::shown(&result.algorithm.version),
            keyslice_core::text::shown(&stored.content_date_time),
            keyslice_core::text::shown(&result.summary()),
            // A result out of the model's depth claims no agreement, whatever its figures.
            match (&result.out_of_domain, &result.consistency) {
                (Some(unfamiliar), _) =>
                    format!("; {}", keyslice_core::text::shown(&unfamiliar.sentence())),
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
                keyslice_core::text::person_name(name),
                keyslice_core::text::shown(&stored.content_date_time),
                keyslice_core::text::shown(&stored.content.summary())
            )?;
        }
    }
    for keys in &found.key_images {
        writeln!(
            out,
            "  key images \"{}\": {} image(s) — {}",
            keyslice_core::text::shown(&keys.content.title),
            keys.content.images.len(),
            keyslice_core::text::shown(&keys.content.description)
        )?;
    }
    for skipped in &found.skipped {
        writeln!(out, "  skipped: {}", keyslice_core::text::shown(skipped))?;
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

/// Agreement between reviewers as `pacs agreement` prints it.
pub fn write_agreement(
    out: &mut dyn Write,
    studies: usize,
    labels: &[agreement::Label],
    report: &agreement::AgreementReport,
) -> std::io::Result<()> {
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
            keyslice_core::text::shown(&pair.reviewer_a),
            keyslice_core::text::shown(&pair.reviewer_b),
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
                keyslice_core::text::shown(&disagreement.reviewers.join(" vs ")),
                keyslice_core::text::shown(&disagreement.reasons.join("; "))
            )?;
        }
    }
    Ok(())
}

/// `pacs query`: the studies a URL names, written to `out` as a table (with `json`, one
/// JSON object a line).
pub fn query(
    url: &str,
    connection: &Connection,
    out: &mut dyn Write,
    json: bool,
) -> Result<(), Error> {
    let url = DicomWebUrl::parse(url)?;
    let server = connection.server(&url)?;
    let studies = studies_of(&url, &server)?;
    write_studies(out, &studies, server.name(), json)?;
    Ok(())
}

/// `pacs results`: the Keyslice documents stored for the one study a URL names, written to
/// `out` (with `json`, as one JSON object).
pub fn results(
    url: &str,
    connection: &Connection,
    out: &mut dyn Write,
    json: bool,
) -> Result<(), Error> {
    let url = DicomWebUrl::parse(url)?;
    let study = one_study(&url, "results")?;
    let server = connection.server(&url)?;
    let found = study_results(
        &server,
        study,
        &connection.cache(),
        usize::from(connection.parallel),
    )?;
    if json {
        writeln!(out, "{}", results_json(study, &found))?;
    } else {
        write_results(out, study, &found)?;
    }
    Ok(())
}

/// `pacs agreement`: agreement between the reviewers whose reviews are stored for the
/// studies a URL names (key slices within `slice_tolerance` agree), written to `out`.
pub fn agreement(
    url: &str,
    slice_tolerance: u32,
    connection: &Connection,
    out: &mut dyn Write,
    json: bool,
) -> Result<(), Error> {
    let (studies, labels) = stored_reviews(url, connection)?;
    let report = agreement::agreement(&labels, slice_tolerance);
    if json {
        writeln!(
            out,
            "{}",
            serde_json::to_string(&report).map_err(std::io::Error::from)?
        )?;
    } else {
        write_agreement(out, studies, &labels, &report)?;
    }
    Ok(())
}
