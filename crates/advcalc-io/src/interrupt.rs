//! Stopping on request (Ctrl-C, SIGTERM from `timeout`, Ray, Kubernetes or Slurm): a front
//! end records the request with [`request_stop`] (the CLI from its signal handler), and the
//! work checks for it between and within row groups, so a run stops within a fraction of a
//! second and unwinds through the ordinary error path. That path drops the temporary files
//! (OUT's beside OUT, the stream spool in `$TMPDIR`), so nothing is left behind and OUT is
//! untouched.

use std::sync::atomic::{AtomicI32, Ordering};

use crate::error::{Error, Result};

/// The signal that asked to stop (0: none).
static REQUESTED: AtomicI32 = AtomicI32::new(0);

/// Ask the work in progress to stop, because of `signal` (e.g. 2 for SIGINT). Only stores an
/// integer, so it is safe to call from a signal handler.
pub fn request_stop(signal: i32) {
    REQUESTED.store(signal, Ordering::Relaxed);
}

/// The signal that asked to stop, if any.
pub fn requested() -> Option<i32> {
    match REQUESTED.load(Ordering::Relaxed) {
        0 => None,
        signal => Some(signal),
    }
}

/// `Err` once a stop was requested: the points where the work may stop call this.
pub fn check() -> Result<()> {
    match requested() {
        None => Ok(()),
        Some(signal) => Err(Error::interrupted(signal)),
    }
}

/// Forget a stop request once the interrupted work has unwound, so that the next call of a
/// long-lived front end (the Python package in a notebook) runs. The CLI never clears it.
pub fn clear() {
    REQUESTED.store(0, Ordering::Relaxed);
}
