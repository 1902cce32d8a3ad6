//! `permfs hook`: the command hook for Claude Code and Codex.
//!
//! The agent runs it before every tool call (and on the life of sessions
//! and subagents) with one JSON event on stdin; it answers on stdout. It is
//! only a client of the mount, like `permfs prompt`: sessions are spawned
//! and ended through `ctl`, asks go through the one-descriptor
//! `outbox/<rid>`, so the daemon's rules, spawn rule, grants, audit log and
//! the people deciding upstream all apply unchanged.
//!
//! It never answers `allow` unless permfs did. Both agents treat a hook
//! that crashes or exits with a status other than 0 and 2 as a
//! *non-blocking* error (the tool call goes ahead), so every failure here,
//! a panic included, prints a `deny` and exits 2 with the reason on
//! stderr: exit 2 blocks in both, and the JSON `deny` covers an agent that
//! reads stdout.

pub use super::hook_config::AgentKind;
use super::hook_config::{hook_command, running_binary, settings_snippet};
use super::hook_event::{parse_event, session_name, Action, HookEvent};
use super::hook_install;
use super::hook_memo;
use super::mount_client::MountClient;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// The largest event read from stdin (a Write of a big file carries its
/// content; permfs needs only the path, but the event must parse).
const MAX_EVENT: u64 = 16 * 1024 * 1024;

/// How long ending a session may take: the agents give `SessionEnd` 1.5 s
/// (Claude Code) and 3 s (Codex), and a hook they kill is only a warning
/// there, but a prompt exit says what went wrong.
const SESSION_END_DEADLINE: Duration = Duration::from_secs(1);

#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "See docs/claude-code.md and docs/codex.md."
)]
pub struct HookArgs {
    #[command(subcommand)]
    pub action: Option<HookAction>,
    /// The permfs mount (default: $PERMFS_MOUNT, else ./mount).
    #[arg(long)]
    pub mount: Option<PathBuf>,
    /// The session the agent's sessions are spawned under, by id
    /// (`main`, `main/team`). Ignored when $PERMFS_SESSION names the
    /// agent's session itself.
    #[arg(long, default_value = "main")]
    pub parent: String,
    /// How long the hook may take before it denies on its own (seconds):
    /// a watchdog covers the whole run (a mount that does not answer, a
    /// person who does not decide). The default outlasts permfs's own
    /// `forwardingTimeoutMs` (600 s by default, which answers with a
    /// reason); keep it below the agent's hook timeout, because a hook the
    /// agent kills is a non-blocking error there.
    #[arg(long, default_value_t = 605)]
    pub timeout_secs: u64,
    /// The agent whose answer format to use (Codex accepts no `allow` at
    /// PreToolUse). Without it, an event with a `turn_id` is Codex's.
    #[arg(long, value_enum)]
    pub agent: Option<AgentKind>,
    /// Print the settings for this agent (the hooks object of Claude
    /// Code's settings.json / Codex's hooks.json) and exit.
    #[arg(long, value_enum)]
    pub print_config: Option<AgentKind>,
}

#[derive(Debug, clap::Subcommand)]
pub enum HookAction {
    /// Merge permfs's hooks into the agent's settings (a backup is kept;
    /// other hooks stay) and say what trust step remains.
    #[command(after_help = "See docs/claude-code.md and docs/codex.md.")]
    Install(hook_install::InstallArgs),
    /// Tell whether the agent will really run permfs's hooks: installed,
    /// trusted (Codex), binary executable, mount there, timeouts kept.
    #[command(after_help = "See docs/claude-code.md and docs/codex.md.")]
    Check(hook_install::CheckArgs),
}

/// How a run ends.
#[derive(Debug)]
enum Outcome {
    /// permfs answered a tool call.
    Decided { allow: bool, reason: String },
    /// A lifecycle event was handled (nothing to decide).
    Done,
    /// Something failed: deny, and say what to fix.
    Failed(String),
}

