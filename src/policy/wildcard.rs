//! The reference's wildcard language, compiled to `globset` globs.
//!
//! Semantics: `*` is any run of characters (including `/` and newlines), `?`
//! is exactly one character, runs of `*` mean the same as one, everything
//! else is literal (`[`, `]`, `{`, `}`, `\` included), and matching is
//! anchored. A pattern ending in ` *` also matches without its trailing
//! part (`git *` matches `git`), so it compiles to two globs. `~` and
//! `$HOME` expand at the start, as in the reference, which reads `${HOME}`
//! literally. A pattern a person wrote with `${HOME}` almost surely means
//! their home, so a **deny** pattern also matches that reading
//! ([`Braced::AlsoExpanded`]): matching more can only refuse more. An allow
//! or ask pattern keeps the reference's literal reading, since an ask that
//! newly matched could override an earlier deny.
//!
//! Going through `globset` rather than one regex per rule is what lets a
//! `GlobSet` report every matching rule of a surface in one pass.

use crate::facts::path_text::{expand_home, expand_home_braced};
use globset::{Glob, GlobBuilder};

/// How a leading `${HOME}` in a pattern is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Braced {
    /// Literally, as the reference reads it.
    Literal,
    /// Literally and as the home directory (for deny patterns).
    AlsoExpanded,
}

/// Translates one wildcard pattern into the globs that together match
/// exactly what the pattern matches.
pub fn compile(pattern: &str, home: &str, braced: Braced) -> Result<Vec<Glob>, globset::Error> {
    let mut readings = vec![expand_home(pattern, home)];
    if braced == Braced::AlsoExpanded {
        let expanded = expand_home_braced(pattern, home);
        if expanded != readings[0] {
            readings.push(expanded);
        }
    }
    let mut globs = Vec::with_capacity(readings.len() * 2);
    for reading in &readings {
        globs.push(build(reading)?);
        if let Some(head) = optional_tail_head(reading) {
            globs.push(build(head)?);
        }
    }
    Ok(globs)
}

/// `git *` → `git`: the reference makes the ` *` tail optional only when the
/// pattern ends in exactly one space-star (`git **` does not qualify).
fn optional_tail_head(expanded: &str) -> Option<&str> {
    expanded.strip_suffix(" *")
}

fn build(expanded: &str) -> Result<Glob, globset::Error> {
    GlobBuilder::new(&to_glob_syntax(expanded))
        .literal_separator(false)
        .backslash_escape(false)
        .empty_alternates(false)
        .case_insensitive(false)
        .build()
}

/// Rewrites the wildcard text in glob syntax: `*`-runs become one `*`, `?`
/// stays, and every glob metacharacter is wrapped in a one-character class.
fn to_glob_syntax(expanded: &str) -> String {
    let mut out = String::with_capacity(expanded.len() + 8);
    let mut previous_was_star = false;
    for ch in expanded.chars() {
        if ch == '*' {
            if !previous_was_star {
                out.push('*');
            }
            previous_was_star = true;
            continue;
        }
        previous_was_star = false;
        match ch {
            '?' => out.push('?'),
            '[' | ']' | '{' | '}' => {
                out.push('[');
                out.push(ch);
                out.push(']');
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use globset::GlobSetBuilder;

    fn matches(pattern: &str, value: &str) -> bool {
        let mut builder = GlobSetBuilder::new();
        for glob in compile(pattern, "/home/u", Braced::Literal).expect("pattern compiles") {
            builder.add(glob);
        }
        builder.build().expect("set builds").is_match(value)
    }

    #[test]
    fn wildcard_table() {
        let cases: &[(&str, &str, bool)] = &[
            ("*", "", true),
            ("*", "a/b/c", true),
            ("*.env", "/srv/app/.env", true),
            ("*.env", "/srv/app/.env.example", false),
            ("*.env*", "/srv/app/.env.example", true),
            ("src/*", "src/a/b.rs", true),
            ("src/**", "src/a/b.rs", true),
            ("a**b", "a/x/b", true),
            ("?", "ab", false),
            ("??", "ab", true),
            ("a?c", "a/c", true),
            ("git *", "git", true),
            ("git *", "git status", true),
            ("git *", "gitx", false),
            ("git **", "git", false),
            ("git status", "git status --short", false),
            ("[abc]", "[abc]", true),
            ("[abc]", "a", false),
            ("{a,b}", "{a,b}", true),
            ("{a,b}", "a", false),
            ("a\\b", "a\\b", true),
            ("!x", "!x", true),
            ("a-z", "a-z", true),
            ("echo *", "echo a\nb", true),
            ("*", "line1\nline2", true),
            ("~/x/*", "/home/u/x/y", true),
            ("$HOME/x", "/home/u/x", true),
            ("${HOME}", "/home/u", false),
            ("${HOME}/x", "${HOME}/x", true),
            ("~", "~", false),
            ("", "", true),
            ("", "x", false),
            ("a.b", "axb", false),
            ("(x)+", "(x)+", true),
            ("é*", "éa", true),
            // `?` is one byte, not one UTF-16 unit as in the reference:
            // a documented divergence for non-ASCII values.
            ("??", "é", true),
        ];
        for (pattern, value, expected) in cases {
            assert_eq!(
                matches(pattern, value),
                *expected,
                "pattern {pattern:?} against {value:?}"
            );
        }
    }

    #[test]
    fn a_braced_home_deny_pattern_matches_both_readings() {
        let set = |braced| {
            let mut builder = GlobSetBuilder::new();
            for glob in compile("${HOME}/.ssh/*", "/home/u", braced).expect("compiles") {
                builder.add(glob);
            }
            builder.build().expect("set")
        };
        let deny = set(Braced::AlsoExpanded);
        assert!(deny.is_match("/home/u/.ssh/id_rsa"));
        assert!(deny.is_match("${HOME}/.ssh/id_rsa"));
        let allow = set(Braced::Literal);
        assert!(!allow.is_match("/home/u/.ssh/id_rsa"));
        assert!(allow.is_match("${HOME}/.ssh/id_rsa"));
    }
}
