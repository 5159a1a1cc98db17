//! advcalc's keys beside verl's in the `algorithm` section (`docs/conventions.md`, "Option
//! keys"): verl 0.9.1 has none of them, and their defaults give verl's numbers. Each is
//! declared once, in the `settings!` list below (key, type, default, doc): [`Extensions`], its
//! reading and errors, its YAML (`Config::to_yaml`, `advcalc config`) and the notes for keys
//! an estimator does not read all come from that list. The estimators that read a key say
//! so in their own declaration (`Info::settings`, a family member's `reads`), which
//! `advcalc estimators` prints. Then [`check`]: the combinations that cannot work.

use super::section::{Invalid, Section};
use super::setting::{Reader, SettingList};
use super::value::Map;
use crate::error::Result;
use crate::estimators::conventions::{self, Convention};
use crate::estimators::reinforce_plus_plus::MaskMode;
use crate::estimators::rloo_loo_std::{NemoGroupBy, NemoOptions};
use crate::estimators::{Estimator, EstimatorSettings};
use crate::shaping::openrlhf_kl::{ApproxKl, OpenrlhfKl};

/// Generates a struct of declared settings from a list, [`Extensions`] here and an
/// estimator's own [`Estimate::Options`](crate::estimators::Estimate::Options) in its file:
/// the struct (one field per setting, its doc the entry's), its defaults, and its
/// [`SettingList`] impl: its keys, its reading (in the list's order), its YAML and the keys
/// set away from their defaults (the unused-key notes). Each entry is
/// `"key" => field: Type = default,` with `sub.key` for a key of the subsection `sub`; the
/// type implements `setting::SettingValue`. `+ field: Type` after the list adds a field
/// holding another [`SettingList`], read after the list's keys (`Extensions` holds every
/// estimator's own settings that way).
macro_rules! settings {
    (
        $(#[$sdoc:meta])* $vis:vis struct $name:ident {
            $($(#[$doc:meta])* $key:literal => $field:ident: $ty:ty = $default:expr,)*
        }
        $(+ $(#[$xdoc:meta])* $extra:ident: $extra_ty:ty)?
    ) => {
        $(#[$sdoc])*
        #[derive(Debug, Clone, PartialEq)]
        $vis struct $name {
            $($(#[$doc])* pub $field: $ty,)*
            $($(#[$xdoc])* pub $extra: $extra_ty,)?
        }

        impl Default for $name {
            fn default() -> Self {
                $name {
                    $($field: $default,)*
                    $($extra: <$extra_ty>::default(),)?
                }
            }
        }

        impl $crate::config::setting::SettingList for $name {
            fn keys() -> Vec<&'static str> {
                #[allow(unused_mut)]
                let mut keys: Vec<&'static str> = vec![$($key),*];
                $(keys.extend(<$extra_ty as $crate::config::setting::SettingList>::keys());)?
                keys
            }

            fn read(
                r: &mut $crate::config::setting::Reader<'_, '_>,
            ) -> $crate::error::Result<Self> {
                #[allow(unused_variables)]
                let d = <$name>::default();
                $(let $field = match r.at($key)? {
                    (Some(section), leaf) => {
                        $crate::config::setting::SettingValue::read(section, leaf, d.$field)?
                    }
                    (None, _) => d.$field,
                };)*
                $(let $extra = $crate::config::setting::SettingList::read(r)?;)?
                Ok($name { $($field,)* $($extra,)? })
            }

            #[allow(unused_variables)]
            fn to_map(&self, m: &mut $crate::config::value::Map) {
                $($crate::config::setting::insert(
                    m,
                    $key,
                    $crate::config::setting::SettingValue::to_value(&self.$field),
                );)*
                $($crate::config::setting::SettingList::to_map(&self.$extra, m);)?
            }

            fn changed(&self) -> Vec<&'static str> {
                #[allow(unused_variables)]
                let d = <$name>::default();
                #[allow(unused_mut)]
                let mut keys = Vec::new();
                $(if self.$field != d.$field {
                    keys.push($key);
                })*
                $(keys.extend($crate::config::setting::SettingList::changed(&self.$extra));)?
                keys
            }
        }
    };
}
// For the estimators that declare settings of their own (none of the shipped ones does yet:
// a test below declares one).
#[allow(unused_imports)]
pub(crate) use settings;

impl Extensions {
    /// Every key, in the list's order (dotted below a subsection), then the estimators' own.
    pub fn keys() -> Vec<&'static str> {
        <Extensions as SettingList>::keys()
    }

    /// Read every key from the algorithm section, in the list's order.
    pub(crate) fn read(s: &mut Section<'_>) -> Result<Extensions> {
        let mut r = Reader::new(s);
        let x = <Extensions as SettingList>::read(&mut r)?;
        r.close()?;
        Ok(x)
    }

    /// Every key with its value (the resolved configuration's), subsections nested.
    pub(crate) fn to_map(&self) -> Map {
        let mut m = Map::new();
        SettingList::to_map(self, &mut m);
        m
    }

    /// The keys whose values differ from their defaults, in the list's order.
    pub(crate) fn changed(&self) -> Vec<&'static str> {
        SettingList::changed(self)
    }
}

// advcalc's settings that several estimators or conventions read, each declared once, in the
// order of the resolved configuration. A new one is one entry here; the estimators that read
// it say so in their declaration (`Info::settings`, a family member's `reads`) and read it as
// `settings.ext.FIELD`. A setting only one estimator reads is declared in its file instead
// (its `Estimate::Options`), and read as `settings.ext.estimators.NAME.FIELD`.
settings! {
    /// advcalc's extension keys, validated: one field per entry of the `settings!` list in
    /// `config/extensions.rs`, which declares each key once, and every estimator's own.
    pub struct Extensions {
    /// `convention` (or `--convention`): whose numbers the GRPO/RLOO family gives.
    "convention" => convention: Convention = Convention::Verl,
    /// `whiten_advantages` (gae only): false writes A_raw·m instead of the whitened values.
    "whiten_advantages" => whiten_advantages: bool = true,
    /// `mask_mode` (reinforce_plus_plus only): `carry` (verl ≥ 0.9) or `reset` (verl < 0.9).
    "mask_mode" => mask_mode: MaskMode = MaskMode::Carry,
    /// `group_size`: consecutive-n groups (trl, openrlhf, open-instruct conventions and the
    /// openrlhf_* estimators); null: the first run of equal uids.
    "group_size" => group_size: Option<usize> = None,
    /// `openrlhf.reward_clip`: OpenRLHF's `--reward.clip_range`.
    "openrlhf.reward_clip" => openrlhf_reward_clip: (f64, f64) = (-10.0, 10.0),
    /// `openrlhf.no_std_norm`: OpenRLHF's `--algo.advantage.no_std_norm`.
    "openrlhf.no_std_norm" => openrlhf_no_std_norm: bool = false,
    /// `openrlhf.kl_coef`: OpenRLHF's `--algo.kl.init_coef` (the openrlhf_* estimators; 0:
    /// no KL in the reward).
    "openrlhf.kl_coef" => openrlhf_kl_coef: f64 = 0.0,
    /// `openrlhf.kl_estimator`: OpenRLHF's `--algo.kl.estimator` (k1, k2 or k3).
    "openrlhf.kl_estimator" => openrlhf_kl_estimator: ApproxKl = ApproxKl::K1,
    /// `trl.normalize_advantages`: TRL RLOOTrainer's flag.
    "trl.normalize_advantages" => trl_normalize_advantages: bool = false,
    /// `trl.reward_weights`: TRL's `reward_weights`, one per reward column of a TRL dump
    /// (`io::trainers::trl`); empty: 1.0 each, TRL's default.
    "trl.reward_weights" => trl_reward_weights: Vec<f64> = Vec::new(),
    /// `nemo.use_leave_one_out_baseline`: NeMo-RL's `grpo.use_leave_one_out_baseline` (read
    /// under nemo-rl only).
    "nemo.use_leave_one_out_baseline" => nemo_use_leave_one_out_baseline: bool = true,
    /// `nemo.normalize_rewards`: NeMo-RL's `grpo.normalize_rewards` (read under nemo-rl only).
    "nemo.normalize_rewards" => nemo_normalize_rewards: bool = true,
    /// `nemo.group_by`: `uid` or `prompt_ids` (rloo_loo_std, and the family under nemo-rl).
    "nemo.group_by" => nemo_group_by: NemoGroupBy = NemoGroupBy::Uid,
    /// `skyrl.advantage_batch_normalize`: SkyRL's `trainer.algorithm` flag (the family under
    /// `--convention skyrl`).
    "skyrl.advantage_batch_normalize" => skyrl_advantage_batch_normalize: bool = false,
    }
    + /// Every estimator's own settings (its `Estimate::Options`), a field per estimator.
    estimators: EstimatorSettings
}

impl Extensions {
    /// `openrlhf.kl_coef` and `openrlhf.kl_estimator`, as the openrlhf_* estimators read them.
    pub fn openrlhf_kl(&self) -> OpenrlhfKl {
        OpenrlhfKl {
            coef: self.openrlhf_kl_coef,
            estimator: self.openrlhf_kl_estimator,
        }
    }

    /// `nemo.use_leave_one_out_baseline` and `nemo.normalize_rewards`, as NeMo-RL's maths
    /// reads them.
    pub fn nemo(&self) -> NemoOptions {
        NemoOptions {
            use_leave_one_out_baseline: self.nemo_use_leave_one_out_baseline,
            normalize_rewards: self.nemo_normalize_rewards,
        }
    }
}

/// The GRPO/RLOO family's members, as the note for another estimator under a convention
/// names them (checked against the declarations: [`Estimator::member`]).
const FAMILY_NAMES: &str = "grpo, drgrpo, grpo_batch_std, rloo and maxrl";

/// verl's own `algorithm` keys that some estimators read and others do not.
pub(crate) struct VerlKeys {
    pub gamma: f64,
    pub lam: f64,
    pub norm_adv_by_std_in_grpo: bool,
    /// Refused by the openrlhf_* estimators.
    pub use_kl_in_reward: bool,
}

/// Combinations of the estimator, the convention and the keys that cannot work, and notes
/// for the ones that do nothing.
pub(crate) fn check(
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
    // gamma under OpenRLHF; grpo_vectorized and gdpo say what they do with the std)
    let verl_changed = [
        ("gamma", gamma != 1.0 && !e.is_openrlhf()),
        ("lam", verl.lam != 1.0),
        (
            "norm_adv_by_std_in_grpo",
            !verl.norm_adv_by_std_in_grpo
                && !matches!(e, Estimator::GrpoVectorized | Estimator::Gdpo),
        ),
    ];
    let verl_changed = verl_changed.iter().filter(|(_, c)| *c).map(|(k, _)| *k);
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

    // A list declared as an estimator declares its own (`Estimate::Options`).
    settings! {
        /// A scratch estimator's own settings.
        pub struct Scratch {
            /// `scratch.scale`: a number.
            "scratch.scale" => scale: f64 = 1.0,
            /// `scratch.centred`: a flag.
            "scratch.centred" => centred: bool = true,
        }
    }

    fn scratch(yaml: &str) -> Result<Scratch> {
        let origins = crate::config::sources::Origins::default();
        let value = crate::config::yaml11::parse(yaml).unwrap();
        let mut root = Section::root(&origins, value)?;
        let mut r = Reader::new(&mut root);
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
            crate::config::value::Value::Map(m),
            crate::config::yaml11::parse(yaml).unwrap()
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
                    crate::config::Value::Map(sub) if !sub.is_empty() => leaves(sub, &p, out),
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
}
