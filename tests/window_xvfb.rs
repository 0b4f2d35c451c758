//! The real viewer window, as a user gets it: `keyslice` with no arguments (the README's first
//! command) prepares the demo workspace and opens an X11 window under Xvfb on its first case
//! with the saved analysis, drawn with wgpu (lavapipe in CI); xdotool moves the mouse, turns the wheel
//! and presses a preset key through the X server; `xwd` grabs the screen, and the test checks
//! that the axial viewport shows an image (not a blank or uniform area) that follows the input.
//! Then a scripted review of the open case (jump to the key slice, set another key slice,
//! measure a size with the ruler, accept, next case) is checked in the review database.
//! The screenshots are kept in `target/tmp/xvfb-window/` for a person to look at.
//!
//! Needs `Xvfb`, `xdotool` and `xwd` (Debian: xvfb, xdotool, x11-apps; `.ci/run` installs
//! them). Without them the test says so and passes, unless `KEYSLICE_REQUIRE_WINDOW=1`.

#[path = "common/chat_server.rs"]
mod chat_server;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills the child processes when the test ends, however it ends.
struct Processes(Vec<Child>);

impl Drop for Processes {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|folder| folder.join(program).is_file())
    })
}

/// Whether Xvfb, xdotool and xwd exist; without them (and without `KEYSLICE_REQUIRE_WINDOW`)
/// the test is skipped with a message.
fn tools_available() -> bool {
    let missing: Vec<&str> = ["Xvfb", "xdotool", "xwd"]
        .into_iter()
        .filter(|program| !on_path(program))
        .collect();
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var_os("KEYSLICE_REQUIRE_WINDOW").is_none(),
        "KEYSLICE_REQUIRE_WINDOW is set but {missing:?} are not installed"
    );
    eprintln!("skipping the real-window test: {missing:?} not installed");
    false
}

/// Starts Xvfb on a free display (it picks one and writes its number to `-displayfd`).
fn start_xvfb() -> (Child, String) {
    start_xvfb_sized("1280x800x24")
}

