//! `stowage admin …`: operator and owner actions straight on the catalog file, so they work
//! with or without a running server and take effect on a running one at its next request.

use clap::Subcommand;
use serde_json::{Value, json};

use super::output::{AdminError, Output};
use super::users::UserCommand;
use crate::accounts::workspace::share_url;
use crate::catalog::{Catalog, CatalogError, Location, NewElement, SecretKind};
use crate::config::Config;

/// Admin subcommands.
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Teams.
    Team {
        #[command(subcommand)]
        command: TeamCommand,
    },
    /// Users of a team.
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// Turn event ingestion on or off for a team (operator).
    Events {
        #[command(subcommand)]
        command: EventsCommand,
    },
    /// Data API keys (x-api-key).
    Key {
        #[command(subcommand)]
        command: SecretCommand,
    },
    /// Events tokens (X-Auth-Token).
    Token {
        #[command(subcommand)]
        command: SecretCommand,
    },
    /// Canvases.
    Canvas {
        #[command(subcommand)]
        command: CanvasCommand,
    },
    /// Table elements on canvases.
    Element {
        #[command(subcommand)]
        command: ElementCommand,
    },
    /// Warehouse tables.
    Table {
        #[command(subcommand)]
        command: TableCommand,
    },
    /// The nodes of a cluster (fresh reads wait for each running one).
    Node {
        #[command(subcommand)]
        command: super::nodes::NodeCommand,
    },
}

/// `table …`
#[derive(Debug, Subcommand)]
pub enum TableCommand {
    /// Import a CSV, NDJSON or Parquet file into a warehouse table (all or nothing).
    Import {
        /// Team id or name.
        #[arg(long)]
        team: String,
        /// Table name (normalised like event names).
        #[arg(long)]
        table: String,
        /// csv, ndjson or parquet; default from the file extension.
        #[arg(long)]
        format: Option<String>,
        /// CSV field delimiter: one character, or `tab` (default `,`).
        #[arg(long)]
        delimiter: Option<String>,
        /// The file.
        file: std::path::PathBuf,
    },
}

/// `team …`
#[derive(Debug, Subcommand)]
pub enum TeamCommand {
    /// Create a team.
    Create {
        /// Unique team name.
        #[arg(long)]
        name: String,
    },
    /// List teams.
    List,
    /// Tune a team's flushing, buffer budget and rate limit (applied live; empty resets).
    Set(super::team_settings::SetArgs),
    /// Show a team's effective flush, budget and rate settings.
    Show {
        /// Team id or name.
        #[arg(long)]
        team: String,
    },
}

/// `events …`
#[derive(Debug, Subcommand)]
pub enum EventsCommand {
    /// Enable event ingestion for a team.
    Enable {
        /// Team id or name.
        #[arg(long)]
        team: String,
    },
    /// Disable event ingestion; its tokens stop working at once.
    Disable {
        /// Team id or name.
        #[arg(long)]
        team: String,
    },
    /// List owners' open requests to enable events.
    Requests,
}

/// `key …` / `token …`
#[derive(Debug, Subcommand)]
pub enum SecretCommand {
    /// Create one; the secret is shown once.
    Create {
        /// Team id or name.
        #[arg(long)]
        team: String,
        /// Id or name of an owner of the team.
        #[arg(long)]
        user: String,
    },
    /// List a team's (never the secrets).
    List {
        /// Team id or name.
        #[arg(long)]
        team: String,
    },
    /// Revoke one by id; it stops working at once.
    Revoke {
        /// The key or token id.
        #[arg(long)]
        id: String,
    },
}

/// `canvas …`
#[derive(Debug, Subcommand)]
pub enum CanvasCommand {
    /// Create a canvas.
    Create {
        /// Team id or name.
        #[arg(long)]
        team: String,
        /// Canvas name.
        #[arg(long)]
        name: String,
    },
}

