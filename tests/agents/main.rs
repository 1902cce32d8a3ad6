//! The agents' integrations against a real mount: `permfs hook` with
//! Claude Code and Codex events, the pi forwarding view, and the real CLIs.
//!
//! One test binary for the files of `tests/agents/` (each a module, its
//! tests named `<file>::<test>`): one link of the crate and its
//! dependencies instead of one per file.

#[path = "../common/mod.rs"]
mod common;

mod hooks;
mod pi_forwarding;
mod real_clients;
