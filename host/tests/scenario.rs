//! Scenario files: shipped examples run, unknown keys and bad values name the key.
use weft_host::sim;
use weft_host::sim::envelope::Envelope;
use weft_host::sim::scenario::Scenario;

const MINIMAL: &str = r#"
[cloth]
width = 0.5
height = 0.5
resolution = [5, 4]
orientation = "vertical"
[time]
steps = 3
"#;

fn err(text: &str) -> String {
    format!("{:#}", Scenario::parse(text).unwrap_err())
}

#[test]
fn shipped_scenarios_parse_and_run_a_few_frames() {
    let mut n = 0;
    for path in scenario_files() {
        let mut scn = Scenario::load(&path).unwrap();
        scn.time.steps = 3;
        let s = sim::run(&scn, false, &mut weft_host::sim::corrector::Plain, |_, _, _| Ok(())).unwrap();
        assert_eq!(s.frames.len(), 4);
        assert!(s.frames.iter().all(|f| f.energy.total.is_finite()), "{}", path.display());
        n += 1;
    }
    assert!(n >= 13, "expected the example scenarios and the nine outside the families");
}

/// Every scenario file shipped: the examples, then the scenes outside the
/// training families.
fn scenario_files() -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files = Vec::new();
    for d in [dir.clone(), dir.join("outside")] {
        let mut here: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        here.sort();
        files.extend(here);
    }
    files
}

