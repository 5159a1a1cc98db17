//! The stamps and fingerprints the engine computes, with a specified hash over a specified
//! encoding, so that they are the same on every build: another Rust release, another
//! machine, another thread count. A dataset's outputs record one (`advcalc.plan`) and
//! `--resume` compares it with a later run's, so a value here must never change unless what it
//! fingerprints does; the tests pin them to committed values.
//!
//! **Hash.** FNV-1a, 64 bits ([`fnv1a`]): offset basis `0xcbf29ce484222325`, prime
//! `0x100000001b3`; per byte, `h = (h ^ byte) · prime` (wrapping).
//!
//! **Encoding.** The bytes hashed are those of `estimators::fingerprint`'s encoding (never a
//! `Debug` rendering or a `Hash` derive, neither is specified), with the engine's step
//! constants encoded below.
//!
//! **What is fingerprinted.**
//!
//! - The configuration ([`config`]): FNV-1a over the UTF-8 bytes of [`Config::to_yaml`]
//!   (itself deterministic, and written into every output as `advcalc.config`).
//! - The step constants ([`constants`]) a pass ran with: [`Constants`].
//! - A dataset output's plan ([`plan`]; `Plan::fingerprint`, `advcalc.plan`): the
//!   configuration's fingerprint (`u64`), the rows' steps (a sequence of `Option<i64>`), the
//!   steps' constants (a sequence of [`StepConstants`], in the steps' order) and the
//!   estimator's [`EstimatorPlan`] restricted to the rows, without its `rows` field (the same rows
//!   elsewhere in the input give the same outputs): its `row_scalar`, then the estimator's own
//!   part ([`OwnPlan::fingerprint`]), then its `warnings`. The plan's first layout held every
//!   estimator's fields in one struct; the estimators of that layout encode its slots
//!   ([`V1`]), so that their values never change.
//!
//! [`Config::to_yaml`]: crate::config::Config::to_yaml
//! [`EstimatorPlan`]: crate::estimators::EstimatorPlan
//! [`OwnPlan::fingerprint`]: crate::estimators::OwnPlan::fingerprint
//! [`V1`]: crate::estimators::fingerprint::V1

use std::hash::Hasher;

use crate::config::Config;
use crate::estimators::AnyEstimatorPlan;
use crate::estimators::fingerprint::Encode;
use crate::pipeline::{Constants, StepConstants};

const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a 64 of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = Fnv1a::default();
    h.write(bytes);
    h.0
}

/// FNV-1a 64, fed in pieces.
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(OFFSET_BASIS)
    }
}