/// `element …`
#[derive(Debug, Subcommand)]
pub enum ElementCommand {
    /// Create a table element reading a warehouse table, or with --sql an SQL element.
    Create {
        /// Canvas id.
        #[arg(long)]
        canvas: String,
        /// Source warehouse table (e.g. tracks, purchased_an_item).
        #[arg(long, required_unless_present = "sql")]
        table: Option<String>,
        /// An SQL element's query (one SELECT over the team's tables), checked against the
        /// team's current tables before it is stored.
        #[arg(long, conflicts_with_all = ["table", "columns", "filters", "limit"])]
        sql: Option<String>,
        /// Display name.
        #[arg(long)]
        name: Option<String>,
        /// Ordered subset of columns, comma-separated.
        #[arg(long, value_delimiter = ',')]
        columns: Option<Vec<String>>,
        /// Filters applied before any request's, as JSON:
        /// '[{"column":"plan","op":"eq","value":"pro"}]'.
        #[arg(long)]
        filters: Option<String>,
        /// Most rows the element returns.
        #[arg(long)]
        limit: Option<u64>,
        /// Downloads include events acknowledged but not yet committed unless a request says
        /// `"fresh": false` (SPEC §3.5).
        #[arg(long)]
        fresh: bool,
    },
}

/// team, table, format, delimiter, file
type ImportArgs = (
    String,
    String,
    Option<String>,
    Option<String>,
    std::path::PathBuf,
);

fn import_table(
    config: &Config,
    catalog: Catalog,
    (team, table, format, delimiter, file): ImportArgs,
) -> Result<Output, AdminError> {
    use crate::warehouse::import::{ImportFormat, Importer, Source, import};
    let refused = |m: String| AdminError::Catalog(CatalogError::Refused(m));
    let team = crate::model::TeamId(catalog.find_team(&team)?.id.into());
    let name = format
        .or_else(|| {
            file.extension()
                .and_then(|e| e.to_str())
                .map(str::to_string)
        })
        .unwrap_or_default();
    let format = ImportFormat::parse(&name).ok_or_else(|| {
        AdminError::InvalidImport(format!(
            "unknown format {name:?}; use --format csv|ndjson|parquet"
        ))
    })?;
    let format = match delimiter {
        None => format,
        Some(d) => format.with_delimiter(&d).ok_or_else(|| {
            AdminError::InvalidImport(format!(
                "--delimiter {d:?}: use one character (not a quote or line break) or tab, with CSV"
            ))
        })?,
    };
    let input = std::fs::File::open(&file)
        .map_err(|e| refused(format!("cannot open {}: {e}", file.display())))?;
    let store = crate::store::open(config).map_err(|e| refused(e.to_string()))?;
    let catalog = std::sync::Arc::new(catalog);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| refused(e.to_string()))?;
    let to = Importer {
        catalog: &catalog,
        store: &store,
        parquet: &config.parquet,
        prefix: &config.storage.prefix,
    };
    let grace = config.flush.orphan_grace.0;
    let stats = rt
        .block_on(async {
            // A running server's collector must see this process as alive while it imports.
            let beat = crate::warehouse::gc::spawn_heartbeat(catalog.clone(), grace);
            let r = import(&to, &team, &table, format, Source::File(input)).await;
            beat.abort();
            r
        })
        .map_err(|e| match e {
            crate::warehouse::import::ImportError::Input(m) => AdminError::InvalidImport(m),
            e => refused(e.to_string()),
        })?;
    let human = format!(
        "imported {} rows into {} ({} files)",
        stats.rows, stats.table, stats.files
    );
    out(json!(stats), human)
}

fn out(json: Value, human: String) -> Result<Output, AdminError> {
    Ok(Output { json, human })
}

