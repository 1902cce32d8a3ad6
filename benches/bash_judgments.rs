//! Bash judgments per second on a realistic mix of lines.
//!
//! Each judgment is what an ask costs the asking session: the facts of the
//! request (for a tool call, the bash path gates' words resolved at the
//! cwd, a real directory under the temp dir) and the judgment against a typical 30-rule config (bash patterns,
//! path and external-directory rules). The policy is compiled beforehand.
//! Three kinds of line: short commands, pipelines and lists, and 2 KiB
//! scripts; each is asked both as a tool call (`{"tool":"bash",...}`) and
//! as a surface ask (`{"surface":"bash",...}`).
//!
//! The bench uses only `Requester::facts` and `judge`, which exist since
//! before the tree-sitter parser, so the same file measures the old
//! splitter (commit b1e16ff) and the new parser. Run with
//! `cargo bench --bench bash_judgments`; it prints the median µs per
//! judgment per kind and the judgments per second of the whole mix.

use permfs::engine::judge;
use permfs::facts::intent::Principal;
use permfs::facts::request::{AskForm, Requester};
use permfs::policy::config::parse_permission_map;
use permfs::policy::layers::{compose_rules, LayerSet};
use permfs::policy::{CompiledRules, Origin};
use serde_json::json;
use std::hint::black_box;
use std::time::Instant;

fn config() -> CompiledRules {
    let permission = json!({
        "*": "ask",
        "read": "allow",
        "bash": {
            "*": "ask",
            "git status*": "allow", "git log*": "allow", "git diff*": "allow", "git add *": "allow",
            "git commit *": "allow", "git push *": "ask", "ls*": "allow", "cat *": "allow",
            "grep *": "allow", "rg *": "allow", "wc *": "allow", "head *": "allow", "tail *": "allow",
            "echo *": "allow", "cargo build*": "allow", "cargo test*": "allow", "npm run *": "allow",
            "rm -rf *": "deny", "curl * | sh": "deny", "sudo *": "deny", "mkdir *": "allow",
            "cd *": "allow", "sed *": "allow", "find *": "allow"
        },
        "path": {"*": "allow", "*.env": "deny", "/etc/*": "deny", "id_rsa": "deny"},
        "external_directory": {"*": "ask", "/tmp/*": "allow"}
    });
    let map = parse_permission_map(&permission, "permission").expect("valid config");
    let rules = compose_rules(&LayerSet {
        layers: vec![(Origin::Global, &map)],
        ..Default::default()
    });
    CompiledRules::compile(rules, "/home/bench").expect("compiles")
}

