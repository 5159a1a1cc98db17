//! `reinforce_plus_plus`: discounted return-to-go, whitened over the batch (reference §5.11,
//! verl 0.9 `compute_reinforce_plus_plus_outcome_advantage`).
//!
//! **Computes**, right to left over a row (f32):
//! ```text
//! new   = r_t + γ·run
//! ret_t = new·m_t
//! run   = new·m_t + run·(1 − m_t)       masked spans are transparent: no discount, no reset
//! advantages = masked_whiten(ret, m)·m;  returns = ret
//! ```
//! **Parameters**: γ (`gamma`). **Edge cases**: rewards on masked positions are dropped
//! (§9.1); a batch with ≤ 1 valid token is an error. (verl before 0.9 reset at every masked
//! token instead.)

/// The masked discounted returns of one row.
pub fn reinforce_plus_plus_row(rewards: &[f32], mask: &[f32], gamma: f64, ret: &mut [f32]) {
    let g = gamma as f32;
    let mut run = 0.0f32;
    for t in (0..rewards.len()).rev() {
        let new = rewards[t] + g * run;
        let m = mask[t];
        ret[t] = new * m;
        run = new * m + run * (1.0 - m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Moments, Whitening};

    // Reference §5.11: γ = .5; row 0 r_4 = 1, m = [1,1,0,0,1,0] → ret [.25, .5, 0, 0, 1, 0];
    // row 1 has a reward of 2 on a masked position, m = [1,1,0,1,0,0] → all 0.
    #[test]
    fn worked_example() {
        let r = [
            [0.0f32, 0.0, 0.0, 0.0, 1.0, 0.0],
            [0.0, 0.0, 2.0, 0.0, 0.0, 0.0],
        ];
        let m = [
            [1.0f32, 1.0, 0.0, 0.0, 1.0, 0.0],
            [1.0, 1.0, 0.0, 1.0, 0.0, 0.0],
        ];
        let mut ret = [[0.0f32; 6]; 2];
        let mut moments = Moments::default();
        for i in 0..2 {
            reinforce_plus_plus_row(&r[i], &m[i], 0.5, &mut ret[i]);
            for t in 0..6 {
                if m[i][t] == 1.0 {
                    moments.push(ret[i][t] as f64);
                }
            }
        }
        assert_eq!(ret[0], [0.25, 0.5, 0.0, 0.0, 1.0, 0.0]);
        assert_eq!(ret[1], [0.0; 6]);
        let w = Whitening::from_moments(&moments).unwrap();
        let adv: Vec<f32> = (0..12)
            .map(|k| w.apply(ret[k / 6][k % 6]) * m[k / 6][k % 6])
            .collect();
        let e = [
            -0.104031257,
            0.520156443,
            0.0,
            0.0,
            1.76853192,
            0.0,
            -0.728218973,
            -0.728218973,
            0.0,
            -0.728218973,
            0.0,
            0.0,
        ];
        for (x, y) in adv.iter().zip(e) {
            assert!((x - y).abs() < 2e-6, "{adv:?}");
        }
    }
}
