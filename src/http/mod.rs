//! The HTTP edge: the accept loop with its timeouts and connection cap ([`edge`]), the ingest
//! fast lane in front of the router ([`lane`]), the router ([`router`]) with what surrounds
//! every request ([`around`]: request ids, [`request_id`]) and the state every handler shares
//! ([`state`]), one file per endpoint group, the management API ([`api`]) and the settings pages
//! ([`pages`]), and body reading with limits ([`body`]). Handlers are thin: extract, validate,
//! call one service, map the result; the layers' errors become the client's in [`error`], the
//! only place an [`error::ApiError`] is made from them.

pub mod api;
pub mod around;
pub mod body;
pub mod edge;
pub mod error;
pub mod events;
pub mod forwarded;
pub mod health;
pub mod import;
pub mod lane;
pub mod metrics;
pub mod pages;
pub mod request_id;
pub mod router;
pub mod segment;
pub mod state;
pub mod tables;

pub use router::router;
pub use state::AppState;
