//! weft on the desktop, behind the `weft` command, in three layers, each
//! importing only the ones below it: [`sim`] (scenario files, the rollout
//! loop, correctors, output) on `weft-core`; [`learn`] (families, data,
//! the float network, training, quantisation, evaluation) on `sim`;
//! [`view`] (renderer, demo, plots) on both. `main.rs` parses the command
//! line and dispatches.

pub mod learn;
pub mod sim;
pub mod view;

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

/// The defaults the command line gives an option group (one set of
/// defaults: the `#[arg]` attributes).
pub fn defaults<T: clap::Args + clap::FromArgMatches>() -> T {
    let matches = T::augment_args(clap::Command::new("defaults")).get_matches_from(["defaults"]);
    T::from_arg_matches(&matches).expect("an option group parses from its own defaults")
}

/// A count of at least 1 (`clap` value parser).
pub fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        Ok(_) => Err("must be at least 1".into()),
        Err(e) => Err(e.to_string()),
    }
}
