//! Every policy loss verl 0.9.1 registers (`trainer/ppo/core_algos.py`, reference §1), per
//! token: its value ℓ (before aggregation, as verl's `pg_losses` tensor holds it), dℓ/d log π
//! (what autograd gives through verl's clamps and stop-gradients) and the flags its metrics
//! count. With Δ = log π − log π_old, r = exp(clamp(Δ, ±20)), ε_l/ε_h the clip ratios, c
//! `clip_ratio_c`, sg a stop-gradient:
//!
//! | mode | ℓ | dℓ/d log π |
//! | --- | --- | --- |
//! | `vanilla` (:1285) | max(−A·r, −A·clip(r, 1−ε_l, 1+ε_h)); where A < 0, min(that, −A·c) | −A·r on the branch taken (0 when clipped; ties split as torch does) |
//! | `dppo_tv`, `dppo_kl` (:1379, :1460) | −A·sg(min(r, c))·log π·valid | −A·min(r, c)·valid |
//! | `gspo` (:1545) | PPO clip on s = exp(min(sg(s̄_i) + log π − sg log π, 10)), s̄_i the row's mean Δ | −A·s on the branch taken |
//! | `sapo` (:1622) | −A·σ(τ(r − 1))·4/τ, τ = τ_pos if A > 0 else τ_neg | −A·4·σ'·r |
//! | `gpg` (:1707) | −A·log π | −A |
//! | `kl_cov` (:1848) | −A·e^Δ, plus `ppo_kl_coef`·\|Δ\| on the top-k covariance tokens | −A·e^Δ (+ coef·sign Δ) |
//! | `geo_mean` (:1928) | per row −Ā_i·exp(mean_t of the sign-clipped Δ) | through the row mean |
//! | `dro` (:2014) | −(A·log π − ½β·Δ²) | −A + β·Δ |
//! | `cispo` (:2047) | −sg(clip(r, 1−ε_l, 1+ε_h))·A·log π | −clip(r)·A |
//! | `bypass_mode` (:2413) | `ppo_clip`: vanilla against the rollout; `reinforce`: −A·log π·w | |
//!
//! `clip_cov` is not here: verl picks its tokens with `torch.randperm`, which no replay
//! reproduces; the configuration refuses it.

/// `policy_loss.loss_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossMode {
    Vanilla,
    DppoTv,
    DppoKl,
    Gspo,
    Sapo,
    Gpg,
    KlCov,
    GeoMean,
    Dro,
    Cispo,
    /// verl's `bypass_mode` loss, with `rollout_correction.loss_type`.
    Bypass(BypassLoss),
}

/// `algorithm.rollout_correction.loss_type` in bypass mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BypassLoss {
    PpoClip,
    Reinforce,
}

impl LossMode {
    /// The `loss_mode` names advcalc replays, in verl's registry order (`clip_cov` aside).
    pub const NAMES: [&'static str; 11] = [
        "vanilla",
        "dppo_tv",
        "dppo_kl",
        "gspo",
        "sapo",
        "gpg",
        "kl_cov",
        "geo_mean",
        "dro",
        "cispo",
        "bypass_mode",
    ];

    /// verl's name (`bypass_mode` for both bypass losses).
    pub fn name(self) -> &'static str {
        match self {
            LossMode::Vanilla => "vanilla",
            LossMode::DppoTv => "dppo_tv",
            LossMode::DppoKl => "dppo_kl",
            LossMode::Gspo => "gspo",
            LossMode::Sapo => "sapo",
            LossMode::Gpg => "gpg",
            LossMode::KlCov => "kl_cov",
            LossMode::GeoMean => "geo_mean",
            LossMode::Dro => "dro",
            LossMode::Cispo => "cispo",
            LossMode::Bypass(_) => "bypass_mode",
        }
    }

    /// Which of verl's metrics the loss function returns: (`pg_clipfrac`,
    /// `pg_clipfrac_lower`, `ppo_kl`).
    pub fn metrics(self) -> (bool, bool, bool) {
        match self {
            LossMode::Gpg => (false, false, false),
            LossMode::KlCov | LossMode::Dro | LossMode::Bypass(BypassLoss::Reinforce) => {
                (false, false, true)
            }
            _ => (true, true, true),
        }
    }
}

