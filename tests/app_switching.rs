//! The whole window, driven as a hurried reviewer drives it: cases clicked in quick
//! succession, keys pressed while a case is still opening, the window made small. The window
//! never names one case while showing another's images or review, only the case asked for
//! last goes on loading, an edit made while a case opens lands nowhere, and the planes keep
//! most of a small window. Rendered with wgpu (lavapipe in CI) into snapshots.
//!
//! Without any GPU adapter these checks say so and pass, unless `KEYSLICE_REQUIRE_GPU=1`.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{gpu_available, keyslice, text};
use egui::{Key, Modifiers};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use keyslice::app::open::running_loads;
use keyslice::app::settings::SettingsFile;
use keyslice::app::{KeysliceApp, Source};
use keyslice::review::ReviewStore;
use keyslice::review::workspace::Workspace;

/// The app, made in the harness's first frame (it needs the harness's context).
struct Window {
    app: Option<KeysliceApp>,
    source: Source,
    render_state: egui_wgpu::RenderState,
    settings: Option<SettingsFile>,
}

/// The whole window of `size` on `source`, drawn by wgpu.
fn window(source: Source, size: egui::Vec2) -> Harness<'static, Window> {
    window_with(source, size, SettingsFile::in_memory())
}

/// [`window`] with the settings of `settings`.
fn window_with(
    source: Source,
    size: egui::Vec2,
    settings: SettingsFile,
) -> Harness<'static, Window> {
    let render_state = egui_kittest::wgpu::create_render_state(
        egui_kittest::wgpu::default_wgpu_setup(),
        egui_wgpu::RendererOptions::PREDICTABLE,
    );
    let renderer = egui_kittest::wgpu::WgpuTestRenderer::from_render_state(render_state.clone());
    Harness::builder()
        .with_size(size)
        .renderer(renderer)
        .build_ui_state(
            |ui, window: &mut Window| {
                let app = window.app.get_or_insert_with(|| {
                    KeysliceApp::with_renderer(
                        ui.ctx(),
                        Some(window.render_state.clone()),
                        window.source.clone(),
                        None,
                        window
                            .settings
                            .take()
                            .unwrap_or_else(SettingsFile::in_memory),
                    )
                });
                app.frame_ui(ui);
            },
            Window {
                app: None,
                source,
                render_state,
                settings: Some(settings),
            },
        )
}

fn app<'a>(harness: &'a Harness<'_, Window>) -> &'a KeysliceApp {
    harness
        .state()
        .app
        .as_ref()
        .expect("made in the first frame")
}

/// Steps the window until `done` holds (frames 10 ms apart), at most `limit`.
fn step_until(
    harness: &mut Harness<'_, Window>,
    limit: Duration,
    what: &str,
    done: impl Fn(&KeysliceApp) -> bool,
) {
    let deadline = Instant::now() + limit;
    loop {
        harness.step();
        if done(app(harness)) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The study's clock on the case open in `harness`, driven by egui's clock frame by frame:
/// it runs while the window has the focus and the reader did something within a minute, and
/// stands still otherwise.
fn active_time_counts_only_while_the_reader_is_at_the_window(harness: &mut Harness<'_, Window>) {
    let active = |harness: &Harness<'_, Window>| {
        app(harness)
            .reading_active()
            .expect("a read in progress")
            .as_secs_f64()
    };
    let mut clock = 10_000.0;
    let mut frame =
        |harness: &mut Harness<'_, Window>, seconds: f64, focused: bool, moved: bool| {
            clock += seconds;
            let input = harness.input_mut();
            input.time = Some(clock);
            input.focused = focused;
            if moved {
                input.events.push(egui::Event::PointerMoved(egui::pos2(
                    640.0 + (clock % 7.0) as f32,
                    400.0,
                )));
            }
            harness.step();
        };
    // The reader moves the mouse: 20 frames of 0.5 s count 10 s (after the first frame).
    frame(harness, 0.5, true, true);
    let start = active(harness);
    for _ in 0..20 {
        frame(harness, 0.5, true, true);
    }
    let counted = active(harness) - start;
    assert!((counted - 10.0).abs() < 1e-6, "{counted}");
    // Another window has the focus: 20 frames count nothing.
    for _ in 0..20 {
        frame(harness, 0.5, false, true);
    }
    assert!((active(harness) - start - 10.0).abs() < 1e-6);
    // Back, then away from the keyboard: the clock runs a minute after the last input, then
    // stops, and a long pause between two frames counts at most a second.
    frame(harness, 0.5, true, true);
    let back = active(harness);
    for _ in 0..200 {
        frame(harness, 0.5, true, false);
    }
    let idle = active(harness) - back;
    assert!((idle - 59.5).abs() < 0.51, "{idle}");
    frame(harness, 3600.0, true, true);
    assert!(active(harness) - back - idle <= 1.0 + 1e-6);
}

