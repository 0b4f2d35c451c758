//! The report and evidence panels: the model's report with every value the reader took from
//! it highlighted by whether the verifier's reading of the key slice agrees (green), does not
//! (red) or cannot say (grey), a list of the findings that jump to the key slice; and the
//! evidence, the key slice thumbnail with the model's box, the verifier's local description
//! and the consistency with its per-attribute breakdown in words (why it is low).
//!
//! Draws and returns commands; the app builds the thumbnail texture and applies them.

use egui::text::LayoutJob;
use egui::{Color32, RichText, TextFormat};

use crate::ui::analysis::consistency_colour;
use keyslice_core::findings::Organ;
use keyslice_core::findings::summary::organ_summary;
use keyslice_core::key_slice::KeySliceImage;
use keyslice_core::prediction::{OutOfDomain, Prediction};
use keyslice_core::scoring::{Attribute, AttributeCheck, Verdict};

/// What the user asked for in these panels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportCommand {
    /// Show the key slice (and its box) in the axial plane.
    JumpToKeySlice,
    /// Show this axial slice: a finding's own evidence.
    ShowSlice(u32),
}

/// Background colour of a checked value.
#[must_use]
pub fn verdict_colour(verdict: Verdict) -> Color32 {
    match verdict {
        Verdict::Agrees => Color32::from_rgb(40, 110, 55),
        Verdict::Disagrees => Color32::from_rgb(150, 45, 40),
        Verdict::NotShown => Color32::from_rgb(75, 75, 80),
    }
}

/// The verdict in words.
#[must_use]
pub fn verdict_words(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Agrees => "the key slice agrees",
        Verdict::Disagrees => "the key slice does not support it",
        Verdict::NotShown => "not on the key slice",
    }
}

/// The report panel: one line per finding (coloured by its worst check; a click shows the
/// key slice), the warnings, then the report text, which scrolls within what is left above
/// `bottom` (the panel's lower edge, screen points) so the whole panel fits its window.
pub fn report_ui(
    ui: &mut egui::Ui,
    prediction: &Prediction,
    checks: &[AttributeCheck],
    bottom: f32,
) -> Option<ReportCommand> {
    let mut command = None;
    ui.label(RichText::new("Report").strong());
    // One row per finding: clicking it shows the evidence slice.
    for organ in Organ::ALL {
        let organ_checks: Vec<&AttributeCheck> =
            checks.iter().filter(|check| check.organ == organ).collect();
        if organ_checks.is_empty() {
            continue;
        }
        let worst = organ_checks
            .iter()
            .map(|check| check.verdict)
            .min_by_key(|verdict| match verdict {
                Verdict::Disagrees => 0,
                Verdict::NotShown => 1,
                Verdict::Agrees => 2,
            })
            .unwrap_or(Verdict::NotShown);
        let text = organ_summary(organ, &prediction.findings);
        let fill = if prediction.out_of_domain.is_some() {
            Color32::from_gray(90)
        } else {
            verdict_colour(worst)
        };
        // One line each (the report text below has every value; hover shows the whole line).
        let button = egui::Button::new(RichText::new(&text).color(Color32::WHITE))
            .fill(fill)
            .small()
            .truncate();
        if ui
            .add(button)
            .on_hover_text(format!("{text}\nshow the key slice this finding rests on"))
            .clicked()
        {
            command = Some(ReportCommand::JumpToKeySlice);
        }
    }
    let unfamiliar = prediction.out_of_domain.as_ref().map(OutOfDomain::sentence);
    for warning in &prediction.warnings {
        // The analysis panel states the model's own word on the CT, above everything.
        if unfamiliar.as_ref() != Some(warning) {
            ui.colored_label(Color32::from_rgb(230, 180, 60), warning);
        }
    }
    ui.horizontal_wrapped(|ui| {
        for verdict in [Verdict::Agrees, Verdict::Disagrees, Verdict::NotShown] {
            ui.label(
                RichText::new(verdict_words(verdict))
                    .small()
                    .color(Color32::WHITE)
                    .background_color(verdict_colour(verdict)),
            );
        }
    });
    let room = (bottom - ui.cursor().top() - 8.0).max(REPORT_TEXT_MIN_HEIGHT);
    egui::ScrollArea::vertical()
        .max_height(room)
        .id_salt("report-text")
        .show(ui, |ui| {
            // Out of the model's depth nothing in the report is shown as agreeing.
            let shown = if prediction.out_of_domain.is_some() {
                &[]
            } else {
                checks
            };
            ui.label(highlighted_report(ui, &prediction.report, shown));
        });
    command
}

