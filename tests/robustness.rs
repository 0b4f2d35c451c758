//! Damaged input never panics: real files cut at many points and with bytes flipped are fed
//! to both readers; each attempt must end in a volume or an error that names the file.

mod common;

use std::path::Path;

use common::data;
use keyslice::io::{LoadOptions, load_study};

/// Mutants per DICOM sample. (Before the length guard in `io::dicom`, a mangled length field
/// made dicom-parser zero-fill up to 4 GiB and cost seconds per file; now it is refused at once.)
const DICOM_MUTANTS: usize = 300;

/// A small deterministic generator (xorshift), so failures reproduce.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, limit: usize) -> usize {
        (self.next() % limit as u64) as usize
    }
}

fn mutants(original: &[u8], seed: u64, count: usize) -> Vec<Vec<u8>> {
    let mut random = Random(seed);
    let mut out = Vec::with_capacity(count);
    for n in 0..count {
        let mut bytes = original.to_vec();
        if n % 2 == 0 {
            // Cut somewhere.
            bytes.truncate(random.below(original.len()));
        } else {
            // Overwrite a few bytes, biased towards the header where the structure lives.
            for _ in 0..=random.below(8) {
                let limit = if random.below(4) == 0 {
                    bytes.len()
                } else {
                    bytes.len().min(1024)
                };
                let at = random.below(limit);
                bytes[at] = random.next() as u8;
            }
        }
        out.push(bytes);
    }
    out
}

/// Feeds `count` mutants of `original`, written as `name`, to the loader.
fn feed(original: &Path, name: &str, seed: u64, count: usize) {
    let bytes = std::fs::read(original).expect("fixture exists");
    let folder = tempfile::tempdir().expect("temp dir");
    let path = folder.path().join(name);
    let mut loaded = 0;
    let mut refused = 0;
    for mutant in mutants(&bytes, seed, count) {
        std::fs::write(&path, &mutant).expect("write");
        let result = load_study(&path, &LoadOptions::default());
        match result {
            Ok(study) => {
                loaded += 1;
                assert!(study.volume.dims().iter().all(|&size| size > 0));
            }
            Err(error) => {
                refused += 1;
                let message = error.to_string();
                assert!(
                    message.contains(name),
                    "error does not name the file: {message}"
                );
                assert!(!error.hint().is_empty());
            }
        }
    }
    assert_eq!(loaded + refused, count);
    assert!(refused > 0, "some mutants must be refused");
}

#[test]
fn mangled_dicom_files_never_panic() {
    feed(
        &data("dicom/CT_small.dcm"),
        "mangled.dcm",
        0x9E37_79B9,
        DICOM_MUTANTS,
    );
}

#[test]
fn mangled_jpeg_ls_files_never_panic() {
    feed(
        &data("dicom/MR_small_jpeg_ls_lossless.dcm"),
        "mangled_jls.dcm",
        0x1234_5678,
        DICOM_MUTANTS,
    );
}

#[test]
fn mangled_nifti_files_never_panic() {
    feed(
        &data("generated/ras_ordered_qform.nii"),
        "mangled.nii",
        0xDEAD_BEEF,
        300,
    );
}

#[test]
fn mangled_gzip_nifti_files_never_panic() {
    feed(
        &data("generated/lps_ordered.nii.gz"),
        "mangled.nii.gz",
        0xC0FF_EE00,
        300,
    );
}

#[test]
fn mangled_nifti2_files_never_panic() {
    feed(
        &data("generated/nifti2.nii.gz"),
        "mangled2.nii.gz",
        0x0BAD_F00D,
        300,
    );
}
