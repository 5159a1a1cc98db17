//! "Did you mean ...?": the known name nearest to a mistyped one (config keys, estimator
//! names).

/// The name in `known` nearest to `name`: at most two edits, fewer than half the letters;
/// on a tie, the longest common start.
pub fn nearest<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    known
        .into_iter()
        .map(|k| (edit_distance(name, k), k))
        .filter(|&(d, k)| d <= 2 && d * 2 < k.chars().count().max(name.chars().count()))
        .min_by_key(|&(d, k)| {
            let common = name
                .chars()
                .zip(k.chars())
                .take_while(|(x, y)| x == y)
                .count();
            (d, std::cmp::Reverse(common))
        })
        .map(|(_, k)| k)
}

/// Edits between two names: insertions, deletions, substitutions and swaps of two adjacent
/// characters (the optimal-string-alignment distance), since `gpro` for `grpo` is one slip.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    // rows i-2, i-1 and i of the table
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut row = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (prev[j - 1] + cost).min(prev[j] + 1).min(row[j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(before[j - 2] + 1);
            }
        }
        before = std::mem::replace(&mut prev, row);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_get_the_nearest_name() {
        let known = ["lam", "gamma", "kl_penalty"];
        assert_eq!(nearest("lamda", known), Some("lam"));
        assert_eq!(nearest("kl_penality", known), Some("kl_penalty"));
        assert_eq!(nearest("xyz", known), None);
        assert_eq!(edit_distance("gamma", "gama"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        // a swap of adjacent letters is one edit
        assert_eq!(edit_distance("gpro", "grpo"), 1);
        let estimators = ["grpo", "rloo", "gae", "grpo_passk"];
        assert_eq!(nearest("gpro", estimators), Some("grpo"));
        assert_eq!(nearest("rlo", estimators), Some("rloo"));
        assert_eq!(nearest("grpo_pass", estimators), Some("grpo_passk"));
        assert_eq!(nearest("reinforce", estimators), None);
    }
}
