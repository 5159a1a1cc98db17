//! How the commands write numbers for a reader: inspect's and compare's terminal tables and
//! findings, and the report's page and figures. Each style is one function here, so a table
//! and the message that quotes it write the same number the same way. JSON is not written
//! here: it carries the exact values.

/// A number for a human: up to 4 decimals without trailing zeros, scientific when tiny or
/// huge (inspect's tables and every finding's message).
pub fn num(x: f64) -> String {
    if x == 0.0 {
        return "0".into(); // -0.0 too: a sign on zero tells a reader nothing
    }
    if x.is_nan() || x.is_infinite() {
        return format!("{x}");
    }
    let a = x.abs();
    if !(1e-3..1e7).contains(&a) {
        return format!("{x:.3e}");
    }
    let s = format!("{x:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.into() }
}

/// A fraction as a percentage with one decimal (inspect's tables and every finding's
/// message).
pub fn pct(f: f64) -> String {
    format!("{:.1}%", 100.0 * f)
}

/// Six decimals, and no `-0.000000` for a tiny negative mean (compare's table).
pub fn fixed6(x: f64) -> String {
    let s = format!("{x:.6}");
    if s == "-0.000000" {
        "0.000000".into()
    } else {
        s
    }
}

/// A fraction as a percentage with two decimals (compare's table).
pub fn pct2(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

/// Four significant digits, without trailing zeros; exponent form for very small or large
/// (the report's page and figures).
pub fn sig(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    if !x.is_finite() {
        return x.to_string();
    }
    let mag = x.abs().log10().floor() as i32;
    if !(-4..6).contains(&mag) {
        return format!("{x:.3e}");
    }
    let decimals = (3 - mag).max(0) as usize;
    let s = format!("{x:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A fraction as a percentage to four significant digits (the report's page and figures).
pub fn sig_pct(x: f64) -> String {
    format!("{}%", sig(x * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_for_humans() {
        assert_eq!(num(0.0), "0");
        assert_eq!(num(-0.0), "0");
        assert_eq!(num(1.0), "1");
        assert_eq!(num(-2.5), "-2.5");
        assert_eq!(num(1.0 / 3.0), "0.3333");
        assert_eq!(num(1e-5), "1.000e-5");
        assert_eq!(pct(0.125), "12.5%");
    }

    #[test]
    fn four_significant_digits() {
        assert_eq!(sig(1234.5678), "1235");
        assert_eq!(sig(0.000123456), "0.0001235");
        assert_eq!(sig(-2.5), "-2.5");
        assert_eq!(sig(1.0), "1");
        assert_eq!(sig(1.5e-7), "1.500e-7");
    }
}
