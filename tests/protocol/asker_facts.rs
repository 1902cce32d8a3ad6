//! Facts are seen from the asker (issue 23, item 3; ADR 0008: the child
//! owns the facts). A sandbox's paths are resolved in its own mount
//! namespace: in its private `/tmp`, `innocent.txt -> /tmp/x` and
//! `x -> /etc/shadow` is a read of `/etc/shadow`, which the daemon, looking
//! in its own `/tmp`, used to take for a harmless `/tmp/x`. Through
//! `permfs run` (bwrap) against a real mount.

use crate::common;

use common::{bwrap_works, Daemon};
use std::process::{Command, Stdio};

/// Reads are allowed, but not under `/etc`.
const CONFIG: &str = r#"{"permission": {"*": "ask", "read": "allow", "path_read": {"*": "allow", "/etc/*": "deny"}, "external_directory": "allow"}}"#;

#[test]
fn a_sandboxs_links_are_followed_in_its_own_namespace() {
    if !bwrap_works() {
        return;
    }
    let daemon = Daemon::start(CONFIG, None);
    let work = daemon.dir.path().join("work").canonicalize().expect("work");
    // The host's /tmp/x, if any, is not the sandbox's.
    let script = r#"
        ask() {
            printf '{"tool":"read","input":{"path":"%s"}}' "$2" > /permfs/outbox/$1.request
            tr -d '\n ' < /permfs/outbox/$1.response; echo
        }
        ln -s /etc/shadow /tmp/x
        ln -s /tmp/x innocent.txt
        ln -s /etc/shadow direct.txt
        echo "innocent=$(ask i innocent.txt)"
        echo "direct=$(ask d direct.txt)"
        echo "plain=$(ask p notes.txt)"
    "#;
    let output = Command::new(env!("CARGO_BIN_EXE_permfs"))
        .arg("run")
        .arg("--mount")
        .arg(&daemon.mountpoint)
        .args(["--", "sh", "-c", script])
        .current_dir(&work)
        .env("PERMFS_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("permfs run runs");
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{output:?}");
    let field = |key: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_default()
            .to_string()
    };
    let innocent = field("innocent");
    assert!(
        innocent.contains(r#""outcome":"deny""#),
        "a read through the sandbox's own /tmp link was not denied: {innocent}"
    );
    assert!(innocent.contains("/etc/shadow"), "{innocent}");
    assert!(field("direct").contains(r#""outcome":"deny""#), "{out}");
    assert!(field("plain").contains(r#""outcome":"allow""#), "{out}");
}
