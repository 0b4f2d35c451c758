//! The study's charts as a clinician reads them at a glance: ROC curves per arm, a forest
//! plot of each reader's AUC difference between arms with the MRMC result below, and the
//! active time per case in each arm. Plain [`Chart`] data; the viewer draws them on screen
//! and into PNG files.

use std::collections::BTreeMap;

use keyslice_core::chart::{Anchor, Axis, Chart, Hue, LegendEntry, Mark, Stroke};
use keyslice_core::findings::{Findings, Organ};
use keyslice_core::mrmc::{ALPHA, normal_quantile, reader_table, roc_area, roc_curve, ustat_table};

use super::{Read, Study, StudyError};

/// The most characters of a name a chart shows (a longer one is cut with `…`).
const LABEL_CHARS: usize = 32;

/// File names of the charts, in the order [`Study::charts`] gives them.
pub const CHART_FILES: [&str; 3] = ["roc.png", "forest.png", "time.png"];

/// What a study's figures say when some of its reads were simulated: which readers, and that
/// simulated readers demonstrate the workflow and measure nothing about people. `None` when
/// every read is a person's.
#[must_use]
pub fn simulated_note(reads: &[Read]) -> Option<String> {
    let mut readers: Vec<&str> = reads
        .iter()
        .filter(|read| read.simulated)
        .map(|read| read.reader.as_str())
        .collect();
    readers.dedup();
    readers.sort_unstable();
    readers.dedup();
    if readers.is_empty() {
        return None;
    }
    let shown: Vec<String> = readers
        .iter()
        .map(|reader| keyslice_core::text::shown_short(reader, LABEL_CHARS))
        .collect();
    Some(format!(
        "Simulated reads ({}): they demonstrate the workflow and measure nothing about people.",
        shown.join(", ")
    ))
}

impl Study {
    /// [`simulated_note`] of every read of the study.
    pub fn simulated_note(&self) -> Result<Option<String>, StudyError> {
        let mut reads = Vec::new();
        for reader in &self.definition.readers {
            reads.extend(self.reads(reader)?);
        }
        Ok(simulated_note(&reads))
    }

    /// The study's charts: ROC curves per arm, the forest plot of AUC differences against
    /// the first arm, and the time per case. A chart whose figures need more reads than the
    /// study has so far says so in its caption.
    pub fn charts(&self, truth: &BTreeMap<String, Findings>) -> Result<Vec<Chart>, StudyError> {
        let mut reads = Vec::new();
        for reader in &self.definition.readers {
            reads.extend(self.reads(reader)?);
        }
        let mrmc = self.mrmc_reads(truth)?;
        let mut charts = vec![
            self.roc_chart(&reads, truth, &mrmc),
            self.forest_chart(&mrmc),
            self.time_chart(&reads),
        ];
        if let Some(note) = simulated_note(&reads) {
            for chart in &mut charts {
                chart.caption.insert(0, note.clone());
            }
        }
        Ok(charts)
    }

    fn roc_chart(
        &self,
        reads: &[Read],
        truth: &BTreeMap<String, Findings>,
        mrmc: &keyslice_core::mrmc::Reads,
    ) -> Chart {
        let averaged = arm_aucs(mrmc);
        let mut marks = vec![Mark::Segment {
            from: [0.0, 0.0],
            to: [1.0, 1.0],
            stroke: Stroke::dashed(Hue::Grey, 1.0),
        }];
        let mut legend = Vec::new();
        for (index, arm) in self.definition.arms.iter().enumerate() {
            let mut pooled = Vec::new();
            for reader in &self.definition.readers {
                let scores = unit_scores(
                    reads
                        .iter()
                        .filter(|read| &read.reader == reader && read.arm == arm.name),
                    truth,
                );
                let curve = roc_curve(&scores);
                if !curve.is_empty() {
                    marks.push(Mark::Line {
                        points: curve,
                        stroke: Stroke::solid(Hue::Series(index), 0.75),
                    });
                }
                pooled.extend(scores);
            }
            let curve = roc_curve(&pooled);
            if curve.is_empty() {
                continue;
            }
            let auc = averaged.get(&arm.name).map_or_else(
                || format!("pooled AUC {:.3}", roc_area(&curve)),
                |auc| format!("AUC {auc:.3}"),
            );
            let stroke = Stroke::solid(Hue::Series(index), 2.5);
            marks.push(Mark::Line {
                points: curve,
                stroke,
            });
            legend.push(LegendEntry {
                text: format!("{} ({auc})", arm.name),
                stroke,
            });
        }
        Chart {
            title: "ROC curves per arm".into(),
            x: Axis::numeric("1 − specificity", 0.0, 1.0, 0.2, 1),
            y: Axis::numeric("sensitivity", 0.0, 1.0, 0.2, 1),
            marks,
            legend,
            caption: vec![
                "thick: all readers' reads pooled; thin: each reader".into(),
                "unit: case × organ; score: the reader's confidence 0–100".into(),
                "AUC: the readers' average, as the MRMC analysis (iMRMC's U-statistics)".into(),
            ],
        }
    }

