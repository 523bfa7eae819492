//! [`GroupFirstExec`]: of each group of rows with equal keys, the one row that sorts first in
//! each partition — computed in one pass with a hash table of groups, instead of sorting every
//! row. The [`super::row_number_rule`] puts it under the sort of a `row_number() OVER
//! (PARTITION BY … ORDER BY …) = 1` query, so that sort orders a row per group and partition
//! instead of all of them, and the window above still makes the final pick.
//!
//! Per input partition: each batch's keys are interned by DataFusion's own
//! [`GroupValues`] (the hash table its aggregates use), each row's sort key is made comparable
//! ([`SortKeys`]: Arrow's row format, or one integer for a single integer or timestamp column),
//! and a row that sorts strictly before its group's best so far becomes the best. The best rows of a batch are copied out of it (`take`), so the input's batches are
//! never held; the copies are merged again (`interleave`) when they hold twice as many rows as
//! there are groups. Rows that tie on the sort key: the first one read wins — `row_number`
//! picks an arbitrary one of them too. Memory — the groups, their keys and the copied rows — is
//! reserved from the query's pool, so a query with too many groups fails with the pool's error
//! rather than growing past it.

use std::fmt;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use arrow::compute::{interleave_record_batch, take_record_batch};
use arrow::datatypes::{Schema, SchemaRef};
use datafusion::common::Result as DfResult;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::physical_expr::{EquivalenceProperties, LexOrdering, PhysicalExpr};
use datafusion::physical_plan::aggregates::group_values::{GroupValues, new_group_values};
use datafusion::physical_plan::aggregates::order::GroupOrdering;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, PlanProperties,
    SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};

use super::sort_key::SortKeys;

/// Keeps, of each group of rows with equal `keys`, the row that sorts first by `order`.
#[derive(Debug)]
pub struct GroupFirstExec {
    input: Arc<dyn ExecutionPlan>,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    order: LexOrdering,
    properties: Arc<PlanProperties>,
}

impl GroupFirstExec {
    /// Over `input`.
    pub fn new(
        input: Arc<dyn ExecutionPlan>,
        keys: Vec<Arc<dyn PhysicalExpr>>,
        order: LexOrdering,
    ) -> Self {
        let properties = PlanProperties::new(
            EquivalenceProperties::new(input.schema()),
            input.output_partitioning().clone(),
            EmissionType::Final,
            Boundedness::Bounded,
        );
        Self {
            input,
            keys,
            order,
            properties: Arc::new(properties),
        }
    }
}

impl DisplayAs for GroupFirstExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let keys: Vec<String> = self.keys.iter().map(|k| k.to_string()).collect();
        write!(
            f,
            "GroupFirstExec: keys=[{}], order=[{}]",
            keys.join(", "),
            self.order
        )
    }
}

