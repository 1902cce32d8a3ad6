//! Judging a fact set against a rule stack, with full provenance.
//!
//! Each surface of the facts is resolved on its own (path surfaces with
//! rule order across aliases, others first-candidate), then the verdicts
//! combine most-restrictive-wins in family order `path` →
//! `external_directory` → tool → `bash`. Two gate rules of the reference
//! apply to tool calls: the `path` family only counts when an explicit
//! rule matched, and a bare directional family is the stricter of its two
//! directions (a tie goes to `_read`).

use crate::facts::bash::{
    enumerate_shared, is_trivially_empty, strip_leading_comments, UnitRole, ENVIRONMENT_PREFIX,
    UNPARSEABLE_COMMAND, UNPARSED_SUBTREE, UNSEEN_CODE,
};
use crate::facts::intent::{directions_of, is_path_surface, AccessIntent, Family};
use crate::facts::request::FactSet;
use crate::policy::evaluate::{
    evaluate_any_value, evaluate_first, evaluate_first_rule, RuleVerdict,
};
use crate::policy::{CompileError, CompiledRules, Origin, PermissionState, RuleLayer};
use serde::Serialize;
use std::borrow::Cow;
use std::sync::Arc;

/// One surface's verdict and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SurfaceCheck {
    pub surface: String,
    pub family: Family,
    /// The verdict after floors.
    pub state: PermissionState,
    /// False when the gate does not count this check (a `path` surface on
    /// which no explicit rule matched).
    pub counted: bool,
    /// The rule's pattern, or a floor sentinel; `None` when only the
    /// universal default matched.
    pub matched_pattern: Option<String>,
    /// The surface key of the winning rule (`path_read` for a `path` ask).
    pub rule_surface: String,
    pub origin: Origin,
    pub layer: RuleLayer,
    pub matched_value: String,
    /// The fact's alias set, shared with the fact.
    pub match_values: Arc<[String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The bash command unit that decided, for `bash`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The sentinel of a floor that turned `allow` into `ask`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor: Option<String>,
    /// The bash word a path check was read from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub word: Option<String>,
}

/// The verdict on a whole fact set.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Judgment {
    pub state: PermissionState,
    /// Index into `checks` of the check that decided.
    pub decided_by: Option<usize>,
    pub checks: Vec<SurfaceCheck>,
    /// Why the facts could not be judged (they then floor to `ask`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unjudgeable: Option<String>,
}

impl Judgment {
    pub fn deciding_check(&self) -> Option<&SurfaceCheck> {
        self.decided_by.and_then(|i| self.checks.get(i))
    }

    /// The deny reason a person or agent should see, if any.
    pub fn reason(&self) -> Option<&str> {
        self.deciding_check().and_then(|c| c.reason.as_deref())
    }
}

/// Judges facts against `stack` (config rules, then session grants).
pub fn judge(stack: &[&CompiledRules], facts: &FactSet) -> Result<Judgment, CompileError> {
    if let Some(why) = &facts.unusable {
        return Ok(Judgment {
            state: PermissionState::Ask,
            decided_by: None,
            checks: Vec::new(),
            unjudgeable: Some(format!("no usable facts ({why}): floored to ask")),
        });
    }
    if facts.intents.is_empty() {
        return Ok(Judgment {
            state: PermissionState::Ask,
            decided_by: None,
            checks: Vec::new(),
            unjudgeable: Some("no facts: floored to ask".into()),
        });
    }
    let gated = facts.tool.is_some() || facts.intents.len() > 1;
    let mut checks = Vec::with_capacity(facts.intents.len());
    for intent in &facts.intents {
        let mut check = check_intent(stack, intent)?;
        if gated && check.family == Family::Path && check.matched_pattern.is_none() {
            check.counted = false;
        }
        checks.push(check);
    }
    let decided_by = checks
        .iter()
        .enumerate()
        .filter(|(_, c)| c.counted)
        .min_by_key(|(i, c)| (std::cmp::Reverse(c.state), c.family, *i))
        .map(|(i, _)| i);
    // No counted check (every fact a `path` surface no explicit rule
    // matched, say) means no rule spoke for the facts: a default `deny`
    // still denies, and anything else goes to a person — never `allow`.
    let Some(mut decided) = decided_by else {
        let strictest = checks
            .iter()
            .enumerate()
            .min_by_key(|(i, c)| (std::cmp::Reverse(c.state), c.family, *i))
            .map(|(i, _)| i);
        if let Some(i) = strictest.filter(|&i| checks[i].state == PermissionState::Deny) {
            return Ok(Judgment {
                state: PermissionState::Deny,
                decided_by: Some(i),
                checks,
                unjudgeable: None,
            });
        }
        return Ok(Judgment {
            state: PermissionState::Ask,
            decided_by: None,
            checks,
            unjudgeable: Some("no rule decided any of the facts: floored to ask".into()),
        });
    };
    if facts.tool.as_deref() == Some("bash") && checks[decided].state == PermissionState::Allow {
        // When a bash line's path words all allow, the reference's bash path
        // gates step aside and the command gate answers: report the command.
        if let Some(command) = checks
            .iter()
            .rposition(|c| c.counted && c.family == Family::Bash)
        {
            decided = command;
        }
    }
    Ok(Judgment {
        state: checks[decided].state,
        decided_by: Some(decided),
        checks,
        unjudgeable: None,
    })
}

