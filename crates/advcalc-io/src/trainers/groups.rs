//! Group inference: the size of the consecutive groups a trainer cut, from the dump alone.

/// The group size of consecutive groups inferred from runs of equal prompts: the greatest
/// common divisor of the lengths of every maximal run of equal `keys` within a step (two
/// adjacent groups of one prompt form a run of twice the size, so the gcd is the size when
/// any group stands alone).
pub fn inferred_group_size<K: PartialEq>(runs: impl Iterator<Item = (i64, K)>) -> usize {
    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 { a } else { gcd(b, a % b) }
    }
    let mut g = 0usize;
    let mut current: Option<(i64, K)> = None;
    let mut len = 0usize;
    for item in runs {
        if current.as_ref() == Some(&item) {
            len += 1;
        } else {
            if len > 0 {
                g = gcd(g, len);
            }
            current = Some(item);
            len = 1;
        }
    }
    if len > 0 {
        g = gcd(g, len);
    }
    g.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_size_is_the_gcd_of_prompt_runs() {
        let runs = |v: &[(i64, &str)]| inferred_group_size(v.iter().copied());
        // a prompt drawn twice in a row makes a run of 8; the lone group says 4
        let a = [(1, "a"); 4];
        let b = [(1, "b"); 8];
        let rows: Vec<(i64, &str)> = a.iter().chain(&b).chain(&a).copied().collect();
        assert_eq!(runs(&rows), 4);
        // the same prompt across a step boundary is two runs
        let rows = [(1, "a"), (1, "a"), (2, "a"), (2, "a")];
        assert_eq!(runs(&rows), 2);
        assert_eq!(runs(&[]), 1);
    }
}
