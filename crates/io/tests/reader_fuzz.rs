//! The readers under mutated real files: structure-aware mutants of every committed DICOM
//! transfer syntax and NIfTI flavour go through `load_study`, and each must end in a volume
//! or an error that names the file, without a panic, within a memory bound and promptly.
//!
//! Memory is counted by the allocator below: for each input, the most bytes held at once
//! beyond what was held before the call. A loaded volume may take at most twice its own size
//! plus a fixed allowance (the file's bytes held by the parser, one decoded frame, parser
//! tables); a refused input at most the allowance. The per-volume budget is set to 256 MB so
//! a header that claims gigabytes is refused, not served.
//!
//! CI runs `FUZZ_INPUTS` mutants; the longer run is the same test with more, and other seeds:
//! `KEYSLICE_FUZZ_INPUTS=10000 KEYSLICE_FUZZ_SEED=7 cargo test --test reader_fuzz -- --nocapture`.

#![expect(
    unsafe_code,
    reason = "The counting allocator is the one unsafe block: `GlobalAlloc` is an unsafe trait."
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use keyslice_io::{LoadOptions, limits, load_study};
use keyslice_testkit::data;
use keyslice_testkit::mutate::{Format, mutate};

/// Mutants in CI.
const FUZZ_INPUTS: usize = 600;

/// Bytes any input may take beyond twice its volume: parser tables, a decoded frame, buffers.
const ALLOWANCE_BYTES: usize = 48 << 20;

/// The per-volume budget under test.
const BUDGET_BYTES: u64 = 256 << 20;

/// A time no input may reach (a hang, not a speed figure).
const HANG: Duration = Duration::from_mins(1);

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(size: usize) {
    let now = CURRENT.fetch_add(size, Ordering::Relaxed) + size;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every method forwards to the system allocator with the caller's arguments and only
// adds atomic counting; the layout contracts are the caller's, passed on unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            grew(layout.size());
        }
        pointer
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc_zeroed(layout) };
        if !pointer.is_null() {
            grew(layout.size());
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        unsafe { System.dealloc(pointer, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                CURRENT.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The seeds: every committed transfer syntax and NIfTI flavour.
const SEEDS: [(&str, Format, &str); 18] = [
    ("dicom/CT_small.dcm", Format::Dicom, "ct.dcm"),
    ("dicom/JPEG-LL.dcm", Format::Dicom, "jpeg_lossless.dcm"),
    ("dicom/JPGExtended.dcm", Format::Dicom, "jpeg_extended.dcm"),
    (
        "generated/jpeg_baseline.dcm",
        Format::Dicom,
        "jpeg_baseline.dcm",
    ),
    ("dicom/MR_small_RLE.dcm", Format::Dicom, "rle.dcm"),
    ("dicom/MR_small_jp2klossless.dcm", Format::Dicom, "j2k.dcm"),
    (
        "dicom/MR_small_jpeg_ls_lossless.dcm",
        Format::Dicom,
        "jls.dcm",
    ),
    (
        "dicom/MR_small_bigendian.dcm",
        Format::Dicom,
        "big_endian.dcm",
    ),
    ("dicom/MR_small_implicit.dcm", Format::Dicom, "implicit.dcm"),
    ("dicom/image_dfl.dcm", Format::Dicom, "deflated.dcm"),
    (
        "dicom/eCT_Supplemental.dcm",
        Format::Dicom,
        "enhanced_ct.dcm",
    ),
    ("nifti/anatomical.nii", Format::Nifti, "anatomical.nii"),
    (
        "generated/ras_ordered_qform.nii",
        Format::Nifti,
        "qform.nii",
    ),
    (
        "generated/lps_ordered.nii.gz",
        Format::NiftiGz,
        "lps.nii.gz",
    ),
    (
        "generated/nifti2.nii.gz",
        Format::NiftiGz,
        "generated_nifti2.nii.gz",
    ),
    ("generated/big_endian.nii", Format::Nifti, "big_endian.nii"),
    (
        "generated/scaled_float.nii.gz",
        Format::NiftiGz,
        "scaled.nii.gz",
    ),
    (
        "nifti/example_nifti2.nii.gz",
        Format::NiftiGz,
        "nifti2.nii.gz",
    ),
];

#[derive(Default)]
struct Tally {
    loaded: usize,
    refused: usize,
    panics: Vec<String>,
    over_memory: Vec<String>,
    slow: Vec<String>,
    unnamed: Vec<String>,
    peak_bytes: Vec<usize>,
    longest: Duration,
}

/// Copies a failing input into `KEYSLICE_FUZZ_KEEP` (when set), named after its label, to
/// reproduce it with `keyslice info`.
fn keep_for_study(path: &Path, label: &str) {
    if let Some(folder) = std::env::var_os("KEYSLICE_FUZZ_KEEP") {
        let name: String = label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let _ = std::fs::create_dir_all(&folder);
        let _ = std::fs::copy(path, Path::new(&folder).join(name));
    }
}

fn run_one(path: &Path, name: &str, label: &str, tally: &mut Tally) {
    let file_bytes = std::fs::metadata(path).map_or(0, |metadata| metadata.len() as usize);
    let before = CURRENT.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let started = Instant::now();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        load_study(path, &LoadOptions::default())
    }));
    let elapsed = started.elapsed();
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(before);
    tally.longest = tally.longest.max(elapsed);
    if elapsed > HANG {
        tally.slow.push(format!("{label}: {elapsed:?}"));
    }
    let honest = match outcome {
        Err(_) => {
            tally.panics.push(label.to_string());
            keep_for_study(path, label);
            0
        }
        Ok(Ok(study)) => {
            tally.loaded += 1;
            study.volume.voxels().byte_len()
        }
        Ok(Err(error)) => {
            tally.refused += 1;
            let message = error.to_string();
            if !message.contains(name) || error.hint().is_empty() {
                tally.unnamed.push(format!("{label}: {message}"));
            }
            0
        }
    };
    tally.peak_bytes.push(peak);
    if peak > 2 * honest + ALLOWANCE_BYTES + 2 * file_bytes {
        tally.over_memory.push(format!(
            "{label}: {} MB held for a {} MB volume",
            peak >> 20,
            honest >> 20
        ));
        keep_for_study(path, label);
    }
}

