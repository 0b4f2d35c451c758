//! `keyslice view [PATH] [BACKEND]`: the viewer window on a study, or on the demo workspace (phantom
//! cases analysed by keyslice-tiny, made on first run) when no path is given.

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use super::backend::BackendArgs;
use crate::app::arrival::Arrival;
use crate::app::{Source, run as run_app};

/// Arguments of `view`.
#[derive(Debug, Args)]
pub struct ViewArgs {
    /// A DICOM file, folder or DICOMDIR, a NIfTI file, a case folder, or a study on a PACS
    /// (`dicomweb+http(s)://HOST/ROOT/studies/STUDY_UID`: its CT is retrieved into the cache
    /// and its stored AI result shown); without one, the demo workspace opens.
    pub path: Option<PathBuf>,
    /// Read a reader study (a folder made by `keyslice study create`) as --reader: its cases
    /// one after another, each showing only what its arm allows.
    #[arg(long, requires = "reader", conflicts_with = "path")]
    pub study: Option<PathBuf>,
    /// Who reads the study.
    #[arg(long, requires = "study")]
    pub reader: Option<String>,
    /// Who reviews: the name shown beside Accept and recorded with every correction and
    /// status (exports carry a pseudonym). Set once: it is kept in the settings for the next
    /// windows.
    #[arg(long, value_name = "NAME")]
    pub reviewer: Option<String>,
    /// The model live analysis (`A`) runs: the embedded one by default, or a server.
    #[command(flatten)]
    pub backend: BackendArgs,
}

/// Runs `view`.
pub fn run(args: &ViewArgs) -> Result<(), CliError> {
    let source = match &args.path {
        None if args.study.is_some() => Source::StudyRead {
            dir: args.study.clone().unwrap_or_default(),
            reader: args.reader.clone().unwrap_or_default(),
        },
        Some(path) if crate::pacs::DicomWebUrl::is_dicomweb(&path.to_string_lossy()) => {
            from_pacs(&path.to_string_lossy())?
        }
        Some(path) => Source::Path(path.clone()),
        None => Source::DemoWorkspace,
    };
    let backend = args.backend.backend()?;
    if let Some(name) = &args.reviewer {
        remember_reviewer(name)?;
    }
    run_app(source, Some(backend)).map_err(|error| CliError::Window(error.to_string()))
}

/// Keeps `name` as the reviewer in the settings, so every later window records under it.
fn remember_reviewer(name: &str) -> Result<(), CliError> {
    use crate::app::settings::{Settings, settings_path};
    let name = name.trim();
    if let Some(reason) = crate::pacs::publish::reviewer_problem("--reviewer", name) {
        return Err(CliError::Argument(format!(
            "{} (e.g. --reviewer \"Dr. Ana Lima\")",
            crate::text::shown(&reason)
        )));
    }
    let Some(path) = settings_path() else {
        return Err(CliError::Argument(
            "--reviewer: no settings folder (set HOME, XDG_CONFIG_HOME or KEYSLICE_CONFIG_DIR)"
                .into(),
        ));
    };
    let mut settings = Settings::load(&path).unwrap_or_default();
    settings.reviewer = Some(name.to_string());
    settings
        .save(&path)
        .map_err(|error| CliError::Argument(format!("--reviewer not kept: {error}")))
}

