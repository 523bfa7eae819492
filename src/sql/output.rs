//! A query's result as the download encoders take it: every column mapped onto one of the five
//! warehouse types or `date` (SPEC §3.4). Integers → int64; floats, and decimals of at most 15
//! digits → float64; wider decimals → their exact text; timestamps of any unit and zone → µs
//! UTC; naive timestamps read as UTC; dates → date (days, sent as `YYYY-MM-DD`); lists, structs
//! and maps → their JSON text; times, durations, intervals and binary → text; string views and
//! large strings → strings; a column of nulls → string.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions, new_null_array};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::util::display::FormatOptions;

use crate::model::schema::{Column, ColumnType, TableSchema};

/// The warehouse type a result column of type `dt` is sent as.
pub fn column_type(dt: &DataType) -> ColumnType {
    use DataType::*;
    match dt {
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 => ColumnType::Int64,
        Float16 | Float32 | Float64 => ColumnType::Float64,
        Decimal32(p, _) | Decimal64(p, _) | Decimal128(p, _) | Decimal256(p, _) if *p <= 15 => {
            ColumnType::Float64
        }
        Boolean => ColumnType::Boolean,
        Timestamp(_, _) => ColumnType::Timestamp,
        Date32 | Date64 => ColumnType::Date,
        Dictionary(_, value) => column_type(value),
        _ => ColumnType::String,
    }
}

/// The warehouse schema of a result whose Arrow schema is `schema`; refuses two output columns
/// with one name (a download row is an object keyed by column name).
pub fn warehouse_schema(schema: &Schema) -> Result<TableSchema, String> {
    let mut columns: Vec<Column> = Vec::with_capacity(schema.fields().len());
    for f in schema.fields() {
        if columns.iter().any(|c| &c.name == f.name()) {
            return Err(format!(
                "the query returns two columns named {:?}; give one of them another name with AS",
                f.name()
            ));
        }
        columns.push(Column {
            name: f.name().clone(),
            ty: column_type(f.data_type()),
        });
    }
    Ok(TableSchema { columns })
}

