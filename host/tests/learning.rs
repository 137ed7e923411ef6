//! The learning loop end to end on a tiny data set: generation is
//! deterministic, the format round-trips, and training lowers the loss.
use weft_core::math::Vec3;
use weft_core::model::CoarseGrain;
use weft_host::learn::data::families::Family;
use weft_host::learn::data::{self, DatasetSpec};
use weft_host::learn::network::{GnnConfig, Trained};
use weft_host::learn::train::{self, TrainOptions};
use weft_host::sim::build::{self, ModelParts};

fn tiny() -> DatasetSpec {
    DatasetSpec {
        coarse: 5,
        k: 2,
        time_substeps: 2,
        steps: 12,
        per_family: 2,
        heldout: Some(Family::Flag),
        ..DatasetSpec::default()
    }
}

#[test]
fn generation_is_deterministic_and_round_trips() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let spec = DatasetSpec { per_family: 1, ..tiny() };
    let ia = data::generate(&spec, data::Shard::ALL, a.path(), false).unwrap();
    data::generate(&spec, data::Shard::ALL, b.path(), false).unwrap();
    assert_eq!(ia.trajectories.len(), Family::ALL.len());
    assert!(ia.failed.is_empty(), "{:?}", ia.failed);
    for e in &ia.trajectories {
        let (ta, tb) = (
            data::read_trajectory(&a.path().join(&e.file)).unwrap(),
            data::read_trajectory(&b.path().join(&e.file)).unwrap(),
        );
        assert_eq!(ta.x, tb.x, "{} differs between runs", e.file);
        assert_eq!(ta.v, tb.v);
        assert_eq!(ta.x.len(), 13);
        let nodes = match e.family {
            // The mesh families' shapes 5 cells across: the disc of 2
            // rings, the 5 × 3-cell sheet with a one-cell hole.
            Family::Tablecloth => 1 + 6 + 12,
            Family::Holed => 6 * 4,
            _ => 25,
        };
        assert_eq!(ta.x[0].len(), nodes, "{}", e.file);
        // Frame 0 is the coarse rest state: the fine grid contains the coarse nodes.
        let rest = rest_of(&ta.scenario);
        for (p, q) in ta.x[0].iter().zip(&rest) {
            assert!((*p - *q).norm() < 1e-5);
        }
        assert_eq!(ta.split, if e.family == Family::Flag { "heldout" } else { "train" });
    }
}

#[test]
fn training_lowers_the_loss() {
    let dir = tempfile::tempdir().unwrap();
    let idx = data::generate(&tiny(), data::Shard::ALL, dir.path(), false).unwrap();
    assert_eq!(idx.trajectories.len(), 2 * Family::ALL.len());
    let opts = TrainOptions {
        data: dir.path().into(),
        out: dir.path().join("ck/model"),
        steps: 120,
        every: 40,
        config: GnnConfig {
            latent: 12,
            rounds: 2,
            radius: 0.05,
            pairs_per_node: 8,
            base_inputs: false,
            velocity_only: false,
            ..GnnConfig::default()
        },
        progress: false,
        ..TrainOptions::default()
    };
    let (model, log) = train::train(&opts).unwrap();
    let first = log.history.first().unwrap().2;
    let last = log.history.last().unwrap().2;
    assert!(last < 0.8 * first, "validation loss {first} -> {last}");
    // Checkpoint reloads to the same predictions, and training resumes.
    let back = Trained::load(&opts.out, &candle_core::Device::Cpu).unwrap();
    assert_eq!(back.meta, model.meta);
    let resumed = TrainOptions { steps: 160, resume: true, ..opts.clone() };
    let (m2, log2) = train::train(&resumed).unwrap();
    // It goes on from the first run's last step (its checkpoint), and its
    // log is the whole run's.
    assert_eq!(log2.history[..log.history.len()], log.history[..]);
    assert_eq!(log2.history[log.history.len()].0, 160);
    assert_eq!(log2.history.last().unwrap().0, 160);
    // The model kept is the one of the lowest validation rollout error over
    // both runs (the first of equals).
    let rollouts = log2.rollouts.clone();
    assert!(rollouts.iter().any(|r| r.0 == 160), "{rollouts:?}");
    let kept = rollouts.iter().fold((0, f32::INFINITY), |b, &(s, e)| if e < b.1 { (s, e) } else { b });
    assert_eq!(m2.meta.steps, kept.0, "{rollouts:?}");
}

