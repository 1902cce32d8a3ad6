//! Last-match-wins evaluation over a stack of compiled rule lists.
//!
//! A stack is the composed config rules followed by the session grants:
//! later lists sit after earlier ones in the reference's single ordered
//! list, so a grant beats any config rule on the surfaces it covers.

use super::compiled::{CompileError, CompiledRules};
use super::rule::{Rule, RuleLayer};

/// The rule that decided one surface, and the value it matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleVerdict {
    pub rule: Rule,
    pub matched_value: String,
}

impl RuleVerdict {
    /// True when only the synthesized universal default matched.
    pub fn is_default(&self) -> bool {
        self.rule.layer == RuleLayer::Default
    }
}

/// Position of a rule in the whole stack: (list, index within the list).
type Position = (usize, usize);

fn last_positions(
    stack: &[&CompiledRules],
    surface: &str,
    values: &[String],
) -> Result<Vec<Option<Position>>, CompileError> {
    let mut best: Vec<Option<Position>> = vec![None; values.len()];
    for (list, rules) in stack.iter().enumerate() {
        if rules.is_empty() {
            continue;
        }
        for (slot, found) in best.iter_mut().zip(rules.last_matches(surface, values)?) {
            if let Some(index) = found {
                *slot = Some((list, index));
            }
        }
    }
    Ok(best)
}

fn fallback(surface: &str, values: &[String]) -> RuleVerdict {
    // Unreachable with a composed config (its universal default matches
    // everything), kept so an empty stack still fails closed to `ask`.
    let value = values.first().cloned().unwrap_or_else(|| "*".into());
    RuleVerdict {
        rule: Rule::new(
            surface,
            &value,
            super::state::PermissionState::Ask,
            super::state::Origin::Builtin,
        )
        .with_layer(RuleLayer::Default),
        matched_value: value,
    }
}

/// Path surfaces: the values are aliases of one path, so rule order decides
/// across all of them (the last rule matching any alias wins), and the
/// reported value is the first alias the winning rule matches.
pub fn evaluate_any_value(
    stack: &[&CompiledRules],
    surface: &str,
    values: &[String],
) -> Result<RuleVerdict, CompileError> {
    let values = non_empty_or_star(values);
    let positions = last_positions(stack, surface, &values)?;
    let Some(winner) = positions.iter().flatten().max().copied() else {
        return Ok(fallback(surface, &values));
    };
    let (list, index) = winner;
    let mut matched_value = values[0].clone();
    for (value, position) in values.iter().zip(&positions) {
        // A value whose own last match is the winner certainly matches it;
        // otherwise ask the winning rule directly.
        if *position == Some(winner) || stack[list].rule_matches(surface, index, value)? {
            matched_value = value.clone();
            break;
        }
    }
    Ok(RuleVerdict {
        rule: stack[list].rule(index).clone(),
        matched_value,
    })
}

/// Other surfaces (MCP target candidates, single values): the first
/// candidate that a non-default rule matches decides; when none does, the
/// first candidate's default applies.
pub fn evaluate_first(
    stack: &[&CompiledRules],
    surface: &str,
    values: &[String],
) -> Result<RuleVerdict, CompileError> {
    let values = non_empty_or_star(values);
    let positions = last_positions(stack, surface, &values)?;
    let verdict = |value: &String, (list, index): Position| RuleVerdict {
        rule: stack[list].rule(index).clone(),
        matched_value: value.clone(),
    };
    for (value, position) in values.iter().zip(&positions) {
        if let Some(position) = position {
            let candidate = verdict(value, *position);
            if !candidate.is_default() {
                return Ok(candidate);
            }
        }
    }
    Ok(match positions[0] {
        Some(position) => verdict(&values[0], position),
        None => fallback(surface, &values),
    })
}

fn non_empty_or_star(values: &[String]) -> std::borrow::Cow<'_, [String]> {
    if values.is_empty() {
        std::borrow::Cow::Owned(vec!["*".to_string()])
    } else {
        std::borrow::Cow::Borrowed(values)
    }
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
        let verdict = evaluate_any_value(
            &[&config],
            "read",
            &strings(&["/w/src/secret.rs", "src/secret.rs"]),
        )
        .unwrap();
        assert_eq!(verdict.rule.action, Deny);
        assert_eq!(verdict.matched_value, "/w/src/secret.rs");

        let verdict =
            evaluate_any_value(&[&config], "read", &strings(&["/w/src/a.rs", "src/a.rs"])).unwrap();
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
        let verdict =
            evaluate_first(&[&config, &grants], "bash", &strings(&["git push origin"])).unwrap();
        assert_eq!(verdict.rule.action, Allow);
        assert_eq!(verdict.rule.layer, RuleLayer::Session);
        let verdict =
            evaluate_first(&[&config, &grants], "read", &strings(&["git push origin"])).unwrap();
        assert!(verdict.is_default());
    }

    #[test]
    fn first_candidate_with_a_real_rule_decides() {
        let config = list(&[
            ("*", "*", Ask, RuleLayer::Default),
            ("mcp", "fs_*", Deny, RuleLayer::Config),
            ("mcp", "fs:read", Allow, RuleLayer::Config),
        ]);
        let verdict = evaluate_first(&[&config], "mcp", &strings(&["fs:read", "fs_read"])).unwrap();
        assert_eq!(
            (verdict.rule.action, verdict.matched_value.as_str()),
            (Allow, "fs:read")
        );
        let verdict = evaluate_first(&[&config], "mcp", &strings(&["x", "y"])).unwrap();
        assert!(verdict.is_default());
        assert_eq!(verdict.matched_value, "x");
    }
}
