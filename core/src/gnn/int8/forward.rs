//! One forward pass: input features, encoders, processor rounds, heads.

use super::super::features::{self, EDGE_FEATURES, NODE_FEATURES};
use super::format::*;
use super::kernel::*;
use super::layer::*;
use super::*;
use crate::math::Vec3;
use crate::mesh::NodeId;
use crate::probe::{NoProbe, Probe, Stage};

/// Runs the network: `dx[i], dv[i]` receive the corrections of node `i`
/// (pinned nodes included; [`State::apply_correction`] skips them).
pub fn forward(
    net: Checked,
    g: GraphRef,
    latents: &mut [i8],
    sums: &mut [i32],
    dx: &mut [Vec3],
    dv: &mut [Vec3],
) -> Result<(), GnnError> {
    forward_probed(net, g, latents, sums, dx, dv, &mut NoProbe)
}

/// [`forward`], marking its stages to `probe` ([`crate::probe`]).
pub fn forward_probed(
    net: Checked,
    g: GraphRef,
    latents: &mut [i8],
    sums: &mut [i32],
    dx: &mut [Vec3],
    dv: &mut [Vec3],
    probe: &mut impl Probe,
) -> Result<(), GnnError> {
    forward_guarded(net, g, latents, sums, [dx, dv], false, probe)
}

/// [`forward_probed`], with the do-no-harm guard ([`GUARD_START`]) where
/// `guarded`: each node's factor is taken from the inputs its encoder
/// reads (kept in `dx` until the heads overwrite it) and applied to its
/// corrections.
pub(crate) fn forward_guarded(
    net: Checked,
    g: GraphRef,
    latents: &mut [i8],
    sums: &mut [i32],
    [dx, dv]: [&mut [Vec3]; 2],
    guarded: bool,
    probe: &mut impl Probe,
) -> Result<(), GnnError> {
    let net = net.network();
    let n = g.mesh.node_count();
    if g.x.len() != n || g.v.len() != n || g.pinned.len() != n || dx.len() != n || dv.len() != n {
        return Err(GnnError::MeshMismatch);
    }
    if let Some(pair) = g.pairs.iter().position(|p| p.iter().any(|&i| i as usize >= n)) {
        return Err(GnnError::BadPair { pair });
    }
    let l = net.latent;
    let ne = features::edge_count(g.mesh, g.pairs.len());
    let need_i8 = (n + ne) * l;
    let need_i32 = (2 * l + 1) * n;
    if latents.len() < need_i8 {
        return Err(GnnError::Scratch { what: "latents", capacity: latents.len(), needed: need_i8 });
    }
    if sums.len() < need_i32 {
        return Err(GnnError::Scratch { what: "sums", capacity: sums.len(), needed: need_i32 });
    }
    let (h, rest) = latents.split_at_mut(n * l);
    let e = &mut rest[..ne * l];
    let (ps, rest) = sums.split_at_mut(n * l);
    let (pr, rest) = rest.split_at_mut(n * l);
    let degree = &mut rest[..n];

    let mut w = Rows { acc: [0; MAX_LATENT], hidden: [0; MAX_LATENT], packed: [0; MAX_LATENT] };
    probe.enter(Stage::Encoders);
    encode(net, &g, h, e, degree, guarded.then_some(&mut *dx), &mut w)?;
    for (round, (em, nm)) in net.mlps.rounds_iter().enumerate() {
        probe.enter(Stage::EdgeUpdate(round as u8));
        edge_update(em, &g, l, h, e, [&mut *ps, &mut *pr], &mut w)?;
        probe.enter(Stage::NodeUpdate(round as u8));
        node_update(nm, &g, l, h, e, ps, degree, &mut w)?;
    }
    probe.enter(Stage::Heads);
    decode(net, h, dx, dv, guarded, &mut w);
    Ok(())
}