/// An Xvfb screen of `geometry` (`WIDTHxHEIGHTxDEPTH`).
fn start_xvfb_sized(geometry: &str) -> (Child, String) {
    let mut xvfb = Command::new("Xvfb")
        .args([
            "-displayfd",
            "1",
            "-screen",
            "0",
            geometry,
            "-nolisten",
            "tcp",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("Xvfb starts");
    let mut line = String::new();
    BufReader::new(xvfb.stdout.take().expect("piped stdout"))
        .read_line(&mut line)
        .expect("Xvfb reports its display");
    let display = format!(":{}", line.trim());
    assert!(display.len() > 1, "Xvfb gave no display number");
    (xvfb, display)
}

fn xdotool(display: &str, args: &[&str]) -> String {
    let output = Command::new("xdotool")
        .args(args)
        .env("DISPLAY", display)
        .output()
        .expect("xdotool runs");
    assert!(
        output.status.success(),
        "xdotool {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).to_string()
}

/// Starts `keyslice view path` (`keyslice` alone without a path) on `display` with its own
/// settings and data folders under `config`, logging at info level to `log`.
fn spawn_viewer(display: &str, path: Option<&Path>, config: &Path, log: &Path) -> Child {
    spawn_viewer_with(display, path, &[], config, log)
}

/// [`spawn_viewer`] with more `view` arguments (a backend).
fn spawn_viewer_with(
    display: &str,
    path: Option<&Path>,
    extra: &[&str],
    config: &Path,
    log: &Path,
) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_keyslice"));
    if let Some(path) = path {
        command.arg("view").arg(path).args(extra);
    }
    command
        .env("KEYSLICE_DATA_DIR", config.join("data"))
        .env("DISPLAY", display)
        .env_remove("WAYLAND_DISPLAY")
        .env("KEYSLICE_LOG", "info")
        .env("KEYSLICE_CONFIG_DIR", config)
        // No session bus, so no desktop portal: the File menu's dialog cannot appear.
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .env("XDG_RUNTIME_DIR", config)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("log file"))
        .spawn()
        .expect("the viewer starts")
}

/// Settings are written a second after they last changed.
fn settle_for_settings() {
    std::thread::sleep(Duration::from_millis(1600));
}

/// The window's position and size on the screen.
fn window_geometry(display: &str, window: &str) -> (usize, usize, usize, usize) {
    let geometry = xdotool(display, &["getwindowgeometry", "--shell", window]);
    let value = |key: &str| -> usize {
        geometry
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{key}=")))
            .and_then(|number| number.parse().ok())
            .unwrap_or_else(|| panic!("{key} in {geometry}"))
    };
    (value("X"), value("Y"), value("WIDTH"), value("HEIGHT"))
}

/// Waits until `log` contains `needle`, or panics with the log after `timeout`.
fn wait_for_log(log: &Path, needle: &str, timeout: Duration) {
    wait_for_log_count(log, needle, 1, timeout);
}

/// Waits until `log` contains `needle` `count` times, or panics with the log after `timeout`.
fn wait_for_log_count(log: &Path, needle: &str, count: usize, timeout: Duration) {
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.matches(needle).count() >= count {
            return;
        }
        assert!(
            start.elapsed() < timeout,
            "no {needle:?} after {timeout:?}; viewer log:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A screen grab as RGB rows.
struct Screen {
    width: usize,
    height: usize,
    rgb: Vec<[u8; 3]>,
}

impl Screen {
    /// Grabs the root window with `xwd` and decodes its `ZPixmap` (X Window Dump, version 7).
    fn grab(display: &str) -> Self {
        let output = Command::new("xwd")
            .args(["-root", "-silent"])
            .env("DISPLAY", display)
            .output()
            .expect("xwd runs");
        assert!(output.status.success(), "xwd failed");
        Self::decode(&output.stdout)
    }

    fn decode(bytes: &[u8]) -> Self {
        let field = |n: usize| {
            u32::from_be_bytes(bytes[4 * n..4 * n + 4].try_into().expect("4 bytes")) as usize
        };
        let (header_size, version, format) = (field(0), field(1), field(2));
        assert_eq!((version, format), (7, 2), "XWD version 7, ZPixmap");
        let (width, height) = (field(4), field(5));
        let byte_order = field(7);
        let bits_per_pixel = field(11);
        let bytes_per_line = field(12);
        let masks = [field(14) as u32, field(15) as u32, field(16) as u32];
        let colours = field(19);
        assert_eq!(
            bits_per_pixel, 32,
            "a 24-bit Xvfb screen dumps 32-bit pixels"
        );
        let pixels = &bytes[header_size + 12 * colours..];
        let mut rgb = Vec::with_capacity(width * height);
        for y in 0..height {
            for x in 0..width {
                let at = y * bytes_per_line + 4 * x;
                let raw: [u8; 4] = pixels[at..at + 4].try_into().expect("4 bytes");
                let value = if byte_order == 0 {
                    u32::from_le_bytes(raw)
                } else {
                    u32::from_be_bytes(raw)
                };
                rgb.push(masks.map(|mask| ((value & mask) >> mask.trailing_zeros()) as u8));
            }
        }
        Self { width, height, rgb }
    }

    /// Grey levels (mean of the channels) inside `[x0, x1) × [y0, y1)`.
    fn greys(&self, (x0, y0, x1, y1): (usize, usize, usize, usize)) -> Vec<u8> {
        let mut greys = Vec::new();
        for y in y0..y1.min(self.height) {
            for x in x0..x1.min(self.width) {
                let [r, g, b] = self.rgb[y * self.width + x];
                greys.push(((u16::from(r) + u16::from(g) + u16::from(b)) / 3) as u8);
            }
        }
        greys
    }

    fn save(&self, path: &Path) {
        let mut image = image::RgbImage::new(self.width as u32, self.height as u32);
        for (pixel, rgb) in image.pixels_mut().zip(&self.rgb) {
            *pixel = image::Rgb(*rgb);
        }
        image.save(path).expect("screenshot saved");
    }
}

fn mean(values: &[u8]) -> f64 {
    values.iter().map(|&v| f64::from(v)).sum::<f64>() / values.len().max(1) as f64
}

fn std_dev(values: &[u8]) -> f64 {
    let m = mean(values);
    (values
        .iter()
        .map(|&v| (f64::from(v) - m).powi(2))
        .sum::<f64>()
        / values.len().max(1) as f64)
        .sqrt()
}

fn distinct(values: &[u8]) -> usize {
    let mut seen = [false; 256];
    for &v in values {
        seen[usize::from(v)] = true;
    }
    seen.iter().filter(|&&s| s).count()
}

#[test]
#[expect(clippy::too_many_lines, reason = "one user's session, step by step")]
fn real_window_opens_the_demo_workspace_and_follows_wheel_and_preset_keys() {
    if !tools_available() {
        return;
    }
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("xvfb-window");
    std::fs::create_dir_all(&out).expect("screenshot folder");
    let config = tempfile::tempdir().expect("config folder");
    let log_path = out.join("viewer.log");
    let (xvfb, display) = start_xvfb();
    let mut processes = Processes(vec![xvfb]);
    processes
        .0
        .push(spawn_viewer(&display, None, config.path(), &log_path));
    // First run: three phantoms are generated and analysed before the first case opens.
    wait_for_log(&log_path, "first slices drawn", Duration::from_mins(3));
    wait_for_log(&log_path, "saved analysis shown", Duration::from_secs(30));
    assert!(
        config.path().join("data/demo/predictions.jsonl").is_file(),
        "the demo workspace is in KEYSLICE_DATA_DIR"
    );
    std::thread::sleep(Duration::from_millis(1500));
    Screen::grab(&display).save(&out.join("demo-workspace.png"));

    let window = xdotool(&display, &["search", "--name", "^Keyslice$"]);
    let window = window.lines().next().expect("the Keyslice window exists");
    let (x, y, width, height) = window_geometry(&display, window);
    assert_eq!(
        (width, height),
        (1280, 800),
        "the window opens at 1280 × 800"
    );
    // Its size is kept for the next start.
    settle_for_settings();
    let settings = std::fs::read_to_string(config.path().join("settings.json")).unwrap_or_default();
    let settings: serde_json::Value = serde_json::from_str(&settings).unwrap_or_default();
    assert_eq!(
        settings["window_size"],
        serde_json::json!([1280.0, 800.0]),
        "{settings}"
    );
    // And the side panels' widths, as the next start opens them.
    assert_eq!(
        settings["panel_widths"],
        serde_json::json!([300.0, 280.0]),
        "{settings}"
    );
    // The axial view takes the left 60 % of the area between the left panel (worklist,
    // evidence, report; 300 points) and the right one (findings editor; 280 points); this box
    // lies inside the body.
    let axial = (
        x + width * 29 / 100,
        y + height * 35 / 100,
        x + width * 51 / 100,
        y + height * 65 / 100,
    );
    let settle = || std::thread::sleep(Duration::from_millis(1500));
    settle();
    let first = Screen::grab(&display);
    first.save(&out.join("first.png"));
    let first_greys = first.greys(axial);
    assert!(
        std_dev(&first_greys) > 20.0 && distinct(&first_greys) > 20,
        "the axial view looks blank: mean {:.1}, sd {:.1}, {} grey levels (see {})",
        mean(&first_greys),
        std_dev(&first_greys),
        distinct(&first_greys),
        out.join("first.png").display()
    );

    // Wheel down ten notches over the axial view: another slice is drawn. (winit before
    // rust-windowing/winit#4386 reports xdotool's emulated wheel clicks twice, press and
    // release, so the exact count is checked in the kittest test, not here.)
    let centre = (
        usize::midpoint(axial.0, axial.2),
        usize::midpoint(axial.1, axial.3),
    );
    xdotool(
        &display,
        &[
            "mousemove",
            &centre.0.to_string(),
            &centre.1.to_string(),
            "click",
            "--repeat",
            "10",
            "--delay",
            "50",
            "5",
        ],
    );
    settle();
    let scrolled = Screen::grab(&display);
    scrolled.save(&out.join("scrolled.png"));
    let scrolled_greys = scrolled.greys(axial);
    let changed = first_greys
        .iter()
        .zip(&scrolled_greys)
        .filter(|(a, b)| a.abs_diff(**b) > 30)
        .count();
    assert!(
        changed > first_greys.len() / 100,
        "scrolling changed only {changed} of {} axial pixels (see {})",
        first_greys.len(),
        out.join("scrolled.png").display()
    );

    // Key 3 is the lung window (1500/−600): soft tissue turns bright.
    xdotool(&display, &["windowfocus", "--sync", window, "key", "3"]);
    settle();
    let lung = Screen::grab(&display);
    lung.save(&out.join("lung.png"));
    let lung_greys = lung.greys(axial);
    assert!(
        mean(&lung_greys) > mean(&scrolled_greys) + 30.0,
        "the lung window should brighten soft tissue: mean {:.1} → {:.1} (see {})",
        mean(&scrolled_greys),
        mean(&lung_greys),
        out.join("lung.png").display()
    );

    // F flags the open case: the status is in the workspace's review database at once.
    xdotool(&display, &["windowfocus", "--sync", window, "key", "f"]);
    settle();
    let store = keyslice::review::ReviewStore::open(&config.path().join("data/demo/review.sqlite"))
        .expect("review database");
    let log = store.corrections(None).expect("log");
    assert!(
        log.iter()
            .any(|c| c.field == "status" && c.new_value == "flagged"),
        "{log:?}"
    );
    let flagged_case = log[0].case_id.clone();
    drop(store);

    // The window opened the top of the triage order: a case without grounded evidence (one
    // called negative hides a missed tumor) comes before the lowest consistency.
    let workspace = keyslice::review::workspace::Workspace::open(&config.path().join("data/demo"))
        .expect("demo workspace");
    let predictions = workspace.predictions().expect("predictions");
    let worklist = workspace.worklist(&predictions).expect("worklist");
    assert_eq!(worklist[0].case_id, flagged_case, "{worklist:?}");
    // N down the list to the first case whose model named a key slice and a lesion.
    let target = worklist
        .iter()
        .position(|entry| {
            predictions.get(&entry.case_id).is_some_and(|p| {
                p.key_slice.is_some() && p.findings.organs.values().any(|o| !o.lesions.is_empty())
            })
        })
        .expect("a demo case with the model's lesion");
    let key = |keys: &str| {
        xdotool(&display, &["windowfocus", "--sync", window, "key", keys]);
        std::thread::sleep(Duration::from_millis(600));
    };
    for step in 0..target {
        key("n");
        wait_for_log_count(
            &log_path,
            "saved analysis shown",
            2 + step,
            Duration::from_mins(1),
        );
    }
    let case_id = worklist[target].case_id.clone();

    // A scripted review of that case, keyboard and mouse only: K shows the model's key
    // slice, ↑ moves one slice up and S makes it the key slice; M, then two lines on the
    // axial plane (120 and 60 pixels), and L puts their size on the selected lesion;
    // Ctrl+Enter accepts; P opens the case before it.
    key("k");
    key("Up");
    key("s");
    key("m");
    let (cx, cy) = centre;
    for (px, py) in [(cx - 60, cy), (cx + 60, cy), (cx, cy - 30), (cx, cy + 30)] {
        xdotool(
            &display,
            &["mousemove", &px.to_string(), &py.to_string(), "click", "1"],
        );
        std::thread::sleep(Duration::from_millis(400));
    }
    key("l");
    key("ctrl+Return");
    settle();
    Screen::grab(&display).save(&out.join("scripted-review.png"));
    key(if target > 0 { "p" } else { "n" });
    wait_for_log_count(
        &log_path,
        "saved analysis shown",
        2 + target,
        Duration::from_mins(1),
    );
    settle();
    Screen::grab(&display).save(&out.join("next-case.png"));

    let model_key = predictions
        .get(&case_id)
        .and_then(|p| p.key_slice.as_ref().map(|k| k.index))
        .expect("the model named a key slice");
    let store = keyslice::review::ReviewStore::open(&workspace.database_path()).expect("database");
    let log = store.corrections(Some(&case_id)).expect("log");
    let fields: Vec<&str> = log.iter().map(|c| c.field.as_str()).collect();
    let key_slice = log
        .iter()
        .find(|c| c.field == "key_slice")
        .unwrap_or_else(|| panic!("no key slice correction in {fields:?}"));
    assert_eq!(
        key_slice.new_value["index"],
        serde_json::json!(model_key + 1),
        "S after K and ↑ sets the slice above the model's"
    );
    let size = log
        .iter()
        .find(|c| c.field.contains(".lesions."))
        .unwrap_or_else(|| panic!("no size correction in {fields:?}"));
    let size = if is_whole_lesion(&size.field) {
        size.new_value["size"].clone()
    } else {
        size.new_value.clone()
    };
    let long = size["long_cm"].as_f64().expect("long axis");
    let short = size["short_cm"].as_f64().expect("short axis");
    assert!(
        (1.6..2.4).contains(&(long / short)),
        "a 120-pixel and a 60-pixel line give long ≈ 2 × short: {size}"
    );
    assert_eq!(
        store.case_state(&case_id).expect("state").status,
        keyslice::review::ReviewStatus::Done
    );
    store.integrity_check().expect("database intact");
}

/// `liver.lesions.0` (a lesion added by `L`) rather than `liver.lesions.0.size`.
fn is_whole_lesion(field: &str) -> bool {
    field
        .rsplit('.')
        .next()
        .is_some_and(|last| last.parse::<usize>().is_ok())
}

#[test]
fn real_window_shows_a_phantom_case_then_its_masks_in_colour() {
    if !tools_available() {
        return;
    }
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("xvfb-window");
    std::fs::create_dir_all(&out).expect("screenshot folder");
    let data = tempfile::tempdir().expect("phantom folder");
    let made = Command::new(env!("CARGO_BIN_EXE_keyslice"))
        .args([
            "phantom", "--cases", "1", "--seed", "2", "--matrix", "160", "--out",
        ])
        .arg(data.path())
        .output()
        .expect("phantom runs");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let ct = data.path().join("PHANTOM_2_0000").join("ct.nii.gz");
    let config = tempfile::tempdir().expect("config folder");
    let log = out.join("viewer-phantom.log");
    let (xvfb, display) = start_xvfb();
    let mut processes = Processes(vec![xvfb]);
    processes
        .0
        .push(spawn_viewer(&display, Some(&ct), config.path(), &log));
    // The CT is shown as soon as it is read; the masks follow (on a case this small they
    // may arrive before the first frame).
    wait_for_log(&log, "first slices drawn", Duration::from_mins(2));
    wait_for_log(&log, "masks shown", Duration::from_mins(2));
    std::thread::sleep(Duration::from_millis(1500));
    let window = xdotool(&display, &["search", "--name", "^Keyslice$"]);
    let window = window.lines().next().expect("the Keyslice window exists");
    let (x, y, width, height) = window_geometry(&display, window);
    let screen = Screen::grab(&display);
    screen.save(&out.join("phantom.png"));
    // The axial view at mid-volume crosses liver, kidneys or spleen: coloured overlay pixels
    // (channels far apart), where a grey CT has none.
    let mut coloured = 0;
    for row in y + height * 10 / 100..y + height * 90 / 100 {
        for column in x + width * 2 / 100..x + width * 48 / 100 {
            let [red, green, blue] = screen.rgb[row * screen.width + column];
            let spread = red.max(green).max(blue) - red.min(green).min(blue);
            coloured += usize::from(spread > 60);
        }
    }
    assert!(
        coloured > 500,
        "only {coloured} coloured pixels in the axial view (see {})",
        out.join("phantom.png").display()
    );
    // The recent list remembers the case.
    let settings =
        std::fs::read_to_string(config.path().join("settings.json")).expect("settings saved");
    assert!(settings.contains("PHANTOM_2_0000"), "{settings}");
    // Ctrl+O with no dialog service: a window asks for the path, which opens the study.
    xdotool(
        &display,
        &["windowfocus", "--sync", window, "key", "ctrl+o"],
    );
    wait_for_log(
        &log,
        "no file dialog service: asking for a typed path",
        Duration::from_secs(10),
    );
    std::thread::sleep(Duration::from_millis(800));
    Screen::grab(&display).save(&out.join("open-a-path.png"));
    let typed = ct.to_str().expect("utf-8 path");
    xdotool(
        &display,
        &[
            "windowfocus",
            "--sync",
            window,
            "type",
            "--delay",
            "5",
            typed,
        ],
    );
    xdotool(
        &display,
        &["windowfocus", "--sync", window, "key", "Return"],
    );
    wait_for_log_count(&log, "first slices drawn", 2, Duration::from_mins(1));
}

#[test]
fn live_analysis_in_the_window_runs_on_a_model_server_and_is_saved() {
    if !tools_available() {
        return;
    }
    let server = chat_server::Server::start(chat_server::good_model());
    let data = tempfile::tempdir().expect("phantom folder");
    let made = Command::new(env!("CARGO_BIN_EXE_keyslice"))
        .args([
            "phantom", "--cases", "1", "--seed", "4", "--matrix", "64", "--out",
        ])
        .arg(data.path())
        .output()
        .expect("phantom runs");
    assert!(made.status.success());
    let ct = data.path().join("PHANTOM_4_0000").join("ct.nii.gz");
    let config = tempfile::tempdir().expect("config folder");
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("xvfb-window");
    std::fs::create_dir_all(&out).expect("screenshot folder");
    let log = out.join("viewer-server.log");
    let (xvfb, display) = start_xvfb();
    let mut processes = Processes(vec![xvfb]);
    processes.0.push(spawn_viewer_with(
        &display,
        Some(&ct),
        &[
            "--backend",
            "openai",
            "--url",
            &server.url,
            "--model",
            "emrl-window",
            "--frames",
            "6",
        ],
        config.path(),
        &log,
    ));
    wait_for_log(&log, "first slices drawn", Duration::from_mins(2));
    std::thread::sleep(Duration::from_secs(1));
    let window = xdotool(&display, &["search", "--name", "^Keyslice$"]);
    let window = window
        .lines()
        .next()
        .expect("the Keyslice window exists")
        .to_string();
    xdotool(&display, &["windowfocus", "--sync", &window, "key", "a"]);
    // The report request (6 frames), then the key slice alone.
    let start = Instant::now();
    while server.seen().len() < 2 {
        assert!(
            start.elapsed() < Duration::from_mins(1),
            "the server saw {} request(s)",
            server.seen().len()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(chat_server::images(&server.seen()[0].body), 6);
    // The answer is saved in the study's scratch workspace, under the server's model name.
    let scratch = config.path().join("data").join("scratch");
    let saved = || -> String {
        std::fs::read_dir(&scratch)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter_map(|entry| {
                std::fs::read_to_string(entry.path().join("predictions.jsonl")).ok()
            })
            .collect()
    };
    let start = Instant::now();
    while !saved().contains("emrl-window") {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no saved prediction"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(1));
    Screen::grab(&display).save(&out.join("server-analysis.png"));
}

#[test]
fn real_window_reopens_full_hd_as_it_was_left_with_the_review_on_screen() {
    if !tools_available() {
        return;
    }
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("xvfb-window");
    std::fs::create_dir_all(&out).expect("screenshot folder");
    let config = tempfile::tempdir().expect("config folder");
    std::fs::write(
        config.path().join("settings.json"),
        r#"{"window_size": [1920.0, 1080.0], "panel_widths": [360.0, 300.0]}"#,
    )
    .expect("settings written");
    let log = out.join("viewer-full-hd.log");
    let (xvfb, display) = start_xvfb_sized("1920x1080x24");
    let mut processes = Processes(vec![xvfb]);
    processes
        .0
        .push(spawn_viewer(&display, None, config.path(), &log));
    wait_for_log(&log, "saved analysis shown", Duration::from_mins(3));
    std::thread::sleep(Duration::from_millis(1500));
    let window = xdotool(&display, &["search", "--name", "^Keyslice$"]);
    let window = window.lines().next().expect("the Keyslice window exists");
    let (_, _, width, height) = window_geometry(&display, window);
    assert_eq!((width, height), (1920, 1080), "the size it was left at");
    let screen = Screen::grab(&display);
    screen.save(&out.join("demo-workspace-1920x1080.png"));
    // The left panel (360 points as it was left) holds the worklist, then the evidence and
    // report of the case opened: below the worklist it is not empty background.
    let report_area = screen.greys((10, 250, 340, 700));
    assert!(
        distinct(&report_area) > 8,
        "the lower left panel is blank (see {})",
        out.join("demo-workspace-1920x1080.png").display()
    );
}
