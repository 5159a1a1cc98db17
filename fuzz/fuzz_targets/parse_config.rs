//! Any text as a `--config` file and as `--set` overrides: Ok or a usage error, never a panic.
#![no_main]

use advcalc::{Config, ConfigSources};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("c.yaml");
    std::fs::write(&path, text.as_bytes()).expect("write config");
    if let Ok(config) = Config::load(&ConfigSources {
        file: Some(&path),
        ..Default::default()
    }) {
        // A config that loads writes YAML that loads back to itself.
        round_trips(&config, &path);
    }
    let sets: Vec<String> = text.lines().map(String::from).collect();
    if let Ok(config) = Config::load(&ConfigSources {
        sets: &sets,
        ..Default::default()
    }) {
        round_trips(&config, &path);
    }
});

/// `to_yaml` then `load` gives the configuration back (compared as YAML, so NaN equals NaN).
fn round_trips(config: &Config, path: &std::path::Path) {
    let yaml = config.to_yaml();
    std::fs::write(path, &yaml).expect("write config");
    let again = Config::load(&ConfigSources {
        file: Some(path),
        ..Default::default()
    })
    .expect("to_yaml loads");
    assert_eq!(again.to_yaml(), yaml);
}
