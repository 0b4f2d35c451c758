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
