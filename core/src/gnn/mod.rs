//! The correction network's view of the cloth, and the network itself.
//!
//! After the FEM step, the network sees the cloth as a graph: every static
//! (mesh) edge and every dynamic edge (node pairs closer than the contact
//! radius `r` with no static edge, from [`crate::contact::proximity`]) in
//! both directions, and every node. [`features`] turns positions,
//! velocities and the rest mesh into the network's input features, the same
//! code for training on a desktop and for inference on a microcontroller;
//! [`graph`] is the view both networks read; [`int8`] runs the quantised
//! network.
//!
//! A corrected step is [`crate::step`]: physics → dynamic edges → network
//! → correction.

pub mod features;
pub mod graph;
pub mod int8;
