//! [`SqlEngine`]: plans and runs one team's query. Each query gets a session of its own: the
//! functions DataFusion ships, no table factories (no `CREATE EXTERNAL TABLE`), no URL tables,
//! no `information_schema`, no spilling, a memory pool of `sql.memory_limit`, and only the
//! tables the query names — the team's own, each from the catalog's snapshot of its committed
//! files. A query takes one of the team's `sql.max_concurrent` slots for as long as its result
//! streams, and has `sql.timeout` from its start to its last batch. The first batch is computed
//! before [`SqlEngine::run`] returns, so the common failures (memory, a bad cast, the deadline)
//! are answered with a status instead of a broken body. Queries execute on their own runtime
//! ([`super::executor`]); batches come back through a small channel.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use chrono::DateTime;
use dashmap::DashMap;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::dataframe::DataFrame;
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::memory_pool::{GreedyMemoryPool, TrackConsumersPool};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::session_state::{SessionState, SessionStateBuilder};
use datafusion::logical_expr::{LogicalPlan, LogicalPlanBuilder};
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::{ExecutionPlan, execute_stream};
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::ObjectStore;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio::time::Instant;

use super::error::SqlError;
use super::executor::{self, AbortOnDrop};
use super::row_number_rule::FirstRowPerGroup;
use super::scan::SnapshotTable;
use super::{guard, order, output, params};
use crate::catalog::{Catalog, CatalogError, SnapshotId};
use crate::config::SqlConfig;
use crate::model::TeamId;
use crate::model::fresh::Buffers;
use crate::model::schema::TableSchema;

/// Runs SQL element queries for every team.
pub struct SqlEngine {
    /// What a query needs, shared with the task that runs it.
    inner: Arc<Inner>,
    /// Each team's query slots on this node.
    slots: DashMap<String, Arc<Semaphore>>,
}

/// The engine's parts a running query uses.
struct Inner {
    catalog: Arc<Catalog>,
    store: Arc<dyn ObjectStore>,
    /// Where fresh reads get rows not yet committed (none: fresh reads are refused).
    buffers: Option<Arc<dyn Buffers>>,
    limits: SqlConfig,
    /// Rows per batch read and produced.
    batch_rows: usize,
}

/// A query that has started: its output schema and its batches, already in warehouse types.
pub struct QueryResult {
    /// Output columns, in order, with their warehouse types.
    pub schema: TableSchema,
    /// The snapshot each table the query reads was read at.
    pub snapshots: BTreeMap<String, SnapshotId>,
    /// Whether the result has a total order (a cursor may resume it).
    pub ordered: bool,
    /// The query's time, `now()` (µs since the epoch).
    pub started_at: i64,
    /// The batches (the first one already computed); an error ends the stream.
    pub batches: BoxStream<'static, Result<RecordBatch, SqlError>>,
}

/// Which rows of a query's result to compute, over which snapshots.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// The snapshots a cursor's first page read, by table (`None`: the current ones); the
    /// query is then refused unless its result has a total order.
    pub as_of: Option<BTreeMap<String, SnapshotId>>,
    /// Rows of the result left out before the first one computed.
    pub skip: usize,
    /// Most rows computed after those (`None`: all of them).
    pub fetch: Option<usize>,
    /// The first page's query time (µs since the epoch): `now()` and `current_date` are it on
    /// every page (`None`: this run's start).
    pub started_at: Option<i64>,
}

/// A planned query, not yet run.
struct Planned {
    state: SessionState,
    plan: LogicalPlan,
    snapshots: BTreeMap<String, SnapshotId>,
    started_at: i64,
}

/// What a started query tells [`SqlEngine::run`] before its first batch.
struct Started {
    schema: TableSchema,
    snapshots: BTreeMap<String, SnapshotId>,
    ordered: bool,
    started_at: i64,
}

/// Batches in flight between the query's task and the response.
const AHEAD: usize = 2;

