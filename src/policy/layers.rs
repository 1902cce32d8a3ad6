//! Layers, merged and composed into one compiled policy per (cwd, agent).
//!
//! Lowest to highest: global, project (found from the session's cwd),
//! agent, project-agent. Merging follows the reference: a bare state
//! replaces a surface, two pattern maps shallow-merge (a re-defined pattern
//! keeps its place and takes the higher layer's state and origin), and a
//! state against a map replaces the whole surface. Bare `path` and
//! `external_directory` are sugar for both directions, expanded per layer
//! before the merge, so no rule lives on a bare family.

use super::compiled::{CompileError, CompiledRules};
use super::config::{
    is_valid_agent_name, permfs_project_config, reference_project_agents_dir,
    reference_project_config, ConfigError, ConfigFile, PatternAction, PermissionMap, SurfaceValue,
};
use super::frontmatter::load_agent_file;
use super::rule::{floor_allows_to_ask, rewrite_asks_to_yolo, Rule, RuleLayer};
use super::state::{Origin, PermissionState};
use crate::facts::intent::directions_of;
use crate::facts::path_text::home_dir;
use indexmap::IndexMap;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// The MCP metadata targets the reference allows once any MCP rule allows.
const MCP_BASELINE_TARGETS: &[&str] = &[
    "mcp_status",
    "mcp_list",
    "mcp_search",
    "mcp_describe",
    "mcp_connect",
];

/// A merged surface: its patterns with the layer each came from.
#[derive(Debug, Clone, PartialEq)]
enum MergedSurface {
    State(PermissionState, Origin),
    Patterns(IndexMap<String, (PatternAction, Origin)>),
}

/// Expands bare `path` / `external_directory` into their two directions.
/// Sugar patterns come first, explicit directional ones after them (a
/// pattern the explicit key re-defines moves to the explicit position).
pub fn expand_directional_sugar(map: &PermissionMap) -> PermissionMap {
    let explicit: HashMap<&str, &SurfaceValue> = map.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut out: PermissionMap = Vec::with_capacity(map.len() + 2);
    let mut emitted: Vec<String> = Vec::new();
    for (surface, value) in map {
        let Some(directions) = directions_of(surface) else {
            if !emitted.contains(surface) {
                out.push((surface.clone(), value.clone()));
            }
            continue;
        };
        for direction in directions {
            let combined = match explicit.get(direction) {
                None => value.clone(),
                Some(own) => {
                    let mut patterns = as_patterns(value);
                    let own = as_patterns(own);
                    patterns.retain(|(p, _)| !own.iter().any(|(q, _)| q == p));
                    patterns.extend(own);
                    SurfaceValue::Patterns(patterns)
                }
            };
            // Keep the explicit key's own slot when it was already written.
            if let Some(slot) = out.iter_mut().find(|(k, _)| k == direction) {
                slot.1 = combined;
            } else {
                out.push((direction.to_string(), combined));
            }
            emitted.push(direction.to_string());
        }
    }
    out
}

fn as_patterns(value: &SurfaceValue) -> Vec<(String, PatternAction)> {
    match value {
        SurfaceValue::State(state) => vec![(
            "*".to_string(),
            PatternAction {
                state: *state,
                reason: None,
            },
        )],
        SurfaceValue::Patterns(patterns) => patterns.clone(),
    }
}

fn merge_layers(layers: &[(Origin, &PermissionMap)]) -> IndexMap<String, MergedSurface> {
    let mut merged: IndexMap<String, MergedSurface> = IndexMap::new();
    for (origin, map) in layers {
        for (surface, value) in expand_directional_sugar(map) {
            let incoming = match value {
                SurfaceValue::State(state) => MergedSurface::State(state, *origin),
                SurfaceValue::Patterns(patterns) => MergedSurface::Patterns(
                    patterns
                        .into_iter()
                        .map(|(p, a)| (p, (a, *origin)))
                        .collect(),
                ),
            };
            match (merged.get_mut(&surface), incoming) {
                (Some(MergedSurface::Patterns(base)), MergedSurface::Patterns(over)) => {
                    base.extend(over)
                }
                (_, incoming) => {
                    merged.insert(surface, incoming);
                }
            }
        }
    }
    merged
}

/// Inputs to one composition, already loaded.
#[derive(Debug, Clone, Default)]
pub struct LayerSet<'a> {
    pub layers: Vec<(Origin, &'a PermissionMap)>,
    pub yolo: bool,
    /// Why the policy fails closed, one line per invalid layer.
    pub invalid: Vec<String>,
}

