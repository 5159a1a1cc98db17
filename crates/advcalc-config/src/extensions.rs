//! The configuration's side of advcalc's keys beside verl's in the `algorithm` section
//! ([`Extensions`], declared with the estimators): reading them from the section, then
//! [`check`]: the combinations of estimator, convention and keys that cannot work, and notes
//! for the keys that do nothing.

use super::key_walk::KeyWalk;
use super::section::Section;
use crate::error::Result;
use crate::estimators::conventions::{self, Convention};
use crate::estimators::{Estimator, Extensions};
use crate::settings::{Invalid, Keys, SettingList};

/// Read every key from the algorithm section, in the list's order.
pub fn read(s: &mut Section<'_>) -> Result<Extensions> {
    let mut r = KeyWalk::new(s);
    let x = <Extensions as SettingList>::read(&mut r)?;
    r.close()?;
    Ok(x)
}

/// The GRPO/RLOO family's members, as the note for another estimator under a convention
/// names them (checked against the declarations: [`Estimator::member`]).
const FAMILY_NAMES: &str = "grpo, drgrpo, grpo_batch_std, rloo and maxrl";

/// verl's own `algorithm` keys that some estimators read and others do not.
pub struct VerlKeys {
    /// `gamma`.
    pub gamma: f64,
    /// `lam`.
    pub lam: f64,
    /// `norm_adv_by_std_in_grpo`.
    pub norm_adv_by_std_in_grpo: bool,
    /// Refused by the openrlhf_* estimators.
    pub use_kl_in_reward: bool,
}

impl VerlKeys {
    /// The keys set away from verl's defaults.
    pub fn changed(&self) -> Vec<&'static str> {
        [
            ("gamma", self.gamma != 1.0),
            ("lam", self.lam != 1.0),
            ("norm_adv_by_std_in_grpo", !self.norm_adv_by_std_in_grpo),
        ]
        .into_iter()
        .filter(|(_, changed)| *changed)
        .map(|(key, _)| key)
        .collect()
    }
}

/// The notes for verl's keys set away from their defaults that `e` declares it ignores
/// (`Info::ignores`): what it does instead.
pub fn ignored_notes(e: Estimator, verl: &VerlKeys, notes: &mut Vec<String>) {
    let changed = verl.changed();
    for (key, why) in e.info().ignores {
        if changed.contains(key) {
            notes.push(format!("{} {why}", e.name()));
        }
    }
}

