//! A graph sample as the float network reads it, made from a state, and
//! graphs batched for training.
use crate::learn::network::config::GnnConfig;
use crate::learn::network::config::{Normalizer, Stats};

use crate::learn::data::families::Family;

use anyhow::{Context, Result};
use candle_core::{Device, Tensor};
use serde::{Deserialize, Serialize};
use weft_core::gnn::features::{self, EDGE_FEATURES, EDGE_VECTORS, NODE_FEATURES, NODE_VECTORS};
use weft_core::gnn::graph::GraphRef;
use weft_core::math::Mat3;
use weft_core::prelude::*;

/// One graph: inputs in physical units, and (for training) targets.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub nodes: Vec<[f32; NODE_FEATURES]>,
    pub edges: Vec<[f32; EDGE_FEATURES]>,
    pub endpoints: Vec<[NodeId; 2]>,
    /// 1 for free nodes, 0 for pinned ones (not corrected).
    pub free: Vec<f32>,
    /// Δx then Δv per node.
    pub targets: Vec<[f32; 6]>,
    pub dropped_pairs: usize,
    /// The frame the sample comes from ([`FrameClass`]).
    pub class: FrameClass,
    /// The family of the scene it comes from, where known.
    pub family: Option<Family>,
}

/// What kind of frame a sample comes from, as the fit is reported by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FrameClass {
    /// No node on a collider and no dynamic edge: the cloth moves freely.
    #[default]
    Free,
    /// A node touches a collider (its nearness `w` ≥ 1) or two nodes of the
    /// cloth are within the network's radius without a mesh edge.
    Contact,
    /// The base step left the plain solve ([`weft_core::physics::StepReport::branched`]):
    /// the target depends on a decision no input shows.
    Branch,
}

impl FrameClass {
    pub const ALL: [FrameClass; 3] = [FrameClass::Free, FrameClass::Contact, FrameClass::Branch];
    pub fn name(self) -> &'static str {
        match self {
            FrameClass::Free => "free",
            FrameClass::Contact => "contact",
            FrameClass::Branch => "branch",
        }
    }
}

/// The node feature column of the collider's nearness `w`.
const NEARNESS: usize = 10;

/// The edge feature column that is 1 for a dynamic edge.
const DYNAMIC: usize = 8;

/// Counts a state's steps that branched ([`FrameClass::Branch`]): a
/// corrector that samples its steps keeps one and asks after every step.
#[derive(Clone, Copy, Debug, Default)]
pub struct Branches(u64);

impl Branches {
    /// Whether the step since the last call branched.
    pub fn since_last(&mut self, state: &State) -> bool {
        let now = state.warnings.branched_steps;
        let branched = now > self.0;
        self.0 = now;
        branched
    }
}

fn rotate_rows<const K: usize>(rows: &mut [[f32; K]], slots: &[usize], (c, s): (f32, f32)) {
    for r in rows {
        for &k in slots {
            let (x, z) = (r[k], r[k + 2]);
            r[k] = c * x + s * z;
            r[k + 2] = c * z - s * x;
        }
    }
}

impl Graph {
    /// The same graph with the scene turned by `angle` (rad) about the
    /// vertical (y) axis: every vector input and target rotated, scalars
    /// kept. Gravity is vertical, so this is an exact symmetry of the
    /// cloth's physics (colliders, pins and wind turn with it); training on
    /// turned copies keeps the network from learning a preferred horizontal
    /// direction from a few dozen scenes.
    pub fn rotate_about_vertical(&mut self, angle: f32) {
        let cs = (angle.cos(), angle.sin());
        rotate_rows(&mut self.nodes, &NODE_VECTORS, cs);
        rotate_rows(&mut self.edges, &EDGE_VECTORS, cs);
        rotate_rows(&mut self.targets, &[0, 3], cs);
    }
}

