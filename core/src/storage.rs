//! Fixed-capacity storage owned by value, for `static` or stack placement on
//! a microcontroller. Sizes are const parameters; [`crate::mesh::MeshCounts`]
//! and [`crate::physics::state::StateSizes`] compute them in const context:
//!
//! ```
//! use weft_core::{mesh::{MeshCounts, Grid, Mesh}, storage::{MeshBuffers, StateBuffers}, physics::state::StateSizes};
//! const C: MeshCounts = MeshCounts::grid(8, 8);
//! const S: StateSizes = StateSizes::new(C, 64);
//! let mut mb = MeshBuffers::<{ C.nodes }, { C.triangles }, { C.edges }, { C.hinges }>::new();
//! let mesh = Mesh::grid(&Grid::horizontal(8, 8, 1.0, 1.0, 0.0), mb.storage()).unwrap();
//! let sb: StateBuffers<{ S.vec3 }, { S.mat3 }, { S.flags }, { S.cells }, { S.pairs }, { S.solver }> = StateBuffers::new();
//! assert_eq!(mesh.counts(), C);
//! # let _ = sb;
//! ```

use crate::math::{Mat3, Vec3};
use crate::mesh::{BendTriangle, Edge, Hinge, MeshStorage, NodeId, Triangle, NO_HINGE};
use crate::physics::state::StateStorage;

/// Mesh memory for `N` nodes, `T` triangles, `E` edges, `H` hinges.
pub struct MeshBuffers<const N: usize, const T: usize, const E: usize, const H: usize> {
    rest: [Vec3; N],
    node_area: [f32; N],
    triangles: [Triangle; T],
    edges: [Edge; E],
    edge_start: [u16; N],
    hinges: [Hinge; H],
    bending: [BendTriangle; T],
}

impl<const N: usize, const T: usize, const E: usize, const H: usize> MeshBuffers<N, T, E, H> {
    pub const fn new() -> Self {
        const TRI: Triangle = Triangle { nodes: [0; 3], edges: [0; 3], grad: [[0.0; 2]; 3], area: 0.0 };
        const BEND: BendTriangle = BendTriangle { hinges: [NO_HINGE; 3], s: [0.0; 3], cos2: [0.0; 3] };
        const EDGE: Edge = Edge { a: 0, b: 0, tris: [0; 2], rest: 0.0 };
        const HINGE: Hinge = Hinge { nodes: [0; 4], k: [0.0; 4], rest: [0.0; 2] };
        MeshBuffers {
            rest: [Vec3::ZERO; N],
            node_area: [0.0; N],
            triangles: [TRI; T],
            edges: [EDGE; E],
            edge_start: [0; N],
            hinges: [HINGE; H],
            bending: [BEND; T],
        }
    }
    pub fn storage(&mut self) -> MeshStorage<'_> {
        MeshStorage {
            rest: &mut self.rest,
            node_area: &mut self.node_area,
            triangles: &mut self.triangles,
            edges: &mut self.edges,
            edge_start: &mut self.edge_start,
            hinges: &mut self.hinges,
            bending: &mut self.bending,
        }
    }
}

impl<const N: usize, const T: usize, const E: usize, const H: usize> Default for MeshBuffers<N, T, E, H> {
    fn default() -> Self {
        Self::new()
    }
}

/// State memory; sizes from [`crate::physics::state::StateSizes`] (`O` order slots =
/// `F` flags = nodes; `G` the solver's `f32`s).
pub struct StateBuffers<const V: usize, const M: usize, const F: usize, const C: usize, const P: usize, const G: usize>
{
    vec3: [Vec3; V],
    mat3: [Mat3; M],
    flags: [u8; F],
    cells: [u32; C],
    order: [NodeId; F],
    pairs: [[NodeId; 2]; P],
    solver: [f32; G],
}

impl<const V: usize, const M: usize, const F: usize, const C: usize, const P: usize, const G: usize>
    StateBuffers<V, M, F, C, P, G>
{
    pub const fn new() -> Self {
        StateBuffers {
            vec3: [Vec3::ZERO; V],
            mat3: [Mat3::ZERO; M],
            flags: [0; F],
            cells: [0; C],
            order: [0; F],
            pairs: [[0; 2]; P],
            solver: [0.0; G],
        }
    }
    pub fn storage(&mut self) -> StateStorage<'_> {
        StateStorage {
            vec3: &mut self.vec3,
            mat3: &mut self.mat3,
            flags: &mut self.flags,
            cells: &mut self.cells,
            order: &mut self.order,
            pairs: &mut self.pairs,
            history: &mut [],
            solver: &mut self.solver,
        }
    }
}

impl<const V: usize, const M: usize, const F: usize, const C: usize, const P: usize, const G: usize> Default
    for StateBuffers<V, M, F, C, P, G>
{
    fn default() -> Self {
        Self::new()
    }
}
