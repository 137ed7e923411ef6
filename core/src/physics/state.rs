//! What a step changes: positions, velocities, time, the solver's scratch
//! and the proximity pairs, all in caller-provided memory
//! ([`StateStorage`]). Problems during a step become counted [`Warnings`].

use super::aggregate::{self, Aggregates};
use super::bending;
use super::energy::ElasticMemo;
use super::gather::{self, Gather};
use super::hierarchy::Hierarchy;
use super::multigrid::{Layout, Multigrid};
use super::stencil::{self, BendingStencil, Scratch};
use super::workspace::Workspace;
pub use super::workspace::{mat3_blocks, NetworkLoan, MAT3_PER_NODE, MAX_LENT_LATENT};
use crate::contact::{self, Proximity, ProximityError};
use crate::math::{Mat3, Vec3};
use crate::mesh::{Mesh, MeshCounts, NodeId};
use crate::model::Model;
use core::cell::Cell;

/// Vec3 slots per node: x, v, force, external force, r, p, q, Δv, x_new,
/// contact normal, the placement whose elastic energy the step measured
/// last (`physics::energy`'s memo), the velocities the last step and the
/// one before started from (the network's view of the step's velocity
/// change and of the frame before).
pub const VEC3_PER_NODE: usize = 13;

/// Optional Vec3 slots per node after the others: the previous step's
/// positions and velocities (BDF2).
pub const HISTORY_PER_NODE: usize = 2;

/// Clock ticks per step: a step may be split into halves down to a
/// sixteenth ([`crate::physics::MAX_SPLIT`]), and every substep ends on a
/// tick.
pub const TICKS_PER_STEP: u64 = 16;
/// Sizes of the slices a [`StateStorage`] needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateSizes {
    pub vec3: usize,
    pub mat3: usize,
    pub flags: usize,
    pub cells: usize,
    pub order: usize,
    pub pairs: usize,
    /// `f32`s of the solver's assembled bending stencil and multigrid
    /// hierarchy (grids only: [`crate::physics::stencil::floats`],
    /// [`crate::physics::multigrid::Layout::floats`]).
    pub solver: usize,
}

impl StateSizes {
    /// The same sizes with room for the previous step's positions and
    /// velocities, which the BDF2 integrator needs
    /// ([`crate::model::Integrator::Bdf2`]; without them a state steps with
    /// backward Euler).
    pub const fn with_history(self, counts: MeshCounts) -> StateSizes {
        StateSizes { vec3: self.vec3 + HISTORY_PER_NODE * counts.nodes, ..self }
    }

    /// The same sizes with room for the last solve's `Δv`, the next one's
    /// starting guess ([`crate::model::StepParams::warm_start`]; without it
    /// every solve starts from zero).
    pub const fn with_warm_start(self, counts: MeshCounts) -> StateSizes {
        StateSizes { vec3: self.vec3 + counts.nodes, ..self }
    }

    /// The same sizes with room for the block product's gather table
    /// ([`crate::physics::gather`], grids only): the solve's products in
    /// vector instructions where the target has them, at 93 `f32`s and
    /// a few more per node.
    pub const fn with_gather(self, counts: MeshCounts) -> StateSizes {
        StateSizes { solver: self.solver + gather::floats(counts.grid), ..self }
    }

    /// The same sizes with room for the rigid aggregation hierarchy a
    /// curved mesh builds where its pool holds it
    /// ([`Aggregates::rigid`]; without the room, translations alone).
    pub const fn with_rigid(self, counts: MeshCounts) -> StateSizes {
        StateSizes {
            solver: self.solver + aggregate::rigid_floats(counts).saturating_sub(aggregate::floats(counts)),
            ..self
        }
    }

