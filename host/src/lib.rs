//! weft on the desktop: scenario files, the simulation driver, output
//! writers and the renderer behind the `weft` command.

pub mod canvas;
pub mod corrector;
pub mod dataset;
pub mod eval;
pub mod families;
pub mod gnn;
pub mod horizons;
pub mod quantize;
pub mod render;
pub mod scenario;
pub mod sim;
pub mod storage;
pub mod train;

/// A progress bar over `len` items that says what it counts (`what`) and,
/// in its message, the stage it is in; hidden unless `shown`.
pub fn progress_bar(len: u64, what: &str, shown: bool) -> indicatif::ProgressBar {
    if !shown {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    let template = format!("{{bar:40}} {{pos}}/{{len}} {what} {{elapsed}}/{{duration}} {{msg}}");
    bar.set_style(
        indicatif::ProgressStyle::with_template(&template).unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}
