//! Bash lines, read with the reference's grammar (tree-sitter-bash 0.25).
//!
//! - `parse`: the per-thread parser, the only code that talks to tree-sitter;
//! - `enumerate`: the commands of a line, as the `bash` surface judges them;
//! - `paths`: the path words of a line at the asking session's cwd, for the
//!   `path` and `external_directory` gates of a bash tool call.

pub mod effects;
pub mod enumerate;
mod glob;
pub mod parse;
pub mod paths;
mod soundness;

pub use enumerate::{
    enumerate, enumerate_shared, is_trivially_empty, strip_leading_comments, CommandUnit,
    Enumeration, UnitRole, ENVIRONMENT_PREFIX, INDIRECTION_WRAPPER, OPAQUE_WRAPPER,
    UNDERSTOOD_ONLY_IN_PART, UNPARSEABLE_COMMAND, UNPARSED_SUBTREE, UNRESOLVED_WRITE, UNSEEN_CODE,
};
pub use paths::{bash_paths, bash_targets, BashPaths, RuleWord, Target};

use crate::facts::memo::TextMemo;
use std::cell::RefCell;
use std::sync::Arc;

/// What is read from one line's syntax tree: its commands (for the `bash`
/// surface) and its path words (for the bash path gates). Both come from
/// one parse, so a line is parsed once whichever form asks it first (a
/// `{surface: bash}` ask needs only the commands, a bash tool call both).
#[derive(Clone)]
struct Reading {
    enumeration: Arc<enumerate::Enumeration>,
    /// `None` when the line could not be parsed.
    words: Option<Arc<paths::Words>>,
}

thread_local! {
    /// The readings of recent lines (a pure function of the text): a tool
    /// call's facts and its judgment, and an agent repeating a line, read
    /// it once.
    static READINGS: RefCell<TextMemo<Reading>> = RefCell::new(TextMemo::new(256, 8192));
}

fn reading(source: &str) -> Reading {
    READINGS.with(|cell| match cell.try_borrow_mut() {
        Ok(mut memo) => memo.get_or(source, read_afresh),
        Err(_) => read_afresh(source),
    })
}

fn read_afresh(source: &str) -> Reading {
    let tree = parse::parse(source);
    let enumeration = enumerate::enumerate_tree(source, tree.as_ref(), 0);
    let words = tree.as_ref().map(|tree| {
        let mut words = paths::words_of_tree(source, tree);
        // What wrappers run and substitutions the grammar missed write
        // too (`sh -c 'echo x > inbox/a'`, a backquote in a heredoc body).
        for script in &enumeration.scripts {
            if let Some(inner) = parse::parse(script) {
                words.merge(paths::words_of_tree(script, &inner));
            }
        }
        Arc::new(words)
    });
    Reading {
        enumeration: Arc::new(enumeration),
        words,
    }
}
