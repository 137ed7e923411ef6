//! The `weft` command.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::{Parser, Subcommand};
use weft_host::learn::data::{self, DatasetSpec};
use weft_host::learn::eval;
use weft_host::learn::eval::gain;
use weft_host::learn::quantise;
use weft_host::learn::train::{self, TrainOptions};
use weft_host::sim;
use weft_host::sim::corrector::{self, Corrector};
use weft_host::sim::scenario::Scenario;
use weft_host::view::render;

/// weft: FEM cloth simulation for microcontrollers, run on the desktop.
#[derive(Parser)]
#[command(name = "weft", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario file: OBJ frames, summary.json and a preview (GIF and
    /// PNG; with --corrected the plain and the corrected cloth side by
    /// side) into the output folder.
    Simulate {
        scenario: PathBuf,
        /// Output folder (default: out/STEM, STEM the scenario file's name without its extension).
        #[arg(short, long)]
        out: Option<PathBuf>,
        /// Correct every step with the int8 network (the one baked into
        /// weft, or --int8's; trained for 16×16 cloth at 1/60 s steps).
        #[arg(long)]
        corrected: bool,
        /// An int8 model file instead of the baked network.
        #[arg(long)]
        int8: Option<PathBuf>,
        /// No preview (preview.gif and preview.png beside the frames).
        #[arg(long)]
        no_picture: bool,
        /// No progress bar.
        #[arg(short, long)]
        quiet: bool,
    },
    /// Build the coarse/fine training data set (fine simulations of every
    /// scenario family, restricted to the coarse nodes).
    Generate {
        /// Data folder [default: $WEFT_DATA, else ~/.cache/weft/data].
        #[arg(short, long, default_value_os_t = data::default_dir(), hide_default_value = true)]
        out: PathBuf,
        #[command(flatten)]
        spec: DatasetSpec,
        /// Run only shard i of n (`--shard 2/8`, the jobs in turn); merge
        /// shards by copying every shard's trajectory files and one shard's
        /// `index.json` (its spec is what lets the files be kept) into one
        /// folder and running the same command there without `--shard`.
        #[arg(long, default_value = "0/1")]
        shard: data::Shard,
        /// Only the trajectories of this split (repeatable: `--split val
        /// --split test --split heldout`); a later run without it adds the
        /// rest to the same folder.
        #[arg(long, value_parser = ["train", "val", "test", "heldout"])]
        split: Vec<String>,
        /// Only the trajectories of this family (repeatable); the index
        /// keeps what an earlier run with the same settings made.
        #[arg(long)]
        family: Vec<weft_host::learn::data::families::Family>,
        #[arg(short, long)]
        quiet: bool,
    },
    /// Train the correction network on a data set (resumable).
    Train {
        #[command(flatten)]
        opts: Box<TrainOptions>,
        /// Also export the result to weights/ (float weights + normalisation).
        #[arg(long)]
        export: Option<PathBuf>,
    },
    /// Roll out plain coarse, corrected coarse, a plain 2× finer mesh and the plain coarse mesh at dt/2
    /// against the fine reference: report.json and rmse.png.
    Eval {
        /// Scenario files (`--scenario A.toml B.toml …`; their fine
        /// references are simulated here, the rollouts pooled as one
        /// family "scenario") ...
        #[arg(long, num_args = 1..)]
        scenario: Vec<PathBuf>,
        /// ... or a data set split (test, val, heldout, train).
        #[arg(long, default_value = "test")]
        split: String,
        /// Data folder [default: $WEFT_DATA, else ~/.cache/weft/data].
        #[arg(short, long, default_value_os_t = data::default_dir(), hide_default_value = true)]
        data: PathBuf,
        /// Trained model stem; without it only the plain columns are filled.
        #[arg(short, long, default_value = "weights/weft-gnn")]
        model: PathBuf,
        /// int8 model file for the int8 column instead of the baked
        /// network ("none" to skip the column).
        #[arg(long)]
        int8: Option<PathBuf>,
        /// Frames per rollout (default: 200 for a split, the scenario's own
        /// `time.steps` for a scenario).
        #[arg(long, value_parser = weft_host::at_least_one)]
        steps: Option<usize>,
        /// Errors at horizons instead: rollouts of 1, 10 and 50 frames
        /// from the reference every 20 frames, every column beside its
        /// floor (`weft floors`), with device cost (eval/horizons.json).
        #[arg(long)]
        horizons: bool,
        /// The int8 column without the do-no-harm guard
        /// (`weft_core::gnn::int8::GUARD_START`), to measure it.
        #[arg(long)]
        no_guard: bool,
        #[arg(short, long, default_value = "eval")]
        out: PathBuf,
    },
    /// Fit the coarse step's membrane to the fine reference: the factors on
    /// the material's stretch stiffness and compression factor that give
    /// the plain coarse step the lowest error on a split at a horizon,
    /// among those no worse than the material as it is at the guard
    /// horizon. The last line holds the `weft train` flags that use them.
    Calibrate {
        /// Data folder [default: $WEFT_DATA, else ~/.cache/weft/data].
        #[arg(short, long, default_value_os_t = data::default_dir(), hide_default_value = true)]
        data: PathBuf,
        #[arg(long, default_value = "val")]
        split: String,
        /// Candidate factors on the stretch stiffness.
        #[arg(long, value_delimiter = ',', default_value = "1,0.5,0.4,0.3,0.2,0.1")]
        stretch: Vec<f32>,
        /// Candidate factors on the compression factor.
        #[arg(long, value_delimiter = ',', default_value = "1,0.4,0.2")]
        compression: Vec<f32>,
        /// Candidate taut strains, from which tension counts at the
        /// material's own stiffness (0: none).
        #[arg(long, value_delimiter = ',', default_value = "0,0.003,0.01,0.03")]
        taut: Vec<f32>,
        #[arg(long, default_value_t = 10)]
        horizon: usize,
        /// 0: no guard.
        #[arg(long, default_value_t = 50)]
        guard: usize,
    },
    /// The floor of every family of a data set: the reference's own change
    /// over 1, 10 and 50 frames from a start moved 1 µm (floors.json beside
    /// the index; resumable).
    Floors {
        /// Data folder [default: $WEFT_DATA, else ~/.cache/weft/data].
        #[arg(short, long, default_value_os_t = data::default_dir(), hide_default_value = true)]
        data: PathBuf,
    },
    /// Choose the factor on the network's corrections that gives the
    /// lowest error on a split (validation by default) at a horizon (10
    /// frames by default, as `weft eval --horizons` measures it) or over
    /// whole rollouts (`--horizon 0 --steps N`), and store it in the
    /// model's JSON.
    Gain {
        #[arg(short, long, default_value = "weights/weft-gnn")]
        model: PathBuf,
        /// Data folder [default: $WEFT_DATA, else ~/.cache/weft/data].
        #[arg(short, long, default_value_os_t = data::default_dir(), hide_default_value = true)]
        data: PathBuf,
        #[arg(long, default_value = "val")]
        split: String,
        /// Candidate factors (0: the step the network corrects, alone).
        #[arg(long, value_delimiter = ',', default_value = "0,0.1,0.2,0.3,0.5,0.75,1")]
        gains: Vec<f32>,
        /// Horizon (1, 10 or 50 frames); 0 for rollouts of `--steps` frames
        /// from each trajectory's start.
        #[arg(long, default_value_t = 10)]
        horizon: usize,
        #[arg(long, default_value_t = 200, value_parser = weft_host::at_least_one)]
        steps: usize,
        /// Choose only among gains no worse than plain at this horizon too
        /// (1, 10 or 50; 0: no guard).
        #[arg(long, default_value_t = 0)]
        guard: usize,
        /// Choose only among gains no worse than plain over rollouts of this
        /// many frames from each trajectory's start too (0: no such guard).
        #[arg(long, default_value_t = 0)]
        guard_rollout: usize,
        /// Judge the int8 network the device runs, quantised at each gain
        /// as `weft quantize` does with `--clip`.
        #[arg(long)]
        int8: bool,
        /// With `--int8`: `weft quantize --clip`.
        #[arg(long, default_value_t = 0.0)]
        clip: f32,
    },
    /// Which network ships: each arm's mean over its seeds of the
    /// corrected step's validation frontier ratio (from each scene's start,
    /// the mean of 10 and 50 frames) under the whole-rollout guard (200
    /// frames ≤ 1), against the shipped network's; an arm ships only with
    /// two seeds or more and a lower mean, and when no network passes the
    /// guard the best plain step at the device's budget is named.
    Select {
        /// The shipped network's validation report (`weft eval --split val`).
        #[arg(long, default_value = "weights/eval-val/report.json")]
        baseline: PathBuf,
        /// Arms as NAME=RUN,RUN… (run folders holding eval-val/report.json).
        #[arg(required = true)]
        arms: Vec<weft_host::learn::eval::select::Arm>,
    },
    /// Quantise a trained float model to int8 (calibrated on training
    /// samples) and write the model file that weft-weights bakes in.
    Quantize {
        #[arg(short, long, default_value = "weights/weft-gnn")]
        model: PathBuf,
        /// Data folder [default: $WEFT_DATA, else ~/.cache/weft/data].
        #[arg(short, long, default_value_os_t = data::default_dir(), hide_default_value = true)]
        data: PathBuf,
        /// Calibration graphs drawn from the training split.
        #[arg(long, default_value_t = quantise::CALIBRATION_SAMPLES)]
        samples: usize,
        /// Clip every hidden and latent channel's scale at this many times
        /// its RMS over the calibration (0: at its largest magnitude).
        #[arg(long, default_value_t = 0.0)]
        clip: f32,
        /// Keep the biases as trained: without it, every layer's bias takes
        /// back the mean error its rounded weights add on the calibration
        /// graphs.
        #[arg(long)]
        no_bias_correction: bool,
        #[arg(short, long, default_value = "weights/weft-gnn.q8")]
        out: PathBuf,
    },
    /// Write a cloth shape that is not a rectangle as an OBJ file (for
    /// `[cloth] mesh = "…"`).
    Mesh {
        #[arg(value_enum)]
        shape: weft_host::sim::shapes::Shape,
        #[arg(short, long)]
        out: PathBuf,
    },
    /// Build the browser page (the core and the baked network in
    /// WebAssembly) into a folder anyone can host, and serve it on
    /// 127.0.0.1.
    Web {
        #[arg(short, long, default_value = "target/web/site")]
        out: PathBuf,
        #[arg(long, default_value_t = 8000)]
        port: u16,
        /// The address served on (another host's browsers reach the page
        /// only when this is not a loopback address, e.g. 0.0.0.0).
        #[arg(long, default_value = "127.0.0.1")]
        bind: std::net::IpAddr,
        /// Only build the page.
        #[arg(long)]
        no_serve: bool,
        /// Also save a screenshot of the page (headless Chromium) here.
        #[arg(long)]
        screenshot: Option<PathBuf>,
        /// The scene the screenshot shows (0: swing … 4: tablecloth).
        #[arg(long, default_value_t = 0)]
        scene: u32,
    },
    /// A drape over a sphere as an animated GIF and a PNG still: plain
    /// coarse, int8-corrected coarse and the fine reference side by side,
    /// and in the error plot plain BDF2, the best plain step at the
    /// corrected step's cost (the test split's median case where the data
    /// has it).
    Demo {
        #[arg(short, long, default_value = "weft-demo.gif")]
        out: PathBuf,
        /// An int8 model file instead of the baked network.
        #[arg(long)]
        int8: Option<PathBuf>,
        /// A drape family seed to show instead of the test split's median
        /// case (its fine reference is simulated).
        #[arg(long)]
        seed: Option<u64>,
        /// Data folder [default: $WEFT_DATA, else ~/.cache/weft/data].
        #[arg(short, long, default_value_os_t = data::default_dir(), hide_default_value = true)]
        data: PathBuf,
    },
}

