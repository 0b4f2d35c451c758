//! The eframe application: opens a window at once, loads the study on a background thread
//! with a progress indicator, uploads it to the GPU, and runs the viewer, applying the
//! commands its panels return. Errors are shown in the window with a hint; nothing panics.
//!
//! Wires `io`, `render` and `ui` together; holds runtime state only (saved settings arrive
//! with the review workflow).

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, TryRecvError, channel};
use std::time::Instant;

use crate::io::masks::load_masks_onto;
use crate::io::{LoadOptions, SourceFormat, Study, load_study};
use crate::ui::viewport::{Viewer, ViewerGpu};
use crate::volume::demo::demo_abdomen;
use crate::volume::{LabelVolume, Structure, Volume, combine_structures};

/// What to open.
#[derive(Clone, Debug)]
pub enum Source {
    /// A file or folder the user named.
    Path(PathBuf),
    /// The built-in synthetic demo volume.
    Demo,
}

/// A loaded study: volume, title, warnings, and the mask overlay (if the case has masks).
struct LoadedStudy {
    volume: Volume,
    title: String,
    warnings: Vec<String>,
    labels: Option<LabelVolume>,
    structures: Vec<Structure>,
}

type Loaded = Result<LoadedStudy, (String, String)>;

/// Masks of an AbdomenAtlas case (`segmentations/` beside `ct.nii.gz`) on the CT's grid.
/// A mask that cannot be read becomes a warning; the study still opens.
fn case_masks(
    ct_path: &Path,
    volume: &Volume,
    warnings: &mut Vec<String>,
) -> (Option<LabelVolume>, Vec<Structure>) {
    let Some(folder) = ct_path.parent().map(|parent| parent.join("segmentations")) else {
        return (None, Vec::new());
    };
    if !folder.is_dir() {
        return (None, Vec::new());
    }
    match load_masks_onto(&folder, volume) {
        Ok(masks) => {
            let (combined, structures, left_out) = combine_structures(&masks);
            if !left_out.is_empty() {
                warnings.push(format!(
                    "masks not shown (more than 15 structures): {}",
                    left_out.join(", ")
                ));
            }
            (combined, structures)
        }
        Err(error) => {
            warnings.push(format!("masks not shown: {error}"));
            (None, Vec::new())
        }
    }
}

/// The application state.
pub struct KeysliceApp {
    title: String,
    loading: Option<Receiver<Loaded>>,
    started: Instant,
    volume: Option<Volume>,
    viewer: Option<Viewer>,
    notices: Vec<String>,
    error: Option<(String, String)>,
    render_state: Option<egui_wgpu::RenderState>,
    first_slice_logged: bool,
}

impl KeysliceApp {
    /// Starts loading `source` in the background; the window shows progress meanwhile.
    #[must_use]
    pub fn new(cc: &eframe::CreationContext<'_>, source: Source) -> Self {
        let (sender, receiver) = channel();
        let context = cc.egui_ctx.clone();
        let title = match &source {
            Source::Path(path) => path.display().to_string(),
            Source::Demo => "demo".to_string(),
        };
        std::thread::spawn(move || {
            let loaded: Loaded = match source {
                Source::Demo => Ok(LoadedStudy {
                    volume: demo_abdomen(),
                    title: "Synthetic demo abdomen (not patient data)".to_string(),
                    warnings: Vec::new(),
                    labels: None,
                    structures: Vec::new(),
                }),
                Source::Path(path) => load_study(&path, &LoadOptions::default())
                    .map(|study: Study| {
                        let mut warnings = study.volume.warnings().to_vec();
                        warnings.extend(study.unreadable.iter().map(|file| {
                            format!("skipped {}: {}", file.path.display(), file.reason)
                        }));
                        let (labels, structures) = if study.format == SourceFormat::Nifti {
                            case_masks(&study.path, &study.volume, &mut warnings)
                        } else {
                            (None, Vec::new())
                        };
                        LoadedStudy {
                            title: study.path.display().to_string(),
                            volume: study.volume,
                            warnings,
                            labels,
                            structures,
                        }
                    })
                    .map_err(|error| (error.to_string(), error.hint())),
            };
            // The window may have closed meanwhile; then nobody needs the result.
            let _ = sender.send(loaded);
            context.request_repaint();
        });
        Self {
            title,
            loading: Some(receiver),
            started: Instant::now(),
            volume: None,
            viewer: None,
            notices: Vec::new(),
            error: None,
            render_state: cc.wgpu_render_state.clone(),
            first_slice_logged: false,
        }
    }

