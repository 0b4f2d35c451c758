//! The viewer panel as a person sees it: `egui_kittest` drives it with real input and renders
//! it with wgpu (lavapipe in CI) into a snapshot compared with `tests/snapshots/`.
//! `UPDATE_SNAPSHOTS=1 cargo test --test viewer_ui` rewrites the snapshots after a deliberate
//! change; look at them before committing.
//!
//! Without any GPU adapter these checks say so and pass, unless `KEYSLICE_REQUIRE_GPU=1`.

#![expect(
    clippy::float_cmp,
    reason = "Slice indices are whole numbers held in f64; exact comparison is the point."
)]

mod common;

use common::{bright_block, gpu_available};
use egui::Key;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use keyslice::render::view::Plane;
use keyslice::ui::viewport::{LesionMark, Viewer, ViewerGpu};
use keyslice::volume::Volume;
use keyslice::volume::demo::demo_abdomen;

struct State {
    viewer: Viewer,
    volume: Volume,
    /// A text field above the planes (a note, as the review panel has).
    note: Option<String>,
}

/// A harness of `size` running the viewer on `volume` with an optional mask overlay, rendered
/// by wgpu with the viewer's GPU resources installed.
fn viewer_harness(
    volume: Volume,
    masks: &[keyslice::volume::LabelVolume],
    size: egui::Vec2,
) -> Harness<'static, State> {
    viewer_harness_stepping(volume, masks, size, 0.25)
}

/// [`viewer_harness`] whose frames are `step_dt` seconds apart.
fn viewer_harness_stepping(
    volume: Volume,
    masks: &[keyslice::volume::LabelVolume],
    size: egui::Vec2,
    step_dt: f32,
) -> Harness<'static, State> {
    let render_state = egui_kittest::wgpu::create_render_state(
        egui_kittest::wgpu::default_wgpu_setup(),
        egui_wgpu::RendererOptions::PREDICTABLE,
    );
    let (combined, structures, _) = keyslice::volume::combine_structures(masks);
    let notices = ViewerGpu::install(&render_state, &volume, combined.as_ref());
    assert!(notices.is_empty(), "{notices:?}");
    let renderer = egui_kittest::wgpu::WgpuTestRenderer::from_render_state(render_state);
    let state = State {
        viewer: Viewer::new(&volume).with_structures(&structures),
        volume,
        note: None,
    };
    Harness::builder()
        .with_size(size)
        .with_step_dt(step_dt)
        .renderer(renderer)
        .build_ui_state(
            |ui, state: &mut State| {
                if let Some(note) = state.note.as_mut() {
                    let label = ui.label("note");
                    ui.text_edit_singleline(note).labelled_by(label.id);
                }
                let commands = state.viewer.viewer_ui(ui, &state.volume);
                for command in commands {
                    state.viewer.apply(command, &state.volume);
                }
            },
            state,
        )
}

/// The demo abdomen in a 900 × 560 harness, or `None` without a GPU.
fn harness_or_skip() -> Option<Harness<'static, State>> {
    gpu_available().then(|| viewer_harness(demo_abdomen(), &[], egui::Vec2::new(900.0, 560.0)))
}

#[test]
fn three_planes_of_the_demo_abdomen() {
    let Some(mut harness) = harness_or_skip() else {
        return;
    };
    harness.run();
    harness.snapshot("viewer_three_planes");
}

#[test]
fn preset_keys_set_window_and_level() {
    let Some(mut harness) = harness_or_skip() else {
        return;
    };
    harness.run();
    harness.key_press(Key::Num2);
    harness.run();
    assert_eq!(harness.state().viewer.window(), (150.0, 90.0));
    harness.key_press(Key::Num3);
    harness.run();
    assert_eq!(harness.state().viewer.window(), (1500.0, -600.0));
    harness.snapshot("viewer_lung_window");
}

#[test]
fn typing_in_a_text_field_triggers_no_viewer_shortcut() {
    let Some(mut harness) = harness_or_skip() else {
        return;
    };
    harness.state_mut().note = Some(String::new());
    harness.run();
    let window = harness.state().viewer.window();
    let status = harness.state().viewer.status_text(&harness.state().volume);
    harness
        .get_by_role(egui::accesskit::Role::TextInput)
        .click();
    harness.run();
    harness
        .get_by_role(egui::accesskit::Role::TextInput)
        .type_text("3.1 x 2.4 mr");
    // R (reset) first: pressed last, it would hide a window change made by 3.
    for key in [Key::R, Key::Num3, Key::M, Key::K] {
        harness.key_press(key);
        harness.run();
    }
    assert_eq!(harness.state().note.as_deref(), Some("3.1 x 2.4 mr"));
    assert_eq!(
        harness.state().viewer.window(),
        window,
        "3 is text, not the lung window"
    );
    assert_eq!(
        harness.state().viewer.status_text(&harness.state().volume),
        status
    );
}

#[test]
fn arrow_keys_scroll_the_active_plane_and_move_the_crosshair() {
    let Some(mut harness) = harness_or_skip() else {
        return;
    };
    harness.run();
    let before = harness.state().viewer.view(Plane::Axial).slice;
    harness.key_press(Key::ArrowUp);
    harness.run();
    harness.key_press(Key::PageUp);
    harness.run();
    let state = harness.state();
    assert_eq!(state.viewer.view(Plane::Axial).slice, before + 11.0);
    assert_eq!(state.viewer.crosshair[2], before + 11.0);
    assert!(
        state
            .viewer
            .status_text(&state.volume)
            .starts_with("axial slice 50 of 0–79"),
        "{}",
        state.viewer.status_text(&state.volume)
    );
}

fn wheel(harness: &mut Harness<'static, State>, unit: egui::MouseWheelUnit, dy: f32) {
    harness.event(egui::Event::MouseWheel {
        unit,
        delta: egui::Vec2::new(0.0, dy),
        phase: egui::TouchPhase::Move,
        source: egui::MouseWheelSource::Unknown,
        modifiers: egui::Modifiers::NONE,
    });
}

