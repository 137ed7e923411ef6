//! The parsers fed what a user or a broken disk could give them: the
//! scenario parser and the model-file reader take arbitrary bytes and
//! arbitrary values of the right keys, and answer with a value or an error,
//! never a panic, an abort or a hang; a scenario that parses runs (or stops
//! with an error). Cases per property: `WEFT_PROPTEST_CASES` (default 64;
//! the documented long run uses 10 000).
use proptest::prelude::*;
use weft_host::sim;
use weft_host::sim::scenario::Scenario;
use weft_weights::format::NetworkData;

fn cases() -> u32 {
    std::env::var("WEFT_PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(64)
}

fn committed_file() -> Vec<u8> {
    std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../weights/weft-gnn.q8"))
        .expect("weights/weft-gnn.q8")
}

/// A value a user might type wrongly: not a number, infinite, negative,
/// zero or huge.
fn bad() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["nan", "inf", "-inf", "-1", "0", "0.0", "1e30", "-1e-30", "9223372036854775807"])
        .prop_map(str::to_string)
}

/// Mostly a good value from `lo..hi`, sometimes a bad one.
fn real(lo: f64, hi: f64) -> impl Strategy<Value = String> {
    prop_oneof![24 => (lo..hi).prop_map(|v| format!("{v:?}")), 1 => bad()]
}

/// Mostly a good count from `lo..hi`, sometimes a bad one.
fn count(lo: u64, hi: u64) -> impl Strategy<Value = String> {
    prop_oneof![24 => (lo..hi).prop_map(|v| v.to_string()), 1 => bad()]
}

fn vec3(lo: f64, hi: f64) -> impl Strategy<Value = String> {
    (real(lo, hi), real(lo, hi), real(lo, hi)).prop_map(|(a, b, c)| format!("[{a}, {b}, {c}]"))
}

/// A scenario assembled from the schema's keys with arbitrary values, some
/// sections left out.
fn scenario_text() -> impl Strategy<Value = String> {
    let cloth = (count(2, 14), count(2, 14), real(0.1, 2.0), real(0.1, 2.0), prop::bool::ANY, vec3(-1.0, 1.0), vec3(-2.0, 2.0))
        .prop_map(|(nx, ny, w, h, vertical, center, velocity)| {
            let o = if vertical { "vertical" } else { "horizontal" };
            format!(
                "[cloth]\nresolution = [{nx}, {ny}]\nwidth = {w}\nheight = {h}\norientation = \"{o}\"\ncenter = {center}\nvelocity = {velocity}\n"
            )
        });
    let time = (real(0.001, 0.05), count(1, 4), count(1, 3))
        .prop_map(|(dt, steps, sub)| format!("[time]\ndt = {dt}\nsteps = {steps}\nsubsteps = {sub}\n"));
    let material = (real(0.05, 1.0), real(50.0, 5000.0), real(0.0, 0.45), real(0.0, 1e-3))
        .prop_map(|(d, s, p, b)| format!("[material]\ndensity = {d}\nstretch = {s}\npoisson = {p}\nbending = {b}\n"));
    let solver = (count(1, 500), real(1e-7, 1e-2), real(0.01, 0.5)).prop_map(|(it, tol, limit)| {
        format!("[solver]\ncg_max_iterations = {it}\ncg_tolerance = {tol}\nstrain_limit = {limit}\n")
    });
    let pin = prop_oneof![
        count(0, 200).prop_map(|n| format!("[[pin]]\nnodes = [{n}]\n")),
        prop::sample::select(vec!["corners", "corners:top", "row:0", "row:99", "column:1", "middle"])
            .prop_map(|r| format!("[[pin]]\nregion = \"{r}\"\n")),
    ];
    let collider = prop_oneof![
        (vec3(-1.0, 1.0), real(0.01, 1.0))
            .prop_map(|(c, r)| format!("[[collider]]\nkind = \"sphere\"\ncenter = {c}\nradius = {r}\n")),
        (vec3(-1.0, 1.0), real(-1.0, 1.0))
            .prop_map(|(n, o)| format!("[[collider]]\nkind = \"plane\"\nnormal = {n}\noffset = {o}\n")),
    ];
    let wind = (vec3(-50.0, 50.0), real(0.0, 1.0)).prop_map(|(v, g)| format!("[wind]\nvelocity = {v}\ngust = {g}\n"));
    let contact = (prop::bool::ANY, real(0.0, 0.05), count(0, 3000))
        .prop_map(|(e, r, m)| format!("[self_contact]\nenabled = {e}\nradius = {r}\nmax_pairs = {m}\n"));
    (
        cloth,
        time,
        prop::option::of(material),
        prop::option::of(solver),
        prop::collection::vec(pin, 0..3),
        prop::collection::vec(collider, 0..3),
        prop::option::of(wind),
        prop::option::of(contact),
    )
        .prop_map(|(cloth, time, material, solver, pins, colliders, wind, contact)| {
            let mut s = cloth + &time;
            for part in [material, solver, wind, contact].into_iter().flatten() {
                s.push_str(&part);
            }
            for part in pins.into_iter().chain(colliders) {
                s.push_str(&part);
            }
            s
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn the_scenario_parser_takes_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = Scenario::parse(&String::from_utf8_lossy(&bytes));
    }

    /// Any values of the right keys parse or give an error; a scenario that
    /// parses runs its first frames (or stops with an error).
    #[test]
    fn scenarios_of_any_values_parse_and_run_or_fail_typed(text in scenario_text()) {
        if let Ok(mut scn) = Scenario::parse(&text) {
            scn.time.steps = scn.time.steps.min(2);
            scn.time.substeps = scn.time.substeps.min(2);
            let _ = sim::run(&scn, false, &mut weft_host::sim::corrector::Plain, |_, _, _| Ok(()));
        }
    }

    #[test]
    fn the_model_reader_takes_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        prop_assert!(NetworkData::from_bytes(&bytes).is_err());
    }

    /// The committed model with bytes changed and its checksum made right
    /// again, so that the reader's checks past the checksum see it.
    #[test]
    fn the_model_reader_takes_any_corruption(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(), truncate in any::<bool>(),
    ) {
        let mut bytes = committed_file();
        let body = bytes.len() - 4;
        for (at, value) in &edits {
            bytes[at.index(body)] = *value;
        }
        let mut body = bytes[..body].to_vec();
        if truncate {
            body.truncate(cut.index(body.len()));
        }
        let crc = crc32fast::hash(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        if let Ok(net) = NetworkData::from_bytes(&body) {
            // Whatever it accepts, the core can check, and it reads back from
            // its own bytes; a file of the current version and node
            // features is those bytes (an earlier one is written widened,
            // or with its coarse grain).
            prop_assert_eq!(net.with_network(|n| n.validate()), Ok(()));
            let written = net.to_bytes();
            prop_assert_eq!(NetworkData::from_bytes(&written), Ok(net));
            let current = body.get(8..12) == Some(&weft_core::gnn::int8::FORMAT_VERSION.to_le_bytes()[..])
                && body.get(12..16) == Some(&(weft_core::gnn::features::NODE_FEATURES as u32).to_le_bytes()[..]);
            prop_assert_eq!(written == body, current);
        }
    }
}
