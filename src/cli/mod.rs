//! Command-line interface: one file per subcommand, each an argument struct plus a `run`
//! that calls the library and formats the result (a readable table, or JSON with `--json`).
//!
//! Errors reach `main` as [`CliError`], which prints `error: <what failed> (<file>)` and a
//! `hint:` line and exits with code 1; clap's usage errors exit with code 2.

pub mod analyze;
pub mod batch;
pub mod convert;
pub mod eval;
pub mod export;
pub mod findings;
pub mod info;
pub mod pacs;
pub mod phantom;
pub mod score;
pub mod shell;
pub mod study;
pub mod train;
pub mod view;
pub mod vlm;
pub mod workspace;

use clap::{Parser, Subcommand};

/// Keyslice: review AI-written CT tumor reports against the images.
#[derive(Debug, Parser)]
#[command(name = "keyslice", version, about, long_about = None)]
pub struct Cli {
    /// What to do; without a command the viewer opens on the demo workspace.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Describe a CT: geometry, HU range, warnings and the DICOM series found.
    Info(info::InfoArgs),
    /// Convert a CT (DICOM series or NIfTI) to NIfTI-1 (.nii or .nii.gz).
    Convert(convert::ConvertArgs),
    /// Read one report: the findings, the words each came from, and unread sentences.
    Findings(findings::FindingsArgs),
    /// Score predictions against truth with the E-MRL metrics.
    Score(score::ScoreArgs),
    /// Open the viewer on a study or workspace (without a path: the demo workspace).
    View(view::ViewArgs),
    /// Generate synthetic abdominal CT phantoms with masks and ground truth.
    Phantom(phantom::PhantomArgs),
    /// Run the pipeline on one study: report, key slice, local description, consistency.
    Analyze(analyze::AnalyzeArgs),
    /// Train keyslice-tiny on case folders (phantoms or cases with masks).
    Train(train::TrainArgs),
    /// Create, analyse and list review workspaces without the window.
    Workspace(workspace::WorkspaceArgs),
    /// Run a backend over a whole dataset into a predictions JSONL (resumable, parallel).
    Batch(batch::BatchArgs),
    /// Export reviewed cases as de-identified training data (LLaMA-Factory, ms-swift, verl,
    /// key-slice labels).
    Export(export::ExportArgs),
    /// Ask a Qwen3-VL checkpoint about one image or video (greedy): the first thing to run on
    /// a new checkpoint.
    Vlm(vlm::VlmArgs),
    /// The hospital's PACS over DICOMweb: search, retrieve, store results as DICOM SR and Key
    /// Object Selection, read them back, reviewer agreement.
    Pacs(pacs::PacsArgs),
    /// Reader studies: the MRMC analysis of a study's reads (iMRMC's format and tables).
    Study(study::StudyArgs),
    /// Evaluations on case folders with truth: whether the evidence tells made-up findings
    /// from real ones.
    Eval(eval::EvalArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(shell::CompletionsArgs),
    /// Write the man pages (`keyslice.1` and one per subcommand) into a folder.
    Manpages(shell::ManpagesArgs),
}

pub use keyslice_workflow::Error as CliError;

pub use keyslice_workflow::terminal::Terminal;

/// Prints a command's summary: `summary` as one JSON line with `--json`, else `text`.
fn print_summary(
    json: bool,
    summary: &impl serde::Serialize,
    text: impl FnOnce() -> String,
) -> Result<(), CliError> {
    use std::io::Write as _;
    let line = if json {
        serde_json::to_string(summary).map_err(std::io::Error::other)?
    } else {
        text()
    };
    writeln!(std::io::stdout().lock(), "{line}")?;
    Ok(())
}

/// Prints a use case's outcome: as one JSON line with `--json`, else as text.
fn print_outcome(json: bool, outcome: &dyn keyslice_workflow::Outcome) -> Result<(), CliError> {
    use std::io::Write as _;
    let line = if json { outcome.json() } else { outcome.text() };
    writeln!(std::io::stdout().lock(), "{line}")?;
    Ok(())
}

/// Prints lines of text.
fn print_lines(lines: &[String]) -> Result<(), CliError> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    for line in lines {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// Runs a parsed command.
pub fn run(cli: Cli) -> Result<(), CliError> {
    let Some(command) = cli.command else {
        // No command: the viewer on the demo workspace (the README's first command).
        return view::run(&view::ViewArgs {
            path: None,
            study: None,
            reader: None,
            reviewer: None,
            backend: keyslice_workflow::backend::BackendSpec::default(),
        });
    };
    match command {
        Command::Info(args) => info::run(&args),
        Command::Convert(args) => convert::run(&args),
        Command::Findings(args) => findings::run(&args),
        Command::Score(args) => score::run(&args),
        Command::View(args) => view::run(&args),
        Command::Phantom(args) => phantom::run(&args),
        Command::Analyze(args) => analyze::run(&args),
        Command::Train(args) => train::run(&args),
        Command::Workspace(args) => workspace::run(&args),
        Command::Export(args) => export::run(&args),
        Command::Batch(args) => batch::run(&args),
        Command::Vlm(args) => vlm::run(&args),
        Command::Pacs(args) => pacs::run(&args),
        Command::Study(args) => study::run(&args),
        Command::Eval(args) => eval::run(&args),
        Command::Completions(args) => shell::completions(&args),
        Command::Manpages(args) => shell::manpages(&args),
    }
}
