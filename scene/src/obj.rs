//! Triangle meshes from Wavefront OBJ files (`[cloth] mesh = "…"`):
//! vertices (`v`), faces (`f`, triangles, or polygons split into a fan of
//! triangles; `v/vt/vn` forms and negative indices read), and groups
//! (`g` / `o`: the vertices of a group's faces, which pins and kicks can
//! name). A mesh the cloth cannot be is a typed [`ObjError`] naming the
//! element: a line that does not parse, a vertex no face uses, two
//! vertices at one place, an edge of more than two triangles, a triangle
//! wound against its neighbour, more nodes than a mesh holds. What the
//! core checks itself (degenerate triangles) it reports when the scenario
//! builds the mesh.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

use weft_core::math::Vec3;
use weft_core::mesh::NodeId;

/// A mesh read from an OBJ file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObjMesh {
    pub positions: Vec<Vec3>,
    pub triangles: Vec<[NodeId; 3]>,
    /// Group name → its vertices (sorted, each once).
    pub groups: BTreeMap<String, Vec<usize>>,
    /// Vertices merged into others by [`ObjOptions::weld`], and the
    /// triangles that lost a corner to it and were dropped.
    pub welded: usize,
    pub collapsed: usize,
    /// The file's texture coordinates (`vt u v`), and for each triangle
    /// its corners' (indices into `uvs`), where its face gives them
    /// (`f v/vt …`): the pattern [`ObjMesh::pattern`] cuts the cloth from.
    pub uvs: Vec<[f32; 2]>,
    pub face_uvs: Vec<Option<[usize; 3]>>,
}

impl ObjMesh {
    /// The pieces the triangles make: sets of vertices joined through
    /// triangles (a garment's panels before they are sewn are as many
    /// pieces).
    pub fn pieces(&self) -> usize {
        let mut parent: Vec<usize> = (0..self.positions.len()).collect();
        for t in &self.triangles {
            let [a, b, c] = t.map(usize::from);
            for (x, y) in [(a, b), (b, c)] {
                let (rx, ry) = (root(&mut parent, x), root(&mut parent, y));
                parent[rx.max(ry)] = rx.min(ry);
            }
        }
        (0..parent.len()).filter(|&i| root(&mut parent, i) == i).count()
    }

    /// The pattern the cloth is cut from: each triangle's corners in the
    /// file's texture coordinates times `metres` (metres per unit), in the
    /// order of its nodes; `None` when a triangle has none.
    pub fn pattern(&self, metres: f32) -> Option<Vec<weft_core::mesh::PatternTriangle>> {
        (0..self.triangles.len())
            .map(|t| {
                let corners = self.face_uvs.get(t).copied().flatten()?;
                Some(corners.map(|i| self.uvs[i].map(|c| c * metres)))
            })
            .collect()
    }
}

/// How a file is read.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ObjOptions {
    /// Merge vertices within this distance (the file's units) before the
    /// checks: `[cloth] weld`.
    pub weld: Option<f32>,
    /// Every face must give its corners' texture coordinates (`f v/vt`):
    /// the cloth's rest is its pattern (`[cloth] rest = "uv"`).
    pub uv: bool,
}

/// Why a file is not a cloth mesh.
#[derive(Clone, Debug, PartialEq)]
pub enum ObjError {
    /// Line `line` (from 1) does not parse: `what`.
    Parse { line: usize, what: String },
    /// No faces.
    NoFaces,
    /// More vertices than a mesh holds (node indices are 16-bit).
    TooManyNodes { count: usize },
    /// Vertex `vertex` (from 0) belongs to no face.
    Unused { vertex: usize },
    /// Vertices `a` and `b` (from 0) are at the same place.
    Duplicate { a: usize, b: usize },
    /// The edge `a`–`b` belongs to more than two triangles (the third is
    /// `triangle`).
    NonManifold { a: usize, b: usize, triangle: usize },
    /// Triangle `triangle` runs its edge `a`–`b` the same way as triangle
    /// `other`: one of them is inverted.
    Inverted { triangle: usize, other: usize, a: usize, b: usize },
}

