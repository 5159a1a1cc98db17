//! The view's requests: each checked first (`auth`), then answered from the current snapshot;
//! the page's assets are compiled into the binary (nothing fetched: an air-gapped cluster
//! shows the same page). Read-only: a request names nothing but indices into the opened
//! input. `http` does the HTTP.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};

use crate::analysis::collect::Variant;
use crate::error::{Error, Result};
use crate::io::tokenizer::Tokenizer;

use super::ViewOptions;
use super::auth::Auth;
use super::follow;
use super::http::{Listener, Request, Response};
use super::index::Snapshot;
use super::row::row_json;

/// The page and its script and style, embedded.
const INDEX_HTML: &str = include_str!("assets/index.html");
const VIEW_JS: &str = include_str!("assets/view.js");
const VIEW_CSS: &str = include_str!("assets/view.css");

/// What the server shows now.
pub(super) enum Current {
    /// The first snapshot is being built.
    Reading,
    Ready(Arc<Snapshot>),
    /// The input could not be read (with `--follow`, the view retries when it changes).
    Failed(String),
}

/// What every request shares.
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
        // a panic while reading is a bug; it must not end the watching (the page says it)
        let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Snapshot::build(&self.variants, &self.opts)
        }))
        .unwrap_or_else(|_| {
            Err(Error::data(
                "advcalc view failed while reading IN (a bug: please report it)",
            ))
        });
        match built {
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
    listener: Listener,
    shared: Arc<Shared>,
    follower: Option<JoinHandle<()>>,
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
        let current = if opts.follow {
            Current::Reading
        } else {
            Current::Ready(Arc::new(Snapshot::build(&variants, &opts)?))
        };
        let token = Auth::random_token()?;
        // the Host check needs the port, which binding decides: bind first, answering 503
        // until the shared state is in place (a few microseconds)
        let cell: Arc<std::sync::OnceLock<Arc<Shared>>> = Arc::new(std::sync::OnceLock::new());
        let answering = Arc::clone(&cell);
        let listener = Listener::bind(
            std::net::SocketAddr::new(opts.host, opts.port),
            move |r: &Request| match answering.get() {
                Some(s) => answer(s, r),
                None => text(503, "starting\n"),
            },
        )?;
        let auth = Auth::with_token(listener.addr(), opts.host, token);
        let url = format!("http://{}/?token={}", auth.url_host(), auth.token());
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
        let _ = cell.set(Arc::clone(&shared));
        let follower = shared.opts.follow.then(|| {
            let reader = Arc::clone(&shared);
            std::thread::spawn(move || {
                reader.refresh();
                follow::watch(&reader);
            })
        });
        Ok(Server {
            url,
            listener,
            shared,
            follower,
        })
    }

    /// The URL to open, with its token.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The address it listens on (its port, when `--port 0` chose one).
    pub fn addr(&self) -> std::net::SocketAddr {
        self.listener.addr()
    }

    /// Block until `stop` returns true (checked every 100 ms), then stop.
    pub fn serve_until(self, stop: impl Fn() -> bool) {
        while !stop() {
            std::thread::sleep(Duration::from_millis(100));
        }
        self.stop();
    }

    /// Stop answering (the follower, maybe inside a long read, notices when done).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.listener.stop();
        drop(self.follower.take());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Answer one request: refused without the token or with another Host; a panic (a bug)
/// is a 500 for this request only.
fn answer(shared: &Shared, request: &Request) -> Response {
    if let Err(why) = shared.auth.check(&request.target, &request.header("Host")) {
        return text(403, &format!("403 forbidden: {why}\n"));
    }
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        route(shared, &request.target)
    }))
    .unwrap_or_else(|_| {
        error(
            500,
            "advcalc view failed on this request (a bug: please report it)",
        )
    })
}

fn route(shared: &Shared, url: &str) -> Response {
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

fn api(shared: &Shared, parts: &[&str]) -> Response {
    let snapshot = match &*shared.current.read().expect("not poisoned") {
        Current::Ready(s) => Arc::clone(s),
        Current::Reading => return error(503, "the input is still being read"),
        Current::Failed(m) => return error(503, &format!("the input could not be read: {m}")),
    };
    let index = &snapshot.index;
    match parts {
        ["overview"] => {
            let mut v = snapshot.overview().clone();
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
fn position(text: &str, len: usize, what: &str) -> std::result::Result<usize, Response> {
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

fn bytes(status: u16, body: Vec<u8>, content_type: &str) -> Response {
    Response::new(status, content_type, body)
        .with("Cache-Control", "no-store")
        .with("X-Content-Type-Options", "nosniff")
        .with("Referrer-Policy", "no-referrer")
}

fn asset(body: &str, content_type: &str) -> Response {
    bytes(200, body.as_bytes().to_vec(), content_type).with(
        "Content-Security-Policy",
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'",
    )
}

fn json_reply(status: u16, v: &Value) -> Response {
    bytes(status, v.to_string().into_bytes(), "application/json")
}

fn error(status: u16, message: &str) -> Response {
    json_reply(status, &json!({ "error": message }))
}

fn text(status: u16, message: &str) -> Response {
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
