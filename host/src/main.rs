//! The `weft` command.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};
use weft_core::prelude::Vec3;
use weft_host::render::{self, Camera};
use weft_host::scenario::Scenario;
use weft_host::sim;

/// weft: FEM cloth simulation for microcontrollers, run on the desktop.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario file: OBJ frames and summary.json into the output folder.
    Simulate {
        scenario: PathBuf,
        /// Output folder (default: out/<scenario file stem>).
        #[arg(short, long)]
        out: Option<PathBuf>,
        /// No progress bar.
        #[arg(short, long)]
        quiet: bool,
    },
    /// Drape a cloth over a sphere and write an animated GIF.
    Demo {
        #[arg(short, long, default_value = "weft-demo.gif")]
        out: PathBuf,
    },
}

/// The drape-over-sphere scenario shipped with weft.
const DRAPE: &str = include_str!("../scenarios/drape_sphere.toml");

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
        Command::Simulate { scenario, out, quiet } => {
            let scn = Scenario::load(&scenario)?;
            let out = out.unwrap_or_else(|| {
                PathBuf::from("out").join(scenario.file_stem().map(|s| s.to_os_string()).unwrap_or_default())
            });
            let t0 = std::time::Instant::now();
            let s = sim::simulate(&scn, &out, !quiet)?;
            let last = s.frames.last().cloned().unwrap_or_default();
            println!(
                "{}: {} frames of {} nodes in {:.2} s; mean CG iterations/step {:.1}; final max strain {:.4}; dropped pairs {}; output in {}",
                if scn.name.is_empty() { "scenario" } else { &scn.name },
                scn.time.steps,
                s.nodes,
                t0.elapsed().as_secs_f32(),
                s.cg_iterations_mean,
                last.max_strain,
                s.dropped_pairs,
                out.display()
            );
        }
        Command::Demo { out } => {
            let scn = Scenario::parse(DRAPE)?;
            let cam = Camera {
                eye: Vec3::new(1.1, 1.2, 1.6),
                target: Vec3::new(0.0, 0.3, 0.0),
                fov_y_deg: 40.0,
                width: 400,
                height: 300,
            };
            let mut frames = Vec::new();
            let bar = indicatif::ProgressBar::new(scn.time.steps as u64 + 1);
            let s = sim::run(&scn, false, |frame, model, state| {
                if frame % 2 == 0 {
                    frames.push(render::render(
                        &cam,
                        &model.mesh,
                        state.positions(),
                        model.scene.colliders,
                        state.time(),
                        [70.0, 130.0, 220.0],
                    ));
                }
                bar.inc(1);
                Ok(())
            })?;
            bar.finish_and_clear();
            let ms = (2000.0 * scn.time.dt).round() as u32;
            render::write_gif(&out, &frames, ms)?;
            println!(
                "drape over a sphere: {} frames, {} nodes, mean CG iterations/step {:.1}; wrote {}",
                scn.time.steps,
                s.nodes,
                s.cg_iterations_mean,
                out.display()
            );
        }
    }
    Ok(())
}
