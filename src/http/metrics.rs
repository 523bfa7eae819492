//! `/metrics` in Prometheus text format, served on its own listener (`server.metrics_listen`,
//! loopback by default: its series name teams), plus the request-counting middleware. Counters
//! and histograms are recorded where things happen (WAL writer, flush, handlers) through the
//! `metrics` facade; gauges that describe current state are read at scrape time.

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
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
    metrics::gauge!("stowage_active_teams").set(ingest.active_teams() as f64);
    let now = Instant::now();
    for (team, since) in ingest.progress().oldest_unflushed() {
        let labels = [("team", team.to_string())];
        metrics::gauge!("stowage_oldest_unflushed_seconds", &labels)
            .set(now.duration_since(since).as_secs_f64());
        metrics::gauge!("stowage_team_buffer_bytes", &labels)
            .set(ingest.admission().team_bytes(&team) as f64);
    }
    let body = HANDLE.get().map(|h| h.render()).unwrap_or_default();
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

/// Counts requests by route and status.
pub async fn track(req: Request, next: Next) -> Response {
    let route: &'static str = match req.uri().path() {
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
    };
    let resp = next.run(req).await;
    metrics::counter!("stowage_http_requests_total", "route" => route, "status" => resp.status().as_u16().to_string())
        .increment(1);
    resp
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
