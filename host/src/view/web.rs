//! `weft web`: the browser page (`web/`) built and served. The
//! WebAssembly module is built from `weft-web` for `wasm32-unknown-unknown`
//! (its own target folder, without debug information), and the page's
//! files — `index.html`, `app.js`, the module as `weft_web.wasm` and
//! embedded in `weft_wasm.js` — are written into a folder anyone can host.
//! [`serve`] serves such a folder on 127.0.0.1.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use base64::Engine;

/// The workspace this binary was built from (the `web/` crate and page).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The page's files as they are written, in the order [`build_site`]
/// writes them.
pub const FILES: [&str; 4] = ["index.html", "app.js", "weft_web.wasm", "weft_wasm.js"];

/// Builds the WebAssembly module and writes the page into `out`; returns
/// the module's size in bytes.
pub fn build_site(out: &Path) -> Result<u64> {
    let root = workspace();
    let target = root.join("target").join("web");
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--release", "-p", "weft-web", "--lib", "--target", "wasm32-unknown-unknown"])
        .arg("--target-dir")
        .arg(&target)
        .env("CARGO_PROFILE_RELEASE_DEBUG", "0")
        .env("CARGO_PROFILE_RELEASE_STRIP", "true")
        // One unit, fat LTO: the scene parser's serde code is most of the
        // module, and shrinks by a seventh (998 KB → 861 KB).
        .env("CARGO_PROFILE_RELEASE_LTO", "fat")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1")
        .current_dir(&root)
        .status()
        .context("running cargo to build the WebAssembly module")?;
    if !status.success() {
        bail!("building weft-web for wasm32-unknown-unknown failed (`rustup target add wasm32-unknown-unknown`?)");
    }
    let wasm = std::fs::read(target.join("wasm32-unknown-unknown/release/weft_web.wasm"))
        .context("reading the built module")?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    for page in ["index.html", "app.js"] {
        std::fs::copy(root.join("web/www").join(page), out.join(page)).with_context(|| format!("copying {page}"))?;
    }
    std::fs::write(out.join("weft_web.wasm"), &wasm)?;
    let b64 = base64::engine::general_purpose::STANDARD.encode(&wasm);
    std::fs::write(
        out.join("weft_wasm.js"),
        format!("// weft_web.wasm, base64 (`weft web`).\nconst WEFT_WASM = \"{b64}\";\n"),
    )?;
    Ok(wasm.len() as u64)
}

/// How long a connection may wait to send its request line, or to take
/// the answer, before it is closed.
pub const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Connections answered at once; one more waits for a thread to finish.
pub const CONNECTIONS: usize = 32;

/// Serves the files of `dir` on `listener` until the process ends: every
/// connection on a thread of its own (at most [`CONNECTIONS`] at once),
/// with [`TIMEOUT`] to read its request and to take the answer, so that a
/// silent or slow client holds only its own thread. GET only; names
/// outside the page's files are refused.
pub fn serve(dir: &Path, listener: TcpListener) -> Result<()> {
    let dir = std::sync::Arc::new(dir.to_path_buf());
    let open = std::sync::Arc::new((std::sync::Mutex::new(0usize), std::sync::Condvar::new()));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        {
            let (count, freed) = &*open;
            let mut n = count.lock().map_err(|_| anyhow::anyhow!("the server's count lock is poisoned"))?;
            while *n >= CONNECTIONS {
                n = freed.wait(n).map_err(|_| anyhow::anyhow!("the server's count lock is poisoned"))?;
            }
            *n += 1;
        }
        let (dir, open) = (dir.clone(), open.clone());
        std::thread::spawn(move || {
            let r = stream
                .set_read_timeout(Some(TIMEOUT))
                .and_then(|_| stream.set_write_timeout(Some(TIMEOUT)))
                .map_err(anyhow::Error::from)
                .and_then(|_| answer(&dir, stream));
            if let Err(e) = r {
                eprintln!("weft web: {e:#}");
            }
            let (count, freed) = &*open;
            if let Ok(mut n) = count.lock() {
                *n -= 1;
            }
            freed.notify_one();
        });
    }
    Ok(())
}

fn answer(dir: &Path, mut stream: TcpStream) -> Result<()> {
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    let mut words = line.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or("/"));
    let path = target.split(['?', '#']).next().unwrap_or("/").trim_start_matches('/');
    let name = if path.is_empty() { "index.html" } else { path };
    let file = (method == "GET" && FILES.contains(&name)).then(|| dir.join(name));
    match file.map(std::fs::read) {
        Some(Ok(body)) => {
            let kind = match name.rsplit('.').next() {
                Some("html") => "text/html; charset=utf-8",
                Some("js") => "text/javascript; charset=utf-8",
                Some("wasm") => "application/wasm",
                _ => "application/octet-stream",
            };
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
                body.len()
            );
            stream.write_all(head.as_bytes())?;
            stream.write_all(&body)?;
        }
        _ => stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?,
    }
    Ok(())
}

/// Serves `dir` on an ephemeral port of 127.0.0.1 from a thread that
/// lives as long as the process; returns the port.
pub fn serve_in_background(dir: &Path) -> Result<u16> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).context("binding 127.0.0.1")?;
    let port = listener.local_addr()?.port();
    let dir = dir.to_path_buf();
    std::thread::spawn(move || serve(&dir, listener));
    Ok(port)
}

/// Debian's Chromium (`WEFT_CHROMIUM` names another), if it is there.
pub fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("WEFT_CHROMIUM").map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    path.is_file().then_some(path)
}

/// Headless Chromium on `url` with `args` (a fresh profile, no network
/// beyond the page); returns what it printed.
pub fn headless(chromium: &Path, url: &str, args: &[&str]) -> Result<String> {
    let profile = tempfile::tempdir()?;
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(url)
        .output()
        .with_context(|| format!("running {}", chromium.display()))?;
    if !out.status.success() {
        bail!("chromium failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A screenshot of the page served on `port` after `frames` frames of
/// scene `scene`, into `png`.
pub fn screenshot(chromium: &Path, port: u16, scene: u32, frames: u32, png: &Path) -> Result<()> {
    let url = format!("http://127.0.0.1:{port}/index.html?shot={frames}&scene={scene}");
    headless(chromium, &url, &[&format!("--screenshot={}", png.display()), "--window-size=1600,700"])?;
    if !png.is_file() {
        bail!("chromium wrote no screenshot to {}", png.display());
    }
    Ok(())
}

/// `weft web`: builds the page into `out`; with `shot`, saves a
/// screenshot of it there (scene `scene` after 90 frames); with
/// `serve_it`, serves it on `addr` (127.0.0.1 unless the user names
/// another), printing the address.
pub fn command(
    out: &Path,
    addr: (std::net::IpAddr, u16),
    serve_it: bool,
    shot: Option<&Path>,
    scene: u32,
) -> Result<()> {
    let bytes = build_site(out)?;
    println!("wrote {} ({} bytes of WebAssembly)", out.display(), bytes);
    if let Some(png) = shot {
        let chromium = chromium().context("no Chromium at /usr/bin/chromium (apt-get install chromium)")?;
        screenshot(&chromium, serve_in_background(out)?, scene, 90, png)?;
        println!("wrote {}", png.display());
    }
    if serve_it {
        let listener = TcpListener::bind(addr).with_context(|| format!("binding {}:{}", addr.0, addr.1))?;
        println!("serving http://{}/ (Ctrl-C stops)", listener.local_addr()?);
        serve(out, listener)?;
    }
    Ok(())
}