/// The training envelope: every family's scenarios lie inside it; the
/// scenes outside the families that change the material, the wind or the
/// pins lie outside (and run plain under a guarded corrector), the ones
/// that only move faster or land otherwise inside (the per-node guard's).
#[test]
fn the_envelope_holds_the_families_and_names_what_leaves_it() {
    use weft_host::learn::data::families::{scenario, Family};
    for family in [Family::Hang, Family::Drape, Family::Fold, Family::Line, Family::Tablecloth, Family::Holed] {
        for seed in 0..40 {
            let scn = scenario(family, seed, 16, 10, 1.0 / 60.0);
            assert_eq!(scn.outside_envelope(), Vec::<String>::new(), "{family:?} seed {seed}");
        }
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/outside");
    let outside = |name: &str| Scenario::load(&dir.join(format!("{name}.toml"))).unwrap().outside_envelope();
    for (name, why) in [
        ("heavy_canvas", "material.density"),
        ("silk_one_corner", "material.stretch"),
        ("center_pin", "pin set"),
        ("gale", "wind"),
        ("edge_first_bar", "radius"),
    ] {
        let reasons = outside(name);
        assert!(reasons.iter().any(|r| r.contains(why)), "{name}: {reasons:?}");
    }
    for name in ["impact_at_pins", "fast_drop_sphere", "edge_first_capsule", "spinning_drop"] {
        assert_eq!(outside(name), Vec::<String>::new(), "{name}");
    }
    // Cloths that are not rectangles: the families' two shapes are inside,
    // held as the families hold them; a mesh file, another shape or size,
    // or the holed sheet held by a side are not.
    let shape = |extra: &str| {
        let text = format!("[cloth]\nshape = \"holed\"\nrotation = [-90, 0, 0]\ncenter = [0, 1.2, 0]\n{extra}\n[material]\ncompression = 0.05");
        Scenario::parse(&text).unwrap().outside_envelope()
    };
    assert_eq!(shape("[[pin]]\nbox = { min = [-9, 1.49, -9], max = [9, 9, 9] }"), Vec::<String>::new());
    assert!(shape("[[pin]]\nbox = { min = [-9, -9, -9], max = [-0.39, 9, 9] }")[0].contains("pin set"));
    assert!(shape("resolution = [8, 8]")[0].contains("shape the network was not trained on"));
    let panel =
        Scenario::parse("[cloth]\nshape = \"panel\"\n[material]\ncompression = 0.05").unwrap().outside_envelope();
    assert!(panel[0].contains("shape the network was not trained on"), "{panel:?}");
    let file = Scenario::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/tablecloth_disc.toml"));
    assert!(file.unwrap().outside_envelope().iter().any(|r| r.contains("mesh file")));
}

/// Outside the envelope a guarded network runs the scene's fallback, the
/// plain BDF2 step on the file's material, bit for bit; inside it corrects.
#[test]
fn outside_the_envelope_the_guarded_network_runs_plain_bdf2() {
    let net = weft_host::learn::quantise::load_or_baked(None).unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/outside");
    let mut heavy = Scenario::load(&dir.join("heavy_canvas.toml")).unwrap();
    heavy.time.steps = 12;
    assert!(!heavy.outside_envelope().is_empty());
    let last = |scn: &Scenario, c: &mut dyn sim::corrector::Corrector| {
        let mut x = Vec::new();
        let s = sim::run(scn, false, c, |_, _, state| {
            x = state.positions().to_vec();
            Ok(())
        })
        .unwrap();
        (s, x)
    };
    let (guarded, x) = last(&heavy, &mut sim::corrector::Int8::new(&net));
    assert!(guarded.outside_envelope.iter().any(|r| r.contains("material.density")), "{:?}", guarded.outside_envelope);
    let fallback = heavy.fallback();
    assert_eq!(fallback.solver.integrator, weft_host::sim::scenario::IntegratorSpec::Bdf2);
    assert_eq!(heavy.solver.integrator, weft_host::sim::scenario::IntegratorSpec::BackwardEuler);
    let (_, bdf2) = last(&fallback, &mut sim::corrector::Plain);
    assert_eq!(x, bdf2, "the guarded run is plain BDF2");
    let (_, be) = last(&heavy, &mut sim::corrector::Plain);
    assert_ne!(x, be, "the fallback is not the file's backward Euler");
}

#[test]
fn unknown_keys_are_named() {
    assert!(err(&format!("{MINIMAL}\n[material]\ndensityy = 0.2\n")).contains("densityy"));
    assert!(err(&format!("colour = 3\n{MINIMAL}")).contains("colour"));
    let e = err(&format!(
        "{MINIMAL}\n[[collider]]\nkind = \"sphere\"\ncenter = [0, 0, 0]\nradius = 0.2\nnormal = [0, 1, 0]\n"
    ));
    assert!(e.contains("normal"), "{e}");
    let e = err(&format!("{MINIMAL}\n[[collider]]\nkind = \"cube\"\n"));
    assert!(e.contains("cube"), "{e}");
}

#[test]
fn bad_values_are_named() {
    let cases = [
        ("[material]\ndensity = -1.0\n", "material.density"),
        ("[material]\npoisson = 0.7\n", "material.poisson: is out of range: 0.7 (allowed: 0 to 0.49)"),
        ("[material]\ntaut = { strain = 0.01, stiffening = 0.5 }\n", "material.taut.stiffening"),
        ("[material]\ntaut = { strain = 0.0, stiffening = 2.0 }\n", "material.taut.strain"),
        ("[solver]\nstrain_limit = -1.0\n", "solver.strain_limit: is out of range: -1 (allowed: 0.0001 to 10)"),
        ("[solver]\ncg_tolerance = 0.0\n", "solver.cg_tolerance"),
        ("[solver]\ncoarse = \"spin\"\n", "solver.coarse: unknown variant `spin`"),
        ("[[pin]]\nnodes = [99]\n", "node 99"),
        ("[[pin]]\nregion = \"row:9\"\n", "row 9"),
        ("[[pin]]\nregion = \"middle\"\n", "middle"),
        ("[[pin]]\nnodes = [1]\nregion = \"corners\"\n", "exactly one"),
        ("[[collider]]\nkind = \"sphere\"\ncenter = [0, 0, 0]\n", "radius"),
        ("[[collider]]\nkind = \"sphere\"\ncenter = [0, 0, 0]\nradius = -2.0\n", "radius"),
        ("[wind]\nvelocity = [1, 0, 0]\nair_density = -1.0\n", "wind.air_density"),
        ("[self_contact]\nenabled = true\nradius = -1.0\n", "self_contact.radius"),
    ];
    for (extra, key) in cases {
        let e = err(&format!("{MINIMAL}\n{extra}"));
        assert!(e.contains(key), "{extra:?}: error {e:?} does not name {key:?}");
    }
    let e = err(&MINIMAL.replace("[5, 4]", "[1, 4]"));
    assert!(e.contains("cloth.resolution"), "{e}");
    let e = err(&MINIMAL.replace("width = 0.5", "width = -0.5"));
    assert!(e.contains("cloth.width"), "{e}");
    let e = err(&format!("{MINIMAL}dt = 0.0\n"));
    assert!(e.contains("time.dt"), "{e}");
    let e = err(&format!("{MINIMAL}dt = 5.0\n"));
    assert!(e.contains("time.dt: time.dt / time.substeps is out of range: 5 (allowed: 0.0000001 to 1)"), "{e}");
    let e = err(&MINIMAL.replace("steps = 3", "steps = 0"));
    assert!(e.contains("time.steps: must be at least 1"), "{e}");
    // Sizes that overflow, arrays of the wrong length, capacities and
    // iteration limits beyond their bounds are errors naming the value.
    let e = err(&MINIMAL.replace("[5, 4]", "[4611686018427387906, 4611686018427387906]"));
    assert!(e.contains("cloth.resolution: must be") && e.contains("4611686018427387906"), "{e}");
    let e = err(&MINIMAL.replace("[5, 4]", "[5, 4, 4]"));
    assert!(e.contains("expected two values [nx, ny], got 3"), "{e}");
    let e = err(&format!("{MINIMAL}\n[self_contact]\nenabled = true\nmax_pairs = 9223372036854775807\n"));
    assert!(e.contains("self_contact.max_pairs: is 9223372036854775807; allowed: 0 (8 per node) to 1280"), "{e}");
    let e = err(&format!("{MINIMAL}substeps = 4000000000\n"));
    assert!(e.contains("time.substeps: is 4000000000; allowed: 1 to 1000"), "{e}");
    let e = err(&format!("{MINIMAL}\n[solver]\ncg_max_iterations = 4000000000\n"));
    assert!(e.contains("solver.cg_max_iterations: is out of range: 4000000000 (allowed: 1 to 100000)"), "{e}");
    // 60 000 nodes fit a mesh, their 179 001 edges do not.
    let e = err(&MINIMAL.replace("[5, 4]", "[300, 200]"));
    assert!(e.contains("179001 mesh edges") && e.contains("148 × 148"), "{e}");
}

#[test]
fn regions_select_the_documented_nodes() {
    let scn = Scenario::parse(MINIMAL).unwrap();
    let pin = |r: &str| {
        let p = weft_host::sim::scenario::PinSpec { region: Some(r.into()), ..Default::default() };
        scn.pin_nodes(&p).unwrap()
    };
    // 5 × 4 nodes, node (i, j) = 5 j + i; top is j = 3.
    assert_eq!(pin("corners:top"), vec![15, 19]);
    assert_eq!(pin("corners"), vec![0, 4, 15, 19]);
    assert_eq!(pin("edge:left"), vec![0, 5, 10, 15]);
    assert_eq!(pin("row:1"), vec![5, 6, 7, 8, 9]);
    assert_eq!(pin("column:2"), vec![2, 7, 12, 17]);
    assert_eq!(pin("corner:bottom-right"), vec![4]);
}

#[test]
fn simulate_writes_objs_and_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let scn = Scenario::parse(&format!("{MINIMAL}\n[output]\nevery = 2\n[[pin]]\nregion = \"corners:top\"\n")).unwrap();
    let s = sim::simulate(&scn, dir.path(), false, &mut weft_host::sim::corrector::Plain, None).unwrap();
    let objs: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "obj"))
        .collect();
    assert_eq!(objs.len(), 2, "frames 0 and 2 of 0..=3");
    let obj = std::fs::read_to_string(dir.path().join("frame_00002.obj")).unwrap();
    assert_eq!(obj.lines().filter(|l| l.starts_with("v ")).count(), 20);
    assert_eq!(obj.lines().filter(|l| l.starts_with("f ")).count(), 2 * 4 * 3);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("summary.json")).unwrap()).unwrap();
    let frames = json["frames"].as_array().unwrap();
    assert_eq!(frames.len(), 4);
    for key in ["energy", "cg_iterations", "max_strain", "dropped_pairs"] {
        assert!(frames[3].get(key).is_some(), "summary lacks {key}");
    }
    // A pinned cloth released from rest under gravity loses potential energy.
    assert!(frames[3]["energy"]["gravity"].as_f64().unwrap() < frames[0]["energy"]["gravity"].as_f64().unwrap());
    assert_eq!(s.frames.len(), 4);
}

