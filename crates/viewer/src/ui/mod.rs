//! egui panels. Each panel is a small struct whose `*_ui` function draws into an
//! [`egui::Ui`] and returns the commands the user gave; the app applies them. Panels read the
//! volume, view state and predictions; they never load files or run models.

pub mod analysis;
pub mod chart;
pub mod editor;
pub mod help;
pub mod masks;
pub mod report;
pub mod viewport;
pub mod worklist;

/// A row indented by `indent` points whose widgets wrap onto further lines at the same indent
/// when the panel is narrower than the row: every button stays on screen and under its row.
pub(crate) fn indented_row<R>(
    ui: &mut egui::Ui,
    indent: f32,
    add_contents: impl FnOnce(&mut egui::Ui) -> R,
) -> R {
    ui.horizontal(|ui| {
        ui.add_space(indent);
        ui.horizontal_wrapped(add_contents).inner
    })
    .inner
}
