//! The board's cost per frame as `weft eval` charges it: physics by its
//! CG iterations, the network by its size.

use crate::learn::eval::columns::Column;
use weft_core::gnn::int8::forward_macs;

/// Device instructions per CG iteration of the 16×16 step and per step
/// outside its CG iterations (assembly, multigrid set-up, energy check and
/// audit, contacts): fitted to two firmware QEMU counts of the corrected
/// swing (`cd firmware && cargo qemu`), 9.763 M instructions of physics per
/// step at 19.7 CG iterations (tolerance 1e-4) and 12.320 M at 28.8 (1e-5,
/// `solver.cg_tolerance` in `firmware/scenes/*.toml`).
pub const DEVICE_PER_CG_ITERATION: f64 = (12.320e6 - 9.763e6) / (28.8 - 19.7);

pub const DEVICE_PER_STEP: f64 = 9.763e6 - 19.7 * DEVICE_PER_CG_ITERATION;

/// Device instructions per corrected step for the network of latent 16
/// and two rounds ([`device_per_network`]`(16, 2)`).
pub const DEVICE_PER_NETWORK: f64 = LATENT_16.0 + 2.0 * LATENT_16.1;

/// Latent 16's fixed part and part per round: fitted to the firmware's
/// QEMU counts of the corrected swing's network (features and forward,
/// dynamic edges, correction) with each size's weights baked in
/// (`WEFT_WEIGHTS=… cargo qemu`): 1 / 2 / 3 rounds 3.912 / 5.511 / 7.232 M
/// (the shipped network, and two trained for 20 steps for their shapes;
/// every layer's instructions are the same for any weights of a shape).
const LATENT_16: (f64, f64) = (2.232e6, 1.660e6);

/// Latent 8's, fitted the same way: 1 / 2 / 3 rounds 3.237 / 4.443 /
/// 5.641 M.
const LATENT_8: (f64, f64) = (2.037e6, 1.202e6);

/// [`DEVICE_PER_NETWORK`] for a network of latent width `latent` and
/// `rounds` processor rounds: a fixed part (features, dynamic edges,
/// encoders, heads, correction) and a part per round, fitted per latent to
/// the firmware's counts ([`LATENT_8`], [`LATENT_16`]; before the
/// sixteen-input layers ran as fixed blocks, latent 16 had 1.835 M a
/// round). A width between the two interpolates both parts; a wider one
/// scales latent 16's part per round with the multiply-accumulates of a
/// round (`weft_core::gnn::int8::forward_macs`), a narrower one latent 8's:
/// estimates, not counts.
pub fn device_per_network(latent: usize, rounds: usize) -> f64 {
    let round = |l: usize| (forward_macs(l, 2, NODES, EDGES) - forward_macs(l, 1, NODES, EDGES)) as f64;
    let (fixed, per_round) = match latent {
        8 => LATENT_8,
        16 => LATENT_16,
        l if l > 8 && l < 16 => {
            let t = (l - 8) as f64 / 8.0;
            (LATENT_8.0 + t * (LATENT_16.0 - LATENT_8.0), LATENT_8.1 + t * (LATENT_16.1 - LATENT_8.1))
        }
        l if l < 8 => (LATENT_8.0, LATENT_8.1 * round(l) / round(8)),
        l => (LATENT_16.0, LATENT_16.1 * round(l) / round(16)),
    };
    fixed + per_round * rounds as f64
}

/// Nodes and directed static edges of the device's 16×16 cloth.
const NODES: usize = 256;

const EDGES: usize = 1410;

/// The board's instructions per frame of `column` on a scenario with
/// `substeps` physics steps a frame, at `cg_per_frame` CG iterations a
/// frame (every physics step's, summed), on a mesh `mesh_scale` times the
/// coarse one's nodes ([`Column::mesh_scale`]), a network call costing
/// `per_network` ([`device_per_network`]).
pub fn device_per_frame(column: Column, substeps: u32, cg_per_frame: f64, mesh_scale: f64, per_network: f64) -> f64 {
    mesh_scale * (cg_per_frame * DEVICE_PER_CG_ITERATION + column.steps_per_frame(substeps) * DEVICE_PER_STEP)
        + column.network_calls_per_frame(substeps) * per_network
}

/// [`device_per_network`] of the evaluated network: the int8 one's size
/// when given, else the float one's, else the shipped size's count.
pub fn network_cost(
    float: Option<&crate::learn::network::Trained>,
    int8: Option<&weft_weights::format::NetworkData>,
) -> f64 {
    match (int8, float) {
        (Some(q), _) => device_per_network(q.latent, q.mlps.rounds()),
        (None, Some(t)) => device_per_network(t.meta.config.latent, t.meta.config.rounds),
        (None, None) => DEVICE_PER_NETWORK,
    }
}
