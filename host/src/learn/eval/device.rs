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
/// and two rounds: its one-round count (the firmware's QEMU run of the
/// swing with the shipped network: features and forward 3.662 M, dynamic
/// edges 0.227 M, correction 0.023 M; the firmware test holds the model
/// to the firmware's counts) and a second round (edge and node update,
/// 1.230 M and 0.420 M a round).
pub const DEVICE_PER_NETWORK: f64 = 3.662e6 + 0.227e6 + 0.023e6 + LATENT_16_ROUND;

/// A processor round of latent 16 on the 16×16 cloth (see
/// [`DEVICE_PER_NETWORK`]).
const LATENT_16_ROUND: f64 = 1.230e6 + 0.420e6;

/// [`DEVICE_PER_NETWORK`] for a network of latent width `latent` and
/// `rounds` processor rounds: a fixed part (features, dynamic edges,
/// encoders, heads, correction) and a part per round, fitted per latent to
/// the firmware's QEMU counts of the corrected swing with each size's
/// weights baked in (`weights/sweep.sh report`: latent 8 × 1 / 2 / 3 rounds
/// 3.18 / 4.30 / 5.41 M; latent 16's from the shipped network's stages,
/// since its sixteen-input layers run as two fixed blocks: 3.91 M for one
/// round, 1.65 M a round more — the sweep's counts before, 4.19 / 6.03 /
/// 7.86 M, had 1.835 M a round). Other latent widths scale latent 16's part per round with the
/// multiply-accumulates of a round (`weft_core::gnn::int8::forward_macs`)
/// and keep its fixed part: an estimate, not a count.
pub fn device_per_network(latent: usize, rounds: usize) -> f64 {
    const LATENT_8: (f64, f64) = (3.18e6 - 1.115e6, 1.115e6);
    const LATENT_16: (f64, f64) = (DEVICE_PER_NETWORK - 2.0 * LATENT_16_ROUND, LATENT_16_ROUND);
    let (fixed, per_round) = match latent {
        8 => LATENT_8,
        16 => LATENT_16,
        l => {
            let round = |l: usize| (forward_macs(l, 2, NODES, EDGES) - forward_macs(l, 1, NODES, EDGES)) as f64;
            (LATENT_16.0, LATENT_16.1 * round(l) / round(16))
        }
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
