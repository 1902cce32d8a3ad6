//! Bash lines, read with the reference's grammar (tree-sitter-bash 0.25).
//!
//! - `parse`: the per-thread parser, the only code that talks to tree-sitter;
//! - `enumerate`: the commands of a line, as the `bash` surface judges them;
//! - `paths`: the path words of a line at the asking session's cwd, for the
//!   `path` and `external_directory` gates of a bash tool call.

pub mod enumerate;
pub mod parse;
pub mod paths;

pub use enumerate::{
    enumerate, enumerate_shared, is_trivially_empty, strip_leading_comments, CommandUnit,
    Enumeration, UnitRole, INDIRECTION_WRAPPER, OPAQUE_WRAPPER, UNPARSEABLE_COMMAND,
    UNPARSED_SUBTREE,
};
pub use paths::{bash_paths, BashPaths, RuleWord};
