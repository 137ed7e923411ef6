//! The step's working memory and its overlays, declared in one place (as
//! MuJoCo declares its arena in `mjData`). The solver's vectors and blocks
//! change meaning by stage within a step (the fields say which); between
//! steps two overlays lend them out:
//!
//! - [`NetworkLoan`] ([`Workspace::lend`]): the correction network's int32
//!   sums in the matrix blocks, its corrections in the residual and search
//!   vectors ([`Workspace::lent_corrections`]);
//! - [`hinge_cache`]: the bending energy's hinge scratch in the blocks,
//!   idle where energies are measured (before the system is assembled and
//!   after it is solved).

use super::energy::ElasticMemo;
use super::gather::Gather;
use super::hierarchy::Hierarchy;
use super::stencil::BendingStencil;
use crate::math::{Mat3, Vec3};
use crate::mesh::{MeshCounts, NodeId};

/// Mat3 slots per node (diagonal block, preconditioner); one more per edge.
pub const MAT3_PER_NODE: usize = 2;

/// Widest network latent whose int32 sums the state's blocks hold between
/// steps ([`Workspace::lend`]).
pub const MAX_LENT_LATENT: usize = 20;

/// The solver's blocks, at least enough for the sums of a network of
/// latent [`MAX_LENT_LATENT`] (`2·latent + 1` words per node; it decides
/// only on meshes with few edges per node).
pub const fn mat3_blocks(counts: MeshCounts) -> usize {
    let solver = MAT3_PER_NODE * counts.nodes + counts.edges;
    let sums = ((2 * MAX_LENT_LATENT + 1) * counts.nodes).div_ceil(9);
    if solver > sums {
        solver
    } else {
        sums
    }
}

/// The solver's diagonal, preconditioner and edge blocks of `blocks` for
/// `nodes` nodes and `edges` edges.
pub(crate) fn split_blocks(blocks: &mut [Mat3], nodes: usize, edges: usize) -> (&mut [Mat3], &mut [Mat3], &mut [Mat3]) {
    let (diag, rest) = blocks.split_at_mut(nodes.min(blocks.len()));
    let (precond, rest) = rest.split_at_mut(nodes.min(rest.len()));
    let (off, _) = rest.split_at_mut(edges.min(rest.len()));
    (diag, precond, off)
}

/// [`split_blocks`] to read.
pub(crate) fn blocks_of(blocks: &[Mat3], nodes: usize, edges: usize) -> (&[Mat3], &[Mat3], &[Mat3]) {
    let (diag, rest) = blocks.split_at(nodes.min(blocks.len()));
    let (precond, rest) = rest.split_at(nodes.min(rest.len()));
    (diag, precond, &rest[..edges.min(rest.len())])
}

