//! Cross-crate tests of weft (see `firmware.rs`); the firmware's built-in
//! scenario is shared from `firmware/src/scene.rs`.
#![no_std]

#[path = "../firmware/src/scene.rs"]
pub mod scene;
