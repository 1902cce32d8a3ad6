//! Judging facts against a policy: the reference's gates, with provenance.

pub mod explain;
pub mod judge;

pub use explain::explain;
pub use judge::{judge, Judgment, SurfaceCheck};

use crate::facts::request::FactSet;
use crate::policy::layers::Policy;
use crate::policy::{CompileError, CompiledRules};

/// Judges `facts` at a node with `policy` and its session `grants`: the
/// trusted layers, then the grants, then the built-in guards (final); and
/// when an untrusted project layer exists, the same with every layer
/// composed, keeping the stricter verdict (on a tie the trusted one), so
/// an untrusted layer narrows and never widens.
pub fn judge_with_policy(
    policy: &Policy,
    grants: Option<&CompiledRules>,
    facts: &FactSet,
) -> Result<Judgment, CompileError> {
    let trusted = judge(&stack(&policy.rules, grants, &policy.guard), facts)?;
    let mut judgment = match &policy.narrowing {
        None => trusted,
        Some(narrowing) => {
            let everything = judge(&stack(narrowing, grants, &policy.guard), facts)?;
            if everything.state > trusted.state {
                everything
            } else {
                trusted
            }
        }
    };
    floor_outside(&policy.outside, facts, &mut judgment);
    Ok(judgment)
}

/// The outside-the-sandbox floor (`policy::outside`): a write to a file a
/// person's own tools run later is `ask` at least, whatever allowed it
/// (rule, grant, yolo, the view's default), and `deny` stays `deny`. The
/// guard becomes the deciding check, so every node on the walk and the
/// person see which file kind and guard asked; `unjudgeable` is cleared,
/// because a guard did speak (the view allows what no rule names only
/// when nothing spoke).
fn floor_outside(
    guards: &crate::policy::outside::OutsideGuards,
    facts: &FactSet,
    judgment: &mut Judgment,
) {
    use crate::policy::{Origin, PermissionState, RuleLayer};
    if judgment.state == PermissionState::Deny {
        return;
    }
    let Some(met) = guards.met(facts) else {
        return;
    };
    let intent = facts
        .intents
        .iter()
        .find(|i| i.match_values.contains(&met.value));
    let check = SurfaceCheck {
        surface: intent.map_or_else(|| "path_write".into(), |i| i.surface.clone()),
        family: crate::facts::intent::Family::of(
            intent.map_or("path_write", |i| i.surface.as_str()),
        ),
        state: PermissionState::Ask,
        counted: true,
        matched_pattern: Some(met.pattern.clone()),
        rule_surface: "path_write".into(),
        origin: Origin::Builtin,
        layer: RuleLayer::Config,
        matched_value: met.value.clone(),
        match_values: intent.map_or_else(
            || std::sync::Arc::from(Vec::new()),
            |i| std::sync::Arc::clone(&i.match_values),
        ),
        reason: Some(met.reason.clone()),
        command: None,
        floor: Some(crate::policy::outside::FLOOR_SENTINEL.into()),
        word: intent.and_then(|i| i.word.clone()),
    };
    judgment.checks.push(check);
    judgment.decided_by = Some(judgment.checks.len() - 1);
    judgment.state = PermissionState::Ask;
    judgment.unjudgeable = None;
}

fn stack<'a>(
    rules: &'a CompiledRules,
    grants: Option<&'a CompiledRules>,
    guard: &'a CompiledRules,
) -> Vec<&'a CompiledRules> {
    let mut stack = vec![rules];
    stack.extend(grants);
    stack.push(guard);
    stack
}

/// The stack [`judge_with_policy`] took its verdict from, for explaining
/// it: the composition with untrusted layers when they made it stricter.
pub fn stack_for<'a>(
    policy: &'a Policy,
    grants: Option<&'a CompiledRules>,
    facts: &FactSet,
) -> Result<Vec<&'a CompiledRules>, CompileError> {
    let trusted = stack(&policy.rules, grants, &policy.guard);
    let Some(narrowing) = &policy.narrowing else {
        return Ok(trusted);
    };
    let everything = stack(narrowing, grants, &policy.guard);
    Ok(
        if judge(&everything, facts)?.state > judge(&trusted, facts)?.state {
            everything
        } else {
            trusted
        },
    )
}
