//! Where a corrected step's cost and accuracy go: for each trajectory of a
//! split, windows of 50 frames from every 20th (as `weft eval --horizons`
//! starts them), plain and int8-corrected — or, with a float model
//! (`MODEL` without `.q8`), its whole correction, its velocity part alone
//! and its position part folded into the velocity (`Δv + Δx / h`) — with
//! the mean errors at 1 / 10 / 50 frames against plain's, and the CG
//! iterations and linear solves of each window's first 10 frames (more
//! solves than frames where the energy check split a step); `VERBOSE=1`
//! prints every window. `GAIN` overrides the float model's gain.
//! `BIAS=MODEL.q8`: the int8 velocity corrections against the float
//! network's on its own rollouts (`DEBIAS_OUT=FILE`: the int8 file with its
//! velocity offsets moved by the mean difference).
//! (`cargo run --release -p weft-host --example corrected_cost -- DATA MODEL[.q8] [SPLIT] [FAMILY [GAIN]]`)
use weft_core::prelude::*;
use weft_host::learn::data;
use weft_host::learn::eval::horizons::START_EVERY;
use weft_host::learn::network::{graph_of, Trained};
use weft_host::sim::{self, corrector, Restart};

/// The float network's corrections with parts left out.
struct Parted<'m> {
    model: &'m Trained,
    x: bool,
    v: bool,
    /// The position correction folded into the velocity's (`Δv + Δx / h`,
    /// no position correction).
    fold: bool,
}

impl corrector::Corrector for Parted<'_> {
    fn pairs(&self, nodes: usize) -> usize {
        self.model.meta.config.pairs_per_node * nodes
    }
    fn correct(&mut self, model: &Model, state: &mut State) -> anyhow::Result<usize> {
        let g = graph_of(model, state, &self.model.meta.config)?;
        let (mut dx, mut dv) = self.model.correct(&g, &candle_core::Device::Cpu)?;
        if self.fold {
            let h = model.params.dt;
            dv.iter_mut().zip(&dx).for_each(|(v, d)| *v += *d * (1.0 / h));
            dx.iter_mut().for_each(|d| *d = Vec3::ZERO);
        } else if !self.x {
            dx.iter_mut().for_each(|d| *d = Vec3::ZERO);
        }
        if !self.v {
            dv.iter_mut().for_each(|d| *d = Vec3::ZERO);
        }
        state.apply_correction(&dx, &dv)?;
        Ok(0)
    }
}

/// The float network's corrections, with the int8 network's on the same
/// states beside them: the mean and mean square of their velocity
/// difference per axis (free nodes).
struct Compare<'m> {
    model: &'m Trained,
    net: &'m weft_weights::format::NetworkData,
    diff: [f64; 3],
    sq: [f64; 3],
    ref_sq: [f64; 3],
    n: f64,
}

impl corrector::Corrector for Compare<'_> {
    fn pairs(&self, nodes: usize) -> usize {
        self.model.meta.config.pairs_per_node * nodes
    }
    fn correct(&mut self, model: &Model, state: &mut State) -> anyhow::Result<usize> {
        use weft_core::gnn::int8::{self, GraphRef, ScratchSizes};
        let g = graph_of(model, state, &self.model.meta.config)?;
        let (dx, dv) = self.model.correct(&g, &candle_core::Device::Cpu)?;
        let n = model.mesh.node_count();
        let sizes = ScratchSizes::new(model.mesh.counts(), state.pairs().len(), self.net.latent);
        let (mut latents, mut sums) = (vec![0i8; sizes.latents], vec![0i32; sizes.sums]);
        let (mut qx, mut qv) = (vec![Vec3::ZERO; n], vec![Vec3::ZERO; n]);
        let gr = GraphRef::of(model, state);
        self.net
            .with_network(|net| int8::forward(net.check()?, gr, &mut latents, &mut sums, &mut qx, &mut qv))
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        for ((f, q), &free) in dv.iter().zip(&qv).zip(&g.free) {
            if free == 0.0 {
                continue;
            }
            let d = *f - *q;
            for (k, (dk, fk)) in [d.x, d.y, d.z].into_iter().zip([f.x, f.y, f.z]).enumerate() {
                self.diff[k] += dk as f64;
                self.sq[k] += (dk * dk) as f64;
                self.ref_sq[k] += (fk * fk) as f64;
            }
            self.n += 1.0;
        }
        let _ = qx;
        state.apply_correction(&dx, &dv)?;
        Ok(0)
    }
}