impl fmt::Display for ObjError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ObjError::Parse { line, what } => write!(f, "line {line}: {what}"),
            ObjError::NoFaces => write!(f, "the mesh has no faces"),
            ObjError::TooManyNodes { count } => {
                write!(f, "{count} vertices; a mesh holds at most {}", NodeId::MAX as usize + 1)
            }
            ObjError::Unused { vertex } => write!(f, "vertex {vertex} belongs to no face"),
            ObjError::Duplicate { a, b } => write!(
                f,
                "vertices {a} and {b} are at the same place (`[cloth] weld = 1e-6` merges vertices closer than a distance)"
            ),
            ObjError::NonManifold { a, b, triangle } => {
                write!(f, "edge {a}-{b} belongs to more than two triangles (triangle {triangle} is the third)")
            }
            ObjError::Inverted { triangle, other, a, b } => write!(
                f,
                "triangle {triangle} runs edge {a}-{b} the same way as triangle {other}: one of them is inverted"
            ),
        }
    }
}

impl std::error::Error for ObjError {}

/// Reads and checks an OBJ file.
pub fn load(path: &Path, opts: ObjOptions) -> Result<ObjMesh, crate::SceneError> {
    use crate::{ErrorKind, SceneError};
    let text = std::fs::read_to_string(path)
        .map_err(|e| SceneError::new("", ErrorKind::Io, format!("reading {}: {e}", path.display())))?;
    parse_with(&text, opts).map_err(|e| SceneError::new("", ErrorKind::Mesh, format!("mesh {}: {e}", path.display())))
}

/// Parses and checks OBJ text.
pub fn parse(text: &str) -> Result<ObjMesh, ObjError> {
    parse_with(text, ObjOptions::default())
}

/// Parses OBJ text, welds it as `opts` asks, and checks it.
pub fn parse_with(text: &str, opts: ObjOptions) -> Result<ObjMesh, ObjError> {
    let mut mesh = read(text, opts.uv)?;
    if let Some(tol) = opts.weld {
        weld(&mut mesh, tol);
    }
    check(&mesh)?;
    Ok(mesh)
}

