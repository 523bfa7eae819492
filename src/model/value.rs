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

/// A typed cell's value that borrows its text: what a row's builders read, whether the cell
/// owns its value ([`Cell`]) or borrows it from a request's body.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueRef<'a> {
    /// JSON null.
    Null,
    /// Boolean.
    Bool(bool),
    /// Integer within i64.
    Int(i64),
    /// Any other number.
    Float(f64),
    /// Text.
    Str(&'a str),
    /// Microseconds since the epoch, UTC.
    Ts(i64),
}

/// A typed cell's value that borrows its text where it can (from the body it was read from)
/// and owns it where the text had to be made (unescaped, or a new id).
#[derive(Debug, Clone, PartialEq)]
pub enum ValueCow<'a> {
    Borrowed(ValueRef<'a>),
    Owned(Value),
}

impl ValueCow<'_> {
    /// The value, its text borrowed.
    pub fn value(&self) -> ValueRef<'_> {
        match self {
            ValueCow::Borrowed(v) => *v,
            ValueCow::Owned(v) => v.as_ref(),
        }
    }

    /// The value, owning its text.
    pub fn into_owned(self) -> Value {
        match self {
            ValueCow::Owned(v) => v,
            ValueCow::Borrowed(v) => match v {
                ValueRef::Null => Value::Null,
                ValueRef::Bool(b) => Value::Bool(b),
                ValueRef::Int(i) => Value::Int(i),
                ValueRef::Float(f) => Value::Float(f),
                ValueRef::Str(s) => Value::Str(s.to_string()),
                ValueRef::Ts(t) => Value::Ts(t),
            },
        }
    }
}

/// Text, borrowed or owned as it was.
impl<'a> From<std::borrow::Cow<'a, str>> for ValueCow<'a> {
    fn from(text: std::borrow::Cow<'a, str>) -> Self {
        match text {
            std::borrow::Cow::Borrowed(s) => ValueCow::Borrowed(ValueRef::Str(s)),
            std::borrow::Cow::Owned(s) => ValueCow::Owned(Value::Str(s)),
        }
    }
}

/// A named cell whose value may borrow its text: what a message's standard cells are while it
/// is read.
pub type CowCell<'a> = (Name, ValueCow<'a>);

impl ValueRef<'_> {
    /// The column type this value asks for; `None` for null.
    pub fn column_type(&self) -> Option<ColumnType> {
        Some(match self {
            ValueRef::Null => return None,
            ValueRef::Bool(_) => ColumnType::Boolean,
            ValueRef::Int(_) => ColumnType::Int64,
            ValueRef::Float(_) => ColumnType::Float64,
            ValueRef::Str(_) => ColumnType::String,
            ValueRef::Ts(_) => ColumnType::Timestamp,
        })
    }
}

impl Value {
    /// The value, its text borrowed.
    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Value::Null => ValueRef::Null,
            Value::Bool(b) => ValueRef::Bool(*b),
            Value::Int(i) => ValueRef::Int(*i),
            Value::Float(f) => ValueRef::Float(*f),
            Value::Str(s) => ValueRef::Str(s),
            Value::Ts(t) => ValueRef::Ts(*t),
        }
    }
}

/// A named value on its way into a row: a [`Cell`], or a name and value borrowed from
/// elsewhere (a request's body, a cache of names).
pub trait RowCell {
    /// The column's name.
    fn name(&self) -> &str;
    /// The value.
    fn value(&self) -> ValueRef<'_>;
}

impl RowCell for Cell {
    fn name(&self) -> &str {
        &self.0
    }
    fn value(&self) -> ValueRef<'_> {
        self.1.as_ref()
    }
}
