//! The RL stage's reward curves as a PNG (`rl_rewards.png`): one line per reward term over
//! the steps, a legend, and the y axis from 0 to 1 (every term lies there). Drawn pixel by
//! pixel with a 3 × 5 bitmap font, so no plotting library or font file is needed.

use std::path::Path;

use image::{Rgb, RgbImage};

const WIDTH: u32 = 720;
const HEIGHT: u32 = 420;
const LEFT: u32 = 40;
const RIGHT: u32 = 170;
const TOP: u32 = 20;
const BOTTOM: u32 = 30;

/// Line colours, in series order (total first).
const COLOURS: [[u8; 3]; 6] = [
    [0, 0, 0],
    [150, 150, 150],
    [31, 119, 180],
    [44, 160, 44],
    [255, 127, 14],
    [214, 39, 40],
];

/// 3 × 5 glyphs, a row of three bits per line, top first.
fn glyph(c: char) -> [u8; 5] {
    match c.to_ascii_lowercase() {
        '0' => [7, 5, 5, 5, 7],
        '1' => [2, 6, 2, 2, 7],
        '2' => [7, 1, 7, 4, 7],
        '3' => [7, 1, 3, 1, 7],
        '4' => [5, 5, 7, 1, 1],
        '5' => [7, 4, 7, 1, 7],
        '6' => [7, 4, 7, 5, 7],
        '7' => [7, 1, 1, 2, 2],
        '8' => [7, 5, 7, 5, 7],
        '9' => [7, 5, 7, 1, 7],
        '.' => [0, 0, 0, 0, 2],
        'a' => [2, 5, 7, 5, 5],
        'b' => [6, 5, 6, 5, 6],
        'c' => [3, 4, 4, 4, 3],
        'd' => [6, 5, 5, 5, 6],
        'e' => [7, 4, 6, 4, 7],
        'f' => [7, 4, 6, 4, 4],
        'g' => [3, 4, 5, 5, 3],
        'h' => [5, 5, 7, 5, 5],
        'i' => [7, 2, 2, 2, 7],
        'k' => [5, 5, 6, 5, 5],
        'l' => [4, 4, 4, 4, 7],
        'm' => [5, 7, 7, 5, 5],
        'n' => [6, 5, 5, 5, 5],
        'o' => [2, 5, 5, 5, 2],
        'p' => [6, 5, 6, 4, 4],
        'r' => [6, 5, 6, 5, 5],
        's' => [3, 4, 2, 1, 6],
        't' => [7, 2, 2, 2, 2],
        'u' => [5, 5, 5, 5, 7],
        'w' => [5, 5, 7, 7, 5],
        'x' => [5, 5, 2, 5, 5],
        'y' => [5, 5, 2, 2, 2],
        'z' => [7, 1, 2, 4, 7],
        _ => [0; 5],
    }
}

/// Writes `text` with its top-left at (`x`, `y`), each font pixel `scale`² image pixels.
fn text(image: &mut RgbImage, x: u32, y: u32, text: &str, scale: u32, colour: [u8; 3]) {
    for (index, c) in text.chars().enumerate() {
        let rows = glyph(c);
        let x0 = x + index as u32 * 4 * scale;
        for (row, bits) in rows.iter().enumerate() {
            for column in 0..3u32 {
                if bits & (4 >> column) == 0 {
                    continue;
                }
                for dy in 0..scale {
                    for dx in 0..scale {
                        let (px, py) = (x0 + column * scale + dx, y + row as u32 * scale + dy);
                        if px < image.width() && py < image.height() {
                            image.put_pixel(px, py, Rgb(colour));
                        }
                    }
                }
            }
        }
    }
}

/// A 2-pixel line from `from` to `to`.
fn line(image: &mut RgbImage, from: (f64, f64), to: (f64, f64), colour: [u8; 3]) {
    let steps = ((to.0 - from.0).abs().max((to.1 - from.1).abs()).ceil() as usize).max(1);
    for step in 0..=steps {
        let along = step as f64 / steps as f64;
        let at = (
            from.0 + (to.0 - from.0) * along,
            from.1 + (to.1 - from.1) * along,
        );
        for thick in [0.0, 1.0] {
            let (px, py) = (at.0.round(), (at.1 + thick).round());
            if px >= 0.0 && py >= 0.0 && (px as u32) < image.width() && (py as u32) < image.height()
            {
                image.put_pixel(px as u32, py as u32, Rgb(colour));
            }
        }
    }
}

