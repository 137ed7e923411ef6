//! `weft simulate`'s picture of a run: an animated GIF and a PNG still of
//! the cloth (and, for a corrected run, the plain cloth beside it), its
//! colliders drawn, with the demo's renderer ([`crate::view::render`]).

use std::path::{Path, PathBuf};

use anyhow::Result;
use image::{Rgb, RgbImage};
use weft_core::prelude::*;

use crate::sim::build::{self, ModelParts};
use crate::sim::scenario::Scenario;
use crate::view::canvas::{self, BLACK};
use crate::view::render::{render, side_by_side, write_gif, Camera};
use weft_core::model::CoarseGrain;

/// One run to draw: its title, colour and positions per frame (frame 0
/// the start).
pub struct Track<'a> {
    pub title: &'a str,
    pub color: [f32; 3],
    pub frames: &'a [Vec<Vec3>],
}

/// The camera that sees every frame of `tracks`: looking at the middle of
/// their bounding box from the front, above and to the side, far enough
/// for the box to fill about two thirds of the view.
pub fn camera(tracks: &[Track], width: u32, height: u32) -> Camera {
    let (mut lo, mut hi) = (
        Vec3::new(f32::INFINITY, f32::INFINITY, f32::INFINITY),
        -Vec3::new(f32::INFINITY, f32::INFINITY, f32::INFINITY),
    );
    for p in tracks.iter().flat_map(|t| t.frames.iter().flatten()).filter(|p| p.is_finite()) {
        lo = Vec3::new(lo.x.min(p.x), lo.y.min(p.y), lo.z.min(p.z));
        hi = Vec3::new(hi.x.max(p.x), hi.y.max(p.y), hi.z.max(p.z));
    }
    if !(lo.is_finite() && hi.is_finite()) {
        (lo, hi) = (Vec3::new(-0.5, -0.5, -0.5), Vec3::new(0.5, 0.5, 0.5));
    }
    let target = (lo + hi) * 0.5;
    let size = (hi - lo).norm().max(0.2);
    let fov_y_deg: f32 = 40.0;
    let distance = size / (fov_y_deg.to_radians() * 0.5).tan() * 0.6;
    let eye = target + Vec3::new(0.6, 0.45, 0.85).normalized() * distance;
    Camera { eye, target, fov_y_deg, width, height }
}

/// Draws `tracks` of `scn` side by side every `every` frames: writes
/// `preview.gif` and `preview.png` (the last frame) into `out`; returns
/// their paths.
pub fn write(scn: &Scenario, tracks: &[Track], every: usize, out: &Path) -> Result<(PathBuf, PathBuf)> {
    let mut parts = ModelParts::default();
    let model = &build::model(scn, CoarseGrain::NONE, &mut parts)?;
    let cam = camera(tracks, 320, 260);
    let len = tracks.iter().map(|t| t.frames.len()).min().unwrap_or(0);
    let header = 20u32;
    let frames: Vec<RgbImage> = (0..len)
        .step_by(every.max(1))
        .map(|f| {
            let time = f as f32 * scn.time.dt;
            let panels: Vec<RgbImage> = tracks
                .iter()
                .map(|t| render(&cam, &model.mesh, &t.frames[f], model.scene.colliders, time, t.color))
                .collect();
            let row = side_by_side(&panels.iter().collect::<Vec<_>>());
            let mut img = RgbImage::from_pixel(row.width(), row.height() + header, Rgb([255, 255, 255]));
            image::imageops::replace(&mut img, &row, 0, header as i64);
            for (k, t) in tracks.iter().enumerate() {
                let x = k as i32 * cam.width as i32 + 6;
                let color = Rgb(t.color.map(|c| c as u8));
                canvas::text(&mut img, x, 6, t.title, 1, color);
                canvas::text(&mut img, x + cam.width as i32 - 96, 6, &format!("t = {time:.2} s"), 1, BLACK);
            }
            img
        })
        .collect();
    std::fs::create_dir_all(out)?;
    let (gif, png) = (out.join("preview.gif"), out.join("preview.png"));
    let ms = (1000.0 * scn.time.dt * every.max(1) as f32).round() as u32;
    write_gif(&gif, &frames, ms)?;
    if let Some(last) = frames.last() {
        last.save(&png)?;
    }
    Ok((gif, png))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_camera_sees_every_node_of_every_frame() {
        let a = vec![vec![Vec3::new(-0.5, 0.2, 0.0), Vec3::new(0.5, 1.4, 0.1)]];
        let b = vec![vec![Vec3::new(0.0, 0.0, -0.3), Vec3::new(f32::NAN, 0.0, 0.0)]];
        let tracks =
            [Track { title: "a", color: [0.0; 3], frames: &a }, Track { title: "b", color: [0.0; 3], frames: &b }];
        let cam = camera(&tracks, 320, 260);
        let fwd = (cam.target - cam.eye).normalized();
        for p in a.iter().chain(&b).flatten().filter(|p| p.is_finite()) {
            let d = *p - cam.eye;
            let along = d.dot(fwd);
            assert!(along > 0.0, "in front");
            // Within the vertical half-angle of the view (the wider one too).
            let off = (d - fwd * along).norm() / along;
            assert!(off < (cam.fov_y_deg.to_radians() * 0.5).tan(), "{p:?} off {off}");
        }
    }
}
