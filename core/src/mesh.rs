//! The cloth's rest mesh: nodes, triangles, unique static edges and bending
//! hinges. A [`Mesh`] that exists is valid: indices are in range, rest
//! triangles are not degenerate, static edges are unique and sorted, and
//! every edge is shared by at most two triangles.
//!
//! The mesh does not own memory: its builders fill a caller-provided
//! [`MeshStorage`] (static arrays on a microcontroller, `Vec`s on a desktop)
//! and return a read-only view into it.

use crate::math::Vec3;

/// Index of a node. Meshes hold at most `u16::MAX` nodes.
pub type NodeId = u16;

/// Marks "no triangle" in [`Edge::tris`].
pub const NO_TRIANGLE: u32 = u32::MAX;

/// Marks "no hinge" (a border edge) in [`BendTriangle::hinges`].
pub const NO_HINGE: u16 = u16::MAX;

/// A rest triangle with its precomputed finite-element data.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Triangle {
    /// Node indices, counter-clockwise seen from the front side.
    pub nodes: [NodeId; 3],
    /// Static edge index of the edges (0,1), (1,2), (2,0).
    pub edges: [u16; 3],
    /// Shape-function gradients in the 2-D rest frame: the deformation
    /// gradient is `F = Σ x_i b_iᵀ` (a 3×2 matrix).
    pub grad: [[f32; 2]; 3],
    /// Rest area (m²).
    pub area: f32,
}

/// A static (mesh) edge, `a < b`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Edge {
    pub a: NodeId,
    pub b: NodeId,
    /// The one or two triangles on each side ([`NO_TRIANGLE`] for a border).
    pub tris: [u32; 2],
    /// Rest length (m): `|X_b − X_a|` of the rest positions, or for a mesh
    /// cut from a pattern ([`Mesh::from_pattern`]) the mean of its
    /// triangles' pattern lengths (a seam's two sides may differ slightly).
    pub rest: f32,
}

/// A triangle's rest shape in a flat pattern (m): its corners' 2-D
/// coordinates, in the order of its nodes ([`Mesh::from_pattern`]).
pub type PatternTriangle = [[f32; 2]; 3];

/// A triangle of the bending triangulation ([`crate::physics::bending`]):
/// the mesh's own triangles, except on a grid, whose bending triangulation
/// has all cell diagonals in one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BendTriangle {
    /// Hinge index of the edges (0,1), (1,2), (2,0), or [`NO_HINGE`] for a
    /// border edge.
    pub hinges: [u16; 3],
    /// `s_e = |e| / √A` of the same edges (m^½ over m: `√A` times the
    /// edge's length over the triangle's area).
    pub s: [f32; 3],
    /// `(n_e·n_f)²` for the edge pairs (0,1), (1,2), (2,0), with `n_e` the
    /// in-plane outward unit edge normals.
    pub cos2: [f32; 3],
}

/// Two triangles sharing an edge: nodes `[e0, e1, w0, w1]` where `e0–e1` is
/// the shared edge and `w0`, `w1` the opposite ("wing") nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Hinge {
    pub nodes: [NodeId; 4],
    /// `Σ k_i x_i` is half the jump of the normal derivative `∂x/∂n` of the
    /// piecewise-linear placement across the edge (a 3-vector, 1/m): zero
    /// for any affine map of the flat rest mesh.
    pub k: [f32; 4],
    /// The rest placement's own measure `Σ k_i X_i` in the hinge's frame
    /// ([`hinge_frame`]: across the edge, then the mean normal): zero on a
    /// hinge that is flat at rest (every hinge of a flat mesh), the
    /// curvature a curved rest mesh (a tube, a sleeve) holds without force
    /// ([`crate::physics::bending`]).
    pub rest: [f32; 2],
}

/// The frame of a hinge at positions `x`: `u`, the unit direction across
/// its edge in the mean plane of its two triangles (from the second wing's
/// side to the first's), and `v = t × u`, their mean normal (`t` along the
/// edge). It turns with the hinge's nodes, so a measure kept in it turns
/// too. `None` where it is not defined (an edge of zero length, a wing on
/// its edge's line, a hinge folded flat onto itself).
#[inline]
pub fn hinge_frame(h: &Hinge, x: &[Vec3]) -> Option<(Vec3, Vec3)> {
    let (t, a0, a1) = wings(h, x)?;
    let u = (a0 - a1).normalized();
    let v = t.cross(u);
    (u.norm2() > 0.5 && v.norm2() > 0.5).then_some((u, v))
}

/// The unit direction along a hinge's edge at `x` and its two wings' unit
/// directions across it (zero where not defined); `None` for a node
/// outside `x`.
#[inline]
fn wings(h: &Hinge, x: &[Vec3]) -> Option<(Vec3, Vec3, Vec3)> {
    let at = |i: NodeId| x.get(i as usize).copied();
    let (e0, e1, w0, w1) = (at(h.nodes[0])?, at(h.nodes[1])?, at(h.nodes[2])?, at(h.nodes[3])?);
    let t = (e1 - e0).normalized();
    let across = |w: Vec3| {
        let d = w - e0;
        (d - t * d.dot(t)).normalized()
    };
    Some((t, across(w0), across(w1)))
}

