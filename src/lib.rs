//! permfs: the permission authority for a tree of AI agent sessions.
//!
//! The crate is layered so each concept lives under its own name:
//! - [`policy`]: the judgment — config layers, wildcard matching, rules and
//!   their evaluation. Knows nothing of sessions or FUSE.
//! - [`facts`]: the access intent — what a request touches, in every alias
//!   form, fixed at the asking session. Knows nothing of rules.
//! - [`engine`]: judges facts against a policy (the gates of the reference),
//!   with full provenance.

pub mod cli;
pub mod engine;
pub mod facts;
pub mod kernel;
pub mod mount;
pub mod policy;
pub mod session;
pub mod view;
