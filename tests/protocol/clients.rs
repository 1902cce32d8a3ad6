//! The client helpers in `clients/` (shell, Python, Node.js) against a real
//! mount: each gets a rule's answer and a person's, the Python one keeps an
//! asyncio loop running while it waits, and the Node one stalls nothing in
//! its process (8 asks pending: `fs.readFile`, `fs.stat`, `dns.lookup`,
//! `crypto.pbkdf2` still answer at once, and every answer arrives as soon as
//! it is given), exits at once from a SIGINT handler with asks pending, and
//! withdraws what it no longer waits for.

use crate::common;

use common::{eventually, python, Daemon};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

const CONFIG: &str =
    r#"{"permission": {"*": "ask", "bash": {"*": "ask", "git *": "allow", "rm *": "deny"}}}"#;

const ALLOWED: &str = r#"{"surface":"bash","value":"git status"}"#;
const DENIED: &str = r#"{"surface":"bash","value":"rm -rf /"}"#;

fn clients() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients")
}

/// A daemon with a non-interactive child `w` of `main`: `w`'s asks that no
/// rule answers wait in `main`'s inbox. Returns the daemon and `w`'s directory.
fn daemon_with_worker() -> (Daemon, PathBuf) {
    let daemon = Daemon::start(CONFIG, None);
    std::fs::write(daemon.session("main").join("ctl"), "spawn w").expect("spawned");
    let worker = daemon.session("main/w");
    (daemon, worker)
}

/// Waits for `count` asks in `main`'s inbox and returns their names.
fn waiting(daemon: &Daemon, count: usize) -> Vec<String> {
    eventually(&format!("{count} asks wait in main's inbox"), || {
        daemon.inbox("main").len() == count
    });
    daemon.inbox("main")
}

fn decide(daemon: &Daemon, ask: &str, decision: &str) {
    let entry = daemon.session("main").join("inbox").join(ask);
    std::fs::write(entry, decision).expect("decided");
}

/// Waits for the one ask in `main`'s inbox and decides it.
fn decide_the_ask(daemon: &Daemon, decision: &str) {
    let asks = waiting(daemon, 1);
    decide(daemon, &asks[0], decision);
}

fn outbox_is_empty(session: &Path) -> bool {
    std::fs::read_dir(session.join("outbox")).is_ok_and(|mut entries| entries.next().is_none())
}

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(bytes)))
}

/// Whether `node` runs here; says why the Node tests skip when it does not.
fn node_available() -> bool {
    common::runs(
        "node",
        "--version",
        "`node` is not installed, so the Node.js client cannot be tested \
         (.ci/run installs nodejs; or apt-get install nodejs)",
    )
}

/// A client process whose stdout lines arrive on a channel; killed on drop.
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Client {
    fn start(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the client starts");
        let stdout = child.stdout.take().expect("stdout");
        let stdin = child.stdin.take();
        let (send, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
        }
    }

    /// The next line the client prints, as JSON.
    fn next(&self, what: &str) -> serde_json::Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("no line for {what}: {e}"));
        json(line.as_bytes())
    }

    fn say(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{line}").expect("told the client");
    }

    /// Waits for the client to exit; returns its status and how long it took.
    fn exit(&mut self, within: Duration) -> (std::process::ExitStatus, Duration) {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return (status, start.elapsed());
            }
            assert!(start.elapsed() < within, "the client did not exit");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---- shell ----

