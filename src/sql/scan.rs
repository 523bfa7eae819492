//! A warehouse table as DataFusion sees it: [`SnapshotTable`] holds the catalog's snapshot of
//! the table's committed files and its current schema, and scans them with the download's
//! [`TableReader`] — so older files are cast to widened types and null-filled exactly as a
//! download reads them, only the projected and filtered columns are decoded, and row groups the
//! pushed-down predicates rule out are skipped. The files are split into contiguous runs, one
//! per partition, so DataFusion reads them in parallel. No LIST of the store ever happens, and
//! compaction cannot pull a file from under a scan (replaced objects outlive any query). A fresh
//! read's rows not yet committed (SPEC §3.5) follow the files in the last partition.

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result as DfResult, Statistics};
use datafusion::error::DataFusionError;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use object_store::ObjectStore;

use super::pushdown;
use crate::catalog::DataFile;
use crate::model::filter::Filter;
use crate::warehouse::reader::{ReadSpec, TableReader};

/// One warehouse table of one snapshot.
#[derive(Debug)]
pub struct SnapshotTable {
    /// The table's current schema, as Arrow.
    schema: SchemaRef,
    /// Committed files, in row order.
    files: Vec<DataFile>,
    /// A fresh read's rows not in those files, read after them.
    buffered: Vec<RecordBatch>,
    store: Arc<dyn ObjectStore>,
}

impl SnapshotTable {
    /// The table whose current schema is `schema` and whose live files are `files`.
    pub fn new(schema: SchemaRef, files: Vec<DataFile>, store: Arc<dyn ObjectStore>) -> Self {
        Self {
            schema,
            files,
            buffered: Vec::new(),
            store,
        }
    }

    /// Also reads `batches` (rows not yet committed, any subset of the columns) after the files.
    pub fn with_buffered(mut self, batches: Vec<RecordBatch>) -> Self {
        self.buffered = batches;
        self
    }
}

#[async_trait]
impl TableProvider for SnapshotTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| match pushdown::to_filter(f, &self.schema) {
                Some(_) => TableProviderFilterPushDown::Inexact,
                None => TableProviderFilterPushDown::Unsupported,
            })
            .collect())
    }

    fn statistics(&self) -> Option<Statistics> {
        Some(
            Statistics::new_unknown(&self.schema).with_num_rows(Precision::Exact(
                rows(&self.files) + buffered_rows(&self.buffered),
            )),
        )
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let output = match projection {
            Some(p) => Arc::new(self.schema.project(p)?),
            None => self.schema.clone(),
        };
        let filters: Vec<Filter> = filters
            .iter()
            .filter_map(|f| pushdown::to_filter(f, &self.schema))
            .collect();
        let mut read: Vec<Field> = output.fields().iter().map(|f| f.as_ref().clone()).collect();
        for f in &filters {
            if !read.iter().any(|r| r.name() == &f.column) {
                read.push(self.schema.field_with_name(&f.column)?.clone());
            }
        }
        let partitions = state.config().target_partitions().max(1);
        Ok(Arc::new(SnapshotScan::new(ScanSpec {
            output,
            read: Arc::new(Schema::new(read)),
            // The reader's limit counts rows after its own filters; DataFusion only hands a
            // limit down when no predicate sits above the scan, but stay safe.
            limit: limit.filter(|_| filters.is_empty()),
            filters,
            runs: runs(&self.files, partitions),
            buffered: self.buffered.clone(),
            store: self.store.clone(),
            batch_rows: state.config().batch_size(),
        })))
    }
}

/// Total rows of `batches`.
fn buffered_rows(batches: &[RecordBatch]) -> usize {
    batches.iter().map(RecordBatch::num_rows).sum()
}

/// Total rows of `files`.
fn rows(files: &[DataFile]) -> usize {
    files.iter().map(|f| f.rows as usize).sum()
}

