//! `advcalc compare`: several estimators (or configs) on one dump, side by side — "what
//! would my update have looked like under X".
//!
//! Every variant is a full `run` pipeline (KL shaping, rollout correction, estimator), so its
//! advantages are exactly those `advcalc run` writes. The dump is read as often as by one
//! `run` (a statistics pass and an output pass, plus the constants pre-pass when a variant
//! needs it), whatever the number of variants: each row group is read once per pass with
//! the union of the variants' columns, and every variant works on it in turn.
//!
//! Statistics are over valid tokens (response mask after rejection = 1). Token sums are
//! kept per row and added in file order, and pair counts are integers, so the numbers do not
//! depend on the thread count or the row-group layout.
//!
//! This file is the command only: the passes (`analysis::collect`), the summaries and their
//! rendering (`analysis::comparison`) are the shared analysis layer, which `report` runs too.

pub use crate::analysis::buckets::BucketSummary;
pub use crate::analysis::collect::{CompareOptions, Variant};
pub use crate::analysis::comparison::{Comparison, PairSummary, VariantSummary};
pub use crate::analysis::tokens::TokenStats;

use crate::analysis::collect::collect;
use crate::analysis::comparison::summary::summarise;
use crate::engine::passes::thread_pool;
use crate::error::Result;
use crate::io::input;
use crate::io::input_source::InputSource;

/// Run every variant over `opts.input` and summarise their advantages side by side.
pub fn compare(variants: &[Variant], opts: &CompareOptions) -> Result<Comparison> {
    let dump = variants
        .first()
        .map(|v| crate::io::trainers::DumpOptions::of(&v.config))
        .unwrap_or_default();
    // within a pool of --threads: a trainer dump's reader parses on its threads
    let opened = thread_pool(opts.threads)?.install(|| {
        let source = InputSource::resolve(&opts.input, opts.input_format)?;
        input::open(&source, opts.allow_nonfinite, &dump)
    })?;
    let input = &opened.dataset;
    // a trainer's own NaN scores, under its convention, are not a fault
    let own = opened.own_nan_scores(variants.iter().map(|v| &v.config));
    let opts = &CompareOptions {
        allow_nonfinite: opts.allow_nonfinite || own,
        ..opts.clone()
    };
    // an error on a row of a trainer's dump names the user's file and line too
    let collected = collect(variants, input, opts).map_err(|e| opened.locate_error(e))?;
    let mut comparison = summarise(variants, collected, &input.name, opts.correct_above);
    if let (Some(trainer), Some(first)) = (
        opened.file.as_ref().and_then(|f| f.trainer.as_ref()),
        variants.first(),
    ) {
        comparison.logged = Some(crate::analysis::logged::check(
            &first.config,
            trainer.trainer,
            input,
            &opts.input,
            opts.layout,
        )?);
    }
    Ok(comparison)
}