/// The clip ranges and each loss's own parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PolicyParams {
    /// `clip_ratio_low` (falling back to `clip_ratio`).
    pub clip_low: f64,
    /// `clip_ratio_high` (falling back to `clip_ratio`).
    pub clip_high: f64,
    /// `clip_ratio_c`: the dual-clip bound (> 1), and dppo's ratio cap.
    pub clip_c: f64,
    /// sapo's `tau_pos`, `tau_neg`.
    pub tau_pos: f64,
    pub tau_neg: f64,
    /// `policy_loss.kl_cov_ratio`, `policy_loss.ppo_kl_coef` (kl_cov).
    pub kl_cov_ratio: f64,
    pub ppo_kl_coef: f64,
    /// `policy_loss.dro_beta` (> 0 for dro).
    pub dro_beta: f64,
}

/// One token's loss: ℓ, dℓ/d log π, whether it counts as clipped (`pg_clipfrac`) and as
/// dual-clipped (`pg_clipfrac_lower`), and its term of `ppo_kl`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Term {
    pub loss: f32,
    pub grad: f32,
    pub clipped: bool,
    pub lower: bool,
    pub kl: f32,
}

/// torch.maximum's gradient: the larger side's, half each on a tie.
fn max_grad(a: f32, da: f32, b: f32, db: f32) -> (f32, f32) {
    if a > b {
        (a, da)
    } else if b > a {
        (b, db)
    } else {
        (a, 0.5 * da + 0.5 * db)
    }
}

/// torch.minimum's gradient: the smaller side's, half each on a tie.
fn min_grad(a: f32, da: f32, b: f32, db: f32) -> (f32, f32) {
    if a < b {
        (a, da)
    } else if b < a {
        (b, db)
    } else {
        (a, 0.5 * da + 0.5 * db)
    }
}

/// torch.clamp: min(max(x, lo), hi), NaN kept; `f32::clamp`'s value wherever that one is
/// defined. With lo > hi every x gives hi, as in torch, where `f32::clamp` would panic; the
/// configuration refuses such ranges (`config/actor.rs`), so this is the kernel's own
/// guarantee.
fn torch_clamp(x: f32, lo: f32, hi: f32) -> f32 {
    let y = if x < lo { lo } else { x };
    if y > hi { hi } else { y }
}

/// clamp's value and gradient: the gradient passes inside the closed range.
fn clamp_grad(x: f32, lo: f32, hi: f32) -> (f32, f32) {
    let y = torch_clamp(x, lo, hi);
    (y, if (lo..=hi).contains(&x) { 1.0 } else { 0.0 })
}

/// r = exp(clamp(Δ, ±20)) and dr/d log π.
fn ratio(logp: f32, old: f32) -> (f32, f32, f32) {
    let d = logp - old;
    let (dc, g) = clamp_grad(d, -20.0, 20.0);
    let r = dc.exp();
    (dc, r, r * g)
}

/// The PPO clip of vanilla (and bypass's `ppo_clip`): ℓ, dℓ, clipped, dual-clipped.
fn vanilla(p: &PolicyParams, a: f32, logp: f32, old: f32) -> Term {
    let (dc, r, dr) = ratio(logp, old);
    let lo = (1.0 - p.clip_low) as f32;
    let hi = (1.0 + p.clip_high) as f32;
    let l1 = -a * r;
    let (rc, gc) = clamp_grad(r, lo, hi);
    let l2 = -a * rc;
    let (lc, dlc) = max_grad(l1, -a * dr, l2, -a * dr * gc);
    let l3 = -a * p.clip_c as f32;
    let (loss, grad) = if a < 0.0 {
        min_grad(l3, 0.0, lc, dlc)
    } else {
        (lc, dlc)
    };
    Term {
        loss,
        grad,
        clipped: l2 > l1,
        lower: lc > l3 && a < 0.0,
        kl: -dc,
    }
}

