//! Is this git config text inert? Whether any key in it names a program
//! git would run or pulls in another file, so that the view can let
//! `git config user.email …` (which renames `.git/config.lock` over
//! `.git/config`) place its file without asking, and ask for
//! `git config core.fsmonitor "…"`.
//!
//! The parser follows git's `config.c` closely enough to find every key:
//! `[section]`, `[section "subsection"]` and the old `[section.sub]`
//! headers, a key on the header's own line, `key` alone (a boolean),
//! `key = value` with quotes, escapes, comments (`#`, `;`) and
//! continuation lines (`\` at the end). Section and key names are
//! case-insensitive, subsections are not. Anything it cannot read is not
//! inert (fail closed): git refuses such a file anyway.
//!
//! What counts as a program or a file pulled in is a list of known keys
//! ([`why_not_inert`]), a list of sections known to hold only data, and a
//! conservative rule for the rest: a section not on the list is not inert,
//! and in a known section a key whose name says it runs something
//! (`…cmd`, `…command`, `…program`, `…helper`, `…hook`, `…editor`,
//! `…pager`, `…tool`, `…path` outside the harmless ones) is not either.

/// One `section[.subsection].key = value` of a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// Lower-cased.
    pub section: String,
    /// As written (case-sensitive), for `[section "sub"]`; the old
    /// `[section.sub]` form is lower-cased, as git does.
    pub subsection: Option<String>,
    /// Lower-cased.
    pub key: String,
    /// `None` for a bare key (boolean true).
    pub value: Option<String>,
}

impl Setting {
    /// `section.subsection.key` as git prints it.
    pub fn name(&self) -> String {
        match &self.subsection {
            Some(sub) => format!("{}.{}.{}", self.section, sub, self.key),
            None => format!("{}.{}", self.section, self.key),
        }
    }
}

/// The largest file judged (a bigger one is not inert: a repository's
/// config is a few hundred bytes).
pub const MAX_BYTES: usize = 1 << 20;

/// Parses git config text into its settings.
pub fn parse(text: &str) -> Result<Vec<Setting>, String> {
    let mut out = Vec::new();
    let mut section: Option<(String, Option<String>)> = None;
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut line = 1;
    // Skips blanks (not newlines).
    let blank = |c: char| c == ' ' || c == '\t' || c == '\r' || c == '\x0b' || c == '\x0c';
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
            continue;
        }
        if blank(c) {
            i += 1;
            continue;
        }
        // A UTF-8 byte order mark at the very start.
        if c == '\u{feff}' && i == 0 {
            i += 1;
            continue;
        }
        if c == '#' || c == ';' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '[' {
            i += 1;
            let (header, next) =
                parse_header(&chars, i).map_err(|e| format!("line {line}: {e}"))?;
            section = Some(header);
            i = next;
            continue;
        }
        if !c.is_ascii_alphabetic() {
            return Err(format!("line {line}: unexpected {c:?}"));
        }
        let Some((name, sub)) = &section else {
            return Err(format!("line {line}: a key before any section"));
        };
        let start = i;
        while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '-') {
            i += 1;
        }
        let key: String = chars[start..i]
            .iter()
            .collect::<String>()
            .to_ascii_lowercase();
        while i < chars.len() && blank(chars[i]) {
            i += 1;
        }
        let value = if i < chars.len() && chars[i] == '=' {
            i += 1;
            let (value, next, lines) =
                parse_value(&chars, i).map_err(|e| format!("line {line}: {e}"))?;
            line += lines;
            i = next;
            Some(value)
        } else if i >= chars.len() || chars[i] == '\n' || chars[i] == '#' || chars[i] == ';' {
            None
        } else {
            return Err(format!(
                "line {line}: {key}: expected '=' or the end of the line"
            ));
        };
        out.push(Setting {
            section: name.clone(),
            subsection: sub.clone(),
            key,
            value,
        });
    }
    Ok(out)
}