#[test]
fn one_wheel_notch_scrolls_exactly_one_slice_and_touchpads_add_up() {
    let Some(mut harness) = harness_or_skip() else {
        return;
    };
    // Over the axial view (the left 60 % of the harness).
    harness.event(egui::Event::PointerMoved(egui::Pos2::new(250.0, 280.0)));
    harness.run();
    let before = harness.state().viewer.view(Plane::Axial).slice;
    for _ in 0..3 {
        wheel(&mut harness, egui::MouseWheelUnit::Line, 1.0);
        harness.run();
    }
    assert_eq!(
        harness.state().viewer.view(Plane::Axial).slice,
        before + 3.0
    );
    wheel(&mut harness, egui::MouseWheelUnit::Line, -1.0);
    harness.run();
    assert_eq!(
        harness.state().viewer.view(Plane::Axial).slice,
        before + 2.0
    );
    // A touchpad sends points: 5 × 20 points = 2.5 lines → 2 slices, half a line kept.
    for _ in 0..5 {
        wheel(&mut harness, egui::MouseWheelUnit::Point, -20.0);
        harness.run();
    }
    assert_eq!(harness.state().viewer.view(Plane::Axial).slice, before);
    wheel(&mut harness, egui::MouseWheelUnit::Point, -20.0);
    harness.run();
    assert_eq!(
        harness.state().viewer.view(Plane::Axial).slice,
        before - 1.0
    );
    // The other planes did not move.
    assert_eq!(harness.state().viewer.view(Plane::Coronal).slice, 79.0);
}

/// A dark 40³ volume (1 mm voxels, LPS axes) with one bright 6³ cube centred on voxel
/// (30, 10, 20): on the patient's left, anterior, half-way up; a lesion mask covers it.
fn marker_cube() -> (Volume, keyslice::volume::LabelVolume) {
    bright_block(
        [40, 40, 40],
        [1.0; 3],
        &[27..33, 7..13, 17..23],
        1000,
        "liver_lesion",
    )
}

/// Centroid (as fractions of the rect) of pixels matching `keep` inside `rect` of `image`.
fn centroid(
    image: &image::RgbaImage,
    rect: egui::Rect,
    keep: impl Fn(&image::Rgba<u8>) -> bool,
) -> Option<(f32, f32)> {
    let (mut sum_x, mut sum_y, mut count) = (0.0, 0.0, 0.0);
    for y in rect.min.y as u32..rect.max.y as u32 {
        for x in rect.min.x as u32..rect.max.x as u32 {
            if keep(image.get_pixel(x, y)) {
                sum_x += x as f32;
                sum_y += y as f32;
                count += 1.0;
            }
        }
    }
    (count > 0.0).then(|| {
        (
            (sum_x / count - rect.min.x) / rect.width(),
            (sum_y / count - rect.min.y) / rect.height(),
        )
    })
}

#[test]
fn marker_cube_appears_where_radiologists_expect_it_in_each_plane() {
    if !gpu_available() {
        return;
    }
    let (volume, mask) = marker_cube();
    let size = egui::Vec2::new(1000.0, 622.0);
    let mut harness = viewer_harness(volume, &[mask], size);
    {
        let State { viewer, volume, .. } = harness.state_mut();
        viewer.apply(
            keyslice::ui::viewport::ViewerCommand::SetCrosshair([30.0, 10.0, 20.0]),
            volume,
        );
        viewer.mask_opacity = 0.0; // first the grey image alone
    }
    harness.run();
    let image = harness.render().expect("renders");
    // The layout of `viewer_ui`: axial on the left 60 %, coronal top right, sagittal below.
    let plane_height = size.y - 22.0;
    let split = size.x * 0.6;
    let axial =
        egui::Rect::from_min_max(egui::pos2(0.0, 0.0), egui::pos2(split - 2.0, plane_height));
    let coronal = egui::Rect::from_min_max(
        egui::pos2(split + 2.0, 0.0),
        egui::pos2(size.x, plane_height / 2.0 - 2.0),
    );
    let sagittal = egui::Rect::from_min_max(
        egui::pos2(split + 2.0, plane_height / 2.0 + 2.0),
        egui::pos2(size.x, plane_height),
    );
    let bright = |pixel: &image::Rgba<u8>| pixel[0] > 240 && pixel[1] > 240 && pixel[2] > 240;
    // Axial: patient left is screen right, anterior is up.
    let (x, y) = centroid(&image, axial, bright).expect("cube visible in axial");
    assert!(x > 0.6 && y < 0.4, "axial centroid ({x}, {y})");
    // Coronal: patient left on screen right, half-way up.
    let (x, y) = centroid(&image, coronal, bright).expect("cube visible in coronal");
    assert!(
        x > 0.6 && (0.35..0.65).contains(&y),
        "coronal centroid ({x}, {y})"
    );
    // Sagittal: anterior on screen left, half-way up.
    let (x, y) = centroid(&image, sagittal, bright).expect("cube visible in sagittal");
    assert!(
        x < 0.4 && (0.35..0.65).contains(&y),
        "sagittal centroid ({x}, {y})"
    );

    // With the lesion overlay on, the cube turns red in the axial plane.
    harness.state_mut().viewer.mask_opacity = 1.0;
    harness.run();
    let image = harness.render().expect("renders");
    let red = |pixel: &image::Rgba<u8>| pixel[0] > 240 && pixel[1] < 60 && pixel[2] < 60;
    let (x, y) = centroid(&image, axial, red).expect("lesion overlay visible");
    assert!(x > 0.6 && y < 0.4, "overlay centroid ({x}, {y})");
    harness.snapshot("viewer_marker_cube_overlay");
    // Hiding the structure removes the tint.
    let State { viewer, volume, .. } = harness.state_mut();
    viewer.apply(
        keyslice::ui::viewport::ViewerCommand::ToggleStructure(9),
        volume,
    );
    harness.run();
    let image = harness.render().expect("renders");
    assert!(
        centroid(&image, axial, red).is_none(),
        "hidden structure still drawn"
    );
}

fn click(harness: &mut Harness<'static, State>, pos: egui::Pos2) {
    harness.event(egui::Event::PointerMoved(pos));
    harness.run();
    for pressed in [true, false] {
        harness.event(egui::Event::PointerButton {
            pos,
            button: egui::PointerButton::Primary,
            pressed,
            modifiers: egui::Modifiers::NONE,
        });
        harness.run();
    }
}

