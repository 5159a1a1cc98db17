//! The HTTP side: a few threads answering from the current snapshot, every request checked
//! first (`auth`), the page's assets compiled into the binary (nothing fetched: an air-gapped
//! cluster shows the same page). Read-only: only GET and HEAD, and a request names nothing but
//! indices into the opened input.

use std::io::Cursor;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};
use tiny_http::{Header, Method, Request, Response};

use crate::analysis::collect::Variant;
use crate::error::{Error, Result};
use crate::io::tokenizer::Tokenizer;

use super::ViewOptions;
use super::auth::{Auth, Verdict};
use super::follow;
use super::index::Snapshot;
use super::row::row_json;

/// The page and its script and style, embedded.
const INDEX_HTML: &str = include_str!("assets/index.html");
const VIEW_JS: &str = include_str!("assets/view.js");
const VIEW_CSS: &str = include_str!("assets/view.css");

/// Threads answering requests (a row's request reads one row group; the rest are instant).
const WORKERS: usize = 4;

/// What the server shows now.
pub(super) enum Current {
    /// The first snapshot is being built.
    Reading,
    Ready(Arc<Snapshot>),
    /// The input could not be read (with `--follow`, the view retries when it changes).
    Failed(String),
}

/// What every worker shares.
pub(super) struct Shared {
    pub variants: Vec<Variant>,
    pub opts: ViewOptions,
    pub current: RwLock<Current>,
    /// Bumped whenever `current` changes; the page polls it.
    pub version: AtomicU64,
    /// With `--follow`: why the last change could not be read (the view keeps the snapshot
    /// before it).
    pub follow_error: RwLock<Option<String>>,
    pub stop: AtomicBool,
    auth: Auth,
    tokenizer: Option<Tokenizer>,
}

impl Shared {
    /// Build a snapshot of the input now and show it (or why it failed, when nothing is
    /// shown yet).
    pub fn refresh(&self) {
        match Snapshot::build(&self.variants, &self.opts) {
            Ok(s) => {
                *self.current.write().expect("not poisoned") = Current::Ready(Arc::new(s));
                *self.follow_error.write().expect("not poisoned") = None;
            }
            Err(e) => {
                let message = describe(&e);
                let mut current = self.current.write().expect("not poisoned");
                if matches!(*current, Current::Ready(_)) {
                    *self.follow_error.write().expect("not poisoned") = Some(message);
                } else {
                    *current = Current::Failed(message);
                }
            }
        }
        self.version.fetch_add(1, Ordering::SeqCst);
    }
}

