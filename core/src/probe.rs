//! Stage marks for measuring where a step's cost goes. The corrected step
//! calls [`Probe::enter`] as each of its stages begins
//! ([`crate::step::step_with`]: the physics step, the dynamic edges, the
//! network and the correction);
//! a probe reads a clock there and charges the time since its last mark to
//! the stage that ran. [`NoProbe`] (what the unprobed calls pass) compiles
//! to nothing.

/// Processor rounds the stage table has room for (at least the network's
/// [`crate::gnn::int8::MAX_ROUNDS`]).
pub const MAX_ROUNDS: usize = 8;

/// A stage of the physics step or of the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// External and elastic forces, the membrane's stiffness blocks and the
    /// right-hand side.
    Assembly,
    /// Pin targets and contact constraints of the solve, and the block
    /// preconditioner for them.
    Constraints,
    /// The multigrid's coarse operators (and the block preconditioner again
    /// after a contact release).
    Multigrid,
    /// The conjugate-gradient iterations (and the contact release check).
    Solve,
    /// The energy check, its line search and the candidate state (friction,
    /// strain limiting).
    Candidate,
    /// Self-contact, collider sweeps and the commit of the (sub)step.
    Contacts,
    /// The whole step's energy audit.
    Audit,
    /// The network's dynamic edges (proximity search on the physics
    /// result).
    DynamicEdges,
    /// Input features and the node and edge encoders.
    Encoders,
    /// Edge update of processor round `r`.
    EdgeUpdate(u8),
    /// Node update (mean of incoming edges and node MLP) of round `r`.
    NodeUpdate(u8),
    /// Position and velocity heads.
    Heads,
    /// The corrections added to the state.
    Correction,
}

/// Whether `stage` is part of the network's forward pass.
pub const fn is_network(stage: Stage) -> bool {
    matches!(stage, Stage::Encoders | Stage::EdgeUpdate(_) | Stage::NodeUpdate(_) | Stage::Heads)
}

/// Stages of the physics step, in order.
pub const PHYSICS: [Stage; 7] = [
    Stage::Assembly,
    Stage::Constraints,
    Stage::Multigrid,
    Stage::Solve,
    Stage::Candidate,
    Stage::Contacts,
    Stage::Audit,
];

impl Stage {
    /// Number of distinct stages ([`Stage::index`] is below it).
    pub const COUNT: usize = 7 + 4 + 2 * MAX_ROUNDS;

    /// A dense index, for per-stage tables.
    pub const fn index(self) -> usize {
        match self {
            Stage::Assembly => 0,
            Stage::Constraints => 1,
            Stage::Multigrid => 2,
            Stage::Solve => 3,
            Stage::Candidate => 4,
            Stage::Contacts => 5,
            Stage::Audit => 6,
            Stage::DynamicEdges => 7,
            Stage::Encoders => 8,
            Stage::Heads => 9,
            Stage::Correction => 10,
            Stage::EdgeUpdate(r) => 11 + 2 * (r as usize % MAX_ROUNDS),
            Stage::NodeUpdate(r) => 12 + 2 * (r as usize % MAX_ROUNDS),
        }
    }

    /// The stage of a dense index, in the order physics, dynamic edges,
    /// encoders, heads, correction, rounds.
    pub const fn at(index: usize) -> Option<Stage> {
        Some(match index {
            0 => Stage::Assembly,
            1 => Stage::Constraints,
            2 => Stage::Multigrid,
            3 => Stage::Solve,
            4 => Stage::Candidate,
            5 => Stage::Contacts,
            6 => Stage::Audit,
            7 => Stage::DynamicEdges,
            8 => Stage::Encoders,
            9 => Stage::Heads,
            10 => Stage::Correction,
            i if i < Stage::COUNT => {
                let r = ((i - 11) / 2) as u8;
                if (i - 11) % 2 == 0 {
                    Stage::EdgeUpdate(r)
                } else {
                    Stage::NodeUpdate(r)
                }
            }
            _ => return None,
        })
    }

    /// A short name for logs.
    pub const fn name(self) -> &'static str {
        match self {
            Stage::Assembly => "assembly",
            Stage::Constraints => "constraints",
            Stage::Multigrid => "multigrid set-up",
            Stage::Solve => "CG solve",
            Stage::Candidate => "energy check and candidate",
            Stage::Contacts => "contacts and commit",
            Stage::Audit => "energy audit",
            Stage::DynamicEdges => "dynamic edges",
            Stage::Encoders => "features and encoders",
            Stage::EdgeUpdate(_) => "edge update",
            Stage::NodeUpdate(_) => "node update",
            Stage::Heads => "heads",
            Stage::Correction => "correction",
        }
    }
}

/// Receives the stage marks.
pub trait Probe {
    /// `stage` begins (the previous one, if any, has ended).
    fn enter(&mut self, stage: Stage);
}

/// The probe that measures nothing.
pub struct NoProbe;

impl Probe for NoProbe {
    #[inline(always)]
    fn enter(&mut self, _: Stage) {}
}
