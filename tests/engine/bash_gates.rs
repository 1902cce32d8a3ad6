//! Bash tool calls, judged as the reference's tool-call gate pipeline
//! judges them: the command units (`bash`), the path words (`path`) and
//! the words outside the tree (`external_directory`).
//!
//! `tests/fixtures/bash_gates.json` is written by
//! `scripts/bash-gates/make_fixture.py`: each case's `reference` is the
//! answer of pi-permission-system 20.7.3's **tool-call gate pipeline**
//! (`zz-gate-oracle.ts` of `../shared/reference-oracle/`, not only
//! `PermissionManager.check`). A case that carries `stricter` names the
//! newer upstream test (or issue 12 clause) permfs follows instead; its
//! `want` is then permfs's verdict, always at least as restrictive as the
//! reference's.

use permfs::engine::{judge, Judgment};
use permfs::facts::intent::Principal;
use permfs::facts::request::{AskForm, Requester};
use permfs::policy::layers::{PolicyLoader, PolicySources};
use permfs::policy::PermissionState;
use serde_json::{json, Value};
use std::collections::HashMap;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/bash_gates.json"
);

fn rank(state: &str) -> u8 {
    match state {
        "allow" => 0,
        "ask" => 1,
        _ => 2,
    }
}

fn state_name(state: PermissionState) -> String {
    serde_json::to_value(state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

struct Judged {
    state: String,
    pattern: Option<String>,
    judgment: Judgment,
}

#[test]
fn bash_tool_calls_match_the_reference_gate_pipeline() {
    let text = std::fs::read_to_string(FIXTURE).expect("fixture readable");
    let fixture: Value = serde_json::from_str(&text).expect("fixture is JSON");
    let cwd = fixture["cwd"].as_str().expect("cwd");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut loaders: HashMap<String, PolicyLoader> = HashMap::new();
    for (name, permission) in fixture["configs"].as_object().expect("configs") {
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, json!({ "permission": permission }).to_string()).expect("write");
        let loader = PolicyLoader::new(PolicySources {
            global: Some(path),
            agents_dir: Some(dir.path().join("no-agents")),
            project_file: Some(dir.path().join("no-project.json")),
            project_agents_dir: Some(dir.path().join("no-project-agents")),
            authority_dirs: Vec::new(),
            // The reference layers every file: these tests check its semantics.
            trust: permfs::policy::trust::Trust::All,
        })
        .expect("config loads");
        loaders.insert(name.clone(), loader);
    }
    let requester = Requester::new(cwd, Principal::default());
    let cases = fixture["cases"].as_array().expect("cases");
    let mut failures = Vec::new();
    let mut agree = 0;
    for case in cases {
        let name = case["name"].as_str().unwrap_or("?");
        let command = case["command"].as_str().expect("command");
        let loader = &loaders[case["config"].as_str().expect("config")];
        let policy = loader.policy(&requester.cwd, None).expect("policy");
        let facts = requester.facts(&AskForm::ToolCall {
            tool: "bash".into(),
            input: json!({ "command": command }),
        });
        let judgment = judge(&[&policy.rules], &facts).expect("judged");
        let decided = judgment.deciding_check();
        let got = Judged {
            state: state_name(judgment.state),
            pattern: decided.and_then(|c| c.matched_pattern.clone()),
            judgment: judgment.clone(),
        };
        let reference = &case["reference"];
        let want = case.get("want").unwrap_or(reference);
        let want_state = want["state"].as_str().unwrap_or("?");
        let want_pattern = want["matchedPattern"].as_str().map(str::to_string);
        if case.get("stricter").is_some() {
            // Never less restrictive than the reference, even where stricter.
            let reference_state = reference["state"].as_str().unwrap_or("?");
            assert!(
                rank(want_state) >= rank(reference_state),
                "{name}: a stricter case must not want less than the reference"
            );
        }
        if got.state == reference["state"].as_str().unwrap_or("?") {
            agree += 1;
        }
        // The pattern is compared only for the bash gate: on a tie between
        // two path gates the reference reports the first gate it ran.
        let compare_pattern = case.get("want").is_some()
            || reference["surface"].as_str() == Some("bash")
            || reference["state"].as_str() != Some("allow");
        let pattern_ok = !compare_pattern
            || got.pattern == want_pattern
            || (want_pattern.is_none() && got.pattern.as_deref() == Some("*"))
            || (want_pattern.as_deref() == Some("*") && got.pattern.is_none());
        if got.state != want_state || !pattern_ok {
            failures.push(format!(
                "{name}: {command:?}\n   want {want_state} {want_pattern:?}\n    got {} {:?}\n checks {}",
                got.state,
                got.pattern,
                serde_json::to_string_pretty(&got.judgment.checks).unwrap_or_default()
            ));
        }
    }
    eprintln!(
        "bash gates: {} cases, {} agree with the reference's state, {} stricter on purpose",
        cases.len(),
        agree,
        cases.iter().filter(|c| c.get("stricter").is_some()).count()
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
