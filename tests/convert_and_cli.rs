//! The `keyslice` binary as a user runs it: `convert` agrees with dcm2niix and round-trips,
//! `info --json` has the documented keys, and bad input gives `error:`/`hint:` lines with
//! exit code 1 (usage errors 2), never a panic.

mod common;

use std::fmt::Write as _;
use std::path::Path;
use std::process::Output;

use common::{data, expected, keyslice, text};
use keyslice::io::dicom::{DicomOptions, load_dicom};
use keyslice::io::nifti::read_nifti;

fn srow(path: &Path) -> [[f64; 4]; 3] {
    let header = nifti::NiftiHeader::from_file(path).expect("the nifti crate reads the header");
    assert_eq!(header.sform_code, 1);
    assert_eq!(header.qform_code, 1);
    [header.srow_x, header.srow_y, header.srow_z].map(|row| row.map(f64::from))
}

#[test]
fn converted_oblique_series_matches_dcm2niix() {
    let folder = tempfile::tempdir().expect("temp dir");
    let out = folder.path().join("oblique.nii");
    let series = data("generated/oblique_series");
    let result = keyslice(&[
        "convert",
        series.to_str().expect("utf-8"),
        out.to_str().expect("utf-8"),
    ]);
    assert!(result.status.success(), "{}", text(&result.stderr));
    assert!(text(&result.stdout).contains("20 × 16 × 6, int16"));

    // Same transform as dcm2niix wrote.
    let ours = srow(&out);
    let theirs = srow(&data("generated/oblique_dcm2niix.nii"));
    for row in 0..3 {
        for column in 0..4 {
            assert!(
                (ours[row][column] - theirs[row][column]).abs() < 1e-4,
                "srow[{row}][{column}]: {} vs dcm2niix {}",
                ours[row][column],
                theirs[row][column]
            );
        }
    }
    let truth = &expected()["oblique_series"]["dcm2niix_affine"];
    assert!((ours[0][3] - truth[0][3].as_f64().expect("number")).abs() < 1e-4);

    // Same voxels in the same storage order: compare the raw data blocks value by value.
    let ours = read_nifti(&out).expect("reads back");
    let theirs = read_nifti(&data("generated/oblique_dcm2niix.nii")).expect("reads dcm2niix");
    assert_eq!(ours.voxels(), theirs.voxels());
    assert!(
        ours.patient_from_voxel()
            .approx_eq(theirs.patient_from_voxel(), 1e-4)
    );
    let raw_ours = std::fs::read(&out).expect("read");
    assert_eq!(raw_ours.len(), 352 + 20 * 16 * 6 * 2);
    // dcm2niix's value at NIfTI voxel (2, 3, 4), scaled as nibabel reads it.
    let index = 352 + 2 * (2 + 20 * (3 + 16 * 4));
    let value = i16::from_le_bytes([raw_ours[index], raw_ours[index + 1]]);
    assert_eq!(
        i64::from(value),
        expected()["oblique_series"]["dcm2niix_value_2_3_4"]
            .as_i64()
            .expect("number")
    );
}

#[test]
fn dicom_to_nifti_and_back_gives_the_loaded_volume() {
    let folder = tempfile::tempdir().expect("temp dir");
    let series = data("generated/oblique_series");
    let loaded = load_dicom(&series, &DicomOptions::default())
        .expect("loads")
        .volume;
    for name in ["round.nii", "round.nii.gz"] {
        let out = folder.path().join(name);
        let result = keyslice(&[
            "convert",
            series.to_str().expect("utf-8"),
            out.to_str().expect("utf-8"),
        ]);
        assert!(result.status.success(), "{}", text(&result.stderr));
        let back = read_nifti(&out).expect("reads back");
        assert_eq!(back.dims(), loaded.dims(), "{name}");
        assert_eq!(back.voxels(), loaded.voxels(), "{name}");
        assert!(
            back.patient_from_voxel()
                .approx_eq(loaded.patient_from_voxel(), 1e-4),
            "{name}: {:?} vs {:?}",
            back.patient_from_voxel(),
            loaded.patient_from_voxel()
        );
    }
    // No temporary file is left beside the outputs.
    let names: Vec<String> = std::fs::read_dir(folder.path())
        .expect("list")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .to_string()
        })
        .collect();
    assert!(
        names.iter().all(|name| !name.contains("partial")),
        "{names:?}"
    );
}

