//! `weft floors`: the reference's own error floor at each horizon, per
//! family — its change over the horizon when started 1 µm apart.
use crate::learn::eval::horizons::{
    finer, out_of_colliders, push_windows, Floor, Floors, Windows, HORIZONS, START_EVERY,
};
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use weft_core::prelude::Vec3;

use crate::learn::data::families::Family;
use crate::learn::data::metrics::mean;
use crate::learn::data::{self, Frames, Trajectory, PERTURBATION};
use crate::sim::corrector::Plain;

use crate::sim::{self, Restart};

/// Computes the floor of `traj`'s scenario on its fine mesh.
fn floor_of(traj: &Trajectory, spec: &data::DatasetSpec) -> Result<Floor> {
    let t0 = Instant::now();
    let (fine, map) = data::fine_scenario(&traj.scenario, spec.k, spec.time_substeps, spec.fine_integrator)?;
    let frames = traj.x.len() - 1;
    // The fine state at every start, from one continuous run.
    let mut snapshots: Vec<(Vec<Vec3>, Vec<Vec3>)> = Vec::new();
    let mut fine_all = fine.clone();
    fine_all.time.steps = frames as u32;
    sim::run(&fine_all, false, &mut Plain, |f, _, st| {
        if (f as usize).is_multiple_of(START_EVERY) && (f as usize) < frames {
            snapshots.push((st.positions().to_vec(), st.velocities().to_vec()));
        }
        Ok(())
    })?;
    let (mut windows, mut coarse): (Windows, Windows) = Default::default();
    for (k, (x, v)) in snapshots.iter().enumerate() {
        let s = k * START_EVERY;
        let len = HORIZONS[2].min(frames - s);
        let mut branch = fine.clone();
        branch.time.steps = len as u32;
        let moved: Vec<Vec3> = x.iter().map(|p| *p + Vec3::new(PERTURBATION, 0.0, 0.0)).collect();
        let restricted = |x: &[Vec3], v: &[Vec3]| -> Result<Frames> {
            let mut out = Vec::new();
            let restart = Restart { x, v, v_before: None, frame: s as u32 };
            sim::run_from(&branch, Some(restart), false, &mut Plain, |f, _, st| {
                if f > 0 {
                    out.push(map.iter().map(|&i| st.positions()[i]).collect());
                }
                Ok(())
            })?;
            Ok(out)
        };
        let (a, b) = (restricted(x, v)?, restricted(&moved, v)?);
        push_windows(&mut windows, &a, &b);
        // What the coarse nodes know: the state restricted and interpolated
        // back, its nodes inside a collider put on its surface.
        let only = |f: &[Vec3]| finer(&traj.scenario, &map.iter().map(|&i| f[i]).collect::<Vec<_>>(), spec.k);
        let (mut xc, mut vc) = (only(x), only(v));
        out_of_colliders(&fine, s, &mut xc, &mut vc)?;
        push_windows(&mut coarse, &a, &restricted(&xc, &vc)?);
    }
    Ok(Floor {
        family: traj.family,
        seed: traj.seed,
        floor: [0, 1, 2].map(|k| mean(&windows[k])),
        coarse: Some([0, 1, 2].map(|k| mean(&coarse[k]))),
        seconds: t0.elapsed().as_secs_f32(),
    })
}

/// `weft floors`: the floor of every family of the data set in `data`,
/// from its first test (or held-out) trajectory, into `floors.json`;
/// families already there with both floors are kept (resumable).
pub fn floors(data: &Path) -> Result<String> {
    let index = data::load_index(data)?;
    let path = data.join("floors.json");
    let mut floors: Floors =
        std::fs::read_to_string(&path).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
    // Families measured before the coarse state's floor existed run again.
    floors.families.retain(|f| f.coarse.is_some());
    for family in Family::ALL {
        if floors.families.iter().any(|f| f.family == family) {
            continue;
        }
        let Some(entry) =
            index.trajectories.iter().find(|e| e.family == family && (e.split == "test" || e.split == "heldout"))
        else {
            continue;
        };
        let traj = data::read_trajectory(&data.join(&entry.file))?;
        let floor = floor_of(&traj, &index.spec).with_context(|| format!("floor of {}", entry.file))?;
        floors.families.push(floor);
        crate::sim::files::write_json(&path, &floors)?;
    }
    let mut out = String::from(
        "family   seed   floor (1 µm) at 1 / 10 / 50 frames (m)   floor (coarse state) at 1 / 10 / 50 (m)   seconds\n",
    );
    let three = |f: [f32; 3]| format!("{:.2e} / {:.2e} / {:.2e}", f[0], f[1], f[2]);
    for f in &floors.families {
        out += &format!(
            "{:<8} {:>4}   {:<38}   {:<39}   {:>7.0}\n",
            f.family.name(),
            f.seed,
            three(f.floor),
            f.coarse.map_or("–".into(), three),
            f.seconds
        );
    }
    Ok(out)
}
