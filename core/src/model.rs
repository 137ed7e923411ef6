//! What never changes during a run: the rest mesh, the material, the scene
//! (gravity, pins, colliders, wind) and the step parameters. A [`Model`] is
//! validated once by [`Model::new`]; the step trusts it.

use crate::math::Vec3;
use crate::mesh::{Mesh, NodeId};

/// Cloth material, SI units.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Material {
    /// Areal density (kg/m²).
    pub density: f32,
    /// Membrane stiffness: Young's modulus × thickness (N/m).
    pub stretch: f32,
    /// Poisson ratio, in [0, 0.5).
    pub poisson: f32,
    /// Plate bending stiffness `D` (N·m); the plate's Poisson ratio is
    /// [`Material::poisson`].
    pub bending: f32,
    /// Mass-proportional (Rayleigh) damping (1/s).
    pub damping_mass: f32,
    /// Stiffness-proportional (Rayleigh) damping (s).
    pub damping_stiffness: f32,
    /// Factor on compressive principal strains, in (0, 1]: cloth buckles
    /// rather than compresses; 1 is plain St. Venant–Kirchhoff.
    pub compression: f32,
    /// Tension that stiffens: beyond a principal strain, stretching counts
    /// at a stiffness so many times [`Material::stretch`] (`None`: the same
    /// stiffness at every strain).
    pub taut: Option<Taut>,
}

/// A membrane that stiffens once pulled taut ([`Material::taut`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Taut {
    /// Principal (Green) strain from which the stiffness rises, in
    /// [1e-4, 1].
    pub strain: f32,
    /// Factor on the stiffness beyond it, in [1, 1000].
    pub stiffening: f32,
}

impl Material {
    /// A cotton-like cloth: 0.2 kg/m², 1 kN/m stretch stiffness, ν = 0.3,
    /// plain St. Venant–Kirchhoff (compression factor 1).
    pub const COTTON: Material = Material {
        density: 0.2,
        stretch: 1000.0,
        poisson: 0.3,
        bending: 1e-5,
        damping_mass: 0.05,
        damping_stiffness: 2e-4,
        compression: 1.0,
        taut: None,
    };

    /// Lamé parameters (μ, λ) of the membrane under plane stress (N/m).
    pub fn lame(&self) -> (f32, f32) {
        let nu = self.poisson;
        (self.stretch / (2.0 * (1.0 + nu)), self.stretch * nu / (1.0 - nu * nu))
    }

    pub fn validate(&self) -> Result<(), ParamError> {
        positive("material.density", self.density)?;
        range("material.compression", self.compression)?;
        positive("material.stretch", self.stretch)?;
        range("material.poisson", self.poisson)?;
        non_negative("material.bending", self.bending)?;
        non_negative("material.damping_mass", self.damping_mass)?;
        non_negative("material.damping_stiffness", self.damping_stiffness)?;
        if let Some(t) = self.taut {
            range("material.taut.strain", t.strain)?;
            range("material.taut.stiffening", t.stiffening)?;
        }
        Ok(())
    }
}

/// The coarse mesh's effective membrane: factors on a material's stretch
/// stiffness and on its compression factor ([`Material::coarse_grained`]).
///
/// A coarse triangle stands for a patch of cloth that wrinkles and
/// concentrates strain below the mesh's resolution, so it stretches and
/// shears more easily than the material's own stiffness says; a correction
/// fitted to a fine reference carries the factors its coarse step used
/// ([`crate::gnn::int8::Network::coarse`]). [`CoarseGrain::NONE`] keeps the
/// material as it is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CoarseGrain {
    /// Factor on [`Material::stretch`], in [0.001, 1].
    pub stretch: f32,
    /// Factor on [`Material::compression`], in [0.001, 1].
    pub compression: f32,
    /// Principal strain, in [1e-4, 1], from which tension counts at the
    /// material's own stiffness again ([`Material::taut`]): the patch's
    /// wrinkles are pulled out. `None`: the factor holds at every strain.
    pub taut: Option<f32>,
}

