//! The PACS path against a real Orthanc with its DICOMweb plugin, started here on a free port
//! with a temporary storage folder: a phantom CT stored with STOW-RS, found with QIDO-RS,
//! retrieved into a workspace, analysed, its AI result stored as SR + KOS and read back, two
//! reviewers' corrections stored from two machines and compared; and the faults a hospital
//! network produces (wrong credentials, unknown study, no CT, a server that is down, slow,
//! failing or cuts its answer).
//!
//! Orthanc runs when installed (Debian packages `orthanc` and `orthanc-dicomweb`); CI
//! installs it and sets `KEYSLICE_REQUIRE_PACS=1`, which makes its absence a failure.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{data, text};
use keyslice::findings::{Organ, TumorPresence};
use keyslice::pacs::DicomWebUrl;
use keyslice::pacs::dicomweb::{Server, stow};
use keyslice::pacs::sr::StudyContext;
use keyslice::review::ReviewStatus;
use keyslice::review::case::{CaseReview, model_findings};
use keyslice::review::workspace::Workspace;

const USER: &str = "alice";
const PASSWORD: &str = "wonder-land";

/// A running Orthanc, stopped when dropped.
struct Orthanc {
    child: Child,
    port: u16,
    _storage: tempfile::TempDir,
}

impl Drop for Orthanc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port")
}

impl Orthanc {
    /// Starts Orthanc with DICOMweb and basic authentication; `None` when it is not installed
    /// (and `KEYSLICE_REQUIRE_PACS` is not set).
    fn start() -> Option<Self> {
        let binary = std::env::var_os("KEYSLICE_ORTHANC")
            .map_or_else(|| PathBuf::from("/usr/sbin/Orthanc"), PathBuf::from);
        let plugin = std::env::var_os("KEYSLICE_ORTHANC_DICOMWEB").map_or_else(
            || PathBuf::from("/usr/share/orthanc/plugins/libOrthancDicomWeb.so"),
            PathBuf::from,
        );
        if !binary.is_file() || !plugin.is_file() {
            assert!(
                std::env::var_os("KEYSLICE_REQUIRE_PACS").is_none(),
                "Orthanc with DICOMweb is required (KEYSLICE_REQUIRE_PACS is set) but {} or {} is missing: apt-get install orthanc orthanc-dicomweb",
                binary.display(),
                plugin.display()
            );
            eprintln!("skipped: Orthanc is not installed");
            return None;
        }
        let storage = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let config = serde_json::json!({
            "Name": "KeysliceTest",
            "StorageDirectory": storage.path().join("db"),
            "IndexDirectory": storage.path().join("db"),
            "HttpPort": port,
            "DicomServerEnabled": false,
            "RemoteAccessAllowed": false,
            "AuthenticationEnabled": true,
            "RegisteredUsers": { USER: PASSWORD },
            "Plugins": [plugin],
            "DicomWeb": { "Enable": true, "Root": "/dicom-web/" },
        });
        let config_path = storage.path().join("orthanc.json");
        std::fs::write(&config_path, config.to_string()).expect("config written");
        let child = Command::new(&binary)
            .arg(&config_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("Orthanc starts");
        let orthanc = Self {
            child,
            port,
            _storage: storage,
        };
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "Orthanc did not listen on port {port} within 30 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(orthanc)
    }

    fn url(&self, rest: &str) -> String {
        format!("dicomweb+http://127.0.0.1:{}/dicom-web{rest}", self.port)
    }

    fn server(&self) -> Server {
        let mut url = DicomWebUrl::parse(&self.url("")).expect("URL parses");
        url.auth = keyslice::pacs::dicomweb::Auth::Basic {
            user: USER.into(),
            password: PASSWORD.into(),
        };
        Server::new(&url)
    }

    /// Stores every file of `folder` with STOW-RS; returns the study UID.
    fn store_folder(&self, folder: &Path) -> String {
        let study = StudyContext::from_folder(folder).expect("a DICOM folder");
        let mut files: Vec<PathBuf> = std::fs::read_dir(folder)
            .expect("folder")
            .map(|entry| entry.expect("entry").path())
            .collect();
        files.sort();
        let objects: Vec<Vec<u8>> = files
            .iter()
            .map(|f| std::fs::read(f).expect("read"))
            .collect();
        let stored = stow::store(&self.server(), &study.study_uid, &objects).expect("stored");
        assert_eq!(stored.accepted.len(), objects.len());
        study.study_uid
    }
}

/// The binary with the test's credentials in its environment.
fn run(args: &[&str]) -> Output {
    run_with(
        args,
        &[
            ("KEYSLICE_DICOMWEB_USER", USER),
            ("KEYSLICE_DICOMWEB_PASSWORD", PASSWORD),
        ],
    )
}

fn run_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_keyslice"));
    command
        .args(args)
        .env_remove("KEYSLICE_DICOMWEB_TOKEN")
        .env_remove("KEYSLICE_DICOMWEB_USER")
        .env_remove("KEYSLICE_DICOMWEB_PASSWORD");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("the binary runs")
}

/// `pacs retrieve URL --cache CACHE --json [MORE]`: its one JSON line, and its stderr.
fn retrieve_json(url: &str, cache: &Path, more: &[&str]) -> (serde_json::Value, String) {
    let mut args = vec!["pacs", "retrieve", url, "--cache", s(cache), "--json"];
    args.extend_from_slice(more);
    let out = run(&args);
    let summary = serde_json::from_str(ok(&out).trim()).expect("--json prints one JSON line");
    (summary, text(&out.stderr))
}

fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "stdout: {}\nstderr: {}",
        text(&output.stdout),
        text(&output.stderr)
    );
    text(&output.stdout)
}

fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// A phantom CT written as a DICOM series in `dir/dicom`.
fn phantom_series(dir: &Path, seed: &str, patient_id: &str) -> PathBuf {
    let phantoms = dir.join("phantoms");
    ok(&run(&[
        "phantom",
        "--out",
        s(&phantoms),
        "--cases",
        "1",
        "--seed",
        seed,
        "--matrix",
        "128",
    ]));
    let ct = phantoms.join(format!("PHANTOM_{seed}_0000/ct.nii.gz"));
    let series = dir.join(format!("dicom-{patient_id}"));
    ok(&run(&[
        "convert",
        s(&ct),
        s(&series),
        "--dicom",
        "--patient-id",
        patient_id,
        "--patient-name",
        "Phantom^Test",
        "--accession",
        &format!("A{patient_id}"),
    ]));
    series
}