/// The root of `i`'s set in the union–find forest `parent` (paths halved
/// on the way).
fn root(parent: &mut [usize], mut i: usize) -> usize {
    while parent[i] != i {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    i
}

/// Merges the vertices of `mesh` that lie within `tol` of each other, give
/// or take the rounding of the file's coordinates to `f32` (chains of such
/// pairs merge whole) into the first of them; drops the
/// triangles that lose a corner to it; renumbers the vertices in their
/// order, keeping the ones no face uses for [`check`] to refuse.
pub fn weld(mesh: &mut ObjMesh, tol: f32) {
    let n = mesh.positions.len();
    // The file's coordinates, read as `f32`, are each within half a unit
    // in the last place of what the file writes: a seam's copies written
    // `tol` apart can measure up to an ulp or two of the largest
    // coordinate more (1.19e-6 for 1e-6 at 3 m), so that much is added.
    let largest = mesh.positions.iter().map(|p| p.x.abs().max(p.y.abs()).max(p.z.abs())).fold(0.0f32, f32::max);
    let tol = if tol > 0.0 { tol + 2.0 * f32::EPSILON * largest } else { 0.0 };
    let cell = if tol > 0.0 { tol } else { 1.0 };
    let key = |p: Vec3| {
        [p.x, p.y, p.z].map(|v| if tol > 0.0 { (v / cell).floor() as i64 } else { (v + 0.0).to_bits() as i64 })
    };
    let mut parent: Vec<usize> = (0..n).collect();
    let mut cells: HashMap<[i64; 3], Vec<usize>> = HashMap::new();
    for i in 0..n {
        let p = mesh.positions[i];
        let k = key(p);
        let reach = if tol > 0.0 { 1 } else { 0 };
        for dx in -reach..=reach {
            for dy in -reach..=reach {
                for dz in -reach..=reach {
                    let Some(near) = cells.get(&[k[0] + dx, k[1] + dy, k[2] + dz]) else { continue };
                    for &j in near {
                        if (mesh.positions[j] - p).norm() <= tol {
                            let (a, b) = (root(&mut parent, i), root(&mut parent, j));
                            parent[a.max(b)] = a.min(b);
                        }
                    }
                }
            }
        }
        cells.entry(k).or_default().push(i);
    }
    let mut index = vec![usize::MAX; n];
    let mut positions = Vec::new();
    for (i, slot) in index.iter_mut().enumerate() {
        if root(&mut parent, i) == i {
            *slot = positions.len();
            positions.push(mesh.positions[i]);
        }
    }
    let new = |i: usize, parent: &mut [usize]| index[root(parent, i)];
    mesh.welded = n - positions.len();
    let before = mesh.triangles.len();
    let faces = std::mem::take(&mut mesh.face_uvs).into_iter().chain(std::iter::repeat(None));
    (mesh.triangles, mesh.face_uvs) = std::mem::take(&mut mesh.triangles)
        .into_iter()
        .zip(faces)
        .map(|(t, uv)| (t.map(|c| new(c as usize, &mut parent) as NodeId), uv))
        .filter(|(t, _)| t[0] != t[1] && t[1] != t[2] && t[2] != t[0])
        .unzip();
    mesh.collapsed = before - mesh.triangles.len();
    for nodes in mesh.groups.values_mut() {
        for v in nodes.iter_mut() {
            *v = new(*v, &mut parent);
        }
        nodes.sort_unstable();
        nodes.dedup();
    }
    mesh.positions = positions;
}

/// The first `N` of `words` as finite numbers (more are ignored, as a
/// vertex's optional weight is).
fn finite<'a, const N: usize>(mut words: impl Iterator<Item = &'a str>) -> Option<[f32; N]> {
    let mut out = [0.0; N];
    for v in &mut out {
        *v = words.next()?.parse::<f32>().ok().filter(|v| v.is_finite())?;
    }
    Some(out)
}

/// Parses OBJ text into a mesh, unchecked; with `uv`, every face corner
/// must name a texture coordinate.
fn read(text: &str, uv: bool) -> Result<ObjMesh, ObjError> {
    let mut mesh = ObjMesh::default();
    let mut group: Option<String> = None;
    for (k, raw) in text.lines().enumerate() {
        let line = k + 1;
        let bad = |what: &str| ObjError::Parse { line, what: what.to_string() };
        let mut words = raw.split('#').next().unwrap_or("").split_whitespace();
        match words.next() {
            Some("v") => {
                let [x, y, z] = finite(words).ok_or_else(|| bad("a vertex needs three finite numbers"))?;
                mesh.positions.push(Vec3::new(x, y, z));
            }
            Some("vt") => {
                mesh.uvs.push(finite(words).ok_or_else(|| bad("a texture coordinate needs two finite numbers (u v)"))?)
            }
            Some("f") => {
                let (n, m) = (mesh.positions.len() as i64, mesh.uvs.len() as i64);
                let corners = words
                    .map(|w| {
                        let mut parts = w.split('/');
                        let i: i64 =
                            parts.next().unwrap_or("").parse().map_err(|_| bad("a face corner is not an index"))?;
                        let i = if i < 0 { n + i } else { i - 1 };
                        if !(0..n).contains(&i) {
                            return Err(bad(&format!("a face names vertex {w}, which does not exist")));
                        }
                        let t = match parts.next().filter(|t| !t.is_empty()) {
                            None if uv => {
                                return Err(bad(
                                    "a face corner names no texture coordinate (`v/vt`), which `rest = \"uv\"` needs",
                                ))
                            }
                            None => None,
                            Some(t) => {
                                let t: i64 =
                                    t.parse().map_err(|_| bad("a face corner's texture coordinate is not an index"))?;
                                let t = if t < 0 { m + t } else { t - 1 };
                                if !(0..m).contains(&t) {
                                    return Err(bad(&format!(
                                        "a face names texture coordinate {w}, which does not exist"
                                    )));
                                }
                                Some(t as usize)
                            }
                        };
                        Ok((i as usize, t))
                    })
                    .collect::<Result<Vec<(usize, Option<usize>)>, ObjError>>()?;
                if corners.len() < 3 {
                    return Err(bad("a face needs three corners"));
                }
                for t in 1..corners.len() - 1 {
                    let c = [corners[0], corners[t], corners[t + 1]];
                    mesh.triangles.push(c.map(|(i, _)| i as NodeId));
                    mesh.face_uvs.push(match c.map(|(_, t)| t) {
                        [Some(a), Some(b), Some(c)] => Some([a, b, c]),
                        _ => None,
                    });
                }
                let corners: Vec<usize> = corners.into_iter().map(|(i, _)| i).collect();
                if let Some(g) = &group {
                    mesh.groups.entry(g.clone()).or_default().extend(&corners);
                }
            }
            Some("g") | Some("o") => group = words.next().map(str::to_string),
            _ => {}
        }
    }
    for nodes in mesh.groups.values_mut() {
        nodes.sort_unstable();
        nodes.dedup();
    }
    Ok(mesh)
}

