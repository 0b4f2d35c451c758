//! The keyboard help overlay (`?`): every key the viewer, worklist and findings editor
//! answer to, in one place. The key table of `docs/manual.md` lists the same.

/// Every key, grouped: (group, [(keys, action)]).
pub const KEYS: &[(&str, &[(&str, &str)])] = &[
    (
        "Viewer",
        &[
            (
                "wheel / ↑ ↓",
                "previous / next slice in the plane under the pointer",
            ),
            ("PgUp / PgDn", "ten slices"),
            ("right-drag", "window width and level"),
            (
                "1 – 5",
                "window presets (soft tissue, liver, lung, bone, brain)",
            ),
            ("Ctrl+wheel / middle-drag", "zoom / pan"),
            ("double-click", "enlarge a plane, again for all three"),
            ("M", "ruler on/off; click two points to measure"),
            ("K", "go to the key slice"),
            (
                "B",
                "evidence box tool: drag a box on the axial plane, move or resize it; drag the extent's ends on coronal / sagittal",
            ),
            (
                "V",
                "3D view (MIP) in place of the sagittal plane; drag to turn it",
            ),
            ("R", "reset the view"),
        ],
    ),
    (
        "Review",
        &[
            ("A", "analyse the open case with the embedded model"),
            ("S", "key slice = the axial slice on screen"),
            (
                "L",
                "size of the selected lesion from the ruler (last two axial lines)",
            ),
            (
                "Ctrl+Z / Ctrl+Y",
                "undo / redo the last correction (also accept and flag)",
            ),
            ("Ctrl+Enter", "accept the case as reviewed"),
            ("F", "flag the case for another look"),
            ("N / P", "next / previous case in the worklist"),
        ],
    ),
    (
        "Lesion masks (a lesion's \"draw\")",
        &[
            ("left-drag", "paint the lesion's mask with the brush"),
            ("Shift+left-drag", "erase"),
            ("[ / ]", "smaller / larger brush"),
            ("Ctrl+Z", "undo the last stroke"),
        ],
    ),
    (
        "Window",
        &[
            ("Ctrl+O", "open a file"),
            ("Ctrl+Q", "quit (every correction is already saved)"),
            ("?", "this help; Esc or ? closes it"),
        ],
    ),
];

/// Draws the overlay when `open`; `?` toggles it and Esc closes it.
pub fn help_ui(ctx: &egui::Context, open: &mut bool) {
    let typing = ctx.egui_wants_keyboard_input();
    ctx.input(|input| {
        let question = input
            .events
            .iter()
            .any(|event| matches!(event, egui::Event::Text(text) if text == "?"));
        if !typing && question {
            *open = !*open;
        }
        if input.key_pressed(egui::Key::Escape) {
            *open = false;
        }
    });
    if !*open {
        return;
    }
    // Within the window, however small: what does not fit scrolls.
    let screen = ctx.content_rect();
    egui::Window::new("Keyboard")
        .collapsible(false)
        .resizable(false)
        .anchor(egui::Align2::CENTER_CENTER, egui::vec2(0.0, 0.0))
        .max_width(screen.width() - 32.0)
        .max_height(screen.height() - 64.0)
        .scroll([false, true])
        .open(open)
        .show(ctx, |ui| {
            ui.set_max_width(screen.width() - 48.0);
            for (group, keys) in KEYS {
                ui.heading(*group);
                egui::Grid::new(("help", *group))
                    .num_columns(2)
                    .spacing([16.0, 2.0])
                    .show(ui, |ui| {
                        for (key, action) in *keys {
                            ui.monospace(*key);
                            ui.add(egui::Label::new(*action).wrap());
                            ui.end_row();
                        }
                    });
            }
        });
}
