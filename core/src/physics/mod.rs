//! The FEM cloth step: StVK membrane + Kirchhoff plate bending forces and their
//! Jacobians, one linearised backward-Euler solve (Baraff–Witkin)
//!
//! `(M − h ∂f/∂v − h² ∂f/∂x) Δv = h (f + h ∂f/∂x v)`
//!
//! with Rayleigh damping `f_d = −αMv − βKv` (so `∂f/∂v = −αM − βK`) and the
//! positive semi-definite stiffness `K ≈ −∂f/∂x`, solved by filtered PCG
//! with pinned nodes as velocity constraints. An energy check guards the
//! linearisation: a step that would add energy (a stiff cloth rotating or
//! deforming fast within one step) is split into halves (see [`step`]).
//! Colliders and (optionally)
//! node–node self-contact then act on the end-of-step state. A step either
//! commits a finite state or leaves the state as it was.

pub mod adjoint;
pub mod bending;
pub mod blocks;
pub mod energy;
pub mod gather;
pub mod limit;
pub mod membrane;
pub mod multigrid;
pub mod solver;
pub mod stencil;

use crate::contact;
use crate::flags;
use crate::math::{Mat3, Vec3};
use crate::model::Model;
use crate::probe::{NoProbe, Probe, Stage};
use crate::state::{blocks_of, split_blocks, State, StateError, Workspace};
pub use adjoint::{step_vjp, Linearisation, VjpError, VjpReport};
use energy::ElasticMemo;
pub use energy::{elastic, Elastic};
use stencil::Bending;

/// What one step did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepReport {
    /// CG iterations, summed over substeps.
    pub cg_iterations: u32,
    /// Largest relative CG residual ‖r‖/‖b‖ at exit.
    pub residual: f32,
    pub converged: bool,
    /// A solve stopped early because its residual stopped falling.
    pub stagnated: bool,
    /// Smallest fraction of a solved velocity change taken (1 unless the
    /// energy check had to shorten a step at the finest split).
    pub step_scale: f32,
    /// Solves the step took: 1, or more when it was split to pass the
    /// energy check.
    pub substeps: u32,
    /// Node contacts with colliders.
    pub contacts: usize,
    /// Proximity pairs found (self-contact) and kept.
    pub pairs: usize,
    /// Proximity pairs that did not fit the pair storage.
    pub dropped_pairs: usize,
    /// Pairs that received a self-contact impulse.
    pub self_contacts: usize,
    /// The strain limiter left an edge over the limit after its last pass.
    pub strain_unfinished: bool,
    /// The step's total energy rose beyond the work of the wind
    /// ([`EnergyAudit`]).
    pub energy_rose: bool,
}

/// Why a step was refused. The state is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepError {
    /// The state was made for a mesh of another size.
    MeshMismatch,
    /// The step produced NaN or infinity (too large a time step or forces).
    NonFinite,
}

impl core::fmt::Display for StepError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            StepError::MeshMismatch => write!(f, "state and model meshes differ in size"),
            StepError::NonFinite => write!(f, "step produced a non-finite state; state kept at the last good step"),
        }
    }
}

impl core::error::Error for StepError {}

/// Energy split by source (J).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Energy {
    pub kinetic: f32,
    pub membrane: f32,
    pub bending: f32,
    /// Gravitational potential `−Σ m g·x`.
    pub gravity: f32,
}

impl Energy {
    pub fn total(&self) -> f32 {
        self.kinetic + self.membrane + self.bending + self.gravity
    }
}

/// Energy of positions `x` and velocities `v`.
pub fn energy(model: &Model, x: &[Vec3], v: &[Vec3]) -> Energy {
    energy_with(model, x, v, |x| elastic(model, x, &mut [])).0
}

/// [`energy`] with the elastic part from `elastic`, and the elastic
/// energy's rounding bound ([`Elastic::noise`]).
fn energy_with(model: &Model, x: &[Vec3], v: &[Vec3], elastic: impl FnOnce(&[Vec3]) -> Elastic) -> (Energy, f32) {
    let mut e = Energy::default();
    for (i, (xi, vi)) in x.iter().zip(v).enumerate() {
        let m = model.mass(i);
        e.kinetic += 0.5 * m * vi.norm2();
        e.gravity -= m * model.scene.gravity.dot(*xi);
    }
    let el = elastic(x);
    (e.membrane, e.bending) = (el.membrane, el.bending);
    (e, el.noise)
}

/// The energy of the state's placement, its elastic part through the
/// step's memo.
fn state_energy(model: &Model, state: &mut State) -> (Energy, f32) {
    let ws = &mut state.ws;
    let cache = hinge_cache(ws.blocks);
    let stencil = ws.stencil.as_ref();
    energy_with(model, state.x, state.v, |x| ws.memo.elastic(model, x, stencil, cache))
}

/// The strain `l/l₀ − 1` of every static edge (positive: stretched).
pub fn edge_strains<'s>(model: &'s Model, x: &'s [Vec3]) -> impl Iterator<Item = f32> + 's {
    let rest = model.mesh.rest();
    model.mesh.edges().iter().map(move |e| {
        let (a, b) = (e.a as usize, e.b as usize);
        (x[b] - x[a]).norm() / (rest[b] - rest[a]).norm() - 1.0
    })
}

/// Largest relative change of a static edge's length, `max |l/l₀ − 1|`.
pub fn max_strain(model: &Model, x: &[Vec3]) -> f32 {
    edge_strains(model, x).map(f32::abs).fold(0.0, f32::max)
}

