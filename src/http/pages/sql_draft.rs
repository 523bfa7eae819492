//! The settings page's "New SQL table" form as it is shown (SPEC §3.4): the query, canvas and
//! name as typed — kept through a preview or a refusal, so nothing has to be typed again — and
//! either the refusal in the service's words or the preview's first rows. Cells become plain
//! text here and the template escapes them; timestamps read as downloads write them (RFC 3339,
//! UTC).

use arrow::array::Array;
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};

use crate::accounts::sql_elements::SqlPreview;

/// Most rows a preview shows.
pub const PREVIEW_ROWS: usize = 20;

/// `2012-12-02T00:30:08.276Z`: chrono's `%.f` writes 0, 3, 6 or 9 digits, as the downloads do.
const TIMESTAMP: &str = "%Y-%m-%dT%H:%M:%S%.fZ";

/// What the form holds and shows.
#[derive(Debug, Default)]
pub(super) struct SqlDraft {
    /// The chosen canvas's id (none chosen: the first).
    pub(super) canvas: String,
    /// The element name typed, if any.
    pub(super) name: String,
    /// The query typed.
    pub(super) sql: String,
    /// Why the last preview or save was refused, as a sentence.
    pub(super) error: Option<String>,
    /// The last preview's rows.
    pub(super) preview: Option<PreviewTable>,
}

/// A preview's first rows as text.
#[derive(Debug)]
pub(super) struct PreviewTable {
    /// The output columns.
    pub(super) columns: Vec<PreviewColumn>,
    /// Each row's cells in column order.
    pub(super) rows: Vec<Vec<PreviewCell>>,
    /// The query returns more rows than these.
    pub(super) more: bool,
}

/// An output column of a preview.
#[derive(Debug)]
pub(super) struct PreviewColumn {
    pub(super) name: String,
    /// Its warehouse type (`int64`, `string`, …), as listings show it.
    pub(super) ty: &'static str,
    /// Numbers, aligned right.
    pub(super) numeric: bool,
}

/// A value of a preview.
#[derive(Debug, PartialEq)]
pub(super) struct PreviewCell {
    /// Its text; `None` is a null.
    pub(super) text: Option<String>,
    /// A number, aligned right.
    pub(super) numeric: bool,
}

impl PreviewTable {
    /// The preview's rows as text.
    pub(super) fn of(preview: &SqlPreview) -> Result<PreviewTable, ArrowError> {
        let options = FormatOptions::default()
            .with_timestamp_tz_format(Some(TIMESTAMP))
            .with_timestamp_format(Some(TIMESTAMP));
        let mut rows = Vec::new();
        for batch in &preview.batches {
            rows.extend(cells(batch, &options)?);
        }
        Ok(PreviewTable {
            columns: preview
                .schema
                .columns
                .iter()
                .map(|c| PreviewColumn {
                    name: c.name.clone(),
                    ty: c.ty.as_str(),
                    numeric: c.ty.arrow().is_numeric(),
                })
                .collect(),
            rows,
            more: preview.more,
        })
    }
}

/// Every row of `batch` as text cells.
fn cells(
    batch: &RecordBatch,
    options: &FormatOptions,
) -> Result<Vec<Vec<PreviewCell>>, ArrowError> {
    let columns = batch.columns();
    let formatters = columns
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), options))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((0..batch.num_rows())
        .map(|row| {
            columns
                .iter()
                .zip(&formatters)
                .map(|(column, text)| PreviewCell {
                    text: (!column.is_null(row)).then(|| text.value(row).to_string()),
                    numeric: column.data_type().is_numeric(),
                })
                .collect()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::schema::{Column, ColumnType, TableSchema};
    use arrow::array::{Float64Array, StringArray, TimestampMicrosecondArray};

    #[test]
    fn cells_are_text_with_nulls_kept_and_timestamps_as_downloads_write_them() {
        let schema = TableSchema {
            columns: vec![
                Column {
                    name: "who".into(),
                    ty: ColumnType::String,
                },
                Column {
                    name: "total".into(),
                    ty: ColumnType::Float64,
                },
                Column {
                    name: "at".into(),
                    ty: ColumnType::Timestamp,
                },
            ],
        };
        let batch = RecordBatch::try_new(
            schema.to_arrow(),
            vec![
                std::sync::Arc::new(StringArray::from(vec![Some("<b>Ada</b>"), None])),
                std::sync::Arc::new(Float64Array::from(vec![Some(52.45), Some(7.0)])),
                std::sync::Arc::new(
                    TimestampMicrosecondArray::from(vec![Some(1_354_408_208_276_000), None])
                        .with_timezone("UTC"),
                ),
            ],
        )
        .unwrap();
        let table = PreviewTable::of(&SqlPreview {
            schema,
            batches: vec![batch],
            more: true,
        })
        .unwrap();
        let types: Vec<_> = table.columns.iter().map(|c| c.ty).collect();
        assert_eq!(types, ["string", "float64", "timestamp"]);
        let texts: Vec<Vec<Option<&str>>> = table
            .rows
            .iter()
            .map(|row| row.iter().map(|c| c.text.as_deref()).collect())
            .collect();
        assert_eq!(
            texts,
            [
                vec![
                    Some("<b>Ada</b>"),
                    Some("52.45"),
                    Some("2012-12-02T00:30:08.276Z")
                ],
                vec![None, Some("7.0"), None],
            ]
        );
        let numeric: Vec<bool> = table.rows[0].iter().map(|c| c.numeric).collect();
        assert_eq!(numeric, [false, true, false]);
        assert!(table.more);
    }
}