/// dciodvfy's error lines for a file (none when dicom3tools is not installed and not
/// required).
fn dciodvfy_errors(path: &Path) -> Vec<String> {
    let Ok(output) = Command::new("dciodvfy").arg(path).output() else {
        assert!(
            std::env::var_os("KEYSLICE_REQUIRE_DICOM_TOOLS").is_none(),
            "dciodvfy is required (KEYSLICE_REQUIRE_DICOM_TOOLS is set)"
        );
        return Vec::new();
    };
    format!("{}{}", text(&output.stdout), text(&output.stderr))
        .lines()
        .filter(|line| line.starts_with("Error"))
        .map(str::to_string)
        .collect()
}

/// One reviewer on one machine accepts the case after `edit`.
fn review(ws: &Path, reviewer: &str, edit: impl FnOnce(&mut CaseReview)) {
    let workspace = Workspace::open(ws).expect("workspace");
    let case = &workspace.manifest.cases[0];
    let predictions = workspace.predictions().expect("predictions");
    let prediction = predictions.get(&case.case_id).expect("analysed");
    let mut review = CaseReview::open(
        &workspace.database_path(),
        &case.case_id,
        reviewer,
        Some(model_findings(prediction)),
    )
    .expect("review opens");
    edit(&mut review);
    review.set_status(ReviewStatus::Done).expect("accepted");
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "the whole loop, step by step, as a department runs it"
)]
fn query_retrieve_analyse_store_and_read_back_with_two_reviewers() {
    let Some(orthanc) = Orthanc::start() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let series = phantom_series(dir.path(), "1", "PH1");
    let study_uid = orthanc.store_folder(&series);

    // Query: the study is found by patient and modality.
    let query = orthanc.url("?PatientID=PH1&ModalitiesInStudy=CT");
    let listed = ok(&run(&["pacs", "query", &query, "--json"]));
    let studies: Vec<serde_json::Value> = listed
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON line"))
        .collect();
    assert_eq!(studies.len(), 1, "{listed}");
    assert_eq!(studies[0]["study_uid"], study_uid.as_str());
    assert_eq!(studies[0]["accession"], "APH1");

    // Machine 1: a worklist from the PACS, analysed, results stored.
    let ws1 = dir.path().join("ws1");
    let created = ok(&run(&["workspace", "create", s(&ws1), &query]));
    assert!(created.starts_with("1 case(s) added"), "{created}");
    let workspace = Workspace::open(&ws1).expect("workspace");
    let case = workspace.manifest.cases[0].clone();
    assert_eq!(
        case.origin.as_deref(),
        Some(orthanc.url(&format!("/studies/{study_uid}")).as_str())
    );
    let cached = std::fs::read_dir(&case.volume)
        .expect("series folder")
        .count();
    assert_eq!(cached, std::fs::read_dir(&series).expect("series").count());
    ok(&run(&["workspace", "analyze", s(&ws1)]));
    let prediction = workspace
        .predictions()
        .expect("predictions")
        .get(&case.case_id)
        .cloned()
        .expect("analysed");
    let key_sop = prediction
        .key_slice
        .as_ref()
        .and_then(|key| key.sop_instance_uid.clone())
        .expect("the phantom's key slice is a DICOM instance");

    let files = dir.path().join("published");
    let published = ok(&run(&["pacs", "publish", s(&ws1), "--out", s(&files)]));
    assert!(published.contains("ai-result  stored"), "{published}");
    assert!(published.contains("key-images stored"), "{published}");
    let mut lesions_drawn = 0;
    for entry in std::fs::read_dir(&files).expect("files") {
        let path = entry.expect("entry").path();
        let errors = dciodvfy_errors(&path);
        assert!(errors.is_empty(), "{}: {errors:?}", path.display());
        lesions_drawn += drawn_groups(&path)
            .iter()
            .filter(|label| label.contains(" lesion "))
            .count();
    }
    assert!(
        lesions_drawn > 0,
        "the model's lesions are drawn on their images"
    );
    // Nothing new: nothing sent again.
    let again = ok(&run(&["pacs", "publish", s(&ws1)]));
    assert!(again.starts_with("0 document(s)"), "{again}");

    // Read back: the AI result says what the prediction said; the KOS points at its key slice.
    let study_url = orthanc.url(&format!("/studies/{study_uid}"));
    let cache = dir.path().join("cache");
    let stored_results = || -> serde_json::Value {
        let printed = ok(&run(&[
            "pacs",
            "results",
            &study_url,
            "--json",
            "--cache",
            s(&cache),
        ]));
        serde_json::from_str(&printed).expect("JSON")
    };
    let results = stored_results();
    assert_eq!(results["ai"].as_array().map(Vec::len), Some(1), "{results}");
    let ai = &results["ai"][0];
    let mut expected = model_findings(&prediction);
    if let Some(slice_box) = expected.slice_box.as_mut() {
        slice_box.mm = None; // the SR carries the box as pixels on the key slice
    }
    let expected = serde_json::to_value(expected).expect("JSON");
    assert_eq!(ai["findings"], expected, "{results}");
    assert_eq!(ai["algorithm"]["id"], prediction.diagnoser.id.as_str());
    // The SR carries the case's consistency (its weakest finding's), its components and
    // each finding's own standing.
    assert_eq!(
        ai["consistency"],
        serde_json::to_value(&prediction.consistency).expect("JSON")
    );
    assert_eq!(results["key_images"][0]["title"], "Of Interest");
    assert_eq!(results["key_images"][0]["images"][0], key_sop.as_str());

    // Reviewer Ana on machine 1 says the liver has no tumor.
    review(&ws1, "Ana", |review| {
        review
            .set("liver.tumor", serde_json::json!("no"))
            .expect("edit");
    });
    // Publish killed at moments from before its first request to after its store: the run
    // that finishes stores the review once, whatever the killed ones had sent.
    for delay_ms in [5, 30, 60, 120, 250, 500] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_keyslice"))
            .args(["pacs", "publish", s(&ws1)])
            .env("KEYSLICE_DICOMWEB_USER", USER)
            .env("KEYSLICE_DICOMWEB_PASSWORD", PASSWORD)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("publish starts");
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
    }
    let published = ok(&run(&["pacs", "publish", s(&ws1)]));
    assert!(!published.contains("ai-result"), "{published}");
    assert!(
        published.contains("review     stored") || published.contains("4 already on the PACS"),
        "{published}"
    );
    // Nothing new since: everything is recognised on the PACS, without any local record.
    let again = ok(&run(&["pacs", "publish", s(&ws1)]));
    assert!(
        again.starts_with("0 document(s); 4 already on the PACS"),
        "{again}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(ok(&run(&["pacs", "publish", s(&ws1), "--json"])).trim())
            .expect("--json prints one JSON line");
    // The AI result, its key images, Ana's review and the lesion masks the model found,
    // which her accepted review keeps.
    assert_eq!(summary["held"], 4, "{summary}");
    assert_eq!(summary["documents"].as_array().map(Vec::len), Some(0));

    // Machine 2: the same worklist, reviewer Ben moves the key slice 12 slices; the AI's
    // result is on the PACS already and is not stored twice.
    let ws2 = dir.path().join("ws2");
    ok(&run(&["workspace", "create", s(&ws2), &query]));
    ok(&run(&["workspace", "analyze", s(&ws2)]));
    let moved = prediction.key_slice.as_ref().map_or(0, |key| key.index) + 12;
    // Accepted where nobody set a reviewer name: a reviewer SR is verified by name, so the
    // case is refused until someone is named, and nothing of it is stored.
    review(&ws2, "reviewer", |review| {
        review
            .set("key_slice.index", serde_json::json!(moved))
            .expect("edit");
    });
    let unnamed = run(&["pacs", "publish", s(&ws2)]);
    assert!(!unnamed.status.success());
    let said = String::from_utf8_lossy(&unnamed.stderr);
    assert!(
        said.contains("accepted without a reviewer name") && said.contains("--reviewer NAME"),
        "{said}"
    );
    let published = ok(&run(&["pacs", "publish", s(&ws2), "--reviewer", "Ben"]));
    assert!(published.contains("review     stored"), "{published}");
    assert!(!published.contains("ai-result"), "{published}");

    let results = stored_results();
    assert_eq!(results["ai"].as_array().map(Vec::len), Some(1), "{results}");
    assert_eq!(
        results["key_images"].as_array().map(Vec::len),
        Some(1),
        "{results}"
    );
    let reviews = results["reviews"].as_array().expect("reviews");
    assert_eq!(reviews.len(), 2, "one review each, stored once: {results}");
    let by = |name: &str| {
        reviews
            .iter()
            .find(|review| review["observer"] == name)
            .unwrap_or_else(|| panic!("no review by {name}: {results}"))
    };
    assert_eq!(by("Ana")["findings"]["organs"]["liver"]["tumor"], "no");
    // Ana's SR is dated when she accepted, not when it was sent.
    let accepted = keyslice::review::ReviewStore::open(&ws1.join("review.sqlite"))
        .expect("database")
        .corrections(None)
        .expect("log")
        .into_iter()
        .rev()
        .find(|entry| entry.field == "status")
        .expect("accepted")
        .at;
    let accepted: String = accepted
        .chars()
        .take(19)
        .filter(char::is_ascii_digit)
        .collect();
    assert_eq!(
        by("Ana")["content_date_time"],
        accepted.as_str(),
        "{results}"
    );
    assert_eq!(by("Ben")["findings"]["key_slice"]["index"], moved);
    let text_results = ok(&run(&["pacs", "results", &study_url, "--cache", s(&cache)]));
    assert!(text_results.contains("review by Ana"), "{text_results}");

    // Agreement: the two reviewers disagree on this study, for both reasons.
    let agreement = ok(&run(&[
        "pacs",
        "agreement",
        &orthanc.url(""),
        "--json",
        "--cache",
        s(&cache),
    ]));
    let agreement: serde_json::Value = serde_json::from_str(&agreement).expect("JSON");
    let pair = &agreement["pairs"][0];
    assert_eq!(
        (pair["reviewer_a"].as_str(), pair["reviewer_b"].as_str()),
        (Some("Ana"), Some("Ben"))
    );
    assert_eq!(pair["studies"], 1);
    assert_eq!(pair["mean_key_slice_distance"], 12.0);
    let disagreement = &agreement["disagreements"][0];
    assert_eq!(disagreement["study"], study_uid.as_str());
    let reasons = disagreement["reasons"].to_string();
    assert!(
        reasons.contains("liver") && reasons.contains("12 slices apart"),
        "{reasons}"
    );

    // The prior result opens as a prediction: what `view dicomweb+…` shows.
    let stored = keyslice::pacs::results::study_results(&orthanc.server(), &study_uid, &cache, 4)
        .expect("results");
    let reopened = stored
        .prediction(&case.case_id, orthanc.server().name())
        .expect("an AI result");
    let provenance = reopened
        .stored
        .as_ref()
        .expect("marked as read from the PACS");
    assert!(provenance.document.starts_with("SR of "), "{provenance:?}");
    let reviewers: Vec<&str> = provenance
        .reviews
        .iter()
        .map(|review| review.reviewer.as_str())
        .collect();
    assert_eq!(reviewers, ["Ana", "Ben"]);
    assert!(
        provenance.reviews[0].summary.contains("liver no tumor"),
        "{provenance:?}"
    );
    assert!(
        provenance.reviews[1]
            .summary
            .contains(&format!("key slice {moved}")),
        "{provenance:?}"
    );
    assert_eq!(
        reopened.findings.organ(Organ::Liver).tumor,
        prediction.findings.organ(Organ::Liver).tumor
    );
    assert_eq!(reopened.key_slice, prediction.key_slice);
    assert_eq!(
        reopened.slice_box.as_ref().map(|b| b.voxels),
        prediction.slice_box.as_ref().map(|b| b.voxels)
    );
    assert_eq!(reopened.report, prediction.report);
    assert_ne!(
        stored.latest_reviews()[0]
            .1
            .content
            .findings
            .organ(Organ::Liver)
            .tumor,
        TumorPresence::Yes
    );
    the_window_opens_the_study_with_its_stored_result(&orthanc, &study_uid, &reopened);
}