/// Adds the elastic forces (membrane and bending) to `force` and the
/// membrane's PSD stiffness to the diagonal and edge blocks (the bending
/// Hessian is constant: [`solver::matvec`] applies it as `bending` holds
/// it).
pub fn assemble(model: &Model, bending: Bending, x: &[Vec3], force: &mut [Vec3], diag: &mut [Mat3], off: &mut [Mat3]) {
    let mem = model.material.membrane();
    let mesh = &model.mesh;
    diag.fill(Mat3::ZERO);
    off.fill(Mat3::ZERO);
    for t in mesh.triangles() {
        let el = mem.element(t, t.nodes.map(|i| x[i as usize]), true);
        for i in 0..3 {
            let ni = t.nodes[i] as usize;
            force[ni] += el.force[i];
            diag[ni] += el.stiffness[membrane::block(i, i)];
        }
        for (k, (i, j)) in [(0usize, 1usize), (1, 2), (0, 2)].into_iter().enumerate() {
            // Edge slots of the triangle are (0,1), (1,2), (2,0).
            let e = t.edges[k] as usize;
            let kij = el.stiffness[membrane::block(i, j)];
            off[e] += if t.nodes[i] < t.nodes[j] { kij } else { kij.transpose() };
        }
    }
    // Bending forces: the constant Hessian times the positions.
    bending.apply(mesh, -1.0, x, force);
}

/// Aerodynamic drag and lift per triangle, a third to each node.
fn wind(model: &Model, t: f64, x: &[Vec3], v: &[Vec3], force: &mut [Vec3]) {
    let Some(w) = model.scene.wind else { return };
    let air = w.at(t);
    for tri in model.mesh.triangles() {
        let [a, b, c] = tri.nodes.map(|i| i as usize);
        let n2 = (x[b] - x[a]).cross(x[c] - x[a]);
        let area = 0.5 * n2.norm();
        let n = n2.normalized();
        let rel = air - (v[a] + v[b] + v[c]) * (1.0 / 3.0);
        let vn = rel.dot(n);
        let q = 0.5 * w.air_density * area * vn.abs();
        let f = (n * (w.drag * vn) + (rel - n * vn) * w.lift) * (q / 3.0);
        force[a] += f;
        force[b] += f;
        force[c] += f;
    }
}

/// Adds to `v_start` the velocity change the wind at `(t, x, v)` gives each
/// node over `h` (`h f_wind / m`; nothing without wind), with `scratch`
/// for the forces. The step's velocity change less this is what the other
/// forces did, which the correction network reads
/// ([`crate::state::State::start_velocities`]): no training scene has
/// wind, so a network that saw the wind's push would take it for contact
/// or elasticity.
fn wind_push(model: &Model, t: f64, x: &[Vec3], v: &[Vec3], h: f32, scratch: &mut [Vec3], v_start: &mut [Vec3]) {
    if model.scene.wind.is_none() {
        return;
    }
    scratch.fill(Vec3::ZERO);
    wind(model, t, x, v, scratch);
    for (i, (vs, f)) in v_start.iter_mut().zip(scratch.iter()).enumerate() {
        let m = model.mass(i);
        if m > 0.0 {
            *vs += *f * (h / m);
        }
    }
}

/// Gives a state restarted from a recorded frame (its positions and
/// velocities set) the velocities of the frame before, `v_before`, as the
/// step from that frame would have left them
/// ([`crate::state::State::start_velocities`], the next step's
/// [`crate::state::State::previous_start_velocities`]): with the wind's
/// push over that step, at the frame before's velocities and time and the
/// restart's positions (the frame before's are not known; a frame moves
/// the triangles the wind meets little), so that the network's history
/// reads at a restart what it reads in a run. A mesh that is not the
/// state's, or velocities of the wrong length or not finite, are an error
/// and leave the state as it was.
pub fn set_velocities_before(model: &Model, state: &mut State, v_before: &[Vec3]) -> Result<(), StateError> {
    if state.x.len() != model.mesh.node_count() {
        return Err(StateError::Length { expected: model.mesh.node_count(), got: state.x.len() });
    }
    state.set_start_velocities(v_before)?;
    let h = model.params.dt;
    let t = (state.time() - f64::from(h)).max(0.0);
    wind_push(model, t, state.x, v_before, h, state.ws.f_ext, state.ws.v_start);
    Ok(())
}

/// The energy check of a (sub)step. For end-of-step velocities `u`,
///
/// `Ψ(u) = ½‖u‖²_M + E(x + h u) − h f_extᵀu`   (free directions in the sums)
///
/// is the cloth's mechanical energy after the step less the work of the
/// external forces. A step passes when `Ψ(u)` does not exceed
/// `½‖v‖²_M + E(x̃)`, the energy before it with the constrained motion
/// already done (`x̃`: pinned nodes on their new targets, held nodes moved
/// along their contact normals): it adds no energy beyond what external
/// forces, moving pins and contact constraints put in. A held node's normal
/// direction is constrained like a pin's, so only its tangential velocity
/// counts. Backward Euler passes with its full step; the linearised step can
/// overshoot when a stiff cloth rotates or deforms fast within one step.
///
/// Both energies come with a bound on their `f32` rounding noise
/// ([`elastic`]), which the tolerance includes: a cloth at rest
/// under small strains must not fail the check on rounding alone.
struct EnergyCheck<'s, 'm> {
    model: &'s Model<'m>,
    h: f32,
    x: &'s [Vec3],
    /// Where the step's motion starts: `x` (backward Euler) or
    /// `x + (x − x_prev)/3` (BDF2); the end positions are `base + h u`.
    base: &'s [Vec3],
    f_ext: &'s [Vec3],
    flags: &'s [u8],
    normal: &'s [Vec3],
    /// The grid's bending stencil, which measures the bending energy.
    stencil: Option<&'s stencil::BendingStencil<'s>>,
}

impl EnergyCheck<'_, '_> {
    /// The part of `w` the check counts at node `i`: none of a pinned
    /// node's, the tangential part of a held node's, all of a free node's.
    #[inline]
    fn free_part(&self, i: usize, w: Vec3) -> Vec3 {
        let f = self.flags[i];
        if flags::pinned(f) {
            Vec3::ZERO
        } else if flags::in_contact(f) {
            w - self.normal[i] * self.normal[i].dot(w)
        } else {
            w
        }
    }

    /// The displacement of node `i` over the step for end velocity `u`.
    #[inline]
    fn displacement(&self, i: usize, u: Vec3) -> Vec3 {
        (self.base[i] - self.x[i]) + u * self.h
    }

