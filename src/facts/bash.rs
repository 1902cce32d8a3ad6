//! Splitting a bash command into the simple commands it runs.
//!
//! This is deliberately not a shell parser. It splits on the list and
//! pipeline operators (`&&`, `||`, `;`, `|`, `|&`, `&`, newlines) outside
//! quotes, strips leading `VAR=x` assignments, and recognises the wrappers
//! that hide the command they run. Anything it does not understand
//! (substitutions, subshells, compound statements, here-documents,
//! unbalanced quotes) is marked as such so the judgment can refuse to let an
//! `allow` rule speak for text it cannot see.

/// The reference's provenance sentinels, reported as the matched pattern
/// when a floor turned an `allow` into `ask`.
pub const OPAQUE_WRAPPER: &str = "<opaque-bash-wrapper>";
pub const INDIRECTION_WRAPPER: &str = "<indirection-bash-wrapper>";
pub const UNPARSEABLE_COMMAND: &str = "<unparseable-bash-command>";
pub const UNPARSED_SUBTREE: &str = "<unparsed-bash-subtree>";

/// Commands that run another command given as their arguments.
const INDIRECTION_COMMANDS: &[&str] = &[
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
    "flock", // the reference's list; the rest hide a command just as well:
    "exec",
    "command",
    "builtin",
];
const SHELLS: &[&str] = &["bash", "sh", "dash", "zsh", "ksh"];
const FIND_EXEC_FLAGS: &[&str] = &["-exec", "-execdir", "-ok", "-okdir"];
const FD_EXEC_FLAGS: &[&str] = &["-x", "--exec", "-X", "--exec-batch"];
const COMPOUND_KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "while", "until", "for", "do", "done", "case", "esac",
    "function", "select", "{", "}", "[[", "((",
];

/// One simple command of a command line, as it will be matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandUnit {
    /// The command text, leading assignments and comment lines removed.
    pub text: String,
    /// Set when this unit hides or may hide what it runs: the sentinel to
    /// report when an `allow` is floored to `ask`.
    pub floor: Option<&'static str>,
}

/// The units of a command line. An empty list for a command with content
/// means it could not be split at all.
pub fn split_command(command: &str) -> Vec<CommandUnit> {
    let Some(segments) = split_segments(command) else {
        return Vec::new();
    };
    segments
        .into_iter()
        .filter_map(|segment| {
            let text = strip_assignments(&segment);
            if text.is_empty() {
                return None;
            }
            let floor = classify(&text);
            Some(CommandUnit { text, floor })
        })
        .collect()
}

/// True when every non-blank line is a comment: nothing would run.
pub fn is_trivially_empty(command: &str) -> bool {
    command
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .all(|line| line.starts_with('#'))
}

/// Splits on unquoted operators. `None` when the quoting is unbalanced.
fn split_segments(command: &str) -> Option<Vec<String>> {
    let chars: Vec<char> = command.chars().collect();
    let mut segments = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match quote {
            Some('\'') => {
                current.push(c);
                if c == '\'' {
                    quote = None;
                }
            }
            Some(_) => {
                current.push(c);
                if c == '\\' {
                    if let Some(&next) = chars.get(i + 1) {
                        current.push(next);
                        i += 1;
                    }
                } else if c == '"' {
                    quote = None;
                }
            }
            None => {
                let next = chars.get(i + 1).copied();
                let previous = i.checked_sub(1).map(|p| chars[p]);
                match c {
                    '\\' => {
                        current.push(c);
                        if let Some(next) = next {
                            current.push(next);
                            i += 1;
                        }
                    }
                    '\'' | '"' => {
                        quote = Some(c);
                        current.push(c);
                    }
                    '#' if previous.is_none_or(char::is_whitespace) => {
                        // A comment runs to the end of the line.
                        while i < chars.len() && chars[i] != '\n' {
                            i += 1;
                        }
                        continue;
                    }
                    ';' | '\n' => segments.push(std::mem::take(&mut current)),
                    '|' => {
                        segments.push(std::mem::take(&mut current));
                        if matches!(next, Some('|') | Some('&')) {
                            i += 1;
                        }
                    }
                    '&' if matches!(previous, Some('>') | Some('<')) || next == Some('>') => {
                        current.push(c)
                    }
                    '&' => {
                        segments.push(std::mem::take(&mut current));
                        if next == Some('&') {
                            i += 1;
                        }
                    }
                    _ => current.push(c),
                }
            }
        }
        i += 1;
    }
    if quote.is_some() {
        return None;
    }
    segments.push(current);
    Some(segments)
}

/// Drops leading `NAME=value` words; a pure assignment stays as it is.
fn strip_assignments(text: &str) -> String {
    let mut rest = text.trim_start();
    loop {
        let word_end = word_end(rest);
        let word = &rest[..word_end];
        if !is_assignment(word) {
            break;
        }
        let after = rest[word_end..].trim_start();
        if after.is_empty() {
            return text.trim().to_string();
        }
        rest = after;
    }
    rest.trim().to_string()
}

/// End of the first shell word, honouring quotes.
fn word_end(text: &str) -> usize {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (index, c) in text.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (_, '\\') if quote != Some('\'') => escaped = true,
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (None, c) if c.is_whitespace() => return index,
            _ => {}
        }
    }
    text.len()
}

fn is_assignment(word: &str) -> bool {
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

/// Words of a unit, with quotes removed (good enough to recognise flags).
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let end = word_end(rest);
        out.push(rest[..end].replace(['\'', '"'], ""));
        rest = rest[end..].trim_start();
    }
    out
}