/// A workspace of three phantom cases; their ids.
fn workspace(folder: &Path) -> (PathBuf, Vec<String>) {
    let dataset = folder.join("dataset");
    let made = keyslice(&[
        "phantom",
        "--out",
        dataset.to_str().expect("utf-8"),
        "--cases",
        "3",
        "--seed",
        "52",
        "--matrix",
        "96",
    ]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let root = folder.join("ws");
    let (workspace, added) = Workspace::create_or_extend(&root, &[dataset]).expect("workspace");
    assert_eq!(added, 3);
    let ids = workspace
        .manifest
        .cases
        .iter()
        .map(|case| case.case_id.clone())
        .collect();
    (root, ids)
}

/// A fresh [`workspace`] in `folder`, a folder relative to the package, so the path on
/// screen (title, worklist) is the same on every machine and snapshots compare.
fn snapshot_workspace(folder: &str) -> PathBuf {
    let folder = Path::new(folder);
    let _ = std::fs::remove_dir_all(folder);
    let (root, _) = workspace(folder);
    root.strip_prefix(std::env::current_dir().expect("cwd"))
        .map(Path::to_path_buf)
        .unwrap_or(root)
}

/// The window never names one case while showing another: checked on every frame.
fn assert_named_case_is_the_one_shown(harness: &Harness<'_, Window>) {
    let app = app(harness);
    if let Some(shown) = app.case_on_screen() {
        assert_eq!(
            Some(shown),
            app.named_case(),
            "the images and review of {shown} under another case's name"
        );
    }
}

/// Resident memory of this process, bytes.
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|value| value.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

#[test]
fn switching_cases_fast_shows_each_case_only_under_its_name_and_leaves_one_load() {
    if !gpu_available() {
        return;
    }
    let folder = tempfile::tempdir().expect("temp dir");
    let (root, ids) = workspace(folder.path());
    let mut harness = window(Source::Workspace(root), egui::Vec2::new(1280.0, 800.0));
    step_until(
        &mut harness,
        Duration::from_mins(1),
        "the first case",
        |app| app.case_on_screen().is_some(),
    );
    let settled = resident_bytes();
    // A then B, B then A, …: forty clicks, a frame apart.
    let mut last = String::new();
    for click in 0..40 {
        let id = &ids[1 + click % 2];
        harness.get_by_label(id).click();
        harness.step();
        assert_eq!(app(&harness).named_case(), Some(id.as_str()));
        assert_named_case_is_the_one_shown(&harness);
        last.clone_from(id);
    }
    step_until(
        &mut harness,
        Duration::from_mins(1),
        "the last case asked for",
        |app| app.case_on_screen() == Some(last.as_str()),
    );
    assert_named_case_is_the_one_shown(&harness);
    // The loads asked for before the last one have stopped.
    let deadline = Instant::now() + Duration::from_secs(30);
    while running_loads() > 0 {
        assert!(
            Instant::now() < deadline,
            "{} loads still running",
            running_loads()
        );
        harness.step();
        std::thread::sleep(Duration::from_millis(10));
    }
    // Memory after the burst: within a few cases' loads of where it was (a case here is a
    // few MB; forty loads running at once would be far more).
    let grown = resident_bytes().saturating_sub(settled);
    assert!(grown < 200 << 20, "{} MB more after the burst", grown >> 20);
}

#[test]
fn keys_pressed_while_a_case_opens_never_change_another_case_and_a_repeated_accept_records_nothing()
{
    if !gpu_available() {
        return;
    }
    let folder = tempfile::tempdir().expect("temp dir");
    let (root, ids) = workspace(folder.path());
    let database = root.join(keyslice::review::workspace::DATABASE_FILE);
    let mut harness = window(Source::Workspace(root), egui::Vec2::new(1280.0, 800.0));
    step_until(
        &mut harness,
        Duration::from_mins(1),
        "the first case",
        |app| app.case_on_screen().is_some(),
    );
    let first = app(&harness).case_on_screen().expect("open").to_string();
    let other = ids
        .iter()
        .find(|id| **id != first)
        .expect("another case")
        .clone();
    let over = app(&harness).viewer_rect().expect("planes drawn").center();
    harness.hover_at(over);
    harness.step();
    // The other case clicked, S and Ctrl+Enter pressed over the images at once: whichever
    // frame the keys land in, they never change the case that was on screen before, and
    // change the other one only once it is open under its name.
    harness.get_by_label(&other).click();
    harness.key_press(Key::S);
    harness.key_press_modifiers(Modifiers::COMMAND, Key::Enter);
    harness.step();
    assert_eq!(app(&harness).named_case(), Some(other.as_str()));
    assert_named_case_is_the_one_shown(&harness);
    // And again the frame after, while it may still be opening: whatever lands, lands on
    // the case named on screen.
    harness.key_press(Key::S);
    harness.step();
    step_until(
        &mut harness,
        Duration::from_mins(1),
        "the other case",
        |app| app.case_on_screen() == Some(other.as_str()),
    );
    let store = ReviewStore::open(&database).expect("database");
    let log = store.corrections(None).expect("log");
    assert!(
        log.iter().all(|entry| entry.case_id == other),
        "recorded on a case not on screen: {log:?}"
    );
    // Now open: Ctrl+Enter accepts; however many reach it, the case is accepted once.
    harness.hover_at(over);
    harness.step();
    for _ in 0..2 {
        harness.key_press_modifiers(Modifiers::COMMAND, Key::Enter);
        harness.step();
        harness.step();
    }
    let log = store.corrections(Some(&other)).expect("log");
    let statuses: Vec<&serde_json::Value> = log
        .iter()
        .filter(|entry| entry.field == "status")
        .map(|entry| &entry.new_value)
        .collect();
    assert_eq!(statuses, [&serde_json::json!("done")], "{log:?}");
}

#[test]
fn in_a_small_window_the_planes_keep_most_of_it() {
    if !gpu_available() {
        return;
    }
    let root = snapshot_workspace("target/window-snapshots");
    let mut snapshots = egui_kittest::SnapshotResults::new();
    // Width and height, and the share of the width the planes must keep.
    for (width, height, share, name) in [
        (640.0, 400.0, 0.6, "app_640x400"),
        (800.0, 600.0, 0.6, "app_800x600"),
        (1280.0, 800.0, 0.5, "app_1280x800"),
    ] {
        let mut harness = window(
            Source::Workspace(root.clone()),
            egui::Vec2::new(width, height),
        );
        // The snapshot shows the case with its masks: wait until they are read too.
        step_until(
            &mut harness,
            Duration::from_mins(1),
            "a case and its masks",
            |app| app.case_on_screen().is_some() && !app.is_loading(),
        );
        for _ in 0..4 {
            harness.step();
        }
        let planes = app(&harness).viewer_rect().expect("planes drawn");
        assert!(
            planes.width() >= share * width && planes.height() >= 0.8 * height,
            "{width}×{height}: the planes get {planes:?}"
        );
        // What this test holds is the layout: a few hundred pixels of the overlays' edges are
        // let through (they have been seen to differ by 260 between runs).
        harness.snapshot_options(
            name,
            &egui_kittest::SnapshotOptions::new().max_failed_pixels(400),
        );
        snapshots.extend_harness(&mut harness);
    }
}

#[test]
fn single_letter_keys_change_the_review_only_while_the_planes_have_the_keyboard() {
    if !gpu_available() {
        return;
    }
    let folder = tempfile::tempdir().expect("temp dir");
    let (root, _) = workspace(folder.path());
    let database = root.join(keyslice::review::workspace::DATABASE_FILE);
    let mut harness = window(Source::Workspace(root), egui::Vec2::new(1280.0, 800.0));
    step_until(&mut harness, Duration::from_mins(1), "a case", |app| {
        app.case_on_screen().is_some()
    });
    let planes = app(&harness).viewer_rect().expect("planes drawn");
    let store = ReviewStore::open(&database).expect("database");
    // The pointer over the worklist: S (key slice) and F (flag) are letters, not edits.
    harness.hover_at(egui::pos2(60.0, 500.0));
    harness.step();
    for key in [Key::S, Key::F] {
        harness.key_press(key);
        harness.step();
    }
    // The File menu open, the path field missed: a typed path edits nothing.
    harness.get_by_label("File").click();
    harness.step();
    assert!(
        egui::Popup::is_any_open(&harness.ctx),
        "the File menu is open"
    );
    harness.hover_at(planes.center());
    harness.step();
    for key in [Key::S, Key::F, Key::S] {
        harness.key_press(key);
        harness.step();
    }
    assert!(
        store.corrections(None).expect("log").is_empty(),
        "{:?}",
        store.corrections(None)
    );
    // Menu closed (a click on the planes), pointer on the planes: S sets the key slice.
    harness.get_by_label("File").click();
    harness.step();
    harness.hover_at(planes.center());
    harness.step();
    harness.key_press(Key::S);
    harness.step();
    harness.step();
    let fields: Vec<String> = store
        .corrections(None)
        .expect("log")
        .into_iter()
        .map(|entry| entry.field)
        .collect();
    assert!(fields.contains(&"key_slice".to_string()), "{fields:?}");
    // Said where the reviewer looks, from what to what; one Ctrl+Z undoes it.
    let said = app(&harness).announcement().unwrap_or_default().to_string();
    assert!(
        said.contains("key slice: 121 (was none)") && said.contains("Ctrl+Z undoes"),
        "{said}"
    );
    harness.key_press_modifiers(Modifiers::COMMAND, Key::Z);
    harness.step();
    harness.step();
    let said = app(&harness).announcement().unwrap_or_default().to_string();
    assert!(said.starts_with("undone — key slice"), "{said}");
}

/// Puts the patient and study into every file of the DICOM series in `folder`.
fn identify(folder: &Path) {
    identify_as(folder, "DOE^JANE");
}

/// [`identify`] with the patient's name `name`.
fn identify_as(folder: &Path, name: &str) {
    use dicom_core::{DataElement, PrimitiveValue, VR};
    use dicom_dictionary_std::tags;
    for entry in std::fs::read_dir(folder).expect("series") {
        let path = entry.expect("entry").path();
        let mut object = dicom_object::open_file(&path).expect("readable");
        for (tag, vr, value) in [
            (tags::PATIENT_NAME, VR::PN, name),
            (tags::PATIENT_ID, VR::LO, "MRN-4711"),
            (tags::PATIENT_BIRTH_DATE, VR::DA, "19600102"),
            (tags::PATIENT_SEX, VR::CS, "F"),
            (tags::STUDY_DATE, VR::DA, "20240105"),
            (tags::ACCESSION_NUMBER, VR::SH, "ACC-77"),
        ] {
            object.put(DataElement::new(tag, vr, PrimitiveValue::from(value)));
        }
        object.write_to_file(&path).expect("written");
    }
}

/// The planes never move under the hand: a long patient banner and a message over the
/// images (a correction said where the reviewer looks) shorten in their line instead of
/// widening the central area, so every plane keeps its place.
#[test]
fn the_planes_keep_their_place_beside_a_long_banner_and_a_passing_message() {
    if !gpu_available() {
        return;
    }
    let folder = tempfile::tempdir().expect("temp dir");
    // The same window with a case of no identity: where the planes belong.
    let (root, _) = workspace(folder.path());
    let mut plain = window(Source::Workspace(root), egui::Vec2::new(1280.0, 800.0));
    step_until(&mut plain, Duration::from_mins(1), "a case", |app| {
        app.case_on_screen().is_some()
    });
    plain.step();
    let expected = app(&plain).viewer_rect().expect("planes");
    let series = folder.path().join("series");
    let slices: Vec<(String, common::SliceSpec)> = (0..6)
        .map(|k| {
            (
                format!("s{k}.dcm"),
                common::SliceSpec::axial("1.9.48", k, 2.5 * k as f64, 40),
            )
        })
        .collect();
    common::write_series(&series, &slices);
    identify_as(
        &series,
        "VANDERBILT-MONTGOMERY-WORTHINGTON-HARGREAVES^ALEXANDRA-CHRISTINA^MARIA",
    );
    let named = folder.path().join("named");
    Workspace::create_or_extend(&named, std::slice::from_ref(&series)).expect("workspace");
    let mut harness = window(Source::Workspace(named), egui::Vec2::new(1280.0, 800.0));
    step_until(&mut harness, Duration::from_mins(1), "the case", |app| {
        app.case_on_screen().is_some()
    });
    harness.step();
    let with_banner = app(&harness).viewer_rect().expect("planes");
    assert_eq!(with_banner, expected, "a long banner moved the planes");
    // A correction, said over the images.
    harness.hover_at(with_banner.center());
    harness.step();
    harness.key_press(Key::S);
    harness.step();
    harness.step();
    assert!(app(&harness).announcement().is_some());
    assert_eq!(
        app(&harness).viewer_rect().expect("planes"),
        expected,
        "a passing message moved the planes"
    );
    // The banner is shortened, not lost: its whole text is the label's.
    assert!(
        harness
            .query_all_by_label_contains("VANDERBILT-MONTGOMERY")
            .next()
            .is_some()
    );
}

#[test]
fn the_patient_and_study_are_named_over_the_images() {
    if !gpu_available() {
        return;
    }
    let folder = tempfile::tempdir().expect("temp dir");
    let series = folder.path().join("series");
    let slices: Vec<(String, common::SliceSpec)> = (0..6)
        .map(|k| {
            (
                format!("s{k}.dcm"),
                common::SliceSpec::axial("1.9.46", k, 2.5 * k as f64, 40),
            )
        })
        .collect();
    common::write_series(&series, &slices);
    identify(&series);
    // The worklist names the patient of each case before it is opened; over the images too.
    let named = folder.path().join("named");
    let (identified, _) =
        Workspace::create_or_extend(&named, std::slice::from_ref(&series)).expect("workspace");
    let predictions = identified.predictions().expect("predictions");
    let rows = identified.worklist(&predictions).expect("worklist");
    assert_eq!(
        rows[0].patient.as_deref(),
        Some("DOE, JANE · ID MRN-4711 · born 1960-01-02 · F · study 2024-01-05 · accession ACC-77")
    );
    let mut harness = window(Source::Workspace(named), egui::Vec2::new(1280.0, 800.0));
    step_until(&mut harness, Duration::from_mins(1), "the case", |app| {
        app.case_on_screen().is_some()
    });
    harness.step();
    assert!(
        harness
            .query_all_by_label_contains("DOE, JANE · ID MRN-4711")
            .count()
            >= 2,
        "over the images and in the worklist"
    );
    // A NIfTI file holds no identity, and the window says so.
    let (root, _) = workspace(folder.path());
    let mut harness = window(Source::Workspace(root), egui::Vec2::new(1280.0, 800.0));
    step_until(&mut harness, Duration::from_mins(1), "a case", |app| {
        app.case_on_screen().is_some()
    });
    harness.step();
    harness.get_by_label("no patient identity in this file");
}

/// The record holds only what the reviewer set: the model's box lies on the model's key
/// slice; once the reviewer moves the key slice (S on another slice), the box leaves the
/// planes (it is no evidence there) and the lesion range stays as it was.
#[test]
fn a_moved_key_slice_takes_the_models_box_off_the_planes() {
    if !gpu_available() {
        return;
    }
    let folder = tempfile::tempdir().expect("temp dir");
    let (root, ids) = workspace(folder.path());
    let workspace = Workspace::open(&root).expect("workspace");
    let prediction = common::saved_prediction(
        &ids[0],
        "Liver lesion 1: Size: 1.0 x 0.7 cm. Lesion slices: 2-4. Key slice: 3",
        Some([10, 10, 20, 20]),
    );
    workspace.append_prediction(&prediction).expect("saved");
    let mut harness = window(Source::Workspace(root), egui::Vec2::new(1280.0, 800.0));
    step_until(&mut harness, Duration::from_mins(1), "the case", |app| {
        app.case_on_screen().is_some() && !app.is_loading()
    });
    harness.step();
    let shown = app(&harness).evidence_on_screen().expect("the model's box");
    assert_eq!((shown.key_slice, shown.voxels), (3, [10, 10, 20, 20]));
    // Another slice on screen, then S.
    let planes = app(&harness).viewer_rect().expect("planes");
    harness.hover_at(planes.center());
    harness.step();
    for _ in 0..3 {
        harness.key_press(Key::ArrowUp);
        harness.step();
    }
    harness.key_press(Key::S);
    harness.step();
    harness.step();
    let said = app(&harness).announcement().unwrap_or_default().to_string();
    let moved_to: u32 = said
        .split("key slice: ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| panic!("a key slice in {said:?}"));
    assert!(
        said.contains("(was 3)") && !(2..=4).contains(&moved_to),
        "{said}"
    );
    assert_eq!(
        app(&harness).evidence_on_screen(),
        None,
        "the model's box is no evidence on slice {moved_to}"
    );
    assert!(
        app(&harness)
            .notices()
            .iter()
            .any(|notice| notice
                .contains("outside the lesion slices 2–4, which are left as they were")),
        "{:?}",
        app(&harness).notices()
    );
}

#[test]
fn a_failed_analyze_again_keeps_the_saved_analysis_on_screen() {
    use keyslice::infer::backend::Backend;
    use keyslice::infer::openai::{Media, OpenAiClient, OpenAiDiagnoser, OpenAiVerifier};
    if !gpu_available() {
        return;
    }
    let folder = tempfile::tempdir().expect("temp dir");
    let (root, ids) = workspace(folder.path());
    let workspace = Workspace::open(&root).expect("workspace");
    let mut prediction = common::saved_prediction(
        &ids[0],
        "Liver lesion 1: Size: 1.0 x 0.7 cm. Key slice: 3",
        None,
    );
    prediction.diagnoser.version = "saved".into();
    workspace.append_prediction(&prediction).expect("saved");
    // A server that is not there: the re-run fails at once.
    let mut client = OpenAiClient::new("http://127.0.0.1:1/v1", "absent", None);
    client.retries = 0;
    let verifier_client = OpenAiClient::new("http://127.0.0.1:1/v1", "absent", None);
    let backend = Backend::Openai(Box::new((
        OpenAiDiagnoser::new(client, 4, "{frames}".into(), Media::Images),
        OpenAiVerifier {
            client: verifier_client,
            prompt: "{slice}".into(),
        },
    )));
    let render_state = egui_kittest::wgpu::create_render_state(
        egui_kittest::wgpu::default_wgpu_setup(),
        egui_wgpu::RendererOptions::PREDICTABLE,
    );
    let renderer = egui_kittest::wgpu::WgpuTestRenderer::from_render_state(render_state.clone());
    let source = Source::WorkspaceCase {
        root,
        case_id: ids[0].clone(),
    };
    let mut backend = Some(backend);
    let mut harness = Harness::builder()
        .with_size(egui::Vec2::new(1280.0, 800.0))
        .renderer(renderer)
        .build_ui_state(
            move |ui, app: &mut Option<KeysliceApp>| {
                let app = app.get_or_insert_with(|| {
                    KeysliceApp::with_renderer(
                        ui.ctx(),
                        Some(render_state.clone()),
                        source.clone(),
                        backend.take(),
                        SettingsFile::in_memory(),
                    )
                });
                app.frame_ui(ui);
            },
            None,
        );
    let deadline = Instant::now() + Duration::from_mins(1);
    let ready = |harness: &Harness<'_, Option<KeysliceApp>>| {
        harness
            .state()
            .as_ref()
            .is_some_and(|app| app.analysis_on_screen().is_some())
    };
    while !ready(&harness) {
        assert!(Instant::now() < deadline, "the saved analysis never showed");
        harness.step();
        std::thread::sleep(Duration::from_millis(10));
    }
    harness.get_by_label("Analyze again").click();
    let deadline = Instant::now() + Duration::from_mins(1);
    while harness
        .query_by_label_contains("Analyze again failed")
        .is_none()
    {
        assert!(Instant::now() < deadline, "the failure never showed");
        harness.step();
        std::thread::sleep(Duration::from_millis(20));
    }
    let app = harness.state().as_ref().expect("app");
    let shown = app
        .analysis_on_screen()
        .expect("the saved analysis is still shown");
    assert_eq!(shown.diagnoser.version, "saved");
}

#[test]
fn the_analysed_review_fits_the_default_window_and_a_full_hd_one() {
    if !gpu_available() {
        return;
    }
    let root = snapshot_workspace("target/window-snapshots-review");
    let mut snapshots = egui_kittest::SnapshotResults::new();
    for (width, height, name) in [
        (1280.0, 800.0, "review_1280x800"),
        (1920.0, 1080.0, "review_1920x1080"),
    ] {
        let mut harness = window(
            Source::Workspace(root.clone()),
            egui::Vec2::new(width, height),
        );
        step_until(&mut harness, Duration::from_mins(1), "a case", |app| {
            app.case_on_screen().is_some()
        });
        // The first size analysed the case at the top of the worklist; a case whose evidence
        // does not bear out a finding stays on top, with its analysis.
        match harness.query_by_label("Analyze (A)") {
            Some(analyze) => analyze.click(),
            None => harness.get_by_label("Analyze again").click(),
        }
        step_until(&mut harness, Duration::from_mins(2), "an analysis", |app| {
            app.analysis_on_screen().is_some()
        });
        for _ in 0..4 {
            harness.step();
        }
        // The analysis time (a few digits) differs from run to run.
        harness.snapshot_options(
            name,
            &egui_kittest::SnapshotOptions::new().max_failed_pixels(400),
        );
        // The evidence, the findings and the report text (in its own scroll area below the
        // legend, at least six lines of it) are on screen without scrolling the panel.
        let screen = egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(width, height));
        for label in ["Evidence", "Report", "the key slice agrees"] {
            let node = harness.get_by_label(label);
            assert!(
                screen.contains_rect(node.rect()),
                "{width}×{height}: {label} at {:?}",
                node.rect()
            );
        }
        let legend = harness.get_by_label("the key slice agrees").rect();
        assert!(
            legend.bottom() + 100.0 <= height,
            "{width}×{height}: the report text starts at {}",
            legend.bottom()
        );
        let consistency = harness.get_by_label_contains("consistency ").rect();
        assert!(screen.contains_rect(consistency), "{consistency:?}");
        snapshots.extend_harness(&mut harness);
    }
}