    /// Storage for a mesh of `counts` with room for `pairs` proximity pairs
    /// and a spatial hash of twice as many buckets as nodes.
    pub const fn new(counts: MeshCounts, pairs: usize) -> StateSizes {
        StateSizes {
            vec3: VEC3_PER_NODE * counts.nodes,
            mat3: mat3_blocks(counts),
            flags: counts.nodes,
            cells: 2 * counts.nodes + 1,
            order: counts.nodes,
            pairs,
            solver: stencil::floats(counts.grid)
                + Layout::of(counts.grid).floats()
                + aggregate::floats(counts)
                + bending_floats(counts),
        }
    }
}

/// The bending diagonal's room on other meshes than grids (a grid's
/// stencil holds its own).
const fn bending_floats(counts: MeshCounts) -> usize {
    if counts.grid.is_some() {
        0
    } else {
        bending::diagonal_floats(counts.nodes)
    }
}

/// Caller-owned memory for a [`State`].
pub struct StateStorage<'a> {
    pub vec3: &'a mut [Vec3],
    pub mat3: &'a mut [Mat3],
    pub flags: &'a mut [u8],
    /// Spatial hash buckets + 1 (at least 2).
    pub cells: &'a mut [u32],
    pub order: &'a mut [NodeId],
    /// Proximity pairs: self-contact now, the network's dynamic edges later.
    pub pairs: &'a mut [[NodeId; 2]],
    /// The solver's bending stencil and multigrid ([`StateSizes::solver`]).
    pub solver: &'a mut [f32],
    /// Room for the BDF2 history (the previous step's positions and
    /// velocities, [`HISTORY_PER_NODE`] slots a node) elsewhere than after
    /// `vec3`'s slots, where `vec3` has none: memory a board sets apart
    /// for it (its core-coupled RAM). Empty: the history, if any, is in
    /// `vec3` ([`StateSizes::with_history`]).
    pub history: &'a mut [Vec3],
}

/// Counted problems, never panics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Warnings {
    /// Proximity pairs that did not fit the pair storage (summed over steps).
    pub dropped_pairs: u64,
    /// Steps whose CG stopped short of its tolerance (at the iteration
    /// limit or stagnated).
    pub cg_not_converged: u64,
    /// Steps with a CG solve that stopped because its residual stopped
    /// falling (counted in `cg_not_converged` too).
    pub cg_stagnated: u64,
    /// Steps rejected with a non-finite result (state kept).
    pub rejected_steps: u64,
    /// Substeps at the finest split that still failed the energy check
    /// (their shortest velocity change was taken).
    pub energy_check_failed: u64,
    /// Steps whose strain limiter left an edge over the limit after its
    /// last pass ([`crate::physics::limit::MAX_PASSES`]).
    pub strain_limit_unfinished: u64,
    /// Steps whose total energy rose beyond the work done on the cloth
    /// ([`crate::physics::EnergyAudit`]).
    pub energy_rose: u64,
    /// Steps that left the plain solve for a branch its inputs do not show:
    /// a Newton correction, a shortened velocity change or a split
    /// ([`crate::physics::step`]). A learned correction's target from such
    /// a step depends on that decision.
    pub branched_steps: u64,
}

/// Why a state could not be made or changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateError {
    Capacity {
        what: &'static str,
        capacity: usize,
        needed: usize,
    },
    /// A slice given has the wrong length.
    Length {
        expected: usize,
        got: usize,
    },
    /// A value is NaN or infinite at this node.
    NonFinite {
        node: usize,
    },
}

impl core::fmt::Display for StateError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            StateError::Capacity { what, capacity, needed } => {
                write!(f, "{what} storage holds {capacity}, needs {needed}")
            }
            StateError::Length { expected, got } => {
                write!(f, "expected {expected} values, got {got}")
            }
            StateError::NonFinite { node } => write!(f, "value at node {node} is not finite"),
        }
    }
}

impl core::error::Error for StateError {}

/// The changing part of a simulation.
pub struct State<'a> {
    pub(crate) x: &'a mut [Vec3],
    pub(crate) v: &'a mut [Vec3],
    pub(crate) ws: Workspace<'a>,
    /// The clock in ticks of [`State::tick`] seconds
    /// ([`TICKS_PER_STEP`] per step), so that time never
    /// drifts however long a run.
    pub(crate) ticks: u64,
    /// Seconds per tick.
    pub(crate) tick: f64,
    pub(crate) steps: u64,
    pub warnings: Warnings,
}

