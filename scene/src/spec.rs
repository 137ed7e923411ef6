//! The scene file's keys, as serde reads them: cloth, material, time
//! stepping, gravity, pins, colliders, wind, self-contact, kicks and
//! output. Unknown keys are errors; defaults are the core's.

use serde::{Deserialize, Serialize};
use weft_core::mesh::Grid;
use weft_core::model::{CoarseSpace, Collider, Integrator, Material, PinMotion, Shape, StepParams, Wind};
use weft_core::prelude::Vec3;

use crate::obj::ObjMesh;
use crate::shapes::Shape as ClothShape;
use crate::SceneError;

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
    /// `holed`, `irregular`, `panel`: [`crate::shapes::Shape`]), in
    /// the x–z plane, placed as a mesh file's vertices are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<ClothShape>,
    /// The mesh file's unit of length (`m`, `cm`, `mm`, `in`; metres when
    /// not given): its coordinates are read in it, then scaled by `scale`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units: Option<Units>,
    /// Metres per unit of the mesh file (with `units`, a factor on them).
    #[serde(default = "one")]
    pub scale: f32,
    /// Merge the mesh file's vertices that lie within this distance of
    /// each other (in the file's units), as modelling tools leave them
    /// along seams and texture splits; without it two vertices at one
    /// place are refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weld: Option<f32>,
    /// The mesh file's rest shape: `"placed"` (the default), the mesh as
    /// the file places it (a curved mesh is at rest curved); or `"uv"`, the
    /// pattern its texture coordinates give (`vt`, every face `f v/vt …`,
    /// times `uv_scale`), as garments are cut from flat panels and sewn:
    /// the file's placement is then where the cloth starts, not its rest.
    #[serde(default, skip_serializing_if = "RestShape::is_placed")]
    pub rest: RestShape,
    /// Metres per texture-coordinate unit, for `rest = "uv"` (1 when not
    /// given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uv_scale: Option<f32>,
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

/// A mesh file's rest shape ([`ClothSpec::rest`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RestShape {
    /// The mesh as the file places it.
    #[default]
    Placed,
    /// The pattern of the file's texture coordinates.
    Uv,
}

impl RestShape {
    pub fn is_placed(&self) -> bool {
        *self == RestShape::Placed
    }
}

/// A mesh file's unit of length ([`ClothSpec::units`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Units {
    M,
    Cm,
    Mm,
    In,
}

impl Units {
    /// Metres in one unit.
    pub fn metres(self) -> f32 {
        match self {
            Units::M => 1.0,
            Units::Cm => 0.01,
            Units::Mm => 0.001,
            Units::In => 0.0254,
        }
    }
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
        let unit = self.units.map_or(1.0, Units::metres);
        Vec3::from_array(self.center) + rotate(p * (unit * self.scale), self.rotation)
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
    pub fn shape_mesh(&self) -> Result<std::sync::Arc<ObjMesh>, SceneError> {
        let shape = self.shape.ok_or_else(|| SceneError::keys("cloth.shape", "is not given"))?;
        let cells = self.shape_cells();
        // Checked before anything is built: a shape's nodes grow with the
        // square of its cells, and a mesh holds at most 65535 edges.
        if cells > MAX_SHAPE_CELLS {
            return Err(SceneError::value(
                "cloth.resolution",
                format!("a cloth.shape is at most {MAX_SHAPE_CELLS} cells across (as a square grid), got {cells}"),
            ));
        }
        let mesh = shape.obj(cells).ok_or_else(|| {
            SceneError::value(
                "cloth.resolution",
                format!("cloth.shape {shape:?} at {cells} cells across: the disc takes 2 or more, the holed sheet 4 or more, the others 16"),
            )
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
    /// The aggregation hierarchy's coarse space on a mesh that is not a
    /// grid: `auto` (rigid on a curved rest mesh), `translations` or
    /// `rigid` (`weft_core::model::CoarseSpace`).
    pub coarse: CoarseSpec,
}

/// The coarse space of a scenario's solve (`solver.coarse`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum CoarseSpec {
    #[default]
    Auto,
    Translations,
    Rigid,
}

impl From<CoarseSpec> for CoarseSpace {
    fn from(c: CoarseSpec) -> CoarseSpace {
        match c {
            CoarseSpec::Auto => CoarseSpace::Auto,
            CoarseSpec::Translations => CoarseSpace::Translations,
            CoarseSpec::Rigid => CoarseSpace::Rigid,
        }
    }
}

/// The time integrator of a scenario (`solver.integrator`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
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
            coarse: CoarseSpec::Auto,
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
    /// The collider in core terms; a key missing or not applying to the
    /// kind is an error naming it (relative to the collider's table).
    pub fn collider(&self) -> Result<Collider, SceneError> {
        let v = Vec3::from_array;
        fn need<T>(x: Option<T>, kind: &str, key: &str) -> Result<T, SceneError> {
            x.ok_or_else(|| SceneError::keys(key, format!("a {kind} collider needs `{key}`")))
        }
        let extra = |keys: &[(&str, bool)]| -> Result<(), SceneError> {
            if let Some((k, _)) = keys.iter().find(|(_, present)| *present) {
                return Err(SceneError::keys(*k, format!("key `{k}` does not apply to a {:?} collider", self.kind)));
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
