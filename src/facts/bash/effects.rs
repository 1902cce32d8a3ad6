//! What known commands do to the files their arguments name, read from a
//! table (`effects.json`, beside this file) by one small interpreter.
//!
//! The bash path gates see every path-shaped word; they cannot tell that
//! `git log --output=X` writes `X`, that `dd of=X` does, or that `sed -i`
//! turns its file operands into writes. Those targets hide inside options
//! and `key=value` operands the word filter skips, and a guard on the
//! authority (an inbox, the config, an agent's settings file) never saw
//! them. The table names them per command, so they become `path_write` and
//! `path_read` facts like a redirect's target.
//!
//! The knowledge grows with every attack found, so it is data: adding a
//! command is adding an entry and its examples (each entry's examples are
//! its test). An option the table marks `floor` makes the command not
//! understood: it runs code the text does not show (`git -c`, `rsync -e`,
//! `tar -x` writing whatever the archive holds), and the line asks.
//!
//! Option parsing is GNU-style and conservative: `--opt=value`, `--opt
//! value`, `-o value`, `-ovalue`, clusters `-abc`; an option the table does
//! not know is taken as a flag, so its value (if it had one) is read as an
//! operand, which can only add a fact, never hide one.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::LazyLock;

/// What a command does to a file its argument names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    Read,
    Write,
}

/// One file target found in a command's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Index of the argument it was read from (0 is the first argument
    /// after the command name).
    pub arg: usize,
    /// The path as written (the option's value, the operand).
    pub value: String,
    pub effect: Effect,
}

