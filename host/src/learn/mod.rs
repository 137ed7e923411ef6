//! The learning layer: the scenario families ([`families`]) and their
//! fine-reference data ([`dataset`]), the float network and its samples
//! ([`gnn`], [`samples`]), training ([`train`], [`rollout_loss`], [`solver_loss`]: the solver in the loop), int8 quantisation and
//! export ([`quantize`]), the coarse step fitted to the reference ([`calibrate`]), and evaluation ([`columns`], [`eval`], [`gain`],
//! [`horizons`], [`metrics`]). It builds on `sim` and `weft-core`; nothing below it
//! imports it.

pub mod calibrate;
pub mod columns;
pub mod dataset;
pub mod eval;
pub mod families;
pub mod gain;
pub mod gnn;
pub mod horizons;
pub mod metrics;
pub mod quantize;
pub mod rollout_loss;
pub mod samples;
pub mod select;
pub mod solver_loss;
pub mod train;
