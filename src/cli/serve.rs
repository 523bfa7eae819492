//! `stowage serve`: logging, the runtime, optional demo seeding, signals, graceful shutdown.

use std::process::ExitCode;

use clap::Args;
use tracing_subscriber::EnvFilter;

use crate::config::{Config, LogFormat};
use crate::{app, demo};

/// `serve` flags.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (overrides server.listen).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Seed a demo team, keys and elements, print curl commands, write <data-dir>/demo.json.
    #[arg(long)]
    pub demo: bool,
}

fn init_logging(config: &Config) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&config.log.level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if config.log.format == LogFormat::Json {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// Runs the server until SIGTERM or SIGINT, then shuts down gracefully (exit 0).
pub fn run(config: Config, args: ServeArgs) -> ExitCode {
    init_logging(&config);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return super::output::fail(false, "runtime", &e.to_string()),
    };
    match runtime.block_on(serve(config, args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            super::output::fail(false, "startup", &e.to_string())
        }
    }
}

async fn serve(mut config: Config, args: ServeArgs) -> Result<(), app::StartError> {
    let listener = crate::app::bind(&config.server.listen).await.map_err(|e| {
        format!(
            "cannot listen on {} (server.listen): {e}",
            config.server.listen
        )
    })?;
    let addr = listener.local_addr()?;
    let metrics = app::bind_metrics(&config).await?;
    let metrics_addr = match &metrics {
        Some(l) => l.local_addr()?.to_string(),
        None => "off".to_string(),
    };
    let base = app::base_url(&config, addr);
    let app_url = if config.server.app_url.is_empty() {
        base.clone()
    } else {
        config.server.app_url.clone()
    };
    // Links (invites, set-password) and share URLs are built on these.
    config.server.public_url = base.clone();
    config.server.app_url = app_url.clone();
    let data_dir = config.storage.data_dir.clone();
    let node = config.node.id.clone();
    crate::allocator::reuse_below(config.server.reuse_memory_below.0);
    let state = app::build_state(config).await?;
    if args.demo {
        let info = demo::seed(&state.catalog, &data_dir, &base, &app_url)?;
        println!("{}", demo::instructions(&info, &data_dir));
    }
    tracing::info!(%addr, metrics = %metrics_addr, %node, data_dir = %data_dir.display(), "stowage listening");
    app::serve(listener, metrics, state, shutdown_signal()).await?;
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term.recv() => {},
    }
    tracing::info!("shutdown signal received");
}