/// A known command's effects on files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effects {
    pub targets: Vec<Target>,
    /// Why the command is not understood (an option that runs code or
    /// writes where the text cannot tell): the line floors to `ask`.
    pub floor: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Operands {
    #[serde(default)]
    skip: usize,
    first: Option<Effect>,
    last: Option<Effect>,
    rest: Option<Effect>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Switch {
    when: Vec<String>,
    operands: Operands,
}

/// An entry's example: its test (read only by the tests).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[cfg_attr(not(test), allow(dead_code))]
struct Example {
    line: String,
    #[serde(default)]
    writes: Vec<String>,
    #[serde(default)]
    reads: Vec<String>,
    #[serde(default)]
    floor: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Entry {
    #[serde(default)]
    operands: Operands,
    #[serde(default)]
    options: BTreeMap<String, Effect>,
    #[serde(default)]
    value_options: Vec<String>,
    /// Options whose value is data that may name a file: `@file` (curl).
    #[serde(default)]
    data_options: Vec<String>,
    /// Options that make the operands scripts or patterns no longer: the
    /// `skip` of the operands does not apply when one is given.
    #[serde(default)]
    script_options: Vec<String>,
    #[serde(default)]
    assignments: BTreeMap<String, Effect>,
    #[serde(default)]
    switches: Vec<Switch>,
    /// Short options whose suffix is attached (`sed -i.bak`), and long
    /// ones written `--opt=`.
    #[serde(default)]
    attached_switches: Vec<String>,
    /// Options (or, for a name without `-`, an operand) that make the
    /// command not understood; `*` makes every use not understood.
    #[serde(default)]
    floor: Vec<String>,
    /// An old-style first argument without a dash (`tar xzf`) holding
    /// this letter is not understood.
    bundled_floor: Option<String>,
    #[serde(default)]
    global_value_options: Vec<String>,
    #[serde(default)]
    subcommands: BTreeMap<String, Entry>,
    #[serde(default)]
    #[cfg_attr(not(test), allow(dead_code))]
    examples: Vec<Example>,
}

impl Entry {
    /// Whether the entry names `option` anywhere.
    fn knows(&self, option: &str) -> bool {
        self.options.contains_key(option)
            || [
                &self.value_options,
                &self.data_options,
                &self.script_options,
                &self.floor,
            ]
            .iter()
            .any(|list| list.iter().any(|o| o == option))
            || self
                .switches
                .iter()
                .any(|s| s.when.iter().any(|w| w == option))
    }
}

#[derive(Debug, Deserialize)]
struct Table {
    commands: BTreeMap<String, Entry>,
}

const TABLE_JSON: &str = include_str!("effects.json");

/// The table, parsed once. A table that does not parse (a broken edit; the
/// tests parse it) knows no command, and every line using one of its
/// commands is floored instead of judged without it.
static TABLE: LazyLock<Result<Table, String>> =
    LazyLock::new(|| serde_json::from_str(TABLE_JSON).map_err(|e| e.to_string()));

/// The effects of `name` (a basename) run with `args` (their values, quotes
/// removed), or `None` when the table does not know the command.
pub fn effects(name: &str, args: &[&str]) -> Option<Effects> {
    let table = match &*TABLE {
        Ok(table) => table,
        Err(error) => {
            tracing::error!("the bash effects table does not parse: {error}");
            return Some(Effects {
                targets: Vec::new(),
                floor: Some("the effects table does not parse".into()),
            });
        }
    };
    let entry = table.commands.get(name)?;
    Some(interpret(name, entry, args, 0))
}

fn interpret(name: &str, entry: &Entry, args: &[&str], offset: usize) -> Effects {
    let mut out = Effects::default();
    if entry.floor.iter().any(|f| f == "*") {
        out.floor = Some(format!("{name} is not judged by its arguments"));
        return out;
    }
    if !entry.subcommands.is_empty() {
        return subcommand(name, entry, args, offset);
    }
    let mut operands: Vec<(usize, &str)> = Vec::new();
    let mut present: Vec<&str> = Vec::new();
    let mut past_options = false;
    let mut index = 0;
    let floor = |out: &mut Effects, option: &str| {
        if out.floor.is_none() {
            out.floor = Some(format!("{name} {option} is not understood"));
        }
    };
    while index < args.len() {
        let arg = args[index];
        let at = offset + index;
        index += 1;
        if past_options || arg == "-" || !arg.starts_with('-') {
            if !past_options && operands.is_empty() && index == 1 {
                if let Some(letter) = &entry.bundled_floor {
                    if !arg.starts_with('-') && arg.contains(letter.as_str()) && !arg.contains('/')
                    {
                        floor(&mut out, arg);
                    }
                }
            }
            if !past_options {
                if let Some((key, value)) = arg.split_once('=') {
                    if let Some(effect) = entry.assignments.get(key) {
                        push(&mut out, at, value, *effect);
                        continue;
                    }
                }
                if entry.floor.iter().any(|f| f == arg) {
                    floor(&mut out, arg);
                }
            }
            operands.push((at, arg));
            continue;
        }
        if arg == "--" {
            past_options = true;
            continue;
        }
        // A long option (`--output=x`), or a single-dash one the entry
        // names whole (`find -delete`, `openssl -out`, `gcc -std=c99`).
        let whole = arg.split_once('=').map_or(arg, |(o, _)| o);
        if arg.starts_with("--") || entry.knows(whole) {
            let (option, attached) = match arg.split_once('=') {
                Some((o, v)) => (o.to_string(), Some(v)),
                None => (arg.to_string(), None),
            };
            if entry.floor.contains(&option) {
                floor(&mut out, &option);
            }
            let takes_value = entry.options.contains_key(&option)
                || entry.value_options.contains(&option)
                || entry.data_options.contains(&option)
                || entry.script_options.contains(&option);
            let value = match attached {
                Some(v) => Some((at, v)),
                None if takes_value => {
                    let v = args.get(index).map(|v| (offset + index, *v));
                    index += 1;
                    v
                }
                None => None,
            };
            option_value(&mut out, entry, &option, value);
            present.push(leak(&option, entry));
            continue;
        }
        // A short option or a cluster of them: `-rf`, `-ofile`, `-o file`.
        let letters: Vec<char> = arg[1..].chars().collect();
        let mut at_letter = 0;
        while at_letter < letters.len() {
            let option = format!("-{}", letters[at_letter]);
            at_letter += 1;
            if entry.floor.contains(&option) || entry.floor.iter().any(|f| f == arg) {
                floor(&mut out, &option);
            }
            present.push(leak(&option, entry));
            if entry.attached_switches.contains(&option) {
                // `-i.bak`: the rest of the cluster is the switch's suffix.
                break;
            }
            let takes_value = entry.options.contains_key(&option)
                || entry.value_options.contains(&option)
                || entry.data_options.contains(&option)
                || entry.script_options.contains(&option);
            if takes_value {
                let rest: String = letters[at_letter..].iter().collect();
                let value = if rest.is_empty() {
                    let v = args.get(index).map(|v| (offset + index, *v));
                    index += 1;
                    v
                } else {
                    // The attached value is a suffix of `arg`.
                    Some((at, &arg[arg.len() - rest.len()..]))
                };
                option_value(&mut out, entry, &option, value);
                break;
            }
        }
    }
    let switched = entry
        .switches
        .iter()
        .find(|s| s.when.iter().any(|w| present.contains(&w.as_str())));
    let rules = switched.map_or(&entry.operands, |s| &s.operands);
    let scripted = entry
        .script_options
        .iter()
        .any(|o| present.contains(&o.as_str()));
    let skip = if scripted { 0 } else { rules.skip };
    let kept: Vec<(usize, &str)> = operands.into_iter().skip(skip).collect();
    let count = kept.len();
    for (position, (at, value)) in kept.into_iter().enumerate() {
        let effect = if position == 0 && rules.first.is_some() {
            rules.first
        } else if position + 1 == count && count > 1 && rules.last.is_some() {
            rules.last
        } else {
            rules.rest
        };
        if let Some(effect) = effect {
            push(&mut out, at, value, effect);
        }
    }
    out
}

/// `git`: its global options, then the subcommand's own entry.
fn subcommand(name: &str, entry: &Entry, args: &[&str], offset: usize) -> Effects {
    let mut index = 0;
    while index < args.len() {
        let arg = args[index];
        if !arg.starts_with('-') {
            break;
        }
        let option = arg.split_once('=').map_or(arg, |(o, _)| o);
        if entry.floor.iter().any(|f| f == option) {
            return Effects {
                targets: Vec::new(),
                floor: Some(format!("{name} {option} is not understood")),
            };
        }
        index += 1;
        if !arg.contains('=') && entry.global_value_options.iter().any(|o| o == option) {
            index += 1;
        }
    }
    let Some(sub) = args.get(index) else {
        return Effects::default();
    };
    match entry.subcommands.get(*sub) {
        Some(inner) => interpret(
            &format!("{name} {sub}"),
            inner,
            &args[index + 1..],
            offset + index + 1,
        ),
        None => Effects::default(),
    }
}

/// The option name as the entry spells it (for the switch lookup), so the
/// list of present options can borrow from the table.
fn leak<'e>(option: &str, entry: &'e Entry) -> &'e str {
    entry
        .switches
        .iter()
        .flat_map(|s| s.when.iter())
        .chain(entry.script_options.iter())
        .find(|w| *w == option)
        .map_or("", String::as_str)
}

