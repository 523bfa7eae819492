//! Download filters (SPEC §3.1): `[{"column", "op", "value"}]` with values parsed by the column's
//! type. Each filter evaluates to a row mask with Arrow kernels (SQL semantics: a comparison with
//! a null cell is false), and to a per-row-group "may match" from Parquet statistics, so row
//! groups that cannot match are never read.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int64Array, Scalar, StringArray,
    TimestampMicrosecondArray, UInt64Array,
};
use arrow::compute::kernels::boolean::{and_kleene, or_kleene};
use arrow::compute::kernels::cmp::{eq, gt, gt_eq, lt, lt_eq, neq};
use arrow::compute::{cast, is_not_null, is_null};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use serde_json::Value;

use crate::error::ApiError;
use crate::model::schema::{Column, ColumnType};
use crate::model::time::parse_time;

/// Comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `=`
    Eq,
    /// `<>`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Lte,
    /// `>`
    Gt,
    /// `>=`
    Gte,
    /// Any of a list.
    In,
    /// Null.
    IsNull,
    /// Not null.
    NotNull,
}

impl Op {
    fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "eq" => Op::Eq,
            "ne" => Op::Ne,
            "lt" => Op::Lt,
            "lte" => Op::Lte,
            "gt" => Op::Gt,
            "gte" => Op::Gte,
            "in" => Op::In,
            "is_null" => Op::IsNull,
            "not_null" => Op::NotNull,
            _ => return None,
        })
    }
}

/// One parsed filter.
#[derive(Debug, Clone)]
pub struct Filter {
    /// Column name.
    pub column: String,
    /// Its type.
    pub ty: ColumnType,
    /// Operator.
    pub op: Op,
    /// Operand(s), each a one-element array of the column's Arrow type.
    pub values: Vec<ArrayRef>,
}

fn bad(field: &str, message: String) -> ApiError {
    ApiError::bad_request("invalid_filter", message).field(field)
}

