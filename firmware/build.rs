//! Picks the memory layout (the STM32F405 board or QEMU's mps2-an386) and
//! bakes every scene file in `scenes/` (the format `weft simulate` reads,
//! through `weft-scene`) into `static` data: its rest mesh, pins,
//! colliders, wind, material, step and start velocities live in flash,
//! and the board checks the mesh back in at boot
//! ([`weft_core::mesh::Mesh::from_parts`]). The state's capacities are the
//! largest scene's. A scene that does not fit the board (its RAM, the
//! core-coupled RAM for the network, flash for the baked data, the pair
//! storage) stops the build with one line naming the limit and the need.
//! A scene outside the network's training envelope
//! (`weft_scene::envelope`) is baked as the desktop runs it, on its
//! plain fallback step (BDF2, the file's material, no network), and the
//! build says so in a warning. `WEFT_SCENES=DIR` bakes the scene files of `DIR` instead of `scenes/`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use weft_core::gnn::int8::{ScratchSizes, PAIRS_PER_NODE};
use weft_core::math::{Mat3, Vec3};
use weft_core::mesh::{MeshCounts, MeshParts, NodeId};
use weft_core::model::{CoarseGrain, Integrator, Model};
use weft_core::physics::aggregate::Aggregates;
use weft_core::physics::state::{StateSizes, HISTORY_PER_NODE};
use weft_scene::build::{self, ModelParts};
use weft_scene::envelope::Envelope;
use weft_scene::storage;
use weft_scene::Scenario;

/// The board's RAM for the state: the 128 KiB SRAM less the stack the
/// scenes take (under 8 KB, `docs/device.md`) with headroom, and the few
/// other statics.
const STATE_RAM: usize = 128 * 1024 - 10 * 1024 - 512;
/// The core-coupled RAM the network's latents and the BDF2 history live in.
const LATENT_RAM: usize = 64 * 1024;
/// Flash for the baked scenes: the 1 MiB less the program and the
/// network (about 150 KB) with room to grow.
const SCENE_FLASH: usize = 640 * 1024;
/// Dynamic (and contact) pairs the board holds per node: half the
/// desktop's ([`PAIRS_PER_NODE`]).
const BOARD_PAIRS_PER_NODE: usize = PAIRS_PER_NODE / 2;

/// Stops the build with `line`.
fn fail(line: String) -> ! {
    println!("cargo::error={line}");
    eprintln!("error: {line}");
    std::process::exit(1)
}

fn f(x: f32) -> String {
    format!("f32::from_bits({:#010x})", x.to_bits())
}

fn list<T>(items: &[T], each: impl Fn(&T) -> String) -> String {
    items.iter().map(each).collect::<Vec<_>>().join(",\n")
}

fn vec3(v: &Vec3) -> String {
    format!("Vec3::new({}, {}, {})", f(v.x), f(v.y), f(v.z))
}

/// Rust source of the `static` parts of `p`.
fn mesh_source(p: &MeshParts, out: &mut String) {
    let arr = |v: &[f32]| format!("[{}]", v.iter().map(|x| f(*x)).collect::<Vec<_>>().join(", "));
    let rest = list(p.rest, vec3);
    let area = list(p.node_area, |a| f(*a));
    let tris = list(p.triangles, |t| {
        let g = t.grad.iter().map(|g| arr(g)).collect::<Vec<_>>().join(", ");
        format!("Triangle {{ nodes: {:?}, edges: {:?}, grad: [{g}], area: {} }}", t.nodes, t.edges, f(t.area))
    });
    let edges = list(p.edges, |e| format!("Edge {{ a: {}, b: {}, tris: {:?}, rest: {:?} }}", e.a, e.b, e.tris, e.rest));
    let starts = list(p.edge_start, |s| s.to_string());
    let hinges =
        list(p.hinges, |h| format!("Hinge {{ nodes: {:?}, k: {}, rest: {} }}", h.nodes, arr(&h.k), arr(&h.rest)));
    let bending = list(p.bending, |b| {
        format!("BendTriangle {{ hinges: {:?}, s: {}, cos2: {} }}", b.hinges, arr(&b.s), arr(&b.cos2))
    });
    for (name, ty, n, body) in [
        ("REST", "Vec3", p.rest.len(), rest),
        ("NODE_AREA", "f32", p.node_area.len(), area),
        ("TRIANGLES", "Triangle", p.triangles.len(), tris),
        ("EDGES", "Edge", p.edges.len(), edges),
        ("EDGE_START", "u16", p.edge_start.len(), starts),
        ("HINGES", "Hinge", p.hinges.len(), hinges),
        ("BENDING", "BendTriangle", p.bending.len(), bending),
    ] {
        let _ = writeln!(out, "pub static {name}: [{ty}; {n}] = [\n{body}\n];");
    }
}