#[test]
fn eval_columns_follow_their_scenarios() {
    let dir = tempfile::tempdir().unwrap();
    let spec = DatasetSpec { per_family: 1, ..tiny() };
    data::generate(&spec, data::Shard::ALL, dir.path(), false).unwrap();
    let traj = data::load_split(dir.path(), Some("train")).unwrap().remove(0);
    let r = weft_host::learn::eval::evaluate(&traj, None, None, 12).unwrap();
    assert!(r.failures.is_empty(), "{:?}", r.failures);
    // The dt/2 column is the coarse scenario with twice the substeps, run
    // by the simulator's own driver.
    let half = traj.scenario.refined(1, 2);
    assert_eq!(half.time.substeps, 2 * traj.scenario.time.substeps);
    let mut want = Vec::new();
    let mut scn = half.clone();
    scn.time.steps = 12;
    weft_host::sim::run(&scn, false, &mut weft_host::sim::corrector::Plain, |f, _, state| {
        if f > 0 {
            let fine = &traj.x[f as usize];
            let e = state.positions().iter().zip(fine).map(|(a, b)| (*a - *b).norm2()).sum::<f32>() / fine.len() as f32;
            want.push(e.sqrt());
        }
        Ok(())
    })
    .unwrap();
    let rmse = |c: weft_host::learn::eval::columns::Column| r.run(c).map(|r| r.rmse.clone()).unwrap_or_default();
    let half_dt = rmse(weft_host::learn::eval::columns::Column::HalfDt);
    assert_eq!(half_dt.len(), 12);
    for (got, want) in half_dt.iter().zip(&want) {
        assert!((got - want).abs() <= 1e-6 * (1.0 + want), "{got} vs {want}");
    }
    assert_ne!(half_dt, rmse(weft_host::learn::eval::columns::Column::Plain), "two step sizes, two trajectories");
}

#[test]
fn the_convergence_check_sees_the_fine_step_converge() {
    // Halving a step of 1/480 s changes the fine reference less than
    // halving one of 1/60 s; the plain coarse error does not depend on it.
    let (family, seed) = (Family::Drape, 0);
    let scn = weft_host::learn::data::families::scenario(family, seed, 5, 24, 1.0 / 60.0);
    let check = |time_substeps: u32| {
        let spec = DatasetSpec { time_substeps, ..tiny() };
        let (x, _, _) = data::fine_reference(&scn, spec.k, time_substeps, spec.fine_integrator).unwrap();
        data::convergence(&scn, &spec, family, seed, &x).unwrap()
    };
    let (coarse, fine) = (check(1), check(8));
    println!(
        "half-step change {:.5} m at 1 step per frame, {:.5} m at 8",
        coarse.half_step_change, fine.half_step_change
    );
    assert!(fine.half_step_change < 0.5 * coarse.half_step_change);
    assert!(fine.half_step_change > 0.0 && fine.plain_error > 0.0);
    assert!(fine.ratio() < coarse.ratio());
    // The run from a start moved 1 µm is a run of its own. A drape
    // magnifies it (a node held by the ground one step earlier or later);
    // a hanging cloth, without contact, does not.
    let hang = weft_host::learn::data::families::scenario(Family::Hang, 1, 5, 24, 1.0 / 60.0);
    let spec = DatasetSpec { time_substeps: 8, ..tiny() };
    let (x, _, _) = data::fine_reference(&hang, spec.k, 8, spec.fine_integrator).unwrap();
    let smooth = data::convergence(&hang, &spec, Family::Hang, 1, &x).unwrap();
    println!(
        "start moved {} m: change {:.2e} m (drape), {:.2e} m (hang; half step {:.2e} m)",
        data::PERTURBATION,
        fine.perturbed_change,
        smooth.perturbed_change,
        smooth.half_step_change
    );
    assert!(fine.perturbed_change > 0.0 && smooth.perturbed_change > 0.0);
    assert!(smooth.perturbed_change < 0.25 * smooth.half_step_change);
    assert!(smooth.perturbed_change < 0.05 * fine.perturbed_change);
}