/// The window's own way to a PACS study (no binary in between): looked up, shown as it
/// arrives, then opened as a case of the PACS workspace with the stored AI result.
fn the_window_opens_the_study_with_its_stored_result(
    orthanc: &Orthanc,
    study_uid: &str,
    stored: &keyslice::prediction::Prediction,
) {
    use keyslice::app::job::Polled;
    use keyslice::app::open::{LoadEvent, load_in_background};
    let workspace = tempfile::tempdir().expect("temp dir");
    let url = orthanc.url(&format!("/studies/{study_uid}")).replace(
        "dicomweb+http://",
        &format!("dicomweb+http://{USER}:{PASSWORD}@"),
    );
    let source = keyslice::app::open::from_pacs(
        &url,
        workspace.path(),
        std::sync::Arc::new(keyslice_workflow::Logged),
    )
    .expect("the study is found");
    let ctx = egui::Context::default();
    let job = load_in_background(&ctx, source);
    let started = Instant::now();
    let (mut previews, mut opened) = (0, None);
    while opened.is_none() {
        assert!(
            started.elapsed() < Duration::from_mins(2),
            "the study did not open"
        );
        match job.poll() {
            Polled::Message(LoadEvent::Preview(_)) => previews += 1,
            Polled::Message(LoadEvent::Study(study)) => opened = Some(study),
            Polled::Message(LoadEvent::Failed(what, hint)) => panic!("{what} ({hint})"),
            Polled::Message(_) | Polled::Pending => std::thread::sleep(Duration::from_millis(20)),
            Polled::Ended => panic!("the load ended without the study"),
        }
    }
    let opened = opened.expect("opened");
    assert!(previews > 0, "the images were shown as they came");
    let prediction = opened
        .prediction
        .expect("the stored AI result is the case's prediction");
    assert_eq!(prediction.key_slice, stored.key_slice);
    assert_eq!(
        prediction.findings.organ(Organ::Liver).tumor,
        stored.findings.organ(Organ::Liver).tumor
    );
    // The case is in the workspace named, nowhere else.
    let manifest =
        keyslice::review::workspace::Workspace::open(workspace.path()).expect("workspace");
    assert_eq!(manifest.manifest.cases.len(), 1);
}

