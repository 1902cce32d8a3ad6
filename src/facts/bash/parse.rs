//! The one place that talks to tree-sitter: a bash line in, a syntax tree
//! out, with the grammar the reference uses (tree-sitter-bash 0.25).
//!
//! `tree_sitter::Parser` is neither `Sync` nor cheap to build, so each
//! thread keeps its own in a `thread_local!`; parsing is then a pure
//! function of the text, as the reference assumes of its warmed parser.

use std::cell::RefCell;
use std::time::{Duration, Instant};
use tree_sitter::{Node, ParseOptions, ParseState, Parser, Tree};

thread_local! {
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
    /// The last line parsed on this thread and its tree: a tool call's
    /// facts and its judgment read the same line right after each other,
    /// and a tree is shared by reference count, so the second read is free
    /// (for a line too long for the memo of readings in `facts::bash`).
    /// A line that could not be parsed is remembered too, so a hostile line
    /// costs its parse budget once per ask, not once per reader.
    static LAST: RefCell<Option<(String, Option<Tree>)>> = const { RefCell::new(None) };
}

/// Lines longer than this are not parsed: judging runs on the ask path,
/// and no agent needs a longer line read command by command. Such a line
/// is "not read" and floors to `ask` (a deny rule on the whole still holds).
pub const MAX_LINE_BYTES: usize = 256 * 1024;

/// How long one parse may take. Some lines make the grammar's error
/// recovery blow up (64 KiB of `a|a|…` takes a minute); judging runs on
/// the ask path, so such a line is given up on and floors to `ask`. A
/// 2 KiB script parses in well under a millisecond.
const PARSE_BUDGET: Duration = Duration::from_millis(50);

/// Parses `source`; `None` when the grammar could not be loaded, the line
/// is too long, its parse ran out of budget or gave up. Callers treat `None` as "could not
/// read the line" and floor to `ask`.
pub fn parse(source: &str) -> Option<Tree> {
    if source.len() > MAX_LINE_BYTES {
        tracing::warn!(bytes = source.len(), "bash line too long to parse");
        return None;
    }
    let cached = LAST.with(|cell| {
        let last = cell.try_borrow().ok()?;
        let (text, tree) = last.as_ref()?;
        (text == source).then(|| tree.clone())
    });
    if let Some(tree) = cached {
        return tree;
    }
    let tree = parse_afresh(source);
    LAST.with(|cell| {
        if let Ok(mut last) = cell.try_borrow_mut() {
            *last = Some((source.to_string(), tree.clone()));
        }
    });
    tree
}

fn parse_afresh(source: &str) -> Option<Tree> {
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
        let deadline = Instant::now() + PARSE_BUDGET;
        let mut halt = |_: &ParseState| Instant::now() > deadline;
        let options = ParseOptions::new().progress_callback(&mut halt);
        let bytes = source.as_bytes();
        let tree = parser.parse_with_options(
            &mut |offset, _| bytes.get(offset..).unwrap_or_default(),
            None,
            Some(options),
        );
        if tree.is_none() {
            tracing::warn!(
                bytes = source.len(),
                "bash line not parsed within its budget"
            );
            // A halted parse leaves the parser mid-state; start afresh.
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
    // Most nodes a walk meets are leaves (words): no cursor for them.
    let count = node.child_count();
    if count == 0 {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(count);
    let mut cursor = node.walk();
    out.extend(node.children(&mut cursor));
    out
}

/// The arguments of a `command` node: its named children other than the
/// name, prefix assignments, redirects and comments.
pub fn arguments<'t>(node: &Node<'t>) -> Vec<Node<'t>> {
    children(node)
        .into_iter()
        .filter(|c| {
            c.is_named()
                && !matches!(
                    c.kind(),
                    "command_name"
                        | "variable_assignment"
                        | "file_redirect"
                        | "heredoc_redirect"
                        | "herestring_redirect"
                        | "comment"
                )
        })
        .collect()
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

#[cfg(test)]
mod timing {
    #[test]
    #[ignore = "timing of hostile lines, for a person"]
    fn hostile_lines_parse_in_bounded_time() {
        let n = super::MAX_LINE_BYTES / 4;
        for (name, line) in [
            ("nested $(", "$(".repeat(n / 2)),
            ("quotes", "'\"`".repeat(n / 3)),
            ("pipes", "a|".repeat(n / 2)),
            ("heredocs", "cat <<E\n".repeat(n / 8)),
            ("parens", "((((".repeat(n / 4)),
        ] {
            let started = std::time::Instant::now();
            let tree = super::parse(&line);
            let parsed = started.elapsed();
            let units = super::super::enumerate(&line).units.len();
            let enumerated = started.elapsed();
            let words = super::super::bash_paths(&line, "/w", &"/w".into(), "/h")
                .map(|p| p.rule_words.len() + p.external.len());
            println!(
                "{name}: {} bytes, parse {parsed:?} ({}), enumerate {enumerated:?} ({units} units), paths {:?} ({words:?} words)",
                line.len(),
                tree.is_some(),
                started.elapsed()
            );
        }
    }
}

#[cfg(test)]
mod timing_lines {
    #[test]
    #[ignore = "timing, for a person"]
    fn time_lines() {
        for line in [
            "ls | ls",
            "ls | ls | ls",
            "ls | ls | ls | ls",
            "ls | ls | ls | ls | ls",
            "ls | ls | ls | ls | ls | ls",
            "ls | ls | ls | ls | ls | ls | ls | ls",
            "ls && ls && ls && ls && ls && ls && ls && ls",
            "ls; ls; ls; ls; ls; ls; ls; ls",
        ] {
            let started = std::time::Instant::now();
            for _ in 0..200 {
                super::parse_afresh(line);
            }
            let parse = started.elapsed() / 200;
            let started = std::time::Instant::now();
            for i in 0..200 {
                let _ = super::super::enumerate(&format!("{line}{}", " ".repeat(i % 2)));
            }
            let enumerate = started.elapsed() / 200;
            println!("{parse:?} parse, {enumerate:?} enumerate: {line}");
        }
    }
}
