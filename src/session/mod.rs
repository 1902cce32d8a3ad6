//! The session tree and the decision walk. Knows nothing of FUSE: the
//! mount is a thin adapter over [`authority::Authority`].
//!
//! The library is in folders, each a concept, each using only the ones
//! listed before it (`docs/architecture.md` draws the map;
//! `tests/engine/session_dag.rs` holds the files to a DAG):
//! - [`tree`]: the sessions, their asks and grants, and the words that
//!   change them (spawn rule, `ctl`, decisions, limits);
//! - [`observe`]: the audit log and the event streams;
//! - [`store`]: the journal, the answers log, the epoch, persistence and
//!   retention;
//! - [`chain`]: the authorizer chain's judges and what a review holds;
//! - [`authority`]: the one owner of the state, its lock and its API;
//! - [`walk`]: judging at a node and climbing, and the chain's reviews;
//! - [`inbox`]: deciding at an inbox and the JSON views of it;
//! - [`view`]: the questions of the mounts' views (`opens.rs`, the pi view).

pub mod authority;
pub mod chain;
pub mod inbox;
pub mod observe;
pub mod store;
pub mod tree;
pub mod view;
pub mod walk;

pub use authority::{Authority, AuthorityError};
pub use tree::access::{Caller, Standing};
pub use tree::decision::Decision;
pub use tree::{SessionTree, SpawnSpec};