#[test]
fn hanging_cloths_start_moving_with_their_pins() {
    // Every node's start velocity (the scenario's rigid velocity and spin,
    // pinned nodes their pin's) against the pins' own motion: the pinned
    // nodes move with the rigid field, so the start has no velocity jump.
    let mut kicked = 0;
    for seed in 0..24 {
        let scn = weft_host::learn::data::families::scenario(Family::Hang, seed, 9, 1, 1.0 / 60.0);
        let spin = scn.cloth.spin;
        kicked += (spin != [0.0; 3]) as u32;
        let mut parts = ModelParts::default();
        let model = &build::model(&scn, CoarseGrain::NONE, &mut parts).unwrap();
        {
            let mut storage = weft_host::sim::storage::VecStateStorage::new(model, 0);
            let state = build::start(&scn, model, &mut storage).unwrap();
            let (v, w, c) = (scn.cloth.velocity, spin, scn.cloth.center);
            for pin in model.scene.pins {
                let i = pin.node as usize;
                let x = state.positions()[i];
                let d = [x.x - c[0], x.y - c[1], x.z - c[2]];
                let rigid = [
                    v[0] + w[1] * d[2] - w[2] * d[1],
                    v[1] + w[2] * d[0] - w[0] * d[2],
                    v[2] + w[0] * d[1] - w[1] * d[0],
                ];
                // The pin's velocity at t = 0 by a central difference.
                let e = 1e-3;
                let fd = (pin.target(e.into()) - pin.target((-e).into())) * (0.5 / e);
                let got = state.velocities()[i];
                for (k, want) in [fd.x, fd.y, fd.z].into_iter().enumerate() {
                    let (r, g) = (rigid[k], [got.x, got.y, got.z][k]);
                    assert!((r - want).abs() < 1e-3 * (1.0 + want.abs()), "seed {seed}: rigid {r} vs pin {want}");
                    assert!((g - want).abs() < 1e-3 * (1.0 + want.abs()), "seed {seed}: node {g} vs pin {want}");
                }
            }
        }
    }
    assert!(kicked > 4, "{kicked} of 24 hangs kicked");
}

/// `--split` and `--family` generate only the named splits and families,
/// into a folder that a later run without them completes, keeping what is
/// there.
#[test]
fn generation_of_some_splits_or_families_is_completed_later() {
    let dir = tempfile::tempdir().unwrap();
    let spec = DatasetSpec { per_family: 1, ..tiny() };
    let heldout = data::Only { splits: vec!["heldout".into()], ..data::Only::default() };
    let only = data::generate_only(&spec, data::Shard::ALL, &heldout, dir.path(), false).unwrap();
    let splits: Vec<_> =
        only.trajectories.iter().map(|t| (t.family, data::split_of(&spec, t.family, t.seed))).collect();
    assert_eq!(splits, [(Family::Flag, "heldout")]);
    // A run of one family keeps the other's trajectory in the index.
    let table = data::Only { families: vec![Family::Tablecloth], ..data::Only::default() };
    let two = data::generate_only(&spec, data::Shard::ALL, &table, dir.path(), false).unwrap();
    let mut families: Vec<_> = two.trajectories.iter().map(|t| t.family).collect();
    families.sort_by_key(|f| *f as u8);
    assert_eq!((families, two.reused), (vec![Family::Flag, Family::Tablecloth], 0));
    let all = data::generate(&spec, data::Shard::ALL, dir.path(), false).unwrap();
    assert_eq!((all.trajectories.len(), all.reused), (Family::ALL.len(), 2));
}

