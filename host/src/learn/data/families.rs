//! Scenario families with randomised parameters for training and
//! evaluating the correction network. Every scenario is a pure function of
//! (family, seed, resolution): the same seed gives the same cloth.

use serde::{Deserialize, Serialize};
use weft_core::math::Vec3;

use crate::sim::scenario::{top_edge, TOP_EDGE_TOLERANCE};
use crate::sim::scenario::{
    BoxSpec, ClothSpec, ColliderSpec, MaterialSpec, MotionSpec, Orientation, OutputSpec, PinSpec, Scenario,
    SelfContactSpec, ShapeKind, SolverSpec, TimeSpec, WindSpec,
};
use crate::sim::shapes::Shape;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// Hanging from pins that swing.
    Hang,
    /// Dropped over a sphere or a capsule on the ground.
    Drape,
    /// A flag held on one edge in gusting wind.
    Flag,
    /// Dropped tilted onto the ground, where it folds.
    Fold,
    /// Hung on a line by its top edge or corners in gusting wind.
    Line,
    /// A round tablecloth (a disc mesh) dropped over a sphere or a capsule.
    Tablecloth,
    /// A sheet with a hole (a mesh) hung by its top, swinging or in wind.
    Holed,
}

impl Family {
    pub const ALL: [Family; 7] =
        [Family::Hang, Family::Drape, Family::Flag, Family::Fold, Family::Line, Family::Tablecloth, Family::Holed];
    pub fn name(self) -> &'static str {
        match self {
            Family::Hang => "hang",
            Family::Drape => "drape",
            Family::Flag => "flag",
            Family::Fold => "fold",
            Family::Line => "line",
            Family::Tablecloth => "tablecloth",
            Family::Holed => "holed",
        }
    }
}

/// SplitMix64: a small, well-mixed, portable seeded generator.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    /// The stream's state, from which [`Rng::resume`] continues it.
    pub fn state(&self) -> u64 {
        self.0
    }
    /// The stream that [`Rng::state`] read.
    pub fn resume(state: u64) -> Rng {
        Rng(state)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32)
    }
    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f32 {
        let u1 = self.range(1e-7, 1.0);
        let u2 = self.range(0.0, 1.0);
        (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
    }
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[(self.next_u64() % items.len() as u64) as usize]
    }
}

/// The material ranges of the families, `(key, low, high)`.
pub use crate::sim::envelope::MATERIAL_RANGES;

/// From light cotton to heavy canvas: density, stretch and bending drawn
/// log-uniformly within [`MATERIAL_RANGES`].
fn material(rng: &mut Rng) -> MaterialSpec {
    let log = |rng: &mut Rng, k: usize| {
        let (_, lo, hi) = MATERIAL_RANGES[k];
        rng.range(lo.ln(), hi.ln()).exp()
    };
    MaterialSpec {
        density: log(rng, 0),
        stretch: log(rng, 1),
        poisson: rng.range(MATERIAL_RANGES[2].1, MATERIAL_RANGES[2].2),
        bending: log(rng, 3),
        // Compression counted at 5 %: the fine cloth buckles between the
        // coarse nodes, and a coarse cloth that resists compression at full
        // stiffness turns the restricted fine state into metres per second
        // of spurious velocity in one step.
        compression: MATERIAL_RANGES[4].1,
        ..MaterialSpec::default()
    }
}

fn ground() -> ColliderSpec {
    ColliderSpec {
        kind: ShapeKind::Plane,
        normal: Some([0.0, 1.0, 0.0]),
        offset: Some(0.0),
        center: None,
        radius: None,
        a: None,
        b: None,
        velocity: [0.0; 3],
        thickness: 0.005,
        friction: 0.5,
    }
}

/// What a family adds to its cloth.
#[derive(Default)]
struct Setup {
    pins: Vec<PinSpec>,
    colliders: Vec<ColliderSpec>,
    wind: Option<WindSpec>,
    /// A hanging cloth's swing about its pinned line (zero: none).
    swing: Option<Vec3>,
}

/// A random kick of up to `speed` (m/s) and `spin` (rad/s).
fn kick(rng: &mut Rng, speed: f32, spin: f32) -> ([f32; 3], [f32; 3]) {
    let (a, b) = (rng.range(0.0, std::f32::consts::TAU), rng.range(-1.0, 1.0));
    let s = rng.range(0.0, speed);
    let v = [s * a.cos() * (1.0 - b * b).sqrt(), s * b, s * a.sin() * (1.0 - b * b).sqrt()];
    (v, [rng.range(-spin, spin), rng.range(-spin, spin), rng.range(-spin, spin)])
}

