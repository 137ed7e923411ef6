//! The module's exports, as the page calls them (`web/www/app.js`). A call
//! that fails returns a [`WebError`] code (0: done), whose text
//! `weft_error_text` / `weft_error_len` give; the simulation keeps running
//! as it was. Slices are returned as pointers into the module's memory,
//! valid until the next call that loads a scene.
//!
//! `#[no_mangle]` is what makes a function an export of the module (the
//! `unsafe_code` lint counts it, hence the allowance below); nothing here
//! dereferences a pointer.
#![allow(unsafe_code)]

use std::cell::RefCell;

use crate::{load, load_text, with_last_error, with_sim, Cloth, WebError, SCENES};
use weft_core::math::Vec3;

thread_local! {
    /// Bytes the page writes a scene file into ([`weft_input`]).
    static INPUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

fn code(r: Result<(), WebError>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => e as i32,
    }
}

fn cloth(which: u32) -> Cloth {
    if which == 0 {
        Cloth::Plain
    } else {
        Cloth::Corrected
    }
}

#[no_mangle]
pub extern "C" fn weft_scene_count() -> u32 {
    SCENES.len() as u32
}

/// The name of scene `index` (UTF-8, `weft_scene_name_len` bytes; empty
/// out of range).
#[no_mangle]
pub extern "C" fn weft_scene_name(index: u32) -> *const u8 {
    scene_part(index, 0).as_ptr()
}

#[no_mangle]
pub extern "C" fn weft_scene_name_len(index: u32) -> u32 {
    scene_part(index, 0).len() as u32
}

/// Scene `index`'s name (`part` 0) or file (1); empty out of range.
fn scene_part(index: u32, part: usize) -> &'static str {
    SCENES.get(index as usize).map_or("", |&(name, text)| if part == 0 { name } else { text })
}

/// The scene file of scene `index` (UTF-8 TOML, `weft_scene_text_len`
/// bytes; empty out of range).
#[no_mangle]
pub extern "C" fn weft_scene_text(index: u32) -> *const u8 {
    scene_part(index, 1).as_ptr()
}

#[no_mangle]
pub extern "C" fn weft_scene_text_len(index: u32) -> u32 {
    scene_part(index, 1).len() as u32
}

/// Room for `len` bytes of a scene file, for the page to write into
/// before [`weft_load_text`]; valid until the next call to either.
#[no_mangle]
pub extern "C" fn weft_input(len: u32) -> *mut u8 {
    INPUT.with(|i| {
        let mut i = i.borrow_mut();
        i.clear();
        i.resize(len as usize, 0);
        i.as_mut_ptr()
    })
}

/// Loads the scene file the page wrote with [`weft_input`] (`len` bytes
/// of UTF-8 TOML) as scene `edited`. A refused file is error 7, its reason
/// in `weft_last_error`; the last good scene keeps running.
#[no_mangle]
pub extern "C" fn weft_load_text(len: u32) -> i32 {
    let text = INPUT.with(|i| {
        let i = i.borrow();
        let n = (len as usize).min(i.len());
        String::from_utf8_lossy(&i[..n]).into_owned()
    });
    code(load_text("edited", &text))
}

/// Why the last scene file was refused (UTF-8, `weft_last_error_len`
/// bytes), naming the key as `weft simulate` does.
#[no_mangle]
pub extern "C" fn weft_last_error() -> *const u8 {
    with_last_error(|e| e.as_ptr())
}

#[no_mangle]
pub extern "C" fn weft_last_error_len() -> u32 {
    with_last_error(|e| e.len() as u32)
}

/// Why the loaded scene lies outside the network's training envelope
/// (UTF-8, `weft_outside_len` bytes; none: inside), where the corrected
/// cloth runs the plain BDF2 fallback.
#[no_mangle]
pub extern "C" fn weft_outside() -> *const u8 {
    with_sim(|sim| Ok(sim.outside().as_ptr())).unwrap_or(core::ptr::null())
}

