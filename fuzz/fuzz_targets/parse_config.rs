//! Any text as a `--config` file and as `--set` overrides: Ok or a usage error, never a panic.
//! The text goes through the YAML 1.1 reader, the interpolation resolver, the Hydra checks and
//! the typed keys; `advcalc config`'s YAML and `Config::to_yaml` must load back to the same
//! configuration.
#![no_main]

use advcalc::config::Resolved;
use advcalc::{Config, ConfigSources};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = advcalc::config::yaml11::parse(&text);
    if let Ok((config, resolved)) = Resolved::load(&ConfigSources {
        text: Some(("fuzz.yaml", &text)),
        ..Default::default()
    }) {
        // A config that loads writes YAML that loads back to itself.
        round_trips(&config);
        // `advcalc config` prints what loads to the same configuration.
        let shown = resolved.to_yaml(true);
        let mut again = Config::load(&ConfigSources {
            text: Some(("shown.yaml", &shown)),
            ..Default::default()
        })
        .unwrap_or_else(|e| panic!("advcalc config's YAML does not load: {e}\n{shown}"));
        // it names verl's default estimator explicitly; everything else must be the same
        again.estimator_configured = config.estimator_configured;
        assert_eq!(again.to_yaml(), config.to_yaml(), "{shown}");
    }
    let sets: Vec<String> = text.lines().map(String::from).collect();
    if let Ok(config) = Config::load(&ConfigSources {
        sets: &sets,
        ..Default::default()
    }) {
        round_trips(&config);
    }
});

/// `to_yaml` then `load` gives the configuration back (compared as YAML, so NaN equals NaN).
fn round_trips(config: &Config) {
    let yaml = config.to_yaml();
    let again = Config::load(&ConfigSources {
        text: Some(("to_yaml.yaml", &yaml)),
        ..Default::default()
    })
    .expect("to_yaml loads");
    assert_eq!(again.to_yaml(), yaml);
}