/// The form an answer takes: who asked, and at which event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// Claude Code's PreToolUse: `permissionDecision` allow or deny.
    ClaudePreToolUse,
    /// Codex's PreToolUse: only a deny is an answer; an allow is silence
    /// (Codex reports `permissionDecision: "allow"` as an unsupported
    /// output and a failed hook), and the call goes on to Codex's own
    /// approval, where the `PermissionRequest` hook answers for permfs.
    CodexPreToolUse,
    /// `PermissionRequest` (Codex, and Claude Code when configured):
    /// `decision.behavior` allow or deny.
    PermissionRequest,
}

/// The form of this run's answer, once the event is known; failures
/// before that print a PreToolUse deny (exit 2 blocks whatever stdout
/// holds).
static FORM: OnceLock<Form> = OnceLock::new();

/// `permfs hook …` on its own: `args` from `hook` on. Parses with the same
/// definitions as `permfs hook` under the whole command line, so both
/// accept the same arguments; a usage error exits 2 (clap's), which both
/// agents read as blocking.
pub fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> i32 {
    use clap::{Args, FromArgMatches};
    let command = HookArgs::augment_args(
        clap::Command::new("hook")
            .bin_name("permfs hook")
            .about("Answer one Claude Code / Codex hook event from permfs (stdin to stdout)"),
    );
    let parsed = command
        .try_get_matches_from(args)
        .and_then(|matches| HookArgs::from_arg_matches(&matches));
    match parsed {
        Ok(args) => run(args),
        Err(error) => error.exit(),
    }
}

pub fn run(args: HookArgs) -> i32 {
    match args.action {
        Some(HookAction::Install(install)) => return hook_install::install(install),
        Some(HookAction::Check(check)) => return hook_install::check(check),
        None => {}
    }
    if let Some(agent) = args.print_config {
        return match print_config(agent, &args) {
            Ok(text) => {
                print!("{text}");
                0
            }
            Err(reason) => {
                eprintln!("permfs hook --print-config: {reason}");
                1
            }
        };
    }
    // A panic must block the call too, never leave it to the agent.
    std::panic::set_hook(Box::new(|info| {
        fail_closed(&format!("permfs hook crashed: {info}"));
        std::process::exit(2);
    }));
    let deadline = Duration::from_secs(args.timeout_secs.max(1));
    arm_watchdog(
        deadline,
        format!(
            "permfs hook: no answer within {}s (the hook's --timeout-secs): the call is blocked and the ask withdrawn; answer it sooner, or raise --timeout-secs and the agent's hook timeout together",
            deadline.as_secs()
        ),
    );
    match handle(&args) {
        Outcome::Decided { allow, reason } => {
            if print_decision(allow, &reason) {
                0
            } else {
                // The answer did not get out: exit 2 (blocking) with the
                // reason, so an unprinted deny is still a deny.
                let _ = writeln!(std::io::stderr(), "{reason}");
                2
            }
        }
        Outcome::Done => {
            println!("{{}}");
            0
        }
        Outcome::Failed(reason) => {
            fail_closed(&reason);
            2
        }
    }
}

/// The settings for `agent`, naming this very binary.
fn print_config(agent: AgentKind, args: &HookArgs) -> Result<String, String> {
    let binary = running_binary()?;
    let mount = match args.mount.clone().or_else(|| {
        std::env::var_os("PERMFS_MOUNT")
            .filter(|m| !m.is_empty())
            .map(PathBuf::from)
    }) {
        Some(mount) => Some(std::fs::canonicalize(&mount).map_err(|e| {
            format!(
                "the mount {} cannot be resolved ({e}); start permfs mount first",
                mount.display()
            )
        })?),
        None => None,
    };
    let command = hook_command(&binary, agent, args.timeout_secs, mount.as_deref())?;
    Ok(settings_snippet(agent, &command, args.timeout_secs))
}

