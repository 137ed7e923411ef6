//! [`SceneError`]: why a scene file was refused, naming the key.

use std::fmt;

/// What kind of problem a [`SceneError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Not TOML, an unknown key, or a value of the wrong type.
    Syntax,
    /// A key that is needed and missing, or keys that exclude each other.
    Keys,
    /// A value out of its range, sizes too large to build included.
    Value,
    /// A cloth mesh that cannot be built: an OBJ file's syntax, degenerate
    /// triangles, an edge shared by more than two triangles.
    Mesh,
    /// A file that could not be read.
    Io,
}

/// Why a scene file was refused. `key` is the TOML key at fault
/// (`cloth.resolution`, `pin[1]`, `collider[0].radius`; empty for the file
/// as a whole); the scene is not built. Shown as `key: message`.
#[derive(Clone, Debug, PartialEq)]
pub struct SceneError {
    pub key: String,
    pub kind: ErrorKind,
    pub message: String,
}

impl SceneError {
    pub fn new(key: impl Into<String>, kind: ErrorKind, message: impl Into<String>) -> SceneError {
        SceneError { key: key.into(), kind, message: message.into() }
    }

    /// A value out of range at `key`.
    pub fn value(key: impl Into<String>, message: impl Into<String>) -> SceneError {
        SceneError::new(key, ErrorKind::Value, message)
    }

    /// A missing or conflicting key.
    pub fn keys(key: impl Into<String>, message: impl Into<String>) -> SceneError {
        SceneError::new(key, ErrorKind::Keys, message)
    }

    /// The same error found inside `outer` (`pin[2]` + `nodes` →
    /// `pin[2].nodes`).
    pub fn within(mut self, outer: &str) -> SceneError {
        self.key = match (outer.is_empty(), self.key.is_empty()) {
            (true, _) => self.key,
            (false, true) => outer.to_string(),
            (false, false) => format!("{outer}.{}", self.key),
        };
        self
    }
}

impl fmt::Display for SceneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.key, self.message)
        }
    }
}

impl std::error::Error for SceneError {}

/// [`SceneError::within`] on a result.
pub trait Within<T> {
    fn within(self, outer: &str) -> Result<T, SceneError>;
}

impl<T> Within<T> for Result<T, SceneError> {
    fn within(self, outer: &str) -> Result<T, SceneError> {
        self.map_err(|e| e.within(outer))
    }
}
