//! `advcalc view`: a local web app over any IN (as `tensorboard --logdir`), docs/view.md.
//!
//! The overview (per-step curves and the inspect findings) → a step's groups → a group's rows
//! with each variant's advantages → a row's tokens coloured by a chosen signal (advantage,
//! the loss replay's gradient weight, IS weight, rejection, KL, entropy), with the dump's
//! text and token ids (decoded with `--tokenizer`).
//!
//! `index` runs pass 1 and one output pass when the view starts (and, with `--follow`, when
//! a step lands: `follow`), keeping per-row scalars only; `row` runs pass 2 on the one row
//! group a row's request names; `server` answers over HTTP after `auth` has checked the
//! request; the page (`assets/`) is compiled in.

mod auth;
mod follow;
mod http;
mod index;
mod jsonl_lines;
mod row;
mod server;

use std::net::IpAddr;
use std::path::PathBuf;

use crate::analysis::collect::CompareOptions;

pub use server::Server;

/// How to view, beyond the variants.
#[derive(Debug, Clone)]
pub struct ViewOptions {
    /// What the passes read and how, as for `compare`.
    pub read: CompareOptions,
    /// The loss replay's configuration (the first variant's with the trainer YAML's actor
    /// section: gradient weights per token), or why it cannot be read.
    pub loss: std::result::Result<advcalc_config::Config, String>,
    /// The address to listen on (127.0.0.1 unless asked).
    pub host: IpAddr,
    /// The port (0: any free one).
    pub port: u16,
    /// Watch IN (a directory) and show steps as they land.
    pub follow: bool,
    /// A Hugging Face `tokenizer.json` to decode token ids with.
    pub tokenizer: Option<PathBuf>,
    /// The run's log, checked against IN (`advcalc check`'s, shown on the overview).
    pub log: Option<PathBuf>,
    /// `data.max_response_length`, for the log check's `response_length/clip_ratio`.
    pub max_response_length: Option<usize>,
}