/// The graph of the current state of `state` (after a physics step): finds
/// the dynamic edges and computes features.
pub fn graph_of(model: &Model, state: &mut State, cfg: &GnnConfig) -> Result<Graph> {
    let found = state
        .find_pairs(&model.mesh, cfg.radius, cfg.pairs_per_node * model.mesh.node_count())
        .context("dynamic edges")?;
    let pairs = state.pairs();
    let ne = features::edge_count(&model.mesh, pairs.len());
    let mut g = Graph {
        nodes: vec![[0.0; NODE_FEATURES]; state.node_count()],
        edges: vec![[0.0; EDGE_FEATURES]; ne],
        endpoints: vec![[0; 2]; ne],
        free: state.pinned().iter().map(|&p| if p != 0 { 0.0 } else { 1.0 }).collect(),
        targets: Vec::new(),
        dropped_pairs: found.dropped,
        class: FrameClass::Free,
        family: None,
    };
    features::edge_endpoints(&model.mesh, pairs, &mut g.endpoints);
    features::edge_features(&model.mesh, state.positions(), pairs, cfg.radius, &mut g.edges);
    let r = GraphRef::of(model, state);
    features::node_features([r.x, r.v, r.v_start, r.v_start_prev], r.pinned, &r.surroundings(cfg.radius), &mut g.nodes);
    if cfg.residual_inputs || cfg.newton_inputs > 0 {
        if model.params.integrator == weft_core::model::Integrator::Bdf2 {
            anyhow::bail!("the step's residual and Newton inputs are backward Euler's: not for a BDF2 base step");
        }
        let column = if cfg.newton_inputs > 0 {
            let mut du = newton_velocity(model, state, cfg.newton_inputs, cfg.radius);
            if cfg.newton_clip {
                let most = model.scene.gravity.norm() * model.params.dt;
                for d in &mut du {
                    let len = d.norm();
                    if len > most {
                        *d = *d * (most / len);
                    }
                }
            }
            du
        } else {
            residual_velocity(model, state)
        };
        for (n, rho) in g.nodes.iter_mut().zip(column) {
            n[features::HISTORY..features::HISTORY + 3].copy_from_slice(&[rho.x, rho.y, rho.z]);
        }
    }
    if g.nodes.iter().any(|n| n[NEARNESS] >= 1.0) || g.edges.iter().any(|e| e[DYNAMIC] != 0.0) {
        g.class = FrameClass::Contact;
    }
    for f in &mut g.nodes {
        for (k, f) in f.iter_mut().enumerate() {
            if !cfg.reads_node_input(k) {
                *f = 0.0;
            }
        }
    }
    Ok(g)
}

/// The membrane and bending forces at the state's positions, and the
/// membrane's stiffness blocks there (diagonal, edge).
fn forces_at(model: &Model, x: &[Vec3]) -> (Vec<Vec3>, Vec<Mat3>, Vec<Mat3>) {
    let n = x.len();
    let mut force = vec![Vec3::ZERO; n];
    let (mut diag, mut off) = (vec![Mat3::ZERO; n], vec![Mat3::ZERO; model.mesh.edges().len()]);
    weft_core::physics::assemble(model, matrix_free(model), x, &mut force, &mut diag, &mut off);
    (force, diag, off)
}

fn matrix_free<'m>(model: &Model<'m>) -> weft_core::physics::stencil::Bending<'static> {
    use weft_core::physics::stencil::{Bending, Scratch};
    Bending::MatrixFree(model.material.plate(), Scratch::NONE)
}

/// The base step's residual at its end, as a velocity, per node
/// (`--residual-inputs`): `ρ = h f(x₁)/m + h g − (u₁ − v₀) − h α u₁`,
/// backward Euler's equation `m (u₁ − v₀) = h f(x₁) + h m g − h α m u₁`
/// divided by the mass, with `f` the membrane and bending forces at the
/// step's end positions `x₁`, `u₁` its end velocities, `v₀` the velocities
/// it started from with the wind's push ([`State::start_velocities`]),
/// and `α` the mass damping. The linearised step takes the forces at its
/// start, so `ρ` is what its linearisation missed (and, where the step
/// was split or a node was held by a contact, what that changed). The
/// stiffness damping is left out. Zero at pinned nodes.
pub fn residual_velocity(model: &Model, state: &State) -> Vec<Vec3> {
    residual_with(model, state, &forces_at(model, state.positions()).0)
}

