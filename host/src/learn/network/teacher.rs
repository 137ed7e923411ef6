//! The cheap teacher and its samples: the coarse mesh at the fine
//! reference's own step (BDF2, [`TEACHER_SUBSTEPS`] steps a frame), exact
//! from any coarse state, asked from every state a collecting rollout
//! reaches. A sample is the graph of the base step from state `s` (the
//! step the network corrects) with targets `teacher(s) − base(s)` in
//! position and velocity (the teacher's velocity at the frame's end: its
//! mean over the frame would lag it by half a frame's acceleration, and a
//! rollout corrected to it falls behind by `g dt² / 2` a frame).
//! `weft train --teacher coarse` trains on them
//! (`crate::learn::train::on_policy`), and `weft quantize` calibrates such
//! a network on them.

use std::cell::RefCell;

use anyhow::{Context, Result};
use candle_core::Device;

use crate::learn::data::families::{self, Family};
use crate::learn::data::{self, DatasetSpec};
use crate::learn::network::{
    add_network_correction, graph_of, Branches, FrameClass, GnnConfig, Graph, TeacherStep, Trained,
};
use crate::sim::corrector::Corrector;
use crate::sim::scenario::{IntegratorSpec, Scenario};
use crate::sim::{self, Restart};
use weft_core::model::CoarseGrain;
use weft_core::prelude::*;

/// The teacher's physics steps per frame: the fine reference's.
pub const TEACHER_SUBSTEPS: u32 = 8;

/// A sample whose target moves a node more than this (m) or changes its
/// velocity more than [`MAX_DV`] (m/s) ends its rollout unused: the
/// network has left the states a cloth reaches.
pub const MAX_DX: f32 = 0.05;

/// The velocity bound beside [`MAX_DX`] (m/s).
pub const MAX_DV: f32 = 3.0;

/// Plain rollouts the normaliser of a new network is taken from (and its
/// buffer seeded with), two of every trained family.
pub const FIRST_SCENES: usize = 12;

/// The teacher's scenario: `scn` at `step`'s steps a frame
/// ([`TeacherStep::Bdf2Eighth`]: [`TEACHER_SUBSTEPS`] BDF2 steps).
pub fn teacher_scenario(scn: &Scenario, step: TeacherStep) -> Scenario {
    let (substeps, integrator) = step.step();
    let mut t = scn.clone();
    t.time.substeps *= substeps;
    t.solver.integrator = integrator;
    t
}

/// One frame of the teacher from positions `x` and velocities `v` at frame
/// `frame`, on the membrane `grain` (the one the base step it corrects
/// runs: the targets are a correction of the time step alone): its
/// positions and velocities after it.
pub fn teacher_frame(
    teacher: &Scenario,
    x: &[Vec3],
    v: &[Vec3],
    frame: u32,
    grain: CoarseGrain,
) -> Result<(Vec<Vec3>, Vec<Vec3>)> {
    let mut scn = teacher.clone();
    scn.time.steps = 1;
    let mut out = None;
    let restart = Restart { x, v, v_before: None, frame };
    sim::run_from(&scn, Some(restart), false, &mut crate::sim::corrector::Grained(grain), |f, _, st| {
        if f == 1 {
            out = Some((st.positions().to_vec(), st.velocities().to_vec()));
        }
        Ok(())
    })?;
    out.context("the teacher's frame did not finish")
}

/// The state before the step being corrected.
#[derive(Default)]
struct Before {
    x: Vec<Vec3>,
    v: Vec<Vec3>,
    frame: u32,
}

/// The corrector of a collecting rollout: after each base step, the
/// sample (graph, teacher targets), then the current network's correction.
struct Collector<'a> {
    cfg: &'a GnnConfig,
    net: Option<&'a Trained>,
    teacher: Scenario,
    before: &'a RefCell<Before>,
    every: usize,
    step: usize,
    samples: Vec<Graph>,
    branches: Branches,
    family: Option<Family>,
}