/// The BDF2 history's two slots (the previous step's positions and
/// velocities): after `vec3`'s other slots where it has room, else from
/// `history`, else none (the state steps with backward Euler).
fn history_slots<'a>(
    vec3: &mut &'a mut [Vec3],
    history: &mut &'a mut [Vec3],
    n: usize,
) -> Result<(&'a mut [Vec3], &'a mut [Vec3]), StateError> {
    let need = HISTORY_PER_NODE * n;
    let from = if vec3.len() >= need {
        vec3
    } else if history.len() >= need {
        history
    } else {
        return Ok((Default::default(), Default::default()));
    };
    let cap = from.len();
    Ok((take(from, n, "history", cap, need)?, take(from, n, "history", cap, need)?))
}

fn take<'a, T>(
    slice: &mut &'a mut [T],
    n: usize,
    what: &'static str,
    cap: usize,
    needed: usize,
) -> Result<&'a mut [T], StateError> {
    if slice.len() < n {
        return Err(StateError::Capacity { what, capacity: cap, needed });
    }
    let s = core::mem::take(slice);
    let (head, tail) = s.split_at_mut(n);
    *slice = tail;
    Ok(head)
}

/// The solver's bending stencil, multigrid and gather (grids only) out of
/// its pool (`needed` long at least for the first two); on other meshes,
/// the aggregation hierarchy in what it fills of the pool, then each
/// node's bending diagonal ([`crate::physics::bending::add_diagonal_cached`])
/// and each hinge's measure ([`crate::physics::bending::apply_cached`]) in
/// the rest, each where there is room.
type SolverParts<'a> = (Option<BendingStencil<'a>>, Hierarchy<'a>, Option<Gather<'a>>, Scratch<'a>);

fn solver_parts<'a>(model: &Model, solver: &'a mut [f32], needed: usize) -> Result<SolverParts<'a>, StateError> {
    let grid = model.mesh.counts().grid;
    let short = StateError::Capacity { what: "solver", capacity: solver.len(), needed };
    let (stencil_pool, mg_pool) = solver.split_at_mut(stencil::floats(grid).min(solver.len()));
    let stencil = BendingStencil::new(&model.mesh, model.material.plate(), stencil_pool);
    if grid.is_some() && stencil.is_none() {
        return Err(short);
    }
    if stencil.is_none() {
        // What the hierarchy fills (any pool this long builds the same).
        let rigid = model.params.rigid_coarse(&model.mesh);
        let used = Aggregates::new(&model.mesh, rigid, &mut *mg_pool).map_or(0, |a| a.floats_used());
        let (mg_pool, rest) = mg_pool.split_at_mut(used.min(mg_pool.len()));
        let mg = Aggregates::new(&model.mesh, rigid, mg_pool).map_or(Hierarchy::None, Hierarchy::Graph);
        let room = bending::diagonal_floats(model.mesh.node_count());
        let (diagonal, rest) = if rest.len() >= room { rest.split_at_mut(room) } else { (&mut [][..], rest) };
        let diagonal = Cell::from_mut(diagonal).as_slice_of_cells();
        bending::forget_diagonal(diagonal);
        let whole = rest.len() / 3 * 3;
        let curvature: &mut [Vec3] = bytemuck::cast_slice_mut(&mut rest[..whole]);
        let curvature = Cell::from_mut(curvature).as_slice_of_cells();
        return Ok((None, mg, None, Scratch { curvature, diagonal }));
    }
    let hierarchy = Layout::of(grid).floats() + aggregate::floats(model.mesh.counts());
    let (mg_pool, gather_pool) = mg_pool.split_at_mut(hierarchy.min(mg_pool.len()));
    let mg = match &stencil {
        Some(s) => Hierarchy::Grid(Multigrid::new(&model.mesh, s, mg_pool).ok_or(short)?),
        None => Hierarchy::None,
    };
    let gather = Gather::new(&model.mesh, gather_pool, stencil.as_ref());
    Ok((stencil, mg, gather, Scratch::NONE))
}