/// [`residual_velocity`] with the forces at the state's positions given.
fn residual_with(model: &Model, state: &State, force: &[Vec3]) -> Vec<Vec3> {
    let (x, u, v0) = (state.positions(), state.velocities(), state.start_velocities());
    let (h, g, alpha) = (model.params.dt, model.scene.gravity, model.material.damping_mass);
    (0..x.len())
        .map(|i| {
            if state.pinned()[i] != 0 {
                return Vec3::ZERO;
            }
            force[i] * (h / model.mass(i)) + g * h - (u[i] - v0[i]) - u[i] * (h * alpha)
        })
        .collect()
}

/// A node within this nearness `w` of a collider (its gap at most 5 % of
/// the network's radius) is held by it in [`with_step_system`].
pub const HELD: f32 = 0.95;

/// Backward Euler's step system at a state, as the step's own solve
/// builds it ([`with_step_system`]).
pub struct StepSystem<'s, 'm> {
    /// `A = M(1 + hα) + h(h + β) K` at the state's positions, with its
    /// constraints: pins held, nodes on a collider ([`HELD`]) held along
    /// its normal.
    pub system: &'s weft_core::physics::solver::System<'s, 'm>,
    /// The preconditioner's hierarchy, set up for `system`.
    pub hierarchy: &'s mut weft_core::physics::hierarchy::Hierarchy<'s>,
    /// The membrane and bending forces at the positions.
    pub force: &'s [Vec3],
}

/// Builds backward Euler's step system at `state` (the grid's stencil and
/// multigrid, or the aggregates of other meshes; nodes within [`HELD`]
/// of a collider of the network's `radius` held along its normal) and
/// hands it to `f`.
pub fn with_step_system<R>(model: &Model, state: &State, radius: f32, f: impl FnOnce(StepSystem) -> R) -> R {
    use weft_core::physics::aggregate::{self, Aggregates};
    use weft_core::physics::hierarchy::Hierarchy;
    use weft_core::physics::multigrid::{Layout, Multigrid};
    use weft_core::physics::solver::System;
    use weft_core::physics::stencil::{self, Bending, BendingStencil};
    let (mesh, x) = (&model.mesh, state.positions());
    let n = x.len();
    let around = GraphRef::of(model, state).surroundings(radius);
    let mut flags: Vec<u8> =
        state.pinned().iter().map(|&p| if p != 0 { weft_core::flags::PINNED } else { 0 }).collect();
    let mut normal = vec![Vec3::ZERO; n];
    for i in 0..n {
        let (nw, w) = around.nearest(x[i]);
        if w >= HELD && flags[i] == 0 {
            (flags[i], normal[i]) = (weft_core::flags::held_by(0), nw * (1.0 / w));
        }
    }
    let grid = mesh.counts().grid;
    let mut stencil_pool = vec![0.0f32; stencil::floats(grid)];
    let stencil = BendingStencil::new(mesh, model.material.plate(), &mut stencil_pool);
    let mut mg_pool = vec![0.0f32; Layout::of(grid).floats() + aggregate::rigid_floats(mesh.counts())];
    let (bending, mut mg) = match &stencil {
        Some(s) => {
            (Bending::Stencil(s), Multigrid::new(mesh, s, &mut mg_pool).map_or(Hierarchy::None, Hierarchy::Grid))
        }
        None => (
            matrix_free(model),
            Aggregates::new(mesh, model.params.rigid_coarse(mesh), &mut mg_pool)
                .map_or(Hierarchy::None, Hierarchy::Graph),
        ),
    };
    let (force, diag, off) = forces_at(model, x);
    let (h, alpha, beta) = (model.params.dt, model.material.damping_mass, model.material.damping_stiffness);
    let (m_scale, c) = (1.0 + h * alpha, h * (h + beta));
    let mut precond: Vec<Mat3> =
        diag.iter().enumerate().map(|(i, d)| *d * c + Mat3::scale(model.mass(i) * m_scale)).collect();
    bending.add_diagonal(mesh, c, &mut precond);
    precond.iter_mut().for_each(|p| *p = p.inverse().unwrap_or(Mat3::ZERO));
    let system = System {
        mesh,
        diag: &diag,
        off: &off,
        bending,
        density: model.material.density,
        m_scale,
        c,
        precond: &precond,
        flags: &flags,
        normal: &normal,
        gather: None,
    };
    system.prepare(&mut mg);
    f(StepSystem { system: &system, hierarchy: &mut mg, force: &force })
}