/// Turns merged layers into the reference's composed rule list:
/// `[universal default] + [MCP baseline] + config rules`, then yolo, then
/// the fail-closed floor (which therefore also tames yolo: an invalid layer
/// never leaves an `allow` that no person approved).
pub fn compose_rules(set: &LayerSet<'_>) -> Vec<Rule> {
    let merged = merge_layers(&set.layers);
    // Only a bare state sets the universal fallback. A map under `*` is
    // ignored as the reference ignores it, but, as there, the layer that
    // wrote its `*` pattern is still credited as the fallback's origin.
    let (universal, universal_origin) = match merged.get("*") {
        Some(MergedSurface::State(state, origin)) => (*state, *origin),
        Some(MergedSurface::Patterns(patterns)) => (
            PermissionState::Ask,
            patterns
                .get("*")
                .map(|(_, origin)| *origin)
                .unwrap_or(Origin::Builtin),
        ),
        None => (PermissionState::Ask, Origin::Builtin),
    };
    let mut config_rules = Vec::new();
    for (surface, value) in merged.iter().filter(|(surface, _)| surface.as_str() != "*") {
        match value {
            MergedSurface::State(state, origin) => {
                config_rules.push(Rule::new(surface, "*", *state, *origin))
            }
            MergedSurface::Patterns(patterns) => {
                for (pattern, (action, origin)) in patterns {
                    config_rules.push(
                        Rule::new(surface, pattern, action.state, *origin)
                            .with_reason(action.reason.clone()),
                    );
                }
            }
        }
    }
    let mut rules =
        vec![Rule::new("*", "*", universal, universal_origin).with_layer(RuleLayer::Default)];
    if config_rules
        .iter()
        .any(|r| r.surface == "mcp" && r.action == PermissionState::Allow)
    {
        rules.extend(MCP_BASELINE_TARGETS.iter().map(|t| {
            Rule::new("mcp", t, PermissionState::Allow, Origin::Baseline)
                .with_layer(RuleLayer::Baseline)
        }));
    }
    rules.extend(config_rules);
    if set.yolo {
        rewrite_asks_to_yolo(&mut rules);
    }
    if !set.invalid.is_empty() {
        floor_allows_to_ask(&mut rules);
    }
    rules
}

/// Settings that come with the rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub yolo: bool,
    pub forwarding_timeout_ms: u64,
    pub authorizer_chain: Vec<String>,
    pub authorizer_trust: Vec<(String, Vec<String>)>,
}

pub const DEFAULT_FORWARDING_TIMEOUT_MS: u64 = 600_000;

/// The recorded authority of one (cwd, agent): compiled once, reused.
#[derive(Debug)]
pub struct Policy {
    pub rules: CompiledRules,
    pub settings: Settings,
    /// Problems found while loading: invalid layers (which floor the
    /// policy) and dropped entries.
    pub issues: Vec<String>,
    pub failed_closed: bool,
    /// The files that were layered, lowest first, with their origin.
    pub sources: Vec<(Origin, PathBuf)>,
    /// The built-in guards on the authority alone (also the last rules of
    /// `rules`, so views show them). Judging stacks this list after the
    /// session grants, so no rule, grant, yolo or floor outranks it.
    pub guard: Arc<CompiledRules>,
    /// Every layer file found, lowest first, with whether its rules may
    /// widen (`trusted`) and why not.
    pub layers: Vec<LayerTrust>,
    /// When a layer is untrusted: every layer composed as the reference
    /// composes them (untrusted ones included), guard last. `rules` then
    /// holds the trusted layers alone; a node judges with both and keeps
    /// the stricter verdict, so an untrusted layer's `deny` and `ask`
    /// count and its `allow` never does.
    pub narrowing: Option<Arc<CompiledRules>>,
    /// The built-in floor on writing files that run outside the sandbox
    /// (`policy::outside`), with the guards the global config lowered
    /// left out. Applied after the whole stack has judged: a write it
    /// meets is `ask` at least, and only a person may allow it.
    pub outside: Arc<super::outside::OutsideGuards>,
}

/// A layer file and whether the operator trusted it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LayerTrust {
    pub origin: Origin,
    pub file: PathBuf,
    pub trusted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why_not: Option<String>,
}

/// Where the layers come from.
#[derive(Debug, Clone, Default)]
pub struct PolicySources {
    /// The global config file; `None` means built-in defaults only.
    pub global: Option<PathBuf>,
    /// Directory of `<agent>.md` files (the reference's agent layer).
    pub agents_dir: Option<PathBuf>,
    /// Overrides the project file normally found from the cwd.
    pub project_file: Option<PathBuf>,
    /// Overrides the project agents directory normally found from the cwd.
    pub project_agents_dir: Option<PathBuf>,
    /// Directories that are permfs's own authority: the mount point (its
    /// inboxes take decisions) and the state dir (the audit log). `permfs
    /// mount` sets them; writing under them is denied by a built-in rule.
    pub authority_dirs: Vec<PathBuf>,
    /// Which project layers may widen authority (the global config and
    /// the agents dir are the operator's and always may).
    pub trust: super::trust::Trust,
}

/// Loads and caches policies. The global config must be valid at start;
/// it, the project and the agent layers are re-read when they change (and
/// the global one on [`PolicyLoader::reload_global`], the daemon's
/// `SIGHUP`). A global config that becomes invalid keeps its last valid
/// rules with every `allow` floored to `ask`, and says why in every
/// policy's issues, until it is corrected: an edit never fails open.
#[derive(Debug)]
pub struct PolicyLoader {
    sources: PolicySources,
    /// The global config as read at start (judges and roots are set up
    /// from it once).
    global: ConfigFile,
    /// The global config now: the last valid one, its file's stamp, and
    /// the error when the file was changed into something invalid.
    current: std::sync::RwLock<GlobalNow>,
    home: String,
    cache: Mutex<HashMap<PolicyKey, CachedPolicy>>,
}

