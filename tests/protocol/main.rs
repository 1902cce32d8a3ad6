//! The mount's protocol, driven through a real mount as users and agents
//! drive it: asks and answers, the chain, judges, the prompt, audit and
//! events, trust, the guards, attacks, the client helpers.
//!
//! One test binary for the files of `tests/protocol/` (each a module, its
//! tests named `<file>::<test>`): one link of the crate and its
//! dependencies instead of one per file.

#[path = "../common/mod.rs"]
mod common;

mod asker_facts;
mod attacks;
mod audit;
mod chain;
mod clients;
mod exchange;
mod guards;
mod judges;
mod mount;
mod observe;
mod outside;
mod prompt;
mod trust;
