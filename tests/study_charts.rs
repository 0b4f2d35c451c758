//! A reader study's charts: ROC curves per arm whose areas are the MRMC analysis' AUCs, a
//! forest plot whose rows are each reader's difference and the MRMC difference with its BDG
//! interval, the time per case; drawn in the window and into PNG files alike.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use egui_kittest::kittest::Queryable;
use keyslice::chart::{Chart, Mark};
use keyslice::findings::Findings;
use keyslice::mrmc::{reader_table, roc_area, ustat_table};
use keyslice::review::study::{Design, ReaderRules, Study};

const NOON: u64 = 1_796_558_400; // 2026-12-06T12:00:00Z

/// A crossover study of 3 simulated readers over 30 cases with a liver tumor in every third;
/// the AI claims one everywhere, consistent only where it is real. The study and its truth.
fn simulated_study(folder: &Path) -> (Study, BTreeMap<String, Findings>) {
    let mut definition = common::study_definition(Design::Crossover { washout_days: 14 }, 30);
    definition.seed = 5;
    let study = Study::create(&folder.join("trial"), definition).expect("created");
    let (truth, ai) = common::liver_truth_and_ai(&study.definition.cases, |k| k % 3 == 0);
    study
        .simulate(&truth, &ai, ReaderRules::default(), NOON, &[])
        .expect("simulated");
    (study, truth)
}

fn lines(chart: &Chart) -> Vec<(&[[f64; 2]], f32)> {
    chart
        .marks
        .iter()
        .filter_map(|mark| match mark {
            Mark::Line { points, stroke } => Some((points.as_slice(), stroke.width)),
            _ => None,
        })
        .collect()
}

#[test]
fn roc_curves_have_the_areas_of_the_mrmc_analysis() {
    let folder = tempfile::tempdir().expect("temp dir");
    let (study, truth) = simulated_study(folder.path());
    let charts = study.charts(&truth).expect("charts");
    let roc = &charts[0];
    let reads = study.mrmc_reads(&truth).expect("reads");
    // Thin curves: one per reader and arm, each with that reader's AUC in that arm.
    let mut thin: Vec<f64> = lines(roc)
        .iter()
        .filter(|(_, width)| *width < 1.0)
        .map(|(points, _)| roc_area(points))
        .collect();
    let mut per_reader: Vec<f64> = reader_table(&reads)
        .expect("table")
        .iter()
        .filter(|row| row.AUCB.is_none())
        .map(|row| row.AUCA)
        .collect();
    assert_eq!(thin.len(), 6);
    thin.sort_by(f64::total_cmp);
    per_reader.sort_by(f64::total_cmp);
    for (drawn, computed) in thin.iter().zip(&per_reader) {
        assert!((drawn - computed).abs() < 1e-12, "{thin:?} {per_reader:?}");
    }
    // The legend gives each arm's reader-averaged AUC of the MRMC table.
    let table = ustat_table(&reads).expect("table");
    assert_eq!(roc.legend.len(), 2);
    for entry in &roc.legend {
        let row = table
            .iter()
            .filter(|r| r.AUCB.is_none())
            .find(|row| entry.text.starts_with(&format!("{} (", row.modalityA)))
            .expect("the arm's row");
        assert_eq!(
            entry.text,
            format!("{} (AUC {:.3})", row.modalityA, row.AUCA)
        );
    }
    for point in roc.points() {
        assert!((0.0..=1.0).contains(&point[0]) && (0.0..=1.0).contains(&point[1]));
    }
}

