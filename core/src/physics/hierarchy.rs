//! The solve's coarse-grid correction for any mesh: the grid's multigrid
//! ([`super::multigrid`]) on grids, the aggregates of the mesh's graph
//! ([`super::aggregate`]) elsewhere, or none (block Jacobi alone, where
//! the state's storage has no room for a hierarchy).

use super::aggregate::Aggregates;
use super::multigrid::{Coarse, FineLevel, FineOperator, Multigrid};
use crate::math::Vec3;
use crate::mesh::Mesh;

/// The state's hierarchy.
pub enum Hierarchy<'a> {
    Grid(Multigrid<'a>),
    Graph(Aggregates<'a>),
    None,
}

impl Coarse for Hierarchy<'_> {
    fn levels(&self) -> usize {
        match self {
            Hierarchy::Grid(m) => m.levels(),
            Hierarchy::Graph(a) => a.levels(),
            Hierarchy::None => 0,
        }
    }
    fn assemble(&mut self, mesh: &Mesh, op: &FineOperator) {
        match self {
            Hierarchy::Grid(m) => m.assemble(mesh, op),
            Hierarchy::Graph(a) => a.assemble(mesh, op),
            Hierarchy::None => {}
        }
    }
    fn cycle(&mut self, fine_op: &impl FineLevel, r: &[Vec3], z: &mut [Vec3], t: &mut [Vec3]) {
        match self {
            Hierarchy::Grid(m) => m.cycle(fine_op, r, z, t),
            Hierarchy::Graph(a) => a.cycle(fine_op, r, z, t),
            Hierarchy::None => {}
        }
    }
}
