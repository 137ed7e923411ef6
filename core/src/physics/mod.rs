//! The FEM cloth step: StVK membrane + Kirchhoff plate bending forces and their
//! Jacobians, one linearised backward-Euler solve (Baraff–Witkin)
//!
//! `(M − h ∂f/∂v − h² ∂f/∂x) Δv = h (f + h ∂f/∂x v)`
//!
//! with Rayleigh damping `f_d = −αMv − βKv` (so `∂f/∂v = −αM − βK`) and the
//! positive semi-definite stiffness `K ≈ −∂f/∂x`, solved by filtered PCG
//! with pinned nodes as velocity constraints. An energy check guards the
//! linearisation: a step that would add energy (a stiff cloth rotating or
//! deforming fast within one step) is split into halves (see [`step`]).
//! Colliders and (optionally)
//! node–node self-contact then act on the end-of-step state. A step either
//! commits a finite state or leaves the state as it was.
//!
//! The rooms, in the order of a step's stages ([`crate::probe::Stage`]):
//! [`step`] drives them; [`assembly`], [`constraints`], [`solver`] (the
//! solve and its multigrid, [`multigrid`]), [`candidate`] (the energy
//! check), [`commit`] (contacts and commit) and [`audit`]. The material
//! laws are [`membrane`] and [`bending`]; [`state`] is what a step changes
//! and [`workspace`] the memory it works in; [`adjoint`] is the step's
//! vector–Jacobian product.

pub mod adjoint;
pub mod aggregate;
pub mod assembly;
pub mod audit;
pub mod bending;
pub mod blocks;
pub mod candidate;
pub mod commit;
pub mod constraints;
pub mod energy;
pub mod gather;
pub mod hierarchy;
pub mod limit;
pub mod membrane;
pub mod multigrid;
pub mod newton;
pub mod solver;
pub mod state;
pub mod stencil;
pub mod step;
pub mod workspace;

pub use adjoint::{step_vjp, Linearisation, VjpError, VjpReport};
pub use assembly::assemble;
pub use audit::EnergyAudit;
pub use energy::{edge_strains, elastic, energy, max_strain, Elastic, Energy};
pub use state::{State, StateError, StateSizes, StateStorage, Warnings, TICKS_PER_STEP};
pub use step::{set_velocities_before, step, step_probed, MAX_SPLIT};

/// What one step did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepReport {
    /// CG iterations, summed over substeps.
    pub cg_iterations: u32,
    /// Largest relative CG residual ‖r‖/‖b‖ at exit.
    pub residual: f32,
    pub converged: bool,
    /// A solve stopped early because its residual stopped falling.
    pub stagnated: bool,
    /// Smallest fraction of a solved velocity change taken (1 unless the
    /// energy check had to shorten a step at the finest split).
    pub step_scale: f32,
    /// Substeps the step took: 1, or more when it was split to pass the
    /// energy check.
    pub substeps: u32,
    /// Substeps whose solve failed the energy check and took a Newton
    /// correction ([`newton`]; a second solve each).
    pub newton: u32,
    /// Node contacts with colliders.
    pub contacts: usize,
    /// Proximity pairs found (self-contact) and kept.
    pub pairs: usize,
    /// Proximity pairs that did not fit the pair storage.
    pub dropped_pairs: usize,
    /// Pairs that received a self-contact impulse.
    pub self_contacts: usize,
    /// The strain limiter left an edge over the limit after its last pass.
    pub strain_unfinished: bool,
    /// The step's total energy rose beyond the work of the wind
    /// ([`EnergyAudit`]).
    pub energy_rose: bool,
}

impl StepReport {
    /// The step left the plain solve: a Newton correction, a shortened
    /// velocity change (line search or the finest split's) or a split.
    pub fn branched(&self) -> bool {
        self.newton > 0 || self.substeps > 1 || self.step_scale < 1.0
    }
}

/// Why a step was refused. The state is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepError {
    /// The state was made for a mesh of another size.
    MeshMismatch,
    /// The step produced NaN or infinity (too large a time step or forces).
    NonFinite,
}

impl core::fmt::Display for StepError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            StepError::MeshMismatch => write!(f, "state and model meshes differ in size"),
            StepError::NonFinite => write!(f, "step produced a non-finite state; state kept at the last good step"),
        }
    }
}

impl core::error::Error for StepError {}
