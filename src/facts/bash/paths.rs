//! The paths a bash line names, for the reference's two bash path gates:
//! `path` (every path-shaped word and redirect target, plus bare words a
//! specific path rule names) and `external_directory` (words that are
//! absolute, start with `~/` or contain `..` and resolve outside the cwd).
//!
//! The walk follows the reference's `BashPathResolver`: the working
//! directory starts at the session's cwd and folds each literal `cd` run in
//! the current shell (`cd a && cat b` reads `a/b`); a `cd` in a pipeline
//! stage, a backgrounded command or a subshell does not leak; a `cd` whose
//! target is not a literal makes the directory unknown, after which a
//! relative word keeps only its literal spelling (so no absolute rule can
//! match by accident) and counts as outside the tree.
//!
//! Where the newer upstream tests read more words than 20.7.3, this does
//! too (never fewer): the words of `for … in`, a `case` subject, commands
//! hosted in a command name or a prefix assignment, bare words that name
//! an existing file (symlink targets included), bare words after a `cd`
//! elsewhere, and words shaped like a regular expression
//! (docs/reference-divergences.md).

use super::enumerate::word_value;
use super::parse::{children, text};
use crate::facts::access_path::{
    clean_literal, is_outside, AccessPath, CanonicalCwd, SAFE_SYSTEM_PATHS,
};
use crate::facts::memo::{self, Entry};
use crate::facts::path_text::{join, resolve};
use regex::Regex;
use std::sync::Arc;
use std::sync::LazyLock;
use tree_sitter::{Node, Tree};

const MAX_DEPTH: usize = 256;

/// The working directory in force where a word appears.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Base {
    /// Joined with the cwd when resolved; `""` is the cwd itself, an
    /// absolute offset (after `cd /abs`) ignores it.
    Known(String),
    /// After a `cd` whose target is not a literal.
    Unknown,
}

#[derive(Debug, Clone)]
pub(super) struct Word {
    token: String,
    base: Base,
}

/// A path-rule candidate: the word as typed and its alias set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleWord {
    pub token: String,
    pub path: AccessPath,
    /// A bare word (`id_rsa`): counts only where a specific `path` deny or
    /// ask rule names the word itself (the reference's promotion, #509).
    pub bare: bool,
}

/// What the two bash path gates judge.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BashPaths {
    /// Words resolving outside the cwd, deduplicated by canonical form.
    pub external: Vec<(String, AccessPath)>,
    pub rule_words: Vec<RuleWord>,
}

/// Reads the path words of `command` as the session at `cwd` sees them.
/// `None` when the line cannot be parsed (the command gate then floors).
/// Remembered while a snapshot scope is open (`facts::memo`): the words
/// meet the filesystem only through the scope, so the same line at the
/// same cwd gives the same paths within it.
pub fn bash_paths(
    command: &str,
    cwd: &str,
    canonical_cwd: &CanonicalCwd,
    home: &str,
) -> Option<Arc<BashPaths>> {
    let words = super::reading(command).words?;
    Some(memo::bash_paths(
        || memo::key(&[command, cwd, canonical_cwd.get(), home]),
        || Arc::new(project(&words, cwd, canonical_cwd, home)),
    ))
}

/// The words of `command` from its syntax tree: a pure function of the
/// text (the filesystem is met only in [`project`]).
pub(super) fn words_of_tree(command: &str, tree: &Tree) -> Vec<Word> {
    let mut walker = Walker {
        source: command,
        words: Vec::new(),
    };
    walker.walk(tree.root_node(), Base::Known(String::new()), 0);
    walker.words
}