    /// `Ψ(u)` and its rounding bound, with `xt` as scratch for the end
    /// positions `base + h u`.
    fn after(&self, u: &[Vec3], xt: &mut [Vec3], memo: &mut ElasticMemo, cache: &mut [[f32; 4]]) -> (f32, f32) {
        let mut psi = 0.0;
        for (i, (ui, fi)) in u.iter().zip(self.f_ext).enumerate() {
            xt[i] = self.base[i] + *ui * self.h;
            let w = self.free_part(i, *ui);
            psi += 0.5 * self.model.mass(i) * w.norm2() - fi.dot(self.free_part(i, self.displacement(i, *ui)));
        }
        let el = memo.elastic(self.model, xt, self.stencil, cache);
        (psi + el.total(), el.noise)
    }

    /// `½‖v‖²_M + E(x̃)` and its rounding bound, for the trial velocities
    /// `u` (which give the constrained motion).
    fn before(
        &self,
        v: &[Vec3],
        u: &[Vec3],
        xt: &mut [Vec3],
        memo: &mut ElasticMemo,
        cache: &mut [[f32; 4]],
    ) -> (f32, f32) {
        let mut kin = 0.0;
        for (i, (vi, (xi, ui))) in v.iter().zip(self.x.iter().zip(u)).enumerate() {
            let w = self.free_part(i, *vi);
            kin += 0.5 * self.model.mass(i) * w.norm2();
            let d = self.displacement(i, *ui);
            xt[i] = *xi + (d - self.free_part(i, d));
        }
        let el = memo.elastic(self.model, xt, self.stencil, cache);
        (kin + el.total(), el.noise)
    }
}

/// The solver's blocks as the energy's hinge scratch: idle where energies
/// are measured (before the system is assembled and after it is solved).
fn hinge_cache(blocks: &mut [Mat3]) -> &mut [[f32; 4]] {
    bytemuck::cast_slice_mut::<Mat3, f32>(blocks).as_chunks_mut::<4>().0
}

/// Gap (m) under which a swept node or edge counts as touching a collider.
const SWEEP_TOLERANCE: f32 = 1e-5;

/// The energy check's tolerance counts this many times the solve's error
/// energy estimate (`½ rᵀBr` with the preconditioner `B ≈ A⁻¹`).
const ERROR_ENERGY_FACTOR: f32 = 2.0;

/// The energy check's tolerance counts this many rounding bounds.
const NOISE_FACTOR: f32 = 4.0;

/// Solves a step may add to release nodes its contact constraints would
/// otherwise hold against the collider.
const MAX_RELEASES: u32 = 1;

/// The first solve of a step with contacts stops at this relative
/// residual (or at the solve's tolerance, if looser), where the release
/// check runs: the release decision then rests on the same quality of
/// solve at every tolerance (the device's 1e-4 had it at 1000 times its
/// tolerance; at the desktop's 1e-5 that multiple took 31.4 CG iterations
/// a step on the 61×61 fold against 28.9 at this residual).
const RELEASE_CHECK: f32 = 0.1;

/// Nodes within this gap of a collider (after their approach over the
/// step) are held by a contact constraint: the collider's thickness plus
/// the distance gravity alone moves a node in one step, so a resting node
/// stays held.
fn contact_margin(model: &Model, h: f32) -> f32 {
    let g = model.scene.gravity.norm();
    model.scene.colliders.iter().map(|c| c.thickness).fold(0.0, f32::max) + g * h * h
}

/// `u = v + z + s·y`: the constrained part `z` of `dv` (a pinned node's
/// whole change, a held node's normal part) in full, the solved part `y`
/// scaled by `s`.
fn trial(s: f32, v: &[Vec3], dv: &[Vec3], flags: &[u8], normal: &[Vec3], u: &mut [Vec3]) {
    for (i, ((ui, vi), di)) in u.iter_mut().zip(v).zip(dv).enumerate() {
        let f = flags[i];
        *ui = *vi
            + if flags::pinned(f) {
                *di
            } else if flags::in_contact(f) {
                let z = normal[i] * normal[i].dot(*di);
                z + (*di - z) * s
            } else {
                *di * s
            };
    }
}

/// A step that fails the energy check is split in halves, down to
/// `dt / 2^MAX_SPLIT`.
pub const MAX_SPLIT: u32 = 4;
pub use crate::state::TICKS_PER_STEP;
// A split step's substeps end on ticks.
const _: () = assert!(TICKS_PER_STEP == 1 << MAX_SPLIT);
/// A solve that fails the energy check is first shortened: its velocity
/// change is halved up to this many times (a backtracking line search on
/// the step's energy) before the step is split.
const LINE_SEARCH: u32 = 2;
/// At the finest split, the solved velocity change is halved up to this
/// many times to pass the energy check.
const MAX_HALVINGS: u32 = 8;

/// Outcome of one linearised solve.
struct Substep {
    solve: solver::Solve,
    /// Passed the energy check (or the check is off).
    passed: bool,
    /// The strain limiter left an edge over the limit.
    strain_unfinished: bool,
    scale: f32,
    finite: bool,
}

/// The constants of one linearised solve.
#[derive(Clone, Copy)]
struct Coefficients {
    /// The (sub)step's length and its start and end times.
    h_step: f32,
    t0: f64,
    t1: f64,
    /// BDF2 solves a backward-Euler-like system over `h = 2h_step/3` from
    /// the base `x + (x − x_prev)/3` with the velocity predictor
    /// `(4v − v_prev)/3`; backward Euler over `h = h_step`.
    bdf2: bool,
    h: f32,
    /// `A = m_scale·M + c·K`: `M(1 + hα) + (hβ + h²) K`.
    m_scale: f32,
    c: f32,
}

impl Coefficients {
    fn new(model: &Model, t0: f64, h_step: f32, bdf2: bool) -> Coefficients {
        let h = if bdf2 { h_step * (2.0 / 3.0) } else { h_step };
        let mat = &model.material;
        Coefficients {
            h_step,
            t0,
            t1: t0 + h_step as f64,
            bdf2,
            h,
            m_scale: 1.0 + h * mat.damping_mass,
            c: h * mat.damping_stiffness + h * h,
        }
    }
}

