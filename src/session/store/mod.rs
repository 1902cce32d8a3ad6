//! What outlives the process, and what is kept in memory for how long: the
//! SQLite journal and its answers log, the daemon's epoch, the state as
//! journal rows and back (`persist.rs`), and which answers are kept
//! (`retention.rs`). The store never names the authority's state: it is
//! handed borrowed pieces (`persist::Rows`, `retention::Kept`) and puts a
//! restore back through the `persist::Restore` trait.

pub mod answer_log;
pub mod epoch;
pub mod journal;
pub mod persist;
pub mod retention;
