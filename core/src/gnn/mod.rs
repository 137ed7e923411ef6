//! The correction network's view of the cloth.
//!
//! After the FEM step, the network sees the cloth as a graph: every static
//! (mesh) edge and every dynamic edge (node pairs closer than the contact
//! radius `r` with no static edge, from [`crate::contact::proximity`]) in
//! both directions, and every node. [`features`] turns positions,
//! velocities and the rest mesh into the network's input features, the same
//! code for training on a desktop and for inference on a microcontroller.

pub mod features;
