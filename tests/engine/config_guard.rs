//! An agent may not edit the permission configuration it is judged by:
//! even under `"*": "allow"`, a write to a project config (existing or
//! not), a project agent file or the global config is denied, by tool call
//! and by a bash redirect, with the reason named. Other writes stay allowed.

use std::io::Write;
use std::process::{Command, Stdio};

fn resolve(config: &std::path::Path, cwd: &std::path::Path, line: &str) -> serde_json::Value {
    let mut child = Command::new(env!("CARGO_BIN_EXE_permfs"))
        .arg("resolve")
        .arg("--config")
        .arg(config)
        .arg("--cwd")
        .arg(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("permfs resolve runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(format!("{line}\n").as_bytes())
        .expect("line written");
    let output = child.wait_with_output().expect("answered");
    serde_json::from_slice(&output.stdout).expect("JSON")
}

#[test]
fn writing_the_permission_config_is_denied_even_under_allow_all() {
    let dir = tempfile::tempdir().expect("dir");
    let config = dir.path().join("global.json");
    std::fs::write(&config, r#"{"permission": {"*": "allow"}}"#).expect("config");
    let cwd = dir.path().join("proj");
    std::fs::create_dir(&cwd).expect("proj");
    let global = config.display().to_string();
    for line in [
        r#"{"tool":"write","input":{"path":".permfs/config.json"}}"#.to_string(),
        r#"{"tool":"edit","input":{"path":".pi/extensions/pi-permission-system/config.json"}}"#
            .to_string(),
        r#"{"tool":"write","input":{"path":".pi/agents/admin.md"}}"#.to_string(),
        r#"{"tool":"bash","input":{"command":"echo '{}' > .permfs/config.json"}}"#.to_string(),
        format!(r#"{{"tool":"write","input":{{"path":"{global}"}}}}"#),
    ] {
        let answer = resolve(&config, &cwd, &line);
        assert_eq!(answer["state"], "deny", "{line}: {answer}");
        assert!(
            answer["reason"]
                .as_str()
                .is_some_and(|r| r.contains("permission configuration")),
            "{line}: {answer}"
        );
    }
    let ordinary = resolve(
        &config,
        &cwd,
        r#"{"tool":"write","input":{"path":"src/a.rs"}}"#,
    );
    assert_eq!(ordinary["state"], "allow");
    let reading = resolve(
        &config,
        &cwd,
        r#"{"tool":"read","input":{"path":".permfs/config.json"}}"#,
    );
    assert_eq!(reading["state"], "allow", "reading it is fine");
}
