//! The page server serves every client: a request is answered while
//! another connection is open and silent, eight clients loading at once
//! are all answered, and only the page's files are served, to GET.
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use weft_host::view::web;

/// A folder with the page's files (small stand-ins: the server does not
/// read them) served in the background; its port.
fn served() -> (tempfile::TempDir, u16) {
    let dir = tempfile::tempdir().unwrap();
    for name in web::FILES {
        std::fs::write(dir.path().join(name), format!("the file {name}")).unwrap();
    }
    let port = web::serve_in_background(dir.path()).unwrap();
    (dir, port)
}

/// Sends `request` and reads the whole answer, waiting at most `wait` for
/// each read (an error if the server stays silent that long).
fn ask(port: u16, request: &str, wait: Duration) -> std::io::Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(wait))?;
    s.write_all(request.as_bytes())?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    Ok(answer)
}

#[test]
fn a_silent_connection_does_not_stop_the_page() {
    let (_dir, port) = served();
    // Open and say nothing, as a browser's speculative connection does.
    let _idle = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let _idle2 = TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let answer = ask(port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", Duration::from_secs(1)).expect("answered within 1 s");
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(answer.ends_with("the file index.html"), "{answer}");
}

#[test]
fn eight_clients_at_once_are_all_answered() {
    let (_dir, port) = served();
    let clients: Vec<_> = (0..8)
        .map(|k| {
            std::thread::spawn(move || {
                let name = web::FILES[k % web::FILES.len()];
                let a = ask(port, &format!("GET /{name} HTTP/1.1\r\n\r\n"), Duration::from_secs(5)).unwrap();
                (name, a)
            })
        })
        .collect();
    for c in clients {
        let (name, a) = c.join().unwrap();
        assert!(a.starts_with("HTTP/1.1 200 OK") && a.ends_with(&format!("the file {name}")), "{name}: {a}");
    }
}

#[test]
fn only_the_pages_files_are_served_and_only_to_get() {
    let (dir, port) = served();
    std::fs::write(dir.path().join("secret.txt"), "no").unwrap();
    let wait = Duration::from_secs(5);
    for target in ["/../../etc/passwd", "/secret.txt", "/%2e%2e/etc/passwd"] {
        let a = ask(port, &format!("GET {target} HTTP/1.1\r\n\r\n"), wait).unwrap();
        assert!(a.starts_with("HTTP/1.1 404"), "{target}: {a}");
    }
    let a = ask(port, "POST /index.html HTTP/1.1\r\nContent-Length: 0\r\n\r\n", wait).unwrap();
    assert!(a.starts_with("HTTP/1.1 404"), "{a}");
    let a = ask(port, "GET /app.js?x=1 HTTP/1.1\r\n\r\n", wait).unwrap();
    assert!(a.contains("text/javascript") && a.ends_with("the file app.js"), "{a}");
}