/// Flash bytes of the baked mesh `p`.
fn mesh_bytes(p: &MeshParts) -> usize {
    use std::mem::size_of_val;
    size_of_val(p.rest)
        + size_of_val(p.node_area)
        + size_of_val(p.triangles)
        + size_of_val(p.edges)
        + size_of_val(p.edge_start)
        + size_of_val(p.hinges)
        + size_of_val(p.bending)
}

/// State sizes of `model` with `pairs` pair storage, as the board lays
/// them out ([`storage::board_sizes`]), the aggregation hierarchy's pool
/// cut to what it fills and the bending diagonal's room after it; and
/// the BDF2 history's `Vec3`s, which the board keeps apart, in its
/// core-coupled RAM beside the network's latents (a scene runs either the
/// network or the BDF2 fallback).
fn state_sizes(model: &Model, pairs: usize) -> (StateSizes, usize) {
    let mut s = storage::board_sizes(model, pairs);
    let history = match model.params.integrator {
        Integrator::Bdf2 => HISTORY_PER_NODE * model.mesh.node_count(),
        Integrator::BackwardEuler => 0,
    };
    s.vec3 -= history;
    if model.mesh.counts().grid.is_none() {
        // Any pool this long builds the same hierarchy.
        let mut pool = vec![0.0; s.solver];
        s.solver = Aggregates::new(&model.mesh, model.params.rigid_coarse(&model.mesh), &mut pool)
            .map_or(0, |a| a.floats_used())
            + weft_core::physics::bending::diagonal_floats(model.mesh.node_count());
    }
    (s, history)
}

/// RAM bytes of a state of `s` ([`weft_core::storage::StateBuffers`]).
fn state_bytes(s: &StateSizes) -> usize {
    use std::mem::size_of;
    s.vec3 * size_of::<Vec3>()
        + s.mat3 * size_of::<Mat3>()
        + s.flags
        + s.cells * 4
        + s.order * size_of::<NodeId>()
        + s.pairs * 2 * size_of::<NodeId>()
        + s.solver * 4
}

/// The field-wise largest of two sizes.
fn larger(a: StateSizes, b: StateSizes) -> StateSizes {
    StateSizes {
        vec3: a.vec3.max(b.vec3),
        mat3: a.mat3.max(b.mat3),
        flags: a.flags.max(b.flags),
        cells: a.cells.max(b.cells),
        order: a.order.max(b.order),
        pairs: a.pairs.max(b.pairs),
        solver: a.solver.max(b.solver),
    }
}

/// What one scene needs of the board.
struct Need {
    counts: MeshCounts,
    state: StateSizes,
    /// The BDF2 history's `Vec3`s (core-coupled RAM).
    history: usize,
    /// Flash of its mesh, and of its mesh and start velocities.
    mesh: usize,
    flash: usize,
}

/// Checks `scn` (from `file`) against the board's limits; returns its need.
fn check(file: &str, scn: &Scenario, model: &Model) -> Need {
    let counts = model.mesh.counts();
    let pairs = BOARD_PAIRS_PER_NODE * counts.nodes;
    if scn.max_pairs() > pairs {
        fail(format!(
            "{file}: self_contact.max_pairs asks for {} pairs; the board holds {BOARD_PAIRS_PER_NODE} a node ({pairs} for its {} nodes)",
            scn.max_pairs(),
            counts.nodes
        ));
    }
    let (state, history) = state_sizes(model, pairs);
    let bytes = state_bytes(&state);
    if bytes > STATE_RAM {
        fail(format!(
            "{file}: its state ({} nodes, {} triangles) needs {bytes} bytes of RAM; the board has {STATE_RAM} (128 KiB SRAM less 10.5 KiB of stack and statics)",
            counts.nodes, counts.triangles
        ));
    }
    let latents = ScratchSizes::new(counts, pairs, weft_weights::LATENT).latents;
    let ccm = latents + history * std::mem::size_of::<Vec3>();
    if ccm > LATENT_RAM {
        fail(format!(
            "{file}: the network's latents for {} nodes and {} edges and the BDF2 history need {ccm} bytes; the board's core-coupled RAM has {LATENT_RAM}",
            counts.nodes, counts.edges
        ));
    }
    let mesh = mesh_bytes(&model.mesh.parts());
    let flash = mesh + scn.node_count() * std::mem::size_of::<Vec3>();
    Need { counts, state, history, mesh, flash }
}

