//! Reading and checking a scene file ([`Scenario::parse`],
//! [`Scenario::load`]) and what it names in core terms: its nodes, pins,
//! kicks, colliders and step parameters. Every check runs before anything
//! is built, and every error names the TOML key ([`SceneError`]).

use std::path::Path;

use weft_core::mesh::{MeshCounts, MeshStorage};
use weft_core::model::{CoarseSpace, Collider, Material, ParamError, Pin, Scene, SelfContact, StepParams, Wind};
use weft_core::prelude::Vec3;

use crate::obj::{self, ObjMesh};
pub use crate::spec::*;
use crate::storage::VecMeshStorage;
use crate::{ErrorKind, SceneError, Within};

type Result<T> = std::result::Result<T, SceneError>;

/// Stops with a [`ErrorKind::Value`] error at `key`.
macro_rules! refuse {
    ($key:expr, $($msg:tt)+) => {
        return Err(SceneError::value($key, format!($($msg)+)))
    };
}

impl Scenario {
    /// A scene from TOML text; a mesh file is read relative to the
    /// current folder.
    pub fn parse(text: &str) -> Result<Scenario> {
        Scenario::parse_in(text, Path::new("."))
    }

    /// A scene from TOML text whose mesh file is relative to `dir`.
    pub fn parse_in(text: &str, dir: &Path) -> Result<Scenario> {
        Scenario::parse_with(text, &|file, opts| obj::load(&dir.join(file), opts))
    }

    /// A scene from TOML text whose mesh file (`cloth.mesh`) `mesh` reads,
    /// as the scene's options for it ask (`cloth.weld`): from a folder
    /// ([`Scenario::parse_in`]) or from meshes built into a program (the
    /// page's).
    pub fn parse_with(text: &str, mesh: &dyn Fn(&Path, obj::ObjOptions) -> Result<ObjMesh>) -> Result<Scenario> {
        let mut s: Scenario = serde_path_to_error::deserialize(toml::Deserializer::parse(text).map_err(syntax)?)
            .map_err(|e| {
                let key = e.path().to_string();
                let key = if key == "." { String::new() } else { key };
                SceneError::new(key, ErrorKind::Syntax, e.into_inner().message().trim_end().to_string())
            })?;
        match (&s.cloth.mesh, s.cloth.shape) {
            (Some(_), Some(_)) => {
                return Err(SceneError::keys("cloth.mesh", "cloth.mesh and cloth.shape: give one of them"))
            }
            (Some(file), None) => {
                let opts = obj::ObjOptions { weld: s.cloth.weld, uv: s.cloth.rest == RestShape::Uv };
                s.mesh = Some(std::sync::Arc::new(mesh(file, opts).within("cloth.mesh")?))
            }
            (None, Some(_)) => s.mesh = Some(s.cloth.shape_mesh()?),
            (None, None) => {}
        }
        s.check()?;
        Ok(s)
    }