/// The bending Hessian as this state applies it.
fn bending_of<'w>(model: &Model, stencil: &'w Option<stencil::BendingStencil<'_>>) -> Bending<'w> {
    match stencil {
        Some(s) => Bending::Stencil(s),
        None => Bending::MatrixFree(model.material.plate()),
    }
}

/// One linearised solve over `h_step` from the committed state, backward
/// Euler or (with `bdf2`) BDF2, in the stages [`Stage`] names: the system
/// ([`assemble_system`]), its constraints ([`constrain`]), the solve with
/// the contact release ([`solve`]), the energy check ([`check_energy`]) and
/// the candidate ([`make_candidate`]), which is left in `ws.x_new` /
/// `ws.dv`.
fn substep(
    model: &Model,
    state: &mut State,
    h_step: f32,
    last_resort: bool,
    bdf2: bool,
    probe: &mut impl Probe,
) -> Substep {
    let k = Coefficients::new(model, state.time(), h_step, bdf2);
    let (x, v, ws) = (&*state.x, &*state.v, &mut state.ws);
    probe.enter(Stage::Assembly);
    assemble_system(model, x, v, ws, &k);
    probe.enter(Stage::Constraints);
    let held = constrain(model, v, ws, &k);
    let warm = model.params.warm_start && held > 0 && ws.warm_h == k.h && warm_start(ws);
    let (solve, constraint_work) = self::solve(model, v, ws, &k, held, warm, probe);
    if model.params.warm_start {
        keep_warm(ws, k.h, solve.residual.is_finite());
    }
    probe.enter(Stage::Candidate);
    // The base positions, into `r` (free after the solve).
    base_positions(bdf2, x, ws.x_prev, ws.r);
    let (passed, scale) = if model.params.energy_check && solve.residual.is_finite() {
        let allowed = if last_resort { MAX_HALVINGS } else { LINE_SEARCH };
        check_energy(model, x, v, ws, &k, solve.error_energy, constraint_work, allowed)
    } else {
        (true, 1.0)
    };
    let strain_unfinished = make_candidate(model, v, ws, &k, scale);
    let finite =
        solve.residual.is_finite() && ws.x_new.iter().all(|p| p.is_finite()) && ws.dv.iter().all(|p| p.is_finite());
    Substep { solve, passed, strain_unfinished, scale, finite }
}

/// External forces (gravity, wind), elastic forces and the membrane's
/// stiffness blocks, the right-hand side into `ws.r` and the base
/// positions into `ws.x_new`.
fn assemble_system(model: &Model, x: &[Vec3], v: &[Vec3], ws: &mut Workspace, k: &Coefficients) {
    let mesh = &model.mesh;
    let (alpha, beta) = (model.material.damping_mass, model.material.damping_stiffness);
    let h = k.h;
    let bend = bending_of(model, &ws.stencil);
    let (diag, _, off) = split_blocks(ws.blocks, mesh.node_count(), mesh.edges().len());
    for (i, f) in ws.f_ext.iter_mut().enumerate() {
        *f = model.scene.gravity * model.mass(i);
    }
    // BDF2 takes the forces at the end of the step: the wind is taken at
    // t + h on the extrapolated state (x + h v, 2v − v_prev), which keeps
    // the step second order.
    let (t_wind, x_wind, v_wind) = if k.bdf2 && model.scene.wind.is_some() {
        for (i, (xp, vp)) in ws.x_new.iter_mut().zip(ws.dv.iter_mut()).enumerate() {
            *xp = x[i] + v[i] * k.h_step;
            *vp = v[i] * 2.0 - ws.v_prev[i];
        }
        (k.t1, &*ws.x_new, &*ws.dv)
    } else {
        (k.t0, x, v)
    };
    wind(model, t_wind, x_wind, v_wind, ws.f_ext);
    ws.force.copy_from_slice(ws.f_ext);
    assemble(model, bend, x, ws.force, diag, off);
    if let Some(g) = &mut ws.gather {
        g.build(mesh, diag, off);
    }

    // rhs b = h (f − αMv − (β + h) K v); with BDF2 (h = 2h_step/3) also
    // − h K d + M (v̂ − v), d = (x − x_prev)/3, v̂ = (4v − v_prev)/3.
    solver::matvec(mesh, diag, off, bend, v, ws.q);
    for (i, (r, (f, kv))) in ws.r.iter_mut().zip(ws.force.iter().zip(ws.q.iter())).enumerate() {
        *r = (*f - v[i] * (alpha * model.mass(i)) - *kv * (beta + h)) * h;
    }
    // `x_new` holds the base positions x + d until the solve starts (the
    // solve takes it as scratch; [`base_positions`] makes them again).
    if k.bdf2 {
        for (dn, (xi, xp)) in ws.x_new.iter_mut().zip(x.iter().zip(ws.x_prev.iter())) {
            *dn = (*xi - *xp) * (1.0 / 3.0);
        }
        solver::matvec(mesh, diag, off, bend, ws.x_new, ws.p);
        for (i, r) in ws.r.iter_mut().enumerate() {
            let v_hat = v[i] * (4.0 / 3.0) - ws.v_prev[i] * (1.0 / 3.0);
            *r += (v_hat - v[i]) * model.mass(i) - ws.p[i] * h;
            ws.x_new[i] += x[i];
        }
    } else {
        ws.x_new.copy_from_slice(x);
    }
}

