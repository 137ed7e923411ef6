//! A small software renderer for previews: flat-shaded cloth triangles
//! (z-buffered, two-sided) over sphere-traced colliders, and GIF output.

use crate::sim::build::{self, ModelParts};
use std::path::Path;
use weft_core::model::CoarseGrain;

use anyhow::{Context, Result};
use image::codecs::gif::{GifEncoder, Repeat};
use image::{Delay, Frame, Rgb, RgbImage, RgbaImage};
use weft_core::model::{Collider, Shape};
use weft_core::prelude::*;
use weft_weights::format::NetworkData;

use crate::learn::data::families::Family;
use crate::learn::data::metrics;
use crate::learn::data::{self, DatasetSpec};
use crate::sim;
use crate::sim::corrector::{self, Corrector};
use crate::sim::envelope::Envelope;
use crate::sim::scenario::Scenario;

/// A pinhole camera.
#[derive(Clone, Copy, Debug)]
pub struct Camera {
    pub eye: Vec3,
    pub target: Vec3,
    pub fov_y_deg: f32,
    pub width: u32,
    pub height: u32,
}

struct Basis {
    right: Vec3,
    up: Vec3,
    fwd: Vec3,
    focal: f32,
}

impl Camera {
    fn basis(&self) -> Basis {
        let fwd = (self.target - self.eye).normalized();
        let right = fwd.cross(Vec3::new(0.0, 1.0, 0.0)).normalized();
        let up = right.cross(fwd);
        let focal = 0.5 * self.height as f32 / (0.5 * self.fov_y_deg.to_radians()).tan();
        Basis { right, up, fwd, focal }
    }
}

impl Basis {
    /// Screen position and depth of `p`, if in front of the camera.
    fn project(&self, cam: &Camera, p: Vec3) -> Option<(f32, f32, f32)> {
        let d = p - cam.eye;
        let z = d.dot(self.fwd);
        if z <= 1e-3 {
            return None;
        }
        let sx = 0.5 * cam.width as f32 + self.focal * d.dot(self.right) / z;
        let sy = 0.5 * cam.height as f32 - self.focal * d.dot(self.up) / z;
        Some((sx, sy, z))
    }
    fn ray(&self, cam: &Camera, px: f32, py: f32) -> Vec3 {
        let x = (px - 0.5 * cam.width as f32) / self.focal;
        let y = (0.5 * cam.height as f32 - py) / self.focal;
        (self.fwd + self.right * x + self.up * y).normalized()
    }
}

const LIGHT: Vec3 = Vec3::new(0.4, 0.8, 0.45);

fn shade(color: [f32; 3], n: Vec3) -> Rgb<u8> {
    let l = LIGHT.normalized();
    let k = 0.3 + 0.7 * n.dot(l).abs();
    Rgb(color.map(|c| (c * k).clamp(0.0, 255.0) as u8))
}

