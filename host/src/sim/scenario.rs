//! Scenario files (TOML): cloth, material, time stepping, gravity, pins,
//! colliders, wind, self-contact and output. Unknown keys and bad values are
//! errors that name the key.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use weft_core::mesh::{Grid, MeshCounts};
use weft_core::model::{
    Collider, Integrator, Material, ParamError, Pin, PinMotion, Scene, SelfContact, Shape, StepParams, Wind,
};
use weft_core::prelude::Vec3;

use crate::sim::obj::{self, ObjMesh};
use crate::sim::shapes::Shape as ClothShape;
use crate::sim::storage::VecMeshStorage;

/// A whole scenario file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default)]
    pub name: String,
    pub cloth: ClothSpec,
    #[serde(default)]
    pub material: MaterialSpec,
    #[serde(default)]
    pub time: TimeSpec,
    #[serde(default)]
    pub solver: SolverSpec,
    #[serde(default = "default_gravity")]
    pub gravity: [f32; 3],
    #[serde(default, rename = "pin")]
    pub pins: Vec<PinSpec>,
    #[serde(default, rename = "collider")]
    pub colliders: Vec<ColliderSpec>,
    pub wind: Option<WindSpec>,
    #[serde(default)]
    pub self_contact: SelfContactSpec,
    #[serde(default)]
    pub output: OutputSpec,
    /// `[[kick]]`: initial velocities of chosen nodes (after the cloth's
    /// `velocity` and `spin`).
    #[serde(default, rename = "kick")]
    pub kicks: Vec<KickSpec>,
    /// The mesh file's contents (`cloth.mesh`), read when the scenario is.
    #[serde(skip)]
    pub mesh: Option<std::sync::Arc<ObjMesh>>,
}

/// How far below the highest rest position a node still lies on the top
/// edge (m): the rounding of a turned edge, well under any mesh spacing.
pub const TOP_EDGE_TOLERANCE: f32 = 1e-4;

/// The highest rest height of `rest` and the nodes within
/// [`TOP_EDGE_TOLERANCE`] of it, in order.
pub fn top_edge(rest: &[Vec3]) -> (f32, Vec<usize>) {
    let top = rest.iter().map(|p| p.y).fold(f32::MIN, f32::max);
    (top, (0..rest.len()).filter(|&i| rest[i].y > top - TOP_EDGE_TOLERANCE).collect())
}