impl CoarseGrain {
    /// The material as it is.
    pub const NONE: CoarseGrain = CoarseGrain { stretch: 1.0, compression: 1.0, taut: None };

    /// A taut strain written as a number, as the command line and the int8
    /// file write it: 0 for none (a taut strain is at least 1e-4).
    pub fn taut_from(strain: f32) -> Option<f32> {
        (strain != 0.0).then_some(strain)
    }

    pub fn validate(&self) -> Result<(), ParamError> {
        range("coarse_grain.stretch", self.stretch)?;
        range("coarse_grain.compression", self.compression)?;
        match self.taut {
            Some(t) => range("coarse_grain.taut", t),
            None => Ok(()),
        }
    }
}

impl Default for CoarseGrain {
    fn default() -> Self {
        CoarseGrain::NONE
    }
}

impl Material {
    /// This material on a coarse mesh: its stretch stiffness and its
    /// compression factor times `grain`'s (the other properties as they
    /// are), and with a taut strain, its own stretch stiffness beyond it
    /// (else the material's own [`Material::taut`], on the grained
    /// stiffness). Refuses factors outside [0.001, 1], taut strains outside
    /// [1e-4, 1] (or not finite).
    pub fn coarse_grained(&self, grain: CoarseGrain) -> Result<Material, ParamError> {
        grain.validate()?;
        let taut = grain.taut.map(|strain| Taut { strain, stiffening: 1.0 / grain.stretch });
        Ok(Material {
            stretch: self.stretch * grain.stretch,
            compression: self.compression * grain.compression,
            taut: taut.or(self.taut),
            ..*self
        })
    }
}

impl Default for Material {
    fn default() -> Self {
        Material::COTTON
    }
}

/// How a pinned node moves. Its target at time `t` is `anchor + offset(t)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PinMotion {
    Fixed,
    /// Constant velocity (m/s).
    Linear {
        velocity: Vec3,
    },
    /// `amplitude · sin(2π · frequency · t)`.
    Oscillate {
        amplitude: Vec3,
        frequency: f32,
    },
}

/// A node held on a scripted path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pin {
    pub node: NodeId,
    pub anchor: Vec3,
    pub motion: PinMotion,
}

/// `sin(2π · frequency · t)`, with the phase reduced to one cycle in `f64`
/// first, so that it keeps its precision at any time a run reaches.
fn sin_cycles(frequency: f32, t: f64) -> f32 {
    let phase = libm::fmod(frequency as f64 * t, 1.0);
    libm::sinf(2.0 * core::f32::consts::PI * phase as f32)
}

impl Pin {
    pub fn fixed(node: NodeId, anchor: Vec3) -> Pin {
        Pin { node, anchor, motion: PinMotion::Fixed }
    }
    /// Target position at time `t` (s).
    pub fn target(&self, t: f64) -> Vec3 {
        match self.motion {
            PinMotion::Fixed => self.anchor,
            PinMotion::Linear { velocity } => self.anchor + velocity * t as f32,
            PinMotion::Oscillate { amplitude, frequency } => self.anchor + amplitude * sin_cycles(frequency, t),
        }
    }
    /// Velocity of the target at `t = 0` (where a pinned node starts).
    pub fn start_velocity(&self) -> Vec3 {
        self.motion.start_velocity()
    }
}

impl PinMotion {
    /// Velocity of the offset at `t = 0`.
    pub fn start_velocity(&self) -> Vec3 {
        match *self {
            PinMotion::Fixed => Vec3::ZERO,
            PinMotion::Linear { velocity } => velocity,
            PinMotion::Oscillate { amplitude, frequency } => amplitude * (2.0 * core::f32::consts::PI * frequency),
        }
    }
}

/// Kinematic collider shapes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    /// Half-space `n·x ≥ offset` is free (`normal` need not be unit).
    Plane {
        normal: Vec3,
        offset: f32,
    },
    Sphere {
        center: Vec3,
        radius: f32,
    },
    /// Segment `a`–`b` swept by `radius`.
    Capsule {
        a: Vec3,
        b: Vec3,
        radius: f32,
    },
}