fn option_value(out: &mut Effects, entry: &Entry, option: &str, value: Option<(usize, &str)>) {
    let Some((at, value)) = value else {
        return;
    };
    if let Some(effect) = entry.options.get(option) {
        push(out, at, value, *effect);
    } else if entry.data_options.iter().any(|o| o == option) {
        // `@file` reads a file; a form field `name=@file` or `name=<file`.
        let file = value.strip_prefix('@').or_else(|| {
            value
                .split_once("=@")
                .or_else(|| value.split_once("=<"))
                .map(|(_, f)| f)
        });
        if let Some(file) = file {
            push(out, at, file, Effect::Read);
        }
    }
}

fn push(out: &mut Effects, arg: usize, value: &str, effect: Effect) {
    if !value.is_empty() {
        out.targets.push(Target {
            arg,
            value: value.to_string(),
            effect,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(line: &str) -> Vec<String> {
        // The examples are written without quotes that matter, but `''`
        // and `'…'` are taken off as the shell would.
        line.split_whitespace()
            .map(|w| w.trim_matches('\'').to_string())
            .collect()
    }

    fn check(entry_name: &str, entry: &Entry, failures: &mut Vec<String>) {
        if entry.examples.is_empty() && entry.subcommands.is_empty() {
            failures.push(format!("{entry_name}: no examples"));
        }
        for example in &entry.examples {
            let words = split(&example.line);
            let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
            let Some(got) = effects(&words[0], &args) else {
                failures.push(format!("{:?}: command not in the table", example.line));
                continue;
            };
            let of = |effect: Effect| -> Vec<String> {
                got.targets
                    .iter()
                    .filter(|t| t.effect == effect)
                    .map(|t| t.value.clone())
                    .collect()
            };
            if example.floor != got.floor.is_some() {
                failures.push(format!(
                    "{:?}: floor {} wanted, got {:?}",
                    example.line, example.floor, got.floor
                ));
            }
            if !example.floor {
                let (writes, reads) = (of(Effect::Write), of(Effect::Read));
                let mut want_writes = example.writes.clone();
                let mut want_reads = example.reads.clone();
                let (mut w, mut r) = (writes.clone(), reads.clone());
                w.sort();
                r.sort();
                want_writes.sort();
                want_reads.sort();
                if w != want_writes || r != want_reads {
                    failures.push(format!(
                        "{:?}: wanted writes {:?} reads {:?}, got writes {writes:?} reads {reads:?}",
                        example.line, example.writes, example.reads
                    ));
                }
            }
        }
        for (name, sub) in &entry.subcommands {
            check(&format!("{entry_name} {name}"), sub, failures);
        }
    }

    #[test]
    fn the_table_parses() {
        if let Err(error) = &*TABLE {
            panic!("effects.json: {error}");
        }
    }

    /// The test per entry: every entry's examples give exactly the writes,
    /// reads and floor they name.
    #[test]
    fn every_entry_has_its_examples() {
        let Ok(table) = &*TABLE else {
            panic!("effects.json does not parse");
        };
        let mut failures = Vec::new();
        for (name, entry) in &table.commands {
            check(name, entry, &mut failures);
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn unknown_commands_and_options() {
        assert_eq!(effects("frobnicate", &["-o", "x"]), None);
        // An option the table does not know is a flag: its value becomes
        // an operand (a fact more, never one less).
        let got = effects("rm", &["--unknown", "x"]).expect("known");
        assert_eq!(got.targets.len(), 1);
        let got = effects("cp", &["--", "-a", "b"]).expect("known");
        assert_eq!(
            got.targets
                .iter()
                .map(|t| (t.value.as_str(), t.effect))
                .collect::<Vec<_>>(),
            [("-a", Effect::Read), ("b", Effect::Write)]
        );
    }
}