/// Renders one frame.
pub fn render(cam: &Camera, mesh: &Mesh, x: &[Vec3], colliders: &[Collider], t: f32, cloth: [f32; 3]) -> RgbImage {
    let (w, h) = (cam.width, cam.height);
    let b = cam.basis();
    let mut img = RgbImage::new(w, h);
    let mut depth = vec![f32::INFINITY; (w * h) as usize];
    // Background and colliders by sphere tracing each pixel.
    for py in 0..h {
        for px in 0..w {
            let sky = 235.0 - 60.0 * py as f32 / h as f32;
            img.put_pixel(px, py, Rgb([sky as u8, (sky + 5.0).min(255.0) as u8, 250]));
            let dir = b.ray(cam, px as f32 + 0.5, py as f32 + 0.5);
            for c in colliders {
                if let Some((s, p, n)) = trace(c, cam.eye, dir, t) {
                    let idx = (py * w + px) as usize;
                    if s < depth[idx] {
                        depth[idx] = s;
                        let color = match c.shape {
                            Shape::Plane { .. } => {
                                let check = ((p.x * 4.0).floor() + (p.z * 4.0).floor()) as i64 & 1;
                                if check == 0 {
                                    [150.0, 150.0, 140.0]
                                } else {
                                    [190.0, 190.0, 180.0]
                                }
                            }
                            _ => [200.0, 120.0, 90.0],
                        };
                        img.put_pixel(px, py, shade(color, n));
                    }
                }
            }
        }
    }
    // Cloth triangles, z-buffered; depth is the view distance along the
    // camera axis (s ≈ z for the colliders, close enough for previews).
    let back = [cloth[0] * 0.6, cloth[1] * 0.6, cloth[2] * 0.6];
    for tri in mesh.triangles() {
        let [a, bb, c] = tri.nodes.map(|i| x[i as usize]);
        let (Some(pa), Some(pb), Some(pc)) = (b.project(cam, a), b.project(cam, bb), b.project(cam, c)) else {
            continue;
        };
        let n = (bb - a).cross(c - a).normalized();
        let front = n.dot(cam.eye - a) >= 0.0;
        let col = shade(if front { cloth } else { back }, n);
        let area = (pb.0 - pa.0) * (pc.1 - pa.1) - (pb.1 - pa.1) * (pc.0 - pa.0);
        if area.abs() < 1e-9 {
            continue;
        }
        let minx = pa.0.min(pb.0).min(pc.0).floor().max(0.0) as u32;
        let maxx = (pa.0.max(pb.0).max(pc.0).ceil().min(w as f32 - 1.0)).max(0.0) as u32;
        let miny = pa.1.min(pb.1).min(pc.1).floor().max(0.0) as u32;
        let maxy = (pa.1.max(pb.1).max(pc.1).ceil().min(h as f32 - 1.0)).max(0.0) as u32;
        for py in miny..=maxy {
            for px in minx..=maxx {
                let (sx, sy) = (px as f32 + 0.5, py as f32 + 0.5);
                let w0 = ((pb.0 - sx) * (pc.1 - sy) - (pb.1 - sy) * (pc.0 - sx)) / area;
                let w1 = ((pc.0 - sx) * (pa.1 - sy) - (pc.1 - sy) * (pa.0 - sx)) / area;
                let w2 = 1.0 - w0 - w1;
                if w0 < 0.0 || w1 < 0.0 || w2 < 0.0 {
                    continue;
                }
                let z = w0 * pa.2 + w1 * pb.2 + w2 * pc.2;
                let idx = (py * w + px) as usize;
                if z < depth[idx] {
                    depth[idx] = z;
                    img.put_pixel(px, py, col);
                }
            }
        }
    }
    img
}

/// Sphere-traces a collider: (distance along the ray, hit point, normal).
fn trace(c: &Collider, o: Vec3, d: Vec3, t: f32) -> Option<(f32, Vec3, Vec3)> {
    let mut s = 0.0;
    for _ in 0..96 {
        let p = o + d * s;
        let (dist, n) = c.distance(p, t);
        if dist < 1e-3 {
            return Some((s, p, n));
        }
        s += dist;
        if s > 30.0 {
            break;
        }
    }
    None
}

/// Writes an endlessly looping animated GIF.
pub fn write_gif(path: &Path, frames: &[RgbImage], frame_ms: u32) -> Result<()> {
    let file = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut enc = GifEncoder::new_with_speed(std::io::BufWriter::new(file), 10);
    enc.set_repeat(Repeat::Infinite)?;
    for f in frames {
        let rgba: RgbaImage = image::DynamicImage::ImageRgb8(f.clone()).to_rgba8();
        enc.encode_frame(Frame::from_parts(rgba, 0, 0, Delay::from_numer_denom_ms(frame_ms, 1)))?;
    }
    Ok(())
}

/// Images placed left to right, top-aligned.
pub fn side_by_side(panels: &[&RgbImage]) -> RgbImage {
    let w = panels.iter().map(|p| p.width()).sum();
    let h = panels.iter().map(|p| p.height()).max().unwrap_or(0);
    let mut out = RgbImage::new(w, h);
    let mut x = 0;
    for p in panels {
        image::imageops::replace(&mut out, *p, x as i64, 0);
        x += p.width();
    }
    out
}

/// One labelled panel of a demo frame: its picture, title, colour, and the
/// running position RMSE against the reference so far (`None` for the
/// reference itself).
pub struct Panel<'a> {
    pub image: &'a RgbImage,
    pub title: &'a str,
    pub color: Rgb<u8>,
    pub errors: Option<&'a [f32]>,
}