fn default_gravity() -> [f32; 3] {
    [0.0, -9.81, 0.0]
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Orientation {
    /// In the x–z plane, rows running towards −z.
    Horizontal,
    /// In the x–y plane, rows running up.
    Vertical,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClothSpec {
    /// A triangle mesh (Wavefront OBJ, relative to the scenario's folder)
    /// instead of the rectangle below, scaled by `scale`, then turned by
    /// `rotation` and placed at `center`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mesh: Option<std::path::PathBuf>,
    /// A built-in shape instead of the rectangle or a mesh file (`disc`,
    /// `holed`, `irregular`, `panel`: [`crate::sim::shapes::Shape`]), in
    /// the x–z plane, placed as a mesh file's vertices are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<ClothShape>,
    /// Metres per unit of the mesh file.
    #[serde(default = "one")]
    pub scale: f32,
    /// Metres along the grid's columns (x).
    #[serde(default)]
    pub width: f32,
    /// Metres along the grid's rows (z for horizontal, y for vertical).
    #[serde(default)]
    pub height: f32,
    /// Nodes `[nx, ny]` of the rectangle.
    #[serde(default, deserialize_with = "pair")]
    pub resolution: [usize; 2],
    #[serde(default = "horizontal")]
    pub orientation: Orientation,
    /// Centre of the cloth at rest.
    #[serde(default)]
    pub center: [f32; 3],
    /// Rotation about the centre, degrees about x, then y, then z.
    #[serde(default)]
    pub rotation: [f32; 3],
    /// Initial velocity of every free node (m/s): a kick or a throw.
    #[serde(default)]
    pub velocity: [f32; 3],
    /// Initial angular velocity about `center` (rad/s), added to `velocity`.
    #[serde(default)]
    pub spin: [f32; 3],
}

fn one() -> f32 {
    1.0
}

fn horizontal() -> Orientation {
    Orientation::Horizontal
}

/// The most cells across a `cloth.shape` may have: a square grid's most
/// ([`Scenario`]'s rectangle check: 148 × 148 nodes fill a mesh's 65535
/// edges).
pub const MAX_SHAPE_CELLS: usize = 148;

impl ClothSpec {
    /// A mesh file's vertex `p` placed: scaled, turned, moved to `center`.
    pub fn place(&self, p: Vec3) -> Vec3 {
        Vec3::from_array(self.center) + rotate(p * self.scale, self.rotation)
    }

    /// Cells across a `shape`: `resolution[0]`, 16 when the resolution is
    /// not given.
    pub fn shape_cells(&self) -> usize {
        if self.resolution == [0, 0] {
            16
        } else {
            self.resolution[0]
        }
    }

    /// The mesh of `shape`, [`ClothSpec::shape_cells`] across.
    pub fn shape_mesh(&self) -> Result<std::sync::Arc<ObjMesh>> {
        let shape = self.shape.context("cloth.shape is not given")?;
        let cells = self.shape_cells();
        // Checked before anything is built: a shape's nodes grow with the
        // square of its cells, and a mesh holds at most 65535 edges.
        if cells > MAX_SHAPE_CELLS {
            bail!("cloth.resolution: a cloth.shape is at most {MAX_SHAPE_CELLS} cells across (as a square grid), got {cells}");
        }
        let mesh = shape.obj(cells).with_context(|| {
            format!("cloth.shape {shape:?} at {cells} cells across: the disc takes 2 or more, the holed sheet 4 or more, the others 16")
        })?;
        Ok(std::sync::Arc::new(mesh))
    }

    pub fn grid(&self) -> Grid {
        let [nx, ny] = self.resolution;
        let c = Vec3::from_array(self.center);
        let mut g = match self.orientation {
            Orientation::Horizontal => Grid::horizontal(nx, ny, self.width, self.height, 0.0),
            Orientation::Vertical => Grid::vertical(nx, ny, self.width, self.height, -0.5 * self.height),
        };
        let rot = |p: Vec3| rotate(p, self.rotation);
        g.origin = c + rot(g.origin);
        g.u = rot(g.u);
        g.v = rot(g.v);
        g
    }
}

/// Rotates `p` by `deg` degrees about x, then y, then z.
fn rotate(p: Vec3, deg: [f32; 3]) -> Vec3 {
    let [ax, ay, az] = deg.map(f32::to_radians);
    let (s, c) = ax.sin_cos();
    let p = Vec3::new(p.x, c * p.y - s * p.z, s * p.y + c * p.z);
    let (s, c) = ay.sin_cos();
    let p = Vec3::new(c * p.x + s * p.z, p.y, -s * p.x + c * p.z);
    let (s, c) = az.sin_cos();
    Vec3::new(c * p.x - s * p.y, s * p.x + c * p.y, p.z)
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MaterialSpec {
    pub density: f32,
    pub stretch: f32,
    pub poisson: f32,
    pub bending: f32,
    pub damping_mass: f32,
    pub damping_stiffness: f32,
    /// Factor on compressive principal strains (cloth buckles).
    pub compression: f32,
    /// Tension that stiffens beyond a principal strain
    /// (`weft_core::model::Material::taut`); none by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taut: Option<TautSpec>,
}

/// `taut = { strain = 0.02, stiffening = 4.0 }`: beyond a principal
/// (Green) strain, tension counts at `stiffening` times the stretch
/// stiffness.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TautSpec {
    pub strain: f32,
    pub stiffening: f32,
}

impl Default for MaterialSpec {
    fn default() -> Self {
        MaterialSpec::from(Material::COTTON)
    }
}

impl From<Material> for MaterialSpec {
    fn from(m: Material) -> MaterialSpec {
        MaterialSpec {
            density: m.density,
            stretch: m.stretch,
            poisson: m.poisson,
            bending: m.bending,
            damping_mass: m.damping_mass,
            damping_stiffness: m.damping_stiffness,
            compression: m.compression,
            taut: m.taut.map(|t| TautSpec { strain: t.strain, stiffening: t.stiffening }),
        }
    }
}

impl From<MaterialSpec> for Material {
    fn from(m: MaterialSpec) -> Material {
        Material {
            density: m.density,
            stretch: m.stretch,
            poisson: m.poisson,
            bending: m.bending,
            damping_mass: m.damping_mass,
            damping_stiffness: m.damping_stiffness,
            compression: m.compression,
            taut: m.taut.map(|t| weft_core::model::Taut { strain: t.strain, stiffening: t.stiffening }),
        }
    }
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TimeSpec {
    /// Frame time step (s).
    pub dt: f32,
    /// Physics steps per frame (each of `dt / substeps`).
    pub substeps: u32,
    /// Number of frames.
    pub steps: u32,
}

impl Default for TimeSpec {
    fn default() -> Self {
        TimeSpec { dt: 1.0 / 60.0, substeps: 1, steps: 120 }
    }
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SolverSpec {
    pub cg_max_iterations: u32,
    pub cg_tolerance: f32,
    /// Split steps that would add energy (see `weft_core::physics::step`).
    pub energy_check: bool,
    /// Largest edge stretch `l/l₀ − 1` after a step; 0 turns the limit off.
    pub strain_limit: f32,
    /// `backward-euler` (the device's) or `bdf2` (second order).
    pub integrator: IntegratorSpec,
    /// Start each solve from the last one's on the nodes a collider holds
    /// (`weft_core::model::StepParams::warm_start`; for tight tolerances).
    pub warm_start: bool,
}

/// The time integrator of a scenario (`solver.integrator`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum IntegratorSpec {
    #[default]
    BackwardEuler,
    Bdf2,
}

impl From<IntegratorSpec> for Integrator {
    fn from(i: IntegratorSpec) -> Integrator {
        match i {
            IntegratorSpec::BackwardEuler => Integrator::BackwardEuler,
            IntegratorSpec::Bdf2 => Integrator::Bdf2,
        }
    }
}

impl Default for SolverSpec {
    fn default() -> Self {
        let p = StepParams::default();
        SolverSpec {
            cg_max_iterations: p.cg_max_iterations,
            cg_tolerance: p.cg_tolerance,
            energy_check: p.energy_check,
            strain_limit: p.strain_limit.unwrap_or(0.0),
            integrator: IntegratorSpec::BackwardEuler,
            warm_start: p.warm_start,
        }
    }
}

/// Which nodes a pin holds: exactly one of `nodes`, `region`, `box`,
/// `sphere` or `group`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PinSpec {
    /// Explicit node indices (`j·nx + i` on the rectangle; from 0 in the
    /// mesh file's order).
    pub nodes: Option<Vec<usize>>,
    /// A named region of the rectangle: `corners`, `corners:top`,
    /// `corners:bottom`, `corner:top-left` (also `top-right`,
    /// `bottom-left`, `bottom-right`), `edge:top` (`bottom`, `left`,
    /// `right`), `row:J`, `column:I`. Top is the last row (j = ny−1).
    pub region: Option<String>,
    /// The nodes whose rest positions lie in a box.
    #[serde(rename = "box")]
    pub bbox: Option<BoxSpec>,
    /// The nodes whose rest positions lie in a ball.
    pub sphere: Option<BallSpec>,
    /// A vertex group of the mesh file (`g` or `o`).
    pub group: Option<String>,
    #[serde(default)]
    pub motion: MotionSpec,
}

/// `box = { min = [x, y, z], max = [x, y, z] }`, in rest coordinates (m).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BoxSpec {
    pub min: [f32; 3],
    pub max: [f32; 3],
}

/// `sphere = { center = [x, y, z], radius = r }`, in rest coordinates (m).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BallSpec {
    pub center: [f32; 3],
    pub radius: f32,
}

