//! The passes every command shares, for one or several jobs over the same input: the worker
//! pool, the statistics pass (each row group read once for all jobs, merged in row-group
//! order) and the constants pre-pass before it.

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::estimators::RowStats;
use crate::io::dataset::Dataset;
use crate::job::{Job, Plan, StatsPass};
use crate::kept::Kept;
use crate::metrics;
use crate::pipeline::Constants;
use crate::progress::Progress;

/// Worker threads per core at most: more only adds threads that wait (each row group in
/// flight is decoded memory, so thousands of threads hold thousands of row groups, and a
/// stop request waits for every one of them).
pub const THREADS_PER_CORE: usize = 4;

/// The worker count for `threads` (`None`: one per core): at most 4 (`THREADS_PER_CORE`) per
/// core, with a note when a larger request was capped.
pub fn thread_count(threads: Option<usize>) -> (usize, Option<String>) {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let max = THREADS_PER_CORE * cores;
    match threads {
        None | Some(0) => (cores, None),
        Some(n) if n > max => (
            max,
            Some(format!(
                "{n} threads asked for, {max} used ({THREADS_PER_CORE} per core on {cores} \
                 core{}): more would only wait",
                if cores == 1 { "" } else { "s" }
            )),
        ),
        Some(n) => (n, None),
    }
}

/// The worker pool (`threads`: `None` means one per core), capped as [`thread_count`] says.
pub fn thread_pool(threads: Option<usize>) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(thread_count(threads).0)
        .build()
        .map_err(|e| Error::usage("cannot start the worker threads").with_source(e))
}

/// A statistics pass of several jobs over the row groups (of every file of a dataset, in
/// dataset order), each row group read once with `projection` (which covers every job's
/// columns), merged in that order. Row groups are read through `kept`, which keeps them for
/// the next pass within its budget.
pub fn statistics_pass(
    input: &Dataset,
    jobs: &[(&Job<'_>, &Constants)],
    projection: &[usize],
    pass: StatsPass,
    progress: &Progress,
    kept: &Kept,
) -> Result<Vec<(RowStats, metrics::Parts)>> {
    let units = input.units();
    let parts = (0..units.len())
        .into_par_iter()
        .map(|u| {
            let batch = kept.read(input, u, projection)?;
            progress.inc(batch.num_rows());
            let part = input.part(u);
            jobs.iter()
                .map(|(job, constants)| {
                    job.at(part)
                        .row_group_stats(&batch, units[u].start, constants, pass)
                })
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<Vec<_>>>()?;
    let mut merged: Vec<(RowStats, metrics::Parts)> = jobs
        .iter()
        .map(|_| (RowStats::default(), metrics::Parts::new()))
        .collect();
    for row_group in parts {
        for ((stats, metric_parts), (s, m)) in merged.iter_mut().zip(row_group) {
            stats.append(s);
            metrics::merge(metric_parts, m);
        }
    }
    Ok(merged)
}

/// Pass 1 (after the constants pre-pass when a job needs one) for several jobs at once,
/// keeping nothing for pass 2.
pub fn prepare_jobs(
    input: &Dataset,
    jobs: &[Job<'_>],
    projection: &[usize],
    progress: &Progress,
) -> Result<Vec<Plan>> {
    prepare_jobs_keeping(input, jobs, projection, progress, &Kept::none())
}

/// [`prepare_jobs`], keeping the decoded row groups in `kept` (within its budget) for pass 2
/// to take (`Kept::take`).
pub fn prepare_jobs_keeping(
    input: &Dataset,
    jobs: &[Job<'_>],
    projection: &[usize],
    progress: &Progress,
    kept: &Kept,
) -> Result<Vec<Plan>> {
    let mut constants: Vec<Constants> = jobs.iter().map(Job::initial_constants).collect();
    let pre: Vec<usize> = (0..jobs.len())
        .filter(|&j| jobs[j].needs_prepass())
        .collect();
    if !pre.is_empty() {
        progress.pass("constants");
        let pre_jobs: Vec<_> = pre.iter().map(|&j| (&jobs[j], &constants[j])).collect();
        let found = statistics_pass(
            input,
            &pre_jobs,
            projection,
            StatsPass::Constants,
            progress,
            kept,
        )?;
        for (&j, (stats, _)) in pre.iter().zip(found) {
            constants[j] = jobs[j].prepass_constants(&stats);
        }
    }
    progress.pass("statistics");
    let with_constants: Vec<_> = jobs.iter().zip(&constants).collect();
    let merged = statistics_pass(
        input,
        &with_constants,
        projection,
        StatsPass::Statistics,
        progress,
        kept,
    )?;
    jobs.iter()
        .zip(merged)
        .map(|(job, (stats, parts))| job.prepare(stats, parts))
        .collect()
}