/// A running view: its URL, stopped by [`Server::stop`] (or when dropped).
pub struct Server {
    url: String,
    addr: std::net::SocketAddr,
    http: Arc<tiny_http::Server>,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Server {
    /// Bind, then read the input: at once (its errors are this call's), or with `--follow`
    /// in the background, where the input may not be readable yet (an empty directory the
    /// trainer has not written to): the page says so until it is.
    pub fn start(variants: Vec<Variant>, opts: ViewOptions) -> Result<Server> {
        let tokenizer = opts.tokenizer.as_deref().map(Tokenizer::open).transpose()?;
        if opts.follow {
            follow::check(&opts.read.input)?;
        }
        let http = tiny_http::Server::http((opts.host, opts.port)).map_err(|e| {
            Error::usage(format!("cannot listen on {}:{}: {e}", opts.host, opts.port))
                .with_hint("pick another --port, or 0 for any free one")
        })?;
        let addr = http
            .server_addr()
            .to_ip()
            .ok_or_else(|| Error::usage("the view listens on an IP address"))?;
        let auth = Auth::new(addr, opts.host)?;
        let url = format!("http://{}/?token={}", auth.url_host(), auth.token());
        let current = if opts.follow {
            Current::Reading
        } else {
            Current::Ready(Arc::new(Snapshot::build(&variants, &opts)?))
        };
        let shared = Arc::new(Shared {
            variants,
            opts,
            current: RwLock::new(current),
            version: AtomicU64::new(1),
            follow_error: RwLock::new(None),
            stop: AtomicBool::new(false),
            auth,
            tokenizer,
        });
        let http = Arc::new(http);
        let mut threads = Vec::new();
        for _ in 0..WORKERS {
            let (http, shared) = (Arc::clone(&http), Arc::clone(&shared));
            threads.push(std::thread::spawn(move || {
                while let Ok(request) = http.recv() {
                    answer(&shared, request);
                }
            }));
        }
        if shared.opts.follow {
            let reader = Arc::clone(&shared);
            threads.push(std::thread::spawn(move || {
                reader.refresh();
                follow::watch(&reader);
            }));
        }
        Ok(Server {
            url,
            addr,
            http,
            shared,
            threads,
        })
    }

    /// The URL to open, with its token.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The address it listens on (its port, when `--port 0` chose one).
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Block until `stop` returns true (checked every 100 ms), then stop.
    pub fn serve_until(self, stop: impl Fn() -> bool) {
        while !stop() {
            std::thread::sleep(Duration::from_millis(100));
        }
        self.stop();
    }

    /// Stop answering and join the threads (a snapshot being built is left to finish).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.http.unblock();
        for _ in 1..WORKERS {
            self.http.unblock();
        }
        let threads = std::mem::take(&mut self.threads);
        for (k, t) in threads.into_iter().enumerate() {
            // the follower may be inside a long build: it notices `stop` when done
            if k < WORKERS {
                let _ = t.join();
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.shutdown();
        }
    }
}

/// Answer one request.
fn answer(shared: &Shared, request: Request) {
    let verdict = shared.auth.check(&request);
    let response = match verdict {
        Verdict::Refused(why) => text(403, &format!("403 forbidden: {why}\n")),
        Verdict::Allowed { set_cookie } => {
            let mut r = if !matches!(request.method(), Method::Get | Method::Head) {
                text(405, "405: the view is read-only (GET only)\n")
            } else {
                route(shared, request.url())
            };
            if let Some(cookie) = set_cookie {
                r.add_header(header("Set-Cookie", &cookie));
            }
            r
        }
    };
    let _ = request.respond(response);
}

type Reply = Response<Cursor<Vec<u8>>>;

fn route(shared: &Shared, url: &str) -> Reply {
    let path = url.split(['?', '#']).next().unwrap_or("/");
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    match parts.as_slice() {
        // the assets' URLs carry the token too (every request needs it)
        [] => asset(
            &INDEX_HTML.replace("{{TOKEN}}", shared.auth.token()),
            "text/html; charset=utf-8",
        ),
        ["view.js"] => asset(VIEW_JS, "text/javascript; charset=utf-8"),
        ["view.css"] => asset(VIEW_CSS, "text/css; charset=utf-8"),
        ["api", "version"] => json_reply(200, &version(shared)),
        ["api", rest @ ..] => api(shared, rest),
        _ => text(404, &format!("404: no page {path}\n")),
    }
}

fn version(shared: &Shared) -> Value {
    let (state, error, steps) = match &*shared.current.read().expect("not poisoned") {
        Current::Reading => ("reading", None, None),
        Current::Failed(m) => ("failed", Some(m.clone()), None),
        Current::Ready(s) => ("ready", None, Some(s.index.steps.len())),
    };
    json!({
        "version": shared.version.load(Ordering::SeqCst),
        "state": state,
        "error": error,
        "steps": steps,
        "follow": shared.opts.follow,
        "follow_error": *shared.follow_error.read().expect("not poisoned"),
    })
}

fn api(shared: &Shared, parts: &[&str]) -> Reply {
    let snapshot = match &*shared.current.read().expect("not poisoned") {
        Current::Ready(s) => Arc::clone(s),
        Current::Reading => return error(503, "the input is still being read"),
        Current::Failed(m) => return error(503, &format!("the input could not be read: {m}")),
    };
    let index = &snapshot.index;
    match parts {
        ["overview"] => {
            let mut v = index.overview();
            v["version"] = json!(shared.version.load(Ordering::SeqCst));
            v["tokenizer"] = json!(shared.tokenizer.is_some());
            json_reply(200, &v)
        }
        ["steps", i] => match position(i, index.steps.len(), "step") {
            Ok(i) => json_reply(200, &index.step(i)),
            Err(r) => r,
        },
        ["groups", g] => match position(g, index.groups.len(), "group") {
            Ok(g) => json_reply(200, &index.group(g)),
            Err(r) => r,
        },
        ["rows", r] => match position(r, index.rows, "row") {
            Ok(r) => match row_json(&snapshot, r, shared.tokenizer.as_ref()) {
                Ok(body) => bytes(200, body.into_bytes(), "application/json"),
                Err(e) => error(500, &describe(&e)),
            },
            Err(r) => r,
        },
        _ => error(404, &format!("no endpoint /api/{}", parts.join("/"))),
    }
}

/// `text` as an index below `len`, or a 404 saying why.
fn position(text: &str, len: usize, what: &str) -> std::result::Result<usize, Reply> {
    match text.parse::<usize>() {
        Ok(i) if i < len => Ok(i),
        Ok(i) => Err(error(
            404,
            &format!(
                "{what} {i}: the input has {len} {what}{} ({what}s count from 0)",
                if len == 1 { "" } else { "s" }
            ),
        )),
        Err(_) => Err(error(
            404,
            &format!("{what} {text:?}: not an index (a whole number from 0)"),
        )),
    }
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("an ASCII header")
}

fn bytes(status: u16, body: Vec<u8>, content_type: &str) -> Reply {
    Response::from_data(body)
        .with_status_code(status)
        .with_header(header("Content-Type", content_type))
        .with_header(header("Cache-Control", "no-store"))
        .with_header(header("X-Content-Type-Options", "nosniff"))
        .with_header(header("Referrer-Policy", "no-referrer"))
}

fn asset(body: &str, content_type: &str) -> Reply {
    bytes(200, body.as_bytes().to_vec(), content_type).with_header(header(
        "Content-Security-Policy",
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'",
    ))
}

fn json_reply(status: u16, v: &Value) -> Reply {
    bytes(status, v.to_string().into_bytes(), "application/json")
}

fn error(status: u16, message: &str) -> Reply {
    json_reply(status, &json!({ "error": message }))
}

fn text(status: u16, message: &str) -> Reply {
    bytes(
        status,
        message.as_bytes().to_vec(),
        "text/plain; charset=utf-8",
    )
}

/// An error as the page shows it: the message, then each cause it does not already say.
pub(super) fn describe(e: &Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let line = cause.to_string();
        if !text.contains(&line) {
            text += &format!(": {line}");
        }
        source = cause.source();
    }
    text
}
