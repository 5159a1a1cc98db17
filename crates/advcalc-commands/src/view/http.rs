//! The little HTTP/1.1 the view needs, on `std::net`: GET and HEAD, no request body, one
//! request per connection. It is small on purpose: a request must not be able to cost the
//! view more than a bounded read — headers are capped at 8 KiB and read within a timeout, a
//! request announcing a body is refused without reading it, and at most
//! [`MAX_CONNECTIONS`] are served at once (the rest are closed at once), so a client that
//! stalls, or sends a huge `Content-Length`, holds one connection for at most the timeout.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{Error, Result};

/// Connections served at once; more are closed as they arrive.
pub const MAX_CONNECTIONS: usize = 32;

/// How long a client may take to send its request, or to take the response.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The most header bytes a request may send.
const MAX_HEAD: usize = 8 * 1024;

/// A parsed request: its method, target (path and query) and headers.
pub struct Request {
    pub method: String,
    pub target: String,
    headers: Vec<(String, String)>,
}

impl Request {
    /// Every value of the header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// A response: status, headers, body.
pub struct Response {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn new(status: u16, content_type: &str, body: Vec<u8>) -> Self {
        Response {
            status,
            headers: vec![("Content-Type", content_type.to_string())],
            body,
        }
    }

    pub fn with(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }
}

/// A listening server: an accept thread handing each connection to its own thread.
pub struct Listener {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Listener {
    /// Bind `addr` and answer every request with `handle`.
    pub fn bind(
        addr: SocketAddr,
        handle: impl Fn(&Request) -> Response + Send + Sync + 'static,
    ) -> Result<Listener> {
        let listener = TcpListener::bind(addr).map_err(|e| {
            Error::usage(format!("cannot listen on {addr}: {e}"))
                .with_hint("pick another --port, or 0 for any free one")
        })?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::usage("the view's address").with_source(e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let handle = Arc::new(handle);
        let open = Arc::new(AtomicUsize::new(0));
        let stopping = Arc::clone(&stop);
        let accept = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = conn else { continue };
                if open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                    open.fetch_sub(1, Ordering::SeqCst);
                    drop(stream); // closed at once: the view is busy
                    continue;
                }
                let (handle, open) = (Arc::clone(&handle), Arc::clone(&open));
                std::thread::spawn(move || {
                    serve(stream, &*handle);
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Ok(Listener {
            addr,
            stop,
            accept: Some(accept),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop accepting (connections being served finish on their own, within the timeout).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // wake the accept loop with a connection of our own
        let wake = match self.addr {
            SocketAddr::V4(a) if a.ip().is_unspecified() => {
                SocketAddr::from(([127, 0, 0, 1], a.port()))
            }
            SocketAddr::V6(a) if a.ip().is_unspecified() => {
                SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, a.port()))
            }
            a => a,
        };
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if self.accept.is_some() {
            self.stop();
        }
    }
}

/// One connection: read the request, answer it, close.
fn serve(stream: TcpStream, handle: &dyn Fn(&Request) -> Response) {
    let _ = stream.set_read_timeout(Some(TIMEOUT));
    let _ = stream.set_write_timeout(Some(TIMEOUT));
    let mut writer = match stream.try_clone() {
        Ok(w) => w,
        Err(_) => return,
    };
    let response = match read_request(stream) {
        Ok(request) => {
            let head_only = request.method == "HEAD";
            let mut r = handle(&request);
            if head_only {
                r.headers.push(("Content-Length", r.body.len().to_string()));
                r.body.clear();
                let _ = write_response(&mut writer, &r, false);
                return;
            }
            r
        }
        Err(Some(bad)) => bad,
        Err(None) => return, // the client went away or stalled
    };
    let _ = write_response(&mut writer, &response, true);
}

/// The request's head, or the response refusing it (`None`: nothing worth answering).
fn read_request(stream: TcpStream) -> std::result::Result<Request, Option<Response>> {
    let mut reader = BufReader::new(stream.take(MAX_HEAD as u64 + 1));
    let mut lines: Vec<String> = Vec::new();
    let mut size = 0usize;
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) if size > MAX_HEAD => return Err(Some(refuse(431, "headers over 8 KiB"))),
            Ok(0) => return Err(None),
            Ok(n) => size += n,
            Err(_) => return Err(None),
        }
        if size > MAX_HEAD {
            return Err(Some(refuse(431, "headers over 8 KiB")));
        }
        let line = line.trim_end_matches(['\r', '\n']).to_string();
        if line.is_empty() {
            break;
        }
        lines.push(line);
    }
    let Some(first) = lines.first() else {
        return Err(Some(refuse(400, "no request line")));
    };
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(Some(refuse(400, "a malformed request line")));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(Some(refuse(505, "HTTP/1.x only")));
    }
    let headers: Vec<(String, String)> = lines[1..]
        .iter()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let request = Request {
        method: method.to_string(),
        target: target.to_string(),
        headers,
    };
    // the view reads nothing from a request body, and never reads one: refusing it here is
    // what keeps a huge Content-Length from costing anything
    let body = request
        .header("Content-Length")
        .iter()
        .any(|v| v.trim() != "0")
        || !request.header("Transfer-Encoding").is_empty();
    if body {
        return Err(Some(refuse(400, "the view takes no request body")));
    }
    if request.method != "GET" && request.method != "HEAD" {
        return Err(Some(
            refuse(405, "the view is read-only (GET only)").with("Allow", "GET, HEAD"),
        ));
    }
    Ok(request)
}

