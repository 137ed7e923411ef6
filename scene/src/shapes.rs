//! Cloth shapes that are not rectangles, as triangle meshes in the x–z
//! plane (metres, front side up): `weft mesh` writes them as OBJ files
//! for scene files (`host/scenarios/meshes/`), and `[cloth] shape` names.
//!
//! - [`Shape::Disc`]: a round tablecloth, rings of 6k nodes about a
//!   centre node;
//! - [`Shape::Holed`]: a rectangle with a square hole (a flag with a
//!   grommet window);
//! - [`Shape::Irregular`]: a square sheet of jittered nodes and random
//!   diagonals (no two neighbourhoods alike);
//! - [`Shape::Panel`]: a garment-like front panel (body, sleeves, neck);
//! - [`Shape::Tube`]: a sleeve, a tube 0.4 m long and 0.12 m across about
//!   the x axis;
//! - [`Shape::Skirt`]: a skirt, a cone's band about the y axis, 0.2 m
//!   across at its waist (the top), 0.5 m at its hem, 0.3 m high.
//!
//! The tube and the skirt are the shapes not in the x–z plane: curved at
//! rest, their outside the front.

use weft_core::math::Vec3;
use weft_core::mesh::NodeId;

/// A shape `weft mesh` makes (and `[cloth] shape = "…"` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Shape {
    Disc,
    Holed,
    Irregular,
    Panel,
    Tube,
    Skirt,
}

/// Rest positions and triangles.
pub type Triangles = (Vec<Vec3>, Vec<[NodeId; 3]>);

impl Shape {
    /// The shape at its own size, 16 cells across.
    pub fn mesh(self) -> Triangles {
        match self {
            Shape::Disc => disc(0.4, 8),
            Shape::Holed => holed(16),
            Shape::Irregular => masked(15, 15, 0.8, 0.8, 0.3, 7, |_, _| true),
            Shape::Panel => masked(16, 14, 0.8, 0.7, 0.0, 1, panel),
            Shape::Tube => tube(0.06, 0.4, 16),
            Shape::Skirt => skirt(16),
        }
    }

    /// The shape `cells` cells across (the disc: `cells / 2` rings), or
    /// `None` for a shape drawn at one size only (the irregular sheet and
    /// the panel: 16). `Some(shape.mesh())` at 16.
    pub fn mesh_at(self, cells: usize) -> Option<Triangles> {
        match self {
            Shape::Disc if cells >= 2 => Some(disc(0.4, cells / 2)),
            Shape::Holed if cells >= 4 => Some(holed(cells)),
            Shape::Tube if cells >= 3 => Some(tube(0.06, 0.4, cells)),
            Shape::Skirt if cells >= 3 => Some(skirt(cells)),
            _ if cells == 16 => Some(self.mesh()),
            _ => None,
        }
    }

    /// [`Shape::mesh_at`] as a mesh read from a file, without groups.
    pub fn obj(self, cells: usize) -> Option<crate::obj::ObjMesh> {
        let (positions, triangles) = self.mesh_at(cells)?;
        Some(crate::obj::ObjMesh { positions, triangles, ..Default::default() })
    }
}

/// A tube of `radius` and `length` (m) about the x axis, centred on the
/// origin: `around` nodes a ring, rings as close as the nodes around (near
/// square cells), quads split by alternating diagonals, wound with the
/// normal outwards.
pub fn tube(radius: f32, length: f32, around: usize) -> Triangles {
    band([radius, radius], length, around, Vec3::new)
}

/// A skirt `around` nodes a ring: a cone's band about the y axis from a
/// 0.1 m radius at its top (y = 0.15) to 0.25 m at its hem (y = −0.15).
pub fn skirt(around: usize) -> Triangles {
    band([0.25, 0.1], 0.3, around, |along, c, s| Vec3::new(c, along, s))
}

/// A band about an axis: rings from radius `radii[0]` at `−length / 2`
/// along the axis to `radii[1]` at `+length / 2`, `around` nodes a ring,
/// rings about as far apart as the nodes around; `place(along, c, s)` puts
/// the point at `along` on the axis and `(c, s)` across it. Quads split by
/// alternating diagonals, wound with the normal outwards.
fn band(radii: [f32; 2], length: f32, around: usize, place: impl Fn(f32, f32, f32) -> Vec3) -> Triangles {
    let mean = 0.5 * (radii[0] + radii[1]);
    let cell = std::f32::consts::TAU * mean / around as f32;
    let slant = (length * length + (radii[1] - radii[0]).powi(2)).sqrt();
    let rings = ((slant / cell).round() as usize).max(1) + 1;
    let mut x = Vec::with_capacity(rings * around);
    for j in 0..rings {
        let f = j as f32 / (rings - 1) as f32;
        let along = length * j as f32 / (rings - 1) as f32 - 0.5 * length;
        let r = radii[0] + (radii[1] - radii[0]) * f;
        for c in 0..around {
            let a = std::f32::consts::TAU * c as f32 / around as f32;
            x.push(place(along, r * a.cos(), r * a.sin()));
        }
    }
    let node = |j: usize, c: usize| (j * around + c % around) as NodeId;
    let mut t = Vec::new();
    for j in 0..rings - 1 {
        for c in 0..around {
            let (a, b, cc, d) = (node(j, c), node(j, c + 1), node(j + 1, c + 1), node(j + 1, c));
            if (c + j) % 2 == 0 {
                t.extend([[a, b, cc], [a, cc, d]]);
            } else {
                t.extend([[a, b, d], [b, cc, d]]);
            }
        }
    }
    // Outwards: the normal along the centroid's offset from the axis (the
    // axis point is where `place` puts the centroid's `along`, with no
    // offset across).
    let axis = place(1.0, 0.0, 0.0) - place(0.0, 0.0, 0.0);
    for tri in &mut t {
        let [p, q, r] = tri.map(|n| x[n as usize]);
        let centre = (p + q + r) * (1.0 / 3.0);
        let out = centre - axis * centre.dot(axis);
        if (q - p).cross(r - p).dot(out) < 0.0 {
            tri.swap(1, 2);
        }
    }
    (x, t)
}