/// One token under a token-wise loss (every mode but `gspo` and `geo_mean`, which work per
/// row: [`gspo_row`], [`geo_mean_row`]); `kl_cov`'s chosen tokens add [`kl_cov_extra`], and
/// `reinforce`'s IS weight is applied by the caller as for every loss.
pub fn token(mode: LossMode, p: &PolicyParams, a: f32, logp: f32, old: f32) -> Term {
    match mode {
        LossMode::Vanilla | LossMode::Bypass(BypassLoss::PpoClip) => vanilla(p, a, logp, old),
        LossMode::DppoTv | LossMode::DppoKl => {
            let (dc, r, _) = ratio(logp, old);
            let c = p.clip_c as f32;
            let truncated = r.min(c);
            let prob = logp.exp();
            let old_prob = old.exp();
            let valid = if mode == LossMode::DppoTv {
                if a > 0.0 {
                    prob - old_prob <= p.clip_high as f32
                } else {
                    prob - old_prob >= -(p.clip_low as f32)
                }
            } else {
                let binary_kl = old_prob * (old - logp)
                    + (1.0 - old_prob) * ((1.0 - old_prob + 1e-8) / (1.0 - prob + 1e-8)).ln();
                if a > 0.0 {
                    binary_kl <= p.clip_high as f32 || prob <= old_prob
                } else {
                    binary_kl <= p.clip_low as f32 || prob >= old_prob
                }
            };
            let v = if valid { 1.0 } else { 0.0 };
            Term {
                loss: -a * truncated * logp * v,
                grad: -a * truncated * v,
                clipped: !valid,
                lower: r > c && valid,
                kl: -dc,
            }
        }
        LossMode::Sapo => {
            let (dc, r, dr) = ratio(logp, old);
            let tau = if a > 0.0 { p.tau_pos } else { p.tau_neg } as f32;
            let sigma = 1.0 / (1.0 + (-(tau * (r - 1.0))).exp());
            let gate = sigma * (4.0 / tau);
            Term {
                loss: -gate * a,
                // d gate / dr = 4·σ(1 − σ)
                grad: -a * 4.0 * sigma * (1.0 - sigma) * dr,
                clipped: false,
                lower: false,
                kl: -dc,
            }
        }
        LossMode::Gpg => Term {
            loss: -logp * a,
            grad: -a,
            ..Term::default()
        },
        LossMode::KlCov => {
            let d = logp - old;
            let r = d.exp();
            Term {
                loss: -a * r,
                grad: -a * r,
                clipped: false,
                lower: false,
                kl: d.abs(),
            }
        }
        LossMode::Dro => {
            let d = logp - old;
            let beta = p.dro_beta as f32;
            Term {
                loss: -(logp * a - 0.5 * beta * (d * d)),
                grad: -a + beta * d,
                clipped: false,
                lower: false,
                kl: -d,
            }
        }
        LossMode::Cispo => {
            let (dc, r, _) = ratio(logp, old);
            let clipped = torch_clamp(r, (1.0 - p.clip_low) as f32, (1.0 + p.clip_high) as f32);
            Term {
                loss: -clipped * a * logp,
                grad: -clipped * a,
                clipped: r != clipped,
                lower: false,
                kl: -dc,
            }
        }
        LossMode::Bypass(BypassLoss::Reinforce) => Term {
            loss: -a * logp,
            grad: -a,
            clipped: false,
            lower: false,
            kl: old - logp,
        },
        LossMode::Gspo | LossMode::GeoMean => {
            unreachable!("{} works per row", mode.name())
        }
    }
}

/// What a token chosen by `kl_cov` adds: `ppo_kl_coef`·|Δ| and its gradient.
pub fn kl_cov_extra(p: &PolicyParams, logp: f32, old: f32) -> (f32, f32) {
    let d = logp - old;
    let coef = p.ppo_kl_coef as f32;
    let sign = if d > 0.0 {
        1.0
    } else if d < 0.0 {
        -1.0
    } else {
        0.0
    };
    (coef * d.abs(), coef * sign)
}