/// Draws `series` (name, value per step, each in [0, 1], a moving mean over `window`
/// steps) and writes the PNG to `path`.
pub fn write_reward_plot(
    series: &[(&str, Vec<f64>)],
    window: usize,
    path: &Path,
) -> Result<(), String> {
    let mut image = RgbImage::from_pixel(WIDTH, HEIGHT, Rgb([255, 255, 255]));
    let (x0, x1) = (f64::from(LEFT), f64::from(WIDTH - RIGHT));
    let (y0, y1) = (f64::from(HEIGHT - BOTTOM), f64::from(TOP));
    // Grid at 0, 0.25, …, 1 with labels; the axes.
    for quarter in 0..=4 {
        let value = f64::from(quarter) / 4.0;
        let y = y0 + (y1 - y0) * value;
        let colour = if quarter == 0 { [0; 3] } else { [225; 3] };
        line(&mut image, (x0, y), (x1, y), colour);
        text(
            &mut image,
            4,
            y as u32 - 4,
            &format!("{value:.2}"),
            2,
            [0; 3],
        );
    }
    line(&mut image, (x0, y0), (x0, y1), [0; 3]);
    let steps = series.first().map_or(0, |(_, values)| values.len());
    text(&mut image, LEFT, HEIGHT - 16, "step 1", 2, [0; 3]);
    let last = format!("{steps}");
    text(
        &mut image,
        WIDTH - RIGHT - last.len() as u32 * 8,
        HEIGHT - 16,
        &last,
        2,
        [0; 3],
    );
    let x_of = |step: usize| x0 + (x1 - x0) * step as f64 / (steps.max(2) - 1) as f64;
    for (index, (name, values)) in series.iter().enumerate() {
        let colour = COLOURS[index % COLOURS.len()];
        for step in 1..values.len() {
            let y = |v: f64| y0 + (y1 - y0) * v.clamp(0.0, 1.0);
            line(
                &mut image,
                (x_of(step - 1), y(values[step - 1])),
                (x_of(step), y(values[step])),
                colour,
            );
        }
        let ly = TOP + 10 + index as u32 * 22;
        let lx = WIDTH - RIGHT + 14;
        line(
            &mut image,
            (f64::from(lx), f64::from(ly + 4)),
            (f64::from(lx + 16), f64::from(ly + 4)),
            colour,
        );
        text(&mut image, lx + 22, ly, name, 2, colour);
    }
    let ly = TOP + 20 + series.len() as u32 * 22;
    text(&mut image, WIDTH - RIGHT + 14, ly, "mean of", 2, [0; 3]);
    text(
        &mut image,
        WIDTH - RIGHT + 14,
        ly + 14,
        &format!("{window} steps"),
        2,
        [0; 3],
    );
    image.save(path).map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plot is a readable PNG of the stated size, with the curves' colours on it.
    #[test]
    fn the_plot_draws_every_curve() {
        let folder = std::env::temp_dir().join(format!("keyslice-plot-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        let path = folder.join("plot.png");
        let series = vec![
            ("total", vec![0.2, 0.4, 0.6]),
            ("format", vec![1.0, 1.0, 1.0]),
            ("existence", vec![0.5, 0.6, 0.9]),
        ];
        write_reward_plot(&series, 1, &path).unwrap();
        let image = image::open(&path).unwrap().to_rgb8();
        assert_eq!(image.dimensions(), (WIDTH, HEIGHT));
        for colour in &COLOURS[..3] {
            assert!(
                image.pixels().filter(|p| p.0 == *colour).count() > 50,
                "{colour:?} drawn"
            );
        }
        std::fs::remove_dir_all(folder).ok();
    }
}
