//! The int8 network: the optimised forward pass (factorised edge update, in-place latents,
//! accumulated means) against a plain reference written from the method's
//! description, and typed errors.
mod common;
use common::*;
use weft_core::gnn::features::{self, EDGE_FEATURES, NODE_FEATURES};
use weft_core::gnn::int8::{
    self, GnnError, GraphRef, Input, Linear, Mlp, Network, Output, Parts, Scratch, ScratchSizes,
};
use weft_core::prelude::*;

/// Owned layers of a random network.
struct Layers {
    w: Vec<Vec<i8>>,
    b: Vec<Vec<i32>>,
    r: Vec<Vec<u8>>,
    res: Vec<bool>,
}

/// `(inputs, hidden, outputs, residual, head)` of every MLP in network
/// order: node_enc, edge_enc, edge_mlp×R, node_mlp×R, head_x, head_v.
fn shapes(l: usize, rounds: usize) -> Vec<(usize, usize, bool, bool)> {
    let mut s = vec![(NODE_FEATURES, l, false, false), (EDGE_FEATURES, l, false, false)];
    s.extend((0..rounds).map(|_| (3 * l, l, true, false)));
    s.extend((0..rounds).map(|_| (2 * l, l, true, false)));
    s.extend([(l, 3, false, true), (l, 3, false, true)]);
    s
}

fn random_layers(rng: &mut Rng, l: usize, rounds: usize) -> Layers {
    let mut layers = Layers { w: vec![], b: vec![], r: vec![], res: vec![] };
    for (inputs, outputs, residual, head) in shapes(l, rounds) {
        for (i, o, requant) in [(inputs, l, true), (l, outputs, !head)] {
            layers.w.push((0..i * o).map(|_| (rng.next_u64() % 255) as i8 as i16 as i8).collect());
            layers.b.push((0..o).map(|_| (rng.next_u64() % 2001) as i32 - 1000).collect());
            // Shifts of 6 or 7: activations of a few tens, some saturating.
            layers.r.push(if requant { (0..o).map(|_| 6 + (rng.next_u64() % 2) as u8).collect() } else { vec![] });
        }
        layers.res.push(residual);
    }
    layers
}

/// A network of `layers`; with `odd`, the edge features that turn over
/// with the edge's direction are quantised without offset (as trained
/// networks' are), which lets the forward pass take an edge's other
/// direction from the first ([`int8::Inputs::reversed`]).
fn network<'a>(layers: &'a Layers, l: usize, rounds: usize, mlps: &'a mut Vec<Mlp<'a>>, odd: bool) -> Network<'a> {
    let lin = |k: usize, inputs: usize, outputs: usize| Linear {
        inputs,
        outputs,
        weights: &layers.w[k],
        bias: &layers.b[k],
        shift: &layers.r[k],
        wide: &[],
    };
    for (m, (inputs, outputs, _, _)) in shapes(l, rounds).into_iter().enumerate() {
        mlps.push(Mlp { l1: lin(2 * m, inputs, l), l2: lin(2 * m + 1, l, outputs), residual: layers.res[m] });
    }
    let mlps: &'a [Mlp<'a>] = mlps;
    let gain = |k: usize| Input { offset: 0.01 * k as f32, gain: 40.0 + k as f32 };
    // The material's logarithms (−5 to 3) about their middle.
    let material = |k: usize| (11..features::MATERIAL_NODE_FEATURES).contains(&k);
    let node_gain = |k: usize| match k {
        _ if material(k) => Input { offset: -1.0, gain: 20.0 },
        // The velocity change and the air's velocity about zero.
        _ if k >= features::MATERIAL_NODE_FEATURES => Input { offset: 0.0, gain: 40.0 },
        _ => gain(k),
    };
    Network {
        latent: l,
        radius: 0.11,
        coarse: weft_core::model::CoarseGrain::NONE,
        node_in: core::array::from_fn(node_gain),
        edge_in: core::array::from_fn(|k| {
            if odd && features::TURNS_OVER[k] {
                Input { offset: 0.0, ..gain(k) }
            } else {
                gain(k)
            }
        }),
        mlps: Parts {
            node_enc: mlps[0],
            edge_enc: mlps[1],
            edge_mlp: &mlps[2..2 + rounds],
            node_mlp: &mlps[2 + rounds..2 + 2 * rounds],
            head_x: mlps[2 + 2 * rounds],
            head_v: mlps[3 + 2 * rounds],
        },
        out: core::array::from_fn(|k| Output { scale: 1e-4 * (k + 1) as f32, offset: -0.001 * k as f32 }),
        guard: true,
    }
}

