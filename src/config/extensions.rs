//! advcalc's keys beside verl's in the `algorithm` section (`docs/conventions.md`, "Option
//! keys"): verl 0.9.1 has none of them, and their defaults give verl's numbers.

use super::section::{Invalid, Section};
use crate::error::Result;
use crate::estimators::Estimator;
use crate::estimators::conventions::{self, Convention};
use crate::estimators::reinforce_plus_plus::MaskMode;
use crate::estimators::rloo_loo_std::{NemoGroupBy, NemoOptions};
use crate::shaping::openrlhf_kl::{ApproxKl, OpenrlhfKl};

/// advcalc's extension keys, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Extensions {
    /// `convention` (or `--convention`): whose numbers the GRPO/RLOO family gives.
    pub convention: Convention,
    /// `whiten_advantages` (gae only): false writes A_raw·m instead of the whitened values.
    pub whiten_advantages: bool,
    /// `mask_mode` (reinforce_plus_plus only): `carry` (verl ≥ 0.9) or `reset` (verl < 0.9).
    pub mask_mode: MaskMode,
    /// `group_size`: consecutive-n groups (trl, openrlhf, open-instruct conventions and the
    /// openrlhf_* estimators); null: the first run of equal uids.
    pub group_size: Option<usize>,
    /// `openrlhf.reward_clip`: OpenRLHF's `--reward.clip_range`.
    pub openrlhf_reward_clip: (f64, f64),
    /// `openrlhf.no_std_norm`: OpenRLHF's `--algo.advantage.no_std_norm`.
    pub openrlhf_no_std_norm: bool,
    /// `trl.normalize_advantages`: TRL RLOOTrainer's flag.
    pub trl_normalize_advantages: bool,
    /// `nemo.use_leave_one_out_baseline`, `nemo.normalize_rewards` (read under nemo-rl only).
    pub nemo: NemoOptions,
    /// `openrlhf.kl_coef`, `openrlhf.kl_estimator`: OpenRLHF's `--algo.kl.init_coef` and
    /// `--algo.kl.estimator` (the openrlhf_* estimators).
    pub openrlhf_kl: OpenrlhfKl,
    /// `skyrl.advantage_batch_normalize`: SkyRL's `trainer.algorithm` flag (the family under
    /// `--convention skyrl`).
    pub skyrl_advantage_batch_normalize: bool,
    /// `nemo.group_by`: `uid` or `prompt_ids` (rloo_loo_std, and the family under nemo-rl).
    pub nemo_group_by: NemoGroupBy,
}

impl Default for Extensions {
    fn default() -> Self {
        Extensions {
            convention: Convention::Verl,
            whiten_advantages: true,
            mask_mode: MaskMode::Carry,
            group_size: None,
            openrlhf_reward_clip: (-10.0, 10.0),
            openrlhf_no_std_norm: false,
            trl_normalize_advantages: false,
            nemo: NemoOptions::default(),
            openrlhf_kl: OpenrlhfKl::default(),
            skyrl_advantage_batch_normalize: false,
            nemo_group_by: NemoGroupBy::Uid,
        }
    }
}

/// `mask_mode`'s spelling.
pub(crate) fn mask_mode_name(mode: MaskMode) -> &'static str {
    match mode {
        MaskMode::Carry => "carry",
        MaskMode::Reset => "reset",
    }
}

