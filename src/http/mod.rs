//! The HTTP edge: the router ([`router`]), one file per endpoint group, and body reading with
//! limits ([`body`]). Handlers are thin: extract, validate, call one service, map the result.

pub mod body;
pub mod events;
pub mod health;
pub mod import;
pub mod metrics;
pub mod router;
pub mod segment;
pub mod tables;

pub use router::{AppState, router};
