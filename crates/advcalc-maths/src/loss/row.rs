//! One row's loss outputs and metric sums, given where it sits (its mini-batch's N_M, its
//! micro-batch's size) — what pass 2 computes for every row of a row group.
//!
//! - `pg_losses`: ℓ as verl's loss function builds it (times the IS weights), on the tokens
//!   of the mask the loss receives (0 elsewhere). In bypass mode tokens rejected inside the
//!   loss keep their ℓ but get no gradient (verl #4852); geo_mean writes the row's loss on
//!   each of its mask-1 tokens.
//! - `grad_weights`: d(mini-batch objective)/d log π = c·m·dℓ/d log π (c from
//!   [`aggregate`], m the mask after bypass rejection) plus
//!   `kl_loss_coef`·c·m·d kl/d log π; the entropy term is not replayed.
//! - `kl_losses`: the KL loss's per-token value (0 at mask 0).

use crate::loss::LossSpec;
use crate::loss::aggregate::{self, AggMode, BatchInfo};
use crate::loss::policy::{self, BypassLoss, LossMode, Term};
use crate::shaping::correction;

/// kl_cov's inputs of one row: its mask-1 tokens as (A, log π, token index).
pub type KlCovTokens = Vec<(f32, f32, usize)>;

/// One row's inputs, aligned token by token.
pub struct RowInputs<'a> {
    pub advantages: &'a [f32],
    /// log π of the policy being updated (`log_probs`, or `old_log_probs` on-policy).
    pub log_probs: &'a [f32],
    /// log π_old as verl's loss sees it (`rollout_log_probs` in bypass mode).
    pub old: &'a [f32],
    /// `ref_log_prob`, for the KL loss.
    pub reference: Option<&'a [f32]>,
    /// The loss mask: `response_mask` after decoupled rejection.
    pub mask: &'a [f32],
    /// Decoupled mode's IS weights.
    pub is_weights: Option<&'a [f32]>,
}

/// Where the row sits: its mini-batch's aggregation constants and its micro-batch's size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowPlace {
    pub info: BatchInfo,
    /// Rows of its micro-batch (geo_mean's mean).
    pub micro_rows: f64,
    /// kl_cov's choice in its micro-batch.
    pub kl_cov: Option<KlCovCut>,
    /// The row's global index (kl_cov's ties are broken in row-major order).
    pub row: usize,
}

/// kl_cov's top-k in one micro-batch: cov = (A − mean A)·(log π − mean log π) over its
/// mask-1 tokens, and the k largest chosen: those above `threshold`, and those equal to it
/// up to `last_tie` (row, token) in row-major order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KlCovCut {
    pub mean_advantage: f32,
    pub mean_log_prob: f32,
    pub threshold: f32,
    pub last_tie: (usize, usize),
}

impl KlCovCut {
    fn chooses(&self, row: usize, t: usize, a: f32, logp: f32) -> bool {
        let cov = (a - self.mean_advantage) * (logp - self.mean_log_prob);
        cov > self.threshold || (cov == self.threshold && (row, t) <= self.last_tie)
    }
}

/// The k tokens kl_cov chooses among a micro-batch's mask-1 tokens, given as (A, log π,
/// (row, token)) in row-major order; `None` when it has none.
pub fn kl_cov_cut(tokens: &[(f32, f32, (usize, usize))], ratio: f64) -> Option<KlCovCut> {
    if tokens.is_empty() || ratio == 0.0 {
        return None;
    }
    // torch's f32 mean sums with more precision than a running f32 sum: f64, rounded once
    let n = tokens.len() as f64;
    let mean_advantage = (tokens.iter().map(|t| t.0 as f64).sum::<f64>() / n) as f32;
    let mean_log_prob = (tokens.iter().map(|t| t.1 as f64).sum::<f64>() / n) as f32;
    let mut cov: Vec<(f32, (usize, usize))> = tokens
        .iter()
        .map(|&(a, l, at)| ((a - mean_advantage) * (l - mean_log_prob), at))
        .collect();
    let k = ((tokens.len() as f64 * ratio) as usize)
        .max(1)
        .min(tokens.len());
    // largest first, ties in row-major order
    cov.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
    let (threshold, last_tie) = cov[k - 1];
    Some(KlCovCut {
        mean_advantage,
        mean_log_prob,
        threshold,
        last_tie,
    })
}

/// One row's sums for the metrics: its part of the mini-batch's `pg_loss` and `kl_loss`,
/// and the counts of the loss function's masked means over the micro-batch.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RowSums {
    pub pg_loss: f64,
    pub kl_loss: f64,
    /// Σ m over the mask the loss function's means use (after bypass rejection).
    pub tokens: f64,
    pub clipped: f64,
    pub lower: f64,
    pub ppo_kl: f64,
    /// Tokens of the row rejected inside bypass mode's loss (of `tokens_before`).
    pub rejected: f64,
    /// Σ m before bypass rejection.
    pub tokens_before: f64,
    /// Σ_t |dL/d log π| without the aggregation weight c (the length-bias view multiplies
    /// it by each mode's c).
    pub grad_base: f64,
    /// Σ_t A·m: the row's side of its group (the view's split when IN has no scores).
    pub advantage: f64,
}

impl RowSums {
    /// Add `o`'s sums to these (a micro-batch's, a step's).
    pub fn add(&mut self, o: &RowSums) {
        self.pg_loss += o.pg_loss;
        self.kl_loss += o.kl_loss;
        self.tokens += o.tokens;
        self.clipped += o.clipped;
        self.lower += o.lower;
        self.ppo_kl += o.ppo_kl;
        self.rejected += o.rejected;
        self.tokens_before += o.tokens_before;
        self.grad_base += o.grad_base;
        self.advantage += o.advantage;
    }
}