/// The MLP as written: `y = sat((W2 relu((W1 x + b1) >> s1) + b2) >> s2
/// + y_old)`, in i64.
fn ref_mlp(m: &Mlp, x: &[i8], old: Option<&[i8]>) -> (Vec<i8>, Vec<i64>) {
    let affine = |lin: &Linear, x: &[i8]| -> Vec<i64> {
        (0..lin.outputs)
            .map(|o| {
                lin.bias[o] as i64
                    + (0..lin.inputs).map(|k| lin.weights[o * lin.inputs + k] as i64 * x[k] as i64).sum::<i64>()
            })
            .collect()
    };
    let hidden: Vec<i8> = affine(&m.l1, x).iter().zip(m.l1.shift).map(|(a, &s)| (a >> s).clamp(0, 127) as i8).collect();
    let acc = affine(&m.l2, &hidden);
    let y = acc
        .iter()
        .enumerate()
        .map(|(o, a)| {
            let res = old.filter(|_| m.residual).map_or(0, |old| old[o] as i64);
            m.l2.shift.get(o).map_or(0, |&s| (a >> s) + res).clamp(-128, 127) as i8
        })
        .collect();
    (y, acc)
}

/// The forward pass as the method describes it, without optimisations.
/// The network's outputs on `g` computed plainly, with the guard's fade
/// where `guarded`.
fn reference(net: &Network, g: GraphRef, guarded: bool) -> Vec<[f32; 6]> {
    let n = g.x.len();
    let c = features::centroid(g.x);
    let around = g.surroundings(net.radius);
    let node_features = |i: usize| {
        let node = features::NodeState {
            x: g.x[i],
            v: g.v[i],
            v_start: g.v_start[i],
            v_start_prev: g.v_start_prev[i],
            pinned: g.pinned[i] != 0,
        };
        features::node_feature(node, c, &around)
    };
    // The guard: the largest m = |x − offset|·gain over the columns the
    // node encoder reads; full correction up to 127, (254 − m)/127 above,
    // none from 254.
    let l1 = &net.mlps.node_enc.l1;
    let guard: Vec<f32> = (0..n)
        .map(|i| {
            let f = node_features(i);
            let reach = (0..NODE_FEATURES)
                .filter(|&k| (0..l1.outputs).any(|o| l1.weights[o * l1.inputs + k] != 0))
                .map(|k| ((f[k] - net.node_in[k].offset) * net.node_in[k].gain).abs())
                .fold(0.0f32, f32::max);
            if reach <= 127.0 {
                1.0
            } else {
                ((254.0 - reach) / 127.0).clamp(0.0, 1.0)
            }
        })
        .collect();
    let mut h: Vec<Vec<i8>> = (0..n)
        .map(|i| {
            let q: Vec<i8> = node_features(i).iter().zip(&net.node_in).map(|(x, inp)| inp.quantize(*x)).collect();
            ref_mlp(&net.mlps.node_enc, &q, None).0
        })
        .collect();
    let ne = features::edge_count(g.mesh, g.pairs.len());
    let ends: Vec<[NodeId; 2]> = (0..ne).map(|k| features::endpoints_of(g.mesh, g.pairs, k).unwrap()).collect();
    let mut e: Vec<Vec<i8>> = (0..ne)
        .map(|k| {
            let f = features::edge_feature_at(g.mesh, g.x, g.pairs, net.radius, k).unwrap();
            let q: Vec<i8> = f.iter().zip(&net.edge_in).map(|(x, inp)| inp.quantize(*x)).collect();
            ref_mlp(&net.mlps.edge_enc, &q, None).0
        })
        .collect();
    for (em, nm) in net.mlps.rounds_iter() {
        e = (0..ne)
            .map(|k| {
                let [s, r] = ends[k];
                let x = [&e[k][..], &h[s as usize], &h[r as usize]].concat();
                ref_mlp(em, &x, Some(&e[k])).0
            })
            .collect();
        h = (0..n)
            .map(|i| {
                let incoming: Vec<usize> = (0..ne).filter(|&k| ends[k][1] as usize == i).collect();
                let mean: Vec<i8> = (0..net.latent)
                    .map(|ch| {
                        let sum: i64 = incoming.iter().map(|&k| e[k][ch] as i64).sum();
                        let mean = sum as f64 / incoming.len().max(1) as f64; // f64::round: half away from 0
                        mean.round().clamp(-128.0, 127.0) as i8
                    })
                    .collect();
                ref_mlp(nm, &[&h[i][..], &mean].concat(), Some(&h[i])).0
            })
            .collect();
    }
    h.iter()
        .zip(&guard)
        .map(|(hi, &f)| {
            let f = if guarded { f } else { 1.0 };
            let (_, ax) = ref_mlp(&net.mlps.head_x, hi, None);
            let (_, av) = ref_mlp(&net.mlps.head_v, hi, None);
            core::array::from_fn(|k| {
                let acc = if k < 3 { ax[k] } else { av[k - 3] };
                let out = acc as i32 as f32 * net.out[k].scale + net.out[k].offset;
                if f < 1.0 {
                    out * f
                } else {
                    out
                }
            })
        })
        .collect()
}