/// The checks of [`ObjError`] beyond parsing.
pub fn check(mesh: &ObjMesh) -> Result<(), ObjError> {
    if mesh.triangles.is_empty() {
        return Err(ObjError::NoFaces);
    }
    if mesh.positions.len() > NodeId::MAX as usize + 1 {
        return Err(ObjError::TooManyNodes { count: mesh.positions.len() });
    }
    let mut used = vec![false; mesh.positions.len()];
    for t in &mesh.triangles {
        for &i in t {
            used[i as usize] = true;
        }
    }
    if let Some(vertex) = used.iter().position(|u| !u) {
        return Err(ObjError::Unused { vertex });
    }
    let mut seen: HashMap<[u32; 3], usize> = HashMap::new();
    for (b, p) in mesh.positions.iter().enumerate() {
        // +0 and −0 are one place.
        let key = [p.x, p.y, p.z].map(|v| (v + 0.0).to_bits());
        if let Some(&a) = seen.get(&key) {
            return Err(ObjError::Duplicate { a, b });
        }
        seen.insert(key, b);
    }
    // Each edge in at most two triangles.
    let mut uses: HashMap<(NodeId, NodeId), usize> = HashMap::new();
    for (triangle, t) in mesh.triangles.iter().enumerate() {
        for k in 0..3 {
            let (a, b) = (t[k].min(t[(k + 1) % 3]), t[k].max(t[(k + 1) % 3]));
            let n = uses.entry((a, b)).or_insert(0);
            *n += 1;
            if *n > 2 {
                return Err(ObjError::NonManifold { a: a as usize, b: b as usize, triangle });
            }
        }
    }
    // Each directed edge at most once: a neighbour runs a shared edge the
    // other way.
    let mut directed: HashMap<(NodeId, NodeId), usize> = HashMap::new();
    for (triangle, t) in mesh.triangles.iter().enumerate() {
        for k in 0..3 {
            let (a, b) = (t[k], t[(k + 1) % 3]);
            if let Some(&other) = directed.get(&(a, b)) {
                return Err(ObjError::Inverted { triangle, other, a: a as usize, b: b as usize });
            }
            directed.insert((a, b), triangle);
        }
    }
    Ok(())
}

/// OBJ text of a mesh (groups as `g` lines before their faces are not
/// kept: every face is written once, vertex groups as comments).
pub fn write(positions: &[Vec3], triangles: &[[NodeId; 3]]) -> String {
    let mut s = String::new();
    for p in positions {
        s += &format!("v {} {} {}\n", p.x, p.y, p.z);
    }
    for t in triangles {
        s += &format!("f {} {} {}\n", t[0] as usize + 1, t[1] as usize + 1, t[2] as usize + 1);
    }
    s
}

