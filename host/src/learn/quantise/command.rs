//! `weft quantize`: calibrate, quantise and write the int8 network.
use crate::learn::quantise::float::calibration;
use crate::learn::quantise::quantiser::quantize_with;
use crate::learn::quantise::quantiser::Options;
use anyhow::{Context, Result};
use weft_weights::format::NetworkData;

/// `weft quantize`: the float model at `model`, calibrated on `samples`
/// training samples of `data`, quantised and written to `out`; returns the
/// one-line summary.
pub fn command(
    model: &std::path::Path,
    data: &std::path::Path,
    samples: usize,
    opts: Options,
    out: &std::path::Path,
) -> Result<String> {
    let t0 = std::time::Instant::now();
    let trained = crate::learn::network::Trained::load(model, &candle_core::Device::Cpu)?;
    let (float, ranges, graphs) = calibration(&trained, data, samples)?;
    let q = quantize_with(&float, &ranges, opts)?;
    let bytes = q.to_bytes();
    crate::sim::files::write_atomic(out, &bytes)?;
    Ok(format!(
        "{graphs} calibration graphs; {} bytes of int8 parameters ({} in the file); wrote {} in {:.1} s",
        q.parameter_bytes(),
        bytes.len(),
        out.display(),
        t0.elapsed().as_secs_f32()
    ))
}

/// The int8 network at `path`, or the one baked into this program
/// (`weft_weights::MODEL_FILE`) when none is named.
pub fn load_or_baked(path: Option<&std::path::Path>) -> Result<NetworkData> {
    match path {
        Some(p) => load(p),
        None => NetworkData::from_bytes(weft_weights::MODEL_FILE).context("the baked model file"),
    }
}

/// Reads and validates a model file (`weights/weft-gnn.q8`).
pub fn load(path: &std::path::Path) -> Result<NetworkData> {
    let bytes =
        std::fs::read(path).with_context(|| format!("reading {} (run `weft quantize` to make it)", path.display()))?;
    NetworkData::from_bytes(&bytes).with_context(|| format!("model file {}", path.display()))
}
