//! Shared by the tests of issue 22's adversarial bash corpus
//! (`tests/fixtures/bash_adversarial.json`, written by
//! `scripts/bash-adversarial/make_corpus.py`): the throwaway world the lines
//! are judged (and run) in, and the two configurations they are judged by.
//!
//! The world is a private temp root `{tmp}` holding the session's cwd
//! (`{tmp}/work/proj`), its home (`{tmp}/home`, exported as `HOME` before
//! any policy or requester is made), the mount point (`{tmp}/mnt`) and the
//! state dir (`{tmp}/state`), filled with the fixture's `layout` (hook
//! settings in the home and the cwd, a pending ask in the inbox, `.env`
//! files, ...), so globs expand as they would on a real machine.

#![allow(dead_code)]

use permfs::engine::{judge, Judgment};
use permfs::facts::intent::Principal;
use permfs::facts::request::{AskForm, FactSet, Requester};
use permfs::policy::layers::{PolicyLoader, PolicySources};
use permfs::policy::PermissionState;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

pub const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/bash_adversarial.json"
);
pub const SHIPPED_CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/permfs.json");

/// One corpus line and the verdicts a sound analysis must give.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The line with its placeholders (`{tmp}`, `{mnt}`, ...).
    pub line: String,
    pub class: String,
    /// Acceptable verdicts under `config/permfs.json` (usually one).
    pub shipped: Vec<String>,
    /// Acceptable verdicts under `{"permission": {"*": "allow"}}`.
    pub guarded: Vec<String>,
    pub why: String,
}

pub struct Corpus {
    pub entries: Vec<Entry>,
    /// Relative path under `{tmp}` to file contents.
    pub layout: Vec<(String, String)>,
}

fn verdicts(value: &Value) -> Vec<String> {
    value
        .as_str()
        .unwrap_or("?")
        .split('|')
        .map(str::to_string)
        .collect()
}

pub fn corpus() -> Corpus {
    let text = std::fs::read_to_string(FIXTURE).expect("corpus readable");
    let fixture: Value = serde_json::from_str(&text).expect("corpus is JSON");
    let entries = fixture["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| Entry {
            line: e["line"].as_str().expect("line").to_string(),
            class: e["class"].as_str().unwrap_or("?").to_string(),
            shipped: verdicts(&e["shipped"]),
            guarded: verdicts(&e["guarded"]),
            why: e["why"].as_str().unwrap_or("").to_string(),
        })
        .collect();
    let layout = fixture["layout"]
        .as_object()
        .expect("layout")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
        .collect();
    Corpus { entries, layout }
}

/// The throwaway machine the lines are judged against.
pub struct World {
    _root: tempfile::TempDir,
    pub tmp: PathBuf,
    pub cwd: PathBuf,
    pub home: PathBuf,
    pub mnt: PathBuf,
    pub state: PathBuf,
    layout: Vec<(String, String)>,
}

impl World {
    /// Makes the world and exports its home as `HOME`. Call it first in a
    /// test binary's only test: the policy loader and the requester read
    /// `HOME` when they are made.
    pub fn new(layout: Vec<(String, String)>) -> World {
        let root = tempfile::Builder::new()
            .prefix("permfs-adversarial-")
            .tempdir()
            .expect("temp dir");
        // The canonical spelling, so the facts, the guards and strace agree.
        let tmp = root.path().canonicalize().expect("canonical temp dir");
        let world = World {
            cwd: tmp.join("work/proj"),
            home: tmp.join("home"),
            mnt: tmp.join("mnt"),
            state: tmp.join("state"),
            tmp,
            _root: root,
            layout,
        };
        world.reset();
        std::env::set_var("HOME", &world.home);
        world
    }