    fn poll_loading(&mut self) {
        let Some(receiver) = &self.loading else {
            return;
        };
        match receiver.try_recv() {
            Ok(Ok(study)) => {
                self.loading = None;
                self.title = study.title;
                self.notices = study.warnings;
                let volume = study.volume;
                if let Some(render_state) = &self.render_state {
                    let notices = ViewerGpu::install(render_state, &volume, study.labels.as_ref());
                    self.notices.extend(notices);
                    self.viewer = Some(Viewer::new(&volume).with_structures(&study.structures));
                    self.volume = Some(volume);
                } else {
                    self.error = Some((
                        "no GPU renderer is available for this window".into(),
                        "install a Vulkan driver (mesa-vulkan-drivers gives a software one)".into(),
                    ));
                }
            }
            Ok(Err(error)) => {
                self.loading = None;
                self.error = Some(error);
            }
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Disconnected) => {
                self.loading = None;
                self.error = Some((
                    "loading stopped unexpectedly".into(),
                    "try opening the study again".into(),
                ));
            }
        }
    }
}

impl eframe::App for KeysliceApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.poll_loading();
        egui::Panel::top("keyslice-top").show(ui, |ui| {
            ui.horizontal(|ui| {
                ui.strong("Keyslice");
                ui.label(&self.title);
                for notice in &self.notices {
                    ui.colored_label(egui::Color32::from_rgb(230, 180, 60), notice);
                }
            });
        });
        if let (Some(viewer), Some(volume)) = (&mut self.viewer, &self.volume) {
            let commands = egui::Panel::right("keyslice-side")
                .default_size(220.0)
                .show(ui, |ui| viewer.side_panel_ui(ui))
                .inner;
            for command in commands {
                viewer.apply(command, volume);
            }
        }
        egui::CentralPanel::default().show(ui, |ui| {
            if let Some((message, hint)) = &self.error {
                ui.colored_label(
                    egui::Color32::from_rgb(230, 90, 80),
                    format!("error: {message}"),
                );
                ui.label(format!("hint: {hint}"));
            } else if self.loading.is_some() {
                ui.horizontal(|ui| {
                    ui.spinner();
                    ui.label(format!(
                        "Loading… {:.1} s",
                        self.started.elapsed().as_secs_f32()
                    ));
                });
                ui.ctx()
                    .request_repaint_after(std::time::Duration::from_millis(100));
            } else if let (Some(viewer), Some(volume)) = (&mut self.viewer, &self.volume) {
                let commands = viewer.viewer_ui(ui, volume);
                for command in commands {
                    viewer.apply(command, volume);
                }
                if !self.first_slice_logged {
                    // The frame that carries the first slices; measured by
                    // benches/viewer_first_slice.sh (KEYSLICE_LOG=info).
                    self.first_slice_logged = true;
                    tracing::info!(
                        elapsed_ms = self.started.elapsed().as_millis(),
                        "first slices drawn"
                    );
                }
            }
        });
    }
}

/// Opens the viewer window on `source` and runs until it is closed.
pub fn run(source: Source) -> Result<(), eframe::Error> {
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("Keyslice")
            .with_inner_size([1280.0, 800.0]),
        renderer: eframe::Renderer::Wgpu,
        ..eframe::NativeOptions::default()
    };
    eframe::run_native(
        "Keyslice",
        options,
        Box::new(move |cc| Ok(Box::new(KeysliceApp::new(cc, source)))),
    )
}