/// `[[kick]]`: the chosen nodes start with `velocity` (m/s), chosen as a
/// pin's are (exactly one of `nodes`, `region`, `box`, `sphere`, `group`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KickSpec {
    pub velocity: [f32; 3],
    pub nodes: Option<Vec<usize>>,
    pub region: Option<String>,
    #[serde(rename = "box")]
    pub bbox: Option<BoxSpec>,
    pub sphere: Option<BallSpec>,
    pub group: Option<String>,
}

/// Which nodes a pin or a kick names.
#[derive(Clone, Copy)]
pub struct Selector<'a> {
    pub nodes: &'a Option<Vec<usize>>,
    pub region: &'a Option<String>,
    pub bbox: &'a Option<BoxSpec>,
    pub sphere: &'a Option<BallSpec>,
    pub group: &'a Option<String>,
}

/// The `selector` of a spec with the five selector fields.
macro_rules! selector_of {
    ($spec:ty) => {
        impl $spec {
            pub fn selector(&self) -> Selector<'_> {
                let (nodes, region, group) = (&self.nodes, &self.region, &self.group);
                Selector { nodes, region, bbox: &self.bbox, sphere: &self.sphere, group }
            }
        }
    };
}
selector_of!(PinSpec);
selector_of!(KickSpec);

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields, tag = "kind", rename_all = "lowercase")]
pub enum MotionSpec {
    #[default]
    Fixed,
    Linear {
        velocity: [f32; 3],
    },
    Oscillate {
        amplitude: [f32; 3],
        frequency: f32,
    },
}