/// A kinematic collider moving at constant `velocity`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Collider {
    pub shape: Shape,
    pub velocity: Vec3,
    /// Distance kept between the cloth's nodes and the surface (m).
    pub thickness: f32,
    /// Coulomb friction coefficient.
    pub friction: f32,
}

impl Collider {
    pub fn new(shape: Shape) -> Collider {
        Collider { shape, velocity: Vec3::ZERO, thickness: 0.005, friction: 0.3 }
    }

    /// Signed distance of `p` to the surface at time `t` and the outward
    /// normal there.
    pub fn distance(&self, p: Vec3, t: f32) -> (f32, Vec3) {
        let q = p - self.velocity * t;
        match self.shape {
            Shape::Plane { normal, offset } => {
                let n = normal.normalized();
                (q.dot(n) - offset / normal.norm(), n)
            }
            Shape::Sphere { center, radius } => sphere_distance(q, center, radius),
            Shape::Capsule { a, b, radius } => {
                let ab = b - a;
                let len2 = ab.norm2();
                let s = if len2 > 0.0 { ((q - a).dot(ab) / len2).clamp(0.0, 1.0) } else { 0.0 };
                sphere_distance(q, a + ab * s, radius)
            }
        }
    }

    /// Signed distance of the segment `p`–`q` to the surface at time `t`:
    /// `(distance, outward normal, β)` at the segment's closest point
    /// `p + β (q − p)`. A plane's closest point is an end (the nodes carry
    /// plane contact); a sphere or capsule may touch a segment between its
    /// ends.
    pub fn segment_distance(&self, p: Vec3, q: Vec3, t: f32) -> (f32, Vec3, f32) {
        match self.segment_closest(p, q, t) {
            Some((at, c, beta, radius)) => {
                let (d, n) = sphere_distance(at, c, radius);
                (d, n, beta)
            }
            None => {
                let (dp, np) = self.distance(p, t);
                let (dq, nq) = self.distance(q, t);
                if dp <= dq {
                    (dp, np, 0.0)
                } else {
                    (dq, nq, 1.0)
                }
            }
        }
    }

    /// [`Collider::segment_distance`] where the segment's closest point
    /// lies strictly between `lo` and `1 − lo` (the same bits), `None`
    /// elsewhere and on planes (whose closest point is an end). The
    /// parameter is found before any square root, so that the segments
    /// closest at an end cost a projection only.
    pub fn segment_distance_inside(&self, p: Vec3, q: Vec3, t: f32, lo: f32) -> Option<(f32, Vec3, f32)> {
        let (at, c, beta, radius) = self.segment_closest(p, q, t)?;
        if !(beta > lo && beta < 1.0 - lo) {
            return None;
        }
        let (d, n) = sphere_distance(at, c, radius);
        Some((d, n, beta))
    }

    /// A sphere's or capsule's closest approach to the segment `p`–`q` at
    /// time `t`, in the collider's frame: the segment's point, the
    /// surface's centre point nearest it, the point's parameter `β` and the
    /// radius. `None` for a plane.
    fn segment_closest(&self, p: Vec3, q: Vec3, t: f32) -> Option<(Vec3, Vec3, f32, f32)> {
        let shift = self.velocity * t;
        let (p0, q0) = (p - shift, q - shift);
        let (c, beta, radius) = match self.shape {
            Shape::Plane { .. } => return None,
            Shape::Sphere { center, radius } => (center, closest_on_segment(p0, q0, center), radius),
            Shape::Capsule { a, b, radius } => {
                let (beta, gamma) = segment_segment(p0, q0, a, b);
                (a + (b - a) * gamma, beta, radius)
            }
        };
        Some((p0 + (q0 - p0) * beta, c, beta, radius))
    }

