//! Which of a query's predicates the table reader can apply itself: `column <op> literal`
//! (either side), `IS [NOT] NULL` and `IN (literals)` on string, int64, boolean and timestamp
//! columns, turned into the download's [`Filter`]s. The reader prunes row groups by statistics
//! and drops rows with them; DataFusion still checks every predicate afterwards (they are
//! pushed down as inexact), so a predicate the reader skips costs time, never correctness.
//! Float columns are left to DataFusion: it orders NaN above every number, the filter model
//! treats NaN as equal to nothing.

use arrow::datatypes::Schema;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};

use crate::model::filter::{Filter, Op, Operand};
use crate::model::schema::ColumnType;

/// The reader filter equivalent to `expr` over `schema`, when there is one.
pub fn to_filter(expr: &Expr, schema: &Schema) -> Option<Filter> {
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (column, value, op) = match (left.as_ref(), right.as_ref()) {
                (Expr::Column(c), Expr::Literal(v, _)) => (&c.name, v, compare(*op)?),
                (Expr::Literal(v, _), Expr::Column(c)) => (&c.name, v, flip(compare(*op)?)),
                _ => return None,
            };
            let ty = pushable(schema, column)?;
            Some(Filter {
                column: column.clone(),
                ty,
                op,
                values: vec![operand(value, ty)?.into_array()],
            })
        }
        Expr::IsNull(inner) | Expr::IsNotNull(inner) => {
            let Expr::Column(c) = inner.as_ref() else {
                return None;
            };
            let op = match expr {
                Expr::IsNull(_) => Op::IsNull,
                _ => Op::NotNull,
            };
            Some(Filter {
                column: c.name.clone(),
                ty: pushable(schema, &c.name)?,
                op,
                values: Vec::new(),
            })
        }
        Expr::InList(InList {
            expr,
            list,
            negated: false,
        }) => {
            let Expr::Column(c) = expr.as_ref() else {
                return None;
            };
            let ty = pushable(schema, &c.name)?;
            let values = list
                .iter()
                .map(|e| match e {
                    Expr::Literal(v, _) => operand(v, ty).map(Operand::into_array),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?;
            (!values.is_empty()).then(|| Filter {
                column: c.name.clone(),
                ty,
                op: Op::In,
                values,
            })
        }
        _ => None,
    }
}

/// The column's warehouse type, if the reader may filter on it.
fn pushable(schema: &Schema, column: &str) -> Option<ColumnType> {
    let field = schema.field_with_name(column).ok()?;
    match ColumnType::from_arrow(field.data_type())? {
        ColumnType::Float64 => None,
        ty => Some(ty),
    }
}

fn compare(op: Operator) -> Option<Op> {
    Some(match op {
        Operator::Eq => Op::Eq,
        Operator::NotEq => Op::Ne,
        Operator::Lt => Op::Lt,
        Operator::LtEq => Op::Lte,
        Operator::Gt => Op::Gt,
        Operator::GtEq => Op::Gte,
        _ => return None,
    })
}

/// `literal <op> column` as `column <op'> literal`.
fn flip(op: Op) -> Op {
    match op {
        Op::Lt => Op::Gt,
        Op::Lte => Op::Gte,
        Op::Gt => Op::Lt,
        Op::Gte => Op::Lte,
        other => other,
    }
}

/// A non-null literal of exactly the column's type (after DataFusion's coercion).
fn operand(value: &ScalarValue, ty: ColumnType) -> Option<Operand> {
    Some(match (value, ty) {
        (
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)),
            ColumnType::String,
        ) => Operand::String(s.clone()),
        (ScalarValue::Int64(Some(i)), ColumnType::Int64) => Operand::Int64(*i),
        (ScalarValue::Boolean(Some(b)), ColumnType::Boolean) => Operand::Boolean(*b),
        (ScalarValue::TimestampMicrosecond(Some(t), _), ColumnType::Timestamp) => {
            Operand::Timestamp(*t)
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{DataType, Field};
    use datafusion::prelude::{col, lit};

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("s", DataType::Utf8, true),
            Field::new("i", DataType::Int64, true),
            Field::new("f", DataType::Float64, true),
        ])
    }

    #[test]
    fn simple_predicates_become_reader_filters() {
        let s = schema();
        let f = to_filter(&col("i").gt(lit(5i64)), &s).unwrap();
        assert_eq!((f.column.as_str(), f.op), ("i", Op::Gt));
        let f = to_filter(&lit(5i64).lt(col("i")), &s).unwrap();
        assert_eq!(f.op, Op::Gt, "flipped");
        let f = to_filter(&col("s").in_list(vec![lit("a"), lit("b")], false), &s).unwrap();
        assert_eq!((f.op, f.values.len()), (Op::In, 2));
        assert_eq!(to_filter(&col("s").is_null(), &s).unwrap().op, Op::IsNull);
    }

    #[test]
    fn what_the_reader_cannot_do_stays_with_datafusion() {
        let s = schema();
        assert!(to_filter(&col("f").gt(lit(1.0f64)), &s).is_none(), "floats");
        assert!(to_filter(&col("i").gt(lit("5")), &s).is_none(), "mistyped");
        assert!(
            to_filter(&col("i").eq(col("i")), &s).is_none(),
            "two columns"
        );
        assert!(
            to_filter(&col("s").in_list(vec![lit("a")], true), &s).is_none(),
            "NOT IN"
        );
        assert!(to_filter(&col("i").gt(lit(ScalarValue::Int64(None))), &s).is_none());
    }
}
