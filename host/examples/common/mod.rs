//! What the fine-reference examples share: the family, seed and frame
//! count from the command line, and that family's coarse scenario under
//! the data set's default spec.
use clap::ValueEnum;
use weft_host::learn::data::families::{scenario, Family};
use weft_host::learn::data::DatasetSpec;
use weft_host::sim::scenario::Scenario;

/// `FAMILY SEED FRAMES` from the arguments (each with its default) and the
/// coarse scenario they name.
pub fn coarse_from_args(family: Family, frames: u32) -> (DatasetSpec, Scenario, Family, u64, u32) {
    let args: Vec<String> = std::env::args().collect();
    let family = args.get(1).and_then(|f| Family::from_str(f, true).ok()).unwrap_or(family);
    let seed = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
    let frames = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(frames);
    let spec = DatasetSpec::default();
    let coarse = scenario(family, seed, spec.coarse, frames, spec.dt);
    (spec, coarse, family, seed, frames)
}
