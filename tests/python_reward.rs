//! The Python module (`crates/python`, built by maturin into a wheel) computes the reward
//! `keyslice score --per-case` reports, on every case of the fixture set in
//! `tests/data/reward`, through verl's `compute_score` and the ms-swift plugin, and refuses
//! malformed ground truth. Needs Python 3 with maturin and pip; skipped without them unless
//! `KEYSLICE_REQUIRE_PYTHON` is set (CI sets it).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn maturin_available() -> bool {
    let found = Command::new("python3")
        .args(["-m", "maturin", "--version"])
        .output()
        .is_ok_and(|output| output.status.success());
    assert!(
        found || std::env::var_os("KEYSLICE_REQUIRE_PYTHON").is_none(),
        "python3 -m maturin is required (KEYSLICE_REQUIRE_PYTHON is set)"
    );
    found
}

fn run(command: &mut Command) -> String {
    let output = command.output().expect("the command starts");
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).to_string()
}

/// Builds the wheel and installs it into `site`; returns the wheel's path.
fn install_wheel(out: &Path, site: &Path) -> PathBuf {
    run(Command::new("python3")
        .args(["-m", "maturin", "build", "--release", "--manifest-path"])
        .arg(root().join("crates/python/Cargo.toml"))
        .arg("--out")
        .arg(out));
    let wheel = std::fs::read_dir(out)
        .expect("wheel folder")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "whl"))
        .expect("maturin wrote a wheel");
    run(Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--no-deps",
            "--target",
        ])
        .arg(site)
        .arg(&wheel));
    wheel
}

#[test]
fn python_reward_agrees_with_keyslice_score_on_every_fixture_case() {
    if !maturin_available() {
        return;
    }
    let temp = tempfile::tempdir().expect("temp dir");
    let site = temp.path().join("site");
    let wheel = install_wheel(&temp.path().join("wheel"), &site);
    let name = wheel.file_name().and_then(|n| n.to_str()).unwrap_or("");
    assert!(name.starts_with("keyslice_reward-"), "{name}");

    let data = root().join("tests/data/reward");
    let predictions = data.join("predictions.jsonl");
    let truth = data.join("truth.jsonl");
    let rust = run(Command::new(env!("CARGO_BIN_EXE_keyslice"))
        .args(["score", "--per-case", "--pred"])
        .arg(&predictions)
        .arg("--truth")
        .arg(&truth));
    let python = run(Command::new("python3")
        .arg(root().join("tests/python/reward_agreement.py"))
        .arg(&predictions)
        .arg(&truth)
        .env("PYTHONPATH", &site)
        // Only the installed wheel, never the source folder.
        .current_dir(temp.path()));
    let rust: Vec<Value> = rust
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON line"))
        .collect();
    let python: Vec<Value> = python
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON line"))
        .collect();
    assert_eq!(rust.len(), 10, "every fixture case is scored");
    assert_eq!(python.len(), rust.len());
    let term = |value: &Value| value.as_f64().unwrap_or(-1.0);
    // Bit for bit: the same Rust code computes both, and JSON carries f64 exactly.
    let bits = |value: &Value| term(value).to_bits();
    for (ours, theirs) in rust.iter().zip(&python) {
        let case = &ours["case_id"];
        assert_eq!(case, &theirs["case_id"]);
        let rewards = &ours["rewards"];
        let verl = &theirs["verl"];
        assert_eq!(
            bits(&rewards["total"]),
            bits(&verl["score"]),
            "{case}: total"
        );
        assert_eq!(
            bits(&rewards["total"]),
            bits(&theirs["swift"]),
            "{case}: swift"
        );
        for name in ["format", "existence", "attributes", "localization"] {
            assert_eq!(bits(&rewards[name]), bits(&verl[name]), "{case}: {name}");
        }
        assert_eq!(
            bits(&rewards["consistency"]["score"]),
            bits(&verl["consistency"]),
            "{case}: consistency"
        );
        assert_eq!(
            ours["problems"].as_array().map_or(0, Vec::len) as u64,
            verl["problems"].as_u64().unwrap_or(99),
            "{case}: problems"
        );
        let well_formed = ours["faults"].as_array().is_some_and(Vec::is_empty);
        assert_eq!(
            verl["well_formed"].as_f64(),
            Some(if well_formed { 1.0 } else { 0.0 }),
            "{case}: form check"
        );
    }
    // The set covers what the reward must tell apart: a grounded answer scores 1, a
    // hallucinated organ and a refusal score low, and faulty boxes are named.
    let total = |case: &str| {
        rust.iter()
            .find(|line| line["case_id"] == case)
            .map_or(-1.0, |line| term(&line["reward"]))
    };
    assert!((total("r10") - 1.0).abs() < 1e-12);
    assert!(total("r02") < 0.5 && total("r03") < 0.25);
    let problems: Vec<String> = rust
        .iter()
        .flat_map(|line| line["problems"].as_array().cloned().unwrap_or_default())
        .filter_map(|problem| problem.as_str().map(str::to_string))
        .collect();
    for words in [
        "out of order",
        "not on the key slice",
        "no readable corners",
    ] {
        assert!(
            problems.iter().any(|problem| problem.contains(words)),
            "{words}: {problems:?}"
        );
    }
}