impl Corrector for Collector<'_> {
    fn pairs(&self, nodes: usize) -> usize {
        self.cfg.pairs_per_node * nodes
    }
    fn coarse_grain(&self) -> CoarseGrain {
        self.cfg.coarse_grain()
    }
    fn base_step(&self) -> Option<IntegratorSpec> {
        self.cfg.trained_base()
    }
    fn correct(&mut self, model: &Model, state: &mut State) -> Result<usize> {
        self.step += 1;
        let branched = self.branches.since_last(state);
        if self.step.is_multiple_of(self.every) {
            let b = self.before.borrow();
            // A teacher that fails (a state it cannot step) gives no sample.
            if let Ok((xt, vt)) = teacher_frame(&self.teacher, &b.x, &b.v, b.frame, self.cfg.coarse_grain()) {
                let mut g = graph_of(model, state, self.cfg)?;
                if branched {
                    g.class = FrameClass::Branch;
                }
                g.family = self.family;
                let (fx, fv) = self.cfg.heads();
                let (x, v) = (state.positions(), state.velocities());
                g.targets = (0..x.len())
                    .map(|i| {
                        let dx = (xt[i] - x[i]) * fx;
                        let dv = (vt[i] - v[i]) * fv;
                        [dx.x, dx.y, dx.z, dv.x, dv.y, dv.z]
                    })
                    .collect();
                // A rollout gone far from any cloth's motion teaches
                // nothing: it ends here.
                let wild = g
                    .targets
                    .iter()
                    .any(|t| t[..3].iter().any(|d| d.abs() > MAX_DX) || t[3..].iter().any(|d| d.abs() > MAX_DV));
                if wild {
                    anyhow::bail!("the teacher's correction exceeds {MAX_DX} m or {MAX_DV} m/s");
                }
                self.samples.push(g);
            }
        }
        match self.net {
            Some(m) => {
                add_network_correction(model, state, self.cfg, |g| m.correct(g, &Device::Cpu))?;
                Ok(state.pairs().len())
            }
            None => Ok(0),
        }
    }
}

/// The samples of one rollout of `scn` from its start, `frames` frames,
/// corrected by `net` (plain when `None`), a sample every `every` frames.
/// A rollout that fails keeps the samples before the failure.
pub fn collect(scn: &Scenario, cfg: &GnnConfig, net: Option<&Trained>, frames: u32, every: usize) -> Vec<Graph> {
    let before = RefCell::new(Before::default());
    let mut scn = scn.clone();
    scn.time.steps = frames;
    let teacher = teacher_scenario(&scn, cfg.teacher_step);
    let family = Family::ALL.into_iter().find(|f| scn.name.starts_with(&format!("{}-", f.name())));
    let mut c = Collector {
        cfg,
        net,
        teacher,
        before: &before,
        every: every.max(1),
        step: 0,
        samples: Vec::new(),
        branches: Branches::default(),
        family,
    };
    // A rollout that fails (a state the step refuses) keeps the samples
    // before it.
    let _ = sim::run(&scn, false, &mut c, |f, _, st| {
        *before.borrow_mut() = Before { x: st.positions().to_vec(), v: st.velocities().to_vec(), frame: f };
        Ok(())
    });
    c.samples
}

