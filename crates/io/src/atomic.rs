//! Writing a small file so that a reader sees the old bytes or the new ones, never a mix,
//! even if the process is killed mid-write: a fresh temporary sibling, synced, renamed over
//! the target.
//!
//! The temporary file is created with `create_new` (`O_CREAT | O_EXCL`), which refuses to
//! open an existing path, so a symbolic link planted at the temporary name cannot redirect
//! the write outside the folder; a leftover from a killed run is removed first (removing a
//! link removes the link, not what it points to).

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Opens the lock file `path` for [`std::fs::File::lock`] or `try_lock`, creating it if
/// needed and never truncating it (its bytes are nobody's data; the lock is the point). The
/// lock goes with the process, so a killed holder leaves the file unlocked.
pub fn open_lock_file(path: &Path) -> std::io::Result<std::fs::File> {
    open_no_follow(
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true),
        path,
    )
}

/// Opens `path` with `options`, never through a symbolic link at `path` itself (a link in a
/// folder above is followed: that is where the user keeps their data). A link there is
/// refused with an error naming it: a workspace's files are its own, and a link planted in
/// their place would make Keyslice write wherever it points.
pub fn open_no_follow(
    options: &mut std::fs::OpenOptions,
    path: &Path,
) -> std::io::Result<std::fs::File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(libc::O_NOFOLLOW);
        options.open(path).map_err(|error| {
            if error.raw_os_error() == Some(libc::ELOOP) {
                link_refused(path)
            } else {
                error
            }
        })
    }
    #[cfg(not(unix))]
    {
        refuse_link(path)?;
        options.open(path)
    }
}

/// Whether `path` (a file or folder) has no write permission for anyone: made read-only by
/// its owner. Read from the permission bits, which say what the owner meant even to an
/// administrator, whom the operating system would let write anyway.
#[must_use]
pub fn unwritable(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        meta.permissions().mode() & 0o222 == 0
    }
    #[cfg(not(unix))]
    {
        meta.permissions().readonly()
    }
}

/// An error when `path` itself is a symbolic link (see [`open_no_follow`]); `Ok` when it is
/// anything else or does not exist.
pub fn refuse_link(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(link_refused(path)),
        _ => Ok(()),
    }
}

fn link_refused(path: &Path) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!(
            "{} is a symbolic link; Keyslice writes only the file itself, never where a link points: replace the link with the file it points to",
            path.display()
        ),
    )
}

/// Distinguishes temporary names of concurrent writes within one process.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` atomically (see the module documentation).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let file_name = path
        .file_name()
        .map(|name| name.to_string_lossy().to_string())
        .unwrap_or_default();
    let temporary = path.with_file_name(format!(
        ".{file_name}.partial-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    if std::fs::symlink_metadata(&temporary).is_ok() {
        std::fs::remove_file(&temporary)?;
    }
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temporary_behind() {
        let folder = tempfile::tempdir().expect("temp dir");
        let path = folder.path().join("manifest.json");
        write_atomically(&path, b"one").expect("first write");
        write_atomically(&path, b"two").expect("second write");
        assert_eq!(std::fs::read(&path).expect("read"), b"two");
        let names: Vec<_> = std::fs::read_dir(folder.path())
            .expect("list")
            .map(|entry| entry.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("manifest.json")]);
    }
}
