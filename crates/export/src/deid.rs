//! Pseudonyms for exports. Case ids (often folder or file names that carry a patient's name
//! or record number) and DICOM UIDs are replaced by values derived from a per-workspace
//! secret with SHA-256, so the same case gets the same pseudonym in every export of that
//! workspace (splits and re-exports line up) while nobody without the secret can link a
//! pseudonym back. The secret is made once (random, from the operating system) and kept in
//! the workspace folder, which never leaves the machine.
//!
//! What an export carries is chosen, not filtered: answers are written from the corrected
//! findings (never the model's raw text), frames are bare PNG pixels, and reviewers' free-text
//! notes are left out. See "De-identification" in `docs/manual.md` for the DICOM PS3.15 basic
//! profile mapping.

use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

/// The file in the workspace folder holding the export secret.
pub const SECRET_FILE: &str = "export-secret";

/// Derives pseudonyms from a workspace secret.
pub struct Pseudonyms {
    secret: Vec<u8>,
}

impl Pseudonyms {
    /// The workspace's pseudonyms, making its secret on first use. Two processes exporting
    /// the same workspace for the first time at once get the same secret: the new one is
    /// published with a hard link, which fails when a secret is already there (that one is
    /// then read), so a secret is never replaced. A secret that is there but damaged is an
    /// error, never silently replaced (every earlier pseudonym would stop matching).
    pub fn for_workspace(root: &Path) -> std::io::Result<Self> {
        let path = root.join(SECRET_FILE);
        if let Some(secret) = read_secret(&path)? {
            return Ok(Self { secret });
        }
        if keyslice_io::atomic::unwritable(root) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::ReadOnlyFilesystem,
                format!(
                    "{} is read-only and holds no export secret yet (its pseudonyms are made from it): make the folder writable for its first export",
                    root.display()
                ),
            ));
        }
        let mut random = [0u8; 32];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut file| file.read_exact(&mut random))
            .or_else(|_| {
                // No /dev/urandom (Windows): the clock and process id, hashed.
                let seed = format!("{:?}{}", std::time::SystemTime::now(), std::process::id());
                random.copy_from_slice(&Sha256::digest(seed.as_bytes()));
                Ok::<(), std::io::Error>(())
            })?;
        let secret = hex(&random);
        let partial = root.join(format!(
            ".{SECRET_FILE}.partial-{}-{}",
            std::process::id(),
            hex(&random[..4])
        ));
        {
            let mut file = std::fs::File::create(&partial)?;
            std::io::Write::write_all(&mut file, format!("{secret}\n").as_bytes())?;
            file.sync_all()?;
        }
        let published = std::fs::hard_link(&partial, &path);
        let _ = std::fs::remove_file(&partial);
        match published {
            Ok(()) => Ok(Self {
                secret: secret.into_bytes(),
            }),
            // Another export made it first: use that one.
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => read_secret(&path)?
                .map(|secret| Self { secret })
                .ok_or_else(|| {
                    std::io::Error::other(format!("{} vanished while it was made", path.display()))
                }),
            Err(error) => Err(error),
        }
    }

    /// Pseudonyms from a given secret (tests, tools).
    #[must_use]
    pub fn from_secret(secret: &[u8]) -> Self {
        Self {
            secret: secret.to_vec(),
        }
    }

    fn digest(&self, kind: &str, value: &str) -> [u8; 32] {
        let mut hasher = Sha256::new();
        hasher.update(&self.secret);
        hasher.update([0]);
        hasher.update(kind.as_bytes());
        hasher.update([0]);
        hasher.update(value.as_bytes());
        hasher.finalize().into()
    }

    /// `case-` and 12 hex digits.
    #[must_use]
    pub fn case(&self, case_id: &str) -> String {
        let digest = self.digest("case", case_id);
        format!("case-{}", hex(&digest[..6]))
    }

    /// A reviewer's pseudonym (`reviewer-…`): the same reviewer is the same pseudonym in
    /// every export of the workspace, and no name leaves it.
    #[must_use]
    pub fn reviewer(&self, name: &str) -> String {
        let digest = self.digest("reviewer", name);
        format!("reviewer-{}", hex(&digest[..4]))
    }

    /// A DICOM UID under the `2.25.` root (a UUID-derived decimal, PS3.5 B.2), from 120 bits
    /// of the digest.
    #[must_use]
    pub fn uid(&self, uid: &str) -> String {
        let digest = self.digest("uid", uid);
        let mut bytes = [0u8; 16];
        bytes[1..].copy_from_slice(&digest[..15]);
        format!("2.25.{}", u128::from_be_bytes(bytes))
    }
}