/// The verdict on a bare word no rule promotes: a built-in default
/// `allow`, reported but not counted. One shared rule (most words of a bash
/// line are such words); its surface is never read, the check takes the
/// intent's.
static UNJUDGED_WORD: std::sync::LazyLock<crate::policy::Rule> = std::sync::LazyLock::new(|| {
    crate::policy::Rule::new("*", "*", PermissionState::Allow, Origin::Builtin)
        .with_layer(RuleLayer::Default)
});

fn check_intent(
    stack: &[&CompiledRules],
    intent: &AccessIntent,
) -> Result<SurfaceCheck, CompileError> {
    let surface = intent.surface.as_str();
    if intent.bare_word {
        let word = intent.word.as_deref().unwrap_or_default();
        if !bare_word_promoted(stack, word)? {
            // Not a path as far as this node's rules go: not judged.
            let mut check = from_verdict(
                intent,
                surface,
                RuleVerdict {
                    rule: Cow::Borrowed(&UNJUDGED_WORD),
                    matched_value: Cow::Borrowed(word),
                },
            );
            check.counted = false;
            return Ok(check);
        }
    }
    let mut check = if surface == "bash" {
        check_bash(stack, intent)?
    } else if let Some(directions) = directions_of(surface) {
        // A bare family is both directions; the stricter answers, `_read`
        // on a tie.
        let read = evaluate_any_value(stack, directions[0], &intent.match_values)?;
        let write = evaluate_any_value(stack, directions[1], &intent.match_values)?;
        if write.rule.action > read.rule.action {
            from_verdict(intent, directions[1], write)
        } else {
            from_verdict(intent, directions[0], read)
        }
    } else if is_path_surface(surface) {
        from_verdict(
            intent,
            surface,
            evaluate_any_value(stack, surface, &intent.match_values)?,
        )
    } else {
        from_verdict(
            intent,
            surface,
            evaluate_first(stack, surface, &intent.match_values)?,
        )
    };
    if let Some(floor) = &intent.floor {
        apply_floor(&mut check, floor);
    }
    Ok(check)
}

/// The check of `intent` as `verdict` decided it (its `surface` and
/// `family` are the intent's, whichever direction or rule answered).
fn from_verdict(intent: &AccessIntent, rule_surface: &str, verdict: RuleVerdict) -> SurfaceCheck {
    SurfaceCheck {
        surface: intent.surface.clone(),
        family: Family::of(&intent.surface),
        state: verdict.rule.action,
        counted: true,
        matched_pattern: verdict.rule.reported_pattern().map(str::to_string),
        rule_surface: rule_surface.to_string(),
        origin: verdict.rule.origin,
        layer: verdict.rule.layer,
        matched_value: verdict.matched_value.into_owned(),
        match_values: Arc::clone(&intent.match_values),
        reason: verdict.rule.reason.clone(),
        command: None,
        floor: None,
        word: intent.word.clone(),
    }
}