#[test]
fn the_forest_plot_shows_each_reader_and_the_mrmc_difference() {
    let folder = tempfile::tempdir().expect("temp dir");
    let (study, truth) = simulated_study(folder.path());
    let charts = study.charts(&truth).expect("charts");
    let forest = &charts[1];
    assert_eq!(forest.title, "AUC evidence − AUC unaided");
    assert!(forest.caption[0].starts_with("Simulated reads (ana, ben, cho)"));
    let names: Vec<&str> = forest
        .y
        .ticks
        .iter()
        .map(|(_, name)| name.as_str())
        .collect();
    assert_eq!(names, ["ana", "ben", "cho", "all readers"]);
    let reads = study.mrmc_reads(&truth).expect("reads");
    let table = ustat_table(&reads).expect("table");
    let auc = |arm: &str| {
        table
            .iter()
            .find(|row| row.modalityA == arm && row.AUCB.is_none())
            .expect("arm")
            .AUCA
    };
    let difference = auc("evidence") - auc("unaided");
    // The emphasised dot (all readers) sits at the evidence arm's gain, at the bottom row.
    let dots: Vec<[f64; 2]> = forest
        .marks
        .iter()
        .filter_map(|mark| match mark {
            Mark::Points { points, .. } => points.first().copied(),
            _ => None,
        })
        .collect();
    assert_eq!(dots.len(), 4);
    assert!(
        (dots[3][0] - difference).abs() < 1e-12,
        "{dots:?} {difference}"
    );
    assert!((dots[3][1] - 1.0).abs() < 1e-12);
    // The simulated readers follow findings the display shows agreeing with their key slice
    // and re-read the denied ones: the evidence arm reads better.
    assert!(difference > 0.0, "{difference}");
    let pair = table.iter().find(|row| row.AUCB.is_some()).expect("pair");
    let interval = if pair.modalityA == "evidence" {
        (pair.botCIBDG, pair.topCIBDG)
    } else {
        (-pair.topCIBDG, -pair.botCIBDG)
    };
    assert!(
        forest.caption[2].contains(&format!("95 % CI {:+.3} to {:+.3}", interval.0, interval.1)),
        "{:?}",
        forest.caption
    );
    assert!(
        forest
            .points()
            .all(|[x, _]| x >= forest.x.min - 1e-9 && x <= forest.x.max + 1e-9)
    );
}

