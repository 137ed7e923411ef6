//! The trainer fits its teacher: a new network trained on fixed teacher
//! samples predicts the uniform correction of a free fall, and most of a
//! hanging cloth's; the fit's measure is the share of the targets
//! explained ([`weft_host::learn::train::fit`]).
use weft_host::learn::data::families::{self, Family};
use weft_host::learn::data::DatasetSpec;
use weft_host::learn::network::teacher::collect;
use weft_host::learn::network::{self, FrameClass, GnnConfig, Graph, ModelMeta, Noise, Trained};
use weft_host::learn::train::fit::{self, train_on_samples, SampleTraining};

fn cfg(latent: usize, rounds: usize) -> GnnConfig {
    GnnConfig { latent, rounds, ..GnnConfig::default() }
}

/// `frames` frames of a family's scene from its start, a teacher sample
/// every frame.
fn scene_samples(
    family: Family,
    seed: u64,
    frames: u32,
    edit: impl Fn(&mut weft_host::sim::scenario::Scenario),
) -> Vec<Graph> {
    let spec = DatasetSpec::default();
    let mut scn = families::scenario(family, seed, 8, frames, spec.dt);
    edit(&mut scn);
    collect(&scn, &cfg(16, 1), None, frames, 1)
}

/// A fold scene with nothing in its way, no pins, wind or kicks: a free
/// fall, `frames` samples.
fn free_fall(frames: u32) -> Vec<Graph> {
    scene_samples(Family::Fold, 0, frames, |s| {
        s.colliders.clear();
        s.pins.clear();
        s.wind = None;
        s.kicks.clear();
    })
}

fn model_for(cfg: GnnConfig, norm_from: &[Graph]) -> Trained {
    let meta = ModelMeta::new(cfg, network::normalizer(norm_from), Noise { position: 0.0, velocity: 0.0 });
    let m = Trained::seeded(meta, 1, &candle_core::Device::Cpu).unwrap();
    m.zero_heads().unwrap();
    m
}

#[test]
fn a_new_network_learns_the_uniform_correction_of_a_free_fall() {
    // A cloth dropped with nothing in the way: the teacher's correction is
    // the same at every node (backward Euler's g·dt²/2 a frame).
    let fall = free_fall(12);
    assert_eq!(fall.len(), 12);
    assert!(fall.iter().all(|g| g.class == FrameClass::Free && g.family == Some(Family::Fold)));
    let t = fall[3].targets[0][1];
    assert!(fall[3].targets.iter().all(|r| (r[1] - t).abs() < 0.05 * t.abs()), "a uniform target");
    // The normaliser from a broad set, as a run's: the correction is not the
    // targets' mean, which a network that outputs nothing would predict.
    let mut broad = fall.clone();
    broad.extend(scene_samples(Family::Hang, 0, 12, |_| {}));
    broad.extend(scene_samples(Family::Drape, 0, 12, |_| {}));
    let m = model_for(cfg(16, 1), &broad);
    let before = fit::measure(&m, &fall).unwrap();
    train_on_samples(&m, &fall, SampleTraining::constant(300, 4, 1e-3)).unwrap();
    let after = fit::measure(&m, &fall).unwrap();
    let (b, a) = (before.get("all").unwrap().dx.unwrap(), after.get("all").unwrap().dx.unwrap());
    eprintln!("free fall: share of Δx {b:.3} → {a:.3}");
    assert!(a >= 0.95, "share of the free fall's Δx {b:.3} → {a:.3}");
}

#[test]
fn a_new_network_learns_most_of_a_hanging_cloths_correction() {
    // A swinging hang: more than half of its base steps branch (a Newton
    // correction), the rest move freely. The network of latent 16 × 1
    // round reaches 0.94 / 0.85 of Δx / Δv in 4000 steps; latent 32 × 2
    // rounds 0.97 / 0.92 in 1000.
    let hang = scene_samples(Family::Hang, 0, 40, |_| {});
    let m = model_for(cfg(32, 2), &hang);
    train_on_samples(&m, &hang, SampleTraining::constant(1000, 8, 3e-3)).unwrap();
    let after = fit::measure(&m, &hang).unwrap();
    let all = after.get("all").unwrap();
    eprintln!("hang: {}", after.line());
    assert!(all.dx.unwrap() >= 0.9 && all.dv.unwrap() >= 0.9, "{}", after.line());
}