    fn validate(&self) -> Result<(), ParamError> {
        finite_vec("collider.velocity", self.velocity)?;
        non_negative("collider.thickness", self.thickness)?;
        non_negative("collider.friction", self.friction)?;
        match self.shape {
            Shape::Plane { normal, offset } => {
                finite_vec("collider.normal", normal)?;
                finite("collider.offset", offset)?;
                positive("collider.normal length", normal.norm())
            }
            Shape::Sphere { center, radius } => {
                finite_vec("collider.center", center)?;
                positive("collider.radius", radius)
            }
            Shape::Capsule { a, b, radius } => {
                finite_vec("collider.a", a)?;
                finite_vec("collider.b", b)?;
                positive("collider.radius", radius)
            }
        }
    }
}

/// Parameter in [0, 1] of the point of segment `p`–`q` closest to `c`.
fn closest_on_segment(p: Vec3, q: Vec3, c: Vec3) -> f32 {
    let d = q - p;
    let len2 = d.norm2();
    if len2 > 0.0 {
        ((c - p).dot(d) / len2).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// Parameters `(s, u)` of the closest points `p + s (q − p)` and
/// `a + u (b − a)` of two segments.
fn segment_segment(p: Vec3, q: Vec3, a: Vec3, b: Vec3) -> (f32, f32) {
    let (d1, d2, r) = (q - p, b - a, p - a);
    let (aa, ee, f) = (d1.norm2(), d2.norm2(), d2.dot(r));
    if aa <= 1e-20 {
        return (0.0, if ee > 1e-20 { (f / ee).clamp(0.0, 1.0) } else { 0.0 });
    }
    let c = d1.dot(r);
    if ee <= 1e-20 {
        return ((-c / aa).clamp(0.0, 1.0), 0.0);
    }
    let bb = d1.dot(d2);
    let denom = aa * ee - bb * bb;
    let mut s = if denom > 1e-12 * aa * ee { ((bb * f - c * ee) / denom).clamp(0.0, 1.0) } else { 0.0 };
    let mut u = (bb * s + f) / ee;
    if u < 0.0 {
        u = 0.0;
        s = (-c / aa).clamp(0.0, 1.0);
    } else if u > 1.0 {
        u = 1.0;
        s = ((bb - c) / aa).clamp(0.0, 1.0);
    }
    (s, u)
}

fn sphere_distance(q: Vec3, c: Vec3, r: f32) -> (f32, Vec3) {
    let d = q - c;
    let len = d.norm();
    let n = if len > 1e-12 { d * (1.0 / len) } else { Vec3::new(0.0, 1.0, 0.0) };
    (len - r, n)
}

/// Wind acting on each triangle: drag along the normal, lift along the
/// surface, from the air velocity relative to the triangle.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Wind {
    /// Mean air velocity (m/s).
    pub velocity: Vec3,
    /// Air density (kg/m³).
    pub air_density: f32,
    pub drag: f32,
    pub lift: f32,
    /// Relative gust amplitude: speed × (1 + gust · sin(2π · gust_frequency · t)).
    pub gust: f32,
    pub gust_frequency: f32,
}

impl Wind {
    pub fn new(velocity: Vec3) -> Wind {
        Wind { velocity, air_density: 1.2, drag: 1.0, lift: 0.2, gust: 0.0, gust_frequency: 0.0 }
    }
    /// Air velocity at time `t` (s).
    pub fn at(&self, t: f64) -> Vec3 {
        self.velocity * (1.0 + self.gust * sin_cycles(self.gust_frequency, t))
    }
    fn validate(&self) -> Result<(), ParamError> {
        finite_vec("wind.velocity", self.velocity)?;
        non_negative("wind.air_density", self.air_density)?;
        non_negative("wind.drag", self.drag)?;
        finite("wind.lift", self.lift)?;
        finite("wind.gust", self.gust)?;
        non_negative("wind.gust_frequency", self.gust_frequency)
    }
}

/// The external world of a simulation.
#[derive(Clone, Copy, Debug)]
pub struct Scene<'a> {
    pub gravity: Vec3,
    pub pins: &'a [Pin],
    pub colliders: &'a [Collider],
    pub wind: Option<Wind>,
}

