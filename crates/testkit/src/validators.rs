//! The independent DICOM readers the tests hold Keyslice's documents to: dicom3tools'
//! `dciodvfy` and highdicom (Python). Each runs when installed; with
//! `KEYSLICE_REQUIRE_DICOM_TOOLS` set (as CI sets it), its absence fails the test.

use std::path::Path;
use std::process::Command;

/// Whether the command-line tool `name` is installed.
#[must_use]
pub fn tool(name: &str) -> bool {
    let found = Command::new(name).arg("-h").output().is_ok();
    assert!(
        found || std::env::var_os("KEYSLICE_REQUIRE_DICOM_TOOLS").is_none(),
        "{name} is required (KEYSLICE_REQUIRE_DICOM_TOOLS is set) but not installed"
    );
    found
}

/// dciodvfy's errors for a file (lines starting with `Error`), and all it printed (its
/// warnings too, for the message).
#[must_use]
pub fn dciodvfy_errors(path: &Path) -> (Vec<String>, String) {
    let output = Command::new("dciodvfy")
        .arg(path)
        .output()
        .expect("dciodvfy runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let errors = text
        .lines()
        .filter(|line| line.starts_with("Error"))
        .map(str::to_string)
        .collect();
    (errors, text)
}

/// Whether python3 with highdicom is there.
#[must_use]
pub fn highdicom() -> bool {
    let found = Command::new("python3")
        .args(["-c", "import highdicom"])
        .output()
        .is_ok_and(|output| output.status.success());
    assert!(
        found || std::env::var_os("KEYSLICE_REQUIRE_DICOM_TOOLS").is_none(),
        "python3 with highdicom is required (KEYSLICE_REQUIRE_DICOM_TOOLS is set): pip install highdicom"
    );
    found
}

/// Runs the Python script `tests/pacs/<script>` with `args` and reads the JSON it prints.
#[must_use]
pub fn python_json(script: &str, args: &[&std::ffi::OsStr]) -> serde_json::Value {
    let path = crate::data("../pacs").join(script);
    let output = Command::new("python3")
        .arg(&path)
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "{script} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("the script prints JSON")
}