impl From<MotionSpec> for PinMotion {
    fn from(m: MotionSpec) -> PinMotion {
        match m {
            MotionSpec::Fixed => PinMotion::Fixed,
            MotionSpec::Linear { velocity } => PinMotion::Linear { velocity: Vec3::from_array(velocity) },
            MotionSpec::Oscillate { amplitude, frequency } => {
                PinMotion::Oscillate { amplitude: Vec3::from_array(amplitude), frequency }
            }
        }
    }
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ShapeKind {
    Plane,
    Sphere,
    Capsule,
}

/// A kinematic collider. `plane` takes `normal` and `offset` (free side
/// `normal·x ≥ offset`), `sphere` takes `center` and `radius`, `capsule`
/// takes `a`, `b` and `radius`.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ColliderSpec {
    pub kind: ShapeKind,
    pub normal: Option<[f32; 3]>,
    pub offset: Option<f32>,
    pub center: Option<[f32; 3]>,
    pub radius: Option<f32>,
    pub a: Option<[f32; 3]>,
    pub b: Option<[f32; 3]>,
    #[serde(default)]
    pub velocity: [f32; 3],
    #[serde(default = "default_thickness")]
    pub thickness: f32,
    #[serde(default = "default_friction")]
    pub friction: f32,
}

fn default_thickness() -> f32 {
    0.005
}
fn default_friction() -> f32 {
    0.3
}