fn main() -> std::process::ExitCode {
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Simulate { scenario, out, corrected, int8, no_picture, quiet } => {
            simulate(&scenario, out, corrected, int8.as_deref(), !no_picture, quiet)?
        }
        Command::Generate { out, spec, shard, split, family, quiet } => {
            let only = data::Only { splits: split, families: family };
            let index = data::generate_only(&spec, shard, &only, &out, !quiet)?;
            print!("{}", index.summary(&out));
        }
        Command::Train { opts, export } => {
            let (model, log) = train::train(&opts)?;
            print!("{}", train::summary(&model, &log, &opts));
            if let Some(stem) = export {
                model.save(&stem)?;
                println!("exported {}.{{safetensors,json}}", stem.display());
            }
        }
        Command::Gain { model, data, split, gains, horizon, steps, guard, guard_rollout, int8, clip } => {
            let by = if horizon == 0 { gain::Selection::Rollout(steps) } else { gain::Selection::Horizon(horizon) };
            let guards: Vec<_> = [
                (guard > 0).then_some(gain::Selection::Horizon(guard)),
                (guard_rollout > 0).then_some(gain::Selection::Rollout(guard_rollout)),
            ]
            .into_iter()
            .flatten()
            .collect();
            let int8 =
                int8.then_some((quantise::Options { clip, bias_correction: true }, quantise::CALIBRATION_SAMPLES));
            print!("{}", gain::choose_gain_guarded(&model, &data, &split, &gains, by, &guards, int8)?);
        }
        Command::Quantize { model, data, samples, clip, no_bias_correction, out } => {
            let opts = quantise::Options { clip, bias_correction: !no_bias_correction };
            println!("{}", quantise::command(&model, &data, samples, opts, &out)?);
        }
        Command::Calibrate { data, split, stretch, compression, taut, horizon, guard } => {
            use weft_host::learn::train::calibrate::{calibrate, Candidates};
            let candidates = Candidates { stretch: &stretch, compression: &compression, taut: &taut };
            let fit = calibrate(&data, &split, &candidates, horizon, guard)?;
            print!("{}", fit.report());
        }
        Command::Floors { data } => print!("{}", weft_host::learn::eval::floors::floors(&data)?),
        Command::Eval { scenario, split, data, model, int8, steps, horizons, no_guard, out } => {
            if no_guard {
                weft_host::sim::corrector::unguarded();
            }
            let int8 = match int8 {
                Some(p) if p.as_os_str() == "none" => None,
                p => Some(quantise::load_or_baked(p.as_deref())?),
            };
            let source = match scenario.is_empty() {
                false => eval::Source::Scenarios(scenario),
                true => eval::Source::Split(split),
            };
            let (text, report) = eval::command(&source, &data, &model, int8, steps, horizons, &out)?;
            if let Some(report) = report {
                weft_host::view::plot::plot(&report, &out.join("rmse.png"))?;
            }
            print!("{text}");
        }
        Command::Select { baseline, arms } => {
            let (text, _) = weft_host::learn::eval::select::select(&baseline, &arms)?;
            print!("{text}");
        }
        Command::Mesh { shape, out } => {
            let (x, t) = shape.mesh();
            std::fs::write(&out, weft_host::sim::obj::write(&x, &t))?;
            println!("wrote {}: {} nodes, {} triangles", out.display(), x.len(), t.len());
        }
        Command::Web { out, port, bind, no_serve, screenshot, scene } => {
            weft_host::view::web::command(&out, (bind, port), !no_serve, screenshot.as_deref(), scene)?
        }
        Command::Demo { out, int8, seed, data } => {
            let net = quantise::load_or_baked(int8.as_deref())?;
            let case = render::demo_case(&net, seed, &data)?;
            println!("{}", render::demo(&net, case, &out)?);
        }
    }
    Ok(())
}

