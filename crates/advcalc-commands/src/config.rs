//! `advcalc config`: the configuration advcalc will run with, resolved (interpolations,
//! YAML 1.1 scalars, `--set` and flags applied over verl's defaults) and validated, as YAML
//! or JSON, with each value's origin on request. The way to see what a verl config means to
//! advcalc (and to verl, which resolves it the same way) before running it.

use crate::error::Result;
use advcalc_config::{Config, ConfigSources, Resolved};

/// How to print the resolved configuration.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConfigOptions {
    /// JSON instead of YAML.
    pub json: bool,
    /// Each value's origin: a `# ...` comment in YAML, an `origins` object in JSON.
    pub origins: bool,
}

/// Resolve and validate the sources; the text to print and the notes for stderr.
///
/// ```
/// use advcalc_commands::config::{ConfigOptions, show};
/// use advcalc_config::ConfigSources;
///
/// let sets = ["algorithm.use_kl_in_reward=yes".to_string()];
/// let (text, _notes) = show(
///     &ConfigSources { estimator: Some("grpo"), sets: &sets, ..Default::default() },
///     ConfigOptions { json: false, origins: true },
/// )?;
/// assert!(text.contains("  use_kl_in_reward: true  # --set\n"), "{text}");
/// assert!(text.contains("  adv_estimator: grpo  # -e\n"), "{text}");
/// # Ok::<(), advcalc_maths::Error>(())
/// ```
pub fn show(sources: &ConfigSources<'_>, options: ConfigOptions) -> Result<(String, Vec<String>)> {
    let (config, resolved): (Config, Resolved) = Resolved::load(sources)?;
    let text = if options.json {
        serde_json::to_string_pretty(&resolved.to_json(options.origins)).unwrap_or_default() + "\n"
    } else {
        resolved.to_yaml(options.origins)
    };
    Ok((text, config.notes))
}
