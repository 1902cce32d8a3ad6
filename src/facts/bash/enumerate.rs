//! The commands of a bash line, enumerated from its syntax tree as the
//! reference's `collectCommands` does, plus what the newer upstream tests
//! ask for (bodies of blocks, deny reaching through wrappers).
//!
//! Each unit says how it counts in the verdict ([`UnitRole`]):
//! - the reference's units (simple commands without leading `VAR=x`,
//!   subshells and blocks whole, the inner commands of `$( )`, backticks
//!   and `<( )`) count as they are;
//! - a redirected statement with its redirects counts only where a
//!   specific rule names it, so an exact rule on `ls > out` still applies
//!   without the catch-all `*` ever judging more than the reference does;
//! - what a wrapper runs (`sudo rm x` runs `rm x`, `sh -c 'rm x'` runs
//!   `rm x`) counts only when it is denied: the wrapper itself is already
//!   floored to `ask`, and a deny on the inner command must reach through.

use super::parse::{children, parse, text};
use tree_sitter::Node;

/// The reference's provenance sentinels, reported as the matched pattern
/// when a floor turned an `allow` into `ask`.
pub const OPAQUE_WRAPPER: &str = "<opaque-bash-wrapper>";
pub const INDIRECTION_WRAPPER: &str = "<indirection-bash-wrapper>";
pub const UNPARSEABLE_COMMAND: &str = "<unparseable-bash-command>";
pub const UNPARSED_SUBTREE: &str = "<unparsed-bash-subtree>";
/// A write whose target the text does not fix (an expansion, a glob, a
/// relative path after a `cd` that cannot be followed).
pub const UNRESOLVED_WRITE: &str = "<unresolved-bash-write-target>";
/// A command run with a variable assigned before it that is not on the
/// inert list ([`INERT_ASSIGNMENTS`]): `GIT_CONFIG_*`, `PATH`,
/// `LD_PRELOAD`, `BASH_ENV`, `GIT_PAGER` change what the command runs.
pub const ENVIRONMENT_PREFIX: &str = "<bash-environment-prefix>";
/// Something bash runs that the walk did not read as a command: a
/// substitution the grammar left inside a heredoc body or a parameter
/// expansion, arithmetic that evaluates a variable's value as an
/// expression (`$((x))`, `[[ $x -eq 1 ]]`, `${a[i]}`), `${x@P}`.
pub const UNSEEN_CODE: &str = "<bash-code-not-judged>";
/// A known command used in a way the effects table does not understand
/// (`git -c`, `tar -x`, `rsync -e`: `effects.json`).
pub const UNDERSTOOD_ONLY_IN_PART: &str = "<bash-command-not-understood>";

/// Variables that may be set in front of a command without changing what
/// it runs or where it writes; `LC_` names any locale category. Any other
/// assignment prefix makes the command count only where a rule names it
/// with its prefix.
pub const INERT_ASSIGNMENTS: &[&str] = &[
    "LANG",
    "LANGUAGE",
    "TZ",
    "NO_COLOR",
    "FORCE_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "TERM",
    "COLUMNS",
    "LINES",
];

/// True when `name=…` in front of a command is inert.
pub fn is_inert_assignment(name: &str) -> bool {
    INERT_ASSIGNMENTS.contains(&name)
        || name
            .strip_prefix("LC_")
            .is_some_and(|rest| !rest.is_empty() && rest.chars().all(|c| c.is_ascii_uppercase()))
}

/// Nesting beyond this is not walked: the line is then treated as not
/// understood (floored), never as empty. Guards the stack against
/// `$($($(…)))` built to exhaust it.
const MAX_DEPTH: usize = 256;
/// How deep wrapper payloads (`sh -c '…'`, `eval …`, `sudo …`) are re-read.
const MAX_PAYLOAD_DEPTH: usize = 3;
/// How many argument suffixes of one wrapper are read as its inner command.
const MAX_WRAPPER_SUFFIXES: usize = 3;

/// How a unit's verdict counts toward the line's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitRole {
    /// Counts as it is (the reference's units).
    Full,
    /// Counts only when a specific rule (a pattern other than `*`) decided.
    Specific,
    /// Counts only when denied: what a wrapper runs.
    DenyOnly,
}

/// One command of a line, as it will be matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandUnit {
    pub text: String,
    /// The sentinel to report when an `allow` on this unit is floored to
    /// `ask` because it hides or may hide what it runs.
    pub floor: Option<&'static str>,
    pub role: UnitRole,
    /// The command as written with its assignment prefix, when the prefix
    /// is not inert: the unit is then floored ([`ENVIRONMENT_PREFIX`])
    /// unless a specific rule allows this text.
    pub written: Option<String>,
}

