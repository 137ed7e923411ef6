//! What corrects the coarse cloth after every physics step — nothing, the
//! float network (`learn::network::Float`, a layer above) or the int8 network ([`Int8`]) —
//! behind one trait, so that one rollout loop ([`crate::sim::run`]) serves
//! simulation, evaluation, the demo and data generation.

use anyhow::{Context, Result};
use weft_core::gnn::int8::{Scratch, ScratchSizes};
use weft_core::model::{CoarseGrain, Model};
use weft_core::physics::state::State;
use weft_weights::format::{NetworkData, Views};

/// Dynamic pairs per node a network takes: the board's
/// ([`weft_core::gnn::int8::PAIRS_PER_NODE`]).
pub const PAIRS_PER_NODE: usize = weft_core::gnn::int8::PAIRS_PER_NODE;

pub trait Corrector {
    /// Proximity pairs the state must hold for this corrector on a mesh of
    /// `nodes` nodes.
    fn pairs(&self, nodes: usize) -> usize;
    /// Corrects the state after one physics step; returns the dynamic edges
    /// the network saw.
    fn correct(&mut self, model: &Model, state: &mut State) -> Result<usize>;
    /// The factors on the material's membrane of the coarse step this
    /// corrector corrects ([`CoarseGrain::NONE`]: the material as it is).
    fn coarse_grain(&self) -> CoarseGrain {
        CoarseGrain::NONE
    }
    /// Whether this corrector keeps to the training envelope
    /// ([`crate::sim::envelope::Envelope::outside_envelope`]): a scene
    /// outside it runs the plain step (no grain, no correction).
    fn guarded(&self) -> bool {
        false
    }
    /// The physics step this corrector corrects, where it replaces the
    /// scene's own integrator (`None`: the scene's).
    fn base_step(&self) -> Option<crate::sim::scenario::IntegratorSpec> {
        None
    }
}

/// The plain coarse cloth: no correction.
pub struct Plain;

impl Corrector for Plain {
    fn pairs(&self, _: usize) -> usize {
        0
    }
    fn correct(&mut self, _: &Model, _: &mut State) -> Result<usize> {
        Ok(0)
    }
}

/// The plain coarse cloth on a coarse-grained membrane: no correction.
pub struct Grained(pub CoarseGrain);

impl Corrector for Grained {
    fn pairs(&self, _: usize) -> usize {
        0
    }
    fn correct(&mut self, _: &Model, _: &mut State) -> Result<usize> {
        Ok(0)
    }
    fn coarse_grain(&self) -> CoarseGrain {
        self.0
    }
}

/// The int8 network ([`weft_core::step::step2`]), with heap scratch sized
/// on first use for the model's mesh.
pub struct Int8<'n> {
    pub net: &'n NetworkData,
    views: Views<'n>,
    latents: Vec<i8>,
    /// The do-no-harm guard ([`weft_core::gnn::int8::GUARD_START`]): on
    /// unless [`unguarded`] turned it off for the process.
    pub guard: bool,
    /// The physics step the network was trained to correct, where it is
    /// not the scene's own (the float network's `base_step`).
    pub base: Option<crate::sim::scenario::IntegratorSpec>,
}

/// Whether new [`Int8`] correctors run without the guard.
static UNGUARDED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Turns the guard off in every [`Int8`] made from now on (`weft eval
/// --no-guard`, to measure what the guard does).
pub fn unguarded() {
    UNGUARDED.store(true, std::sync::atomic::Ordering::Relaxed);
}

impl<'n> Int8<'n> {
    pub fn new(net: &'n NetworkData) -> Int8<'n> {
        let guard = !UNGUARDED.load(std::sync::atomic::Ordering::Relaxed);
        Int8 { net, views: net.views(), latents: Vec::new(), guard, base: None }
    }
}

impl Corrector for Int8<'_> {
    fn pairs(&self, nodes: usize) -> usize {
        PAIRS_PER_NODE * nodes
    }
    fn coarse_grain(&self) -> CoarseGrain {
        self.net.coarse
    }
    fn guarded(&self) -> bool {
        self.guard
    }
    fn base_step(&self) -> Option<crate::sim::scenario::IntegratorSpec> {
        self.base
    }
    fn correct(&mut self, model: &Model, state: &mut State) -> Result<usize> {
        let sizes = ScratchSizes::new(model.mesh.counts(), self.pairs(model.mesh.node_count()), self.net.latent);
        if self.latents.len() < sizes.latents {
            self.latents = vec![0; sizes.latents];
        }
        let mut scratch = Scratch { latents: &mut self.latents };
        // Checking is a pass over the layers' shapes and requantisation
        // constants (no allocation), small beside the forward.
        let network = weft_core::gnn::int8::Network { guard: self.guard, ..self.net.network(&self.views) };
        let report = network
            .check()
            .and_then(|net| weft_core::step::step2(model, state, net, &mut scratch))
            .context("int8 correction")?;
        Ok(report.dynamic_edges)
    }
}
