//! Reading limits and panic containment for the file readers.
//!
//! **Memory budget.** One volume may take at most [`max_volume_bytes`] once decoded: by
//! default a quarter of the machine's physical memory, overridden by the environment variable
//! `KEYSLICE_MAX_VOLUME_MB` (mebibytes). Readers compute the decoded size from header fields
//! (dimensions × the 4 bytes of the widest voxel type) and refuse a file over the budget
//! before they allocate anything, so a few kilobytes of header can never ask for gigabytes.
//!
//! **Contained decoders.** The codecs behind dicom-pixeldata (JPEG, JPEG 2000, RLE, JPEG-LS)
//! and the DICOM parser are third-party code that can panic on hostile input. [`contain`]
//! runs such a call so that a panic becomes an error naming the file, and keeps the panic
//! message off the terminal (it is logged at debug level instead).

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};

/// Environment variable that sets the memory budget for one volume, in mebibytes.
pub const MAX_VOLUME_ENV: &str = "KEYSLICE_MAX_VOLUME_MB";

/// Budget when the physical memory cannot be read.
const FALLBACK_BYTES: u64 = 4 << 30;

/// The smallest budget taken from the environment (a typo such as `KEYSLICE_MAX_VOLUME_MB=4`
/// would otherwise refuse every CT).
const MINIMUM_BYTES: u64 = 1 << 20;

/// A budget set by the program itself (0: none), which wins over the environment.
static OVERRIDE_BYTES: AtomicU64 = AtomicU64::new(0);

/// Sets the budget for this process (a command-line option, a test); `None` goes back to
/// the environment and the default.
pub fn set_max_volume_bytes(bytes: Option<u64>) {
    OVERRIDE_BYTES.store(
        bytes.unwrap_or(0).max(u64::from(bytes.is_some())),
        Ordering::Relaxed,
    );
}

/// The most bytes one decoded volume may take: a budget set with [`set_max_volume_bytes`],
/// else `KEYSLICE_MAX_VOLUME_MB` when set to a whole number, else a quarter of the physical
/// memory, else 4 GiB.
#[must_use]
pub fn max_volume_bytes() -> u64 {
    let set = OVERRIDE_BYTES.load(Ordering::Relaxed);
    if set > 0 {
        return set;
    }
    if let Some(mebibytes) = std::env::var(MAX_VOLUME_ENV)
        .ok()
        .and_then(|value| value.trim().parse::<u64>().ok())
    {
        return mebibytes.saturating_mul(1 << 20).max(MINIMUM_BYTES);
    }
    physical_memory_bytes().map_or(FALLBACK_BYTES, |total| total / 4)
}

/// `MemTotal` from `/proc/meminfo` (Linux); `None` elsewhere.
fn physical_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kibibytes: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kibibytes.saturating_mul(1024))
}

/// Opens `path` for reading when it is a regular file; a FIFO, a device or a folder is refused
/// before it is opened (opening a FIFO blocks until something writes to it, and a device or a
/// hung pipe never ends), with an error that says so.
pub fn open_regular(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    if !std::fs::metadata(path)?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (a folder, a FIFO or a device): give an image file",
        ));
    }
    std::fs::File::open(path)
}

/// Reads the text file `path` whole when it is a regular file of at most `max_bytes`: a FIFO,
/// a device or a folder is refused before it is opened (opening a FIFO waits for a writer),
/// and a larger file after `max_bytes + 1` bytes, so `/dev/zero` or an endless pipe never
/// fills the memory. The error says which and what the limit is.
pub fn read_text_bounded(path: &std::path::Path, max_bytes: u64) -> std::io::Result<String> {
    use std::io::Read as _;
    let metadata = std::fs::metadata(path)?;
    if !metadata.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (a folder, a FIFO or a device): give a text file",
        ));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "larger than {} KiB, more than such a text holds",
                max_bytes >> 10
            ),
        ));
    }
    String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// The bytes a volume of `dims` voxels takes at `bytes_per_voxel`, `None` on overflow.
#[must_use]
pub fn volume_bytes(dims: [u64; 3], bytes_per_voxel: u64) -> Option<u64> {
    dims.iter()
        .try_fold(bytes_per_voxel, |acc, &size| acc.checked_mul(size))
}