/// Combinations of the estimator, the convention and the keys that cannot work, and notes
/// for the ones that do nothing.
pub fn check(
    s: &Section<'_>,
    e: Estimator,
    x: &Extensions,
    verl: &VerlKeys,
    notes: &mut Vec<String>,
) -> Result<()> {
    let (gamma, use_kl_in_reward) = (verl.gamma, verl.use_kl_in_reward);
    let c = x.convention;
    if let Err(msg) = conventions::check(e, c) {
        let key = if s.note("convention").is_empty() {
            "adv_estimator"
        } else {
            "convention"
        };
        return Err(crate::error::Error::usage(format!("{msg}{}", s.note(key))));
    }
    if c != Convention::Verl && !conventions::in_family(e) {
        notes.push(format!(
            "--convention {} changes only {FAMILY_NAMES}; {} gives the same numbers under every convention",
            c.name(),
            e.name()
        ));
    }
    if e.is_openrlhf() {
        if use_kl_in_reward {
            return Err(s.reject(
                Invalid::new(
                    "use_kl_in_reward",
                    format!(
                        "true would put verl's KL inside the group statistics of {}, which OpenRLHF never does",
                        e.name()
                    ),
                )
                .hint("set algorithm.use_kl_in_reward=false"),
            ));
        }
        if gamma != 1.0 {
            notes.push(format!(
                "{} uses γ = 1 whatever algorithm.gamma says, as OpenRLHF forces it",
                e.name()
            ));
        }
    }
    // Keys set away from their defaults that this estimator does not read under this
    // convention: a note each (the same lists `advcalc estimators` prints).
    let reads: Vec<&str> = match conventions::settings_under(e, c) {
        Some(Ok(list)) => list,
        Some(Err(_)) => Vec::new(),
        None => e.settings(),
    };
    // `convention` is read by every family member; for another estimator the note above
    // says what it changes. `trl.reward_weights` is read by the TRL dump reader, not by an
    // estimator.
    // verl's keys too, set away from verl's defaults (the notes above already speak for
    // gamma under OpenRLHF; a key the estimator declares it ignores gets its own note,
    // `ignored_notes`)
    let ignored = |key: &str| e.info().ignores.iter().any(|(k, _)| *k == key);
    let verl_changed = verl
        .changed()
        .into_iter()
        .filter(|&k| !(ignored(k) || (k == "gamma" && e.is_openrlhf())));
    for key in x.changed().into_iter().chain(verl_changed) {
        if !["convention", "trl.reward_weights"].contains(&key) && !reads.contains(&key) {
            notes.push(format!(
                "algorithm.{key} is not read by {} under --convention {} (`advcalc estimators` lists what each estimator reads)",
                e.name(),
                c.name()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimators::rloo_loo_std::NemoGroupBy;
    use crate::settings::Map;
    use crate::shaping::openrlhf_kl::ApproxKl;

    // A list declared as an estimator declares its own (`Estimate::Options`).
    crate::settings! {
        /// A scratch estimator's own settings.
        pub struct Scratch {
            /// `scratch.scale`: a number.
            "scratch.scale" => scale: f64 = 1.0,
            /// `scratch.centred`: a flag.
            "scratch.centred" => centred: bool = true,
        }
    }

    fn scratch(yaml: &str) -> Result<Scratch> {
        let origins = crate::sources::Origins::default();
        let value = crate::yaml11::parse(yaml).unwrap();
        let mut root = Section::root(&origins, value)?;
        let mut r = KeyWalk::new(&mut root);
        let x = <Scratch as SettingList>::read(&mut r)?;
        r.close()?;
        root.finish()?;
        Ok(x)
    }

    // Its keys, reading, unknown keys, YAML and changed keys all come from the declaration.
    #[test]
    fn a_declared_list_is_read_written_and_checked() {
        assert_eq!(Scratch::keys(), ["scratch.scale", "scratch.centred"]);
        let d = scratch("{}").unwrap();
        assert_eq!((d.scale, d.centred), (1.0, true));
        assert!(d.changed().is_empty());
        let x = scratch("scratch:\n  scale: 2.5\n").unwrap();
        assert_eq!((x.scale, x.centred), (2.5, true));
        assert_eq!(x.changed(), ["scratch.scale"]);
        let mut m = Map::new();
        x.to_map(&mut m);
        let yaml = "scratch:\n  scale: 2.5\n  centred: true\n";
        assert_eq!(
            crate::value::Value::Map(m),
            crate::yaml11::parse(yaml).unwrap()
        );
        let e = scratch("scratch:\n  scael: 2\n").unwrap_err();
        assert!(e.to_string().contains("scratch.scael"), "{e}");
        assert!(e.hint().is_some_and(|h| h.contains("scale")), "{e:?}");
        let e = scratch("scratch:\n  scale: yes please\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("scratch.scale"), "{e}");
    }

    // The note's list names exactly the estimators that declare themselves family members.
    #[test]
    fn family_names_are_the_members() {
        let (rest, last) = FAMILY_NAMES.rsplit_once(" and ").unwrap();
        let mut named: Vec<&str> = rest.split(", ").chain([last]).collect();
        named.sort();
        let mut members: Vec<&str> = Estimator::ALL
            .into_iter()
            .filter(|e| e.member().is_some())
            .map(|e| e.name())
            .collect();
        members.sort();
        assert_eq!(named, members);
    }

    // The reader opens each subsection once: the list keeps a subsection's keys together.
    #[test]
    fn each_subsection_is_listed_together() {
        let mut seen: Vec<&str> = Vec::new();
        for key in Extensions::keys() {
            if let Some((sub, _)) = key.split_once('.') {
                if seen.last() != Some(&sub) {
                    assert!(!seen.contains(&sub), "{key}: `{sub}` listed apart");
                    seen.push(sub);
                }
            } else {
                assert!(seen.is_empty(), "{key}: a top-level key after a subsection");
            }
        }
    }

    // Every key an estimator says it reads (under any convention) is in the resolved
    // configuration: one of verl's keys or a declared setting.
    #[test]
    fn every_key_an_estimator_reads_is_a_known_setting() {
        fn leaves(m: &Map, path: &str, out: &mut Vec<String>) {
            for (k, v) in m.iter() {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match v {
                    crate::Value::Map(sub) if !sub.is_empty() => leaves(sub, &p, out),
                    _ => out.push(p),
                }
            }
        }
        let config = crate::Config::load(&Default::default()).unwrap();
        let mut known = Vec::new();
        leaves(&super::super::to_yaml::algorithm(&config), "", &mut known);
        for key in Extensions::keys() {
            assert!(known.iter().any(|k| k == key), "{key}");
        }
        for e in Estimator::ALL {
            let mut named: Vec<&str> = e.settings();
            for c in Convention::ALL {
                if let Some(Ok(list)) = conventions::settings_under(e, c) {
                    named.extend(list);
                }
            }
            for key in named {
                assert!(known.iter().any(|k| k == key), "{}: {key}", e.name());
            }
        }
    }

    // Every setting (as the list stands when this was written) away from its default: read,
    // noted as changed, written back and read again to the same values.
    #[test]
    fn every_setting_reads_back_from_its_yaml() {
        let text = "adv_estimator: rloo\nconvention: trl\nwhiten_advantages: false\nmask_mode: reset\ngroup_size: 4\nopenrlhf:\n  reward_clip: [-1, 2.5]\n  no_std_norm: true\n  kl_coef: 0.01\n  kl_estimator: k3\ntrl:\n  normalize_advantages: true\nnemo:\n  use_leave_one_out_baseline: false\n  normalize_rewards: false\n  group_by: prompt_ids\nskyrl:\n  advantage_batch_normalize: true\n";
        let set = [
            "convention",
            "whiten_advantages",
            "mask_mode",
            "group_size",
            "openrlhf.reward_clip",
            "openrlhf.no_std_norm",
            "openrlhf.kl_coef",
            "openrlhf.kl_estimator",
            "trl.normalize_advantages",
            "nemo.use_leave_one_out_baseline",
            "nemo.normalize_rewards",
            "nemo.group_by",
            "skyrl.advantage_batch_normalize",
        ];
        let load = |text: &str| {
            let mut file = tempfile::NamedTempFile::new().unwrap();
            std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
            crate::Config::load(&crate::ConfigSources {
                file: Some(file.path()),
                ..Default::default()
            })
            .unwrap()
        };
        let config = load(text);
        let x = &config.algorithm.ext;
        assert_eq!(x.changed(), set);
        assert_eq!(x.openrlhf_kl().estimator, ApproxKl::K3);
        assert_eq!(x.openrlhf_reward_clip, (-1.0, 2.5));
        assert_eq!(x.nemo_group_by, NemoGroupBy::PromptIds);
        assert_eq!(x.group_size, Some(4));
        // a note for each key rloo does not read under trl, in the declaration's order
        let unread: Vec<&str> = config
            .notes
            .iter()
            .filter_map(|n| {
                n.strip_prefix("algorithm.")?
                    .split_once(" is not read by rloo")
            })
            .map(|(key, _)| key)
            .collect();
        let expected: Vec<&str> = set
            .into_iter()
            .filter(|k| !["convention", "group_size", "trl.normalize_advantages"].contains(k))
            .collect();
        assert_eq!(unread, expected);
        let again = load(&config.to_yaml());
        assert_eq!(&again.algorithm.ext, x);
        assert!(Extensions::default().changed().is_empty());
    }

    // verl's own keys: a note where the estimator does not read one set away from verl's
    // default, none where it does or where it is left at the default
    #[test]
    fn verl_keys_an_estimator_does_not_read_are_noted() {
        let notes = |estimator: &str, sets: &[&str]| -> Vec<String> {
            let sets: Vec<String> = sets.iter().map(|s| format!("algorithm.{s}")).collect();
            let config = crate::Config::load(&crate::ConfigSources {
                estimator: Some(estimator),
                sets: &sets,
                ..Default::default()
            })
            .unwrap();
            config
                .notes
                .into_iter()
                .filter_map(|n| {
                    let rest = n.strip_prefix("algorithm.")?;
                    Some(rest.split_once(" is not read by")?.0.to_string())
                })
                .collect()
        };
        let changed = ["gamma=0.9", "lam=0.95", "norm_adv_by_std_in_grpo=false"];
        assert_eq!(notes("grpo", &changed), ["gamma", "lam"]);
        assert_eq!(notes("gae", &changed), ["norm_adv_by_std_in_grpo"]);
        assert_eq!(
            notes("rloo", &changed),
            ["gamma", "lam", "norm_adv_by_std_in_grpo"]
        );
        assert_eq!(
            notes("reinforce_plus_plus", &changed),
            ["lam", "norm_adv_by_std_in_grpo"]
        );
        // at verl's defaults, set or not: nothing to say
        let defaults = ["gamma=1.0", "lam=1", "norm_adv_by_std_in_grpo=true"];
        assert!(notes("rloo", &defaults).is_empty());
        // OpenRLHF's own note speaks for gamma; grpo_vectorized's for the std
        assert!(!notes("openrlhf_rloo", &["gamma=0.9"]).contains(&"gamma".to_string()));
        assert!(notes("grpo_vectorized", &["norm_adv_by_std_in_grpo=false"]).is_empty());
    }

    // A key an estimator declares it ignores (`Info::ignores`) gets the declaration's note,
    // only when set away from its default; no other estimator gets it.
    #[test]
    fn an_ignored_verl_key_gets_the_estimators_own_note() {
        let notes = |estimator: &str, set: &str| -> Vec<String> {
            let sets = [format!("algorithm.{set}")];
            let config = crate::Config::load(&crate::ConfigSources {
                estimator: Some(estimator),
                sets: &sets,
                ..Default::default()
            })
            .unwrap();
            config.notes
        };
        for e in ["grpo_vectorized", "gdpo"] {
            let set = if e == "gdpo" {
                vec!["norm_adv_by_std_in_grpo=false", "gdpo_reward_keys=[a]"]
            } else {
                vec!["norm_adv_by_std_in_grpo=false"]
            };
            let sets: Vec<String> = set.iter().map(|s| format!("algorithm.{s}")).collect();
            let got = crate::Config::load(&crate::ConfigSources {
                estimator: Some(e),
                sets: &sets,
                ..Default::default()
            })
            .unwrap()
            .notes;
            assert_eq!(
                got,
                [format!(
                    "{e} divides by the group std whatever norm_adv_by_std_in_grpo says: verl 0.9.1's trainer never passes the setting to it, and advcalc does the same; use -e grpo for Dr. GRPO (no std)"
                )]
            );
        }
        assert!(notes("grpo_vectorized", "norm_adv_by_std_in_grpo=true").is_empty());
        assert!(notes("grpo", "norm_adv_by_std_in_grpo=false").is_empty());
    }
}