/// `gspo` over one row (`mask` its loss mask): every token's term.
pub fn gspo_row(
    p: &PolicyParams,
    a: &[f32],
    logp: &[f32],
    old: &[f32],
    mask: &[f32],
    out: &mut [Term],
) {
    let len: f32 = mask.iter().sum::<f32>().max(1.0);
    let sum: f32 = logp
        .iter()
        .zip(old)
        .zip(mask)
        .map(|((&l, &o), &m)| (l - o) * m)
        .sum();
    let mean = sum / len;
    let lo = (1.0 - p.clip_low) as f32;
    let hi = (1.0 + p.clip_high) as f32;
    for t in 0..out.len() {
        // log s = log π − sg(log π) + sg(s̄): the value s̄ (x − x is exactly 0), gradient 1
        let (log_s, g) = clamp_grad(mean, f32::NEG_INFINITY, 10.0);
        let s = log_s.exp();
        let ds = s * g;
        let l1 = -a[t] * s;
        let (sc, gc) = clamp_grad(s, lo, hi);
        let l2 = -a[t] * sc;
        let (loss, grad) = max_grad(l1, -a[t] * ds, l2, -a[t] * ds * gc);
        out[t] = Term {
            loss,
            grad,
            clipped: l2 > l1,
            lower: false,
            kl: -(logp[t] - old[t]),
        };
    }
}