#[test]
fn study_reads_go_to_the_pacs_as_research_reads_and_never_as_reviews() {
    use keyslice::review::study::Study;
    let Some(orthanc) = Orthanc::start() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let (first, second) = (dir.path().join("a"), dir.path().join("b"));
    let study_uid = orthanc.store_folder(&phantom_series(&first, "4", "PH4"));
    orthanc.store_folder(&phantom_series(&second, "5", "PH5"));
    // The study is defined by a PACS query: its studies are retrieved into its workspace.
    let query = orthanc.url("?ModalitiesInStudy=CT");
    let trial = dir.path().join("trial");
    ok(&run(&[
        "study",
        "create",
        s(&trial),
        "--pacs",
        &query,
        "--reader",
        "Ana Lima",
        "--reader",
        "Ben Okafor",
        "--design",
        "sequential",
    ]));
    let defined = Study::open(&trial).expect("study");
    assert_eq!(defined.definition.cases.len(), 2);
    assert_eq!(
        defined.definition.pacs_query.as_deref(),
        Some(query.as_str())
    );
    ok(&run(&["workspace", "analyze", s(&trial.join("workspace"))]));
    read_every_item(&Study::open(&trial).expect("study"));
    let files = dir.path().join("reads");
    let published = ok(&run(&["study", "publish", s(&trial), "--out", s(&files)]));
    assert!(
        published.contains("8 study read(s) as SR; 8 stored, 0 already on the PACS"),
        "{published}"
    );
    let again = ok(&run(&["study", "publish", s(&trial)]));
    assert!(again.contains("0 stored, 8 already on the PACS"), "{again}");
    // Each file is a valid SR marked as research, by its reader, never verified.
    let mut marks = Vec::new();
    let mut studies = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(&files).expect("files") {
        let path = entry.expect("entry").path();
        let (mark, study) = check_study_read(&path);
        studies.insert(study);
        marks.push(mark);
    }
    marks.sort();
    assert_eq!(marks.len(), 8, "{marks:?}");
    assert!(
        studies.contains(&study_uid) && studies.len() == 2,
        "{studies:?}"
    );
    assert_eq!(
        marks[0],
        ("Ana Lima".to_string(), "evidence".to_string(), 0)
    );
    // The PACS results, which the review and the viewer read, list them apart: no review.
    let study_url = orthanc.url(&format!("/studies/{study_uid}"));
    let printed = ok(&run(&[
        "pacs",
        "results",
        &study_url,
        "--json",
        "--cache",
        s(&dir.path().join("cache")),
    ]));
    let results: serde_json::Value = serde_json::from_str(&printed).expect("JSON");
    assert_eq!(
        results["reviews"].as_array().map(Vec::len),
        Some(0),
        "{results}"
    );
    assert_eq!(results["study_reads"], 4, "{results}");
}