/// The enumeration of one line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Enumeration {
    pub units: Vec<CommandUnit>,
    /// The grammar could not read all of the line (no tree, an `ERROR` or
    /// missing node, or nesting too deep): the line is floored to `ask`.
    pub unparsed: bool,
    /// The line runs code the walk did not judge ([`UNSEEN_CODE`]): it is
    /// floored to `ask`; with what was found, for the explanation.
    pub unseen: Option<String>,
    /// Text the line runs as commands of its own that its syntax tree does
    /// not hold as commands (what a wrapper runs, a substitution the grammar
    /// left as text): read again for what it writes.
    pub scripts: Vec<String>,
}

impl Enumeration {
    /// True when the line holds no unit the reference would judge.
    pub fn has_no_command(&self) -> bool {
        !self.units.iter().any(|u| u.role == UnitRole::Full)
    }
}

/// Enumerates the commands of `source`.
pub fn enumerate(source: &str) -> Enumeration {
    Enumeration::clone(&enumerate_shared(source))
}

/// [`enumerate`], shared with the per-thread memo of line readings (no
/// copy of the units).
pub fn enumerate_shared(source: &str) -> std::sync::Arc<Enumeration> {
    super::reading(source).enumeration
}

fn enumerate_at(source: &str, payload_depth: usize) -> Enumeration {
    enumerate_tree(source, parse(source).as_ref(), payload_depth)
}

/// The enumeration of `source` from its syntax tree (`None`: the line could
/// not be parsed at all, and floors).
pub(super) fn enumerate_tree(
    source: &str,
    tree: Option<&tree_sitter::Tree>,
    payload_depth: usize,
) -> Enumeration {
    let Some(tree) = tree else {
        tracing::warn!("bash line could not be parsed at all");
        return Enumeration {
            units: Vec::new(),
            unparsed: true,
            unseen: None,
            scripts: Vec::new(),
        };
    };
    let root = tree.root_node();
    let mut walker = Walker {
        source,
        units: Vec::new(),
        too_deep: false,
        payload_depth,
        hung: None,
        seen: Vec::new(),
        scripts: Vec::new(),
    };
    walker.statement(root, 0);
    let (unseen, hidden) = super::soundness::unseen_code(source, root, &walker.seen);
    for inner in hidden {
        walker.payload(&inner);
    }
    if root.has_error() && source.contains("<<") {
        // A heredoc the grammar could not read can swallow the rest of its
        // line (`cat <<EOF ; rm -rf x`): the line is floored, and its
        // command lines without the heredoc operators are read again so a
        // deny still reaches what they run (newer upstream #840, #875).
        for line in source.lines().filter(|l| l.contains("<<")) {
            let salvaged = without_heredoc_operators(line);
            if salvaged.trim() != line.trim() {
                walker.payload(&salvaged);
            }
        }
    }
    Enumeration {
        unparsed: root.has_error() || walker.too_deep,
        units: walker.units,
        unseen,
        scripts: walker.scripts,
    }
}

/// Statement-level node kinds: walked as commands when met in a body.
fn is_statement(kind: &str) -> bool {
    matches!(
        kind,
        "command"
            | "list"
            | "pipeline"
            | "redirected_statement"
            | "subshell"
            | "compound_statement"
            | "if_statement"
            | "while_statement"
            | "for_statement"
            | "c_style_for_statement"
            | "case_statement"
            | "function_definition"
            | "negated_command"
            | "test_command"
            | "declaration_command"
            | "unset_command"
            | "variable_assignment"
            | "variable_assignments"
            | "ERROR"
    )
}

/// Parts of a block that hold statements (`do … done`, `else …`, a case arm).
fn is_body(kind: &str) -> bool {
    matches!(
        kind,
        "do_group" | "else_clause" | "elif_clause" | "case_item"
    )
}

/// Redirects and what is not a command: never a unit of their own.
fn is_redirect_or_note(kind: &str) -> bool {
    matches!(
        kind,
        "file_redirect"
            | "heredoc_redirect"
            | "herestring_redirect"
            | "comment"
            | "heredoc_body"
            | "heredoc_end"
    )
}