/// `[name]`, `[name "sub"]`, `[name.sub]`, from just after the `[`.
fn parse_header(chars: &[char], mut i: usize) -> Result<((String, Option<String>), usize), String> {
    let start = i;
    while i < chars.len()
        && (chars[i].is_ascii_alphanumeric() || chars[i] == '-' || chars[i] == '.')
    {
        i += 1;
    }
    let raw: String = chars[start..i].iter().collect();
    if raw.is_empty() {
        return Err("an empty section name".into());
    }
    let (name, mut sub) = match raw.split_once('.') {
        Some((name, sub)) => (name.to_ascii_lowercase(), Some(sub.to_ascii_lowercase())),
        None => (raw.to_ascii_lowercase(), None),
    };
    if i < chars.len() && (chars[i] == ' ' || chars[i] == '\t') {
        while i < chars.len() && (chars[i] == ' ' || chars[i] == '\t') {
            i += 1;
        }
        if sub.is_some() || i >= chars.len() || chars[i] != '"' {
            return Err("a subsection must be quoted".into());
        }
        i += 1;
        let mut text = String::new();
        loop {
            match chars.get(i) {
                None | Some('\n') => return Err("an unterminated subsection".into()),
                Some('"') => {
                    i += 1;
                    break;
                }
                Some('\\') => {
                    match chars.get(i + 1) {
                        None | Some('\n') => return Err("an unterminated subsection".into()),
                        Some(c) => text.push(*c),
                    }
                    i += 2;
                }
                Some(c) => {
                    text.push(*c);
                    i += 1;
                }
            }
        }
        sub = Some(text);
    }
    if chars.get(i) != Some(&']') {
        return Err("a section header without ']'".into());
    }
    Ok(((name, sub), i + 1))
}

/// A value from just after `=`: returns it, where the line ends (at its
/// newline) and how many continuation lines it took.
fn parse_value(chars: &[char], mut i: usize) -> Result<(String, usize, usize), String> {
    let mut value = String::new();
    let mut quoted = false;
    let mut lines = 0;
    // Blanks are kept only between words (git trims the ends).
    let mut pending_blank = String::new();
    let mut started = false;
    loop {
        let Some(&c) = chars.get(i) else {
            if quoted {
                return Err("an unterminated quote".into());
            }
            break;
        };
        if c == '\n' {
            if quoted {
                return Err("an unterminated quote".into());
            }
            break;
        }
        if !quoted && (c == '#' || c == ';') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            break;
        }
        if !quoted && (c == ' ' || c == '\t' || c == '\r') {
            if started {
                pending_blank.push(c);
            }
            i += 1;
            continue;
        }
        value.push_str(&pending_blank);
        pending_blank.clear();
        match c {
            '"' => {
                quoted = !quoted;
                started = true;
                i += 1;
            }
            '\\' => {
                match chars.get(i + 1) {
                    Some('\n') => {
                        lines += 1;
                    }
                    Some('\r') if chars.get(i + 2) == Some(&'\n') => {
                        lines += 1;
                        i += 1;
                    }
                    Some('n') => value.push('\n'),
                    Some('t') => value.push('\t'),
                    Some('b') => {
                        value.pop();
                    }
                    Some('\\') => value.push('\\'),
                    Some('"') => value.push('"'),
                    _ => return Err("a bad escape in a value".into()),
                }
                started = true;
                i += 2;
            }
            c => {
                value.push(c);
                started = true;
                i += 1;
            }
        }
    }
    Ok((value, i, lines))
}

/// Sections whose keys are data, as far as git's own configuration goes
/// (a key in them that runs something is listed in [`why_not_inert`] or
/// caught by its name).
const DATA_SECTIONS: &[&str] = &[
    "add",
    "advice",
    "am",
    "apply",
    "blame",
    "branch",
    "bundle",
    "checkout",
    "clean",
    "clone",
    "color",
    "column",
    "commit",
    "commitgraph",
    "core",
    "credential",
    "diff",
    "extensions",
    "fastimport",
    "feature",
    "fetch",
    "format",
    "fsck",
    "gc",
    "gitcvs",
    "gpg",
    "grep",
    "gui",
    "help",
    "http",
    "i18n",
    "imap",
    "index",
    "init",
    "interactive",
    "log",
    "lsrefs",
    "mailinfo",
    "mailmap",
    "maintenance",
    "merge",
    "notes",
    "pack",
    "protocol",
    "pull",
    "push",
    "rebase",
    "receive",
    "remote",
    "repack",
    "rerere",
    "reset",
    "safe",
    "showbranch",
    "sparse",
    "splitindex",
    "ssh",
    "stash",
    "status",
    "submodule",
    "tag",
    "tar",
    "trace2",
    "transfer",
    "uploadarchive",
    "uploadpack",
    "url",
    "user",
    "versionsort",
    "worktree",
    "alias",
    "filter",
    "lfs",
    "pager",
];