/// Two clicks at `pos`, each press and release a frame apart (the harness steps 50 ms a
/// frame, well within the double-click time); the crosshair has moved after the first.
fn double_click(harness: &mut Harness<'static, State>, pos: egui::Pos2) {
    harness.event(egui::Event::PointerMoved(pos));
    // Half a second since any earlier click, so these two are a double-click, not more.
    for _ in 0..10 {
        harness.step();
    }
    let before = harness.state().viewer.crosshair;
    for click in 0..2 {
        for pressed in [true, false] {
            harness.event(egui::Event::PointerButton {
                pos,
                button: egui::PointerButton::Primary,
                pressed,
                modifiers: egui::Modifiers::NONE,
            });
            harness.step();
        }
        if click == 0 && harness.state().viewer.enlarged.is_none() {
            assert_ne!(harness.state().viewer.crosshair, before, "a click moves it");
        }
    }
    harness.run();
}

#[test]
fn a_double_click_enlarges_the_plane_and_leaves_the_crosshair_where_it_was() {
    if !gpu_available() {
        return;
    }
    let mut harness =
        viewer_harness_stepping(demo_abdomen(), &[], egui::Vec2::new(900.0, 560.0), 0.05);
    harness.run();
    let before = harness.state().viewer.crosshair;
    // One click moves the crosshair; a second at once makes it a double-click.
    let at = egui::pos2(150.0, 300.0);
    double_click(&mut harness, at);
    assert_eq!(harness.state().viewer.enlarged, Some(Plane::Axial));
    assert_eq!(
        harness.state().viewer.crosshair,
        before,
        "the double-click puts back the crosshair (and the slices) it found"
    );
    // Another double-click brings the three planes back, the crosshair still in place.
    double_click(&mut harness, at);
    assert_eq!(harness.state().viewer.enlarged, None);
    assert_eq!(harness.state().viewer.crosshair, before);
}

#[test]
fn ruler_measures_millimetres_on_the_axial_plane() {
    let Some(mut harness) = harness_or_skip() else {
        return;
    };
    harness.run();
    harness.key_press(Key::M);
    harness.run();
    assert!(harness.state().viewer.ruler);
    // The harness's Ui has an 8 px margin: the axial plane is 0.6 · 884 − 2 = 528.4 px wide and
    // 560 − 16 − 22 = 522 px tall, showing 288 × 240 mm (192 × 160 voxels of 1.5 mm), so the
    // width sets the scale: 288 / 528.4 mm per pixel.
    click(&mut harness, egui::pos2(150.0, 300.0));
    click(&mut harness, egui::pos2(250.0, 300.0));
    let measurements = &harness.state().viewer.measurements;
    assert_eq!(measurements.len(), 1, "{measurements:?}");
    let expected = 100.0 * 288.0 / 528.4;
    assert!(
        (measurements[0].length_mm - expected).abs() < 0.2,
        "{} mm vs {expected} mm",
        measurements[0].length_mm
    );
    harness.snapshot("viewer_ruler");
}

#[test]
fn k_jumps_to_the_key_slice_marked_on_the_slice_bar() {
    let Some(mut harness) = harness_or_skip() else {
        return;
    };
    {
        let State { viewer, volume, .. } = harness.state_mut();
        viewer.apply(
            keyslice::ui::viewport::ViewerCommand::SetKeySlice(Some(46.0)),
            volume,
        );
        // A lesion's extent: the stripe left of the axial slice bar, around the key slice.
        viewer.lesion_marks = vec![LesionMark {
            name: "liver_lesion".into(),
            label: 9,
            first_slice: 40,
            last_slice: 52,
        }];
    }
    harness.run();
    harness.key_press(Key::K);
    harness.run();
    let state = harness.state();
    assert_eq!(state.viewer.view(Plane::Axial).slice, 46.0);
    assert_eq!(state.viewer.crosshair[2], 46.0);
    harness.snapshot("viewer_key_slice");
}

#[test]
fn side_panel_lists_the_key_slice_and_lesion_extents_and_goes_there() {
    if !gpu_available() {
        return;
    }
    let volume = demo_abdomen();
    let viewer = Viewer::new(&volume).with_lesions(
        vec![
            LesionMark {
                name: "liver_lesion".into(),
                label: 9,
                first_slice: 40,
                last_slice: 52,
            },
            LesionMark {
                name: "kidney_lesion".into(),
                label: 11,
                first_slice: 20,
                last_slice: 24,
            },
        ],
        Some((46, "most lesion voxels, from the case masks".into())),
    );
    let mut harness = Harness::builder()
        .with_size(egui::Vec2::new(260.0, 420.0))
        .wgpu()
        .build_ui_state(
            |ui, state: &mut State| {
                let commands = state.viewer.side_panel_ui(ui);
                for command in commands {
                    state.viewer.apply(command, &state.volume);
                }
            },
            State {
                viewer,
                volume,
                note: None,
            },
        );
    harness.run();
    assert_ne!(harness.state().viewer.view(Plane::Axial).slice, 22.0);
    // The second "go" button belongs to the kidney lesion (slices 21–25 as shown, 20–24 as
    // indices): it moves the axial plane to the middle of the extent.
    harness
        .get_all_by_label("go")
        .nth(1)
        .expect("two lesion rows")
        .click();
    harness.run();
    assert_eq!(harness.state().viewer.view(Plane::Axial).slice, 22.0);
    harness.get_by_label("go (K)").click();
    harness.run();
    assert_eq!(harness.state().viewer.view(Plane::Axial).slice, 46.0);
    harness.snapshot("side_panel_key_slice");
}

/// What the analysis, evidence and report panels returned last.
#[derive(Default)]
struct PanelsState {
    analysis: Option<keyslice::ui::analysis::AnalysisCommand>,
    report: Option<keyslice::ui::report::ReportCommand>,
    thumbnail: Option<(egui::TextureHandle, usize)>,
}

