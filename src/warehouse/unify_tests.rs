//! [`join`] and [`align_widened`] against the way they replace: every batch's schema merged
//! by [`TableSchema::merge`], each batch aligned to it, and the aligned batches concatenated.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray,
};
use arrow::compute::concat_batches;
use arrow::datatypes::{Field, Schema};

use super::*;
use crate::model::schema::TYPE_KEY;

/// The merge, alignment and concatenation `join` replaced, as they were written.
fn reference(batches: &[RecordBatch]) -> RecordBatch {
    let mut schema = TableSchema::default();
    let mut as_text = HashSet::new();
    for b in batches {
        schema.merge(&TableSchema::from_arrow(&b.schema()));
        for (field, col) in b.schema().fields().iter().zip(b.columns()) {
            let inexact = match field.data_type() {
                DataType::Utf8 => true,
                DataType::Int64 => col
                    .as_primitive::<Int64Type>()
                    .iter()
                    .any(|v| v.is_some_and(|v| !text::int_is_safe_in_float(v))),
                _ => false,
            };
            if inexact {
                as_text.insert(field.name().clone());
            }
        }
    }
    let target = schema.to_arrow_keeping_text(&as_text);
    let aligned: Vec<RecordBatch> = batches.iter().map(|b| align(b, &target).unwrap()).collect();
    concat_batches(&target, &aligned).unwrap()
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A column of `rows` values of kind `kind` (with nulls), and its field named `name`.
fn column(rng: &mut Rng, name: &str, kind: u64, rows: usize) -> (Field, ArrayRef) {
    let null = |rng: &mut Rng| rng.below(5) == 0;
    match kind {
        0 => {
            let big = rng.below(4) == 0; // integers float64 cannot hold exactly
            let a: Int64Array = (0..rows)
                .map(|i| {
                    (!null(rng)).then(|| {
                        if big {
                            (1 << 53) + 1 + i as i64
                        } else {
                            i as i64
                        }
                    })
                })
                .collect();
            (Field::new(name, DataType::Int64, true), Arc::new(a))
        }
        1 => {
            let a: Float64Array = (0..rows)
                .map(|i| (!null(rng)).then_some(i as f64 / 3.0))
                .collect();
            (Field::new(name, DataType::Float64, true), Arc::new(a))
        }
        2 | 3 => {
            let a: StringArray = (0..rows)
                .map(|i| (!null(rng)).then(|| format!("{name}-{i}-{}", "x".repeat(i % 7))))
                .collect();
            let field = if kind == 3 {
                TableSchema::float_as_text(name) // a float64 column kept as text
            } else {
                Field::new(name, DataType::Utf8, true)
            };
            (field, Arc::new(a))
        }
        4 => {
            let a: BooleanArray = (0..rows)
                .map(|i| (!null(rng)).then_some(i % 2 == 0))
                .collect();
            (Field::new(name, DataType::Boolean, true), Arc::new(a))
        }
        _ => {
            let a: TimestampMicrosecondArray = (0..rows)
                .map(|i| (!null(rng)).then_some(1_700_000_000_000_000 + i as i64))
                .collect();
            let ty = ColumnType::Timestamp.arrow();
            (
                Field::new(name, ty, true),
                Arc::new(a.with_data_type(ColumnType::Timestamp.arrow())),
            )
        }
    }
}

/// A batch of some of eight columns, each of a kind that may differ from batch to batch, and
/// sometimes a slice of a larger batch (its arrays start past their buffers' first value).
fn batch(rng: &mut Rng) -> RecordBatch {
    let rows = rng.below(40) as usize;
    let extra = rng.below(3) as usize;
    let mut fields = Vec::new();
    let mut arrays = Vec::new();
    for c in 0..8 {
        if rng.below(3) == 0 {
            continue;
        }
        let name = format!("c{c}");
        // Most columns keep one kind; some change it, as widening does.
        let kind = if rng.below(4) == 0 {
            rng.below(6)
        } else {
            c % 6
        };
        let (field, array) = column(rng, &name, kind, rows + extra);
        fields.push(field);
        arrays.push(array);
    }
    let whole = RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        arrays,
        &RecordBatchOptions::new().with_row_count(Some(rows + extra)),
    )
    .unwrap();
    whole.slice(extra, rows)
}

