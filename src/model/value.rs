//! The row model: a typed [`Value`] and a named [`Cell`], what validation produces and a
//! table's buffer, the importer and the WAL replay consume.

use super::schema::ColumnType;

/// A typed cell.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// JSON null: no type information.
    Null,
    /// Boolean.
    Bool(bool),
    /// Integer within i64.
    Int(i64),
    /// Any other number.
    Float(f64),
    /// Text (also arrays and too-deep objects, as JSON).
    Str(String),
    /// Microseconds since the epoch, UTC.
    Ts(i64),
}

impl Value {
    /// The column type this value asks for; `None` for null.
    pub fn column_type(&self) -> Option<ColumnType> {
        Some(match self {
            Value::Null => return None,
            Value::Bool(_) => ColumnType::Boolean,
            Value::Int(_) => ColumnType::Int64,
            Value::Float(_) => ColumnType::Float64,
            Value::Str(_) => ColumnType::String,
            Value::Ts(_) => ColumnType::Timestamp,
        })
    }
}

/// A column name: the standard columns' are static, so naming one of them allocates nothing.
pub type Name = std::borrow::Cow<'static, str>;

/// A named cell of a row: the column name and its value.
pub type Cell = (Name, Value);
