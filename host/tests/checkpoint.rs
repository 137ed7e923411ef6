//! Nothing lost when a run is killed: a training run stopped and resumed
//! from its checkpoint ends with the same weights, bit for bit, as one
//! that ran straight through (on the fine reference's samples and on the
//! network's own rollouts); a damaged checkpoint or model is refused,
//! naming its file; and `weft train` and `weft generate` killed with
//! SIGKILL at random points, each time started again, end with the files
//! of a run that was never killed.
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use weft_host::learn::data::families::{Family, Rng};
use weft_host::learn::data::{self, DatasetSpec};
use weft_host::learn::network::{GnnConfig, Trained};
use weft_host::learn::train::checkpoint::{self, CheckpointError};
use weft_host::learn::train::{self, Teacher, TrainOptions};

fn tiny(seed: u64) -> DatasetSpec {
    DatasetSpec {
        coarse: 5,
        k: 2,
        time_substeps: 2,
        steps: 12,
        per_family: 1,
        heldout: Some(Family::Flag),
        check_convergence: false,
        seed,
        ..DatasetSpec::default()
    }
}

fn small() -> GnnConfig {
    GnnConfig { latent: 8, rounds: 1, radius: 0.05, pairs_per_node: 8, ..GnnConfig::default() }
}

/// A short run on `data` into `out`: checkpoints every 10 steps, the
/// validation rollouts every 20, unrolled samples from step 20.
fn opts(data: &Path, out: PathBuf) -> TrainOptions {
    TrainOptions {
        data: data.into(),
        out,
        steps: 40,
        every: 10,
        rollout_every: 20,
        unroll_after: 20,
        batch: 2,
        config: small(),
        progress: false,
        ..TrainOptions::default()
    }
}

/// The on-policy variant: scenes simulated here, a small buffer refilled
/// every 5 steps (so that a resumed run needs the buffer's files).
fn on_policy(data: &Path, out: PathBuf) -> TrainOptions {
    TrainOptions {
        teacher: Teacher::Coarse,
        scenes: 1,
        buffer: 12,
        refresh: 5,
        refresh_scenes: 1,
        rollout_frames: 8,
        select_frames: 4,
        unroll_after: 10,
        steps: 24,
        ..opts(data, out)
    }
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The run's results are the same files: the weights, the model's
/// meta-data, the kept best model, and the log's entries (its seconds
/// aside).
fn assert_same_run(a: &Path, b: &Path) {
    for ext in ["safetensors", "json"] {
        let (fa, fb) = (read(&a.with_extension(ext)), read(&b.with_extension(ext)));
        if ext == "json" {
            assert_eq!(String::from_utf8_lossy(&fa), String::from_utf8_lossy(&fb));
        }
        assert!(fa == fb, "{ext} differs");
        let (ba, bb) = (train::best_stem(a).with_extension(ext), train::best_stem(b).with_extension(ext));
        assert_eq!(ba.exists(), bb.exists());
        if ba.exists() {
            assert!(read(&ba) == read(&bb), "best {ext} differs");
        }
    }
    let log = |p: &Path| {
        let mut l: train::TrainLog = serde_json::from_slice(&read(&p.with_extension("log.json"))).unwrap();
        l.seconds = 0.0;
        l
    };
    assert_eq!(log(a), log(b));
}

fn generated(spec: &DatasetSpec) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    data::generate(spec, data::Shard::ALL, dir.path(), false).unwrap();
    dir
}

#[test]
fn a_run_stopped_and_resumed_ends_as_one_run_straight_through() {
    // Seeds 0..5 train, 5 validates.
    let data = generated(&DatasetSpec { per_family: 6, ..tiny(0) });
    let straight = opts(data.path(), data.path().join("a/model"));
    let (model, log) = train::train(&straight).unwrap();
    assert_eq!(model.meta.steps.max(log.history.last().unwrap().0), 40);
    // Stopped after 15 steps (between two checkpoints of the schedule) and
    // after 30, each time resumed.
    let b = data.path().join("b/model");
    for until in [Some(15), Some(30), None] {
        let part = TrainOptions { until, resume: true, ..opts(data.path(), b.clone()) };
        train::train(&part).unwrap();
        if let Some(u) = until {
            let ck = checkpoint::load(&b, 1e-3, &candle_core::Device::Cpu).unwrap().unwrap();
            assert_eq!(ck.progress.step, u);
            assert_eq!(ck.adam.t as usize, u, "Adam's step count travels with the checkpoint");
        }
    }
    assert_same_run(&straight.out, &b);
    // The weights moved: the comparison is not of two untrained networks.
    let fresh = Trained::untrained(small(), &candle_core::Device::Cpu).unwrap();
    assert_ne!(fresh.parameters(), 0);
    assert!(log.history.last().unwrap().2 < log.history[0].2, "{:?}", log.history);
}

#[test]
fn an_on_policy_run_stopped_and_resumed_ends_as_one_run_straight_through() {
    // Seed 5 of every family validates; the training scenes are simulated.
    let data = generated(&tiny(5));
    let straight = on_policy(data.path(), data.path().join("a/model"));
    train::train(&straight).unwrap();
    let b = data.path().join("b/model");
    for until in [Some(7), Some(13), None] {
        let part = TrainOptions { until, resume: true, ..on_policy(data.path(), b.clone()) };
        train::train(&part).unwrap();
    }
    assert_same_run(&straight.out, &b);
    // Only the refills the last checkpoint's buffer names are kept: 12
    // slots of 4 samples a refill.
    let ck = checkpoint::load(&b, 1e-3, &candle_core::Device::Cpu).unwrap().unwrap();
    let slots = ck.progress.buffer.unwrap();
    assert_eq!(slots.slots.len(), 12);
    let files = std::fs::read_dir(checkpoint::buffer_dir(&b)).unwrap().count();
    let named: std::collections::BTreeSet<u64> = slots.slots.iter().map(|s| s.0).collect();
    assert_eq!(files, named.len());
}