impl Scene<'_> {
    /// Checks gravity, pins (on one of `nodes` nodes, each node pinned
    /// once, finite motion), colliders and wind.
    pub fn validate(&self, nodes: usize) -> Result<(), ParamError> {
        finite_vec("gravity", self.gravity)?;
        for (k, pin) in self.pins.iter().enumerate() {
            if pin.node as usize >= nodes {
                return Err(ParamError::new("pin.node", Problem::NoSuchNode, pin.node as f64).at(k));
            }
            if self.pins[..k].iter().any(|p| p.node == pin.node) {
                return Err(ParamError::new("pin.node", Problem::Duplicate, pin.node as f64).at(k));
            }
            let motion = || -> Result<(), ParamError> {
                finite_vec("pin.anchor", pin.anchor)?;
                match pin.motion {
                    PinMotion::Fixed => Ok(()),
                    PinMotion::Linear { velocity } => finite_vec("pin.velocity", velocity),
                    PinMotion::Oscillate { amplitude, frequency } => {
                        finite_vec("pin.amplitude", amplitude)?;
                        non_negative("pin.frequency", frequency)
                    }
                }
            };
            motion().map_err(|e| e.at(k))?;
        }
        if self.colliders.len() > crate::flags::MAX_COLLIDERS {
            return Err(ParamError::new("colliders", Problem::OutOfRange, self.colliders.len() as f64));
        }
        for (k, c) in self.colliders.iter().enumerate() {
            c.validate().map_err(|e| e.at(k))?;
        }
        if let Some(w) = &self.wind {
            w.validate()?;
        }
        Ok(())
    }

    /// Sets `flags[i]` to 1 for pinned nodes and 0 for the others (pins are
    /// validated against the mesh by [`Model::new`]).
    pub fn mark_pinned(&self, flags: &mut [u8]) {
        flags.fill(0);
        for pin in self.pins {
            if let Some(f) = flags.get_mut(pin.node as usize) {
                *f = crate::flags::PINNED;
            }
        }
    }
}

impl Default for Scene<'_> {
    fn default() -> Self {
        Scene { gravity: Vec3::new(0.0, -9.81, 0.0), pins: &[], colliders: &[], wind: None }
    }
}

/// Node–node self-contact of the physics step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SelfContact {
    /// Pairs of nodes closer than this with no static edge repel (m).
    pub radius: f32,
}

/// The coarse space of the solve's aggregation hierarchy on a mesh that is
/// not a grid ([`crate::physics::aggregate`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CoarseSpace {
    /// Rigid aggregates on a curved rest mesh, translations on a flat one.
    #[default]
    Auto,
    /// Each aggregate's translation (piecewise constant, as the grid's).
    Translations,
    /// Each aggregate's translation and rotation: fewer iterations on
    /// curved meshes (a tube 51 → 31 a step) and on most flat ones, for
    /// about twice the hierarchy's storage
    /// ([`crate::physics::aggregate::rigid_floats`]).
    Rigid,
}

/// The time integrator of a step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Integrator {
    /// Linearised backward Euler: first order, strongly damping at large
    /// steps; needs no history (the device's step).
    #[default]
    BackwardEuler,
    /// Linearised BDF2 (second order, far less numerical damping) from the
    /// previous step's state, for references that must converge in time.
    /// Falls back to backward Euler without history storage
    /// ([`crate::physics::state::StateSizes::with_history`]), on the first step, after
    /// the state was set or corrected, and for a step the energy check split.
    Bdf2,
}