/// The largest `|â₀ + â₁|` (the two wings' unit directions across the edge)
/// of a hinge that counts as flat at rest: a dihedral angle within about
/// 10⁻⁴ rad of flat, far above `f32` rounding on a flat mesh.
const FLAT: f32 = 1e-4;

/// The rest measure of `h` in its frame ([`Hinge::rest`]): zero for a hinge
/// flat at rest.
fn rest_measure(h: &Hinge, rest: &[Vec3]) -> [f32; 2] {
    let flat = wings(h, rest).is_none_or(|(_, a0, a1)| (a0 + a1).norm() <= FLAT);
    let Some((u, v)) = hinge_frame(h, rest).filter(|_| !flat) else {
        return [0.0; 2];
    };
    let mut m = Vec3::ZERO;
    for (&i, &k) in h.nodes.iter().zip(&h.k) {
        m += rest[i as usize] * k;
    }
    [m.dot(u), m.dot(v)]
}

/// Why a mesh could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MeshError {
    /// A triangle names a node that does not exist.
    IndexOutOfRange { triangle: usize, node: usize },
    /// A triangle repeats a node or has (near) zero rest area.
    DegenerateTriangle { triangle: usize },
    /// A rest position is NaN or infinite.
    NonFinitePosition { node: usize },
    /// More than two triangles share one edge.
    NonManifoldEdge { a: NodeId, b: NodeId },
    /// A storage slice is too small.
    Capacity { what: &'static str, capacity: usize, needed: usize },
    /// Grid parameters out of range (fewer than 2×2 nodes, bad size).
    BadGrid,
    /// Prebuilt parts ([`Mesh::from_parts`]) that do not form a mesh: the
    /// part and the index of the first bad entry.
    Inconsistent { part: &'static str, index: usize },
    /// No triangles.
    Empty,
}

impl core::fmt::Display for MeshError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            MeshError::IndexOutOfRange { triangle, node } => {
                write!(f, "triangle {triangle} names node {node}, which does not exist")
            }
            MeshError::DegenerateTriangle { triangle } => {
                write!(f, "triangle {triangle} is degenerate (repeated node or zero area)")
            }
            MeshError::NonFinitePosition { node } => {
                write!(f, "rest position of node {node} is not finite")
            }
            MeshError::NonManifoldEdge { a, b } => {
                write!(f, "edge {a}-{b} is shared by more than two triangles")
            }
            MeshError::Capacity { what, capacity, needed } => {
                write!(f, "{what} storage holds {capacity}, needs at least {needed}")
            }
            MeshError::BadGrid => {
                write!(f, "a grid needs at least 2×2 nodes, at most 65535, and a finite positive size")
            }
            MeshError::Empty => write!(f, "mesh has no triangles"),
            MeshError::Inconsistent { part, index } => {
                write!(f, "mesh part `{part}` is inconsistent at entry {index}")
            }
        }
    }
}

impl core::error::Error for MeshError {}

/// Counts of the parts of a mesh, to size storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeshCounts {
    pub nodes: usize,
    pub triangles: usize,
    pub edges: usize,
    pub hinges: usize,
    /// Nodes per side `[nx, ny]` of a mesh built by [`Mesh::grid`] (the
    /// multigrid solver coarsens grids, [`crate::physics::multigrid`]).
    pub grid: Option<[usize; 2]>,
}

impl MeshCounts {
    /// Exact counts of the grid built by [`Mesh::grid`].
    pub const fn grid(nx: usize, ny: usize) -> MeshCounts {
        let cells = (nx - 1) * (ny - 1);
        let edges = (nx - 1) * ny + nx * (ny - 1) + cells;
        let border = 2 * (nx - 1) + 2 * (ny - 1);
        MeshCounts { nodes: nx * ny, triangles: 2 * cells, edges, hinges: edges - border, grid: Some([nx, ny]) }
    }
    /// Upper bounds for a mesh of `nodes` nodes and `triangles` triangles.
    pub const fn upper_bound(nodes: usize, triangles: usize) -> MeshCounts {
        MeshCounts { nodes, triangles, edges: 3 * triangles, hinges: 3 * triangles / 2, grid: None }
    }
}

/// Caller-owned memory a mesh is built into.
pub struct MeshStorage<'a> {
    pub rest: &'a mut [Vec3],
    /// Lumped area per node (m²); mass is `density · node_area`.
    pub node_area: &'a mut [f32],
    pub triangles: &'a mut [Triangle],
    pub edges: &'a mut [Edge],
    /// One entry per node: the edges `(a, ·)` of node `a` start at
    /// `edge_start[a]` and end where those of `a + 1` start.
    pub edge_start: &'a mut [u16],
    pub hinges: &'a mut [Hinge],
    /// One entry per triangle: the bending triangulation.
    pub bending: &'a mut [BendTriangle],
}