impl ExecutionPlan for GroupFirstExec {
    fn name(&self) -> &str {
        "GroupFirstExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        let order = self.order.iter().map(|s| &s.expr);
        for e in self.keys.iter().chain(order) {
            if f(e)? == TreeNodeRecursion::Stop {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let input = children.into_iter().next().expect("one child");
        Ok(Arc::new(Self::new(
            input,
            self.keys.clone(),
            self.order.clone(),
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context.clone())?;
        let schema = self.input.schema();
        let reservation = MemoryConsumer::new(format!("GroupFirstExec[{partition}]"))
            .register(context.memory_pool());
        let mut best = Best::new(&schema, &self.keys, &self.order, reservation)?;
        let batch_rows = context.session_config().batch_size();
        let rows = futures::stream::once(async move {
            let mut input = input;
            while let Some(batch) = input.next().await {
                best.add(&batch?)?;
            }
            Ok::<_, datafusion::error::DataFusionError>(best.finish(batch_rows))
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, rows)))
    }
}

/// Where a group's best row is: a batch of [`Best::kept`] and a row of it.
type Place = (usize, usize);

/// One partition's best row of each group so far.
struct Best {
    keys: Vec<Arc<dyn PhysicalExpr>>,
    order: Vec<Arc<dyn PhysicalExpr>>,
    groups: Box<dyn GroupValues>,
    /// Each group's best sort key.
    sort_keys: SortKeys,
    /// Each group's best row.
    place: Vec<Place>,
    /// Copies of rows that were best when read (some since beaten).
    kept: Vec<RecordBatch>,
    kept_rows: usize,
    /// Scratch: each row's group; per group, its best row of the current batch.
    row_groups: Vec<usize>,
    in_batch: Vec<u32>,
    changed: Vec<usize>,
    reservation: MemoryReservation,
}

const NONE: u32 = u32::MAX;

impl Best {
    fn new(
        schema: &SchemaRef,
        keys: &[Arc<dyn PhysicalExpr>],
        order: &LexOrdering,
        reservation: MemoryReservation,
    ) -> DfResult<Self> {
        let key_fields = keys
            .iter()
            .map(|k| k.return_field(schema).map(|f| f.as_ref().clone()))
            .collect::<DfResult<Vec<_>>>()?;
        let groups = new_group_values(Arc::new(Schema::new(key_fields)), &GroupOrdering::None)?;
        Ok(Self {
            keys: keys.to_vec(),
            order: order.iter().map(|s| s.expr.clone()).collect(),
            groups,
            sort_keys: SortKeys::new(schema, order)?,
            place: Vec::new(),
            kept: Vec::new(),
            kept_rows: 0,
            row_groups: Vec::new(),
            in_batch: Vec::new(),
            changed: Vec::new(),
            reservation,
        })
    }

    /// Takes in one batch.
    fn add(&mut self, batch: &RecordBatch) -> DfResult<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let keys = evaluate(&self.keys, batch)?;
        self.groups.intern(&keys, &mut self.row_groups)?;
        let sort_keys = self.sort_keys.batch(&evaluate(&self.order, batch)?)?;
        // New groups, in whatever order `intern` numbered them, start with no best row.
        let groups = self.groups.len();
        self.in_batch.resize(groups, NONE);
        self.sort_keys.grow(groups);
        self.place.resize(groups, (usize::MAX, 0));
        for (row, &group) in self.row_groups.iter().enumerate() {
            if !self.sort_keys.improve(group, &sort_keys, row) {
                continue;
            }
            if self.in_batch[group] == NONE {
                self.changed.push(group);
            }
            self.in_batch[group] = row as u32;
        }
        if !self.changed.is_empty() {
            let rows: UInt32Array = self.changed.iter().map(|&g| self.in_batch[g]).collect();
            let copied = take_record_batch(batch, &rows)?;
            let at = self.kept.len();
            for (i, &group) in self.changed.iter().enumerate() {
                self.place[group] = (at, i);
                self.in_batch[group] = NONE;
            }
            self.kept_rows += copied.num_rows();
            self.kept.push(copied);
            self.changed.clear();
        }
        if self.kept_rows > 2 * self.place.len() + 8192 {
            self.merge_kept()?;
        }
        self.reserve()
    }

    /// Replaces the kept copies by one batch of each group's best row.
    fn merge_kept(&mut self) -> DfResult<()> {
        let merged = self.best_rows(0, self.place.len())?;
        for (i, place) in self.place.iter_mut().enumerate() {
            *place = (0, i);
        }
        self.kept_rows = merged.num_rows();
        self.kept = vec![merged];
        Ok(())
    }

    /// The best rows of groups `from..to`, in group order.
    fn best_rows(&self, from: usize, to: usize) -> DfResult<RecordBatch> {
        let kept: Vec<&RecordBatch> = self.kept.iter().collect();
        Ok(interleave_record_batch(&kept, &self.place[from..to])?)
    }

    /// Grows or shrinks the reservation to what is held now.
    fn reserve(&mut self) -> DfResult<()> {
        let kept: usize = self.kept.iter().map(|b| b.get_array_memory_size()).sum();

        let held = self.groups.size()
            + self.sort_keys.size()
            + kept
            + self.place.capacity() * size_of::<Place>()
            + self.in_batch.capacity() * 4
            + self.row_groups.capacity() * size_of::<usize>();
        self.reservation.try_resize(held)
    }

    /// Each group's best row, in batches of at most `batch_rows`, each copied out of the kept
    /// rows when it is asked for (the kept rows and their reservation go with the last).
    fn finish(
        self,
        batch_rows: usize,
    ) -> impl futures::Stream<Item = DfResult<RecordBatch>> + Send {
        let step = batch_rows.max(1);
        let starts = (0..self.place.len()).step_by(step);
        futures::stream::iter(starts.map(move |from| {
            let to = (from + step).min(self.place.len());
            self.best_rows(from, to)
        }))
    }
}

fn evaluate(exprs: &[Arc<dyn PhysicalExpr>], batch: &RecordBatch) -> DfResult<Vec<ArrayRef>> {
    exprs
        .iter()
        .map(|e| e.evaluate(batch)?.into_array(batch.num_rows()))
        .collect()
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int64Array, StringArray};
    use arrow::compute::SortOptions;
    use arrow::datatypes::{DataType, Field};
    use datafusion::datasource::memory::MemorySourceConfig;
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;
    use datafusion::physical_expr::PhysicalSortExpr;
    use datafusion::physical_expr::expressions::col;
    use datafusion::physical_plan::common::collect;

    use super::*;

    /// `groups` keys, each seen `per` times with values 0..per in a scrambled order.
    fn input(groups: usize, per: usize) -> (SchemaRef, Vec<RecordBatch>) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, true),
            Field::new("v", DataType::Int64, true),
        ]));
        let n = groups * per;
        let rows: Vec<(String, i64)> = (0..n)
            .map(|i| {
                (
                    format!("key-{}", i % groups),
                    ((i / groups * 7919) % per) as i64,
                )
            })
            .collect();
        let batches = rows
            .chunks(1000)
            .map(|chunk| {
                let k: StringArray = chunk.iter().map(|(k, _)| Some(k.as_str())).collect();
                let v: Int64Array = chunk.iter().map(|(_, v)| Some(*v)).collect();
                RecordBatch::try_new(schema.clone(), vec![Arc::new(k), Arc::new(v)]).unwrap()
            })
            .collect();
        (schema, batches)
    }

    fn first_by_v(
        schema: &SchemaRef,
        batches: Vec<RecordBatch>,
        descending: bool,
    ) -> GroupFirstExec {
        let source = MemorySourceConfig::try_new_exec(&[batches], schema.clone(), None).unwrap();
        let order = PhysicalSortExpr::new(
            col("v", schema).unwrap(),
            SortOptions {
                descending,
                nulls_first: false,
            },
        );
        GroupFirstExec::new(
            source,
            vec![col("k", schema).unwrap()],
            LexOrdering::new([order]).unwrap(),
        )
    }

    #[tokio::test]
    async fn each_group_keeps_its_first_row_in_the_order() {
        let (schema, batches) = input(3000, 13);
        for (descending, want) in [(false, 0), (true, 12)] {
            let exec = Arc::new(first_by_v(&schema, batches.clone(), descending));
            let out = collect(exec.execute(0, Arc::new(TaskContext::default())).unwrap())
                .await
                .unwrap();
            let mut seen = std::collections::HashSet::new();
            for b in &out {
                let k = b.column(0).as_any().downcast_ref::<StringArray>().unwrap();
                let v = b.column(1).as_any().downcast_ref::<Int64Array>().unwrap();
                for i in 0..b.num_rows() {
                    assert_eq!(v.value(i), want, "{}", k.value(i));
                    assert!(seen.insert(k.value(i).to_string()), "one row per group");
                }
            }
            assert_eq!(seen.len(), 3000);
        }
    }

    #[tokio::test]
    async fn the_groups_are_reserved_from_the_query_pool() {
        let (schema, batches) = input(100_000, 2);
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_limit(1 << 20, 1.0)
            .build_arc()
            .unwrap();
        let ctx = Arc::new(TaskContext::default().with_runtime(runtime));
        let exec = Arc::new(first_by_v(&schema, batches, false));
        let err = collect(exec.execute(0, ctx).unwrap()).await.unwrap_err();
        let message = err.to_string();
        assert!(message.contains("GroupFirstExec"), "{message}");
        assert!(
            matches!(
                err.find_root(),
                datafusion::error::DataFusionError::ResourcesExhausted(_)
            ),
            "{message}"
        );
    }
}