/// A 0.8 × 0.6 m sheet of `n × 3n/4` cells with a square hole of `n / 8`
/// cells a side (at least one) about its centre.
fn holed(n: usize) -> Triangles {
    let (ny, h) = (3 * n / 4, (n / 8).max(1));
    let (i0, j0) = (n / 2 - h / 2, ny / 2 - h / 2);
    masked(n, ny, 0.8, 0.6, 0.0, 1, |i, j| !((i0..i0 + h).contains(&i) && (j0..j0 + h).contains(&j)))
}

/// Cell `(i, j)` of a 16 × 14 grid inside a garment's front: the body
/// (columns 4–11), the sleeves at the top four rows, the neck cut out.
fn panel(i: usize, j: usize) -> bool {
    let body = (4..12).contains(&i);
    let sleeves = j >= 10;
    let neck = (6..10).contains(&i) && j >= 13;
    (body || sleeves) && !neck
}

/// A disc of `rings` rings about a centre node, ring `k` with `6k` nodes.
pub fn disc(radius: f32, rings: usize) -> Triangles {
    let mut x = vec![Vec3::ZERO];
    let start = |k: usize| if k == 0 { 0 } else { 1 + 3 * k * (k - 1) };
    let count = |k: usize| if k == 0 { 1 } else { 6 * k };
    for k in 1..=rings {
        let r = radius * k as f32 / rings as f32;
        for m in 0..6 * k {
            let a = std::f32::consts::TAU * m as f32 / (6 * k) as f32;
            x.push(Vec3::new(r * a.cos(), 0.0, r * a.sin()));
        }
    }
    let mut t = Vec::new();
    let node = |ring: usize, m: usize| (start(ring) + m % count(ring)) as NodeId;
    for b in 0..6 {
        t.push([0, node(1, b), node(1, b + 1)]);
    }
    for k in 2..=rings {
        // Walk ring k − 1 and ring k by angle, always advancing the one
        // whose next node comes first.
        let (n1, n2) = (count(k - 1), count(k));
        let (mut a, mut b) = (0usize, 0usize);
        while a < n1 || b < n2 {
            let outer_first = a >= n1 || (b < n2 && (b + 1) * n1 <= (a + 1) * n2);
            if outer_first {
                t.push([node(k - 1, a), node(k, b), node(k, b + 1)]);
                b += 1;
            } else {
                t.push([node(k - 1, a), node(k, b), node(k - 1, a + 1)]);
                a += 1;
            }
        }
    }
    upward((x, t))
}

/// The cells `(i, j)` of an `nx × ny`-cell grid of `w × h` metres that
/// `keep` keeps, interior nodes moved by up to `jitter` of a cell and
/// diagonals chosen by `seed` (1: alternating), unused nodes dropped.
fn masked(
    nx: usize,
    ny: usize,
    w: f32,
    h: f32,
    jitter: f32,
    seed: u64,
    keep: impl Fn(usize, usize) -> bool,
) -> Triangles {
    let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng >> 11) as f32 / (1u64 << 53) as f32
    };
    let (dx, dz) = (w / nx as f32, h / ny as f32);
    let mut x = Vec::new();
    for j in 0..=ny {
        for i in 0..=nx {
            let inner = i > 0 && j > 0 && i < nx && j < ny;
            let (ox, oz) =
                if inner { ((next() - 0.5) * jitter * dx, (next() - 0.5) * jitter * dz) } else { (0.0, 0.0) };
            x.push(Vec3::new(i as f32 * dx - 0.5 * w + ox, 0.0, j as f32 * dz - 0.5 * h + oz));
        }
    }
    let node = |i: usize, j: usize| (j * (nx + 1) + i) as NodeId;
    let mut t = Vec::new();
    for j in 0..ny {
        for i in 0..nx {
            if !keep(i, j) {
                continue;
            }
            let flip = if seed == 1 { (i + j) % 2 == 0 } else { next() < 0.5 };
            let (a, b, c, d) = (node(i, j), node(i + 1, j), node(i + 1, j + 1), node(i, j + 1));
            if flip {
                t.extend([[a, b, c], [a, c, d]]);
            } else {
                t.extend([[a, b, d], [b, c, d]]);
            }
        }
    }
    upward(compact((x, t)))
}

/// Drops the nodes no triangle uses, renumbering the others in order.
fn compact((x, t): Triangles) -> Triangles {
    let mut index = vec![NodeId::MAX; x.len()];
    let mut kept = Vec::new();
    for tri in &t {
        for &n in tri {
            if index[n as usize] == NodeId::MAX {
                index[n as usize] = 0;
            }
        }
    }
    for (n, slot) in index.iter_mut().enumerate() {
        if *slot == 0 {
            *slot = kept.len() as NodeId;
            kept.push(x[n]);
        }
    }
    let t = t.into_iter().map(|tri| tri.map(|n| index[n as usize])).collect();
    (kept, t)
}

/// Every triangle wound with its normal up (+y): the front side up.
fn upward((x, mut t): Triangles) -> Triangles {
    for tri in &mut t {
        let [a, b, c] = tri.map(|n| x[n as usize]);
        if (b - a).cross(c - a).y < 0.0 {
            tri.swap(1, 2);
        }
    }
    (x, t)
}