fn refuse(status: u16, why: &str) -> Response {
    Response::new(
        status,
        "text/plain; charset=utf-8",
        format!("{status}: {why}\n").into_bytes(),
    )
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

fn write_response(w: &mut TcpStream, r: &Response, with_length: bool) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {} {}\r\n", r.status, reason(r.status));
    for (k, v) in &r.headers {
        head += &format!("{k}: {v}\r\n");
    }
    if with_length {
        head += &format!("Content-Length: {}\r\n", r.body.len());
    }
    head += "Connection: close\r\n\r\n";
    w.write_all(head.as_bytes())?;
    w.write_all(&r.body)?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(addr: SocketAddr, raw: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(raw).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    fn server() -> Listener {
        Listener::bind("127.0.0.1:0".parse().unwrap(), |r: &Request| {
            Response::new(
                200,
                "text/plain",
                format!("{} {}", r.method, r.target).into_bytes(),
            )
        })
        .unwrap()
    }

    #[test]
    fn a_get_is_answered_and_a_head_gets_no_body() {
        let s = server();
        let out = ask(s.addr(), b"GET /a?b=1 HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(
            out.starts_with("HTTP/1.1 200 OK\r\n") && out.ends_with("GET /a?b=1"),
            "{out}"
        );
        let out = ask(s.addr(), b"HEAD /a HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(
            out.contains("Content-Length: 7") && out.ends_with("\r\n\r\n"),
            "{out}"
        );
    }

    #[test]
    fn a_body_or_another_method_is_refused_without_reading_anything_more() {
        let s = server();
        // a huge announced body: refused at once, nothing allocated for it
        let out = ask(
            s.addr(),
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000000\r\n\r\n",
        );
        assert!(out.starts_with("HTTP/1.1 400"), "{out}");
        let out = ask(
            s.addr(),
            b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        assert!(out.starts_with("HTTP/1.1 400"), "{out}");
        let out = ask(s.addr(), b"DELETE / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(
            out.starts_with("HTTP/1.1 405") && out.contains("Allow: GET, HEAD"),
            "{out}"
        );
        let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
        big.extend(vec![b'a'; 10_000]);
        big.extend(b"\r\n\r\n");
        assert!(ask(s.addr(), &big).starts_with("HTTP/1.1 431"));
        // still serving
        assert!(ask(s.addr(), b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200"));
    }

    #[test]
    fn stalled_clients_do_not_stop_the_others() {
        let s = server();
        // more stalled connections than a thread pool would have had
        let stalled: Vec<TcpStream> = (0..8)
            .map(|_| {
                let mut c = TcpStream::connect(s.addr()).unwrap();
                c.write_all(b"GET / HTTP/1.1\r\n").unwrap();
                c
            })
            .collect();
        let out = ask(s.addr(), b"GET /ok HTTP/1.1\r\n\r\n");
        assert!(out.ends_with("GET /ok"), "{out}");
        drop(stalled);
    }
}
