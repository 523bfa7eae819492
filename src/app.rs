//! Wires the service together — config → catalog, object store, ingestion, router — serves it
//! on a listener through the public edge ([`crate::http::edge`]), and shuts down in order: stop
//! accepting, finish requests, flush and commit every buffer.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use object_store::ObjectStore;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::catalog::{Catalog, Location, Quotas};
use crate::config::{Config, ConfigError};
use crate::http::{AppState, edge, router};
use crate::ingest::Ingest;
use crate::ingest::flush::FlushCtx;

/// A start-up failure, with a message meant for the operator.
pub type StartError = Box<dyn std::error::Error + Send + Sync>;

/// Opens the catalog and store and starts ingestion.
pub async fn build_state(config: Config) -> Result<AppState, StartError> {
    let store = crate::store::open(&config)?;
    build_state_with_store(config, store).await
}

/// Like [`build_state`], on a given object store (tests inject failures this way).
pub async fn build_state_with_store(
    config: Config,
    store: Arc<dyn ObjectStore>,
) -> Result<AppState, StartError> {
    crate::http::metrics::init();
    crate::files::private_dir(&config.storage.data_dir).map_err(|e| {
        format!(
            "cannot create data dir {}: {e}",
            config.storage.data_dir.display()
        )
    })?;
    let location = Location::of(&config)?;
    tracing::info!(catalog = ?location, "opening the catalog");
    let catalog =
        Arc::new(tokio::task::spawn_blocking(move || Catalog::open_location(&location)).await??);
    let flush = FlushCtx {
        catalog: catalog.clone(),
        store: store.clone(),
        parquet: config.parquet.clone(),
        prefix: config.storage.prefix.clone(),
        retry_backoff: config.flush.retry_backoff.0,
    };
    let ingest = Ingest::start(&config, catalog.clone(), flush).await?;
    if config.compaction.enabled {
        crate::warehouse::compaction::Compactor {
            catalog: catalog.clone(),
            store: store.clone(),
            prefix: config.storage.prefix.clone(),
            parquet: config.parquet.clone(),
            cfg: config.compaction.clone(),
        }
        .spawn();
    }
    crate::warehouse::gc::spawn_heartbeat(catalog.clone(), config.flush.orphan_grace.0);
    spawn_last_used_writer(catalog.clone());
    crate::warehouse::gc::spawn_collector(
        store.clone(),
        catalog.clone(),
        config.storage.prefix.clone(),
        config.flush.orphan_grace.0,
    );
    catalog.set_quotas(Quotas::from_config(&config.accounts));
    let accounts = Arc::new(crate::accounts::Accounts::new(
        catalog.clone(),
        config.accounts.clone(),
        &config.server.public_url,
        &config.server.app_url,
    ));
    let trusted_proxies = crate::http::forwarded::parse_list(&config.server.trusted_proxies)
        .map_err(|message| ConfigError::Value {
            key: "server.trusted_proxies".into(),
            message,
        })?;
    let buffers = fresh_buffers(&config, &catalog, &ingest).await?;
    let sql = Arc::new(
        crate::sql::SqlEngine::new(
            catalog.clone(),
            store.clone(),
            config.sql.clone(),
            config.download.batch_rows,
        )
        .with_buffers(buffers.clone()),
    );
    Ok(AppState::new(crate::http::state::Shared {
        trusted_proxies: trusted_proxies.into(),
        accounts,
        sql,
        flash: Arc::new(crate::http::pages::Flash::new(catalog.clone())),
        config: Arc::new(config),
        catalog,
        ingest,
        buffers,
        store,
    }))
}

/// Writes the secrets' `last_used_at` every few seconds, off the request path.
fn spawn_last_used_writer(catalog: Arc<Catalog>) {
    let weak = Arc::downgrade(&catalog);
    drop(catalog);
    tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(5));
        loop {
            every.tick().await;
            let Some(c) = weak.upgrade() else { return };
            let r = tokio::task::spawn_blocking(move || c.write_last_used()).await;
            if let Ok(Err(e)) = r {
                tracing::warn!(error = %e, "cannot record when secrets were last used; will retry");
            }
        }
    });
}

/// Where fresh reads get rows not yet committed: this node's ingest alone (SQLite: one node),
/// or with a PostgreSQL catalog the cluster's ([`crate::fresh`]); this node is registered as
/// running and answers other nodes' requests.
async fn fresh_buffers(
    config: &Config,
    catalog: &Arc<Catalog>,
    ingest: &Arc<Ingest>,
) -> Result<Arc<dyn crate::model::fresh::Buffers>, StartError> {
    let registered = catalog.clone();
    tokio::task::spawn_blocking(move || registered.register_node()).await??;
    let Some((bus, asks)) = catalog.fresh_bus() else {
        return Ok(ingest.clone());
    };
    if !bus.wait_up(std::time::Duration::from_secs(5)).await {
        tracing::warn!("the fresh-read channel is not up yet; fresh reads fail until it is");
    }
    tokio::spawn(crate::fresh::answer_asks(
        ingest.clone(),
        catalog.clone(),
        asks,
    ));
    Ok(Arc::new(crate::fresh::ClusterBuffers::new(
        ingest.clone(),
        catalog.clone(),
        bus,
        config.read.fresh_timeout.0,
    )))
}