/// A validated, read-only rest mesh.
#[derive(Clone, Copy, Debug)]
pub struct Mesh<'a> {
    rest: &'a [Vec3],
    node_area: &'a [f32],
    triangles: &'a [Triangle],
    edges: &'a [Edge],
    edge_start: &'a [u16],
    hinges: &'a [Hinge],
    bending: &'a [BendTriangle],
    grid: Option<[usize; 2]>,
    /// Some hinge is curved at rest ([`Hinge::rest`]).
    curved: bool,
}

/// A built mesh's parts, for storing a mesh that was built elsewhere (e.g.
/// at build time, into flash) and checking it back in with
/// [`Mesh::from_parts`].
#[derive(Clone, Copy, Debug)]
pub struct MeshParts<'a> {
    pub rest: &'a [Vec3],
    pub node_area: &'a [f32],
    pub triangles: &'a [Triangle],
    pub edges: &'a [Edge],
    pub edge_start: &'a [u16],
    pub hinges: &'a [Hinge],
    pub bending: &'a [BendTriangle],
    pub grid: Option<[usize; 2]>,
}

/// A rectangular grid: `nx × ny` nodes from `origin`, spanning `u` (along x
/// index) and `v` (along y index). Node `(i, j)` has index `j·nx + i`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grid {
    pub nx: usize,
    pub ny: usize,
    pub origin: Vec3,
    pub u: Vec3,
    pub v: Vec3,
}

impl Grid {
    /// A horizontal `width × depth` cloth in the x–z plane at height `y`,
    /// centred on the y axis, front side facing +y.
    pub fn horizontal(nx: usize, ny: usize, width: f32, depth: f32, y: f32) -> Grid {
        Grid {
            nx,
            ny,
            origin: Vec3::new(-0.5 * width, y, 0.5 * depth),
            u: Vec3::new(width, 0.0, 0.0),
            v: Vec3::new(0.0, 0.0, -depth),
        }
    }
    /// A vertical `width × height` cloth in the x–y plane (z = 0), bottom
    /// edge at `bottom`, centred on the y axis, front side facing +z.
    pub fn vertical(nx: usize, ny: usize, width: f32, height: f32, bottom: f32) -> Grid {
        Grid {
            nx,
            ny,
            origin: Vec3::new(-0.5 * width, bottom, 0.0),
            u: Vec3::new(width, 0.0, 0.0),
            v: Vec3::new(0.0, height, 0.0),
        }
    }
    pub fn node(&self, i: usize, j: usize) -> usize {
        j * self.nx + i
    }
    pub fn position(&self, i: usize, j: usize) -> Vec3 {
        let fu = i as f32 / (self.nx - 1) as f32;
        let fv = j as f32 / (self.ny - 1) as f32;
        self.origin + self.u * fu + self.v * fv
    }
    pub fn counts(&self) -> MeshCounts {
        MeshCounts::grid(self.nx, self.ny)
    }
    /// Triangle `t` of the grid: two per cell, diagonals alternating in a
    /// checkerboard so the mesh has no preferred shear direction.
    fn triangle(&self, t: usize) -> [NodeId; 3] {
        let cell = t / 2;
        let i = cell % (self.nx - 1);
        let j = cell / (self.nx - 1);
        let n = |a: usize, b: usize| self.node(a, b) as NodeId;
        let (p00, p10, p01, p11) = (n(i, j), n(i + 1, j), n(i, j + 1), n(i + 1, j + 1));
        let first = t.is_multiple_of(2);
        if (i + j).is_multiple_of(2) {
            if first {
                [p00, p10, p11]
            } else {
                [p00, p11, p01]
            }
        } else if first {
            [p00, p10, p01]
        } else {
            [p10, p11, p01]
        }
    }
}