/// A floor lets no rule `allow` alone: only a session grant (which a
/// person made) or a person may answer.
fn apply_floor(check: &mut SurfaceCheck, floor: &str) {
    if check.state == PermissionState::Allow && check.layer != RuleLayer::Session {
        check.state = PermissionState::Ask;
        check.matched_pattern = Some(floor.to_string());
        check.floor = Some(floor.to_string());
    }
}

/// `bash`: the most restrictive of every command the line runs (see
/// [`crate::facts::bash::enumerate`] for how each unit counts), the whole
/// line where a specific rule names it, and a floor for a line the grammar
/// could not fully read. A line with content but no command asks.
///
/// Each text is judged into a [`BashCandidate`] that borrows its rule and
/// text; only the one reported becomes a [`SurfaceCheck`] (a line judges
/// several texts, and most are compared and dropped).
fn check_bash(
    stack: &[&CompiledRules],
    intent: &AccessIntent,
) -> Result<SurfaceCheck, CompileError> {
    let command = intent.match_values.first().map_or("", String::as_str);
    let evaluate = |text: &str| -> Result<SurfaceCheck, CompileError> {
        Ok(BashCandidate::judge(stack, Cow::Borrowed(text))?.into_check(intent))
    };
    let enumeration = enumerate_shared(command);
    if enumeration.has_no_command() {
        let mut check = evaluate(command)?;
        if is_trivially_empty(command) || check.state == PermissionState::Deny {
            return Ok(check);
        }
        check.state = PermissionState::Ask;
        check.matched_pattern = Some(UNPARSEABLE_COMMAND.to_string());
        check.floor = Some(UNPARSEABLE_COMMAND.to_string());
        return Ok(check);
    }
    let mut best: Option<BashCandidate> = None;
    // The reference's units first, so a tie names what the reference names.
    let full = || {
        enumeration
            .units
            .iter()
            .filter(|u| u.role == UnitRole::Full)
    };
    for unit in full() {
        let mut candidate = BashCandidate::judge(stack, Cow::Borrowed(&unit.text))?;
        if let Some(floor) = unit.floor {
            // A non-inert assignment prefix: only a rule written for the
            // command with its prefix allows it (`GIT_PAGER=cat git log *`).
            let named = match &unit.written {
                Some(written) if floor == ENVIRONMENT_PREFIX => {
                    let as_written = BashCandidate::judge(stack, Cow::Borrowed(written.as_str()))?;
                    (as_written.is_specific() && as_written.state() == PermissionState::Allow)
                        .then_some(as_written)
                }
                _ => None,
            };
            match named {
                Some(as_written) if candidate.state() != PermissionState::Deny => {
                    candidate = as_written;
                }
                _ => candidate.apply_floor(floor),
            }
        }
        candidate.consider(&mut best);
    }
    // A command typed with its home spelled `~`, `$HOME` or `${HOME}` is
    // also matched with the home written out, as home-anchored rules are
    // (newer upstream); only a specific rule counts, so a spelling can make
    // the verdict stricter, never looser than the typed text's.
    let home = stack
        .first()
        .map(|rules| rules.home())
        .filter(|_| home_spelling_allowed(command));
    for unit in full() {
        let Some(spelled) = home.and_then(|h| spell_home(&unit.text, h)) else {
            continue;
        };
        let candidate = BashCandidate::judge(stack, Cow::Owned(spelled))?;
        if candidate.is_specific() {
            candidate.consider(&mut best);
        }
    }
    for unit in enumeration
        .units
        .iter()
        .filter(|u| u.role != UnitRole::Full)
    {
        let candidate = BashCandidate::judge(stack, Cow::Borrowed(&unit.text))?;
        let counts = match unit.role {
            UnitRole::Specific => candidate.is_specific(),
            _ => candidate.state() == PermissionState::Deny,
        };
        if counts {
            candidate.consider(&mut best);
        }
    }
    // The commands spelled with their relative path operands absolute (at
    // the asking session): a rule written with an absolute path meets
    // them; only a specific rule's refusal counts, so this never loosens
    // the line.
    for spelled in intent.match_values.iter().skip(1) {
        let candidate = BashCandidate::judge(stack, Cow::Borrowed(spelled.as_str()))?;
        let absolute_rule = candidate
            .rule
            .reported_pattern()
            .is_some_and(|p| p.contains('/'));
        if absolute_rule && candidate.is_specific() && candidate.state() != PermissionState::Allow {
            candidate.consider(&mut best);
        }
    }
    let line = strip_leading_comments(command);
    if !line.is_empty() && !enumeration.units.iter().any(|u| u.text == line) {
        let candidate = BashCandidate::judge(stack, Cow::Borrowed(line))?;
        if candidate.is_specific() {
            candidate.consider(&mut best);
        }
    }
    if enumeration.unparsed || enumeration.unseen.is_some() {
        // Part of the line was not understood, or it runs code the walk
        // did not judge: no rule may allow it alone.
        let mut candidate = BashCandidate::judge(stack, Cow::Borrowed(command))?;
        candidate.apply_floor(if enumeration.unparsed {
            UNPARSED_SUBTREE
        } else {
            UNSEEN_CODE
        });
        candidate.consider(&mut best);
    }
    match best {
        Some(candidate) => Ok(candidate.into_check(intent)),
        None => evaluate(command),
    }
}