#[test]
fn join_gives_what_merging_aligning_and_concatenating_gave() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..300 {
        let n = 1 + rng.below(6) as usize;
        let mut batches: Vec<RecordBatch> = Vec::new();
        for _ in 0..n {
            let next = match (batches.last(), rng.below(3)) {
                // The schema of the one before, shared or an equal copy (a run of requests).
                (Some(last), 0) => last.slice(0, rng.below(last.num_rows() as u64 + 1) as usize),
                (Some(last), 1) => RecordBatch::try_new(
                    Arc::new(last.schema().as_ref().clone()),
                    last.columns().to_vec(),
                )
                .unwrap_or_else(|_| last.clone()),
                _ => batch(&mut rng),
            };
            batches.push(next);
        }
        let want = reference(&batches);
        let got = join(&batches).unwrap();
        assert_eq!(got.schema(), want.schema(), "round {round}: schema");
        assert_eq!(got, want, "round {round}: values");
        let aligned = align_widened(&batches).unwrap();
        let again = concat_batches(&want.schema(), &aligned).unwrap();
        assert_eq!(again, want, "round {round}: align_widened");
    }
}

#[test]
fn a_float_column_holding_large_integers_is_kept_as_text() {
    let ints: ArrayRef = Arc::new(Int64Array::from(vec![Some(9_007_199_254_740_993), None]));
    let floats: ArrayRef = Arc::new(Float64Array::from(vec![1.5]));
    let a = RecordBatch::try_from_iter([("n", ints)]).unwrap();
    let b = RecordBatch::try_from_iter([("n", floats)]).unwrap();
    let joined = join(&[a, b]).unwrap();
    let field = joined.schema().field(0).clone();
    assert_eq!(field.data_type(), &DataType::Utf8);
    assert_eq!(
        field.metadata().get(TYPE_KEY).map(String::as_str),
        Some("float64")
    );
    let n = joined.column(0).as_string::<i32>();
    assert_eq!(
        (n.value(0), n.is_null(1), n.value(2)),
        ("9007199254740993", true, "1.5")
    );
}

/// Batches no buffer builds: two columns of one name (the second's integers still keep the
/// column as text), and a column of a type no table has under a known name (an error, as the
/// flush would report it, not a column of nulls).
#[test]
fn odd_batches_join_as_the_flush_aligns_them() {
    let x = |ty: DataType| Field::new("x", ty, true);
    let twice = RecordBatch::try_new(
        Arc::new(Schema::new(vec![x(DataType::Float64), x(DataType::Int64)])),
        vec![
            Arc::new(Float64Array::from(vec![1.5])),
            Arc::new(Int64Array::from(vec![9_007_199_254_740_993])),
        ],
    )
    .unwrap();
    let floats = RecordBatch::try_new(
        Arc::new(Schema::new(vec![x(DataType::Float64)])),
        vec![Arc::new(Float64Array::from(vec![2.5]))],
    )
    .unwrap();
    let batches = [twice, floats.clone()];
    assert_eq!(join(&batches).unwrap(), reference(&batches));

    let list =
        arrow::array::ListArray::from_iter_primitive::<Int64Type, _, _>(vec![Some(vec![Some(1)])]);
    let odd = RecordBatch::try_new(
        Arc::new(Schema::new(vec![x(list.data_type().clone())])),
        vec![Arc::new(list)],
    )
    .unwrap();
    let ints = RecordBatch::try_from_iter([("x", Arc::new(Int64Array::from(vec![7])) as ArrayRef)])
        .unwrap();
    assert!(join(&[ints, odd]).is_err(), "as aligning it fails");
}