/// Runs one admin command against the catalog of `config`.
pub fn run(config: &Config, command: AdminCommand) -> Result<Output, AdminError> {
    let catalog = Catalog::open_location(&Location::of(config)?)?;
    match command {
        AdminCommand::Node { command } => super::nodes::run(&catalog, command),
        AdminCommand::Team {
            command: TeamCommand::Create { name },
        } => {
            let id = catalog.create_team(&name)?;
            out(json!({"id": id}), format!("created team {name} ({id})"))
        }
        AdminCommand::Team {
            command: TeamCommand::Set(args),
        } => {
            let change = super::team_settings::parse_change(&args)?;
            catalog.set_team_settings(&args.team, change)?;
            super::team_settings::show(config, &catalog, &args.team)
        }
        AdminCommand::Team {
            command: TeamCommand::Show { team },
        } => super::team_settings::show(config, &catalog, &team),
        AdminCommand::Team {
            command: TeamCommand::List,
        } => {
            let teams = catalog.list_teams()?;
            let human = teams
                .iter()
                .map(|t| {
                    format!(
                        "{}\t{}\tevents {}",
                        t.id,
                        t.name,
                        if t.events_enabled {
                            "enabled"
                        } else {
                            "disabled"
                        }
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            out(json!(teams), human)
        }
        AdminCommand::User { command } => super::users::run(config, &catalog, command),
        AdminCommand::Events { command } => {
            let (team, on) = match command {
                EventsCommand::Enable { team } => (team, true),
                EventsCommand::Disable { team } => (team, false),
                EventsCommand::Requests => return super::users::events_requests(&catalog),
            };
            // Turning events off answers once no node accepts the team's tokens any more.
            let (t, settled) = catalog.set_events_enabled_settled(&team, on)?;
            if !on {
                settled.wait_blocking();
            }
            let state = if on { "enabled" } else { "disabled" };
            out(
                json!({"id": t.id, "events_enabled": on}),
                format!("events {state} for team {}", t.name),
            )
        }
        AdminCommand::Table {
            command:
                TableCommand::Import {
                    team,
                    table,
                    format,
                    delimiter,
                    file,
                },
        } => import_table(config, catalog, (team, table, format, delimiter, file)),
        AdminCommand::Key { command } => secrets(&catalog, SecretKind::DataKey, command),
        AdminCommand::Token { command } => secrets(&catalog, SecretKind::EventsToken, command),
        AdminCommand::Canvas {
            command: CanvasCommand::Create { team, name },
        } => {
            let id = catalog.create_canvas(&team, &name)?;
            out(json!({"id": id}), format!("created canvas {name} ({id})"))
        }
        AdminCommand::Element {
            command:
                ElementCommand::Create {
                    canvas,
                    table,
                    sql,
                    name,
                    columns,
                    filters,
                    limit,
                    fresh,
                },
        } => {
            let id = match (sql, table) {
                (Some(sql), _) => super::sql_element::create(
                    config,
                    &catalog,
                    &canvas,
                    name.as_deref(),
                    &sql,
                    fresh,
                )?,
                (None, table) => {
                    let table = table.unwrap_or_default();
                    let filters = match filters {
                        Some(text) => match serde_json::from_str::<serde_json::Value>(&text) {
                            Ok(v @ serde_json::Value::Array(_)) => Some(v),
                            _ => {
                                return Err(AdminError::Catalog(CatalogError::Refused(
                            "--filters must be a JSON array of {\"column\", \"op\", \"value\"}"
                                .into(),
                        )));
                            }
                        },
                        None => None,
                    };
                    catalog.create_element(&NewElement {
                        canvas: canvas.clone(),
                        table,
                        name,
                        columns,
                        filters,
                        limit,
                        fresh,
                    })?
                }
            };
            let base = if !config.server.app_url.is_empty() {
                config.server.app_url.clone()
            } else if !config.server.public_url.is_empty() {
                config.server.public_url.clone()
            } else {
                format!("http://{}", config.server.listen)
            };
            let share = share_url(&base, &canvas, &id);
            out(
                json!({"id": id, "share_url": share}),
                format!("created element {id}\nshare URL: {share}"),
            )
        }
    }
}

fn secrets(
    catalog: &Catalog,
    kind: SecretKind,
    command: SecretCommand,
) -> Result<Output, AdminError> {
    let (noun, field) = match kind {
        SecretKind::DataKey => ("key", "key"),
        SecretKind::EventsToken => ("token", "token"),
    };
    match command {
        SecretCommand::Create { team, user } => {
            let (id, secret) = catalog.create_secret(kind, &team, &user)?;
            out(
                json!({"id": id, field: secret}),
                format!("created {noun} {id}\n{secret}\nStore it now: it is shown only once."),
            )
        }
        SecretCommand::List { team } => {
            let list = catalog.list_secrets(kind, &team)?;
            let human = list
                .iter()
                .map(|s| {
                    format!(
                        "{}\t{}…\tcreated by {}\t{}",
                        s.id,
                        s.prefix,
                        s.created_by,
                        if s.revoked_at.is_some() {
                            "revoked"
                        } else {
                            "active"
                        }
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            out(json!(list), human)
        }
        SecretCommand::Revoke { id } => {
            // Answered once no node accepts it any more.
            catalog.revoke_secret(kind, &id)?.wait_blocking();
            out(
                json!({"id": id, "revoked": true}),
                format!("revoked {noun} {id}"),
            )
        }
    }
}
