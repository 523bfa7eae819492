//! What every command prints: a result in both forms ([`Output`]: JSON for `--json`, text for
//! people), the admin commands' error ([`AdminError`]) with its stable code, and how a failure is
//! printed ([`fail`]). The commands import it; it imports none of them.

use std::process::ExitCode;

use serde_json::Value;

use crate::catalog::CatalogError;

/// A command's result in both output forms.
pub struct Output {
    /// For `--json`.
    pub json: Value,
    /// For people.
    pub human: String,
}

/// A failed admin command.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The catalog refused or failed.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// An import's input cannot be stored (the API's 400 `invalid_import`).
    #[error("{0}")]
    InvalidImport(String),
    /// A flag's value is not valid.
    #[error("{0}")]
    InvalidArgument(String),
    /// An SQL element's query was refused (the API's 400 `invalid_sql`).
    #[error("{0}")]
    InvalidSql(String),
}

impl AdminError {
    /// Stable code for `--json` errors (the API's code where there is one).
    pub fn code(&self) -> &'static str {
        match self {
            AdminError::Catalog(CatalogError::NotFound(_)) => "not_found",
            AdminError::Catalog(CatalogError::Refused(_) | CatalogError::LastOwner) => "refused",
            AdminError::Catalog(CatalogError::Invalid { .. }) => "invalid_argument",
            AdminError::Catalog(CatalogError::Taken(_)) => "conflict",
            AdminError::Catalog(CatalogError::Gone(_)) => "gone",
            AdminError::Catalog(_) => "catalog_error",
            AdminError::InvalidImport(_) => "invalid_import",
            AdminError::InvalidArgument(_) => "invalid_argument",
            AdminError::InvalidSql(_) => "invalid_sql",
        }
    }
}

/// Prints an error (as the API's JSON error body with `--json`) and returns exit code 1.
pub fn fail(json: bool, code: &str, message: &str) -> ExitCode {
    if json {
        eprintln!(
            "{}",
            serde_json::json!({"error": {"code": code, "message": message}})
        );
    } else {
        eprintln!("error: {message}");
    }
    ExitCode::FAILURE
}
