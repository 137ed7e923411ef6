//! Heap storage for the core's meshes and states on a desktop: the core
//! never allocates, its owner does. (Also used by the core's own tests.)

use weft_core::math::{Mat3, Vec3};
use weft_core::mesh::{BendTriangle, Edge, Hinge, MeshCounts, MeshStorage, NodeId, Triangle};
use weft_core::model::{Integrator, Model};
use weft_core::physics::state::{StateSizes, StateStorage};

/// Heap storage for a mesh.
pub struct VecMeshStorage {
    rest: Vec<Vec3>,
    node_area: Vec<f32>,
    triangles: Vec<Triangle>,
    edges: Vec<Edge>,
    edge_start: Vec<u16>,
    hinges: Vec<Hinge>,
    bending: Vec<BendTriangle>,
}

impl VecMeshStorage {
    pub fn for_counts(c: MeshCounts) -> Self {
        VecMeshStorage {
            rest: vec![Vec3::ZERO; c.nodes],
            node_area: vec![0.0; c.nodes],
            triangles: vec![Triangle::default(); c.triangles],
            edges: vec![Edge::default(); c.edges],
            edge_start: vec![0; c.nodes],
            hinges: vec![Hinge::default(); c.hinges],
            bending: vec![BendTriangle::default(); c.triangles],
        }
    }
    /// Enough for any mesh of `nodes` nodes and `triangles` triangles.
    pub fn for_triangles(nodes: usize, triangles: usize) -> Self {
        Self::for_counts(MeshCounts::upper_bound(nodes, triangles))
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

/// A state's sizes for `model` with room for `pairs` proximity pairs, as
/// the board lays them out: the rigid aggregation hierarchy's room for a
/// curved mesh, history when the model's integrator needs it
/// (BDF2), warm-start storage when its step asks for it, and no gather
/// table (the desktop adds one: [`VecStateStorage::new`]; in WebAssembly
/// the page runs faster without it, 200 against 156 corrected steps a
/// second). The results are the same bit for bit with or without it.
pub fn board_sizes(model: &Model, pairs: usize) -> StateSizes {
    let counts = model.mesh.counts();
    let mut sizes = StateSizes::new(counts, pairs);
    if model.params.rigid_coarse(&model.mesh) {
        sizes = sizes.with_rigid(counts);
    }
    if model.params.warm_start {
        sizes = sizes.with_warm_start(counts);
    }
    match model.params.integrator {
        Integrator::Bdf2 => sizes.with_history(counts),
        Integrator::BackwardEuler => sizes,
    }
}

/// Heap storage for a state.
pub struct VecStateStorage {
    vec3: Vec<Vec3>,
    mat3: Vec<Mat3>,
    flags: Vec<u8>,
    cells: Vec<u32>,
    order: Vec<NodeId>,
    pairs: Vec<[NodeId; 2]>,
    solver: Vec<f32>,
}

impl VecStateStorage {
    /// Storage for `model` with room for `pairs` proximity pairs.
    /// With history storage when the model's integrator needs it (BDF2)
    /// and warm-start storage when its step asks for it.
    pub fn new(model: &Model, pairs: usize) -> Self {
        let counts = model.mesh.counts();
        Self::with_sizes(board_sizes(model, pairs).with_gather(counts))
    }
    pub fn with_sizes(s: StateSizes) -> Self {
        VecStateStorage {
            vec3: vec![Vec3::ZERO; s.vec3],
            mat3: vec![Mat3::ZERO; s.mat3],
            flags: vec![0; s.flags],
            cells: vec![0; s.cells],
            order: vec![0; s.order],
            pairs: vec![[0; 2]; s.pairs],
            solver: vec![0.0; s.solver],
        }
    }
    pub fn storage(&mut self) -> StateStorage<'_> {
        StateStorage {
            history: &mut [],
            vec3: &mut self.vec3,
            mat3: &mut self.mat3,
            flags: &mut self.flags,
            cells: &mut self.cells,
            order: &mut self.order,
            pairs: &mut self.pairs,
            solver: &mut self.solver,
        }
    }
}
