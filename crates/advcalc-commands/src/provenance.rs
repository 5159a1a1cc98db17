//! OUT's `advcalc.*` key-value metadata: what `run` and a dataset run write (and `--resume`
//! compares), and what `inspect` shows of a dump `run` made.

use advcalc_config::Config;

/// The prefix of the key-value metadata `advcalc run` writes into its output (provenance).
pub const PROVENANCE_PREFIX: &str = "advcalc.";

/// The `advcalc.*` provenance of an output made from the input `name` (`bytes` long when it
/// is a file, `rows` rows).
pub fn provenance_of(
    config: &Config,
    name: &str,
    bytes: Option<u64>,
    rows: usize,
) -> Vec<(String, String)> {
    let key = |k: &str| format!("{PROVENANCE_PREFIX}{k}");
    let algo = &config.algorithm;
    let mut kv = vec![
        (key("version"), env!("CARGO_PKG_VERSION").to_string()),
        (key("estimator"), algo.adv_estimator.name().to_string()),
        (key("convention"), algo.ext.convention.name().to_string()),
        (key("input"), name.to_string()),
    ];
    if let Some(bytes) = bytes {
        kv.push((key("input_bytes"), bytes.to_string()));
    }
    kv.push((key("input_rows"), rows.to_string()));
    kv.push((key("config"), config.to_yaml()));
    kv
}