impl ColliderSpec {
    pub fn collider(&self) -> Result<Collider> {
        let v = Vec3::from_array;
        fn need<T>(x: Option<T>, kind: &str, key: &str) -> Result<T> {
            x.with_context(|| format!("a {kind} collider needs `{key}`"))
        }
        let extra = |keys: &[(&str, bool)]| -> Result<()> {
            if let Some((k, _)) = keys.iter().find(|(_, present)| *present) {
                bail!("key `{k}` does not apply to a {:?} collider", self.kind);
            }
            Ok(())
        };
        let shape = match self.kind {
            ShapeKind::Plane => {
                extra(&[
                    ("center", self.center.is_some()),
                    ("radius", self.radius.is_some()),
                    ("a", self.a.is_some()),
                    ("b", self.b.is_some()),
                ])?;
                Shape::Plane { normal: v(need(self.normal, "plane", "normal")?), offset: self.offset.unwrap_or(0.0) }
            }
            ShapeKind::Sphere => {
                extra(&[
                    ("normal", self.normal.is_some()),
                    ("offset", self.offset.is_some()),
                    ("a", self.a.is_some()),
                    ("b", self.b.is_some()),
                ])?;
                Shape::Sphere {
                    center: v(need(self.center, "sphere", "center")?),
                    radius: need(self.radius, "sphere", "radius")?,
                }
            }
            ShapeKind::Capsule => {
                extra(&[
                    ("normal", self.normal.is_some()),
                    ("offset", self.offset.is_some()),
                    ("center", self.center.is_some()),
                ])?;
                Shape::Capsule {
                    a: v(need(self.a, "capsule", "a")?),
                    b: v(need(self.b, "capsule", "b")?),
                    radius: need(self.radius, "capsule", "radius")?,
                }
            }
        };
        Ok(Collider { shape, velocity: v(self.velocity), thickness: self.thickness, friction: self.friction })
    }
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WindSpec {
    pub velocity: [f32; 3],
    #[serde(default = "default_air")]
    pub air_density: f32,
    #[serde(default = "default_drag")]
    pub drag: f32,
    #[serde(default = "default_lift")]
    pub lift: f32,
    #[serde(default)]
    pub gust: f32,
    #[serde(default)]
    pub gust_frequency: f32,
}

fn default_air() -> f32 {
    1.2
}
fn default_drag() -> f32 {
    1.0
}
fn default_lift() -> f32 {
    0.2
}

impl From<WindSpec> for Wind {
    fn from(w: WindSpec) -> Wind {
        Wind {
            velocity: Vec3::from_array(w.velocity),
            air_density: w.air_density,
            drag: w.drag,
            lift: w.lift,
            gust: w.gust,
            gust_frequency: w.gust_frequency,
        }
    }
}

/// Most physics steps per frame `time.substeps` may ask for.
pub const MAX_SUBSTEPS: u32 = 1000;

/// Most proximity pairs per node `self_contact.max_pairs` may ask for.
pub const MAX_PAIRS_PER_NODE: usize = 64;

/// Exactly two values (`[nx, ny]`): a longer or shorter array is an error,
/// not silently cut.
fn pair<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<[usize; 2], D::Error> {
    let v = Vec::<usize>::deserialize(d)?;
    <[usize; 2]>::try_from(v.as_slice())
        .map_err(|_| serde::de::Error::custom(format!("expected two values [nx, ny], got {}", v.len())))
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct SelfContactSpec {
    pub enabled: bool,
    /// Contact radius (m); 0 means half the smallest rest edge.
    pub radius: f32,
    /// Pair storage; 0 means 8 per node.
    pub max_pairs: usize,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct OutputSpec {
    /// Save every n-th frame as OBJ (0: none).
    pub every: u32,
}

impl Default for OutputSpec {
    fn default() -> Self {
        OutputSpec { every: 1 }
    }
}

impl Scenario {
    /// A scenario from TOML text; a mesh file is read relative to the
    /// current folder.
    pub fn parse(text: &str) -> Result<Scenario> {
        Scenario::parse_in(text, std::path::Path::new("."))
    }

    /// A scenario from TOML text whose mesh file is relative to `dir`.
    pub fn parse_in(text: &str, dir: &std::path::Path) -> Result<Scenario> {
        let mut s: Scenario = toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
        match (&s.cloth.mesh, s.cloth.shape) {
            (Some(_), Some(_)) => bail!("cloth.mesh and cloth.shape: give one of them"),
            (Some(file), None) => {
                s.mesh = Some(std::sync::Arc::new(obj::load(&dir.join(file)).context("cloth.mesh")?));
            }
            (None, Some(_)) => s.mesh = Some(s.cloth.shape_mesh()?),
            (None, None) => {}
        }
        s.check()?;
        Ok(s)
    }

    pub fn load(path: &std::path::Path) -> Result<Scenario> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let dir = path.parent().unwrap_or(std::path::Path::new("."));
        Scenario::parse_in(&text, dir).with_context(|| format!("in scenario {}", path.display()))
    }

    /// Nodes of the cloth.
    pub fn node_count(&self) -> usize {
        match &self.mesh {
            Some(m) => m.positions.len(),
            None => self.cloth.resolution[0] * self.cloth.resolution[1],
        }
    }

    /// The cloth's rest positions: the rectangle's grid nodes, or the mesh
    /// file's vertices placed ([`ClothSpec::place`]).
    pub fn rest_positions(&self) -> Vec<Vec3> {
        match &self.mesh {
            Some(m) => m.positions.iter().map(|&p| self.cloth.place(p)).collect(),
            None => {
                let g = self.cloth.grid();
                let [nx, ny] = self.cloth.resolution;
                (0..nx * ny).map(|n| g.position(n % nx, n / nx)).collect()
            }
        }
    }

    /// Checks what the core's validation cannot name in TOML terms.
    fn check(&self) -> Result<()> {
        match &self.mesh {
            None => self.check_rectangle()?,
            Some(m) => {
                let sized = self.cloth.shape.is_some() || self.cloth.resolution == [0, 0];
                if !sized || self.cloth.width != 0.0 || self.cloth.height != 0.0 {
                    bail!("cloth.mesh and cloth.width / height / resolution: give the mesh or the rectangle");
                }
                if !(self.cloth.scale.is_finite() && self.cloth.scale > 0.0) {
                    bail!("cloth.scale must be a positive number, got {}", self.cloth.scale);
                }
                // What the core checks (degenerate triangles, edges of
                // more than two), named now rather than at the first run.
                let mut storage = VecMeshStorage::for_triangles(m.positions.len(), m.triangles.len());
                weft_core::mesh::Mesh::from_triangles(&self.rest_positions(), &m.triangles, storage.storage())
                    .context("cloth.mesh")?;
            }
        }
        let most = MAX_PAIRS_PER_NODE * self.node_count();
        if self.self_contact.max_pairs > most {
            bail!(
                "self_contact.max_pairs is {}; allowed: 0 (8 per node) to {most} ({MAX_PAIRS_PER_NODE} per node)",
                self.self_contact.max_pairs
            );
        }
        if self.time.steps == 0 {
            bail!("time.steps must be at least 1");
        }
        let c = &self.cloth;
        if !c.center.iter().chain(&c.rotation).chain(&c.velocity).chain(&c.spin).all(|c| c.is_finite()) {
            bail!("cloth.center, cloth.rotation, cloth.velocity and cloth.spin must be finite");
        }
        if !(1..=MAX_SUBSTEPS).contains(&self.time.substeps) {
            bail!("time.substeps is {}; allowed: 1 to {MAX_SUBSTEPS}", self.time.substeps);
        }
        if !(self.time.dt.is_finite() && self.time.dt > 0.0) {
            bail!("time.dt must be a positive number of seconds, got {}", self.time.dt);
        }
        for (k, p) in self.pins.iter().enumerate() {
            self.pin_nodes(p).with_context(|| format!("pin[{k}]"))?;
        }
        for (k, kick) in self.kicks.iter().enumerate() {
            self.select(kick.selector()).with_context(|| format!("kick[{k}]"))?;
            if !kick.velocity.iter().all(|v| v.is_finite()) {
                bail!("kick[{k}].velocity must be finite");
            }
        }
        for (k, c) in self.colliders.iter().enumerate() {
            c.collider().with_context(|| format!("collider[{k}]"))?;
        }
        if self.self_contact.enabled && !(self.self_contact.radius.is_finite() && self.self_contact.radius >= 0.0) {
            bail!("self_contact.radius must be ≥ 0, got {}", self.self_contact.radius);
        }
        Material::from(self.material).validate().map_err(toml_key)?;
        self.params(1.0).validate().map_err(toml_key)?;
        // Colliders, wind and pins in core terms, checked against the mesh.
        let n = self.node_count();
        let (pins, colliders) = (self.core_pins(&self.rest_positions())?, self.core_colliders()?);
        let wind = self.wind.map(Wind::from);
        Scene { gravity: Vec3::from_array(self.gravity), pins: &pins, colliders: &colliders, wind }
            .validate(n)
            .map_err(toml_key)
    }

    /// The rectangle's checks: its resolution, size and edge count.
    fn check_rectangle(&self) -> Result<()> {
        let [nx, ny] = self.cloth.resolution;
        if nx < 2 || ny < 2 || nx.checked_mul(ny).is_none_or(|n| n > u16::MAX as usize) {
            bail!("cloth.resolution must be at least [2, 2] and at most 65535 nodes, got [{nx}, {ny}]");
        }
        let edges = MeshCounts::grid(nx, ny).edges;
        if edges > u16::MAX as usize {
            bail!(
                "cloth.resolution [{nx}, {ny}] has {edges} mesh edges; a mesh holds at most 65535 (a square grid up to 148 × 148)"
            );
        }
        for (k, v) in [("cloth.width", self.cloth.width), ("cloth.height", self.cloth.height)] {
            if !(v.is_finite() && v > 0.0) {
                bail!("{k} must be a positive number of metres, got {v}");
            }
        }
        Ok(())
    }

    /// Nodes held by one pin entry.
    pub fn pin_nodes(&self, p: &PinSpec) -> Result<Vec<usize>> {
        self.select(p.selector())
    }

    /// The nodes a selector names: exactly one of a node list, a region of
    /// the rectangle, a box or a ball in rest coordinates, a mesh group.
    pub fn select(&self, s: Selector) -> Result<Vec<usize>> {
        let n = self.node_count();
        let given = [s.nodes.is_some(), s.region.is_some(), s.bbox.is_some(), s.sphere.is_some(), s.group.is_some()];
        if given.iter().filter(|g| **g).count() != 1 {
            bail!("give exactly one of `nodes`, `region`, `box`, `sphere` or `group`");
        }
        let inside = |f: &dyn Fn(Vec3) -> bool| -> Vec<usize> {
            self.rest_positions().iter().enumerate().filter(|(_, p)| f(**p)).map(|(i, _)| i).collect()
        };
        let nodes = if let Some(nodes) = s.nodes {
            nodes.clone()
        } else if let Some(r) = s.region {
            match &self.mesh {
                None => region(r, self.cloth.resolution[0], self.cloth.resolution[1])?,
                Some(_) => {
                    bail!("region: named regions are the rectangle's; a mesh cloth takes nodes, box, sphere or group")
                }
            }
        } else if let Some(b) = s.bbox {
            let (lo, hi) = (Vec3::from_array(b.min), Vec3::from_array(b.max));
            inside(&|p| (lo.x..=hi.x).contains(&p.x) && (lo.y..=hi.y).contains(&p.y) && (lo.z..=hi.z).contains(&p.z))
        } else if let Some(b) = s.sphere {
            let c = Vec3::from_array(b.center);
            inside(&|p| (p - c).norm() <= b.radius)
        } else {
            let name = s.group.as_deref().unwrap_or("");
            let groups = self.mesh.as_ref().map(|m| &m.groups);
            groups
                .and_then(|g| g.get(name))
                .cloned()
                .with_context(|| format!("group: the mesh has no group {name:?}"))?
        };
        if let Some(bad) = nodes.iter().find(|&&i| i >= n) {
            bail!("nodes: node {bad} does not exist (the cloth has {n} nodes)");
        }
        if nodes.is_empty() {
            bail!("the selection holds no node");
        }
        Ok(nodes)
    }

    /// Core step parameters; `min_edge` sizes the default contact radius.
    pub fn params(&self, min_edge: f32) -> StepParams {
        let sc = &self.self_contact;
        StepParams {
            dt: self.time.dt / self.time.substeps as f32,
            cg_max_iterations: self.solver.cg_max_iterations,
            cg_tolerance: self.solver.cg_tolerance,
            energy_check: self.solver.energy_check,
            strain_limit: (self.solver.strain_limit != 0.0).then_some(self.solver.strain_limit),
            integrator: self.solver.integrator.into(),
            warm_start: self.solver.warm_start,
            self_contact: sc
                .enabled
                .then_some(SelfContact { radius: if sc.radius > 0.0 { sc.radius } else { 0.5 * min_edge } }),
        }
    }

    /// Proximity pair storage.
    pub fn max_pairs(&self) -> usize {
        if !self.self_contact.enabled {
            0
        } else if self.self_contact.max_pairs > 0 {
            self.self_contact.max_pairs
        } else {
            8 * self.node_count()
        }
    }

    /// The same cloth on a grid `k` times finer (`(n − 1)·k + 1` nodes per
    /// side, so it contains every node of this one), with `time_substeps`
    /// times more physics steps per frame. Pins given by region cover the
    /// same region; pins given by node map to the same places.
    pub fn refined(&self, k: usize, time_substeps: u32) -> Scenario {
        let [nx, ny] = self.cloth.resolution;
        let mut s = self.clone();
        s.cloth.resolution = [(nx - 1) * k + 1, (ny - 1) * k + 1];
        s.time.substeps = self.time.substeps.saturating_mul(time_substeps);
        for p in &mut s.pins {
            if let Some(nodes) = &mut p.nodes {
                for n in nodes.iter_mut() {
                    *n = self.refine_node(*n, k);
                }
            }
            if let Some(r) = &mut p.region {
                for prefix in ["row:", "column:"] {
                    if let Some(idx) = r.strip_prefix(prefix).and_then(|i| i.parse::<usize>().ok()) {
                        *r = format!("{prefix}{}", idx * k);
                    }
                }
            }
        }
        s
    }

    /// Index of coarse node `n` on the grid `k` times finer.
    pub fn refine_node(&self, n: usize, k: usize) -> usize {
        let [nx, _] = self.cloth.resolution;
        let (i, j) = (n % nx, n / nx);
        (j * k) * ((nx - 1) * k + 1) + i * k
    }

    /// The pins in core terms on a mesh whose rest positions are `rest`
    /// (a node named twice is pinned once, by its first entry).
    pub fn core_pins(&self, rest: &[Vec3]) -> Result<Vec<Pin>> {
        let mut pins: Vec<Pin> = Vec::new();
        for p in &self.pins {
            for n in self.pin_nodes(p)? {
                if pins.iter().any(|q| q.node as usize == n) {
                    continue;
                }
                let anchor = *rest.get(n).with_context(|| format!("pin node {n} beyond the mesh"))?;
                pins.push(Pin { node: n as u16, anchor, motion: p.motion.into() });
            }
        }
        Ok(pins)
    }

    /// The colliders in core terms.
    pub fn core_colliders(&self) -> Result<Vec<Collider>> {
        self.colliders.iter().map(|c| c.collider()).collect()
    }
}

/// Core parameter names → the TOML keys that set them.
pub fn toml_key(e: ParamError) -> anyhow::Error {
    let key = match e.name {
        "dt" => "time.dt / time.substeps",
        "cg_tolerance" => "solver.cg_tolerance",
        "cg_max_iterations" => "solver.cg_max_iterations",
        "strain_limit" => "solver.strain_limit",
        n => n,
    };
    // The range is looked up by the core's name.
    let range = match (e.problem, e.range()) {
        (weft_core::model::Problem::OutOfRange, Some((lo, hi))) if key != e.name => {
            format!(" (allowed: {lo} to {hi})")
        }
        _ => String::new(),
    };
    anyhow::anyhow!("{}{range}", ParamError { name: key, ..e })
}

fn region(r: &str, nx: usize, ny: usize) -> Result<Vec<usize>> {
    let node = |i: usize, j: usize| j * nx + i;
    let (top, right) = (ny - 1, nx - 1);
    let v = match r {
        "corners" => vec![node(0, 0), node(right, 0), node(0, top), node(right, top)],
        "corners:top" => vec![node(0, top), node(right, top)],
        "corners:bottom" => vec![node(0, 0), node(right, 0)],
        "corner:top-left" => vec![node(0, top)],
        "corner:top-right" => vec![node(right, top)],
        "corner:bottom-left" => vec![node(0, 0)],
        "corner:bottom-right" => vec![node(right, 0)],
        "edge:top" => (0..nx).map(|i| node(i, top)).collect(),
        "edge:bottom" => (0..nx).map(|i| node(i, 0)).collect(),
        "edge:left" => (0..ny).map(|j| node(0, j)).collect(),
        "edge:right" => (0..ny).map(|j| node(right, j)).collect(),
        _ => {
            if let Some(j) = r.strip_prefix("row:") {
                let j: usize = j.parse().with_context(|| format!("region: bad row number in {r:?}"))?;
                if j >= ny {
                    bail!("region: row {j} does not exist (rows 0..{ny})");
                }
                (0..nx).map(|i| node(i, j)).collect()
            } else if let Some(i) = r.strip_prefix("column:") {
                let i: usize = i.parse().with_context(|| format!("region: bad column number in {r:?}"))?;
                if i >= nx {
                    bail!("region: column {i} does not exist (columns 0..{nx})");
                }
                (0..ny).map(|j| node(i, j)).collect()
            } else {
                bail!("region: unknown region {r:?}; use corners, corners:top, corners:bottom, corner:top-left, …, edge:top|bottom|left|right, row:J, column:I")
            }
        }
    };
    Ok(v)
}
