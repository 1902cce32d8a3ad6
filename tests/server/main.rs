//! The server's life and what it holds: bounds, restarts and the
//! supervisor, `permfs run` and its enforcement view.
//!
//! One test binary for the files of `tests/server/` (each a module, its
//! tests named `<file>::<test>`): one link of the crate and its
//! dependencies instead of one per file.

#[path = "../common/mod.rs"]
mod common;

mod bounds;
mod kernel;
mod restart;
mod run;
mod supervisor;
mod view;