/// `mesh` with every triangle split in four at its edges' midpoints,
/// `levels` times: the nodes of `mesh` keep their indices (the new ones
/// come after them), every triangle keeps its winding, and a group takes
/// the midpoints of the edges both of whose ends it holds. The fine
/// reference of a mesh cloth (`k = 2^levels` times finer along every
/// edge).
pub fn subdivide(mesh: &ObjMesh, levels: u32) -> ObjMesh {
    let mut m = mesh.clone();
    for _ in 0..levels {
        m.face_uvs = split_uvs(&m.face_uvs, &mut m.uvs, m.triangles.len());
        let (x, t, mid) = split(&m.triangles, &m.positions);
        for nodes in m.groups.values_mut() {
            let held: std::collections::BTreeSet<usize> = nodes.iter().copied().collect();
            for (&(a, b), &n) in &mid {
                if held.contains(&(a as usize)) && held.contains(&(b as usize)) {
                    nodes.push(n as usize);
                }
            }
            nodes.sort_unstable();
        }
        (m.positions, m.triangles) = (x, t);
    }
    m
}

/// The texture coordinates of [`split`]'s four triangles for each of
/// `n` triangles (their midpoints added to `uvs`).
fn split_uvs(faces: &[Option<[usize; 3]>], uvs: &mut Vec<[f32; 2]>, n: usize) -> Vec<Option<[usize; 3]>> {
    let mut out = Vec::with_capacity(4 * n);
    for k in 0..n {
        let Some([a, b, c]) = faces.get(k).copied().flatten() else {
            out.extend([None; 4]);
            continue;
        };
        let mut mid = |p: usize, q: usize| {
            let ([u0, v0], [u1, v1]) = (uvs[p], uvs[q]);
            uvs.push([0.5 * (u0 + u1), 0.5 * (v0 + v1)]);
            uvs.len() - 1
        };
        let (ab, bc, ca) = (mid(a, b), mid(b, c), mid(c, a));
        out.extend([Some([a, ab, ca]), Some([ab, b, bc]), Some([ca, bc, c]), Some([ab, bc, ca])]);
    }
    out
}

/// Values at the nodes of `mesh` (positions, velocities) carried onto its
/// subdivision ([`subdivide`]): a midpoint takes the mean of its edge's
/// ends.
pub fn subdivide_values(mesh: &ObjMesh, levels: u32, values: &[Vec3]) -> Vec<Vec3> {
    let (mut t, mut v) = (mesh.triangles.clone(), values.to_vec());
    for _ in 0..levels {
        let (nv, nt, _) = split(&t, &v);
        (v, t) = (nv, nt);
    }
    v
}

/// One split of `triangles` in four: the values at the old and new nodes,
/// the new triangles, and each edge's midpoint node.
#[allow(clippy::type_complexity)]
fn split(
    triangles: &[[NodeId; 3]],
    values: &[Vec3],
) -> (Vec<Vec3>, Vec<[NodeId; 3]>, HashMap<(NodeId, NodeId), NodeId>) {
    let mut mid: HashMap<(NodeId, NodeId), NodeId> = HashMap::new();
    let mut x = values.to_vec();
    let mut midpoint = |a: NodeId, b: NodeId, x: &mut Vec<Vec3>| -> NodeId {
        *mid.entry((a.min(b), a.max(b))).or_insert_with(|| {
            x.push((x[a as usize] + x[b as usize]) * 0.5);
            (x.len() - 1) as NodeId
        })
    };
    let mut t = Vec::with_capacity(4 * triangles.len());
    for &[a, b, c] in triangles {
        let (ab, bc, ca) = (midpoint(a, b, &mut x), midpoint(b, c, &mut x), midpoint(c, a, &mut x));
        t.extend([[a, ab, ca], [ab, b, bc], [ca, bc, c], [ab, bc, ca]]);
    }
    (x, t, mid)
}