/// FNV-1a (32 bit) over the bits of every position, then every velocity:
/// the one number the board, the desktop and the page compare a run by.
pub fn checksum(positions: &[Vec3], velocities: &[Vec3]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for p in positions.iter().chain(velocities) {
        for f in [p.x, p.y, p.z] {
            for b in f.to_bits().to_le_bytes() {
                h ^= b as u32;
                h = h.wrapping_mul(0x0100_0193);
            }
        }
    }
    h
}

impl<'a> State<'a> {
    /// [`checksum`] of this state's positions and velocities.
    pub fn checksum(&self) -> u32 {
        checksum(self.positions(), self.velocities())
    }

    /// A state at rest in the mesh's rest positions.
    pub fn new(model: &Model, storage: StateStorage<'a>) -> Result<State<'a>, StateError> {
        let counts = model.mesh.counts();
        let n = counts.nodes;
        let need = StateSizes::new(counts, 0);
        let StateStorage { mut vec3, mut mat3, flags, cells, order, pairs, solver, mut history } = storage;
        let (vcap, mcap) = (vec3.len(), mat3.len());
        let v3 = |v: &mut &'a mut [Vec3]| take(v, n, "vec3", vcap, need.vec3);
        let (x, v) = (v3(&mut vec3)?, v3(&mut vec3)?);
        let (force, f_ext) = (v3(&mut vec3)?, v3(&mut vec3)?);
        let r = v3(&mut vec3)?;
        let p = v3(&mut vec3)?;
        let q = v3(&mut vec3)?;
        let dv = v3(&mut vec3)?;
        let x_new = v3(&mut vec3)?;
        let (normal, memo, v_start) = (v3(&mut vec3)?, v3(&mut vec3)?, v3(&mut vec3)?);
        let v_start_prev = v3(&mut vec3)?;
        let (x_prev, v_prev) = history_slots(&mut vec3, &mut history, n)?;
        let warm = if vec3.len() >= n { v3(&mut vec3)? } else { Default::default() };
        let blocks = take(&mut mat3, mat3_blocks(counts), "mat3", mcap, need.mat3)?;
        for (what, capacity, needed) in
            [("flags", flags.len(), n), ("order", order.len(), n), ("cells", cells.len(), 2)]
        {
            if capacity < needed {
                return Err(StateError::Capacity { what, capacity, needed });
            }
        }
        let (stencil, mg, gather, bend) = solver_parts(model, solver, need.solver)?;
        model.scene.mark_pinned(&mut flags[..n]);
        x.copy_from_slice(model.mesh.rest());
        v.fill(Vec3::ZERO);
        // A pinned node moves with its pin from the start.
        for pin in model.scene.pins {
            if let Some(vi) = v.get_mut(pin.node as usize) {
                *vi = pin.start_velocity();
            }
        }
        v_start.copy_from_slice(v);
        v_start_prev.copy_from_slice(v);
        Ok(State {
            x,
            v,
            ws: Workspace {
                force,
                f_ext,
                r,
                p,
                q,
                dv,
                x_new,
                normal,
                memo: ElasticMemo::new(memo),
                v_start,
                v_start_prev,
                warm,
                warm_h: 0.0,
                blocks,
                flags: &mut flags[..n],
                cells,
                order: &mut order[..n],
                pairs,
                n_pairs: 0,
                x_prev,
                v_prev,
                history: false,
                stencil,
                mg,
                gather,
                bend,
            },
            ticks: 0,
            tick: model.params.dt as f64 / TICKS_PER_STEP as f64,
            steps: 0,
            warnings: Warnings::default(),
        })
    }

    pub fn positions(&self) -> &[Vec3] {
        self.x
    }
    pub fn velocities(&self) -> &[Vec3] {
        self.v
    }
    /// The velocities the last step started from, plus the velocity
    /// change the wind gave over the step (the current velocities before
    /// the first step and after [`State::set_velocities`]): with
    /// [`State::velocities`] after a step, the step's velocity change from
    /// every force but the wind, which the correction network reads.
    pub fn start_velocities(&self) -> &[Vec3] {
        self.ws.v_start
    }
    /// The velocities the step before the last started from, as
    /// [`State::start_velocities`]: with them, the last frame's velocity
    /// change after its correction, which the correction network reads.
    /// The same as [`State::start_velocities`] before the first step, and
    /// on the first step after [`State::set_velocities`] unless
    /// [`crate::physics::set_velocities_before`] gave the ones before.
    pub fn previous_start_velocities(&self) -> &[Vec3] {
        self.ws.v_start_prev
    }
    /// Simulated time (s), from the integer clock.
    pub fn time(&self) -> f64 {
        self.ticks as f64 * self.tick
    }
    /// The clock: ticks of [`TICKS_PER_STEP`] per step.
    pub fn ticks(&self) -> u64 {
        self.ticks
    }
    /// Steps taken.
    pub fn steps(&self) -> u64 {
        self.steps
    }
    /// The proximity pairs found by the last step (self-contact or
    /// network edges), each `a < b`, sorted.
    pub fn pairs(&self) -> &[[NodeId; 2]] {
        &self.ws.pairs[..self.ws.n_pairs]
    }
    pub fn node_count(&self) -> usize {
        self.x.len()
    }

    /// Pinned-node flags of the last step (non-zero: pinned).
    pub fn pinned(&self) -> &[u8] {
        self.ws.flags
    }

    /// Finds the node pairs closer than `radius` with no static edge in the
    /// current positions (the network's dynamic edges) into the state's
    /// pair storage, at most `max_pairs` of them (those beyond are dropped
    /// and counted, as those beyond the storage); see [`State::pairs`].
    pub fn find_pairs(&mut self, mesh: &Mesh, radius: f32, max_pairs: usize) -> Result<Proximity, ProximityError> {
        self.ws.n_pairs = 0;
        let cap = max_pairs.min(self.ws.pairs.len());
        let out = &mut self.ws.pairs[..cap];
        let found = contact::proximity(mesh, self.x, radius, self.ws.cells, self.ws.order, out)?;
        self.ws.n_pairs = found.pairs;
        self.warnings.dropped_pairs += found.dropped as u64;
        Ok(found)
    }

    /// Adds a correction to positions and velocities of the free nodes
    /// (pinned nodes stay on their targets). A correction with NaN/inf or
    /// the wrong length is rejected and the state left as it was.
    ///
    /// A BDF2 step's history is kept: it is the state the step started
    /// from, itself the last correction's result, so the next step is
    /// BDF2 on the corrected trajectory (and a zero correction leaves the
    /// plain step as it is).
    pub fn apply_correction(&mut self, dx: &[Vec3], dv: &[Vec3]) -> Result<(), StateError> {
        check(dx, self.x.len())?;
        check(dv, self.v.len())?;
        add_correction(self.x, self.v, self.ws.flags, dx, dv)
    }

    /// Lends the network what it needs between two steps: the state's
    /// positions, velocities, pin flags and dynamic pairs to read, and, for
    /// its work, memory the solver only uses within a step: the matrix
    /// blocks as int32 sums and the residual and search vectors for the
    /// corrections, which [`State::apply_lent_correction`] then adds.
    pub fn lend_to_network(&mut self) -> NetworkLoan<'_> {
        self.ws.lend(self.x, self.v)
    }

