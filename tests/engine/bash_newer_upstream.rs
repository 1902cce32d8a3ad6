//! Conformance with the newer reference's own tests (issue 22, item 5).
//!
//! `tests/fixtures/bash_newer_upstream.json` is written by
//! `scripts/bash-gates/port_upstream.py`: every case a test of
//! gotgenes/pi-packages (`packages/pi-permission-system/test/access-intent/bash/`
//! and `test/handlers/gates/`) states as (config, cwd, tool call) -> state,
//! hand-ported and naming its source test, plus `mcp` tool calls that name
//! only a `tool`, answered by the 20.7.3 gate-pipeline oracle.
//!
//! Each case is judged as `tests/engine/bash_gates.rs` judges (PolicyLoader +
//! Requester::facts + judge). permfs may be stricter than the reference
//! (counted and printed); it must never be less restrictive
//! (allow < ask < deny): every such case is listed and fails the test.

use permfs::engine::judge;
use permfs::facts::intent::Principal;
use permfs::facts::path_text::home_dir;
use permfs::facts::request::{AskForm, Requester};
use permfs::policy::layers::{PolicyLoader, PolicySources};
use permfs::policy::PermissionState;
use serde_json::{json, Value};
use std::path::Path;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/bash_newer_upstream.json"
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

/// Makes a case's `files` under `root`: a text file, a directory, or a
/// symlink (its target already has `@TMP@` replaced).
fn make_files(root: &Path, files: &[Value]) {
    for file in files {
        let rel = file["path"].as_str().expect("file path");
        let path = root.join(rel.trim_end_matches('/'));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("parent dir");
        }
        if file.get("dir").is_some() {
            std::fs::create_dir_all(&path).expect("dir");
        } else if let Some(target) = file["symlink"].as_str() {
            std::os::unix::fs::symlink(target, &path).expect("symlink");
        } else {
            std::fs::write(&path, file["text"].as_str().unwrap_or("")).expect("file");
        }
    }
}

/// permfs's answer to one case: (state, deciding pattern, deciding surface).
fn judge_case(case: &Value, config_dir: &Path) -> Result<(String, Option<String>, String), String> {
    let config_path = config_dir.join("config.json");
    std::fs::write(
        &config_path,
        json!({ "permission": case["config"] }).to_string(),
    )
    .map_err(|e| e.to_string())?;
    let loader = PolicyLoader::new(PolicySources {
        global: Some(config_path),
        agents_dir: Some(config_dir.join("no-agents")),
        project_file: Some(config_dir.join("no-project.json")),
        project_agents_dir: Some(config_dir.join("no-project-agents")),
        authority_dirs: Vec::new(),
        trust: permfs::policy::trust::Trust::All,
    })
    .map_err(|e| format!("config does not load: {e:?}"))?;
    let cwd = case["cwd"].as_str().ok_or("no cwd")?;
    let requester = Requester::new(cwd, Principal::default());
    let policy = loader
        .policy(&requester.cwd, None)
        .map_err(|e| format!("no policy: {e:?}"))?;
    let facts = requester.facts(&AskForm::ToolCall {
        tool: case["tool"].as_str().ok_or("no tool")?.into(),
        input: case["input"].clone(),
    });
    let judgment = judge(&[&policy.rules], &facts).map_err(|e| format!("not judged: {e:?}"))?;
    let decided = judgment.deciding_check();
    Ok((
        state_name(judgment.state),
        decided.and_then(|c| c.matched_pattern.clone()),
        decided
            .map(|c| c.rule_surface.to_string())
            .unwrap_or_default(),
    ))
}

#[test]
fn never_less_restrictive_than_the_newer_reference() {
    let text = std::fs::read_to_string(FIXTURE).expect("fixture readable");
    let fixture: Value = serde_json::from_str(&text).expect("fixture is JSON");
    let cases = fixture["cases"].as_array().expect("cases");
    let home = home_dir();
    let mut looser = Vec::new();
    let mut stricter = Vec::new();
    let mut agree = 0;
    for raw in cases {
        let scratch = tempfile::tempdir().expect("tempdir");
        let tmp = scratch.path().canonicalize().expect("canonical tempdir");
        let tmp_text = tmp.to_string_lossy().into_owned();
        let config_dir = tmp.join(".permfs-test-config");
        std::fs::create_dir_all(&config_dir).expect("config dir");
        // Placeholders are replaced in the whole case: config, cwd, command, files.
        let case: Value = serde_json::from_str(
            &raw.to_string()
                .replace("@TMP@", &tmp_text)
                .replace("@HOME@", &home),
        )
        .expect("case is JSON");
        if let Some(files) = case["files"].as_array() {
            make_files(&tmp, files);
        }
        let name = case["name"].as_str().unwrap_or("?");
        let source = case["source"].as_str().unwrap_or("?");
        let want = case["want"]["state"].as_str().unwrap_or("?");
        let want_pattern = case["want"]["matchedPattern"].as_str();
        let line = |got: &str| {
            format!(
                "{name} [{source}]\n   {} {}\n   config {}  cwd {}\n   upstream {want}{}  permfs {got}",
                case["tool"].as_str().unwrap_or("?"),
                if case["tool"] == "bash" {
                    format!("{:?}", case["input"]["command"].as_str().unwrap_or(""))
                } else {
                    case["input"].to_string()
                },
                case["config"],
                case["cwd"].as_str().unwrap_or("?"),
                want_pattern.map(|p| format!(" ({p})")).unwrap_or_default(),
            )
        };
        match judge_case(&case, &config_dir) {
            Ok((got, pattern, surface)) => {
                let got_text =
                    format!("{got} ({} on {surface})", pattern.as_deref().unwrap_or("-"));
                match rank(&got).cmp(&rank(want)) {
                    std::cmp::Ordering::Less => looser.push(line(&got_text)),
                    std::cmp::Ordering::Greater => stricter.push(line(&got_text)),
                    std::cmp::Ordering::Equal => agree += 1,
                }
            }
            // An error is not an answer: it counts against permfs.
            Err(error) => looser.push(line(&format!("error: {error}"))),
        }
    }
    eprintln!(
        "newer upstream: {} cases, {agree} agree, {} stricter, {} less restrictive",
        cases.len(),
        stricter.len(),
        looser.len()
    );
    if std::env::var_os("PERMFS_SHOW_STRICTER").is_some() {
        eprintln!("stricter than upstream:\n{}", stricter.join("\n"));
    }
    assert!(
        looser.is_empty(),
        "{} of {} cases are less restrictive than the newer reference:\n{}",
        looser.len(),
        cases.len(),
        looser.join("\n")
    );
}
