//! Property (issue 22): under the shipped `config/permfs.json`, a bash line
//! built from a benign allowed command (`git status`, `ls`, `cat x`,
//! `git log`, ...) and a dangerous construct in any position
//! (substitutions, process substitutions, assignment prefixes and
//! exports, write redirects and write options into guarded paths, globs
//! reaching them, `cd`/`pushd`/`popd` moves) is never `allow`.
//!
//! A construct in a form the test proves inert (single quotes, a quoted
//! heredoc delimiter, a comment; an inert variable in the prefix) must
//! instead be judged exactly as the same form holding a harmless word: it
//! neither opens a hole nor floors a benign line.
//!
//! `every_combination_is_not_allow` walks every (construct, position,
//! command) once and lists all that are allowed; the proptest composes two
//! constructs at random on top.

use crate::world::{corpus, printable, setup};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

const BENIGN: &[&str] = &[
    "git status",
    "git log",
    "git log --oneline -5",
    "git diff",
    "ls",
    "ls -la",
    "cat x",
    "cat README.md",
];

/// Substitutions: code bash runs (or code a variable's value can hold).
const SUBSTITUTIONS: &[&str] = &[
    "$(id)",
    "`id`",
    "$(rm -rf build)",
    "${x:-$(id)}",
    "${x:+`id`}",
    "${x:=$(id)}",
    "${x:?$(id)}",
    "${x#$(id)}",
    "$((x))",
    "$[x]",
    "${!x}",
    "${x@P}",
    "$(( $(id) ))",
    "${a[$(id)]}",
];

/// Where a substitution goes; `{b}` is the benign command, `{s}` the
/// construct.
const SUBSTITUTION_POSITIONS: &[&str] = &[
    "{b} {s}",
    "{b} \"a{s}b\"",
    "{b} a{s}b",
    "{b} <<EOF\n{s}\nEOF",
    "{b} <<-EOF\n\t{s}\n\tEOF",
    "{b} <<EOF\nline one\n  {s} tail\nEOF",
    "{b} <<< {s}",
    "{b} <<< \"{s}\"",
    "{b} < {s}",
    "{b} > {s}",
    "{b} 2>\"{s}\"",
    "{b} ${y:-{s}}",
    "{b} \"${y:+{s}}\"",
    "{s}; {b}",
    "{b} && {s}",
    "{b}; {s}",
    "{b} | {s}",
    "( {b} {s} )",
    "{ {b} {s}; }",
    "LANG={s} {b}",
    "{b} <<EOF; {b}\n{s}\nEOF",
    "if {b}; then {b} {s}; fi",
    "{b} $({b} {s})",
];

const PROCESS_SUBSTITUTIONS: &[&str] = &[
    "<(id)",
    ">(sh)",
    "<(rm -rf build)",
    ">(cat > ~/.claude/settings.json)",
];
const PROCESS_POSITIONS: &[&str] = &[
    "{b} {s}",
    "{b} > {s}",
    "{b} 2> {s}",
    "{b} < {s}",
    "{b} && cat {s}",
];

/// Assignments no rule names and that are not inert.
const ASSIGNMENTS: &[&str] = &[
    "PATH=.",
    "PATH=./bin:$PATH",
    "GIT_PAGER=sh",
    "PAGER='sh -c id'",
    "LD_PRELOAD=./x.so",
    "BASH_ENV=./x.sh",
    "ENV=./x.sh",
    "GIT_CONFIG_COUNT=1",
    "GIT_CONFIG_PARAMETERS=\"'core.pager=sh'\"",
    "GIT_EXTERNAL_DIFF=./x.sh",
    "GIT_DIR=/tmp",
    "CDPATH=/tmp",
    "HOME=/tmp",
    "IFS=/",
    "EDITOR=./x.sh",
    "LESSOPEN='|id %s'",
    "PS4='$(id)'",
    "x=1",
];
const ASSIGNMENT_POSITIONS: &[&str] = &[
    "{s} {b}",
    "LANG=C {s} {b}",
    "{s} LC_ALL=C {b}",
    "export {s}; {b}",
    "declare -x {s}; {b}",
    "env {s} {b}",
];
/// Assignment statements are judged only for variables that matter to
/// what runs next (a plain `x=1; git status` is inert).
const STATEMENT_POSITIONS: &[&str] = &["{s}; {b}", "{s}\n{b}", "{s} && {b}"];

/// Writes into guarded paths (the world's mount, state dir, hook settings,
/// project config), by redirect.
const WRITES: &[&str] = &[
    "> {mnt}/sessions/main/inbox/ask1",
    ">> ~/.claude/settings.json",
    "2> .claude/settings.json",
    "&> {state}/audit.log",
    ">| ~/.codex/config.toml",
    "1<> .codex/hooks.json",
    "> $HOME/.claude/settings.json",
    "> ${HOME}/.codex/hooks.json",
    "> .permfs/config.json",
    "> {tmp}/m*/sessions/main/inbox/ask1",
    "> ~/.c*/settings.json",
    "> .cl?ude/settings.json",
    "> {mnt}/sessions/*/inbox/ask1",
    "> ~/.claude/[s]ettings.json",
];
const WRITE_POSITIONS: &[&str] = &[
    "{b} {s}",
    "{s} {b}",
    "( {b} ) {s}",
    "{ {b}; } {s}",
    "{b} && {b} {s}",
    "{b} | cat {s}",
];
/// Write options, for the commands that have them.
const WRITE_OPTIONS: &[&str] = &[
    "--output={mnt}/sessions/main/inbox/ask1",
    "--output ~/.claude/settings.json",
    "--output=.permfs/config.json",
    "--output=$HOME/.codex/config.toml",
    "--output={tmp}/m?t/sessions/main/inbox/ask1",
];
const OPTION_COMMANDS: &[&str] = &["git log", "git diff", "git log --oneline -5"];