fn cloth_state(rng: &mut Rng, f: impl FnOnce(&Model, &mut State)) {
    let grid = Grid::horizontal(5, 4, 0.3, 0.2, 0.0);
    let pins = [Pin::fixed(0, Vec3::new(-0.15, 0.0, -0.1))];
    // A sphere just under part of the cloth, so the collider features vary.
    let sphere = [Collider::new(Shape::Sphere { center: Vec3::new(0.1, -0.2, 0.0), radius: 0.19 })];
    let scene = Scene { pins: &pins, colliders: &sphere, ..Scene::default() };
    let mut x0 = vec![];
    let mut v0 = vec![];
    let mut v_before = vec![];
    for _ in 0..20 {
        x0.push(rng.vec3(0.01));
        v0.push(rng.vec3(0.5));
        v_before.push(rng.vec3(0.5));
    }
    with_cloth(&grid, Material::COTTON, scene, StepParams::default(), 64, |model, state| {
        let x: Vec<Vec3> = state.positions().iter().zip(&x0).map(|(p, d)| *p + *d).collect();
        state.set_positions(&x).unwrap();
        state.set_velocities(&v0).unwrap();
        state.set_start_velocities(&v_before).unwrap();
        // A step, so that the velocity change the network reads is the
        // step's, different at every node (and the history, from the
        // velocities of the frame before).
        weft_core::physics::step(model, state).unwrap();
        f(model, state)
    });
}

#[test]
fn forward_matches_the_plain_reference() {
    for seed in 1..=6u64 {
        // Random networks whose outputs vary over the nodes (asserted below;
        // about one in six random ones of these sizes saturates to one output).
        let mut rng = Rng(0x5ef0 + seed);
        let (l, rounds) = [(4, 1), (8, 2), (5, 3), (16, 2), (3, 1), (12, 2)][seed as usize - 1];
        let layers = random_layers(&mut rng, l, rounds);
        let mut mlps = Vec::new();
        let odd = seed % 2 == 0;
        let net = network(&layers, l, rounds, &mut mlps, odd);
        let checked = net.check().unwrap();
        cloth_state(&mut rng, |model, state| {
            state.find_pairs(&model.mesh, net.radius, 64).unwrap();
            assert!(!state.pairs().is_empty(), "the test wants dynamic edges");
            let n = state.node_count();
            let sizes = ScratchSizes::new(model.mesh.counts(), 64, l);
            let (mut latents, mut sums) = (vec![0i8; sizes.latents], vec![0i32; sizes.sums]);
            let (mut dx, mut dv) = (vec![Vec3::ZERO; n], vec![Vec3::ZERO; n]);
            let g = GraphRef::of(model, state);
            int8::forward(checked, g, &mut latents, &mut sums, &mut dx, &mut dv).unwrap();
            let want = reference(&net, g, false);
            // An edge's other direction from the first: the same inputs,
            // where the network's quantisation allows it.
            let inputs = int8::Inputs::new(&net, &g);
            for k in (0..features::edge_count(g.mesh, g.pairs.len())).step_by(2) {
                let (first, second) = (inputs.edge(k).unwrap(), inputs.edge(k + 1).unwrap());
                assert_eq!(inputs.reversed(first), odd.then_some(second), "seed {seed}, edge {k}");
                assert_eq!(inputs.edge_after(k + 1, Some(first)), Ok(second));
            }
            let mut distinct = std::collections::BTreeSet::new();
            for i in 0..n {
                let got = [dx[i].x, dx[i].y, dx[i].z, dv[i].x, dv[i].y, dv[i].z];
                assert_eq!(got.map(f32::to_bits), want[i].map(f32::to_bits), "seed {seed}, node {i}");
                distinct.insert(got.map(f32::to_bits));
            }
            assert!(distinct.len() > n / 2, "seed {seed}: outputs barely depend on the node");
        });
    }
}