/// Integrator parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepParams {
    /// Time step (s).
    pub dt: f32,
    /// Conjugate-gradient iteration limit.
    pub cg_max_iterations: u32,
    /// Relative residual at which CG stops.
    pub cg_tolerance: f32,
    pub self_contact: Option<SelfContact>,
    /// Energy check: split a step that would add energy.
    pub energy_check: bool,
    /// Largest stretch `l/l₀ − 1` an edge keeps at the end of a step
    /// (strain limiting, [`crate::physics::limit`]); `None`: no limit.
    pub strain_limit: Option<f32>,
    pub integrator: Integrator,
    /// Start each solve from the last one's `Δv` on the nodes a collider
    /// holds (its tangential part; every other node starts from zero), in
    /// a state with room for it ([`crate::physics::state::StateSizes::with_warm_start`]).
    /// A cloth held at rest by friction then takes a few iterations a step
    /// instead of its full count at every step. For references solved to a
    /// tight tolerance; off by default: at the device's tolerance the
    /// starting guess changes the result (the contact test's bar fold
    /// stretches an edge 10.4 % instead of 9.0 %), and a free node started
    /// warm keeps the last solve's error in the slow modes, so that a
    /// clamped strip at rest creeps.
    pub warm_start: bool,
    /// The aggregation hierarchy's coarse space (meshes that are not
    /// grids; a state without room for the rigid one keeps translations).
    pub coarse: CoarseSpace,
}

impl Default for StepParams {
    fn default() -> Self {
        StepParams {
            dt: 1.0 / 60.0,
            cg_max_iterations: 200,
            cg_tolerance: 1e-5,
            self_contact: None,
            energy_check: true,
            strain_limit: Some(StepParams::DEFAULT_STRAIN_LIMIT),
            integrator: Integrator::BackwardEuler,
            warm_start: false,
            coarse: CoarseSpace::Auto,
        }
    }
}

impl StepParams {
    /// The default strain limit: 8 % stretch.
    pub const DEFAULT_STRAIN_LIMIT: f32 = 0.08;
    /// Most CG iterations a solve may be given (a solve that needs more
    /// has stagnated long before).
    pub const MAX_CG_ITERATIONS: u32 = 100_000;

    /// Whether the solve on `mesh` asks for the rigid aggregation
    /// hierarchy ([`CoarseSpace`]).
    pub fn rigid_coarse(&self, mesh: &crate::mesh::Mesh) -> bool {
        match self.coarse {
            CoarseSpace::Auto => mesh.curved(),
            CoarseSpace::Translations => false,
            CoarseSpace::Rigid => true,
        }
    }

    pub fn validate(&self) -> Result<(), ParamError> {
        range("dt", self.dt)?;
        range("cg_tolerance", self.cg_tolerance)?;
        if !(1..=StepParams::MAX_CG_ITERATIONS).contains(&self.cg_max_iterations) {
            return Err(ParamError::new("cg_max_iterations", Problem::OutOfRange, self.cg_max_iterations as f64));
        }
        if let Some(sc) = self.self_contact {
            positive("self_contact.radius", sc.radius)?;
        }
        if let Some(limit) = self.strain_limit {
            range("strain_limit", limit)?;
        }
        Ok(())
    }
}

/// A bad parameter: which one, its value, which entry of a list (pin,
/// collider) it belongs to, and what is wrong with it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParamError {
    pub name: &'static str,
    pub problem: Problem,
    /// The offending value (a node index for a pin's node, a count for a
    /// list too long; NaN for a vector that is not finite).
    pub value: f64,
    /// The entry of [`Scene::pins`] or [`Scene::colliders`] it belongs to.
    pub index: Option<usize>,
}

