//! The engine, the configs and the repository through the library and
//! the `permfs` binary, no mount: tables, properties, the references'
//! cases, the book and the session library's map.
//!
//! One test binary for the files of `tests/engine/` (each a module, its
//! tests named `<file>::<test>`): one link of the crate and its
//! dependencies instead of one per file.

#[path = "../common/mod.rs"]
mod common;

mod bash_gates;
mod bash_newer_upstream;
mod book;
mod cli_resolve;
mod config_guard;
mod engine_never_allows;
mod engine_table;
mod oracle_fixture;
mod session_dag;