/// Solver and search scratch. The step's vectors hold, stage by stage
/// ([`super::step`]'s `substep`):
pub(crate) struct Workspace<'a> {
    /// All forces while the system is assembled; then the right-hand side
    /// `b`, kept for the constraint impulses `(A Δv − b)·n`.
    pub force: &'a mut [Vec3],
    /// External forces (gravity, wind), which the energy check charges.
    pub f_ext: &'a mut [Vec3],
    /// The right-hand side, then CG's residual; after the solve the base
    /// positions the candidate moves from. Between steps: the network's
    /// position corrections ([`Workspace::lend`]).
    pub r: &'a mut [Vec3],
    /// CG's search direction; then the trial velocities of the energy check
    /// and the candidate. Between steps: the velocity corrections.
    pub p: &'a mut [Vec3],
    /// Products `A p`; after the solve `A Δv` for the impulses.
    pub q: &'a mut [Vec3],
    /// The extrapolated velocity for BDF2's wind; then the velocity change
    /// `Δv` (its constrained part, then the solution); at the end the
    /// candidate's velocities.
    pub dv: &'a mut [Vec3],
    /// The extrapolated or base positions; CG's preconditioner scratch; the
    /// trial positions; at the end the candidate's positions.
    pub x_new: &'a mut [Vec3],
    /// Contact normal of each node held by a collider during a step.
    pub normal: &'a mut [Vec3],
    /// The elastic energy a step measured last, and where.
    pub memo: ElasticMemo<'a>,
    /// The velocities the last step started from; the current ones before
    /// the first step and after [`State::set_velocities`].
    pub v_start: &'a mut [Vec3],
    /// The velocities the step before the last started from (with the
    /// wind's push, as `v_start`); `v_start` when a step starts from a state
    /// whose velocities were just set.
    pub v_start_prev: &'a mut [Vec3],
    /// The last solve's `Δv` (empty without warm-start storage) and its
    /// step's length `h` (0: none since the state was set): the next
    /// solve's starting guess where its `h` is the same.
    pub warm: &'a mut [Vec3],
    pub warm_h: f32,
    /// Diagonal blocks, preconditioner blocks (one each per node), then
    /// edge blocks ([`split_blocks`]); between steps the network's int32
    /// sums live here.
    pub blocks: &'a mut [Mat3],
    /// Node flags ([`crate::flags`]): pinned; the contact and its collider only
    /// during a step (cleared when it ends).
    pub flags: &'a mut [u8],
    pub cells: &'a mut [u32],
    pub order: &'a mut [NodeId],
    pub pairs: &'a mut [[NodeId; 2]],
    pub n_pairs: usize,
    /// The previous step's positions and velocities (empty without history
    /// storage) and whether they hold a step of the current length.
    pub x_prev: &'a mut [Vec3],
    pub v_prev: &'a mut [Vec3],
    pub history: bool,
    /// The assembled bending Hessian (grids only).
    pub stencil: Option<BendingStencil<'a>>,
    /// The solve's multigrid preconditioner (no levels on other meshes).
    pub mg: Hierarchy<'a>,
    /// The block product as a gather (grids with its storage only).
    pub gather: Option<Gather<'a>>,
    /// The matrix-free bending Hessian's room (other meshes than grids,
    /// where the solver's pool has it; else empty): each hinge's measure
    /// during a product, each node's diagonal entry.
    pub bend: crate::physics::stencil::Scratch<'a>,
}

impl<'a> Workspace<'a> {
    /// The network's overlay between steps, with the state's positions
    /// `x` and velocities `v` to read.
    pub(crate) fn lend<'s>(&'s mut self, x: &'s [Vec3], v: &'s [Vec3]) -> NetworkLoan<'s> {
        NetworkLoan {
            x,
            v,
            v_start: self.v_start,
            v_start_prev: self.v_start_prev,
            pinned: self.flags,
            pairs: &self.pairs[..self.n_pairs],
            sums: bytemuck::cast_slice_mut(self.blocks),
            dx: self.r,
            dv: self.p,
        }
    }

    /// The corrections a network left in its loan ([`Workspace::lend`]).
    pub(crate) fn lent_corrections(&self) -> (&[Vec3], &[Vec3]) {
        (self.r, self.p)
    }
}

/// The part of a [`State`] a network borrows between steps
/// ([`super::State::lend_to_network`]).
pub struct NetworkLoan<'s> {
    pub x: &'s [Vec3],
    pub v: &'s [Vec3],
    /// The velocities the last step started from ([`super::State::start_velocities`]).
    pub v_start: &'s [Vec3],
    /// The velocities the step before started from
    /// ([`super::State::previous_start_velocities`]).
    pub v_start_prev: &'s [Vec3],
    pub pinned: &'s [u8],
    /// The dynamic pairs of the last search ([`super::State::find_pairs`]).
    pub pairs: &'s [[NodeId; 2]],
    /// int32 scratch: the solver's matrix blocks, free between steps.
    pub sums: &'s mut [i32],
    /// Position and velocity corrections per node: the solver's residual and
    /// search vectors, free between steps.
    pub dx: &'s mut [Vec3],
    pub dv: &'s mut [Vec3],
}

/// The solver's blocks as the energy's hinge scratch: idle where energies
/// are measured (before the system is assembled and after it is solved).
pub(crate) fn hinge_cache(blocks: &mut [Mat3]) -> &mut [[f32; 4]] {
    bytemuck::cast_slice_mut::<Mat3, f32>(blocks).as_chunks_mut::<4>().0
}