/// The analysis header, evidence and report panels of `prediction` (as the app's left panel
/// draws them), with the key slice thumbnail cut from `volume`.
fn panels_harness(
    prediction: keyslice::infer::Prediction,
    volume: &Volume,
    size: egui::Vec2,
) -> Harness<'static, PanelsState> {
    use keyslice::scoring::{SizeTolerance, attribute_checks};
    use keyslice::ui::analysis::{AnalysisState, analysis_ui};
    use keyslice::ui::report::{evidence_ui, report_ui, thumbnail_image};
    let image = prediction.key_slice.as_ref().and_then(|key| {
        keyslice::infer::KeySliceImage::extract(volume, key.index, None)
            .map(|s| thumbnail_image(&s))
    });
    let checks = prediction
        .local_findings
        .as_ref()
        .map(|local| attribute_checks(&prediction.findings, local, SizeTolerance::default()))
        .unwrap_or_default();
    let state = AnalysisState::Done(Box::new(prediction.clone()));
    Harness::builder().with_size(size).wgpu().build_ui_state(
        move |ui, panels: &mut PanelsState| {
            if panels.thumbnail.is_none()
                && let Some((image, stride)) = image.clone()
            {
                let texture =
                    ui.ctx()
                        .load_texture("evidence", image, egui::TextureOptions::LINEAR);
                panels.thumbnail = Some((texture, stride));
            }
            if let Some(command) = analysis_ui(
                ui,
                &state,
                "keyslice-tiny (synthetic-trained, not for clinical use)",
            ) {
                panels.analysis = Some(command);
            }
            let thumbnail = panels.thumbnail.as_ref().map(|(t, s)| (t, *s));
            if let Some(command) = evidence_ui(ui, &prediction, &checks, thumbnail) {
                panels.report = Some(command);
            }
            ui.separator();
            if let Some(command) = report_ui(ui, &prediction, &checks, ui.clip_rect().bottom()) {
                panels.report = Some(command);
            }
        },
        PanelsState::default(),
    )
}

#[test]
fn analysis_panels_show_the_embedded_models_evidence_and_report() {
    use keyslice::infer::embedded::{TinyDiagnoser, TinyModel, TinyVerifier};
    use keyslice::ui::analysis::AnalysisCommand;
    use keyslice::ui::report::ReportCommand;
    if !gpu_available() {
        return;
    }
    // A phantom with a 4.2 × 4.1 cm liver tumor in segment II, analysed by the embedded model
    // for real (the shipped model finds it, one lesion of 4.0 × 3.7 cm in segment II: a key
    // slice, a verifier reading and a consistency to show; the key slice is the tumor's
    // largest section, 83, where the evidence reader measures 5.4 × 4.3 cm, more than the
    // diagnoser's 4.0 × 3.7: the consistency is 0.75 with the size in red).
    let case = keyslice::phantom::generate(
        5,
        2,
        keyslice::phantom::PhantomOptions {
            matrix: 128,
            slice_mm: Some(2.5),
        },
    );
    let model = TinyModel::embedded().expect("embedded model");
    let mut prediction = keyslice::infer::run_pipeline(
        "PHANTOM_5_0002",
        &case.volume,
        &TinyDiagnoser(&model),
        Some(&TinyVerifier(&model)),
    )
    .expect("pipeline runs");
    let has_key_slice = prediction.key_slice.is_some();
    // Timings differ run to run; fixed for a stable snapshot.
    prediction.timings_ms = keyslice::infer::Timings {
        diagnose: 850.0,
        verify: 40.0,
        total: 890.0,
    };
    let mut harness = panels_harness(prediction, &case.volume, egui::Vec2::new(300.0, 760.0));
    harness.run();
    harness.get_by_label("Report");
    if has_key_slice {
        harness.get_by_label("Verifier, the evidence only:");
        harness.get_by_label("go (K)").click();
        harness.run();
        assert_eq!(harness.state().report, Some(ReportCommand::JumpToKeySlice));
    }
    harness.get_by_label("Analyze again").click();
    harness.run();
    assert_eq!(harness.state().analysis, Some(AnalysisCommand::Run));
    harness.snapshot("analysis_panel");
}

/// A keyslice-tiny prediction of `report` at `key`, with the verifier's `local` description
/// and their consistency (no box, no timings).
fn reported_prediction(
    case_id: &str,
    version: &str,
    report: &str,
    local: &str,
    key: keyslice::infer::PredictionKeySlice,
) -> keyslice::infer::Prediction {
    use keyslice::findings::read_report;
    use keyslice::scoring::{SizeTolerance, consistency};
    let findings = read_report(report).findings;
    let local_findings = read_report(local).findings;
    keyslice::infer::Prediction {
        version: keyslice::infer::PREDICTION_VERSION,
        case_id: case_id.into(),
        diagnoser: keyslice::infer::ModelId {
            id: "keyslice-tiny".into(),
            version: version.into(),
        },
        verifier: None,
        report: report.into(),
        consistency: Some(consistency(
            &findings,
            &local_findings,
            SizeTolerance::default(),
        )),
        findings,
        key_slice: Some(key),
        slice_box: None,
        input: None,
        video_refused: None,
        local_description: Some(local.into()),
        local_findings: Some(local_findings),
        lesion_checks: Vec::new(),
        timings_ms: keyslice::infer::Timings::default(),
        warnings: Vec::new(),
        out_of_domain: None,
        stored: None,
        images: None,
    }
}

#[test]
fn report_colours_each_value_by_what_the_key_slice_shows_and_says_why() {
    use keyslice::infer::PredictionKeySlice;
    use keyslice::ui::report::ReportCommand;
    if !gpu_available() {
        return;
    }
    // A report whose liver lesion the key slice shows with another attenuation, and a
    // pancreas lesion the slice (through the liver) cannot speak to.
    let volume = demo_abdomen();
    let report = "Liver: a 3.0 x 2.5 cm hypoattenuating lesion in segment 7.\n\
                  Pancreas: a 2.0 cm hypoattenuating lesion in the pancreatic tail.\n\
                  Kidneys: no focal lesion.\n";
    let local = "Liver: a 3.1 x 2.4 cm hyperattenuating lesion in segment 7.\n";
    let mut prediction = reported_prediction(
        "demo",
        "1",
        report,
        local,
        PredictionKeySlice::of(&volume, 30),
    );
    prediction.slice_box = Some(keyslice::findings::SliceBox {
        voxels: [40, 30, 70, 55],
        mm: None,
    });
    let mut harness = panels_harness(prediction, &volume, egui::Vec2::new(320.0, 720.0));
    harness.run();
    harness.get_by_label_contains("liver lesion 1: the attenuation differs");
    // The pancreas is not on the key slice: grey, not a reason for the low score.
    harness.get_by_label_contains("pancreas: tumor · 2.0 cm");
    assert!(
        harness
            .query_by_label_contains("pancreas: the report's tumor statement")
            .is_none()
    );
    harness
        .get_by_label_contains("liver: tumor · 3.0×2.5 cm")
        .click();
    harness.run();
    assert_eq!(harness.state().report, Some(ReportCommand::JumpToKeySlice));
    harness.snapshot("report_and_evidence");
}

