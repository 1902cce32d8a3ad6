//! How resolution time grows with the number of rules.
//!
//! One surface (`bash`) carries 10, 100, 1,000 or 10,000 rules in a
//! realistic mix: literal commands (`git sub17`), prefix patterns
//! (`npm run42 *`), path prefixes (`/srv/app7/*`) and suffix patterns
//! (`*.cfg3`), behind a surface-wide `*`. The policy is composed and
//! compiled once, outside the timed loop, and its per-surface index is warm;
//! each timed iteration is one `judge` of one request whose facts are fixed
//! beforehand. Queries hit each kind of rule, and one misses them all.
//!
//! A second group judges tool calls against a typical 30-rule config.
//!
//! After criterion, a short measurement of its own prints the median time
//! per judgment for each size and the 10,000-rule / 10-rule ratio (goal:
//! under 3x). Run with `scripts/bench-rules.sh` or
//! `cargo bench --bench rule_scaling`.

use criterion::{black_box, BenchmarkId, Criterion};
use permfs::engine::judge;
use permfs::facts::intent::Principal;
use permfs::facts::request::{AskForm, FactSet, Requester};
use permfs::policy::config::parse_permission_map;
use permfs::policy::layers::{compose_rules, LayerSet};
use permfs::policy::{CompiledRules, Origin};
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};

const SIZES: [usize; 4] = [10, 100, 1_000, 10_000];
const TOOLS: [&str; 8] = [
    "git",
    "cargo",
    "npm",
    "docker",
    "kubectl",
    "make",
    "terraform",
    "go",
];
const STATES: [&str; 3] = ["allow", "ask", "deny"];
const HOME: &str = "/home/bench";

/// Rule `i` of the mix: four kinds in turn.
fn pattern(i: usize) -> String {
    let tool = TOOLS[(i / 4) % TOOLS.len()];
    match i % 4 {
        0 => format!("{tool} sub{i}"),
        1 => format!("{tool} run{i} *"),
        2 => format!("/srv/app{i}/*"),
        _ => format!("*.cfg{i}"),
    }
}

/// The index of a rule of `kind` near the middle of an `n`-rule list.
fn pick(kind: usize, n: usize) -> usize {
    let middle = n / 2;
    middle - middle % 4 + kind
}

/// `n` rules on `bash` (plus the surface's own `*`), compiled.
fn compiled(n: usize) -> CompiledRules {
    let mut bash = Map::new();
    bash.insert("*".into(), json!("ask"));
    for i in 0..n {
        bash.insert(pattern(i), json!(STATES[i % STATES.len()]));
    }
    compile_permission(&json!({ "*": "ask", "bash": bash }))
}

fn compile_permission(permission: &Value) -> CompiledRules {
    let map = parse_permission_map(permission, "permission").expect("a valid permission map");
    let rules = compose_rules(&LayerSet {
        layers: vec![(Origin::Global, &map)],
        ..Default::default()
    });
    CompiledRules::compile(rules, HOME).expect("the rules compile")
}

fn requester() -> Requester {
    Requester::new(
        "/srv/bench-nonexistent/project",
        Principal {
            session_id: "bench".into(),
            agent_name: None,
        },
    )
}

/// (name, command) for a size: one hit per kind, and a miss.
fn queries(n: usize) -> Vec<(&'static str, String)> {
    let tool = |i: usize| TOOLS[(i / 4) % TOOLS.len()];
    let literal = pick(0, n);
    let prefix = pick(1, n);
    let path = pick(2, n);
    let suffix = pick(3, n);
    vec![
        ("hit-literal", format!("{} sub{literal}", tool(literal))),
        (
            "hit-prefix",
            format!("{} run{prefix} build --release", tool(prefix)),
        ),
        ("hit-path", format!("/srv/app{path}/bin/deploy --now")),
        ("hit-suffix", format!("source prod.cfg{suffix}")),
        ("miss", "unknown-tool --version".to_string()),
    ]
}

fn bash_facts(requester: &Requester, command: &str) -> FactSet {
    requester.facts(&AskForm::Surface {
        surface: "bash".into(),
        value: command.into(),
    })
}

/// Checks a query resolves as designed: a hit decides on its own rule.
fn check_query(rules: &CompiledRules, name: &str, facts: &FactSet) {
    let judgment = judge(&[rules], facts).expect("rules evaluate");
    let pattern = judgment
        .deciding_check()
        .and_then(|c| c.matched_pattern.clone());
    if name == "miss" {
        assert_eq!(pattern.as_deref(), Some("*"), "{name}");
    } else {
        assert!(
            pattern.as_deref().is_some_and(|p| p != "*"),
            "{name} should hit its own rule, got {pattern:?}"
        );
    }
}

fn rule_scaling(c: &mut Criterion) {
    let requester = requester();
    let mut group = c.benchmark_group("rule_scaling");
    for n in SIZES {
        let rules = compiled(n);
        for (name, command) in queries(n) {
            let facts = bash_facts(&requester, &command);
            check_query(&rules, name, &facts);
            group.bench_with_input(BenchmarkId::new(name, n), &facts, |b, facts| {
                b.iter(|| judge(black_box(&[&rules]), black_box(facts)).expect("rules evaluate"))
            });
        }
    }
    group.finish();
}