/// Shards partition the jobs; the held-out family stops at its count; the
/// seeds above the split range all train.
#[test]
fn generation_jobs_shard_and_split() {
    use weft_host::learn::data::families::Family;
    use weft_host::learn::data::{jobs, split_of, DatasetSpec, Shard};
    let spec =
        DatasetSpec { per_family: 100, heldout: Some(Family::Flag), heldout_count: 20, ..DatasetSpec::default() };
    let all = jobs(&spec, Shard::ALL);
    let others = Family::ALL.len() - 1;
    assert_eq!(all.len(), others * 100 + 20);
    assert_eq!(all.iter().filter(|(f, _)| *f == Family::Flag).count(), 20);
    let mut parts: Vec<_> = (0..3).flat_map(|i| jobs(&spec, Shard { index: i, count: 3 })).collect();
    parts.sort_by_key(|&(f, s)| (s, f as u8));
    let mut sorted = all.clone();
    sorted.sort_by_key(|&(f, s)| (s, f as u8));
    assert_eq!(parts, sorted);
    // Seed by seed: the first jobs cover every family.
    let first: Vec<_> = all[..Family::ALL.len()].iter().collect();
    assert!(first.iter().all(|j| j.1 == 0) && Family::ALL.iter().all(|f| first.iter().any(|j| j.0 == *f)));
    let count = |split: &str| (0..100).filter(|&s| split_of(&spec, Family::Drape, s) == split).count();
    assert_eq!((count("val"), count("test"), count("train")), (10, 10, 80));
    assert_eq!("2/8".parse::<Shard>(), Ok(Shard { index: 2, count: 8 }));
    assert!("8/8".parse::<Shard>().is_err() && "x".parse::<Shard>().is_err());
}

/// Horizon rollouts start every 20 frames and are cut at the end; plain is
/// its own yardstick; the floors of `weft floors` are small, finite and
/// kept beside the index.
#[test]
fn horizons_start_every_twenty_frames_beside_their_floors() {
    use weft_host::learn::eval::columns::Column;
    use weft_host::learn::eval::{device, floors, horizons};
    let dir = tempfile::tempdir().unwrap();
    let spec = DatasetSpec { per_family: 1, steps: 60, ..tiny() };
    data::generate(&spec, data::Shard::ALL, dir.path(), false).unwrap();
    let printed = floors::floors(dir.path()).unwrap();
    assert!(dir.path().join("floors.json").exists() && printed.contains("flag"), "{printed}");
    let trajs = data::load_split(dir.path(), Some("heldout")).unwrap();
    let rep = horizons::report(&trajs, None, dir.path(), None, None, false).unwrap();
    let row = |fam: &str, col: Column| rep.rows.iter().find(|r| r.0 == fam && r.1 == col).map(|r| r.2.clone());
    let plain = row("flag", Column::Plain).unwrap();
    // Starts 0, 20, 40: three windows of 1 and 10 frames, one of 50.
    assert_eq!(plain.windows, [3, 3, 1]);
    assert!(plain.error.iter().all(|e| e.is_finite() && *e > 0.0), "{:?}", plain.error);
    for col in [Column::HalfDt, Column::QuarterDt, Column::Bdf2, Column::Fine2] {
        let c = row("flag", col).unwrap();
        assert!(c.error.iter().all(|e| e.is_finite()));
        assert!(c.cg_per_frame > 0.0);
    }
    // The finer mesh's steps are priced by its nodes: 9 × 9 against 5 × 5.
    let fine2 = row("flag", Column::Fine2).unwrap();
    let scale =
        fine2.device_per_frame / (fine2.cg_per_frame * device::DEVICE_PER_CG_ITERATION + device::DEVICE_PER_STEP);
    assert!((scale - 81.0 / 25.0).abs() < 1e-9, "{scale}");
    // No network given: no network columns.
    assert!(row("flag", Column::Int8).is_none() && row("flag", Column::Float).is_none());
    let floor = rep.floors.iter().find(|f| f.0 == "flag").unwrap().1;
    assert!(floor.iter().all(|f| f.is_finite() && *f >= 0.0 && *f < plain.error[2]), "{floor:?}");
    let coarse = rep.coarse_floors.iter().find(|f| f.0 == "flag").unwrap().1;
    assert!(coarse.iter().all(|f| f.is_finite() && *f >= 0.0), "{coarse:?}");
    let table = rep.table();
    assert!(table.contains("floor (1 µm)") && table.contains("floor (coarse)"), "{table}");
    // Every row's first ratio sits in the same place, whatever its label
    // (the network columns' rows here are copies of plain's).
    let mut every = rep.clone();
    every.rows = Column::ALL.iter().map(|&c| ("flag".to_string(), c, plain.clone())).collect();
    let table = every.table();
    assert_eq!(
        table.lines().filter(|l| l.trim_start().starts_with(|c: char| c.is_alphabetic())).count(),
        2 + 2 + Column::ALL.len()
    );
    for line in table.lines().filter(|l| l.starts_with("  ") && !l.starts_with("  column")) {
        let c: Vec<char> = line.chars().collect();
        assert!(c.len() > 30 && c[25] == ' ' && c[29] == '.', "{line:?}\n{table}");
    }
}