#[test]
fn wrong_credentials_unknown_study_no_ct_and_a_down_server_are_named_and_retrieve_resumes() {
    let Some(orthanc) = Orthanc::start() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let series = phantom_series(dir.path(), "2", "PH2");
    let study_uid = orthanc.store_folder(&series);
    let study_url = orthanc.url(&format!("/studies/{study_uid}"));
    let cache = dir.path().join("cache");

    // Wrong password: refused, with what to set.
    let refused = run_with(
        &["pacs", "retrieve", &study_url, "--cache", s(&cache)],
        &[
            ("KEYSLICE_DICOMWEB_USER", USER),
            ("KEYSLICE_DICOMWEB_PASSWORD", "guess"),
        ],
    );
    assert!(!refused.status.success());
    let message = text(&refused.stderr);
    assert!(
        message.contains("refused") && message.contains("HTTP 401"),
        "{message}"
    );
    assert!(message.contains("KEYSLICE_DICOMWEB_USER"), "{message}");
    assert!(
        !message.contains("guess"),
        "a password is never printed: {message}"
    );

    // An unknown study: named, with the server.
    let missing = run(&[
        "pacs",
        "retrieve",
        &orthanc.url("/studies/1.2.3.999"),
        "--cache",
        s(&cache),
    ]);
    let message = text(&missing.stderr);
    assert!(!missing.status.success());
    assert!(
        message.contains("study 1.2.3.999") && message.contains("127.0.0.1"),
        "{message}"
    );

    // A study without CT (an MR image): named, with what it holds.
    let mr = dir.path().join("mr");
    std::fs::create_dir_all(&mr).expect("mkdir");
    std::fs::copy(data("dicom/MR_small.dcm"), mr.join("mr.dcm")).expect("copy");
    let mr_study = orthanc.store_folder(&mr);
    let no_ct = run(&[
        "pacs",
        "retrieve",
        &orthanc.url(&format!("/studies/{mr_study}")),
        "--cache",
        s(&cache),
    ]);
    let message = text(&no_ct.stderr);
    assert!(
        message.contains("has no CT series (it holds: MR)"),
        "{message}"
    );

    // A server that is down: named, at once (connection refused is not retried).
    let down = run(&[
        "pacs",
        "query",
        &format!("dicomweb+http://127.0.0.1:{}/dicom-web", free_port()),
    ]);
    let message = text(&down.stderr);
    assert!(
        message.contains("cannot reach the PACS") && message.contains("connection refused"),
        "{message}"
    );

    // Retrieve, lose part of the cache, retrieve again: only the missing instances come.
    let first = ok(&run(&[
        "pacs",
        "retrieve",
        &study_url,
        "--cache",
        s(&cache),
    ]));
    let folder = PathBuf::from(first.trim());
    let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
        .expect("series folder")
        .map(|entry| entry.expect("entry").path())
        .collect();
    files.sort();
    let total = files.len();
    for file in &files[..5] {
        std::fs::remove_file(file).expect("removed");
    }
    let (summary, message) = retrieve_json(&study_url, &cache, &[]);
    assert_eq!(summary["instances"], total);
    assert_eq!(summary["fetched"], 5);
    assert_eq!(
        summary["folder"].as_str().map(PathBuf::from),
        Some(folder.clone())
    );
    assert!(
        message.contains(&format!("{total} instance(s)")) && message.contains("(5 fetched,"),
        "{message}"
    );
    assert_eq!(std::fs::read_dir(&folder).expect("folder").count(), total);
    // No patient data in what it printed: the study is named by its UID only.
    assert!(
        !message.contains("PH2") && !message.contains("Phantom"),
        "{message}"
    );
}

/// How the fake server below misbehaves on instance retrieves.
#[derive(Clone, Copy)]
enum Fault {
    /// HTTP 500 for everything.
    Failing,
    /// The multipart answer stops mid-part.
    Truncated,
    /// Answers after 3 s.
    Slow,
}

/// A DICOMweb server with one CT series of one instance that misbehaves as told; counts the
/// requests it got.
fn fake_server(fault: Fault) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let requests = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&requests);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let counter = Arc::clone(&counter);
            std::thread::spawn(move || {
                let mut request = Vec::new();
                let mut byte = [0u8; 1];
                while !request.ends_with(b"\r\n\r\n")
                    && stream.read(&mut byte).is_ok_and(|n| n == 1)
                {
                    request.push(byte[0]);
                }
                counter.fetch_add(1, Ordering::SeqCst);
                let line = String::from_utf8_lossy(&request)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_string();
                let json = |body: &str| {
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/dicom+json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .into_bytes()
                };
                let answer: Vec<u8> = if matches!(fault, Fault::Failing) {
                    b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 12\r\nConnection: close\r\n\r\ndisk failure".to_vec()
                } else if line.contains("/series?") {
                    json(
                        r#"[{"0020000E":{"vr":"UI","Value":["1.2.3.4"]},"00080060":{"vr":"CS","Value":["CT"]}}]"#,
                    )
                } else if line.contains("/instances?") {
                    json(r#"[{"00080018":{"vr":"UI","Value":["1.2.3.4.5"]}}]"#)
                } else {
                    if matches!(fault, Fault::Slow) {
                        std::thread::sleep(Duration::from_secs(3));
                    }
                    let mut body = b"HTTP/1.1 200 OK\r\nContent-Type: multipart/related; type=\"application/dicom\"; boundary=XyZ\r\nConnection: close\r\n\r\n--XyZ\r\nContent-Type: application/dicom\r\n\r\n".to_vec();
                    body.extend(std::iter::repeat_n(0u8, 128));
                    body.extend_from_slice(b"DICM");
                    body.extend(std::iter::repeat_n(7u8, 400));
                    body
                };
                let _ = stream.write_all(&answer);
            });
        }
    });
    (port, requests)
}

