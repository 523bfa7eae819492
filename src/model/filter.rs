//! The filter model (SPEC §3.1): a column, an operator and operands typed as the column, and its
//! evaluation with Arrow kernels — a row mask per batch (SQL semantics: a comparison with a null
//! cell is false) and a per-row-group "may match" from Parquet statistics, so row groups that
//! cannot match are never read. Reading filters out of a request's JSON is the download's job.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, Date32Array, Float64Array, Int64Array, Scalar, StringArray,
    TimestampMicrosecondArray, UInt64Array,
};
use arrow::compute::kernels::boolean::{and_kleene, or_kleene};
use arrow::compute::kernels::cmp::{eq, gt, gt_eq, lt, lt_eq, neq};
use arrow::compute::{cast, is_not_null, is_null};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;

use super::schema::ColumnType;

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
    /// The operator a request names (`eq`, `ne`, `lt`, `lte`, `gt`, `gte`, `in`, `is_null`,
    /// `not_null`).
    pub fn from_name(s: &str) -> Option<Op> {
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

/// One operand, of the filter column's type.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    /// A string column's operand.
    String(String),
    /// An int64 column's operand.
    Int64(i64),
    /// A float64 column's operand (`-0.0` compares as `0.0`; NaN equals nothing).
    Float64(f64),
    /// A boolean column's operand.
    Boolean(bool),
    /// A timestamp column's operand, µs since the epoch (UTC).
    Timestamp(i64),
    /// A date column's operand, days since 1970-01-01.
    Date(i32),
}

impl Operand {
    /// The operand as a one-element array of its column's Arrow type, as [`Filter::values`]
    /// holds it.
    pub fn into_array(self) -> ArrayRef {
        match self {
            Operand::String(s) => Arc::new(StringArray::from(vec![s])),
            Operand::Int64(i) => Arc::new(Int64Array::from(vec![i])),
            Operand::Float64(f) => sql_floats(&(Arc::new(Float64Array::from(vec![f])) as ArrayRef)),
            Operand::Boolean(b) => Arc::new(BooleanArray::from(vec![b])),
            Operand::Timestamp(t) => {
                Arc::new(TimestampMicrosecondArray::from(vec![t]).with_timezone("UTC"))
            }
            Operand::Date(d) => Arc::new(Date32Array::from(vec![d])),
        }
    }
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