const SHELLS: &[&str] = &["bash", "sh", "dash", "zsh", "ksh"];
/// Commands that always run another command given in their arguments (the
/// reference's list).
const INDIRECTION_WRAPPERS: &[&str] = &[
    "sudo",
    "env",
    "xargs",
    "time",
    "nohup",
    "timeout",
    "nice",
    "parallel",
    "rust-parallel",
    "rush",
    "doas",
    "setsid",
    "stdbuf",
    "watch",
    "flock",
    // Not in the reference; they run the command named in their arguments
    // just as well (docs/reference-divergences.md).
    "exec",
    "command",
    "builtin",
    "coproc",
    "busybox",
];
const FIND_EXEC_FLAGS: &[&str] = &["-exec", "-execdir", "-ok", "-okdir"];
const FD_EXEC_FLAGS: &[&str] = &["-x", "--exec", "-X", "--exec-batch"];

struct Walker<'s> {
    source: &'s str,
    units: Vec<CommandUnit>,
    too_deep: bool,
    payload_depth: usize,
    /// Words tree-sitter-bash hung on a redirect after the command they
    /// belong to (`git 2>/dev/null push --force` gives `push --force` to
    /// the redirect), keyed by the id of the command node that owns them.
    hung: Option<(usize, Vec<String>)>,
    /// Start bytes of the substitutions whose commands were enumerated
    /// (and the closing byte of a backquoted one): whatever else in the
    /// text bash would run was not judged (`soundness::unseen_code`).
    seen: Vec<usize>,
    /// Payloads read at the top level ([`Enumeration::scripts`]).
    scripts: Vec<String>,
}

/// At most this many payloads of one line are read again for their writes.
const MAX_SCRIPTS: usize = 16;

impl<'s> Walker<'s> {
    fn push(&mut self, text: &str, floor: Option<&'static str>, role: UnitRole) {
        self.push_written(text, floor, role, None);
    }

    fn push_written(
        &mut self,
        text: &str,
        floor: Option<&'static str>,
        role: UnitRole,
        written: Option<String>,
    ) {
        let joined = join_continuations(text);
        let text = joined.trim();
        if !text.is_empty() {
            self.units.push(CommandUnit {
                text: text.to_string(),
                floor,
                role,
                written,
            });
        }
    }