/// The input columns a first layer reads (a nonzero weight in some row),
/// as bits.
fn read_columns(l1: &Linear) -> u32 {
    let mut read = 0u32;
    for row in l1.weights.chunks_exact(l1.inputs.max(1)) {
        for (k, &w) in row.iter().enumerate().take(32) {
            if w != 0 {
                read |= 1 << k;
            }
        }
    }
    read
}

/// Node and edge features, quantised, through the encoders into the node
/// latents `h` and edge latents `e`; counts each node's incoming edges.
fn encode(
    net: &Network,
    g: &GraphRef,
    h: &mut [i8],
    e: &mut [i8],
    degree: &mut [i32],
    mut guard: Option<&mut [Vec3]>,
    w: &mut Rows,
) -> Result<(), GnnError> {
    let l = net.latent;
    let inputs = Inputs::new(net, g);
    let ready = net.mlps.node_enc.shifts();
    let fused = net.mlps.node_enc.as_mlp16(NODE_FEATURES);
    // The inputs the guard watches (none without the guard: no reach to take).
    let read = if guard.is_some() { read_columns(&net.mlps.node_enc.l1) } else { 0 };
    for (i, hi) in h.chunks_exact_mut(l).enumerate() {
        let (x, reach) = inputs.node_and_reach(i, read)?;
        if let Some(factor) = guard.as_deref_mut().and_then(|f| f.get_mut(i)) {
            *factor = Vec3::new(guard_factor(reach), 0.0, 0.0);
        }
        if !fused.as_ref().is_some_and(|f| f.run(&x, None, w, hi)) {
            net.mlps.node_enc.run(&ready, &x, w, hi);
        }
    }
    degree.fill(0);
    let ready = net.mlps.edge_enc.shifts();
    let fused = net.mlps.edge_enc.as_mlp16(EDGE_FEATURES);
    let mut last = None;
    for (k, ek) in e.chunks_exact_mut(l).enumerate() {
        let (ends, q) = inputs.edge_after(k, last)?;
        last = Some((ends, q));
        // The ten features padded to twelve: one full block and a short one.
        let mut q12 = [0i8; 12];
        q12[..EDGE_FEATURES].copy_from_slice(&q);
        let done = match (&fused, <&mut [i8; 16]>::try_from(&mut *ek)) {
            (Some(f), Ok(out)) => f.run12(&q12, w, out),
            _ => false,
        };
        if !done {
            net.mlps.edge_enc.run(&ready, &q, w, ek);
        }
        degree[ends[1] as usize] += 1;
    }
    Ok(())
}

/// The network's quantised inputs on a graph: what its encoders read
/// (the firmware also runs them alone, to report the features' share of
/// the encoders' stage).
pub struct Inputs<'n, 'g> {
    net: &'n Network<'n>,
    g: &'n GraphRef<'g>,
    centroid: Vec3,
    around: features::Surroundings<'g>,
    /// The quantisation of every feature that turns over with an edge's
    /// direction is odd (no offset): [`Inputs::reversed`].
    odd: bool,
}

impl<'n, 'g> Inputs<'n, 'g> {
    pub fn new(net: &'n Network<'n>, g: &'n GraphRef<'g>) -> Self {
        let odd = features::TURNS_OVER.iter().zip(&net.edge_in).all(|(&turns, q)| !turns || q.offset == 0.0);
        Inputs { net, g, centroid: features::centroid(g.x), around: g.surroundings(net.radius), odd }
    }

    /// The other direction's ends and quantised features from one
    /// direction's ([`Inputs::edge`] of directed edge `2m` gives `2m + 1`'s):
    /// the features that turn over ([`features::TURNS_OVER`]) negated, the
    /// same values [`Inputs::edge`] computes, when their quantisation has
    /// no offset (`round(−y) = −round(y)`, half away from zero, and the
    /// saturation is symmetric); `None` for a network whose quantisation
    /// has an offset there.
    #[inline(always)]
    pub fn reversed(
        &self,
        (ends, q): ([NodeId; 2], [i8; EDGE_FEATURES]),
    ) -> Option<([NodeId; 2], [i8; EDGE_FEATURES])> {
        let turn = |k: usize| if features::TURNS_OVER[k] { -q[k] } else { q[k] };
        self.odd.then(|| ([ends[1], ends[0]], core::array::from_fn(turn)))
    }