/// Moves of the cwd the line does not pin down (or that leave the cwd).
const MOVES: &[&str] = &[
    "cd ~/.claude &&",
    "cd - &&",
    "pushd /tmp &&",
    "CDPATH=/tmp cd x &&",
    "cd $HOME &&",
    "cd .. &&",
    "popd;",
    "cd;",
    "cd $x &&",
];

/// Inert wrappers: the construct is only text in them.
const INERT_FORMS: &[&str] = &[
    "{b} '{s}'",
    "{b} <<'EOF'\n{s}\nEOF",
    "{b} <<\"EOF\"\n{s}\nEOF",
    "{b} # {s}",
    "{b} <<< '{s}'",
];
const INERT_ASSIGNMENTS: &[&str] = &[
    "LANG=C",
    "LC_ALL=C",
    "LC_MESSAGES=C",
    "TZ=UTC",
    "NO_COLOR=1",
    "TERM=dumb",
    "COLUMNS=80",
    "LINES=24",
];

fn fill(form: &str, benign: &str, construct: &str) -> String {
    form.replace("{s}", construct).replace("{b}", benign)
}

/// Every dangerous line: (construct family, line with placeholders).
fn dangerous_lines() -> Vec<(&'static str, String)> {
    let mut lines = Vec::new();
    for b in BENIGN {
        for s in SUBSTITUTIONS {
            for p in SUBSTITUTION_POSITIONS {
                lines.push(("substitution", fill(p, b, s)));
            }
        }
        for s in PROCESS_SUBSTITUTIONS {
            for p in PROCESS_POSITIONS {
                lines.push(("process_substitution", fill(p, b, s)));
            }
        }
        for s in ASSIGNMENTS {
            for p in ASSIGNMENT_POSITIONS {
                lines.push(("assignment", fill(p, b, s)));
            }
            if *s != "x=1" {
                for p in STATEMENT_POSITIONS {
                    lines.push(("assignment", fill(p, b, s)));
                }
            }
        }
        for s in WRITES {
            for p in WRITE_POSITIONS {
                lines.push(("write", fill(p, b, s)));
            }
        }
        for m in MOVES {
            lines.push(("cd", format!("{m} {b}")));
            lines.push(("cd", format!("{b}; {m} {b}")));
        }
    }
    for b in OPTION_COMMANDS {
        for s in WRITE_OPTIONS {
            lines.push(("write_option", format!("{b} {s}")));
            lines.push(("write_option", format!("{b} -1 {s} -- src")));
        }
    }
    lines
}

#[test]
fn every_combination_is_not_allow() {
    let (world, judges) = setup(corpus().layout);
    let lines = dangerous_lines();
    let mut allowed = Vec::new();
    for (family, line) in &lines {
        let got = judges.judge(false, &world.expand(line));
        if got.state == "allow" {
            allowed.push(format!("[{family}] {}", printable(line)));
        }
    }
    // Inert forms judge like the same form holding a harmless word.
    let mut unequal = Vec::new();
    for b in BENIGN {
        for s in SUBSTITUTIONS.iter().chain(PROCESS_SUBSTITUTIONS) {
            for form in INERT_FORMS {
                let line = fill(form, b, s);
                let control = fill(form, b, "zzz");
                let (got, want) = (
                    judges.judge(false, &world.expand(&line)).state,
                    judges.judge(false, &world.expand(&control)).state,
                );
                if got != want {
                    unequal.push(format!(
                        "{} is {got}, {} is {want}",
                        printable(&line),
                        printable(&control)
                    ));
                }
            }
        }
        for a in INERT_ASSIGNMENTS {
            let line = format!("{a} {b}");
            let (got, want) = (
                judges.judge(false, &line).state,
                judges.judge(false, b).state,
            );
            if got != want {
                unequal.push(format!("{line} is {got}, {b} is {want}"));
            }
        }
    }
    eprintln!(
        "bash never allows: {} dangerous lines, {} allowed; {} inert forms judged apart",
        lines.len(),
        allowed.len(),
        unequal.len()
    );
    assert!(
        allowed.is_empty() && unequal.is_empty(),
        "{} of {} dangerous lines are allowed under config/permfs.json:\n{}\n\n{} inert forms are not judged as their harmless twin:\n{}",
        allowed.len(),
        lines.len(),
        allowed.join("\n"),
        unequal.len(),
        unequal.join("\n")
    );
}

/// Two constructs composed: a dangerous line, then a second dangerous
/// construct wrapped around or appended to it.
fn composed() -> impl Strategy<Value = String> {
    let lines = dangerous_lines();
    let wraps = prop::sample::select(vec![
        "{l}",
        "( {l} )",
        "{ {l}; }",
        "{l} && git status",
        "git status; {l}",
        "git log $({l})",
        "cat <<EOF\n$({l})\nEOF",
        "if git status; then {l}; fi",
        "for f in a; do {l}; done",
        "LANG=C {l}",
        "{l} # trailing comment",
    ]);
    (prop::sample::select(lines), wraps).prop_map(|((_, line), wrap)| wrap.replace("{l}", &line))
}

#[test]
fn composed_dangerous_lines_are_not_allow() {
    let (world, judges) = setup(corpus().layout);
    let mut runner = TestRunner::new(Config {
        cases: 2000,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&composed(), |line| {
        let got = judges.judge(false, &world.expand(&line));
        prop_assert_ne!(got.state, "allow", "{}", printable(&line));
        Ok(())
    });
    if let Err(error) = result {
        panic!("{error}");
    }
}
