//! The viewing layer: a small raster canvas ([`canvas`]), the cloth
//! renderer and the demo ([`render`]), and the evaluation's plot
//! ([`plot`]). It builds on `learn` and `sim`.

pub mod canvas;
pub mod plot;
pub mod render;
pub mod web;