/// The least height of the report text's scroll area, points (about six lines).
const REPORT_TEXT_MIN_HEIGHT: f32 = 100.0;

/// The report text with each checked span on its verdict colour.
fn highlighted_report(ui: &egui::Ui, report: &str, checks: &[AttributeCheck]) -> LayoutJob {
    let font = egui::FontId::monospace(11.0);
    let plain = TextFormat {
        font_id: font.clone(),
        color: ui.visuals().text_color(),
        ..TextFormat::default()
    };
    // A verdict per byte: organ statements first, then the lesion values inside them
    // on top, so "hypoattenuating" keeps its own colour within its sentence.
    let mut colours: Vec<Option<Verdict>> = vec![None; report.len()];
    let presence_first = checks
        .iter()
        .filter(|check| check.attribute == Attribute::Presence)
        .chain(
            checks
                .iter()
                .filter(|check| check.attribute != Attribute::Presence),
        );
    for check in presence_first {
        if let Some(span) = check.span {
            let end = span.end.min(report.len());
            for colour in colours.iter_mut().take(end).skip(span.start) {
                *colour = Some(check.verdict);
            }
        }
    }
    let mut job = LayoutJob::default();
    let mut start = 0;
    while start < report.len() {
        let verdict = colours[start];
        let mut end = start + 1;
        while end < report.len() && (colours[end] == verdict || !report.is_char_boundary(end)) {
            end += 1;
        }
        let format = match verdict {
            Some(verdict) => TextFormat {
                background: verdict_colour(verdict),
                color: Color32::WHITE,
                ..plain.clone()
            },
            None => plain.clone(),
        };
        job.append(&report[start..end], 0.0, format);
        start = end;
    }
    job.wrap.max_width = ui.available_width();
    job
}

