//! The authorizer chain (ADR 0007): named, non-terminal judges that review
//! an ask at the node that adjudicates it, before the terminal authority.
//!
//! A link answers `allow`, `deny` or `defer`; the first non-`defer` ends the
//! walk. The order is the config's `authorizerChain`; a named link with
//! nothing behind it is skipped; a link's `allow` on the `path` or
//! `external_directory` families (or on facts whose family cannot be told)
//! becomes `defer` unless `authorizerTrust` lists that family for the link.
//! A failing, erroring or silent link counts as `defer`, never as `allow`.

pub mod reaper;
pub mod reviews;

use crate::facts::intent::Family;
use regex::Regex;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a link may take when its config says nothing.
pub const DEFAULT_LINK_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkVerdict {
    Allow,
    Deny(Option<String>),
    Defer,
}

impl LinkVerdict {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny(_) => "deny",
            Self::Defer => "defer",
        }
    }

    pub fn reason(&self) -> Option<&str> {
        match self {
            Self::Deny(reason) => reason.as_deref(),
            _ => None,
        }
    }

    /// `{"verdict": "allow"|"deny"|"defer", "reason": "…"}`; anything else
    /// is an error (which the caller counts as `defer`).
    pub fn from_json(value: &Value) -> Result<Self, String> {
        let verdict = value
            .get("verdict")
            .and_then(Value::as_str)
            .ok_or("a verdict needs \"verdict\": \"allow\" | \"deny\" | \"defer\"")?;
        let reason = value
            .get("reason")
            .and_then(Value::as_str)
            .map(str::to_string);
        match verdict {
            "allow" => Ok(Self::Allow),
            "deny" => Ok(Self::Deny(reason)),
            "defer" => Ok(Self::Defer),
            other => Err(format!("unknown verdict {other:?}")),
        }
    }
}

/// The enforcement checkpoint: a link's `allow` on a path-like family it
/// is not trusted for (or on facts with no family) becomes `defer`.
pub fn checkpoint(verdict: LinkVerdict, families: &[Family], trusted: &[String]) -> LinkVerdict {
    if verdict != LinkVerdict::Allow {
        return verdict;
    }
    if families.is_empty() {
        return LinkVerdict::Defer;
    }
    let capped = families.iter().any(|family| {
        matches!(family, Family::Path | Family::ExternalDirectory)
            && !trusted.iter().any(|t| t == family.name())
    });
    if capped {
        LinkVerdict::Defer
    } else {
        LinkVerdict::Allow
    }
}

/// A judge defined in the config (`"judges": {name: …}`).
#[derive(Debug, Clone)]
pub enum JudgeSpec {
    /// Runs `command` with the review as JSON on stdin; reads the verdict
    /// as JSON on stdout.
    Command {
        command: Vec<String>,
        timeout: Duration,
    },
    /// The typo-path judge: denies an `external_directory` ask whose facts
    /// look like a typo of a path, once a confirmation command agrees.
    TypoPath {
        patterns: Vec<Regex>,
        confirm: Vec<String>,
        timeout: Duration,
        reason: String,
    },
    /// A judge attached through the mount; only its timeout is configured.
    Attached { timeout: Duration },
}

impl JudgeSpec {
    pub fn timeout(&self) -> Duration {
        match self {
            Self::Command { timeout, .. }
            | Self::TypoPath { timeout, .. }
            | Self::Attached { timeout } => *timeout,
        }
    }
}

const DEFAULT_TYPO_REASON: &str =
    "This path looks like a typo (for example /hmoe instead of /home). \
Check the spelling of the directory and ask again with the path you meant.";

