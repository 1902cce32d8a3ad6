//! Grants: what an `allow session`, `allow subagent` or `allow always`
//! records. From an ask and the patterns a person chose (or none: the
//! suggestion), the (surface, pattern) pairs to record and the session
//! rules that carry them, and the recompiling of a session's grant set.
//! Separate from the authority because it derives from an ask's facts and
//! touches no lock, inbox or waiter.

use crate::facts::intent::{directions_of, is_path_surface, Family};
use crate::facts::path_text::home_dir;
use crate::policy::{CompiledRules, Origin, PermissionState, Rule, RuleLayer};
use crate::session::tree::ask::Ask;
use std::sync::Arc;

/// What a grant (or `allow always`) records: the suggestion, or the
/// person's patterns on every surface the suggestion covers.
pub(in crate::session) fn chosen_grants(ask: &Ask, patterns: &[String]) -> Vec<(String, String)> {
    let suggested = bare_grants(ask);
    if patterns.is_empty() {
        return suggested;
    }
    let mut surfaces: Vec<String> = Vec::new();
    for (surface, _) in suggested {
        if !surfaces.contains(&surface) {
            surfaces.push(surface);
        }
    }
    surfaces
        .iter()
        .flat_map(|s| patterns.iter().map(move |p| (s.clone(), p.clone())))
        .collect()
}

/// (surface, pattern) pairs an `allow session` answer records: the
/// asker's own suggestions when it gave some, else one per fact surface
/// that is not already allowed, derived as the reference derives them.
pub(in crate::session) fn suggested_grants(ask: &Ask) -> Vec<(String, String)> {
    grants_for(ask, true)
}

/// What a bare `allow session` (no patterns) records: the asker's own
/// suggestions only when every one of them lies within what permfs
/// derives from the facts (the same or narrower), else the derived
/// patterns. An agent that suggests `*` for one file gets a grant for
/// that file's directory, never `*`: a person who did not type a pattern
/// did not choose one.
pub(in crate::session) fn bare_grants(ask: &Ask) -> Vec<(String, String)> {
    let suggested = suggested_grants(ask);
    let derived = derived_grants(ask);
    let yardstick: Vec<String> = derived.iter().map(|(_, p)| p.clone()).collect();
    let within = suggested.iter().all(|(_, pattern)| {
        matches!(
            crate::session::tree::decision::breadth(pattern, &yardstick),
            crate::session::tree::decision::Breadth::Same
                | crate::session::tree::decision::Breadth::Narrower
        )
    });
    if within {
        suggested
    } else {
        derived
    }
}

/// What permfs itself would suggest from the facts, ignoring the asker's
/// suggestions: the yardstick for "broader than suggested".
pub(in crate::session) fn derived_grants(ask: &Ask) -> Vec<(String, String)> {
    grants_for(ask, false)
}

fn grants_for(ask: &Ask, with_askers_suggestions: bool) -> Vec<(String, String)> {
    let suggested = ask
        .request
        .as_ref()
        .filter(|_| with_askers_suggestions)
        .map(|r| r.suggested_patterns.clone())
        .unwrap_or_default();
    // Patterns suggested for one named surface (a pi child's
    // `sessionApproval`) are recorded on that surface only.
    if let Some(surface) = ask
        .request
        .as_ref()
        .filter(|_| with_askers_suggestions && !suggested.is_empty())
        .and_then(|r| r.suggested_surface.clone())
    {
        return suggested
            .into_iter()
            .map(|p| (surface.clone(), p))
            .collect();
    }
    if suggested.is_empty() {
        if let Some(grant) = ask
            .request
            .as_ref()
            .and_then(|r| r.form.surface_level_grant())
        {
            return vec![grant];
        }
    }
    let mut out = Vec::new();
    for intent in &ask.facts.intents {
        // A bash line's path words: the reference grants the directories of
        // its words outside the tree (its bash external-directory gate) but
        // never a `path` grant per word, which would outrank a config deny
        // (`*.env`) for the whole directory of every word the line names.
        if intent.word.is_some() && Family::of(&intent.surface) == Family::Path {
            continue;
        }
        if !suggested.is_empty() {
            out.extend(
                suggested
                    .iter()
                    .map(|p| (intent.surface.clone(), p.clone())),
            );
            continue;
        }
        let value = intent
            .match_values
            .first()
            .cloned()
            .unwrap_or_else(|| "*".into());
        let pattern = if is_path_surface(&intent.surface) && value != "*" {
            approval_pattern_for_path(&value)
        } else {
            value
        };
        out.push((intent.surface.clone(), pattern));
    }
    // Two facts on one surface (an extension surface asked with a value)
    // would otherwise record the same grant twice.
    let mut seen = std::collections::HashSet::new();
    out.retain(|grant| seen.insert(grant.clone()));
    out
}

/// The reference's `deriveApprovalPattern`: the parent directory's glob.
fn approval_pattern_for_path(path: &str) -> String {
    if path.ends_with('/') {
        return format!("{path}*");
    }
    match path.rsplit_once('/') {
        Some(("", _)) => "/*".into(),
        Some((dir, _)) => format!("{dir}/*"),
        None => "*".into(),
    }
}

/// A grant on a bare family records both directions.
pub(in crate::session) fn grant_rules(surface: &str, pattern: &str) -> Vec<Rule> {
    let surfaces: Vec<&str> = match directions_of(surface) {
        Some(directions) => directions.to_vec(),
        None => vec![surface],
    };
    surfaces
        .into_iter()
        .map(|s| {
            Rule::new(s, pattern, PermissionState::Allow, Origin::Session)
                .with_layer(RuleLayer::Session)
        })
        .collect()
}

pub(in crate::session) fn recompile_grants(node: &mut crate::session::tree::Session) {
    let rules: Vec<Rule> = node
        .grants
        .iter()
        .flat_map(|g| g.rules.iter().cloned())
        .collect();
    match CompiledRules::compile(rules, &home_dir()) {
        Ok(compiled) => {
            node.compiled_grants = Arc::new(compiled);
            crate::session::tree::generation::invalidate();
        }
        Err(error) => {
            tracing::error!(session = %node.id, %error, "grant rules do not compile; keeping the previous set")
        }
    }
}
