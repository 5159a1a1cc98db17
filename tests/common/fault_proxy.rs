//! A small HTTP proxy on 127.0.0.1 in front of the test S3 server that injects faults by a
//! plan: S3 error answers (throttling, access denied, a wrong region), a connection dropped
//! in the middle of a response body (mid-read) or of a request body (mid-write), a request
//! never answered. Everything else passes through.
//!
//! Each client connection gets one answer and is then closed (`Connection: close` is put on
//! every answer, so a client never reuses a connection the proxy closed); each forwarded
//! request opens its own connection to the server. Threads: one accepting, one per
//! connection; all stop when the proxy is dropped (a stalled answer is let go then).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// What the proxy does to a request a rule matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// 503 with S3's `SlowDown` error body.
    SlowDown,
    /// 403 with S3's `AccessDenied` error body.
    AccessDenied,
    /// 301 `PermanentRedirect` (no Location, as S3 does), the bucket's region in
    /// `x-amz-bucket-region`.
    PermanentRedirect(String),
    /// 400 `AuthorizationHeaderMalformed` naming the region the server expects.
    AuthorizationHeaderMalformed(String),
    /// Forward it, answer the status line, headers and this many bytes of the body, then
    /// close the connection.
    DropResponseAfter(usize),
    /// Read the request's head and this many bytes of its body, then close the connection
    /// without an answer.
    DropRequestAfter(usize),
    /// Read the request and never answer it (until the proxy is dropped).
    Stall,
}

/// Which requests a fault applies to, and how often.
#[derive(Debug, Clone)]
pub struct Rule {
    /// `GET`, `PUT`, `HEAD`, …; empty for any.
    pub method: &'static str,
    /// A substring of the request target (`/bucket/key?query`); empty for any.
    pub target: String,
    /// Matching requests passed through before the fault starts.
    pub skip: usize,
    /// Matching requests the fault is applied to, then the rule is spent.
    pub times: usize,
    pub fault: Fault,
}

impl Rule {
    /// `fault` on every request with `method` (empty: any) whose target contains `target`.
    pub fn always(method: &'static str, target: &str, fault: Fault) -> Self {
        Self {
            method,
            target: target.into(),
            skip: 0,
            times: usize::MAX,
            fault,
        }
    }

    /// `fault` on the first `times` such requests.
    pub fn times(method: &'static str, target: &str, times: usize, fault: Fault) -> Self {
        Self {
            times,
            ..Self::always(method, target, fault)
        }
    }

    fn matches(&self, method: &str, target: &str) -> bool {
        (self.method.is_empty() || self.method == method) && target.contains(&self.target)
    }
}

/// One request the proxy saw: method, target, and the fault applied (`None`: passed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub method: String,
    pub target: String,
    pub fault: Option<Fault>,
}

#[derive(Default)]
struct Shared {
    rules: Vec<Rule>,
    seen: Vec<Seen>,
}

