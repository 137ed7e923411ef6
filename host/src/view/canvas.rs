//! Drawing on RGB images: 8×8 bitmap text, lines, and line plots with axes,
//! ticks, labels, a legend and a title (`weft eval`'s `rmse.png`, the error
//! strip of `weft demo`).

use font8x8::UnicodeFonts;
use image::{Rgb, RgbImage};

pub const BLACK: Rgb<u8> = Rgb([20, 20, 20]);
const GRID: Rgb<u8> = Rgb([225, 225, 225]);

/// Width in pixels of `s` drawn at `scale`.
pub fn text_width(s: &str, scale: u32) -> u32 {
    8 * scale * s.chars().count() as u32
}

/// Draws `s` with its top-left corner at `(x, y)`, each font pixel a
/// `scale × scale` square; pixels off the image are skipped, characters the
/// font lacks are blank.
pub fn text(img: &mut RgbImage, x: i32, y: i32, s: &str, scale: u32, color: Rgb<u8>) {
    for (k, c) in s.chars().enumerate() {
        let Some(glyph) = font8x8::BASIC_FONTS.get(c).or_else(|| font8x8::LATIN_FONTS.get(c)) else { continue };
        let x0 = x + (8 * scale * k as u32) as i32;
        for (row, bits) in glyph.iter().enumerate() {
            for col in 0..8 {
                if bits & (1 << col) == 0 {
                    continue;
                }
                for dy in 0..scale {
                    for dx in 0..scale {
                        put(img, x0 + (col * scale + dx) as i32, y + (row as u32 * scale + dy) as i32, color);
                    }
                }
            }
        }
    }
}

fn put(img: &mut RgbImage, x: i32, y: i32, c: Rgb<u8>) {
    if x >= 0 && y >= 0 && (x as u32) < img.width() && (y as u32) < img.height() {
        img.put_pixel(x as u32, y as u32, c);
    }
}

/// A straight line `width` pixels thick.
pub fn line(img: &mut RgbImage, (x0, y0): (f32, f32), (x1, y1): (f32, f32), c: Rgb<u8>, width: i32) {
    let n = ((x1 - x0).abs().max((y1 - y0).abs()).ceil() as usize).max(1);
    for i in 0..=n {
        let f = i as f32 / n as f32;
        let (x, y) = ((x0 + f * (x1 - x0)).round() as i32, (y0 + f * (y1 - y0)).round() as i32);
        for d in 0..width {
            put(img, x + d - width / 2, y, c);
            put(img, x, y + d - width / 2, c);
        }
    }
}

/// A named data series.
pub struct Series<'a> {
    pub name: &'a str,
    pub values: &'a [f32],
    pub color: Rgb<u8>,
}

/// A line plot: value `k` of a series is drawn at `x = k · x_step`.
pub struct Plot<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub x_step: f32,
    /// The x range ends at `x_len · x_step` (so that a growing series keeps
    /// its axes); `None`: the longest series.
    pub x_len: Option<usize>,
    /// The y range ends here; `None`: the largest value.
    pub y_max: Option<f32>,
    pub series: Vec<Series<'a>>,
}

/// Tick spacing near `range / 5` from 1, 2, 5 × 10ᵏ.
fn tick_step(range: f32) -> f32 {
    let raw = (range / 5.0).max(f32::MIN_POSITIVE);
    let p = 10f32.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * p).find(|&s| s >= raw).unwrap_or(10.0 * p)
}

fn label(v: f32, step: f32) -> String {
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    format!("{v:.decimals$}")
}