/// Denies on its own when the run outlasts `after`: whatever hangs (a
/// mount whose daemon is stopped, a person who does not answer), the
/// agent gets a blocking answer before its own timeout, which would not
/// block. Exiting closes the ask's descriptor, which withdraws the ask.
///
/// A thread, not an `alarm(2)`: a signal handler runs only once the
/// blocked syscall returns, and a read on a FUSE file whose daemon is
/// stopped does not return (after the kernel's interrupt it waits
/// killably), while a thread's exit ends the process wherever the main
/// thread waits. Its stack is small (it formats one line).
fn arm_watchdog(after: Duration, reason: String) {
    let watchdog = move || {
        std::thread::sleep(after);
        fail_closed(&reason);
        std::process::exit(2);
    };
    if let Err(error) = std::thread::Builder::new()
        .stack_size(WATCHDOG_STACK)
        .spawn(watchdog)
    {
        // No watchdog, no deadline: block now rather than risk the
        // agent's own timeout, which would not block.
        fail_closed(&format!(
            "permfs hook: cannot start its watchdog ({error}): the call is blocked"
        ));
        std::process::exit(2);
    }
}

/// The watchdog thread's stack: it sleeps, formats one answer and exits.
const WATCHDOG_STACK: usize = 64 * 1024;

/// Prints the answer in this run's form; false when it could not be
/// written whole.
fn print_decision(allow: bool, reason: &str) -> bool {
    let form = FORM.get().copied().unwrap_or(Form::ClaudePreToolUse);
    let answer = match form {
        Form::CodexPreToolUse if allow => return true,
        Form::ClaudePreToolUse | Form::CodexPreToolUse => {
            json!({"hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": if allow { "allow" } else { "deny" },
                "permissionDecisionReason": reason,
            }})
        }
        Form::PermissionRequest if allow => json!({"hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow"},
        }}),
        Form::PermissionRequest => json!({"hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": reason},
        }}),
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{answer}").and_then(|()| out.flush()).is_ok()
}

/// A deny on stdout and the reason on stderr (what exit 2 shows).
fn fail_closed(reason: &str) {
    let _ = print_decision(false, reason);
    let _ = writeln!(std::io::stderr(), "{reason}");
}

/// The answer form for `event`, from `--agent` or the event's shape.
fn form_of(agent: Option<AgentKind>, raw: &Value, event: &HookEvent) -> Form {
    let agent = agent.unwrap_or(if raw.get("turn_id").is_some() {
        AgentKind::Codex
    } else {
        AgentKind::ClaudeCode
    });
    match (event.event_name.as_str(), agent) {
        ("PermissionRequest", _) => Form::PermissionRequest,
        (_, AgentKind::Codex) => Form::CodexPreToolUse,
        (_, AgentKind::ClaudeCode) => Form::ClaudePreToolUse,
    }
}

fn handle(args: &HookArgs) -> Outcome {
    let mut text = String::new();
    if let Err(error) = std::io::stdin().take(MAX_EVENT).read_to_string(&mut text) {
        return Outcome::Failed(format!(
            "permfs hook: the event on stdin could not be read: {error}"
        ));
    }
    let event: Value = match serde_json::from_str(&text) {
        Ok(event) => event,
        Err(error) => {
            return Outcome::Failed(format!(
                "permfs hook: the event on stdin is not JSON ({error}); run permfs hook only as the agent's command hook"
            ))
        }
    };
    let raw = event;
    let event = match parse_event(&raw) {
        Ok(event) => event,
        Err(error) => return Outcome::Failed(format!("permfs hook: {error}")),
    };
    let _ = FORM.set(form_of(args.agent, &raw, &event));
    if event.action == Action::EndSession {
        arm_watchdog(
            SESSION_END_DEADLINE,
            format!(
                "permfs hook: ending the agent's session took over {}s (is the daemon stopped?)",
                SESSION_END_DEADLINE.as_secs()
            ),
        );
    }
    in_worker(|| {
        let fixed = std::env::var("PERMFS_SESSION")
            .ok()
            .filter(|s| !s.is_empty());
        // In a `permfs run` sandbox $PERMFS_SESSION is the session's
        // directory (`/permfs`), and the mount itself is not there.
        let (tree, fixed) = match fixed {
            Some(dir) if dir.starts_with('/') => (
                MountClient::inside(PathBuf::from(dir)),
                Some(".".to_string()),
            ),
            fixed => (MountClient::from_arg(args.mount.clone()), fixed),
        };
        let client = Client { tree };
        match act(&client, &args.parent, fixed.as_deref(), &event) {
            Ok(outcome) => outcome,
            Err(reason) => Outcome::Failed(format!("permfs hook: {reason}")),
        }
    })
}