#[test]
fn a_study_opened_from_the_pacs_shows_where_its_result_was_stored_and_each_reviewers_correction() {
    use keyslice::findings::{Organ, TumorPresence};
    use keyslice::infer::PredictionKeySlice;
    use keyslice::pacs::results::StudyResults;
    use keyslice::pacs::sr::read::{Document, read_bytes};
    use keyslice::pacs::sr::write::result_sr;
    use keyslice::pacs::sr::{CaseResult, StudyContext};
    use keyslice::ui::analysis::AnalysisCommand;
    if !gpu_available() {
        return;
    }
    // The AI result and two reviewers' corrections go through real SR documents (written,
    // then read back) as they would through the PACS.
    let volume = demo_abdomen();
    let report = "Liver: a 3.0 x 2.5 cm hypoattenuating lesion in segment 7.\n\
                  Pancreas: no focal lesion.\nKidneys: no focal lesion.\n";
    let local = "Liver: a 3.1 x 2.4 cm hypoattenuating lesion in segment 7.\n";
    let made_here = reported_prediction(
        "pacs-1",
        "6-rl",
        report,
        local,
        PredictionKeySlice::of(&volume, 30),
    );
    let study = StudyContext::from_file(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/dicom/CT_small.dcm"),
    )
    .expect("the committed CT sample");
    let stored = |result: &CaseResult, when: &str| {
        let written = result_sr(&study, result).expect("SR written");
        let Ok(Document::Result(mut document)) = read_bytes(&written.bytes) else {
            panic!("the SR reads back as a result");
        };
        // Fixed for a stable snapshot: the documents are stamped with the time of writing.
        document.content_date_time = when.into();
        *document
    };
    let ai = CaseResult::from_prediction(&made_here);
    let mut liver_clear = ai.findings.clone();
    liver_clear.organ_mut(Organ::Liver).tumor = TumorPresence::No;
    liver_clear.organ_mut(Organ::Liver).lesions.clear();
    let ana = CaseResult::correction(&ai, "Ana", &liver_clear);
    let mut key_moved = ai.findings.clone();
    if let Some(key) = key_moved.key_slice.as_mut() {
        key.index = 34;
    }
    let ben = CaseResult::correction(&ai, "Ben", &key_moved);
    let results = StudyResults {
        ai: vec![stored(&ai, "20261205111825")],
        reviews: vec![
            stored(&ana, "20261205112204"),
            stored(&ben, "20261205114010"),
        ],
        ..StudyResults::default()
    };
    let prediction = results
        .prediction("pacs-1", "https://pacs.example.org/dicom-web")
        .expect("an AI result");
    let mut harness = panels_harness(prediction, &volume, egui::Vec2::new(320.0, 900.0));
    harness.run();
    harness.get_by_label_contains("keyslice-tiny 6-rl · stored on the PACS");
    harness.get_by_label("SR of 2026-12-05 11:18 UTC on https://pacs.example.org/dicom-web");
    harness.get_by_label("Reviews on the PACS");
    harness.get_by_label("Ana");
    harness.get_by_label_contains(
        "• liver: no tumor (was: tumor · 3.0×2.5 cm, hypoattenuating, segment 7)",
    );
    harness.get_by_label("Ben");
    harness.get_by_label("• key slice 34 (was 30)");
    harness.get_by_label("Analyze again").click();
    harness.run();
    assert_eq!(harness.state().analysis, Some(AnalysisCommand::Run));
    harness.snapshot("analysis_panel_from_the_pacs");
}

/// The findings editor on `review`, applying its commands as the app does.
fn editor_harness(
    review: keyslice::review::CaseReview,
) -> Harness<'static, keyslice::review::CaseReview> {
    use keyslice::findings::LesionSize;
    use keyslice::review::CaseReview;
    use keyslice::ui::editor::{EditCommand, FindingsEditor, key_slice_here};
    Harness::builder()
        .with_size(egui::Vec2::new(330.0, 500.0))
        .wgpu()
        .build_ui_state(
            |ui, review: &mut CaseReview| {
                let current_slice = keyslice::findings::KeySlice {
                    index: 52,
                    z_mm: Some(130.0),
                    sop_instance_uid: None,
                    span: None,
                };
                let editor = FindingsEditor {
                    case: review.case(),
                    model: review.base(),
                    history: review.history(),
                    current_slice: current_slice.clone(),
                    ruler: Some(LesionSize {
                        long_cm: 2.8,
                        short_cm: Some(1.9),
                    }),
                    review_keys: true,
                    masks: &std::collections::BTreeMap::new(),
                    drawing: None,
                };
                let findings = review.case().findings.clone();
                let commands = editor.ui(ui).into_iter().flat_map(|command| match command {
                    EditCommand::KeySliceHere => key_slice_here(&current_slice, &findings),
                    other => vec![other],
                });
                for command in commands {
                    match command {
                        EditCommand::Set { field, value } => {
                            review.set_field(field, value).expect("saved");
                        }
                        EditCommand::Undo => {
                            review.undo().expect("undone");
                        }
                        EditCommand::Redo => {
                            review.redo().expect("redone");
                        }
                        EditCommand::KeySliceHere => unreachable!("resolved above"),
                        // Moves the viewer, not the review; masks are the app's.
                        EditCommand::ShowSlice(_) | EditCommand::Mask(_) => {}
                    }
                }
            },
            review,
        )
}

/// The first text field of the findings editor: the first lesion's size.
fn size_field<'h>(
    harness: &'h Harness<'static, keyslice::review::CaseReview>,
) -> egui_kittest::Node<'h> {
    harness
        .get_all_by_role(egui::accesskit::Role::TextInput)
        .next()
        .expect("the lesion's size field")
}

