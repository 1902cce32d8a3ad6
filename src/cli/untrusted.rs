//! Text an agent supplied (its message, the command, paths, suggested
//! patterns), made visible instead of interpreted.
//!
//! A terminal obeys what it is sent: an ANSI escape can move the cursor,
//! recolour or clear what the person reads, and a bidirectional override
//! can make `txt.exe` read as `exe.txt`. So every such character is shown
//! as an escape the person can see (`\x1b`, `<U+202E>`), a backslash as
//! `\\` (so `\x1b` typed by the agent and a real ESC look different), and
//! nothing is cut: long values are wrapped by the caller, never truncated.

/// `text` with control characters, ANSI escapes, bidirectional controls
/// and invisible format characters written out visibly.
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if is_hidden(c) => out.push_str(&format!("<U+{:04X}>", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// The lines of `text` (split at its newlines), each made visible, with
/// the newline itself shown as `\n` at the end of every line but the last:
/// a multi-line message stays readable and no line break is hidden.
pub fn visible_lines(text: &str) -> Vec<String> {
    let parts: Vec<&str> = text.split('\n').collect();
    let last = parts.len().saturating_sub(1);
    parts
        .iter()
        .enumerate()
        .map(|(i, part)| {
            let mut line = visible(part);
            if i < last {
                line.push_str("\\n");
            }
            line
        })
        .collect()
}

/// C1 controls, bidirectional controls, zero-width and other format
/// characters, line and paragraph separators, and the BOM: characters a
/// terminal may act on or that change how the text around them reads.
fn is_hidden(c: char) -> bool {
    let u = c as u32;
    (0x80..=0x9f).contains(&u)
        || (0x200b..=0x200f).contains(&u)
        || (0x2028..=0x202e).contains(&u)
        || (0x2060..=0x206f).contains(&u)
        || u == 0x061c
        || u == 0x00ad
        || u == 0xfeff
        || (0xfff9..=0xfffb).contains(&u)
        || (0xe0000..=0xe007f).contains(&u)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_bidi_controls_are_shown_not_obeyed() {
        assert_eq!(visible("plain text"), "plain text");
        assert_eq!(
            visible("\x1b[2J\x1b]0;title\x07ok"),
            "\\x1b[2J\\x1b]0;title\\x07ok"
        );
        assert_eq!(visible("a\u{202e}txt.exe"), "a<U+202E>txt.exe");
        assert_eq!(visible("zero\u{200b}width"), "zero<U+200B>width");
        assert_eq!(visible("\u{9b}31m"), "<U+009B>31m");
        assert_eq!(visible(r"\x1b"), r"\\x1b", "a typed escape differs");
        assert_eq!(visible("tab\there\r"), "tab\\there\\r");
        assert_eq!(visible_lines("one\ntwo"), vec!["one\\n", "two"]);
        assert!(visible("\u{7f}").contains("\\x7f"));
        assert_eq!(visible("naïve ü 日本"), "naïve ü 日本");
    }
}