/// The coarse state's floor restarts the reference from its coarse nodes
/// interpolated: the interpolation keeps the coarse nodes and, for a flat
/// rest grid, gives the finer grid's own rest positions.
#[test]
fn the_coarse_state_interpolates_to_the_finer_grid() {
    use weft_host::learn::eval::horizons::prolongate;
    let spec = tiny();
    let scn = weft_host::learn::data::families::scenario(Family::Drape, 3, spec.coarse, spec.steps, 1.0 / 60.0);
    let (fine, map) = data::fine_scenario(&scn, 3, 1, spec.fine_integrator).unwrap();
    let rest = rest_of;
    let (coarse_rest, fine_rest) = (rest(&scn), rest(&fine));
    let [nx, ny] = scn.cloth.resolution;
    let up = prolongate(&coarse_rest, nx, ny, 3);
    assert_eq!(up.len(), fine_rest.len());
    for (p, q) in up.iter().zip(&fine_rest) {
        assert!((*p - *q).norm() < 1e-5, "{p:?} against {q:?}");
    }
    // Any state: the coarse nodes come back as they were.
    let bent: Vec<_> =
        coarse_rest.iter().map(|p| *p + weft_core::prelude::Vec3::new(0.0, (p.x * 7.0).sin(), p.x * p.z)).collect();
    let up = prolongate(&bent, nx, ny, 3);
    for (c, &f) in bent.iter().zip(&map) {
        assert_eq!(*c, up[f]);
    }
}

