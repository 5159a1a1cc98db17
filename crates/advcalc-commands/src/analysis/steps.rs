//! One configuration's advantage statistics per training batch: the whole `run` pipeline, as
//! `compare` runs it, for `inspect -e`. (`report` has the same statistics from its own output
//! pass's sums.)

use crate::analysis::collect::{CompareOptions, Variant, collect};
use crate::analysis::tokens::TokenStats;
use crate::engine::plan::training_batches;
use crate::error::Result;
use crate::io::dataset::Dataset;
use advcalc_config::Config;

/// One configuration's advantage statistics per training batch, and the data warnings
/// `run` would print.
pub struct StepAdvantages {
    /// Per training batch (its `step`, `None` without a step column): the token statistics.
    pub by_step: Vec<(Option<i64>, TokenStats)>,
    /// The data warnings `run` would print for this configuration.
    pub warnings: Vec<String>,
}

/// The advantage statistics of one configuration, per training batch (what `inspect -e` shows).
pub fn advantages_by_step(
    config: &Config,
    input: &Dataset,
    opts: &CompareOptions,
) -> Result<StepAdvantages> {
    let variant = Variant {
        label: config.algorithm.adv_estimator.name().to_string(),
        config: config.clone(),
    };
    let mut collected = collect(std::slice::from_ref(&variant), input, opts)?;
    let prepared = collected.prepared.pop().expect("one variant");
    let rows = collected.sums.rows.pop().expect("one variant");
    let by_step = training_batches(prepared.stats.step.as_deref(), rows.len())
        .into_iter()
        .map(|(step, batch)| (step, TokenStats::of(batch.iter().map(|&r| &rows[r]))))
        .collect();
    Ok(StepAdvantages {
        by_step,
        warnings: prepared.warnings,
    })
}