#[test]
fn info_json_has_the_documented_keys() {
    let path = data("dicom/CT_small.dcm");
    let result = keyslice(&["info", path.to_str().expect("utf-8"), "--json"]);
    assert!(result.status.success(), "{}", text(&result.stderr));
    let json: serde_json::Value = serde_json::from_slice(&result.stdout).expect("JSON");
    for key in [
        "dims",
        "spacing_mm",
        "origin_lps_mm",
        "direction_lps",
        "hu",
        "modality",
        "series_uid",
        "series_description",
        "warnings",
        "series",
    ] {
        assert!(json.get(key).is_some(), "missing {key}");
    }
    assert_eq!(json["dims"], serde_json::json!([128, 128, 1]));
    assert_eq!(json["direction_lps"].as_array().expect("array").len(), 9);
    assert_eq!(json["modality"], "CT");
    assert_eq!(json["hu"]["min"], -896.0);
    assert_eq!(json["hu"]["max"], 1167.0);
    assert_eq!(json["series"].as_array().expect("array").len(), 1);
    assert_eq!(json["series"][0]["selected"], true);
}

#[test]
fn info_text_names_axes_and_series() {
    let path = data("generated/oblique_series");
    let result = keyslice(&["info", path.to_str().expect("utf-8")]);
    assert!(result.status.success(), "{}", text(&result.stderr));
    let stdout = text(&result.stdout);
    assert!(stdout.contains("20 × 16 × 6"), "{stdout}");
    assert!(
        stdout.contains("i → L") && stdout.contains("j → P") && stdout.contains("k → S"),
        "{stdout}"
    );
    assert!(stdout.contains("skipped 1 non-DICOM file"), "{stdout}");
}