#[test]
fn a_failing_slow_or_truncating_server_gives_a_clear_error_and_leaves_no_partial_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    // `pacs retrieve` of study 1.2.3 on the fake server, with more options.
    let retrieve = |port: u16, options: &[&str]| {
        let url = format!("dicomweb+http://127.0.0.1:{port}/dicom-web/studies/1.2.3");
        let mut args = vec!["pacs", "retrieve", url.as_str(), "--cache", s(dir.path())];
        args.extend_from_slice(options);
        run(&args)
    };

    let (port, requests) = fake_server(Fault::Failing);
    let failed = retrieve(port, &["--retries", "2"]);
    let message = text(&failed.stderr);
    assert!(
        message.contains("failed on the series of study 1.2.3 (HTTP 500): disk failure"),
        "{message}"
    );
    assert_eq!(
        requests.load(Ordering::SeqCst),
        3,
        "one try and two retries"
    );

    let (port, requests) = fake_server(Fault::Truncated);
    let truncated = retrieve(port, &["--retries", "1"]);
    let message = text(&truncated.stderr);
    assert!(!truncated.status.success());
    assert!(
        message.contains("truncated answer")
            && message.contains("instance 1.2.3.4.5 of study 1.2.3"),
        "{message}"
    );
    // Two QIDO requests, then the instance twice (a truncated answer is retried).
    assert_eq!(requests.load(Ordering::SeqCst), 4);
    let leftovers: Vec<PathBuf> = walk(dir.path())
        .into_iter()
        .filter(|path| path.is_file())
        .collect();
    assert!(
        leftovers.is_empty(),
        "nothing half-written stays: {leftovers:?}"
    );

    let (port, _) = fake_server(Fault::Slow);
    let started = Instant::now();
    let slow = retrieve(port, &["--timeout-secs", "1", "--retries", "0"]);
    let message = text(&slow.stderr);
    assert!(
        message.contains("no answer within 1 s") || message.contains("timed out"),
        "{message}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

fn walk(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    if let Ok(entries) = std::fs::read_dir(root) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                found.extend(walk(&path));
            } else {
                found.push(path);
            }
        }
    }
    found
}

/// Each reader of `study` reads each case unaided, then with the evidence: a liver tumor with
/// confidence 85 on slice 12, the AI's finding accepted when shown.
fn read_every_item(study: &keyslice::review::study::Study) {
    use keyslice::review::study::{Call, Decision, Next, Read};
    for reader in study.definition.readers.clone() {
        while let Next::Item { item, .. } = study.next(&reader, 1_796_558_400).expect("next") {
            let arm = study.definition.arms[item.arm].name.clone();
            let aided = arm == "evidence";
            let read = Read {
                reader: reader.clone(),
                case: item.case.clone(),
                arm,
                session: item.session,
                calls: [(
                    Organ::Liver,
                    Call {
                        present: true,
                        confidence: 85,
                    },
                )]
                .into(),
                key_slice: Some(12),
                active_ms: 41_000,
                ai: if aided {
                    [(Organ::Liver, Decision::Accepted)].into()
                } else {
                    std::collections::BTreeMap::new()
                },
                at: "2026-12-06T12:00:00.000Z".into(),
                simulated: false,
            };
            study.record(&read, 1_796_558_400).expect("recorded");
        }
    }
}

/// The tracking identifiers of an SR's measurement groups, after checking that each has an
/// image region selected from an image (a viewer such as OHIF draws every group's region, and
/// fails on a group without one). Empty for a document without groups (a KOS).
fn drawn_groups(path: &Path) -> Vec<String> {
    use keyslice::pacs::sr::codes;
    use keyslice::pacs::sr::tree::{Node, Value, read_item};
    let object = dicom_object::open_file(path).expect("DICOM");
    let root = read_item(&object).expect("a content tree");
    let Some(measurements) = root.child(&codes::imaging_measurements()) else {
        return Vec::new();
    };
    measurements
        .children
        .iter()
        .map(|group| {
            let label = group
                .child(&codes::tracking_identifier())
                .and_then(Node::text)
                .unwrap_or_default()
                .to_string();
            // A region of the group's own, or lines its measurements are measured on.
            let on_image = |item: &Node| {
                matches!(item.value, Value::Scoord(..))
                    && item
                        .children
                        .iter()
                        .any(|source| matches!(source.value, Value::Image(..)))
            };
            let drawn = group.children.iter().any(|item| {
                on_image(item)
                    || (matches!(item.value, Value::Num(..)) && item.children.iter().any(on_image))
            });
            assert!(
                drawn,
                "{}: group `{label}` has no image region",
                path.display()
            );
            label
        })
        .collect()
}

/// Checks one study read's file (valid, marked as research by its reader, never verified, as
/// [`read_every_item`] read it): its (reader, arm, session) and its Study Instance UID.
fn check_study_read(path: &Path) -> ((String, String, usize), String) {
    use dicom_dictionary_std::tags;
    use keyslice::pacs::sr::read::{Document, read_file};
    use keyslice::pacs::sr::{CaseResult, Observer};
    let errors = dciodvfy_errors(path);
    assert!(errors.is_empty(), "{}: {errors:?}", path.display());
    assert!(
        drawn_groups(path)
            .iter()
            .any(|label| label.starts_with("key evidence")),
        "the reader's key slice is marked on its image"
    );
    let object = dicom_object::open_file(path).expect("DICOM");
    let get = |tag| {
        object
            .element(tag)
            .ok()
            .and_then(|element| element.to_str().ok())
            .map(|value| value.trim_end_matches(['\0', ' ']).to_string())
            .unwrap_or_default()
    };
    assert_eq!(get(tags::VERIFICATION_FLAG), "UNVERIFIED");
    assert_eq!(get(tags::CLINICAL_TRIAL_PROTOCOL_ID), "trial");
    assert_eq!(get(tags::SERIES_NUMBER), "9904");
    let Ok(Document::StudyRead { read, mark }) = read_file(path) else {
        panic!("{}: not read back as a study read", path.display());
    };
    let CaseResult {
        observer: Observer::Person { name },
        findings,
        report,
        algorithm,
        ..
    } = read.content
    else {
        panic!("a person's read");
    };
    assert_eq!(findings.organs[&Organ::Liver].tumor, TumorPresence::Yes);
    assert_eq!(findings.key_slice.map(|key| key.index), Some(12));
    let report = report.expect("the read in words");
    assert!(
        report.contains("liver: tumor (confidence 85 of 100)"),
        "{report}"
    );
    assert!(report.contains("not a clinical review"), "{report}");
    // A read of the images alone names no algorithm; a read with the evidence, the AI's.
    assert_eq!(
        algorithm.id.is_empty(),
        mark.arm == "unaided",
        "{algorithm:?}"
    );
    (
        (name, mark.arm, mark.session),
        get(tags::STUDY_INSTANCE_UID),
    )
}

