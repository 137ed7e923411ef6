//! Training: `weft train` ([`command`]; [`adam`], the optimizer; [`checkpoint`], one file a run resumes from exactly) on the
//! one-step loss, the rollout loss ([`rollout_loss`]) and the solver in
//! the loop ([`solver_loss`]), from samples drawn from the data
//! (`crate::learn::network::samples`) or from the network's own
//! from-start rollouts with a coarse teacher ([`on_policy`]); and `weft calibrate` ([`calibrate`]), the coarse step's
//! membrane fitted to the reference.

pub mod adam;
pub mod calibrate;
pub mod checkpoint;
pub mod command;
pub mod fit;
pub mod on_policy;
pub mod rollout_loss;
pub mod solver_loss;

pub use command::*;