/// Parses a filter list (`field` names it in errors, e.g. `filters`) against `columns`.
pub fn parse(list: &Value, columns: &[Column], field: &str) -> Result<Vec<Filter>, ApiError> {
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
                ApiError::bad_request("unknown_column", format!("filter column {column:?} is not a column of this element"))
                    .field(format!("{at}.column"))
            })?;
            let op_name = item.get("op").and_then(Value::as_str).unwrap_or("");
            let op = Op::parse(op_name).ok_or_else(|| {
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
fn scalar(v: &Value, ty: ColumnType, field: &str) -> Result<ArrayRef, ApiError> {
    let wrong = || bad(field, format!("{v} is not a valid {} value", ty.as_str()));
    Ok(match ty {
        ColumnType::String => Arc::new(StringArray::from(vec![v.as_str().ok_or_else(wrong)?])),
        ColumnType::Int64 => {
            let i = v
                .as_i64()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                .ok_or_else(wrong)?;
            Arc::new(Int64Array::from(vec![i]))
        }
        ColumnType::Float64 => {
            let f = v
                .as_f64()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                .ok_or_else(wrong)?;
            sql_floats(&(Arc::new(Float64Array::from(vec![f])) as ArrayRef))
        }
        ColumnType::Boolean => Arc::new(BooleanArray::from(vec![v.as_bool().ok_or_else(wrong)?])),
        ColumnType::Timestamp => {
            let t = parse_time(v).ok_or_else(wrong)?;
            Arc::new(TimestampMicrosecondArray::from(vec![t]).with_timezone("UTC"))
        }
    })
}

/// Float64 values as SQL compares them: `-0.0` is `0.0`, and NaN (never equal to anything,
/// never ordered) becomes null so every comparison with it is false. Other types unchanged.
fn sql_floats(a: &ArrayRef) -> ArrayRef {
    let Some(f) = a.as_any().downcast_ref::<Float64Array>() else {
        return a.clone();
    };
    let needs = f.values().iter().any(|v| *v == 0.0 || v.is_nan());
    if !needs {
        return a.clone();
    }
    Arc::new(
        f.iter()
            .map(|v| v.filter(|x| !x.is_nan()).map(|x| x + 0.0))
            .collect::<Float64Array>(),
    )
}

/// NaN rows of a Float64 column (they are unequal to every value).
fn nan_rows(a: &ArrayRef) -> Option<BooleanArray> {
    let f = a.as_any().downcast_ref::<Float64Array>()?;
    f.values()
        .iter()
        .any(|v| v.is_nan())
        .then(|| f.iter().map(|v| Some(v.is_some_and(f64::is_nan))).collect())
}

fn compare(
    op: Op,
    left: &dyn arrow::array::Datum,
    right: &dyn arrow::array::Datum,
) -> Result<BooleanArray, ArrowError> {
    match op {
        Op::Eq | Op::In => eq(left, right),
        Op::Ne => neq(left, right),
        Op::Lt => lt(left, right),
        Op::Lte => lt_eq(left, right),
        Op::Gt => gt(left, right),
        Op::Gte => gt_eq(left, right),
        Op::IsNull | Op::NotNull => unreachable!("no operand"),
    }
}

impl Filter {
    /// Rows of `batch` (which has the filter's column, typed as the table) that match.
    pub fn mask(&self, batch: &RecordBatch) -> Result<BooleanArray, ArrowError> {
        let col = batch.column_by_name(&self.column).ok_or_else(|| {
            ArrowError::SchemaError(format!("filter column {} not read", self.column))
        })?;
        match self.op {
            Op::IsNull => is_null(col),
            Op::NotNull => is_not_null(col),
            op => {
                let sql = sql_floats(col);
                let mut acc: Option<BooleanArray> = None;
                for v in &self.values {
                    // A NaN operand (null after `sql_floats`) equals nothing, so every non-null
                    // row differs from it and no comparison with it is true.
                    let m = if v.data_type() == &arrow::datatypes::DataType::Float64 && v.is_null(0)
                    {
                        match op {
                            Op::Ne => is_not_null(col)?,
                            _ => BooleanArray::from(vec![false; col.len()]),
                        }
                    } else {
                        // Strings decoded as views compare with a view operand.
                        let v = match sql.data_type() {
                            t @ arrow::datatypes::DataType::Utf8View => cast(v, t)?,
                            _ => v.clone(),
                        };
                        compare(op, &sql, &Scalar::new(v))?
                    };
                    acc = Some(match acc {
                        None => m,
                        Some(a) => or_kleene(&a, &m)?,
                    });
                }
                let mut m = acc.expect("at least one operand");
                if op == Op::Ne
                    && let Some(nan) = nan_rows(col)
                {
                    m = or_kleene(&m, &nan)?;
                }
                Ok(m)
            }
        }
    }

    /// Per row group: may any row match, given min/max/null-count statistics of this column?
    /// Unknown statistics (nulls, or a file typed differently from the table) mean "maybe".
    pub fn may_match(
        &self,
        mins: &ArrayRef,
        maxes: &ArrayRef,
        nulls: &UInt64Array,
        rows: &[u64],
    ) -> Vec<bool> {
        let n = rows.len();
        let maybe = vec![true; n];
        match self.op {
            Op::IsNull => {
                return (0..n)
                    .map(|i| nulls.is_null(i) || nulls.value(i) > 0)
                    .collect();
            }
            Op::NotNull => {
                return (0..n)
                    .map(|i| nulls.is_null(i) || nulls.value(i) < rows[i])
                    .collect();
            }
            _ => {}
        }
        // Strings may have truncated statistics; only prune on exact types. Float statistics
        // leave NaN out, and NaN differs from every value: `ne` on floats never prunes.
        let want = self.ty.arrow();
        if self.ty == ColumnType::String
            || (self.ty == ColumnType::Float64 && self.op == Op::Ne)
            || mins.data_type() != &want
            || maxes.data_type() != &want
        {
            return maybe;
        }
        let (mins, maxes) = (&sql_floats(mins), &sql_floats(maxes));
        let test = |v: &ArrayRef| -> Result<BooleanArray, ArrowError> {
            let s = Scalar::new(v.clone());
            match self.op {
                Op::Eq | Op::In => and_kleene(&lt_eq(mins, &s)?, &gt_eq(maxes, &s)?),
                Op::Lt => lt(mins, &s),
                Op::Lte => lt_eq(mins, &s),
                Op::Gt => gt(maxes, &s),
                Op::Gte => gt_eq(maxes, &s),
                // Only a group whose every value equals v (and has no nulls) is ruled out.
                Op::Ne => arrow::compute::not(&and_kleene(&eq(mins, &s)?, &eq(maxes, &s)?)?),
                Op::IsNull | Op::NotNull => unreachable!(),
            }
        };
        let mut any = vec![false; n];
        for v in &self.values {
            let Ok(m) = test(v) else { return maybe };
            for (i, slot) in any.iter_mut().enumerate() {
                *slot |= m.is_null(i) || m.value(i);
            }
        }
        any
    }
}

/// All filters' masks ANDed (`None` when there are no filters).
pub fn mask_all(
    filters: &[Filter],
    batch: &RecordBatch,
) -> Result<Option<BooleanArray>, ArrowError> {
    let mut acc: Option<BooleanArray> = None;
    for f in filters {
        let m = f.mask(batch)?;
        acc = Some(match acc {
            None => m,
            Some(a) => and_kleene(&a, &m)?,
        });
    }
    Ok(acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::DataType;
    use serde_json::json;

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