impl SqlEngine {
    /// An engine over `catalog` and `store` with the `[sql]` limits.
    pub fn new(
        catalog: Arc<Catalog>,
        store: Arc<dyn ObjectStore>,
        limits: SqlConfig,
        batch_rows: usize,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                catalog,
                store,
                buffers: None,
                limits,
                batch_rows,
            }),
            slots: DashMap::new(),
        }
    }

    /// Fresh reads (SPEC §3.5) get the rows not yet committed from `buffers`.
    pub fn with_buffers(self, buffers: Arc<dyn Buffers>) -> Self {
        let inner = Inner {
            catalog: self.inner.catalog.clone(),
            store: self.inner.store.clone(),
            buffers: Some(buffers),
            limits: self.inner.limits.clone(),
            batch_rows: self.inner.batch_rows,
        };
        Self {
            inner: Arc::new(inner),
            slots: self.slots,
        }
    }

    /// Checks `sql` against the team's current tables without running it: the output schema
    /// and the names of its parameters, or why it would be refused. `fresh` (an element that
    /// reads fresh by default): tables that so far exist only in the buffers count too — when
    /// they cannot be had (a node does not answer), the committed tables alone decide.
    pub async fn check(&self, team: &TeamId, sql: &str, fresh: bool) -> Result<Checked, SqlError> {
        let page = Page::default();
        let lent = if fresh && self.inner.buffers.is_some() {
            match self.inner.plan(team, sql, true, &page).await {
                Err(SqlError::Fresh(_)) => None,
                other => Some(other?),
            }
        } else {
            None
        };
        let planned = match lent {
            Some(p) => p,
            None => self.inner.plan(team, sql, false, &page).await?,
        };
        let schema = output::warehouse_schema(planned.plan.schema().as_arrow())
            .map_err(SqlError::Invalid)?;
        Ok(Checked {
            schema,
            params: params::names(&planned.plan),
        })
    }

    /// Starts `sql` for `team` with `given` parameters, on the query runtime; returns once the
    /// first batch is computed (or the query failed, or its deadline passed). `fresh`: the
    /// tables include the rows acknowledged but not yet committed (SPEC §3.5); `page`: which
    /// of the result's rows, over which snapshots.
    pub async fn run(
        &self,
        team: &TeamId,
        sql: &str,
        given: &serde_json::Map<String, serde_json::Value>,
        fresh: bool,
        page: Page,
    ) -> Result<QueryResult, SqlError> {
        let permit = self.slot(team)?;
        let limit = self.inner.limits.timeout.0;
        let deadline = Instant::now() + limit;
        let (schema_tx, schema_rx) = oneshot::channel();
        let (tx, mut rx) = mpsc::channel(AHEAD);
        let job = Job {
            inner: self.inner.clone(),
            team: team.clone(),
            sql: sql.to_string(),
            given: given.clone(),
            fresh,
            page,
        };
        let task = AbortOnDrop(executor::runtime().spawn(job.run(schema_tx, tx)));
        let started = match tokio::time::timeout_at(deadline, schema_rx).await {
            Err(_) => return Err(SqlError::Timeout(limit)),
            Ok(Err(_)) => return Err(SqlError::Internal("the query task ended early".into())),
            Ok(Ok(started)) => started?,
        };
        let first = match tokio::time::timeout_at(deadline, rx.recv()).await {
            Err(_) => return Err(SqlError::Timeout(limit)),
            Ok(None) => None,
            Ok(Some(b)) => Some(b?),
        };
        let rest = Remaining {
            rx,
            deadline,
            limit,
            _task: task,
            _permit: permit,
        };
        let batches = futures::stream::iter(first.map(Ok))
            .chain(futures::stream::unfold(Some(rest), next_batch))
            .boxed();
        Ok(QueryResult {
            schema: started.schema,
            snapshots: started.snapshots,
            ordered: started.ordered,
            started_at: started.started_at,
            batches,
        })
    }

    /// One of the team's query slots, or [`SqlError::Busy`].
    fn slot(&self, team: &TeamId) -> Result<OwnedSemaphorePermit, SqlError> {
        let max = self.inner.limits.max_concurrent;
        let slots = self
            .slots
            .entry(team.as_str().to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(max)))
            .clone();
        slots.try_acquire_owned().map_err(|_| SqlError::Busy(max))
    }
}

/// One query to run on the query runtime.
struct Job {
    inner: Arc<Inner>,
    team: TeamId,
    sql: String,
    given: serde_json::Map<String, serde_json::Value>,
    fresh: bool,
    page: Page,
}