/// Why a setting is not inert, or `None` when it names no program and
/// pulls in no file.
pub fn why_not_inert(s: &Setting) -> Option<&'static str> {
    let section = s.section.as_str();
    let key = s.key.as_str();
    let sub = s.subsection.is_some();
    let value = s.value.as_deref().unwrap_or("").trim();
    let runs = Some("names a program git runs");
    let pulls = Some("pulls in another file");
    match (section, sub, key) {
        ("include", _, _) | ("includeif", _, _) => return pulls,
        (
            "core",
            _,
            "fsmonitor"
            | "hookspath"
            | "sshcommand"
            | "editor"
            | "pager"
            | "askpass"
            | "gitproxy"
            | "alternaterefscommand"
            | "worktree",
        ) => return runs,
        ("sequence", _, "editor") => return runs,
        ("alias", _, _) => {
            // `!…` runs a shell; options such as `-c` set any key for the
            // command the alias runs.
            let shell = value.starts_with('!');
            let options = value.split_whitespace().any(|w| {
                w == "-c"
                    || w.starts_with("--config-env")
                    || w.starts_with("--exec-path")
                    || w == "-C"
                    || w.starts_with("--git-dir")
                    || w.starts_with("--work-tree")
            });
            return (shell || options).then_some("an alias that runs a shell or sets options");
        }
        // Drivers: a filter's clean/smudge/process, a diff driver's
        // textconv/command, a merge driver, and diff.external.
        ("filter", _, _) => return runs,
        ("diff", true, "textconv" | "command") | ("diff", false, "external") => return runs,
        ("merge", true, "driver") => return runs,
        ("difftool" | "mergetool" | "browser" | "man" | "web" | "instaweb" | "sendemail", _, _) => {
            return runs
        }
        ("credential", _, "helper") => return runs,
        ("gpg", _, "program" | "defaultkeycommand") => return runs,
        ("remote", true, "uploadpack" | "receivepack" | "vcs") => return runs,
        ("uploadpack", _, "packobjectshook") => return runs,
        ("submodule", true, "update") if value.starts_with('!') => return runs,
        ("protocol", _, "allow") => return Some("allows a transport that can run programs"),
        ("url", true, "insteadof" | "pushinsteadof") => {
            return Some("rewrites where git connects, possibly to a transport that runs programs")
        }
        ("trailer", _, "command" | "cmd") => return runs,
        // `pager.<command>` is a boolean or a pager to run.
        ("pager", _, _) => {
            let boolean = matches!(
                value.to_ascii_lowercase().as_str(),
                "" | "true" | "false" | "yes" | "no" | "on" | "off" | "1" | "0"
            );
            return (!boolean).then_some("names a pager git runs");
        }
        ("lfs", _, _) => return Some("configures git-lfs, which git runs as a filter"),
        _ => {}
    }
    if !DATA_SECTIONS.contains(&section) {
        return Some("a section permfs does not know to be data");
    }
    let suspicious = [
        "cmd", "command", "program", "helper", "hook", "editor", "pager", "tool",
    ]
    .iter()
    .any(|word| key.ends_with(word));
    suspicious.then_some("a key whose name says it runs something")
}