#[test]
fn mutated_files_load_or_are_refused_without_panics_or_blowups() {
    limits::set_max_volume_bytes(Some(BUDGET_BYTES));
    let inputs: usize = std::env::var("KEYSLICE_FUZZ_INPUTS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(FUZZ_INPUTS);
    let seed: u64 = std::env::var("KEYSLICE_FUZZ_SEED")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(0x5EED_0001);
    let originals: Vec<Vec<u8>> = SEEDS
        .iter()
        .map(|(relative, _, _)| std::fs::read(data(relative)).expect("fixture is committed"))
        .collect();
    let folder = tempfile::tempdir().expect("temp dir");
    let mut tally = Tally::default();
    for index in 0..inputs {
        let seed_index = index % SEEDS.len();
        let (relative, format, name) = SEEDS[seed_index];
        let mutant = mutate(&originals[seed_index], format, seed, index);
        let path = folder.path().join(name);
        std::fs::write(&path, &mutant).expect("write the mutant");
        run_one(
            &path,
            name,
            &format!("{relative} mutant {index}"),
            &mut tally,
        );
    }
    tally.peak_bytes.sort_unstable();
    let quantile =
        |q: f64| tally.peak_bytes[((tally.peak_bytes.len() - 1) as f64 * q) as usize] >> 10;
    println!(
        "{inputs} inputs: {} loaded, {} refused, {} panics, {} over the memory bound, longest {:?}; peak KiB held: median {}, 99th percentile {}, max {}",
        tally.loaded,
        tally.refused,
        tally.panics.len(),
        tally.over_memory.len(),
        tally.longest,
        quantile(0.5),
        quantile(0.99),
        quantile(1.0)
    );
    limits::set_max_volume_bytes(None);
    assert!(tally.panics.is_empty(), "panics: {:?}", tally.panics);
    assert!(
        tally.over_memory.is_empty(),
        "over memory: {:?}",
        tally.over_memory
    );
    assert!(tally.slow.is_empty(), "hangs: {:?}", tally.slow);
    assert!(
        tally.unnamed.is_empty(),
        "errors without the file: {:?}",
        tally.unnamed
    );
    assert_eq!(tally.loaded + tally.refused, inputs);
    assert!(tally.loaded > 0 && tally.refused > 0, "both outcomes occur");
}