#[test]
fn model_text_and_server_names_reach_a_document_valid_and_without_secrets() {
    use keyslice::pacs::sr::CaseResult;
    use keyslice::pacs::sr::write::result_sr;
    use keyslice::prediction::{ModelId, Prediction};
    let dir = tempfile::tempdir().expect("temp dir");
    let series = phantom_series(dir.path(), "77", "PTEXT");
    let analysed = ok(&run(&["analyze", s(&series), "--json"]));
    let mut prediction: Prediction =
        serde_json::from_str(analysed.lines().next().expect("one line")).expect("a prediction");
    // A model's answer with ESC, BEL and NUL in it, a model name holding the value
    // delimiter, and a server recorded with its credentials (as an older prediction may be).
    prediction.report = format!("\u{1b}[2J\u{7}Liver\u{0} lesion.\n{}", prediction.report);
    prediction.diagnoser = ModelId {
        id: "qwen\\tuned".into(),
        version: "openai http://ana:pw4242@gpu:8000/v1?api-key=K7K7K7".into(),
    };
    let first = walk(&series)
        .into_iter()
        .find(|path| path.extension().is_some_and(|e| e == "dcm"))
        .expect("a slice");
    let study = StudyContext::from_file(&first).expect("the study");
    let written = result_sr(&study, &CaseResult::from_prediction(&prediction)).expect("written");
    let path = dir.path().join("result.dcm");
    std::fs::write(&path, &written.bytes).expect("saved");
    let errors = dciodvfy_errors(&path);
    assert!(errors.is_empty(), "{errors:?}");
    let bytes = &written.bytes;
    let holds = |needle: &[u8]| bytes.windows(needle.len()).any(|window| window == needle);
    for secret in [&b"pw4242"[..], b"K7K7K7", b"ana:"] {
        assert!(!holds(secret), "{}", String::from_utf8_lossy(secret));
    }
    assert!(!holds(&[0x1b]) && !holds(&[0x07]), "no control character");
    assert!(holds("\u{fffd}[2J".as_bytes()), "each shown as U+FFFD");
}

/// A TLS front for Orthanc, as a hospital puts a reverse proxy before its PACS: HTTPS on a
/// free port with a certificate the test CA signed, each connection piped to Orthanc's plain
/// HTTP port. Its port, the CA's PEM and the process.
fn tls_front(folder: &Path, target: u16) -> Option<(u16, PathBuf, Child)> {
    if !common::test_ca(folder) {
        return None;
    }
    let script = r#"
import socket, ssl, sys, threading
target = int(sys.argv[1])
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain("server.pem", "server.key")
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(32)
print(listener.getsockname()[1], flush=True)
def pipe(source, sink):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            try:
                end.close()
            except OSError:
                pass
def serve(client):
    try:
        secure = context.wrap_socket(client, server_side=True)
    except (ssl.SSLError, OSError):
        client.close()
        return
    upstream = socket.create_connection(("127.0.0.1", target))
    threading.Thread(target=pipe, args=(secure, upstream), daemon=True).start()
    pipe(upstream, secure)
while True:
    client, _ = listener.accept()
    threading.Thread(target=serve, args=(client,), daemon=True).start()
"#;
    let mut child = Command::new("python3")
        .args(["-c", script, &target.to_string()])
        .current_dir(folder)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().expect("stdout")),
        &mut line,
    )
    .expect("the port");
    Some((
        line.trim().parse().expect("a port number"),
        folder.join("ca.pem"),
        child,
    ))
}

/// A PACS behind a hospital's own CA: refused at once as a certificate problem with what to
/// do, then reached once the CA is named, by `--ca-cert` or by `SSL_CERT_FILE`, for a query
/// and a retrieve.
#[test]
fn a_pacs_behind_a_hospital_ca_is_trusted_once_its_ca_is_named() {
    let Some(orthanc) = Orthanc::start() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let series = phantom_series(dir.path(), "3", "PH3");
    let study_uid = orthanc.store_folder(&series);
    let tls = dir.path().join("tls");
    std::fs::create_dir_all(&tls).expect("folder");
    let Some((port, ca, mut front)) = tls_front(&tls, orthanc.port) else {
        return;
    };
    let url = format!("dicomweb+https://localhost:{port}/dicom-web");
    let started = Instant::now();
    let refused = run(&["pacs", "query", &url, "--retries", "3"]);
    let message = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{message}");
    assert!(
        message.contains("certificate") && message.contains("--ca-cert"),
        "{message}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "a certificate error is not retried"
    );
    let listed = ok(&run(&[
        "pacs",
        "query",
        &url,
        "--ca-cert",
        s(&ca),
        "--json",
    ]));
    assert!(listed.contains(&study_uid), "{listed}");
    let from_env = run_with(
        &["pacs", "query", &url],
        &[
            ("KEYSLICE_DICOMWEB_USER", USER),
            ("KEYSLICE_DICOMWEB_PASSWORD", PASSWORD),
            ("SSL_CERT_FILE", s(&ca)),
        ],
    );
    assert!(ok(&from_env).contains(&study_uid));
    let cache = dir.path().join("cache");
    let (summary, _) = retrieve_json(
        &format!("{url}/studies/{study_uid}"),
        &cache,
        &["--ca-cert", s(&ca)],
    );
    assert!(summary["instances"].as_u64() > Some(0), "{summary}");
    let _ = front.kill();
    let _ = front.wait();
}