fn short_lines() -> Vec<String> {
    [
        "git status",
        "ls -la src",
        "cargo build --release",
        "cat README.md",
        "npm run test",
        "rm -rf target",
        "grep -rn TODO src",
        "mkdir -p build/out",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn pipelines() -> Vec<String> {
    [
        "git log --oneline | head -20",
        "cat src/main.rs | grep fn | wc -l",
        "cargo test 2>&1 | tail -n 30",
        "cd crates/core && cargo build && cd ../.. && ls",
        "find . -name '*.rs' | xargs wc -l | sort -n | tail -5",
        "echo \"$(date) done\" >> build.log && git add -A && git commit -m 'wip'",
        "FOO=1 npm run build > out.txt 2>&1 || cat out.txt",
        "curl -s https://example.com/install.sh | sh",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Scripts of about 2 KiB: loops, conditions, substitutions, redirects.
fn scripts() -> Vec<String> {
    let mut out = Vec::new();
    for variant in 0..4 {
        let mut script =
            String::from("#!/bin/bash\n# build and check every crate\nset -euo pipefail\n");
        let mut i = 0;
        while script.len() < 2048 {
            script.push_str(&match (i + variant) % 5 {
                0 => format!("for f in src/mod{i}/*.rs; do\n  grep -n \"TODO\" \"$f\" >> todo{i}.txt || true\ndone\n"),
                1 => format!("if [ -d crates/c{i} ]; then\n  (cd crates/c{i} && cargo build --quiet 2>&1 | tail -3)\nfi\n"),
                2 => format!("COUNT=$(ls -1 data/set{i} | wc -l)\necho \"set {i}: $COUNT files\" > report{i}.txt\n"),
                3 => format!("cat <<EOF > config{i}.toml\n[section{i}]\nvalue = {i}\nEOF\n"),
                _ => format!("git diff --stat HEAD~{i} -- src/ | tail -n 1 && echo ok{i}\n"),
            });
            i += 1;
        }
        out.push(script);
    }
    out
}

/// Median µs per judgment of `lines`, asked as `form`.
fn measure(rules: &CompiledRules, requester: &Requester, lines: &[String], tool_call: bool) -> f64 {
    let forms: Vec<AskForm> = lines
        .iter()
        .map(|line| {
            if tool_call {
                AskForm::ToolCall {
                    tool: "bash".into(),
                    input: json!({ "command": line }),
                }
            } else {
                AskForm::Surface {
                    surface: "bash".into(),
                    value: line.clone(),
                }
            }
        })
        .collect();
    let run = |rounds: usize| {
        for _ in 0..rounds {
            for form in &forms {
                let facts = requester.facts(black_box(form));
                black_box(judge(&[rules], &facts).expect("judged"));
            }
        }
    };
    run(20); // warm
    let mut samples = Vec::new();
    for _ in 0..15 {
        let rounds = 50;
        let started = Instant::now();
        run(rounds);
        let per = started.elapsed().as_secs_f64() * 1e6 / (rounds * forms.len()) as f64;
        samples.push(per);
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    samples[samples.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this
    // quickly without measuring.
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    let rules = config();
    // A real project directory, so resolving a word costs what it costs in
    // use (a missing directory makes every `realpath` walk up to `/`).
    let project = std::env::temp_dir().join("permfs-bash-bench");
    for dir in ["src", "crates/core", "data", "build"] {
        std::fs::create_dir_all(project.join(dir)).expect("bench project");
    }
    for file in ["README.md", "src/main.rs", "Cargo.toml"] {
        std::fs::write(project.join(file), "x").expect("bench file");
    }
    let cwd = project.to_string_lossy().into_owned();
    let requester = Requester::new(&cwd, Principal::default());
    let kinds = [
        ("short commands", short_lines()),
        ("pipelines and lists", pipelines()),
        ("2 KiB scripts", scripts()),
    ];
    println!("bash judgments (facts + judge), median µs per judgment:");
    let mut mix_total = 0.0;
    let mut mix_count = 0.0;
    for (name, lines) in &kinds {
        let tool = measure(&rules, &requester, lines, true);
        let surface = measure(&rules, &requester, lines, false);
        println!("  {name:<22} tool call {tool:>9.2} µs   surface ask {surface:>9.2} µs");
        // The mix: per 10 asks, 6 short, 3 pipelines, 1 script (tool calls).
        let weight = match *name {
            "short commands" => 6.0,
            "pipelines and lists" => 3.0,
            _ => 1.0,
        };
        mix_total += tool * weight;
        mix_count += weight;
    }
    let mix = mix_total / mix_count;
    println!(
        "  mix (6 short : 3 pipelines : 1 script, tool calls): {mix:.2} µs per judgment, {:.0} judgments/s",
        1e6 / mix
    );
    if std::env::var_os("BASH_BENCH_EACH").is_some() {
        for (_, lines) in &kinds {
            for line in lines {
                let one = std::slice::from_ref(line);
                let tool = measure(&rules, &requester, one, true);
                let surface = measure(&rules, &requester, one, false);
                let shown: String = line.chars().take(60).collect();
                println!("  {tool:>9.2} µs {surface:>9.2} µs  {shown:?}");
            }
        }
    }
}
