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

use super::effects::{self, Effect};
use super::enumerate::word_value;
use super::parse::{arguments, children, text};
use crate::facts::access_path::{
    clean_literal, is_outside, AccessPath, CanonicalCwd, SAFE_SYSTEM_PATHS,
};
use crate::facts::memo::{self, Entry};
use crate::facts::path_text::{join, resolve};
use regex::Regex;
use std::cell::RefCell;
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

/// How a word is used: a path word of the bash path gates, or a target a
/// redirect or a known command reads or writes (`effects.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Path,
    Read,
    Write,
}

#[derive(Debug, Clone)]
pub(super) struct Word {
    token: String,
    base: Base,
    access: Access,
    /// The shell passes the word as written: no expansion, no glob, no
    /// brace list (only a leading home spelling, which is resolved).
    fixed: bool,
}

/// A file a redirect or a known command reads or writes, resolved at the
/// asking session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub token: String,
    pub path: AccessPath,
    pub write: bool,
    /// Outside the session's cwd (its canonical boundary).
    pub outside: bool,
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
    /// What redirects and known commands read and write.
    pub targets: Vec<Target>,
    /// A write target whose path the text does not fix (an expansion, a
    /// glob, a relative path after a `cd` that cannot be followed), or a
    /// read or write through a glob that cannot be expanded here: the line
    /// is not understood and floors to `ask`.
    pub unresolved_write: Option<String>,
    /// Why a known command is not understood (`effects.json`'s floors).
    pub not_understood: Option<String>,
    /// The line's commands spelled with their relative path operands
    /// absolute, where that changes them.
    pub spellings: Vec<String>,
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
    read_paths(command, cwd, canonical_cwd, home, true)
}

/// [`bash_paths`] without the path words of the two bash path gates: only
/// what the line reads and writes, its floors and its spellings. For a
/// `{surface: bash}` ask, which judges no path word; it looks at the
/// filesystem only for a target's canonical form and a glob.
pub fn bash_targets(
    command: &str,
    cwd: &str,
    canonical_cwd: &CanonicalCwd,
    home: &str,
) -> Option<Arc<BashPaths>> {
    read_paths(command, cwd, canonical_cwd, home, false)
}

fn read_paths(
    command: &str,
    cwd: &str,
    canonical_cwd: &CanonicalCwd,
    home: &str,
    path_words: bool,
) -> Option<Arc<BashPaths>> {
    let words = super::reading(command).words?;
    let kind = if path_words { "paths" } else { "targets" };
    Some(memo::bash_paths(
        || memo::key(&[kind, command, cwd, canonical_cwd.get(), home]),
        || Arc::new(project(&words, cwd, canonical_cwd, home, path_words)),
    ))
}

/// The words of `command` from its syntax tree: a pure function of the
/// text (the filesystem is met only in [`project`]).
pub(super) fn words_of_tree(command: &str, tree: &Tree) -> Words {
    let mut walker = Walker {
        source: command,
        words: Vec::new(),
        pending: RefCell::new(Vec::new()),
        not_understood: RefCell::new(None),
        pending_spellings: RefCell::new(Vec::new()),
        spellings: Vec::new(),
    };
    walker.walk(tree.root_node(), Base::Known(String::new()), 0);
    Words {
        words: walker.words,
        not_understood: walker.not_understood.into_inner(),
        spellings: walker.spellings,
    }
}

/// The words of a line (a pure function of its text).
#[derive(Debug, Clone)]
pub(super) struct Words {
    words: Vec<Word>,
    /// Why a known command of the line is not understood.
    not_understood: Option<String>,
    /// Each command as words, its relative path operands marked, with the
    /// directory it runs in: spelled with those operands absolute, it
    /// meets a `bash` rule written with an absolute path (`rm
    /// /repo/secrets/*` for `rm secrets/x`, newer upstream).
    spellings: Vec<(Vec<(String, bool)>, Base)>,
}

