//! # weft-core
//!
//! Allocation-free FEM cloth simulation for microcontrollers and desktops.
//!
//! The crate is `#![no_std]`, uses `f32` with `libm` everywhere (so every
//! target computes the same bits) and never allocates: memory belongs to
//! the caller.
//!
//! ## Layers
//! - [`math`]: `Vec3`, `Mat3`, symmetric 2×2.
//! - [`mesh`]: the validated rest mesh (nodes, triangles, static edges,
//!   bending hinges and triangles), built into caller storage
//!   ([`mesh::MeshStorage`]).
//! - [`model`]: what a run never changes — mesh, [`model::Material`],
//!   [`model::Scene`] (gravity, pins, colliders, wind), [`model::StepParams`].
//! - [`state`]: what a step changes — positions, velocities, time, solver
//!   scratch, proximity pairs and counted [`physics::state::Warnings`].
//! - [`physics`]: the step — StVK membrane and Kirchhoff plate bending
//!   forces with their Jacobians, one linearised backward-Euler (or BDF2)
//!   solve by PCG with contact constraints; on grids the bending Hessian is
//!   assembled once ([`physics::stencil`]) and the CG is preconditioned by
//!   an aggregation multigrid V-cycle ([`physics::multigrid`]); the
//!   step's vector–Jacobian product for training through it
//!   ([`physics::adjoint`]).
//! - [`contact`]: the bounded spatial-hash proximity search and the
//!   collider / self-contact responses.
//! - [`gnn`]: the correction network's graph and input features, and the
//!   int8 network with its do-no-harm guard.
//! - [`step`]: one corrected step — physics, dynamic edges, network,
//!   correction — and its two stages.
//! - [`storage`]: const-generic buffers for static storage.
//! - `fpu` (hard-float Arm with the `dsp` feature): the Cortex-M4F's
//!   `VSQRT.F32` and `VFMA.F32`, which [`math`] and the solver's block
//!   products use there (the same bits as elsewhere).
//!
//! ## Example
//! ```
//! use weft_core::prelude::*;
//! use weft_core::storage::{MeshBuffers, StateBuffers};
//! const C: MeshCounts = MeshCounts::grid(8, 8);
//! const S: StateSizes = StateSizes::new(C, 0);
//! let mut mb = MeshBuffers::<{ C.nodes }, { C.triangles }, { C.edges }, { C.hinges }>::new();
//! let mut sb = StateBuffers::<{ S.vec3 }, { S.mat3 }, { S.flags }, { S.cells }, { S.pairs }, { S.solver }>::new();
//! let grid = Grid::horizontal(8, 8, 1.0, 1.0, 1.0);
//! let mesh = Mesh::grid(&grid, mb.storage()).unwrap();
//! let pins = [Pin::fixed(0, mesh.rest()[0]), Pin::fixed(7, mesh.rest()[7])];
//! let scene = Scene { pins: &pins, ..Scene::default() };
//! let model = Model::new(mesh, Material::COTTON, scene, StepParams::default()).unwrap();
//! let mut state = State::new(&model, sb.storage()).unwrap();
//! let report = weft_core::physics::step(&model, &mut state).unwrap();
//! assert!(report.converged);
//! ```
//! (On a desktop the owner may keep the same slices in `Vec`s instead.)
#![no_std]
#![deny(unsafe_code)]
// `!(a > b)` is used on purpose: it is true for NaN, which must take the
// failure branch.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

pub mod contact;
pub mod flags;
#[cfg(all(feature = "dsp", target_arch = "arm", target_abi = "eabihf"))]
pub mod fpu;
pub mod gnn;
pub mod math;
pub mod mesh;
pub mod model;
pub mod physics;
pub mod probe;
pub mod step;
pub mod storage;

/// The usual imports.
pub mod prelude {
    pub use crate::math::Vec3;
    pub use crate::mesh::{Grid, Mesh, MeshCounts, MeshError, NodeId};
    pub use crate::model::{
        CoarseGrain, Collider, Integrator, Material, Model, Pin, PinMotion, Scene, SelfContact, Shape, StepParams,
        Taut, Wind,
    };
    pub use crate::physics::state::{State, StateSizes};
    pub use crate::physics::{self, StepError, StepReport};
}
