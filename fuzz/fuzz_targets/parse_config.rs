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
        // A config that loads must also build a pipeline or fail cleanly.
        let _ = advcalc::engine::pipeline::Pipeline::new(&config.algorithm);
    }
    let sets: Vec<String> = text.lines().map(String::from).collect();
    if let Ok(config) = Config::load(&ConfigSources {
        sets: &sets,
        ..Default::default()
    }) {
        let _ = advcalc::engine::pipeline::Pipeline::new(&config.algorithm);
    }
});
