//! `$name` parameters: the download body's `"params": {"name": value}` turned into values of
//! the type the query uses each placeholder as (`WHERE revenue > $min` makes `$min` a float64).
//! A JSON string is parsed as that type (so timestamps and big numbers pass as strings), a
//! number or boolean is cast to it; a placeholder whose type the planner could not infer takes
//! the JSON value's own type. A missing parameter, or a value that does not fit, is
//! [`SqlError::Params`].

use std::collections::HashMap;

use arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::LogicalPlan;
use serde_json::Value;

use super::error::SqlError;

/// `plan` with every placeholder replaced by its value from `given`.
pub fn bind(
    plan: LogicalPlan,
    given: &serde_json::Map<String, Value>,
) -> Result<LogicalPlan, SqlError> {
    let wanted = plan
        .get_parameter_types()
        .map_err(|e| SqlError::Params(e.find_root().to_string()))?;
    if wanted.is_empty() {
        return Ok(plan);
    }
    let mut values: HashMap<String, ScalarValue> = HashMap::with_capacity(wanted.len());
    let mut names: Vec<&String> = wanted.keys().collect();
    names.sort();
    for id in names {
        let Some(name) = id.strip_prefix('$').filter(|n| n.parse::<usize>().is_err()) else {
            return Err(SqlError::Params(format!(
                "placeholder {id}: parameters are named ($name), not numbered"
            )));
        };
        let Some(value) = given.get(name) else {
            return Err(SqlError::Params(format!(
                "missing parameter {name:?} (the query uses {id}); pass it in \"params\""
            )));
        };
        let scalar = typed(value, wanted[id].as_ref())
            .map_err(|e| SqlError::Params(format!("parameter {name:?}: {e}")))?;
        values.insert(name.to_string(), scalar);
    }
    plan.with_param_values(values)
        .map_err(|e| SqlError::Params(e.find_root().to_string()))
}

/// The placeholders `plan` uses, without the `$`, sorted.
pub fn names(plan: &LogicalPlan) -> Vec<String> {
    let mut out: Vec<String> = plan
        .get_parameter_types()
        .map(|m| {
            m.into_keys()
                .map(|k| k.trim_start_matches('$').to_string())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// `value` as a scalar of type `ty` (or of its own type when `ty` is unknown).
fn typed(value: &Value, ty: Option<&DataType>) -> Result<ScalarValue, String> {
    let own = match value {
        Value::Null => ScalarValue::Null,
        Value::Bool(b) => ScalarValue::Boolean(Some(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => ScalarValue::Int64(Some(i)),
            None => ScalarValue::Float64(n.as_f64()),
        },
        Value::String(s) => ScalarValue::Utf8(Some(s.clone())),
        Value::Array(_) | Value::Object(_) => {
            return Err("must be a string, number, boolean or null".into());
        }
    };
    let Some(ty) = ty else {
        return Ok(own);
    };
    match value {
        Value::Null => ScalarValue::try_from(ty).map_err(|e| e.find_root().to_string()),
        Value::String(s) => ScalarValue::try_from_string(s.clone(), ty)
            .map_err(|_| format!("{s:?} is not a valid {ty}")),
        _ => own
            .cast_to(ty)
            .map_err(|_| format!("{value} is not a valid {ty}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_take_the_type_of_their_use() {
        let ts = DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, Some("UTC".into()));
        let v = typed(&Value::String("2024-01-02T00:00:00Z".into()), Some(&ts)).unwrap();
        assert!(matches!(v, ScalarValue::TimestampMicrosecond(Some(_), _)));
        let v = typed(&serde_json::json!(5), Some(&DataType::Float64)).unwrap();
        assert_eq!(v, ScalarValue::Float64(Some(5.0)));
        assert!(typed(&serde_json::json!("x"), Some(&DataType::Int64)).is_err());
        assert!(typed(&serde_json::json!([1]), None).is_err());
        assert_eq!(
            typed(&serde_json::json!("a"), None).unwrap(),
            ScalarValue::Utf8(Some("a".into()))
        );
    }
}