#[no_mangle]
pub extern "C" fn weft_outside_len() -> u32 {
    with_sim(|sim| Ok(sim.outside().len() as u32)).unwrap_or(0)
}

/// Loads scene `index` from rest, both cloths.
#[no_mangle]
pub extern "C" fn weft_load(index: u32) -> i32 {
    code(load(index as usize))
}

/// One physics step of the plain (0) or the corrected (1) cloth.
#[no_mangle]
pub extern "C" fn weft_physics(which: u32) -> i32 {
    code(with_sim(|s| s.physics(cloth(which))))
}

/// The network's correction of the corrected cloth's last physics step.
#[no_mangle]
pub extern "C" fn weft_correct() -> i32 {
    code(with_sim(|s| s.correct()))
}

/// Moves the sphere (or, without one, the pins) to `(x, y, z)`.
#[no_mangle]
pub extern "C" fn weft_drag(x: f32, y: f32, z: f32) -> i32 {
    code(with_sim(|s| s.drag(Vec3::new(x, y, z))))
}

#[no_mangle]
pub extern "C" fn weft_node_count() -> u32 {
    with_sim(|s| Ok(s.positions(Cloth::Plain).len() as u32)).unwrap_or(0)
}

/// The plain (0) or corrected (1) cloth's positions: `3 × weft_node_count`
/// floats.
#[no_mangle]
pub extern "C" fn weft_positions(which: u32) -> *const f32 {
    with_sim(|s| Ok(s.positions(cloth(which)).as_ptr() as *const f32)).unwrap_or(core::ptr::null())
}

/// The triangles' node indices, `3 × weft_triangle_count` `u16`s.
#[no_mangle]
pub extern "C" fn weft_triangles() -> *const u16 {
    with_sim(|s| Ok(s.triangles().as_ptr())).unwrap_or(core::ptr::null())
}

#[no_mangle]
pub extern "C" fn weft_triangle_count() -> u32 {
    with_sim(|s| Ok(s.triangles().len() as u32 / 3)).unwrap_or(0)
}

/// The sphere's centre and radius (4 floats; radius 0 without a sphere).
#[no_mangle]
pub extern "C" fn weft_sphere() -> *const f32 {
    with_sim(|s| Ok(s.sphere().as_ptr())).unwrap_or(core::ptr::null())
}

/// What a drag moves: the sphere's centre, or the first pin's anchor.
#[no_mangle]
pub extern "C" fn weft_handle(axis: u32) -> f32 {
    with_sim(|s| {
        let h = s.handle();
        Ok([h.x, h.y, h.z].get(axis as usize).copied().unwrap_or(0.0))
    })
    .unwrap_or(0.0)
}

#[no_mangle]
pub extern "C" fn weft_checksum(which: u32) -> u32 {
    with_sim(|s| Ok(s.checksum(cloth(which)))).unwrap_or(0)
}

/// CG iterations of the last physics step of the plain (0) or corrected
/// (1) cloth.
#[no_mangle]
pub extern "C" fn weft_cg_iterations(which: u32) -> u32 {
    with_sim(|s| Ok(s.report(cloth(which)).cg_iterations)).unwrap_or(0)
}

/// Dynamic edges the network saw at its last correction.
#[no_mangle]
pub extern "C" fn weft_dynamic_edges() -> u32 {
    with_sim(|s| Ok(s.dynamic_edges() as u32)).unwrap_or(0)
}

/// The text of error `code` (UTF-8, `weft_error_len` bytes).
#[no_mangle]
pub extern "C" fn weft_error_text(code: i32) -> *const u8 {
    error_text(code).as_ptr()
}

#[no_mangle]
pub extern "C" fn weft_error_len(code: i32) -> u32 {
    error_text(code).len() as u32
}

fn error_text(code: i32) -> &'static str {
    WebError::ALL.iter().find(|e| **e as i32 == code).map_or("unknown error", |e| e.message())
}
