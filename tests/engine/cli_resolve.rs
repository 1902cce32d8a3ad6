//! The `permfs` binary: `resolve` (JSON lines in, JSON lines out) and
//! `check-config`, run as a user runs them.

use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use tempfile::TempDir;

const PERMFS: &str = env!("CARGO_BIN_EXE_permfs");

/// A temp tree with `work/` as the cwd.
struct Tree {
    _dir: TempDir,
    root: PathBuf,
}

impl Tree {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("create a temp dir");
        let root = std::fs::canonicalize(dir.path()).expect("canonicalize the temp dir");
        std::fs::create_dir_all(root.join("work")).expect("create the cwd");
        Self { _dir: dir, root }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.path(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create a parent dir");
        }
        std::fs::write(&path, text).expect("write a file");
        path
    }

    fn cwd(&self) -> String {
        self.path("work").to_string_lossy().into_owned()
    }
}

fn run(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(PERMFS)
        .args(args)
        .env("PERMFS_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn permfs");
    let written = child
        .stdin
        .take()
        .expect("a stdin pipe")
        .write_all(stdin.as_bytes());
    // A command that stops early (an invalid config) may not read stdin.
    if let Err(error) = written {
        assert_eq!(
            error.kind(),
            std::io::ErrorKind::BrokenPipe,
            "write stdin: {error}"
        );
    }
    child.wait_with_output().expect("wait for permfs")
}