/// The Newton correction the residual implies (`--newton-inputs K`):
/// `δu ≈ (M(1 + hα) + h(h + β) K₁)⁻¹ M ρ` with `K₁` the membrane's and
/// bending's stiffness at the step's end and `ρ` [`residual_velocity`],
/// on [`with_step_system`]'s system (a held node's residual along its
/// normal left out: the constraint gives that support): `iterations` CG
/// iterations preconditioned as the step's own solve is, stopping early
/// at a relative residual of 1e-5. Backward Euler's second Newton
/// iterate less its first, a solve over the whole cloth.
pub fn newton_velocity(model: &Model, state: &State, iterations: u32, radius: f32) -> Vec<Vec3> {
    use weft_core::physics::solver::Stop;
    let n = state.node_count();
    with_step_system(model, state, radius, |s| {
        let rho = residual_with(model, state, s.force);
        let (flags, normal) = (s.system.flags, s.system.normal);
        let mut r: Vec<Vec3> = (0..n)
            .map(|i| {
                let held =
                    if weft_core::flags::on_plane(flags[i]) { normal[i] * rho[i].dot(normal[i]) } else { Vec3::ZERO };
                (rho[i] - held) * model.mass(i)
            })
            .collect();
        let mut du = vec![Vec3::ZERO; n];
        let (mut p, mut q, mut t) = (vec![Vec3::ZERO; n], vec![Vec3::ZERO; n], vec![Vec3::ZERO; n]);
        let stop = Stop { max_iterations: iterations, tolerance: 1e-5, reference: 0.0 };
        s.system.pcg(&mut du, &mut r, [&mut p, &mut q, &mut t], s.hierarchy, stop);
        du
    })
}

/// Tensors of a batch of graphs (node indices offset per graph).
pub struct Batch {
    pub nodes: Tensor,
    pub edges: Tensor,
    pub senders: Tensor,
    pub receivers: Tensor,
    pub free: Tensor,
    /// Weight of each node in the loss, `[nodes, 1]`: 0 on pinned nodes;
    /// 1 on the others, or per graph with [`Batch::weighted`].
    pub weight: Tensor,
    /// `1 / max(1, incoming edges)` per node, `[nodes, 1]`.
    pub inv_degree: Tensor,
    pub targets: Option<Tensor>,
    pub n_nodes: usize,
    /// The sample each node belongs to, `[nodes]`.
    pub sample: Tensor,
    /// `1 / max(1, free nodes)` per sample, `[samples, 1]`.
    pub inv_free: Tensor,
}

impl Batch {
    pub fn new(graphs: &[Graph], norm: &Normalizer, dev: &Device) -> Result<Batch> {
        Batch::weighted(graphs, norm, dev, 0.0)
    }