/// The settings of `text` that are not inert, with why; `Ok(())` when
/// every key is data. Text that cannot be read is not inert.
pub fn judge(text: &[u8]) -> Result<(), Vec<String>> {
    if text.len() > MAX_BYTES {
        return Err(vec![format!("larger than {MAX_BYTES} bytes")]);
    }
    let text = std::str::from_utf8(text).map_err(|_| vec!["not UTF-8 text".to_string()])?;
    let settings = parse(text).map_err(|e| vec![format!("does not parse: {e}")])?;
    let found: Vec<String> = settings
        .iter()
        .filter_map(|s| why_not_inert(s).map(|why| format!("{}: {why}", s.name())))
        .collect();
    if found.is_empty() {
        Ok(())
    } else {
        Err(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `git init`, `git clone` and `git config user.*` write.
    const FRESH: &str = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n[remote \"origin\"]\n\turl = https://example.com/x.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n[user]\n\temail = x\n\tname = \"A Person\" # me\n[extensions]\n\tobjectformat = sha256\n[http \"https://example.com\"]\n\tproxy = http://proxy:3128\n[pull]\n\trebase\n";

    #[test]
    fn what_git_writes_for_itself_is_inert() {
        assert_eq!(judge(FRESH.as_bytes()), Ok(()));
        assert_eq!(judge(b""), Ok(()));
        let settings = parse(FRESH).expect("parses");
        assert!(settings.iter().any(|s| s.name() == "remote.origin.url"
            && s.value.as_deref() == Some("https://example.com/x.git")));
        assert!(settings
            .iter()
            .any(|s| s.name() == "user.name" && s.value.as_deref() == Some("A Person")));
        assert!(settings
            .iter()
            .any(|s| s.name() == "pull.rebase" && s.value.is_none()));
    }

    #[test]
    fn every_key_that_runs_a_program_or_pulls_a_file_is_found() {
        for text in [
            "[core]\n\tfsmonitor = touch MARKER\n",
            "[core]\n\tfsMonitor = true\n",
            "[CORE]\n\thooksPath = /tmp/h\n",
            "[core]\n\tsshCommand = ssh -oProxyCommand=x\n",
            "[core]\n\teditor = vim\n",
            "[core]\n\tpager = less\n",
            "[core]\n\taskPass = /tmp/x\n",
            "[core]\n\tgitProxy = /tmp/x\n",
            "[core]\n\tworktree = /home/u\n",
            "[sequence]\n\teditor = x\n",
            "[alias]\n\tst = !touch MARKER\n",
            "[alias]\n\tst = \"!sh -c x\"\n",
            "[alias]\n\tst = -c core.pager=x status\n",
            "[filter \"lfs\"]\n\tclean = x\n",
            "[diff \"bin\"]\n\ttextconv = x\n",
            "[diff \"bin\"]\n\tcommand = x\n",
            "[diff]\n\texternal = x\n",
            "[merge \"ours\"]\n\tdriver = x\n",
            "[credential]\n\thelper = store\n",
            "[credential \"https://x\"]\n\thelper = x\n",
            "[gpg]\n\tprogram = x\n",
            "[gpg \"ssh\"]\n\tprogram = x\n",
            "[include]\n\tpath = ../x\n",
            "[includeIf \"gitdir:/w/\"]\n\tpath = x\n",
            "[remote \"o\"]\n\tuploadpack = x\n",
            "[remote \"o\"]\n\tvcs = x\n",
            "[submodule \"s\"]\n\tupdate = !x\n",
            "[protocol \"ext\"]\n\tallow = always\n",
            "[url \"ext::sh -c x\"]\n\tinsteadOf = https://\n",
            "[pager]\n\tlog = touch MARKER\n",
            "[mergetool \"x\"]\n\tcmd = x\n",
            "[trailer \"x\"]\n\tcommand = x\n",
            "[somethingnew]\n\tkey = x\n",
            "[user]\n\tfancyHelper = x\n",
            // The key on the header's line, and the old header form.
            "[core] fsmonitor = x\n",
            "[alias.x]\n\tfoo = bar\n[core.x]\n\tfsmonitor = y\n",
            // A continuation line does not hide the next key.
            "[user]\n\tname = a \\\n b\n\t[core]\n\tfsmonitor = x\n",
        ] {
            assert!(judge(text.as_bytes()).is_err(), "inert: {text:?}");
        }
    }

    #[test]
    fn harmless_keys_next_to_programs_are_still_fine_alone() {
        for text in [
            "[alias]\n\tco = checkout\n",
            "[pager]\n\tlog = false\n",
            "[diff]\n\trenames = true\n",
            "[merge]\n\tff = only\n",
            "[submodule \"s\"]\n\tupdate = rebase\n\turl = ../s\n",
            "[commit]\n\tgpgsign = true\n",
            "[gpg]\n\tformat = ssh\n",
            "; comment\n# comment\n[core]\n\tautocrlf = input ; trailing\n",
        ] {
            assert_eq!(judge(text.as_bytes()), Ok(()), "{text:?}");
        }
    }

    #[test]
    fn what_cannot_be_read_is_not_inert() {
        for text in [
            &b"[core\n"[..],
            b"key = before a section\n",
            b"[core]\n\tx = \"unterminated\n",
            b"[core]\n\tx = bad \\q escape\n",
            b"[core]\n\t=novalue\n",
            b"\xff\xfe",
            b"[a \"b\n",
        ] {
            assert!(judge(text).is_err(), "{text:?}");
        }
        assert!(judge(&vec![b'#'; MAX_BYTES + 1]).is_err());
    }

    /// The real git's reading agrees with the parser on a tricky file,
    /// when a git is installed.
    #[test]
    fn the_parser_reads_what_git_reads() {
        let text = "[core]\n\tbare = false\n[remote \"Or igin\"]\n\turl = \"a b\" c # x\n[user]\n\tname = a \\\n  b\n\temail\n[x.Y]\n\tk = \"q\\\"t\\\\\"\n";
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("config");
        std::fs::write(&file, text).expect("written");
        let Ok(out) = std::process::Command::new("git")
            .args(["config", "--file"])
            .arg(&file)
            .args(["--list", "-z"])
            .output()
        else {
            return;
        };
        if !out.status.success() {
            return;
        }
        let git: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .split('\0')
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        let ours: Vec<String> = parse(text)
            .expect("parses")
            .iter()
            .map(|s| match &s.value {
                Some(v) => format!("{}\n{v}", s.name()),
                None => s.name(),
            })
            .collect();
        assert_eq!(ours, git);
    }
}