impl Job {
    /// Plans and starts the query, says so on `started`, then sends its batches (converted to
    /// warehouse types) until the end, a failure, or nobody reading.
    async fn run(
        self,
        started: oneshot::Sender<Result<Started, SqlError>>,
        tx: mpsc::Sender<Result<RecordBatch, SqlError>>,
    ) {
        let page = &self.page;
        let begun = async {
            let planned = self
                .inner
                .plan(&self.team, &self.sql, self.fresh, page)
                .await?;
            let mut plan = params::bind(planned.plan, &self.given)?;
            let schema =
                output::warehouse_schema(plan.schema().as_arrow()).map_err(SqlError::Invalid)?;
            let ordered = order::is_total(&plan);
            if page.as_of.is_some() && !ordered {
                return Err(SqlError::Unordered);
            }
            if page.skip > 0 || page.fetch.is_some() {
                // DataFusion takes both as i64.
                let most = i64::MAX as usize;
                plan = LogicalPlanBuilder::from(plan)
                    .limit(page.skip.min(most), page.fetch.map(|f| f.min(most)))
                    .and_then(|b| b.build())
                    .map_err(SqlError::planning)?;
            }
            let started = Started {
                schema,
                snapshots: planned.snapshots,
                ordered,
                started_at: planned.started_at,
            };
            let frame = DataFrame::new(planned.state, plan);
            let ctx = Arc::new(frame.task_ctx());
            let physical = frame
                .create_physical_plan()
                .await
                .map_err(SqlError::planning)?;
            let stream = execute_stream(cooperative(physical)?, ctx).map_err(SqlError::planning)?;
            Ok::<_, SqlError>((started, stream))
        };
        let (begun, mut stream) = match begun.await {
            Ok(s) => s,
            Err(e) => {
                let _ = started.send(Err(e));
                return;
            }
        };
        let target = begun.schema.to_arrow();
        if started.send(Ok(begun)).is_err() {
            return;
        }
        while let Some(next) = stream.next().await {
            let item = next
                .map_err(SqlError::running)
                .and_then(|b| convert(b, &target));
            let failed = item.is_err();
            if tx.send(item).await.is_err() || failed {
                return;
            }
        }
    }
}

impl Inner {
    /// Parses, checks and plans `sql` in a new session holding the tables it names (with
    /// their rows not yet committed when `fresh`: lent before the snapshots are taken, so each
    /// table's snapshot decides which lent rows its files already hold). `page.as_of`: the
    /// snapshot of each table instead of the current one; `page.started_at`: the query's time.
    async fn plan(
        &self,
        team: &TeamId,
        sql: &str,
        fresh: bool,
        page: &Page,
    ) -> Result<Planned, SqlError> {
        let state = self.session()?;
        let checked = guard::check(&state, sql)?;
        let ctx = SessionContext::new_with_state(state);
        let lent = match (fresh, &self.buffers) {
            (false, _) => None,
            (true, Some(buffers)) => Some(
                buffers
                    .lend(team, &checked.tables)
                    .await
                    .map_err(SqlError::Fresh)?,
            ),
            (true, None) => {
                return Err(SqlError::Internal(
                    "fresh reads have no buffers here".into(),
                ));
            }
        };
        let catalog = self.catalog.clone();
        if let Some(at) = &page.as_of
            && let Some(missing) = checked.tables.iter().find(|t| !at.contains_key(*t))
        {
            return Err(SqlError::Cursor(format!(
                "it holds no snapshot of the table {missing:?}, which the query reads"
            )));
        }
        let (team_id, names) = (team.clone(), checked.tables.clone());
        let as_of = page.as_of.clone();
        let snapshots = tokio::task::spawn_blocking(move || {
            names
                .into_iter()
                .map(|name| {
                    let snapshot = match &as_of {
                        None => catalog.snapshot(&team_id, &name)?,
                        Some(at) => {
                            catalog.snapshot_as_of(&team_id, &name, at.get(&name).copied())?
                        }
                    };
                    Ok((snapshot, name))
                })
                .collect::<Result<Vec<_>, CatalogError>>()
        })
        .await
        .map_err(|e| SqlError::Internal(format!("snapshot task failed: {e}")))?
        .map_err(|e| match e {
            CatalogError::Refused(why) => SqlError::Expired(why),
            e => SqlError::Catalog(e),
        })?;
        let mut read_at = BTreeMap::new();
        for (snapshot, name) in snapshots {
            let rows = lent.as_ref().map(|l| l.table(&name)).unwrap_or_default();
            let table = match snapshot {
                Some(s) => {
                    read_at.insert(name.clone(), s.as_of);
                    let mut schema = s.schema;
                    schema.merge(&rows.schema());
                    SnapshotTable::new(schema.to_arrow(), s.files, self.store.clone())
                        .with_buffered(rows.uncommitted(s.wal_watermark))
                }
                // A table that has never received data does not exist yet: the planner says so.
                None if rows.chunks.is_empty() => continue,
                // Only buffered so far: nothing of it is committed.
                None => {
                    SnapshotTable::new(rows.schema().to_arrow(), Vec::new(), self.store.clone())
                        .with_buffered(rows.uncommitted(0))
                }
            };
            ctx.register_table(name.as_str(), Arc::new(table))
                .map_err(SqlError::planning)?;
        }
        let mut state = ctx.state();
        if let Some(at) = page.started_at.and_then(DateTime::from_timestamp_micros) {
            state.execution_props_mut().query_execution_start_time = Some(at);
        }
        let started_at = state
            .execution_props()
            .query_execution_start_time
            .map_or(0, |t| t.timestamp_micros());
        let plan = state
            .statement_to_plan(checked.statement)
            .await
            .map_err(SqlError::planning)?;
        guard::verify(&plan)?;
        Ok(Planned {
            state,
            plan,
            snapshots: read_at,
            started_at,
        })
    }