/// A reviewer's lesion mask reaches the PACS as a DICOM Segmentation with the review: valid
/// for dciodvfy, read by highdicom voxel for voxel, stored once, and read back from the PACS
/// onto the CT by Keyslice.
#[test]
fn a_reviewers_lesion_mask_goes_to_the_pacs_as_a_segmentation_other_viewers_read() {
    use keyslice::volume::mask::{Brush, LesionMask, paint};
    let Some(orthanc) = Orthanc::start() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let series = phantom_series(dir.path(), "3", "PH3");
    let study_uid = orthanc.store_folder(&series);
    let query = orthanc.url("?PatientID=PH3&ModalitiesInStudy=CT");
    let ws = dir.path().join("ws");
    ok(&run(&["workspace", "create", s(&ws), &query]));
    ok(&run(&["workspace", "analyze", s(&ws)]));
    let workspace = Workspace::open(&ws).expect("workspace");
    let case = workspace.manifest.cases[0].clone();
    let volume = keyslice::io::load_study(&case.volume, &keyslice::io::LoadOptions::default())
        .expect("the cached CT")
        .volume;
    let dims = volume.dims();
    // A ball of 6 mm on the middle slice: the reviewer's liver lesion.
    let mut mask = vec![0u8; dims.iter().product()];
    paint(
        &mut mask,
        dims,
        volume.spacing_mm(),
        [dims[0] / 3, dims[1] / 2, dims[2] / 2],
        6.0,
        Brush::Ball,
        true,
    )
    .expect("painted");
    review(&ws, "Ana", |review| {
        review
            .set("liver.tumor", serde_json::json!("yes"))
            .expect("tumor");
        if review
            .case()
            .findings
            .organ(Organ::Liver)
            .lesions
            .is_empty()
        {
            review
                .set(
                    "liver.lesions.0",
                    serde_json::json!({"size": {"long_cm": 1.2, "short_cm": 1.1}}),
                )
                .expect("lesion");
        }
        review
            .set(
                "liver.lesions.0.mask",
                serde_json::to_value(LesionMask::from_dense(&mask, dims)).expect("json"),
            )
            .expect("mask");
    });
    let files = dir.path().join("published");
    let published = ok(&run(&["pacs", "publish", s(&ws), "--out", s(&files)]));
    assert!(
        published
            .lines()
            .any(|line| line.contains("masks") && line.contains("stored")),
        "{published}"
    );
    let seg = std::fs::read_dir(&files)
        .expect("files")
        .map(|entry| entry.expect("entry").path())
        .find(|path| path.to_string_lossy().ends_with("-masks.dcm"))
        .expect("the segmentation written");
    let errors = dciodvfy_errors(&seg);
    assert!(errors.is_empty(), "{errors:?}");
    if keyslice_testkit::validators::highdicom() {
        let read = keyslice_testkit::validators::python_json(
            "seg_with_highdicom.py",
            &["read".as_ref(), seg.as_os_str()],
        );
        let voxels = read["segments"][0]["voxels"]
            .as_array()
            .expect("voxels")
            .len();
        assert_eq!(voxels, mask.iter().filter(|v| **v != 0).count());
        assert_eq!(read["segments"][0]["label"], "Liver lesion 1");
    }
    // Stored once: nothing new the second time.
    let again = ok(&run(&["pacs", "publish", s(&ws)]));
    assert!(again.starts_with("0 document(s)"), "{again}");

    // Read back from the PACS onto the CT.
    let cache = dir.path().join("cache");
    let stored = keyslice::pacs::results::study_results(&orthanc.server(), &study_uid, &cache, 4)
        .expect("results");
    assert_eq!(stored.segmentations.len(), 1, "{stored:?}");
    let context = StudyContext::from_folder(&case.volume).expect("study");
    let source = keyslice::pacs::seg::SourceSeries::of(
        &volume,
        &context.frame_of_reference_uid,
        &context.image_class_uid,
    )
    .expect("a DICOM series");
    let bytes = std::fs::read(&stored.segmentations[0]).expect("retrieved");
    let back = keyslice::pacs::seg::read::segmentation(&bytes, &source).expect("read");
    assert_drawn_by_the_editor_and_the_rest_by_the_model(&back.segments, &mask);

    opened_elsewhere_shows_the_stored_mask(&orthanc, &study_uid, dir.path(), &mask);
}

/// The study opened from the PACS on another machine (a PACS workspace of its own, in `dir`),
/// as the window opens it: the stored segmentation is the case's masks, every voxel of the
/// reviewer's `mask` shown as a liver lesion.
fn opened_elsewhere_shows_the_stored_mask(
    orthanc: &Orthanc,
    study_uid: &str,
    dir: &Path,
    mask: &[u8],
) {
    let elsewhere = dir.join("elsewhere");
    let url = orthanc.url(&format!("/studies/{study_uid}")).replace(
        "dicomweb+http://",
        &format!("dicomweb+http://{USER}:{PASSWORD}@"),
    );
    let opened = keyslice_workflow::pacs::locate_study(&url, &elsewhere)
        .expect("located")
        .open(&keyslice_workflow::Logged)
        .expect("opened");
    let (_, masks) = keyslice::app::open::load(&keyslice::app::open::Source::WorkspaceCase {
        root: opened.root,
        case_id: opened.case_id,
    })
    .expect("loaded");
    let masks = masks.expect("the stored segmentation shown as the case's masks");
    assert!(masks.warnings.is_empty(), "{:?}", masks.warnings);
    let lesion = masks
        .structures
        .iter()
        .find(|structure| structure.name == "liver_lesion")
        .expect("the liver lesion's mask");
    let labels = masks.labels.expect("labels");
    let drawn = mask.iter().filter(|v| **v != 0).count();
    let shown = mask
        .iter()
        .zip(&labels.labels)
        .filter(|(drawn, label)| **drawn != 0 && **label == lesion.label)
        .count();
    assert_eq!(shown, drawn);
    assert!(
        masks
            .lesion_marks
            .iter()
            .any(|mark| mark.name == "liver_lesion"),
        "{:?}",
        masks.lesion_marks.len()
    );
}

/// The reviewer's mask ("Liver lesion 1", `drawn`) is the editor's; any other lesion's is
/// the model's own, kept as it found it.
fn assert_drawn_by_the_editor_and_the_rest_by_the_model(
    segments: &[keyslice::pacs::seg::Segment],
    drawn: &[u8],
) {
    use keyslice::pacs::seg::Algorithm;
    let liver = segments
        .iter()
        .find(|segment| segment.label == "Liver lesion 1")
        .expect("the liver lesion's segment");
    assert_eq!(liver.mask, drawn);
    assert!(matches!(liver.algorithm, Algorithm::Semiautomatic(_)));
    for other in segments.iter().filter(|s| s.label != "Liver lesion 1") {
        assert!(
            matches!(other.algorithm, Algorithm::Automatic(_)),
            "{}: {:?}",
            other.label,
            other.algorithm
        );
    }
}