fn project(words: &[Word], cwd: &str, canonical_cwd: &CanonicalCwd, home: &str) -> BashPaths {
    let mut out = BashPaths::default();
    let mut seen_external: Vec<Arc<str>> = Vec::new();
    let mut seen_rule: Vec<Arc<[String]>> = Vec::new();
    for word in words {
        let token = word.token.as_str();
        if reject_non_path_token(token) {
            continue;
        }
        let relative = !token.starts_with('/') && !is_home_spelled(token);
        let resolve_base = match &word.base {
            Base::Known(offset) => Some(resolve(cwd, offset)),
            Base::Unknown => None,
        };
        if is_external_candidate(token) {
            let path = match &resolve_base {
                Some(base) => AccessPath::for_path_in(token, base, cwd, home),
                None => AccessPath::for_path(token, cwd, home),
            };
            let external = if resolve_base.is_none() && relative {
                // Could resolve anywhere: outside unless it is a device.
                !path.boundary.is_empty() && !SAFE_SYSTEM_PATHS.contains(&&*path.boundary)
            } else {
                is_outside(&path.boundary, canonical_cwd.get())
            };
            if external && !seen_external.contains(&path.boundary) {
                seen_external.push(path.boundary.clone());
                out.external.push((token.to_string(), path));
            }
        }
        // A bare word read after a literal `cd` elsewhere (`cd /etc && cat
        // passwd`) names a file in that directory: judged as a path word,
        // not only where a rule names the word itself (the reference
        // allows that line under `/etc/*: deny`).
        let moved = resolve_base
            .as_deref()
            .is_some_and(|base| base != resolve(cwd, ""));
        let shaped = is_rule_candidate(token);
        // A bare word naming something that exists here (`cat id_rsa`, a
        // symlink `a_sym`) is a path word too (newer upstream #645), with
        // its symlink target among its aliases.
        let found = match (&resolve_base, shaped) {
            (Some(base), false) => Some(memo::entry(&resolve(base, &clean_literal(token, home))))
                .filter(|entry| *entry != Entry::Missing),
            _ => None,
        };
        let bare = !shaped && !moved && found.is_none();
        // A bare word that names nothing, or one component in the canonical
        // cwd that is no symlink, needs no `realpath`: its lexical aliases
        // are all there is to match (a missing word after a `cd` counts as a
        // path word without the canonical alias 20.7.3 never gave it).
        let lexical_only = !shaped
            && found.is_none_or(|entry| {
                entry != Entry::Symlink && resolve_base.as_deref() == Some(canonical_cwd.get())
            });
        let path = match &resolve_base {
            None if relative => AccessPath::for_literal(&clean_literal(token, home)),
            None if bare => AccessPath::for_word_in(token, cwd, cwd, home),
            None => AccessPath::for_path(token, cwd, home),
            Some(base) if bare || lexical_only => AccessPath::for_word_in(token, base, cwd, home),
            Some(base) => AccessPath::for_path_in(token, base, cwd, home),
        };
        if path.match_values.is_empty() || seen_rule.contains(&path.match_values) {
            continue;
        }
        seen_rule.push(Arc::clone(&path.match_values));
        out.rule_words.push(RuleWord {
            token: token.to_string(),
            path,
            bare,
        });
    }
    out
}

static URL: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)^[a-z][a-z0-9+.-]*://").ok());
static WINDOWS_DRIVE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^[a-zA-Z]:[/\\]").ok());

fn matches(regex: &LazyLock<Option<Regex>>, token: &str) -> bool {
    // A pattern that did not compile (it always does) rejects nothing and
    // accepts nothing: the token stays a candidate, the stricter outcome.
    regex.as_ref().is_some_and(|r| r.is_match(token))
}

/// Words that are never paths: flags, assignments, URLs, `@scope/pkg`.
/// 20.7.3 also skipped words shaped like a regular expression (`.*`,
/// `[…]`), which let `cat /etc/pass[w]d` through; the newer upstream
/// dropped that (#821), and so does permfs: the pattern arguments of
/// `grep`, `sed`, `rg`, … are skipped by position instead.
fn reject_non_path_token(token: &str) -> bool {
    if token.is_empty() || token.starts_with('-') {
        return true;
    }
    if let Some(eq) = token.find('=') {
        if token.find('/').is_none_or(|slash| eq < slash) {
            return true;
        }
    }
    if matches(&URL, token) {
        return true;
    }
    token.starts_with('@') && !token.starts_with("@/")
}