impl Hasher for Fnv1a {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(PRIME);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The fingerprint of a value: FNV-1a 64 of its encoding.
fn hash(value: &impl Encode) -> u64 {
    let mut h = Fnv1a::default();
    value.encode(&mut h);
    h.0
}

/// The configuration's fingerprint: FNV-1a 64 of its resolved YAML.
pub fn config(config: &Config) -> u64 {
    fnv1a(config.to_yaml().as_bytes())
}

/// The fingerprint of the step constants a pass ran with.
pub fn constants(constants: &Constants) -> u64 {
    hash(constants)
}

/// The fingerprint of what pass 2 computes some rows with (`Plan::fingerprint`): `plan`
/// is the estimator's plan restricted to them; its `rows` field is left out.
pub fn plan(
    config: u64,
    steps: &[Option<i64>],
    constants: &[StepConstants],
    plan: &AnyEstimatorPlan,
) -> u64 {
    let mut h = Fnv1a::default();
    (config, steps, constants).encode(&mut h);
    plan.fingerprint(&mut h);
    h.0
}

/// `beta`, `is_norm`.
impl Encode for StepConstants {
    fn encode<H: Hasher>(&self, h: &mut H) {
        let StepConstants { beta, is_norm } = self;
        beta.encode(h);
        is_norm.encode(h);
    }
}

/// `default`, `per_step`.
impl Encode for Constants {
    fn encode<H: Hasher>(&self, h: &mut H) {
        let Constants { default, per_step } = self;
        default.encode(h);
        per_step.encode(h);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::config::ConfigSources;
    use crate::data::GroupKey;
    use crate::estimators::EstimatorPlan;
    use crate::estimators::OwnPlan;
    use crate::estimators::fingerprint::V1;
    use crate::estimators::moments::Whitening;
    use crate::estimators::optimal_token_baseline::ColumnSums;

    // The values below are committed (computed once, and checked against an independent
    // implementation of the encoding): outputs written by earlier runs record such values
    // (`advcalc.plan`), and `--resume` redoes every output whose value differs. They must
    // never change; a change to the encoding or to the hash fails these tests.

    #[test]
    fn fnv1a_is_the_published_function() {
        // the FNV reference test vectors
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    /// Every slot of the plan's first layout filled at once (no estimator does): the plan the
    /// committed value was computed for, when one struct held every estimator's fields.
    #[derive(Debug, Clone, PartialEq)]
    struct AllSlots {
        whitening: BTreeMap<Option<i64>, Whitening>,
        otb_singleton: Vec<bool>,
        otb_zero_tail: Vec<Option<usize>>,
        columns: BTreeMap<(Option<i64>, GroupKey), ColumnSums>,
        nan_rows: usize,
    }

    impl OwnPlan for AllSlots {
        fn new(_: usize) -> Self {
            unreachable!("a test value")
        }
        fn restrict(&self, _: &[usize], _: &[Option<i64>]) -> Self {
            unreachable!("a test value")
        }
        fn write(&self, _: &mut crate::estimators::state::Written) {}
        fn read(_: &crate::estimators::state::Reading) -> crate::error::Result<Self> {
            unreachable!("a test value")
        }
        fn fingerprint<H: Hasher>(&self, rows: usize, h: &mut H) {
            V1 {
                whitening: Some(&self.whitening),
                otb: Some((&self.otb_singleton, &self.otb_zero_tail, &self.columns)),
                nan_rows: self.nan_rows,
            }
            .encode(rows, h);
        }
    }

    fn whitening() -> BTreeMap<Option<i64>, Whitening> {
        BTreeMap::from([(
            Some(3),
            Whitening {
                mean: 0.25,
                inv_std: 2.0,
            },
        )])
    }

    fn columns() -> BTreeMap<(Option<i64>, GroupKey), ColumnSums> {
        BTreeMap::from([(
            (Some(3), GroupKey::Str("q".into())),
            ColumnSums {
                num: vec![1.0, -0.0],
                den: vec![2.0, 3.5],
            },
        )])
    }

    fn sample_plan<P>(own: P) -> EstimatorPlan<P> {
        EstimatorPlan {
            rows: Some(vec![4, 5, 6]),
            row_scalar: vec![0.5, -1.25, f32::NAN],
            own,
            warnings: vec!["w".to_string()],
        }
    }

    fn all_slots() -> AllSlots {
        AllSlots {
            whitening: whitening(),
            otb_singleton: vec![false, true, false],
            otb_zero_tail: vec![None, Some(2), None],
            columns: columns(),
            nan_rows: 1,
        }
    }

    const CONFIG: u64 = 0x0123_4567_89ab_cdef;

    fn steps_and_constants() -> ([Option<i64>; 1], [StepConstants; 1]) {
        let constants = [StepConstants {
            beta: 0.001,
            is_norm: Some(1.5),
        }];
        ([Some(3)], constants)
    }

    /// [`super::plan`]'s hash for any plan part (the engine's plans are one estimator's).
    fn typed<P: OwnPlan>(plan: &EstimatorPlan<P>) -> u64 {
        let (steps, constants) = steps_and_constants();
        let mut h = Fnv1a::default();
        (CONFIG, &steps[..], &constants[..]).encode(&mut h);
        plan.fingerprint(&mut h);
        h.finish()
    }

    fn engine(plan: &AnyEstimatorPlan) -> u64 {
        let (steps, constants) = steps_and_constants();
        super::plan(CONFIG, &steps, &constants, plan)
    }

    #[test]
    fn the_plan_fingerprint_of_a_fixed_input_never_changes() {
        let plan = sample_plan(all_slots());
        assert_eq!(typed(&plan), 0xa73b_697c_cdc9_e510);
        // the rows are left out; any other field counts
        let elsewhere = EstimatorPlan {
            rows: Some(vec![7, 8, 9]),
            ..sample_plan(all_slots())
        };
        assert_eq!(typed(&elsewhere), typed(&plan));
        let other = sample_plan(AllSlots {
            nan_rows: 2,
            ..all_slots()
        });
        assert_ne!(typed(&other), typed(&plan));
    }

    /// Each estimator's own plan part encodes its slots of the first layout, the others
    /// empty: the fingerprints of the plans of that layout keep their values.
    #[test]
    fn each_plan_part_encodes_its_slots_of_the_first_layout() {
        use crate::estimators::moments::StepWhitening;
        use crate::estimators::opo::NanRows;
        use crate::estimators::optimal_token_baseline::{GroupColumns, OtbPlan};
        let none = AllSlots {
            whitening: BTreeMap::new(),
            otb_singleton: vec![false; 3],
            otb_zero_tail: vec![None; 3],
            columns: BTreeMap::new(),
            nan_rows: 0,
        };
        let grpo = AnyEstimatorPlan::RlooVectorized(sample_plan(()));
        assert_eq!(engine(&grpo), typed(&sample_plan(none.clone())));
        let gae = AnyEstimatorPlan::Gae(sample_plan(StepWhitening(whitening())));
        let slots = AllSlots {
            whitening: whitening(),
            ..none.clone()
        };
        assert_eq!(engine(&gae), typed(&sample_plan(slots)));
        let otb = OtbPlan {
            singleton: vec![false, true, false],
            zero_tail: vec![None, Some(2), None],
            columns: GroupColumns(columns()),
        };
        let slots = AllSlots {
            otb_singleton: otb.singleton.clone(),
            otb_zero_tail: otb.zero_tail.clone(),
            columns: columns(),
            ..none.clone()
        };
        let otb = AnyEstimatorPlan::OptimalTokenBaseline(sample_plan(otb));
        assert_eq!(engine(&otb), typed(&sample_plan(slots)));
        let opo = AnyEstimatorPlan::Opo(sample_plan(NanRows(1)));
        let slots = AllSlots {
            nan_rows: 1,
            ..none
        };
        assert_eq!(engine(&opo), typed(&sample_plan(slots)));
    }

    #[test]
    fn the_constants_fingerprint_of_a_fixed_input_never_changes() {
        let mut c = Constants::uniform(StepConstants {
            beta: 0.001,
            is_norm: None,
        });
        c.per_step.insert(
            None,
            StepConstants {
                beta: 0.002,
                is_norm: Some(f64::NAN),
            },
        );
        c.per_step.insert(
            Some(-1),
            StepConstants {
                beta: 0.0,
                is_norm: Some(1.0),
            },
        );
        assert_eq!(constants(&c), 0xbd5c_4c04_6b1a_be10);
        // a NaN's payload does not count
        c.per_step.get_mut(&None).unwrap().is_norm = Some(-f64::NAN);
        assert_eq!(constants(&c), 0xbd5c_4c04_6b1a_be10);
    }

    #[test]
    fn the_config_fingerprint_is_that_of_its_yaml() {
        let c = Config::load(&ConfigSources {
            estimator: Some("grpo"),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(config(&c), fnv1a(c.to_yaml().as_bytes()));
        // a fixed YAML text
        assert_eq!(
            fnv1a(b"algorithm:\n  adv_estimator: grpo\n"),
            0x17d3_d18b_2c85_f2d2
        );
    }
}
