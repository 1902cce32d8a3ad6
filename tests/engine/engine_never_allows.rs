//! Property: the engine never answers `allow` by default.
//!
//! Whatever the facts — empty, duplicated, mixed surfaces, surfaces no
//! rule names, path facts no explicit rule matched, tool calls of any
//! name and input — a policy of only `"*": "ask"` never yields `allow`,
//! and a policy of only `"*": "deny"` always yields `deny`.

use permfs::engine::judge;
use permfs::facts::intent::{AccessIntent, Principal};
use permfs::facts::request::{AskForm, FactSet, Requester};
use permfs::policy::layers::{Policy, PolicyLoader, PolicySources};
use permfs::policy::PermissionState;
use proptest::prelude::*;
use std::sync::Arc;

const SURFACES: &[&str] = &[
    "path",
    "path_read",
    "path_write",
    "external_directory",
    "external_directory_read",
    "external_directory_write",
    "bash",
    "mcp",
    "skill",
    "read",
    "write",
    "edit",
    "task",
    "deploy",
    "",
    "*",
    "no_such_surface",
];

const VALUES: &[&str] = &[
    "/etc/passwd",
    "/etc/shadow",
    "src/a.rs",
    "../elsewhere.txt",
    "~/.ssh/id_rsa",
    "*",
    "",
    "git status",
    "rm -rf /",
    "sudo ls",
    "echo hi > /etc/x",
    "cat /etc/passwd | sh",
    "mcp_status",
];

const TOOLS: &[&str] = &[
    "read", "write", "edit", "bash", "grep", "find", "ls", "mcp", "task", "deploy", "skill", "",
];

fn policy(star: &str) -> (Arc<Policy>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("config.json");
    std::fs::write(&config, format!(r#"{{"permission": {{"*": "{star}"}}}}"#)).expect("config");
    let loader = PolicyLoader::new(PolicySources {
        global: Some(config),
        ..Default::default()
    })
    .expect("loader");
    let cwd = dir.path().to_string_lossy().into_owned();
    (loader.policy(&cwd, None).expect("policy"), dir)
}

fn principal() -> Principal {
    Principal {
        session_id: "main/w".into(),
        agent_name: Some("worker".into()),
    }
}

fn intent() -> impl Strategy<Value = AccessIntent> {
    (
        proptest::sample::select(SURFACES),
        proptest::collection::vec(proptest::sample::select(VALUES), 0..4),
        proptest::option::of(proptest::sample::select(VALUES)),
        proptest::option::of(Just("bash_wrapper")),
        proptest::option::of(proptest::sample::select(VALUES)),
        any::<bool>(),
    )
        .prop_map(
            |(surface, values, boundary, floor, word, bare_word)| AccessIntent {
                surface: surface.to_string(),
                match_values: values.into_iter().map(str::to_string).collect(),
                boundary_value: boundary.map(Into::into),
                requester_cwd: "/work".into(),
                principal: principal().into(),
                floor: floor.map(str::to_string),
                word: word.map(str::to_string),
                bare_word,
            },
        )
}

/// Fact sets as the wire can carry them: any mix, duplicates allowed.
fn fact_set() -> impl Strategy<Value = FactSet> {
    (
        proptest::option::of(proptest::sample::select(TOOLS)),
        proptest::collection::vec(intent(), 0..6),
        any::<bool>(),
    )
        .prop_map(|(tool, intents, duplicate)| {
            let mut intents = intents;
            if duplicate {
                if let Some(first) = intents.first().cloned() {
                    intents.push(first);
                }
            }
            FactSet {
                tool: tool.map(str::to_string),
                intents,
                unusable: None,
            }
        })
}

/// Facts derived by permfs's own gates from a tool call.
fn tool_call_facts() -> impl Strategy<Value = FactSet> {
    (
        proptest::sample::select(TOOLS),
        proptest::option::of(proptest::sample::select(VALUES)),
        proptest::option::of(proptest::sample::select(VALUES)),
    )
        .prop_map(|(tool, path, command)| {
            let mut input = serde_json::Map::new();
            if let Some(path) = path {
                input.insert("path".into(), path.into());
            }
            if let Some(command) = command {
                input.insert("command".into(), command.into());
            }
            Requester::new("/work", principal()).facts(&AskForm::ToolCall {
                tool: tool.to_string(),
                input: input.into(),
            })
        })
}

fn any_facts() -> impl Strategy<Value = FactSet> {
    prop_oneof![fact_set(), tool_call_facts()]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn star_ask_never_allows(facts in any_facts()) {
        let (policy, _dir) = policy("ask");
        let judgment = judge(&[&policy.rules], &facts).expect("judged");
        prop_assert_ne!(judgment.state, PermissionState::Allow, "facts: {:?}", facts);
    }

    #[test]
    fn star_deny_always_denies(facts in any_facts()) {
        let (policy, _dir) = policy("deny");
        let judgment = judge(&[&policy.rules], &facts).expect("judged");
        // An empty or unusable fact set floors to `ask` (never allow), and
        // so does one of bare bash words only (a bare word is a fact only
        // where a specific path deny/ask rule names it, and `"*"` names
        // none); any judged fact set is denied.
        let nothing_to_judge = facts.intents.iter().all(|i| i.bare_word);
        if nothing_to_judge || facts.unusable.is_some() {
            prop_assert_eq!(judgment.state, PermissionState::Ask);
        } else {
            prop_assert_eq!(judgment.state, PermissionState::Deny, "facts: {:?}", facts);
        }
    }
}

#[test]
fn two_path_writes_no_rule_matched_is_ask_not_allow() {
    // The reproduction from the security issue: two `path_write` facts for
    // /etc/passwd with no path rule were answered `allow`.
    let (policy, _dir) = policy("ask");
    let write = AccessIntent {
        surface: "path_write".into(),
        match_values: ["/etc/passwd".into()].into(),
        boundary_value: Some("/etc/passwd".into()),
        requester_cwd: "/work".into(),
        principal: principal().into(),
        floor: None,
        word: None,
        bare_word: false,
    };
    let facts = FactSet {
        tool: None,
        intents: vec![write.clone(), write],
        unusable: None,
    };
    let judgment = judge(&[&policy.rules], &facts).expect("judged");
    assert_eq!(judgment.state, PermissionState::Ask);
}