impl<'a> Mesh<'a> {
    /// Builds a validated mesh from rest positions and triangles.
    pub fn from_triangles(
        positions: &[Vec3],
        triangles: &[[NodeId; 3]],
        storage: MeshStorage<'a>,
    ) -> Result<Mesh<'a>, MeshError> {
        if positions.len() > storage.rest.len() {
            return Err(MeshError::Capacity { what: "node", capacity: storage.rest.len(), needed: positions.len() });
        }
        storage.rest[..positions.len()].copy_from_slice(positions);
        build(positions.len(), triangles.len(), |t| triangles[t], None, None, storage)
    }

    /// Builds a validated mesh placed at `positions` whose rest shape is a
    /// flat pattern: triangle `t` is at rest in the shape of `pattern[t]`,
    /// as garments are cut from flat panels and sewn (a seam is a node
    /// shared by triangles of two panels; each panel has its own 2-D
    /// coordinates, as an OBJ file's texture coordinates give them). The
    /// membrane, the masses, the edges' rest lengths and the bending
    /// stiffness come from the pattern; the bending rest is flat (a panel
    /// is cut flat); `positions` are where the cloth starts
    /// ([`Mesh::rest`]), not a rest shape.
    pub fn from_pattern(
        positions: &[Vec3],
        triangles: &[[NodeId; 3]],
        pattern: &[PatternTriangle],
        storage: MeshStorage<'a>,
    ) -> Result<Mesh<'a>, MeshError> {
        if positions.len() > storage.rest.len() {
            return Err(MeshError::Capacity { what: "node", capacity: storage.rest.len(), needed: positions.len() });
        }
        if pattern.len() != triangles.len() {
            return Err(MeshError::Inconsistent { part: "pattern", index: pattern.len().min(triangles.len()) });
        }
        if let Some(t) = pattern.iter().position(|p| !p.iter().flatten().all(|c| c.is_finite())) {
            return Err(MeshError::Inconsistent { part: "pattern", index: t });
        }
        storage.rest[..positions.len()].copy_from_slice(positions);
        build(positions.len(), triangles.len(), |t| triangles[t], Some(pattern), None, storage)
    }

    /// Builds a regular grid mesh.
    pub fn grid(grid: &Grid, storage: MeshStorage<'a>) -> Result<Mesh<'a>, MeshError> {
        let ok_vec = |v: Vec3| v.is_finite();
        if grid.nx < 2
            || grid.ny < 2
            || grid.nx.saturating_mul(grid.ny) > NodeId::MAX as usize
            || !ok_vec(grid.origin)
            || !ok_vec(grid.u)
            || !ok_vec(grid.v)
            || grid.u.cross(grid.v).norm() <= 0.0
        {
            return Err(MeshError::BadGrid);
        }
        let n = grid.nx * grid.ny;
        if n > storage.rest.len() {
            return Err(MeshError::Capacity { what: "node", capacity: storage.rest.len(), needed: n });
        }
        for j in 0..grid.ny {
            for i in 0..grid.nx {
                storage.rest[grid.node(i, j)] = grid.position(i, j);
            }
        }
        let tris = 2 * (grid.nx - 1) * (grid.ny - 1);
        build(n, tris, |t| grid.triangle(t), None, Some(grid), storage)
    }

    /// A mesh from parts built before ([`Mesh::parts`]), checked so that
    /// every index the step follows is in range, the static edges are
    /// sorted and unique with their per-node starts, and every value is
    /// finite: a corrupt part is an error, never a panic later.
    pub fn from_parts(p: MeshParts<'a>) -> Result<Mesh<'a>, MeshError> {
        let n = p.rest.len();
        let bad = |part: &'static str, index: usize| Err(MeshError::Inconsistent { part, index });
        if p.triangles.is_empty() {
            return Err(MeshError::Empty);
        }
        if n > NodeId::MAX as usize || p.edges.len() > u16::MAX as usize || p.hinges.len() >= NO_HINGE as usize {
            return bad("sizes", 0);
        }
        if p.node_area.len() != n || p.edge_start.len() != n || p.bending.len() != p.triangles.len() {
            return bad("lengths", 0);
        }
        if let Some(i) = p.rest.iter().position(|x| !x.is_finite()) {
            return Err(MeshError::NonFinitePosition { node: i });
        }
        if let Some(i) = p.node_area.iter().position(|a| !(a.is_finite() && *a >= 0.0)) {
            return bad("node_area", i);
        }
        let (ne, nt, nh) = (p.edges.len(), p.triangles.len(), p.hinges.len());
        for (t, tr) in p.triangles.iter().enumerate() {
            let [a, b, c] = tr.nodes.map(usize::from);
            if let Some(&node) = [a, b, c].iter().find(|&&i| i >= n) {
                return Err(MeshError::IndexOutOfRange { triangle: t, node });
            }
            let finite = tr.grad.iter().flatten().all(|g| g.is_finite());
            if a == b || b == c || a == c || !(tr.area > 0.0) || !tr.area.is_finite() || !finite {
                return Err(MeshError::DegenerateTriangle { triangle: t });
            }
            if tr.edges.iter().any(|&e| e as usize >= ne) {
                return bad("triangle edges", t);
            }
        }
        for (e, ed) in p.edges.iter().enumerate() {
            let sorted = e == 0 || (p.edges[e - 1].a, p.edges[e - 1].b) < (ed.a, ed.b);
            let tris_ok = ed.tris.iter().all(|&t| t == NO_TRIANGLE || (t as usize) < nt);
            let rest_ok = ed.rest.is_finite() && ed.rest > 0.0;
            if !(ed.a < ed.b && (ed.b as usize) < n && sorted && tris_ok && rest_ok) {
                return bad("edges", e);
            }
        }
        let mut e = 0;
        for (a, &start) in p.edge_start.iter().enumerate() {
            while e < ne && (p.edges[e].a as usize) < a {
                e += 1;
            }
            if start as usize != e {
                return bad("edge_start", a);
            }
        }
        for (h, hinge) in p.hinges.iter().enumerate() {
            if hinge.nodes.iter().any(|&i| i as usize >= n) || !hinge.k.iter().all(|k| k.is_finite()) {
                return bad("hinges", h);
            }
        }
        for (t, bt) in p.bending.iter().enumerate() {
            let hinges_ok = bt.hinges.iter().all(|&h| h == NO_HINGE || (h as usize) < nh);
            if !hinges_ok || !bt.s.iter().chain(&bt.cos2).all(|v| v.is_finite()) {
                return bad("bending", t);
            }
        }
        if let Some([nx, ny]) = p.grid {
            if nx < 2 || ny < 2 || nx.checked_mul(ny) != Some(n) || !grid_edges_are(p.edges, nx, ny) {
                return Err(MeshError::BadGrid);
            }
        }
        Ok(Mesh {
            rest: p.rest,
            node_area: p.node_area,
            triangles: p.triangles,
            edges: p.edges,
            edge_start: p.edge_start,
            hinges: p.hinges,
            bending: p.bending,
            grid: p.grid,
            curved: curved(p.hinges),
        })
    }

    /// The mesh's parts ([`Mesh::from_parts`] checks them back in).
    pub fn parts(&self) -> MeshParts<'a> {
        MeshParts {
            rest: self.rest,
            node_area: self.node_area,
            triangles: self.triangles,
            edges: self.edges,
            edge_start: self.edge_start,
            hinges: self.hinges,
            bending: self.bending,
            grid: self.grid,
        }
    }

    pub fn rest(&self) -> &'a [Vec3] {
        self.rest
    }
    pub fn node_area(&self) -> &'a [f32] {
        self.node_area
    }
    pub fn triangles(&self) -> &'a [Triangle] {
        self.triangles
    }
    pub fn edges(&self) -> &'a [Edge] {
        self.edges
    }
    pub fn hinges(&self) -> &'a [Hinge] {
        self.hinges
    }
    /// Whether the rest mesh is curved somewhere (a hinge holds a
    /// curvature at rest, [`Hinge::rest`]): a flat mesh's step takes none
    /// of the rest curvature's work.
    pub fn curved(&self) -> bool {
        self.curved
    }
    /// The rest placement of triangle `t` of a curved rest mesh, against
    /// whose own metric its membrane strain is measured
    /// ([`crate::physics::membrane::green_strain_about`]: exactly zero
    /// there, so the mesh is at rest where it was made); `None` on a flat
    /// mesh, whose strain is measured against its rest frame as it always
    /// was.
    #[inline]
    pub fn membrane_rest(&self, t: &Triangle) -> Option<[Vec3; 3]> {
        self.curved.then(|| t.nodes.map(|i| self.rest[i as usize]))
    }
    /// The bending triangulation ([`BendTriangle`]).
    pub fn bending(&self) -> &'a [BendTriangle] {
        self.bending
    }
    pub fn node_count(&self) -> usize {
        self.rest.len()
    }
    pub fn counts(&self) -> MeshCounts {
        MeshCounts {
            nodes: self.rest.len(),
            triangles: self.triangles.len(),
            edges: self.edges.len(),
            hinges: self.hinges.len(),
            grid: self.grid,
        }
    }
    /// Index of the static edge between `a` and `b`, if there is one.
    #[inline]
    pub fn edge_index(&self, a: NodeId, b: NodeId) -> Option<usize> {
        let (a, b) = if a < b { (a, b) } else { (b, a) };
        let a = a as usize;
        let lo = self.edge_start[a] as usize;
        let hi = self.edge_start.get(a + 1).map_or(self.edges.len(), |&e| e as usize);
        self.edges[lo..hi].iter().position(|e| e.b == b).map(|k| lo + k)
    }
    /// Whether `a` and `b` share a static edge.
    pub fn has_edge(&self, a: NodeId, b: NodeId) -> bool {
        self.edge_index(a, b).is_some()
    }
    /// Shortest rest edge length.
    pub fn min_edge_length(&self) -> f32 {
        self.edges.iter().map(|e| e.rest).fold(f32::INFINITY, f32::min)
    }
}

