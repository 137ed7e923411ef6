//! The evaluation's plot: per-frame errors of every column.

use std::path::Path;

use anyhow::Result;
use image::{Rgb, RgbImage};

use crate::learn::eval::columns::Column;
use crate::learn::eval::Report;

/// Line plot of the per-frame mean position RMSE of every column, with
/// axes, ticks, a legend and a title.
pub fn plot(rep: &Report, path: &Path) -> Result<()> {
    use crate::view::canvas::{self, Series};
    let mut img = RgbImage::from_pixel(900, 480, Rgb([255, 255, 255]));
    let [nx, ny] = rep.resolution;
    let labels: Vec<(Column, String)> = rep
        .columns
        .iter()
        .map(|c| {
            let mesh = match c.column {
                Column::Fine2 => format!("{}×{}", 2 * nx - 1, 2 * ny - 1),
                _ => format!("{nx}×{ny}"),
            };
            (c.column, format!("{} {mesh}", c.column.label()))
        })
        .collect();
    let series = rep
        .columns
        .iter()
        .zip(&labels)
        .filter(|(c, _)| !c.per_frame.is_empty())
        .map(|(c, (_, name))| Series { name, values: &c.per_frame, color: color(c.column) })
        .collect();
    let title = format!("Position RMSE against the fine reference, mean of {} rollouts", rep.rollouts.len());
    let p = canvas::Plot {
        title: &title,
        x_label: "frame",
        y_label: "RMSE (m)",
        x_step: 1.0,
        x_len: None,
        y_max: None,
        series,
    };
    canvas::plot(&mut img, (0, 0, 900, 480), &p);
    img.save(path)?;
    Ok(())
}

/// Each column's line colour.
fn color(column: Column) -> Rgb<u8> {
    Rgb(match column {
        Column::Plain => [200, 40, 40],
        Column::Float => [40, 80, 220],
        Column::Int8 => [240, 150, 20],
        Column::Grained => [200, 120, 160],
        Column::HalfDt => [150, 60, 180],
        Column::QuarterDt => [120, 120, 120],
        Column::Bdf2 => [20, 170, 170],
        Column::Fine2 => [40, 160, 60],
        Column::Bdf2HalfDt => [90, 140, 200],
        Column::Bdf2EighthDt => [0, 0, 0],
    })
}
