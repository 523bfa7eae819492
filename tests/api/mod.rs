//! The management API `/api/v1` over a real socket (SPEC §5.1): every endpoint against every
//! kind of caller ([`matrix`]), the rules that keep a team safe — last owner, one-time links,
//! revocation that takes effect at the next request, throttled sign-ins ([`people`],
//! [`sessions`]) — and the promise that a secret is shown once and never logged ([`secrets`],
//! [`operator`], which drives the real binary and its admin CLI).

use crate::common;

pub(crate) mod client;
mod fixture;
mod matrix;
mod operator;
mod people;
mod secrets;
mod sessions;
