//! The learning layer, in rooms by job: the scenario families and their
//! fine-reference data ([`data`]), the float network ([`network`]),
//! training ([`train`]: the one-step, rollout and solver-in-the-loop
//! losses, and the coarse step fitted to the reference), evaluation
//! ([`eval`]: rollouts, horizons and floors, the gain and the shipped
//! network's selection) and int8 quantisation ([`quantise`]). Each command
//! of `weft` has a file of its own. It builds on `sim` and `weft-core`;
//! nothing below it imports it.

pub mod data;
pub mod eval;
pub mod network;
pub mod quantise;
pub mod train;