/// A review in `folder` of a model's findings: a liver lesion of 3.0 × 2.5 cm, key slice 40
/// and lesion slices 36–44, then `adjust`ed.
fn liver_review(
    folder: &std::path::Path,
    adjust: impl FnOnce(&mut keyslice::findings::Findings),
) -> keyslice::review::CaseReview {
    let mut base = keyslice::findings::read_report(
        "Liver: a 3.0 x 2.5 cm hypoattenuating lesion in segment 7. Kidneys: no focal lesion.",
    )
    .findings
    .without_spans();
    base.key_slice = Some(keyslice::findings::KeySlice {
        index: 40,
        z_mm: Some(100.0),
        sop_instance_uid: None,
        span: None,
    });
    base.lesion_slices = Some(keyslice::findings::SliceRange {
        first: 36,
        last: 44,
    });
    adjust(&mut base);
    keyslice::review::CaseReview::open(
        &folder.join("review.sqlite"),
        "case",
        "dr. kittest",
        Some(base),
    )
    .expect("review opens")
}

#[test]
fn findings_editor_records_size_key_slice_lesions_and_undo() {
    use keyslice::findings::{LesionSize, Organ};
    use keyslice::review::CaseReview;
    if !gpu_available() {
        return;
    }
    let folder = tempfile::tempdir().expect("temp dir");
    let review = liver_review(folder.path(), |_| {});
    let mut harness = editor_harness(review);
    harness.run();
    // Type a size into the lesion's field and leave it.
    assert_eq!(
        size_field(&harness).value().as_deref(),
        Some("3.0 × 2.5 cm")
    );
    size_field(&harness).click();
    harness.run();
    harness.key_press_modifiers(egui::Modifiers::COMMAND, Key::A);
    size_field(&harness).type_text("34 x 22 mm");
    harness.key_press(Key::Enter);
    harness.run();
    let size = |review: &CaseReview| review.case().findings.organ(Organ::Liver).lesions[0].size;
    assert_eq!(
        size(harness.state()),
        Some(LesionSize {
            long_cm: 3.4,
            short_cm: Some(2.2)
        })
    );
    // S: key slice = the slice on screen.
    harness.key_press(Key::S);
    harness.run();
    let key = |review: &CaseReview| review.case().findings.key_slice.as_ref().map(|k| k.index);
    assert_eq!(key(harness.state()), Some(52));
    // The lesion's slice range is the reviewer's to set: it stays as it was, and what to do
    // about a key slice outside it is said.
    assert_eq!(
        harness.state().case().findings.lesion_slices,
        Some(keyslice::findings::SliceRange {
            first: 36,
            last: 44
        })
    );
    let current = keyslice::findings::KeySlice {
        index: 52,
        z_mm: None,
        sop_instance_uid: None,
        span: None,
    };
    let note = keyslice::ui::editor::key_slice_note(&current, &harness.state().case().findings)
        .expect("a note");
    assert!(note.contains("outside the lesion slices 36–44, which are left as they were"));
    // A pancreas lesion from the ruler, then Ctrl+Z takes it back and Ctrl+Y restores it.
    harness
        .get_all_by_label("+ lesion")
        .nth(1)
        .expect("pancreas")
        .click();
    harness.run();
    let pancreas =
        |review: &CaseReview| review.case().findings.organ(Organ::Pancreas).lesions.len();
    assert_eq!(pancreas(harness.state()), 1);
    harness.key_press_modifiers(egui::Modifiers::COMMAND, Key::Z);
    harness.run();
    assert_eq!(pancreas(harness.state()), 0);
    harness.key_press_modifiers(egui::Modifiers::COMMAND, Key::Y);
    harness.run();
    assert_eq!(pancreas(harness.state()), 1);
    // size, key slice with its slice range (one correction: one key, one undo), pancreas
    // presence (a lesion means a tumor), lesion, undo, redo.
    assert_eq!(harness.state().log().len(), 6);
    assert_eq!(
        harness.state().case().findings.organ(Organ::Pancreas).tumor,
        keyslice::findings::TumorPresence::Yes
    );
    harness.snapshot("findings_editor");
}

/// A lesion's own evidence is made from the key evidence on screen (the slice, box and
/// slices drawn with the box tool), shown as a button that goes to its slice, and cleared;
/// each change one correction.
#[test]
fn findings_editor_gives_a_lesion_its_own_evidence() {
    use keyslice::findings::{Evidence, Organ, SliceBox, SliceRange};
    use keyslice::review::CaseReview;
    if !gpu_available() {
        return;
    }
    let folder = tempfile::tempdir().expect("temp dir");
    let review = liver_review(folder.path(), |base| {
        base.slice_box = Some(SliceBox {
            voxels: [20, 30, 34, 41],
            mm: None,
        });
    });
    let mut harness = editor_harness(review);
    harness.run();
    harness.get_by_label("none");
    harness.get_by_label("= key evidence").click();
    harness.run();
    let evidence = |review: &CaseReview| {
        review.case().findings.organ(Organ::Liver).lesions[0]
            .evidence
            .clone()
    };
    assert_eq!(
        evidence(harness.state()),
        Some(Evidence {
            key_slice: 40,
            slice_box: Some(SliceBox {
                voxels: [20, 30, 34, 41],
                mm: None,
            }),
            slices: Some(SliceRange {
                first: 36,
                last: 44
            }),
        })
    );
    assert_eq!(
        harness
            .state()
            .log()
            .last()
            .map(|entry| entry.field.as_str()),
        Some("liver.lesions.0.evidence")
    );
    harness.get_by_label("slice 40");
    harness.snapshot("findings_editor_lesion_evidence");
    harness.get_by_label("clear").click();
    harness.run();
    assert_eq!(evidence(harness.state()), None);
    harness.key_press_modifiers(egui::Modifiers::COMMAND, Key::Z);
    harness.run();
    assert!(evidence(harness.state()).is_some(), "undone");
}

#[test]
fn question_mark_opens_the_keyboard_help() {
    if !gpu_available() {
        return;
    }
    let mut harness = Harness::builder()
        .with_size(egui::Vec2::new(640.0, 560.0))
        .wgpu()
        .build_ui_state(
            |ui, open: &mut bool| keyslice::ui::help::help_ui(ui.ctx(), open),
            false,
        );
    harness.run();
    assert!(harness.query_by_label("Keyboard").is_none());
    harness.event(egui::Event::Text("?".into()));
    harness.run();
    harness.get_by_label("Keyboard");
    harness.get_by_label("key slice = the axial slice on screen");
    harness.snapshot("help_overlay");
    harness.key_press(Key::Escape);
    harness.run();
    assert!(!*harness.state());
}

