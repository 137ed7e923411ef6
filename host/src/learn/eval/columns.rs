//! The ways to step the coarse cloth that `weft eval` compares ([`Column`]):
//! plain, corrected by either network, and the plain alternatives that
//! spend more compute instead. Each column knows its scenario, its
//! corrector, its nodes and its cost structure; the evaluations, their
//! tables, reports and plots iterate the columns.

use serde::{Deserialize, Serialize};
use weft_weights::format::NetworkData;

use crate::learn::network::{self, Trained};
use weft_core::model::CoarseGrain;

use crate::sim::corrector::{Corrector, Grained, Int8, Plain};
use crate::sim::scenario::{IntegratorSpec, Scenario};

/// A way to step the coarse cloth.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Column {
    /// Backward Euler, one step per frame (the yardstick).
    #[default]
    Plain,
    /// Corrected by the float network.
    Float,
    /// Corrected by the int8 network (what the device runs).
    Int8,
    /// Backward Euler, one step per frame, on the membrane the network
    /// corrects (its coarse grain, `weft calibrate`), uncorrected: what the
    /// grain buys without the network. Only with a network whose grain is
    /// not [`weft_core::model::CoarseGrain::NONE`].
    Grained,
    /// Backward Euler, two steps of `dt / 2` per frame.
    HalfDt,
    /// Backward Euler, four steps of `dt / 4` per frame.
    QuarterDt,
    /// BDF2, one step per frame (a restart's first step is backward Euler).
    Bdf2,
    /// Backward Euler on a mesh twice as fine, one step per frame.
    Fine2,
    /// BDF2, two steps of `dt / 2` per frame.
    Bdf2HalfDt,
    /// BDF2, eight steps of `dt / 8` per frame: the coarse mesh at the fine
    /// reference's own step, the ceiling of any correction of the time
    /// step alone.
    Bdf2EighthDt,
}

impl Column {
    /// Every column, in the tables' order; every one is measured at
    /// horizons too ([`Column::Fine2`] starts from the reference's coarse
    /// nodes interpolated onto its finer mesh, `learn::eval::horizons::prolongate`).
    pub const ALL: [Column; 10] = [
        Column::Plain,
        Column::Float,
        Column::Int8,
        Column::Grained,
        Column::HalfDt,
        Column::QuarterDt,
        Column::Bdf2,
        Column::Bdf2HalfDt,
        Column::Bdf2EighthDt,
        Column::Fine2,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Column::Plain => "plain",
            Column::Float => "float",
            Column::Int8 => "int8",
            Column::Grained => "plain, coarse grain",
            Column::HalfDt => "plain dt/2",
            Column::QuarterDt => "plain dt/4",
            Column::Bdf2 => "plain BDF2",
            Column::Fine2 => "plain 2× finer",
            Column::Bdf2HalfDt => "plain BDF2 dt/2",
            Column::Bdf2EighthDt => "plain BDF2 dt/8",
        }
    }

    /// Physics steps per frame of this column per step of the scenario's.
    pub fn substep_factor(self) -> u32 {
        match self {
            Column::HalfDt | Column::Bdf2HalfDt => 2,
            Column::QuarterDt => 4,
            Column::Bdf2EighthDt => 8,
            _ => 1,
        }
    }

    /// The integrator this column steps with (`None`: the scenario's own).
    pub fn integrator(self) -> Option<IntegratorSpec> {
        match self {
            Column::Bdf2 | Column::Bdf2HalfDt | Column::Bdf2EighthDt => Some(IntegratorSpec::Bdf2),
            _ => None,
        }
    }

    /// Corrected by a network.
    pub fn corrected(self) -> bool {
        matches!(self, Column::Float | Column::Int8)
    }

    /// How many times finer than the coarse mesh this column's mesh is
    /// along each side (1: the coarse mesh itself).
    pub fn refinement(self) -> usize {
        match self {
            Column::Fine2 => 2,
            _ => 1,
        }
    }

    /// The scenario this column steps.
    pub fn scenario(self, scn: &Scenario) -> Scenario {
        let mut s = scn.clone();
        s.time.substeps *= self.substep_factor();
        if let Some(i) = self.integrator() {
            s.solver.integrator = i;
        }
        if self == Column::Fine2 {
            match &scn.mesh {
                // A mesh cloth: its triangles split at their edges' midpoints.
                Some(m) => {
                    let k = self.refinement().trailing_zeros();
                    s.mesh = Some(std::sync::Arc::new(crate::sim::obj::subdivide(m, k)));
                }
                None => s = scn.refined(self.refinement(), 1),
            }
        }
        s
    }

    /// The nodes of this column's mesh that are the coarse mesh's.
    pub fn nodes(self, scn: &Scenario) -> Vec<usize> {
        if scn.mesh.is_some() {
            // Subdivision keeps the coarse nodes first, at their indices.
            return (0..scn.node_count()).collect();
        }
        let n = scn.cloth.resolution[0] * scn.cloth.resolution[1];
        (0..n).map(|i| scn.refine_node(i, self.refinement())).collect()
    }

    /// The corrector after every physics step; `None` when the model this
    /// column needs is missing.
    pub fn corrector<'m>(
        self,
        float: Option<&'m Trained>,
        int8: Option<&'m NetworkData>,
    ) -> Option<Box<dyn Corrector + 'm>> {
        match self {
            Column::Float => float.map(|m| Box::new(network::Float(m)) as Box<dyn Corrector>),
            Column::Int8 => int8.map(|n| {
                // The float network's base step, which its int8 file does not carry.
                let base = float.and_then(|m| m.meta.config.trained_base());
                let mut c = Int8::new(n);
                c.base = base;
                Box::new(c) as Box<dyn Corrector>
            }),
            Column::Grained => {
                let grain = float.map(|m| m.meta.config.coarse_grain()).or(int8.map(|n| n.coarse))?;
                (grain != CoarseGrain::NONE).then(|| Box::new(Grained(grain)) as Box<dyn Corrector>)
            }
            _ => Some(Box::new(Plain)),
        }
    }

    /// How many times the coarse mesh's nodes this column's mesh has (its
    /// cost per step and per CG iteration scales with them).
    pub fn mesh_scale(self, scn: &Scenario) -> f64 {
        if scn.mesh.is_some() {
            return self.scenario(scn).node_count() as f64 / scn.node_count().max(1) as f64;
        }
        let [nx, ny] = scn.cloth.resolution;
        let k = self.refinement();
        (((nx - 1) * k + 1) * ((ny - 1) * k + 1)) as f64 / (nx * ny).max(1) as f64
    }

    /// Physics steps per frame of a scenario with `substeps`.
    pub fn steps_per_frame(self, substeps: u32) -> f64 {
        (substeps * self.substep_factor()) as f64
    }

    /// Network calls per frame of a scenario with `substeps`.
    pub fn network_calls_per_frame(self, substeps: u32) -> f64 {
        if self.corrected() {
            substeps as f64
        } else {
            0.0
        }
    }
}