/// `weft gain` at a horizon measures what `weft eval --horizons` does: a
/// gain of 0 leaves the plain step's error exactly, the plain error is the
/// horizon's, and the gain with the lowest error is the one written.
#[test]
fn the_gain_is_chosen_at_a_horizon() {
    use weft_host::learn::eval::columns::Column;
    use weft_host::learn::eval::gain::{self, Selection};
    use weft_host::learn::eval::horizons;
    let dir = tempfile::tempdir().unwrap();
    let spec = DatasetSpec { per_family: 1, steps: 40, ..tiny() };
    data::generate(&spec, data::Shard::ALL, dir.path(), false).unwrap();
    let stem = dir.path().join("m/model");
    let config = GnnConfig { latent: 8, rounds: 1, radius: 0.05, pairs_per_node: 8, ..GnnConfig::default() };
    Trained::untrained(config, &candle_core::Device::Cpu).unwrap().save(&stem).unwrap();
    let printed = gain::choose_gain(&stem, dir.path(), "heldout", &[0.0, 0.5], Selection::Horizon(10)).unwrap();
    let trajs = data::load_split(dir.path(), Some("heldout")).unwrap();
    let plain = horizons::horizon_error(&trajs[0], Column::Plain, None, 10).unwrap().unwrap();
    // "gain G: corrected C m, plain P m (…)"
    let rows_of = |printed: &str| -> Vec<(f32, f32, f32)> {
        printed
            .lines()
            .filter_map(|l| {
                let l = l.strip_prefix("gain ")?;
                let (g, rest) = l.split_once(": corrected ")?;
                let (c, rest) = rest.split_once(" m, plain ")?;
                let p = rest.split_once(" m")?.0;
                Some((g.parse().ok()?, c.parse().ok()?, p.parse().ok()?))
            })
            .collect()
    };
    let rows = rows_of(&printed);
    assert_eq!(rows.len(), 2, "{printed}");
    assert_eq!(rows[0].0, 0.0);
    assert_eq!(rows[0].1, rows[0].2, "gain 0 is plain: {printed}");
    assert!(rows[0].2 > 0.0, "{printed}");
    assert_eq!(format!("{:.4e}", rows[0].2), format!("{plain:.4e}"), "plain at horizon 10: {printed}");
    let best = if rows[1].1 < rows[0].1 { 0.5 } else { 0.0 };
    assert_eq!(Trained::load(&stem, &candle_core::Device::Cpu).unwrap().meta.gain, best, "{printed}");
    assert!(gain::choose_gain(&stem, dir.path(), "heldout", &[1.0], Selection::Horizon(7)).is_err());

    // With a guard at horizon 10, a gain is chosen only if it is no worse
    // than plain there; else none (0, the plain step).
    let printed = gain::choose_gain_guarded(
        &stem,
        dir.path(),
        "heldout",
        &[0.5],
        Selection::Horizon(1),
        &[Selection::Horizon(10)],
        None,
    )
    .unwrap();
    let mut half = Trained::load(&stem, &candle_core::Device::Cpu).unwrap();
    half.meta.gain = 0.5;
    let at_10 = horizons::horizon_error(&trajs[0], Column::Float, Some(&half), 10).unwrap().unwrap();
    let want = if at_10 <= plain { 0.5 } else { 0.0 };
    assert_eq!(Trained::load(&stem, &candle_core::Device::Cpu).unwrap().meta.gain, want, "{printed}");
    assert!(printed.contains("guard"), "{printed}");

    // Judged in int8 (`weft gain --int8`): gain 0 is plain again, and the
    // error at 0.5 is that of the network `weft quantize` makes at 0.5.
    use weft_host::learn::quantise;
    let opts = quantise::Options { clip: 0.0, bias_correction: true };
    let int8 = Some((opts, 8));
    let printed =
        gain::choose_gain_guarded(&stem, dir.path(), "heldout", &[0.0, 0.5], Selection::Horizon(10), &[], int8)
            .unwrap();
    assert!(printed.lines().next().unwrap().contains("int8"), "{printed}");
    let rows = rows_of(&printed);
    assert_eq!(rows.len(), 2, "{printed}");
    assert_eq!(rows[0].1, rows[0].2, "int8 at gain 0 is plain: {printed}");
    let mut half = Trained::load(&stem, &candle_core::Device::Cpu).unwrap();
    half.meta.gain = 0.5;
    let (float, ranges, _) = quantise::calibration(&half, dir.path(), 8).unwrap();
    let q = quantise::quantize_with(&float, &ranges, opts).unwrap();
    let at_10 = horizons::horizon_error_with(&trajs[0], Column::Int8, Some(&half), Some(&q), 10).unwrap().unwrap();
    assert_eq!(format!("{:.4e}", rows[1].1), format!("{at_10:.4e}"), "{printed}");
    // Over whole rollouts too: gain 0 is plain there as well.
    let printed =
        gain::choose_gain_guarded(&stem, dir.path(), "heldout", &[0.0], Selection::Rollout(20), &[], int8).unwrap();
    let rows = rows_of(&printed);
    assert_eq!(rows.len(), 1, "{printed}");
    assert_eq!(rows[0].1, rows[0].2, "int8 at gain 0 is plain over a rollout: {printed}");
}

