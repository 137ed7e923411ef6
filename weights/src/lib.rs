//! # weft-weights
//!
//! The trained correction network of weft in int8, as `static` data:
//! [`NETWORK`] is a [`weft_core::gnn::int8::Network`] built at compile time
//! from `weft-gnn.q8` (or the file `$WEFT_WEIGHTS` names) by the build
//! script, which validates magic, format version, checksum and every layer
//! shape against `weft-core` first. Nothing is parsed at run time.
//!
//! Feature `format` (std) exposes the file format itself ([`mod@format`]) for
//! the tools that write and inspect model files.
#![cfg_attr(not(feature = "format"), no_std)]
#![deny(unsafe_code)]

#[cfg(feature = "format")]
pub mod format;

#[cfg(feature = "bake")]
mod baked {
    #![allow(clippy::all)]
    use weft_core::gnn::int8::{Input, Linear, Mlp, Network, Output, Parts};
    use weft_core::model::CoarseGrain;
    include!(concat!(env!("OUT_DIR"), "/network.rs"));
}

#[cfg(feature = "bake")]
pub use baked::{LATENT, NETWORK, ROUNDS};

/// The baked model file's bytes, as validated by the build (the format of
/// [`format`]): what the desktop reads when no other file is named.
#[cfg(feature = "bake")]
pub static MODEL_FILE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/weft-gnn.q8"));