/// A run whose step turns non-finite stops with an error, and still writes
/// its summary up to the failure, the cause, and the last good state.
#[test]
fn a_failed_run_keeps_its_summary_and_last_good_state() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{MINIMAL}\n[[pin]]\nregion = \"corners:top\"\n[wind]\nvelocity = [0, 0, 1e7]\n");
    let scn = Scenario::parse(&text).unwrap();
    let e = sim::simulate(&scn, dir.path(), false, &mut weft_host::sim::corrector::Plain, None).unwrap_err();
    let failed = e.downcast_ref::<sim::RunFailed>().expect("a RunFailed error");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("summary.json")).unwrap()).unwrap();
    let failure = &json["failure"];
    assert!(failure["cause"].as_str().unwrap().contains("non-finite"), "{failure}");
    let frame = failure["frame"].as_u64().unwrap();
    assert!(frame >= 1);
    // Every frame before the failing one, starting at frame 0.
    assert_eq!(json["frames"].as_array().unwrap().len() as u64, frame);
    let obj = std::fs::read_to_string(dir.path().join("last_good.obj")).unwrap();
    assert_eq!(obj.lines().filter(|l| l.starts_with("v ")).count(), 20);
    assert!(failed.last_good.iter().all(|p| p.is_finite()));
}

#[test]
fn documented_scenario_example_is_valid() {
    let readme =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/desktop.md")).unwrap();
    let block =
        readme.split("```toml").nth(1).and_then(|b| b.split("```").next()).expect("a toml block in docs/desktop.md");
    let scn = Scenario::parse(block).unwrap();
    assert_eq!(scn.pins.len(), 1);
    assert_eq!(scn.colliders.len(), 1);
    assert!(scn.wind.is_some() && scn.self_contact.enabled);
}