/// A correction that adds nothing, through the state's own correction path.
struct Zero;

impl weft_host::sim::corrector::Corrector for Zero {
    fn pairs(&self, _: usize) -> usize {
        0
    }
    fn correct(&mut self, _: &weft_core::model::Model, state: &mut weft_core::prelude::State) -> anyhow::Result<usize> {
        let zero = vec![weft_core::math::Vec3::ZERO; state.node_count()];
        state.apply_correction(&zero, &zero)?;
        Ok(0)
    }
}

/// A corrected BDF2 step stays BDF2: a correction of zero on either base
/// step gives the plain step bit for bit, so that samples from corrected
/// and plain rollouts of a BDF2 base label the same step.
#[test]
fn a_zero_correction_leaves_either_base_step_as_it_is() {
    use weft_host::sim::scenario::IntegratorSpec;
    for integrator in [IntegratorSpec::BackwardEuler, IntegratorSpec::Bdf2] {
        let spec = DatasetSpec::default();
        let mut scn = families::scenario(Family::Hang, 0, 8, 12, spec.dt);
        scn.solver.integrator = integrator;
        let frames = |c: &mut dyn weft_host::sim::corrector::Corrector| {
            let mut out = Vec::new();
            weft_host::sim::run(&scn, false, c, |_, _, st| {
                out.push((st.positions().to_vec(), st.velocities().to_vec()));
                Ok(())
            })
            .unwrap();
            out
        };
        let plain = frames(&mut weft_host::sim::corrector::Plain);
        let zero = frames(&mut Zero);
        assert_eq!(plain.len(), 13);
        for (k, (a, b)) in plain.iter().zip(&zero).enumerate() {
            assert!(a == b, "{integrator:?}: frame {k} differs");
        }
    }
}

/// The field head (`GnnConfig::field_head`, a correction smooth over the
/// whole cloth, float only): a fresh network with it predicts nothing, as
/// one without it does; it learns the free fall's uniform correction; and
/// the quantiser refuses it.
#[test]
fn the_field_head_starts_at_zero_learns_and_is_not_quantised() {
    let fall = free_fall(8);
    let mut broad = fall.clone();
    broad.extend(scene_samples(Family::Hang, 0, 8, |_| {}));
    let m = model_for(GnnConfig { field_head: true, ..cfg(16, 1) }, &broad);
    assert!(m.gnn.field.is_some());
    let dev = candle_core::Device::Cpu;
    let (dx, dv) = m.gnn.correct(&fall[2], &m.meta.normalizer, &dev).unwrap();
    let t = &m.meta.normalizer.target;
    // Zero heads give the targets' mean (the normaliser's offset) at every free node.
    for (x, v) in dx.iter().zip(&dv) {
        for k in 0..3 {
            assert!((x.get(k) - t.mean[k]).abs() <= 1e-6 * t.std[k].max(1e-12), "Δx {x:?}");
            assert!((v.get(k) - t.mean[3 + k]).abs() <= 1e-6 * t.std[3 + k].max(1e-12), "Δv {v:?}");
        }
    }
    train_on_samples(&m, &fall, SampleTraining::constant(300, 4, 1e-3)).unwrap();
    let share = fit::measure(&m, &fall).unwrap().get("all").unwrap().dx.unwrap();
    assert!(share >= 0.95, "share of the free fall's Δx {share:.3}");
    let refused = weft_host::learn::quantise::FloatNet::from_trained(&m).err().map(|e| e.to_string());
    assert!(refused.is_some_and(|e| e.contains("field head")));
}