#[test]
fn bad_networks_and_small_scratch_are_typed_errors() {
    let mut rng = Rng(77);
    let layers = random_layers(&mut rng, 4, 1);
    let mut mlps = Vec::new();
    let net = network(&layers, 4, 1, &mut mlps, false);
    let mut broken = net;
    broken.latent = 5;
    assert_eq!(broken.validate(), Err(GnnError::BadNetwork { what: "layer shapes" }));
    let mut broken = net;
    broken.mlps.node_mlp = &[];
    assert_eq!(broken.validate(), Err(GnnError::BadNetwork { what: "rounds" }));
    let mut broken = net;
    broken.radius = f32::NAN;
    assert_eq!(broken.validate(), Err(GnnError::BadNetwork { what: "radius" }));
    assert_eq!(broken.validate().unwrap_err().to_string(), "invalid network: radius out of bounds or not fitting");
    for bad in [0.0, 1.5, f32::NAN] {
        let mut broken = net;
        broken.coarse.stretch = bad;
        assert_eq!(broken.validate(), Err(GnnError::BadNetwork { what: "coarse grain" }));
    }
    // A broken network cannot be checked, so no step can run it.
    assert!(matches!(broken.check(), Err(GnnError::BadNetwork { .. })));
    let checked = net.check().unwrap();

    cloth_state(&mut rng, |model, state| {
        let before = state.positions().to_vec();
        let mut latents = vec![0i8; 10];
        let err = weft_core::step::step2(model, state, checked, &mut Scratch { latents: &mut latents });
        assert!(matches!(err, Err(GnnError::Scratch { what: "latents", .. })), "{err:?}");
        assert_eq!(state.positions(), &before[..], "a failed correction leaves the state");

        // A graph with a pair outside the mesh, and short matvec inputs.
        let sizes = ScratchSizes::new(model.mesh.counts(), 1, 4);
        let (mut l8, mut s32) = (vec![0i8; sizes.latents], vec![0i32; sizes.sums]);
        let n = state.node_count();
        let (mut dx, mut dv) = (vec![Vec3::ZERO; n], vec![Vec3::ZERO; n]);
        let bad = [[0, n as NodeId]];
        let g = GraphRef { pairs: &bad, ..GraphRef::of(model, state) };
        let err = int8::forward(checked, g, &mut l8, &mut s32, &mut dx, &mut dv);
        assert_eq!(err, Err(GnnError::BadPair { pair: 0 }));
        // The inputs past the graph's nodes and edges are errors, not panics.
        let g = GraphRef::of(model, state);
        let inputs = int8::Inputs::new(&net, &g);
        assert!(inputs.node(n - 1).is_ok());
        assert_eq!(inputs.node(n), Err(GnnError::MeshMismatch));
        let edges = features::edge_count(&model.mesh, g.pairs.len());
        assert!(inputs.edge(edges - 1).is_ok());
        assert!(matches!(inputs.edge(edges), Err(GnnError::MeshMismatch)));
        let mut acc = [0i32; 4];
        assert!(matches!(net.mlps.node_enc.l1.matvec(&[1, 2], &mut acc), Err(GnnError::Length { what: "input", .. })));
        assert_eq!(net.mlps.node_enc.l1.matvec(&[1; NODE_FEATURES], &mut acc), Ok(()));

        let sizes = ScratchSizes::new(model.mesh.counts(), 64, 4);
        let mut latents = vec![0i8; sizes.latents];
        let report = weft_core::step::step2(model, state, checked, &mut Scratch { latents: &mut latents }).unwrap();
        assert_eq!(report.dynamic_edges, state.pairs().len());
        assert_eq!(state.positions()[0], before[0], "pinned nodes are not corrected");
    });
}