    fn guard(&mut self, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            self.too_deep = true;
            return false;
        }
        true
    }

    fn statement(&mut self, node: Node<'_>, depth: usize) {
        if !node.is_named() || !self.guard(depth) {
            return;
        }
        let kind = node.kind();
        if is_redirect_or_note(kind) {
            self.redirect(node, depth + 1);
            return;
        }
        match kind {
            "command" => {
                self.command(node);
                self.substitutions(node, depth + 1);
            }
            "program" | "list" | "pipeline" => {
                for child in children(&node) {
                    self.statement(child, depth + 1);
                }
            }
            "redirected_statement" => {
                let hung = self.hung_words(node);
                let outer = std::mem::replace(&mut self.hung, hung);
                for child in children(&node) {
                    self.statement(child, depth + 1);
                }
                self.hung = outer;
                // The statement with its redirects, for a rule written on it
                // (`ls > out`); heredoc bodies are not part of it.
                let with_redirects = self.without_heredoc_bodies(node);
                self.push(&with_redirects, None, UnitRole::Specific);
            }
            "subshell" => {
                self.push(text(&node, self.source), None, UnitRole::Full);
                for child in children(&node) {
                    self.statement(child, depth + 1);
                }
            }
            _ => {
                // Blocks, `!`, `[[ ]]`, assignments, declarations and
                // anything unrecognised: judged whole, as the reference
                // does, and their bodies' commands too, as the newer
                // upstream tests ask.
                self.push(text(&node, self.source), None, UnitRole::Full);
                self.body(node, depth + 1);
            }
        }
    }

    fn body(&mut self, node: Node<'_>, depth: usize) {
        if !self.guard(depth) {
            return;
        }
        for child in children(&node) {
            if !child.is_named() {
                continue;
            }
            let kind = child.kind();
            if is_statement(kind) || is_redirect_or_note(kind) {
                self.statement(child, depth + 1);
            } else if is_body(kind) {
                self.body(child, depth + 1);
            } else {
                self.nested(child, depth + 1);
            }
        }
    }

    /// Redirects run no command of their own, but a substitution in a
    /// target or an unquoted heredoc body runs, and a pipeline written after
    /// a heredoc start (`cat <<EOF | sh`) sits inside the heredoc redirect.
    fn redirect(&mut self, node: Node<'_>, depth: usize) {
        if !self.guard(depth) || node.kind() == "comment" {
            return;
        }
        // A quoted delimiter (`<<'EOF'`, `<<"EOF"`, `<<\EOF`) makes the body
        // literal text: nothing in it runs (newer upstream #741).
        let literal_body = node.kind() == "heredoc_redirect"
            && children(&node).iter().any(|c| {
                c.kind() == "heredoc_start" && text(c, self.source).contains(['\'', '"', '\\'])
            });
        for child in children(&node) {
            if !child.is_named() || (literal_body && child.kind() == "heredoc_body") {
                continue;
            }
            if is_statement(child.kind()) {
                self.statement(child, depth + 1);
            } else {
                self.nested(child, depth + 1);
            }
        }
    }

    /// The inner commands of `$( )`, backticks and `<( )` / `>( )` anywhere
    /// under `node` (inside double quotes too), `node` excluded.
    fn substitutions(&mut self, node: Node<'_>, depth: usize) {
        if !self.guard(depth) {
            return;
        }
        for child in children(&node) {
            self.nested(child, depth + 1);
        }
    }

    /// `node` itself when it is a substitution, else the ones under it.
    fn nested(&mut self, node: Node<'_>, depth: usize) {
        match node.kind() {
            "command_substitution" | "process_substitution" => {
                self.seen.push(node.start_byte());
                self.seen.push(node.end_byte().saturating_sub(1));
                for inner in children(&node) {
                    self.statement(inner, depth + 1);
                }
            }
            "comment" => {}
            _ => self.substitutions(node, depth + 1),
        }
    }

    fn command(&mut self, node: Node<'_>) {
        let parts = children(&node);
        // The text from the first non-assignment child on, verbatim, so
        // `FOO=1 rm x` is judged as `rm x`; a pure assignment stays whole.
        let first_word = parts
            .iter()
            .position(|c| c.is_named() && c.kind() != "variable_assignment");
        let unit_text = match first_word {
            Some(index) => self
                .source
                .get(parts[index].start_byte()..node.end_byte())
                .unwrap_or(""),
            None => text(&node, self.source),
        };
        let words: Vec<Node<'_>> = parts
            .iter()
            .copied()
            .filter(|c| c.is_named() && c.kind() != "variable_assignment")
            .collect();
        // The name and arguments, without redirects the grammar put among
        // them (`2>/dev/null sudo rm x` is `sudo`).
        let plain: Vec<Node<'_>> = words
            .iter()
            .copied()
            .filter(|w| !is_redirect_or_note(w.kind()))
            .collect();
        let floor = self.wrapper(&plain, node);
        // `GIT_PAGER=x git log` runs what the prefix says: counted as `git
        // log` only where it is inert, else floored unless a rule names it
        // with its prefix.
        let prefixed = first_word.is_some()
            && parts.iter().any(|c| {
                c.kind() == "variable_assignment"
                    && !is_inert_assignment(&assigned_name(c, self.source))
            });
        if prefixed {
            let written = text(&node, self.source).to_string();
            self.push_written(
                unit_text,
                floor.or(Some(ENVIRONMENT_PREFIX)),
                UnitRole::Full,
                Some(written),
            );
        } else {
            self.push(unit_text, floor, UnitRole::Full);
        }
        // The command without the redirects the grammar placed among its
        // words (`2>/dev/null git push`, `git <<< x push`), and with the
        // words it hung on a following redirect: the command that runs,
        // read again as a line of its own (the newer upstream's unit text;
        // the reference's stays judged too, so this never loosens).
        let hosts_redirect = words.iter().any(|w| is_redirect_or_note(w.kind()));
        let hung = match &self.hung {
            Some((id, hung)) if *id == node.id() => hung.clone(),
            _ => Vec::new(),
        };
        if hosts_redirect || !hung.is_empty() {
            let mut pieces: Vec<&str> = plain.iter().map(|w| text(w, self.source)).collect();
            pieces.extend(hung.iter().map(String::as_str));
            let runs = pieces.join(" ");
            if runs != unit_text.trim() {
                self.reread(&runs);
            }
        }
        // `\rm x`, `'rm' x`, `/bin/rm x` run `rm`: the command as the shell
        // names it also meets a deny written for it.
        if let Some(name_node) = plain.first() {
            let raw = text(name_node, self.source);
            let name = program_name(name_node, self.source);
            if !name.is_empty() && name != raw {
                let rest = self
                    .source
                    .get(name_node.end_byte()..node.end_byte())
                    .unwrap_or("");
                self.push(&format!("{name}{rest}"), None, UnitRole::DenyOnly);
            }
        }
    }

    /// Classifies a command as a wrapper (the reference's rules, reading the
    /// raw argument texts) and adds what it runs as deny-only units.
    fn wrapper(&mut self, words: &[Node<'_>], node: Node<'_>) -> Option<&'static str> {
        let name_node = words.first()?;
        // The name the shell runs: quotes and backslashes removed, basename
        // (the reference reads the raw text, so `'sudo' rm` hid the wrapper).
        let name = program_name(name_node, self.source);
        let name = name.as_str();
        let args = &words[1..];
        let arg_text = |n: &Node<'_>| text(n, self.source);
        if name == "eval" || name == "trap" {
            // `trap` runs its first argument later, as `eval` runs its words.
            let payload: Vec<String> = if name == "trap" {
                args.first()
                    .map(|a| word_value(a, self.source))
                    .into_iter()
                    .collect()
            } else {
                args.iter().map(|a| word_value(a, self.source)).collect()
            };
            self.payload(&payload.join(" "));
            return Some(OPAQUE_WRAPPER);
        }
        if SHELLS.contains(&name) {
            for (index, arg) in args.iter().enumerate() {
                let raw = arg_text(arg);
                if raw == "--" {
                    break;
                }
                if raw.starts_with('-') && !raw.starts_with("--") && raw.contains('c') {
                    if let Some(script) = args.get(index + 1) {
                        let script = word_value(script, self.source);
                        self.payload(&script);
                    }
                    return Some(OPAQUE_WRAPPER);
                }
            }
            return None;
        }
        if INDIRECTION_WRAPPERS.contains(&name) {
            self.inner_commands(args, node);
            return Some(INDIRECTION_WRAPPER);
        }
        let exec_flags = match name {
            "find" => FIND_EXEC_FLAGS,
            "fd" => FD_EXEC_FLAGS,
            _ => return None,
        };
        let flag = args
            .iter()
            .position(|a| exec_flags.contains(&arg_text(a)))?;
        self.inner_commands(&args[flag + 1..], node);
        Some(INDIRECTION_WRAPPER)
    }

    /// What a prefix wrapper runs: the text from each of its first few
    /// non-option, non-assignment arguments to the end of the command (the
    /// wrapper's own option values cannot be told from the command without
    /// knowing every wrapper's flags; a deny-only unit too many is harmless).
    fn inner_commands(&mut self, args: &[Node<'_>], node: Node<'_>) {
        let mut taken = 0;
        for arg in args {
            if taken == MAX_WRAPPER_SUFFIXES {
                break;
            }
            let raw = text(arg, self.source);
            if raw.starts_with('-') || is_assignment_word(raw) {
                continue;
            }
            let Some(suffix) = self.source.get(arg.start_byte()..node.end_byte()) else {
                continue;
            };
            self.payload(suffix);
            taken += 1;
        }
    }

    /// Reads `line` as a line of its own, keeping each unit's role and floor.
    fn reread(&mut self, line: &str) {
        if self.payload_depth >= MAX_PAYLOAD_DEPTH {
            self.push(line, None, UnitRole::Full);
            return;
        }
        for unit in enumerate_at(line, self.payload_depth + 1).units {
            self.push(&unit.text, unit.floor, unit.role);
        }
    }

    /// The words tree-sitter-bash hung on the redirects of a redirected
    /// statement (destinations after the first, heredoc arguments), with the
    /// command they belong to: the last command of the statement's body.
    fn hung_words(&self, node: Node<'_>) -> Option<(usize, Vec<String>)> {
        let mut words = Vec::new();
        for child in children(&node) {
            let field = match child.kind() {
                "file_redirect" => "destination",
                "heredoc_redirect" => "argument",
                _ => continue,
            };
            let mut cursor = child.walk();
            let values: Vec<Node<'_>> = child.children_by_field_name(field, &mut cursor).collect();
            let skip = usize::from(field == "destination");
            words.extend(
                values
                    .iter()
                    .skip(skip)
                    .map(|w| text(w, self.source).to_string()),
            );
        }
        if words.is_empty() {
            return None;
        }
        let mut owner = node.child_by_field_name("body")?;
        for _ in 0..MAX_DEPTH {
            match owner.kind() {
                "command" => return Some((owner.id(), words)),
                "list" | "pipeline" => {
                    owner = children(&owner).into_iter().rev().find(|c| c.is_named())?;
                }
                _ => return None,
            }
        }
        None
    }

    /// Reads a wrapper's payload as a line of its own; every unit it yields
    /// (and the payload itself) counts only when denied.
    fn payload(&mut self, script: &str) {
        if script.trim().is_empty() {
            return;
        }
        if self.payload_depth == 0 && self.scripts.len() < MAX_SCRIPTS {
            self.scripts.push(script.to_string());
        }
        self.push(script, None, UnitRole::DenyOnly);
        if self.payload_depth >= MAX_PAYLOAD_DEPTH {
            return;
        }
        let inner = enumerate_at(script, self.payload_depth + 1);
        for unit in inner.units {
            self.push(&unit.text, None, UnitRole::DenyOnly);
        }
    }

    fn without_heredoc_bodies(&self, node: Node<'_>) -> String {
        let end = first_of_kind(node, &["heredoc_body", "heredoc_end"], 0)
            .map(|n| n.start_byte())
            .unwrap_or(node.end_byte());
        self.source
            .get(node.start_byte()..end)
            .unwrap_or("")
            .trim_end()
            .to_string()
    }
}

