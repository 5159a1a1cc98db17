//! The plan of pass 2 cut by step: group and batch statistics never cross a step, so a pass-2
//! task needs only the shard of the steps its record batches hold. A shard serialises to
//! bytes (Arrow IPC, `engine::exchange`) to cross process and machine boundaries.

use crate::estimators::AnyEstimatorPlan;
use crate::job::Plan;
use crate::pipeline::Constants;

/// What pass 2 needs for some steps: their constants (KL coefficient, IS normalisation) and
/// the estimator's plan for their rows.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanShard {
    /// The steps covered (`None`: the input has no step column).
    pub steps: Vec<Option<i64>>,
    /// Fingerprint of the configuration the plan was made for.
    pub config: u64,
    /// The steps' constants (KL coefficient, IS normalisation).
    pub constants: Constants,
    /// The estimator's plan, restricted to the steps' rows.
    pub plan: AnyEstimatorPlan,
}

impl Plan {
    /// The steps of the input, ascending (`[None]` without a step column).
    pub fn steps(&self) -> Vec<Option<i64>> {
        self.training_batches
            .iter()
            .map(|(step, _)| *step)
            .collect()
    }

    /// The shard of one step.
    pub fn for_step(&self, step: Option<i64>) -> PlanShard {
        self.for_steps(&[step])
    }

    /// The shard of several steps (the steps a record batch holds).
    pub fn for_steps(&self, steps: &[Option<i64>]) -> PlanShard {
        let mut rows: Vec<usize> = self
            .training_batches
            .iter()
            .filter(|(step, _)| steps.contains(step))
            .flat_map(|(_, rows)| rows.iter().copied())
            .collect();
        rows.sort_unstable();
        let mut constants = Constants::uniform(self.constants.default);
        for &step in steps {
            constants.per_step.insert(step, self.constants.get(step));
        }
        PlanShard {
            steps: steps.to_vec(),
            config: self.config,
            constants,
            plan: self.plan.restrict(&rows, steps),
        }
    }

    /// A fingerprint of everything pass 2 computes rows `rows` (dataset order) with: their
    /// steps' constants, the estimator's plan for them and the configuration. Equal
    /// fingerprints over the same input rows give the same outputs, wherever the rows sit in
    /// the input (a dataset's `--resume` keeps a file's output only then). The hash and the
    /// bytes it is taken over are specified (`engine::fingerprint`): the same on every build.
    pub fn fingerprint(&self, rows: std::ops::Range<usize>) -> u64 {
        let mut steps: Vec<Option<i64>> = match &self.stats.step {
            Some(s) => s[rows.clone()].iter().map(|&s| Some(s)).collect(),
            None => vec![None],
        };
        steps.sort_unstable();
        steps.dedup();
        let rows: Vec<usize> = rows.collect();
        let plan = self.plan.restrict(&rows, &steps);
        let constants: Vec<_> = steps.iter().map(|&s| self.constants.get(s)).collect();
        super::fingerprint::plan(self.config, &steps, &constants, &plan)
    }

    /// The whole plan as one shard (every step; a copy of the plan).
    pub fn whole(&self) -> PlanShard {
        PlanShard {
            steps: self.steps(),
            config: self.config,
            constants: self.constants.clone(),
            plan: self.plan.clone(),
        }
    }
}

impl PlanShard {
    /// The steps the shard covers (`None`: the input has no step column).
    pub fn steps(&self) -> &[Option<i64>] {
        &self.steps
    }
}
