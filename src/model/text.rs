//! Values as text, the one conversion used wherever a column widens to string — in a team's
//! buffer, when reading older files under a widened schema, and in compaction — so a value's text
//! never depends on which values shared a flush: integers keep their exact digits, floats are
//! written as their shortest round-trip decimal without an exponent (`1.5`, `5`,
//! `0.0000001`), booleans as `true`/`false`.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use arrow::error::ArrowError;

/// The text of a float: shortest decimal that reads back as the same value (`-0` for -0.0),
/// no exponent.
pub fn float_text(f: f64) -> String {
    format!("{f}")
}

/// Whether an integer is within ±2^53, where float64 holds it (and every integer between it and
/// zero) exactly — so its float text is its digits, whatever it was stored with.
pub fn int_is_safe_in_float(i: i64) -> bool {
    i.unsigned_abs() <= 1 << 53
}

/// An array as Utf8 text by the rules above (other types through Arrow's cast).
pub fn to_text(a: &ArrayRef) -> Result<ArrayRef, ArrowError> {
    let mut b = StringBuilder::with_capacity(a.len(), a.len() * 8);
    match a.data_type() {
        DataType::Utf8 => return Ok(a.clone()),
        DataType::Int64 => {
            let mut buf = itoa::Buffer::new();
            for v in a.as_primitive::<Int64Type>() {
                b.append_option(v.map(|v| buf.format(v).to_string()));
            }
        }
        DataType::Float64 => {
            for v in a.as_primitive::<Float64Type>() {
                b.append_option(v.map(float_text));
            }
        }
        DataType::Boolean => {
            for v in a.as_boolean() {
                b.append_option(v.map(|v| if v { "true" } else { "false" }));
            }
        }
        _ => return cast(a, &DataType::Utf8),
    }
    Ok(Arc::new(b.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts() {
        assert_eq!(float_text(1.5), "1.5");
        assert_eq!(float_text(5.0), "5");
        assert_eq!(float_text(-0.0), "-0");
        assert_eq!(float_text(91343.24026397243), "91343.24026397243");
        assert_eq!(float_text(1e20), "100000000000000000000");
        assert_eq!(float_text(1e-7), "0.0000001");
        assert!(int_is_safe_in_float(1 << 53));
        assert!(!int_is_safe_in_float((1 << 53) + 1));
        assert!(!int_is_safe_in_float(i64::MAX));
        assert!(
            !int_is_safe_in_float(i64::MIN),
            "exact, but its float text is not its digits"
        );
        assert!(!int_is_safe_in_float(1 << 60));
        let a: ArrayRef = Arc::new(arrow::array::Int64Array::from(vec![
            Some(9223372036854775806),
            None,
        ]));
        let t = to_text(&a).unwrap();
        assert_eq!(t.as_string::<i32>().value(0), "9223372036854775806");
        assert!(t.is_null(1));
    }
}
