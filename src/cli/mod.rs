//! The command line: `stowage serve` and `stowage admin …`. `--json`, `--data-dir` and
//! `--config` are global and may appear anywhere on the line.

mod admin;
mod download;
mod serve;
mod team_settings;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::{Config, Overrides};

/// stowage: event ingestion into Parquet warehouses, and streamed table downloads.
#[derive(Debug, Parser)]
#[command(name = "stowage", version, about)]
pub struct Cli {
    /// Print machine-readable JSON.
    #[arg(long, global = true)]
    pub json: bool,
    /// Data directory (catalog, demo.json, local warehouse). Overrides storage.data_dir.
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Config file (see config/stowage.toml).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP service.
    Serve(serve::ServeArgs),
    /// Download a table element (by share URL, or --canvas and --element).
    Download(download::DownloadArgs),
    /// Manage teams, users, keys, tokens, canvases and elements (works with or without a
    /// running server; changes take effect on a running one immediately).
    Admin {
        /// The admin action.
        #[command(subcommand)]
        command: admin::AdminCommand,
    },
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let listen = match &cli.command {
        Command::Serve(a) => a.listen.clone(),
        Command::Admin { .. } | Command::Download(_) => None,
    };
    let overrides = Overrides {
        listen,
        data_dir: cli.data_dir.clone(),
    };
    let config = match Config::load(cli.config.as_deref(), std::env::vars(), &overrides) {
        Ok(c) => c,
        Err(e) => return fail(cli.json, "invalid_config", &e.to_string()),
    };
    match cli.command {
        Command::Serve(args) => serve::run(config, args),
        Command::Download(args) => download::run(args, cli.json),
        Command::Admin { command } => match admin::run(&config, command) {
            Ok(out) => {
                if cli.json {
                    println!("{}", out.json);
                } else {
                    println!("{}", out.human);
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail(cli.json, e.code(), &e.to_string()),
        },
    }
}

/// Prints an error (as the API's JSON error body with `--json`) and returns exit code 1.
fn fail(json: bool, code: &str, message: &str) -> ExitCode {
    if json {
        eprintln!(
            "{}",
            serde_json::json!({"error": {"code": code, "message": message}})
        );
    } else {
        eprintln!("error: {message}");
    }
    ExitCode::FAILURE
}