/// Hanging from pins that swing or are dragged.
fn hang(rng: &mut Rng, cloth: &mut ClothSpec, kicked: bool) -> Setup {
    let region =
        rng.pick(&["corners:top", "edge:top", "corner:top-left", "corner:top-right", "edge:left", "corners:bottom"]);
    let amp = rng.range(0.0, 0.25);
    let dir = rng.range(0.0, std::f32::consts::TAU);
    // Swinging pins, or pins dragged at up to 0.4 m/s.
    let motion = if rng.range(0.0, 1.0) < 0.7 {
        MotionSpec::Oscillate {
            amplitude: [amp * dir.cos(), 0.3 * amp * rng.range(-1.0, 1.0), amp * dir.sin()],
            frequency: rng.range(0.3, 1.5),
        }
    } else {
        let s = rng.range(0.0, 0.4);
        MotionSpec::Linear { velocity: [s * dir.cos(), 0.3 * s * rng.range(-1.0, 1.0), s * dir.sin()] }
    };
    cloth.rotation[0] = rng.range(-20.0, 20.0);
    // The cloth starts moving with its pins (a velocity jump at the pins
    // would be an impact no step size resolves); a kick is a swing about
    // the pinned line (any axis through a single pin).
    let swing = if kicked {
        let (a, b) = (rng.range(0.0, std::f32::consts::TAU), rng.range(-1.0, 1.0));
        let r = (1.0 - b * b).sqrt();
        Vec3::new(r * a.cos(), b, r * a.sin()) * rng.range(0.5, 2.5)
    } else {
        Vec3::ZERO
    };
    Setup {
        pins: vec![PinSpec { region: Some(region.into()), motion, ..PinSpec::default() }],
        swing: Some(swing),
        ..Setup::default()
    }
}

/// Dropped over a sphere or a capsule on the ground.
fn drape(rng: &mut Rng, cloth: &mut ClothSpec, kicked: bool) -> Setup {
    cloth.orientation = Orientation::Horizontal;
    let r = rng.range(0.15, 0.35);
    let (ox, oz) = (rng.range(-0.3, 0.3), rng.range(-0.3, 0.3));
    cloth.center = [ox * 0.5, 2.0 * r + rng.range(0.05, 0.3), oz * 0.5];
    cloth.rotation = [rng.range(-10.0, 10.0), rng.range(0.0, 90.0), rng.range(-10.0, 10.0)];
    let mut c = ground();
    if rng.range(0.0, 1.0) < 0.6 {
        c.kind = ShapeKind::Sphere;
        c.center = Some([ox, r, oz]);
    } else {
        c.kind = ShapeKind::Capsule;
        let half = rng.range(0.2, 0.5);
        let a = rng.range(0.0, std::f32::consts::PI);
        c.a = Some([ox - half * a.cos(), r, oz - half * a.sin()]);
        c.b = Some([ox + half * a.cos(), r, oz + half * a.sin()]);
    }
    c.normal = None;
    c.offset = None;
    c.radius = Some(r);
    c.friction = rng.range(0.2, 0.6);
    if kicked {
        let (v, spin) = kick(rng, 1.0, 1.0);
        cloth.velocity = [v[0], -v[1].abs(), v[2]];
        cloth.spin = spin;
    }
    Setup { colliders: vec![c, ground()], ..Setup::default() }
}

/// Gusting wind from any side: a mean speed within `speed` (m/s) and a
/// vertical part up to `rise` (m/s), a lift coefficient of 0.1–0.4, a gust
/// amplitude up to `gust` (relative) at a frequency within `frequency`
/// (Hz), drawn in that order.
fn gusting_wind(rng: &mut Rng, speed: [f32; 2], rise: f32, gust: f32, frequency: [f32; 2]) -> WindSpec {
    let s = rng.range(speed[0], speed[1]);
    let yaw = rng.range(-std::f32::consts::PI, std::f32::consts::PI);
    WindSpec {
        velocity: [s * yaw.cos(), rng.range(-rise, rise), s * yaw.sin()],
        air_density: 1.2,
        drag: 1.0,
        lift: rng.range(0.1, 0.4),
        gust: rng.range(0.0, gust),
        gust_frequency: rng.range(frequency[0], frequency[1]),
    }
}

