//! The solve's iterations as a cloth is refined: the same cloth at 2×, 4×
//! the nodes a side, dropped 0.3 m onto a plane (dt 1/60 s, 60 frames),
//! as a user's file would be run: a 0.22 m grid at 16², 32², 64² nodes,
//! the 0.4 m disc at 8, 16, 32 rings, and the 6 cm tube at 12, 24, 48
//! nodes round. Prints the nodes, the mean CG iterations a step, the
//! unconverged (stagnated) steps, the growth from the rung before and the
//! wall time (`cargo run --release -p weft-host --example refinement`;
//! `-- grid`, `-- disc` or `-- tube` for one family; `WEFT_COARSE=rigid`
//! or `translations` sets the meshes' `solver.coarse`).
use weft_host::sim::{self, corrector::Plain, scenario::Scenario};
use weft_scene::obj;
use weft_scene::shapes::Shape;

const DROP: &str = "[time]\ndt = 0.016666668\nsteps = 60\n\n[[collider]]\nkind = \"plane\"\nnormal = [0.0, 1.0, 0.0]\noffset = 0.0\nfriction = 0.5\n";

/// The scene of one rung: its TOML and, for a mesh, its OBJ text.
fn rung(family: &str, n: usize) -> Option<(String, Option<String>)> {
    if family == "grid" {
        let cloth = format!(
            "[cloth]\nwidth = 0.22\nheight = 0.22\nresolution = [{n}, {n}]\norientation = \"horizontal\"\ncenter = [0.0, 0.3, 0.0]\n"
        );
        return Some((cloth + DROP, None));
    }
    let shape = if family == "disc" { Shape::Disc } else { Shape::Tube };
    let (x, t) = shape.mesh_at(n)?;
    let cloth = "[cloth]\nmesh = \"m.obj\"\ncenter = [0.0, 0.3, 0.0]\n".to_string();
    let coarse = std::env::var("WEFT_COARSE").map_or(String::new(), |c| format!("\n[solver]\ncoarse = \"{c}\"\n"));
    Some((cloth + DROP + &coarse, Some(obj::write(&x, &t))))
}

fn main() -> anyhow::Result<()> {
    let only: Option<String> = std::env::args().nth(1);
    let ladders = [("grid", [16, 32, 64]), ("disc", [16, 32, 64]), ("tube", [12, 24, 48])];
    println!("family  rung  nodes   mean CG a step   growth   unconverged (stagnated)   seconds");
    for (family, rungs) in ladders {
        if only.as_deref().is_some_and(|o| o != family) {
            continue;
        }
        let mut before = None;
        for n in rungs {
            let Some((toml, mesh)) = rung(family, n) else { continue };
            let dir = tempfile::tempdir()?;
            if let Some(text) = mesh {
                std::fs::write(dir.path().join("m.obj"), text)?;
            }
            let scn = Scenario::parse_in(&toml, dir.path())?;
            let t0 = std::time::Instant::now();
            let s = sim::run(&scn, false, &mut Plain, |_, _, _| Ok(()))?;
            let growth = before.map_or("".into(), |b: f32| format!("{:.2}×", s.cg_iterations_mean / b));
            println!(
                "{family:6}  {n:4}  {:5}   {:14.1}   {growth:>6}   {:11} ({})   {:7.2}",
                s.nodes,
                s.cg_iterations_mean,
                s.cg_not_converged,
                s.cg_stagnated,
                t0.elapsed().as_secs_f64()
            );
            before = Some(s.cg_iterations_mean);
        }
    }
    Ok(())
}