/// The reviewer is named once (the settings `keyslice view --reviewer` keeps), shown beside
/// Accept, and every status is recorded under that name and said where the reviewer looks.
#[test]
fn accept_says_what_it_did_and_who_did_it() {
    if !gpu_available() {
        return;
    }
    let folder = tempfile::tempdir().expect("temp dir");
    let (root, _) = workspace(folder.path());
    let path = folder.path().join("settings.json");
    std::fs::write(&path, r#"{"reviewer": "Dr. Ana Lima"}"#).expect("settings written");
    let (settings, notice) = SettingsFile::load_from(Some(path));
    assert_eq!(notice, None);
    let mut harness = window_with(
        Source::Workspace(root.clone()),
        egui::Vec2::new(1280.0, 800.0),
        settings,
    );
    step_until(&mut harness, Duration::from_mins(1), "a case", |app| {
        app.case_on_screen().is_some()
    });
    harness.step();
    harness.get_by_label("as Dr. Ana Lima");
    let case = app(&harness).case_on_screen().expect("a case").to_string();
    harness.get_by_label("Accept (Ctrl+Enter)").click();
    harness.step();
    harness.step();
    let said = app(&harness).announcement().unwrap_or_default().to_string();
    assert_eq!(
        said,
        format!("saved — {case} accepted by Dr. Ana Lima · Ctrl+Z undoes")
    );
    let store = ReviewStore::open(&root.join(keyslice::review::workspace::DATABASE_FILE))
        .expect("database");
    let log = store.corrections(None).expect("log");
    let status = log
        .iter()
        .find(|entry| entry.field == "status")
        .expect("the status in the log");
    assert_eq!(status.reviewer, "Dr. Ana Lima");
    // Undone, and said so.
    harness.key_press_modifiers(Modifiers::COMMAND, Key::Z);
    harness.step();
    harness.step();
    let said = app(&harness).announcement().unwrap_or_default().to_string();
    assert!(said.starts_with("undone — status"), "{said}");
}

#[test]
fn the_side_panels_open_as_wide_as_the_reviewer_left_them() {
    if !gpu_available() {
        return;
    }
    let folder = tempfile::tempdir().expect("temp dir");
    let (root, _) = workspace(folder.path());
    let path = folder.path().join("settings.json");
    std::fs::write(&path, r#"{"panel_widths": [380.0, 330.0]}"#).expect("settings written");
    let (settings, notice) = SettingsFile::load_from(Some(path.clone()));
    assert_eq!(notice, None);
    let mut harness = window_with(
        Source::Workspace(root),
        egui::Vec2::new(1920.0, 1080.0),
        settings,
    );
    step_until(&mut harness, Duration::from_mins(1), "a case", |app| {
        app.case_on_screen().is_some()
    });
    for _ in 0..3 {
        harness.step();
    }
    let planes = app(&harness).viewer_rect().expect("planes drawn");
    // The planes lie between the two panels as they were left (each edge within a few
    // points of the panel's width).
    assert!(
        (planes.left() - 380.0).abs() < 20.0,
        "left panel edge at {}",
        planes.left()
    );
    assert!(
        (1920.0 - planes.right() - 330.0).abs() < 20.0,
        "right panel edge at {}",
        planes.right()
    );
}

#[test]
fn a_study_arriving_from_a_pacs_shows_its_key_image_first_then_more_then_opens_with_its_review() {
    use keyslice::app::arrival::Arrival;
    if !gpu_available() {
        return;
    }
    let folder = tempfile::tempdir().expect("temp dir");
    let source = folder.path().join("source");
    let slices: Vec<(String, common::SliceSpec)> = (0..8)
        .map(|k| {
            let slice = common::SliceSpec::axial("1.9.47", k, 2.5 * k as f64, 1000 + 20 * k as i16);
            (format!("{}.dcm", slice.sop_uid), slice)
        })
        .collect();
    common::write_series(&source, &slices);
    // The series folder fills as a retrieve renames whole files into it.
    let arriving = folder.path().join("arriving");
    std::fs::create_dir_all(&arriving).expect("folder");
    let arrive = |names: &[usize]| {
        for &k in names {
            let name = &slices[k].0;
            std::fs::copy(source.join(name), arriving.join(name)).expect("copied");
        }
    };
    let arrival = Arrival::new(
        arriving.clone(),
        Some(8),
        Some(arriving.join("1.9.47.5.dcm")),
        "study 1.9.47 from the PACS".into(),
    );
    let mut harness = window(
        Source::Arriving(arrival.clone()),
        egui::Vec2::new(1280.0, 800.0),
    );
    harness.step();
    arrive(&[5]);
    let shown = |harness: &Harness<'_, Window>, text: &str| {
        harness.query_all_by_label_contains(text).next().is_some()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !shown(&harness, "arriving from the PACS: 1 of 8 images") {
        assert!(Instant::now() < deadline, "the key image alone first");
        harness.step();
        std::thread::sleep(Duration::from_millis(10));
    }
    let on_screen = |harness: &Harness<'_, Window>| {
        let (dims, crosshair) = app(harness).volume_on_screen().expect("a volume");
        (dims[2], crosshair[2].round() as usize)
    };
    assert_eq!(on_screen(&harness), (1, 0), "one slice: the key image");
    assert!(shown(
        &harness,
        "its findings and corrections open when the last image is in"
    ));
    // Analysing half a study is refused, with why.
    harness.get_by_label("Analyze (A)").click();
    harness.step();
    assert!(
        app(&harness)
            .notices()
            .iter()
            .any(|notice| notice.contains("still arriving from the PACS")),
        "{:?}",
        app(&harness).notices()
    );
    arrive(&[2, 3, 4]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !shown(&harness, "arriving from the PACS: 4 of 8 images") {
        assert!(Instant::now() < deadline, "more of the study");
        harness.step();
        std::thread::sleep(Duration::from_millis(10));
    }
    // The crosshair stays on the key image's slice of the patient as the stack grows.
    assert_eq!(on_screen(&harness), (4, 3), "at the key image");
    // The top bar's spinner turns with time: its pixels are let through.
    harness.snapshot_options(
        "arriving_from_the_pacs",
        &egui_kittest::SnapshotOptions::new().max_failed_pixels(300),
    );
    // All in: the case opens from its workspace, with its review.
    arrive(&[0, 1, 6, 7]);
    let root = folder.path().join("ws");
    Workspace::create_or_extend(&root, std::slice::from_ref(&arriving)).expect("workspace");
    arrival.finish(Ok(Source::Workspace(root)));
    step_until(
        &mut harness,
        Duration::from_mins(1),
        "the whole study",
        |app| app.case_on_screen().is_some(),
    );
    harness.step();
    assert!(!shown(&harness, "arriving from the PACS"));
    assert_eq!(on_screen(&harness).0, 8, "the whole series");
}

#[test]
fn a_reader_study_shows_nothing_of_the_ai_in_the_unaided_arm_and_all_of_it_with_the_evidence() {
    if !gpu_available() {
        return;
    }
    let folder = tempfile::tempdir().expect("temp dir");
    let (root, _) = workspace(folder.path());
    // A model made to hallucinate says so in its name: the readers must never see it.
    let analysed = keyslice(&[
        "workspace",
        "analyze",
        root.to_str().expect("utf-8"),
        "--hallucinate",
        "0.5",
        "--hallucinate-seed",
        "3",
    ]);
    assert!(analysed.status.success(), "{}", text(&analysed.stderr));
    let dir = folder.path().join("trial");
    common::create_study(&root, &dir, &["ana", "ben"], &["--design", "sequential"]);
    let study = keyslice::review::study::Study::open(&dir).expect("study");
    let first = study.definition.schedule("ana")[0].case.clone();
    let predictions = Workspace::open(&root)
        .expect("workspace")
        .predictions()
        .expect("predictions");
    let report = predictions.get(&first).expect("analysed").report.clone();
    let mut harness = window(
        Source::StudyRead {
            dir: dir.clone(),
            reader: "ana".into(),
        },
        egui::Vec2::new(1280.0, 800.0),
    );
    step_until(
        &mut harness,
        Duration::from_mins(1),
        "the first case",
        |app| app.volume_on_screen().is_some() && !app.is_loading(),
    );
    harness.step();
    let shown = |harness: &Harness<'_, Window>, text: &str| {
        harness.query_all_by_label_contains(text).next().is_some()
    };
    // Unaided: the read panel and the images; nothing of the AI anywhere, no worklist.
    assert!(shown(&harness, "read 1 of 6 · arm unaided"));
    assert!(shown(&harness, "Your read"));
    let first_line = report.lines().next().unwrap_or_default().trim().to_string();
    // What names the models, their seeds or what was done to them: in no arm.
    let model_names = ["keyslice-tiny", "hallucinat", "-seed"];
    for hidden in [
        "Analysis",
        "Analyze",
        "The AI's report",
        "onsistency",
        "The AI's findings",
        first_line.as_str(),
        first.as_str(),
    ]
    .into_iter()
    .chain(model_names)
    {
        assert!(
            !hidden.is_empty() && !shown(&harness, hidden),
            "`{hidden}` is shown in the unaided arm"
        );
    }
    harness.snapshot("study_unaided");
    // Recorded: the same case opens in the evidence arm, with the AI's report and evidence.
    harness.get_by_label("tumor in the liver").click();
    harness.step();
    harness
        .get_by_label("Record and go to the next case")
        .click();
    step_until(
        &mut harness,
        Duration::from_mins(1),
        "the evidence arm",
        |app| app.volume_on_screen().is_some() && !app.is_loading(),
    );
    harness.step();
    assert!(shown(&harness, "read 2 of 6 · arm evidence"));
    assert!(shown(&harness, "The AI's report"));
    for hidden in model_names {
        assert!(
            !shown(&harness, hidden),
            "`{hidden}` is shown in the evidence arm"
        );
    }
    assert!(
        !shown(&harness, "Analyze"),
        "nothing to run again in a study"
    );
    harness.snapshot("study_evidence");
    active_time_counts_only_while_the_reader_is_at_the_window(&mut harness);
    let reads = study.reads("ana").expect("reads");
    assert_eq!(reads.len(), 1);
    assert_eq!(
        (reads[0].arm.as_str(), reads[0].case.as_str()),
        ("unaided", first.as_str())
    );
    assert!(reads[0].calls[&keyslice::findings::Organ::Liver].present);
    // A reader cannot go back: the window opened the next item, and the store refuses the
    // first one again.
    assert!(study.record(&reads[0], 1_796_558_400).is_err());
}

#[test]
fn a_study_that_does_not_finish_reading_is_abandoned_and_the_next_opens() {
    if !gpu_available() {
        return;
    }
    let folder = tempfile::tempdir().expect("temp dir");
    let case = folder.path().join("BDMAP_00000004");
    common::write_lesion_case(&case);
    let mut harness = window(
        Source::Path(case.join("ct.nii.gz")),
        egui::vec2(900.0, 600.0),
    );
    step_until(
        &mut harness,
        Duration::from_secs(20),
        "first opened",
        |app| app.volume_on_screen().is_some() && !app.is_loading(),
    );
    // A deadline nothing can meet: the load is abandoned at the next frame, said as such.
    let ctx = harness.ctx.clone();
    let app_mut = harness.state_mut().app.as_mut().expect("made");
    app_mut.set_load_deadline(Duration::ZERO);
    app_mut.open_source(&ctx, Source::Path(case.join("ct.nii.gz")));
    step_until(&mut harness, Duration::from_secs(5), "abandoned", |app| {
        !app.is_loading()
    });
    let (error, hint) = app(&harness).error_shown().expect("an error");
    assert!(error.contains("reading did not end within 0 s"), "{error}");
    assert!(hint.contains("another case"), "{hint}");
    // The next study opens as usual.
    let app_mut = harness.state_mut().app.as_mut().expect("made");
    app_mut.set_load_deadline(keyslice::app::LOAD_DEADLINE);
    let ctx = harness.ctx.clone();
    harness
        .state_mut()
        .app
        .as_mut()
        .expect("made")
        .open_source(&ctx, Source::Path(case.join("ct.nii.gz")));
    step_until(&mut harness, Duration::from_secs(20), "opened", |app| {
        app.volume_on_screen().is_some() && !app.is_loading()
    });
    assert!(app(&harness).error_shown().is_none());
}

/// Presses the primary button at `from`, drags through `to` in a few frames and lets go
/// (with Shift when `erase`).
fn brush_stroke(harness: &mut Harness<'_, Window>, from: egui::Pos2, to: egui::Pos2, erase: bool) {
    let modifiers = if erase {
        Modifiers::SHIFT
    } else {
        Modifiers::NONE
    };
    harness.event(egui::Event::ModifiersChanged(modifiers));
    harness.event(egui::Event::PointerMoved(from));
    harness.step();
    harness.event(egui::Event::PointerButton {
        pos: from,
        button: egui::PointerButton::Primary,
        pressed: true,
        modifiers,
    });
    harness.step();
    for n in 1..=4 {
        let at = from + (to - from) * (n as f32 / 4.0);
        harness.event(egui::Event::PointerMoved(at));
        harness.step();
    }
    harness.event(egui::Event::PointerButton {
        pos: to,
        button: egui::PointerButton::Primary,
        pressed: false,
        modifiers,
    });
    harness.step();
    harness.event(egui::Event::ModifiersChanged(Modifiers::NONE));
    harness.step();
}

/// The annotator's loop in the window: draw a lesion's mask with the brush (shown at once
/// over the organ masks), erase part of it, smooth it, take its measures as the lesion's
/// size; each step is one correction in the review database, undone with Ctrl+Z.
#[test]
fn a_lesion_mask_drawn_with_the_brush_is_saved_stroke_by_stroke_measured_and_undone() {
    use keyslice::findings::Organ;
    if !gpu_available() {
        return;
    }
    // A folder of the package's, so the title is the same on every machine.
    let root = snapshot_workspace("target/window-snapshots-masks");
    let workspace = Workspace::open(&root).expect("workspace");
    let ids: Vec<String> = workspace
        .manifest
        .cases
        .iter()
        .map(|case| case.case_id.clone())
        .collect();
    let prediction = common::saved_prediction(
        &ids[0],
        "Liver lesion 1: Size: 1.0 x 0.7 cm. Lesion slices: 2-4. Key slice: 3",
        Some([10, 10, 20, 20]),
    );
    workspace.append_prediction(&prediction).expect("saved");
    let mut harness = window(
        Source::Workspace(root.clone()),
        egui::Vec2::new(1280.0, 800.0),
    );
    step_until(&mut harness, Duration::from_mins(1), "the case", |app| {
        app.case_on_screen().is_some() && !app.is_loading()
    });
    harness.step();
    let mask_corrections = || {
        ReviewStore::open(&root.join(keyslice::review::workspace::DATABASE_FILE))
            .expect("store")
            .corrections(Some(&ids[0]))
            .expect("corrections")
            .into_iter()
            .filter(|entry| entry.field == "liver.lesions.0.mask")
            .count()
    };

    harness.get_by_label("draw").click();
    harness.step();
    harness.step();
    let planes = app(&harness).viewer_rect().expect("planes");
    // The middle of the axial plane (the left 60 % of the planes).
    let axial = egui::pos2(planes.min.x + planes.width() * 0.3, planes.center().y);
    let stroke_end = axial + egui::vec2(150.0, 0.0);
    brush_stroke(&mut harness, axial, stroke_end, false);
    assert_eq!(mask_corrections(), 1, "one stroke, one correction");
    let painted = app(&harness).lesion_mask_measures()[&(Organ::Liver, 0)].voxels;
    assert!(painted > 20, "{painted} voxels painted");
    assert!(
        app(&harness)
            .announcement()
            .is_some_and(|said| said.contains("a mask of")),
        "{:?}",
        app(&harness).announcement()
    );
    harness.snapshot("lesion_mask_drawn");

    // Shift erases part of it: a second correction, fewer voxels.
    brush_stroke(&mut harness, stroke_end, stroke_end, true);
    assert_eq!(mask_corrections(), 2);
    let erased = app(&harness).lesion_mask_measures()[&(Organ::Liver, 0)].voxels;
    assert!(erased < painted, "{erased} after erasing, {painted} before");

    // Its measures become the lesion's size: one correction of the lesion.
    harness.get_by_label("use as size").click();
    harness.step();
    harness.step();
    let size = app(&harness).announcement().unwrap_or_default().to_string();
    assert!(size.contains("liver lesion 1"), "{size}");

    // Ctrl+Z twice: the size, then the erasing; the painted mask is back.
    harness.hover_at(axial);
    for _ in 0..2 {
        harness.key_press_modifiers(Modifiers::COMMAND, Key::Z);
        harness.step();
        harness.step();
    }
    assert_eq!(
        app(&harness).lesion_mask_measures()[&(Organ::Liver, 0)].voxels,
        painted
    );
}