fn first_of_kind<'t>(node: Node<'t>, kinds: &[&str], depth: usize) -> Option<Node<'t>> {
    if depth > MAX_DEPTH {
        return None;
    }
    for child in children(&node) {
        if kinds.contains(&child.kind()) {
            return Some(child);
        }
        if let Some(found) = first_of_kind(child, kinds, depth + 1) {
            return Some(found);
        }
    }
    None
}

/// A command name as the shell runs it: quotes and backslashes removed,
/// directories dropped (`'/bin/rm'` → `rm`).
fn program_name(node: &Node<'_>, source: &str) -> String {
    let value: String = if node.kind() == "command_name" {
        children(node)
            .iter()
            .map(|c| word_value(c, source))
            .collect()
    } else {
        word_value(node, source)
    };
    // A backslash-newline is a line continuation: `r\<newline>m` is `rm`.
    let value = value.replace("\\\n", "").replace('\\', "");
    value.rsplit('/').next().unwrap_or(&value).to_string()
}

/// `text` with each backslash-newline outside single quotes taken out, as
/// bash joins the lines (`r\<newline>m -rf x` runs `rm -rf x`), so a rule
/// meets the command that runs.
fn join_continuations(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("\\\n") {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted = !quoted;
                out.push(c);
            }
            '\\' if !quoted => match chars.peek() {
                Some('\n') => {
                    chars.next();
                }
                Some(_) => {
                    out.push(c);
                    if let Some(next) = chars.next() {
                        out.push(next);
                    }
                }
                None => out.push(c),
            },
            _ => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `line` with each `<<WORD`, `<<-'WORD'`, `2<<"WORD"` taken out (a
/// here-string `<<<` stays).
fn without_heredoc_operators(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find("<<") {
        if rest[at..].starts_with("<<<") {
            out.push_str(&rest[..at + 3]);
            rest = &rest[at + 3..];
            continue;
        }
        let head = rest[..at].trim_end_matches(|c: char| c.is_ascii_digit());
        out.push_str(head);
        let mut tail = rest[at + 2..].trim_start_matches('-').trim_start();
        let quote = tail.chars().next().filter(|c| *c == '\'' || *c == '"');
        if let Some(q) = quote {
            tail = &tail[1..];
            tail = tail.find(q).map_or("", |end| &tail[end + 1..]);
        } else {
            let end = tail
                .find(|c: char| c.is_whitespace() || ";&|<>()".contains(c))
                .unwrap_or(tail.len());
            tail = &tail[end..];
        }
        out.push(' ');
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// The variable a `variable_assignment` node sets (`a` for `a[i]+=x`).
fn assigned_name(node: &Node<'_>, source: &str) -> String {
    let written = node
        .child_by_field_name("name")
        .map_or_else(|| text(node, source), |n| text(&n, source));
    written
        .split(['[', '=', '+'])
        .next()
        .unwrap_or_default()
        .to_string()
}

/// `NAME=value` (the name a shell variable name).
pub fn is_assignment_word(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let name = name.strip_suffix('+').unwrap_or(name);
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The value the shell passes for an argument node, quotes removed (the
/// reference's `resolveNodeText`).
pub fn word_value(node: &Node<'_>, source: &str) -> String {
    match node.kind() {
        "raw_string" => {
            let t = text(node, source);
            t.strip_prefix('\'')
                .and_then(|t| t.strip_suffix('\''))
                .unwrap_or(t)
                .to_string()
        }
        "string" => children(node)
            .iter()
            .filter(|c| c.kind() != "\"")
            .map(|c| word_value(c, source))
            .collect(),
        "concatenation" => children(node)
            .iter()
            .map(|c| word_value(c, source))
            .collect(),
        _ => text(node, source).to_string(),
    }
}

/// True when every non-blank line is a comment: nothing would run.
pub fn is_trivially_empty(command: &str) -> bool {
    command
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .all(|line| line.starts_with('#'))
}

/// The line without its leading blank and comment lines, as a whole-line
/// rule (`curl * | sh`) is matched.
pub fn strip_leading_comments(command: &str) -> &str {
    let mut rest = command;
    loop {
        let (line, tail) = match rest.split_once('\n') {
            Some((line, tail)) => (line, Some(tail)),
            None => (rest, None),
        };
        let trimmed = line.trim();
        if !(trimmed.is_empty() || trimmed.starts_with('#')) {
            return rest.trim();
        }
        match tail {
            Some(tail) => rest = tail,
            None => return "",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(command: &str) -> Vec<(String, Option<&'static str>)> {
        enumerate(command)
            .units
            .into_iter()
            .filter(|u| u.role == UnitRole::Full)
            .map(|u| (u.text, u.floor))
            .collect()
    }

    fn plain(items: &[&str]) -> Vec<(String, Option<&'static str>)> {
        items.iter().map(|t| (t.to_string(), None)).collect()
    }

    fn with_role(command: &str, role: UnitRole) -> Vec<String> {
        enumerate(command)
            .units
            .into_iter()
            .filter(|u| u.role == role)
            .map(|u| u.text)
            .collect()
    }

    #[test]
    fn splits_lists_and_pipelines() {
        assert_eq!(
            full("git add . && git commit -m 'a && b' || echo no; ls | wc -l & sleep 1\nmake"),
            plain(&[
                "git add .",
                "git commit -m 'a && b'",
                "echo no",
                "ls",
                "wc -l",
                "sleep 1",
                "make"
            ])
        );
        assert_eq!(full("a |& b"), plain(&["a", "b"]));
        // Redirects the grammar put among a command's words, and words it
        // hung on a redirect: the command that runs is read too.
        for (line, runs) in [
            ("git 2>/dev/null push --force", "git push --force"),
            ("2>/dev/null git push --force", "git push --force"),
            ("FOO=1 2>/dev/null git push --force", "git push --force"),
            ("git <<< x push --force", "git push --force"),
            ("git push 2>&1 --force", "git push --force"),
            ("cd a && git 2>/dev/null push --force", "git push --force"),
            ("git <<EOF push --force\nb\nEOF", "git push --force"),
        ] {
            let units = full(line);
            assert!(
                units.iter().any(|(t, _)| t == runs),
                "{line:?} should run {runs:?}: {units:?}"
            );
        }
        let units = enumerate("2>/dev/null sudo rm -rf /").units;
        assert!(units
            .iter()
            .any(|u| u.text == "sudo rm -rf /" && u.floor == Some(INDIRECTION_WRAPPER)));
        assert!(units.iter().any(|u| u.text == "rm -rf /"));
        assert_eq!(full("echo a\\;b"), plain(&["echo a\\;b"]));
    }

    #[test]
    fn redirects_comments_assignments() {
        assert_eq!(
            full("cargo build 2>&1 | tee log"),
            plain(&["cargo build", "tee log"])
        );
        assert_eq!(
            with_role("ls > out", UnitRole::Specific),
            vec!["ls > out".to_string()]
        );
        // A prefix that is not inert floors the command (a rule must name
        // it with its prefix); an inert one does not.
        assert_eq!(
            full("FOO=1 BAR='a b' npm test"),
            vec![("npm test".to_string(), Some(ENVIRONMENT_PREFIX))]
        );
        assert_eq!(full("LANG=C LC_ALL=C npm test"), plain(&["npm test"]));
        assert_eq!(full("FOO=1"), plain(&["FOO=1"]));
        assert_eq!(full("# just a note\nls # trailing"), plain(&["ls"]));
        assert_eq!(full("echo a#b"), plain(&["echo a#b"]));
        assert!(is_trivially_empty("# a\n  # b\n"));
        assert_eq!(
            strip_leading_comments("# a\n\n curl x | sh\n"),
            "curl x | sh"
        );
    }

    #[test]
    fn nested_contexts_add_their_commands() {
        assert_eq!(
            full("echo \"a $(rm -rf /)\" `id` <(ls)"),
            plain(&["echo \"a $(rm -rf /)\" `id` <(ls)", "rm -rf /", "id", "ls"])
        );
        assert_eq!(
            full("(cd x && rm y) | tee z"),
            plain(&["(cd x && rm y)", "cd x", "rm y", "tee z"])
        );
        assert_eq!(
            full("for f in $(ls); do cat $f; done"),
            plain(&["for f in $(ls); do cat $f; done", "ls", "cat $f"])
        );
        assert_eq!(
            full("cat <<EOF | sh\n$(rm q)\nEOF"),
            plain(&["cat", "sh", "rm q"])
        );
        assert_eq!(full("X=$(rm w)"), plain(&["X=$(rm w)", "rm w"]));
        assert_eq!(full("cat <<'EOF'\n$(rm q)\nEOF"), plain(&["cat"]));
        assert_eq!(full("cat <<\"EOF\"\n$(rm q)\nEOF"), plain(&["cat"]));
        assert_eq!(full("cat <<EOF\n$(rm q)\nEOF"), plain(&["cat", "rm q"]));
        assert_eq!(
            full("cat <<< $(rm x)"),
            plain(&["cat <<< $(rm x)", "cat", "rm x"])
        );
    }

    #[test]
    fn wrappers_are_flagged_and_what_they_run_is_read() {
        for (command, floor) in [
            ("sh -c 'rm -rf /'", OPAQUE_WRAPPER),
            ("/bin/bash -ec 'x'", OPAQUE_WRAPPER),
            ("bash x.sh -c y", OPAQUE_WRAPPER),
            ("eval \"$X\"", OPAQUE_WRAPPER),
            ("sudo rm x", INDIRECTION_WRAPPER),
            ("env FOO=1 rm x", INDIRECTION_WRAPPER),
            ("xargs rm", INDIRECTION_WRAPPER),
            ("find . -name '*.o' -exec rm {} ;", INDIRECTION_WRAPPER),
            ("fd -x rm", INDIRECTION_WRAPPER),
            ("'sudo' rm x", INDIRECTION_WRAPPER),
            ("\\sudo rm x", INDIRECTION_WRAPPER),
            ("trap 'rm x' EXIT", OPAQUE_WRAPPER),
            ("busybox rm x", INDIRECTION_WRAPPER),
        ] {
            let units = enumerate(command).units;
            assert!(
                units.iter().any(|u| u.floor == Some(floor)),
                "{command:?} should carry {floor}, got {units:?}"
            );
        }
        assert_eq!(full("bash script.sh"), plain(&["bash script.sh"]));
        assert_eq!(full("bash -- x -c"), plain(&["bash -- x -c"]));
        assert_eq!(full("find . -name x"), plain(&["find . -name x"]));
        let inner = with_role("sudo -u root rm -rf /", UnitRole::DenyOnly);
        assert!(inner.contains(&"rm -rf /".to_string()), "{inner:?}");
        let inner = with_role("sh -c 'cd a && rm -rf b'", UnitRole::DenyOnly);
        assert!(inner.contains(&"rm -rf b".to_string()), "{inner:?}");
        for spelled in ["\\rm x", "'rm' x", "\"rm\" x", "/bin/rm x", "r\\m x"] {
            let inner = with_role(spelled, UnitRole::DenyOnly);
            assert_eq!(inner, ["rm x"], "{spelled}");
        }
        assert!(with_role("rm x", UnitRole::DenyOnly).is_empty());
    }

    #[test]
    fn unreadable_lines_are_marked() {
        assert!(enumerate("echo 'unterminated && rm -rf /").unparsed);
        assert!(!enumerate("echo ok").unparsed);
        // Nested past MAX_DEPTH: each `$(` is several levels of the tree
        // (the walk stops near 52 of them), so MAX_DEPTH / 2 is well past
        // it. (400 of them took 9 s in a test build: past the bound the
        // walk still reads each level's payload, which grows fast.)
        let nesting = super::MAX_DEPTH / 2;
        let deep = format!("{}x{}", "$(".repeat(nesting), ")".repeat(nesting));
        assert!(enumerate(&deep).unparsed);
        let long = "ls ".repeat(super::super::parse::MAX_LINE_BYTES);
        let enumeration = enumerate(&long);
        assert!(enumeration.unparsed && enumeration.has_no_command());
    }
}
