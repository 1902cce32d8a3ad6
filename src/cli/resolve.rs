//! `permfs resolve`: the engine without a mount, for testing a config and
//! for conformance checks against the reference.

use crate::engine::judge::{Judgment, SurfaceCheck};
use crate::facts::intent::{is_path_surface, AccessIntent, Principal};
use crate::facts::memo::Snapshot;
use crate::facts::request::{AskForm, FactSet, Request, Requester};
use crate::policy::layers::{Policy, PolicyLoader, PolicySources};
use crate::policy::state::{Origin, PermissionState};
use clap::Args;
use serde::Serialize;
use serde_json::json;
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct ResolveArgs {
    /// The global config file.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The project config file (default: found from --cwd).
    #[arg(long)]
    pub project: Option<PathBuf>,
    /// Directory of `<agent>.md` files (the agent layer).
    #[arg(long)]
    pub agents_dir: Option<PathBuf>,
    /// Directory of project `<agent>.md` files (default: <cwd>/.pi/agents).
    #[arg(long)]
    pub project_agents_dir: Option<PathBuf>,
    /// The asking session's working directory (default: the current one).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// The agent to scope rules to, unless a request names its own.
    #[arg(long)]
    pub agent: Option<String>,
    /// Judge project layers as the daemon with this state dir does: only
    /// the ones trusted there (`permfs trust`) may widen. Without it every
    /// layer counts, as the reference layers them (this command authorizes
    /// nothing; it shows what files say).
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
}

/// Runs the command; the exit code is 0 when every line resolved, 1 when
/// any line was bad, 2 when the global config is unusable.
pub fn run(args: ResolveArgs) -> i32 {
    let loader = match PolicyLoader::new(PolicySources {
        global: args.config.clone(),
        agents_dir: args.agents_dir.clone(),
        project_file: args.project.clone(),
        project_agents_dir: args.project_agents_dir.clone(),
        authority_dirs: Vec::new(),
        trust: match &args.state_dir {
            Some(dir) => crate::policy::trust::Trust::Store(dir.clone()),
            None => crate::policy::trust::Trust::All,
        },
    }) {
        Ok(loader) => loader,
        Err(error) => {
            eprintln!("permfs resolve: invalid global config: {error}");
            return 2;
        }
    };
    let cwd = args
        .cwd
        .as_ref()
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_else(|| ".".into());
    // Answers are serialized straight into one reused buffer and written
    // whenever it holds 64 KiB or the next read of the input would block:
    // a file or pipeline of many lines costs one write per 64 KiB, and a
    // line typed by hand is still answered at once.
    let mut input = std::io::BufReader::with_capacity(1 << 16, std::io::stdin().lock());
    let mut out = std::io::stdout().lock();
    let mut answers: Vec<u8> = Vec::with_capacity(2 * ANSWER_BUFFER);
    let mut requesters = Requesters::new(&cwd);
    // A batch of lines is judged against one view of the filesystem (the
    // canonical form of a path asked twice is looked up once); the view is
    // renewed when the input runs dry and at least every second, so a line
    // typed by hand, or a long stream, sees symlinks as they are now.
    let mut snapshot = Snapshot::open();
    let mut failed = false;
    let mut line = String::new();
    let mut number = 0usize;
    loop {
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) => break,
            Ok(_) => number += 1,
            Err(error) => {
                eprintln!("permfs resolve: cannot read stdin: {error}");
                return 1;
            }
        }
        let text = line.trim_end_matches(['\n', '\r']);
        if !text.trim().is_empty() {
            let written = match resolve_line(&loader, &mut requesters, args.agent.as_deref(), text)
            {
                Ok(answer) => write_answer(&mut answers, &answer.view()),
                Err(error) => {
                    failed = true;
                    serde_json::to_writer(&mut answers, &json!({"line": number, "error": error}))
                        .is_ok()
                }
            };
            if !written {
                return 1;
            }
            answers.push(b'\n');
        }
        let waiting = input.buffer().is_empty() && stdin_would_block();
        if (waiting || answers.len() >= ANSWER_BUFFER)
            && write_answers(&mut out, &mut answers).is_err()
        {
            return 1;
        }
        snapshot.renew_if(waiting, SNAPSHOT_MAX_AGE);
    }
    if write_answers(&mut out, &mut answers).is_err() {
        return 1;
    }
    i32::from(failed)
}

