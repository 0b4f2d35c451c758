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
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
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