/// Parses the config's `judges` object.
pub fn parse_judges(value: Option<&Value>) -> Result<Vec<(String, JudgeSpec)>, String> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let object = value
        .as_object()
        .ok_or("\"judges\" must map link names to judge settings")?;
    object
        .iter()
        .map(|(name, settings)| {
            let place = format!("judges.{name}");
            let settings = settings
                .as_object()
                .ok_or(format!("{place} must be an object"))?;
            const KEYS: &[&str] = &[
                "command",
                "timeoutMs",
                "builtin",
                "typoPatterns",
                "confirmCommand",
                "reason",
            ];
            if let Some(unknown) = settings.keys().find(|k| !KEYS.contains(&k.as_str())) {
                return Err(format!(
                    "{place}: {}",
                    crate::policy::config::unknown_key_message("key", unknown, KEYS)
                ));
            }
            let timeout = match settings.get("timeoutMs") {
                None => DEFAULT_LINK_TIMEOUT,
                Some(v) => Duration::from_millis(v.as_u64().filter(|n| *n >= 1).ok_or(format!(
                    "{place}.timeoutMs must be a whole number of at least 1"
                ))?),
            };
            let strings = |key: &str| -> Result<Option<Vec<String>>, String> {
                match settings.get(key) {
                    None => Ok(None),
                    Some(Value::Array(items)) if !items.is_empty() => items
                        .iter()
                        .map(|i| {
                            i.as_str()
                                .map(str::to_string)
                                .ok_or(format!("{place}.{key} must hold strings"))
                        })
                        .collect::<Result<Vec<_>, _>>()
                        .map(Some),
                    Some(_) => Err(format!("{place}.{key} must be a non-empty list of strings")),
                }
            };
            let spec = match settings.get("builtin").map(|b| b.as_str()) {
                Some(Some("typo-path")) => {
                    let patterns = strings("typoPatterns")?
                        .ok_or(format!(
                            "{place}: the typo-path judge needs \"typoPatterns\""
                        ))?
                        .iter()
                        .map(|p| {
                            Regex::new(p).map_err(|e| format!("{place}.typoPatterns: {p:?}: {e}"))
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    let confirm = strings("confirmCommand")?.ok_or(format!(
                        "{place}: the typo-path judge needs \"confirmCommand\""
                    ))?;
                    let reason = match settings.get("reason") {
                        None => DEFAULT_TYPO_REASON.to_string(),
                        Some(Value::String(r)) => r.clone(),
                        Some(_) => return Err(format!("{place}.reason must be a string")),
                    };
                    JudgeSpec::TypoPath {
                        patterns,
                        confirm,
                        timeout,
                        reason,
                    }
                }
                Some(other) => {
                    return Err(format!(
                        "{place}.builtin: unknown built-in judge {other:?} (known: typo-path)"
                    ))
                }
                None => match strings("command")? {
                    Some(command) => JudgeSpec::Command { command, timeout },
                    None => JudgeSpec::Attached { timeout },
                },
            };
            Ok((name.clone(), spec))
        })
        .collect()
}

/// Most a judge may print: a judge that prints more (`yes`, say) is cut
/// off and its review defers, so the daemon's memory stays bounded.
pub const MAX_JUDGE_OUTPUT: usize = 1 << 20;

/// How often a running judge is checked for having exited while
/// something it left behind still holds its stdout.
const EXIT_CHECK: Duration = Duration::from_millis(20);

/// The process groups of the judges running now, so a stopping daemon
/// can kill them all; with whether each is a reaper (`reaper.rs`), which
/// is told to stop (`SIGTERM`) instead, so it can kill what the judge
/// started before it exits.
static RUNNING: Mutex<BTreeMap<i32, bool>> = Mutex::new(BTreeMap::new());

/// Set once the daemon stops: a judge started after that is killed at once.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// The permfs binary whose `judge-reaper` runs every command judge (set by
/// the mount: its own executable). Unset (the library used on its own, its
/// unit tests), a judge runs in a process group only, which does not hold
/// a descendant that calls `setsid()`.
static REAPER: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Runs every command judge from now on under `binary judge-reaper`.
pub fn use_reaper(binary: std::path::PathBuf) {
    let _ = REAPER.set(binary);
}

/// How long a reaper gets to kill and reap what its judge started before
/// its own group is killed.
const REAPER_GRACE: Duration = Duration::from_secs(2);

/// Kills every running judge's process group (the daemon is stopping), and
/// any judge started from now on.
pub fn kill_running_judges() {
    let groups = {
        let running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
        STOPPING.store(true, Ordering::SeqCst);
        running.clone()
    };
    for (group, reaper) in groups {
        // SAFETY: signalling a process group the daemon started; its
        // leader is not reaped before it leaves RUNNING, so the id is
        // still that group's. A reaper is asked to stop: it kills its
        // judge's whole tree, which a SIGKILL of its own group would not.
        unsafe { libc::killpg(group, if reaper { libc::SIGTERM } else { libc::SIGKILL }) };
    }
}

/// A judge process in its own process group, under a reaper when the
/// mount set one. However the run ends, the whole tree is killed and the
/// leader reaped: nothing a judge starts outlives its review.
struct Contained {
    child: Child,
    group: i32,
    reaped: bool,
    /// The write end of the reaper's lifeline: closing it ends the judge
    /// and everything it started (`reaper.rs`).
    lifeline: Option<std::os::fd::OwnedFd>,
}

impl Contained {
    /// Starts `program` with piped stdin and stdout.
    fn spawn(program: &str, arguments: &[String]) -> std::io::Result<Self> {
        let reaper = REAPER.get();
        let mut lifeline = None;
        let mut command = match reaper {
            Some(binary) => {
                let (read, write) = lifeline_pipe()?;
                let read_fd = std::os::fd::AsRawFd::as_raw_fd(&read);
                let mut command = Command::new(binary);
                command
                    .arg("judge-reaper")
                    .arg(read_fd.to_string())
                    .arg("--")
                    .arg(program)
                    .args(arguments);
                // SAFETY: only fcntl (async-signal-safe) between fork and
                // exec: the reaper keeps the lifeline's read end, which is
                // close-on-exec everywhere else.
                unsafe {
                    command.pre_exec(move || {
                        if libc::fcntl(read_fd, libc::F_SETFD, 0) < 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
                lifeline = Some((read, write));
                command
            }
            None => {
                let mut command = Command::new(program);
                command.args(arguments);
                command
            }
        };
        let child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        // The daemon keeps only the write end.
        let lifeline = lifeline.map(|(read, write)| {
            drop(read);
            write
        });
        let group = child.id() as i32;
        let stopping = {
            let mut running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
            running.insert(group, lifeline.is_some());
            STOPPING.load(Ordering::SeqCst)
        };
        let judge = Self {
            child,
            group,
            reaped: false,
            lifeline,
        };
        if stopping {
            // Dropping it kills it: no judge outlives the daemon.
            return Err(std::io::Error::other("permfs is stopping"));
        }
        Ok(judge)
    }

    /// Whether the leader has exited, without reaping it (a zombie keeps
    /// its id, so the group id cannot be reused before `kill_and_reap`).
    fn leader_exited(&self) -> bool {
        // SAFETY: an all-zero siginfo_t is valid; waitid fills it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waiting (without reaping) for our own child.
        let done = unsafe {
            libc::waitid(
                libc::P_PID,
                self.group as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        // SAFETY: si_pid is set by waitid for WEXITED.
        done == 0 && unsafe { info.si_pid() } != 0
    }

    /// Ends the run: a reaper is told to stop (its lifeline closed) and
    /// given [`REAPER_GRACE`] to kill and reap the judge's whole tree; then
    /// the group (the leader, and anything left in it) is killed and the
    /// leader reaped.
    fn kill_and_reap(&mut self) -> std::io::Result<std::process::ExitStatus> {
        if self.lifeline.take().is_some() {
            let deadline = Instant::now() + REAPER_GRACE;
            while !self.leader_exited() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        // SAFETY: the leader is not reaped yet, so the group id is ours.
        unsafe { libc::killpg(self.group, libc::SIGKILL) };
        let status = self.child.wait();
        self.reaped = true;
        RUNNING
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.group);
        status
    }
}

/// A pipe whose both ends are close-on-exec in the daemon (no other
/// judge started meanwhile inherits them).
fn lifeline_pipe() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both are fresh descriptors owned by nothing else.
    Ok(unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    })
}

impl Drop for Contained {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.kill_and_reap();
        }
    }
}

fn set_nonblocking(fd: i32) -> std::io::Result<()> {
    // SAFETY: fcntl on a descriptor we own.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Runs a command with `input` on stdin; its stdout when it exits 0 in
/// time.
///
/// The judge is contained: it runs in its own process group; its input is
/// written and its output read without blocking (one `poll` loop on this
/// thread, bounded by `timeout`), so a judge that never reads cannot hold
/// the thread; its output is capped at [`MAX_JUDGE_OUTPUT`]; and when it
/// exits, times out or is cut off, its whole group is killed and the
/// leader reaped, so a background child holding stdout neither blocks the
/// review nor outlives it.
pub fn run_command(command: &[String], input: &[u8], timeout: Duration) -> Result<Vec<u8>, String> {
    use std::os::fd::AsRawFd;
    let (program, arguments) = command.split_first().ok_or("empty command")?;
    let deadline = Instant::now() + timeout;
    let mut judge = Contained::spawn(program, arguments)
        .map_err(|e| format!("cannot start {program:?}: {e}"))?;
    let mut stdin = judge.child.stdin.take();
    let mut stdout = judge.child.stdout.take().ok_or("no stdout")?;
    let mut written = 0;
    for fd in stdin
        .iter()
        .map(|s| s.as_raw_fd())
        .chain([stdout.as_raw_fd()])
    {
        set_nonblocking(fd).map_err(|e| format!("cannot set up {program:?}: {e}"))?;
    }
    let mut output = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    if input.is_empty() {
        stdin = None;
    }
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Err(format!("{program:?} did not answer within {timeout:?}"));
        }
        let mut fds = vec![libc::pollfd {
            fd: stdout.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        if let Some(pipe) = &stdin {
            fds.push(libc::pollfd {
                fd: pipe.as_raw_fd(),
                events: libc::POLLOUT,
                revents: 0,
            });
        }
        let wait = (deadline - now).min(EXIT_CHECK);
        // SAFETY: `fds` is a valid array of pollfd for its length.
        let ready = unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                wait.as_millis().max(1) as i32,
            )
        };
        if ready < 0 {
            let error = std::io::Error::last_os_error();
            if error.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("waiting for {program:?}: {error}"));
        }
        if let (Some(pipe), Some(fd)) = (stdin.as_mut(), fds.get(1)) {
            if fd.revents != 0 {
                match pipe.write(&input[written..]) {
                    Ok(n) => written += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    // The judge closed its input: it has read what it wants.
                    Err(_) => written = input.len(),
                }
                if written >= input.len() {
                    // Closing stdin tells the judge the review is complete.
                    stdin = None;
                }
            }
        }
        let mut eof = false;
        if fds[0].revents != 0 {
            eof = drain(&mut stdout, &mut chunk, &mut output)
                .map_err(|e| format!("reading {program:?}: {e}"))?;
        }
        if output.len() > MAX_JUDGE_OUTPUT {
            return Err(format!(
                "{program:?} printed more than {MAX_JUDGE_OUTPUT} bytes; its review defers"
            ));
        }
        if eof {
            break;
        }
        // The judge exited but something it started still holds stdout:
        // take what is there now and stop waiting.
        if judge.leader_exited() {
            drain(&mut stdout, &mut chunk, &mut output)
                .map_err(|e| format!("reading {program:?}: {e}"))?;
            if output.len() > MAX_JUDGE_OUTPUT {
                return Err(format!(
                    "{program:?} printed more than {MAX_JUDGE_OUTPUT} bytes; its review defers"
                ));
            }
            break;
        }
    }
    // Output is complete: wait (until the deadline) for the leader to exit.
    drop(stdin);
    while !judge.leader_exited() {
        if Instant::now() >= deadline {
            return Err(format!("{program:?} did not answer within {timeout:?}"));
        }
        std::thread::sleep(Duration::from_millis(2).min(EXIT_CHECK));
    }
    let status = judge.kill_and_reap().map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("{program:?} exited with {status}"));
    }
    Ok(output)
}