/// A word starting with the home: `~`, `$HOME` or `${HOME}` (the last two
/// expand like `~`, as the newer upstream reads them).
fn is_home_spelled(token: &str) -> bool {
    token.starts_with('~') || token.starts_with("$HOME/") || token.starts_with("${HOME}/")
}

/// The external-directory shapes: absolute, `~/` (or `$HOME/`), `..`, a
/// drive path.
fn is_external_candidate(token: &str) -> bool {
    token.starts_with('/')
        || token.starts_with("~/")
        || token.starts_with("$HOME/")
        || token.starts_with("${HOME}/")
        || token.contains("..")
        || matches(&WINDOWS_DRIVE, token)
}

/// The path-rule shapes: those, dot-files, anything with a `/`.
fn is_rule_candidate(token: &str) -> bool {
    token.starts_with('.')
        || token.contains('/')
        || token.contains("..")
        || matches(&WINDOWS_DRIVE, token)
}

struct Walker<'s> {
    source: &'s str,
    words: Vec<Word>,
}

fn skip_subtree(kind: &str) -> bool {
    matches!(kind, "heredoc_body" | "heredoc_end" | "comment")
}

fn is_arg(kind: &str) -> bool {
    matches!(kind, "word" | "concatenation" | "string" | "raw_string")
}

impl<'s> Walker<'s> {
    fn tag(&mut self, tokens: Vec<String>, base: &Base) {
        for token in tokens {
            self.words.push(Word {
                token,
                base: base.clone(),
            });
        }
    }

    /// Collects a node's words tagged with `base`; returns the base in force
    /// after it.
    fn walk(&mut self, node: Node<'_>, base: Base, depth: usize) -> Base {
        if depth > MAX_DEPTH {
            return Base::Unknown;
        }
        match node.kind() {
            "program" | "list" | "redirected_statement" | "compound_statement" => {
                self.sequence(node, base, depth + 1)
            }
            "command" => {
                let tokens = self.command_tokens(node, depth + 1);
                self.tag(tokens, &base);
                self.fold_cd(node, base)
            }
            "pipeline" => self.pipeline(node, base, depth + 1),
            "subshell" => {
                self.sequence(node, base.clone(), depth + 1);
                base
            }
            _ => {
                let tokens = self.subtree_tokens(node, depth + 1);
                self.tag(tokens, &base);
                base
            }
        }
    }

    fn sequence(&mut self, node: Node<'_>, base: Base, depth: usize) -> Base {
        let parts = children(&node);
        let mut current = base;
        for (index, child) in parts.iter().enumerate() {
            if !child.is_named() || skip_subtree(child.kind()) {
                continue;
            }
            let after = self.walk(*child, current.clone(), depth + 1);
            let backgrounded = parts
                .get(index + 1)
                .is_some_and(|next| !next.is_named() && next.kind() == "&");
            if !backgrounded {
                current = after;
            }
        }
        current
    }

    fn pipeline(&mut self, node: Node<'_>, base: Base, depth: usize) -> Base {
        let mut current = base;
        let mut first = true;
        for child in children(&node) {
            if !child.is_named() || skip_subtree(child.kind()) {
                continue;
            }
            if first {
                current = self.first_stage(child, current, depth + 1);
                first = false;
            } else {
                let tokens = self.subtree_tokens(child, depth + 1);
                self.tag(tokens, &current);
            }
        }
        current
    }

