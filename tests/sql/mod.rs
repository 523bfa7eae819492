//! SQL elements end to end (SPEC §3.4), on a real server over HTTP: DuckDB as the oracle for
//! analysts' queries over data sent through the Segment endpoints (with tables whose files
//! have mixed schemas), refusals, team isolation, parameters, the limits, and every format.

use crate::common;

mod fixture;
mod formats;
mod limits;
mod memory;
mod oracle;
mod paging;
mod refusals;