/// The rollout loss at the rollout it was made from (`learn::train::rollout_loss`):
/// its value is the end error in its scales (`K` times the targets'
/// deviations), and its gradient on the heads' output biases is the
/// free-particle lever's — each position correction moves the end by
/// itself, each velocity correction `k` by `(K − 1 − k) h` in position and
/// by itself in velocity — summed over the free nodes.
#[test]
fn the_rollout_loss_pushes_every_correction_against_the_end_error() {
    use weft_host::learn::train::rollout_loss::{rollout_loss, rollout_sample};
    let dir = tempfile::tempdir().unwrap();
    let spec = DatasetSpec { per_family: 1, ..tiny() };
    data::generate(&spec, data::Shard::ALL, dir.path(), false).unwrap();
    let trajs = data::load_split(dir.path(), Some("train")).unwrap();
    let config = GnnConfig { latent: 8, rounds: 1, radius: 0.05, pairs_per_node: 8, ..GnnConfig::default() };
    let dev = candle_core::Device::Cpu;
    let mut m = Trained::untrained(config, &dev).unwrap();
    // Corrections of a tenth of a millimetre: the rollout stays near the
    // reference's.
    let std = 1e-4f32;
    m.meta.normalizer.target.std = vec![std; 6];
    let (k, t0) = (4usize, 3usize);
    let traj = trajs.iter().find(|t| t.family == Family::Hang).unwrap();
    let s = rollout_sample(traj, t0, k, &m).unwrap().expect("the rollout runs");
    assert_eq!(s.graphs.len(), k);
    assert!(rollout_sample(traj, traj.x.len() - 2, k, &m).unwrap().is_none(), "past the trajectory's end");
    let (e, free, dt) = (s.end_error.clone(), s.graphs[0].free.clone(), s.dt);
    assert!(free.contains(&0.0) && free.contains(&1.0), "pins and free nodes");
    let loss = rollout_loss(&m.gnn, &m.meta.normalizer, std::slice::from_ref(&s), &dev).unwrap();
    let scale = k as f32 * std;
    let count = 6.0 * free.iter().sum::<f32>();
    let mut value = 0.0f64;
    let (mut gx, mut gv) = ([0.0f64; 3], [0.0f64; 3]);
    let lever: f32 = (0..k).map(|i| (k - 1 - i) as f32 * dt).sum();
    for (row, &f) in e.iter().zip(&free) {
        if f == 0.0 {
            continue;
        }
        for c in 0..3 {
            let (ex, ev) = ((row[c] / scale) as f64, (row[3 + c] / scale) as f64);
            value += ex * ex + ev * ev;
            // d/d(bias) of (e + moved)²/s²: 2 e/s² times how far one unit of
            // the normalised output moves the end.
            gx[c] += 2.0 * ex / scale as f64 * (k as f32 * std) as f64;
            gv[c] += 2.0 * ex / scale as f64 * (lever * std) as f64 + 2.0 * ev / scale as f64 * (k as f32 * std) as f64;
        }
    }
    value /= count as f64;
    let got = loss.to_scalar::<f32>().unwrap() as f64;
    assert!(value > 0.0 && (got - value).abs() <= 1e-4 * value, "loss {got}, expected {value}");
    let grads = loss.backward().unwrap();
    let vars = m.varmap.data().lock().unwrap();
    for (name, want) in [("head_x.l2.bias", gx), ("head_v.l2.bias", gv)] {
        let g: Vec<f32> = grads.get(vars[name].as_tensor()).unwrap().to_vec1().unwrap();
        for c in 0..3 {
            let w = want[c] / count as f64;
            assert!((g[c] as f64 - w).abs() <= 1e-3 * w.abs() + 1e-9, "{name}[{c}]: {} against {w}", g[c]);
        }
    }
}

/// The device cost model per network size (two numbers per latent width)
/// reproduces the firmware's counts of all three sizes of each width
/// within 1 %, and an estimated width lies between its neighbours.
#[test]
fn device_network_cost_fits_every_measured_size() {
    use weft_host::learn::eval::device::{device_per_network, DEVICE_PER_NETWORK};
    let measured =
        [(8, 1, 3.237e6), (8, 2, 4.443e6), (8, 3, 5.641e6), (16, 1, 3.912e6), (16, 2, 5.511e6), (16, 3, 7.232e6)];
    for (l, r, count) in measured {
        let model = device_per_network(l, r);
        assert!((model / count - 1.0).abs() < 0.01, "{l} × {r}: model {model}, firmware {count}");
    }
    assert_eq!(device_per_network(16, 2), DEVICE_PER_NETWORK);
    assert!(device_per_network(12, 2) > device_per_network(8, 2));
    assert!(device_per_network(12, 2) < device_per_network(16, 2));
    assert!(device_per_network(32, 1) > device_per_network(16, 1));
    assert!(device_per_network(4, 1) < device_per_network(8, 1));
}