#[test]
fn a_damaged_checkpoint_or_model_is_refused_naming_its_file() {
    let data = generated(&DatasetSpec { per_family: 6, ..tiny(0) });
    let o = TrainOptions { steps: 10, rollout_every: 0, ..opts(data.path(), data.path().join("m/model")) };
    train::train(&o).unwrap();
    let dev = candle_core::Device::Cpu;
    let ck = checkpoint::path(&o.out);
    let whole = read(&ck);
    let refused = |bytes: &[u8]| {
        std::fs::write(&ck, bytes).unwrap();
        let e = checkpoint::load(&o.out, 1e-3, &dev).err().expect("refused");
        let c = e.downcast_ref::<CheckpointError>().expect("a CheckpointError");
        assert_eq!(c.path, ck);
        assert!(e.to_string().contains(&ck.display().to_string()), "{e}");
        c.fault.clone()
    };
    // Cut short, as a write killed part-way would leave it.
    let cut = refused(&whole[..whole.len() * 2 / 3]);
    assert!(cut.contains("not a whole safetensors file"), "{cut}");
    // One bit changed in a weight.
    let mut flipped = whole.clone();
    let n = flipped.len();
    flipped[n - 3] ^= 0x10;
    assert!(refused(&flipped).contains("checksum"));
    // A model whose weights are not the ones its meta-data was written with
    // (new weights beside the old JSON) is refused, naming both files.
    let other =
        TrainOptions { config: GnnConfig { latent: 12, ..small() }, out: data.path().join("o/model"), ..o.clone() };
    train::train(&other).unwrap();
    std::fs::copy(other.out.with_extension("safetensors"), o.out.with_extension("safetensors")).unwrap();
    let e = Trained::load(&o.out, &dev).err().expect("refused").to_string();
    assert!(e.contains("CRC-32") && e.contains("model.json"), "{e}");
}

/// Runs `args` to the end, killing it with SIGKILL after a random time in
/// `0..span/12` `kills` times first (each time started again); the kills that
/// landed before the command ended.
fn killed_and_rerun(args: &[&str], kills: usize, span: Duration, rng: &mut Rng) -> usize {
    let exe = env!("CARGO_BIN_EXE_weft");
    let mut landed = 0;
    for _ in 0..kills {
        let mut child = Command::new(exe)
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // A twelfth of an unbroken run's time at most: twenty kills spread
        // over about one run's work, start-ups included, with room for
        // most to land before a restarted run, which skips what is done,
        // ends (at an eighth, 9 of 20 landed on a loaded machine).
        std::thread::sleep(span.mul_f32(rng.range(0.0, 1.0 / 12.0)));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            landed += 1;
        }
        child.wait().unwrap();
    }
    let out = Command::new(exe).args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    landed
}

fn timed(args: &[&str]) -> Duration {
    let t0 = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_weft")).args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    t0.elapsed()
}

#[test]
fn train_and_generate_killed_at_random_points_end_as_unbroken_runs() {
    let mut rng = Rng::new(69);
    let dir = tempfile::tempdir().unwrap();
    let gen = |out: &Path| -> Vec<String> {
        [
            "generate",
            "-q",
            "--coarse",
            "5",
            "--k",
            "2",
            "--time-substeps",
            "2",
            "--steps",
            "12",
            "--per-family",
            "6",
            "--no-convergence-check",
            "-o",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([out.display().to_string()])
        .collect()
    };
    let (a, b) = (dir.path().join("gen-a"), dir.path().join("gen-b"));
    let args_a = gen(&a);
    let span = timed(&args_a.iter().map(String::as_str).collect::<Vec<_>>());
    let args_b = gen(&b);
    let landed = killed_and_rerun(&args_b.iter().map(String::as_str).collect::<Vec<_>>(), 20, span, &mut rng);
    println!("generate: {landed} of 20 kills landed");
    assert!(landed >= 10, "only {landed} of 20 kills landed before generation ended");
    let (ia, ib) = (data::load_index(&a).unwrap(), data::load_index(&b).unwrap());
    let entries = |i: &data::Index| {
        let mut e: Vec<_> =
            i.trajectories.iter().map(|t| (t.file.clone(), t.family.name(), t.seed, t.split.clone())).collect();
        e.sort();
        e
    };
    assert_eq!(entries(&ia), entries(&ib));
    for e in &ia.trajectories {
        let (ta, tb) =
            (data::read_trajectory(&a.join(&e.file)).unwrap(), data::read_trajectory(&b.join(&e.file)).unwrap());
        assert!(ta.x == tb.x && ta.v == tb.v, "{} differs", e.file);
    }

    let train_args = |out: &Path| -> Vec<String> {
        [
            "train",
            "-q",
            "--steps",
            "60",
            "--every",
            "5",
            "--rollout-every",
            "20",
            "--unroll-after",
            "30",
            "--batch",
            "2",
            "--latent",
            "8",
            "--rounds",
            "1",
            "--resume",
            "-d",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([a.display().to_string(), "-o".into(), out.display().to_string()])
        .collect()
    };
    let (ta, tb) = (dir.path().join("train-a/model"), dir.path().join("train-b/model"));
    let span = timed(&train_args(&ta).iter().map(String::as_str).collect::<Vec<_>>());
    let landed = killed_and_rerun(&train_args(&tb).iter().map(String::as_str).collect::<Vec<_>>(), 20, span, &mut rng);
    println!("train: {landed} of 20 kills landed");
    assert!(landed >= 10, "only {landed} of 20 kills landed before training ended");
    assert_same_run(&ta, &tb);
}