/// Runs `work`, everything that touches the mount, in a child process,
/// and returns what it decided.
///
/// Why a process: a signal to a process blocked on a FUSE request makes
/// the kernel send the server an interrupt and then wait for the server's
/// answer *uninterruptibly*; not even `SIGKILL` ends that wait. A server
/// that is stopped or hung would so hold the hook, its watchdog's exit
/// included, past the agent's own hook timeout, and an agent's timeout
/// does not block the call: the one way a hook would fail open. The child
/// holds none of the agent's pipes (its standard streams are
/// `/dev/null`; the answer comes back through a pipe of its own) and dies
/// with the hook (`PR_SET_PDEATHSIG`), so the hook itself, which only
/// waits on that pipe, always answers and exits by its deadline; a child
/// stuck in the kernel ends when the server answers (or its mount goes).
fn in_worker(work: impl FnOnce() -> Outcome) -> Outcome {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two descriptors it is given room for.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Outcome::Failed(format!(
            "permfs hook: cannot make a pipe: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: pipe2 just made these two descriptors, owned here alone.
    let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: getpid cannot fail.
    let hook = unsafe { libc::getpid() };
    // SAFETY: the child runs `work` and leaves with `_exit`; the only other
    // thread here (the watchdog) sleeps, and glibc keeps `malloc` usable
    // in the child of a fork.
    match unsafe { libc::fork() } {
        -1 => Outcome::Failed(format!(
            "permfs hook: cannot start its worker: {}",
            std::io::Error::last_os_error()
        )),
        0 => {
            drop(reader);
            detach_from_agent(hook);
            let answer = encode(&work());
            let mut pipe = std::fs::File::from(writer);
            let _ = pipe.write_all(answer.as_bytes());
            drop(pipe);
            // SAFETY: ends the child without running the hook's atexit
            // handlers or flushing its (inherited) buffers.
            unsafe { libc::_exit(0) }
        }
        worker => {
            drop(writer);
            let mut answer = String::new();
            let read = std::fs::File::from(reader).read_to_string(&mut answer);
            let mut status = 0;
            // SAFETY: reaps the child just forked.
            unsafe { libc::waitpid(worker, &mut status, 0) };
            match read.ok().and_then(|_| decode(&answer)) {
                Some(outcome) => outcome,
                None => Outcome::Failed(
                    "permfs hook: its worker ended without an answer (it crashed?): the call is blocked"
                        .into(),
                ),
            }
        }
    }
}

/// In the worker: standard streams to `/dev/null` (nothing the agent waits
/// on stays open here), and death with the hook (`hook` its pid: a hook
/// that died before this line leaves nothing to answer).
fn detach_from_agent(hook: libc::pid_t) {
    // SAFETY: plain system calls on this process's own descriptors.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        for fd in 0..3 {
            if null < 0 || libc::dup2(null, fd) < 0 {
                libc::close(fd);
            }
        }
        if null > 2 {
            libc::close(null);
        }
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != hook {
            libc::_exit(0);
        }
    }
}

/// The worker's outcome as text for the pipe: a tag, the reason's length
/// in bytes, `:`, the reason.
fn encode(outcome: &Outcome) -> String {
    let (tag, reason) = match outcome {
        Outcome::Decided {
            allow: true,
            reason,
        } => ('A', reason.as_str()),
        Outcome::Decided {
            allow: false,
            reason,
        } => ('D', reason.as_str()),
        Outcome::Done => ('N', ""),
        Outcome::Failed(reason) => ('F', reason.as_str()),
    };
    format!("{tag}{}:{reason}", reason.len())
}