/// One row's outputs into `pg_losses`, `grad_weights` and (with the KL loss) `kl_losses`;
/// returns its metric sums. `scratch` holds the row's terms (reused across rows).
#[allow(clippy::too_many_arguments)]
pub fn row(
    spec: &LossSpec,
    place: &RowPlace,
    scratch: &mut Vec<Term>,
    input: &RowInputs<'_>,
    pg_losses: &mut [f32],
    grad_weights: &mut [f32],
    kl_losses: Option<&mut [f32]>,
) -> RowSums {
    let n = input.mask.len();
    let mask = input.mask;
    let mut sums = RowSums {
        tokens_before: mask.iter().map(|&m| m as f64).sum(),
        ..Default::default()
    };
    // bypass mode: the correction verl computes inside the loss from the current log-probs
    let mut effective = None;
    let mut weights: Option<std::borrow::Cow<'_, [f32]>> = input.is_weights.map(Into::into);
    if let Some(b) = &spec.bypass {
        let mut log_ratio = vec![0.0f32; n];
        correction::log_ratio_row(input.log_probs, input.old, &mut log_ratio);
        if !b.correction.rs.is_empty() {
            let mut kept = vec![0.0f32; n];
            correction::reject_row(&b.correction.rs, &log_ratio, mask, &mut kept);
            effective = Some(kept);
        }
        weights = match (&b.correction.is, b.loss) {
            (Some(spec), BypassLoss::Reinforce) => {
                let mut w = vec![0.0f32; n];
                correction::raw_weights_row(spec, &log_ratio, mask, &mut w);
                correction::truncate_weights(spec, &mut w);
                Some(w.into())
            }
            // ppo_clip in bypass mode takes no IS weights
            _ => None,
        };
    }
    let m_eff: &[f32] = effective.as_deref().unwrap_or(mask);
    sums.tokens = m_eff.iter().map(|&m| m as f64).sum();
    sums.rejected = sums.tokens_before - sums.tokens;

    let p = &spec.params;
    let terms = &mut *scratch;
    terms.clear();
    terms.resize(n, Term::default());
    let mut row_loss = None;
    match spec.mode {
        LossMode::Gspo => policy::gspo::row(
            p,
            input.advantages,
            input.log_probs,
            input.old,
            m_eff,
            terms,
        ),
        LossMode::GeoMean => {
            row_loss = Some(policy::geo_mean::row(
                p,
                input.advantages,
                input.log_probs,
                input.old,
                m_eff,
                weights.as_deref(),
                terms,
            ))
        }
        mode => {
            for (t, term) in terms.iter_mut().enumerate() {
                let (a, l, o) = (input.advantages[t], input.log_probs[t], input.old[t]);
                *term = mode.token(p, a, l, o);
                if let Some(cut) = &place.kl_cov
                    && m_eff[t] > 0.0
                    && cut.chooses(place.row, t, a, l)
                {
                    let (extra, grad) = policy::kl_cov::extra(p, l, o);
                    term.loss += extra;
                    term.grad += grad;
                }
            }
        }
    }
    // sapo aggregates as seq-mean-token-mean whatever loss_agg_mode says
    let agg = if spec.mode == LossMode::Sapo {
        AggMode::SeqMeanTokenMean
    } else {
        spec.agg
    };
    let c_pg = aggregate::weight(agg, &place.info, sums.tokens);
    for t in 0..n {
        let term = &terms[t];
        sums.clipped += (m_eff[t] * f32::from(u8::from(term.clipped))) as f64;
        sums.lower += (m_eff[t] * f32::from(u8::from(term.lower))) as f64;
        sums.ppo_kl += (m_eff[t] * term.kl) as f64;
        let (loss, grad) = match (&row_loss, &weights) {
            // geo_mean: the row's loss (weights inside), its mean over the micro-batch's rows
            (Some(_), _) => (term.loss, term.grad / place.micro_rows as f32),
            (None, Some(w)) => (term.loss * w[t], c_pg * m_eff[t] * term.grad * w[t]),
            (None, None) => (term.loss, c_pg * m_eff[t] * term.grad),
        };
        pg_losses[t] = if mask[t] > 0.0 { loss } else { 0.0 };
        grad_weights[t] = grad;
        sums.advantage += (input.advantages[t] * mask[t]) as f64;
        sums.grad_base += match &weights {
            _ if row_loss.is_some() => 0.0,
            Some(w) => (m_eff[t] * term.grad * w[t]).abs() as f64,
            None => (m_eff[t] * term.grad).abs() as f64,
        };
        if row_loss.is_none() {
            sums.pg_loss += (c_pg * m_eff[t] * loss) as f64;
        }
    }
    if let Some(loss) = row_loss {
        sums.pg_loss = loss as f64 / place.micro_rows;
        // geo_mean's weights are not an aggregation's: the view uses its own gradient
        sums.grad_base =
            grad_weights.iter().map(|g| g.abs() as f64).sum::<f64>() * place.micro_rows;
    }
    if let (Some(kl), Some(reference)) = (&spec.kl, input.reference) {
        let c_kl = aggregate::weight(spec.agg, &place.info, sums.tokens_before);
        let coef = kl.coef as f32;
        let mut out = kl_losses;
        for t in 0..n {
            let (value, grad) = kl.value_and_grad(input.log_probs[t], reference[t]);
            grad_weights[t] += coef * c_kl * mask[t] * grad;
            sums.grad_base += (coef * mask[t] * grad).abs() as f64;
            sums.kl_loss += (c_kl * mask[t] * value) as f64;
            if let Some(out) = out.as_deref_mut() {
                out[t] = if mask[t] > 0.0 { value } else { 0.0 };
            }
        }
    }
    sums
}