/// How many bytes of answers are gathered before they are written.
const ANSWER_BUFFER: usize = 1 << 16;

/// Appends one answer's JSON to `answers`; `false` if it could not be
/// serialized.
///
/// sonic-rs, not serde_json: an answer is some eighty short strings (keys,
/// values, paths), and serde_json's byte-at-a-time escaping of them was the
/// largest cost of a line; sonic-rs escapes with SIMD and writes without a
/// bounds check per fragment. An answer holds only strings, booleans,
/// nulls, arrays and objects, for which both write the same bytes (a test
/// below holds them to it).
fn write_answer(answers: &mut Vec<u8>, view: &AnswerView<'_>) -> bool {
    sonic_rs::to_writer(answers, view).is_ok()
}

/// Writes and flushes the gathered answers, and empties the buffer.
fn write_answers(out: &mut impl Write, answers: &mut Vec<u8>) -> std::io::Result<()> {
    out.write_all(answers)?;
    answers.clear();
    out.flush()
}

/// How long one view of the filesystem serves a stream of lines.
const SNAPSHOT_MAX_AGE: Duration = Duration::from_secs(1);

/// Whether reading stdin now would block (nothing to read and no end of
/// file yet). An error counts as "would block": the answers are flushed
/// and the filesystem looked at afresh, the safe side of both.
fn stdin_would_block() -> bool {
    let mut fds = [libc::pollfd {
        fd: libc::STDIN_FILENO,
        events: libc::POLLIN,
        revents: 0,
    }];
    // SAFETY: one valid pollfd, length 1, no timeout.
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), 1, 0) };
    ready <= 0
}

/// One requester per agent named (the cwd and its canonical form are
/// looked up once per run, not once per line).
struct Requesters {
    cwd: String,
    by_agent: HashMap<Option<String>, Requester>,
}

impl Requesters {
    fn new(cwd: &str) -> Self {
        Self {
            cwd: cwd.to_string(),
            by_agent: HashMap::new(),
        }
    }

    fn get(&mut self, agent: Option<&str>) -> &Requester {
        let cwd = &self.cwd;
        self.by_agent
            .entry(agent.map(str::to_string))
            .or_insert_with(|| {
                Requester::new(
                    cwd,
                    Principal {
                        session_id: "resolve".into(),
                        agent_name: agent.map(str::to_string),
                    },
                )
            })
    }
}

/// One line's judgment, kept until it is written.
struct Resolved {
    form: AskForm,
    facts: FactSet,
    judgment: Judgment,
    policy: Arc<Policy>,
}

/// The answer line, written straight from the judgment (no JSON tree).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AnswerView<'a> {
    state: PermissionState,
    matched_pattern: Option<&'a str>,
    origin: Option<Origin>,
    surface: Option<&'a str>,
    command: Option<&'a str>,
    word: Option<&'a str>,
    reason: Option<&'a str>,
    match_values: Option<&'a [String]>,
    facts: &'a [AccessIntent],
    checks: &'a [SurfaceCheck],
    unjudgeable: Option<&'a str>,
    issues: &'a [String],
}

impl Resolved {
    fn view(&self) -> AnswerView<'_> {
        let decided = self.judgment.deciding_check();
        let match_values = match &self.form {
            // No path was given, so there is no alias set to show (the
            // reference's `matchValues` is null too).
            AskForm::SurfaceOnly { .. } => None,
            AskForm::Surface { surface, .. } if is_path_surface(surface.trim()) => {
                self.facts.intents.first().map(|i| &*i.match_values)
            }
            _ => decided
                .filter(|c| is_path_surface(&c.surface))
                .map(|c| &*c.match_values),
        };
        AnswerView {
            state: self.judgment.state,
            matched_pattern: decided.and_then(|c| c.matched_pattern.as_deref()),
            origin: decided.map(|c| c.origin),
            surface: decided.map(|c| c.surface.as_str()),
            command: decided.and_then(|c| c.command.as_deref()),
            word: decided.and_then(|c| c.word.as_deref()),
            reason: self.judgment.reason(),
            match_values,
            facts: &self.facts.intents,
            checks: &self.judgment.checks,
            unjudgeable: self.judgment.unjudgeable.as_deref(),
            issues: &self.policy.issues,
        }
    }
}

