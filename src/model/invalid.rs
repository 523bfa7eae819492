//! [`Invalid`]: input refused by a rule of the model or of a layer above it (an event field, a
//! filter, a cursor), with the stable code, the message and the field the client sees. It says
//! nothing of HTTP; the edge answers it as 400.

use std::fmt;

/// Input a rule refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// Stable snake_case code (`invalid_json`, `invalid_filter`, …).
    pub code: &'static str,
    /// What is wrong, for a person.
    pub message: String,
    /// JSON path of the offending field, when there is one.
    pub field: Option<String>,
}

impl Invalid {
    /// A refusal with its code and message, naming no field.
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Invalid {
            code,
            message: message.into(),
            field: None,
        }
    }

    /// Names the offending field.
    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Invalid {}
