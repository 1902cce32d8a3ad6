//! A dry run's explanation: every rule that matched each surface, which
//! one won, and the layer each came from.

use super::judge::{judge, Judgment};
use crate::facts::bash::{enumerate, strip_leading_comments};
use crate::facts::intent::directions_of;
use crate::facts::request::FactSet;
use crate::policy::{CompileError, CompiledRules};

use serde_json::{json, Value};

/// Judges `facts` and lists, per surface and value, every matching rule
/// (config rules first, then grants), marking the winner.
pub fn explain(
    stack: &[&CompiledRules],
    facts: &FactSet,
) -> Result<(Judgment, Value), CompileError> {
    let judgment = judge(stack, facts)?;
    let mut surfaces = Vec::new();
    for (intent, check) in facts.intents.iter().zip(&judgment.checks) {
        let rule_surfaces: Vec<String> = match directions_of(&intent.surface) {
            Some(directions) => directions.iter().map(|d| d.to_string()).collect(),
            None => vec![intent.surface.clone()],
        };
        let values: Vec<String> = if intent.surface == "bash" {
            let line = intent
                .match_values
                .first()
                .map(String::as_str)
                .unwrap_or("");
            let mut values: Vec<String> = Vec::new();
            for unit in enumerate(line).units {
                if !values.contains(&unit.text) {
                    values.push(unit.text);
                }
            }
            let whole = strip_leading_comments(line).to_string();
            if !values.contains(&whole) {
                values.push(whole);
            }
            values
        } else {
            intent.match_values.to_vec()
        };
        let mut matched = Vec::new();
        for rule_surface in &rule_surfaces {
            for value in &values {
                let mut for_value: Vec<Value> = Vec::new();
                for (list_index, list) in stack.iter().enumerate() {
                    for index in list.all_matches(rule_surface, value)? {
                        let rule = list.rule(index);
                        for_value.push(json!({
                            "surface": rule_surface,
                            "value": value,
                            "pattern": rule.pattern,
                            "action": rule.action,
                            "origin": rule.origin,
                            "layer": rule.layer,
                            "list": if list_index == 0 { "config" } else { "grants" },
                            "wins": false,
                        }));
                    }
                }
                // Last match wins for this value.
                if let Some(Value::Object(last)) = for_value.last_mut() {
                    last.insert("wins".into(), Value::Bool(true));
                }
                matched.extend(for_value);
            }
        }
        surfaces.push(json!({"check": check, "rulesMatched": matched}));
    }
    let explanation = json!({
        "state": judgment.state,
        "decidedBy": judgment.deciding_check().map(|c| json!({
            "surface": c.surface, "ruleSurface": c.rule_surface, "pattern": c.matched_pattern,
            "origin": c.origin, "value": c.matched_value, "command": c.command, "floor": c.floor,
        })),
        "unjudgeable": judgment.unjudgeable,
        "surfaces": surfaces,
    });
    Ok((judgment, explanation))
}