impl ParamError {
    fn new(name: &'static str, problem: Problem, value: f64) -> ParamError {
        ParamError { name, problem, value, index: None }
    }
    /// The same error for entry `index` of its list.
    pub fn at(self, index: usize) -> ParamError {
        ParamError { index: Some(index), ..self }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    NotFinite,
    OutOfRange,
    /// A pin names a node the mesh does not have.
    NoSuchNode,
    /// Two pins hold the same node.
    Duplicate,
}

/// The closed range `[min, max]` a bounded parameter must lie in.
const RANGES: [(&str, f32, f32); 12] = [
    ("coarse_grain.stretch", 1e-3, 1.0),
    ("coarse_grain.compression", 1e-3, 1.0),
    ("coarse_grain.taut", 1e-4, 1.0),
    ("material.taut.strain", 1e-4, 1.0),
    ("material.taut.stiffening", 1.0, 1000.0),
    ("cg_max_iterations", 1.0, StepParams::MAX_CG_ITERATIONS as f32),
    ("colliders", 0.0, crate::flags::MAX_COLLIDERS as f32),
    ("material.compression", 1e-4, 1.0),
    ("material.poisson", 0.0, 0.49),
    ("dt", 1e-7, 1.0),
    ("cg_tolerance", 1e-9, 1.0),
    ("strain_limit", 1e-4, 10.0),
];

impl ParamError {
    /// The range a bounded parameter must lie in, if this one has one.
    pub fn range(&self) -> Option<(f32, f32)> {
        RANGES.iter().find(|r| r.0 == self.name).map(|r| (r.1, r.2))
    }
}

impl core::fmt::Display for ParamError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let what = match self.problem {
            Problem::NotFinite => "is not finite",
            Problem::OutOfRange => "is out of range",
            Problem::NoSuchNode => "names a node the mesh does not have",
            Problem::Duplicate => "holds a node twice",
        };
        if let Some(k) = self.index {
            write!(f, "entry {k}: ")?;
        }
        write!(f, "{} {}", self.name, what)?;
        if self.value.is_finite() && libm::trunc(self.value) == self.value {
            write!(f, ": {}", self.value as i64)?;
        } else if !self.value.is_nan() {
            write!(f, ": {}", self.value as f32)?;
        }
        match (self.problem, self.range()) {
            (Problem::OutOfRange, Some((lo, hi))) => write!(f, " (allowed: {lo} to {hi})"),
            _ => Ok(()),
        }
    }
}

impl core::error::Error for ParamError {}

fn finite(name: &'static str, v: f32) -> Result<(), ParamError> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(ParamError::new(name, Problem::NotFinite, v as f64))
    }
}
fn finite_vec(name: &'static str, v: Vec3) -> Result<(), ParamError> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(ParamError::new(name, Problem::NotFinite, f64::NAN))
    }
}
fn range(name: &'static str, v: f32) -> Result<(), ParamError> {
    finite(name, v)?;
    let (lo, hi) = RANGES.iter().find(|r| r.0 == name).map_or((f32::MIN, f32::MAX), |r| (r.1, r.2));
    if v >= lo && v <= hi {
        Ok(())
    } else {
        Err(ParamError::new(name, Problem::OutOfRange, v as f64))
    }
}
fn positive(name: &'static str, v: f32) -> Result<(), ParamError> {
    finite(name, v)?;
    if v > 0.0 {
        Ok(())
    } else {
        Err(ParamError::new(name, Problem::OutOfRange, v as f64))
    }
}
fn non_negative(name: &'static str, v: f32) -> Result<(), ParamError> {
    finite(name, v)?;
    if v >= 0.0 {
        Ok(())
    } else {
        Err(ParamError::new(name, Problem::OutOfRange, v as f64))
    }
}

/// Everything a step reads and never writes.
#[derive(Clone, Copy, Debug)]
pub struct Model<'a> {
    pub mesh: Mesh<'a>,
    pub material: Material,
    pub scene: Scene<'a>,
    pub params: StepParams,
}

impl<'a> Model<'a> {
    /// Validates every parameter against the mesh.
    pub fn new(mesh: Mesh<'a>, material: Material, scene: Scene<'a>, params: StepParams) -> Result<Self, ParamError> {
        material.validate()?;
        params.validate()?;
        scene.validate(mesh.node_count())?;
        Ok(Model { mesh, material, scene, params })
    }

    /// Lumped mass of node `i` (kg).
    #[inline]
    pub fn mass(&self, i: usize) -> f32 {
        self.material.density * self.mesh.node_area()[i]
    }
}
