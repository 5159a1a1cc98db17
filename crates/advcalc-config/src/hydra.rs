//! Hydra's files as what they are. verl's trainer configs are Hydra configs: a `defaults:`
//! list composes other files into the one verl runs with, and `_target_`-style keys tell
//! Hydra which Python class to build. Neither is a verl setting, and a file that is only a
//! composition (`ppo_megatron_trainer.yaml`: a defaults list, no `algorithm:` section) does
//! not hold the configuration at all: advcalc says so and names the file to pass instead of
//! reading its keys as settings.

use super::value::{Map, Value};
use crate::error::Error;

/// Hydra's instantiation keys: they configure object construction, never a verl setting.
pub const INSTANTIATION_KEYS: [&str; 5] = [
    "_target_",
    "_recursive_",
    "_convert_",
    "_partial_",
    "_args_",
];

/// Top-level keys of a verl trainer config other than `algorithm` (any of them marks a trainer
/// file, whose settings advcalc does not read).
const TRAINER_SECTIONS: [&str; 12] = [
    "actor_rollout_ref",
    "data",
    "trainer",
    "critic",
    "reward_model",
    "reward",
    "custom_reward_function",
    "ray_kwargs",
    "ray_init",
    "global_profiler",
    "transfer_queue",
    "model_engine",
];

/// What a config file's top level is.
#[derive(Debug, PartialEq)]
pub enum FileKind {
    /// A trainer config with an `algorithm:` section (Hydra's `defaults:` may be beside it).
    Trainer,
    /// A trainer config without an `algorithm:` section: verl's defaults apply.
    TrainerWithoutAlgorithm,
    /// A file holding the `algorithm` section alone.
    Section,
    /// A Hydra composition: a `defaults:` list and no `algorithm:` section.
    Composition { defaults: Vec<String> },
}

pub fn file_kind(top: &Map) -> FileKind {
    if top.contains_key("algorithm") {
        return FileKind::Trainer;
    }
    if let Some(defaults) = top.get("defaults") {
        return FileKind::Composition {
            defaults: default_names(defaults),
        };
    }
    if top
        .keys()
        .any(|k| TRAINER_SECTIONS.contains(&k.as_str()) || k == "hydra")
    {
        return FileKind::TrainerWithoutAlgorithm;
    }
    FileKind::Section
}

/// The entries of a defaults list as written (`ppo_trainer`, `override model_engine: megatron`).
fn default_names(defaults: &Value) -> Vec<String> {
    let Value::Seq(items) = defaults else {
        return Vec::new();
    };
    items
        .iter()
        .map(|item| match item {
            Value::Map(m) => m
                .iter()
                .map(|(k, v)| format!("{k}: {}", v.py_str()))
                .collect::<Vec<_>>()
                .join(", "),
            other => other.py_str(),
        })
        .collect()
}

/// The note for a trainer config that has an `algorithm:` section and a `defaults:` list
/// (verl's own `ppo_trainer.yaml`): advcalc reads the file alone, so what the list composes
/// in (`algorithm.rollout_correction`, `actor_rollout_ref.rollout`) is verl's defaults here,
/// whatever the composed run used. Names the `_generated_` file to pass instead: verl ships
/// one beside each composition (`_generated_ppo_trainer.yaml`).
pub fn defaults_note(name: &str, defaults: &Value) -> String {
    let path = std::path::Path::new(name);
    let stem = path.file_stem().map_or_else(
        || "ppo_trainer".into(),
        |s| s.to_string_lossy().into_owned(),
    );
    let generated = path.with_file_name(format!("_generated_{stem}.yaml"));
    let pass = if generated.is_file() {
        format!("pass {} (beside it)", generated.display())
    } else {
        format!(
            "pass the composed config: verl's `_generated_{stem}.yaml` (in verl/trainer/config/) or the run's .hydra/config.yaml"
        )
    };
    // the entries that compose what advcalc reads (`group@package: file`)
    let composed: Vec<String> = default_names(defaults)
        .into_iter()
        .filter(|d| {
            let package = d.split_once('@').map_or("", |(_, p)| p);
            let package = package.split(':').next().unwrap_or("").trim();
            package.starts_with("algorithm") || package == "actor_rollout_ref.rollout"
        })
        .collect();
    let which = if composed.is_empty() {
        String::new()
    } else {
        format!(" (among them {})", composed.join("; "))
    };
    format!(
        "{name} has a Hydra `defaults:` list{which} that advcalc does not follow: what it composes in (algorithm.rollout_correction, actor_rollout_ref.rollout.n) takes verl's defaults here, not the composed run's values; {pass}"
    )
}

/// The error for a composition: what the file is, and which file to pass.
pub fn composition_error(name: &str, defaults: &[String]) -> Error {
    let listed = if defaults.is_empty() {
        String::new()
    } else {
        format!(" ({})", defaults.join("; "))
    };
    Error::usage(format!(
        "{name}: a Hydra composition (a `defaults:` list{listed} and no `algorithm:` section): advcalc reads one file and does not compose Hydra configs"
    ))
    .with_hint(
        "pass the composed config: the .hydra/config.yaml of the run's output directory, or verl's _generated_*.yaml beside the file, or `python -m verl.trainer.main_ppo --config-name NAME --cfg job > composed.yaml`",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml11;

    fn shape_of(yaml: &str) -> FileKind {
        match yaml11::parse(yaml).unwrap() {
            Value::Map(m) => file_kind(&m),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn files_are_recognised() {
        assert_eq!(shape_of("algorithm:\n  gamma: 1\n"), FileKind::Trainer);
        assert_eq!(
            shape_of(
                "defaults:\n  - ppo_trainer\n  - override model_engine: megatron\n  - _self_\n"
            ),
            FileKind::Composition {
                defaults: vec![
                    "ppo_trainer".into(),
                    "override model_engine: megatron".into(),
                    "_self_".into()
                ]
            }
        );
        assert_eq!(
            shape_of("trainer:\n  total_epochs: 1\n"),
            FileKind::TrainerWithoutAlgorithm
        );
        assert_eq!(shape_of("gamma: 0.9\n"), FileKind::Section);
        let e = composition_error("m.yaml", &["ppo_trainer".into()]);
        assert!(e.message().contains("Hydra composition"), "{}", e.message());
        assert!(e.hint().unwrap().contains(".hydra/config.yaml"));
    }
}
