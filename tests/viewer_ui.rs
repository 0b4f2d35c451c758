//! The viewer panel as a person sees it: `egui_kittest` drives it with real input and renders
//! it with wgpu (lavapipe in CI) into a snapshot compared with `tests/snapshots/`.
//! `UPDATE_SNAPSHOTS=1 cargo test --test viewer_ui` rewrites the snapshots after a deliberate
//! change; look at them before committing.
//!
//! Without any GPU adapter these checks say so and pass, unless `KEYSLICE_REQUIRE_GPU=1`.

// Slice indices are whole numbers held in f64; exact comparison is the point.
#![allow(clippy::float_cmp)]

use egui::Key;
use egui_kittest::Harness;
use keyslice::render::headless_device;
use keyslice::render::view::Plane;
use keyslice::ui::viewport::{Viewer, ViewerGpu};
use keyslice::volume::Volume;
use keyslice::volume::demo::demo_abdomen;

struct State {
    viewer: Viewer,
    volume: Volume,
}

fn harness_or_skip() -> Option<Harness<'static, State>> {
    if let Err(error) = headless_device() {
        assert!(
            std::env::var_os("KEYSLICE_REQUIRE_GPU").is_none(),
            "KEYSLICE_REQUIRE_GPU is set but {error}"
        );
        eprintln!("no GPU adapter, skipping viewer snapshots: {error}");
        return None;
    }
    let volume = demo_abdomen();
    let render_state = egui_kittest::wgpu::create_render_state(
        egui_kittest::wgpu::default_wgpu_setup(),
        egui_wgpu::RendererOptions::PREDICTABLE,
    );
    let notices = ViewerGpu::install(&render_state, &volume, None);
    assert!(notices.is_empty(), "{notices:?}");
    let renderer = egui_kittest::wgpu::WgpuTestRenderer::from_render_state(render_state);
    let state = State {
        viewer: Viewer::new(&volume),
        volume,
    };
    Some(
        Harness::builder()
            .with_size(egui::Vec2::new(900.0, 560.0))
            .renderer(renderer)
            .build_ui_state(
                |ui, state: &mut State| {
                    let commands = state.viewer.viewer_ui(ui, &state.volume);
                    for command in commands {
                        state.viewer.apply(command, &state.volume);
                    }
                },
                state,
            ),
    )
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
            .starts_with("axial 51/80"),
        "{}",
        state.viewer.status_text(&state.volume)
    );
}