/// The block-Jacobi preconditioner (the multigrid's fine smoother): the
/// inverse 3×3 diagonal blocks of A; a held node's block inverts its
/// diagonal block on the tangent plane exactly (and keeps its normal
/// stiffness apart). Made for the flags as they are: after the
/// constraints, and again after a release.
fn preconditioner(model: &Model, ws: &mut Workspace, k: &Coefficients) {
    let mesh = &model.mesh;
    let bend = bending_of(model, &ws.stencil);
    let (diag, precond, _) = split_blocks(ws.blocks, mesh.node_count(), mesh.edges().len());
    for (i, (d, pc)) in diag.iter().zip(precond.iter_mut()).enumerate() {
        *pc = *d * k.c + Mat3::scale(model.mass(i) * k.m_scale);
    }
    bend.add_diagonal(mesh, k.c, precond);
    for (i, pc) in precond.iter_mut().enumerate() {
        let d = pc.diagonal();
        *pc = pc.inverse().unwrap_or(Mat3 {
            c: [Vec3::new(1.0 / d.x, 0.0, 0.0), Vec3::new(0.0, 1.0 / d.y, 0.0), Vec3::new(0.0, 0.0, 1.0 / d.z)],
        });
        if flags::on_plane(ws.flags[i]) {
            *pc = solver::plane_inverse(*pc, ws.normal[i]);
        }
    }
}

/// The solve's constraints, in `ws.dv` (its constrained part) and the
/// node flags: pinned nodes move onto their targets at `t1`; nodes at or
/// heading into a collider get the normal part of `Δv` that ends the step
/// on its surface (the solve fills in the rest). Returns the nodes held.
fn constrain(model: &Model, v: &[Vec3], ws: &mut Workspace, k: &Coefficients) -> usize {
    let mesh = &model.mesh;
    ws.dv.fill(Vec3::ZERO);
    for pin in model.scene.pins {
        let i = pin.node as usize;
        ws.dv[i] = (pin.target(k.t1) - ws.x_new[i]) * (1.0 / k.h) - v[i];
    }
    let margin = contact_margin(model, k.h);
    let held = contact::constrain(
        mesh,
        model.scene.colliders,
        k.t0 as f32,
        k.h,
        margin,
        ws.x_new,
        v,
        ws.flags,
        ws.normal,
        ws.dv,
    );
    preconditioner(model, ws, k);
    // b (unfiltered) is kept in `force` to measure the constraint impulses.
    ws.force.copy_from_slice(ws.r);
    held
}

/// Starts the solve from the last one's `Δv` where that solved a step of
/// the same length ([`crate::model::StepParams::warm_start`]): the nodes a
/// collider holds take its tangential part beside their constrained normal
/// part; pinned and free nodes keep theirs. Returns whether it did.
fn warm_start(ws: &mut Workspace) -> bool {
    if ws.warm.len() != ws.dv.len() {
        return false;
    }
    for (((d, &w), &f), &n) in ws.dv.iter_mut().zip(ws.warm.iter()).zip(ws.flags.iter()).zip(ws.normal.iter()) {
        if flags::on_plane(f) {
            *d += w - n * w.dot(n);
        }
    }
    true
}

/// Keeps a finished solve's `Δv` as the next one's starting guess (a
/// solve that failed leaves none).
fn keep_warm(ws: &mut Workspace, h: f32, ok: bool) {
    ws.warm_h = 0.0;
    if ok && ws.warm.len() == ws.dv.len() && ws.dv.iter().all(|d| d.is_finite()) {
        ws.warm.copy_from_slice(ws.dv);
        ws.warm_h = h;
    }
}

/// The filtered CG solve for `ws.dv`, and with `held` contact nodes the
/// release of those a collider would pull (the first solve stops early for
/// that check; the one after it goes on to the tolerance). Returns the
/// solve and the work the constraints may do (pushing a node out of a
/// collider); leaves `A Δv` in `ws.q` and `b` in `ws.force` where nodes
/// stay held.
fn solve(
    model: &Model,
    v: &[Vec3],
    ws: &mut Workspace,
    k: &Coefficients,
    held: usize,
    warm: bool,
    probe: &mut impl Probe,
) -> (solver::Solve, f32) {
    // The operator of the flags (and preconditioner) as they are then.
    macro_rules! system {
        () => {
            operator(model, k, ws.blocks, &ws.stencil, ws.gather.as_ref(), ws.flags, ws.normal)
        };
    }
    // Residuals are measured against the right-hand side, not against the
    // residual of the starting guess.
    let mut solve = solver::Solve { reference: system!().rhs_norm(ws.force), ..solver::Solve::default() };
    let mut released = 0;
    // The multigrid's coarse operators follow the constraints: assembled
    // for the first solve and again only after a release changed them.
    let mut constraints_changed = true;
    for pass in 0..=MAX_RELEASES {
        probe.enter(Stage::Solve);
        let system = system!();
        // r = b − A Δv: the constrained part of Δv (with the last solve's
        // where it starts warm), and after a release the previous solution
        // as the starting guess.
        if pass > 0 || held > 0 || warm || !model.scene.pins.is_empty() {
            system.apply(ws.dv, ws.q);
            for ((r, b), q) in ws.r.iter_mut().zip(ws.force.iter()).zip(ws.q.iter()) {
                *r = *b - *q;
            }
        }
        if constraints_changed {
            probe.enter(Stage::Multigrid);
            system.prepare(&mut ws.mg);
            probe.enter(Stage::Solve);
        }
        let early = pass == 0 && held > 0 && MAX_RELEASES > 0;
        let tolerance = if early { RELEASE_CHECK.max(model.params.cg_tolerance) } else { model.params.cg_tolerance };
        let stop =
            solver::Stop { max_iterations: model.params.cg_max_iterations, tolerance, reference: solve.reference };
        solve.then(system.pcg(ws.dv, ws.r, [ws.p, ws.q, ws.x_new], &mut ws.mg, stop));
        if held == 0 || pass == MAX_RELEASES {
            break;
        }
        // Constraint impulses λ = (A Δv − b)·n; a collider cannot pull.
        system.apply(ws.dv, ws.q);
        let newly = release(ws.flags, ws.normal, ws.q, ws.force);
        released += newly;
        constraints_changed = newly > 0;
        if constraints_changed {
            // A released node's block inverted its diagonal block on the
            // contact plane.
            probe.enter(Stage::Multigrid);
            preconditioner(model, ws, k);
        }
        if newly == 0 && !early {
            break;
        }
    }

    // The held nodes' normal impulses λ = (A Δv − b)·n (from `q` = A Δv and
    // `force` = b, kept until the candidate is made).
    let mut work = 0.0;
    if held > released {
        system!().apply(ws.dv, ws.q);
        work = constraint_work(model, v, ws);
    }
    (solve, work)
}

