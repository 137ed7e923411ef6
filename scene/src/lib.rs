//! weft's scene files: one TOML format for a cloth scene — the cloth (a
//! grid, a built-in shape or an OBJ mesh), its material, time stepping,
//! gravity, pins, colliders, wind, kicks, self-contact and output — read
//! the same way by the desktop (`weft simulate`), by the firmware's
//! `build.rs` (which bakes `firmware/scenes/*.toml` into flash) and by the
//! page (`web/`, which runs and edits them in the browser).
//!
//! [`Scenario::parse`] reads and validates a file: every size is checked
//! before anything is built or allocated, and a bad file is a
//! [`SceneError`] that names the key ([`SceneError::key`]), the way
//! `weft simulate` prints it. [`build`] then makes what the core steps:
//! the mesh, the model and the start state, in heap storage ([`storage`]).
//!
//! ```
//! let scene = weft_scene::Scenario::parse(
//!     "[cloth]\nwidth = 0.8\nheight = 0.8\nresolution = [8, 8]\n[[pin]]\nregion = \"corners:top\"\n",
//! )?;
//! assert_eq!(scene.node_count(), 64);
//! let bad = weft_scene::Scenario::parse("[cloth]\nwidth = 0.8\nheight = 0.8\nresolution = [1, 8]\n");
//! assert_eq!(bad.unwrap_err().key, "cloth.resolution");
//! # Ok::<(), weft_scene::SceneError>(())
//! ```

pub mod build;
pub mod envelope;
mod error;
pub mod obj;
pub mod scenario;
pub mod shapes;
pub mod spec;
pub mod storage;

pub use error::{ErrorKind, SceneError, Within};
pub use scenario::Scenario;