fn main() -> anyhow::Result<()> {
    if let Ok(q8) = std::env::var("BIAS") {
        return bias(&std::env::args().collect::<Vec<_>>(), std::path::Path::new(&q8));
    }
    let args: Vec<String> = std::env::args().collect();
    let (data, q8) = (std::path::Path::new(&args[1]), std::path::Path::new(&args[2]));
    let split = args.get(3).map_or("test", |s| s.as_str());
    let family = args.get(4);
    let float = q8.extension().is_none_or(|e| e != "q8");
    let mut trained = if float { Some(Trained::load(q8, &candle_core::Device::Cpu)?) } else { None };
    if let (Some(m), Some(g)) = (trained.as_mut(), args.get(5).and_then(|g| g.parse().ok())) {
        m.meta.gain = g;
    }
    let verbose = std::env::var_os("VERBOSE").is_some();
    // Per column: sums of h1, h10, h50 errors, their window counts, CG of the first 10 frames.
    let mut sums: Vec<([f64; 3], [usize; 3], u64, u64)> = Vec::new();
    let net = if float { None } else { Some(weft_host::learn::quantise::load(q8)?) };
    for t in data::load_split(data, Some(split))? {
        if family.is_some_and(|f| !f.is_empty() && f != t.family.name()) {
            continue;
        }
        let frames = t.x.len() - 1;
        let mut rows = Vec::new();
        for s in (0..frames).step_by(START_EVERY) {
            let mut scn = t.scenario.clone();
            let len = 50.min(frames - s);
            scn.time.steps = len as u32;
            let restart =
                Restart { x: &t.x[s], v: &t.v[s], v_before: (s > 0).then(|| t.v[s - 1].as_slice()), frame: s as u32 };
            let one = |c: &mut dyn corrector::Corrector| {
                let mut errs = Vec::new();
                let sum = sim::run_from(&scn, Some(restart), false, c, |f, _, st| {
                    if f > 0 {
                        errs.push(weft_host::learn::data::metrics::rmse(st.positions(), &t.x[s + f as usize]));
                    }
                    Ok(())
                })
                .ok()?;
                let f = &sum.frames[1..11.min(sum.frames.len())];
                let m = |h: usize| weft_host::learn::data::metrics::mean(&errs[..h.min(errs.len())]);
                Some((
                    f.iter().map(|f| f.cg_iterations).sum::<u32>(),
                    f.iter().map(|f| f.solves).sum::<u32>(),
                    f.iter().map(|f| f.max_strain).fold(0.0f32, f32::max),
                    sum.energy_check_failed,
                    [m(1), m(10), if len == 50 { m(50) } else { f32::NAN }],
                ))
            };
            let plain = one(&mut corrector::Plain);
            let row = match (&net, &trained) {
                (Some(n), _) => vec![one(&mut corrector::Int8::new(n))],
                (_, Some(m)) => [(true, true, false), (false, true, false), (false, true, true)]
                    .map(|(x, v, fold)| one(&mut Parted { model: m, x, v, fold }))
                    .to_vec(),
                _ => vec![],
            };
            let all: Vec<_> = std::iter::once(&plain).chain(row.iter()).collect();
            sums.resize(all.len(), Default::default());
            for (acc, r) in sums.iter_mut().zip(&all) {
                if let Some((cg, solves, _, _, e)) = r {
                    for (k, ek) in e.iter().enumerate() {
                        if ek.is_finite() {
                            acc.0[k] += *ek as f64;
                            acc.1[k] += 1;
                        }
                    }
                    acc.2 += *cg as u64;
                    acc.3 += *solves as u64;
                }
            }
            rows.push((s, plain, row));
        }
        if !verbose {
            continue;
        }
        let what = if float { "float; float Δv only; float Δv + Δx / h" } else { "int8" };
        println!(
            "{} {}: start (plain | {what}): CG, solves, max strain, energy checks failed",
            t.family.name(),
            t.seed
        );
        for (s, p, c) in rows {
            println!("  {s:3}: {p:?} | {c:?}");
        }
    }
    let names: &[&str] =
        if float { &["plain", "float", "float Δv only", "float Δv + Δx/h"] } else { &["plain", "int8"] };
    let mean = |a: &([f64; 3], [usize; 3], u64, u64), k: usize| a.0[k] / a.1[k].max(1) as f64;
    if let Some(p) = sums.first().cloned() {
        println!("column               × plain at 1 / 10 / 50   CG per frame (first 10)   solves per frame");
        for (n, a) in names.iter().zip(&sums) {
            let w = a.1[1].max(1) as f64 * 10.0;
            println!(
                "{n:<20} {:.3} / {:.3} / {:.3}   {:.1}   {:.2}",
                mean(a, 0) / mean(&p, 0),
                mean(a, 1) / mean(&p, 1),
                mean(a, 2) / mean(&p, 2),
                a.2 as f64 / w,
                a.3 as f64 / w
            );
        }
    }
    Ok(())
}

/// `BIAS=MODEL.q8 corrected_cost DATA MODEL SPLIT`: the int8 network's
/// velocity corrections against the float network's on the float
/// network's own rollouts (10-frame windows every 20 frames).
fn bias(args: &[String], q8: &std::path::Path) -> anyhow::Result<()> {
    let (data, model) = (std::path::Path::new(&args[1]), std::path::Path::new(&args[2]));
    let split = args.get(3).map_or("val", |s| s.as_str());
    let trained = Trained::load(model, &candle_core::Device::Cpu)?;
    let net = weft_host::learn::quantise::load(q8)?;
    let mut c = Compare { model: &trained, net: &net, diff: [0.0; 3], sq: [0.0; 3], ref_sq: [0.0; 3], n: 0.0 };
    for t in data::load_split(data, Some(split))? {
        let frames = t.x.len() - 1;
        for s in (0..frames).step_by(START_EVERY) {
            let mut scn = t.scenario.clone();
            scn.time.steps = 10.min(frames - s) as u32;
            let restart =
                Restart { x: &t.x[s], v: &t.v[s], v_before: (s > 0).then(|| t.v[s - 1].as_slice()), frame: s as u32 };
            let _ = sim::run_from(&scn, Some(restart), false, &mut c, |_, _, _| Ok(()));
        }
    }
    let n = c.n.max(1.0);
    if let Some(out) = std::env::var_os("DEBIAS_OUT") {
        // The int8 network with its velocity offsets moved by the mean
        // difference.
        let mut fixed = net.clone();
        for k in 0..3 {
            fixed.out[3 + k].offset += (c.diff[k] / n) as f32;
        }
        std::fs::write(&out, fixed.to_bytes())?;
    }
    for k in 0..3 {
        println!(
            "axis {k}: mean (float − int8) Δv {:+.3e} m/s, RMS difference {:.3e}, RMS float Δv {:.3e} ({} node-steps)",
            c.diff[k] / n,
            (c.sq[k] / n).sqrt(),
            (c.ref_sq[k] / n).sqrt(),
            c.n
        );
    }
    Ok(())
}
