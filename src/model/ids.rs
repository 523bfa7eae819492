//! Ids every layer passes around: [`TeamId`] keys the WAL's records, the team actors, the
//! catalog's rows and the warehouse's paths.

use std::fmt;
use std::sync::Arc;

/// A team id (`tm_…`), cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TeamId(pub Arc<str>);

impl TeamId {
    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TeamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for TeamId {
    fn from(s: &str) -> Self {
        TeamId(s.into())
    }
}