/// A volume larger than one volume may be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VolumeTooLarge {
    /// Over the budget for one volume.
    #[error(
        "a volume of {} × {} × {} voxels needs {} MB once decoded, over the {} MB budget for one volume ({MAX_VOLUME_ENV})",
        dims[0], dims[1], dims[2], needed.div_ceil(1 << 20), budget >> 20
    )]
    OverBudget {
        /// Its voxels along x, y, z.
        dims: [u64; 3],
        /// Bytes it needs.
        needed: u64,
        /// Bytes one volume may take.
        budget: u64,
    },
    /// Its size does not fit in memory's addresses.
    #[error("a volume of {} × {} × {} voxels is too large to address", dims[0], dims[1], dims[2])]
    Unaddressable {
        /// Its voxels along x, y, z.
        dims: [u64; 3],
    },
}

/// An error when `needed` bytes exceed the budget; it says by how much and how to raise it.
pub fn check_volume_bytes(needed: Option<u64>, dims: [u64; 3]) -> Result<(), VolumeTooLarge> {
    let budget = max_volume_bytes();
    match needed {
        Some(needed) if needed <= budget => Ok(()),
        Some(needed) => Err(VolumeTooLarge::OverBudget {
            dims,
            needed,
            budget,
        }),
        None => Err(VolumeTooLarge::Unaddressable { dims }),
    }
}

/// Third-party code that panicked, with the panic's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Panicked {
    /// The panic's message.
    pub message: String,
}

/// A decoder that stopped (panicked) on malformed data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the decoder failed on malformed data ({})", .0.message)]
pub struct DecoderFailed(pub Panicked);

thread_local! {
    /// Set while [`contain`] runs on this thread: the panic hook stays quiet.
    static CONTAINED: Cell<bool> = const { Cell::new(false) };
}

static QUIET_HOOK: Once = Once::new();

/// Installs (once) a panic hook that logs panics inside [`contain`] at debug level instead of
/// printing them, and leaves every other panic to the hook that was there before.
fn install_quiet_hook() {
    QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CONTAINED.with(Cell::get) {
                tracing::debug!("contained panic in a decoder: {info}");
            } else {
                previous(info);
            }
        }));
    });
}

/// Runs `work`, turning a panic into `Err` with its message. Use it around third-party
/// decoders only; Keyslice's own code reports errors as values.
pub fn contain<T>(work: impl FnOnce() -> T) -> Result<T, DecoderFailed> {
    catch_quietly(work).map_err(DecoderFailed)
}

/// Runs `work`, turning a panic into `Err` with the panic's message alone, printing nothing:
/// for third-party code that panics where it should return an error (a library that is
/// missing at run time, say).
pub fn catch_quietly<T>(work: impl FnOnce() -> T) -> Result<T, Panicked> {
    install_quiet_hook();
    let was = CONTAINED.with(|flag| flag.replace(true));
    let result = catch_unwind(AssertUnwindSafe(work));
    CONTAINED.with(|flag| flag.set(was));
    result.map_err(|payload| Panicked {
        message: payload
            .downcast_ref::<&str>()
            .map(ToString::to_string)
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_decoder_becomes_an_error() {
        let result: Result<u8, DecoderFailed> = contain(|| panic!("index out of range"));
        let error = result.expect_err("panic contained");
        assert_eq!(error.0.message, "index out of range");
        assert_eq!(contain(|| 7), Ok(7));
    }

    #[test]
    fn sizes_over_the_budget_are_refused_before_allocating() {
        let dims = [512, 512, 2_147_483_647];
        let error = check_volume_bytes(volume_bytes(dims, 4), dims).expect_err("too large");
        assert!(
            matches!(error, VolumeTooLarge::OverBudget { .. }),
            "{error}"
        );
        assert!(error.to_string().contains(MAX_VOLUME_ENV), "{error}");
        assert!(check_volume_bytes(volume_bytes([64, 64, 1], 4), [64, 64, 1]).is_ok());
        let huge = [u64::MAX, 2, 2];
        assert!(volume_bytes(huge, 4).is_none());
        assert!(check_volume_bytes(None, huge).is_err());
    }
}