/// `weft calibrate`: every candidate's errors are those of the plain step
/// on the grained membrane (the same as the coarse-grain column a network
/// of that grain sees), the grain reaches the step, and the choice is the
/// lowest error at horizon 10 among the candidates no worse than the
/// material as it is at 50.
#[test]
fn calibration_chooses_the_grain_by_its_horizon_errors() {
    use weft_core::model::CoarseGrain;
    use weft_host::learn::eval::columns::Column;
    use weft_host::learn::eval::horizons::horizon_errors;
    use weft_host::learn::train::calibrate;
    let dir = tempfile::tempdir().unwrap();
    let spec = DatasetSpec { per_family: 1, steps: 60, ..tiny() };
    data::generate(&spec, data::Shard::ALL, dir.path(), false).unwrap();
    let candidates = calibrate::Candidates { stretch: &[1.0, 0.3], compression: &[1.0, 0.2], taut: &[0.0, 0.002] };
    let fit = calibrate::calibrate(dir.path(), "heldout", &candidates, 10, 50).unwrap();
    let grains: Vec<CoarseGrain> = fit.table.iter().map(|r| r.0).collect();
    assert_eq!(grains[0], CoarseGrain::NONE);
    // A taut strain at the material's own stretch stiffness is the same
    // step as none, and is not tried.
    assert_eq!(grains.len(), 6, "the material as it is once, then every other triple: {grains:?}");
    let trajs = data::load_split(dir.path(), Some("heldout")).unwrap();
    let plain = horizon_errors(&trajs[0], Column::Plain, None, None).unwrap().unwrap();
    assert_eq!(fit.table[0].1, plain);
    for &(grain, errors) in &fit.table[1..] {
        let config = GnnConfig {
            latent: 8,
            rounds: 1,
            radius: 0.05,
            pairs_per_node: 8,
            coarse_stretch: grain.stretch,
            coarse_compression: grain.compression,
            coarse_taut: grain.taut.unwrap_or(0.0),
            ..GnnConfig::default()
        };
        let net = Trained::untrained(config, &candle_core::Device::Cpu).unwrap();
        assert_eq!(horizon_errors(&trajs[0], Column::Grained, Some(&net), None).unwrap().unwrap(), errors);
        assert_ne!(errors, plain, "the grain {grain:?} did not reach the step");
        let untaut = fit.table.iter().find(|r| r.0 == CoarseGrain { taut: None, ..grain }).unwrap().1;
        assert!(grain.taut.is_none() || errors != untaut, "the taut strain of {grain:?} did not reach the step");
    }
    let passing = fit.table.iter().filter(|r| r.1[2] <= plain[2]);
    let best = passing.min_by(|a, b| a.1[1].total_cmp(&b.1[1])).unwrap().0;
    assert_eq!(fit.grain, best);
    let last = fit.report().lines().last().unwrap().to_string();
    let taut = best.taut.map_or(String::new(), |t| format!(" --coarse-taut {t}"));
    assert_eq!(last, format!("--coarse-stretch {} --coarse-compression {}{taut}", best.stretch, best.compression));
    // A network of the material as it is has no coarse-grain column.
    let net =
        Trained::untrained(GnnConfig { radius: 0.05, ..GnnConfig::default() }, &candle_core::Device::Cpu).unwrap();
    assert_eq!(horizon_errors(&trajs[0], Column::Grained, Some(&net), None).unwrap(), None);
}

/// The rest positions of a scenario's mesh.
fn rest_of(scn: &weft_host::sim::scenario::Scenario) -> Vec<Vec3> {
    let mut parts = ModelParts::default();
    build::model(scn, CoarseGrain::NONE, &mut parts).unwrap().mesh.rest().to_vec()
}