/// A shape's size is checked before its mesh is built: a disc a thousand
/// million cells across is refused at once, naming the key, while the
/// largest allowed disc builds.
#[test]
fn an_oversized_shape_is_refused_before_it_is_built() {
    let disc = |r: &str| format!("[cloth]\nshape = \"disc\"\nresolution = {r}\n[material]\ncompression = 0.05");
    let e = err(&disc("[1000000000, 5]"));
    assert!(e.contains("cloth.resolution") && e.contains("148"), "{e}");
    let most = weft_host::sim::scenario::MAX_SHAPE_CELLS;
    let ok = Scenario::parse(&disc(&format!("[{most}, {most}]"))).unwrap();
    // 74 rings about a centre node.
    assert_eq!(ok.node_count(), 1 + 3 * 74 * 75);
    assert!(err(&disc(&format!("[{}, {0}]", most + 1))).contains("cloth.resolution"));
}

/// A state whose BDF2 history lives in its own buffer (as the board keeps
/// it, in the memory the network would use) steps as one whose history
/// follows its other vectors, bit for bit; without either it steps with
/// backward Euler.
#[test]
fn the_bdf2_history_steps_the_same_from_its_own_buffer() {
    use weft_core::physics::state::{State, HISTORY_PER_NODE};
    use weft_host::sim::build::{self, ModelParts};
    use weft_host::sim::storage::VecStateStorage;
    let mut scn = Scenario::parse(MINIMAL).unwrap();
    scn.solver.integrator = weft_host::sim::scenario::IntegratorSpec::Bdf2;
    let mut parts = ModelParts::default();
    let model = build::model(&scn, weft_core::model::CoarseGrain::NONE, &mut parts).unwrap();
    let n = model.mesh.node_count();
    let sizes = weft_host::sim::storage::board_sizes(&model, 0);
    let without = weft_core::physics::state::StateSizes { vec3: sizes.vec3 - HISTORY_PER_NODE * n, ..sizes };
    let run = |history: Option<usize>| {
        let mut memory = VecStateStorage::with_sizes(if history.is_some() { without } else { sizes });
        let mut apart = vec![weft_core::math::Vec3::ZERO; history.unwrap_or(0)];
        let mut storage = memory.storage();
        storage.history = &mut apart;
        let mut state = State::new(&model, storage).unwrap();
        for _ in 0..20 {
            weft_core::physics::step(&model, &mut state).unwrap();
        }
        state.checksum()
    };
    let inline = run(None);
    assert_eq!(run(Some(HISTORY_PER_NODE * n)), inline, "history apart");
    assert_ne!(run(Some(0)), inline, "no history: backward Euler");
}