/// The step's residual (`GnnConfig::residual_inputs`, in the history's
/// columns): zero where the linearised step is exact (a free fall from
/// rest, whose forces do not change over the step), and where the cloth deforms, what
/// the linearisation missed, which shrinks faster than the step: halving
/// the step of a hanging cloth's first frames shrinks it by more than half.
/// The quantiser refuses a network that reads it.
#[test]
fn the_steps_residual_is_zero_in_free_fall_and_shrinks_with_the_step() {
    use weft_core::gnn::features::HISTORY;
    let with_residual = GnnConfig { residual_inputs: true, ..cfg(16, 1) };
    // The root mean square over the samples' free nodes.
    let rms = |graphs: &[Graph]| {
        let (mut sum, mut count) = (0.0f64, 0.0f64);
        for g in graphs {
            for (n, f) in g.nodes.iter().zip(&g.free) {
                sum += f64::from(f * n[HISTORY..HISTORY + 3].iter().map(|r| r * r).sum::<f32>());
                count += f64::from(*f);
            }
        }
        (sum / count.max(1.0)).sqrt() as f32
    };
    let spec = DatasetSpec::default();
    let gh = 9.81 * spec.dt;
    let samples = |family: Family, dt: f32, frames: u32, edit: &dyn Fn(&mut weft_host::sim::scenario::Scenario)| {
        let mut scn = families::scenario(family, 0, 8, frames, dt);
        edit(&mut scn);
        collect(&scn, &with_residual, None, frames, 1)
    };
    // A free fall from rest: a spinning cloth's linearised step leaves a
    // residual (a rotation is not linear), a translating one none.
    let fall = samples(Family::Fold, spec.dt, 6, &|s| {
        (s.cloth.velocity, s.cloth.spin) = ([0.0; 3], [0.0; 3]);
        s.colliders.clear();
        s.pins.clear();
        s.wind = None;
        s.kicks.clear();
    });
    // Not exactly zero: the placement's rounding strains the stiff
    // membrane by ulps, and the solve stops at its tolerance (measured
    // 0.36 % of g·dt).
    println!("free fall: residual {:.3e} m/s (root mean square)", rms(&fall));
    assert!(rms(&fall) <= 0.01 * gh, "free fall: {} m/s", rms(&fall));
    // Without the option the columns read as zero (the history is off).
    let plain = collect(&families::scenario(Family::Hang, 0, 8, 4, spec.dt), &cfg(16, 1), None, 4, 1);
    assert_eq!(rms(&plain), 0.0);
    let hang = |dt: f32, frames: u32| rms(&samples(Family::Hang, dt, frames, &|_| {}));
    let (whole, half) = (hang(spec.dt, 3), hang(0.5 * spec.dt, 6));
    println!("hang, first frames: residual {whole:.3e} m/s at dt, {half:.3e} at dt/2 (root mean square)");
    assert!(whole >= 0.1 * gh, "hang: {whole} m/s");
    assert!(half <= 0.5 * whole, "dt/2: {half} against {whole} m/s");
    // Such a network is measured in float only.
    let m = model_for(with_residual, &fall);
    let refused = weft_host::learn::quantise::FloatNet::from_trained(&m).err().map(|e| e.to_string());
    assert!(refused.is_some_and(|e| e.contains("residual")));
}

/// A corrector that records a pair of numbers at every step, from the
/// model and the state (which it may correct).
struct Record<F>(Vec<(f32, f32)>, F);

type Step<'a, 'm, 's> = (&'a weft_core::model::Model<'m>, &'a mut weft_core::prelude::State<'s>);

impl<F: FnMut(Step) -> anyhow::Result<(f32, f32)>> weft_host::sim::corrector::Corrector for Record<F> {
    fn pairs(&self, _: usize) -> usize {
        0
    }
    fn correct(
        &mut self,
        model: &weft_core::model::Model,
        state: &mut weft_core::prelude::State,
    ) -> anyhow::Result<usize> {
        let pair = (self.1)((model, state))?;
        self.0.push(pair);
        Ok(0)
    }
}

/// The step's residual before and after adding the Newton correction
/// `newton_velocity` gives (positions by `h δu`), root mean square.
fn newton_check((model, state): Step) -> anyhow::Result<(f32, f32)> {
    let rms = |r: &[weft_core::math::Vec3]| (r.iter().map(|v| v.norm2()).sum::<f32>() / r.len() as f32).sqrt();
    let before = rms(&network::residual_velocity(model, state));
    let du = network::newton_velocity(model, state, 1000, 0.03);
    let dx: Vec<_> = du.iter().map(|d| *d * model.params.dt).collect();
    state.apply_correction(&dx, &du)?;
    Ok((before, rms(&network::residual_velocity(model, state))))
}