fn find_edge(edges: &[Edge], a: NodeId, b: NodeId) -> Result<usize, usize> {
    let key = if a < b { (a, b) } else { (b, a) };
    edges.binary_search_by(|e| (e.a, e.b).cmp(&key))
}

/// Checks the counts against the index types and the storage.
fn check_counts(n_nodes: usize, n_tris: usize, storage: &MeshStorage) -> Result<(), MeshError> {
    if n_tris == 0 {
        return Err(MeshError::Empty);
    }
    if n_nodes > NodeId::MAX as usize {
        return Err(MeshError::Capacity { what: "node (u16 index)", capacity: NodeId::MAX as usize, needed: n_nodes });
    }
    if n_tris >= NO_TRIANGLE as usize {
        return Err(MeshError::Capacity {
            what: "triangle (u32 index)",
            capacity: NO_TRIANGLE as usize - 1,
            needed: n_tris,
        });
    }
    for (name, cap, needed) in [
        ("rest position", storage.rest.len(), n_nodes),
        ("node area", storage.node_area.len(), n_nodes),
        ("edge start", storage.edge_start.len(), n_nodes),
        ("triangle", storage.triangles.len(), n_tris),
        ("bending triangle", storage.bending.len(), n_tris),
    ] {
        if cap < needed {
            return Err(MeshError::Capacity { what: name, capacity: cap, needed });
        }
    }
    Ok(())
}

/// The rest corners of triangle `t` over `nodes`: its pattern's in the
/// plane z = 0 where the mesh has one, else the rest positions'.
fn corners(t: usize, nodes: [NodeId; 3], rest: &[Vec3], pattern: Option<&[PatternTriangle]>) -> [Vec3; 3] {
    match pattern.and_then(|p| p.get(t)) {
        Some(p) => p.map(|[u, v]| Vec3::new(u, v, 0.0)),
        None => nodes.map(|i| rest[i as usize]),
    }
}

