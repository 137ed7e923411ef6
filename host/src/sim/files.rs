//! Result files written whole or not at all. A file is written to a
//! temporary name beside its final one (`NAME.tmp`) and renamed over the
//! final name, so that a reader (a later command, a script, a resumed run)
//! finds either the previous file or the new one, never a part; a process
//! killed while writing leaves at most the temporary file, which the next
//! write of the same name replaces. [`write_durable`] also flushes the
//! file and its folder's entry to the disk before and after the rename,
//! so that a machine that stops keeps them too (checkpoints); a frame or a
//! report that a rerun rewrites does without that cost.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The temporary name `path` is written under before the rename.
pub fn temporary(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".tmp");
    PathBuf::from(s)
}

/// Writes `bytes` to `path` atomically (see the module); creates the
/// folder if it is missing.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write(path, bytes, false)
}

/// [`write_atomic`], flushed to the disk (see the module).
pub fn write_durable(path: &Path, bytes: &[u8]) -> Result<()> {
    write(path, bytes, true)
}

fn write(path: &Path, bytes: &[u8], sync: bool) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = temporary(path);
    let mut f = std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    f.write_all(bytes)
        .and_then(|_| if sync { f.sync_all() } else { Ok(()) })
        .with_context(|| format!("writing {}", tmp.display()))?;
    drop(f);
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
    // The rename itself reaches the disk with the folder's entry.
    if sync {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// [`write_atomic`] of `value` as pretty-printed JSON.
pub fn write_json<T: serde::Serialize + ?Sized>(path: &Path, value: &T) -> Result<()> {
    write_atomic(path, serde_json::to_string_pretty(value)?.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_replaces_the_file_whole_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/report.json");
        write_atomic(&p, b"old").unwrap();
        // A killed writer's leftover is replaced, not appended to.
        std::fs::write(temporary(&p), b"half a new rep").unwrap();
        write_atomic(&p, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert!(!temporary(&p).exists());
    }
}
