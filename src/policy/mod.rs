//! The judgment: configuration, wildcard matching and rule evaluation.

pub mod compiled;
pub mod config;
pub mod edit;
pub mod evaluate;
pub mod frontmatter;
pub mod layers;
pub mod outside;
pub mod rule;
pub mod state;
pub mod trust;
pub mod wildcard;

pub use compiled::{CompileError, CompiledRules};
pub use rule::{Rule, RuleLayer};
pub use state::{Origin, PermissionState};