/// `geo_mean` over one row: the row's loss −Ā·exp(mean_t of the sign-clipped Δ) (before
/// the mean over the micro-batch's rows), and each token's d(row loss)/d log π, clip flags
/// and `ppo_kl` term in `out` (their `loss` is the row's). `weights`: the IS weights, which
/// enter as their geometric mean over the row.
pub fn geo_mean_row(
    p: &PolicyParams,
    a: &[f32],
    logp: &[f32],
    old: &[f32],
    mask: &[f32],
    weights: Option<&[f32]>,
    out: &mut [Term],
) -> f32 {
    let count: f32 = mask.iter().sum();
    let denom = count + 1e-8;
    let lo = -(p.clip_low as f32);
    let hi = p.clip_high as f32;
    let mut sum = 0.0f32;
    let mut adv = 0.0f32;
    for t in 0..out.len() {
        let d = logp[t] - old[t];
        let sgn = a[t].signum() * if a[t] == 0.0 { 0.0 } else { 1.0 };
        let (dc, gc) = clamp_grad(d, lo, hi);
        // sgn·min(sgn·Δ, sgn·Δc): its gradient by log π is sgn·(the chosen side's)
        let (m, dm) = min_grad(sgn * d, sgn, sgn * dc, sgn * gc);
        let value = sgn * m;
        out[t].grad = sgn * dm; // d(value)/d log π, scaled below
        out[t].clipped = d != dc && a[t] > 0.0;
        out[t].lower = d != dc && a[t] < 0.0;
        out[t].kl = -d;
        sum += value * mask[t];
        adv += a[t] * mask[t];
    }
    let ratio = (sum / denom).exp();
    let adv = adv / denom;
    let mut loss = -adv * ratio;
    if let Some(w) = weights {
        let log_w: f32 = w
            .iter()
            .zip(mask)
            .map(|(&x, &m)| (x + 1e-10).ln() * m)
            .sum();
        loss *= (log_w / denom).exp();
    }
    let scale = if ratio == 0.0 { 0.0 } else { loss / ratio };
    for (t, term) in out.iter_mut().enumerate() {
        // d(−Ā·ratio·w̄)/d log π_t = −Ā·w̄·ratio·g_t·m_t/(L + 1e-8)
        term.grad = scale * ratio * term.grad * mask[t] / denom;
        term.loss = loss;
    }
    loss
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::assert_close;

    const P: PolicyParams = PolicyParams {
        clip_low: 0.2,
        clip_high: 0.28,
        clip_c: 3.0,
        tau_pos: 1.0,
        tau_neg: 1.05,
        kl_cov_ratio: 0.0002,
        ppo_kl_coef: 0.1,
        dro_beta: 0.1,
    };

    // At ratio 1 every loss but sapo has vanilla's gradient −A (reference §1).
    #[test]
    fn at_ratio_one_the_gradient_is_minus_a() {
        for mode in [
            LossMode::Vanilla,
            LossMode::DppoTv,
            LossMode::DppoKl,
            LossMode::Gpg,
            LossMode::KlCov,
            LossMode::Dro,
            LossMode::Cispo,
        ] {
            for a in [0.7f32, -1.3] {
                let t = token(mode, &P, a, -0.5, -0.5);
                assert_close(mode.name(), &[t.grad], &[-a], 1e-6, 0.0);
            }
        }
    }

    // Vanilla by hand: A = 1, Δ = ln 1.5 → r = 1.5 > 1.28: ℓ = max(−1.5, −1.28) = −1.28,
    // clipped, gradient 0. A = −1, Δ = ln 4 → r = 4: ℓ1 = 4, ℓ2 = 1.28... max 4, then the dual
    // clip min(3, 4) = 3: gradient 0, lower.
    #[test]
    fn vanilla_clips_and_dual_clips() {
        let t = token(LossMode::Vanilla, &P, 1.0, 1.5f32.ln(), 0.0);
        assert_close("loss", &[t.loss], &[-1.28], 1e-6, 0.0);
        assert_eq!((t.grad, t.clipped, t.lower), (0.0, true, false));
        let t = token(LossMode::Vanilla, &P, -1.0, 4.0f32.ln(), 0.0);
        assert_close("loss", &[t.loss], &[3.0], 1e-6, 0.0);
        assert_eq!((t.grad, t.clipped, t.lower), (0.0, false, true));
        // inside the clip range: ℓ = −A·r, gradient −A·r
        let t = token(LossMode::Vanilla, &P, 2.0, 1.1f32.ln(), 0.0);
        assert_close("loss", &[t.loss, t.grad], &[-2.2, -2.2], 1e-6, 0.0);
    }

    // torch.clamp's rules: min(max(x, lo), hi); an inverted range gives hi for every x
    // (torch documents "If min is greater than max, torch.clamp(..., min, max) sets all
    // elements in input to the value of max"), NaN stays NaN; no panic.
    #[test]
    fn clamp_follows_torch_also_on_an_inverted_range() {
        assert_eq!(torch_clamp(1.5, 0.8, 1.2), 1.2);
        assert_eq!(torch_clamp(0.5, 0.8, 1.2), 0.8);
        assert_eq!(torch_clamp(1.0, 0.8, -0.5), -0.5);
        assert_eq!(torch_clamp(-3.0, 0.8, -0.5), -0.5);
        assert!(torch_clamp(f32::NAN, 0.8, 1.2).is_nan());
        assert_eq!(clamp_grad(1.0, 0.8, -0.5), (-0.5, 0.0));
        let inverted = PolicyParams {
            clip_high: -1.5,
            ..P
        };
        let t = token(LossMode::Cispo, &inverted, 1.0, 0.0, 0.0);
        assert_eq!(t.loss, 0.0); // −clip(r)·A·log π with log π = 0
        assert_eq!(t.grad, 0.5); // −(1 − 1.5)·A
    }

    // sapo by hand at r = 1, A = 1: σ(0) = ½, ℓ = −½·4 = −2, gradient −4·¼·1 = −1.
    #[test]
    fn sapo_by_hand() {
        let t = token(LossMode::Sapo, &P, 1.0, -0.3, -0.3);
        assert_close("sapo", &[t.loss, t.grad], &[-2.0, -1.0], 1e-6, 0.0);
    }

    // geo_mean by hand: one row, A = [1, 1], Δ = [0.1, 0.5] → clipped Δ [0.1, 0.28]:
    // ratio = exp(0.19), loss = −exp(0.19) = −1.2092496; gradient only on the unclipped
    // token: −exp(0.19)/2.
    #[test]
    fn geo_mean_by_hand() {
        let mut out = [Term::default(); 2];
        let loss = geo_mean_row(
            &P,
            &[1.0, 1.0],
            &[0.1, 0.5],
            &[0.0, 0.0],
            &[1.0, 1.0],
            None,
            &mut out,
        );
        assert_close("loss", &[loss], &[-(0.19f32.exp())], 1e-6, 0.0);
        let grads = [out[0].grad, out[1].grad];
        assert_close("grad", &grads, &[-(0.19f32.exp()) / 2.0, 0.0], 1e-6, 0.0);
        assert!(out[1].clipped && !out[0].clipped);
    }
}
