//! The command line: `stowage serve`, `stowage admin …`, `stowage download` and
//! `stowage bench …`. `--json`, `--data-dir` and `--config` are global and may appear anywhere
//! on the line.

mod admin;
mod bench;
mod download;
mod nodes;
mod output;
mod serve;
mod sql_element;
mod team_settings;
mod users;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::{Config, Overrides};
use output::fail;

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
    /// Load-test a running server's ingest endpoints (a client; needs no data dir or config).
    Bench {
        /// The bench action.
        #[command(subcommand)]
        command: bench::BenchCommand,
    },
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.command, Command::Serve(_) | Command::Admin { .. }) {
        // What these create under the data dir (the catalog, the WAL, demo.json) is their
        // user's alone, whichever of them creates it first. (A download's output file keeps the
        // user's umask.)
        crate::files::private_umask();
    }
    let json = cli.json;
    // The server-side commands read the config; the bench is a plain client and does not.
    let config = |listen: Option<String>| {
        let overrides = Overrides {
            listen,
            data_dir: cli.data_dir.clone(),
        };
        Config::load(cli.config.as_deref(), std::env::vars(), &overrides)
            .map_err(|e| fail(json, "invalid_config", &e.to_string()))
    };
    match cli.command {
        Command::Serve(args) => match config(args.listen.clone()) {
            Ok(config) => serve::run(config, args),
            Err(code) => code,
        },
        Command::Download(args) => match config(None) {
            Ok(_) => download::run(args, json),
            Err(code) => code,
        },
        Command::Bench { command } => bench::run(command, json),
        Command::Admin { command } => match config(None) {
            Ok(config) => match admin::run(&config, command) {
                Ok(out) => {
                    if json {
                        println!("{}", out.json);
                    } else {
                        println!("{}", out.human);
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => fail(json, e.code(), &e.to_string()),
            },
            Err(code) => code,
        },
    }
}
