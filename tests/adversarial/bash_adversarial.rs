//! Issue 22's corpus of bash lines an attacker would write
//! (`tests/fixtures/bash_adversarial.json`, written by
//! `scripts/bash-adversarial/make_corpus.py`), judged through the library
//! as a bash tool call under two configurations:
//!
//! - `shipped`: `config/permfs.json`;
//! - `guarded`: `{"permission": {"*": "allow"}}`;
//!
//! both with the built-in guards on (the mount point and the state dir as
//! authority dirs, the agents' hook settings, the project configs).
//!
//! The expected verdicts are a SOUND analysis's (see the script's doc):
//! allow only what is fully understood, a write into a guarded path is
//! `deny`, a non-inert assignment prefix asks. A failure lists every line
//! whose verdict differs, marked `LESS RESTRICTIVE` (a hole) or `stricter`
//! (over-flooring: the benign controls are in the corpus to catch it).

use crate::world::{corpus, decided, printable, rank, setup};
use std::collections::BTreeMap;

#[test]
fn every_adversarial_line_gets_a_sound_verdict() {
    let corpus = corpus();
    let (world, judges) = setup(corpus.layout.clone());
    assert!(
        corpus.entries.len() >= 300,
        "the corpus holds at least 300 lines"
    );
    let mut failures = Vec::new();
    let mut holes: BTreeMap<(String, &str), usize> = BTreeMap::new();
    let mut strict: BTreeMap<(String, &str), usize> = BTreeMap::new();
    for entry in &corpus.entries {
        let line = world.expand(&entry.line);
        for (config, want) in [("shipped", &entry.shipped), ("guarded", &entry.guarded)] {
            let got = judges.judge(config == "guarded", &line);
            if want.contains(&got.state) {
                continue;
            }
            let least = want.iter().map(|w| rank(w)).min().unwrap_or(0);
            let kind = if rank(&got.state) < least {
                *holes.entry((entry.class.clone(), config)).or_default() += 1;
                "LESS RESTRICTIVE"
            } else {
                *strict.entry((entry.class.clone(), config)).or_default() += 1;
                "stricter"
            };
            failures.push(format!(
                "[{}] {config}: want {} got {} ({kind}) :: {}\n    why: {}\n    decided by: {}",
                entry.class,
                want.join("|"),
                got.state,
                printable(&entry.line),
                entry.why,
                decided(&got.judgment),
            ));
        }
    }
    let summary = |counts: &BTreeMap<(String, &str), usize>| {
        counts
            .iter()
            .map(|((class, config), n)| format!("{class}/{config}: {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    eprintln!(
        "bash adversarial corpus: {} lines, {} verdicts wrong",
        corpus.entries.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} verdicts are wrong\n less restrictive (holes): {}\n stricter (over-flooring): {}\n\n{}",
        failures.len(),
        corpus.entries.len() * 2,
        summary(&holes),
        summary(&strict),
        failures.join("\n")
    );
}

#[test]
fn the_corpus_is_well_formed() {
    let corpus = corpus();
    let mut seen = std::collections::HashSet::new();
    for entry in &corpus.entries {
        assert!(seen.insert(&entry.line), "duplicate line {:?}", entry.line);
        for v in entry.shipped.iter().chain(&entry.guarded) {
            assert!(
                ["allow", "ask", "deny"].contains(&v.as_str()),
                "{:?}: verdict {v:?}",
                entry.line
            );
        }
        assert!(!entry.why.is_empty(), "{:?} says why", entry.line);
        // Nothing outside the throwaway world but /dev and reads of /etc:
        // tests/adversarial/bash_ground_truth.rs runs the lines the engine allows.
        let chars: Vec<char> = entry.line.chars().collect();
        for (i, c) in chars.iter().enumerate() {
            let starts_word =
                i == 0 || chars[i - 1].is_whitespace() || "=<>'(".contains(chars[i - 1]);
            if *c != '/' || !starts_word {
                continue;
            }
            let word: String = chars[i..]
                .iter()
                .take_while(|c| !c.is_whitespace() && !"'\")".contains(**c))
                .collect();
            assert!(
                word.starts_with("/dev/")
                    || word.starts_with("/etc/")
                    || word == "/tmp"
                    || word == "/",
                "{:?} names {word:?} outside the world",
                entry.line
            );
        }
    }
}
