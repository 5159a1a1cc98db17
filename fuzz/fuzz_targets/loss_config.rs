//! Any text as `advcalc loss`'s `--config` (the actor section, `rollout.n`,
//! `rollout.response_length`, `algorithm`), then a tiny replay of the loss kernels on a
//! synthetic step: refused as a usage error, or replayed to finite `pg_losses`,
//! `grad_weights`, `kl_losses` and metrics; never a panic. The entry is shared with
//! `tests/hostile_loss.rs`, which runs it on the seed corpus `tests/hostile/loss_config/`
//! (copy it into `fuzz/corpus/loss_config/` to start from it).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/hostile/loss_config.rs"]
mod entry;

fuzz_target!(|data: &[u8]| {
    entry::assert_sound(&String::from_utf8_lossy(data));
});