/// [`encode`] undone; `None` for anything else, such as the part of an
/// answer a worker wrote before it died.
fn decode(text: &str) -> Option<Outcome> {
    let tag = text.chars().next()?;
    let (length, reason) = text.get(1..)?.split_once(':')?;
    if length.parse::<usize>().ok()? != reason.len() {
        return None;
    }
    let reason = reason.to_string();
    match tag {
        'A' => Some(Outcome::Decided {
            allow: true,
            reason,
        }),
        'D' => Some(Outcome::Decided {
            allow: false,
            reason,
        }),
        'N' if reason.is_empty() => Some(Outcome::Done),
        'F' => Some(Outcome::Failed(reason)),
        _ => None,
    }
}

/// The agent's session id: `$PERMFS_SESSION` when the agent runs inside a
/// session permfs made for it, else a child of the parent named after the
/// agent's session id.
fn agent_session(parent: &str, fixed: Option<&str>, event: &HookEvent) -> (String, bool) {
    match fixed {
        Some(id) => (id.to_string(), false),
        None => (
            format!("{parent}/{}", session_name(&event.session_id)),
            true,
        ),
    }
}

fn act(
    client: &Client,
    parent: &str,
    fixed: Option<&str>,
    event: &HookEvent,
) -> Result<Outcome, String> {
    let (session, managed) = agent_session(parent, fixed, event);
    // The mount is found by path (`--mount`, `$PERMFS_MOUNT`, `./mount`,
    // `$PERMFS_SESSION`): it must be a real permfs mount owned by root or
    // this uid before anything read there counts, or a lookalike directory
    // in the project could answer `allow` (fail closed: the call is
    // blocked with the reason). A missing one gets `check_mount`'s words.
    if let Err(why) = client.tree.verify() {
        return Err(client.tree.check_mount().err().unwrap_or(why));
    }
    // The agent's session there answers for the rest of the mount (one
    // lookup where checking it first took three, before every tool call);
    // when it is not, the mount is checked, for the error that says what
    // is wrong.
    let session_there = client.tree.exists(&session);
    if !session_there {
        client.tree.check_mount()?;
    }
    let ensure_session = || {
        if session_there {
            Ok(())
        } else {
            client.ensure(&session, managed.then_some(event.cwd.as_str()), None)
        }
    };
    match &event.action {
        Action::Nothing => Ok(Outcome::Done),
        Action::StartSession => {
            ensure_session()?;
            Ok(Outcome::Done)
        }
        Action::EndSession => {
            if managed {
                client.tree.end(&session)?;
            }
            Ok(Outcome::Done)
        }
        Action::StartSubagent {
            agent_id,
            agent_type,
        } => {
            ensure_session()?;
            let child = format!("{session}/{}", session_name(agent_id));
            client.ensure(&child, None, agent_type.as_deref())?;
            Ok(Outcome::Done)
        }
        Action::StopSubagent { agent_id } => {
            client
                .tree
                .end(&format!("{session}/{}", session_name(agent_id)))?;
            Ok(Outcome::Done)
        }
        Action::Ask {
            request,
            agent_id,
            agent_type,
        } => {
            ensure_session()?;
            let asker = match agent_id {
                Some(agent_id) => {
                    let child = format!("{session}/{}", session_name(agent_id));
                    client.ensure(&child, None, agent_type.as_deref())?;
                    child
                }
                None => session.clone(),
            };
            let form = FORM.get().copied();
            if form == Some(Form::PermissionRequest) {
                if let Some(reason) = hook_memo::take(&session, &asker, request) {
                    return Ok(Outcome::Decided {
                        allow: true,
                        reason: format!("{reason} (at PreToolUse, moments before)"),
                    });
                }
            }
            let answer = client.ask(&asker, request)?;
            let outcome = decision(&answer);
            // A person's one-time allow at Codex's PreToolUse answers the
            // PermissionRequest of the same call (see hook_memo).
            if let (
                Some(Form::CodexPreToolUse),
                Outcome::Decided {
                    allow: true,
                    reason,
                },
            ) = (form, &outcome)
            {
                if answer["decidedBy"]["kind"] == "user" {
                    hook_memo::remember(&session, &asker, request, reason);
                }
            }
            Ok(outcome)
        }
    }
}