/// The evidence panel: key slice thumbnail (with the pixel step it was made with) and the
/// model's box, the local description and the consistency with its reasons.
pub fn evidence_ui(
    ui: &mut egui::Ui,
    prediction: &Prediction,
    checks: &[AttributeCheck],
    thumbnail: Option<(&egui::TextureHandle, usize)>,
) -> Option<ReportCommand> {
    let mut command = None;
    ui.label(RichText::new("Evidence").strong());
    if let Some(key) = &prediction.key_slice {
        // The thumbnail beside what the verifier said of it: the report below keeps its room.
        ui.horizontal(|ui| {
            if let Some((texture, stride)) = thumbnail {
                command = thumbnail_ui(ui, texture, stride, prediction).or(command);
            }
            ui.vertical(|ui| {
                ui.horizontal_wrapped(|ui| {
                    ui.label(format!("key slice {} (z {:.1} mm)", key.index, key.z_mm));
                    if ui.small_button("go (K)").clicked() {
                        command = Some(ReportCommand::JumpToKeySlice);
                    }
                });
                if let Some(text) = &prediction.local_description {
                    ui.label(RichText::new("Verifier, the evidence only:").strong());
                    ui.label(text.trim_end());
                }
            });
        });
    } else {
        ui.weak("The model named no key slice: nothing to verify.");
        if let Some(text) = &prediction.local_description {
            ui.label(RichText::new("Verifier, the evidence only:").strong());
            ui.label(text.trim_end());
        }
    }
    // Out of the model's depth, agreement means nothing: the figures are shown grey.
    let unfamiliar = prediction.out_of_domain.is_some();
    let colour = |value: f64| {
        if unfamiliar {
            Color32::GRAY
        } else {
            consistency_colour(value)
        }
    };
    match &prediction.consistency {
        Some(consistency) => {
            ui.label(
                RichText::new(format!("consistency {:.2}", consistency.score))
                    .strong()
                    .color(colour(consistency.score)),
            );
            let parts = [
                ("organ", Some(consistency.organ)),
                ("location", consistency.location),
                ("attenuation", consistency.attenuation),
                ("size", consistency.size),
            ];
            ui.horizontal_wrapped(|ui| {
                for (name, value) in parts {
                    match value {
                        Some(value) => {
                            ui.colored_label(colour(value), format!("{name} {value:.2}"));
                        }
                        None => {
                            ui.weak(format!("{name} –"));
                        }
                    }
                }
            });
            let findings = finding_lines(consistency, &prediction.lesion_checks);
            for (line, slice) in &findings {
                // A finding read on evidence of its own jumps there.
                match slice {
                    Some(slice) => {
                        if ui
                            .link(RichText::new(line).small())
                            .on_hover_text(format!("show slice {slice}, this finding's evidence"))
                            .clicked()
                        {
                            command = Some(ReportCommand::ShowSlice(*slice));
                        }
                    }
                    None => {
                        ui.small(line);
                    }
                }
            }
            // "Nothing contradicts" would mislead beside a finding the slice does not show.
            let all_said = findings.is_empty() || !consistency.has_unverified();
            for reason in reasons(checks, consistency.region) {
                if all_said || reason != NOTHING_CONTRADICTS {
                    ui.small(reason);
                }
            }
        }
        None => {
            ui.weak("no consistency: nothing on a key slice to verify");
        }
    }
    command
}

/// The key slice's thumbnail with the model's box; a click asks to show the slice.
fn thumbnail_ui(
    ui: &mut egui::Ui,
    texture: &egui::TextureHandle,
    stride: usize,
    prediction: &Prediction,
) -> Option<ReportCommand> {
    let size = texture.size_vec2();
    // Smaller in a short window, so the report below keeps its room.
    let side = if ui.ctx().content_rect().height() < 900.0 {
        120.0
    } else {
        160.0
    };
    let scale = (side / size.x.max(size.y)).min(2.0);
    let response =
        ui.add(egui::Image::new((texture.id(), size * scale)).sense(egui::Sense::click()));
    if let Some(slice_box) = &prediction.slice_box {
        let [c0, r0, c1, r1] = slice_box.voxels.map(|v| v as f32);
        // Box corners are slice voxels; the texture keeps every `stride`-th one.
        let per_voxel = response.rect.size() / size / stride as f32;
        let rect = egui::Rect::from_min_max(
            response.rect.min + egui::vec2(c0, r0) * per_voxel,
            response.rect.min + egui::vec2(c1 + 1.0, r1 + 1.0) * per_voxel,
        );
        ui.painter().rect_stroke(
            rect,
            0.0,
            egui::Stroke::new(1.5, Color32::from_rgb(255, 210, 0)),
            egui::StrokeKind::Outside,
        );
    }
    response
        .on_hover_text("show this slice")
        .clicked()
        .then_some(ReportCommand::JumpToKeySlice)
}

