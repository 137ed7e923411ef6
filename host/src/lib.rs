//! weft on the desktop: scenario files, the simulation driver, output
//! writers and the renderer behind the `weft` command.

pub mod dataset;
pub mod eval;
pub mod families;
pub mod gnn;
pub mod quantize;
pub mod render;
pub mod scenario;
pub mod sim;
pub mod storage;
pub mod train;