#[test]
fn worklist_lists_cases_with_status_and_consistency_and_picks_one() {
    use keyslice::review::ReviewStatus;
    use keyslice::review::workspace::WorklistEntry;
    use keyslice::ui::worklist::{WorklistCommand, worklist_ui};
    if !gpu_available() {
        return;
    }
    let entry = |case_id: &str, status, consistency| WorklistEntry {
        case_id: case_id.into(),
        status,
        reviewer: None,
        consistency,
        attention: None,
        patient: None,
        out_of_domain: false,
    };
    let mut negative = entry("PHANTOM_2026_0003", ReviewStatus::New, None);
    negative.attention =
        Some("called negative with no evidence slice: check for a missed tumor".into());
    // A CT the demo model is out of its depth on: first, labelled, its high score not shown.
    let mut unfamiliar = entry("abdomen-ct", ReviewStatus::New, Some(0.95));
    unfamiliar.attention = Some(
        "demo model: not meaningful for this CT: image noise 0 HU (training phantoms 9 HU–21 HU)"
            .into(),
    );
    unfamiliar.out_of_domain = true;
    let worklist = vec![
        entry("PHANTOM_2026_0002", ReviewStatus::New, Some(0.25)),
        entry("PHANTOM_2026_0000", ReviewStatus::InReview, Some(0.62)),
        entry("PHANTOM_2026_0001", ReviewStatus::Done, Some(0.91)),
        entry("standard", ReviewStatus::Flagged, None),
        negative,
        unfamiliar,
    ];
    let mut harness = Harness::builder()
        .with_size(egui::Vec2::new(420.0, 260.0))
        .wgpu()
        .build_ui_state(
            |ui, picked: &mut Option<WorklistCommand>| {
                if let Some(command) = worklist_ui(
                    ui,
                    std::path::Path::new("/data/demo"),
                    &worklist,
                    Some("PHANTOM_2026_0002"),
                    true,
                    "Dr. Ana Lima",
                ) {
                    *picked = Some(command);
                }
            },
            None,
        );
    harness.run();
    harness.get_by_label("flagged");
    // Short in its column, the model's whole word on hover.
    harness.get_by_label("not meaningful");
    assert!(
        harness.query_by_label("0.95").is_none(),
        "a score the demo model cannot stand behind is not shown"
    );
    harness.get_by_label("PHANTOM_2026_0001").click();
    harness.run();
    assert_eq!(
        harness.state(),
        &Some(WorklistCommand::Open("PHANTOM_2026_0001".into()))
    );
    harness.get_by_label("Flag (F)").click();
    harness.run();
    assert_eq!(
        harness.state(),
        &Some(WorklistCommand::SetStatus(ReviewStatus::Flagged))
    );
    // N opens the next case in the order shown (lowest consistency first).
    harness.key_press(egui::Key::N);
    harness.run();
    assert_eq!(
        harness.state(),
        &Some(WorklistCommand::Open("PHANTOM_2026_0000".into()))
    );
    // A case without grounded evidence comes before the lowest consistency: P reaches it.
    harness.key_press(egui::Key::P);
    harness.run();
    assert_eq!(
        harness.state(),
        &Some(WorklistCommand::Open("PHANTOM_2026_0003".into()))
    );
    harness.snapshot("worklist");
}

fn drag(harness: &mut Harness<'static, State>, from: egui::Pos2, to: egui::Pos2) {
    harness.event(egui::Event::PointerMoved(from));
    harness.run();
    harness.event(egui::Event::PointerButton {
        pos: from,
        button: egui::PointerButton::Primary,
        pressed: true,
        modifiers: egui::Modifiers::NONE,
    });
    harness.run();
    for step in 1..=4 {
        let t = step as f32 / 4.0;
        harness.event(egui::Event::PointerMoved(from + (to - from) * t));
        harness.run();
    }
    harness.event(egui::Event::PointerButton {
        pos: to,
        button: egui::PointerButton::Primary,
        pressed: false,
        modifiers: egui::Modifiers::NONE,
    });
    harness.run();
}

#[test]
fn the_evidence_box_and_its_extent_show_on_all_planes_and_the_box_tool_edits_them() {
    use keyslice::ui::viewport::{Evidence, ViewerCommand};
    let Some(mut harness) = harness_or_skip() else {
        return;
    };
    {
        let State { viewer, volume, .. } = harness.state_mut();
        // A box on key slice 46 over columns 60-100, rows 50-80; the lesion on slices 40-52.
        viewer.evidence = Some(Evidence {
            voxels: [60, 50, 100, 80],
            key_slice: 46,
            slices: Some((40, 52)),
        });
        viewer.apply(ViewerCommand::SetCrosshair([80.0, 65.0, 46.0]), volume);
    }
    harness.run();
    harness.snapshot("viewer_evidence_three_planes");

    // B, then a drag on the axial plane outside the box: a new box on the slice shown, the
    // range kept because it holds that slice. Axial scale: 528.4 px for 192 columns.
    harness.key_press(Key::B);
    harness.run();
    assert!(harness.state().viewer.box_tool);
    let px = 528.4 / 192.0;
    drag(
        &mut harness,
        egui::pos2(60.0, 120.0),
        egui::pos2(60.0 + 20.0 * px, 120.0 + 10.0 * px),
    );
    let drawn = harness.state().viewer.evidence.expect("a box");
    let [c0, r0, c1, r1] = drawn.voxels;
    assert!(
        (19..=21).contains(&(c1 - c0)) && (9..=11).contains(&(r1 - r0)),
        "{drawn:?}"
    );
    assert_eq!((drawn.key_slice, drawn.slices), (46, Some((40, 52))));
    // A drag from inside moves it, the same size.
    let centre = egui::pos2(60.0 + 10.0 * px, 120.0 + 5.0 * px);
    drag(&mut harness, centre, centre + egui::vec2(15.0 * px, 0.0));
    let moved = harness.state().viewer.evidence.expect("a box");
    assert_eq!(moved.voxels[2] - moved.voxels[0], c1 - c0, "{moved:?}");
    assert!(
        (14..=16).contains(&(moved.voxels[0] - c0)),
        "{moved:?} from {drawn:?}"
    );
    assert_eq!(moved.voxels[1], r0);
    // With the tool on, a click does not move the crosshair.
    let crosshair = harness.state().viewer.crosshair;
    click(&mut harness, egui::pos2(300.0, 400.0));
    assert_eq!(harness.state().viewer.crosshair, crosshair);
}

