//! The size sweep's table (`weights/sweep.sh`): for every run folder given,
//! its network's size, the gain `weft gain` chose, the errors at 1 / 10 /
//! 50 frames × plain (float and int8) on the validation split (where the
//! sweep picks), the test split and the held-out family, and the board's
//! instructions for the network per step (`device.txt`, which
//! `weights/sweep.sh report` writes from the firmware's QEMU run with the
//! run's weights baked in), beside its multiply-accumulates.
//!
//! `cargo run --release -p weft-host --example sweep_report -- RUN…`
use std::path::Path;

use anyhow::{Context, Result};

/// The overall row of `column` × plain's, per horizon, from a report's
/// JSON (`horizons.json`); `None` where a column did not run (an int8
/// network the state cannot lend scratch for writes no number).
fn ratios(report: &serde_json::Value, column: &str) -> Option<[f32; 3]> {
    let cell = |c: &str| -> Option<[f64; 3]> {
        let row = report["rows"].as_array()?.iter().find(|r| r[0] == "overall" && r[1] == c)?;
        let e = &row[2]["error"];
        Some([e[0].as_f64()?, e[1].as_f64()?, e[2].as_f64()?])
    };
    let (plain, other) = (cell("plain")?, cell(column)?);
    Some([0, 1, 2].map(|k| (other[k] / plain[k]) as f32))
}

fn cells(run: &Path, split: &str) -> String {
    let path = run.join(format!("eval-{split}/horizons.json"));
    let Ok(report) = std::fs::read_to_string(&path)
        .map_err(anyhow::Error::from)
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).with_context(|| path.display().to_string()))
    else {
        return " | – | –".into();
    };
    let show = |r: Option<[f32; 3]>| match r {
        Some([a, b, c]) => format!("{a:.3} / {b:.3} / {c:.3}"),
        None => "–".into(),
    };
    format!(" | {} | {}", show(ratios(&report, "float")), show(ratios(&report, "int8")))
}

fn main() -> Result<()> {
    println!(
        "| run | latent × rounds | MACs a step | board: network instructions a step | gain | validation float | validation int8 | test float | test int8 | held-out float | held-out int8 |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for run in std::env::args().skip(1) {
        let run = Path::new(&run);
        let meta: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(run.join("weft-gnn.json")).with_context(|| run.display().to_string())?,
        )?;
        let (latent, rounds) =
            (meta["config"]["latent"].as_u64().unwrap_or(0), meta["config"]["rounds"].as_u64().unwrap_or(0));
        let gain = meta["gain"].as_f64().unwrap_or(1.0);
        // The board's swing: 16×16 nodes, 705 static edges, no dynamic ones.
        let macs = weft_core::gnn::int8::forward_macs(latent as usize, rounds as usize, 256, 2 * 705);
        let device =
            std::fs::read_to_string(run.join("device.txt")).map(|s| s.trim().to_string()).unwrap_or("–".into());
        let name = run.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let splits: String = ["val", "test", "heldout"].iter().map(|s| cells(run, s)).collect();
        println!("| {name} | {latent} × {rounds} | {macs} | {device} | {gain} {splits} |");
    }
    Ok(())
}
