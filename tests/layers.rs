//! The crate graph is the architecture (`docs/architecture.md`): each floor depends only on
//! the floors below it, and the maths depends on nothing at all. Cargo already refuses a
//! cycle; this test refuses an edge that points up a floor, and a heavy crate anywhere under
//! the maths or the configuration, read from `cargo metadata` (the lockfile's graph as cargo
//! resolves it).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// The workspace's crates, lowest floor first.
const FLOORS: [&str; 4] = [
    "advcalc-maths",
    "advcalc-config",
    "advcalc",
    "advcalc-python",
];

/// Crates no floor below the I/O layer may depend on, directly or not: the maths and the
/// configuration stay free of Arrow, Parquet, the command line, plotting and object storage.
const HEAVY: [&str; 9] = [
    "arrow-array",
    "arrow-buffer",
    "arrow-ipc",
    "arrow-schema",
    "arrow-select",
    "parquet",
    "clap",
    "plotters",
    "object_store",
];

/// The normal (non-dev, non-build) dependency graph: each package's name → its
/// dependencies' names, for every package of the resolved graph.
fn normal_graph() -> BTreeMap<String, Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let name_of: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let mut graph = BTreeMap::new();
    for node in meta["resolve"]["nodes"]
        .as_array()
        .expect("the resolved graph")
    {
        let deps = node["deps"]
            .as_array()
            .expect("deps")
            .iter()
            .filter(|d| {
                d["dep_kinds"]
                    .as_array()
                    .is_some_and(|kinds| kinds.iter().any(|k| k["kind"].is_null()))
            })
            .map(|d| name_of[d["pkg"].as_str().unwrap()].to_string())
            .collect();
        graph.insert(name_of[node["id"].as_str().unwrap()].to_string(), deps);
    }
    graph
}

/// Every package `root` depends on, directly or not (normal dependencies).
fn closure(graph: &BTreeMap<String, Vec<String>>, root: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![root.to_string()];
    while let Some(p) = todo.pop() {
        for d in &graph[&p] {
            if seen.insert(d.clone()) {
                todo.push(d.clone());
            }
        }
    }
    seen
}

#[test]
fn each_floor_depends_only_on_the_floors_below() {
    let deps = normal_graph();
    for floor in FLOORS {
        assert!(
            deps.contains_key(floor),
            "{floor} is not in the workspace: {deps:?}"
        );
    }
    for (i, floor) in FLOORS.iter().enumerate() {
        for dep in &deps[*floor] {
            if let Some(j) = FLOORS.iter().position(|f| f == dep) {
                assert!(
                    j < i,
                    "{floor} depends on {dep}, a floor above or beside it"
                );
            }
        }
    }
}

#[test]
fn the_maths_depends_on_nothing_and_the_configuration_on_no_heavy_crate() {
    let graph = normal_graph();
    assert_eq!(closure(&graph, "advcalc-maths"), BTreeSet::new());
    let config = closure(&graph, "advcalc-config");
    for heavy in HEAVY {
        assert!(!config.contains(heavy), "advcalc-config depends on {heavy}");
    }
    // the I/O layer reads and writes, and neither parses a command line nor draws
    let io = closure(&graph, "advcalc-io");
    for top_only in ["clap", "plotters", "indicatif"] {
        assert!(!io.contains(top_only), "advcalc-io depends on {top_only}");
    }
    // the engine runs the passes; the command line and the figures are the commands'
    let engine = closure(&graph, "advcalc-engine");
    for top_only in ["clap", "plotters"] {
        assert!(
            !engine.contains(top_only),
            "advcalc-engine depends on {top_only}"
        );
    }
    // the command line is the top floor's alone
    assert!(!closure(&graph, "advcalc-commands").contains("clap"));
    // the check can fail: the top floor does hold the heavy crates, through its own edges
    let top = closure(&graph, "advcalc");
    assert!(
        HEAVY
            .iter()
            .all(|h| *h == "object_store" || top.contains(*h))
    );
}