/// The mask row of a lesion being drawn, with what its mask measures: the measures, "use as
/// size", the brush's size and shape; its buttons give the app their commands.
#[test]
fn the_mask_row_shows_what_a_drawn_mask_measures_and_asks_for_its_changes() {
    use keyslice::findings::Organ;
    use keyslice::ui::masks::{MaskCommand, MaskOp};
    use keyslice::ui::viewport::PaintBrush;
    use keyslice::volume::lesion::measure;
    use keyslice::volume::mask::{Brush, paint};
    struct State {
        review: keyslice::review::CaseReview,
        measures: std::collections::BTreeMap<(Organ, usize), keyslice::volume::lesion::Measures>,
        asked: Vec<MaskCommand>,
    }
    if !gpu_available() {
        return;
    }
    let folder = tempfile::tempdir().expect("temp dir");
    let review = liver_review(folder.path(), |_| {});
    // A ball of 9 mm radius on 1 mm voxels.
    let dims = [40, 40, 40];
    let mut mask = vec![0u8; 40 * 40 * 40];
    paint(
        &mut mask,
        dims,
        [1.0; 3],
        [20, 20, 20],
        9.0,
        Brush::Ball,
        true,
    )
    .expect("painted");
    let measures = std::collections::BTreeMap::from([(
        (Organ::Liver, 0),
        measure(&mask, dims, [1.0; 3]).expect("measured"),
    )]);
    let mut harness = Harness::builder()
        .with_size(egui::Vec2::new(360.0, 420.0))
        .wgpu()
        .build_ui_state(
            |ui, state: &mut State| {
                let editor = keyslice::ui::editor::FindingsEditor {
                    case: state.review.case(),
                    model: state.review.base(),
                    history: state.review.history(),
                    current_slice: keyslice::findings::KeySlice {
                        index: 40,
                        z_mm: None,
                        sop_instance_uid: None,
                        span: None,
                    },
                    ruler: None,
                    review_keys: false,
                    masks: &state.measures,
                    drawing: Some(((Organ::Liver, 0), PaintBrush::default())),
                };
                for command in editor.ui(ui) {
                    if let keyslice::ui::editor::EditCommand::Mask(command) = command {
                        state.asked.push(command);
                    }
                }
            },
            State {
                review,
                measures,
                asked: Vec::new(),
            },
        );
    harness.run();
    // 19 voxels across, edge to edge: 19 mm; 2.87 mL of 1 mm³ voxels.
    harness.get_by_label_contains(" mm · slices 11–29");
    harness.snapshot("findings_editor_mask");
    harness.get_by_label("use as size").click();
    harness.run();
    harness.get_by_label("smooth").click();
    harness.run();
    harness.get_by_label("drawing").click();
    harness.run();
    assert_eq!(
        harness.state().asked,
        vec![
            MaskCommand::UseMeasures {
                organ: Organ::Liver,
                lesion: 0
            },
            MaskCommand::Apply {
                organ: Organ::Liver,
                lesion: 0,
                op: MaskOp::Smooth
            },
            MaskCommand::Draw(None),
        ]
    );
}

/// `V` shows the 3D view (a maximum intensity projection) in place of the sagittal plane; a
/// left drag over it turns it, with the quick preview while turning; `V` again brings the
/// sagittal plane back.
#[test]
fn v_shows_the_3d_view_which_a_drag_turns_and_shift_v_renders_as_a_volume() {
    let Some(mut harness) = harness_or_skip() else {
        return;
    };
    harness.run();
    // The pointer over the planes, so they have the keyboard.
    harness.hover_at(egui::pos2(200.0, 200.0));
    harness.key_press(Key::V);
    harness.run();
    let orbit = harness.state().viewer.orbit.expect("the 3D view is on");
    assert!(orbit.azimuth_deg.abs() < 1e-9);
    assert_eq!(orbit.rendering, keyslice::render::orbit::Rendering::Mip);
    harness.snapshot("viewer_3d");
    // Shift+V: the volume rendering; its button: the projection again.
    harness.key_press_modifiers(egui::Modifiers::SHIFT, Key::V);
    harness.run();
    let orbit = harness.state().viewer.orbit.expect("still on");
    assert_eq!(orbit.rendering, keyslice::render::orbit::Rendering::Volume);
    harness.snapshot("viewer_3d_volume");
    harness.get_by_label("show MIP").click();
    harness.run();
    let orbit = harness.state().viewer.orbit.expect("still on");
    assert_eq!(orbit.rendering, keyslice::render::orbit::Rendering::Mip);
    // Drag across the lower right pane.
    let from = egui::pos2(780.0, 420.0);
    harness.event(egui::Event::PointerMoved(from));
    harness.run();
    harness.event(egui::Event::PointerButton {
        pos: from,
        button: egui::PointerButton::Primary,
        pressed: true,
        modifiers: egui::Modifiers::NONE,
    });
    harness.step();
    for n in 1..=5 {
        harness.event(egui::Event::PointerMoved(
            from + egui::vec2(12.0 * n as f32, 0.0),
        ));
        harness.step();
    }
    let turning = harness.state().viewer.orbit.expect("on");
    assert!(turning.azimuth_deg > 10.0, "{turning:?}");
    assert!(turning.preview, "a preview while turning");
    harness.event(egui::Event::PointerButton {
        pos: from + egui::vec2(60.0, 0.0),
        button: egui::PointerButton::Primary,
        pressed: false,
        modifiers: egui::Modifiers::NONE,
    });
    harness.run();
    assert!(!harness.state().viewer.orbit.expect("on").preview);
    harness.key_press(Key::V);
    harness.run();
    assert!(harness.state().viewer.orbit.is_none());
}