/// The step's operator `A` on the blocks of `blocks` ([`split_blocks`]),
/// for these node flags.
fn operator<'s, 'm>(
    model: &'s Model<'m>,
    k: &Coefficients,
    blocks: &'s [Mat3],
    stencil: &'s Option<stencil::BendingStencil<'_>>,
    gather: Option<&'s gather::Gather<'_>>,
    flags: &'s [u8],
    normal: &'s [Vec3],
) -> solver::System<'s, 'm> {
    let (diag, precond, off) = blocks_of(blocks, model.mesh.node_count(), model.mesh.edges().len());
    solver::System {
        mesh: &model.mesh,
        diag,
        off,
        bending: bending_of(model, stencil),
        density: model.material.density,
        m_scale: k.m_scale,
        c: k.c,
        precond,
        flags,
        normal,
        gather: gather.map(|g| g as &dyn gather::Product),
    }
}

/// Releases the held nodes whose constraint impulse `(A Δv − b)·n` (`a_dv`,
/// `b`) pulls them onto the collider; returns how many.
fn release(node_flags: &mut [u8], normal: &[Vec3], a_dv: &[Vec3], b: &[Vec3]) -> usize {
    let mut newly = 0;
    for (i, f) in node_flags.iter_mut().enumerate() {
        if flags::in_contact(*f) && (a_dv[i] - b[i]).dot(normal[i]) < 0.0 {
            *f = flags::without_contact(*f);
            newly += 1;
        }
    }
    newly
}

/// The work the held nodes' normal impulses (from `ws.q` = A Δv and
/// `ws.force` = b) may do over the step: pushing a node out of a collider.
fn constraint_work(model: &Model, v: &[Vec3], ws: &Workspace) -> f32 {
    let mut work = 0.0;
    for (i, &f) in ws.flags.iter().enumerate() {
        let Some(col) = contact::holder(model.scene.colliders, f) else { continue };
        let n = ws.normal[i];
        let lambda = (ws.q[i] - ws.force[i]).dot(n).max(0.0);
        work += lambda * (v[i] + ws.dv[i] - col.velocity).dot(n).max(0.0);
    }
    work
}

/// The energy check of the solved `ws.dv` (base positions in `ws.r`):
/// whether the step's incremental potential did not rise beyond its
/// tolerance (rounding, the constraints' `work`, the solve's
/// `error_energy`), halving the solved part of the velocity change up to
/// `allowed` times until it passes. Returns whether it passed and the
/// scale taken.
#[allow(clippy::too_many_arguments)]
fn check_energy(
    model: &Model,
    x: &[Vec3],
    v: &[Vec3],
    ws: &mut Workspace,
    k: &Coefficients,
    error_energy: f32,
    work: f32,
    allowed: u32,
) -> (bool, f32) {
    let mut scale = 1.0;
    let check = EnergyCheck {
        model,
        h: k.h,
        x,
        base: ws.r,
        f_ext: ws.f_ext,
        flags: ws.flags,
        normal: ws.normal,
        stencil: ws.stencil.as_ref(),
    };
    trial(scale, v, ws.dv, ws.flags, ws.normal, ws.p);
    let cache = hinge_cache(ws.blocks);
    // Before, then after: the start is often the audit's placement, and
    // the last trial often the step's end.
    let (psi0, noise0) = check.before(v, ws.p, ws.x_new, &mut ws.memo, cache);
    let (mut psi, noise1) = check.after(ws.p, ws.x_new, &mut ws.memo, cache);
    // The solve's own inexactness may cost up to its error energy.
    let tol = 1e-5 * (psi0.abs() + psi.abs())
        + NOISE_FACTOR * (noise0 + noise1)
        + work
        + ERROR_ENERGY_FACTOR * error_energy
        + f32::MIN_POSITIVE;
    let mut passed = psi <= psi0 + tol || !psi0.is_finite();
    let mut halvings = 0;
    while !passed && halvings < allowed {
        halvings += 1;
        scale *= 0.5;
        trial(scale, v, ws.dv, ws.flags, ws.normal, ws.p);
        psi = check.after(ws.p, ws.x_new, &mut ws.memo, cache).0;
        passed = psi <= psi0 + tol;
    }
    (passed, scale)
}

/// The candidate end state into `ws.x_new` and `ws.dv`: the solved
/// velocity change at `scale`, friction on the held nodes (Coulomb, from
/// the normal impulse over the step; it only slows their sliding), then
/// strain limiting; neither is part of the linearisation the energy check
/// guards. A held node ends on the collider's surface at rest along its
/// normal. Returns whether the strain limiter left an edge over its limit.
fn make_candidate(model: &Model, v: &[Vec3], ws: &mut Workspace, k: &Coefficients, scale: f32) -> bool {
    let colliders = model.scene.colliders;
    trial(scale, v, ws.dv, ws.flags, ws.normal, ws.p);
    for (i, &f) in ws.flags.iter().enumerate() {
        if let Some(col) = contact::holder(colliders, f) {
            let n = ws.normal[i];
            let lambda = (ws.q[i] - ws.force[i]).dot(n).max(0.0);
            let rel = ws.p[i] - col.velocity;
            let vn = rel.dot(n);
            let slow = col.friction * lambda / (model.mass(i) * k.m_scale);
            ws.p[i] = col.velocity + n * vn + contact::coulomb(rel - n * vn, slow);
        }
    }
    let mut strain_unfinished = false;
    match model.params.strain_limit {
        Some(limit) => {
            strain_unfinished =
                limit::limit_stretch(model, limit, k.h, ws.flags, ws.normal, ws.r, ws.p, ws.x_new).unfinished;
        }
        None => {
            for ((xn, xi), u) in ws.x_new.iter_mut().zip(ws.r.iter()).zip(ws.p.iter()) {
                *xn = *xi + *u * k.h;
            }
        }
    }
    for (i, dv) in ws.dv.iter_mut().enumerate() {
        let u = ws.p[i];
        *dv = match contact::holder(colliders, ws.flags[i]) {
            Some(col) => u - ws.normal[i] * (u - col.velocity).dot(ws.normal[i]),
            None => u,
        };
    }
    strain_unfinished
}

