//! What the authority lets others watch: the hash-chained audit log every
//! answer is written to before it is delivered, and each session's
//! bounded event stream. Uses only [`super::tree`] (for the clock).

pub mod audit;
pub mod events;