impl Words {
    /// Adds the words of a script the line runs (a wrapper's payload). It
    /// may run after a `cd` of the line, so its relative words have an
    /// unknown directory: their writes floor, an absolute one is judged.
    pub(super) fn merge(&mut self, other: Words) {
        for mut word in other.words {
            if let Base::Known(offset) = &word.base {
                if !offset.starts_with('/') && !offset.starts_with('~') {
                    word.base = Base::Unknown;
                }
            }
            self.words.push(word);
        }
        for (parts, base) in other.spellings {
            if let Base::Known(offset) = &base {
                if offset.starts_with('/') || offset.starts_with('~') {
                    self.spellings.push((parts, base));
                }
            }
        }
        if self.not_understood.is_none() {
            self.not_understood = other.not_understood;
        }
    }
}

/// At most this many commands of a line are spelled with absolute paths.
const MAX_SPELLINGS: usize = 32;

fn project(
    words: &Words,
    cwd: &str,
    canonical_cwd: &CanonicalCwd,
    home: &str,
    path_words: bool,
) -> BashPaths {
    let mut out = BashPaths {
        not_understood: words.not_understood.clone(),
        ..BashPaths::default()
    };
    for (parts, base) in &words.spellings {
        let Base::Known(offset) = base else {
            continue;
        };
        let dir = base_dir(cwd, home, offset);
        let spelled: Vec<String> = parts
            .iter()
            .map(|(word, relative)| {
                if *relative {
                    resolve(&dir, word)
                } else {
                    word.clone()
                }
            })
            .collect();
        let spelled = spelled.join(" ");
        if !out.spellings.contains(&spelled) {
            out.spellings.push(spelled);
        }
    }
    let mut seen_external: Vec<Arc<str>> = Vec::new();
    let mut seen_rule: Vec<Arc<[String]>> = Vec::new();
    for word in &words.words {
        // `${HOME}/x` is the home as `$HOME/x` is (newer upstream).
        let braced = word
            .token
            .strip_prefix("${HOME}")
            .filter(|rest| rest.is_empty() || rest.starts_with('/'))
            .map(|rest| format!("$HOME{rest}"));
        let token = braced.as_deref().unwrap_or(word.token.as_str());
        if word.access != Access::Path {
            project_target(word, token, cwd, canonical_cwd, home, &mut out);
            continue;
        }
        if !path_words {
            continue;
        }
        if reject_non_path_token(token) {
            continue;
        }
        let relative = !token.starts_with('/') && !is_home_spelled(token);
        let resolve_base = match &word.base {
            Base::Known(offset) => Some(base_dir(cwd, home, offset)),
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

/// A read or write target: resolved where the text fixes it; a write the
/// text does not fix makes the line not understood.
fn project_target(
    word: &Word,
    token: &str,
    cwd: &str,
    canonical_cwd: &CanonicalCwd,
    home: &str,
    out: &mut BashPaths,
) {
    let write = word.access == Access::Write;
    let relative = !token.starts_with('/') && !is_home_spelled(token) && token != "~";
    let base = match &word.base {
        Base::Known(offset) => Some(base_dir(cwd, home, offset)),
        Base::Unknown => None,
    };
    let expandable = !word.fixed && super::glob::is_pattern(token);
    let Some(base) = base.filter(|_| word.fixed || expandable).or_else(|| {
        // An absolute (or home) path does not depend on the directory.
        ((word.fixed || expandable) && !relative).then(|| cwd.to_string())
    }) else {
        if write && out.unresolved_write.is_none() {
            out.unresolved_write = Some(token.to_string());
        }
        return;
    };
    if expandable {
        // A glob or brace list: judged on each name it gives here (so a
        // guard or deny on one of them answers) and on the pattern; a
        // write through one is not fixed by the text, so it also floors.
        match super::glob::expand(token, &base, home) {
            Some(names) => {
                for name in names {
                    let fixed = Word {
                        token: name.clone(),
                        base: Base::Known(String::new()),
                        access: word.access,
                        fixed: true,
                    };
                    project_target(&fixed, &name, cwd, canonical_cwd, home, out);
                }
            }
            None => {
                // Not expandable here (too many names, inside the mount, an
                // asker in another namespace): it could name a guarded or
                // denied path, so a read through it floors too.
                if out.unresolved_write.is_none() {
                    out.unresolved_write = Some(token.to_string());
                }
            }
        }
        if write && out.unresolved_write.is_none() {
            out.unresolved_write = Some(token.to_string());
        }
    }
    if token.is_empty() || SAFE_SYSTEM_PATHS.contains(&token) {
        return;
    }
    let path = AccessPath::for_path_in(token, &base, cwd, home);
    if path.match_values.is_empty() {
        return;
    }
    let outside = is_outside(&path.boundary, canonical_cwd.get());
    if out
        .targets
        .iter()
        .any(|t| t.write == write && t.path.match_values == path.match_values)
    {
        return;
    }
    out.targets.push(Target {
        token: token.to_string(),
        path,
        write,
        outside,
    });
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
    /// Read and write targets of the commands and redirects just read,
    /// waiting for the directory they are in (given by the next `tag`).
    pending: RefCell<Vec<(String, Access, bool)>>,
    /// Why a known command is not understood (the first one found).
    not_understood: RefCell<Option<String>>,
    /// Commands just read, as spellings waiting for their directory
    /// ([`Words::spellings`]).
    pending_spellings: RefCell<Vec<Vec<(String, bool)>>>,
    spellings: Vec<(Vec<(String, bool)>, Base)>,
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
                access: Access::Path,
                fixed: true,
            });
        }
        for (token, access, fixed) in self.pending.take() {
            self.words.push(Word {
                token,
                base: base.clone(),
                access,
                fixed,
            });
        }
        for parts in self.pending_spellings.take() {
            if self.spellings.len() < MAX_SPELLINGS {
                self.spellings.push((parts, base.clone()));
            }
        }
    }

    /// Notes the command as words, its relative path operands marked (a
    /// command with an argument the text does not fix is not spelled).
    fn note_spelling(&self, node: Node<'_>) {
        let mut parts = Vec::new();
        let mut named = false;
        for child in children(&node) {
            if !child.is_named() {
                continue;
            }
            match child.kind() {
                "command_name" => {
                    parts.push((text(&child, self.source).to_string(), false));
                    named = true;
                }
                "variable_assignment" | "comment" => {}
                "file_redirect" | "heredoc_redirect" | "herestring_redirect" => {}
                _ if named => {
                    if !is_fixed(child, self.source, 0) {
                        return;
                    }
                    let value = shell_value(&child, self.source);
                    // Path-shaped only (`secrets/x`, `./a`): a bare word
                    // is an argument more often than a file.
                    let relative = (value.contains('/') || value.starts_with('.'))
                        && !value.starts_with(['-', '/', '~', '$'])
                        && !value.contains('=')
                        && !matches(&URL, &value);
                    parts.push((value, relative));
                }
                _ => return,
            }
        }
        if parts.iter().any(|(_, relative)| *relative) {
            self.pending_spellings.borrow_mut().push(parts);
        }
    }

    /// Notes what a known command reads and writes (`effects.json`).
    fn note_effects(&self, node: Node<'_>) {
        let Some(name) = command_name(node, self.source) else {
            return;
        };
        let args: Vec<Node<'_>> = arguments(&node);
        let values: Vec<String> = args.iter().map(|a| shell_value(a, self.source)).collect();
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        let Some(found) = effects::effects(&name, &refs) else {
            return;
        };
        if let Some(why) = found.floor {
            self.not_understood.borrow_mut().get_or_insert(why);
        }
        let mut pending = self.pending.borrow_mut();
        for target in found.targets {
            let fixed = args
                .get(target.arg)
                .is_some_and(|a| is_fixed(*a, self.source, 0));
            let access = match target.effect {
                Effect::Read => Access::Read,
                Effect::Write => Access::Write,
            };
            pending.push((target.value, access, fixed));
        }
    }

    /// Notes the file a redirect reads or writes: `>`, `>>`, `>|`, `&>`,
    /// `&>>`, `>& file` write; `<` reads; a descriptor (`>&2`, `<&-`) is
    /// no file.
    fn note_redirect(&self, node: Node<'_>) {
        let operator: String = children(&node)
            .iter()
            .filter(|c| !c.is_named())
            .map(|c| text(c, self.source))
            .collect();
        let access = if operator.contains('>') {
            Access::Write
        } else if operator.contains('<') {
            Access::Read
        } else {
            return;
        };
        let mut cursor = node.walk();
        let targets: Vec<Node<'_>> = node
            .children_by_field_name("destination", &mut cursor)
            .collect();
        let mut pending = self.pending.borrow_mut();
        for target in targets {
            let value = shell_value(&target, self.source);
            let descriptor = target.kind() == "number"
                || value == "-"
                || (operator.contains('&')
                    && !operator.starts_with('&')
                    && value.chars().all(|c| c.is_ascii_digit() || c == '-'));
            if descriptor {
                continue;
            }
            pending.push((value, access, is_fixed(target, self.source, 0)));
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
        match command_name(node, self.source).as_deref() {
            Some("cd" | "pushd") => {}
            // `popd` and `dirs`' stack, `cd -`: a directory the text does
            // not name.
            Some("popd") => return Base::Unknown,
            _ => return base,
        }
        let Some(target) = self.cd_target(node) else {
            return Base::Unknown;
        };
        if target.starts_with('/') || target == "~" || target.starts_with("~/") {
            return Base::Known(target);
        }
        // With `CDPATH` set anywhere on the line, bash may take a relative
        // target from it (`CDPATH=<mount>/sessions/main cd inbox`).
        if self.source.contains("CDPATH")
            && !(target == "."
                || target == ".."
                || target.starts_with("./")
                || target.starts_with("../"))
        {
            return Base::Unknown;
        }
        match base {
            Base::Unknown => Base::Unknown,
            Base::Known(offset) => Base::Known(join(&offset, &target)),
        }
    }

    /// The literal target of a `cd` (the home spelled `~`, `~/…`,
    /// `$HOME/…` or `${HOME}/…`, and no target at all, give `~…`), or
    /// `None` when it is computed, `-`, another user's home, or not a word.
    fn cd_target(&self, node: Node<'_>) -> Option<String> {
        let mut options_done = false;
        for child in children(&node) {
            let kind = child.kind();
            if kind == "command_name" || kind == "variable_assignment" || !child.is_named() {
                continue;
            }
            if matches!(kind, "file_redirect" | "herestring_redirect" | "comment") {
                continue;
            }
            let raw = text(&child, self.source);
            if !options_done && kind == "word" && matches!(raw, "-L" | "-P" | "-e" | "-LP" | "-PL")
            {
                continue;
            }
            options_done = true;
            if kind == "word" && raw == "--" {
                continue;
            }
            if !is_fixed(child, self.source, 0) {
                return None;
            }
            let value = shell_value(&child, self.source);
            for prefix in ["$HOME", "${HOME}"] {
                if let Some(rest) = value.strip_prefix(prefix) {
                    if rest.is_empty() || rest.starts_with('/') {
                        return Some(format!("~{rest}"));
                    }
                }
            }
            if value == "-"
                || value.is_empty()
                || (value.starts_with('~') && value != "~" && !value.starts_with("~/"))
            {
                return None;
            }
            return Some(value);
        }
        // `cd` alone goes home.
        Some("~".into())
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
            "heredoc_redirect" => {
                // A body whose delimiter is not quoted is expanded: the
                // commands of its substitutions run (their writes count),
                // its prose is no path.
                let quoted = children(&node).iter().any(|c| {
                    c.kind() == "heredoc_start" && text(c, self.source).contains(['\'', '"', '\\'])
                });
                let mut tokens = Vec::new();
                for child in children(&node) {
                    match child.kind() {
                        "heredoc_body" if !quoted => {
                            tokens.extend(self.hosted_tokens(child, depth + 1))
                        }
                        "heredoc_body" | "heredoc_end" | "heredoc_start" => {}
                        _ => tokens.extend(self.subtree_tokens(child, depth + 1)),
                    }
                }
                tokens
            }
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
            .map(|c| shell_value(c, self.source))
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
        self.note_redirect(node);
        let mut tokens: Vec<String> = children(&node)
            .iter()
            .filter(|c| is_arg(c.kind()))
            .map(|c| shell_value(c, self.source))
            .collect();
        // `2>"$(…)"`: the substitution runs before the redirect opens.
        tokens.extend(self.hosted_tokens(node, 0));
        tokens
    }

    fn command_tokens(&self, node: Node<'_>, depth: usize) -> Vec<String> {
        self.note_effects(node);
        self.note_spelling(node);
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
                    let value = shell_value(&child, self.source);
                    if let Some(embedded) = option_value(&value) {
                        tokens.push(embedded.to_string());
                    }
                    tokens.push(value);
                }
                seen_name = true;
                // What runs inside the word (`"$(…)"`, `a\`…\`b`) is read
                // too: its writes are the line's.
                tokens.extend(self.hosted_tokens(child, depth + 1));
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
            tokens.extend(self.hosted_tokens(child, depth + 1));
            let value = shell_value(&child, self.source);
            match next.take() {
                Some(false) => continue,
                Some(true) => {
                    tokens.push(value);
                    continue;
                }
                None => {}
            }
            if !past_flags && kind == "word" && value.starts_with('-') && value.len() > 1 {
                if let Some(embedded) = option_value(&value) {
                    // `--exclude-dir=/etc/skel`: the value names a path.
                    tokens.push(embedded.to_string());
                    continue;
                }
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

/// The value of `--opt=value` or `-o=value` (after the first `=`), which
/// may name a path (newer upstream #645).
fn option_value(word: &str) -> Option<&str> {
    if !word.starts_with('-') {
        return None;
    }
    word.split_once('=')
        .map(|(_, value)| value)
        .filter(|v| !v.is_empty())
}

/// The directory a base offset names: joined with the cwd, or the home's
/// when it starts with `~`.
fn base_dir(cwd: &str, home: &str, offset: &str) -> String {
    match offset.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            resolve(home, rest.trim_start_matches('/'))
        }
        _ => resolve(cwd, offset),
    }
}

