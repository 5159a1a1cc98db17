//! The shared oracle (`src/test_support.rs`) must fail when it should: a test whose
//! comparison cannot fail proves nothing.

mod common;

use common::{assert_close, assert_rows_close, check_close, check_rows_close, values_close};

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;

#[test]
fn nan_is_a_value() {
    assert!(values_close(NAN, NAN, 0.0, 0.0));
    assert!(!values_close(NAN, 1.0, 1e9, 1e9), "NaN against a number");
    assert!(!values_close(1.0, NAN, 1e9, 1e9), "a number against NaN");
    assert!(!values_close(NAN, INF, 1e9, 1e9));
    check_close("x", &[1.0f32, f32::NAN], &[1.0, NAN], 0.0, 0.0).unwrap();
    assert!(check_close("x", &[f32::NAN], &[0.0f64], 1.0, 1.0).is_err());
    assert!(check_close("x", &[0.0f32], &[NAN], 1.0, 1.0).is_err());
}

#[test]
fn infinities_match_only_themselves() {
    assert!(values_close(INF, INF, 0.0, 0.0));
    assert!(values_close(-INF, -INF, 0.0, 0.0));
    assert!(!values_close(INF, -INF, 1e9, 1e9));
    assert!(!values_close(INF, f64::MAX, 1e9, 1e9));
    assert!(!values_close(f64::MAX, INF, 1e9, 1e9));
}

#[test]
fn tolerance_is_absolute_plus_relative_to_the_expected_value() {
    // 1e-6 + 1e-3·|100| = 0.100001
    assert!(values_close(100.1, 100.0, 1e-6, 1e-3));
    assert!(!values_close(100.2, 100.0, 1e-6, 1e-3));
    // relative to the expected value, not the actual one
    assert!(!values_close(100.0, 0.0, 0.0, 1.0));
    assert!(values_close(0.0, 0.5, 0.0, 1.0));
    // zero tolerance: exact
    assert!(values_close(0.25, 0.25, 0.0, 0.0));
    assert!(!values_close(0.25, 0.25 + 1e-16, 0.0, 0.0));
}

#[test]
fn lengths_are_checked() {
    let e = check_close("adv", &[1.0f32], &[1.0f64, 2.0], 1.0, 1.0).unwrap_err();
    assert!(e.contains("adv: 1 values, expected 2"), "{e}");
    assert!(check_close("adv", &[1.0f32, 2.0], &[1.0f64], 1.0, 1.0).is_err());
    assert!(check_close::<f32, f64>("empty", &[], &[], 0.0, 0.0).is_ok());
    let rows = check_rows_close("m", &[vec![1.0f32]], &[vec![1.0f64], vec![]], 0.0, 0.0);
    assert!(rows.unwrap_err().contains("m: 1 rows, expected 2"));
    let row = check_rows_close(
        "m",
        &[vec![1.0f32], vec![]],
        &[vec![1.0f64], vec![0.0]],
        0.0,
        0.0,
    );
    assert!(row.unwrap_err().contains("m row 1: 0 values, expected 1"));
}

#[test]
fn the_message_names_what_and_the_first_mismatch() {
    let e = check_close(
        "returns",
        &[0.0f32, 1.0, 5.0, 9.0],
        &[0.0, 1.0, 2.0, 3.0],
        0.1,
        0.0,
    )
    .unwrap_err();
    assert!(e.starts_with("returns: index 2: 5 vs expected 2"), "{e}");
    assert!(e.contains("2 of 4 differ"), "{e}");
    let e = check_rows_close("adv", &[[0.0f32], [7.0]], &[[0.0f64], [0.0]], 0.0, 0.0).unwrap_err();
    assert!(e.starts_with("adv row 1: index 0: 7 vs expected 0"), "{e}");
}

#[test]
#[should_panic(expected = "grpo: index 1: NaN vs expected 0.5")]
fn assert_close_panics_on_nan() {
    assert_close("grpo", &[0.5f32, f32::NAN], &[0.5, 0.5], 1e-6, 1e-6);
}

#[test]
#[should_panic(expected = "rows: 2 values, expected 3")]
fn assert_close_panics_on_a_short_slice() {
    assert_close("rows", &[0.5f64, 0.5], &[0.5, 0.5, 0.5], 1.0, 1.0);
}

#[test]
#[should_panic(expected = "adv row 0: index 1")]
fn assert_rows_close_panics_on_a_mismatch() {
    assert_rows_close("adv", &[vec![1.0f32, 2.0]], &[[1.0f64, 2.5]], 1e-3, 1e-3);
}