    /// The forest plot's rows (each reader, then all readers, for each later arm against
    /// the first), its caption and its title.
    fn forest_rows(
        &self,
        mrmc: &keyslice_core::mrmc::Reads,
    ) -> (Vec<ForestRow>, Vec<String>, String) {
        let arms = &self.definition.arms;
        let z = normal_quantile(1.0 - ALPHA / 2.0);
        let per_reader = reader_table(mrmc).unwrap_or_default();
        let pooled = ustat_table(mrmc).unwrap_or_default();
        // Each later arm against the first: rows (label, estimate, low, high, emphasised).
        let mut rows: Vec<ForestRow> = Vec::new();
        let mut caption = Vec::new();
        let mut title = "AUC difference between arms".to_string();
        for later in arms.iter().skip(1) {
            let first = &arms[0].name;
            let pair = |a: &str, b: &str| -> Option<f64> {
                if a == later.name && b == first {
                    Some(1.0)
                } else if a == first && b == later.name {
                    Some(-1.0)
                } else {
                    None
                }
            };
            let suffix = if arms.len() > 2 {
                format!(" ({} − {first})", later.name)
            } else {
                title = format!("AUC {} − AUC {first}", later.name);
                String::new()
            };
            for row in &per_reader {
                let (Some(sign), Some(difference), Some(variance)) = (
                    pair(&row.modalityA, &row.modalityB),
                    row.AUCAminusAUCB,
                    row.varAUCAminusAUCB,
                ) else {
                    continue;
                };
                let half = z * variance.max(0.0).sqrt();
                let estimate = sign * difference;
                rows.push((
                    format!(
                        "{}{suffix}",
                        keyslice_core::text::shown_short(&row.readerID, LABEL_CHARS)
                    ),
                    estimate,
                    estimate - half,
                    estimate + half,
                    false,
                ));
            }
            let names: Vec<&str> = arms.iter().map(|arm| arm.name.as_str()).collect();
            for row in &pooled {
                let Some(difference) = keyslice_core::mrmc::arm_difference(row, &names)
                    .filter(|d| d.later == later.name && d.earlier == *first)
                else {
                    continue;
                };
                rows.push((
                    format!("all readers{suffix}"),
                    difference.estimate,
                    difference.low,
                    difference.high,
                    true,
                ));
                caption.push(format!(
                    "all readers{suffix}: {:+.3} (95 % CI {:+.3} to {:+.3}), df {:.1}, p = {:.3}",
                    difference.estimate,
                    difference.low,
                    difference.high,
                    difference.df,
                    difference.p
                ));
            }
        }
        (rows, caption, title)
    }

    fn forest_chart(&self, mrmc: &keyslice_core::mrmc::Reads) -> Chart {
        let arms = &self.definition.arms;
        let (rows, mut caption, title) = self.forest_rows(mrmc);
        let extent = rows
            .iter()
            .flat_map(|(_, _, low, high, _)| [low.abs(), high.abs()])
            .filter(|value| value.is_finite())
            .fold(0.05_f64, f64::max);
        let step = nice_step(2.0 * extent, 4);
        let bound = (extent / step).ceil() * step;
        let count = rows.len();
        let mut marks = vec![Mark::Segment {
            from: [0.0, 0.0],
            to: [0.0, as_f64(count + 1)],
            stroke: Stroke::dashed(Hue::Grey, 1.0),
        }];
        let mut ticks = Vec::new();
        for (index, (label, estimate, low, high, emphasised)) in rows.into_iter().enumerate() {
            let y = as_f64(count - index);
            let hue = if emphasised { Hue::Ink } else { Hue::Series(0) };
            marks.push(Mark::Segment {
                from: [low.max(-bound), y],
                to: [high.min(bound), y],
                stroke: Stroke::solid(hue, if emphasised { 2.5 } else { 1.5 }),
            });
            marks.push(Mark::Points {
                points: vec![[estimate, y]],
                radius: if emphasised { 5.0 } else { 3.5 },
                hue,
            });
            ticks.push((y, label));
        }
        if let [first, later, ..] = arms.as_slice() {
            let (first, later) = if arms.len() > 2 {
                (first.name.as_str(), "later arm")
            } else {
                (first.name.as_str(), later.name.as_str())
            };
            marks.push(Mark::Label {
                at: [-0.97 * bound, 0.45],
                text: format!("favours {first}"),
                anchor: Anchor::Left,
            });
            marks.push(Mark::Label {
                at: [0.97 * bound, 0.45],
                text: format!("favours {later}"),
                anchor: Anchor::Right,
            });
        }
        if count == 0 {
            caption.push(
                "no difference yet: every arm needs reads of cases with and without a tumor".into(),
            );
        } else {
            caption.insert(
                0,
                "each reader: 95 % CI with cases random (Normal); all readers: readers and cases random (BDG)".into(),
            );
        }
        Chart {
            title,
            x: Axis::numeric("AUC difference", -bound, bound, step, 2),
            y: Axis {
                title: String::new(),
                min: 0.0,
                max: as_f64(count + 1),
                ticks,
            },
            marks,
            legend: Vec::new(),
            caption,
        }
    }

