//! The sort key [`super::group_first::GroupFirstExec`] compares each row with its group's best
//! by. In general the row's `ORDER BY` values encoded in Arrow's row format (bytes that compare
//! in the sort's directions and null order; one `memcmp` per row). For the common case — one
//! integer or timestamp column, as in "the latest event per user" — one `u128` per group instead:
//! the class (nulls first, values, nulls last) above the value with its sign bit flipped (and
//! all bits flipped when descending), so an integer comparison is the sort's.

use arrow::array::{Array, ArrayRef, Int64Array};
use arrow::compute::{SortOptions, cast};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::row::{RowConverter, Rows, SortField};
use datafusion::common::Result as DfResult;
use datafusion::physical_expr::LexOrdering;

/// Every group's best key so far, and how keys are made.
pub enum SortKeys {
    /// Row-format bytes per group (empty: no row yet; an encoded key is never empty).
    Rows {
        converter: RowConverter,
        best: Vec<Box<[u8]>>,
    },
    /// One integer-like column: an order-preserving `u128` per group ([`NONE`]: no row yet).
    Int {
        options: SortOptions,
        best: Vec<u128>,
    },
}

/// One batch's keys.
pub enum BatchKeys {
    Rows(Rows),
    Int(Int64Array),
}

/// No row yet (above every key [`int_key`] makes).
const NONE: u128 = u128::MAX;

impl SortKeys {
    /// Keys for `order` over rows of `schema`.
    pub fn new(schema: &SchemaRef, order: &LexOrdering) -> DfResult<Self> {
        if let [only] = order.as_ref() {
            let t = only.expr.data_type(schema)?;
            if as_int64(&t) {
                return Ok(SortKeys::Int {
                    options: only.options,
                    best: Vec::new(),
                });
            }
        }
        let fields = order
            .iter()
            .map(|s| {
                Ok(SortField::new_with_options(
                    s.expr.data_type(schema)?,
                    s.options,
                ))
            })
            .collect::<DfResult<Vec<_>>>()?;
        Ok(SortKeys::Rows {
            converter: RowConverter::new(fields)?,
            best: Vec::new(),
        })
    }

    /// The keys of a batch whose `ORDER BY` values are `columns`.
    pub fn batch(&self, columns: &[ArrayRef]) -> DfResult<BatchKeys> {
        Ok(match self {
            SortKeys::Rows { converter, .. } => {
                BatchKeys::Rows(converter.convert_columns(columns)?)
            }
            SortKeys::Int { .. } => {
                let ints = cast(&columns[0], &DataType::Int64)?;
                let ints = ints
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .expect("cast to Int64")
                    .clone();
                BatchKeys::Int(ints)
            }
        })
    }

    /// Makes room for `groups` groups; new ones have no row yet.
    pub fn grow(&mut self, groups: usize) {
        match self {
            SortKeys::Rows { best, .. } => best.resize_with(groups, Default::default),
            SortKeys::Int { best, .. } => best.resize(groups, NONE),
        }
    }

    /// Whether row `row` of `keys` sorts strictly before `group`'s best (or the group has no
    /// row yet); if so it becomes the group's best.
    #[inline]
    pub fn improve(&mut self, group: usize, keys: &BatchKeys, row: usize) -> bool {
        match (self, keys) {
            (SortKeys::Int { options, best }, BatchKeys::Int(ints)) => {
                let value = ints.is_valid(row).then(|| ints.value(row));
                let key = int_key(value, *options);
                let slot = &mut best[group];
                if key < *slot {
                    *slot = key;
                    return true;
                }
                false
            }
            (SortKeys::Rows { best, .. }, BatchKeys::Rows(rows)) => {
                let key = rows.row(row);
                let key = key.as_ref();
                let slot = &mut best[group];
                if !slot.is_empty() && key >= &**slot {
                    return false;
                }
                if slot.len() == key.len() {
                    slot.copy_from_slice(key);
                } else {
                    *slot = key.into();
                }
                true
            }
            _ => unreachable!("a batch's keys are made by the same SortKeys"),
        }
    }

    /// Bytes held.
    pub fn size(&self) -> usize {
        match self {
            SortKeys::Rows { converter, best } => {
                converter.size() + best.iter().map(|k| k.len() + 16).sum::<usize>()
            }
            SortKeys::Int { best, .. } => best.capacity() * 16,
        }
    }
}

/// Whether values of `t` cast to int64 without loss, keeping their order.
fn as_int64(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::Timestamp(_, _)
    )
}

/// An order-preserving key of one int64 value (`None`: null) under `options`.
#[inline]
fn int_key(value: Option<i64>, options: SortOptions) -> u128 {
    match value {
        None if options.nulls_first => 0,
        None => 2 << 64,
        Some(v) => {
            let k = (v as u64) ^ (1 << 63);
            let k = if options.descending { !k } else { k };
            (1 << 64) | u128::from(k)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_keys_order_as_the_sort_does() {
        let values = [
            None,
            Some(i64::MIN),
            Some(-1),
            Some(0),
            Some(7),
            Some(i64::MAX),
        ];
        for descending in [false, true] {
            for nulls_first in [false, true] {
                let options = SortOptions {
                    descending,
                    nulls_first,
                };
                let mut by_key = values.to_vec();
                by_key.sort_by_key(|v| int_key(*v, options));
                let mut by_sort = values.to_vec();
                by_sort.sort_by(|a, b| match (a, b) {
                    (None, None) => std::cmp::Ordering::Equal,
                    (None, _) if nulls_first => std::cmp::Ordering::Less,
                    (None, _) => std::cmp::Ordering::Greater,
                    (_, None) if nulls_first => std::cmp::Ordering::Greater,
                    (_, None) => std::cmp::Ordering::Less,
                    (Some(x), Some(y)) if descending => y.cmp(x),
                    (Some(x), Some(y)) => x.cmp(y),
                });
                assert_eq!(by_key, by_sort, "{options:?}");
                assert!(values.iter().all(|v| int_key(*v, options) < NONE));
            }
        }
    }
}
