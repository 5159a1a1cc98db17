//! The tests' one numeric oracle. Unit tests reach it as `crate::test_support`; the
//! integration tests include this same file by path from `tests/common/mod.rs`, so there is
//! a single implementation of "close enough".
//!
//! The rules, for every comparison of computed numbers with expected ones:
//! - the lengths must agree (a missing or extra value is a failure, never skipped);
//! - NaN is a value: NaN matches only NaN, and a number never matches NaN (whichever side
//!   the NaN is on);
//! - an infinity matches only the same infinity;
//! - finite values match when `|actual − expected| ≤ atol + rtol·|expected|`.
//!
//! A failure names what was compared, the first mismatching index, both values and the
//! tolerance.
#![allow(dead_code)] // each test binary uses its own subset

/// Whether `actual` matches `expected` under the rules above.
pub fn values_close(actual: f64, expected: f64, atol: f64, rtol: f64) -> bool {
    if actual.is_nan() || expected.is_nan() {
        return actual.is_nan() && expected.is_nan();
    }
    if actual.is_infinite() || expected.is_infinite() {
        return actual == expected;
    }
    (actual - expected).abs() <= atol + rtol * expected.abs()
}

/// Compare `actual` with `expected` element-wise; `Err` describes the first mismatch (or
/// the length difference).
pub fn check_close<A, E>(
    what: &str,
    actual: &[A],
    expected: &[E],
    atol: f64,
    rtol: f64,
) -> Result<(), String>
where
    A: Into<f64> + Copy,
    E: Into<f64> + Copy,
{
    let a: Vec<f64> = actual.iter().map(|&x| x.into()).collect();
    let e: Vec<f64> = expected.iter().map(|&x| x.into()).collect();
    let shown = || {
        if a.len().max(e.len()) <= 16 {
            format!("\n  actual:   {a:?}\n  expected: {e:?}")
        } else {
            String::new()
        }
    };
    if a.len() != e.len() {
        return Err(format!(
            "{what}: {} values, expected {}{}",
            a.len(),
            e.len(),
            shown()
        ));
    }
    let bad: Vec<usize> = (0..a.len())
        .filter(|&i| !values_close(a[i], e[i], atol, rtol))
        .collect();
    match bad.first() {
        None => Ok(()),
        Some(&i) => Err(format!(
            "{what}: index {i}: {} vs expected {} (tolerance {:e} + {:e}·|e|; {} of {} differ){}",
            a[i],
            e[i],
            atol,
            rtol,
            bad.len(),
            a.len(),
            shown()
        )),
    }
}

/// [`check_close`] over rows: the row counts must agree, then each row (its length too).
pub fn check_rows_close<A, E, RA, RE>(
    what: &str,
    actual: &[RA],
    expected: &[RE],
    atol: f64,
    rtol: f64,
) -> Result<(), String>
where
    A: Into<f64> + Copy,
    E: Into<f64> + Copy,
    RA: AsRef<[A]>,
    RE: AsRef<[E]>,
{
    if actual.len() != expected.len() {
        return Err(format!(
            "{what}: {} rows, expected {}",
            actual.len(),
            expected.len()
        ));
    }
    for (row, (a, e)) in actual.iter().zip(expected).enumerate() {
        check_close(
            &format!("{what} row {row}"),
            a.as_ref(),
            e.as_ref(),
            atol,
            rtol,
        )?;
    }
    Ok(())
}

/// Panic with [`check_close`]'s message unless `actual` matches `expected`.
#[track_caller]
pub fn assert_close<A, E>(what: &str, actual: &[A], expected: &[E], atol: f64, rtol: f64)
where
    A: Into<f64> + Copy,
    E: Into<f64> + Copy,
{
    if let Err(message) = check_close(what, actual, expected, atol, rtol) {
        panic!("{message}");
    }
}

/// Panic with [`check_rows_close`]'s message unless every row matches.
#[track_caller]
pub fn assert_rows_close<A, E, RA, RE>(
    what: &str,
    actual: &[RA],
    expected: &[RE],
    atol: f64,
    rtol: f64,
) where
    A: Into<f64> + Copy,
    E: Into<f64> + Copy,
    RA: AsRef<[A]>,
    RE: AsRef<[E]>,
{
    if let Err(message) = check_rows_close(what, actual, expected, atol, rtol) {
        panic!("{message}");
    }
}