    fn time_chart(&self, reads: &[Read]) -> Chart {
        let arms = &self.definition.arms;
        let readers = &self.definition.readers;
        let seconds = |read: &Read| read.active_ms as f64 / 1000.0;
        let top = reads.iter().map(seconds).fold(1.0_f64, f64::max);
        let step = nice_step(top, 5);
        let top = (top / step).ceil() * step;
        let mut marks = Vec::new();
        let mut caption = Vec::new();
        for (index, arm) in arms.iter().enumerate() {
            let centre = as_f64(index + 1);
            let mut all: Vec<f64> = Vec::new();
            for (number, reader) in readers.iter().enumerate() {
                let offset = (as_f64(number) - as_f64(readers.len().saturating_sub(1)) / 2.0) * 0.5
                    / as_f64(readers.len().max(1));
                let times: Vec<f64> = reads
                    .iter()
                    .filter(|read| &read.reader == reader && read.arm == arm.name)
                    .map(seconds)
                    .collect();
                marks.push(Mark::Points {
                    points: times.iter().map(|time| [centre + offset, *time]).collect(),
                    radius: 2.5,
                    hue: Hue::Series(number),
                });
                all.extend(times);
            }
            if let Some(median) = median(&mut all) {
                marks.push(Mark::Segment {
                    from: [centre - 0.35, median],
                    to: [centre + 0.35, median],
                    stroke: Stroke::solid(Hue::Ink, 2.5),
                });
                marks.push(Mark::Label {
                    at: [centre + 0.37, median],
                    text: format!("{median:.0} s"),
                    anchor: Anchor::Left,
                });
                caption.push(format!(
                    "{}: median {median:.1} s over {} reads",
                    arm.name,
                    all.len()
                ));
            }
        }
        Chart {
            title: "Active time per case".into(),
            x: Axis {
                title: "arm".into(),
                min: 0.4,
                max: as_f64(arms.len()) + 0.6,
                ticks: arms
                    .iter()
                    .enumerate()
                    .map(|(index, arm)| (as_f64(index + 1), keyslice_core::text::shown_short(&arm.name, LABEL_CHARS)))
                    .collect(),
            },
            y: Axis::numeric("seconds", 0.0, top, step, 0),
            marks,
            legend: readers
                .iter()
                .enumerate()
                .map(|(number, reader)| LegendEntry {
                    text: keyslice_core::text::shown_short(reader, LABEL_CHARS),
                    stroke: Stroke::solid(Hue::Series(number), 2.0),
                })
                .collect(),
            caption: std::iter::once(
                "each dot a read, coloured by reader; bar: the median; time counts only while the window has the reader's attention".to_string(),
            )
            .chain(caption)
            .collect(),
        }
    }
}

/// Each arm's AUC averaged over its readers, as the MRMC analysis gives it (none while the
/// reads are too few for it).
pub(super) fn arm_aucs(mrmc: &keyslice_core::mrmc::Reads) -> BTreeMap<String, f64> {
    ustat_table(mrmc)
        .map(|rows| {
            rows.into_iter()
                .filter(|row| row.AUCB.is_none())
                .map(|row| (row.modalityA, row.AUCA))
                .collect()
        })
        .unwrap_or_default()
}

/// A forest plot row: label, estimate, interval, emphasised (the MRMC row).
type ForestRow = (String, f64, f64, f64, bool);