    /// Removes whatever a line left and lays the world out afresh.
    pub fn reset(&self) {
        if let Ok(children) = std::fs::read_dir(&self.tmp) {
            for child in children.flatten() {
                let path = child.path();
                let remove = |path: &Path| {
                    if path.is_dir() && !path.is_symlink() {
                        std::fs::remove_dir_all(path)
                    } else {
                        std::fs::remove_file(path)
                    }
                };
                if remove(&path).is_err() {
                    // A line may have taken the write bit away (chmod -R a-w).
                    let _ = std::process::Command::new("chmod")
                        .args(["-R", "u+rwx"])
                        .arg(&path)
                        .status();
                    let _ = remove(&path);
                }
            }
        }
        for (relative, contents) in &self.layout {
            let path = self.tmp.join(relative);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).expect("layout dir");
            }
            std::fs::write(&path, contents).expect("layout file");
        }
    }

    /// The line with its placeholders replaced.
    pub fn expand(&self, line: &str) -> String {
        let text = |p: &Path| p.to_string_lossy().into_owned();
        line.replace("{tmp}", &text(&self.tmp))
            .replace("{mnt}", &text(&self.mnt))
            .replace("{state}", &text(&self.state))
            .replace("{cwd}", &text(&self.cwd))
    }

    pub fn cwd_text(&self) -> String {
        self.cwd.to_string_lossy().into_owned()
    }
}

/// A world and its judges, made together under one lock: `HOME` is
/// process-wide, and the judges read it when they are made, so two tests of
/// one binary must not interleave here.
pub fn setup(layout: Vec<(String, String)>) -> (World, Judges) {
    static SETUP: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = SETUP
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let world = World::new(layout);
    let judges = Judges::new(&world);
    (world, judges)
}

/// The two configurations of the corpus, with the built-in guards on
/// (authority dirs: the world's mount point and state dir).
pub struct Judges {
    pub shipped: PolicyLoader,
    pub guarded: PolicyLoader,
    requester: Requester,
    cwd: String,
    /// The allow-all config, kept outside the world (which is reset).
    _configs: tempfile::TempDir,
}

pub struct Verdict {
    pub state: String,
    pub judgment: Judgment,
    pub facts: FactSet,
}

impl Judges {
    pub fn new(world: &World) -> Judges {
        let configs = tempfile::tempdir().expect("config dir");
        let allow_all = configs.path().join("allow-all.json");
        std::fs::write(
            &allow_all,
            json!({"permission": {"*": "allow"}}).to_string(),
        )
        .expect("write allow-all config");
        let loader = |global: PathBuf| {
            PolicyLoader::new(PolicySources {
                global: Some(global),
                agents_dir: Some(configs.path().join("no-agents")),
                project_file: None,
                project_agents_dir: None,
                authority_dirs: vec![world.mnt.clone(), world.state.clone()],
                trust: permfs::policy::trust::Trust::All,
            })
            .expect("config loads")
        };
        let cwd = world.cwd_text();
        Judges {
            shipped: loader(PathBuf::from(SHIPPED_CONFIG)),
            guarded: loader(allow_all),
            requester: Requester::new(&cwd, Principal::default()),
            cwd,
            _configs: configs,
        }
    }

    /// Judges a bash tool call of `line` (placeholders already expanded).
    pub fn judge(&self, guarded: bool, line: &str) -> Verdict {
        let loader = if guarded {
            &self.guarded
        } else {
            &self.shipped
        };
        let policy = loader.policy(&self.cwd, None).expect("policy");
        let facts = self.requester.facts(&AskForm::ToolCall {
            tool: "bash".into(),
            input: json!({ "command": line }),
        });
        let judgment = judge(&[&policy.rules], &facts).expect("judged");
        Verdict {
            state: state_name(judgment.state),
            judgment,
            facts,
        }
    }
}

pub fn state_name(state: PermissionState) -> String {
    serde_json::to_value(state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

pub fn rank(state: &str) -> u8 {
    match state {
        "allow" => 0,
        "ask" => 1,
        _ => 2,
    }
}

/// A line as one printable line (newlines and tabs escaped).
pub fn printable(line: &str) -> String {
    line.replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\t', "\\t")
}

/// What decided a judgment, for a failure message.
pub fn decided(judgment: &Judgment) -> String {
    match judgment.deciding_check() {
        Some(check) => format!(
            "{} {:?} on {:?}{}",
            check.surface,
            check.matched_pattern.as_deref().unwrap_or("<default>"),
            check
                .command
                .as_deref()
                .or(check.word.as_deref())
                .unwrap_or(&check.matched_value),
            check
                .floor
                .as_deref()
                .map(|f| format!(" floor {f}"))
                .unwrap_or_default()
        ),
        None => judgment
            .unjudgeable
            .clone()
            .unwrap_or_else(|| "nothing decided".into()),
    }
}