/// Rust source of one baked scene (module `m`), and its `Baked` value.
/// A mesh another scene baked before (`meshes`: source → module) is not
/// baked twice.
fn scene_source(
    m: &str,
    (name, file): (&str, &str),
    scn: &Scenario,
    model: &Model,
    meshes: &mut Vec<(String, String)>,
    out: &mut String,
) -> String {
    let _ = writeln!(out, "mod {m} {{\n    use super::*;");
    let mut mesh = String::new();
    mesh_source(&model.mesh.parts(), &mut mesh);
    let owner = match meshes.iter().find(|(source, _)| *source == mesh) {
        Some((_, owner)) => owner.clone(),
        None => {
            out.push_str(&mesh);
            meshes.push((mesh, m.to_string()));
            m.to_string()
        }
    };
    let _ = writeln!(
        out,
        "pub static PINS: [Pin; {}] = [{}];",
        model.scene.pins.len(),
        list(model.scene.pins, |p| format!("{p:?}"))
    );
    let colliders = list(model.scene.colliders, |c| format!("{c:?}"));
    let _ = writeln!(out, "pub static COLLIDERS: [Collider; {}] = [{colliders}];", model.scene.colliders.len());
    // The start velocities, where the scene gives any: what the desktop's
    // `build::start` sets, and the firmware sets them the same way.
    let velocities = match build::start_velocities(scn, model).unwrap_or_else(|e| fail(format!("{file}: {e}"))) {
        Some(v) => {
            let _ = writeln!(out, "pub static VELOCITIES: [Vec3; {}] = [{}];", v.len(), list(&v, vec3));
            format!("Some(&{m}::VELOCITIES)")
        }
        None => "None".to_string(),
    };
    let _ = writeln!(out, "}}");
    let corrected = scn.outside_envelope().is_empty();
    let mesh = format!(
        "MeshParts {{ rest: &{owner}::REST, node_area: &{owner}::NODE_AREA, triangles: &{owner}::TRIANGLES, edges: &{owner}::EDGES, edge_start: &{owner}::EDGE_START, hinges: &{owner}::HINGES, bending: &{owner}::BENDING, grid: {:?} }}",
        model.mesh.counts().grid
    );
    format!(
        "Baked {{ name: {name:?}, file: {file:?}, mesh: {mesh}, material: {:?}, gravity: {:?}, pins: &{m}::PINS, colliders: &{m}::COLLIDERS, wind: {:?}, params: {:?}, velocities: {velocities}, frames: {}, substeps: {}, corrected: {corrected} }}",
        model.material, model.scene.gravity, model.scene.wind, model.params, scn.time.steps, scn.time.substeps
    )
}

/// The scene files in `dir`, by name.
fn scene_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| fail(format!("{}: {e}", dir.display())))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    if files.is_empty() {
        fail(format!("{}: no scene file (*.toml)", dir.display()));
    }
    files
}

