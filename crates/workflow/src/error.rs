//! The error every use case returns: the typed error of the layer that failed, kept whole as
//! the source, plus the few faults that belong to the use case itself.

use keyslice_io::IoError;

/// A failed use case, as a user sees it: what failed, naming the file, server or field, and
/// (from [`Error::hint`]) one sentence on what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a volume failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// Reading case files for scoring failed.
    #[error(transparent)]
    Cases(#[from] keyslice_io::cases::CasesError),
    /// An input file could not be read.
    #[error("cannot read: {source} ({})", path.display())]
    Input {
        /// The file.
        path: std::path::PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A file or folder could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file or folder.
        path: std::path::PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A CA certificate given to trust cannot be used.
    #[error(transparent)]
    CaCert(#[from] keyslice_io::http::CaCertError),
    /// Inference failed.
    #[error(transparent)]
    Infer(#[from] keyslice_infer::InferError),
    /// A Qwen3-VL checkpoint or its input is wrong.
    #[error(transparent)]
    Vlm(#[from] keyslice_infer::qwen3_vl::VlmError),
    /// Training failed.
    #[error(transparent)]
    Train(#[from] keyslice_train::tiny::TrainError),
    /// Writing phantoms failed.
    #[error(transparent)]
    Phantom(#[from] keyslice_phantom::write::PhantomError),
    #[error(transparent)]
    Workspace(#[from] keyslice_review::workspace::WorkspaceError),
    /// Talking to a PACS, or writing or reading its DICOM documents, failed.
    #[error(transparent)]
    Pacs(keyslice_pacs::PacsError),
    /// A reader study cannot be made, read or recorded.
    #[error(transparent)]
    Study(#[from] keyslice_review::study::StudyError),
    /// A case's documents cannot be planned (an unnamed reviewer, a document not written).
    #[error(transparent)]
    Publish(#[from] keyslice_pacs::publish::PlanError),
    /// Exporting failed (nothing was placed at the output).
    #[error(transparent)]
    Export(#[from] keyslice_export::ExportError),
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
    #[error(transparent)]
    Internal(#[from] keyslice_io::limits::DecoderFailed),
    /// A batch stopped itself (the model server kept failing).
    #[error("{0}")]
    Stopped(String),
    /// Printing the result failed (for example a closed pipe).
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

impl Error {
    /// Whether the command line itself is wrong (a value out of range, a file named that
    /// cannot serve): a usage error, as clap's own are.
    #[must_use]
    pub fn is_usage(&self) -> bool {
        matches!(self, Self::Argument(_) | Self::CaCert(_))
    }

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
            Self::Train(keyslice_train::tiny::TrainError::Export(error)) => {
                error.hint.into()
            }
            Self::Train(_) => "check the --data folder (case folders with ct.nii.gz and segmentations/) or the --from-export folder (a swift or verl export made with --volumes; export again if a file in it is damaged), the --init checkpoint folder (config.json, model.safetensors) for --stage organs, finder, calibrate, rl, domain and evidence, each case's truth.json for --stage rl and evidence, and that --out is writable".into(),
            Self::Argument(_) => "see `keyslice help` for the accepted values".into(),
            Self::PartlyFailed { .. } => "fix or leave out the inputs named above".into(),
            Self::Input { .. } => "check that the file exists and is UTF-8 text".into(),
            Self::CaCert(_) => "give a PEM file holding the CA's certificate (-----BEGIN CERTIFICATE-----)".into(),
            Self::Write { .. } => "check that the folder exists, is writable and has room".into(),
            Self::Window(_) => "the viewer needs a display (X11 or Wayland) and a Vulkan, Metal, DX12 or GL driver; on a server use xvfb-run".into(),
            Self::Output(_) => "check that the output stream or file is writable".into(),
            Self::Stopped(_) => "check the model server (its log, GET …/v1/models), then run the same command again: finished cases are kept and skipped".into(),
            Self::InvalidFile(_) => "fix the file named above, or give another".into(),
            Self::Internal(_) => "the case's files are likely damaged: check them with `keyslice info` and copy them again from the archive".into(),
        }
    }
}

impl From<keyslice_pacs::PacsError> for Error {
    fn from(error: keyslice_pacs::PacsError) -> Self {
        Self::Pacs(error)
    }
}