/// A frame of `weft demo`: the panels side by side, each with its title and
/// its RMSE at this frame, the time, and below them a plot of every
/// panel's RMSE up to this frame, and of `curve`'s (a run without a
/// picture; its image is not drawn) (`frames` frames of `dt` seconds in all,
/// the plot's y range up to `y_max`).
pub fn demo_frame(
    panels: &[Panel],
    curve: Option<Panel>,
    time: f32,
    frame: usize,
    frames: usize,
    dt: f32,
    y_max: f32,
) -> RgbImage {
    use crate::view::canvas::{self, Series, BLACK};
    let row = side_by_side(&panels.iter().map(|p| p.image).collect::<Vec<_>>());
    let (header, chart) = (28u32, 190u32);
    let mut out = RgbImage::from_pixel(row.width(), header + row.height() + chart, Rgb([255, 255, 255]));
    image::imageops::replace(&mut out, &row, 0, header as i64);
    let mut x = 0i32;
    for p in panels {
        canvas::text(&mut out, x + 6, 4, p.title, 1, p.color);
        let line = match p.errors.and_then(|e| e.get(frame)) {
            Some(e) => format!("t = {time:.2} s   RMSE {e:.3} m"),
            None => format!("t = {time:.2} s   reference"),
        };
        canvas::text(&mut out, x + 6, 16, &line, 1, BLACK);
        x += p.image.width() as i32;
    }
    let series = panels
        .iter()
        .chain(curve.as_ref())
        .filter_map(|p| {
            p.errors.map(|e| Series { name: p.title, values: &e[..(frame + 1).min(e.len())], color: p.color })
        })
        .collect();
    let plot = canvas::Plot {
        title: "position RMSE against the fine reference",
        x_label: "time (s)",
        y_label: "RMSE (m)",
        x_step: dt,
        x_len: Some(frames),
        y_max: Some(y_max),
        series,
    };
    canvas::plot(&mut out, (0, header + row.height(), row.width(), chart), &plot);
    out
}

/// The demo's case: the scenario, its reference at the coarse nodes, and
/// why it was chosen. With `seed`, that drape (its fine reference simulated
/// here); otherwise the trajectory of `data`'s test split whose
/// int8-corrected error is the median multiple of its plain error (the
/// reference read from the data set), or drape 13 without a data set.
pub fn demo_case(net: &NetworkData, seed: Option<u64>, data: &Path) -> Result<(Scenario, Vec<Vec<Vec3>>, String)> {
    let spec = DatasetSpec::default();
    let simulated = |seed: u64, why: String| -> Result<(Scenario, Vec<Vec<Vec3>>, String)> {
        let scn = crate::learn::data::families::scenario(Family::Drape, seed, spec.coarse, spec.steps, spec.dt);
        let (fine, _, _) = data::fine_reference(&scn, spec.k, spec.time_substeps, spec.fine_integrator)?;
        Ok((scn, fine, why))
    };
    if let Some(seed) = seed {
        return simulated(seed, format!("drape {seed}, as asked"));
    }
    let Ok(trajs) = data::load_split(data, Some("test")) else {
        return simulated(13, format!("drape 13 (no test split in {})", data.display()));
    };
    let mut ratios = Vec::new();
    for (k, t) in trajs.iter().enumerate() {
        let err = |c: &mut dyn Corrector| -> Result<f32> {
            let mut e = Vec::new();
            sim::run(&t.scenario, false, c, |f, _, st| {
                if f > 0 {
                    e.push(metrics::rmse(st.positions(), &t.x[f as usize]));
                }
                Ok(())
            })?;
            Ok(metrics::mean(&e))
        };
        let (plain, int8) = (err(&mut corrector::Plain)?, err(&mut corrector::Int8::new(net))?);
        ratios.push((int8 / plain, k));
    }
    ratios.sort_by(|a, b| a.0.total_cmp(&b.0));
    let Some(&(ratio, k)) = ratios.get(ratios.len() / 2) else {
        return simulated(13, "drape 13 (an empty test split)".into());
    };
    let t = &trajs[k];
    let why = format!(
        "{} {} of the test split, the median of its {} trajectories' int8/plain error ratios ({ratio:.3})",
        t.family.name(),
        t.seed,
        trajs.len()
    );
    Ok((t.scenario.clone(), t.x.clone(), why))
}

