//! The engine, the fourth floor of the workspace (`docs/architecture.md`): one pipeline's two
//! passes over row groups (docs/architecture.md's data flow), the plan between them,
//! row-group parallelism and in-order output.

pub mod exchange;
pub mod fingerprint;
pub mod job;
pub mod kept;
pub mod metrics;
pub mod ordered;
pub mod passes;
pub mod pipeline;
pub mod plan;
pub mod progress;
pub mod row_stats;
pub mod shard;
pub mod token_outputs;

// The floors below under their own names (not re-exported).
use advcalc_config as config;
use advcalc_io as io;
use advcalc_io::interrupt;
use advcalc_maths::{data, error, estimators, loss, shaping};
#[cfg(test)]
#[path = "../../advcalc-maths/src/test_support.rs"]
mod test_support;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use crate::config::Config;
use crate::data::TokenRole;
use crate::error::{Error, Result};
use crate::estimators::{RowStats, Stamp};
use crate::io::schema::InputColumns;
use crate::job::{GroupOutputs, Job, Plan, StatsPass};
use crate::pipeline::{Constants, Pipeline};
use crate::shaping::scores::Layout;
use crate::shard::PlanShard;

/// The engine: a validated configuration bound to an input's schema. Its methods are the two
/// passes on Arrow record batches and the work between them; [`Engine::compute`] runs them
/// all on an input held in memory.
///
/// A pass-1 call takes the constants of the steps ([`Engine::start`], or after the pre-pass
/// that an adaptive KL controller needs, [`Engine::constants`]); the statistics of every
/// record batch, appended in input order, make the [`Plan`] plan, which shards by step
/// ([`Plan::for_step`]) for pass 2. [`RowStats`] and [`PlanShard`] serialise to bytes
/// ([`Exchange`](crate::exchange::Exchange)), so either pass can run in another process or on another
/// machine. Results do not depend on how the input is cut into record batches (except the
/// OTB estimators' column sums, added per record batch: last-bit f64 differences at most).
/// Statistics and shards carry a stamp of the configuration and pass that made them, and a
/// piece that does not fit (another configuration, the pre-pass skipped) is refused.
///
/// ```
/// use std::sync::Arc;
/// use arrow::array::{Array, Float32Array, Int8Array, ListArray, StringArray};
/// use arrow::buffer::OffsetBuffer;
/// use arrow::datatypes::{DataType, Field, Schema};
/// use arrow::record_batch::RecordBatch;
/// use advcalc_config::{Config, ConfigSources};
/// use advcalc_engine::Engine;
///
/// // two responses to one prompt, two tokens each; the scores sit on the last token
/// let offsets = || OffsetBuffer::from_lengths([2, 2]);
/// let mask = ListArray::new(Arc::new(Field::new("item", DataType::Int8, true)), offsets(),
///     Arc::new(Int8Array::from(vec![1, 1, 1, 1])), None);
/// let scores = ListArray::new(Arc::new(Field::new("item", DataType::Float32, true)), offsets(),
///     Arc::new(Float32Array::from(vec![0.0, 1.0, 0.0, 0.0])), None);
/// let schema = Arc::new(Schema::new(vec![
///     Field::new("uid", DataType::Utf8, false),
///     Field::new("response_mask", mask.data_type().clone(), false),
///     Field::new("rm_scores", scores.data_type().clone(), false),
/// ]));
/// let batch = RecordBatch::try_new(schema.clone(), vec![
///     Arc::new(StringArray::from(vec!["q", "q"])), Arc::new(mask), Arc::new(scores),
/// ]).unwrap();
///
/// let config = Config::load(&ConfigSources { estimator: Some("grpo"), ..Default::default() })?;
/// let engine = Engine::new(&config, schema, "example")?;
/// let out = engine.compute(&[batch])?;
/// // GRPO: (1 − 0.5) / (std 0.7071 + 1e-6) on every token of the first response
/// let advantages = out.batches[0].column_by_name("advantages").unwrap();
/// let first = advantages.as_any().downcast_ref::<ListArray>().unwrap().value(0);
/// let first = first.as_any().downcast_ref::<Float32Array>().unwrap();
/// assert!((first.value(0) - 0.707106).abs() < 1e-5);
/// # Ok::<(), advcalc_maths::Error>(())
/// ```
pub struct Engine {
    pipeline: Pipeline,
    columns: InputColumns,
    name: String,
    layout: Layout,
    allow_nonfinite: bool,
    /// Collect the `--metrics` parts in the passes (the CLI's `run`).
    metrics: bool,
    /// Fingerprint of the resolved configuration (FNV-1a 64 of its YAML: `engine::fingerprint`),
    /// stamped on what the passes produce so that statistics or shards of another
    /// configuration are refused.
    config: u64,
    /// The schema of pass 2's record batches, worked out once.
    output_schema: SchemaRef,
    /// On one file of a larger input ([`Engine::at`]): the input row of the file's first
    /// row, and the step its path names.
    row_base: usize,
    path_step: Option<i64>,
}