    /// Adds the corrections a network left in its loan
    /// ([`State::lend_to_network`]) to the free nodes; a non-finite one
    /// leaves the state as it was. The history is kept, as
    /// [`State::apply_correction`] keeps it.
    pub fn apply_lent_correction(&mut self) -> Result<(), StateError> {
        let (dx, dv) = self.ws.lent_corrections();
        add_correction(self.x, self.v, self.ws.flags, dx, dv)
    }

    /// Replaces all positions; rejects NaN/inf and wrong lengths, leaving
    /// the state as it was.
    pub fn set_positions(&mut self, x: &[Vec3]) -> Result<(), StateError> {
        check(x, self.x.len())?;
        self.x.copy_from_slice(x);
        self.ws.history = false;
        self.ws.warm_h = 0.0;
        Ok(())
    }
    /// Replaces all velocities; rejects NaN/inf and wrong lengths.
    pub fn set_velocities(&mut self, v: &[Vec3]) -> Result<(), StateError> {
        check(v, self.v.len())?;
        self.v.copy_from_slice(v);
        self.ws.v_start.copy_from_slice(v);
        self.ws.history = false;
        self.ws.warm_h = 0.0;
        Ok(())
    }
    /// Replaces the velocities the last step started from
    /// ([`State::start_velocities`]), to restore a recorded state between
    /// its step and its correction (a state restarted from a recorded
    /// frame gets the frame before's by
    /// [`crate::physics::set_velocities_before`]). Rejects NaN/inf and
    /// wrong lengths.
    pub fn set_start_velocities(&mut self, v: &[Vec3]) -> Result<(), StateError> {
        check(v, self.v.len())?;
        self.ws.v_start.copy_from_slice(v);
        Ok(())
    }
    /// Replaces the velocities the step before the last started from
    /// ([`State::previous_start_velocities`]), to restore a recorded state
    /// between its step and its correction; rejects NaN/inf and wrong
    /// lengths.
    pub fn set_previous_start_velocities(&mut self, v: &[Vec3]) -> Result<(), StateError> {
        check(v, self.v.len())?;
        self.ws.v_start_prev.copy_from_slice(v);
        Ok(())
    }
    /// Sets the clock to the tick nearest `t` seconds (used when restarting
    /// from a recorded state); a time that is negative, not finite or beyond
    /// 2⁵³ ticks is an error and leaves the clock as it was.
    pub fn set_time(&mut self, t: f64) -> Result<(), StateError> {
        let ticks = libm::round(t / self.tick);
        if !(ticks >= 0.0 && ticks < (1u64 << 53) as f64) {
            return Err(StateError::NonFinite { node: 0 });
        }
        self.ticks = ticks as u64;
        Ok(())
    }
    /// Sets the clock to the start of step `steps` (time `steps · dt`).
    pub fn set_steps(&mut self, steps: u64) -> Result<(), StateError> {
        self.ticks = steps.checked_mul(TICKS_PER_STEP).ok_or(StateError::NonFinite { node: 0 })?;
        Ok(())
    }
}

/// Adds `dx`, `dv` to the positions and velocities of the free nodes
/// (`pinned[i] == 0`), or changes nothing and names the first node whose
/// sum would not be finite.
fn add_correction(x: &mut [Vec3], v: &mut [Vec3], pinned: &[u8], dx: &[Vec3], dv: &[Vec3]) -> Result<(), StateError> {
    let overflow = x.iter().zip(dx).chain(v.iter().zip(dv)).position(|(a, b)| !(*a + *b).is_finite());
    if let Some(k) = overflow {
        return Err(StateError::NonFinite { node: k % x.len().max(1) });
    }
    for (((x, v), (ddx, ddv)), &p) in x.iter_mut().zip(v.iter_mut()).zip(dx.iter().zip(dv)).zip(pinned) {
        if p == 0 {
            *x += *ddx;
            *v += *ddv;
        }
    }
    Ok(())
}

fn check(values: &[Vec3], n: usize) -> Result<(), StateError> {
    if values.len() != n {
        return Err(StateError::Length { expected: n, got: values.len() });
    }
    if let Some(node) = values.iter().position(|p| !p.is_finite()) {
        return Err(StateError::NonFinite { node });
    }
    Ok(())
}