/// `weft simulate`: runs a scenario file, writes its frames and summary,
/// prints what it counted.
fn simulate(
    scenario: &Path,
    out: Option<PathBuf>,
    corrected: bool,
    int8: Option<&Path>,
    picture: bool,
    quiet: bool,
) -> Result<()> {
    let scn = Scenario::load(scenario)?;
    let net = if corrected { Some(quantise::load_or_baked(int8)?) } else { None };
    let out = out.unwrap_or_else(|| {
        PathBuf::from("out").join(scenario.file_stem().map(|s| s.to_os_string()).unwrap_or_default())
    });
    let t0 = std::time::Instant::now();
    let mut corrector: Box<dyn Corrector> = match &net {
        Some(n) => Box::new(corrector::Int8::new(n)),
        None => Box::new(corrector::Plain),
    };
    let mut frames = Vec::new();
    let s = sim::simulate(&scn, &out, !quiet, corrector.as_mut(), picture.then_some(&mut frames))?;
    let last = s.frames.last().cloned().unwrap_or_default();
    if !s.outside_envelope.is_empty() {
        println!(
            "outside the network's training envelope ({}): ran the plain BDF2 fallback, uncorrected",
            s.outside_envelope.join("; ")
        );
    }
    if let Some(pieces) = scn.mesh.as_deref().map(|m| m.pieces()).filter(|&p| p > 1) {
        println!(
            "cloth.mesh is {pieces} separate pieces: nothing joins them but contact (cloth.weld sews copies of a seam)"
        );
    }
    if let Some(m) = scn.mesh.as_deref().filter(|m| m.welded > 0) {
        println!(
            "cloth.weld merged {} vertices of the mesh file into others ({} triangles lost a corner and were dropped)",
            m.welded, m.collapsed
        );
    }
    println!(
        "{}: {} frames of {} nodes in {:.2} s; mean CG iterations/step {:.1}; CG unconverged on {} steps ({} stagnated); final max strain {:.4} (limiter unfinished on {} steps); energy check failed on {} substeps; energy rose on {} steps; dropped pairs {}; checksum {}; output in {}",
        if scn.name.is_empty() { "scenario" } else { &scn.name },
        scn.time.steps,
        s.nodes,
        t0.elapsed().as_secs_f32(),
        s.cg_iterations_mean,
        s.cg_not_converged,
        s.cg_stagnated,
        last.max_strain,
        s.strain_limit_unfinished,
        s.energy_check_failed,
        s.energy_rose,
        s.dropped_pairs,
        s.checksum,
        out.display()
    );
    if picture {
        // Outside the training envelope the guarded corrector ran the fallback.
        let title = if s.outside_envelope.is_empty() { "int8-corrected" } else { "outside the envelope: plain BDF2" };
        let (gif, png) = preview(&scn, corrected.then_some(title), &frames, &out)?;
        println!("preview: {} and {}", gif.display(), png.display());
    }
    Ok(())
}

/// `weft simulate`'s preview of `frames`: alone, or for a corrected run
/// (titled `corrected`) beside the plain run of the same scene.
fn preview(
    scn: &Scenario,
    corrected: Option<&str>,
    frames: &[Vec<weft_core::math::Vec3>],
    out: &Path,
) -> Result<(PathBuf, PathBuf)> {
    use weft_host::view::preview::{self, Track};
    let every = (scn.time.steps as usize / 100).max(2);
    let (red, blue) = ([220.0, 90.0, 70.0], [70.0, 130.0, 220.0]);
    let Some(title) = corrected else {
        return preview::write(scn, &[Track { title: "plain", color: red, frames }], every, out);
    };
    let all: Vec<usize> = (0..scn.node_count()).collect();
    let plain = sim::rollout(scn, scn.time.steps as usize, &all, &mut corrector::Plain)?;
    let tracks = [Track { title: "plain", color: red, frames: &plain.x }, Track { title, color: blue, frames }];
    preview::write(scn, &tracks, every, out)
}