    /// A scene file; its mesh file is relative to its folder.
    pub fn load(path: &Path) -> Result<Scenario> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SceneError::new("", ErrorKind::Io, format!("reading {}: {e}", path.display())))?;
        Scenario::parse_in(&text, path.parent().unwrap_or(Path::new(".")))
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
        self.check_rest()?;
        match &self.mesh {
            None => self.check_rectangle()?,
            Some(m) => {
                let sized = self.cloth.shape.is_some() || self.cloth.resolution == [0, 0];
                if !sized || self.cloth.width != 0.0 || self.cloth.height != 0.0 {
                    return Err(SceneError::keys(
                        "cloth.mesh",
                        "cloth.mesh and cloth.width / height / resolution: give the mesh or the rectangle",
                    ));
                }
                if !(self.cloth.scale.is_finite() && self.cloth.scale > 0.0) {
                    refuse!("cloth.scale", "must be a positive number, got {}", self.cloth.scale);
                }
                // What the core checks (degenerate triangles, edges of
                // more than two), named now rather than at the first run.
                let mut storage = VecMeshStorage::for_triangles(m.positions.len(), m.triangles.len());
                self.core_mesh(storage.storage())?;
            }
        }
        let most = MAX_PAIRS_PER_NODE * self.node_count();
        if self.self_contact.max_pairs > most {
            refuse!(
                "self_contact.max_pairs",
                "is {}; allowed: 0 (8 per node) to {most} ({MAX_PAIRS_PER_NODE} per node)",
                self.self_contact.max_pairs
            );
        }
        self.check_time()?;
        let c = &self.cloth;
        for (key, v) in [("center", c.center), ("rotation", c.rotation), ("velocity", c.velocity), ("spin", c.spin)] {
            if !v.iter().all(|c| c.is_finite()) {
                refuse!(format!("cloth.{key}"), "must be finite, got {v:?}");
            }
        }
        for (k, p) in self.pins.iter().enumerate() {
            self.pin_nodes(p).within(&format!("pin[{k}]"))?;
        }
        for (k, kick) in self.kicks.iter().enumerate() {
            self.select(kick.selector()).within(&format!("kick[{k}]"))?;
            if !kick.velocity.iter().all(|v| v.is_finite()) {
                refuse!(format!("kick[{k}].velocity"), "must be finite");
            }
        }
        for (k, c) in self.colliders.iter().enumerate() {
            c.collider().within(&format!("collider[{k}]"))?;
        }
        if self.self_contact.enabled && !(self.self_contact.radius.is_finite() && self.self_contact.radius >= 0.0) {
            refuse!("self_contact.radius", "must be ≥ 0, got {}", self.self_contact.radius);
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

    /// The key that names the cloth's mesh: `cloth.mesh` or `cloth.shape`.
    /// The mesh file's cloth as the core builds it: placed at its rest
    /// positions, at rest there or in its pattern (`cloth.rest = "uv"`).
    pub fn core_mesh<'s>(&self, storage: MeshStorage<'s>) -> Result<weft_core::mesh::Mesh<'s>> {
        let Some(m) = &self.mesh else {
            return Err(SceneError::keys("cloth", "the cloth is a rectangle, not a mesh"));
        };
        let error = |e| SceneError::new(self.mesh_key(), ErrorKind::Mesh, format!("{e}"));
        match self.pattern() {
            Some(p) => weft_core::mesh::Mesh::from_pattern(&self.rest_positions(), &m.triangles, &p, storage),
            None => weft_core::mesh::Mesh::from_triangles(&self.rest_positions(), &m.triangles, storage),
        }
        .map_err(error)
    }

    /// The pattern the cloth is cut from, for `cloth.rest = "uv"`: each
    /// triangle's texture coordinates times `cloth.uv_scale`.
    pub fn pattern(&self) -> Option<Vec<weft_core::mesh::PatternTriangle>> {
        match self.cloth.rest {
            RestShape::Uv => self.mesh.as_ref()?.pattern(self.cloth.uv_scale.unwrap_or(1.0)),
            RestShape::Placed => None,
        }
    }

    /// `cloth.rest` and `cloth.uv_scale`: a pattern needs a mesh file
    /// whose faces give texture coordinates, and a positive scale.
    fn check_rest(&self) -> Result<()> {
        let uv = self.cloth.rest == RestShape::Uv;
        match self.cloth.uv_scale {
            Some(_) if !uv => refuse!("cloth.uv_scale", "applies only with rest = \"uv\""),
            Some(k) if !(k.is_finite() && k > 0.0) => refuse!("cloth.uv_scale", "must be a positive number, got {k}"),
            _ => {}
        }
        if uv && (self.cloth.mesh.is_none() || self.pattern().is_none()) {
            refuse!(
                "cloth.rest",
                "\"uv\" needs a mesh file (`cloth.mesh`) whose faces give texture coordinates (`f v/vt`)"
            );
        }
        Ok(())
    }

    fn mesh_key(&self) -> &'static str {
        if self.cloth.shape.is_some() {
            "cloth.shape"
        } else {
            "cloth.mesh"
        }
    }

    /// `time`: at least one frame, a positive step, 1 to
    /// [`MAX_SUBSTEPS`] steps a frame.
    fn check_time(&self) -> Result<()> {
        if self.time.steps == 0 {
            refuse!("time.steps", "must be at least 1");
        }
        if !(1..=MAX_SUBSTEPS).contains(&self.time.substeps) {
            refuse!("time.substeps", "is {}; allowed: 1 to {MAX_SUBSTEPS}", self.time.substeps);
        }
        if !(self.time.dt.is_finite() && self.time.dt > 0.0) {
            refuse!("time.dt", "must be a positive number of seconds, got {}", self.time.dt);
        }
        Ok(())
    }

    /// The rectangle's checks: its resolution, size and edge count.
    fn check_rectangle(&self) -> Result<()> {
        let [nx, ny] = self.cloth.resolution;
        if nx < 2 || ny < 2 || nx.checked_mul(ny).is_none_or(|n| n > u16::MAX as usize) {
            refuse!("cloth.resolution", "must be at least [2, 2] and at most 65535 nodes, got [{nx}, {ny}]");
        }
        let edges = MeshCounts::grid(nx, ny).edges;
        if edges > u16::MAX as usize {
            refuse!(
                "cloth.resolution",
                "[{nx}, {ny}] has {edges} mesh edges; a mesh holds at most 65535 (a square grid up to 148 × 148)"
            );
        }
        for (k, v) in [("cloth.width", self.cloth.width), ("cloth.height", self.cloth.height)] {
            if !(v.is_finite() && v > 0.0) {
                refuse!(k, "must be a positive number of metres, got {v}");
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
            return Err(SceneError::keys("", "give exactly one of `nodes`, `region`, `box`, `sphere` or `group`"));
        }
        let inside = |f: &dyn Fn(Vec3) -> bool| -> Vec<usize> {
            self.rest_positions().iter().enumerate().filter(|(_, p)| f(**p)).map(|(i, _)| i).collect()
        };
        let nodes = if let Some(nodes) = s.nodes {
            nodes.clone()
        } else if let Some(r) = s.region {
            match &self.mesh {
                None => region(r, self.cloth.resolution[0], self.cloth.resolution[1]).within("region")?,
                Some(_) => {
                    return Err(SceneError::keys(
                        "region",
                        "named regions are the rectangle's; a mesh cloth takes nodes, box, sphere or group",
                    ))
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
                .ok_or_else(|| SceneError::value("group", format!("the mesh has no group {name:?}")))?
        };
        if let Some(bad) = nodes.iter().find(|&&i| i >= n) {
            refuse!("nodes", "node {bad} does not exist (the cloth has {n} nodes)");
        }
        if nodes.is_empty() {
            refuse!("", "the selection holds no node");
        }
        Ok(nodes)
    }

    /// The solve's coarse space (`solver.coarse`): `auto` is the core's
    /// (rigid on a curved rest mesh) and rigid on a mesh file of several
    /// pieces too, whose unsewn panels turn apart (a dress's flat pattern
    /// of 11 pieces: 64.6 CG iterations a step with translations, 28.9
    /// rigid).
    pub fn coarse_space(&self) -> CoarseSpace {
        match self.solver.coarse {
            CoarseSpec::Auto if self.mesh.as_deref().is_some_and(|m| m.pieces() > 1) => CoarseSpace::Rigid,
            c => c.into(),
        }
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
            coarse: self.coarse_space(),
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
                let Some(&anchor) = rest.get(n) else { refuse!("pin", "pin node {n} beyond the mesh") };
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

/// A core parameter's error with the TOML key that sets the parameter.
pub fn toml_key(e: ParamError) -> SceneError {
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
    let message = format!("{}{range}", ParamError { name: key, index: None, ..e });
    let path = toml_path(key, e.index);
    // `time.dt: is out of range`, but `time.dt: time.dt / time.substeps …`.
    let message = match message.strip_prefix(key) {
        Some(m) if path == key => m.trim_start().to_string(),
        _ => message,
    };
    SceneError::value(path, message)
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
                let Ok(j) = j.parse::<usize>() else { refuse!("", "bad row number in {r:?}") };
                if j >= ny {
                    refuse!("", "row {j} does not exist (rows 0..{ny})");
                }
                (0..nx).map(|i| node(i, j)).collect()
            } else if let Some(i) = r.strip_prefix("column:") {
                let Ok(i) = i.parse::<usize>() else { refuse!("", "bad column number in {r:?}") };
                if i >= nx {
                    refuse!("", "column {i} does not exist (columns 0..{nx})");
                }
                (0..ny).map(|j| node(i, j)).collect()
            } else {
                refuse!("", "unknown region {r:?}; use corners, corners:top, corners:bottom, corner:top-left, …, edge:top|bottom|left|right, row:J, column:I")
            }
        }
    };
    Ok(v)
}

/// The key of a core parameter's error: `time.dt / time.substeps` names
/// `time.dt`, `collider.normal length` `collider.normal`; the entry of a
/// list goes after its table's name (`collider[1].radius`).
fn toml_path(key: &str, index: Option<usize>) -> String {
    let key = key.split_once(' ').map_or(key, |(first, _)| first);
    match (index, key.split_once('.')) {
        (Some(k), Some((table, rest))) => format!("{table}[{k}].{rest}"),
        (Some(k), None) => format!("{key}[{k}]"),
        (None, _) => key.to_string(),
    }
}

/// A TOML syntax error: its message (with the line it is on).
fn syntax(e: toml::de::Error) -> SceneError {
    SceneError::new("", ErrorKind::Syntax, e.to_string().trim_end().to_string())
}