/// Triangle `t` over `nodes`, validated, with its rest frame's gradients
/// and area; its rest corners ([`corners`]).
fn rest_triangle(
    t: usize,
    nodes: [NodeId; 3],
    rest: &[Vec3],
    pattern: Option<&[PatternTriangle]>,
) -> Result<(Triangle, [Vec3; 3]), MeshError> {
    for &i in &nodes {
        if i as usize >= rest.len() {
            return Err(MeshError::IndexOutOfRange { triangle: t, node: i as usize });
        }
    }
    let [p0, p1, p2] = corners(t, nodes, rest, pattern);
    let (e1, e2) = (p1 - p0, p2 - p0);
    let n = e1.cross(e2);
    let longest = e1.norm2().max(e2.norm2()).max((p2 - p1).norm2());
    let area = 0.5 * n.norm();
    if nodes[0] == nodes[1] || nodes[1] == nodes[2] || nodes[0] == nodes[2] || !(area > 1e-6 * longest) {
        return Err(MeshError::DegenerateTriangle { triangle: t });
    }
    let (ax, ay) = frame([p0, p1, p2]);
    let (d00, d01) = (e1.dot(ax), e2.dot(ax));
    let (d10, d11) = (e1.dot(ay), e2.dot(ay));
    let det = d00 * d11 - d01 * d10;
    // G = Dm⁻¹; b1 = row 0 of G, b2 = row 1 of G, b0 = −(b1 + b2).
    let (g00, g01, g10, g11) = (d11 / det, -d01 / det, -d10 / det, d00 / det);
    let b1 = [g00, g01];
    let b2 = [g10, g11];
    let b0 = [-(g00 + g10), -(g01 + g11)];
    Ok((Triangle { nodes, edges: [0; 3], grad: [b0, b1, b2], area }, [p0, p1, p2]))
}

/// The unique edges of the triangles, kept sorted by insertion, and a hinge
/// as each edge's second triangle arrives (its bending data here unless the
/// mesh is a grid). Returns the edge and hinge counts.
fn collect_edges(
    triangles: &[Triangle],
    rest: &[Vec3],
    pattern: Option<&[PatternTriangle]>,
    grid: bool,
    edges: &mut [Edge],
    hinges: &mut [Hinge],
    bending: &mut [BendTriangle],
) -> Result<(usize, usize), MeshError> {
    let (mut n_edges, mut n_hinges) = (0usize, 0usize);
    for (t, tr) in triangles.iter().enumerate() {
        let nodes = tr.nodes;
        let c = corners(t, nodes, rest, pattern);
        for k in 0..3 {
            let (a, b, w) = (nodes[k], nodes[(k + 1) % 3], nodes[(k + 2) % 3]);
            let length = (c[(k + 1) % 3] - c[k]).norm();
            match find_edge(&edges[..n_edges], a, b) {
                Ok(e) => {
                    let other = edges[e].tris[0];
                    if edges[e].tris[1] != NO_TRIANGLE {
                        return Err(MeshError::NonManifoldEdge { a: edges[e].a, b: edges[e].b });
                    }
                    edges[e].tris[1] = t as u32;
                    if pattern.is_some() {
                        edges[e].rest = 0.5 * (edges[e].rest + length);
                    }
                    let capacity = hinges.len().min(NO_HINGE as usize);
                    if n_hinges >= capacity {
                        return Err(MeshError::Capacity { what: "hinge", capacity, needed: n_hinges + 1 });
                    }
                    if !grid {
                        let ot = &triangles[other as usize];
                        let w0 = ot.nodes.iter().copied().find(|&x| x != a && x != b).unwrap_or(a);
                        // The slot of edge a–b in the other triangle sits before its wing.
                        let slot = ot.nodes.iter().position(|&x| x == w0).map_or(0, |p| (p + 1) % 3);
                        bending[other as usize].hinges[slot] = n_hinges as u16;
                        bending[t].hinges[k] = n_hinges as u16;
                        let mut hinge = match pattern {
                            // Each wing in its own triangle's pattern; flat at rest.
                            Some(_) => {
                                let oc = corners(other as usize, ot.nodes, rest, pattern);
                                let at = |x: NodeId| ot.nodes.iter().position(|&y| y == x).map_or(oc[0], |i| oc[i]);
                                let (k1, k2) = ((k + 1) % 3, (k + 2) % 3);
                                make_hinge([a, b, w0, w], [at(a), at(b), at(w0)], [c[k], c[k1], c[k2]])
                            }
                            None => make_hinge_at(rest, [a, b, w0, w]),
                        };
                        if pattern.is_none() {
                            hinge.rest = rest_measure(&hinge, rest);
                        }
                        hinges[n_hinges] = hinge;
                    }
                    n_hinges += 1;
                }
                Err(pos) => {
                    if n_edges >= edges.len() {
                        return Err(MeshError::Capacity { what: "edge", capacity: edges.len(), needed: n_edges + 1 });
                    }
                    edges.copy_within(pos..n_edges, pos + 1);
                    edges[pos] = Edge { a: a.min(b), b: a.max(b), tris: [t as u32, NO_TRIANGLE], rest: length };
                    n_edges += 1;
                }
            }
        }
    }
    if n_edges > u16::MAX as usize {
        return Err(MeshError::Capacity { what: "edge (u16 index)", capacity: u16::MAX as usize, needed: n_edges });
    }
    Ok((n_edges, n_hinges))
}