/// The corrected step's guard: [`weft_core::step::step2`] adds the network's
/// corrections faded by the guard as derived plainly (full where a node's
/// inputs stay within their calibrated range, none from twice it), and
/// the guard's three regimes all occur on these states.
#[test]
fn the_guard_fades_corrections_as_inputs_leave_their_range() {
    let mut regimes = [0usize; 3];
    for (seed, scale) in [(77u64, 1.0f32), (78, 0.5), (79, 0.4), (80, 0.3), (81, 0.25), (82, 0.1)] {
        let mut rng = Rng(seed);
        let layers = random_layers(&mut rng, 4, 1);
        let mut mlps = Vec::new();
        let built = network(&layers, 4, 1, &mut mlps, false);
        // Narrower input gains: more of the cloth within range.
        let net = Network { node_in: built.node_in.map(|i| Input { gain: i.gain * scale, ..i }), ..built };
        let checked = net.check().unwrap();
        cloth_state(&mut rng, |model, state| {
            state.find_pairs(&model.mesh, net.radius, 64).unwrap();
            let before = state.positions().to_vec();
            let want = reference(&net, GraphRef::of(model, state), true);
            let plain = reference(&net, GraphRef::of(model, state), false);
            let sizes = ScratchSizes::new(model.mesh.counts(), 64, 4);
            let mut latents = vec![0i8; sizes.latents];
            weft_core::step::step2(model, state, checked, &mut Scratch { latents: &mut latents }).unwrap();
            for (i, (x, w)) in state.positions().iter().zip(&want).enumerate() {
                let free = state.pinned()[i] == 0;
                let dx = if free { Vec3::new(w[0], w[1], w[2]) } else { Vec3::ZERO };
                assert_eq!(*x, before[i] + dx, "seed {seed}, node {i}");
                let p = &plain[i];
                regimes[if w == p {
                    0
                } else if w.iter().all(|&c| c == 0.0) {
                    2
                } else {
                    1
                }] += usize::from(free && p.iter().any(|&c| c != 0.0));
            }
        });
    }
    println!("nodes corrected in full, faded, not at all: {regimes:?}");
    assert!(regimes.iter().all(|&r| r > 0), "each regime occurs: {regimes:?}");
}

/// The input quantisation is `round((x − offset)·gain)` half away from
/// zero and saturated, as `libm::roundf` defines it, on every float near
/// the rounding boundaries and on random ones.
#[test]
fn input_quantisation_rounds_half_away_from_zero() {
    use weft_core::gnn::int8::Input;
    let reference = |y: f32| -> i8 { (libm::roundf(y) as i32).clamp(-127, 127) as i8 };
    let unit = Input { offset: 0.0, gain: 1.0 };
    let mut ys: Vec<f32> = vec![0.0, -0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, f32::MIN, 1e-40];
    for k in -130i32..=130 {
        let h = k as f32 + 0.5;
        for y in [h, k as f32] {
            ys.extend([y, f32::from_bits(y.to_bits() + 1), f32::from_bits(y.to_bits().wrapping_sub(1))]);
        }
    }
    let mut seed = 0x9e37_79b9u32;
    for _ in 0..200_000 {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        ys.push(f32::from_bits(seed) % 300.0);
    }
    for y in ys {
        let (got, want) = (unit.quantize(y), reference(y));
        assert!(got == want || (y.is_nan() && got == 0), "y = {y:e} ({:08x}): {got} against {want}", y.to_bits());
    }
}

#[test]
fn the_network_takes_at_most_its_pairs_per_node_and_counts_the_rest() {
    let mut rng = Rng(11);
    let layers = random_layers(&mut rng, 4, 1);
    let mut mlps = Vec::new();
    let net = network(&layers, 4, 1, &mut mlps, false);
    let checked = net.check().unwrap();
    // A 5×4 cloth 2 cm across: every node within the network's radius of
    // every other, far more pairs than 4 per node.
    let grid = Grid::horizontal(5, 4, 0.02, 0.015, 0.0);
    let n = 20;
    let all = n * (n - 1) / 2;
    with_cloth(&grid, Material::COTTON, Scene::default(), StepParams::default(), 64 * n, |model, state| {
        let statics = model.mesh.edges().len();
        assert!(net.radius > 0.03, "the test wants every node within the radius");
        let found = state.find_pairs(&model.mesh, net.radius, usize::MAX).unwrap();
        assert_eq!((found.pairs, found.dropped), (all - statics, 0));
        // A cap of 7: the first 7 kept, the rest dropped and counted.
        let before = state.warnings.dropped_pairs;
        let found = state.find_pairs(&model.mesh, net.radius, 7).unwrap();
        assert_eq!((found.pairs, found.dropped, state.pairs().len()), (7, all - statics - 7, 7));
        assert_eq!(state.warnings.dropped_pairs - before, (all - statics - 7) as u64);
        // The network's own cap.
        let found = weft_core::step::dynamic_edges(model, state, checked).unwrap();
        let cap = int8::PAIRS_PER_NODE * n;
        assert!(all - statics > cap);
        assert_eq!((found.pairs, found.dropped), (cap, all - statics - cap));
    });
}