    /// Directed edge `k`'s ends and quantised features, from the edge
    /// before it (`last`) where that is its other direction
    /// ([`Inputs::reversed`]): every edge's features in order at half the
    /// work.
    #[inline(always)]
    pub fn edge_after(
        &self,
        k: usize,
        last: Option<([NodeId; 2], [i8; EDGE_FEATURES])>,
    ) -> Result<([NodeId; 2], [i8; EDGE_FEATURES]), GnnError> {
        match last.filter(|_| k % 2 == 1).and_then(|l| self.reversed(l)) {
            Some(other) => Ok(other),
            None => self.edge(k),
        }
    }

    /// Node `i`'s features, quantised.
    #[inline(always)]
    pub fn node(&self, i: usize) -> Result<[i8; NODE_FEATURES], GnnError> {
        Ok(self.node_and_reach(i, 0)?.0)
    }

    /// Node `i`'s features, quantised, and their largest reach
    /// ([`Input::reach`]) over the columns whose bits `read` sets (NaN
    /// for a non-finite input).
    #[inline(always)]
    pub fn node_and_reach(&self, i: usize, read: u32) -> Result<([i8; NODE_FEATURES], f32), GnnError> {
        let g = self.g;
        let (Some(&x), Some(&v), Some(&v_start), Some(&v_start_prev), Some(&pinned)) =
            (g.x.get(i), g.v.get(i), g.v_start.get(i), g.v_start_prev.get(i), g.pinned.get(i))
        else {
            return Err(GnnError::MeshMismatch);
        };
        let node = features::NodeState { x, v, v_start, v_start_prev, pinned: pinned != 0 };
        let f = features::node_feature(node, self.centroid, &self.around);
        let mut q = [0i8; NODE_FEATURES];
        let mut reach = 0.0f32;
        for (k, ((q, &x), inp)) in q.iter_mut().zip(&f).zip(&self.net.node_in).enumerate() {
            *q = inp.quantize(x);
            if read & (1 << k) != 0 {
                let r = inp.reach(x);
                // NaN stays: the guard's factor for it is 0.
                reach = if r.is_nan() || reach.is_nan() { f32::NAN } else { reach.max(r) };
            }
        }
        Ok((q, reach))
    }

    /// Directed edge `k`'s ends and features, quantised (static edges
    /// first, both directions of each, then the dynamic pairs').
    #[inline(always)]
    pub fn edge(&self, k: usize) -> Result<([NodeId; 2], [i8; EDGE_FEATURES]), GnnError> {
        let g = self.g;
        let ends = features::endpoints_of(g.mesh, g.pairs, k).ok_or(GnnError::MeshMismatch)?;
        if ends.iter().any(|&i| i as usize >= g.x.len()) {
            return Err(GnnError::MeshMismatch);
        }
        let rest = (k / 2 < g.mesh.edges().len()).then(|| g.mesh.rest());
        let f = features::edge_feature(rest, g.x, ends, self.net.radius);
        let mut q = [0i8; EDGE_FEATURES];
        for ((q, &x), inp) in q.iter_mut().zip(&f).zip(&self.net.edge_in) {
            *q = inp.quantize(x);
        }
        Ok((ends, q))
    }
}