/// A typical config: about 30 rules over the usual surfaces.
fn typical_config() -> Value {
    json!({
        "*": "ask",
        "read": "allow",
        "grep": "allow",
        "find": "allow",
        "ls": "allow",
        "write": {"*": "ask", "src/*": "allow", "tests/*": "allow"},
        "edit": {"*": "ask", "src/*": "allow"},
        "path": {
            "*.env": "deny",
            "*.env.*": "deny",
            "*.env.example": "allow",
            "*.pem": {"action": "deny", "reason": "Keys never leave the box."},
        },
        "external_directory": {"*": "ask", "~/.cargo/registry/*": "allow", "/tmp/*": "allow"},
        "bash": {
            "*": "ask",
            "git status": "allow",
            "git diff *": "allow",
            "git log *": "allow",
            "git push *": "deny",
            "cargo build *": "allow",
            "cargo test *": "allow",
            "cargo clippy *": "allow",
            "npm run *": "allow",
            "rm -rf *": {"action": "deny", "reason": "Use trash."},
            "curl *": "ask",
        },
        "mcp": {"exa:*": "allow", "github:create_*": "ask"},
        "skill": {"*": "allow"},
    })
}

fn typical_calls() -> Vec<(&'static str, AskForm)> {
    let call = |tool: &str, input: Value| AskForm::ToolCall {
        tool: tool.into(),
        input,
    };
    vec![
        ("read", call("read", json!({"path": "src/main.rs"}))),
        ("read-env", call("read", json!({"path": "config/.env"}))),
        ("edit", call("edit", json!({"path": "src/lib.rs"}))),
        (
            "write-outside",
            call("write", json!({"path": "/tmp/out.txt"})),
        ),
        (
            "bash-chain",
            call(
                "bash",
                json!({"command": "git status && cargo test --all && rm -rf target"}),
            ),
        ),
        ("mcp", call("mcp", json!({"tool": "exa:search"}))),
    ]
}

fn typical_tool_calls(c: &mut Criterion) {
    let rules = compile_permission(&typical_config());
    let requester = requester();
    let mut group = c.benchmark_group("typical_30_rules");
    for (name, call) in typical_calls() {
        let facts = requester.facts(&call);
        group.bench_with_input(BenchmarkId::new("judge", name), &facts, |b, facts| {
            b.iter(|| judge(black_box(&[&rules]), black_box(facts)).expect("rules evaluate"))
        });
        // Facts and judgment together: what one ask costs end to end
        // (the facts resolve symlinks, so they touch the filesystem).
        group.bench_with_input(BenchmarkId::new("facts+judge", name), &call, |b, call| {
            b.iter(|| {
                let facts = requester.facts(black_box(call));
                judge(&[&rules], &facts).expect("rules evaluate")
            })
        });
    }
    group.finish();
}

/// Median nanoseconds per judgment over all queries of a size.
fn median_ns_per_judgment(rules: &CompiledRules, facts: &[FactSet], rounds: usize) -> f64 {
    let per_round = 200usize;
    for facts in facts {
        judge(&[rules], facts).expect("rules evaluate");
    }
    let mut samples: Vec<f64> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..per_round {
                for facts in facts {
                    black_box(judge(black_box(&[rules]), black_box(facts)).expect("evaluates"));
                }
            }
            start.elapsed().as_nanos() as f64 / (per_round * facts.len()) as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// The summary: per-size medians, compile times and the 10,000/10 ratio.
fn scaling_summary(full: bool) {
    let rounds = if full { 101 } else { 5 };
    let requester = requester();
    println!();
    println!("rule scaling summary (bash surface, median per judgment over hits and a miss)");
    println!(
        "{:>8}  {:>12}  {:>14}",
        "rules", "ns/judgment", "compile (ms)"
    );
    let mut medians = Vec::new();
    for n in SIZES {
        let start = Instant::now();
        let rules = compiled(n);
        let facts: Vec<FactSet> = queries(n)
            .iter()
            .map(|(_, command)| bash_facts(&requester, command))
            .collect();
        // The first lookup builds the surface's index: part of compiling.
        judge(&[&rules], &facts[0]).expect("rules evaluate");
        let compile = start.elapsed();
        let median = median_ns_per_judgment(&rules, &facts, rounds);
        println!(
            "{n:>8}  {median:>12.0}  {:>14.2}",
            compile.as_secs_f64() * 1e3
        );
        medians.push(median);
    }
    let ratio = medians[medians.len() - 1] / medians[0];
    println!("ratio 10000/10: {ratio:.2}x (goal: under 3x)");
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let mut criterion = Criterion::default()
        .sample_size(50)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    rule_scaling(&mut criterion);
    typical_tool_calls(&mut criterion);
    criterion.final_summary();
    scaling_summary(full);
}