/// Bakes every scene of `dir` into `scenes.rs` in `out`.
fn bake(dir: &Path, out: &Path) {
    let (mut src, mut values) =
        (String::from("// Generated by build.rs from scenes/*.toml; do not edit.\n"), Vec::new());
    let mut meshes = Vec::new();
    let (mut counts, mut state, mut flash) =
        (MeshCounts { nodes: 0, triangles: 0, edges: 0, hinges: 0, grid: None }, None::<StateSizes>, 0);
    let mut history = 0;
    for (k, path) in scene_files(dir).iter().enumerate() {
        println!("cargo:rerun-if-changed={}", path.display());
        let file = match path.strip_prefix("scenes") {
            Ok(rel) => format!("firmware/scenes/{}", rel.display()),
            Err(_) => path.display().to_string(),
        };
        let scn = Scenario::load(path).unwrap_or_else(|e| fail(format!("{file}: {e}")));
        // Outside the envelope: the desktop's fallback step, uncorrected.
        let outside = scn.outside_envelope();
        let scn = if outside.is_empty() {
            scn
        } else {
            println!(
                "cargo:warning={file}: outside the network's training envelope ({}): baked as its plain BDF2 fallback",
                outside.join("; ")
            );
            scn.fallback()
        };
        if let Some(mesh) = &scn.cloth.mesh {
            println!("cargo:rerun-if-changed={}", path.parent().unwrap_or(Path::new(".")).join(mesh).display());
        }
        let mut parts = ModelParts::default();
        let model = build::model(&scn, CoarseGrain::NONE, &mut parts).unwrap_or_else(|e| fail(format!("{file}: {e}")));
        let need = check(&file, &scn, &model);
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let name = if scn.name.is_empty() { stem } else { scn.name.clone() };
        let mesh_count = meshes.len();
        let module = format!("scene_{k}");
        values.push(scene_source(&module, (&name, &file), &scn, &model, &mut meshes, &mut src));
        counts = MeshCounts {
            nodes: counts.nodes.max(need.counts.nodes),
            triangles: counts.triangles.max(need.counts.triangles),
            edges: counts.edges.max(need.counts.edges),
            hinges: counts.hinges.max(need.counts.hinges),
            grid: None,
        };
        state = Some(state.map_or(need.state, |s| larger(s, need.state)));
        history = history.max(need.history);
        // A mesh baked before adds only its start velocities.
        flash += if meshes.len() > mesh_count { need.flash } else { need.flash - need.mesh };
        if flash > SCENE_FLASH {
            fail(format!(
                "{file}: the scenes up to it take {flash} bytes of flash; the board keeps {SCENE_FLASH} for scenes"
            ));
        }
    }
    let state = state.unwrap_or_else(|| fail("no scene".into()));
    let total = state_bytes(&state);
    let pairs = BOARD_PAIRS_PER_NODE * counts.nodes;
    let latents = ScratchSizes::new(counts, pairs, weft_weights::LATENT).latents;
    let ccm = latents + history * std::mem::size_of::<Vec3>();
    for (what, need, have) in [("state RAM", total, STATE_RAM), ("core-coupled RAM", ccm, LATENT_RAM)] {
        if need > have {
            fail(format!("{}: together the scenes need {need} bytes of {what} (each scene's largest count); the board has {have}", dir.display()));
        }
    }
    let _ = writeln!(
        src,
        "/// The largest scene's mesh counts.\npub const COUNTS: MeshCounts = {counts:?};\n/// Dynamic (and contact) pair storage: {BOARD_PAIRS_PER_NODE} a node of the largest scene.\npub const PAIRS: usize = {pairs};\n/// The state's capacities: each the largest scene's ({total} bytes).\npub const STATE: StateSizes = {state:?};\n/// The BDF2 history's `Vec3`s: the largest fallback scene's, in the core-coupled RAM.\npub const HISTORY: usize = {history};\n/// Flash bytes of the baked scenes.\npub const SCENE_FLASH: usize = {flash};\n/// The scenes, in file name order.\npub static SCENES: [Baked; {}] = [\n{}\n];",
        values.len(),
        values.join(",\n")
    );
    std::fs::write(out.join("scenes.rs"), src).unwrap_or_else(|e| fail(format!("writing scenes.rs: {e}")));
}

fn main() {
    let board = std::env::var_os("CARGO_FEATURE_BOARD").is_some();
    let qemu = std::env::var_os("CARGO_FEATURE_QEMU").is_some();
    let memory = match (board, qemu) {
        (true, false) => "memory-stm32f405.x",
        (false, true) => "memory-mps2-an386.x",
        _ => fail("enable exactly one of the features `board` (default) and `qemu`".into()),
    };
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::copy(memory, out.join("memory.x")).expect("copy memory layout");
    // `WEFT_SCENES`: another folder of scene files to bake instead.
    let dir = std::env::var_os("WEFT_SCENES").map_or_else(|| PathBuf::from("scenes"), PathBuf::from);
    bake(&dir, &out);
    println!("cargo:rerun-if-env-changed=WEFT_SCENES");
    println!("cargo:rerun-if-changed={}", dir.display());
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed={memory}");
    println!("cargo:rerun-if-changed=build.rs");
}