#[derive(Debug)]
struct GlobalNow {
    config: Arc<ConfigFile>,
    stamp: Option<FileStamp>,
    error: Option<String>,
}

type FileStamp = (PathBuf, Stamp);

/// What a layer file looked like: compared to tell an edit. A file that
/// cannot be looked at (a link into permfs's own mount, no permission) is
/// told apart from one that is absent, so removing it is an edit too.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stamp {
    Absent,
    Unreadable(std::io::ErrorKind),
    Present(SystemTime, u64),
}

/// A policy is cached per (cwd, agent).
type PolicyKey = (String, Option<String>);
/// A cached policy with the file stamps it was built from.
/// A cached policy, the file stamps it was built from, and when those
/// stamps were last compared with the files.
type CachedPolicy = (Vec<FileStamp>, Instant, Arc<Policy>);

/// How long a cached policy is trusted before its layer files are stat'ed
/// again: edits to a project or agent file take effect within this long,
/// and a burst of asks costs no system call per ask.
const RECHECK_LAYERS_AFTER: Duration = Duration::from_millis(250);

fn stamp(path: &Path) -> FileStamp {
    let stamp = match crate::facts::fence::metadata(path) {
        Ok(stat) => Stamp::Present(stat.modified, stat.len),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Stamp::Absent,
        Err(e) => Stamp::Unreadable(e.kind()),
    };
    (path.to_path_buf(), stamp)
}

