//! Evaluation: `weft eval` ([`command`]) over the ways to step the coarse
//! cloth ([`columns`]) with the shared error measures
//! ([`crate::learn::data::metrics`]), the
//! errors at horizons ([`horizons`]) beside the reference's floors
//! (`weft floors`, [`floors`]), the board's cost model ([`device`]) and
//! the frontier ratio against the plain step of the same cost ([`frontier`]);
//! `weft gain` ([`gain`]) and `weft select` ([`select`]), which choose
//! what ships.

pub mod columns;
pub mod command;
pub mod device;
pub mod floors;
pub mod frontier;
pub mod gain;
pub mod horizons;
pub mod select;

pub use command::*;