/// How readers took the AI's hallucinated findings in each arm: the share of reads of an
/// organ where the AI made up a tumor that kept it (with the images alone: the share where
/// the reader called that tumor on their own), as bars. The file is [`UPTAKE_FILE`].
#[must_use]
pub fn uptake_chart(uptake: &[super::Uptake]) -> Chart {
    let mut marks = Vec::new();
    let mut caption = vec![
        "bar: the share of reads of an organ where the AI made up a tumor that kept it".to_string(),
        "arms showing the AI: accepted or changed; images alone: the reader called it on their own"
            .to_string(),
    ];
    for (index, arm) in uptake.iter().enumerate() {
        let x = as_f64(index + 1);
        if arm.hallucinations_read == 0 {
            continue;
        }
        let share = 100.0 * as_f64(arm.kept) / as_f64(arm.hallucinations_read);
        marks.push(Mark::Segment {
            from: [x, 0.0],
            to: [x, share],
            stroke: Stroke::solid(Hue::Series(index), 40.0),
        });
        marks.push(Mark::Label {
            at: [x + 0.22, share.max(4.0)],
            text: format!("{share:.0} %"),
            anchor: Anchor::Left,
        });
        caption.push(format!(
            "{}: kept in {} of {} reads",
            arm.arm, arm.kept, arm.hallucinations_read
        ));
    }
    Chart {
        title: "AI hallucinations kept by readers".into(),
        x: Axis {
            title: "arm".into(),
            min: 0.4,
            max: as_f64(uptake.len()) + 0.6,
            ticks: uptake
                .iter()
                .enumerate()
                .map(|(index, arm)| {
                    (
                        as_f64(index + 1),
                        keyslice_core::text::shown_short(&arm.arm, LABEL_CHARS),
                    )
                })
                .collect(),
        },
        y: Axis::numeric("reads that kept it (%)", 0.0, 100.0, 20.0, 0),
        marks,
        legend: Vec::new(),
        caption,
    }
}

/// The file of [`uptake_chart`].
pub const UPTAKE_FILE: &str = "hallucinations.png";

/// Each read's (confidence, truth) per case/organ whose truth is known.
pub(super) fn unit_scores<'a>(
    reads: impl Iterator<Item = &'a Read>,
    truth: &BTreeMap<String, Findings>,
) -> Vec<(f64, bool)> {
    let mut scores = Vec::new();
    for read in reads {
        let Some(findings) = truth.get(&read.case) else {
            continue;
        };
        for organ in Organ::ALL {
            if let Some(call) = read.calls.get(&organ) {
                scores.push((f64::from(call.confidence), findings.states_tumor(organ)));
            }
        }
    }
    scores
}

/// A step of 1, 2 or 5 × 10ⁿ that cuts `range` into about `count` parts.
fn nice_step(range: f64, count: usize) -> f64 {
    let raw = (range / as_f64(count.max(1))).max(1e-9);
    let power = 10_f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|factor| factor * power)
        .find(|step| *step >= raw)
        .unwrap_or(10.0 * power)
}

pub(super) fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    Some(if values.len().is_multiple_of(2) {
        f64::midpoint(values[middle - 1], values[middle])
    } else {
        values[middle]
    })
}

#[expect(
    clippy::cast_precision_loss,
    reason = "counts of rows, arms and readers"
)]
fn as_f64(count: usize) -> f64 {
    count as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_one_two_or_five_times_a_power_of_ten() {
        assert!((nice_step(1.0, 5) - 0.2).abs() < 1e-12);
        assert!((nice_step(0.3, 4) - 0.1).abs() < 1e-12);
        assert!((nice_step(170.0, 5) - 50.0).abs() < 1e-9);
    }

    #[test]
    fn uptake_bars_rise_to_the_share_kept_and_skip_arms_without_hallucinations() {
        use super::super::{Shows, Uptake};
        let arm = |name: &str, shows, read, kept| Uptake {
            arm: name.into(),
            shows,
            hallucinations_read: read,
            kept,
        };
        let chart = uptake_chart(&[
            arm("unaided", Shows::Images, 27, 5),
            arm("aided", Shows::Report, 27, 19),
            arm("evidence", Shows::Evidence, 0, 0),
        ]);
        let bars: Vec<[f64; 2]> = chart
            .marks
            .iter()
            .filter_map(|mark| match mark {
                Mark::Segment { to, .. } => Some(*to),
                _ => None,
            })
            .collect();
        assert_eq!(bars.len(), 2);
        assert!((bars[0][1] - 500.0 / 27.0).abs() < 1e-9);
        assert!((bars[1][1] - 1900.0 / 27.0).abs() < 1e-9);
        assert!(
            chart
                .caption
                .iter()
                .any(|line| line == "aided: kept in 19 of 27 reads")
        );
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }
}
