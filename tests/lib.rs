//! Cross-crate tests of weft (`firmware.rs`, `browser.rs`) and what they
//! share: the board's scene files (`firmware/scenes/*.toml`, read through
//! `weft-scene` as the firmware's `build.rs` reads them) and one run of a
//! scene on the desktop through `weft-core`, corrected by the baked int8
//! network as on the board, with the board's pair storage.

use std::path::{Path, PathBuf};

use weft_core::gnn::int8::{ScratchSizes, PAIRS_PER_NODE};
use weft_core::math::Vec3;
use weft_core::model::{CoarseGrain, Model, StepParams};
use weft_core::physics::state::State;
use weft_core::physics::StepReport;
use weft_scene::build::{self, ModelParts};
use weft_scene::storage::VecStateStorage;
use weft_scene::Scenario;

/// Pair storage a node on the board: half the desktop's
/// ([`PAIRS_PER_NODE`]; `firmware/build.rs`).
pub const BOARD_PAIRS_PER_NODE: usize = PAIRS_PER_NODE / 2;

/// `firmware/scenes/`.
pub fn scenes_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../firmware/scenes")
}

/// The board's scene files, in the order the firmware runs them (by file
/// name), each with the name its log lines are led by.
pub fn board_scenes() -> Vec<(String, PathBuf, Scenario)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(scenes_dir())
        .expect("firmware/scenes")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let scn = Scenario::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            (if scn.name.is_empty() { stem } else { scn.name.clone() }, path, scn)
        })
        .collect()
}

/// The board's scene `name` (`firmware/scenes/NAME.toml`).
pub fn board_scene(name: &str) -> Scenario {
    let path = scenes_dir().join(format!("{name}.toml"));
    Scenario::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The first of `args` that names a board scene (`drape`, `tablecloth`, …).
pub fn scene_named(args: &[String]) -> Option<&str> {
    args.iter().map(String::as_str).find(|a| scenes_dir().join(format!("{a}.toml")).is_file())
}

/// Runs `frames` frames of `scn` (its `params`, or the file's), corrected
/// by the baked network on its coarse grain as on the board, or plain,
/// calling `each(step, report, model, state)` after every step; returns
/// the final checksum and the positions.
pub fn run(
    scn: &Scenario,
    params: Option<StepParams>,
    corrected: bool,
    frames: u32,
    mut each: impl FnMut(u32, &StepReport, &Model, &State),
) -> (u32, Vec<Vec3>) {
    let net = weft_weights::NETWORK.check().expect("the baked network");
    let grain = if corrected { net.coarse } else { CoarseGrain::NONE };
    let mut parts = ModelParts::default();
    let model = build::model(scn, grain, &mut parts).expect("the scene builds");
    let model = Model { params: params.unwrap_or(model.params), ..model };
    let pairs = BOARD_PAIRS_PER_NODE * model.mesh.node_count();
    let mut storage = VecStateStorage::new(&model, pairs);
    let mut state = build::start(scn, &model, &mut storage).expect("the scene starts");
    let sizes = ScratchSizes::new(model.mesh.counts(), pairs, net.latent);
    let mut latents = vec![0i8; sizes.latents];
    let mut scratch = weft_core::gnn::int8::Scratch { latents: &mut latents };
    for s in 0..frames * scn.time.substeps {
        let report = if corrected {
            weft_core::step::step(&model, &mut state, net, &mut scratch).expect("a corrected step").0
        } else {
            weft_core::physics::step(&model, &mut state).expect("a physics step")
        };
        each(s, &report, &model, &state);
    }
    (state.checksum(), state.positions().to_vec())
}
