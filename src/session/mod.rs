//! The session tree and the decision walk. Knows nothing of FUSE: the
//! mount is a thin adapter over [`authority::Authority`].

pub mod access;
pub mod answer_log;
pub mod ask;
pub mod audit;
pub mod authority;
pub mod chain;
mod commit;
pub mod control;
pub mod deciding;
pub mod decision;
pub mod epoch;
pub mod events;
pub mod generation;
pub mod grants;
pub mod journal;
pub mod limits;
pub mod opens;
pub mod persist;
pub mod pi_view;
pub mod reaper;
pub mod retention;
pub mod review;
pub mod reviews;
mod state;
pub mod tree;
pub mod views;
pub mod walk;

pub use access::{Caller, Standing};
pub use authority::{Authority, AuthorityError, Decision};
pub use tree::{SessionTree, SpawnSpec};