impl PolicyLoader {
    pub fn new(sources: PolicySources) -> Result<Self, ConfigError> {
        let stamp_at_start = sources.global.as_deref().map(stamp);
        let global = match &sources.global {
            Some(path) => ConfigFile::load(path)?,
            None => ConfigFile::default(),
        };
        Ok(Self {
            current: std::sync::RwLock::new(GlobalNow {
                config: Arc::new(global.clone()),
                stamp: stamp_at_start,
                error: None,
            }),
            sources,
            global,
            home: home_dir(),
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// The global config file, when there is one.
    pub fn global_path(&self) -> Option<&Path> {
        self.sources.global.as_deref()
    }

    /// Where project layers' trust is recorded (the daemon's state dir's
    /// `trust.json`), when a store decides it.
    pub fn trust_store(&self) -> Option<PathBuf> {
        match &self.sources.trust {
            super::trust::Trust::Store(dir) => Some(super::trust::store_file(dir)),
            _ => None,
        }
    }

    /// The authority's own directories (the mount point and the state
    /// dir), as `permfs mount` named them: what `permfs run` hides from a
    /// sandbox wherever a bound directory holds them.
    pub fn authority_dirs(&self) -> &[PathBuf] {
        &self.sources.authority_dirs
    }

    /// The global config as read at start.
    pub fn global_config(&self) -> &ConfigFile {
        &self.global
    }

    /// The global config now, re-read when its file changed; with the
    /// error when the file is no longer valid (the config returned is
    /// then the last valid one, to be floored).
    fn current_global(&self, force: bool) -> (Arc<ConfigFile>, Option<String>) {
        let Some(path) = &self.sources.global else {
            return (Arc::new(ConfigFile::default()), None);
        };
        let now = stamp(path);
        if !force {
            if let Ok(current) = self.current.read() {
                if current.stamp.as_ref() == Some(&now) {
                    return (Arc::clone(&current.config), current.error.clone());
                }
            }
        }
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        if force || current.stamp.as_ref() != Some(&now) {
            match ConfigFile::load(path) {
                Ok(config) => {
                    tracing::info!(file = %path.display(), "global config re-read");
                    current.config = Arc::new(config);
                    current.error = None;
                }
                Err(error) => {
                    tracing::error!(file = %path.display(), %error, "the global config is invalid: its last valid rules stay, every allow floored to ask");
                    current.error = Some(format!(
                        "invalid global configuration (the last valid one is kept, floored): {error}"
                    ));
                }
            }
            current.stamp = Some(now);
        }
        (Arc::clone(&current.config), current.error.clone())
    }

    /// Re-reads the global config now (the daemon's `SIGHUP`) and drops
    /// every cached policy. Returns the error when the file is invalid.
    pub fn reload_global(&self) -> Option<String> {
        let (_, error) = self.current_global(true);
        if let Ok(mut cache) = self.cache.lock() {
            cache.clear();
        }
        error
    }

    /// Deny rules, last so no config rule outranks them, on writing the
    /// files this policy is made of: the project configs (whether they
    /// exist yet or not), the project agent files, the global config and
    /// the agent files. An agent that could write them would choose its
    /// own rules; its cwd is where it works, so they are within reach.
    /// (A session grant, which a person made, still comes after them.)
    fn config_guard(&self, cwd: &Path) -> Vec<Rule> {
        let mut targets: Vec<String> = Vec::new();
        let add = |targets: &mut Vec<String>, path: &Path, below: bool| {
            let mut forms = vec![path.to_path_buf()];
            // The canonical spelling too, when a symlink leads there
            // (resolved as far as the directory exists, and up to permfs's
            // own mount when a link leads into it).
            if let Some(real) = path
                .parent()
                .and_then(|p| crate::facts::fence::canonicalize_lenient(p).ok())
                .zip(path.file_name())
                .map(|(dir, name)| dir.join(name))
            {
                forms.push(real);
            }
            for form in forms {
                let text = form.to_string_lossy().into_owned();
                let pattern = if below { format!("{text}/*") } else { text };
                if !targets.contains(&pattern) {
                    targets.push(pattern);
                }
            }
        };
        for file in self.project_files(cwd) {
            add(&mut targets, &file, false);
        }
        add(
            &mut targets,
            &self
                .sources
                .project_agents_dir
                .clone()
                .unwrap_or_else(|| reference_project_agents_dir(cwd)),
            true,
        );
        if let Some(global) = &self.sources.global {
            add(&mut targets, global, false);
        }
        if let Some(agents) = &self.sources.agents_dir {
            add(&mut targets, agents, true);
        }
        // The authority itself and the hook that calls it: an agent that
        // could write into an inbox would decide its own asks, and one that
        // could edit its hook settings would remove the hook. Listed first,
        // so where one of these also names a config file (`<cwd>/.pi/*`)
        // the config's more precise reason is the one that matches last.
        let mut authority: Vec<String> = Vec::new();
        for dir in &self.sources.authority_dirs {
            add(&mut authority, dir, false);
            add(&mut authority, dir, true);
        }
        for file in hook_settings_files(Path::new(&self.home), cwd) {
            add(&mut authority, &file, false);
        }
        // Writing a directory that holds a guarded file is writing that
        // file (`rm -rf .claude`, `mv evil .permfs`, `cp x ~/.codex/`,
        // `chmod -R a-w .codex`): the directories between the cwd or the
        // home and a guarded path are guarded themselves, as exact paths
        // (the cwd, the home and `/` are not: `cp x .` stays possible).
        let roots = [cwd.to_path_buf(), PathBuf::from(&self.home)];
        for list in [&mut authority, &mut targets] {
            let mut ancestors = Vec::new();
            for pattern in list.iter() {
                let mut dir = Path::new(pattern.trim_end_matches("/*")).parent();
                if pattern.ends_with("/*") {
                    dir = Some(Path::new(pattern.trim_end_matches("/*")));
                }
                while let Some(current) = dir {
                    let inside = roots
                        .iter()
                        .any(|root| current.starts_with(root) && current != root.as_path());
                    if !inside {
                        break;
                    }
                    let text = current.to_string_lossy().into_owned();
                    if !text.contains(['*', '?', '[']) && !ancestors.contains(&text) {
                        ancestors.push(text);
                    }
                    dir = current.parent();
                }
            }
            for ancestor in ancestors {
                if !list.contains(&ancestor) {
                    list.push(ancestor);
                }
            }
        }
        let rule = |pattern: &str, reason: &str| {
            Rule::new(
                "path_write",
                pattern,
                PermissionState::Deny,
                Origin::Builtin,
            )
            .with_reason(Some(reason.into()))
        };
        // `permfs trust` writes the trust store on the caller's behalf: an
        // agent's shell may not run it (a person runs it in their own).
        let trust_commands = ["permfs trust *", "*/permfs trust *"].map(|pattern| {
            Rule::new("bash", pattern, PermissionState::Deny, Origin::Builtin).with_reason(Some(
                "permfs: only the operator trusts a project's layers (permfs trust), never an agent".into(),
            ))
        });
        authority
            .iter()
            .map(|p| rule(p, "permfs: an agent may not write to its own permission authority (the permfs mount, its state, the agent's hook and settings files)"))
            .chain(trust_commands)
            .chain(targets.iter().map(|p| {
                rule(
                    p,
                    "permfs: an agent may not edit the permission configuration it is judged by",
                )
            }))
            .collect()
    }

    /// The daemon's home as written and, when a symlink leads there, as
    /// it resolves: the outside-the-sandbox guards' `~`.
    fn homes(&self) -> Vec<String> {
        let mut homes = vec![self.home.clone()];
        if let Ok(real) = crate::facts::fence::canonicalize_lenient(Path::new(&self.home)) {
            let real = real.to_string_lossy().into_owned();
            if !homes.contains(&real) {
                homes.push(real);
            }
        }
        homes
    }

    fn project_files(&self, cwd: &Path) -> Vec<PathBuf> {
        match &self.sources.project_file {
            Some(file) => vec![file.clone()],
            None => vec![reference_project_config(cwd), permfs_project_config(cwd)],
        }
    }

    fn agent_files(&self, cwd: &Path, agent: Option<&str>) -> (Option<PathBuf>, Option<PathBuf>) {
        let Some(agent) = agent.filter(|a| is_valid_agent_name(a)) else {
            return (None, None);
        };
        let file = format!("{agent}.md");
        let agent_file = self.sources.agents_dir.as_ref().map(|d| d.join(&file));
        let project_dir = self
            .sources
            .project_agents_dir
            .clone()
            .unwrap_or_else(|| reference_project_agents_dir(cwd));
        (agent_file, Some(project_dir.join(&file)))
    }

    /// The policy for a session with this cwd running this agent.
    pub fn policy(&self, cwd: &str, agent: Option<&str>) -> Result<Arc<Policy>, CompileError> {
        let key = (cwd.to_string(), agent.map(str::to_string));
        if let Ok(cache) = self.cache.lock() {
            if let Some((_, checked, policy)) = cache.get(&key) {
                if checked.elapsed() < RECHECK_LAYERS_AFTER {
                    return Ok(Arc::clone(policy));
                }
            }
        }
        let cwd_path = Path::new(cwd);
        let (agent_file, project_agent_file) = self.agent_files(cwd_path, agent);
        let mut watched: Vec<PathBuf> = self.project_files(cwd_path);
        watched.extend(self.sources.global.iter().cloned());
        watched.extend(agent_file.iter().cloned());
        watched.extend(project_agent_file.iter().cloned());
        if let super::trust::Trust::Store(state_dir) = &self.sources.trust {
            watched.push(super::trust::store_file(state_dir));
        }
        let stamps: Vec<FileStamp> = watched.iter().map(|p| stamp(p)).collect();
        if let Ok(mut cache) = self.cache.lock() {
            if let Some((cached_stamps, checked, policy)) = cache.get_mut(&key) {
                if *cached_stamps == stamps {
                    *checked = Instant::now();
                    return Ok(Arc::clone(policy));
                }
            }
        }
        let policy = Arc::new(self.build(cwd_path, agent, agent_file, project_agent_file)?);
        if let Ok(mut cache) = self.cache.lock() {
            cache.insert(key, (stamps, Instant::now(), Arc::clone(&policy)));
        }
        Ok(policy)
    }

    fn build(
        &self,
        cwd: &Path,
        agent: Option<&str>,
        agent_file: Option<PathBuf>,
        project_agent_file: Option<PathBuf>,
    ) -> Result<Policy, CompileError> {
        let mut issues = Vec::new();
        let mut invalid = Vec::new();
        let mut sources: Vec<(Origin, PathBuf)> = Vec::new();
        let (global, global_error) = self.current_global(false);
        invalid.extend(global_error);
        if let Some(global) = &self.sources.global {
            sources.push((Origin::Global, global.clone()));
        }
        if let Some(agent) = agent.filter(|a| !is_valid_agent_name(a)) {
            invalid.push(format!(
                "agent name {agent:?} is not valid, so its rules cannot be found"
            ));
        }

        // The trust records, and the cwd as `permfs trust` records it.
        let records = match &self.sources.trust {
            super::trust::Trust::Store(state_dir) => {
                match super::trust::Records::load(&super::trust::store_file(state_dir)) {
                    Ok(records) => Some(records),
                    Err(error) => {
                        issues.push(format!("no project layer is trusted: {error}"));
                        Some(super::trust::Records::default())
                    }
                }
            }
            _ => None,
        };
        let trust_dir =
            crate::facts::fence::canonicalize_lenient(cwd).unwrap_or_else(|_| cwd.to_path_buf());
        let mut layer_trust: Vec<LayerTrust> = Vec::new();
        let mut judge_trust = |origin: Origin, file: &Path, bytes: &[u8]| -> bool {
            let verdict = match (&self.sources.trust, &records) {
                (super::trust::Trust::All, _) => Ok(()),
                (super::trust::Trust::Store(_), Some(records)) => {
                    records.verdict(&trust_dir, file, &super::trust::digest(bytes))
                }
                _ => Err("no trust store: project layers may only narrow".to_string()),
            };
            let trusted = verdict.is_ok();
            layer_trust.push(LayerTrust {
                origin,
                file: file.to_path_buf(),
                trusted,
                why_not: verdict.err(),
            });
            trusted
        };

        // (config, trusted) per project file found.
        let mut projects: Vec<(ConfigFile, bool)> = Vec::new();
        for file in self.project_files(cwd) {
            let bytes = match crate::facts::fence::read(&file) {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    invalid.push(format!(
                        "invalid project configuration: {}: cannot read: {e}",
                        file.display()
                    ));
                    continue;
                }
            };
            let trusted = judge_trust(Origin::Project, &file, &bytes);
            match ConfigFile::parse(&bytes) {
                Ok(config) => {
                    sources.push((Origin::Project, file.clone()));
                    if config.guards.is_some() {
                        issues.push(format!(
                            "{}: guards can be lowered only in the global config; ignored here",
                            file.display()
                        ));
                    }
                    if config.yolo_mode.is_some() || config.authorizer_trust.is_some() {
                        issues.push(format!(
                            "{}: yoloMode and authorizerTrust are honoured only in the global config; ignored here",
                            file.display()
                        ));
                    }
                    if !trusted
                        && (config.authorizer_chain.is_some()
                            || config.forwarding_timeout_ms.is_some())
                    {
                        issues.push(format!(
                            "{}: untrusted, so its authorizerChain and forwardingTimeoutMs are ignored",
                            file.display()
                        ));
                    }
                    projects.push((config, trusted));
                }
                Err(message) => invalid.push(format!(
                    "invalid project configuration: {}: {message}",
                    file.display()
                )),
            }
        }

        let inline_agent: Option<&PermissionMap> = agent.and_then(|name| {
            global
                .agents
                .iter()
                .find(|(agent, _)| agent == name)
                .map(|(_, map)| map)
        });
        let agent_rules = match agent_file {
            Some(file) => match load_agent_file(&file) {
                Ok(Some(rules)) => {
                    sources.push((Origin::Agent, file));
                    issues.extend(rules.notes);
                    Some(rules.permission)
                }
                Ok(None) => None,
                Err(error) => {
                    invalid.push(format!("invalid agent configuration: {error}"));
                    None
                }
            },
            None => None,
        };
        // The project agent file is read once: its digest and its rules
        // are of the same bytes.
        let mut project_agent_rules: Option<(PermissionMap, bool)> = None;
        if let Some(file) = project_agent_file {
            match crate::facts::fence::read(&file) {
                Ok(bytes) => {
                    let trusted = judge_trust(Origin::ProjectAgent, &file, &bytes);
                    let parsed = String::from_utf8(bytes)
                        .map_err(|_| "not UTF-8 text".to_string())
                        .and_then(|text| super::frontmatter::parse_agent_markdown(&text));
                    match parsed {
                        Ok(rules) => {
                            sources.push((Origin::ProjectAgent, file));
                            issues.extend(rules.notes);
                            project_agent_rules = Some((rules.permission, trusted));
                        }
                        Err(error) => invalid.push(format!(
                            "invalid project-agent configuration: {}: {error}",
                            file.display()
                        )),
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => invalid.push(format!(
                    "invalid project-agent configuration: {}: cannot read: {e}",
                    file.display()
                )),
            }
        }
        for layer in layer_trust.iter().filter(|l| !l.trusted) {
            issues.push(format!(
                "{} is untrusted, so it may only narrow (its allow rules do not count): {}",
                layer.file.display(),
                layer.why_not.as_deref().unwrap_or("not trusted")
            ));
        }

        // Every layer in the reference's order, each with its trust.
        let mut all: Vec<(Origin, &PermissionMap, bool)> =
            vec![(Origin::Global, &global.permission, true)];
        all.extend(
            projects
                .iter()
                .map(|(p, trusted)| (Origin::Project, &p.permission, *trusted)),
        );
        all.extend(inline_agent.map(|map| (Origin::Agent, map, true)));
        all.extend(agent_rules.as_ref().map(|map| (Origin::Agent, map, true)));
        all.extend(
            project_agent_rules
                .as_ref()
                .map(|(map, trusted)| (Origin::ProjectAgent, map, *trusted)),
        );
        let layers: Vec<(Origin, &PermissionMap)> = all
            .iter()
            .filter(|(_, _, trusted)| *trusted)
            .map(|(origin, map, _)| (*origin, *map))
            .collect();
        let untrusted = all.iter().any(|(_, _, trusted)| !trusted);
        let trusted_projects = || {
            projects
                .iter()
                .filter(|(_, trusted)| *trusted)
                .map(|(p, _)| p)
        };

        let settings = Settings {
            yolo: global.yolo_mode.unwrap_or(false),
            forwarding_timeout_ms: trusted_projects()
                .rev()
                .find_map(|p| p.forwarding_timeout_ms)
                .or(global.forwarding_timeout_ms)
                .unwrap_or(DEFAULT_FORWARDING_TIMEOUT_MS),
            authorizer_chain: trusted_projects()
                .rev()
                .find_map(|p| p.authorizer_chain.clone())
                .or_else(|| global.authorizer_chain.clone())
                .unwrap_or_default(),
            authorizer_trust: global.authorizer_trust.clone().unwrap_or_default(),
        };
        let set = LayerSet {
            layers,
            yolo: settings.yolo,
            invalid: invalid.clone(),
        };
        let mut composed = compose_rules(&set);
        let guard_rules = self.config_guard(cwd);
        composed.extend(guard_rules.iter().cloned());
        let rules = CompiledRules::compile(composed, &self.home)?;
        let guard = Arc::new(CompiledRules::compile(guard_rules.clone(), &self.home)?);
        let narrowing = if untrusted {
            let mut everything = compose_rules(&LayerSet {
                layers: all.iter().map(|(o, m, _)| (*o, *m)).collect(),
                yolo: settings.yolo,
                invalid: invalid.clone(),
            });
            everything.extend(guard_rules);
            Some(Arc::new(CompiledRules::compile(everything, &self.home)?))
        } else {
            None
        };
        let outside = super::outside::OutsideGuards::shared(
            &self.homes(),
            global.guards.as_deref().unwrap_or_default(),
        );
        if let Some(why) = outside.broken_reason() {
            issues.push(format!("{why}: every write asks a person"));
        }
        for (name, setting) in &outside.settings {
            if *setting == super::outside::Setting::Allow {
                issues.push(format!(
                    "the built-in guard {name:?} (files that run outside the sandbox) is lowered to allow by the global config"
                ));
            }
        }
        let failed_closed = !invalid.is_empty();
        if failed_closed {
            issues.extend(invalid);
            issues.push(
                "failing closed: every 'allow' rule is clamped to 'ask' until the configuration is corrected".into(),
            );
        }
        Ok(Policy {
            rules,
            settings,
            issues,
            failed_closed,
            sources,
            guard,
            layers: layer_trust,
            narrowing,
            outside,
        })
    }
}

/// The files that install an agent's command hook or settle what the
/// agent may do (its permission settings, managed policy, MCP servers,
/// extensions): `permfs hook`, and permfs's word, are only an authority
/// while the agent cannot rewrite these. Each entry is a `path_write`
/// pattern (`*` crosses `/`).
///
/// Claude Code: `settings*.json` under `~/.claude`, `<cwd>/.claude` and
/// `$CLAUDE_CONFIG_DIR`, its state file `~/.claude.json` (or
/// `$CLAUDE_CONFIG_DIR/.claude.json`), and the managed `/etc/claude-code/`.
/// Codex: `config.toml`, `requirements.toml` and `hooks.json` under
/// `~/.codex`, `<cwd>/.codex` and `$CODEX_HOME`, and the system
/// `/etc/codex/`. pi: its agent dir (`~/.pi/agent`, `$PI_CODING_AGENT_DIR`:
/// settings, extensions and their configs, agents) and the project's
/// `<cwd>/.pi/`. The variables are read from the daemon's environment
/// (an agent started with another value is covered only at the defaults).
pub fn hook_settings_files(home: &Path, cwd: &Path) -> Vec<PathBuf> {
    let env_dir = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    agent_settings_files(
        home,
        cwd,
        env_dir("CODEX_HOME").as_deref(),
        env_dir("CLAUDE_CONFIG_DIR").as_deref(),
        env_dir("PI_CODING_AGENT_DIR").as_deref(),
    )
}

/// [`hook_settings_files`] with the agents' directory variables given.
pub fn agent_settings_files(
    home: &Path,
    cwd: &Path,
    codex_home: Option<&Path>,
    claude_config_dir: Option<&Path>,
    pi_agent_dir: Option<&Path>,
) -> Vec<PathBuf> {
    let mut claude_dirs = vec![home.join(".claude"), cwd.join(".claude")];
    claude_dirs.extend(claude_config_dir.map(Path::to_path_buf));
    let mut codex_dirs = vec![home.join(".codex"), cwd.join(".codex")];
    codex_dirs.extend(codex_home.map(Path::to_path_buf));
    let mut files = Vec::new();
    for dir in &claude_dirs {
        files.push(dir.join("settings*.json"));
    }
    files.push(home.join(".claude.json"));
    files.extend(claude_config_dir.map(|d| d.join(".claude.json")));
    files.push(PathBuf::from("/etc/claude-code/*"));
    for dir in &codex_dirs {
        for name in ["config.toml", "requirements.toml", "hooks.json"] {
            files.push(dir.join(name));
        }
    }
    files.push(PathBuf::from("/etc/codex/*"));
    files.push(home.join(".pi").join("agent").join("*"));
    files.extend(pi_agent_dir.map(|d| d.join("*")));
    files.push(cwd.join(".pi").join("*"));
    let mut seen = std::collections::HashSet::new();
    files.retain(|f| seen.insert(f.clone()));
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::config::parse_permission_map;
    use serde_json::json;

    fn map(value: serde_json::Value) -> PermissionMap {
        parse_permission_map(&value, "permission").expect("valid map")
    }

    fn summary(rules: &[Rule]) -> Vec<String> {
        rules
            .iter()
            .map(|r| format!("{} {} {} {}", r.surface, r.pattern, r.action, r.origin))
            .collect()
    }

    #[test]
    fn maps_merge_shallowly_and_keep_positions() {
        let global = map(json!({"bash": {"*": "ask", "git *": "allow"}}));
        let project = map(json!({"bash": {"*": "deny"}}));
        let rules = compose_rules(&LayerSet {
            layers: vec![(Origin::Global, &global), (Origin::Project, &project)],
            ..Default::default()
        });
        assert_eq!(
            summary(&rules),
            [
                "* * ask builtin",
                "bash * deny project",
                "bash git * allow global"
            ]
        );
    }

    #[test]
    fn a_state_replaces_a_map_and_back() {
        let global = map(json!({"*": "deny", "bash": {"git *": "allow"}}));
        let project = map(json!({"bash": "ask"}));
        let agent = map(json!({"bash": {"ls": "allow"}}));
        let rules = compose_rules(&LayerSet {
            layers: vec![
                (Origin::Global, &global),
                (Origin::Project, &project),
                (Origin::Agent, &agent),
            ],
            ..Default::default()
        });
        assert_eq!(summary(&rules), ["* * deny global", "bash ls allow agent"]);
    }

    #[test]
    fn directional_sugar_expands_before_explicit_keys() {
        let global =
            map(json!({"path_read": {"*.env": "allow"}, "path": {"*": "allow", "*.env": "deny"}}));
        let rules = compose_rules(&LayerSet {
            layers: vec![(Origin::Global, &global)],
            ..Default::default()
        });
        assert_eq!(
            summary(&rules),
            [
                "* * ask builtin",
                "path_read * allow global",
                "path_read *.env allow global",
                "path_write * allow global",
                "path_write *.env deny global",
            ]
        );
    }

    #[test]
    fn yolo_then_fail_closed_floor() {
        let global = map(json!({"bash": {"*": "ask", "rm *": "deny", "ls": "allow"}}));
        let yolo = compose_rules(&LayerSet {
            layers: vec![(Origin::Global, &global)],
            yolo: true,
            invalid: vec![],
        });
        assert_eq!(
            summary(&yolo),
            [
                "* * allow yolo",
                "bash * allow yolo",
                "bash rm * deny global",
                "bash ls allow global"
            ]
        );
        let floored = compose_rules(&LayerSet {
            layers: vec![(Origin::Global, &global)],
            yolo: true,
            invalid: vec!["bad project".into()],
        });
        assert!(floored.iter().all(|r| r.action != PermissionState::Allow));
        assert_eq!(floored[3].origin, Origin::FailClosed);
    }

    #[test]
    fn mcp_baseline_appears_only_with_an_mcp_allow() {
        let without = map(json!({"mcp": {"*": "ask"}}));
        let with = map(json!({"mcp": {"exa:*": "allow"}}));
        let count = |m: &PermissionMap| {
            compose_rules(&LayerSet {
                layers: vec![(Origin::Global, m)],
                ..Default::default()
            })
            .iter()
            .filter(|r| r.origin == Origin::Baseline)
            .count()
        };
        assert_eq!(count(&without), 0);
        assert_eq!(count(&with), 5);
    }

    #[test]
    fn the_authority_and_the_hook_settings_are_guarded() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mount = dir.path().join("mnt");
        let loader = PolicyLoader::new(PolicySources {
            authority_dirs: vec![mount.clone()],
            ..Default::default()
        })
        .expect("loader");
        let cwd = dir.path().join("work");
        let guard = loader.config_guard(&cwd);
        let patterns: Vec<&str> = guard.iter().map(|r| r.pattern.as_str()).collect();
        let mount_below = format!("{}/*", mount.display());
        let claude = format!("{}/.claude/settings*.json", cwd.display());
        let codex = format!("{}/.codex/config.toml", loader.home);
        for wanted in [&mount_below, &claude, &codex] {
            assert!(
                patterns.contains(&wanted.as_str()),
                "{wanted} in {patterns:?}"
            );
        }
        assert!(guard.iter().all(|r| (r.surface == "path_write"
            || r.pattern.contains("permfs trust"))
            && r.action == PermissionState::Deny));
    }

    #[test]
    fn every_agents_settings_file_is_guarded() {
        let home = Path::new("/home/u");
        let cwd = Path::new("/w");
        let files = agent_settings_files(
            home,
            cwd,
            Some(Path::new("/ch")),
            Some(Path::new("/cc")),
            Some(Path::new("/pa")),
        );
        let guard = CompiledRules::compile(
            files
                .iter()
                .map(|f| {
                    Rule::new(
                        "path_write",
                        &f.to_string_lossy(),
                        PermissionState::Deny,
                        Origin::Builtin,
                    )
                })
                .collect(),
            "/home/u",
        )
        .expect("compiles");
        let denied = |path: &str| {
            crate::policy::evaluate::evaluate_any_value(
                &[&guard],
                "path_write",
                &[path.to_string()],
            )
            .map(|v| v.rule.action == PermissionState::Deny)
            .unwrap_or(false)
        };
        for path in [
            "/etc/claude-code/managed-settings.json",
            "/etc/codex/config.toml",
            "/home/u/.codex/requirements.toml",
            "/home/u/.codex/config.toml",
            "/home/u/.codex/hooks.json",
            "/home/u/.claude.json",
            "/home/u/.claude/settings.json",
            "/home/u/.claude/settings.local.json",
            "/w/.claude/settings.local.json",
            "/w/.codex/config.toml",
            "/ch/config.toml",
            "/ch/requirements.toml",
            "/cc/settings.json",
            "/cc/.claude.json",
            "/home/u/.pi/agent/settings.json",
            "/home/u/.pi/agent/extensions/pi-permission-system/config.json",
            "/pa/extensions/pi-permission-system/config.json",
            "/w/.pi/settings.json",
            "/w/.pi/extensions/pi-permission-system/config.json",
            "/w/.pi/agents/friend.md",
        ] {
            assert!(denied(path), "{path} is not guarded");
        }
        for path in [
            "/w/src/main.rs",
            "/home/u/notes.txt",
            "/etc/hosts",
            "/w/.claude/notes.md",
        ] {
            assert!(!denied(path), "{path} is guarded");
        }
    }
}
