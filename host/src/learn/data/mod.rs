//! Coarse/fine training data: the scenario families ([`families`]), the
//! trajectories on disk ([`format`]) and their generation ([`generate`],
//! `weft generate`).

pub mod families;
pub mod format;
pub mod generate;
pub mod metrics;

pub use format::*;
pub use generate::*;