/// Serves until `shutdown` resolves, then drains requests and flushes every buffer. `/metrics` is
/// served on `metrics` (its own listener, never the public one) until then.
pub async fn serve(
    listener: TcpListener,
    metrics: Option<TcpListener>,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = edge::Limits::from(&state.config.server);
    let trusted = state.trusted_proxies.clone();
    let metrics = metrics.map(|l| {
        let app = crate::http::metrics::router(state.clone());
        tokio::spawn(async move { axum::serve(l, app).await })
    });
    let uncapped = move |ip| trusted.iter().any(|net| net.contains(ip));
    let front = crate::http::lane::Front::new(router(state.clone()), state.clone());
    edge::serve(listener, front, limits, uncapped, shutdown).await;
    if let Some(task) = metrics {
        task.abort();
    }
    tracing::info!("no longer accepting requests; flushing buffers");
    state.ingest.shutdown().await;
    if state.ingest.progress().min_uncommitted().is_some() {
        // Its WAL still holds acknowledged events: other nodes' fresh reads must keep waiting
        // for it (an error) rather than read without them.
        tracing::warn!(
            "some acknowledged events are not committed; this node stays registered as running"
        );
    } else {
        let catalog = state.catalog.clone();
        match tokio::task::spawn_blocking(move || catalog.node_stopped()).await {
            Ok(Ok(())) => {}
            _ => tracing::warn!(
                "could not record this node as stopped; other nodes' fresh reads will wait for it"
            ),
        }
    }
    tracing::info!("all buffers committed; bye");
    Ok(())
}

/// Listens on `addr` (host:port, names resolved) with a backlog of 4096 — tokio's default of 128
/// would make the kernel drop new connections while `server.max_connections` is reached.
pub async fn bind(addr: &str) -> std::io::Result<TcpListener> {
    let mut last = None;
    for a in tokio::net::lookup_host(addr).await? {
        let socket = if a.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        match socket.bind(a).and_then(|_| socket.listen(4096)) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{addr} resolves to no address"),
        )
    }))
}

/// Binds `server.metrics_listen`; `None` when it is empty (no metrics endpoint).
pub async fn bind_metrics(config: &Config) -> Result<Option<TcpListener>, StartError> {
    let addr = config.server.metrics_listen.trim();
    if addr.is_empty() {
        return Ok(None);
    }
    let listener = TcpListener::bind(addr).await.map_err(|e| {
        format!("cannot listen on {addr} (server.metrics_listen; empty turns /metrics off): {e}")
    })?;
    Ok(Some(listener))
}

/// The base URL clients should use: `server.public_url`, else `http://<bound address>`.
pub fn base_url(config: &Config, addr: SocketAddr) -> String {
    let configured = config.server.public_url.trim_end_matches('/');
    if configured.is_empty() {
        format!("http://{addr}")
    } else {
        configured.to_string()
    }
}

/// A server running in this process (tests, embedding).
pub struct RunningServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Where `/metrics` is served, if anywhere.
    pub metrics_addr: Option<SocketAddr>,
    /// Its state (catalog, ingestion handle for explicit flushes).
    pub state: AppState,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl RunningServer {
    /// Starts a server with `config` on its `server.listen` address; returns once WAL recovery
    /// is done.
    pub async fn start(config: Config) -> Result<RunningServer, StartError> {
        let store = crate::store::open(&config)?;
        Self::start_with_store(config, store).await
    }

    /// Like [`RunningServer::start`], on a given object store.
    pub async fn start_with_store(
        config: Config,
        store: Arc<dyn ObjectStore>,
    ) -> Result<RunningServer, StartError> {
        let mut config = config;
        let listener = bind(&config.server.listen).await?;
        let addr = listener.local_addr()?;
        let metrics = bind_metrics(&config).await?;
        let metrics_addr = metrics.as_ref().map(TcpListener::local_addr).transpose()?;
        config.server.public_url = base_url(&config, addr);
        if config.server.app_url.is_empty() {
            config.server.app_url = config.server.public_url.clone();
        }
        let state = build_state_with_store(config, store).await?;
        state.ingest.wait_ready().await;
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, metrics, state.clone(), async {
            let _ = rx.await;
        }));
        Ok(RunningServer {
            addr,
            metrics_addr,
            state,
            stop: Some(tx),
            task,
        })
    }

    /// `http://addr`
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// `http://metrics_addr/metrics`; panics when metrics are off.
    pub fn metrics_url(&self) -> String {
        let addr = self.metrics_addr.expect("server.metrics_listen is set");
        format!("http://{addr}/metrics")
    }

    /// Graceful shutdown: waits until every buffer is committed.
    pub async fn stop(mut self) -> std::io::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        (&mut self.task).await.map_err(std::io::Error::other)?
    }
}
