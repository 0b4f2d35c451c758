//! `keyslice pacs query|retrieve|publish|results|agreement`: the hospital's PACS over
//! DICOMweb (see `keyslice_pacs`). URLs are `dicomweb+http(s)://HOST/ROOT[/studies/UID]` or
//! `…/ROOT?PatientID=…`; credentials come from `KEYSLICE_DICOMWEB_TOKEN` or
//! `KEYSLICE_DICOMWEB_USER` / `KEYSLICE_DICOMWEB_PASSWORD`.

use std::path::PathBuf;

use clap::{Args, Subcommand};
pub use keyslice_workflow::pacs::Connection;
use keyslice_workflow::pacs::PublishOptions;

use super::CliError;

/// Arguments of `pacs`.
#[derive(Debug, Args)]
pub struct PacsArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: PacsAction,
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
        } => Ok(keyslice_workflow::pacs::query(
            url,
            connection,
            &mut std::io::stdout().lock(),
            *json,
        )?),
        PacsAction::Retrieve {
            url,
            json,
            connection,
        } => super::print_outcome(
            *json,
            &keyslice_workflow::pacs::retrieve_url(url, connection, &super::Terminal::default())?,
        ),
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
                connection,
                &super::Terminal::default(),
            )?;
            super::print_outcome(*json, &published)?;
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
        } => Ok(keyslice_workflow::pacs::results(
            url,
            connection,
            &mut std::io::stdout().lock(),
            *json,
        )?),
        PacsAction::Agreement {
            url,
            slice_tolerance,
            json,
            connection,
        } => Ok(keyslice_workflow::pacs::agreement(
            url,
            *slice_tolerance,
            connection,
            &mut std::io::stdout().lock(),
            *json,
        )?),
    }
}