/// Reads what a non-blocking pipe holds now (at most one chunk past the
/// cap); `true` at end of file.
fn drain(pipe: &mut impl Read, chunk: &mut [u8], output: &mut Vec<u8>) -> std::io::Result<bool> {
    loop {
        match pipe.read(chunk) {
            Ok(0) => return Ok(true),
            Ok(n) => {
                output.extend_from_slice(&chunk[..n]);
                if output.len() > MAX_JUDGE_OUTPUT {
                    return Ok(false);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Runs a configured judge on a review, for at most `time` (its timeout,
/// or what is left of it). Errors count as `defer`.
pub fn run_judge(spec: &JudgeSpec, review: &Value, time: Duration) -> Result<LinkVerdict, String> {
    let payload = serde_json::to_vec(review).map_err(|e| e.to_string())?;
    let time = time.min(spec.timeout());
    match spec {
        JudgeSpec::Command { command, .. } => {
            let output = run_command(command, &payload, time)?;
            let value: Value =
                serde_json::from_slice(&output).map_err(|e| format!("verdict is not JSON: {e}"))?;
            LinkVerdict::from_json(&value)
        }
        JudgeSpec::TypoPath {
            patterns,
            confirm,
            reason,
            ..
        } => {
            let Some(suspect) = typo_candidate(patterns, review) else {
                return Ok(LinkVerdict::Defer);
            };
            let question = serde_json::json!({"path": suspect, "review": review});
            let output = run_command(
                confirm,
                &serde_json::to_vec(&question).map_err(|e| e.to_string())?,
                time,
            )?;
            let answer = String::from_utf8_lossy(&output);
            let confirmed = match serde_json::from_str::<Value>(&answer) {
                Ok(value) => value.get("typo").and_then(Value::as_bool).unwrap_or(false),
                Err(_) => answer.trim().eq_ignore_ascii_case("yes"),
            };
            Ok(if confirmed {
                LinkVerdict::Deny(Some(format!("{reason} (path: {suspect})")))
            } else {
                LinkVerdict::Defer
            })
        }
        JudgeSpec::Attached { .. } => Err("an attached judge is served through the mount".into()),
    }
}

/// The first `external_directory` match value a typo pattern matches.
fn typo_candidate(patterns: &[Regex], review: &Value) -> Option<String> {
    review
        .get("facts")?
        .as_array()?
        .iter()
        .filter(|f| {
            f.get("surface")
                .and_then(Value::as_str)
                .is_some_and(|s| Family::of(s) == Family::ExternalDirectory)
        })
        .filter_map(|f| f.get("matchValues").and_then(Value::as_array))
        .flatten()
        .filter_map(Value::as_str)
        .find(|value| patterns.iter().any(|p| p.is_match(value)))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn checkpoint_caps_path_families_unless_trusted() {
        use Family::*;
        assert_eq!(
            checkpoint(LinkVerdict::Allow, &[Bash], &[]),
            LinkVerdict::Allow
        );
        assert_eq!(
            checkpoint(LinkVerdict::Allow, &[Path, Tool], &[]),
            LinkVerdict::Defer
        );
        assert_eq!(
            checkpoint(LinkVerdict::Allow, &[ExternalDirectory], &[]),
            LinkVerdict::Defer
        );
        assert_eq!(checkpoint(LinkVerdict::Allow, &[], &[]), LinkVerdict::Defer);
        assert_eq!(
            checkpoint(LinkVerdict::Allow, &[Path], &["path".to_string()]),
            LinkVerdict::Allow
        );
        assert_eq!(
            checkpoint(
                LinkVerdict::Allow,
                &[Path, ExternalDirectory],
                &["path".to_string()]
            ),
            LinkVerdict::Defer
        );
        assert_eq!(
            checkpoint(LinkVerdict::Deny(None), &[Path], &[]),
            LinkVerdict::Deny(None)
        );
    }

    #[test]
    fn command_judges_that_fail_are_errors() {
        let review = json!({"facts": []});
        let ok = JudgeSpec::Command {
            command: vec![
                "sh".into(),
                "-c".into(),
                "cat >/dev/null; echo '{\"verdict\":\"deny\",\"reason\":\"no\"}'".into(),
            ],
            timeout: Duration::from_secs(5),
        };
        assert_eq!(
            run_judge(&ok, &review, ok.timeout()),
            Ok(LinkVerdict::Deny(Some("no".into())))
        );
        let crash = JudgeSpec::Command {
            command: vec!["sh".into(), "-c".into(), "exit 3".into()],
            timeout: Duration::from_secs(5),
        };
        assert!(run_judge(&crash, &review, crash.timeout()).is_err());
        let slow = JudgeSpec::Command {
            command: vec!["sleep".into(), "5".into()],
            timeout: Duration::from_millis(100),
        };
        assert!(run_judge(&slow, &review, slow.timeout()).is_err());
        let garbage = JudgeSpec::Command {
            command: vec!["echo".into(), "allow".into()],
            timeout: Duration::from_secs(5),
        };
        assert!(run_judge(&garbage, &review, garbage.timeout()).is_err());
    }

    /// Live (not zombie) processes in process group `group`.
    fn live_in_group(group: i32) -> usize {
        std::fs::read_dir("/proc")
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
                    .filter(|stat| {
                        // pid (comm) state ppid pgrp …
                        let fields: Vec<&str> = stat
                            .rsplit_once(')')
                            .map(|(_, rest)| rest.split_whitespace().collect())
                            .unwrap_or_default();
                        fields.first() != Some(&"Z")
                            && fields.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(group)
                    })
                    .count()
            })
            .unwrap_or(0)
    }

    fn group_of(pid_file: &std::path::Path) -> i32 {
        std::fs::read_to_string(pid_file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or_else(|| panic!("{} holds the judge's pid", pid_file.display()))
    }

    fn gone(group: i32) -> bool {
        let deadline = Instant::now() + Duration::from_secs(2);
        while live_in_group(group) > 0 {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }

    fn sh(script: String) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script]
    }

    #[test]
    fn a_judge_that_never_reads_its_input_times_out_and_its_group_dies() {
        let dir = tempfile::tempdir().expect("temp");
        let pid = dir.path().join("pid");
        // Far more than a pipe holds: a blocking write would hang here.
        let input = vec![b'x'; 4 << 20];
        let started = Instant::now();
        let result = run_command(
            &sh(format!(
                "echo $$ > {}; sleep 100 & sleep 100",
                pid.display()
            )),
            &input,
            Duration::from_millis(300),
        );
        let took = started.elapsed();
        assert!(result
            .expect_err("timed out")
            .contains("did not answer within"));
        assert!(took < Duration::from_secs(2), "took {took:?}");
        assert!(
            gone(group_of(&pid)),
            "the judge's group is killed and reaped"
        );
    }

    #[test]
    fn a_judge_that_prints_without_end_is_cut_off() {
        let dir = tempfile::tempdir().expect("temp");
        let pid = dir.path().join("pid");
        let started = Instant::now();
        let result = run_command(
            &sh(format!("echo $$ > {}; exec yes", pid.display())),
            b"{}",
            Duration::from_secs(10),
        );
        assert!(result.expect_err("cut off").contains("printed more than"));
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(gone(group_of(&pid)));
    }

    #[test]
    fn a_background_child_holding_stdout_neither_blocks_nor_outlives_the_judge() {
        let dir = tempfile::tempdir().expect("temp");
        let pid = dir.path().join("pid");
        let started = Instant::now();
        let result = run_command(
            &sh(format!(
                "cat >/dev/null; echo $$ > {}; sleep 100 & echo '{{\"verdict\":\"deny\"}}'",
                pid.display()
            )),
            b"{}",
            Duration::from_secs(10),
        );
        assert_eq!(result.as_deref(), Ok(&b"{\"verdict\":\"deny\"}\n"[..]));
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert!(gone(group_of(&pid)), "the background child is killed");
    }

    #[test]
    fn judges_config_is_validated() {
        let parsed = parse_judges(Some(&json!({
            "lint": {"command": ["python3", "judge.py"], "timeoutMs": 2000},
            "typo": {"builtin": "typo-path", "typoPatterns": ["^/hmoe/"], "confirmCommand": ["true"]},
            "human-bot": {}
        })))
        .expect("valid");
        assert_eq!(parsed.len(), 3);
        assert!(matches!(parsed[2].1, JudgeSpec::Attached { .. }));
        for (bad, needle) in [
            (json!({"x": {"comand": ["a"]}}), "did you mean \"command\""),
            (json!({"x": {"builtin": "magic"}}), "unknown built-in"),
            (
                json!({"x": {"builtin": "typo-path", "typoPatterns": ["("], "confirmCommand": ["true"]}}),
                "typoPatterns",
            ),
            (json!({"x": {"command": []}}), "non-empty"),
        ] {
            let error = parse_judges(Some(&bad)).expect_err("invalid");
            assert!(error.contains(needle), "{error}");
        }
    }
}
