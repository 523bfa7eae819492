//! Table download: parse the request ([`request`]), resolve the element and take a snapshot of
//! its table's committed files ([`plan`]), then read and encode batch by batch into a bounded
//! channel that feeds the response body ([`stream`], [`encode`]). Memory stays bounded by the
//! batch size and the channel depth, whatever the table size.

pub mod encode;
pub mod plan;
pub mod request;
pub mod stream;