    /// tree-sitter-bash groups `cd a && x 2>&1 | tail` as `(cd a && x
    /// 2>&1) | tail`; the leading current-shell commands still fold.
    fn first_stage(&mut self, node: Node<'_>, base: Base, depth: usize) -> Base {
        if depth > MAX_DEPTH {
            return Base::Unknown;
        }
        match node.kind() {
            "list" => {
                let named: Vec<Node<'_>> = children(&node)
                    .into_iter()
                    .filter(|c| c.is_named() && !skip_subtree(c.kind()))
                    .collect();
                let mut current = base;
                for (index, child) in named.iter().enumerate() {
                    if index + 1 < named.len() {
                        current = self.walk(*child, current, depth + 1);
                    } else {
                        let tokens = self.subtree_tokens(*child, depth + 1);
                        self.tag(tokens, &current);
                    }
                }
                current
            }
            "redirected_statement" => {
                let mut current = base;
                for child in children(&node) {
                    if !child.is_named() {
                        continue;
                    }
                    if child.kind() == "file_redirect" {
                        let tokens = self.redirect_tokens(child);
                        self.tag(tokens, &current);
                        continue;
                    }
                    current = self.first_stage(child, current, depth + 1);
                }
                current
            }
            _ => {
                let tokens = self.subtree_tokens(node, depth + 1);
                self.tag(tokens, &base);
                base
            }
        }
    }

    fn fold_cd(&self, node: Node<'_>, base: Base) -> Base {
        if command_name(node, self.source).as_deref() != Some("cd") {
            return base;
        }
        let Some(target) = self.cd_target(node) else {
            return Base::Unknown;
        };
        if target.starts_with('/') {
            return Base::Known(target);
        }
        match base {
            Base::Unknown => Base::Unknown,
            Base::Known(offset) => Base::Known(join(&offset, &target)),
        }
    }

    /// The literal target of a `cd`, or `None` when it is computed, `-`,
    /// `~…` or absent.
    fn cd_target(&self, node: Node<'_>) -> Option<String> {
        for child in children(&node) {
            let kind = child.kind();
            if kind == "command_name" || kind == "variable_assignment" || !child.is_named() {
                continue;
            }
            if kind == "word" && text(&child, self.source) == "--" {
                continue;
            }
            if !is_arg(kind) {
                return None;
            }
            return literal_text(child, self.source, 0);
        }
        None
    }

    /// Words of any subtree: commands by their rules, redirect targets,
    /// everything else descended (heredoc bodies and comments skipped).
    fn subtree_tokens(&self, node: Node<'_>, depth: usize) -> Vec<String> {
        if depth > MAX_DEPTH || skip_subtree(node.kind()) {
            return Vec::new();
        }
        match node.kind() {
            "command" => self.command_tokens(node, depth + 1),
            "file_redirect" => self.redirect_tokens(node),
            "for_statement" | "case_statement" => {
                // The words a loop runs over and a case's subject are
                // operands the statement names (newer upstream #839); a
                // case arm's patterns are globs, not paths.
                let mut tokens = self.statement_operands(node);
                for child in children(&node) {
                    tokens.extend(self.subtree_tokens(child, depth + 1));
                }
                tokens
            }
            _ => children(&node)
                .into_iter()
                .flat_map(|c| self.subtree_tokens(c, depth + 1))
                .collect(),
        }
    }

    fn statement_operands(&self, node: Node<'_>) -> Vec<String> {
        let mut cursor = node.walk();
        let operands: Vec<Node<'_>> = node.children_by_field_name("value", &mut cursor).collect();
        operands
            .iter()
            .filter(|c| is_arg(c.kind()))
            .map(|c| word_value(c, self.source))
            .collect()
    }

    /// Words of the commands run inside a substitution under `node`.
    fn hosted_tokens(&self, node: Node<'_>, depth: usize) -> Vec<String> {
        if depth > MAX_DEPTH {
            return Vec::new();
        }
        children(&node)
            .into_iter()
            .flat_map(|c| match c.kind() {
                "command_substitution" | "process_substitution" => {
                    self.subtree_tokens(c, depth + 1)
                }
                _ => self.hosted_tokens(c, depth + 1),
            })
            .collect()
    }