fn classify(text: &str) -> Option<&'static str> {
    if has_unparsed_construct(text) {
        return Some(UNPARSED_SUBTREE);
    }
    let words = words(text);
    let first = words.first()?;
    let program = first.rsplit('/').next().unwrap_or(first);
    if program == "eval" {
        return Some(OPAQUE_WRAPPER);
    }
    if SHELLS.contains(&program) && runs_inline_script(&words[1..]) {
        return Some(OPAQUE_WRAPPER);
    }
    if INDIRECTION_COMMANDS.contains(&program) {
        return Some(INDIRECTION_WRAPPER);
    }
    let exec_flags = match program {
        "find" => FIND_EXEC_FLAGS,
        "fd" | "fdfind" => FD_EXEC_FLAGS,
        _ => &[],
    };
    if words[1..].iter().any(|w| exec_flags.contains(&w.as_str())) {
        return Some(INDIRECTION_WRAPPER);
    }
    None
}

/// `sh -c`, `bash -ec`, … : a short-flag cluster containing `c` before `--`.
fn runs_inline_script(arguments: &[String]) -> bool {
    for argument in arguments {
        if argument == "--" || !argument.starts_with('-') {
            return false;
        }
        if !argument.starts_with("--") && argument[1..].contains('c') {
            return true;
        }
    }
    false
}

/// Shell syntax this splitter does not look into: command and process
/// substitution, subshells, groups, compound statements, here-documents.
fn has_unparsed_construct(text: &str) -> bool {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if escaped {
            escaped = false;
            continue;
        }
        let next = chars.get(i + 1).copied();
        match (quote, c) {
            (Some('\''), '\'') => quote = None,
            (Some('\''), _) => {}
            (_, '\\') => escaped = true,
            (_, '`') => return true,
            (_, '$') if next == Some('(') => return true,
            (Some('"'), '"') => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '<' | '>') if next == Some('(') => return true,
            (None, '<') if next == Some('<') => return true,
            (None, '(' | ')') => return true,
            _ => {}
        }
    }
    words(text)
        .first()
        .is_some_and(|first| COMPOUND_KEYWORDS.contains(&first.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(command: &str) -> Vec<(String, Option<&'static str>)> {
        split_command(command)
            .into_iter()
            .map(|u| (u.text, u.floor))
            .collect()
    }

    fn plain(items: &[&str]) -> Vec<(String, Option<&'static str>)> {
        items.iter().map(|t| (t.to_string(), None)).collect()
    }

    #[test]
    fn splits_on_list_and_pipeline_operators() {
        assert_eq!(
            texts("git add . && git commit -m 'a && b' || echo no; ls | wc -l & sleep 1\nmake"),
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
        assert_eq!(
            texts("cargo build 2>&1 | tee log"),
            plain(&["cargo build 2>&1", "tee log"])
        );
        assert_eq!(texts("cmd &> out"), plain(&["cmd &> out"]));
        assert_eq!(texts("a |& b"), plain(&["a", "b"]));
        assert_eq!(
            texts("echo \"x; y\" ; echo z"),
            plain(&["echo \"x; y\"", "echo z"])
        );
        assert_eq!(texts("echo a\\;b"), plain(&["echo a\\;b"]));
    }

    #[test]
    fn strips_assignments_and_comments() {
        assert_eq!(texts("FOO=1 BAR='a b' npm test"), plain(&["npm test"]));
        assert_eq!(texts("FOO=1"), plain(&["FOO=1"]));
        assert_eq!(texts("# just a note\nls # trailing"), plain(&["ls"]));
        assert_eq!(texts("echo a#b"), plain(&["echo a#b"]));
        assert!(is_trivially_empty("# a\n  # b\n"));
        assert!(!is_trivially_empty("# a\nls"));
    }

    #[test]
    fn wrappers_are_flagged() {
        for (command, floor) in [
            ("sh -c 'rm -rf /'", OPAQUE_WRAPPER),
            ("/bin/bash -ec 'x'", OPAQUE_WRAPPER),
            ("eval \"$X\"", OPAQUE_WRAPPER),
            ("sudo rm x", INDIRECTION_WRAPPER),
            ("env FOO=1 rm x", INDIRECTION_WRAPPER),
            ("xargs rm", INDIRECTION_WRAPPER),
            ("find . -name '*.o' -exec rm {} ;", INDIRECTION_WRAPPER),
            ("fd -x rm", INDIRECTION_WRAPPER),
            ("echo $(rm -rf /)", UNPARSED_SUBTREE),
            ("echo `id`", UNPARSED_SUBTREE),
            ("diff <(ls a) <(ls b)", UNPARSED_SUBTREE),
            ("(cd x && rm y)", UNPARSED_SUBTREE),
            ("if true", UNPARSED_SUBTREE),
            ("cat <<EOF", UNPARSED_SUBTREE),
        ] {
            let units = split_command(command);
            assert!(
                units.iter().any(|u| u.floor == Some(floor)),
                "{command:?} should carry {floor}, got {units:?}"
            );
        }
        assert_eq!(texts("bash script.sh"), plain(&["bash script.sh"]));
        assert_eq!(texts("bash --norc x"), plain(&["bash --norc x"]));
        assert_eq!(
            texts("echo '$(not a substitution)'"),
            plain(&["echo '$(not a substitution)'"])
        );
        assert_eq!(texts("find . -name x"), plain(&["find . -name x"]));
    }

    #[test]
    fn unbalanced_quotes_cannot_be_split() {
        assert!(split_command("echo 'unterminated && rm -rf /").is_empty());
        assert!(split_command("echo \"x").is_empty());
    }
}
