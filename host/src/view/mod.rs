//! The viewing layer: a small raster canvas ([`canvas`]), the cloth
//! renderer and the demo ([`render`]), the picture of a simulated run
//! ([`preview`]), and the evaluation's plot ([`plot`]). It builds on `learn` and `sim`.

pub mod canvas;
pub mod plot;
pub mod preview;
pub mod render;
pub mod web;