/// `files` cut into at most `n` contiguous runs of about equal bytes.
fn runs(files: &[DataFile], n: usize) -> Vec<Vec<DataFile>> {
    let total: u64 = files.iter().map(|f| f.bytes).sum();
    let per = total.div_ceil(n as u64).max(1);
    let mut out: Vec<Vec<DataFile>> = vec![Vec::new()];
    let mut size = 0u64;
    for f in files {
        if size >= per && out.len() < n {
            out.push(Vec::new());
            size = 0;
        }
        size += f.bytes;
        out.last_mut().expect("one run at least").push(f.clone());
    }
    out
}

/// What a scan reads, shared by its partitions.
#[derive(Debug)]
struct ScanSpec {
    /// Columns the scan returns.
    output: SchemaRef,
    /// Output plus filter-only columns.
    read: SchemaRef,
    /// Predicates the reader applies (DataFusion applies them again).
    filters: Vec<Filter>,
    /// Most rows per partition.
    limit: Option<usize>,
    /// Each partition's files.
    runs: Vec<Vec<DataFile>>,
    /// Rows not yet committed, read by the last partition after its files.
    buffered: Vec<RecordBatch>,
    store: Arc<dyn ObjectStore>,
    batch_rows: usize,
}

/// The physical scan: one [`TableReader`] per partition.
#[derive(Debug)]
pub struct SnapshotScan {
    spec: Arc<ScanSpec>,
    properties: Arc<PlanProperties>,
}

impl SnapshotScan {
    fn new(spec: ScanSpec) -> Self {
        let properties = PlanProperties::new(
            EquivalenceProperties::new(spec.output.clone()),
            Partitioning::UnknownPartitioning(spec.runs.len()),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Self {
            spec: Arc::new(spec),
            properties: Arc::new(properties),
        }
    }
}

impl DisplayAs for SnapshotScan {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let files: usize = self.spec.runs.iter().map(Vec::len).sum();
        write!(
            f,
            "SnapshotScan: files={files}, partitions={}, filters={}",
            self.spec.runs.len(),
            self.spec.filters.len()
        )
    }
}

impl ExecutionPlan for SnapshotScan {
    fn name(&self) -> &str {
        "SnapshotScan"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let spec = &self.spec;
        let files = spec.runs.get(partition).cloned().ok_or_else(|| {
            DataFusionError::Internal(format!("SnapshotScan has no partition {partition}"))
        })?;
        let reader = TableReader::new(
            spec.store.clone(),
            files,
            ReadSpec {
                output: spec.output.clone(),
                read: spec.read.clone(),
                filters: spec.filters.clone(),
                limit: spec.limit,
                batch_rows: spec.batch_rows,
                start: None,
                string_views: false,
            },
        );
        let reader = if partition + 1 == spec.runs.len() {
            reader.with_buffered(spec.buffered.clone())
        } else {
            reader
        };
        let batches = futures::stream::unfold(reader, |mut reader| async move {
            match reader.next_batch().await {
                Ok(Some(batch)) => Some((Ok(batch), reader)),
                Ok(None) => None,
                Err(e) => Some((Err(DataFusionError::External(Box::new(e))), reader)),
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            spec.output.clone(),
            batches,
        )))
    }

    fn statistics_from_inputs(
        &self,
        _input_stats: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> DfResult<Arc<Statistics>> {
        let last = self.spec.runs.len().saturating_sub(1);
        let (files, buffered): (Vec<DataFile>, &[RecordBatch]) = match args.partition() {
            Some(p) if p == last => (self.spec.runs[p].clone(), &self.spec.buffered),
            Some(p) => (self.spec.runs.get(p).cloned().unwrap_or_default(), &[]),
            None => (self.spec.runs.concat(), &self.spec.buffered),
        };
        let n = rows(&files) + buffered_rows(buffered);
        // The reader's own filters and limit leave fewer rows than the files hold.
        let n = if self.spec.filters.is_empty() && self.spec.limit.is_none() {
            Precision::Exact(n)
        } else {
            Precision::Inexact(n)
        };
        Ok(Arc::new(
            Statistics::new_unknown(&self.spec.output).with_num_rows(n),
        ))
    }
}