/// The hook's answer from permfs's response: `allow` only when permfs
/// approved; every other outcome is a deny that says what happened.
fn decision(answer: &Value) -> Outcome {
    let outcome = answer["outcome"].as_str().unwrap_or("");
    let approved = answer["approved"].as_bool() == Some(true);
    let by = describe(&answer["decidedBy"]);
    if approved && outcome == "allow" {
        return Outcome::Decided {
            allow: true,
            reason: format!("permfs: allowed by {by}"),
        };
    }
    let why = answer["denialReason"]
        .as_str()
        .filter(|r| !r.is_empty())
        .map(|r| format!(": {r}"))
        .unwrap_or_default();
    let reason = match outcome {
        "deny" => format!("permfs: denied by {by}{why}"),
        "timeout" => format!("permfs: nobody answered in time (forwardingTimeoutMs){why}"),
        "no_decider" => format!(
            "permfs: no session up the tree decides asks (make the root interactive, or add a rule){why}"
        ),
        "session_ended" => format!("permfs: the session ended before an answer{why}"),
        "cancelled" => format!("permfs: the ask was withdrawn (daemon stopping?){why}"),
        "invalid" => format!("permfs: the request was invalid{why}"),
        other => format!("permfs: not allowed ({other}, {by}){why}"),
    };
    Outcome::Decided {
        allow: false,
        reason,
    }
}

/// `rule bash "git *" (global)`, `a person at main`, …
fn describe(by: &Value) -> String {
    let kind = by["kind"].as_str().unwrap_or("unknown");
    match kind {
        "rule" | "session_approval" | "yolo" => {
            let mut text = match kind {
                "rule" => "rule".to_string(),
                "yolo" => "yolo mode".to_string(),
                _ => "a session grant".to_string(),
            };
            if let Some(surface) = by["surface"].as_str() {
                text.push_str(&format!(" {surface}"));
            }
            if let Some(pattern) = by["pattern"].as_str() {
                text.push_str(&format!(" {pattern:?}"));
            }
            if let Some(origin) = by["origin"].as_str() {
                text.push_str(&format!(" ({origin})"));
            }
            text
        }
        "user" => format!(
            "a person at {}",
            by["session"].as_str().unwrap_or("a session")
        ),
        other => other.replace('_', " "),
    }
}

/// The mount, as the hook uses it: spawn, end and ask (the run's
/// watchdog is the deadline).
struct Client {
    tree: MountClient,
}

impl Client {
    /// Makes sure session `id` exists, spawning it through its parent's
    /// `ctl` (with `cwd`, when given, and `agent`) when it does not.
    fn ensure(&self, id: &str, cwd: Option<&str>, agent: Option<&str>) -> Result<(), String> {
        if self.tree.exists(id) {
            return Ok(());
        }
        let Some((parent, name)) = id.rsplit_once('/') else {
            return Err(format!(
                "session {id} does not exist at {}: check $PERMFS_SESSION / --parent",
                self.tree.mount.display()
            ));
        };
        let mut command = format!("spawn {name}");
        if let Some(agent) = agent {
            command.push_str(&format!(" agent={}", session_name(agent)));
        }
        if let Some(cwd) = cwd {
            if cwd.chars().any(char::is_whitespace) {
                return Err(format!(
                    "cannot spawn session {id}: its cwd {cwd:?} holds a blank, which ctl cannot take; run the agent from a directory without blanks"
                ));
            }
            command.push_str(&format!(" cwd={cwd}"));
        }
        command.push('\n');
        match self.tree.control(parent, &command) {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(()),
            // Hooks of one agent session run concurrently (Codex launches
            // them together): whatever a spawn that lost the race to
            // another says (a daemon before the fix said EINVAL), the
            // session is there.
            Err(_) if self.tree.exists(id) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EACCES) => Err(format!(
                "permfs refused to spawn session {id} under {parent} (the spawn rule: an agent's session must lie inside its parent's cwd; cwd {}): start the agent inside {parent}'s cwd, or pick a --parent whose cwd contains it",
                cwd.unwrap_or("inherited")
            )),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Err(format!(
                "session {parent} does not exist at {} (check --parent / $PERMFS_SESSION)",
                self.tree.mount.display()
            )),
            Err(e) => Err(format!("cannot spawn session {id} under {parent}: {e}")),
        }
    }

    /// Asks `request` as session `id` on one descriptor of its `ask`
    /// file; the run's watchdog ends a wait that outlasts
    /// `--timeout-secs`, and the exit closes the descriptor, which
    /// withdraws the ask.
    fn ask(&self, id: &str, request: &Value) -> Result<Value, String> {
        let path = self.tree.dir(id).join("ask");
        exchange(&path, &request.to_string())
            .map_err(|e| format!("cannot ask as session {id}: {e}"))
    }
}