fn shell(shell: &str, session: &Path, request: &str) -> Output {
    Command::new(shell)
        .arg("-c")
        .arg(r#". "$0"; permfs_ask "$1" "$2""#)
        .arg(clients().join("permfs.sh"))
        .arg(session)
        .arg(request)
        .output()
        .expect("the shell runs")
}

#[test]
fn the_shell_helper_prints_the_answer_and_says_it_in_its_status() {
    let (daemon, worker) = daemon_with_worker();
    for sh in ["bash", "sh"] {
        let allowed = shell(sh, &worker, ALLOWED);
        assert_eq!(allowed.status.code(), Some(0), "{sh}: {allowed:?}");
        assert_eq!(json(&allowed.stdout)["decidedBy"]["kind"], "rule");
        let denied = shell(sh, &worker, DENIED);
        assert_eq!(denied.status.code(), Some(1), "{sh}: {denied:?}");
        assert_eq!(json(&denied.stdout)["outcome"], "deny");
    }
    let invalid = shell("bash", &worker, "{not json");
    assert_eq!(invalid.status.code(), Some(2), "{invalid:?}");
    assert_eq!(json(&invalid.stdout)["outcome"], "invalid");
    let nowhere = shell("bash", &daemon.session("main/none"), ALLOWED);
    assert_eq!(nowhere.status.code(), Some(2), "{nowhere:?}");

    let asking = std::thread::spawn({
        let worker = worker.clone();
        move || shell("bash", &worker, r#"{"surface":"bash","value":"make"}"#)
    });
    decide_the_ask(&daemon, "allow");
    let answer = asking.join().expect("the shell returns");
    assert_eq!(answer.status.code(), Some(0), "{answer:?}");
    assert_eq!(json(&answer.stdout)["decidedBy"]["kind"], "user");
    assert!(
        outbox_is_empty(&worker),
        "nothing left behind in the outbox"
    );
}

// ---- Python ----

fn python_cli(session: &Path, request: &str) -> Output {
    Command::new(python())
        .arg(clients().join("permfs_client.py"))
        .arg(session)
        .arg(request)
        .output()
        .expect("python3 runs")
}

#[test]
fn the_python_helper_blocks_for_the_rule_or_the_persons_answer() {
    let (daemon, worker) = daemon_with_worker();
    let allowed = python_cli(&worker, ALLOWED);
    assert_eq!(allowed.status.code(), Some(0), "{allowed:?}");
    assert_eq!(json(&allowed.stdout)["decidedBy"]["kind"], "rule");
    let denied = python_cli(&worker, DENIED);
    assert_eq!(denied.status.code(), Some(1), "{denied:?}");
    let nowhere = python_cli(&daemon.session("main/none"), ALLOWED);
    assert_eq!(nowhere.status.code(), Some(2), "{nowhere:?}");

    let asking = std::thread::spawn({
        let worker = worker.clone();
        move || python_cli(&worker, r#"{"surface":"bash","value":"make"}"#)
    });
    decide_the_ask(&daemon, "deny not now");
    let answer = asking.join().expect("python returns");
    assert_eq!(answer.status.code(), Some(1), "{answer:?}");
    let answer = json(&answer.stdout);
    assert_eq!(answer["decidedBy"]["kind"], "user");
    assert_eq!(answer["denialReason"], "not now");
}

/// Waits for a rule's answer, then for a person's while a ticker runs, then
/// cancels a third ask when told.
const PY_ASYNC: &str = r#"
import asyncio, json, sys, time
sys.path.insert(0, sys.argv[1])
from permfs_client import ask_async
session = sys.argv[2]

def say(**fields):
    print(json.dumps(fields), flush=True)

async def main():
    loop = asyncio.get_running_loop()
    ticks = 0
    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1
    asyncio.ensure_future(ticker())
    rule = await ask_async(session, {"surface": "bash", "value": "git status"})
    say(outcome=rule["outcome"], kind=rule["decidedBy"]["kind"])
    before, start = ticks, time.monotonic()
    person = await ask_async(session, {"surface": "bash", "value": "make"})
    say(state=person["state"], ticks=ticks - before, waited=time.monotonic() - start)
    task = asyncio.ensure_future(ask_async(session, {"surface": "bash", "value": "make b"}))
    await loop.run_in_executor(None, sys.stdin.readline)
    task.cancel()
    try:
        await task
        say(cancelled=False)
    except asyncio.CancelledError:
        say(cancelled=True)

asyncio.run(main())
"#;

#[test]
fn the_python_async_helper_leaves_the_event_loop_running_and_cancelling_withdraws() {
    let (daemon, worker) = daemon_with_worker();
    let mut command = Command::new(python());
    command.arg("-c").arg(PY_ASYNC).arg(clients()).arg(&worker);
    let mut client = Client::start(command);
    let rule = client.next("the rule's answer");
    assert_eq!(rule["outcome"], "allow");
    assert_eq!(rule["kind"], "rule");

    let asks = waiting(&daemon, 1);
    std::thread::sleep(Duration::from_millis(300));
    decide(&daemon, &asks[0], "allow");
    let person = client.next("the person's answer");
    assert_eq!(person["state"], "approved");
    let ticks = person["ticks"].as_u64().unwrap_or(0);
    eprintln!(
        "asyncio: {ticks} ticks of 10 ms ran during a {:.2} s wait",
        person["waited"].as_f64().unwrap_or(0.0)
    );
    assert!(
        ticks >= 10,
        "the loop stalled while the ask waited: {person}"
    );

    waiting(&daemon, 1);
    client.say("cancel");
    assert_eq!(client.next("the cancellation")["cancelled"], true);
    eventually("the cancelled ask is withdrawn", || {
        daemon.inbox("main").is_empty()
    });
}

/// A blocking ask whose process gets signals its handler returns from.
const PY_SIGNALLED: &str = r#"
import json, signal, sys
sys.path.insert(0, sys.argv[1])
from permfs_client import ask
seen = []
signal.signal(signal.SIGUSR1, lambda number, frame: seen.append(number))
print(json.dumps({"started": True}), flush=True)
answer = ask(sys.argv[2], {"surface": "bash", "value": "make"})
print(json.dumps({"state": answer["state"], "signals": len(seen)}), flush=True)
"#;

#[test]
fn a_blocking_python_ask_waits_on_through_signals_it_handles() {
    let (daemon, worker) = daemon_with_worker();
    let mut command = Command::new(python());
    command
        .arg("-c")
        .arg(PY_SIGNALLED)
        .arg(clients())
        .arg(&worker);
    let client = Client::start(command);
    client.next("started");
    let asks = waiting(&daemon, 1);
    for _ in 0..3 {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(client.child.id() as i32, libc::SIGUSR1) };
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(daemon.inbox("main"), asks, "the ask still waits");
    decide(&daemon, &asks[0], "allow");
    let answer = client.next("the answer");
    assert_eq!(answer["state"], "approved", "{answer}");
    assert_eq!(answer["signals"], 3);
}

// ---- Node.js ----

/// Runs a Node test: `body` is the inside of an async function that has
/// `ask` (permfs.js), `session` (`w`'s directory) and `say` (prints a JSON
/// line); an error it throws is said as `{"error"}`. `None` when there is
/// no `node`.
fn node(body: &str) -> Option<(Daemon, PathBuf, Client)> {
    if !node_available() {
        return None;
    }
    let (daemon, worker) = daemon_with_worker();
    let script = format!(
        "const {{ ask }} = require(process.argv[1]);\n\
         const session = process.argv[2];\n\
         const say = (fields) => console.log(JSON.stringify(fields));\n\
         (async () => {{\n{body}\n}})().catch((error) => say({{ error: String(error) }}));\n"
    );
    let mut command = Command::new("node");
    command
        // libuv's default, whatever the environment says.
        .env("UV_THREADPOOL_SIZE", "4")
        .arg("-e")
        .arg(script)
        .arg(clients().join("permfs.js"))
        .arg(&worker);
    Some((daemon, worker, Client::start(command)))
}

/// A rule's answer, a person's, then an ask aborted when told.
const NODE_BASICS: &str = r#"
  const rule = await ask(session, { surface: 'bash', value: 'git status' });
  say({ outcome: rule.outcome, kind: rule.decidedBy.kind });
  const person = await ask(session, '{"surface":"bash","value":"make"}');
  say({ state: person.state, kind: person.decidedBy.kind, reason: person.denialReason });
  const controller = new AbortController();
  const pending = ask(session, { surface: 'bash', value: 'make b' }, { signal: controller.signal });
  process.stdin.once('data', () => controller.abort());
  try {
    await pending;
    say({ aborted: false });
  } catch (error) {
    say({ aborted: error.name });
  }
  process.stdin.destroy();
"#;

#[test]
fn the_node_helper_gets_the_rule_or_the_persons_answer_and_aborting_withdraws() {
    let Some((daemon, worker, mut client)) = node(NODE_BASICS) else {
        return;
    };
    let rule = client.next("the rule's answer");
    assert_eq!(rule["outcome"], "allow", "{rule}");
    assert_eq!(rule["kind"], "rule");
    decide_the_ask(&daemon, "deny not that");
    let person = client.next("the person's answer");
    assert_eq!(person["state"], "denied_with_reason", "{person}");
    assert_eq!(person["reason"], "not that");

    waiting(&daemon, 1);
    client.say("abort");
    assert_eq!(client.next("the abort")["aborted"], "AbortError");
    eventually("the aborted ask is withdrawn", || {
        daemon.inbox("main").is_empty()
    });
    let (status, _) = client.exit(Duration::from_secs(5));
    assert!(status.success(), "{status:?}");
    assert!(outbox_is_empty(&worker), "every request was removed");
}

#[test]
fn the_node_esm_wrapper_asks_too() {
    if !node_available() {
        return;
    }
    let (_daemon, worker) = daemon_with_worker();
    let output = Command::new("node")
        .arg("--input-type=module")
        .arg("-e")
        .arg(
            "const { ask } = await import(process.argv[1]);\n\
             console.log(JSON.stringify(await ask(process.argv[2], { surface: 'bash', value: 'git log' })));",
        )
        .arg(clients().join("permfs.mjs"))
        .arg(&worker)
        .output()
        .expect("node runs");
    assert!(output.status.success(), "{output:?}");
    assert_eq!(json(&output.stdout)["decidedBy"]["kind"], "rule");
}

/// Starts 8 asks; when told, times unrelated thread-pool work in the same
/// process, then prints each answer as it arrives.
const NODE_EIGHT: &str = r#"
  const fs = require('fs'), crypto = require('crypto'), dns = require('dns');
  const timed = (start) => new Promise((resolve, reject) => {
    const t = process.hrtime.bigint();
    start((error) => (error ? reject(error) : resolve(Number(process.hrtime.bigint() - t) / 1e6)));
  });
  const probes = async () => ({
    readFile: await timed((done) => fs.readFile(process.argv[1], done)),
    stat: await timed((done) => fs.stat(process.argv[1], done)),
    pbkdf2: await timed((done) => crypto.pbkdf2('secret', 'salt', 1000, 32, 'sha256', done)),
    lookup: await timed((done) => dns.lookup('localhost', done)),
  });
  await probes(); // warm up
  for (let i = 0; i < 8; i++) {
    ask(session, { surface: 'bash', value: `make t${i}` })
      .then((a) => say({ askId: a.askId, state: a.state, reason: a.denialReason }))
      .catch((error) => say({ error: String(error) }));
  }
  await new Promise((resolve) => process.stdin.once('data', resolve));
  process.stdin.destroy();
  say(await probes());
"#;

#[test]
fn with_eight_node_asks_pending_nothing_else_in_the_process_waits_and_every_answer_arrives() {
    let Some((daemon, worker, mut client)) = node(NODE_EIGHT) else {
        return;
    };
    let asks = waiting(&daemon, 8);
    client.say("go");
    let probes = client.next("the timings");
    eprintln!("node, 8 asks pending, ms: {probes}");
    let ms = |name: &str| probes[name].as_f64().unwrap_or(f64::MAX);
    assert!(ms("readFile") < 50.0, "fs.readFile waited: {probes}");
    assert!(ms("stat") < 50.0, "fs.stat waited: {probes}");
    assert!(ms("pbkdf2") < 100.0, "crypto.pbkdf2 waited: {probes}");
    assert!(ms("lookup") < 1000.0, "dns.lookup waited: {probes}");

    // Each answer arrives as soon as it is given, before the next decision.
    for (k, ask) in asks.iter().enumerate() {
        let given = Instant::now();
        decide(&daemon, ask, &format!("deny answer {k}"));
        let answer = client.next("an answer");
        assert_eq!(answer["askId"], ask.as_str(), "{answer}");
        assert_eq!(answer["reason"], format!("answer {k}"));
        eprintln!(
            "answer {k} arrived {:?} after it was given",
            given.elapsed()
        );
    }
    assert!(daemon.inbox("main").is_empty());
    eventually("every request is removed", || outbox_is_empty(&worker));
}

/// Three asks pending and a SIGINT handler that exits.
const NODE_SIGINT: &str = r#"
  for (let i = 0; i < 3; i++) {
    ask(session, { surface: 'bash', value: `make s${i}` }).catch(() => {});
  }
  process.on('SIGINT', () => process.exit(130));
  say({ ready: true });
"#;

#[test]
fn a_node_sigint_handler_exits_at_once_with_asks_pending_and_they_are_withdrawn() {
    // SIGKILL too: the asks of a process that could not clean up go as well.
    for (signal, code) in [(libc::SIGINT, Some(130)), (libc::SIGKILL, None)] {
        let Some((daemon, worker, mut client)) = node(NODE_SIGINT) else {
            return;
        };
        assert_eq!(client.next("ready")["ready"], true);
        waiting(&daemon, 3);
        // SAFETY: signalling our own child.
        unsafe { libc::kill(client.child.id() as i32, signal) };
        let (status, took) = client.exit(Duration::from_secs(5));
        eprintln!("node exited {took:?} after signal {signal} with 3 asks pending");
        assert_eq!(status.code(), code);
        assert!(took < Duration::from_secs(1), "exit took {took:?}");
        let gone = Instant::now();
        eventually("the pending asks are withdrawn", || {
            daemon.inbox("main").is_empty() && outbox_is_empty(&worker)
        });
        eprintln!("withdrawn {:?} after the exit", gone.elapsed());
    }
}

/// What permfs.js avoids, shown so the probes above are known to catch it:
/// 4 response reads on the thread pool (`fs.promises.readFile`) hold every
/// thread, so an unrelated `fs.readFile` waits for a decision.
const NODE_NAIVE: &str = r#"
  const fs = require('fs');
  for (let i = 0; i < 4; i++) {
    fs.writeFileSync(`${session}/outbox/n${i}.request`, JSON.stringify({ surface: 'bash', value: `make n${i}` }));
    fs.promises.readFile(`${session}/outbox/n${i}.response`).catch(() => {});
  }
  // readFile is several pool tasks (open, fstat, read): give the four
  // their way to the blocking read first, or the unrelated read may slip
  // in between them.
  setTimeout(() => {
    const start = Date.now();
    fs.readFile(process.argv[1], () => say({ readFile: Date.now() - start }));
    setTimeout(() => say({ stalled: true }), 300);
  }, 200);
"#;

#[test]
fn a_naive_node_client_stalls_the_thread_pool_which_the_helper_avoids() {
    let Some((daemon, _, client)) = node(NODE_NAIVE) else {
        return;
    };
    let first = client.next("the first event");
    assert_eq!(
        first["stalled"], true,
        "fs.readFile finished while 4 response reads held the pool: {first}"
    );
    for ask in waiting(&daemon, 4) {
        decide(&daemon, &ask, "deny");
    }
    assert!(client.next("the read, after a decision")["readFile"].as_u64() >= Some(300));
}