    /// With `floor > 0`, the loss weighs each graph's free nodes by
    /// `1 / (m + floor)`, where `m` is the graph's mean squared target in
    /// units of the target's standard deviation (weights scaled to a mean
    /// of 1): every state counts by its *relative* error. Quiet states — a
    /// cloth at rest, a slow swing — have targets hundreds of times smaller
    /// than an impact's, so a plain mean squared error lets the network err
    /// there by more than the whole correction, and a rollout spends most
    /// of its steps in such states.
    pub fn weighted(graphs: &[Graph], norm: &Normalizer, dev: &Device, floor: f32) -> Result<Batch> {
        let (mut nodes, mut edges, mut snd, mut rcv, mut free, mut tgt) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        let mut offset = 0u32;
        let (mut sample, mut inv_free) = (vec![], vec![]);
        for (k, g) in graphs.iter().enumerate() {
            sample.extend(std::iter::repeat_n(k as u32, g.nodes.len()));
            inv_free.push(1.0 / g.free.iter().sum::<f32>().max(1.0));
            for r in &g.nodes {
                nodes.extend(r.iter().enumerate().map(|(k, &x)| norm.node.apply(x, k)));
            }
            for r in &g.edges {
                edges.extend(r.iter().enumerate().map(|(k, &x)| norm.edge.apply(x, k)));
            }
            for &[s, r] in &g.endpoints {
                snd.push(s as u32 + offset);
                rcv.push(r as u32 + offset);
            }
            free.extend_from_slice(&g.free);
            for r in &g.targets {
                tgt.extend(r.iter().enumerate().map(|(k, &x)| norm.target.apply(x, k)));
            }
            offset += g.nodes.len() as u32;
        }
        let (n, e) = (offset as usize, snd.len());
        let mut weight = free.clone();
        if floor > 0.0 {
            let (mut start, mut total, mut count) = (0, 0.0f64, 0.0f64);
            for g in graphs {
                let nodes = start..start + g.nodes.len();
                let free_here: f32 = g.free.iter().sum();
                let ms = g
                    .targets
                    .iter()
                    .zip(&g.free)
                    .map(|(t, f)| f * t.iter().zip(&norm.target.std).map(|(x, s)| (x / s).powi(2)).sum::<f32>())
                    .sum::<f32>()
                    / (6.0 * free_here.max(1.0));
                let w = 1.0 / (ms + floor);
                for k in nodes {
                    weight[k] *= w;
                }
                total += (w * free_here) as f64;
                count += free_here as f64;
                start += g.nodes.len();
            }
            let scale = if total > 0.0 { (count / total) as f32 } else { 1.0 };
            weight.iter_mut().for_each(|w| *w *= scale);
        }

        let mut deg = vec![0f32; n];
        for &r in &rcv {
            deg[r as usize] += 1.0;
        }
        let inv_degree: Vec<f32> = deg.iter().map(|&d| 1.0 / d.max(1.0)).collect();
        Ok(Batch {
            inv_degree: Tensor::from_vec(inv_degree, (n, 1), dev)?,
            nodes: Tensor::from_vec(nodes, (n, NODE_FEATURES), dev)?,
            edges: Tensor::from_vec(edges, (e, EDGE_FEATURES), dev)?,
            senders: Tensor::from_vec(snd, e, dev)?,
            receivers: Tensor::from_vec(rcv, e, dev)?,
            free: Tensor::from_vec(free, (n, 1), dev)?,
            weight: Tensor::from_vec(weight, (n, 1), dev)?,
            targets: if tgt.len() == n * 6 { Some(Tensor::from_vec(tgt, (n, 6), dev)?) } else { None },
            n_nodes: n,
            sample: Tensor::from_vec(sample, n, dev)?,
            inv_free: Tensor::from_vec(inv_free, (graphs.len(), 1), dev)?,
        })
    }
}

/// Normalisation statistics from a set of samples.
pub fn normalizer(samples: &[Graph]) -> Normalizer {
    let nodes: Vec<_> = samples.iter().flat_map(|g| g.nodes.iter().copied()).collect();
    let edges: Vec<_> = samples.iter().flat_map(|g| g.edges.iter().copied()).collect();
    let targets: Vec<_> =
        samples.iter().flat_map(|g| g.targets.iter().zip(&g.free).filter(|(_, &f)| f > 0.0).map(|(t, _)| *t)).collect();
    Normalizer { node: Stats::from_rows(&nodes), edge: Stats::from_rows(&edges), target: Stats::from_rows(&targets) }
}