/// `weft demo`: a case of [`demo_case`] as an animated GIF at `out` and its
/// last frame as a still beside it: the plain coarse cloth, the
/// int8-corrected coarse cloth and the reference side by side, each
/// labelled with its running RMSE, and an error plot; returns the one-line
/// summary.
pub fn demo(net: &NetworkData, case: (Scenario, Vec<Vec<Vec3>>, String), out: &Path) -> Result<String> {
    let (scn, fine, why) = case;
    // Looking at the sphere (or capsule) from above and in front.
    let target = scn
        .colliders
        .iter()
        .find_map(|c| c.center.or(c.a.zip(c.b).map(|(a, b)| [0, 1, 2].map(|k| 0.5 * (a[k] + b[k])))))
        .map_or(Vec3::from_array(scn.cloth.center), |c| Vec3::new(c[0], c[1], c[2]));
    let cam = Camera { eye: target + Vec3::new(1.0, 0.9, 1.4), target, fov_y_deg: 40.0, width: 320, height: 260 };
    let colors = [[220.0, 90.0, 70.0], [70.0, 130.0, 220.0], [90.0, 170.0, 90.0], [150.0, 150.0, 150.0]];
    let (panels, errors) = demo_runs(net, &scn, &fine, &cam, colors)?;
    let y_max = errors.iter().flatten().copied().fold(0.0, f32::max) * 1.05;
    let titles = ["plain 16×16", "int8-corrected 16×16", "fine reference (coarse nodes)", DEMO_BDF2];
    let rgb = colors.map(|c| image::Rgb(c.map(|v| v as u8)));
    let frames: Vec<image::RgbImage> = (0..panels.iter().map(Vec::len).min().unwrap_or(0))
        .map(|t| {
            // The pictures (the reference has no error), then BDF2's curve.
            let ps: Vec<Panel> = (0..3)
                .map(|k| Panel {
                    image: &panels[k][t],
                    title: titles[k],
                    color: rgb[k],
                    errors: (k < 2).then(|| errors[k].as_slice()),
                })
                .collect();
            let frame = 2 * t;
            let bdf2 = Panel { image: &panels[2][t], title: titles[3], color: rgb[3], errors: Some(&errors[2]) };
            demo_frame(&ps, Some(bdf2), frame as f32 * scn.time.dt, frame, fine.len(), scn.time.dt, y_max)
        })
        .collect();
    let ms = (2000.0 * scn.time.dt).round() as u32;
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    write_gif(out, &frames, ms)?;
    // The last frame as a still, beside the animation.
    let still = out.with_extension("png");
    if let Some(last) = frames.last() {
        last.save(&still)?;
    }
    // Mean over frames 1.. of the per-frame errors already taken.
    let rmse = |k: usize| metrics::mean(errors[k].get(1..).unwrap_or(&[]));
    Ok(format!(
        "{} — {why}: plain 16×16 (red) | int8-corrected 16×16 (blue) | fine reference at the coarse nodes (green), \
         {} frames, and in the plot {DEMO_BDF2} (grey); mean position RMSE plain {:.4} m, corrected {:.4} m, \
         BDF2 {:.4} m; wrote {} and {}",
        scn.name,
        scn.time.steps,
        rmse(0),
        rmse(1),
        rmse(2),
        out.display(),
        still.display()
    ))
}

/// The demo's plot line for the best plain step at the corrected step's
/// board cost (BDF2 at dt, 0.95× plain's; the corrected step costs more).
const DEMO_BDF2: &str = "plain BDF2 16×16 (the best plain step at its cost)";

/// [`demo_runs`]' pictures and per-frame errors.
type DemoRuns = ([Vec<image::RgbImage>; 3], [Vec<f32>; 3]);

/// The demo's runs of `scn`: pictures every second frame of the plain
/// cloth, the int8-corrected one and the reference `fine`; the per-frame
/// position RMSE against `fine` of the plain cloth, the corrected one and
/// plain BDF2 at the scene's step (the scene's [`Envelope::fallback`],
/// pictured by none).
fn demo_runs(
    net: &NetworkData,
    scn: &Scenario,
    fine: &[Vec<Vec3>],
    cam: &Camera,
    colors: [[f32; 3]; 4],
) -> Result<DemoRuns> {
    let bar = crate::progress_bar(3, "runs", true);
    let mut panels: [Vec<image::RgbImage>; 3] = Default::default();
    let mut positions: [Vec<Vec<Vec3>>; 3] = Default::default();
    let bdf2 = scn.fallback();
    let runs: [(&str, &Scenario, Box<dyn Corrector>); 3] = [
        ("plain 16×16", scn, Box::new(corrector::Plain)),
        ("int8-corrected 16×16", scn, Box::new(corrector::Int8::new(net))),
        ("plain BDF2 16×16", &bdf2, Box::new(corrector::Plain)),
    ];
    for (k, (name, scn, mut corrector)) in runs.into_iter().enumerate() {
        bar.set_message(name);
        sim::run(scn, false, corrector.as_mut(), |frame, model, state| {
            positions[k].push(state.positions().to_vec());
            if frame % 2 == 0 && k < 2 {
                let c = model.scene.colliders;
                panels[k].push(render(cam, &model.mesh, state.positions(), c, state.time() as f32, colors[k]));
            }
            Ok(())
        })?;
        bar.inc(1);
    }
    let mut parts = ModelParts::default();
    let model = &build::model(scn, CoarseGrain::NONE, &mut parts)?;
    for (t, x) in fine.iter().enumerate().step_by(2) {
        let time = t as f32 * scn.time.dt;
        panels[2].push(render(cam, &model.mesh, x, model.scene.colliders, time, colors[2]));
    }
    bar.finish_and_clear();
    let errors = positions.map(|xs| xs.iter().zip(fine).map(|(a, b)| metrics::rmse(a, b)).collect());
    Ok((panels, errors))
}
