//! `weft quantize`: post-training int8 quantisation of the float network.
//!
//! [`FloatNet`] is the trained network in plain `f32` (the same arithmetic
//! as the candle model, without the tensor library), which records the
//! largest magnitude and the mean square of every activation channel on
//! calibration graphs ([`Ranges`]). [`quantize`] turns weights and ranges
//! into the int8 network of `weft_core::gnn::int8` (see there for the
//! arithmetic) as a [`NetworkData`] for the `weights/` file; every input
//! feature and every latent or hidden channel gets its own scale
//! (largest calibrated magnitude ↦ 127; a latent channel's over all
//! rounds, which share it), and every layer's output weight scale is its
//! activation's scale divided by a power of two ([`shift_scale`]), so that
//! requantising is a right shift.//!
//! The rooms: [`float`] (the float network and its activation ranges),
//! [`quantiser`] (scales, shifts, noise) and [`command`] (`weft quantize`).

pub mod command;
pub mod float;
pub mod quantiser;

pub use command::*;
pub use float::*;
pub use quantiser::*;
