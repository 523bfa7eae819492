//! Whether a query's result has a total order, which is what lets a cursor page through it by
//! position (SPEC §3.4): rerun over the same snapshots, a totally ordered result is the same
//! sequence of rows every time, so "the rows after the first N" means the same rows on every
//! page. Two things must hold.
//!
//! The outermost `ORDER BY` (under projections, limits, filters and aliases, which keep the
//! order) sorts by keys that decide every row it sorts: either the keys are all of its columns
//! (rows that tie are then identical, and which of two identical rows comes first cannot be
//! seen), or they include a key known unique — the `GROUP BY` keys of an aggregate (not of
//! grouping sets), every column after `DISTINCT`, carried up through projections, filters,
//! sorts, limits and aliases. DataFusion's own functional dependencies are not used: they call
//! a window's `row_number()` or an `UNNEST`'s inherited keys unique, which are unique numbers
//! or keys but not a stable order.
//!
//! And the rows themselves are the same on every run: no volatile function (`random()`), no
//! window function (ties in its `ORDER BY` number rows differently from run to run), no
//! `DISTINCT ON`, and no `LIMIT` anywhere — subqueries included — that is not over a total order
//! itself. (`now()` is the first page's time on every page: the engine pins it.)

use std::collections::HashSet;

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::logical_expr::{Distinct, Expr, LogicalPlan, SortExpr};

/// Whether every run of `plan` over the same data yields the same rows in the same order.
pub fn is_total(plan: &LogicalPlan) -> bool {
    ordered(plan) && deterministic(plan)
}

/// Whether the outermost sort of `plan` decides the order of every row.
fn ordered(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Projection(p) => ordered(&p.input),
        LogicalPlan::Limit(l) => ordered(&l.input),
        LogicalPlan::Filter(f) => ordered(&f.input),
        LogicalPlan::SubqueryAlias(a) => ordered(&a.input),
        LogicalPlan::Sort(s) => keys_decide_rows(&s.expr, &s.input),
        _ => false,
    }
}

/// Whether sorting the rows of `input` by `keys` leaves no two distinguishable rows tied.
fn keys_decide_rows(keys: &[SortExpr], input: &LogicalPlan) -> bool {
    let schema = input.schema();
    let keyed: HashSet<usize> = keys
        .iter()
        .filter_map(|k| match &k.expr {
            Expr::Column(c) => schema.index_of_column(c).ok(),
            _ => None,
        })
        .collect();
    (0..schema.fields().len()).all(|i| keyed.contains(&i))
        || unique_keys(input)
            .iter()
            .any(|key| key.iter().all(|i| keyed.contains(i)))
}

/// Sets of output columns of `plan` no two rows share (an empty set: at most one row).
fn unique_keys(plan: &LogicalPlan) -> Vec<Vec<usize>> {
    match plan {
        LogicalPlan::Aggregate(a) => {
            if a.group_expr
                .iter()
                .any(|e| matches!(e, Expr::GroupingSet(_)))
            {
                Vec::new()
            } else {
                vec![(0..a.group_expr.len()).collect()]
            }
        }
        LogicalPlan::Distinct(Distinct::All(input)) => {
            vec![(0..input.schema().fields().len()).collect()]
        }
        LogicalPlan::Projection(p) => {
            let input = p.input.schema();
            // Where each input column is passed through as it is.
            let passed: Vec<Option<usize>> = p
                .expr
                .iter()
                .map(|e| match e.clone().unalias() {
                    Expr::Column(c) => input.index_of_column(&c).ok(),
                    _ => None,
                })
                .collect();
            unique_keys(&p.input)
                .into_iter()
                .filter_map(|key| {
                    key.iter()
                        .map(|i| passed.iter().position(|p| *p == Some(*i)))
                        .collect::<Option<Vec<usize>>>()
                })
                .collect()
        }
        LogicalPlan::Filter(f) => unique_keys(&f.input),
        LogicalPlan::Sort(s) => unique_keys(&s.input),
        LogicalPlan::Limit(l) => unique_keys(&l.input),
        LogicalPlan::SubqueryAlias(a) => unique_keys(&a.input),
        _ => Vec::new(),
    }
}

/// Whether `plan` (subqueries included) yields the same rows on every run over the same data.
fn deterministic(plan: &LogicalPlan) -> bool {
    let mut ok = true;
    let walked = plan.apply_with_subqueries(|node| {
        let fine = match node {
            LogicalPlan::Window(_) | LogicalPlan::Distinct(Distinct::On(_)) => false,
            LogicalPlan::Limit(_) => ordered(node),
            LogicalPlan::Sort(s) if s.fetch.is_some() => ordered(node),
            _ => true,
        } && !node.expressions().iter().any(Expr::is_volatile);
        ok &= fine;
        Ok(if fine {
            TreeNodeRecursion::Continue
        } else {
            TreeNodeRecursion::Stop
        })
    });
    walked.is_ok() && ok
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

    #[tokio::test]
    async fn unique_numbers_and_inherited_keys_are_not_an_order() {
        // row_number() is unique, but which tied row gets which number changes between runs.
        assert!(
            !total(
                "SELECT row_number() OVER (ORDER BY event) AS rn, user_id FROM tracks ORDER BY rn"
            )
            .await
        );
        assert!(!total("SELECT row_number() OVER () AS rn, user_id FROM tracks ORDER BY rn").await);
        // UNNEST repeats its input's keys.
        assert!(
            !total(
                "SELECT user_id, unnest(regexp_match(event, '(a)(b)')) AS m FROM \
                 (SELECT user_id, max(event) AS event FROM tracks GROUP BY user_id) g ORDER BY user_id"
            )
            .await
        );
        assert!(
            !total(
                "SELECT user_id, count(*) AS n FROM tracks GROUP BY GROUPING SETS ((user_id), ()) \
                 ORDER BY user_id"
            )
            .await
        );
    }

    #[tokio::test]
    async fn rows_that_differ_between_runs_are_not_an_order() {
        assert!(
            !total("SELECT revenue FROM (SELECT revenue FROM tracks LIMIT 100) t ORDER BY revenue")
                .await
        );
        assert!(
            !total(
                "SELECT user_id, count(*) AS n FROM tracks WHERE revenue > random() \
                 GROUP BY user_id ORDER BY user_id"
            )
            .await
        );
        assert!(
            !total(
                "SELECT user_id FROM tracks WHERE user_id IN (SELECT user_id FROM identifies LIMIT 3) \
                 GROUP BY user_id ORDER BY user_id"
            )
            .await
        );
        // A limit over a total order is the same rows every time.
        assert!(
            total(
                "SELECT user_id, n FROM (SELECT user_id, count(*) AS n FROM tracks GROUP BY user_id \
                 ORDER BY user_id LIMIT 10) t ORDER BY n, user_id"
            )
            .await
        );
        assert!(total("SELECT count(*) AS n FROM tracks ORDER BY n").await);
    }
}