fn lines(output: &Output) -> Vec<Value> {
    String::from_utf8(output.stdout.clone())
        .expect("UTF-8 stdout")
        .lines()
        .map(|line| serde_json::from_str(line).expect("every output line is JSON"))
        .collect()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn p(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// The fields a differential check compares.
fn summary(answer: &Value) -> Value {
    json!({
        "state": answer["state"],
        "matchedPattern": answer["matchedPattern"],
        "origin": answer["origin"],
        "surface": answer["surface"],
    })
}

fn global_config(tree: &Tree) -> PathBuf {
    tree.write(
        "global.json",
        &json!({
            "permission": {
                "*": "ask",
                "bash": {
                    "*": "ask",
                    "git *": "allow",
                    "timeout *": "allow",
                    "rm *": {"action": "deny", "reason": "Use trash."},
                },
                "read": "allow",
                "path": {"*.env": "deny"},
            }
        })
        .to_string(),
    )
}

#[test]
fn resolve_reports_each_line_and_a_bad_line_does_not_stop_the_rest() {
    let tree = Tree::new();
    let config = global_config(&tree);
    let cwd = tree.cwd();
    let input = [
        r#"{"surface": "bash", "value": "git status"}"#,
        r#"{"surface": "bash", "value": "rm -rf build"}"#,
        "this is not json",
        "",
        r#"{"sufrace": "bash", "value": "ls"}"#,
        r#"{"surface": "bash", "value": 7}"#,
        r#"{"tool": "read", "input": {"path": "src/main.rs"}}"#,
        r#"{"tool": "read", "input": {"path": "config/.env"}}"#,
        r#"{"surface": "read", "value": "docs/a.md"}"#,
        r#"{"surface": "bash", "value": "timeout 60 git status"}"#,
    ]
    .join("\n");
    let output = run(&["resolve", "--config", p(&config), "--cwd", &cwd], &input);
    assert_eq!(output.status.code(), Some(1), "stderr: {}", stderr(&output));
    let answers = lines(&output);
    assert_eq!(answers.len(), 9, "one line out per non-blank line in");

    assert_eq!(
        summary(&answers[0]),
        json!({"state": "allow", "matchedPattern": "git *", "origin": "global", "surface": "bash"})
    );
    assert_eq!(answers[0]["matchValues"], Value::Null);
    assert_eq!(
        summary(&answers[1]),
        json!({"state": "deny", "matchedPattern": "rm *", "origin": "global", "surface": "bash"})
    );
    assert_eq!(answers[1]["reason"], "Use trash.");

    // Bad lines: an `error` naming the problem and the input line number
    // (blank lines count), and nothing else.
    let error = |answer: &Value| answer["error"].as_str().map(str::to_string);
    assert_eq!(answers[2]["line"], 3);
    assert!(
        error(&answers[2]).is_some_and(|e| e.contains("not valid JSON")),
        "{}",
        answers[2]
    );
    assert_eq!(answers[2].get("state"), None);
    assert_eq!(answers[3]["line"], 5);
    assert!(
        error(&answers[3]).is_some_and(|e| e.contains("sufrace") && e.contains("surface")),
        "{}",
        answers[3]
    );
    assert_eq!(answers[4]["line"], 6);
    assert!(
        error(&answers[4]).is_some_and(|e| e.contains("\"value\" must be a string")),
        "{}",
        answers[4]
    );

    // Later lines still ran.
    assert_eq!(
        summary(&answers[5]),
        json!({"state": "allow", "matchedPattern": "*", "origin": "global", "surface": "read"})
    );
    assert_eq!(
        answers[5]["matchValues"],
        json!([format!("{cwd}/src/main.rs"), "src/main.rs"])
    );
    assert_eq!(
        summary(&answers[6]),
        json!({"state": "deny", "matchedPattern": "*.env", "origin": "global", "surface": "path_read"})
    );
    assert_eq!(
        answers[6]["matchValues"],
        json!([format!("{cwd}/config/.env"), "config/.env"])
    );
    let checks: Vec<&str> = answers[6]["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| c["surface"].as_str().expect("surface"))
        .collect();
    assert_eq!(checks, ["path_read", "read"]);
    assert_eq!(
        summary(&answers[7]),
        json!({"state": "allow", "matchedPattern": "*", "origin": "global", "surface": "read"})
    );
    assert_eq!(
        answers[7]["matchValues"],
        json!([format!("{cwd}/docs/a.md"), "docs/a.md"])
    );
    assert_eq!(
        summary(&answers[8]),
        json!({
            "state": "ask",
            "matchedPattern": "<indirection-bash-wrapper>",
            "origin": "global",
            "surface": "bash",
        })
    );
    assert_eq!(
        answers[8]["checks"][0]["floor"],
        "<indirection-bash-wrapper>"
    );
    for answer in [&answers[0], &answers[5], &answers[8]] {
        assert_eq!(answer["issues"], json!([]), "{answer}");
    }
}

#[test]
fn resolve_exits_zero_when_every_line_is_fine() {
    let tree = Tree::new();
    let config = global_config(&tree);
    let project = tree.write(
        "project.json",
        r#"{"permission": {"bash": {"npm *": "allow"}}}"#,
    );
    tree.write(
        "agents/reviewer.md",
        "---\nname: reviewer\npermission:\n  bash:\n    \"git push *\": deny\n---\nReview only.\n",
    );
    tree.write(
        "project-agents/reviewer.md",
        "---\npermission:\n  bash:\n    \"npm publish *\": deny\n---\n",
    );
    let agents = tree.path("agents");
    let project_agents = tree.path("project-agents");
    let cwd = tree.cwd();
    let input = [
        r#"{"surface": "bash", "value": "npm test"}"#,
        r#"{"surface": "bash", "value": "git push origin"}"#,
        r#"{"surface": "bash", "value": "npm publish --dry-run"}"#,
        r#"{"surface": "bash", "value": "git push origin", "agent": "other"}"#,
        r#"{"tool": "task", "input": {"prompt": "hi"}}"#,
    ]
    .join("\n");
    let output = run(
        &[
            "resolve",
            "--config",
            p(&config),
            "--project",
            p(&project),
            "--agents-dir",
            p(&agents),
            "--project-agents-dir",
            p(&project_agents),
            "--cwd",
            &cwd,
            "--agent",
            "reviewer",
        ],
        &format!("{input}\n"),
    );
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let answers: Vec<Value> = lines(&output).iter().map(summary).collect();
    assert_eq!(
        answers,
        [
            json!({"state": "allow", "matchedPattern": "npm *", "origin": "project", "surface": "bash"}),
            json!({"state": "deny", "matchedPattern": "git push *", "origin": "agent", "surface": "bash"}),
            json!({"state": "deny", "matchedPattern": "npm publish *", "origin": "project-agent", "surface": "bash"}),
            // A request's own agent replaces --agent.
            json!({"state": "allow", "matchedPattern": "git *", "origin": "global", "surface": "bash"}),
            json!({"state": "ask", "matchedPattern": null, "origin": "global", "surface": "task"}),
        ]
    );
    // Nothing on stdin: nothing out, success.
    let output = run(&["resolve", "--config", p(&config), "--cwd", &cwd], "");
    assert_eq!(output.status.code(), Some(0));
    assert!(output.stdout.is_empty());
}

#[test]
fn resolve_reports_a_failing_closed_project_in_every_answer() {
    let tree = Tree::new();
    let config = global_config(&tree);
    let project = tree.write("project.json", r#"{"permission": {"bash": "alow"}}"#);
    let output = run(
        &[
            "resolve",
            "--config",
            p(&config),
            "--project",
            p(&project),
            "--cwd",
            &tree.cwd(),
        ],
        "{\"surface\": \"bash\", \"value\": \"git status\"}\n",
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "the line resolved: {}",
        stderr(&output)
    );
    let answers = lines(&output);
    assert_eq!(
        summary(&answers[0]),
        json!({"state": "ask", "matchedPattern": "git *", "origin": "fail-closed", "surface": "bash"})
    );
    let issues = answers[0]["issues"].to_string();
    assert!(issues.contains("project.json"), "{issues}");
    assert!(issues.contains("permission.bash"), "{issues}");
}

#[test]
fn resolve_refuses_an_invalid_global_config() {
    let tree = Tree::new();
    let config = tree.write(
        "global.json",
        r#"{"permission": {"bash": "allow"}, "yolo": true}"#,
    );
    let output = run(
        &["resolve", "--config", p(&config), "--cwd", &tree.cwd()],
        "{\"surface\": \"bash\", \"value\": \"ls\"}\n",
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        output.stdout.is_empty(),
        "no answers from an invalid config"
    );
    let err = stderr(&output);
    assert!(err.contains(p(&config)), "{err}");
    assert!(err.contains("\"yolo\""), "{err}");
    assert!(err.contains("yoloMode"), "{err}");
}

#[test]
fn check_config_names_the_file_the_key_and_the_nearest_valid_key() {
    let tree = Tree::new();
    let cases = [
        (
            r#"{"permision": {"bash": "ask"}}"#,
            "\"permision\"",
            "\"permission\"",
        ),
        (r#"{"yolomode": true}"#, "\"yolomode\"", "\"yoloMode\""),
        (
            r#"{"permission": {"path_wrote": "deny"}}"#,
            "\"path_wrote\"",
            "\"path_write\"",
        ),
        (
            r#"{"permission": {"bash": {"rm *": {"action": "deny", "reasn": "x"}}}}"#,
            "\"reasn\"",
            "\"reason\"",
        ),
    ];
    for (index, (text, key, nearest)) in cases.into_iter().enumerate() {
        let file = tree.write(&format!("bad-{index}.json"), text);
        let output = run(&["check-config", p(&file)], "");
        assert_ne!(output.status.code(), Some(0), "{text} must be refused");
        let err = stderr(&output);
        assert!(err.contains(p(&file)), "{text}: names the file: {err}");
        assert!(err.contains(key), "{text}: names the key: {err}");
        assert!(
            err.contains(&format!("did you mean {nearest}")),
            "{text}: suggests {nearest}: {err}"
        );
    }

    // A valid global, project and agent file: success, and the composed
    // rules on stdout.
    let global = tree.write(
        "ok.json",
        r#"{"permission": {"bash": {"*": "ask", "git *": "allow"}}, "debugLog": true}"#,
    );
    let project = tree.write(
        "ok-project.json",
        r#"{"permission": {"bash": {"*": "deny"}}}"#,
    );
    let agent = tree.write(
        "reviewer.md",
        "---\npermission:\n  bash:\n    \"git push *\": deny\n---\n",
    );
    let output = run(&["check-config", p(&global), p(&project), p(&agent)], "");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let composed: Value = serde_json::from_slice(&output.stdout).expect("JSON on stdout");
    let rules: Vec<String> = composed["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|r| {
            format!(
                "{} {} {} {}",
                r["surface"].as_str().expect("surface"),
                r["pattern"].as_str().expect("pattern"),
                r["action"].as_str().expect("action"),
                r["origin"].as_str().expect("origin")
            )
        })
        .collect();
    assert_eq!(
        rules,
        [
            "* * ask builtin",
            "bash * deny project",
            "bash git * allow global",
            "bash git push * deny agent"
        ]
    );

    // One bad file among good ones still fails, naming only the bad one.
    let bad = tree.write(
        "bad-project.json",
        r#"{"permission": {"bash": "sometimes"}}"#,
    );
    let output = run(&["check-config", p(&global), p(&bad)], "");
    assert_ne!(output.status.code(), Some(0));
    let err = stderr(&output);
    assert!(
        err.contains(p(&bad)) && err.contains("permission.bash"),
        "{err}"
    );
}

/// Surface-level checks (no value) and tool calls without a value, as the
/// reference answers them. Every expected answer below was measured with
/// the reference oracle (`../shared/reference-oracle/`, pi-permission-system
/// 20.7.3): the surface queries through `zz-oracle.ts` (the manager, as the
/// service's value-less `checkPermission(surface)` reaches it), the tool
/// calls through `zz-gate-oracle.ts` (the tool-call gate pipeline; its
/// `decidedBy` gate is compared). The one deliberate exception is marked.
#[test]
fn surface_level_checks_answer_as_the_reference_does() {
    let tree = Tree::new();
    let config = tree.write(
        "global.json",
        &json!({"permission": {
            "*": "ask",
            "deploy": {"*": "deny", "prod": "allow"},
            "task": {"*": "allow", "big": "deny"},
            "read": {"*": "allow", "*.env": "deny"},
            "write": "deny",
            "path": {"*.env": "deny"},
            "external_directory": {"*": "allow"},
            "bash": {"*": "deny", "git *": "allow"},
            "mcp": {"mcp_status": "allow", "mcp": "deny"},
        }})
        .to_string(),
    );
    let project = tree.write(
        "project.json",
        &json!({"permission": {"skill": {"*": "deny", "review": "allow"}}}).to_string(),
    );
    let cases: &[(&str, &str, Option<&str>, &str, &str)] = &[
        // (request, state, matchedPattern, origin, deciding surface)
        (
            r#"{"surface":"deploy"}"#,
            "deny",
            Some("*"),
            "global",
            "deploy",
        ),
        (
            r#"{"surface":"deploy","value":null}"#,
            "deny",
            Some("*"),
            "global",
            "deploy",
        ),
        // The reference ignores the value and evaluates `*`; permfs judges
        // both and the stricter answers, so these two agree...
        (
            r#"{"surface":"deploy","value":"prod"}"#,
            "deny",
            Some("*"),
            "global",
            "deploy",
        ),
        (
            r#"{"surface":"task"}"#,
            "allow",
            Some("*"),
            "global",
            "task",
        ),
        // ...and this one is the deliberate exception: the reference says
        // `allow` (`*`), permfs honours the rule written for the value
        // (docs/reference-divergences.md).
        (
            r#"{"surface":"task","value":"big"}"#,
            "deny",
            Some("big"),
            "global",
            "task",
        ),
        (
            r#"{"surface":"read"}"#,
            "allow",
            Some("*"),
            "global",
            "read",
        ),
        (
            r#"{"surface":"write","value":"  "}"#,
            "deny",
            Some("*"),
            "global",
            "write",
        ),
        (r#"{"surface":"path"}"#, "ask", None, "global", "path"),
        (
            r#"{"surface":"external_directory"}"#,
            "allow",
            Some("*"),
            "global",
            "external_directory",
        ),
        (r#"{"surface":"bash"}"#, "deny", Some("*"), "global", "bash"),
        (
            r#"{"surface":"skill"}"#,
            "deny",
            Some("*"),
            "project",
            "skill",
        ),
        (
            r#"{"surface":"skill","value":"review"}"#,
            "allow",
            Some("review"),
            "project",
            "skill",
        ),
        (
            r#"{"surface":"mcp"}"#,
            "allow",
            Some("mcp_status"),
            "global",
            "mcp",
        ),
        (
            r#"{"surface":"webfetch"}"#,
            "ask",
            None,
            "global",
            "webfetch",
        ),
        // Tool calls (gate pipeline oracle).
        (
            r#"{"tool":"read","input":{}}"#,
            "allow",
            Some("*"),
            "global",
            "read",
        ),
        (
            r#"{"tool":"read","input":{"path":"  "}}"#,
            "allow",
            Some("*"),
            "global",
            "read",
        ),
        (
            r#"{"tool":"deploy","input":{"target":"prod"}}"#,
            "deny",
            Some("*"),
            "global",
            "deploy",
        ),
        (
            r#"{"tool":"task","input":{}}"#,
            "allow",
            Some("*"),
            "global",
            "task",
        ),
        (
            r#"{"tool":"write","input":{}}"#,
            "deny",
            Some("*"),
            "global",
            "write",
        ),
    ];
    let input: String = cases.iter().map(|case| format!("{}\n", case.0)).collect();
    let output = run(
        &[
            "resolve",
            "--config",
            p(&config),
            "--project",
            p(&project),
            "--cwd",
            &tree.cwd(),
        ],
        &input,
    );
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let answers = lines(&output);
    assert_eq!(answers.len(), cases.len());
    for ((request, state, pattern, origin, surface), answer) in cases.iter().zip(&answers) {
        assert_eq!(
            summary(answer),
            json!({"state": state, "matchedPattern": pattern, "origin": origin, "surface": surface}),
            "{request}"
        );
        if request.contains("\"surface\"") && !request.contains("review") {
            // No path, no alias set: nothing to show (the reference's null).
            assert_eq!(answer["matchValues"], Value::Null, "{request}");
        }
    }
}

/// The ADR 0008 wire has no value-less form: pre-fixed facts without
/// `matchValues` are unusable and floor to `ask` even where every rule
/// allows (a client must not get a surface-level `allow` by leaving the
/// values out).
#[test]
fn wire_facts_without_match_values_still_fail_closed() {
    let tree = Tree::new();
    let config = tree.write("global.json", r#"{"permission": {"*": "allow"}}"#);
    let input = [
        r#"{"accessIntent": {"surface": "deploy", "matchValues": null}}"#,
        r#"{"accessIntent": {"surface": "deploy"}}"#,
        r#"{"accessIntent": [{"surface": "deploy", "matchValues": ["*"]}, {"surface": "bash"}]}"#,
    ]
    .join("\n");
    let output = run(
        &["resolve", "--config", p(&config), "--cwd", &tree.cwd()],
        &input,
    );
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    for answer in lines(&output) {
        assert_eq!(answer["state"], "ask", "{answer}");
        assert!(
            answer["unjudgeable"]
                .as_str()
                .is_some_and(|why| why.contains("matchValues")),
            "{answer}"
        );
    }
}