    fn redirect_tokens(&self, node: Node<'_>) -> Vec<String> {
        children(&node)
            .iter()
            .filter(|c| is_arg(c.kind()))
            .map(|c| word_value(c, self.source))
            .collect()
    }

    fn command_tokens(&self, node: Node<'_>, depth: usize) -> Vec<String> {
        match command_name(node, self.source)
            .as_deref()
            .and_then(pattern_first)
        {
            Some(config) => self.pattern_command_tokens(node, &config, depth),
            None => self.generic_command_tokens(node, depth),
        }
    }

    fn generic_command_tokens(&self, node: Node<'_>, depth: usize) -> Vec<String> {
        let mut tokens = Vec::new();
        let mut seen_name = false;
        for child in children(&node) {
            let kind = child.kind();
            if kind == "command_name" || kind == "variable_assignment" {
                // Only what runs there counts (`$(cat /etc/shadow)` as the
                // command or in `FOO=$(…)`, newer upstream #742), not a
                // literal name or assigned value.
                seen_name |= kind == "command_name";
                tokens.extend(self.hosted_tokens(child, depth + 1));
                continue;
            }
            if is_arg(kind) {
                if seen_name {
                    tokens.push(word_value(&child, self.source));
                }
                seen_name = true;
                continue;
            }
            tokens.extend(self.subtree_tokens(child, depth + 1));
        }
        tokens
    }

    /// `sed`, `awk`, `grep`, `rg`, `sd`: their first positional words are
    /// scripts or patterns, not paths.
    fn pattern_command_tokens(
        &self,
        node: Node<'_>,
        config: &PatternCommand,
        depth: usize,
    ) -> Vec<String> {
        let mut explicit_script = false;
        let mut positionals = 0;
        let mut next: Option<bool> = None; // Some(true): extract, Some(false): skip
        let mut past_flags = false;
        let mut tokens = Vec::new();
        for child in children(&node) {
            let kind = child.kind();
            if kind == "command_name" || kind == "variable_assignment" {
                tokens.extend(self.hosted_tokens(child, depth + 1));
                continue;
            }
            if !is_arg(kind) {
                tokens.extend(self.subtree_tokens(child, depth + 1));
                continue;
            }
            let value = word_value(&child, self.source);
            match next.take() {
                Some(false) => continue,
                Some(true) => {
                    tokens.push(value);
                    continue;
                }
                None => {}
            }
            if !past_flags && kind == "word" && value.starts_with('-') && value.len() > 1 {
                if value == "--" {
                    past_flags = true;
                } else if config.arg_flags.contains(&value.as_str()) {
                    next = Some(false);
                    explicit_script |= value == "-e" || value == "-f";
                } else if config.file_flags.contains(&value.as_str()) {
                    next = Some(true);
                    explicit_script = true;
                }
                continue;
            }
            if !explicit_script && positionals < config.pattern_positionals {
                positionals += 1;
                continue;
            }
            tokens.push(value);
        }
        tokens
    }
}

struct PatternCommand {
    arg_flags: &'static [&'static str],
    file_flags: &'static [&'static str],
    pattern_positionals: usize,
}

fn pattern_first(name: &str) -> Option<PatternCommand> {
    const GREP: &[&str] = &["-e", "-A", "-B", "-C", "-m"];
    const AWK: &[&str] = &["-e", "-F", "-v"];
    const RG: &[&str] = &[
        "-e", "-A", "-B", "-C", "-m", "-g", "-t", "-T", "-j", "-M", "-r", "-E",
    ];
    let (arg_flags, file_flags, pattern_positionals): (&[&str], &[&str], usize) = match name {
        "sed" => (&["-e", "-i"], &["-f"], 1),
        "awk" | "gawk" | "nawk" => (AWK, &["-f"], 1),
        "grep" | "egrep" | "fgrep" => (GREP, &["-f"], 1),
        "rg" => (RG, &["-f"], 1),
        "sd" => (&["-n", "-f"], &[], 2),
        _ => return None,
    };
    Some(PatternCommand {
        arg_flags,
        file_flags,
        pattern_positionals,
    })
}

