//! Every refused scene names its key and kind, and nothing is built
//! before the sizes are checked.

use weft_scene::{ErrorKind, Scenario};

const GRID: &str = "[cloth]\nwidth = 0.8\nheight = 0.8\nresolution = [8, 8]\n";

fn refused(text: &str) -> (String, ErrorKind, String) {
    let e = Scenario::parse(text).expect_err(text);
    let shown = e.to_string();
    (e.key, e.kind, shown)
}

#[test]
fn syntax_errors_name_the_key_serde_read() {
    let (key, kind, _) = refused(&format!("{GRID}[material]\ndensityy = 0.2\n"));
    assert_eq!((key.as_str(), kind), ("material.densityy", ErrorKind::Syntax));
    let (key, kind, shown) = refused(&format!("{GRID}[time]\nsteps = \"many\"\n"));
    assert_eq!((key.as_str(), kind), ("time.steps", ErrorKind::Syntax), "{shown}");
    let (key, _, shown) = refused(&format!("{GRID}[[collider]]\nkind = \"cube\"\n"));
    assert_eq!(key, "collider[0].kind", "{shown}");
    let (key, kind, _) = refused("[cloth\nwidth = 1");
    assert_eq!((key.as_str(), kind), ("", ErrorKind::Syntax));
}

#[test]
fn value_errors_name_the_entry() {
    let (key, kind, shown) = refused(&format!("{GRID}[[collider]]\nkind = \"sphere\"\ncenter = [0, 0, 0]\n"));
    assert_eq!((key.as_str(), kind), ("collider[0].radius", ErrorKind::Keys), "{shown}");
    let (key, _, shown) = refused(&format!("{GRID}[[pin]]\nregion = \"row:3\"\n[[pin]]\nregion = \"row:99\"\n"));
    assert_eq!(key, "pin[1].region", "{shown}");
    assert!(shown.contains("row 99 does not exist"), "{shown}");
    let (key, kind, _) = refused(&format!("{GRID}[material]\npoisson = 0.7\n"));
    assert_eq!((key.as_str(), kind), ("material.poisson", ErrorKind::Value));
    let (key, _, _) = refused(&format!("{GRID}[[collider]]\nkind = \"sphere\"\ncenter = [0, 0, 0]\nradius = 0.1\n[[collider]]\nkind = \"sphere\"\ncenter = [0, 0, 0]\nradius = -1.0\n"));
    assert_eq!(key, "collider[1].radius");
    let (key, _, _) = refused(&format!("{GRID}[[kick]]\nvelocity = [1, 0, 0]\nnodes = [64]\n"));
    assert_eq!(key, "kick[0].nodes");
}

#[test]
fn a_shape_too_large_is_refused_before_it_is_built() {
    // A thousand million cells across would take terabytes; the check
    // runs first.
    let (key, kind, shown) = refused("[cloth]\nshape = \"disc\"\nresolution = [1000000000, 5]\n");
    assert_eq!((key.as_str(), kind), ("cloth.resolution", ErrorKind::Value), "{shown}");
    let (key, kind, _) = refused("[cloth]\nmesh = \"no-such-file.obj\"\n");
    assert_eq!((key.as_str(), kind), ("cloth.mesh", ErrorKind::Io));
}

#[test]
fn meshes_can_come_from_memory() {
    let obj = "v 0 0 0\nv 1 0 0\nv 0 0 1\nf 1 2 3\n";
    let read = |p: &std::path::Path, _: weft_scene::obj::ObjOptions| {
        assert_eq!(p, std::path::Path::new("tri.obj"));
        weft_scene::obj::parse(obj).map_err(|e| weft_scene::SceneError::new("", ErrorKind::Mesh, e.to_string()))
    };
    let s = Scenario::parse_with("[cloth]\nmesh = \"tri.obj\"\n", &read).unwrap();
    assert_eq!(s.node_count(), 3);
}
