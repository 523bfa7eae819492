//! `stowage admin node list|forget`: the cluster's node registry (SPEC §7), which fresh reads
//! (SPEC §3.5) wait on. A node that died for good (its WAL is gone) stays "running" in the
//! registry, and every fresh read fails with `fresh_timeout`, until it is forgotten here.

use clap::Subcommand;
use serde_json::json;

use super::output::{AdminError, Output};
use crate::catalog::{Catalog, CatalogError};

/// `node …`
#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// The nodes that ever served with this catalog, by WAL id, newest start first.
    List,
    /// Forget a node whose WAL is gone for good, so fresh reads stop waiting for it. Its
    /// acknowledged events that were never flushed are lost with its WAL.
    Forget {
        /// The node's WAL id (from `node list`).
        wal_id: String,
    },
}

/// Runs a `node` command.
pub fn run(catalog: &Catalog, command: NodeCommand) -> Result<Output, AdminError> {
    match command {
        NodeCommand::List => {
            let nodes = catalog.nodes()?;
            let human = nodes
                .iter()
                .map(|n| {
                    let state = if n.stopped_at.is_some() {
                        "stopped"
                    } else {
                        "running (or died)"
                    };
                    format!("{}  {state}", n.wal_id)
                })
                .collect::<Vec<_>>()
                .join("\n");
            Ok(Output {
                json: json!({ "nodes": nodes }),
                human,
            })
        }
        NodeCommand::Forget { wal_id } => {
            if !catalog.forget_node(&wal_id)? {
                return Err(CatalogError::NotFound(format!("no node {wal_id:?}")).into());
            }
            Ok(Output {
                json: json!({ "forgotten": wal_id }),
                human: format!("forgot node {wal_id}"),
            })
        }
    }
}
