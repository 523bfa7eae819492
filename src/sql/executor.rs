//! The runtime queries execute on, apart from the one serving HTTP. DataFusion's operators
//! yield to the scheduler only when their inputs do, so a join that multiplies rows in memory
//! can hold a thread for as long as it computes; on a runtime of their own such queries cannot
//! starve requests, and the deadline (awaited on the serving runtime) answers on time. A query
//! stopped at its deadline is aborted and ends at its next yield point.

use std::sync::OnceLock;

use tokio::runtime::{Builder, Runtime};
use tokio::task::JoinHandle;

/// The query runtime: one worker per core, created on first use and kept for the process.
pub fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Builder::new_multi_thread()
            .worker_threads(cores)
            .thread_name("stowage-sql")
            // Queries make and drop large blocks at a high rate: mimalloc's own placement.
            .on_thread_start(crate::allocator::placement::unplace_this_thread)
            .enable_all()
            .build()
            .expect("the SQL runtime starts")
    })
}

/// Aborts the task when dropped: a query nobody reads any more stops.
pub struct AbortOnDrop(pub JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
