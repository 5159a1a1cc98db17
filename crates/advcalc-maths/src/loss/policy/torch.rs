//! The torch operations the policy losses share, with the gradient autograd gives through
//! them: `torch.maximum`/`torch.minimum` (ties split), `torch.clamp` and the clamped ratio
//! r = exp(clamp(Δ, ±20)) verl starts most losses from.

/// torch.maximum's gradient: the larger side's, half each on a tie.
pub fn max_grad(a: f32, da: f32, b: f32, db: f32) -> (f32, f32) {
    if a > b {
        (a, da)
    } else if b > a {
        (b, db)
    } else {
        (a, 0.5 * da + 0.5 * db)
    }
}

/// torch.minimum's gradient: the smaller side's, half each on a tie.
pub fn min_grad(a: f32, da: f32, b: f32, db: f32) -> (f32, f32) {
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
pub fn torch_clamp(x: f32, lo: f32, hi: f32) -> f32 {
    let y = if x < lo { lo } else { x };
    if y > hi { hi } else { y }
}

/// clamp's value and gradient: the gradient passes inside the closed range.
pub fn clamp_grad(x: f32, lo: f32, hi: f32) -> (f32, f32) {
    let y = torch_clamp(x, lo, hi);
    (y, if (lo..=hi).contains(&x) { 1.0 } else { 0.0 })
}

/// Δ clamped to ±20, r = exp(that) and dr/d log π.
pub fn ratio(logp: f32, old: f32) -> (f32, f32, f32) {
    let d = logp - old;
    let (dc, g) = clamp_grad(d, -20.0, 20.0);
    let r = dc.exp();
    (dc, r, r * g)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