/// The positions a (sub)step's motion starts from: `x` (backward Euler),
/// `x + (x − x_prev)/3` (BDF2), computed as the right-hand side does.
fn base_positions(bdf2: bool, x: &[Vec3], x_prev: &[Vec3], out: &mut [Vec3]) {
    if bdf2 {
        for (o, (xi, xp)) in out.iter_mut().zip(x.iter().zip(x_prev)) {
            *o = (*xi - *xp) * (1.0 / 3.0) + *xi;
        }
    } else {
        out.copy_from_slice(x);
    }
}

/// Self-contact and colliders on the candidate, then commit it: nodes that
/// would cross a collider within the step are stopped where they touch it,
/// edges are kept out of spheres and capsules that fit between their nodes,
/// nodes inside a collider are pushed out.
fn finish(
    model: &Model,
    state: &mut State,
    h: f32,
    ticks: u64,
    report: &mut StepReport,
    probe: &mut impl Probe,
) -> bool {
    probe.enter(Stage::Contacts);
    let mesh = &model.mesh;
    let t0 = state.time();
    let (t0, t1) = (t0 as f32, (t0 + h as f64) as f32);
    let ws = &mut state.ws;
    // Self-contact first, so that the colliders have the last word.
    ws.n_pairs = 0;
    if let Some(sc) = model.params.self_contact {
        if let Ok(found) = contact::proximity(mesh, ws.x_new, sc.radius, ws.cells, ws.order, ws.pairs) {
            ws.n_pairs = found.pairs;
            report.pairs = found.pairs;
            report.dropped_pairs += found.dropped;
            state.warnings.dropped_pairs += found.dropped as u64;
            let pinned = &*ws.flags;
            let inv_mass = |i: usize| if flags::pinned(pinned[i]) { 0.0 } else { 1.0 / model.mass(i) };
            let repelled = contact::repel(&ws.pairs[..found.pairs], sc.radius, h, inv_mass, ws.x_new, ws.dv);
            report.self_contacts += repelled;
            // Pushing close pairs apart can over-stretch the edges between
            // them: limit again from the base the repelled state implies.
            if let (Some(limit), true) = (model.params.strain_limit, repelled > 0) {
                for ((b, x), v) in ws.r.iter_mut().zip(ws.x_new.iter()).zip(ws.dv.iter()) {
                    *b = *x - *v * h;
                }
                let limited = limit::limit_stretch(model, limit, h, ws.flags, ws.normal, ws.r, ws.dv, ws.x_new);
                report.strain_unfinished |= limited.unfinished;
            }
        }
    }
    let colliders = model.scene.colliders;
    if !colliders.is_empty() {
        let motion = contact::StepMotion { colliders, t: t0, h, tol: SWEEP_TOLERANCE, flags: ws.flags, x0: state.x };
        report.contacts += contact::sweep_nodes(&motion, ws.x_new, ws.dv);
        report.contacts += contact::collide_edges(mesh, &motion, ws.x_new, ws.dv);
    }
    report.contacts += contact::collide(colliders, t1, ws.flags, ws.x_new, ws.dv);
    for f in ws.flags.iter_mut() {
        *f = flags::without_contact(*f);
    }
    if !(ws.x_new.iter().all(|p| p.is_finite()) && ws.dv.iter().all(|p| p.is_finite())) {
        ws.n_pairs = 0;
        return false;
    }
    if ws.x_prev.len() == state.x.len() && ws.v_prev.len() == state.v.len() {
        ws.x_prev.copy_from_slice(state.x);
        ws.v_prev.copy_from_slice(state.v);
    }
    state.x.copy_from_slice(ws.x_new);
    state.v.copy_from_slice(ws.dv);
    state.ticks += ticks;
    true
}

/// The whole step's energy balance, contacts, friction, self-contact and
/// strain limiting included (the energy check guards only the solve): the
/// total energy (kinetic, elastic, gravity) may rise by the wind's work
/// over the step (trapezoidal in the start and end powers) and a
/// twentieth of the energies at stake. Checked only with the energy check
/// on and where the work done on the cloth is known: no moving pin or
/// collider.
pub struct EnergyAudit {
    energy: f32,
    /// Kinetic and elastic energy at the start.
    stake: f32,
    /// The wind's power at the start.
    power: f32,
}

/// Share of the energies at stake a step may gain before it counts.
const ENERGY_RISE: f32 = 0.05;

impl EnergyAudit {
    fn start(model: &Model, state: &mut State) -> Option<EnergyAudit> {
        let scene = &model.scene;
        let moving = scene.pins.iter().any(|p| p.motion != crate::model::PinMotion::Fixed)
            || scene.colliders.iter().any(|c| c.velocity != Vec3::ZERO);
        if !model.params.energy_check || moving {
            return None;
        }
        let (e, _) = state_energy(model, state);
        let power = wind_power(model, state.time(), state.x, state.v, state.ws.f_ext);
        Some(EnergyAudit { energy: e.total(), stake: e.kinetic + e.membrane + e.bending, power })
    }

    /// Whether the step ended with more energy than it may have (beyond
    /// the energies' rounding bounds too).
    fn rose(&self, model: &Model, state: &mut State) -> bool {
        let (e, noise) = state_energy(model, state);
        let power = wind_power(model, state.time(), state.x, state.v, state.ws.f_ext);
        let work = 0.5 * model.params.dt * (self.power + power);
        let stake = self.stake + e.kinetic + e.membrane + e.bending + work.abs();
        let rounding =
            NOISE_FACTOR * noise + 8.0 * f32::EPSILON * (libm::fabsf(e.gravity) + libm::fabsf(self.energy) + stake);
        e.total() > self.energy + work + ENERGY_RISE * stake + rounding
    }
}