fn assert_user_error(result: &Output, must_mention: &str) {
    let stderr = text(&result.stderr);
    assert_eq!(result.status.code(), Some(1), "{stderr}");
    let mut lines = stderr.lines();
    let first = lines.next().unwrap_or_default();
    assert!(first.starts_with("error: "), "{stderr}");
    assert!(first.contains(must_mention), "{stderr}");
    assert!(lines.any(|line| line.starts_with("hint: ")), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn missing_path_is_a_user_error() {
    assert_user_error(&keyslice(&["info", "/no/such/study"]), "/no/such/study");
}

#[test]
fn truncated_dicom_is_a_user_error_naming_the_file() {
    let path = data("dicom/MR_truncated.dcm");
    assert_user_error(
        &keyslice(&["info", path.to_str().expect("utf-8")]),
        "MR_truncated.dcm",
    );
}

#[test]
fn garbage_file_is_a_user_error() {
    let folder = tempfile::tempdir().expect("temp dir");
    let path = folder.path().join("scan.dcm");
    std::fs::write(&path, [7u8; 300]).expect("write");
    assert_user_error(
        &keyslice(&["info", path.to_str().expect("utf-8")]),
        "scan.dcm",
    );
    let nii = folder.path().join("scan.nii.gz");
    std::fs::write(&nii, [0x1f, 0x8b, 8, 0, 0, 0]).expect("write");
    assert_user_error(
        &keyslice(&["info", nii.to_str().expect("utf-8")]),
        "scan.nii.gz",
    );
}

#[test]
fn unwritable_output_is_a_user_error() {
    let path = data("dicom/CT_small.dcm");
    let result = keyslice(&[
        "convert",
        path.to_str().expect("utf-8"),
        "/no/such/folder/out.nii",
    ]);
    assert_user_error(&result, "/no/such/folder/out.nii");
}

#[test]
fn usage_errors_exit_with_code_2() {
    assert_eq!(keyslice(&["info"]).status.code(), Some(2));
    assert_eq!(keyslice(&["frobnicate"]).status.code(), Some(2));
    let path = data("dicom/CT_small.dcm");
    let wrong_extension = keyslice(&["convert", path.to_str().expect("utf-8"), "out.txt"]);
    assert_eq!(wrong_extension.status.code(), Some(2));
    assert!(text(&wrong_extension.stderr).contains(".nii or .nii.gz"));
}

#[test]
fn numbers_at_their_limits_are_refused_naming_the_flag_never_a_panic() {
    let path = data("dicom/CT_small.dcm");
    let study = path.to_str().expect("utf-8");
    let folder = tempfile::tempdir().expect("temp dir");
    let out = folder.path().join("phantoms");
    let out = out.to_str().expect("utf-8");
    for (args, flag) in [
        (
            vec![
                "analyze",
                study,
                "--backend",
                "openai",
                "--url",
                "http://127.0.0.1:9",
                "--model",
                "m",
                "--timeout-secs",
                "18446744073709551615",
            ],
            "--timeout-secs",
        ),
        (
            vec![
                "analyze",
                study,
                "--backend",
                "openai",
                "--url",
                "http://127.0.0.1:9",
                "--model",
                "m",
                "--retries",
                "4294967295",
            ],
            "--retries",
        ),
        (
            vec![
                "pacs",
                "query",
                "http://127.0.0.1:9/dicom-web/studies",
                "--retries",
                "4294967295",
            ],
            "--retries",
        ),
        (
            vec![
                "phantom",
                "--out",
                out,
                "--first",
                "4294967295",
                "--cases",
                "3",
            ],
            "--first",
        ),
        (vec!["phantom", "--out", out, "--cases", "0"], "--cases"),
    ] {
        let result = keyslice(&args);
        let stderr = text(&result.stderr);
        assert!(!result.status.success(), "{args:?}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    assert!(!Path::new(out).exists(), "nothing is written");

    // Texts are read within bounds: a device, a FIFO (never opened: that would wait for a
    // writer) and a file larger than any prompt are refused, named.
    let fifo = folder.path().join("prompt.fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    let big = folder.path().join("big-prompt.txt");
    std::fs::write(&big, "x".repeat(2 << 20)).expect("written");
    let mut texts = vec![
        "/dev/zero".to_string(),
        big.to_str().expect("utf-8").to_string(),
    ];
    if made.is_ok_and(|status| status.success()) {
        texts.push(fifo.to_str().expect("utf-8").to_string());
    }
    for text_file in &texts {
        // A report may be larger than a prompt (10 MiB): the big prompt is a report.
        if !text_file.ends_with("big-prompt.txt") {
            let findings = keyslice(&["findings", text_file]);
            assert_user_error(&findings, text_file);
        }
        let prompt = keyslice(&[
            "analyze",
            study,
            "--backend",
            "openai",
            "--url",
            "http://127.0.0.1:9",
            "--model",
            "m",
            "--diagnose-prompt",
            text_file,
        ]);
        assert_user_error(&prompt, text_file);
    }
}

#[test]
fn names_dicom_would_misread_are_refused_naming_the_flag() {
    let path = data("dicom/CT_small.dcm");
    let study = path.to_str().expect("utf-8");
    let folder = tempfile::tempdir().expect("temp dir");
    let out = folder.path().join("series");
    let out = out.to_str().expect("utf-8");
    let long = "A".repeat(65);
    for (flag, value, says) in [
        ("--patient-name", "Ana\\Evil^Q", "backslash"),
        ("--patient-name", long.as_str(), "65 characters"),
        ("--patient-name", "Ana\u{1b}[2J", "control character"),
        ("--patient-id", "P1\\P2", "backslash"),
        ("--accession", "A\u{7}", "control character"),
    ] {
        let result = keyslice(&["convert", study, out, "--dicom", flag, value]);
        let stderr = text(&result.stderr);
        assert!(!result.status.success(), "{flag}");
        assert!(
            stderr.starts_with(&format!("error: {flag}")) && stderr.contains(says),
            "{flag}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    assert!(!Path::new(out).exists(), "nothing is written");
    // A reviewer name is checked the same way before anything is published.
    let published = keyslice(&[
        "pacs",
        "publish",
        folder.path().to_str().expect("utf-8"),
        "--reviewer",
        "Ana\\Evil^Q",
        "--out",
        out,
    ]);
    assert!(!published.status.success());
    assert!(
        text(&published.stderr).contains("--reviewer holds a backslash"),
        "{}",
        text(&published.stderr)
    );
}

#[test]
fn case_folder_with_ct_nii_gz_is_opened() {
    let folder = tempfile::tempdir().expect("temp dir");
    std::fs::copy(
        data("generated/lps_ordered.nii.gz"),
        folder.path().join("ct.nii.gz"),
    )
    .expect("copy");
    let result = keyslice(&["info", folder.path().to_str().expect("utf-8"), "--json"]);
    assert!(result.status.success(), "{}", text(&result.stderr));
    let json: serde_json::Value = serde_json::from_slice(&result.stdout).expect("JSON");
    assert_eq!(json["dims"], serde_json::json!([6, 5, 4]));
    assert_eq!(json["format"], "nifti");
}

/// The `--help` pages of `keyslice ARGS` and of every subcommand below it, depth first in the
/// order the help lists them: (command line, help text).
fn help_pages(args: &[&str], pages: &mut Vec<(String, String)>) {
    let mut with_help = args.to_vec();
    with_help.push("--help");
    let result = keyslice(&with_help);
    assert!(result.status.success(), "{}", text(&result.stderr));
    let help = text(&result.stdout);
    let line = std::iter::once("keyslice")
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    pages.push((line, help.clone()));
    let commands: Vec<String> = help
        .lines()
        .skip_while(|line| line.trim() != "Commands:")
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .filter_map(|line| line.split_whitespace().next().map(str::to_string))
        .filter(|name| name != "help")
        .collect();
    for command in &commands {
        let mut deeper = args.to_vec();
        deeper.push(command);
        help_pages(&deeper, pages);
    }
}

/// `docs/cli.md` is the `--help` text of every command, so the reference cannot drift from
/// the binary (`UPDATE_DOCS=1 cargo test --test convert_and_cli` rewrites it after a
/// deliberate change); and every command has its section in the manual.
#[test]
fn the_command_reference_is_the_help_text() {
    let mut pages = Vec::new();
    help_pages(&[], &mut pages);
    assert!(pages.len() > 10, "{} pages", pages.len());
    let mut reference = String::from(
        "# Command reference\n\nThe `--help` text of every command, as the binary prints it (a \
         test keeps this file\nand the binary in step). The manual, `docs/manual.md`, explains \
         each command with examples.\n",
    );
    for (line, help) in &pages {
        writeln!(
            reference,
            "\n## `{line}`\n\n```text\n{}\n```",
            help.trim_end()
        )
        .expect("a String takes any text");
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cli.md");
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &reference).expect("docs/cli.md written");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == reference,
        "docs/cli.md differs from the binary's --help; rerun with UPDATE_DOCS=1 and review the diff"
    );
    let manual =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/manual.md"))
            .expect("docs/manual.md");
    for (line, _) in pages.iter().skip(1) {
        let command = line.split(' ').nth(1).expect("a subcommand");
        assert!(
            manual.contains(&format!("### `keyslice {command}")),
            "the manual has no section for `keyslice {command}`"
        );
    }
}

/// The bash completion script is valid bash and completes subcommands and flags; the zsh and
/// fish scripts name the commands too.
#[test]
fn shell_completions_complete_the_commands_and_their_flags() {
    let bash = keyslice(&["completions", "bash"]);
    assert!(bash.status.success(), "{}", text(&bash.stderr));
    let script = text(&bash.stdout);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("keyslice.bash");
    std::fs::write(&path, &script).expect("script written");
    // Source the script and ask it what follows `keyslice pacs pub` and `keyslice export --`.
    let complete = |words: &str| {
        let probe = format!(
            "source '{}'; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
             COMP_LINE='{words}'; COMP_POINT=${{#COMP_LINE}}; _keyslice keyslice; \
             printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            path.display()
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &probe])
            .output()
            .expect("bash runs");
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let commands = complete("keyslice pa");
    assert!(commands.lines().any(|word| word == "pacs"), "{commands}");
    let publish = complete("keyslice pacs pub");
    assert!(publish.lines().any(|word| word == "publish"), "{publish}");
    let flags = complete("keyslice export --fo");
    assert!(flags.lines().any(|word| word == "--format"), "{flags}");
    for shell in ["zsh", "fish"] {
        let out = keyslice(&["completions", shell]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(text(&out.stdout).contains("manpages"), "{shell}");
    }
    let unknown = keyslice(&["completions", "cmd.exe"]);
    assert_eq!(unknown.status.code(), Some(2));
}

/// `keyslice manpages` writes a page per command that `man` renders, with the same options
/// as `--help`.
#[test]
fn man_pages_are_written_for_every_command_and_render() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("man1");
    let result = keyslice(&["manpages", "--out", out.to_str().expect("utf-8"), "--json"]);
    assert!(result.status.success(), "{}", text(&result.stderr));
    let summary: serde_json::Value =
        serde_json::from_str(text(&result.stdout).trim()).expect("one JSON line");
    let pages = summary["pages"].as_array().expect("pages");
    let mut help = Vec::new();
    help_pages(&[], &mut help);
    assert_eq!(pages.len(), help.len(), "one page per command");
    for (line, _) in &help {
        let page = out.join(format!("{}.1", line.replace(' ', "-")));
        assert!(page.is_file(), "no page {}", page.display());
    }
    // Rendered as a reader sees it: the publish page names its flags.
    let rendered = std::process::Command::new("man")
        .args(["-l", "-P", "cat"])
        .arg(out.join("keyslice-pacs-publish.1"))
        .env("MANWIDTH", "100")
        .output();
    if let Some(rendered) = rendered.ok().filter(|r| r.status.success()) {
        let page = text(&rendered.stdout);
        assert!(page.contains("--reviewer"), "{page}");
    } else {
        let roff = std::fs::read_to_string(out.join("keyslice-pacs-publish.1")).expect("page");
        assert!(roff.starts_with(".ie") || roff.contains(".TH"), "{roff}");
        assert!(roff.contains("reviewer"), "{roff}");
    }
}