/// The widened weights pair up with the activations as the DSP kernel
/// packs them (`(x0, x2)`, `(x1, x3)` of every four, a last block of
/// fewer than eight inputs padded with zeros): summing the products of
/// each word's halves, as `SMLAD` does, gives every row's dot product.
#[test]
fn widened_weights_pair_with_the_packed_activations() {
    let mut rng = Rng(0x91de);
    let half = |w: u32, hi: bool| (if hi { w >> 16 } else { w & 0xffff }) as u16 as i16 as i32;
    for (inputs, outputs) in [(8, 1), (16, 16), (48, 16), (32, 5), (24, 3), (15, 16), (10, 16), (3, 2)] {
        let w: Vec<i8> = (0..inputs * outputs).map(|_| rng.next_u64() as i8).collect();
        let mut x: Vec<i8> = (0..inputs).map(|_| (rng.next_u64() as i8).max(-127)).collect();
        let mut wide = vec![0u32; int8::wide_len(inputs, outputs)];
        assert_eq!(int8::widen(&w, inputs, outputs, &mut wide), wide.len());
        let blocks = inputs.div_ceil(8);
        assert_eq!(wide.len(), 4 * blocks * outputs);
        x.resize(8 * blocks, 0);
        let packed: Vec<u32> = x
            .chunks_exact(4)
            .flat_map(|g| [(g[0], g[2]), (g[1], g[3])])
            .map(|(a, b)| (a as i16 as u16 as u32) | ((b as i16 as u16 as u32) << 16))
            .collect();
        for o in 0..outputs {
            let mut smlad = 0i32;
            for b in 0..blocks {
                let words = &wide[4 * (b * outputs + o)..][..4];
                for (k, &wk) in words.iter().enumerate() {
                    let p = packed[4 * b + k];
                    smlad += half(wk, false) * half(p, false) + half(wk, true) * half(p, true);
                }
            }
            assert_eq!(smlad, int8::dot(&w[o * inputs..][..inputs], &x[..inputs]), "{inputs}×{outputs}, row {o}");
        }
    }
    // The padding carries zero weights: inputs 15 of two rows of 15 ones.
    let mut wide = [0u32; 16];
    assert_eq!(int8::widen(&[1; 30], 15, 2, &mut wide), 16);
    // Block 1, rows 0 and 1: their fourth words are (w13, w15), w15 padding.
    assert_eq!((wide[11], wide[15]), (1, 1));
    assert_eq!(int8::widen(&[1; 30], 15, 2, &mut [0; 15]), 0, "too short an output");
}

/// A network carrying widened weights is checked against its own int8
/// weights: the right ones pass, one changed word fails the check.
#[test]
fn widened_weights_that_differ_from_the_weights_fail_the_check() {
    let mut rng = Rng(0x3a1d);
    let (l, rounds) = (16, 2);
    let layers = random_layers(&mut rng, l, rounds);
    let mut mlps = Vec::new();
    let net = network(&layers, l, rounds, &mut mlps, false);
    let layer = net.mlps.edge_mlp[1].l2;
    let mut wide = vec![0u32; int8::wide_len(layer.inputs, layer.outputs)];
    int8::widen(layer.weights, layer.inputs, layer.outputs, &mut wide);
    let with = |wide: &[u32]| {
        let mut edge = net.mlps.edge_mlp.to_vec();
        edge[1].l2.wide = wide;
        let mut n = net;
        n.mlps.edge_mlp = &edge[..];
        n.validate()
    };
    assert_eq!(with(&wide), Ok(()));
    let mut changed = wide.clone();
    changed[37] ^= 1 << 20;
    assert_eq!(with(&changed), Err(GnnError::BadNetwork { what: "layer shapes" }));
    assert_eq!(with(&wide[..wide.len() - 4]), Err(GnnError::BadNetwork { what: "layer shapes" }));
    // A lone layer with widened weights of the wrong length is refused
    // by its product, not run.
    let short = Linear { wide: &wide[..8], ..layer };
    let mut acc = [0i32; 16];
    assert_eq!(short.matvec(&[1; 16], &mut acc), Err(GnnError::BadNetwork { what: "layer shape" }));
    assert_eq!(Linear { wide: &wide, ..layer }.matvec(&[1; 16], &mut acc), Ok(()));
}
