//! Any bytes as an input file: advcalc must return Ok or an error, never panic.
#![no_main]

use advcalc::{Config, ConfigSources, RunOptions};
use libfuzzer_sys::fuzz_target;

static QUIET_DECODER_PANICS: std::sync::Once = std::sync::Once::new();

fuzz_target!(|data: &[u8]| {
    // advcalc catches panics inside the Parquet decoder (malformed input) and reports them as
    // errors, as its binary does; every other panic still reaches libFuzzer's hook.
    QUIET_DECODER_PANICS.call_once(advcalc::input::quiet_decoder_panics);
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dir.path().join("in.parquet");
    std::fs::write(&input, data).expect("write input");
    for estimator in ["grpo", "gae", "optimal_token_baseline"] {
        let config = Config::load(&ConfigSources {
            estimator: Some(estimator),
            ..Default::default()
        })
        .expect("a valid configuration");
        let options = RunOptions {
            input: input.clone(),
            output: dir.path().join(format!("{estimator}.parquet")),
            force: true,
            threads: Some(1),
            progress: false,
            layout: Default::default(),
            allow_nonfinite: false,
            metrics: None,
            input_format: None,
            output_format: None,
            memory: None,
        };
        let _ = advcalc::run(&config, &options);
    }
});
