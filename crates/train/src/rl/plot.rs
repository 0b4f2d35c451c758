//! The RL stage's reward curves (`rl_rewards.png`) as a chart: one line per reward term over
//! the steps, a legend, and the y axis from 0 to 1 (every term lies there). A
//! [`keyslice_core::chart::Chart`], drawn into a PNG by whoever runs the stage with the same
//! code as every other chart (the viewer's).

use keyslice_core::chart::{Axis, Chart, Hue, LegendEntry, Mark, Stroke};

/// `series` (name, value per step, each in [0, 1], a moving mean over `window` steps) as a
/// chart of the reward curves.
#[must_use]
pub fn reward_chart(series: &[(&str, Vec<f64>)], window: usize) -> Chart {
    let steps = series.first().map_or(0, |(_, values)| values.len());
    let last = steps.max(2) as f64;
    // About eight ticks along the steps, on a round step.
    let raw = (last - 1.0) / 8.0;
    let magnitude = 10f64.powf(raw.max(1.0).log10().floor());
    let tick = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|factor| factor * magnitude)
        .find(|step| *step >= raw)
        .unwrap_or(10.0 * magnitude);
    let mut marks = Vec::new();
    let mut legend = Vec::new();
    for (index, (name, values)) in series.iter().enumerate() {
        // The total in ink, the terms in the palette.
        let hue = if index == 0 {
            Hue::Ink
        } else {
            Hue::Series(index - 1)
        };
        let stroke = Stroke::solid(hue, if index == 0 { 2.5 } else { 1.5 });
        marks.push(Mark::Line {
            points: values
                .iter()
                .enumerate()
                .map(|(step, value)| [(step + 1) as f64, value.clamp(0.0, 1.0)])
                .collect(),
            stroke,
        });
        legend.push(LegendEntry {
            text: (*name).to_string(),
            stroke,
        });
    }
    Chart {
        title: "RL stage: rewards".into(),
        x: Axis::numeric("step", 1.0, last, tick, 0),
        y: Axis::numeric("reward", 0.0, 1.0, 0.25, 2),
        marks,
        legend,
        caption: vec![format!(
            "Each reward term and their weighted total per step, as a mean of {window} steps."
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every curve is a line in the chart, inside its axes, with its legend entry.
    #[test]
    fn the_chart_holds_every_curve() {
        let series = vec![
            ("total", vec![0.2, 0.4, 0.6]),
            ("format", vec![1.0, 1.0, 1.0]),
            ("existence", vec![0.5, 0.6, 0.9]),
        ];
        let chart = reward_chart(&series, 1);
        assert_eq!(chart.marks.len(), 3);
        assert_eq!(chart.legend.len(), 3);
        assert_eq!(chart.legend[2].text, "existence");
        for [x, y] in chart.points() {
            assert!((chart.x.min..=chart.x.max).contains(&x), "{x}");
            assert!((chart.y.min..=chart.y.max).contains(&y), "{y}");
        }
        // Ticks on round steps over a long run.
        let long = vec![("total", vec![0.5; 300])];
        let chart = reward_chart(&long, 15);
        let ticks: Vec<f64> = chart.x.ticks.iter().map(|(value, _)| *value).collect();
        assert!(ticks.len() >= 5 && ticks.len() <= 12, "{ticks:?}");
    }
}
