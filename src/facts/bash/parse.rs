//! The one place that talks to tree-sitter: a bash line in, a syntax tree
//! out, with the grammar the reference uses (tree-sitter-bash 0.25).
//!
//! `tree_sitter::Parser` is neither `Sync` nor cheap to build, so each
//! thread keeps its own in a `thread_local!`; parsing is then a pure
//! function of the text, as the reference assumes of its warmed parser.

use std::cell::RefCell;
use tree_sitter::{Node, Parser, Tree};

thread_local! {
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// Lines longer than this are not parsed: judging runs on the ask path,
/// and no agent needs a longer line read command by command. Such a line
/// is "not read" and floors to `ask` (a deny rule on the whole still holds).
pub const MAX_LINE_BYTES: usize = 256 * 1024;

/// Parses `source`; `None` when the grammar could not be loaded, the line
/// is too long or the parse gave up. Callers treat `None` as "could not
/// read the line" and floor to `ask`.
pub fn parse(source: &str) -> Option<Tree> {
    if source.len() > MAX_LINE_BYTES {
        tracing::warn!(bytes = source.len(), "bash line too long to parse");
        return None;
    }
    PARSER.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        if slot.is_none() {
            let mut parser = Parser::new();
            if let Err(error) = parser.set_language(&tree_sitter_bash::LANGUAGE.into()) {
                tracing::error!(%error, "tree-sitter-bash grammar does not load");
                return None;
            }
            *slot = Some(parser);
        }
        let parser = slot.as_mut()?;
        let tree = parser.parse(source, None);
        if tree.is_none() {
            // A failed parse leaves the parser mid-state; start afresh.
            parser.reset();
        }
        tree
    })
}

/// The source text a node spans; empty when the span is not on character
/// boundaries (never for a tree of `source`, but a panic is not an answer).
pub fn text<'s>(node: &Node<'_>, source: &'s str) -> &'s str {
    source.get(node.byte_range()).unwrap_or("")
}

/// The node's children, anonymous tokens included, in source order.
pub fn children<'t>(node: &Node<'t>) -> Vec<Node<'t>> {
    let mut cursor = node.walk();
    node.children(&mut cursor).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[ignore = "prints syntax trees for a person reading the grammar"]
    fn show_trees() {
        for line in std::env::var("SHOW_BASH")
            .unwrap_or_default()
            .split("\n---\n")
        {
            let tree = parse(line).expect("parses");
            println!("{line:?}\n{}\n", tree.root_node().to_sexp());
        }
    }
}