/// The basename of a command's name, when it has a `command_name`.
fn command_name(node: Node<'_>, source: &str) -> Option<String> {
    let name = children(&node)
        .into_iter()
        .find(|c| c.kind() == "command_name")?;
    let value: String = children(&name)
        .iter()
        .map(|c| word_value(c, source))
        .collect();
    let value = if value.is_empty() {
        text(&name, source).to_string()
    } else {
        value
    };
    (!value.is_empty()).then(|| value.rsplit('/').next().unwrap_or(&value).to_string())
}

/// A word's literal value, or `None` when an expansion computes it or it
/// is `-` / `~…`.
fn literal_text(node: Node<'_>, source: &str, depth: usize) -> Option<String> {
    if depth > MAX_DEPTH {
        return None;
    }
    match node.kind() {
        "word" => {
            let t = text(&node, source);
            (t != "-" && !t.starts_with('~')).then(|| t.to_string())
        }
        "raw_string" => Some(word_value(&node, source)),
        "concatenation" => children(&node)
            .into_iter()
            .map(|c| literal_text(c, source, depth + 1))
            .collect(),
        "string" => {
            let mut out = String::new();
            for child in children(&node) {
                match child.kind() {
                    "\"" => {}
                    "string_content" => out.push_str(text(&child, source)),
                    _ => return None,
                }
            }
            Some(out)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(command: &str) -> Arc<BashPaths> {
        bash_paths(
            command,
            "/nonexistent-w",
            &"/nonexistent-w".into(),
            "/nonexistent-h",
        )
        .expect("parses")
    }

    fn external(command: &str) -> Vec<String> {
        paths(command)
            .external
            .iter()
            .map(|(_, p)| p.match_values[0].clone())
            .collect()
    }

    fn rule_tokens(command: &str) -> Vec<(String, bool)> {
        paths(command)
            .rule_words
            .iter()
            .map(|w| (w.token.clone(), w.bare))
            .collect()
    }

    #[test]
    fn external_words_and_redirect_targets() {
        assert_eq!(external("cat /etc/passwd"), ["/etc/passwd"]);
        assert_eq!(external("echo hi > /etc/x"), ["/etc/x"]);
        assert_eq!(external("cp src/a.rs /tmp/x"), ["/tmp/x"]);
        assert_eq!(external("cat ../x ~/y"), ["/x", "/nonexistent-h/y"]);
        assert_eq!(external("cat \"$HOME/z\""), ["/nonexistent-h/z"]);
        assert!(external("echo x > /dev/null").is_empty());
        assert!(external("cat a/../b").is_empty());
        assert!(external("cat <<EOF\n/etc/passwd\nEOF").is_empty());
    }

    /// Cases of the upstream projection suite (`test/bash-external-directory.test.ts`).
    #[test]
    fn upstream_external_projection_cases() {
        let external = |command: &str, cwd: &str| -> Vec<String> {
            bash_paths(command, cwd, &cwd.into(), "/mock/home")
                .expect("parses")
                .external
                .iter()
                .map(|(_, p)| p.match_values[0].clone())
                .collect()
        };
        let cwd = "/projects/my-app";
        for (command, want) in [
            ("diff /etc/hosts /var/log/syslog", vec!["/etc/hosts", "/var/log/syslog"]),
            ("cat /projects/my-app/src/index.ts", vec![]),
            ("cat ~/documents/secret.txt", vec!["/mock/home/documents/secret.txt"]),
            ("cat ../../other-project/secrets.env", vec!["/other-project/secrets.env"]),
            ("cat src/../lib/utils.ts", vec![]),
            ("ls -la --color=auto", vec![]),
            ("FOO=/usr/local/bin command", vec![]),
            ("echo hello | tee /tmp/output.txt", vec!["/tmp/output.txt"]),
            ("curl https://example.com/etc/hosts", vec![]),
            ("npm install @types/node", vec![]),
            ("git commit -m \"fix: update /etc/hosts handler\"", vec![]),
            ("echo \"path is \"/etc/hosts\"\"", vec![]),
            ("cat /etc/hosts 2>/dev/null", vec!["/etc/hosts"]),
            ("cat /dev/null/subdir", vec!["/dev/null/subdir"]),
            ("echo // hello", vec!["/"]),
            ("cat /etc/hosts; echo //", vec!["/etc/hosts", "/"]),
            ("node -e \"const p = '/etc/hosts';\"", vec![]),
            ("cat /etc/hosts # see also /etc/shadow", vec!["/etc/hosts"]),
            ("cat << 'EOF'\n/etc/hosts\nEOF", vec![]),
            ("cat /etc/hosts << 'EOF'\nsome content\nEOF", vec!["/etc/hosts"]),
            ("cat <<- 'EOF'\n\t/etc/hosts\nEOF", vec![]),
            ("echo $(echo $(cat /etc/hosts))", vec!["/etc/hosts"]),
            ("cat << 'EOF'\n$(cat /etc/hosts)\nEOF", vec![]),
            ("(cat /etc/hosts)", vec!["/etc/hosts"]),
            ("sort < /etc/hosts", vec!["/etc/hosts"]),
            ("command 2>/tmp/errors.log", vec!["/tmp/errors.log"]),
            ("cat /etc/hosts; grep foo /etc/hosts", vec!["/etc/hosts"]),
            ("sed '/pattern/d' /etc/hosts", vec!["/etc/hosts"]),
            ("sed -n '/pattern/p' /etc/hosts", vec!["/etc/hosts"]),
            ("sed -f /etc/sed-script.sed input.txt", vec!["/etc/sed-script.sed"]),
            ("sed -i '' 's/foo/bar/' /etc/hosts", vec!["/etc/hosts"]),
            ("grep -e '/etc/' /var/log/syslog", vec!["/var/log/syslog"]),
            ("awk -F: '{print $1}' /etc/passwd", vec!["/etc/passwd"]),
            ("rg '/usr/local' /etc/profile.d/", vec!["/etc/profile.d"]),
            ("sd '/usr/local/bin' '/opt/bin' /etc/profile", vec!["/etc/profile"]),
            ("/usr/bin/sed 's/foo/bar/' /etc/hosts", vec!["/etc/hosts"]),
            ("grep -- '/etc/' /var/log/syslog", vec!["/var/log/syslog"]),
            ("grep 'pattern' $(cat /etc/file-list)", vec!["/etc/file-list"]),
            ("grep -v \"//.*pattern\" /etc/hosts", vec!["/etc/hosts"]),
            ("rg \"/etc/.*passwd\" -l", vec![]),
            ("cd /projects/my-app/packages/sub && grep -n \"p\" .pi/../../../.pi/skills/pkg/SKILL.md", vec![]),
            ("cd /projects/my-app/src && cat ../README.md", vec![]),
            ("cd /tmp && cat ../etc/hosts", vec!["/tmp", "/etc/hosts"]),
            ("grep -n \"p\" .pi/../../../.pi/skills/pkg/SKILL.md", vec!["/.pi/skills/pkg/SKILL.md"]),
            ("echo hello && cd /projects/my-app/src && cat ../../outside.txt", vec!["/projects/outside.txt"]),
            ("cd /projects/my-app/src ; cat ../README.md", vec![]),
            // Shapes of a regular expression are no reason to skip a word
            // (the newer upstream dropped that heuristic, #821).
            ("cat /etc/pass[w]d", vec!["/etc/pass[w]d"]),
        ] {
            assert_eq!(external(command, cwd), want, "{command:?}");
        }
        assert!(external("cat ~/myproject/file.ts", "/mock/home/myproject").is_empty());
    }

    #[test]
    fn a_bare_word_naming_an_existing_file_is_a_path_word() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        let root = root.to_string_lossy().into_owned();
        std::fs::write(format!("{root}/.some.secret"), "s").expect("file");
        std::os::unix::fs::symlink(format!("{root}/.some.secret"), format!("{root}/a_sym"))
            .expect("symlink");
        let words =
            bash_paths("cat a_sym missing", &root, &root.as_str().into(), "/h").expect("parses");
        let a_sym = words
            .rule_words
            .iter()
            .find(|w| w.token == "a_sym")
            .expect("a_sym");
        assert!(!a_sym.bare);
        assert!(a_sym
            .path
            .match_values
            .contains(&format!("{root}/.some.secret")));
        let missing = words
            .rule_words
            .iter()
            .find(|w| w.token == "missing")
            .expect("missing");
        assert!(missing.bare);
    }

    #[test]
    fn cd_folds_in_the_current_shell_only() {
        assert_eq!(external("cd /etc && cat passwd"), ["/etc"]);
        assert_eq!(external("cd .. && cat x"), ["/"]);
        let words = paths("cd sub && cat ../../x");
        assert_eq!(words.external[0].1.match_values[0], "/x");
        // A pipeline stage's cd does not leak.
        assert!(
            external("cd sub | cat ../y").is_empty() || external("cd sub | cat ../y") == ["/y"]
        );
        // An unknown base keeps a relative word literal and flags `..`.
        let words = paths("cd \"$D\" && cat ../z");
        assert_eq!(words.external.len(), 1);
        let shaped: Vec<&RuleWord> = words.rule_words.iter().filter(|w| !w.bare).collect();
        assert_eq!(*shaped[0].path.match_values, ["../z"]);
    }

    #[test]
    fn rule_words_and_bare_words() {
        assert_eq!(
            rule_tokens("cat src/.env id_rsa -n https://x.y/z FOO=1"),
            [
                ("src/.env".to_string(), false),
                ("id_rsa".to_string(), true)
            ]
        );
        assert_eq!(
            rule_tokens("grep -e pat file.txt"),
            [("file.txt".to_string(), true)]
        );
        assert_eq!(
            rule_tokens("sed 's/a/b/' x/y"),
            [("x/y".to_string(), false)]
        );
        // Operands a statement names, and commands hosted in a name or a
        // prefix assignment (newer upstream #839, #742).
        for command in [
            "for f in /etc/shadow; do cat $f; done",
            "case /etc/shadow in a) echo b;; esac",
            "$(cat /etc/shadow)",
            "while $(cat /etc/shadow); do echo a; done",
            "FOO=$(cat /etc/shadow) echo hi",
            "FOO=$(cat /etc/shadow) grep -f p x",
        ] {
            assert!(
                rule_tokens(command).iter().any(|(t, _)| t == "/etc/shadow"),
                "{command}"
            );
        }
        assert!(!rule_tokens("case $x in /etc/passwd) echo b;; esac")
            .iter()
            .any(|(t, _)| t == "/etc/passwd"));
        assert!(!rule_tokens("FOO=/etc/shadow echo hi")
            .iter()
            .any(|(t, _)| t == "/etc/shadow"));
        // After a cd elsewhere a bare word is a path in that directory.
        let words = paths("cd /etc && cat passwd");
        let passwd = words
            .rule_words
            .iter()
            .find(|w| w.token == "passwd")
            .expect("passwd");
        assert!(!passwd.bare);
        assert_eq!(passwd.path.match_values[0], "/etc/passwd");
        assert!(paths("cd . && cat x")
            .rule_words
            .iter()
            .any(|w| w.token == "x" && w.bare));
    }
}
