//! `permfs resolve`: the engine without a mount, for testing a config and
//! for conformance checks against the reference.

use crate::engine::judge;
use crate::facts::intent::{is_path_surface, Principal};
use crate::facts::request::{AskForm, Request, Requester};
use crate::policy::layers::{PolicyLoader, PolicySources};
use clap::Args;
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::path::PathBuf;

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
    // Answers are buffered and flushed whenever the input has nothing more
    // buffered (the next read may block): a pipeline of many lines costs one
    // write per batch, and a line typed by hand is still answered at once.
    let mut input = std::io::BufReader::new(std::io::stdin().lock());
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
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
            let answer =
                resolve_line(&loader, &cwd, args.agent.as_deref(), text).unwrap_or_else(|error| {
                    failed = true;
                    json!({"line": number, "error": error})
                });
            if writeln!(out, "{answer}").is_err() {
                return 1;
            }
        }
        if input.buffer().is_empty() && out.flush().is_err() {
            return 1;
        }
    }
    if out.flush().is_err() {
        return 1;
    }
    i32::from(failed)
}

fn resolve_line(
    loader: &PolicyLoader,
    cwd: &str,
    default_agent: Option<&str>,
    line: &str,
) -> Result<Value, String> {
    let request = Request::parse(line).map_err(|e| e.to_string())?;
    let agent = request.agent.as_deref().or(default_agent);
    let requester = Requester::new(
        cwd,
        Principal {
            session_id: "resolve".into(),
            agent_name: agent.map(str::to_string),
        },
    );
    let policy = loader
        .policy(&requester.cwd, agent)
        .map_err(|e| format!("policy cannot be compiled: {e}"))?;
    let facts = requester.facts(&request.form);
    let judgment =
        judge(&[&policy.rules], &facts).map_err(|e| format!("rules cannot be evaluated: {e}"))?;
    let decided = judgment.deciding_check();
    let path_values = match &request.form {
        // No path was given, so there is no alias set to show (the
        // reference's `matchValues` is null too).
        AskForm::SurfaceOnly { .. } => None,
        AskForm::Surface { surface, .. } if is_path_surface(surface.trim()) => {
            facts.intents.first().map(|i| json!(i.match_values))
        }
        _ => decided
            .filter(|c| is_path_surface(&c.surface))
            .map(|c| json!(c.match_values)),
    };
    Ok(json!({
        "state": judgment.state,
        "matchedPattern": decided.and_then(|c| c.matched_pattern.clone()),
        "origin": decided.map(|c| c.origin),
        "surface": decided.map(|c| c.surface.clone()),
        "command": decided.and_then(|c| c.command.clone()),
        "word": decided.and_then(|c| c.word.clone()),
        "reason": judgment.reason(),
        "matchValues": path_values,
        "facts": facts.intents,
        "checks": judgment.checks,
        "unjudgeable": judgment.unjudgeable,
        "issues": policy.issues,
    }))
}