/// Draws `p` into the rectangle `(x, y, w, h)` of `img`: title above, y
/// label left, x label below, grid lines and labelled ticks on both axes,
/// a legend in the top-left corner of the plot area.
pub fn plot(img: &mut RgbImage, (x, y, w, h): (u32, u32, u32, u32), p: &Plot) {
    let (left, right, top, bottom) = (x as f32 + 70.0, (x + w) as f32 - 12.0, y as f32 + 30.0, (y + h) as f32 - 40.0);
    let n = p.x_len.unwrap_or_else(|| p.series.iter().map(|s| s.values.len()).max().unwrap_or(0)).max(2);
    let x_max = (n - 1) as f32 * p.x_step;
    let data_max =
        p.y_max.unwrap_or_else(|| p.series.iter().flat_map(|s| s.values.iter().copied()).fold(0.0, f32::max)).max(1e-9);
    // Headroom for the legend in the top-left corner, so that no curve
    // passes under it.
    let legend = 12.0 * p.series.len() as f32 + 12.0;
    let y_max = data_max * (bottom - top) / (bottom - top - legend).max(1.0);
    let px = |v: f32| left + (right - left) * v / x_max;
    let py = |v: f32| bottom - (bottom - top) * (v / y_max).clamp(0.0, 1.0);
    let tw = |s: &str| text_width(s, 1) as f32;
    // Title, axis labels.
    text(img, ((left + right - tw(p.title)) / 2.0) as i32, y as i32 + 8, p.title, 1, BLACK);
    text(img, ((left + right - tw(p.x_label)) / 2.0) as i32, (bottom + 24.0) as i32, p.x_label, 1, BLACK);
    text(img, x as i32 + 4, (top - 14.0) as i32, p.y_label, 1, BLACK);
    // Grid and ticks.
    let ys = tick_step(y_max);
    let mut v = 0.0;
    while v <= y_max * 1.0001 {
        line(img, (left, py(v)), (right, py(v)), GRID, 1);
        line(img, (left - 4.0, py(v)), (left, py(v)), BLACK, 1);
        let s = label(v, ys);
        text(img, (left - 8.0 - tw(&s)) as i32, (py(v) - 4.0) as i32, &s, 1, BLACK);
        v += ys;
    }
    let xs = tick_step(x_max);
    let mut v = 0.0;
    while v <= x_max * 1.0001 {
        line(img, (px(v), top), (px(v), bottom), GRID, 1);
        line(img, (px(v), bottom), (px(v), bottom + 4.0), BLACK, 1);
        let s = label(v, xs);
        text(img, (px(v) - tw(&s) / 2.0) as i32, (bottom + 8.0) as i32, &s, 1, BLACK);
        v += xs;
    }
    line(img, (left, top), (left, bottom), BLACK, 1);
    line(img, (left, bottom), (right, bottom), BLACK, 1);
    // Series.
    for s in &p.series {
        for k in 1..s.values.len() {
            let (a, b) = (s.values[k - 1], s.values[k]);
            line(img, (px((k - 1) as f32 * p.x_step), py(a)), (px(k as f32 * p.x_step), py(b)), s.color, 2);
        }
    }
    // Legend.
    let (lx, mut ly) = (left + 10.0, top + 8.0);
    let width = p.series.iter().map(|s| tw(s.name)).fold(0.0, f32::max) + 34.0;
    for yy in (ly - 4.0) as i32..(ly + 12.0 * p.series.len() as f32) as i32 {
        line(img, (lx - 4.0, yy as f32), (lx + width, yy as f32), Rgb([255, 255, 255]), 1);
    }
    for s in &p.series {
        line(img, (lx, ly + 3.0), (lx + 20.0, ly + 3.0), s.color, 3);
        text(img, (lx + 26.0) as i32, ly as i32 - 1, s.name, 1, BLACK);
        ly += 12.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_numbers_about_five_to_a_range() {
        let near = |a: f32, b: f32| (a - b).abs() < 1e-6 * b;
        assert!(near(tick_step(1.0), 0.2));
        assert!(near(tick_step(0.13), 0.05));
        assert!(near(tick_step(200.0), 50.0));
        assert_eq!(label(0.05, 0.05), "0.05");
        assert_eq!(label(150.0, 50.0), "150");
    }

    #[test]
    fn text_sets_pixels_of_the_glyph_only() {
        let mut img = RgbImage::from_pixel(40, 10, Rgb([255, 255, 255]));
        text(&mut img, 0, 0, "I", 1, BLACK);
        let dark = img.pixels().filter(|p| p[0] < 128).count();
        // The 8×8 'I' has a few dozen set pixels, all in the first cell.
        assert!(dark > 10 && dark < 40, "{dark}");
        assert!(img.enumerate_pixels().all(|(x, _, p)| x < 8 || p[0] == 255));
    }
}