/// The training scenes: the first `per_family` training seeds of every
/// family that trains under `spec`, as `weft generate` would make them.
pub fn training_scenes(spec: &DatasetSpec, per_family: usize) -> Vec<Scenario> {
    let mut out = Vec::new();
    for &family in Family::ALL.iter().filter(|&&f| Some(f) != spec.heldout) {
        let seeds = (spec.seed..).filter(|&s| data::split_of(spec, family, s) == "train").take(per_family);
        out.extend(seeds.map(|s| families::scenario(family, s, spec.coarse, spec.steps, spec.dt)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The teacher's targets are exactly the gap between one base frame
    /// and one teacher frame from the same state (plain collection, so
    /// the state the next sample starts from is the base step's).
    #[test]
    fn a_plain_collection_targets_the_teacher_from_the_same_state() {
        let spec = DatasetSpec::default();
        let mut scn = families::scenario(Family::Hang, 0, 6, 3, spec.dt);
        scn.time.steps = 3;
        let cfg = GnnConfig { rounds: 1, ..GnnConfig::default() };
        let samples = collect(&scn, &cfg, None, 3, 1);
        assert_eq!(samples.len(), 3);
        // Frame 1 by hand: the base frame and the teacher frame from the start.
        let mut base = Vec::new();
        let one = Scenario { time: crate::sim::scenario::TimeSpec { steps: 1, ..scn.time }, ..scn.clone() };
        sim::run(&one, false, &mut crate::sim::corrector::Plain, |_, _, st| {
            base.push((st.positions().to_vec(), st.velocities().to_vec()));
            Ok(())
        })
        .unwrap();
        let (x0, v0) = &base[0];
        let (x1, v1) = &base[1];
        let (xt, vt) =
            teacher_frame(&teacher_scenario(&scn, TeacherStep::Bdf2Eighth), x0, v0, 0, CoarseGrain::NONE).unwrap();
        for i in 0..x1.len() {
            let t = samples[0].targets[i];
            let dx = xt[i] - x1[i];
            let dv = vt[i] - v1[i];
            assert_eq!([dx.x, dx.y, dx.z, dv.x, dv.y, dv.z], t, "node {i}");
        }
        // The teacher is not the base step: the targets are not all zero.
        assert!(samples[0].targets.iter().any(|t| t.iter().any(|&c| c != 0.0)));
    }

    /// The teacher steps the membrane the network corrects: with a
    /// calibrated (coarse-grained) membrane, the targets are the gap
    /// between the base frame and the teacher frame on that same membrane,
    /// a correction of the time step alone.
    #[test]
    fn the_teacher_steps_the_membrane_the_network_corrects() {
        let spec = DatasetSpec::default();
        let mut scn = families::scenario(Family::Hang, 0, 6, 2, spec.dt);
        scn.time.steps = 1;
        let cfg = GnnConfig { rounds: 1, coarse_stretch: 0.5, coarse_compression: 0.5, ..GnnConfig::default() };
        let grain = cfg.coarse_grain();
        let samples = collect(&scn, &cfg, None, 1, 1);
        let mut base = Vec::new();
        sim::run(&scn, false, &mut crate::sim::corrector::Grained(grain), |_, _, st| {
            base.push((st.positions().to_vec(), st.velocities().to_vec()));
            Ok(())
        })
        .unwrap();
        let (x0, v0) = &base[0];
        let (x1, _) = &base[1];
        // The teacher by hand: eight BDF2 steps of the grained membrane.
        let mut teacher = teacher_scenario(&scn, TeacherStep::Bdf2Eighth);
        teacher.time.steps = 1;
        let restart = Restart { x: x0, v: v0, v_before: None, frame: 0 };
        let mut xt = Vec::new();
        sim::run_from(&teacher, Some(restart), false, &mut crate::sim::corrector::Grained(grain), |f, _, st| {
            if f == 1 {
                xt = st.positions().to_vec();
            }
            Ok(())
        })
        .unwrap();
        for i in 0..x1.len() {
            let dx = xt[i] - x1[i];
            assert_eq!([dx.x, dx.y, dx.z], samples[0].targets[i][..3], "node {i}");
        }
    }

    #[test]
    fn training_scenes_are_training_seeds_of_the_trained_families() {
        let spec = DatasetSpec::default();
        let scenes = training_scenes(&spec, 2);
        let trained = Family::ALL.iter().filter(|&&f| Some(f) != spec.heldout).count();
        assert_eq!(scenes.len(), 2 * trained);
        assert!(scenes.iter().all(|s| !s.name.starts_with("flag")));
        // Seeds 0 and 1 train (5 of every 7 below 70).
        assert!(scenes.iter().any(|s| s.name == "hang-1"));
    }
}
