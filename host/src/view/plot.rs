//! The evaluation's plot: per-frame errors of every column.

use std::path::Path;

use anyhow::Result;
use image::{Rgb, RgbImage};

use crate::learn::eval::Report;

/// Line plot of the per-frame mean position RMSE of every column, with
/// axes, ticks, a legend and a title.
pub fn plot(rep: &Report, path: &Path) -> Result<()> {
    use crate::view::canvas::{self, Series};
    let mut img = RgbImage::from_pixel(900, 480, Rgb([255, 255, 255]));
    let mut series = vec![Series { name: "plain 16×16", values: &rep.mean_rmse_plain, color: Rgb([200, 40, 40]) }];
    for (name, values, color) in [
        ("corrected 16×16 (float)", &rep.mean_rmse_corrected, Rgb([40, 80, 220])),
        ("corrected 16×16 (int8)", &rep.mean_rmse_int8, Rgb([240, 150, 20])),
        ("plain 31×31", &rep.mean_rmse_fine2, Rgb([40, 160, 60])),
        ("plain 16×16 at dt/2", &rep.mean_rmse_half_dt, Rgb([150, 60, 180])),
        ("plain 16×16 at dt/4", &rep.mean_rmse_quarter_dt, Rgb([120, 120, 120])),
    ] {
        if !values.is_empty() {
            series.push(Series { name, values, color });
        }
    }
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
