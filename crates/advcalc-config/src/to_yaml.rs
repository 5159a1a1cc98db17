//! [`Config::to_yaml`]: the resolved configuration in verl's key layout, every key advcalc
//! reads with its value (defaults included), so that `advcalc run --config` on the text gives
//! the same [`Config`]. Written into output files as provenance, hence deterministic: keys in
//! a fixed order, numbers in their shortest round-trip form, and every string that a YAML 1.1
//! reader (PyYAML, OmegaConf) could take for something else quoted (`"0.5_2"` would be the
//! float 0.52 there).

use super::kl::{HORIZON, KL_COEF, TARGET_KL};
use super::rollout_correction::{self, LOSS_TYPE, RolloutCorrection};
use super::value::{Map, Value, yaml_float};
use super::{AlgoConfig, Config};
use crate::shaping::kl::KlController;

pub(super) fn to_yaml(config: &Config) -> String {
    let mut top = Map::new();
    top.insert("algorithm", algorithm(config).into());
    match (&config.loss, config.rollout_n) {
        (Some(loss), n) => {
            let mut rollout = Map::new();
            if let Some(n) = n {
                rollout.insert("n", Value::from(n));
            }
            rollout.insert("response_length", Value::from(loss.response_length as i64));
            top.insert(
                "actor_rollout_ref",
                map([
                    ("actor", super::actor::to_map(loss, n).into()),
                    ("rollout", rollout.into()),
                ]),
            );
        }
        (None, Some(n)) => top.insert(
            "actor_rollout_ref",
            map([("rollout", map([("n", Value::from(n))]))]),
        ),
        (None, None) => {}
    }
    let mut text = String::from(
        "# advcalc's resolved configuration (verl 0.9.1 keys, advcalc's extensions last)\n",
    );
    if !config.estimator_configured {
        text += "# no estimator was named: adv_estimator is left out, so verl's default (gae) applies\n";
    }
    emit(&mut text, 0, &top, "", &|_| None);
    text
}

/// Block mappings, flow lists, plain scalars where every YAML reader agrees on them;
/// `comment(path)` may end a line with `# ...` (the dotted path of the key on that line).
pub fn emit(
    out: &mut String,
    indent: usize,
    map: &Map,
    path: &str,
    comment: &dyn Fn(&str) -> Option<String>,
) {
    let pad = " ".repeat(indent);
    for (key, value) in map.iter() {
        let here = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        let name = if plain(key) { key.clone() } else { quoted(key) };
        let note = comment(&here)
            .map(|c| format!("  # {c}"))
            .unwrap_or_default();
        match value {
            Value::Map(m) if !m.is_empty() => {
                out.push_str(&format!("{pad}{name}:\n"));
                emit(out, indent + 2, m, &here, comment);
            }
            v => out.push_str(&format!("{pad}{name}: {}{note}\n", scalar(v))),
        }
    }
}

/// One value on one line: scalars, and lists and mappings in flow style.
pub fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(n) => n.to_string(),
        Value::Float(x) => yaml_float(*x),
        Value::Str(s) if plain(s) => s.clone(),
        Value::Str(s) => quoted(s),
        Value::Seq(items) => {
            let items: Vec<String> = items.iter().map(scalar).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Map(m) => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| {
                    let k = if plain(k) { k.clone() } else { quoted(k) };
                    format!("{k}: {}", scalar(v))
                })
                .collect();
            format!("{{{}}}", items.join(", "))
        }
    }
}

/// A JSON string is a YAML double-quoted scalar. A literal `${` is written escaped (`\${`),
/// so that OmegaConf does not take it for an interpolation when the text is read back.
fn quoted(s: &str) -> String {
    serde_json::to_string(&s.replace("${", "\\${")).unwrap_or_default()
}

/// A name that every YAML reader takes for a string as it stands.
fn plain(s: &str) -> bool {
    const WORDS: [&str; 9] = [
        "yes", "no", "true", "false", "on", "off", "null", "nan", "inf",
    ];
    s.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        && !WORDS.contains(&s)
}

fn map<const N: usize>(entries: [(&str, Value); N]) -> Value {
    Value::Map(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

/// The `algorithm` section of `config` as verl YAML keys (every key advcalc reads).
pub fn algorithm(config: &Config) -> Map {
    let a: &AlgoConfig = &config.algorithm;
    let mut m = Map::new();
    let mut put = |key: &str, value: Value| {
        m.insert(key, value);
    };
    put("gamma", a.gamma.into());
    put("lam", a.lam.into());
    if config.estimator_configured {
        put("adv_estimator", a.adv_estimator.name().into());
    }
    put("norm_adv_by_std_in_grpo", a.norm_adv_by_std_in_grpo.into());
    put("use_kl_in_reward", a.kl_in_reward.is_some().into());
    let (penalty, controller) = match &a.kl_in_reward {
        Some(k) => (k.estimator.name(), k.controller.clone()),
        None => ("kl", KlController::Fixed { value: KL_COEF }),
    };
    let (target_kl, horizon) = match controller {
        KlController::Adaptive {
            target, horizon, ..
        } => (target, horizon as i64),
        KlController::Fixed { .. } => (TARGET_KL, HORIZON),
    };
    put("kl_penalty", penalty.into());
    put(
        "kl_ctrl",
        map([
            ("type", controller.kind().into()),
            ("kl_coef", controller.value().into()),
            ("horizon", horizon.into()),
            ("target_kl", target_kl.into()),
        ]),
    );
    put("use_pf_ppo", false.into());
    put(
        "filter_groups",
        map([("enable", a.filter_groups_enable.into())]),
    );
    put(
        "rollout_correction",
        match &a.rollout_correction {
            RolloutCorrection::Off => Value::Null,
            RolloutCorrection::Decoupled(c) => {
                let mut r: Map = rollout_correction::to_values(c)
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect();
                r.insert("bypass_mode", false.into());
                r.insert("loss_type", LOSS_TYPE.into());
                r.into()
            }
            RolloutCorrection::Bypass {
                loss_type,
                in_loss: None,
            } => map([
                ("rollout_is", Value::Null),
                ("rollout_rs", Value::Null),
                ("bypass_mode", true.into()),
                ("loss_type", loss_type.as_str().into()),
            ]),
            // `advcalc loss`: the correction its bypass loss applies
            RolloutCorrection::Bypass {
                loss_type,
                in_loss: Some(c),
            } => {
                let mut r: Map = rollout_correction::to_values(c)
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect();
                r.insert("bypass_mode", true.into());
                r.insert("loss_type", loss_type.as_str().into());
                r.into()
            }
        },
    );
    let list_or_null = |v: Value| match &v {
        Value::Seq(s) if s.is_empty() => Value::Null,
        _ => v,
    };
    put(
        "gdpo_reward_keys",
        list_or_null(a.gdpo_reward_keys.iter().map(|k| k.as_str()).collect()),
    );
    put(
        "gdpo_reward_weights",
        list_or_null(a.gdpo_reward_weights.iter().copied().collect()),
    );
    // advcalc's extensions last, as their declaration lists them
    for (key, value) in a.ext.to_map() {
        put(&key, value);
    }
    m
}
