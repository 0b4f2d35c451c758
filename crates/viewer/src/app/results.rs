//! The window of a reader study's results: its charts, one per tab, as `study report`
//! writes them to PNG files.

use keyslice_core::chart::Chart;

use crate::ui::chart::ChartsView;

struct ResultsApp {
    view: ChartsView,
}

impl eframe::App for ResultsApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        egui::CentralPanel::default().show(ui, |ui| self.view.charts_ui(ui));
    }
}

/// Opens a window titled `title` on `charts` and runs until it is closed.
pub fn run_charts(title: &str, charts: Vec<Chart>) -> Result<(), eframe::Error> {
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title(title)
            .with_inner_size([900.0, 700.0])
            .with_min_inner_size([480.0, 360.0]),
        renderer: eframe::Renderer::Wgpu,
        ..eframe::NativeOptions::default()
    };
    eframe::run_native(
        "Keyslice study results",
        options,
        Box::new(move |_| {
            Ok(Box::new(ResultsApp {
                view: ChartsView { charts, shown: 0 },
            }))
        }),
    )
}
