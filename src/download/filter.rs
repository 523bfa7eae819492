//! Download filters (SPEC §3.1) as requests write them: `[{"column", "op", "value"}]`, each
//! value read by the column's type into the filter model ([`crate::model::filter`]), which
//! evaluates them.

use arrow::array::ArrayRef;
use serde_json::Value;

use crate::model::Invalid;
use crate::model::filter::{Filter, Op, Operand};
use crate::model::schema::{Column, ColumnType};
use crate::model::time::{parse_date, parse_time};

fn bad(field: &str, message: String) -> Invalid {
    Invalid::new("invalid_filter", message).field(field)
}

/// Parses a filter list (`field` names it in errors, e.g. `filters`) against `columns`.
pub fn parse(list: &Value, columns: &[Column], field: &str) -> Result<Vec<Filter>, Invalid> {
    let Value::Array(items) = list else {
        return Err(bad(
            field,
            "filters must be an array of {column, op, value}".into(),
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let at = format!("{field}[{i}]");
            let column = item.get("column").and_then(Value::as_str).ok_or_else(|| {
                bad(&format!("{at}.column"), "each filter needs a \"column\" string".into())
            })?;
            let col = columns.iter().find(|c| c.name == column).ok_or_else(|| {
                Invalid::new("unknown_column", format!("filter column {column:?} is not a column of this element"))
                    .field(format!("{at}.column"))
            })?;
            let op_name = item.get("op").and_then(Value::as_str).unwrap_or("");
            let op = Op::from_name(op_name).ok_or_else(|| {
                bad(&format!("{at}.op"), format!("op {op_name:?} must be one of eq, ne, lt, lte, gt, gte, in, is_null, not_null"))
            })?;
            let value = item.get("value");
            let vfield = format!("{at}.value");
            let values = match op {
                Op::IsNull | Op::NotNull => Vec::new(),
                Op::In => match value {
                    Some(Value::Array(vs)) if !vs.is_empty() => {
                        vs.iter().map(|v| scalar(v, col.ty, &vfield)).collect::<Result<_, _>>()?
                    }
                    _ => return Err(bad(&vfield, "op \"in\" needs a non-empty array value".into())),
                },
                _ => match value {
                    Some(v) if !v.is_null() => vec![scalar(v, col.ty, &vfield)?],
                    _ => return Err(bad(&vfield, format!("op {op_name:?} needs a value (use is_null for nulls)"))),
                },
            };
            Ok(Filter { column: column.to_string(), ty: col.ty, op, values })
        })
        .collect()
}

/// A JSON value as a one-element array of the column type.
fn scalar(v: &Value, ty: ColumnType, field: &str) -> Result<ArrayRef, Invalid> {
    let wrong = || bad(field, format!("{v} is not a valid {} value", ty.as_str()));
    let operand = match ty {
        ColumnType::String => Operand::String(v.as_str().ok_or_else(wrong)?.to_string()),
        ColumnType::Int64 => Operand::Int64(
            v.as_i64()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                .ok_or_else(wrong)?,
        ),
        ColumnType::Float64 => Operand::Float64(
            v.as_f64()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                .ok_or_else(wrong)?,
        ),
        ColumnType::Boolean => Operand::Boolean(v.as_bool().ok_or_else(wrong)?),
        ColumnType::Timestamp => Operand::Timestamp(parse_time(v).ok_or_else(wrong)?),
        ColumnType::Date => Operand::Date(parse_date(v).ok_or_else(wrong)?),
    };
    Ok(operand.into_array())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow::array::{Array, Int64Array, StringArray, UInt64Array};
    use arrow::compute::cast;
    use arrow::datatypes::DataType;
    use arrow::record_batch::RecordBatch;
    use serde_json::json;

    use crate::model::filter::mask_all;

    fn cols() -> Vec<Column> {
        vec![
            Column {
                name: "n".into(),
                ty: ColumnType::Int64,
            },
            Column {
                name: "t".into(),
                ty: ColumnType::Timestamp,
            },
            Column {
                name: "s".into(),
                ty: ColumnType::String,
            },
        ]
    }

    #[test]
    fn parses_by_type_and_rejects_clearly() {
        let f = parse(&json!([{"column": "n", "op": "gte", "value": "5"}, {"column": "t", "op": "lt", "value": "2024-01-01T00:00:00Z"},
                              {"column": "s", "op": "in", "value": ["a", "b"]}, {"column": "s", "op": "is_null"}]), &cols(), "filters")
        .unwrap();
        assert_eq!(f.len(), 4);
        let err = |v: Value| parse(&v, &cols(), "filters").unwrap_err();
        assert_eq!(
            err(json!([{"column": "n", "op": "eq", "value": 1.5}]))
                .field
                .as_deref(),
            Some("filters[0].value")
        );
        assert_eq!(
            err(json!([{"column": "zz", "op": "eq", "value": 1}])).code,
            "unknown_column"
        );
        assert_eq!(
            err(json!([{"column": "n", "op": "like", "value": 1}]))
                .field
                .as_deref(),
            Some("filters[0].op")
        );
        assert_eq!(
            err(json!([{"column": "t", "op": "gt", "value": "yesterday"}])).code,
            "invalid_filter"
        );
        assert_eq!(
            err(json!([{"column": "s", "op": "in", "value": []}])).code,
            "invalid_filter"
        );
        assert_eq!(err(json!({"column": "s"})).code, "invalid_filter");
    }

    #[test]
    fn masks_follow_sql_null_semantics() {
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("n", arrow::datatypes::DataType::Int64, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![Arc::new(Int64Array::from(vec![Some(1), None, Some(7)]))],
        )
        .unwrap();
        let f = parse(
            &json!([{"column": "n", "op": "ne", "value": 1}]),
            &cols(),
            "f",
        )
        .unwrap();
        let m = mask_all(&f, &batch).unwrap().unwrap();
        assert_eq!(
            arrow::compute::filter(batch.column(0), &m).unwrap().len(),
            1,
            "null <> 1 is not true"
        );
        let f = parse(
            &json!([{"column": "n", "op": "in", "value": [7, 1]}]),
            &cols(),
            "f",
        )
        .unwrap();
        assert_eq!(
            arrow::compute::filter(batch.column(0), &mask_all(&f, &batch).unwrap().unwrap())
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn string_filters_work_on_columns_decoded_as_views() {
        let long = "a value longer than twelve bytes";
        for ty in [DataType::Utf8, DataType::Utf8View] {
            let col: ArrayRef = Arc::new(StringArray::from(vec![Some("a"), None, Some(long)]));
            let col = cast(&col, &ty).unwrap();
            let schema = Arc::new(arrow::datatypes::Schema::new(vec![
                arrow::datatypes::Field::new("s", ty.clone(), true),
            ]));
            let batch = RecordBatch::try_new(schema, vec![col]).unwrap();
            let mask = |v: Value| {
                let f = parse(&v, &cols(), "f").unwrap();
                let m = mask_all(&f, &batch).unwrap().unwrap();
                (0..3)
                    .map(|i| m.is_valid(i) && m.value(i))
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                mask(json!([{"column": "s", "op": "eq", "value": long}])),
                [false, false, true],
                "{ty}"
            );
            assert_eq!(
                mask(json!([{"column": "s", "op": "in", "value": ["a", "b"]}])),
                [true, false, false],
                "{ty}"
            );
            assert_eq!(
                mask(json!([{"column": "s", "op": "lt", "value": "b"}])),
                [true, false, true],
                "{ty}"
            );
        }
    }

    #[test]
    fn statistics_prune_row_groups() {
        let f = &parse(
            &json!([{"column": "n", "op": "gt", "value": 10}]),
            &cols(),
            "f",
        )
        .unwrap()[0];
        let mins: ArrayRef = Arc::new(Int64Array::from(vec![Some(0), Some(5), None]));
        let maxes: ArrayRef = Arc::new(Int64Array::from(vec![Some(9), Some(20), None]));
        let nulls = UInt64Array::from(vec![0, 0, 0]);
        assert_eq!(
            f.may_match(&mins, &maxes, &nulls, &[10, 10, 10]),
            vec![false, true, true]
        );
    }
}
