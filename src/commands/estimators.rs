//! The estimator catalogue behind `advcalc estimators`: for every name, where it comes from,
//! what it computes in one line, the columns it needs and the settings it reads.

use serde_json::{Value, json};

use crate::estimators::Estimator;

/// One catalogue entry.
#[derive(Debug, Clone, PartialEq)]
pub struct EstimatorInfo {
    pub name: &'static str,
    pub source: &'static str,
    pub summary: &'static str,
    /// Columns beyond `response_mask` and `rm_scores` (or `score`), which every run reads.
    pub columns: &'static [&'static str],
    /// `algorithm.*` keys (and their flags) the estimator reads.
    pub parameters: &'static [&'static str],
}

pub fn describe(e: Estimator) -> EstimatorInfo {
    use Estimator::*;
    let (source, summary, columns, parameters): (&str, &str, &[&str], &[&str]) = match e {
        Gae => (
            "verl 0.9.1",
            "generalised advantage estimation with a critic; advantages whitened over the batch (not re-masked)",
            &["values"],
            &["gamma", "lam", "whiten_advantages"],
        ),
        Grpo => (
            "verl 0.9.1",
            "group-relative outcome advantage (s − mean_g)/(std_g + 1e-6); multi-output sessions scored by their last output",
            &["uid"],
            &["norm_adv_by_std_in_grpo", "convention"],
        ),
        GrpoVectorized => (
            "verl 0.9.1",
            "tensorised GRPO: always divides by the std, numeric uids canonicalised",
            &["uid"],
            &[],
        ),
        GrpoPassk => (
            "verl 0.9.1",
            "pass@k: only each group's best row gets r1 − r2 (over std + 1e-6)",
            &["uid"],
            &["norm_adv_by_std_in_grpo"],
        ),
        ReinforcePlusPlus => (
            "verl 0.9.1",
            "discounted return-to-go over policy tokens, whitened over the batch",
            &[],
            &["gamma", "mask_mode"],
        ),
        ReinforcePlusPlusBaseline => (
            "verl 0.9.1",
            "score minus group mean, tiled and whitened over the batch",
            &["uid"],
            &[],
        ),
        Remax => (
            "verl 0.9.1",
            "reward-to-go minus the greedy response's reward (advantages not masked)",
            &["reward_baselines"],
            &[],
        ),
        Rloo => (
            "verl 0.9.1",
            "leave-one-out baseline; a singleton keeps its raw score",
            &["uid"],
            &["convention"],
        ),
        RlooVectorized => (
            "verl 0.9.1",
            "tensorised leave-one-out baseline; a singleton gets 0",
            &["uid"],
            &[],
        ),
        Opo => (
            "verl 0.9.1",
            "length-weighted group baseline (valid-token counts after rejection)",
            &["uid"],
            &[],
        ),
        Gpg => (
            "verl 0.9.1",
            "group mean baseline scaled by B / #nonzero scores",
            &["uid"],
            &[],
        ),
        OptimalTokenBaseline => (
            "verl 0.9.1",
            "per-token group baseline weighted by a score-norm proxy, by absolute position",
            &["uid", "old_log_probs", "sum_pi_squared"],
            &[],
        ),
        TirOptimalTokenBaseline => (
            "verl 0.9.1",
            "optimal token baseline aligned by the k-th generated token",
            &["uid", "old_log_probs", "sum_pi_squared"],
            &[],
        ),
        Gdpo => (
            "verl 0.9.1",
            "GRPO per reward component, weighted sum, whitened over the batch",
            &["uid", "<gdpo_reward_keys columns>"],
            &["gdpo_reward_keys", "gdpo_reward_weights"],
        ),
        Reinforce => (
            "agent-RL tutorial",
            "discounted return-to-go carried across tool spans, not whitened",
            &[],
            &["gamma"],
        ),
        TurnGae => (
            "agent-RL tutorial",
            "GAE over calls (runs of policy tokens): one value and one summed reward per call",
            &["values"],
            &["gamma", "lam"],
        ),
        Drgrpo => (
            "Dr. GRPO",
            "group mean baseline without the std (alias of grpo --no-norm-adv-by-std)",
            &["uid"],
            &["convention"],
        ),
        GrpoBatchStd => (
            "LitePPO; TRL scale_rewards=batch",
            "group mean baseline divided by the batch std of the scores",
            &["uid"],
            &["convention", "group_size"],
        ),
        Maxrl => (
            "prime-rl; SkyRL",
            "(s − mean_g)/mean_g, 0 for groups with mean ≤ 0 (prime-rl rule)",
            &["uid"],
            &["convention"],
        ),
        RlooLooStd => (
            "NeMo-RL",
            "leave-one-out baseline and leave-one-out std, divided only where the std > 0",
            &["uid"],
            &["nemo.use_leave_one_out_baseline", "nemo.normalize_rewards"],
        ),
        OpenrlhfReinforceBaseline => (
            "OpenRLHF",
            "score minus group mean on the last token, γ = 1 returns, whitened over the batch",
            &["uid"],
            &["group_size", "openrlhf.reward_clip", "openrlhf.no_std_norm"],
        ),
        OpenrlhfGroupNorm => (
            "OpenRLHF",
            "group mean/std normalised score on the last token, γ = 1 returns",
            &["uid"],
            &["group_size", "openrlhf.reward_clip"],
        ),
        OpenrlhfDrGrpo => (
            "OpenRLHF",
            "score minus group mean on the last token, γ = 1 returns",
            &["uid"],
            &["group_size", "openrlhf.reward_clip"],
        ),
        OpenrlhfRloo => (
            "OpenRLHF",
            "leave-one-out score on the last token, γ = 1 returns",
            &["uid"],
            &["group_size", "openrlhf.reward_clip"],
        ),
    };
    EstimatorInfo {
        name: e.name(),
        source,
        summary,
        columns,
        parameters,
    }
}

/// The catalogue as JSON: an array of objects, in `Estimator::ALL` order.
pub fn to_json() -> Value {
    Value::Array(
        Estimator::ALL
            .iter()
            .map(|&e| {
                let i = describe(e);
                let columns: Vec<&str> = ["response_mask", "rm_scores | score"]
                    .into_iter()
                    .chain(i.columns.iter().copied())
                    .collect();
                json!({
                    "name": i.name,
                    "source": i.source,
                    "summary": i.summary,
                    "columns": columns,
                    "parameters": i.parameters,
                })
            })
            .collect(),
    )
}

/// The catalogue as an aligned table for people.
pub fn to_table() -> String {
    let rows: Vec<EstimatorInfo> = Estimator::ALL.iter().map(|&e| describe(e)).collect();
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for r in &rows {
        out.push_str(&format!("{:width$}  {}\n", r.name, r.summary));
        let extra = if r.columns.is_empty() {
            "-".to_string()
        } else {
            r.columns.join(", ")
        };
        out.push_str(&format!(
            "{:width$}    source: {}; columns: {extra}",
            "", r.source
        ));
        if !r.parameters.is_empty() {
            out.push_str(&format!("; settings: {}", r.parameters.join(", ")));
        }
        out.push('\n');
    }
    out.push_str("\nEvery estimator also reads response_mask and rm_scores (or a scalar score).\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_estimator_is_described_once() {
        let json = to_json();
        let names: Vec<&str> = json
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(names.len(), Estimator::ALL.len());
        for e in Estimator::ALL {
            assert_eq!(
                names.iter().filter(|&&n| n == e.name()).count(),
                1,
                "{}",
                e.name()
            );
            assert!(!describe(e).summary.is_empty());
        }
    }
}
