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
    /// The workspace's pseudonyms, making its secret on first use.
    pub fn for_workspace(root: &Path) -> std::io::Result<Self> {
        let path = root.join(SECRET_FILE);
        if let Ok(text) = std::fs::read_to_string(&path) {
            let secret = text.trim().as_bytes().to_vec();
            if secret.len() >= 32 {
                return Ok(Self { secret });
            }
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
        let hex = hex(&random);
        let partial = root.join(format!(".{SECRET_FILE}.partial-{}", std::process::id()));
        std::fs::write(&partial, format!("{hex}\n"))?;
        std::fs::rename(&partial, &path)?;
        Ok(Self {
            secret: hex.into_bytes(),
        })
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
}
