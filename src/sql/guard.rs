//! What a query may be: one `SELECT` (or `WITH … SELECT`, `VALUES`, set operations of them),
//! naming tables by their warehouse names alone. DDL, DML, `COPY`, `EXPLAIN`, `SET` and several
//! statements are refused before planning, and the planned query is checked once more with
//! DataFusion's own [`SQLOptions`] (no DDL, no DML, no statements), so nothing the parser grows
//! later slips through.

use datafusion::execution::context::SQLOptions;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::Statement as Ast;

use super::error::SqlError;

/// Longest accepted query text (SPEC §5.2).
pub const MAX_SQL_BYTES: usize = 64 * 1024;

/// The query parsed into one read-only statement, and the table names it reads.
pub struct Checked {
    /// The statement, for the planner.
    pub statement: Statement,
    /// Warehouse table names it reads (CTE names excluded), each once.
    pub tables: Vec<String>,
}

/// Parses `sql` and refuses anything but one read-only query.
pub fn check(state: &SessionState, sql: &str) -> Result<Checked, SqlError> {
    if sql.len() > MAX_SQL_BYTES {
        return Err(SqlError::Invalid(format!(
            "the query is {} bytes; at most {MAX_SQL_BYTES} are allowed",
            sql.len()
        )));
    }
    if sql.trim().is_empty() {
        return Err(SqlError::Invalid("the query is empty".into()));
    }
    let dialect = state.config().options().sql_parser.dialect;
    let statement = state
        .sql_to_statement(sql, &dialect)
        .map_err(|e| SqlError::Invalid(e.find_root().to_string()))?;
    let what = match &statement {
        Statement::Statement(s) if matches!(s.as_ref(), Ast::Query(_)) => None,
        Statement::Statement(s) => Some(first_words(&s.to_string())),
        Statement::CreateExternalTable(_) => Some("CREATE EXTERNAL TABLE".into()),
        Statement::CopyTo(_) => Some("COPY".into()),
        Statement::Explain(_) => Some("EXPLAIN".into()),
        Statement::Reset(_) => Some("RESET".into()),
    };
    if let Some(what) = what {
        return Err(SqlError::Invalid(format!(
            "only a SELECT query is allowed (or WITH … SELECT); {what} is not"
        )));
    }
    let refs = state
        .resolve_table_references(&statement)
        .map_err(|e| SqlError::Invalid(e.find_root().to_string()))?;
    let mut tables: Vec<String> = Vec::new();
    for r in refs {
        if r.schema().is_some() {
            return Err(SqlError::Invalid(format!(
                "table {r}: name a table by its warehouse name alone (no schema or catalog)"
            )));
        }
        let name = r.table().to_string();
        if !tables.contains(&name) {
            tables.push(name);
        }
    }
    Ok(Checked { statement, tables })
}

/// Refuses a plan that holds DDL, DML or a statement anywhere (subqueries included).
pub fn verify(plan: &LogicalPlan) -> Result<(), SqlError> {
    SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false)
        .verify_plan(plan)
        .map_err(|e| SqlError::Invalid(e.find_root().to_string()))
}

/// The statement's first two words (`INSERT INTO`, `CREATE TABLE`, `SET x`), for the message.
fn first_words(text: &str) -> String {
    text.split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}