/// One text of a bash line as the `bash` rules judge it, before it is
/// known whether it is the one reported: what [`from_verdict`] and
/// [`apply_floor`] would make of it, without their copies.
struct BashCandidate<'r, 't> {
    rule: Cow<'r, crate::policy::Rule>,
    /// The text judged; it is also the value the rule matched (one value
    /// is judged at a time).
    text: Cow<'t, str>,
    /// The floor sentinel, when a floor turned an `allow` into `ask`.
    floor: Option<&'static str>,
}

impl<'r, 't> BashCandidate<'r, 't> {
    fn judge(stack: &[&'r CompiledRules], text: Cow<'t, str>) -> Result<Self, CompileError> {
        let rule = evaluate_first_rule(stack, "bash", &[&*text])?;
        Ok(Self {
            rule,
            text,
            floor: None,
        })
    }

    /// As [`apply_floor`] on the check this would become.
    fn apply_floor(&mut self, floor: &'static str) {
        if self.rule.action == PermissionState::Allow && self.rule.layer != RuleLayer::Session {
            self.floor = Some(floor);
        }
    }

    /// Takes `best`'s place when stricter (the first of equals stays).
    fn consider(self, best: &mut Option<Self>) {
        if best.as_ref().is_none_or(|b| self.state() > b.state()) {
            *best = Some(self);
        }
    }

    fn state(&self) -> PermissionState {
        match self.floor {
            Some(_) => PermissionState::Ask,
            None => self.rule.action,
        }
    }

    /// A verdict a rule written for this text gave: a config or session
    /// rule other than the catch-all `*`, and no floor. Supplementary views
    /// of a line (the whole line, a statement with its redirects) count
    /// only then, so the catch-all never judges more text than the
    /// reference does.
    fn is_specific(&self) -> bool {
        self.floor.is_none() && self.rule.reported_pattern().is_some_and(|p| p != "*")
    }

    fn into_check(self, intent: &AccessIntent) -> SurfaceCheck {
        let mut check = from_verdict(
            intent,
            "bash",
            RuleVerdict {
                rule: self.rule,
                matched_value: Cow::Borrowed(&self.text),
            },
        );
        check.command = Some(self.text.into_owned());
        if let Some(floor) = self.floor {
            apply_floor(&mut check, floor);
        }
        check
    }
}

/// Home spellings are trusted only while the line leaves `HOME` alone
/// (`HOME=/tmp/evil; ~/bin/tool` runs another file).
fn home_spelling_allowed(command: &str) -> bool {
    (command.contains('~') || command.contains("$HOME") || command.contains("${HOME}"))
        && !command.contains("HOME=")
}

/// The unit with its leading home spelling written out, if it has one.
fn spell_home(text: &str, home: &str) -> Option<String> {
    ["~/", "$HOME/", "${HOME}/"]
        .iter()
        .find_map(|prefix| text.strip_prefix(prefix))
        .map(|rest| format!("{}/{rest}", home.trim_end_matches('/')))
}

/// Whether a bare bash word is named by a specific `path` deny or ask rule
/// of the config (never a grant, never `*`), the reference's promotion test.
fn bare_word_promoted(stack: &[&CompiledRules], word: &str) -> Result<bool, CompileError> {
    for list in stack {
        for surface in ["path_read", "path_write"] {
            let promotes = |index: usize| {
                let rule = list.rule(index);
                rule.layer == RuleLayer::Config
                    && rule.pattern != "*"
                    && rule.action != PermissionState::Allow
            };
            if list.any_match(surface, word, promotes)? {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::intent::Principal;
    use crate::facts::request::{AskForm, Requester};
    use crate::policy::config::parse_permission_map;
    use crate::policy::layers::{compose_rules, LayerSet};
    use serde_json::json;

    fn rules(permission: serde_json::Value) -> CompiledRules {
        let map = parse_permission_map(&permission, "permission").expect("valid");
        let rules = compose_rules(&LayerSet {
            layers: vec![(Origin::Global, &map)],
            ..Default::default()
        });
        CompiledRules::compile(rules, "/home/u").expect("compiles")
    }

    fn bash(config: &CompiledRules, command: &str) -> Judgment {
        let requester = Requester::new("/nonexistent-w", Principal::default());
        let facts = requester.facts(&AskForm::Surface {
            surface: "bash".into(),
            value: command.into(),
        });
        judge(&[config], &facts).expect("judged")
    }

    #[test]
    fn bash_takes_the_most_restrictive_command() {
        let config =
            rules(json!({"bash": {"*": "ask", "git *": "allow", "ls *": "allow", "rm *": "deny"}}));
        let verdict = bash(&config, "git status && rm -rf x; ls");
        assert_eq!(verdict.state, PermissionState::Deny);
        assert_eq!(
            verdict.deciding_check().and_then(|c| c.command.as_deref()),
            Some("rm -rf x")
        );
        assert_eq!(
            bash(&config, "git status | ls -l").state,
            PermissionState::Allow
        );
        // An assignment prefix changes what runs: only an inert one, or a
        // rule naming the command with its prefix, lets `git *` allow it.
        assert_eq!(bash(&config, "FOO=1 git push").state, PermissionState::Ask);
        assert_eq!(
            bash(&config, "LANG=C git push").state,
            PermissionState::Allow
        );
        let named = rules(json!({"bash": {"*": "ask", "FOO=1 git *": "allow", "rm *": "deny"}}));
        assert_eq!(bash(&named, "FOO=1 git push").state, PermissionState::Allow);
        assert_eq!(bash(&named, "FOO=1 rm x").state, PermissionState::Deny);
    }

    #[test]
    fn a_line_the_grammar_chokes_on_asks_quickly() {
        // 40 KiB of `a|a|…` takes tree-sitter-bash tens of seconds: the parse
        // budget gives up and the line floors to ask.
        let config = rules(json!({"bash": {"*": "allow"}}));
        let line = "a|".repeat(20_000);
        let started = std::time::Instant::now();
        let verdict = bash(&config, &line);
        assert_eq!(verdict.state, PermissionState::Ask);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn home_spelled_commands_meet_home_anchored_denies() {
        let config = rules(json!({"bash": {"*": "allow", "~/bin/danger *": "deny"}}));
        for typed in [
            "~/bin/danger --now",
            "$HOME/bin/danger --now",
            "${HOME}/bin/danger --now",
        ] {
            let verdict = bash(&config, typed);
            assert_eq!(verdict.state, PermissionState::Deny, "{typed}");
        }
        // A rebound HOME is not the home the rule names; the assignment
        // statement itself changes what runs, so the line asks.
        assert_eq!(
            bash(&config, "HOME=/tmp/evil; ~/bin/danger --now").state,
            PermissionState::Ask,
            "a rebound HOME is not the home the rule names"
        );
        // Never looser than the typed text: an allow on the spelling does
        // not lift the catch-all's ask.
        let config = rules(json!({"bash": {"*": "ask", "~/bin/tool": "allow"}}));
        assert_eq!(bash(&config, "~/bin/tool").state, PermissionState::Ask);
    }

    #[test]
    fn wrappers_floor_allow_but_not_deny() {
        let config = rules(json!({"bash": {"*": "allow", "sudo rm *": "deny"}}));
        let verdict = bash(&config, "sudo ls");
        assert_eq!(verdict.state, PermissionState::Ask);
        assert_eq!(
            verdict.checks[0].matched_pattern.as_deref(),
            Some("<indirection-bash-wrapper>")
        );
        assert_eq!(bash(&config, "sudo rm -rf /").state, PermissionState::Deny);
        let verdict = bash(&config, "sh -c 'curl x | sh'");
        assert_eq!(
            verdict.checks[0].matched_pattern.as_deref(),
            Some("<opaque-bash-wrapper>")
        );
        let verdict = bash(&config, "echo 'unbalanced");
        assert_eq!(verdict.state, PermissionState::Ask);
        assert_eq!(
            verdict.checks[0].matched_pattern.as_deref(),
            Some("<unparsed-bash-subtree>")
        );
        assert_eq!(
            bash(&config, "# only a comment").state,
            PermissionState::Allow
        );
    }

    #[test]
    fn path_gate_counts_only_explicit_rules() {
        let requester = Requester::new("/nonexistent-w", Principal::default());
        let read = |config: &CompiledRules, path: &str| {
            let facts = requester.facts(&AskForm::ToolCall {
                tool: "read".into(),
                input: json!({ "path": path }),
            });
            judge(&[config], &facts).expect("judged")
        };
        let config = rules(json!({"*": "ask", "read": "allow"}));
        let verdict = read(&config, "src/a.rs");
        assert_eq!(
            verdict.state,
            PermissionState::Allow,
            "the universal * alone does not gate"
        );
        assert!(!verdict.checks[0].counted);

        let config = rules(json!({"read": "allow", "path": {"*.env": "deny"}}));
        let verdict = read(&config, "conf/.env");
        assert_eq!(verdict.state, PermissionState::Deny);
        assert_eq!(
            verdict.deciding_check().map(|c| c.rule_surface.as_str()),
            Some("path_read")
        );

        let config = rules(json!({"read": "allow", "external_directory": {"/etc/*": "allow"}}));
        assert_eq!(read(&config, "/etc/hosts").state, PermissionState::Allow);
        assert_eq!(
            read(&config, "/var/log/x").state,
            PermissionState::Ask,
            "outside cwd asks by default"
        );
    }

    #[test]
    fn bare_family_is_the_stricter_direction() {
        let config = rules(
            json!({"*": "allow", "path_read": {"*": "allow"}, "path_write": {"*.lock": "deny"}}),
        );
        let requester = Requester::new("/nonexistent-w", Principal::default());
        let facts = requester.facts(&AskForm::ToolCall {
            tool: "edit".into(),
            input: json!({"path": "Cargo.lock"}),
        });
        let verdict = judge(&[&config], &facts).expect("judged");
        assert_eq!(verdict.state, PermissionState::Deny);
        assert_eq!(verdict.checks[0].rule_surface, "path_write");
    }

    #[test]
    fn unusable_facts_floor_to_ask() {
        let config = rules(json!({"*": "allow"}));
        let facts = FactSet {
            unusable: Some("matchValues missing".into()),
            ..Default::default()
        };
        let verdict = judge(&[&config], &facts).expect("judged");
        assert_eq!(verdict.state, PermissionState::Ask);
        assert!(verdict.unjudgeable.is_some());
    }

    #[test]
    fn floor_marker_stops_an_allow_rule_but_not_a_grant() {
        let config = rules(json!({"bash": {"*": "allow"}}));
        let requester = Requester::new("/nonexistent-w", Principal::default());
        let mut intent = requester.intent("bash", "make");
        intent.floor = Some("<opaque-bash-wrapper>".into());
        let facts = FactSet {
            tool: None,
            intents: vec![intent],
            unusable: None,
        };
        assert_eq!(
            judge(&[&config], &facts).expect("judged").state,
            PermissionState::Ask
        );
        let grants = CompiledRules::compile(
            vec![
                crate::policy::Rule::new("bash", "make", PermissionState::Allow, Origin::Session)
                    .with_layer(RuleLayer::Session),
            ],
            "/home/u",
        )
        .expect("compiles");
        assert_eq!(
            judge(&[&config, &grants], &facts).expect("judged").state,
            PermissionState::Allow
        );
    }
}