/// `batch` with every column cast to its warehouse type, under `target` (from
/// [`TableSchema::to_arrow`] of [`warehouse_schema`]).
pub fn to_warehouse(batch: &RecordBatch, target: &SchemaRef) -> Result<RecordBatch, ArrowError> {
    let rows = batch.num_rows();
    let columns: Vec<ArrayRef> = batch
        .columns()
        .iter()
        .zip(target.fields())
        .map(|(col, field)| convert(col, field, rows))
        .collect::<Result<_, _>>()?;
    RecordBatch::try_new_with_options(
        target.clone(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )
}

fn convert(col: &ArrayRef, field: &Arc<Field>, rows: usize) -> Result<ArrayRef, ArrowError> {
    let want = field.data_type();
    if col.data_type() == want {
        return Ok(col.clone());
    }
    if col.data_type() == &DataType::Null {
        return Ok(new_null_array(want, rows));
    }
    // Never a silent null: a value that does not fit (a u64 above i64::MAX) is an error.
    let strict = CastOptions {
        safe: false,
        format_options: FormatOptions::default(),
    };
    match col.data_type() {
        // Nested values as JSON text; what JSON cannot hold (binary inside) as arrow prints it.
        DataType::List(_)
        | DataType::LargeList(_)
        | DataType::FixedSizeList(_, _)
        | DataType::Struct(_)
        | DataType::Map(_, _)
            if want == &DataType::Utf8 =>
        {
            json_text(col).or_else(|_| display_text(col))
        }
        _ => cast_with_options(col, want, &strict),
    }
}

/// Each value as JSON text (`[1,2]`, `{"a":1,"b":null}`), nulls kept: the column is written as
/// JSON lines of one-key objects, `{"v":…}`, and each line's value cut out.
fn json_text(col: &ArrayRef) -> Result<ArrayRef, ArrowError> {
    let field = Field::new("v", col.data_type().clone(), true);
    let batch = RecordBatch::try_new(Arc::new(Schema::new(vec![field])), vec![col.clone()])?;
    let mut lines = Vec::with_capacity(col.len() * 16);
    let mut writer = arrow::json::WriterBuilder::new()
        .with_explicit_nulls(true)
        .build::<_, arrow::json::writer::LineDelimited>(&mut lines);
    writer.write(&batch)?;
    writer.finish()?;
    drop(writer);
    let text = std::str::from_utf8(&lines).map_err(|e| ArrowError::JsonError(e.to_string()))?;
    let values: arrow::array::StringArray = text
        .lines()
        .enumerate()
        .map(|(i, line)| {
            let value = line
                .strip_prefix("{\"v\":")
                .and_then(|l| l.strip_suffix('}'))
                .ok_or_else(|| ArrowError::JsonError(format!("unexpected JSON line {line}")))?;
            Ok((!col.is_null(i)).then_some(value))
        })
        .collect::<Result<_, ArrowError>>()?;
    if arrow::array::Array::len(&values) != col.len() {
        return Err(ArrowError::JsonError(
            "one JSON line per value expected".into(),
        ));
    }
    Ok(Arc::new(values))
}

/// Each value's display text (as arrow prints it), nulls kept.
fn display_text(col: &ArrayRef) -> Result<ArrayRef, ArrowError> {
    let options = FormatOptions::default();
    let formatter = arrow::util::display::ArrayFormatter::try_new(col.as_ref(), &options)?;
    let values: arrow::array::StringArray = (0..col.len())
        .map(|i| (!col.is_null(i)).then(|| formatter.value(i).to_string()))
        .collect();
    Ok(Arc::new(values))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        Array, Date32Array, Decimal128Array, Int32Array, ListArray, StringArray, StructArray,
    };
    use arrow::datatypes::Int64Type;

    #[test]
    fn result_types_map_onto_warehouse_types() {
        let schema = Schema::new(vec![
            Field::new("n", DataType::Int32, true),
            Field::new("d", DataType::Date32, true),
            Field::new("small", DataType::Decimal128(10, 2), true),
            Field::new("wide", DataType::Decimal128(38, 2), true),
        ]);
        let ws = warehouse_schema(&schema).unwrap();
        let types: Vec<_> = ws.columns.iter().map(|c| c.ty).collect();
        assert_eq!(
            types,
            [
                ColumnType::Int64,
                ColumnType::Date,
                ColumnType::Float64,
                ColumnType::String
            ]
        );
        let batch = RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(Int32Array::from(vec![Some(7)])),
                Arc::new(Date32Array::from(vec![Some(19_723)])),
                Arc::new(
                    Decimal128Array::from(vec![Some(1234)])
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ),
                Arc::new(
                    Decimal128Array::from(vec![Some(123_456_789_012_345_678_901_234_567i128)])
                        .with_precision_and_scale(38, 2)
                        .unwrap(),
                ),
            ],
        )
        .unwrap();
        let out = to_warehouse(&batch, &ws.to_arrow()).unwrap();
        let text = |i: usize| {
            out.column(i)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap()
                .value(0)
                .to_string()
        };
        assert_eq!(
            out.column(1).as_ref(),
            &Date32Array::from(vec![Some(19_723)])
        );
        assert_eq!(text(3), "1234567890123456789012345.67");
        assert!(!out.column(2).is_null(0));
    }

    #[test]
    fn nested_values_are_sent_as_json_text() {
        let list: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
            Some(vec![Some(1), None, Some(3)]),
            None,
            Some(vec![]),
        ]));
        let names: ArrayRef = Arc::new(StringArray::from(vec![
            Some("a \"quoted\" name"),
            None,
            Some("c"),
        ]));
        let record: ArrayRef = Arc::new(StructArray::from(vec![
            (Arc::new(Field::new("name", DataType::Utf8, true)), names),
            (
                Arc::new(Field::new("tags", list.data_type().clone(), true)),
                list.clone(),
            ),
        ]));
        let schema = Schema::new(vec![
            Field::new("list", list.data_type().clone(), true),
            Field::new("record", record.data_type().clone(), true),
        ]);
        let ws = warehouse_schema(&schema).unwrap();
        assert!(ws.columns.iter().all(|c| c.ty == ColumnType::String));
        let batch = RecordBatch::try_new(Arc::new(schema), vec![list, record]).unwrap();
        let out = to_warehouse(&batch, &ws.to_arrow()).unwrap();
        let texts = |i: usize| -> Vec<Option<String>> {
            let a = out
                .column(i)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            a.iter().map(|v| v.map(str::to_string)).collect()
        };
        assert_eq!(
            texts(0),
            [Some("[1,null,3]".into()), None, Some("[]".into())]
        );
        let records = texts(1);
        let first: serde_json::Value =
            serde_json::from_str(records[0].as_deref().unwrap()).unwrap();
        assert_eq!(
            first,
            serde_json::json!({"name": "a \"quoted\" name", "tags": [1, null, 3]})
        );
        assert_eq!(records[1].as_deref(), Some(r#"{"name":null,"tags":null}"#));
    }

    #[test]
    fn duplicate_output_names_are_refused() {
        let schema = Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("a", DataType::Utf8, true),
        ]);
        assert!(warehouse_schema(&schema).unwrap_err().contains("AS"));
    }
}