/// The Newton correction (`GnnConfig::newton_inputs`) is one: added to a
/// backward-Euler step of a spinning cloth in free fall (whose linearised
/// step stretches it: a rotation is not linear), it leaves a residual of a
/// small fraction of the one the step left (Newton's method converges
/// quadratically near the solution).
#[test]
fn the_newton_input_is_a_newton_step_of_backward_euler() {
    let spec = DatasetSpec::default();
    let mut scn = families::scenario(Family::Fold, 0, 8, 6, spec.dt);
    scn.solver.integrator = weft_host::sim::scenario::IntegratorSpec::BackwardEuler;
    (scn.cloth.velocity, scn.cloth.spin) = ([0.0; 3], [0.0, 2.0, 1.0]);
    scn.colliders.clear();
    scn.solver.strain_limit = 0.0;
    let mut check = Record(Vec::new(), newton_check);
    weft_host::sim::run(&scn, false, &mut check, |_, _, _| Ok(())).unwrap();
    assert_eq!(check.0.len(), 6);
    for (k, (before, after)) in check.0.iter().enumerate() {
        println!("step {k}: residual {before:.3e} → {after:.3e} m/s");
        assert!(*after <= 0.05 * before, "step {k}: {before} → {after}");
    }
}

/// Nodes on a collider are held along its normal in the Newton input, as
/// the step holds them: a cloth lying flat on the ground at rest, whose
/// residual is the support the ground gives (`g·dt` at every node), gets a
/// Newton correction of almost nothing, where one not held would fall.
#[test]
fn the_newton_input_holds_nodes_on_a_collider() {
    let spec = DatasetSpec::default();
    let scn = weft_host::sim::scenario::Scenario::parse(
        "[cloth]\nwidth = 0.3\nheight = 0.3\nresolution = [8, 8]\norientation = \"horizontal\"\n\
         center = [0.0, 0.005, 0.0]\n[time]\ndt = 0.016666668\nsteps = 3\n\
         [[collider]]\nkind = \"plane\"\nnormal = [0.0, 1.0, 0.0]\noffset = 0.0\nthickness = 0.005\n",
    )
    .unwrap();
    let largest = |r: &[weft_core::math::Vec3]| r.iter().map(|v| v.norm()).fold(0.0f32, f32::max);
    let mut input = Record(Vec::new(), |(model, state): Step| {
        let rho = largest(&network::residual_velocity(model, state));
        Ok((rho, largest(&network::newton_velocity(model, state, 1000, 0.03))))
    });
    weft_host::sim::run(&scn, false, &mut input, |_, _, _| Ok(())).unwrap();
    let gh = 9.81 * spec.dt;
    for (k, (rho, du)) in input.0.iter().enumerate() {
        println!("step {k}: largest residual {rho:.3e} m/s, Newton input {du:.3e} m/s");
        assert!(*rho >= 0.5 * gh, "step {k}: the ground's support {rho} m/s");
        assert!(*du <= 0.01 * gh, "step {k}: Newton input {du} m/s");
    }
}

/// `GnnConfig::newton_clip` bounds the Newton input's length by `g·dt`
/// at every node, where the unclipped input of a fast-spinning cloth
/// exceeds it.
#[test]
fn the_clipped_newton_input_stays_within_a_frames_free_fall() {
    use weft_core::gnn::features::HISTORY;
    let spec = DatasetSpec::default();
    let gh = 9.81 * spec.dt;
    let largest = |clip: bool| {
        let cfg = GnnConfig { newton_inputs: 3, newton_clip: clip, ..cfg(16, 1) };
        let mut scn = families::scenario(Family::Fold, 0, 8, 4, spec.dt);
        (scn.cloth.velocity, scn.cloth.spin) = ([0.0; 3], [0.0, 12.0, 6.0]);
        scn.colliders.clear();
        let samples = collect(&scn, &cfg, None, 4, 1);
        assert_eq!(samples.len(), 4);
        samples
            .iter()
            .flat_map(|g| g.nodes.iter().map(|n| n[HISTORY..HISTORY + 3].iter().map(|d| d * d).sum::<f32>().sqrt()))
            .fold(0.0f32, f32::max)
    };
    let (free, clipped) = (largest(false), largest(true));
    println!("largest Newton input: {free:.3e} m/s, clipped {clipped:.3e} (g·dt {gh:.3e})");
    assert!(free > gh, "unclipped {free}");
    assert!(clipped <= gh * (1.0 + 1e-5), "clipped {clipped}");
}
