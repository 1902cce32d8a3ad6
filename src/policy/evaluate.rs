//! Last-match-wins evaluation over a stack of compiled rule lists.
//!
//! A stack is the composed config rules followed by the session grants:
//! later lists sit after earlier ones in the reference's single ordered
//! list, so a grant beats any config rule on the surfaces it covers.

use super::compiled::{CompileError, CompiledRules};
use super::rule::{Rule, RuleLayer};
use std::borrow::Cow;

/// The rule that decided one surface, and the value it matched, both
/// borrowed from the rule list and the values judged where they can be:
/// a verdict is made for every value of every fact and read at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleVerdict<'a> {
    pub rule: Cow<'a, Rule>,
    pub matched_value: Cow<'a, str>,
}

impl RuleVerdict<'_> {
    /// True when only the synthesized universal default matched.
    pub fn is_default(&self) -> bool {
        self.rule.layer == RuleLayer::Default
    }

    fn into_owned(self) -> RuleVerdict<'static> {
        RuleVerdict {
            rule: Cow::Owned(self.rule.into_owned()),
            matched_value: Cow::Owned(self.matched_value.into_owned()),
        }
    }
}

/// Position of a rule in the whole stack: (list, index within the list).
type Position = (usize, usize);

fn last_positions<S: AsRef<str>>(
    stack: &[&CompiledRules],
    surface: &str,
    values: &[S],
) -> Result<Vec<Option<Position>>, CompileError> {
    let mut best: Vec<Option<Position>> = vec![None; values.len()];
    for (list, rules) in stack.iter().enumerate() {
        if rules.is_empty() {
            continue;
        }
        rules.each_last_match(surface, values, |value, index| {
            best[value] = Some((list, index));
        })?;
    }
    Ok(best)
}

fn fallback<S: AsRef<str>>(surface: &str, values: &[S]) -> RuleVerdict<'static> {
    // Unreachable with a composed config (its universal default matches
    // everything), kept so an empty stack still fails closed to `ask`.
    let value = values
        .first()
        .map_or_else(|| "*".to_string(), |v| v.as_ref().to_string());
    RuleVerdict {
        rule: Cow::Owned(
            Rule::new(
                surface,
                &value,
                super::state::PermissionState::Ask,
                super::state::Origin::Builtin,
            )
            .with_layer(RuleLayer::Default),
        ),
        matched_value: Cow::Owned(value),
    }
}

/// The values judged when none were given: `*`.
fn star() -> [String; 1] {
    ["*".to_string()]
}

/// Path surfaces: the values are aliases of one path, so rule order decides
/// across all of them (the last rule matching any alias wins), and the
/// reported value is the first alias the winning rule matches.
pub fn evaluate_any_value<'a>(
    stack: &[&'a CompiledRules],
    surface: &str,
    values: &'a [String],
) -> Result<RuleVerdict<'a>, CompileError> {
    if values.is_empty() {
        return evaluate_any_value(stack, surface, &star()).map(RuleVerdict::into_owned);
    }
    let positions = last_positions(stack, surface, values)?;
    let Some(winner) = positions.iter().flatten().max().copied() else {
        return Ok(fallback(surface, values));
    };
    let (list, index) = winner;
    let mut matched_value = values[0].as_str();
    for (value, position) in values.iter().zip(&positions) {
        // A value whose own last match is the winner certainly matches it;
        // otherwise ask the winning rule directly.
        if *position == Some(winner) || stack[list].rule_matches(surface, index, value)? {
            matched_value = value;
            break;
        }
    }
    Ok(RuleVerdict {
        rule: Cow::Borrowed(stack[list].rule(index)),
        matched_value: Cow::Borrowed(matched_value),
    })
}

/// Other surfaces (MCP target candidates, single values): the first
/// candidate that a non-default rule matches decides; when none does, the
/// first candidate's default applies. The values may be borrowed texts (a
/// bash line's commands are judged without copying each).
pub fn evaluate_first<'a, S: AsRef<str>>(
    stack: &[&'a CompiledRules],
    surface: &str,
    values: &'a [S],
) -> Result<RuleVerdict<'a>, CompileError> {
    if values.is_empty() {
        return evaluate_first(stack, surface, &star()).map(RuleVerdict::into_owned);
    }
    Ok(match first_decision(stack, surface, values)? {
        Some((value, (list, index))) => RuleVerdict {
            rule: Cow::Borrowed(stack[list].rule(index)),
            matched_value: Cow::Borrowed(values[value].as_ref()),
        },
        None => fallback(surface, values),
    })
}