/// The buffer an answer is read into at first (it grows for a larger one).
const ANSWER_CAPACITY: usize = 16 * 1024;

/// The one-descriptor ask: open the session's `ask` file, write the
/// request, read the answer.
///
/// Each round trip to the daemon costs the hook 0.1 to 0.2 ms on a machine
/// whose daemon has been idle (BENCHMARKS.md section 9), so this takes the
/// fewest: the `ask` file exists, so opening it is one `OPEN` (an outbox
/// name created afresh is a `LOOKUP` and a `CREATE`), and the answer is
/// taken as soon as it is one whole JSON value, without the read that
/// would only find the end of the file. A prefix of a JSON object never
/// parses as one, so a short read only means reading on.
fn exchange(path: &Path, body: &str) -> std::io::Result<Value> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    file.write_all(body.as_bytes())?;
    // Room for a whole answer up front: from an empty buffer std reads in
    // growing steps, each read a round trip to the daemon.
    let mut answer = Vec::with_capacity(ANSWER_CAPACITY);
    let mut chunk = vec![0u8; ANSWER_CAPACITY];
    loop {
        let read = match (&file).read(&mut chunk) {
            Ok(read) => read,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        answer.extend_from_slice(&chunk[..read]);
        match serde_json::from_slice::<Value>(&answer) {
            Ok(value) => return Ok(value),
            Err(e) if read == 0 || !e.is_eof() => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("the answer is not JSON: {e}"),
                ))
            }
            // The answer so far ends early: read on.
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_approved_allow_allows() {
        let allow = |v: Value| matches!(decision(&v), Outcome::Decided { allow: true, .. });
        assert!(allow(
            json!({"approved": true, "outcome": "allow", "decidedBy": {"kind": "rule"}})
        ));
        assert!(!allow(json!({"approved": true, "outcome": "timeout"})));
        assert!(!allow(json!({"approved": false, "outcome": "allow"})));
        assert!(!allow(json!({"outcome": "allow"})));
        assert!(!allow(json!({})));
    }

    #[test]
    fn the_workers_answer_survives_the_pipe_and_a_torn_one_is_none() {
        for outcome in [
            Outcome::Decided {
                allow: true,
                reason: "rule bash \"git *\"\nat main".into(),
            },
            Outcome::Decided {
                allow: false,
                reason: String::new(),
            },
            Outcome::Done,
            Outcome::Failed("no mount".into()),
        ] {
            let text = encode(&outcome);
            assert_eq!(decode(&text).map(|o| encode(&o)), Some(text.clone()));
            // Cut anywhere, it is no answer (never an allow).
            for cut in 0..text.len() {
                if let Some(part) = text.get(..cut) {
                    assert!(decode(part).is_none(), "{part:?}");
                }
            }
        }
    }

    #[test]
    fn reasons_name_the_rule_or_the_person() {
        let Outcome::Decided { reason, .. } = decision(&json!({
            "approved": false, "outcome": "deny", "denialReason": "not now",
            "decidedBy": {"kind": "user", "session": "main", "uid": 0}
        })) else {
            panic!("decided")
        };
        assert_eq!(reason, "permfs: denied by a person at main: not now");
        assert_eq!(
            describe(
                &json!({"kind": "rule", "surface": "bash", "pattern": "git *", "origin": "global"})
            ),
            "rule bash \"git *\" (global)"
        );
    }
}