/// The secret in `path`: `None` when there is none; an error when it is there but not a
/// secret (shorter than 32 characters: damaged), or a link (it could name any file).
fn read_secret(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    match std::fs::symlink_metadata(path) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
        Ok(meta) if !meta.file_type().is_file() => {
            return Err(std::io::Error::other(format!(
                "{} is not a plain file (a link or a folder); the export secret must be the workspace's own file",
                path.display()
            )));
        }
        Ok(_) => {}
    }
    let text = keyslice_io::limits::read_text_bounded(path, 4096)?;
    let secret = text.trim().as_bytes().to_vec();
    if secret.len() < 32 {
        return Err(std::io::Error::other(format!(
            "{} is damaged ({} characters, a secret has 64): restore it from a backup to keep the pseudonyms of earlier exports, or remove it to start new ones (they will not match earlier exports)",
            path.display(),
            secret.len()
        )));
    }
    Ok(Some(secret))
}

/// Lower-case hex digits of `bytes`.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut text, byte| {
        let _ = write!(text, "{byte:02x}");
        text
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pseudonyms_are_stable_per_secret_and_differ_between_secrets() {
        let a = Pseudonyms::from_secret(b"first secret of thirty-two bytes!");
        let b = Pseudonyms::from_secret(b"other secret of thirty-two bytes!");
        assert_eq!(a.case("DOE_JANE"), a.case("DOE_JANE"));
        assert_ne!(a.case("DOE_JANE"), b.case("DOE_JANE"));
        assert_ne!(a.case("DOE_JANE"), a.case("DOE_JOHN"));
        let uid = a.uid("1.2.826.0.1.3680043.2.1125.1");
        assert!(uid.starts_with("2.25.") && uid.len() <= 64, "{uid}");
        assert!(uid[5..].chars().all(|c| c.is_ascii_digit()));
    }

    #[test]
    fn a_workspace_secret_is_made_once() {
        let folder = tempfile::tempdir().expect("temp dir");
        let first = Pseudonyms::for_workspace(folder.path()).expect("made");
        let again = Pseudonyms::for_workspace(folder.path()).expect("read");
        assert_eq!(first.case("x"), again.case("x"));
        assert!(folder.path().join(SECRET_FILE).is_file());
    }

    #[test]
    fn first_exports_at_once_share_one_secret() {
        for _ in 0..20 {
            let folder = tempfile::tempdir().expect("temp dir");
            let root = folder.path();
            let pseudonyms: Vec<String> = std::thread::scope(|scope| {
                let runs: Vec<_> = (0..4)
                    .map(|_| {
                        scope.spawn(|| Pseudonyms::for_workspace(root).expect("made").case("x"))
                    })
                    .collect();
                runs.into_iter()
                    .map(|run| run.join().expect("ran"))
                    .collect()
            });
            assert!(
                pseudonyms.windows(2).all(|pair| pair[0] == pair[1]),
                "{pseudonyms:?}"
            );
            // No partial file is left behind.
            let left: Vec<_> = std::fs::read_dir(root).expect("listed").collect();
            assert_eq!(left.len(), 1);
        }
    }

    #[test]
    fn a_damaged_or_linked_secret_is_refused_never_replaced() {
        let folder = tempfile::tempdir().expect("temp dir");
        let path = folder.path().join(SECRET_FILE);
        std::fs::write(&path, "abc\n").expect("written");
        let error = Pseudonyms::for_workspace(folder.path())
            .err()
            .expect("refused");
        assert!(error.to_string().contains("is damaged"), "{error}");
        assert_eq!(std::fs::read_to_string(&path).expect("kept"), "abc\n");
        #[cfg(unix)]
        {
            std::fs::remove_file(&path).expect("removed");
            let elsewhere = folder.path().join("elsewhere");
            std::fs::write(&elsewhere, "0".repeat(64)).expect("written");
            std::os::unix::fs::symlink(&elsewhere, &path).expect("linked");
            let error = Pseudonyms::for_workspace(folder.path())
                .err()
                .expect("refused");
            assert!(error.to_string().contains("not a plain file"), "{error}");
        }
    }
}
