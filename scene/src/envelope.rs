//! The training envelope: the ranges of the correction network's training
//! families' materials, winds, colliders, pins, shapes and time step, and
//! why a scene lies outside them ([`Envelope::outside_envelope`]).
//!
//! Outside, the network is not run: the desktop (`weft simulate
//! --corrected`, `weft eval`), the board (`firmware/build.rs` bakes such a
//! scene so) and the page run the scene as [`Envelope::fallback`] has it,
//! the best plain step at the corrected step's cost: BDF2
//! ([`FALLBACK_INTEGRATOR`]) at the scene's own time step, on the file's
//! material. It costs 0.95× the plain backward Euler step, which the
//! corrected step costs 1.2–1.6× of, and it is up to 4× more accurate
//! than backward Euler over the first 10 frames of the scenes kept outside
//! (`docs/results/2026-12-07-frontier.md`).

use weft_core::prelude::Vec3;

use crate::scenario::{top_edge, PinSpec, Scenario};
use crate::shapes::Shape as ClothShape;
use crate::spec::{IntegratorSpec, SolverSpec};

/// The integrator a scene outside the envelope runs instead of the
/// corrected step ([`Envelope::fallback`]).
pub const FALLBACK_INTEGRATOR: IntegratorSpec = IntegratorSpec::Bdf2;

/// The training families' material ranges, `(key, low, high)`
/// (`learn::data::families` draws within them).
pub const MATERIAL_RANGES: [(&str, f32, f32); 5] = [
    ("material.density", 0.1, 0.5),
    ("material.stretch", 500.0, 3000.0),
    ("material.poisson", 0.2, 0.4),
    ("material.bending", 4e-6, 1e-4),
    ("material.compression", 0.05, 0.05),
];

/// The fastest mean wind of the training families (m/s; the line family's
/// gusts, with up to 0.3 m/s of rise).
pub const WIND_SPEED_MAX: f32 = 6.0;

/// The pin regions the training families hold the cloth by.
pub const PIN_REGIONS: [&str; 6] =
    ["corners:top", "edge:top", "corner:top-left", "corner:top-right", "edge:left", "corners:bottom"];

/// The shapes of the training families that are not rectangles.
pub const TRAINED_SHAPES: [ClothShape; 2] = [ClothShape::Disc, ClothShape::Holed];

/// The radii of the training families' spheres and capsules (m).
pub const COLLIDER_RADII: (f32, f32) = (0.15, 0.35);

/// The step the network corrects (s): one a frame at 60 frames a second.
pub const NETWORK_DT: f32 = 1.0 / 60.0;

/// Whether `v` lies in `[lo, hi]`, with a thousandth of slack at each end
/// (the ranges' own rounding).
fn within(v: f32, lo: f32, hi: f32) -> bool {
    (lo * 0.999..=hi * 1.001).contains(&v)
}

/// Where a scene lies against the training envelope.
pub trait Envelope {
    /// Why the material lies outside the training families' ranges
    /// ([`MATERIAL_RANGES`]; none: inside).
    fn material_outside(&self) -> Vec<String>;
    /// Why the scene lies outside the envelope (none: inside).
    fn outside_envelope(&self) -> Vec<String>;
    /// The scene as a guarded corrector runs it outside the envelope: its
    /// integrator [`FALLBACK_INTEGRATOR`], everything else as it is.
    fn fallback(&self) -> Self;
}

impl Envelope for Scenario {
    /// Why the material lies outside the training families' ranges
    /// ([`MATERIAL_RANGES`]; none: inside).
    fn material_outside(&self) -> Vec<String> {
        let m = &self.material;
        MATERIAL_RANGES
            .into_iter()
            .zip([m.density, m.stretch, m.poisson, m.bending, m.compression])
            .filter(|&((_, lo, hi), v)| !within(v, lo, hi))
            .map(|((key, lo, hi), v)| format!("{key} is {v}; the network was trained on {lo} to {hi}"))
            .collect()
    }

    /// Why this scene lies outside the envelope the correction network was
    /// trained in (none: inside): a material outside the families' ranges,
    /// a wind faster than theirs, a sphere or capsule thinner or thicker
    /// than theirs, pins not held by one of their regions, a
    /// time step other than the network's or more than one step a frame.
    /// A guarded corrector runs such a scene as its [`Envelope::fallback`]:
    /// there the coarse step's fitted membrane alone was up to 5.6× plain's
    /// error at 50 frames (`docs/results/2026-12-06-learning.md`), more
    /// than any correction can hide.
    fn outside_envelope(&self) -> Vec<String> {
        let mut out = self.material_outside();
        if let Some(w) = &self.wind {
            let speed = Vec3::from_array(w.velocity).norm();
            if speed.is_nan() || speed > WIND_SPEED_MAX * 1.001 {
                out.push(format!("the wind's speed is {speed} m/s; the network was trained up to {WIND_SPEED_MAX}"));
            }
        }
        for c in &self.colliders {
            let (lo, hi) = COLLIDER_RADII;
            if let Some(r) = c.radius.filter(|&r| !within(r, lo, hi)) {
                out.push(format!("a collider of radius {r} m; the network was trained on {lo} to {hi}"));
            }
        }
        for p in &self.pins {
            if !family_pin(self, p) {
                out.push("a pin set no training family has (on a rectangle: one of its regions; on the holed sheet: nodes of its top edge)".into());
            }
        }
        if self.mesh.is_some() && !trained_shape(self) {
            out.push("a cloth from a mesh file or a shape the network was not trained on (it was: rectangles, and the disc and the holed sheet 16 cells across)".into());
        }
        if (self.time.dt - NETWORK_DT).abs() > 1e-6 * NETWORK_DT || self.time.substeps != 1 {
            out.push(format!(
                "{} step(s) of {} s a frame; the network corrects one of {NETWORK_DT} s",
                self.time.substeps, self.time.dt
            ));
        }
        out
    }

    fn fallback(&self) -> Scenario {
        Scenario { solver: SolverSpec { integrator: FALLBACK_INTEGRATOR, ..self.solver }, ..self.clone() }
    }
}

/// Whether the cloth is a shape of the training families
/// ([`TRAINED_SHAPES`], 16 cells across).
fn trained_shape(s: &Scenario) -> bool {
    let trained = s.cloth.shape.is_some_and(|s| TRAINED_SHAPES.contains(&s));
    s.cloth.mesh.is_none() && trained && s.cloth.shape_cells() == 16
}

/// Whether `p` holds the cloth as a training family does: a rectangle
/// by one of [`PIN_REGIONS`], the holed sheet by nodes of its top edge.
fn family_pin(s: &Scenario, p: &PinSpec) -> bool {
    match (&s.mesh, s.cloth.shape) {
        (None, _) => p.region.as_deref().is_some_and(|r| PIN_REGIONS.contains(&r)),
        (Some(_), Some(ClothShape::Holed)) if trained_shape(s) => {
            let (_, edge) = top_edge(&s.rest_positions());
            let nodes = s.pin_nodes(p).unwrap_or_default();
            !nodes.is_empty() && nodes.iter().all(|n| edge.contains(n))
        }
        _ => false,
    }
}