/// [`evaluate_first`]'s rule alone, borrowed from the stack however long
/// the values live (a text judged and dropped at once).
pub fn evaluate_first_rule<'r, S: AsRef<str>>(
    stack: &[&'r CompiledRules],
    surface: &str,
    values: &[S],
) -> Result<Cow<'r, Rule>, CompileError> {
    if values.is_empty() {
        return evaluate_first_rule(stack, surface, &star());
    }
    Ok(match first_decision(stack, surface, values)? {
        Some((_, (list, index))) => Cow::Borrowed(stack[list].rule(index)),
        None => fallback(surface, values).rule,
    })
}

/// What decides under [`evaluate_first`]: the position of the value and of
/// its rule, or `None` when no rule matched the first value (the fallback).
/// `values` must not be empty.
fn first_decision<S: AsRef<str>>(
    stack: &[&CompiledRules],
    surface: &str,
    values: &[S],
) -> Result<Option<(usize, Position)>, CompileError> {
    let positions = last_positions(stack, surface, values)?;
    for (value, position) in positions.iter().enumerate() {
        if let Some((list, index)) = *position {
            if stack[list].rule(index).layer != RuleLayer::Default {
                return Ok(Some((value, (list, index))));
            }
        }
    }
    Ok(positions.first().copied().flatten().map(|p| (0, p)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::state::{Origin, PermissionState, PermissionState::*};

    fn list(rules: &[(&str, &str, PermissionState, RuleLayer)]) -> CompiledRules {
        let rules = rules
            .iter()
            .map(|(s, p, a, l)| Rule::new(s, p, *a, Origin::Global).with_layer(*l))
            .collect();
        CompiledRules::compile(rules, "/home/u").expect("compiles")
    }

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| v.to_string()).collect()
    }

    #[test]
    fn rule_order_decides_across_aliases_not_value_order() {
        let config = list(&[
            ("*", "*", Ask, RuleLayer::Default),
            ("read", "src/*", Allow, RuleLayer::Config),
            ("read", "/w/src/secret*", Deny, RuleLayer::Config),
        ]);
        let values = strings(&["/w/src/secret.rs", "src/secret.rs"]);
        let verdict = evaluate_any_value(&[&config], "read", &values).unwrap();
        assert_eq!(verdict.rule.action, Deny);
        assert_eq!(verdict.matched_value, "/w/src/secret.rs");

        let values = strings(&["/w/src/a.rs", "src/a.rs"]);
        let verdict = evaluate_any_value(&[&config], "read", &values).unwrap();
        assert_eq!(verdict.rule.action, Allow);
        assert_eq!(verdict.matched_value, "src/a.rs");
    }

    #[test]
    fn later_list_beats_earlier_on_its_surface_only() {
        let config = list(&[
            ("*", "*", Ask, RuleLayer::Default),
            ("bash", "git push *", Deny, RuleLayer::Config),
        ]);
        let grants = list(&[("bash", "git push *", Allow, RuleLayer::Session)]);
        let values = strings(&["git push origin"]);
        let verdict = evaluate_first(&[&config, &grants], "bash", &values).unwrap();
        assert_eq!(verdict.rule.action, Allow);
        assert_eq!(verdict.rule.layer, RuleLayer::Session);
        let verdict = evaluate_first(&[&config, &grants], "read", &values).unwrap();
        assert!(verdict.is_default());
    }

    #[test]
    fn first_candidate_with_a_real_rule_decides() {
        let config = list(&[
            ("*", "*", Ask, RuleLayer::Default),
            ("mcp", "fs_*", Deny, RuleLayer::Config),
            ("mcp", "fs:read", Allow, RuleLayer::Config),
        ]);
        let values = strings(&["fs:read", "fs_read"]);
        let verdict = evaluate_first(&[&config], "mcp", &values).unwrap();
        assert_eq!(
            (verdict.rule.action, &*verdict.matched_value),
            (Allow, "fs:read")
        );
        let values = strings(&["x", "y"]);
        let verdict = evaluate_first(&[&config], "mcp", &values).unwrap();
        assert!(verdict.is_default());
        assert_eq!(verdict.matched_value, "x");
    }
}