/// The value the shell passes for an argument, with the backslashes of an
/// unquoted word taken off as bash takes them (`inb\ox` is `inbox`).
fn shell_value(node: &Node<'_>, source: &str) -> String {
    match node.kind() {
        "word" => unescape(text(node, source)),
        "concatenation" => children(node)
            .iter()
            .map(|c| shell_value(c, source))
            .collect(),
        _ => word_value(node, source),
    }
}

fn unescape(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    let mut chars = word.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('\n') | None => {}
                Some(next) => out.push(next),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// True when the shell passes the argument as written: no expansion, no
/// glob, no brace list, no process substitution; a leading home spelling
/// (`~`, `~/…`, `$HOME`, `${HOME}`) is allowed, as it is resolved.
fn is_fixed(node: Node<'_>, source: &str, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    if depth == 0
        && matches!(node.kind(), "word" | "concatenation")
        && super::glob::is_pattern(text(&node, source))
    {
        // `{a,b}` is split into words by tree-sitter; the whole tells.
        return false;
    }
    match node.kind() {
        "raw_string" | "number" => true,
        "word" => plain_word(text(&node, source), depth == 0),
        "string" => {
            let parts = children(&node);
            parts.iter().enumerate().all(|(i, c)| match c.kind() {
                "\"" | "string_content" => true,
                "simple_expansion" | "expansion" => i == 1 && is_home(text(c, source)),
                _ => false,
            })
        }
        "concatenation" => children(&node)
            .iter()
            .enumerate()
            .all(|(i, c)| match c.kind() {
                // `$HOME` first, or right after an option's `=`
                // (`--output=$HOME/x`).
                "simple_expansion" | "expansion" => {
                    is_home(text(c, source))
                        && (i == 0
                            || (i == 1
                                && children(&node)
                                    .first()
                                    .is_some_and(|w| text(w, source).ends_with('='))))
                }
                "word" => plain_word(text(c, source), i == 0),
                _ => is_fixed(*c, source, depth + 1),
            }),
        "simple_expansion" | "expansion" => depth == 0 && is_home(text(&node, source)),
        _ => false,
    }
}

fn is_home(expansion: &str) -> bool {
    expansion == "$HOME" || expansion == "${HOME}"
}

/// An unquoted word with nothing the shell expands: no `$`, backquote,
/// glob character, brace list or `(`; a `~` only at its start (as the home
/// or `~/…`).
fn plain_word(word: &str, first: bool) -> bool {
    let mut escaped = false;
    let mut braces = false;
    for (i, c) in word.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '$' | '`' | '*' | '?' | '[' | '(' | ')' | '<' | '>' => return false,
            '{' => braces = true,
            ',' if braces => return false,
            '.' if braces && word[i..].starts_with("..") => return false,
            '~' if i > 0 || !first => {}
            '~' => {
                let rest = &word[1..];
                if !(rest.is_empty() || rest.starts_with('/')) {
                    return false;
                }
            }
            _ => {}
        }
    }
    true
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
