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
    let Some(narrowing) = &policy.narrowing else {
        return Ok(trusted);
    };
    let everything = judge(&stack(narrowing, grants, &policy.guard), facts)?;
    Ok(if everything.state > trusted.state {
        everything
    } else {
        trusted
    })
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