/// `Σ f_wind · v` at time `t`, with `scratch` for the forces.
fn wind_power(model: &Model, t: f64, x: &[Vec3], v: &[Vec3], scratch: &mut [Vec3]) -> f32 {
    if model.scene.wind.is_none() {
        return 0.0;
    }
    scratch.fill(Vec3::ZERO);
    wind(model, t, x, v, scratch);
    scratch.iter().zip(v).map(|(f, vi)| f.dot(*vi)).sum()
}

/// Advances the state by one time step `model.params.dt`.
///
/// The step is one linearised solve, backward Euler or BDF2
/// ([`crate::model::Integrator`]). If its result fails the energy check,
/// its velocity change is halved up to `LINE_SEARCH` (2) times; if it still
/// fails (or is not finite) the step is split into halves, each solved
/// with backward Euler, down to `dt / 2^MAX_SPLIT`; there the solved
/// velocity change is shortened until the check passes. If a split step still produces a
/// non-finite state, `StepError::NonFinite` is returned and the state is
/// left at the last good (sub)step.
pub fn step(model: &Model, state: &mut State) -> Result<StepReport, StepError> {
    step_probed(model, state, &mut NoProbe)
}

/// [`step`], marking its stages to `probe` ([`crate::probe`]).
pub fn step_probed(model: &Model, state: &mut State, probe: &mut impl Probe) -> Result<StepReport, StepError> {
    let n = model.mesh.node_count();
    if state.x.len() != n || state.ws.blocks.len() != crate::state::mat3_blocks(model.mesh.counts()) {
        return Err(StepError::MeshMismatch);
    }
    model.scene.mark_pinned(state.ws.flags);
    state.ws.memo.forget();
    let h = model.params.dt;
    state.ws.v_start_prev.copy_from_slice(state.ws.v_start);
    state.ws.v_start.copy_from_slice(state.v);
    wind_push(model, state.time(), state.x, state.v, h, state.ws.f_ext, state.ws.v_start);
    let total = 1u32 << MAX_SPLIT;
    let mut report = StepReport { step_scale: 1.0, converged: true, ..StepReport::default() };
    probe.enter(Stage::Audit);
    let audit = EnergyAudit::start(model, state);
    let (mut pos, mut level) = (0u32, 0u32);
    while pos < total {
        let size = 1u32 << (MAX_SPLIT - level);
        let hs = h * size as f32 / total as f32;
        let last_resort = level == MAX_SPLIT;
        // `history` is only ever set with history storage present.
        let bdf2 = level == 0 && state.ws.history && model.params.integrator == crate::model::Integrator::Bdf2;
        let sub = substep(model, state, hs, last_resort, bdf2, probe);
        report.cg_iterations += sub.solve.iterations;
        report.residual = report.residual.max(sub.solve.residual);
        report.converged &= sub.solve.converged;
        report.stagnated |= sub.solve.stagnated;
        let good = sub.finite && sub.passed;
        if !good && !last_resort {
            level += 1;
            continue;
        }
        if !sub.finite || !finish(model, state, hs, size as u64, &mut report, probe) {
            state.warnings.rejected_steps += 1;
            state.ws.history = false;
            return Err(StepError::NonFinite);
        }
        if !sub.passed {
            state.warnings.energy_check_failed += 1;
        }
        report.strain_unfinished |= sub.strain_unfinished;
        report.step_scale = report.step_scale.min(sub.scale);
        report.substeps += 1;
        pos += size;
    }
    if !report.converged {
        state.warnings.cg_not_converged += 1;
    }
    if report.stagnated {
        state.warnings.cg_stagnated += 1;
    }
    if report.strain_unfinished {
        state.warnings.strain_limit_unfinished += 1;
    }
    if let Some(audit) = audit {
        probe.enter(Stage::Audit);
        report.energy_rose = audit.rose(model, state);
        state.warnings.energy_rose += u64::from(report.energy_rose);
    }
    // The history holds a step of this length only if it was not split.
    state.ws.history = report.substeps == 1 && state.ws.x_prev.len() == n;
    state.steps += 1;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::energy::{elastic, ElasticMemo};
    use crate::math::Vec3;
    use crate::mesh::{Grid, Mesh, MeshCounts, MeshError};
    use crate::model::{Material, Model, ParamError, Scene, StepParams};
    use crate::storage::MeshBuffers;

    const C: MeshCounts = MeshCounts::grid(4, 4);

    /// A mesh or model the test could not build.
    #[derive(Debug)]
    #[allow(dead_code)]
    enum Setup {
        Mesh(MeshError),
        Model(ParamError),
    }

    #[test]
    fn memo_answers_only_for_the_same_placement() -> Result<(), Setup> {
        let mut mb = MeshBuffers::<{ C.nodes }, { C.triangles }, { C.edges }, { C.hinges }>::new();
        let mesh = Mesh::grid(&Grid::horizontal(4, 4, 0.3, 0.3, 0.0), mb.storage()).map_err(Setup::Mesh)?;
        let model =
            Model::new(mesh, Material::COTTON, Scene::default(), StepParams::default()).map_err(Setup::Model)?;
        let mut x: [Vec3; C.nodes] = core::array::from_fn(|i| model.mesh.rest()[i] * 1.05);
        let mut copy = [Vec3::ZERO; C.nodes];
        let mut memo = ElasticMemo::new(&mut copy);
        let first = memo.elastic(&model, &x, None, &mut []);
        assert_eq!(first, elastic(&model, &x, &mut []));
        assert!(first.membrane > 0.0);
        assert_eq!(memo.elastic(&model, &x, None, &mut []), first);
        // One node moved: measured again, not remembered.
        x[5].z += 0.01;
        let moved = memo.elastic(&model, &x, None, &mut []);
        assert_eq!(moved, elastic(&model, &x, &mut []));
        assert_ne!(moved, first);
        memo.forget();
        assert_eq!(memo.elastic(&model, &x, None, &mut []), moved);
        Ok(())
    }
}