/// A processor round's edge update `e ← e + MLP([e, h_s, h_r])`, its first
/// layer factorised: the node terms `W_s h` and `W_r h` once per node into
/// `[ps, pr]`.
fn edge_update(
    em: &Mlp,
    g: &GraphRef,
    l: usize,
    h: &[i8],
    e: &mut [i8],
    [ps, pr]: [&mut [i32]; 2],
    w: &mut Rows,
) -> Result<(), GnnError> {
    // The sender terms carry the layer's bias (integer sums: the same
    // result in any order).
    for (i, hi) in h.chunks_exact(l).enumerate() {
        let (s, r) = (&mut ps[i * l..][..l], &mut pr[i * l..][..l]);
        match <&mut [i32; 16]>::try_from(&mut *r) {
            Ok(r) => *r = [0; 16],
            Err(_) => r.fill(0),
        }
        em.l1.start_with(l, hi, s, &mut w.packed);
        em.l1.accumulate(2 * l, hi, r, &mut w.packed);
    }
    let ready = em.shifts();
    let fused = em.as_mlp16(l);
    if let Some(f) = fused.as_ref().filter(|_| l == 16) {
        if edge_update16(f, g, ps, pr, e, w)? {
            return Ok(());
        }
    }
    for (k, ek) in e.chunks_exact_mut(l).enumerate() {
        let [s, r] = features::endpoints_of(g.mesh, g.pairs, k).ok_or(GnnError::MeshMismatch)?;
        let (xs, ys) = (&ps[s as usize * l..][..l], &pr[r as usize * l..][..l]);
        if let (Some(f), Some(x), Some(a), Some(b)) =
            (&fused, ek.first_chunk::<16>(), xs.first_chunk(), ys.first_chunk())
        {
            // The edge's own latent is the first layer's input and the
            // residual's output.
            let x = *x;
            if f.run(&x, Some((a, b)), w, ek) {
                continue;
            }
        }
        let acc = &mut w.acc[..l];
        per_channel(l, |c| acc[c] = xs[c] + ys[c]);
        em.l1.accumulate(0, ek, &mut w.acc, &mut w.packed);
        em.hidden(&ready.hidden, &w.acc[..l], &mut w.hidden[..l]);
        em.finish(&ready, w, ek);
    }
    Ok(())
}

