//! Atomic output under faults: a run killed with SIGKILL while writing leaves the previous OUT
//! intact and no output; its temporary file is removed by the next run in that directory, and
//! nothing another host or container left there.

mod common;

use common::*;

#[test]
fn sigkill_mid_write_keeps_the_previous_output() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let batch = large_batch();
    let rows = batch.num_rows();
    write_parquet(&dir.join("in.parquet"), &batch, 1000);
    std::fs::write(dir.join("out.parquet"), b"previous result").unwrap();

    let mut child = advcalc()
        .current_dir(dir)
        .args([
            "run",
            "-q",
            "-f",
            "-e",
            "grpo",
            "--threads",
            "1",
            "in.parquet",
            "out.parquet",
        ])
        .spawn()
        .unwrap();
    wait_until_writing(&mut child, dir);
    child.kill().unwrap(); // SIGKILL on unix
    child.wait().unwrap();

    assert_eq!(
        std::fs::read(dir.join("out.parquet")).unwrap(),
        b"previous result"
    );
    assert_eq!(leftovers(dir).len(), 1, "the killed run's temporary file");

    // The next run in the directory removes the dead run's leftover and completes.
    let out = run_in(
        dir,
        &["run", "-q", "-f", "-e", "grpo", "in.parquet", "out.parquet"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(leftovers(dir).is_empty(), "{:?}", leftovers(dir));
    assert_eq!(read_parquet(&dir.join("out.parquet")).num_rows(), rows);
}

/// On a directory shared between machines or containers, a run removes only the leftovers of
/// this host's dead runs (same host name, boot and PID namespace, see
/// `advcalc_io::atomic::temp_prefix_for`): another host's files are kept whatever their
/// process id, and so are a live run's. Both for a Parquet OUT and an Arrow IPC OUT.
#[cfg(target_os = "linux")]
#[test]
fn only_this_hosts_dead_runs_leftovers_are_removed() {
    use advcalc_io::atomic::temp_prefix_for;

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_parquet(&dir.join("in.parquet"), &grpo_batch(), 2);
    // above any pid_max: a process id that is dead here
    let dead = i32::MAX as u32;
    let mut sleeper = std::process::Command::new("sleep")
        .arg("120")
        .spawn()
        .unwrap();
    let live = sleeper.id();
    // `.advcalc-HOST-KEY-PID-`: this host's name and key
    let ours = temp_prefix_for(dead);
    let (host, key) = ours
        .strip_prefix(".advcalc-")
        .and_then(|p| p.strip_suffix(&format!("-{dead}-")))
        .and_then(|p| p.rsplit_once('-'))
        .unwrap();
    assert_eq!(key.len(), 16, "{ours}");
    let other_key = if key == "0123456789abcdef" {
        "fedcba9876543210"
    } else {
        "0123456789abcdef"
    };
    let kept = [
        format!("{}Ab12Cd.parquet.tmp", temp_prefix_for(live)),
        format!(".advcalc-another-host-{other_key}-{dead}-Ab12Cd.parquet.tmp"),
        format!(".advcalc-another-host-{other_key}-{dead}-Ab12Cd.arrow.tmp"),
        // the same host name in another container or an earlier boot
        format!(".advcalc-{host}-{other_key}-{dead}-Ab12Cd.parquet.tmp"),
    ];
    for (round, out) in ["out.parquet", "out.arrow"].into_iter().enumerate() {
        let removed = [
            format!("{ours}Xy{round}z.parquet.tmp"),
            format!("{ours}Xy{round}z.arrow.tmp"),
        ];
        for name in kept.iter().chain(&removed) {
            std::fs::write(dir.join(name), b"partial").unwrap();
        }
        let run = run_in(dir, &["run", "-q", "-e", "grpo", "in.parquet", out]);
        assert!(run.status.success(), "{out}: {}", stderr(&run));
        for name in &kept {
            assert!(dir.join(name).exists(), "{out}: {name} was removed");
        }
        for name in &removed {
            assert!(!dir.join(name).exists(), "{out}: {name} was left");
        }
    }
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    let mut left = leftovers(dir);
    left.sort();
    let mut expected = kept.to_vec();
    expected.sort();
    assert_eq!(left, expected);
}