/// A flag held on its left edge in gusting wind.
fn flag(rng: &mut Rng, cloth: &mut ClothSpec, size: f32) -> Setup {
    cloth.center = [0.5 * size, 1.5, 0.0];
    cloth.rotation = [0.0, 0.0, 0.0];
    // Wind from any side, the pole's side included.
    let wind = gusting_wind(rng, [2.0, 9.0], 0.5, 0.5, [0.3, 1.5]);
    Setup {
        pins: vec![PinSpec { region: Some("edge:left".into()), motion: MotionSpec::Fixed, ..PinSpec::default() }],
        wind: Some(wind),
        ..Setup::default()
    }
}

/// Hung on a line by its top edge or corners in gusting wind: a taut or
/// billowing cloth under wind like the flag's, held the way the hangs are
/// (the flag, held on a side edge, stays the family kept out of training).
fn line(rng: &mut Rng) -> Setup {
    let region = rng.pick(&["edge:top", "corners:top", "corners:top"]);
    // Lighter wind than the flag's, from any side, slightly up or down.
    let wind = gusting_wind(rng, [0.5, 6.0], 0.3, 0.6, [0.2, 1.5]);
    Setup {
        pins: vec![PinSpec { region: Some(region.into()), motion: MotionSpec::Fixed, ..PinSpec::default() }],
        wind: Some(wind),
        ..Setup::default()
    }
}

/// Dropped tilted onto the ground, where it folds.
fn fold(rng: &mut Rng, cloth: &mut ClothSpec, kicked: bool) -> Setup {
    cloth.center = [0.0, rng.range(0.35, 0.8), 0.0];
    cloth.rotation = [rng.range(-60.0, 60.0), rng.range(0.0, 90.0), rng.range(-60.0, 60.0)];
    if kicked {
        (cloth.velocity, cloth.spin) = kick(rng, 1.5, 3.0);
    }
    Setup { colliders: vec![ground()], ..Setup::default() }
}

/// A sheet with a hole, hung by its top edge or top corners: on a line in
/// gusting wind (as [`line`]) or from pins that swing or are dragged (as
/// [`hang`]). The top edge is pinned by a box in rest coordinates, so that
/// the fine reference's split mesh holds the nodes between its nodes too.
fn holed(rng: &mut Rng, cloth: &mut ClothSpec, kicked: bool) -> Setup {
    let corners = rng.range(0.0, 1.0) < 0.4;
    let (mut setup, motion) = if rng.range(0.0, 1.0) < 0.5 {
        (Setup { wind: line(rng).wind, ..Setup::default() }, MotionSpec::Fixed)
    } else {
        let mut s = hang(rng, cloth, kicked);
        let motion = s.pins.pop().map(|p| p.motion).unwrap_or_default();
        (s, motion)
    };
    // The sheet lies in x–z; −90° about x stands it up, its +z edge on top.
    cloth.rotation[0] -= 90.0;
    let rest: Vec<Vec3> =
        cloth.shape_mesh().map(|m| m.positions.iter().map(|&p| cloth.place(p)).collect()).unwrap_or_default();
    let (top, edge) = top_edge(&rest);
    let pin = if corners {
        // Node indices: the split mesh of the fine reference keeps them.
        let x = cloth.place(Vec3::new(1.0, 0.0, 0.0)) - cloth.place(Vec3::ZERO);
        let along = |&i: &usize| rest[i].dot(x);
        let ends = [
            edge.iter().min_by(|a, b| along(a).total_cmp(&along(b))),
            edge.iter().max_by(|a, b| along(a).total_cmp(&along(b))),
        ];
        PinSpec { nodes: Some(ends.into_iter().flatten().copied().collect()), motion, ..PinSpec::default() }
    } else {
        let t = TOP_EDGE_TOLERANCE;
        let bbox = Some(BoxSpec { min: [-1e3, top - t, -1e3], max: [1e3, top + t, 1e3] });
        PinSpec { bbox, motion, ..PinSpec::default() }
    };
    setup.pins = vec![pin];
    setup
}