/// Opens a study of a PACS as it arrives. Before the window opens: the study's stored
/// Keyslice documents (small) and its CT series are looked up. Then, behind the window, the
/// key image of the stored AI result is fetched first, the series streamed into the PACS
/// workspace's cache (made on first use; `keyslice pacs publish` stores its reviews back),
/// and the case added to that workspace; the window shows the images as they come and
/// opens the case, with its review and the stored result, when the retrieve has ended. Each
/// reviewer's stored correction is listed on the terminal.
fn from_pacs(url: &str) -> Result<Source, CliError> {
    use crate::pacs::dicomweb::Target;
    use crate::pacs::dicomweb::retrieve::{ct_series, retrieve_instances, series_folder};
    let parsed = crate::pacs::DicomWebUrl::parse(url)?;
    let Target::Study { study, .. } = &parsed.target else {
        return Err(CliError::Argument(
            "view needs a URL that names one study (…/studies/STUDY_UID); list studies with `keyslice pacs query`".into(),
        ));
    };
    let workspace_dir = std::env::var_os("KEYSLICE_PACS_WORKSPACE").map_or_else(
        || crate::pacs::dicomweb::retrieve::default_cache().join("workspace"),
        std::path::PathBuf::from,
    );
    let cache = workspace_dir.join("dicomweb");
    let server = super::pacs::Connection::default().server(&parsed)?;
    let found = crate::pacs::results::study_results(&server, study, &cache, 6)?;
    let series = ct_series(&server, study)?;
    let folder = series_folder(&cache, &server, study, &series.series_uid);
    let key_sop = found
        .latest_ai()
        .and_then(|stored| stored.content.findings.key_slice.as_ref())
        .and_then(|key| key.sop_instance_uid.clone())
        .filter(|sop| crate::pacs::dicomweb::is_uid(sop));
    let arrival = Arrival::new(
        folder.clone(),
        series
            .instances
            .and_then(|count| usize::try_from(count).ok()),
        key_sop
            .as_ref()
            .map(|sop| folder.join(format!("{sop}.dcm"))),
        format!("study {study} from {}", server.name()),
    );
    let handle = arrival.clone();
    let (url, study) = (url.to_string(), study.clone());
    std::thread::spawn(move || {
        if let Some(sop) = key_sop
            && let Err(error) =
                retrieve_instances(&server, &study, &series.series_uid, &[sop], &cache)
        {
            tracing::debug!(%error, "the key image could not be fetched first");
        }
        let outcome = open_from_pacs(&url, &study, &workspace_dir, &server, &found)
            .map_err(|error| (error.to_string(), error.hint()));
        handle.finish(outcome);
    });
    Ok(Source::Arriving(arrival))
}

/// Retrieves the study into the PACS workspace, makes the stored AI result the case's
/// prediction, lists the stored reviews, and returns the case to open.
fn open_from_pacs(
    url: &str,
    study: &str,
    workspace_dir: &std::path::Path,
    server: &crate::pacs::dicomweb::Server,
    found: &crate::pacs::results::StudyResults,
) -> Result<Source, CliError> {
    use crate::pacs::results::readable_date_time;
    let (added, failed) = super::pacs::add_to_workspace(workspace_dir, url)?;
    if failed > 0 {
        return Err(CliError::PartlyFailed {
            failed,
            total: added + failed,
        });
    }
    let case_id = super::pacs::case_id_of(study);
    let workspace = crate::review::workspace::Workspace::open(workspace_dir)?;
    let predictions = workspace.predictions()?;
    // The stored result is shown unless the case was analysed here since (a prediction of
    // this machine's own wins until the next PACS result).
    let from_pacs = predictions
        .get(&case_id)
        .is_none_or(|prediction| prediction.stored.is_some());
    if from_pacs
        && let Some(prediction) = found.prediction(&case_id, server.name())
        && predictions.get(&case_id) != Some(&prediction)
    {
        // The document's slices must be slices of the study as retrieved.
        let slices = workspace.case(&case_id).map_or(0, |case| {
            std::fs::read_dir(&case.volume).map_or(0, |entries| {
                entries
                    .flatten()
                    .filter(|entry| entry.path().extension().is_some_and(|e| e == "dcm"))
                    .count()
            })
        });
        let outside = prediction
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
            .find(|&index| index as usize >= slices);
        match outside {
            Some(index) => eprintln!(
                "warning: the AI result stored on the PACS names slice {index}, outside this study's {slices} slices: it is not shown"
            ),
            None => workspace.append_prediction(&prediction)?,
        }
    }
    for (reviewer, review) in found.latest_reviews() {
        eprintln!(
            "review by {} stored on the PACS ({}): {}",
            crate::text::person_name(reviewer),
            crate::text::shown(&readable_date_time(&review.content_date_time)),
            crate::text::shown(&review.content.summary())
        );
    }
    eprintln!(
        "case {case_id} in the PACS workspace {} (`keyslice pacs publish` stores reviews back)",
        workspace_dir.display()
    );
    Ok(Source::WorkspaceAt {
        root: workspace_dir.to_path_buf(),
        case_id,
    })
}
