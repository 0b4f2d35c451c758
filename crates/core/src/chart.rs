//! A chart as plain data: two axes with their ticks, and marks in data coordinates (lines,
//! points, segments, labels). What to plot is decided where the numbers are (a reader
//! study's ROC curves, say); how to draw it is the viewer's: on screen, and into a PNG with
//! the same code. Knows no drawing library.

/// A colour of the chart palette (Okabe and Ito's, readable with colour-blindness), or the
/// grey of references and notes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hue {
    /// Series colour `n` (taken modulo the palette's size).
    Series(usize),
    /// References: the chance line, zero difference.
    Grey,
    /// Text and emphasised marks.
    Ink,
}

/// How a mark is drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stroke {
    /// Its colour.
    pub hue: Hue,
    /// Width in points.
    pub width: f32,
    /// Dashed rather than solid.
    pub dashed: bool,
}

impl Stroke {
    /// A solid stroke.
    #[must_use]
    pub fn solid(hue: Hue, width: f32) -> Self {
        Self {
            hue,
            width,
            dashed: false,
        }
    }

    /// A dashed stroke.
    #[must_use]
    pub fn dashed(hue: Hue, width: f32) -> Self {
        Self {
            hue,
            width,
            dashed: true,
        }
    }
}

/// Where a label sits relative to its point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anchor {
    /// The text starts at the point.
    Left,
    /// The text ends at the point.
    Right,
}

/// One thing drawn, in data coordinates.
#[derive(Clone, Debug, PartialEq)]
pub enum Mark {
    /// A polyline.
    Line {
        /// Its points `[x, y]`.
        points: Vec<[f64; 2]>,
        /// How it is drawn.
        stroke: Stroke,
    },
    /// Dots.
    Points {
        /// Their centres.
        points: Vec<[f64; 2]>,
        /// Radius in points.
        radius: f32,
        /// Their colour.
        hue: Hue,
    },
    /// A straight segment (an interval, a reference line).
    Segment {
        /// One end.
        from: [f64; 2],
        /// The other end.
        to: [f64; 2],
        /// How it is drawn.
        stroke: Stroke,
    },
    /// Text at a point.
    Label {
        /// The point.
        at: [f64; 2],
        /// The text.
        text: String,
        /// Which side of the point the text is on.
        anchor: Anchor,
    },
}

/// An axis: its title, its range and where its ticks go (a category axis is ticks with
/// names).
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// Its title, with units.
    pub title: String,
    /// The lowest value shown.
    pub min: f64,
    /// The highest value shown.
    pub max: f64,
    /// Ticks: value and text.
    pub ticks: Vec<(f64, String)>,
}

impl Axis {
    /// An axis from `min` to `max` with ticks every `step`, written with `decimals`.
    #[must_use]
    pub fn numeric(title: &str, min: f64, max: f64, step: f64, decimals: usize) -> Self {
        let mut ticks = Vec::new();
        if step > 0.0 && max > min {
            let first = (min / step).ceil();
            let last = (max / step).floor();
            // Whole steps between two finite bounds: a small count, bounded below.
            #[expect(
                clippy::cast_possible_truncation,
                reason = "the count of steps is small and finite"
            )]
            let count = ((last - first).max(-1.0) as i64 + 1).min(200);
            for index in 0..count {
                #[expect(clippy::cast_precision_loss, reason = "at most 200 ticks")]
                let value = (first + index as f64) * step;
                ticks.push((value, format!("{value:.decimals$}")));
            }
        }
        Self {
            title: title.to_string(),
            min,
            max,
            ticks,
        }
    }

    /// Where `value` falls along the axis, 0 at `min` and 1 at `max`.
    #[must_use]
    pub fn fraction(&self, value: f64) -> f64 {
        if self.max > self.min {
            (value - self.min) / (self.max - self.min)
        } else {
            0.5
        }
    }
}

/// One entry of the legend.
#[derive(Clone, Debug, PartialEq)]
pub struct LegendEntry {
    /// What it names.
    pub text: String,
    /// How its marks are drawn.
    pub stroke: Stroke,
}

/// A chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// Its title.
    pub title: String,
    /// The horizontal axis.
    pub x: Axis,
    /// The vertical axis.
    pub y: Axis,
    /// The marks, drawn in order.
    pub marks: Vec<Mark>,
    /// The legend (empty: none).
    pub legend: Vec<LegendEntry>,
    /// Lines of text under the chart: what it shows and how it was computed.
    pub caption: Vec<String>,
}

impl Chart {
    /// Every point of every mark, to check a chart stays inside its axes.
    pub fn points(&self) -> impl Iterator<Item = [f64; 2]> + '_ {
        self.marks.iter().flat_map(|mark| match mark {
            Mark::Line { points, .. } | Mark::Points { points, .. } => points.clone(),
            Mark::Segment { from, to, .. } => vec![*from, *to],
            Mark::Label { at, .. } => vec![*at],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_axis_ticks_every_step_within_the_range() {
        let axis = Axis::numeric("AUC", -0.25, 0.5, 0.25, 2);
        let values: Vec<_> = axis.ticks.iter().map(|(value, _)| *value).collect();
        assert_eq!(values, [-0.25, 0.0, 0.25, 0.5]);
        assert_eq!(axis.ticks[1].1, "0.00");
        assert!((axis.fraction(0.125) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn an_empty_range_has_no_ticks_and_centres_values() {
        let axis = Axis::numeric("s", 3.0, 3.0, 1.0, 0);
        assert!(axis.ticks.is_empty());
        assert!((axis.fraction(3.0) - 0.5).abs() < 1e-12);
    }
}
