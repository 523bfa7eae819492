//! `/metrics` in Prometheus text format, served on its own listener (`server.metrics_listen`,
//! loopback by default: its series name teams), plus the request-counting middleware. Counters
//! and histograms are recorded where things happen (WAL writer, flush, handlers) through the
//! `metrics` facade; gauges that describe current state are read at scrape time.

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use super::AppState;

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process-wide recorder (once; later calls are no-ops).
pub fn init() {
    HANDLE.get_or_init(|| {
        PrometheusBuilder::new()
            .install_recorder()
            .expect("no other metrics recorder is installed")
    });
}

/// The metrics listener's routes: `GET /metrics`, 404 for anything else.
pub fn router(state: AppState) -> axum::Router {
    axum::Router::new()
        .route("/metrics", axum::routing::get(render))
        .layer(axum::middleware::map_response(
            |mut resp: Response| async move {
                resp.headers_mut().insert(
                    header::X_CONTENT_TYPE_OPTIONS,
                    axum::http::HeaderValue::from_static("nosniff"),
                );
                resp
            },
        ))
        .with_state(state)
}

/// Renders every metric.
pub async fn render(State(state): State<AppState>) -> Response {
    init();
    let ingest = &state.ingest;
    let wal = ingest.wal();
    metrics::gauge!("stowage_wal_bytes_pending").set(
        wal.stats
            .bytes_on_disk
            .load(std::sync::atomic::Ordering::Relaxed) as f64,
    );
    metrics::gauge!("stowage_wal_next_seq").set(wal.next_seq() as f64);
    metrics::gauge!("stowage_buffer_bytes").set(ingest.admission().global_bytes() as f64);
    metrics::gauge!("stowage_buffer_measured_bytes")
        .set(ingest.admission().global_measured_bytes() as f64);
    metrics::gauge!("stowage_buffer_uncounted_bytes")
        .set(ingest.admission().uncounted_bytes() as f64);
    metrics::gauge!("stowage_admission_waiting").set(ingest.admission().waiting() as f64);
    metrics::gauge!("stowage_resident_bytes").set(crate::resident::sampled() as f64);
    metrics::gauge!("stowage_active_teams").set(ingest.active_teams() as f64);
    let now = Instant::now();
    for (team, since) in ingest.progress().oldest_unflushed() {
        let labels = [("team", team.to_string())];
        metrics::gauge!("stowage_oldest_unflushed_seconds", &labels)
            .set(now.duration_since(since).as_secs_f64());
        metrics::gauge!("stowage_team_buffer_bytes", &labels)
            .set(ingest.admission().team_bytes(&team) as f64);
        metrics::gauge!("stowage_team_measured_bytes", &labels)
            .set(ingest.admission().team_measured_bytes(&team) as f64);
    }
    let body = HANDLE.get().map(|h| h.render()).unwrap_or_default();
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

/// The route label of a path.
pub fn route_of(path: &str) -> &'static str {
    match path {
        "/v1/event" => "/v1/event",
        "/v1/import" => "/v1/import",
        "/data/table" => "/data/table",
        "/api/data/table" => "/api/data/table",
        "/healthz" => "/healthz",
        "/readyz" => "/readyz",
        p if p.starts_with("/api/v1/") => "/api/v1",
        "/login" | "/logout" | "/settings" => "pages",
        p if p.starts_with("/settings/") || p.starts_with("/invite/") => "pages",
        p if p.starts_with("/static/") => "static",
        _ => "other",
    }
}

thread_local! {
    /// Each thread's handles of `stowage_http_requests_total`, by route and status: a request
    /// increments an atomic instead of hashing its labels into the registry.
    static REQUESTS: std::cell::RefCell<foldhash::HashMap<(&'static str, u16), metrics::Counter>> =
        Default::default();
}

thread_local! {
    /// Each thread's handles of counters with one static label.
    static LABELLED: std::cell::RefCell<foldhash::HashMap<(&'static str, &'static str), metrics::Counter>> =
        Default::default();
}

/// Adds `n` to counter `name` with one label `key = value`, through a per-thread handle.
pub fn count(name: &'static str, key: &'static str, value: &'static str, n: u64) {
    LABELLED.with_borrow_mut(|cache| {
        cache
            .entry((name, value))
            .or_insert_with(|| metrics::counter!(name, key => value))
            .increment(n)
    });
}

/// Counts a request by route and status.
pub fn count_request(route: &'static str, status: axum::http::StatusCode) {
    let code = status.as_u16();
    REQUESTS.with_borrow_mut(|cache| {
        cache
            .entry((route, code))
            .or_insert_with(|| {
                let status = status.as_str().to_string();
                metrics::counter!("stowage_http_requests_total", "route" => route, "status" => status)
            })
            .increment(1)
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn records_and_renders() {
        super::init();
        metrics::counter!("t_counter_total", "a" => "b").increment(3);
        metrics::histogram!("t_hist_seconds").record(0.5);
        let text = super::HANDLE.get().unwrap().render();
        assert!(text.contains("t_counter_total"), "{text}");
        assert!(text.contains("t_hist_seconds"), "{text}");
    }
}
