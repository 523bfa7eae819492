//! Column types, their Arrow forms, and widening (SPEC §4.2): int64 + float64 → float64;
//! anything + string → string; boolean + number → string. Table schemas only ever widen.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

/// Field metadata key naming a column's warehouse type when its stored Arrow type differs: a
/// float64 column holding integers that float64 cannot represent exactly is stored as their text
/// (so widening it to string later keeps every digit), and read back as float64.
pub const TYPE_KEY: &str = "stowage:type";

/// The five warehouse column types, and `date`, which only a query's result has (SPEC §3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColumnType {
    /// UTF-8 text.
    String,
    /// 64-bit signed integer.
    Int64,
    /// 64-bit float.
    Float64,
    /// true/false.
    Boolean,
    /// Microseconds since the epoch, UTC.
    Timestamp,
    /// A calendar day, as days since 1970-01-01. Never a warehouse table's type: what is
    /// ingested or imported as a date is stored as a timestamp at 00:00 UTC (SPEC §3.2); only
    /// an SQL element's result column is a date.
    Date,
}

impl ColumnType {
    /// The name used in the catalog and in download `meta`.
    pub fn as_str(self) -> &'static str {
        match self {
            ColumnType::String => "string",
            ColumnType::Int64 => "int64",
            ColumnType::Float64 => "float64",
            ColumnType::Boolean => "boolean",
            ColumnType::Timestamp => "timestamp",
            ColumnType::Date => "date",
        }
    }

    /// Parses [`ColumnType::as_str`].
    pub fn parse(s: &str) -> Option<ColumnType> {
        Some(match s {
            "string" => ColumnType::String,
            "int64" => ColumnType::Int64,
            "float64" => ColumnType::Float64,
            "boolean" => ColumnType::Boolean,
            "timestamp" => ColumnType::Timestamp,
            "date" => ColumnType::Date,
            _ => return None,
        })
    }

    /// The Arrow type stored in Parquet and read back.
    pub fn arrow(self) -> DataType {
        match self {
            ColumnType::String => DataType::Utf8,
            ColumnType::Int64 => DataType::Int64,
            ColumnType::Float64 => DataType::Float64,
            ColumnType::Boolean => DataType::Boolean,
            ColumnType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            ColumnType::Date => DataType::Date32,
        }
    }

    /// The warehouse type of an Arrow type, for the types stowage writes.
    pub fn from_arrow(dt: &DataType) -> Option<ColumnType> {
        Some(match dt {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => ColumnType::String,
            DataType::Int64 | DataType::Int32 | DataType::Int16 | DataType::Int8 => {
                ColumnType::Int64
            }
            DataType::Float64 | DataType::Float32 => ColumnType::Float64,
            DataType::Boolean => ColumnType::Boolean,
            DataType::Timestamp(_, _) => ColumnType::Timestamp,
            _ => return None,
        })
    }

    /// The type of a stored column: its [`TYPE_KEY`] where it has one, else its Arrow type's.
    pub fn of_field(field: &Field) -> Option<ColumnType> {
        field
            .metadata()
            .get(TYPE_KEY)
            .and_then(|t| ColumnType::parse(t))
            .or_else(|| ColumnType::from_arrow(field.data_type()))
    }

    /// The narrowest type that holds values of both `self` and `other` without loss.
    pub fn widen(self, other: ColumnType) -> ColumnType {
        use ColumnType::*;
        match (self, other) {
            (a, b) if a == b => a,
            (Int64, Float64) | (Float64, Int64) => Float64,
            _ => String,
        }
    }
}

/// One column of a table schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Warehouse name.
    pub name: String,
    /// Current (widest) type.
    pub ty: ColumnType,
}

/// An ordered list of columns; new columns append, existing ones widen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableSchema {
    /// In table order.
    pub columns: Vec<Column>,
}

impl TableSchema {
    /// Finds a column.
    pub fn get(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// Merges `other` in: unknown columns append in their order, known ones widen.
    /// Returns whether anything changed.
    pub fn merge(&mut self, other: &TableSchema) -> bool {
        let mut changed = false;
        for col in &other.columns {
            match self.columns.iter_mut().find(|c| c.name == col.name) {
                Some(existing) => {
                    let w = existing.ty.widen(col.ty);
                    if w != existing.ty {
                        existing.ty = w;
                        changed = true;
                    }
                }
                None => {
                    self.columns.push(col.clone());
                    changed = true;
                }
            }
        }
        changed
    }

    /// The schema of an Arrow schema (columns of unknown types are left out).
    pub fn from_arrow(schema: &Schema) -> TableSchema {
        TableSchema {
            columns: schema
                .fields()
                .iter()
                .filter_map(|f| {
                    ColumnType::of_field(f).map(|ty| Column {
                        name: f.name().clone(),
                        ty,
                    })
                })
                .collect(),
        }
    }

    /// A float64 column stored as text (see [`TYPE_KEY`]).
    pub fn float_as_text(name: &str) -> Field {
        Field::new(name, DataType::Utf8, true).with_metadata(std::collections::HashMap::from([(
            TYPE_KEY.to_string(),
            ColumnType::Float64.as_str().to_string(),
        )]))
    }

    /// The Arrow schema of a file written from parts with this merged schema: a float64 column
    /// named in `as_text` (some part stores it as text, or holds integers float64 cannot hold
    /// exactly) is stored as text ([`TableSchema::float_as_text`]), as a flush stores it.
    pub fn to_arrow_keeping_text(&self, as_text: &std::collections::HashSet<String>) -> SchemaRef {
        Arc::new(Schema::new(
            self.columns
                .iter()
                .map(|c| {
                    if c.ty == ColumnType::Float64 && as_text.contains(&c.name) {
                        TableSchema::float_as_text(&c.name)
                    } else {
                        Field::new(&c.name, c.ty.arrow(), true)
                    }
                })
                .collect::<Vec<_>>(),
        ))
    }

    /// The Arrow schema (every column nullable).
    pub fn to_arrow(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.columns
                .iter()
                .map(|c| Field::new(&c.name, c.ty.arrow(), true))
                .collect::<Vec<_>>(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::ColumnType::*;
    use super::*;

    #[test]
    fn widening_rules() {
        assert_eq!(Int64.widen(Float64), Float64);
        assert_eq!(Float64.widen(Int64), Float64);
        assert_eq!(Int64.widen(String), String);
        assert_eq!(Boolean.widen(Int64), String);
        assert_eq!(Boolean.widen(Boolean), Boolean);
    }

    #[test]
    fn merge_appends_and_widens() {
        let col = |n: &str, ty| Column { name: n.into(), ty };
        let mut a = TableSchema {
            columns: vec![col("x", Int64), col("y", Boolean)],
        };
        let b = TableSchema {
            columns: vec![col("z", String), col("x", Float64)],
        };
        assert!(a.merge(&b));
        assert_eq!(
            a.columns,
            vec![col("x", Float64), col("y", Boolean), col("z", String)]
        );
        assert!(!a.merge(&b));
    }
}