/// Each node's first edge (edges sorted by their first node) and each
/// triangle's edges.
fn index_edges(edges: &[Edge], edge_start: &mut [u16], triangles: &mut [Triangle]) {
    let mut e = 0;
    for (a, start) in edge_start.iter_mut().enumerate() {
        while e < edges.len() && (edges[e].a as usize) < a {
            e += 1;
        }
        *start = e as u16;
    }
    for tr in triangles.iter_mut() {
        for k in 0..3 {
            let e = find_edge(edges, tr.nodes[k], tr.nodes[(k + 1) % 3]).unwrap_or(0);
            tr.edges[k] = e as u16;
        }
    }
}

/// The forward static edges of node (`x`, `y`) of an `nx × ny` grid mesh
/// ([`Mesh::grid`]'s checkerboard of diagonals), in the edges' order: the
/// steps `b − a` to their other nodes (to the right; where `x + y` is even
/// down-left; down; where `x + y` is even down-right) and how many.
pub fn grid_forward(x: usize, y: usize, nx: usize, ny: usize) -> ([usize; 4], usize) {
    let (right, below, even) = (x + 1 < nx, y + 1 < ny, (x + y).is_multiple_of(2));
    let mut steps = [0; 4];
    let mut k = 0;
    for (on, step) in [(right, 1), (even && below && x >= 1, nx - 1), (below, nx), (even && below && right, nx + 1)] {
        if on {
            steps[k] = step;
            k += 1;
        }
    }
    (steps, k)
}

/// Whether `edges` are those of an `nx × ny` grid ([`grid_forward`]): a
/// mesh that says it is a grid has them, so the solver may take its edges
/// in that pattern.
fn grid_edges_are(edges: &[Edge], nx: usize, ny: usize) -> bool {
    let mut e = edges.iter();
    for a in 0..nx * ny {
        let (steps, k) = grid_forward(a % nx, a / nx, nx, ny);
        for &s in &steps[..k] {
            if !e.next().is_some_and(|ed| ed.a as usize == a && ed.b as usize == a + s) {
                return false;
            }
        }
    }
    e.next().is_none()
}

fn build<'a>(
    n_nodes: usize,
    n_tris: usize,
    tri: impl Fn(usize) -> [NodeId; 3],
    pattern: Option<&[PatternTriangle]>,
    grid: Option<&Grid>,
    storage: MeshStorage<'a>,
) -> Result<Mesh<'a>, MeshError> {
    check_counts(n_nodes, n_tris, &storage)?;
    let MeshStorage { rest, node_area, triangles, edges, edge_start, hinges, bending } = storage;
    let rest = &rest[..n_nodes];
    if let Some(node) = rest.iter().position(|p| !p.is_finite()) {
        return Err(MeshError::NonFinitePosition { node });
    }
    let node_area = &mut node_area[..n_nodes];
    node_area.fill(0.0);
    let (triangles, bending) = (&mut triangles[..n_tris], &mut bending[..n_tris]);
    for (t, slot) in triangles.iter_mut().enumerate() {
        let (triangle, corners) = rest_triangle(t, tri(t), rest, pattern)?;
        *slot = triangle;
        // A grid's bending triangulation is its own ([`grid_bending`]).
        if grid.is_none() {
            bending[t] = bend_triangle(corners);
        }
        for &i in &slot.nodes {
            node_area[i as usize] += slot.area / 3.0;
        }
    }
    let (n_edges, n_hinges) = collect_edges(triangles, rest, pattern, grid.is_some(), edges, hinges, bending)?;
    let edges = &edges[..n_edges];
    if grid.is_some_and(|g| !grid_edges_are(edges, g.nx, g.ny)) {
        return Err(MeshError::BadGrid);
    }
    let edge_start = &mut edge_start[..n_nodes];
    index_edges(edges, edge_start, triangles);
    if let Some(grid) = grid {
        grid_bending(grid, rest, &mut hinges[..n_hinges], bending);
    }
    Ok(Mesh {
        rest,
        node_area,
        triangles,
        edges,
        edge_start,
        hinges: &hinges[..n_hinges],
        bending,
        grid: grid.map(|g| [g.nx, g.ny]),
        curved: curved(&hinges[..n_hinges]),
    })
}

/// Whether some hinge holds a curvature at rest.
fn curved(hinges: &[Hinge]) -> bool {
    hinges.iter().any(|h| h.rest != [0.0; 2])
}

/// Orthonormal 2-D frame `(ax, ay)` in a triangle's plane, `ax` along its
/// first edge.
fn frame([p0, p1, p2]: [Vec3; 3]) -> (Vec3, Vec3) {
    let ax = (p1 - p0).normalized();
    (ax, (p1 - p0).cross(p2 - p0).normalized().cross(ax))
}

