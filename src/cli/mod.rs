//! Command-line interface: one file per subcommand, each an argument struct plus a `run`
//! that calls the library and formats the result (a readable table, or JSON with `--json`).
//!
//! Errors reach `main` as [`CliError`], which prints `error: <what failed> (<file>)` and a
//! `hint:` line and exits with code 1; clap's usage errors exit with code 2.

pub mod analyze;
pub mod backend;
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

use crate::io::IoError;

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

/// A failed command, as a user sees it.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Reading or writing a volume failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// Reading case files for scoring failed.
    #[error(transparent)]
    Cases(#[from] crate::io::cases::CasesError),
    /// An input file could not be read.
    #[error("cannot read: {source} ({})", path.display())]
    Input {
        /// The file.
        path: std::path::PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// Inference failed.
    #[error(transparent)]
    Infer(#[from] crate::infer::InferError),
    /// A Qwen3-VL checkpoint or its input is wrong.
    #[error(transparent)]
    Vlm(#[from] crate::infer::qwen3_vl::VlmError),
    /// Training failed.
    #[error(transparent)]
    Train(#[from] crate::train::tiny::TrainError),
    /// Writing phantoms failed.
    #[error(transparent)]
    Phantom(#[from] crate::phantom::write::PhantomError),
    #[error(transparent)]
    Workspace(#[from] crate::review::workspace::WorkspaceError),
    /// Talking to a PACS, or writing or reading its DICOM documents, failed.
    #[error(transparent)]
    Pacs(crate::pacs::PacsError),
    /// A reader study cannot be made, read or recorded.
    #[error(transparent)]
    Study(#[from] crate::review::study::StudyError),
    /// A case's documents cannot be planned (an unnamed reviewer, a document not written).
    #[error(transparent)]
    Publish(#[from] crate::pacs::publish::PlanError),
    /// Exporting failed (nothing was placed at the output).
    #[error(transparent)]
    Export(#[from] crate::export::ExportError),
    /// Some of several inputs failed (each was reported as it failed).
    #[error("{failed} of {total} inputs could not be processed (see above); the others were")]
    PartlyFailed {
        /// How many failed.
        failed: usize,
        /// How many were given.
        total: usize,
    },
    /// An argument is out of range.
    #[error("{0}")]
    Argument(String),
    /// The viewer window could not be opened.
    #[error("cannot open the viewer window: {0}")]
    Window(String),
    /// A file given on the command line cannot be used (its own content is wrong, not the
    /// command line).
    #[error("{0}")]
    InvalidFile(String),
    /// A case failed inside third-party code (a codec or model) that stopped on bad data.
    #[error("{0}")]
    Internal(String),
    /// A batch stopped itself (the model server kept failing).
    #[error("{0}")]
    Stopped(String),
    /// Printing the result failed (for example a closed pipe).
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

impl CliError {
    /// One sentence on what to do.
    #[must_use]
    pub fn hint(&self) -> String {
        match self {
            Self::Io(error) => error.hint(),
            Self::Cases(error) => error.hint().into(),
            Self::Phantom(error) => error.hint().into(),
            Self::Workspace(error) => error.hint().into(),
            Self::Export(error) => error.hint().into(),
            Self::Pacs(error) => error.hint().into(),
            Self::Publish(error) => error.hint().into(),
            Self::Study(error) => error.hint().into(),
            Self::Infer(error) => error.hint().into(),
            Self::Vlm(error) => error.hint().into(),
            Self::Train(crate::train::tiny::TrainError::Export(error)) => {
                error.hint.into()
            }
            Self::Train(_) => "check the --data folder (case folders with ct.nii.gz and segmentations/) or the --from-export folder (a swift or verl export made with --volumes; export again if a file in it is damaged), the --init checkpoint folder (config.json, model.safetensors) for --stage organs, finder, calibrate, rl, domain and evidence, each case's truth.json for --stage rl and evidence, and that --out is writable".into(),
            Self::Argument(_) => "see `keyslice help` for the accepted values".into(),
            Self::PartlyFailed { .. } => "fix or leave out the inputs named above".into(),
            Self::Input { .. } => "check that the file exists and is UTF-8 text".into(),
            Self::Window(_) => "the viewer needs a display (X11 or Wayland) and a Vulkan, Metal, DX12 or GL driver; on a server use xvfb-run".into(),
            Self::Output(_) => "check that the output stream or file is writable".into(),
            Self::Stopped(_) => "check the model server (its log, GET …/v1/models), then run the same command again: finished cases are kept and skipped".into(),
            Self::InvalidFile(_) => "fix the file named above, or give another".into(),
            Self::Internal(_) => "the case's files are likely damaged: check them with `keyslice info` and copy them again from the archive".into(),
        }
    }
}

/// Model text made safe for a terminal: its lines, every control character other than
/// newline and tab (escape sequences that recolour, move the cursor or retitle the window;
/// bidirectional controls that reorder a line) shown as `�`.
#[must_use]
pub fn terminal_text(text: &str) -> String {
    keyslice_core::text::shown_lines(text)
}

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

/// Runs a parsed command.
pub fn run(cli: Cli) -> Result<(), CliError> {
    let Some(command) = cli.command else {
        // No command: the viewer on the demo workspace (the README's first command).
        return view::run(&view::ViewArgs {
            path: None,
            study: None,
            reader: None,
            reviewer: None,
            backend: backend::BackendArgs::default(),
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

#[cfg(test)]
mod tests {
    use super::terminal_text;

    #[test]
    fn model_text_cannot_drive_the_terminal() {
        let answer = "Liver: no tumor.\u{1b}]0;pwned\u{7}\n\u{1b}[2JKey slice: 4\u{8}\tok";
        let shown = terminal_text(answer);
        assert!(
            !shown
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t')
        );
        assert_eq!(shown.lines().count(), 2, "newlines stay");
        assert!(shown.starts_with("Liver: no tumor.\u{FFFD}]0;pwned\u{FFFD}"));
        // A bidirectional override cannot reorder what follows it on screen.
        assert_eq!(
            terminal_text("Liver: \u{202e}romut on"),
            "Liver: \u{FFFD}romut on"
        );
    }
}