fn resolve_line(
    loader: &PolicyLoader,
    requesters: &mut Requesters,
    default_agent: Option<&str>,
    line: &str,
) -> Result<Resolved, String> {
    let request = Request::parse(line).map_err(|e| e.to_string())?;
    let agent = request.agent.as_deref().or(default_agent);
    let requester = requesters.get(agent);
    let policy = loader
        .policy(&requester.cwd, agent)
        .map_err(|e| format!("policy cannot be compiled: {e}"))?;
    let facts = requester.facts(&request.form);
    let judgment = crate::engine::judge_with_policy(&policy, None, &facts)
        .map_err(|e| format!("rules cannot be evaluated: {e}"))?;
    Ok(Resolved {
        form: request.form,
        facts,
        judgment,
        policy,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The answers sonic-rs writes are byte for byte serde_json's, for
    /// every kind of string an answer can carry (controls, quotes,
    /// backslashes, non-ASCII, U+2028) in every place it can carry one.
    #[test]
    fn answers_are_written_as_serde_json_writes_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("permfs.json");
        std::fs::write(
            &config,
            r#"{"permission": {"*": "ask", "read": "allow",
                "path": {"*.env": "deny", "*\u0001\"q\\b*": "ask"},
                "bash": {"*": "ask", "git status": "allow",
                         "rm -rf *": {"action": "deny", "reason": "no \"rm\"\n\u0007 é \u2028"}},
                "mcp": {"*": "ask", "github_*": "allow"}}}"#,
        )
        .expect("config");
        let loader = PolicyLoader::new(PolicySources {
            global: Some(config),
            ..Default::default()
        })
        .expect("loader");
        let cwd = dir.path().join("w\u{1}\"\\é\u{2028}\u{7f}");
        std::fs::create_dir(&cwd).expect("cwd");
        let mut requesters = Requesters::new(&cwd.to_string_lossy());
        let weird = "a\u{0}\u{1f}\t\n\r\u{8}\u{c}\"\\/\u{7f}é✓\u{2028}\u{2029}\u{feff}😀";
        let lines = [
            serde_json::json!({"tool": "read", "input": {"path": weird}}),
            serde_json::json!({"tool": "bash", "input": {"command": format!("rm -rf {weird} && cat ../x.env ~/{weird}")}}),
            serde_json::json!({"surface": "bash", "value": format!("git status; echo '{weird}' | sh -c x")}),
            serde_json::json!({"surface": weird, "value": weird}),
            serde_json::json!({"tool": "mcp", "input": {"tool": weird, "server": "github"}}),
            serde_json::json!({"tool": weird}),
            serde_json::json!({"accessIntent": {"surface": "path_read", "matchValues": [weird], "floor": weird}}),
            serde_json::json!({"accessIntent": {"surface": "x", "matchValues": []}}),
        ];
        // Every code point below U+0800 and a few beyond, at every offset.
        let text: String = (0u32..0x800)
            .chain([0x2028, 0x2029, 0xfeff, 0x1f600])
            .filter_map(char::from_u32)
            .collect();
        for (offset, _) in text.char_indices() {
            let tail = [&text[offset..]];
            assert_eq!(
                sonic_rs::to_string(&tail).ok(),
                serde_json::to_string(&tail).ok()
            );
        }
        for agent in [None, Some(weird)] {
            for line in &lines {
                let answer = resolve_line(&loader, &mut requesters, agent, &line.to_string())
                    .expect("resolved");
                let view = answer.view();
                let mut written = Vec::new();
                assert!(write_answer(&mut written, &view));
                let expected = serde_json::to_vec(&view).expect("serde_json");
                assert_eq!(
                    String::from_utf8_lossy(&written),
                    String::from_utf8_lossy(&expected),
                    "{line}"
                );
            }
        }
    }
}