/// A bending triangle without hinges. The in-plane edge normals are the
/// edge directions turned by a right angle, so `(n_e·n_f)²` is the squared
/// cosine between the edges.
#[inline(never)]
fn bend_triangle(p: [Vec3; 3]) -> BendTriangle {
    let d: [Vec3; 3] = core::array::from_fn(|e| p[(e + 1) % 3] - p[e]);
    let root = crate::math::sqrt(0.5 * d[0].cross(d[1]).norm());
    let s = d.map(|e| e.norm() / root);
    let cos2 = core::array::from_fn(|e| {
        let (a, b) = (d[e], d[(e + 1) % 3]);
        let c = a.dot(b);
        c * c / (a.norm2() * b.norm2())
    });
    BendTriangle { hinges: [NO_HINGE; 3], s, cos2 }
}

/// The grid's bending triangulation: every cell split along its diagonal
/// (i, j)–(i+1, j+1), so that the two triangles on the sides of every
/// interior edge form a parallelogram, where the bending element is exact
/// for quadratic placements (on the mesh's alternating diagonals it is not).
/// The hinge count is the mesh's.
fn grid_bending(grid: &Grid, rest: &[Vec3], hinges: &mut [Hinge], bending: &mut [BendTriangle]) {
    let (nx, ny) = (grid.nx, grid.ny);
    let n = |i: usize, j: usize| grid.node(i, j) as NodeId;
    // Cell (i, j): triangle A = [p00, p10, p11] at 2c, B = [p00, p11, p01] at 2c + 1.
    let cell = |i: usize, j: usize| 2 * (j * (nx - 1) + i);
    for j in 0..ny - 1 {
        for i in 0..nx - 1 {
            let c = cell(i, j);
            bending[c] = bend_triangle([n(i, j), n(i + 1, j), n(i + 1, j + 1)].map(|k| rest[k as usize]));
            bending[c + 1] = bend_triangle([n(i, j), n(i + 1, j + 1), n(i, j + 1)].map(|k| rest[k as usize]));
        }
    }
    let mut h = 0usize;
    let mut add = |hinge: [NodeId; 4], (ta, ea): (usize, usize), (tb, eb): (usize, usize)| {
        if let Some(slot) = hinges.get_mut(h) {
            *slot = make_hinge_at(rest, hinge);
            bending[ta].hinges[ea] = h as u16;
            bending[tb].hinges[eb] = h as u16;
            h += 1;
        }
    };
    for j in 0..ny - 1 {
        for i in 0..nx - 1 {
            let c = cell(i, j);
            // The diagonal: A's edge 2 (p11–p00) and B's edge 0 (p00–p11).
            add([n(i, j), n(i + 1, j + 1), n(i + 1, j), n(i, j + 1)], (c, 2), (c + 1, 0));
            // The vertical edge at column i + 1: A's edge 1 (p10–p11) here,
            // B's edge 2 (p01–p00) in the cell to the right.
            if i + 2 < nx {
                add([n(i + 1, j), n(i + 1, j + 1), n(i, j), n(i + 2, j + 1)], (c, 1), (cell(i + 1, j) + 1, 2));
            }
            // The horizontal edge at row j + 1: B's edge 1 (p11–p01) here,
            // A's edge 0 (p00–p10) in the cell above.
            if j + 2 < ny {
                add([n(i, j + 1), n(i + 1, j + 1), n(i, j), n(i + 1, j + 2)], (c + 1, 1), (cell(i, j + 1), 0));
            }
        }
    }
}

/// The hinge's stencil: with `D_w = (foot of w on the edge − x_w) / h_w`
/// the outward normal derivative of the linear placement on the wing `w`'s
/// triangle (`h_w` its height over the edge), `Σ k_i x_i = −½ (D_w0 + D_w1)`.
#[inline(never)]
fn make_hinge_at(rest: &[Vec3], nodes: [NodeId; 4]) -> Hinge {
    let [x0, x1, w0, w1] = nodes.map(|i| rest[i as usize]);
    make_hinge(nodes, [x0, x1, w0], [x0, x1, w1])
}

/// [`make_hinge_at`] with each wing's triangle given at rest by its own
/// corners `[x0, x1, w]` (the edge's ends, then the wing): the stencil
/// needs only each wing's foot on the edge and height over it, so the two
/// triangles may lie in different frames (two panels of a pattern).
fn make_hinge(nodes: [NodeId; 4], first: [Vec3; 3], second: [Vec3; 3]) -> Hinge {
    // Foot parameter s and height h of a wing over the edge.
    let wing = |[x0, x1, w]: [Vec3; 3]| {
        let e = x1 - x0;
        let l2 = e.norm2();
        let s = (w - x0).dot(e) / l2;
        let h = (w - x0 - e * s).norm();
        (s, 1.0 / h)
    };
    let ((s0, i0), (s1, i1)) = (wing(first), wing(second));
    let k = [-0.5 * ((1.0 - s0) * i0 + (1.0 - s1) * i1), -0.5 * (s0 * i0 + s1 * i1), 0.5 * i0, 0.5 * i1];
    Hinge { nodes, k, rest: [0.0; 2] }
}