    /// A session with DataFusion's functions and nothing else: no table factories, no URL
    /// tables, no information_schema, no spill files; memory capped per query.
    fn session(&self) -> Result<SessionState, SqlError> {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let config = SessionConfig::new()
            .with_batch_size(self.batch_rows)
            .with_target_partitions(cores)
            .with_information_schema(false);
        let pool = TrackConsumersPool::new(
            GreedyMemoryPool::new(self.limits.memory_limit.0 as usize),
            std::num::NonZeroUsize::new(3).expect("3 > 0"),
        );
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_pool(Arc::new(pool))
            .with_disk_manager_builder(
                DiskManagerBuilder::default().with_mode(DiskManagerMode::Disabled),
            )
            .build_arc()
            .map_err(|e| SqlError::Internal(e.to_string()))?;
        let mut state = SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(runtime)
            .with_default_features()
            .with_physical_optimizer_rule(Arc::new(FirstRowPerGroup))
            .build();
        state.table_factories_mut().clear();
        Ok(state)
    }
}

/// What a query check finds.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The output columns and their warehouse types.
    pub schema: TableSchema,
    /// The `$name` parameters the query uses, without `$`.
    pub params: Vec<String>,
}

impl Checked {
    /// The output columns as listings show them: `[{name, type}]`.
    pub fn schema_json(&self) -> serde_json::Value {
        serde_json::Value::Array(
            self.schema
                .columns
                .iter()
                .map(|c| serde_json::json!({"name": c.name, "type": c.ty.as_str()}))
                .collect(),
        )
    }
}

/// The rest of a running query: its batches, under its deadline, holding its task and slot.
struct Remaining {
    rx: mpsc::Receiver<Result<RecordBatch, SqlError>>,
    deadline: Instant,
    limit: Duration,
    /// Dropping it aborts the query.
    _task: AbortOnDrop,
    _permit: OwnedSemaphorePermit,
}

/// The next batch; after an error, the deadline or the end the query (and its slot) is dropped.
async fn next_batch(
    rest: Option<Remaining>,
) -> Option<(Result<RecordBatch, SqlError>, Option<Remaining>)> {
    let mut rest = rest?;
    match tokio::time::timeout_at(rest.deadline, rest.rx.recv()).await {
        Err(_) => Some((Err(SqlError::Timeout(rest.limit)), None)),
        Ok(None) => None,
        Ok(Some(Err(e))) => Some((Err(e), None)),
        Ok(Some(Ok(b))) => Some((Ok(b), Some(rest))),
    }
}

/// `plan` with every operator's output passing through a [`CooperativeExec`], which hands
/// the thread back to the scheduler once the task's budget is spent. DataFusion only adds one
/// above the scans; an operator that multiplies rows in memory (a cross join) would otherwise
/// compute without ever yielding, and an aborted query would run on to its end.
fn cooperative(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>, SqlError> {
    plan.transform_up(|node| {
        Ok(Transformed::yes(
            Arc::new(CooperativeExec::new(node)) as Arc<dyn ExecutionPlan>
        ))
    })
    .map(|t| t.data)
    .map_err(SqlError::planning)
}

fn convert(batch: RecordBatch, target: &SchemaRef) -> Result<RecordBatch, SqlError> {
    output::to_warehouse(&batch, target).map_err(|e| SqlError::Failed(e.to_string()))
}
