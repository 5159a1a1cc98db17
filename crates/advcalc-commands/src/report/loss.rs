//! The report's loss section: the loss stage (`advcalc loss`, the first variant's
//! configuration with the trainer YAML's actor section) run over the dump in two more passes,
//! reduced to each row's sums, then to the length-bias view and, per `loss_agg_mode`, the mean
//! gradient weight per token against response length.

use rayon::prelude::*;
use serde_json::Value;

use crate::engine::Engine;
use crate::engine::metrics::length_bias_json;
use crate::engine::passes::prepare_jobs;
use crate::engine::progress::Progress;
use crate::error::Result;
use crate::io::dataset::Dataset;
use crate::loss::AggMode;
use crate::loss::aggregate;
use crate::loss::length_bias::length_bias;
use crate::loss::row::RowSums;
use crate::shaping::scores::Layout;
use advcalc_config::Config;

/// At most this many points per line: rows binned by response length.
pub const BINS: usize = 12;

/// What the section shows.
pub struct LossFacts {
    /// The configured loss and aggregation (`vanilla, token-mean`).
    pub configured: String,
    pub agg: AggMode,
    /// The length-bias view as `advcalc loss --json` prints it.
    pub view: Value,
    /// Per mode: (mean response length of the bin, mean |grad weight| per token relative to
    /// the mode's mean over all tokens).
    pub curves: Vec<(AggMode, Vec<(f64, f64)>)>,
    /// The loss run's warnings (its findings among them).
    pub warnings: Vec<String>,
}

/// The loss stage on `input` under `config` (whose `loss` is set), with `correct` the
/// report's split of the rows.
pub fn gather(
    config: &Config,
    input: &Dataset,
    layout: Layout,
    allow_nonfinite: bool,
    correct: &[bool],
) -> Result<LossFacts> {
    let engine = Engine::new(config, input.schema(), &input.name)?
        .with_layout(layout)
        .allow_nonfinite(allow_nonfinite);
    let job = engine.job();
    let projection = job.columns.projection(false);
    let quiet = Progress::new(0, false);
    let plan = prepare_jobs(input, std::slice::from_ref(&job), &projection, &quiet)?
        .pop()
        .expect("one job");
    let units = input.units();
    let parts = (0..units.len())
        .into_par_iter()
        .map(|u| {
            let batch = input.read_unit(u, Some(&projection))?;
            let done = job
                .at(input.part(u))
                .row_group_outputs(&batch, units[u].start, &plan)?;
            let first = units[u].start;
            Ok(done
                .loss_sums
                .into_iter()
                .enumerate()
                .map(|(i, s)| (first + i, s))
                .collect::<Vec<_>>())
        })
        .collect::<Result<Vec<_>>>()?;
    let loss_plan = plan.loss.as_ref().expect("the loss stage runs");
    let spec = config.loss.as_ref().expect("the loss stage is configured");
    let mut rows = vec![RowSums::default(); plan.stats.rows()];
    for (r, s) in parts.into_iter().flatten() {
        rows[r] = s;
    }
    let valid = &plan.stats.valid;
    let mut warnings = plan.warnings.clone();
    warnings.extend(crate::loss::findings::findings(
        spec, loss_plan, &rows, valid,
    ));
    let view = length_bias(loss_plan, &rows, valid, correct, "score")
        .map(|v| length_bias_json(&v, spec.agg))
        .unwrap_or(Value::Null);

    // rows binned by response length, equal widths between the shortest and the longest
    let live: Vec<usize> = (0..rows.len()).filter(|&r| valid[r] > 0.0).collect();
    let (lo, hi) = live.iter().fold((f64::INFINITY, 0.0f64), |(a, b), &r| {
        (a.min(valid[r]), b.max(valid[r]))
    });
    let bins = if live.is_empty() {
        0
    } else {
        BINS.min((hi - lo) as usize + 1)
    };
    let bin = |l: f64| (((l - lo) / (hi - lo + 1.0)) * bins as f64) as usize;
    let curves = AggMode::ALL
        .into_iter()
        .map(|mode| {
            let mut weight = vec![0.0; bins];
            let mut tokens = vec![0.0; bins];
            let mut lengths = vec![0.0; bins];
            let mut count = vec![0.0; bins];
            for &r in &live {
                let b = bin(valid[r]).min(bins - 1);
                let info = loss_plan.minis[loss_plan.partition.mini[r] as usize];
                weight[b] += aggregate::weight(mode, &info, valid[r]) as f64 * rows[r].grad_base;
                tokens[b] += valid[r];
                lengths[b] += valid[r];
                count[b] += 1.0;
            }
            // relative to the mode's mean over every token: the modes' scales differ by
            // orders of magnitude (token-sum's c is 1, token-mean's 1/N_M)
            let mean = weight.iter().sum::<f64>() / tokens.iter().sum::<f64>();
            let points = (0..bins)
                .filter(|&b| count[b] > 0.0 && mean > 0.0)
                .map(|b| (lengths[b] / count[b], weight[b] / tokens[b] / mean))
                .collect();
            (mode, points)
        })
        .collect();
    Ok(LossFacts {
        configured: format!("{}, {}", spec.mode.name(), spec.agg.name()),
        agg: spec.agg,
        view,
        curves,
        warnings,
    })
}