/// What [`Engine::compute`] returns.
pub struct Computed {
    /// The input's record batches with the computed columns, in input order.
    pub batches: Vec<RecordBatch>,
    /// Things the user should know about the data.
    pub warnings: Vec<String>,
    /// With [`Engine::with_metrics`]: what `run --metrics` writes (one object per step).
    pub metrics: Option<serde_json::Value>,
    /// Things the user should know about the run (the loss stage's assumptions).
    pub notes: Vec<String>,
}

impl Engine {
    /// Bind a configuration to an input schema; checks that the input has every column the
    /// configuration needs, with the right types. `name` names the input in messages.
    pub fn new(config: &Config, schema: SchemaRef, name: &str) -> Result<Self> {
        // the loss stage replays IN's advantages when it has them
        let given = schema.index_of(TokenRole::Advantages.column()).is_ok();
        let pipeline =
            Pipeline::with_loss(&config.algorithm, config.loss.as_ref().map(|l| (l, given)));
        if let Some(l) = &config.loss
            && l.mode == crate::loss::LossMode::KlCov
            && !given
        {
            return Err(Error::usage(format!(
                "{name}: kl_cov chooses its tokens from the advantages of a whole micro-batch, which advcalc loss reads from IN: this input has no advantages column"
            ))
            .with_hint("compute them first (advcalc run -c CONFIG IN ADV.parquet), then advcalc loss -c CONFIG ADV.parquet OUT"));
        }
        let columns = InputColumns::resolve(schema, &pipeline.needs(), name)?;
        let has_rollout = columns.token(TokenRole::RolloutLogProbs).is_some();
        let output_schema = columns.output_schema(
            &pipeline.computed_columns(has_rollout),
            pipeline.kl.is_none(),
        );
        let engine = Engine {
            pipeline,
            columns,
            name: name.to_string(),
            layout: Layout::default(),
            allow_nonfinite: false,
            metrics: false,
            config: fingerprint::config(config),
            output_schema,
            row_base: 0,
            path_step: None,
        };
        engine.job().check_columns()?;
        Ok(engine)
    }

    /// Where a scalar `score` sits: the row's last position (ragged) or last mask-1 token.
    pub fn with_layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// Let NaN and ±inf through instead of refusing them (`--allow-nonfinite`).
    pub fn allow_nonfinite(mut self, allow: bool) -> Self {
        self.allow_nonfinite = allow;
        self
    }

    /// Collect the metrics in the passes: [`Computed::metrics`] (the CLI's `--metrics`).
    pub fn with_metrics(mut self, metrics: bool) -> Self {
        self.metrics = metrics;
        self
    }

    /// The engine on one file of a larger input whose other files other processes read
    /// (`advcalc.ray`): the file's first row is input row `first_row` (messages count rows
    /// within the file), and `path_step` is the step its path names (`step=N`), which fills
    /// a missing `step` column or must agree with the one there. The schema is the file's own.
    pub fn at(mut self, first_row: usize, path_step: Option<i64>) -> Self {
        self.row_base = first_row;
        self.path_step = path_step;
        self
    }