/// Read advcalc's keys from the algorithm section.
pub(crate) fn read(s: &mut Section<'_>) -> Result<Extensions> {
    let d = Extensions::default();
    let convention = match s.opt_string("convention")? {
        None => d.convention,
        Some(name) => Convention::from_name(&name).ok_or_else(|| {
            let known: Vec<&str> = Convention::ALL.iter().map(|c| c.name()).collect();
            s.reject(
                Invalid::new("convention", format!("unknown convention `{name}`"))
                    .hint(format!("known conventions: {}", known.join(", "))),
            )
        })?,
    };
    let mask_mode = match s.opt_string("mask_mode")? {
        None => d.mask_mode,
        Some(name) => MaskMode::from_name(&name).ok_or_else(|| {
            s.reject(Invalid::new(
                "mask_mode",
                format!("expected carry or reset, found \"{name}\""),
            ))
        })?,
    };
    let group_size = s.opt_count("group_size")?;
    let whiten_advantages = s.bool("whiten_advantages", d.whiten_advantages)?;
    let (mut openrlhf_reward_clip, mut openrlhf_no_std_norm, mut openrlhf_kl) = (
        d.openrlhf_reward_clip,
        d.openrlhf_no_std_norm,
        d.openrlhf_kl,
    );
    if let Some(mut o) = s.subsection("openrlhf")? {
        if let Some(range) = o.opt_float_list("reward_clip")? {
            match range[..] {
                [lo, hi] if lo <= hi => openrlhf_reward_clip = (lo, hi),
                _ => {
                    let v: super::value::Value = range.iter().copied().collect();
                    return Err(o.type_error("reward_clip", "[low, high] with low ≤ high", &v));
                }
            }
        }
        openrlhf_no_std_norm = o.bool("no_std_norm", false)?;
        openrlhf_kl.coef = o.float("kl_coef", 0.0)?;
        if !openrlhf_kl.coef.is_finite() {
            return Err(o.reject(Invalid::new(
                "kl_coef",
                format!("expected a finite number, found {}", openrlhf_kl.coef),
            )));
        }
        if let Some(name) = o.opt_string("kl_estimator")? {
            openrlhf_kl.estimator = ApproxKl::from_name(&name).ok_or_else(|| {
                o.reject(Invalid::new(
                    "kl_estimator",
                    format!("expected k1, k2 or k3, found \"{name}\""),
                ))
            })?;
        }
        o.finish()?;
    }
    let mut trl_normalize_advantages = d.trl_normalize_advantages;
    if let Some(mut t) = s.subsection("trl")? {
        trl_normalize_advantages = t.bool("normalize_advantages", false)?;
        t.finish()?;
    }
    let mut nemo = d.nemo;
    let mut nemo_group_by = d.nemo_group_by;
    if let Some(mut n) = s.subsection("nemo")? {
        nemo.use_leave_one_out_baseline = n.bool("use_leave_one_out_baseline", true)?;
        nemo.normalize_rewards = n.bool("normalize_rewards", true)?;
        if let Some(name) = n.opt_string("group_by")? {
            nemo_group_by = NemoGroupBy::from_name(&name).ok_or_else(|| {
                n.reject(Invalid::new(
                    "group_by",
                    format!("expected uid or prompt_ids, found \"{name}\""),
                ))
            })?;
        }
        n.finish()?;
    }
    let mut skyrl_advantage_batch_normalize = d.skyrl_advantage_batch_normalize;
    if let Some(mut k) = s.subsection("skyrl")? {
        skyrl_advantage_batch_normalize = k.bool("advantage_batch_normalize", false)?;
        k.finish()?;
    }
    Ok(Extensions {
        convention,
        whiten_advantages,
        mask_mode,
        group_size,
        openrlhf_reward_clip,
        openrlhf_no_std_norm,
        trl_normalize_advantages,
        nemo,
        openrlhf_kl,
        skyrl_advantage_batch_normalize,
        nemo_group_by,
    })
}

/// The GRPO/RLOO family's members, as the note for another estimator under a convention
/// names them (checked against the declarations: [`Estimator::member`]).
const FAMILY_NAMES: &str = "grpo, drgrpo, grpo_batch_std, rloo and maxrl";

/// Combinations of the estimator, the convention and advcalc's keys that cannot work, and
/// notes for the ones that do nothing. `use_kl_in_reward`: verl's key, which the openrlhf_*
/// estimators refuse.
pub(crate) fn check(
    s: &Section<'_>,
    e: Estimator,
    x: &Extensions,
    gamma: f64,
    use_kl_in_reward: bool,
    notes: &mut Vec<String>,
) -> Result<()> {
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
        None => e.info().settings.to_vec(),
    };
    let d = Extensions::default();
    let set: [(&str, bool); 10] = [
        (
            "whiten_advantages",
            x.whiten_advantages != d.whiten_advantages,
        ),
        ("mask_mode", x.mask_mode != d.mask_mode),
        ("group_size", x.group_size.is_some()),
        (
            "openrlhf.reward_clip",
            x.openrlhf_reward_clip != d.openrlhf_reward_clip,
        ),
        (
            "openrlhf.no_std_norm",
            x.openrlhf_no_std_norm != d.openrlhf_no_std_norm,
        ),
        ("openrlhf.kl_coef", x.openrlhf_kl.coef != d.openrlhf_kl.coef),
        (
            "openrlhf.kl_estimator",
            x.openrlhf_kl.estimator != d.openrlhf_kl.estimator,
        ),
        ("trl.normalize_advantages", x.trl_normalize_advantages),
        (
            "skyrl.advantage_batch_normalize",
            x.skyrl_advantage_batch_normalize,
        ),
        ("nemo.group_by", x.nemo_group_by != d.nemo_group_by),
    ];
    let nemo = [
        (
            "nemo.use_leave_one_out_baseline",
            x.nemo.use_leave_one_out_baseline != d.nemo.use_leave_one_out_baseline,
        ),
        (
            "nemo.normalize_rewards",
            x.nemo.normalize_rewards != d.nemo.normalize_rewards,
        ),
    ];
    for (key, changed) in set.into_iter().chain(nemo) {
        if changed && !reads.contains(&key) {
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
}