#[test]
fn time_per_case_has_a_dot_per_read_and_each_arms_median() {
    let folder = tempfile::tempdir().expect("temp dir");
    let (study, truth) = simulated_study(folder.path());
    let time = &study.charts(&truth).expect("charts")[2];
    let dots: usize = time
        .marks
        .iter()
        .map(|mark| match mark {
            Mark::Points { points, .. } => points.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(dots, 3 * 2 * 30);
    for arm in ["unaided", "evidence"] {
        let mut seconds: Vec<f64> = study
            .definition
            .readers
            .iter()
            .flat_map(|reader| study.reads(reader).expect("reads"))
            .filter(|read| read.arm == arm)
            .map(|read| read.active_ms as f64 / 1000.0)
            .collect();
        seconds.sort_by(f64::total_cmp);
        let median = f64::midpoint(seconds[44], seconds[45]);
        assert!(
            time.caption
                .iter()
                .any(|line| line == &format!("{arm}: median {median:.1} s over 90 reads")),
            "{:?}",
            time.caption
        );
    }
    assert!(time.points().all(|[_, y]| y >= 0.0 && y <= time.y.max));
}

#[test]
fn the_report_writes_the_charts_as_png() {
    let folder = tempfile::tempdir().expect("temp dir");
    let (study, truth) = simulated_study(folder.path());
    let charts = study.charts(&truth).expect("charts");
    for chart in &charts {
        let png = keyslice::ui::chart::chart_png(chart, [720.0, 560.0], 2.0).expect("encodes");
        let image = image::load_from_memory(&png).expect("a PNG").to_rgba8();
        assert_eq!(image.dimensions(), (1440, 1120));
        // White paper, opaque everywhere; ink for the text and the palette's blue for marks.
        assert!(image.pixels().all(|pixel| pixel[3] == 255));
        assert_eq!(image.get_pixel(2, 2).0, [255, 255, 255, 255]);
        let count = |rgb: [u8; 3]| {
            image
                .pixels()
                .filter(|pixel| {
                    (0..3).all(|c| (i32::from(pixel[c]) - i32::from(rgb[c])).abs() <= 8)
                })
                .count()
        };
        assert!(count([0x20, 0x20, 0x20]) > 500, "{}: text", chart.title);
        assert!(
            count([0x00, 0x72, 0xB2]) + count([0xD5, 0x5E, 0x00]) > 300,
            "{}: marks",
            chart.title
        );
    }
}

#[test]
fn the_png_is_what_the_window_draws() {
    if !common::gpu_available() {
        return;
    }
    let folder = tempfile::tempdir().expect("temp dir");
    let (study, truth) = simulated_study(folder.path());
    let charts = study.charts(&truth).expect("charts");
    let size = egui::vec2(720.0, 560.0);
    let mut snapshots = egui_kittest::SnapshotResults::new();
    for (chart, name) in charts
        .iter()
        .zip(["study_roc", "study_forest", "study_time"])
    {
        let shown = chart.clone();
        let mut harness = egui_kittest::Harness::builder()
            .with_size(size)
            .wgpu()
            .build_ui(move |ui| {
                keyslice::ui::chart::paint(
                    ui.painter(),
                    egui::Rect::from_min_size(egui::Pos2::ZERO, size),
                    &shown,
                );
            });
        harness.run();
        let window = harness.render().expect("renders");
        harness.snapshot(name);
        let png = keyslice::ui::chart::chart_image(chart, size, 1.0);
        assert_eq!(window.dimensions(), png.dimensions());
        // Pixel for pixel but for edge smoothing: few pixels differ visibly.
        let differing = window
            .pixels()
            .zip(png.pixels())
            .filter(|(a, b)| (0..3).any(|c| (i32::from(a[c]) - i32::from(b[c])).abs() > 48))
            .count();
        let share = differing as f64 / f64::from(png.width() * png.height());
        eprintln!("{name}: {:.3} % of pixels differ", share * 100.0);
        assert!(
            share < 0.01,
            "{name}: {:.2} % of pixels differ",
            share * 100.0
        );
        snapshots.extend_harness(&mut harness);
    }
}

#[test]
fn the_results_window_shows_one_chart_per_tab() {
    if !common::gpu_available() {
        return;
    }
    let folder = tempfile::tempdir().expect("temp dir");
    let (study, truth) = simulated_study(folder.path());
    let charts = study.charts(&truth).expect("charts");
    let mut harness = egui_kittest::Harness::builder()
        .with_size(egui::vec2(760.0, 620.0))
        .wgpu()
        .build_ui_state(
            |ui, view: &mut keyslice::ui::chart::ChartsView| view.charts_ui(ui),
            keyslice::ui::chart::ChartsView { charts, shown: 0 },
        );
    harness.run();
    harness.get_by_label("Active time per case").click();
    harness.run();
    assert_eq!(harness.state().shown, 2);
    harness.snapshot("study_results_window");
}

#[test]
fn the_table_gives_each_readers_auc_as_imrmc_and_pools_each_arm() {
    use keyslice::review::study::summary::ALL_READERS;
    let folder = tempfile::tempdir().expect("temp dir");
    let (study, truth) = simulated_study(folder.path());
    let rows = study.summaries(&truth).expect("table");
    assert_eq!(rows.len(), 3 * 2 + 2);
    let reads = study.mrmc_reads(&truth).expect("reads");
    for row in reader_table(&reads)
        .expect("table")
        .iter()
        .filter(|r| r.AUCB.is_none())
    {
        let ours = rows
            .iter()
            .find(|one| one.reader == row.readerID && one.arm == row.modalityA)
            .expect("a row");
        assert!((ours.auc.expect("an AUC") - row.AUCA).abs() < 1e-12);
        assert_eq!(ours.reads, 30);
    }
    for pooled in rows.iter().filter(|row| row.reader == ALL_READERS) {
        assert_eq!(pooled.reads, 90);
        let mrmc = ustat_table(&reads).expect("table");
        let arm = mrmc
            .iter()
            .find(|row| row.modalityA == pooled.arm && row.AUCB.is_none())
            .expect("arm");
        assert_eq!(pooled.auc, Some(arm.AUCA));
        // Pooled over every read of the arm: between its readers' lowest and highest.
        let readers: Vec<f64> = rows
            .iter()
            .filter(|row| row.arm == pooled.arm && row.reader != ALL_READERS)
            .filter_map(|row| row.sensitivity)
            .collect();
        let sensitivity = pooled.sensitivity.expect("some tumors");
        assert!(readers.iter().any(|&one| one <= sensitivity + 1e-12));
        assert!(readers.iter().any(|&one| one >= sensitivity - 1e-12));
    }
}