/// The proxy; stopped on drop.
pub struct FaultProxy {
    pub port: u16,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl FaultProxy {
    /// A proxy to the server on 127.0.0.1:`upstream`, with `rules` (the first that matches a
    /// request and is not spent decides).
    pub fn start(upstream: u16, rules: Vec<Rule>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Mutex::new(Shared {
            rules,
            seen: Vec::new(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let accept = {
            let (shared, stop) = (shared.clone(), stop.clone());
            std::thread::spawn(move || {
                for client in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(client) = client else { continue };
                    let (shared, stop) = (shared.clone(), stop.clone());
                    std::thread::spawn(move || {
                        // a client that went away is no failure of the proxy's
                        let _ = serve(client, upstream, &shared, &stop);
                    });
                }
            })
        };
        Self {
            port,
            shared,
            stop,
            accept: Some(accept),
        }
    }

    /// `http://127.0.0.1:PORT`, for `AWS_ENDPOINT_URL`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The requests seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared.lock().unwrap().seen.clone()
    }

    /// How many requests got `fault`.
    pub fn count(&self, fault: &Fault) -> usize {
        self.seen()
            .iter()
            .filter(|s| s.fault.as_ref() == Some(fault))
            .count()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // wake the accepting thread
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// A request as read from the client: its head (request line and headers, with
/// `Connection: close` in place of any connection header) and its body.
struct Request {
    method: String,
    target: String,
    head: Vec<u8>,
    content_length: usize,
}

fn read_head(reader: &mut impl BufRead) -> std::io::Result<Option<Request>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or_default().to_string();
    let mut head = line.clone().into_bytes();
    let mut content_length = 0;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        if header == "\r\n" || header.is_empty() {
            break;
        }
        let lower = header.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            content_length = v.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("connection:") || lower.starts_with("keep-alive:") {
            continue;
        }
        head.extend_from_slice(header.as_bytes());
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Some(Request {
        method,
        target,
        head,
        content_length,
    }))
}

fn serve(
    client: TcpStream,
    upstream: u16,
    shared: &Mutex<Shared>,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut client = client;
    let Some(request) = read_head(&mut reader)? else {
        return Ok(());
    };
    let fault = {
        let mut shared = shared.lock().unwrap();
        let fault = shared
            .rules
            .iter_mut()
            .find(|r| r.times > 0 && r.matches(&request.method, &request.target))
            .and_then(|rule| {
                if rule.skip > 0 {
                    rule.skip -= 1;
                    None
                } else {
                    rule.times -= 1;
                    Some(rule.fault.clone())
                }
            });
        shared.seen.push(Seen {
            method: request.method.clone(),
            target: request.target.clone(),
            fault: fault.clone(),
        });
        fault
    };
    if let Some(Fault::DropRequestAfter(k)) = fault {
        let mut got = vec![0u8; k.min(request.content_length)];
        let _ = reader.read_exact(&mut got);
        return client.shutdown(Shutdown::Both);
    }
    let mut body = vec![0u8; request.content_length];
    reader.read_exact(&mut body)?;
    let head_only = request.method == "HEAD";
    let answer = |status: &str, code: &str, extra: &str, detail: &str| {
        let xml = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>\
             <Message>injected by the test proxy</Message>{detail}<RequestId>1</RequestId></Error>"
        );
        let body = if head_only { String::new() } else { xml };
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/xml\r\n{extra}Content-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let canned = match &fault {
        Some(Fault::SlowDown) => Some(answer("503 Slow Down", "SlowDown", "", "")),
        Some(Fault::AccessDenied) => Some(answer("403 Forbidden", "AccessDenied", "", "")),
        Some(Fault::PermanentRedirect(region)) => Some(answer(
            "301 Moved Permanently",
            "PermanentRedirect",
            &format!("x-amz-bucket-region: {region}\r\n"),
            "<Endpoint>s3.amazonaws.com</Endpoint>",
        )),
        Some(Fault::AuthorizationHeaderMalformed(region)) => Some(answer(
            "400 Bad Request",
            "AuthorizationHeaderMalformed",
            "",
            &format!("<Region>{region}</Region>"),
        )),
        Some(Fault::Stall) => {
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
            }
            return client.shutdown(Shutdown::Both);
        }
        _ => None,
    };
    if let Some(canned) = canned {
        client.write_all(canned.as_bytes())?;
        return client.shutdown(Shutdown::Both);
    }

    let mut server = TcpStream::connect(("127.0.0.1", upstream))?;
    server.write_all(&request.head)?;
    server.write_all(&body)?;
    let mut from_server = BufReader::new(server);
    // the answer's head, with `Connection: close` for the client
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if from_server.read_line(&mut line)? == 0 {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if line == "\r\n" {
            head.extend_from_slice(b"Connection: close\r\n\r\n");
            break;
        }
        if !(lower.starts_with("connection:") || lower.starts_with("keep-alive:")) {
            head.extend_from_slice(line.as_bytes());
        }
    }
    client.write_all(&head)?;
    match fault {
        Some(Fault::DropResponseAfter(k)) => {
            let mut part = Vec::new();
            from_server.take(k as u64).read_to_end(&mut part)?;
            client.write_all(&part)?;
            client.flush()?;
        }
        _ => {
            std::io::copy(&mut from_server, &mut client)?;
        }
    }
    client.shutdown(Shutdown::Both)
}
