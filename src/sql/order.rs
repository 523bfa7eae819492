//! Whether a query's result has a total order, which is what lets a cursor page through it by
//! position (SPEC §3.4): rerun over the same snapshots, a totally ordered result is the same
//! sequence of rows every time, so "the rows after the first N" means the same rows on every
//! page. The result is totally ordered when its outermost `ORDER BY` (under projections,
//! limits, filters and aliases, which keep the order) sorts by keys that decide every column of
//! the rows it sorts: either the keys are all of those columns (rows that tie are then
//! identical, and which of two identical rows comes first cannot be seen), or DataFusion's
//! functional dependencies say the keys are unique — the `GROUP BY` keys of an aggregate are.
//! Anything else (no `ORDER BY`, `ORDER BY count DESC` alone) may order ties differently from
//! one run to the next, and is not paged.

use std::collections::HashSet;

use datafusion::common::{DFSchema, Dependency};
use datafusion::logical_expr::{Expr, LogicalPlan, SortExpr};

/// Whether every run of `plan` over the same data yields its rows in the same order.
pub fn is_total(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Projection(p) => is_total(&p.input),
        LogicalPlan::Limit(l) => is_total(&l.input),
        LogicalPlan::Filter(f) => is_total(&f.input),
        LogicalPlan::SubqueryAlias(a) => is_total(&a.input),
        LogicalPlan::Sort(s) => keys_decide_rows(&s.expr, s.input.schema()),
        _ => false,
    }
}

/// Whether sorting rows of `schema` by `keys` leaves no two distinguishable rows tied.
fn keys_decide_rows(keys: &[SortExpr], schema: &DFSchema) -> bool {
    let columns = schema.fields().len();
    let keyed: HashSet<usize> = keys
        .iter()
        .filter_map(|k| match &k.expr {
            Expr::Column(c) => schema.index_of_column(c).ok(),
            _ => None,
        })
        .collect();
    if (0..columns).all(|i| keyed.contains(&i)) {
        return true;
    }
    schema.functional_dependencies().iter().any(|dep| {
        dep.mode == Dependency::Single
            && dep.source_indices.iter().all(|i| keyed.contains(i))
            && (0..columns).all(|i| dep.target_indices.contains(&i) || keyed.contains(&i))
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::datasource::MemTable;
    use datafusion::prelude::SessionContext;

    use super::*;

    async fn total(sql: &str) -> bool {
        let ctx = SessionContext::new();
        let events = Arc::new(Schema::new(vec![
            Field::new("user_id", DataType::Utf8, true),
            Field::new("event", DataType::Utf8, true),
            Field::new("revenue", DataType::Float64, true),
        ]));
        let users = Arc::new(Schema::new(vec![
            Field::new("user_id", DataType::Utf8, true),
            Field::new("email", DataType::Utf8, true),
        ]));
        for (name, schema) in [("tracks", events), ("identifies", users)] {
            let table = MemTable::try_new(schema, vec![vec![]]).unwrap();
            ctx.register_table(name, Arc::new(table)).unwrap();
        }
        let df = ctx.sql(sql).await.unwrap();
        is_total(df.logical_plan())
    }

    #[tokio::test]
    async fn ordered_by_the_group_keys_is_total() {
        assert!(
            total("SELECT user_id, count(*) AS n FROM tracks GROUP BY user_id ORDER BY user_id")
                .await
        );
        assert!(
            total(
                "SELECT user_id, event, sum(revenue) AS r FROM tracks GROUP BY user_id, event \
                 ORDER BY event DESC, user_id LIMIT 5"
            )
            .await
        );
        assert!(
            total(
                "SELECT date_trunc('day', to_timestamp(revenue)) AS day, count(*) AS n FROM tracks \
                 GROUP BY 1 ORDER BY day"
            )
            .await
        );
        assert!(
            total(
                "WITH per AS (SELECT user_id, count(*) AS n FROM tracks GROUP BY user_id) \
                 SELECT user_id, n FROM per ORDER BY user_id"
            )
            .await
        );
    }

    #[tokio::test]
    async fn ordered_by_every_column_is_total() {
        assert!(total("SELECT event, user_id FROM tracks ORDER BY user_id, event").await);
        assert!(total("SELECT * FROM tracks ORDER BY revenue, event, user_id").await);
        assert!(total("SELECT DISTINCT user_id FROM tracks ORDER BY user_id").await);
    }

    #[tokio::test]
    async fn ties_that_can_differ_are_not_total() {
        assert!(!total("SELECT * FROM tracks").await);
        assert!(!total("SELECT * FROM tracks ORDER BY user_id").await);
        assert!(!total("SELECT user_id FROM tracks ORDER BY event").await);
        assert!(
            !total("SELECT user_id, count(*) AS n FROM tracks GROUP BY user_id ORDER BY n DESC")
                .await
        );
        // An expression of a column is no key: two ids may have one lower case.
        assert!(!total("SELECT user_id FROM tracks ORDER BY lower(user_id)").await);
        assert!(
            !total(
                "SELECT t.user_id, i.email FROM tracks t JOIN identifies i ON t.user_id = i.user_id \
                 ORDER BY t.user_id"
            )
            .await
        );
    }
}