/// The cloth of a family: a rectangle of `n × n` nodes about `size`
/// metres a side, or for the mesh families their shape `n` cells across
/// and `size` metres wide.
fn cloth_of(family: Family, rng: &mut Rng, n: usize, size: f32) -> ClothSpec {
    let shape = match family {
        Family::Tablecloth => Some(Shape::Disc),
        Family::Holed => Some(Shape::Holed),
        _ => None,
    };
    let height = size * rng.range(0.85, 1.15);
    let rotation = [0.0, rng.range(-30.0, 30.0), 0.0];
    let cloth = ClothSpec {
        mesh: None,
        shape,
        scale: 1.0,
        units: None,
        weld: None,
        rest: Default::default(),
        uv_scale: None,
        width: size,
        height,
        resolution: [n, n],
        orientation: Orientation::Vertical,
        center: [0.0, 1.2, 0.0],
        rotation,
        velocity: [0.0; 3],
        spin: [0.0; 3],
    };
    match shape {
        // Both shapes are 0.8 m across at scale 1.
        Some(_) => ClothSpec { scale: size / 0.8, width: 0.0, height: 0.0, ..cloth },
        None => cloth,
    }
}

/// The scenario of `family` for `seed` on an `n × n` grid (a mesh family:
/// its shape `n` cells across), `steps` frames of `dt` seconds (one
/// physics step per frame).
pub fn scenario(family: Family, seed: u64, n: usize, steps: u32, dt: f32) -> Scenario {
    let mut rng = Rng::new(seed.wrapping_mul(31).wrapping_add(family as u64));
    let size = rng.range(0.8, 1.2);
    let mut cloth = cloth_of(family, &mut rng, n, size);
    // Half the cloths start with a kick: up to 1.5 m/s and 2 rad/s.
    let kicked = rng.range(0.0, 1.0) < 0.5;
    let setup = match family {
        Family::Hang => hang(&mut rng, &mut cloth, kicked),
        Family::Drape | Family::Tablecloth => drape(&mut rng, &mut cloth, kicked),
        Family::Flag => flag(&mut rng, &mut cloth, size),
        Family::Fold => fold(&mut rng, &mut cloth, kicked),
        Family::Line => line(&mut rng),
        Family::Holed => holed(&mut rng, &mut cloth, kicked),
    };
    let mesh = cloth.shape.and_then(|_| cloth.shape_mesh().ok());
    let mut scn = Scenario {
        name: format!("{}-{seed}", family.name()),
        cloth,
        material: material(&mut rng),
        time: TimeSpec { dt, substeps: 1, steps },
        solver: SolverSpec::default(),
        gravity: [0.0, -9.81, 0.0],
        pins: setup.pins,
        colliders: setup.colliders,
        wind: setup.wind,
        self_contact: SelfContactSpec::default(),
        output: OutputSpec { every: 0 },
        kicks: Vec::new(),
        mesh,
    };
    if let Some(spin) = setup.swing {
        (scn.cloth.velocity, scn.cloth.spin) = start_with_pins(&scn, spin);
    }
    lift_clear(&mut scn);
    scn
}

/// The cloth's `velocity` and `spin` ([`ClothSpec`]) of a rigid start in
/// which the nodes of `scn`'s first pin move with the pin: its velocity at
/// `t = 0`, plus a turn about the pinned nodes' line at `|spin|` (about
/// `spin`'s own axis when the pin holds one node or a cluster).
fn start_with_pins(scn: &Scenario, spin: Vec3) -> ([f32; 3], [f32; 3]) {
    let Some(pin) = scn.pins.first() else { return ([0.0; 3], [0.0; 3]) };
    let (cloth, rest) = (&scn.cloth, scn.rest_positions());
    let at: Vec<Vec3> =
        scn.pin_nodes(pin).unwrap_or_default().into_iter().filter_map(|n| rest.get(n).copied()).collect();
    let Some(&first) = at.first() else { return ([0.0; 3], [0.0; 3]) };
    let far = at.iter().copied().fold(first, |a, p| if (p - first).norm() > (a - first).norm() { p } else { a });
    let line = far - first;
    let w = if line.norm() > 1e-3 { line.normalized() * spin.norm() } else { spin };
    let v_pin = weft_core::model::PinMotion::from(pin.motion).start_velocity();
    let v = v_pin - w.cross(first - Vec3::from_array(cloth.center));
    (v.to_array(), w.to_array())
}

/// Raises the cloth until every node is at least 3 cm clear of every
/// collider, so no scenario starts in contact.
fn lift_clear(scn: &mut Scenario) {
    let colliders: Vec<_> = scn.colliders.iter().filter_map(|c| c.collider().ok()).collect();
    for _ in 0..200 {
        let clear = scn.rest_positions().into_iter().all(|p| colliders.iter().all(|c| c.distance(p, 0.0).0 >= 0.03));
        if clear {
            return;
        }
        scn.cloth.center[1] += 0.02;
    }
}
