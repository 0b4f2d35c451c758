//! egui panels. Each panel is a small struct whose `*_ui` function draws into an
//! [`egui::Ui`] and returns the commands the user gave; the app applies them. Panels read the
//! volume and view state; they never load files or run models.

pub mod viewport;