/// The verifier's standing on each finding, one line each, when the case has more than one
/// finding or one that does not agree: which claim the score stands on.
#[must_use]
pub fn finding_lines(
    consistency: &keyslice_core::scoring::Consistency,
    checks: &[keyslice_core::prediction::LesionCheck],
) -> Vec<(String, Option<u32>)> {
    use keyslice_core::scoring::Standing;
    let all_agree = consistency
        .findings
        .iter()
        .all(|finding| finding.standing == Standing::Agrees);
    if consistency.findings.len() < 2 && all_agree {
        return Vec::new();
    }
    consistency
        .findings
        .iter()
        .map(|finding| {
            let what = match finding.lesion {
                Some(index) => format!("{} lesion {}", finding.organ, index + 1),
                None => finding.organ.to_string(),
            };
            // A lesion read on evidence of its own says which slice.
            let own = checks
                .iter()
                .find(|check| check.organ == finding.organ && Some(check.lesion) == finding.lesion);
            let what = match own {
                Some(check) => format!("{what} (its slice {})", check.key_slice),
                None => what,
            };
            let line = match finding.standing {
                Standing::Agrees => format!("• {what}: agrees {:.2}", finding.score),
                Standing::Unverified if own.is_some() => {
                    format!("• {what}: unverified, its evidence does not show it")
                }
                Standing::Unverified if !checks.is_empty() && finding.lesion.is_some() => {
                    format!("• {what}: unverified, the answer gives it no evidence")
                }
                Standing::Unverified => {
                    format!("• {what}: unverified, the key slice does not show it")
                }
                standing => format!("• {what}: {}", standing.word()),
            };
            (line, own.map(|check| check.key_slice))
        })
        .collect()
}

/// The reason given when no value the key slice shows differs from the report.
pub const NOTHING_CONTRADICTS: &str = "Nothing the key slice shows contradicts the report.";

/// Why the consistency is what it is: one line per report value the key slice contradicts
/// (the same comparisons the score averages), and one when the verifier did not confirm the
/// lesion inside the model's box (`region`, the box term of the score).
#[must_use]
pub fn reasons(checks: &[AttributeCheck], region: Option<f64>) -> Vec<String> {
    let mut lines: Vec<String> = checks
        .iter()
        .filter(|check| check.verdict == Verdict::Disagrees)
        .map(|check| match (check.attribute, check.lesion) {
            (Attribute::Presence, _) => format!(
                "• {}: the report's tumor statement is not what the key slice shows",
                check.organ
            ),
            (attribute, Some(index)) => format!(
                "• {} lesion {}: the {} differs on the key slice",
                check.organ,
                index + 1,
                attribute.name()
            ),
            (attribute, None) => format!("• {}: the {} differs", check.organ, attribute.name()),
        })
        .collect();
    if region.is_some_and(|value| value < 1.0) {
        lines.push(
            "• the box: the verifier did not confirm the lesion inside the model's box".into(),
        );
    }
    if lines.is_empty() && !checks.is_empty() {
        vec![NOTHING_CONTRADICTS.to_string()]
    } else {
        lines
    }
}

/// Thumbnails keep every `stride`-th pixel so the longer side is at most this many.
const THUMBNAIL_PIXELS: usize = 256;

/// The key slice as a grey thumbnail in the soft-tissue window (400/40 HU), every
/// `stride`-th pixel, with the stride returned so boxes can be scaled; rows top to bottom
/// as stored (anterior up for the usual LPS orientation).
#[must_use]
pub fn thumbnail_image(slice: &KeySliceImage) -> (egui::ColorImage, usize) {
    let [columns, rows] = slice.dims;
    let stride = columns.max(rows).div_ceil(THUMBNAIL_PIXELS).max(1);
    let (width, height) = (columns.div_ceil(stride), rows.div_ceil(stride));
    let mut pixels = Vec::with_capacity(width * height);
    for row in (0..rows).step_by(stride) {
        for column in (0..columns).step_by(stride) {
            let hu = slice
                .hu
                .get(row * columns + column)
                .copied()
                .unwrap_or(-1000.0);
            let grey = ((hu - (40.0 - 200.0)) / 400.0).clamp(0.0, 1.0);
            pixels.push(Color32::from_gray((grey * 255.0).round() as u8));
        }
    }
    (egui::ColorImage::new([width, height], pixels), stride)
}