/// [`edge_update`]'s edges at the latent width 16 on the fused MLP: both
/// directions of each mesh edge, then of each dynamic pair, in feature
/// order, their ends read once a pair. `false`, with nothing done, where
/// the kernel does not take the MLP.
fn edge_update16(
    f: &Mlp16,
    g: &GraphRef,
    ps: &[i32],
    pr: &[i32],
    e: &mut [i8],
    w: &mut Rows,
) -> Result<bool, GnnError> {
    let (ps, pr) = (ps.as_chunks::<16>().0, pr.as_chunks::<16>().0);
    let (e, _) = e.as_chunks_mut::<16>();
    let ends = features::undirected(g.mesh, g.pairs);
    for ([a, b], two) in ends.zip(e.chunks_exact_mut(2)) {
        for ([s, r], ek) in [[a, b], [b, a]].into_iter().zip(two) {
            let (Some(xs), Some(yr)) = (ps.get(s as usize), pr.get(r as usize)) else {
                return Err(GnnError::MeshMismatch);
            };
            if !f.run16(ek, (xs, yr), w) {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// A processor round's node update `h ← h + MLP([h, mean of incoming e])`
/// (the int32 sums in `agg`, the in-degrees in `degree`).
#[allow(clippy::too_many_arguments)]
fn node_update(
    nm: &Mlp,
    g: &GraphRef,
    l: usize,
    h: &mut [i8],
    e: &[i8],
    agg: &mut [i32],
    degree: &[i32],
    w: &mut Rows,
) -> Result<(), GnnError> {
    agg.fill(0);
    let fused = nm.as_mlp16(2 * l);
    if let Some(f) = fused.as_ref().filter(|_| l == 16) {
        if node_update16(f, g, h, e, agg, degree, w)? {
            return Ok(());
        }
    }
    for (k, ek) in e.chunks_exact(l).enumerate() {
        let [_, r] = features::endpoints_of(g.mesh, g.pairs, k).ok_or(GnnError::MeshMismatch)?;
        let a = &mut agg[r as usize * l..][..l];
        per_channel(l, |c| a[c] += ek[c] as i32);
    }
    let mut input = [0i8; 2 * MAX_LATENT];
    let ready = nm.shifts();
    for (i, hi) in h.chunks_exact_mut(l).enumerate() {
        let d = degree[i].max(1);
        let (sums, (own, mean)) = (&agg[i * l..][..l], input[..2 * l].split_at_mut(l));
        per_channel(l, |c| {
            own[c] = hi[c];
            mean[c] = sat(div_round(sums[c], d));
        });
        if !fused.as_ref().is_some_and(|f| f.run(&input[..2 * l], None, w, hi)) {
            nm.run(&ready, &input[..2 * l], w, hi);
        }
    }
    Ok(())
}

/// [`node_update`] at the latent width 16 on the fused MLP (`agg` zeroed):
/// each mesh edge's and dynamic pair's two directions summed into their
/// receivers, then each node's own latent and mean message through the
/// MLP without an input row to copy them into. `false`, with nothing
/// written to `h`, where the kernel does not take the MLP.
fn node_update16(
    f: &Mlp16,
    g: &GraphRef,
    h: &mut [i8],
    e: &[i8],
    agg: &mut [i32],
    degree: &[i32],
    w: &mut Rows,
) -> Result<bool, GnnError> {
    let (agg, _) = agg.as_chunks_mut::<16>();
    let (e, _) = e.as_chunks::<16>();
    let ends = features::undirected(g.mesh, g.pairs);
    for ([a, b], two) in ends.zip(e.chunks_exact(2)) {
        // Directed edge 2m runs a → b, 2m + 1 runs b → a.
        for (r, ek) in [b, a].into_iter().zip(two) {
            let Some(sum) = agg.get_mut(r as usize) else { return Err(GnnError::MeshMismatch) };
            per_channel(16, |c| sum[c] += ek[c] as i32);
        }
    }
    for ((hi, sums), &d) in h.as_chunks_mut::<16>().0.iter_mut().zip(agg.iter()).zip(degree) {
        let d = d.max(1);
        let mean: [i8; 16] = core::array::from_fn(|c| sat(div_round(sums[c], d)));
        if !f.run_with_mean(hi, &mean, w) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The position and velocity heads: `dx[i]`, `dv[i]` from the int32
/// accumulators of each node's latent.
fn decode(net: &Network, h: &[i8], dx: &mut [Vec3], dv: &mut [Vec3], guarded: bool, w: &mut Rows) {
    let ready = [Shifts::of(net.mlps.head_x.l1.shift), Shifts::of(net.mlps.head_v.l1.shift)];
    let heads = [(&net.mlps.head_x, 0), (&net.mlps.head_v, 3)];
    let live = [net.head_runs(0), net.head_runs(1)];
    for (i, hi) in h.chunks_exact(net.latent).enumerate() {
        let mut out = [0f32; 6];
        for (((head, part), ready), _) in heads.into_iter().zip(&ready).zip(live).filter(|(_, on)| *on) {
            head.head(ready, hi, w);
            for k in 0..3 {
                let q = net.out[part + k];
                out[part + k] = w.acc[k] as f32 * q.scale + q.offset;
            }
        }
        let (mut x, mut v) = (Vec3::new(out[0], out[1], out[2]), Vec3::new(out[3], out[4], out[5]));
        // The guard's factor, which the encoders left in `dx`.
        let f = if guarded { dx[i].x } else { 1.0 };
        if f < 1.0 {
            x = x * f;
            v = v * f;
        }
        dx[i] = x;
        dv[i] = v;
    }
}

/// `a / b` rounded half away from zero (`b > 0`).
#[inline]
fn div_round(a: i32, b: i32) -> i32 {
    let half = b / 2;
    if a >= 0 {
        (a + half) / b
    } else {
        (a - half) / b
    }
}