    /// The engine's work per row group, for the commands' parallel passes over a file.
    pub fn job(&self) -> Job<'_> {
        Job {
            pipeline: &self.pipeline,
            columns: &self.columns,
            file: &self.name,
            row_base: self.row_base,
            path_step: self.path_step,
            layout: self.layout,
            allow_nonfinite: self.allow_nonfinite,
            metrics: self.metrics,
        }
    }

    /// The constants pass 1 starts from: the configured KL coefficient, no IS normalisation.
    pub fn start(&self) -> Constants {
        self.job().initial_constants()
    }

    /// Whether pass 1 needs the constants of a pre-pass first ([`Engine::constants`]): an
    /// adaptive KL controller, or OTB with batch-normalised IS weights.
    pub fn needs_prepass(&self) -> bool {
        self.job().needs_prepass()
    }

    /// Whether a step's numbers depend on the steps before it. Only verl's adaptive KL
    /// controller (KL in the reward) carries state across steps: its β moves after every step
    /// (docs/reference/verl-0.9.1.md §2.3). Group and batch statistics, whitening and the IS normalisation never
    /// cross a step, so otherwise each step's rows computed alone give the numbers they get in
    /// the whole input (what lets `advcalc.ray` run each step in one task).
    pub fn carries_across_steps(&self) -> bool {
        self.pipeline.kl.is_some()
            && matches!(
                self.pipeline.controller,
                crate::shaping::kl::KlController::Adaptive { .. }
            )
    }

    /// The per-step constants from a pre-pass: the statistics of every record batch from
    /// [`Engine::prepass_stats`], appended in input order.
    pub fn constants(&self, prepass: &RowStats) -> Result<Constants> {
        self.check_stamp(prepass, false, None)?;
        Ok(self.job().prepass_constants(prepass))
    }

    fn stamp(&self, constants: &Constants, with_estimator: bool) -> Stamp {
        Stamp {
            config: self.config,
            constants: fingerprint::constants(constants),
            with_estimator,
            mixed: false,
        }
    }

    /// Refuse statistics this engine's pass did not make as `plan` / `constants` expect.
    fn check_stamp(
        &self,
        stats: &RowStats,
        with_estimator: bool,
        constants: Option<&Constants>,
    ) -> Result<()> {
        let wrong = |what: &str, hint: &str| {
            Err(
                Error::usage(format!("{}: these statistics {what}", self.name))
                    .with_hint(hint.to_string()),
            )
        };
        let Some(stamp) = stats.stamp else {
            return if stats.rows() == 0 {
                Ok(())
            } else {
                wrong(
                    "come from no pass of an Engine",
                    "make them with Engine::row_stats",
                )
            };
        };
        if stamp.mixed {
            return wrong(
                "were appended from different passes or configurations",
                "append the statistics of one pass of one engine",
            );
        }
        if stamp.config != self.config {
            return wrong(
                "were made with another configuration",
                "use the engine (configuration) that made them",
            );
        }
        if stamp.with_estimator != with_estimator {
            return if with_estimator {
                wrong(
                    "come from the pre-pass",
                    "run pass 1 (Engine::row_stats) with Engine::constants of the pre-pass",
                )
            } else {
                wrong(
                    "come from pass 1, not the pre-pass",
                    "make the pre-pass statistics with Engine::prepass_stats",
                )
            };
        }
        if let Some(c) = constants
            && stamp.constants != fingerprint::constants(c)
        {
            return if self.needs_prepass() {
                wrong(
                    "were made without the pre-pass's constants this configuration needs",
                    "run Engine::prepass_stats over the input, then pass 1 with Engine::constants",
                )
            } else {
                wrong(
                    "were made with other step constants than Engine::start",
                    "run pass 1 with Engine::start()",
                )
            };
        }
        Ok(())
    }

    /// A batch's rows must be numberable from `first_row` (a runner's offset, not ours).
    fn check_rows(&self, batch: &RecordBatch, first_row: usize) -> Result<()> {
        if first_row < self.row_base {
            return Err(Error::usage(format!(
                "{}: first_row {first_row} is before the file's first row, input row {}",
                self.name, self.row_base
            ))
            .with_hint("number rows in the whole input's order (Engine::at)"));
        }
        match first_row.checked_add(batch.num_rows()) {
            Some(_) => Ok(()),
            None => Err(Error::usage(format!(
                "{}: first_row {first_row} leaves no room for the batch's {} rows",
                self.name,
                batch.num_rows()
            ))),
        }
    }

    /// Pass 1 on one record batch whose first row is row `first_row` of the input.
    pub fn row_stats(
        &self,
        batch: &RecordBatch,
        first_row: usize,
        constants: &Constants,
    ) -> Result<RowStats> {
        self.check_rows(batch, first_row)?;
        let pass = StatsPass::Statistics;
        let mut stats = self
            .job()
            .row_group_stats(batch, first_row, constants, pass)?
            .0;
        stats.stamp = Some(self.stamp(constants, true));
        Ok(stats)
    }

    /// Pre-pass on one record batch (only the common per-row scalars).
    pub fn prepass_stats(&self, batch: &RecordBatch, first_row: usize) -> Result<RowStats> {
        self.check_rows(batch, first_row)?;
        let pass = StatsPass::Constants;
        let start = self.start();
        let mut stats = self
            .job()
            .row_group_stats(batch, first_row, &start, pass)?
            .0;
        stats.stamp = Some(self.stamp(&start, false));
        Ok(stats)
    }

    /// Between the passes: the merged statistics of the whole input (appended in input order)
    /// to the plan of pass 2 — KL controller over the steps, IS normalisation, and per
    /// training batch the estimator's group and batch statistics.
    pub fn plan(&self, stats: RowStats) -> Result<Plan> {
        // pass 1 must have run with the constants its configuration calls for: the pre-pass's
        // (which the pass-1 statistics reproduce) or the start
        let expected = if self.needs_prepass() {
            self.job().prepass_constants(&stats)
        } else {
            self.start()
        };
        self.check_stamp(&stats, true, Some(&expected))?;
        let mut prepared = self.job().prepare(stats, Default::default())?;
        prepared.config = self.config;
        Ok(prepared)
    }

    /// Pass 2 on one record batch: the batch with the computed columns (the output schema:
    /// input columns, `loss_mask`, `token_level_rewards`, `advantages`, `returns` and, with
    /// IS weights, `rollout_is_weights`). `shard` must cover the steps of the batch's rows
    /// ([`Plan::for_steps`], or [`Plan::whole`]); a row it does not hold is an error.
    pub fn token_outputs(
        &self,
        batch: &RecordBatch,
        first_row: usize,
        shard: &PlanShard,
    ) -> Result<RecordBatch> {
        self.check_rows(batch, first_row)?;
        self.check_shard(shard)?;
        let done = self.job().row_group_outputs_with(
            batch,
            first_row,
            &shard.constants,
            &shard.plan,
            Some(&shard.steps),
            None,
        )?;
        Ok(self.finish(batch, done)?.0)
    }

    /// Refuse a plan shard made with another configuration than this engine's.
    pub fn check_shard(&self, shard: &PlanShard) -> Result<()> {
        if shard.config != self.config {
            return Err(Error::usage(format!(
                "{}: the plan shard was made with another configuration",
                self.name
            ))
            .with_hint("use the shard of this engine's plan"));
        }
        Ok(())
    }

    /// Pass 2's record batch from a row group's outputs, and its metric parts when collected.
    fn finish(
        &self,
        batch: &RecordBatch,
        done: GroupOutputs,
    ) -> Result<(RecordBatch, metrics::Parts)> {
        self.job()
            .assembled(batch, done, &self.output_schema, self.metrics)
    }

    /// The input columns the statistics passes read ([`Engine::row_stats`],
    /// [`Engine::prepass_stats`]): their record batches may hold only these; pass 2 needs
    /// every column, since it copies the others to its output.
    pub fn pass1_columns(&self) -> Vec<String> {
        let schema = &self.columns.schema;
        self.columns
            .projection(false)
            .into_iter()
            .map(|i| schema.field(i).name().clone())
            .collect()
    }

    /// The schema of [`Engine::token_outputs`]'s batches.
    pub fn output_schema(&self) -> SchemaRef {
        self.output_schema.clone()
    }

    /// The whole pipeline on an input held in memory, in one call (files go through
    /// `advcalc::run`, which streams row groups from disk). Record batches are processed in
    /// parallel on the current rayon pool; results do not depend on the thread count. With
    /// [`Engine::with_metrics`], [`Computed::metrics`] holds what `run --metrics` writes.
    pub fn compute(&self, batches: &[RecordBatch]) -> Result<Computed> {
        use rayon::prelude::*;
        let starts: Vec<usize> = batches
            .iter()
            .scan(0, |row, b| {
                let first = *row;
                *row += b.num_rows();
                Some(first)
            })
            .collect();
        let job = self.job();
        let constants = if self.needs_prepass() {
            let pre = batches
                .par_iter()
                .zip(&starts)
                .map(|(batch, &first)| self.prepass_stats(batch, first))
                .collect::<Result<Vec<_>>>()?;
            let mut merged = RowStats::default();
            pre.into_iter().for_each(|s| merged.append(s));
            self.constants(&merged)?
        } else {
            self.start()
        };
        let pass1 = batches
            .par_iter()
            .zip(&starts)
            .map(|(batch, &first)| {
                job.row_group_stats(batch, first, &constants, StatsPass::Statistics)
            })
            .collect::<Result<Vec<_>>>()?;
        let (mut stats, mut parts) = (RowStats::default(), metrics::Parts::new());
        for (s, p) in pass1 {
            stats.append(s);
            metrics::merge(&mut parts, p);
        }
        let prepared = job.prepare(stats, parts)?;
        let pass2 = batches
            .par_iter()
            .zip(&starts)
            .map(|(batch, &first)| {
                self.finish(batch, job.row_group_outputs(batch, first, &prepared)?)
            })
            .collect::<Result<Vec<_>>>()?;
        let mut parts = prepared.metric_parts.clone();
        let mut out = Vec::with_capacity(pass2.len());
        for (batch, p) in pass2 {
            out.push(batch);
            metrics::merge(&mut parts, p);
        }
        let mut warnings = prepared.warnings.clone();
        if let Some((findings, _, _)) = job.loss_report(&prepared, &parts) {
            warnings.extend(findings);
        }
        Ok(Computed {
            batches: out,
            metrics: self
                .metrics
                .then(|| metrics::to_json(&job, &prepared, &parts)),
            warnings,
            notes: prepared.notes,
        })
    }
}
