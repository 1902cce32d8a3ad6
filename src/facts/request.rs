//! From what an agent asked to the facts of the ask.
//!
//! Three request forms: a tool call (the built-in gates derive the
//! surfaces), a single surface and value, or pre-fixed facts in the wire
//! shape for a client that computed them in its own mount namespace. Facts
//! are fixed here, at the asking session, with its cwd.

use super::access_path::{AccessPath, CanonicalCwd, CwdCache};
use super::bash::{bash_paths, bash_targets, UNDERSTOOD_ONLY_IN_PART, UNRESOLVED_WRITE};
use super::intent::{is_path_surface, AccessIntent, Principal};
use super::path_text::{absolute_cwd, home_dir};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

/// How the asker described the action. (Serialized only into the
/// journal, `session/store/journal.rs`, which reads it back.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum AskForm {
    ToolCall {
        tool: String,
        input: Value,
    },
    Surface {
        surface: String,
        value: String,
    },
    /// A surface-level check with no value (`{"surface": S}`, a `null` or,
    /// outside `bash` and `skill`, a blank value): the reference checks a
    /// surface this way for an extension tool, a path tool called without a
    /// path and its service's value-less query, so permfs answers it too.
    SurfaceOnly {
        surface: String,
    },
    /// Pre-fixed facts; `Err` holds why they were unusable (they then floor
    /// to `ask`: no facts, no recorded judgment).
    Intents(Result<Vec<AccessIntent>, String>),
    /// An ask that names nothing a rule could judge (a forwarded pi request
    /// without a surface and value), with why: it floors to `ask`, so only
    /// a person (or a judge) answers it.
    Unjudgeable(String),
}

/// A parsed request: the ask plus what a person will see with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub form: AskForm,
    pub message: Option<String>,
    /// Grant patterns the asker suggests for an `allow session` answer.
    pub suggested_patterns: Vec<String>,
    /// Only honoured by the offline `resolve` command; the mount takes the
    /// agent from the session, never from the request.
    pub agent: Option<String>,
    /// The surface the suggested patterns are for, when the asker named one
    /// (a pi child's `sessionApproval`): an `allow session` then records
    /// exactly `(surface, pattern)` pairs, as the reference's serving node
    /// does, rather than one per fact surface.
    pub suggested_surface: Option<String>,
    /// Where a forwarded request came from, as its writer claimed: kept
    /// for the person and the audit log, never used as identity.
    pub forwarded: Option<super::forwarded::Provenance>,
}

impl AskForm {
    /// The grant an `allow session` answer records for a surface-level
    /// check when the asker suggested none: `(S, "*")`, as the reference
    /// suggests for a tool it checked against `*`. An extension surface
    /// asked with a value gets the same, because its `*` check (see
    /// [`Requester::facts`]) is only answered by a grant matching `*`; a
    /// narrower grant would leave the repeated ask pending. `None` for any
    /// other form: the grant is derived from the facts.
    pub fn surface_level_grant(&self) -> Option<(String, String)> {
        let surface = match self {
            Self::SurfaceOnly { surface } => surface.trim(),
            Self::Surface { surface, value }
                if is_absent_value(surface.trim(), value)
                    || is_extension_surface(surface.trim()) =>
            {
                surface.trim()
            }
            _ => return None,
        };
        Some((surface.to_string(), "*".to_string()))
    }
}

/// Whether `value` counts as no value for `surface`: a blank value means
/// "the surface itself", except for `bash` (an empty line is a command
/// line) and `skill` (the reference matches a skill's name as given).
fn is_absent_value(surface: &str, value: &str) -> bool {
    value.trim().is_empty() && !matches!(surface, "bash" | "skill")
}

/// A surface the reference always checks against `*`, whatever value it
/// was given: anything but the path surfaces, `bash`, `mcp` and `skill`.
fn is_extension_surface(surface: &str) -> bool {
    !is_path_surface(surface) && !matches!(surface, "bash" | "mcp" | "skill")
}

/// Why a request could not be understood at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestError(pub String);

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RequestError {}

const REQUEST_KEYS: &[&str] = &[
    "tool",
    "input",
    "surface",
    "value",
    "accessIntent",
    "message",
    "suggestedPatterns",
    "agent",
];

/// A request line read straight into its fields, without a JSON tree of
/// the whole line: the shape every well-formed tool call or surface ask
/// has. Anything this cannot take exactly as [`Request::from_value`] would
/// (an unknown or repeated key, a value of the wrong type, pre-fixed facts,
/// a blank name) makes [`Request::parse`] read the line again as a tree,
/// so every answer and every error message is the tree's.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WireRequest {
    #[serde(default)]
    tool: Option<String>,
    /// `Some(Value::Null)` for an explicit `null`, which the tree reading
    /// refuses (only an absent `input` means an empty one).
    #[serde(default, deserialize_with = "present_value")]
    input: Option<Value>,
    #[serde(default)]
    surface: Option<String>,
    #[serde(default)]
    value: Option<String>,
    /// Whether the key is there at all (even as `null`): pre-fixed facts
    /// are read from the tree.
    #[serde(default, deserialize_with = "present")]
    access_intent: bool,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    suggested_patterns: Option<Vec<String>>,
    #[serde(default)]
    agent: Option<String>,
}

/// Any value, `null` included, as `Some` (a plain `Option` reads `null` as
/// absent).
fn present_value<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// `true` for any value, `null` included; the value itself is skipped.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(d).map(|_| true)
}

impl WireRequest {
    /// The request, when the fields alone settle it exactly as
    /// [`Request::from_value`] would; `None` sends the line to the tree.
    fn into_request(self) -> Option<Request> {
        if self.access_intent {
            return None;
        }
        let form = if let Some(tool) = self.tool {
            if tool.trim().is_empty() {
                return None;
            }
            let input = self
                .input
                .unwrap_or_else(|| Value::Object(Default::default()));
            if !input.is_object() {
                return None;
            }
            AskForm::ToolCall { tool, input }
        } else {
            let surface = self.surface?;
            if surface.trim().is_empty() {
                return None;
            }
            match self.value {
                Some(value) if !is_absent_value(surface.trim(), &value) => {
                    AskForm::Surface { surface, value }
                }
                _ => AskForm::SurfaceOnly { surface },
            }
        };
        Some(Request {
            form,
            message: self.message,
            suggested_patterns: self.suggested_patterns.unwrap_or_default(),
            agent: self.agent,
            suggested_surface: None,
            forwarded: None,
        })
    }
}

impl Request {
    /// Reads a request line. The common shapes are read field by field
    /// (no tree of the line, no copy of `input`); anything else, and every
    /// error, goes through [`Self::from_value`], the one definition of
    /// what a request means.
    pub fn parse(text: &str) -> Result<Self, RequestError> {
        if let Some(request) = serde_json::from_str::<WireRequest>(text)
            .ok()
            .and_then(WireRequest::into_request)
        {
            return Ok(request);
        }
        let value: Value = serde_json::from_str(text)
            .map_err(|e| RequestError(format!("request is not valid JSON: {e}")))?;
        Self::from_value(&value)
    }

    pub fn from_value(value: &Value) -> Result<Self, RequestError> {
        let object = value
            .as_object()
            .ok_or_else(|| RequestError("request must be a JSON object".into()))?;
        if let Some(unknown) = object.keys().find(|k| !REQUEST_KEYS.contains(&k.as_str())) {
            return Err(RequestError(format!(
                "unknown request key {unknown:?} (expected one of: {})",
                REQUEST_KEYS.join(", ")
            )));
        }
        let text = |key: &str| -> Result<Option<String>, RequestError> {
            match object.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(other) => Err(RequestError(format!(
                    "{key:?} must be a string, got {other}"
                ))),
            }
        };
        let form = if let Some(intent) = object.get("accessIntent") {
            AskForm::Intents(parse_intents(intent))
        } else if let Some(tool) = text("tool")? {
            if tool.trim().is_empty() {
                return Err(RequestError("\"tool\" must not be empty".into()));
            }
            let input = object
                .get("input")
                .cloned()
                .unwrap_or(Value::Object(Default::default()));
            if !input.is_object() {
                return Err(RequestError("\"input\" must be a JSON object".into()));
            }
            AskForm::ToolCall { tool, input }
        } else if let Some(surface) = text("surface")? {
            if surface.trim().is_empty() {
                return Err(RequestError("\"surface\" must not be empty".into()));
            }
            // A non-string value stays an error (`text` refuses it): only
            // absence, `null` or a blank means "the surface itself".
            match text("value")? {
                Some(value) if !is_absent_value(surface.trim(), &value) => {
                    AskForm::Surface { surface, value }
                }
                _ => AskForm::SurfaceOnly { surface },
            }
        } else {
            return Err(RequestError(
                "a request needs \"tool\" (+ \"input\"), \"surface\" (+ \"value\"), or \"accessIntent\"".into(),
            ));
        };
        let suggested_patterns = match object.get("suggestedPatterns") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_str().map(str::to_string).ok_or_else(|| {
                        RequestError("\"suggestedPatterns\" must be an array of strings".into())
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(RequestError(
                    "\"suggestedPatterns\" must be an array of strings".into(),
                ))
            }
        };
        Ok(Self {
            form,
            message: text("message")?,
            suggested_patterns,
            agent: text("agent")?,
            suggested_surface: None,
            forwarded: None,
        })
    }
}

/// Validates pre-fixed facts as ADR 0008 §4 and the reference's reader do:
/// anything off makes the whole set unusable (never partially trusted).
fn parse_intents(value: &Value) -> Result<Vec<AccessIntent>, String> {
    let items: Vec<&Value> = match value {
        Value::Array(items) if !items.is_empty() => items.iter().collect(),
        Value::Array(_) => return Err("accessIntent is an empty list".into()),
        single => vec![single],
    };
    items
        .into_iter()
        .map(|item| {
            let object = item.as_object().ok_or("accessIntent must be an object")?;
            let surface = object
                .get("surface")
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .ok_or("accessIntent.surface must be a non-empty string")?;
            let match_values = object
                .get("matchValues")
                .and_then(Value::as_array)
                .filter(|values| !values.is_empty())
                .ok_or("accessIntent.matchValues must be a non-empty array of strings")?
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Arc<[_]>>>()
                .ok_or("accessIntent.matchValues must contain only strings")?;
            let boundary_value = match object.get("boundaryValue") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.as_str().into()),
                Some(_) => return Err("accessIntent.boundaryValue must be a string or null".into()),
            };
            let floor = match object.get("floor") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(_) => return Err("accessIntent.floor must be a string".into()),
            };
            let requester_cwd = object
                .get("requesterCwd")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .into();
            Ok(AccessIntent {
                surface: surface.to_string(),
                match_values,
                boundary_value,
                requester_cwd,
                // Identity inside a request is never trusted: the caller
                // stamps the real principal.
                principal: Arc::default(),
                floor,
                word: None,
                bare_word: false,
            })
        })
        .collect()
}

/// The asking session as the facts see it: its cwd and identity.
#[derive(Debug, Clone)]
pub struct Requester {
    pub cwd: String,
    /// `cwd` as every fact carries it: one copy, shared by all of them.
    fact_cwd: Arc<str>,
    canonical_cwd: CanonicalCwd,
    home: String,
    /// Shared by every fact, like `fact_cwd`.
    pub principal: Arc<Principal>,
}

/// The facts of one ask: every surface it raises, in gate order.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FactSet {
    /// The tool the ask came from, when it was a tool call.
    pub tool: Option<String>,
    pub intents: Vec<AccessIntent>,
    /// Set when pre-fixed facts were unusable: the ask floors to `ask`.
    pub unusable: Option<String>,
}

impl FactSet {
    /// Facts that could not be derived, with why: they floor to `ask`.
    fn unusable(why: String) -> Self {
        Self {
            tool: None,
            intents: Vec::new(),
            unusable: Some(why),
        }
    }
}

impl Requester {
    /// A relative `cwd` is resolved against the process cwd (sessions'
    /// cwds are absolute, so the mount never asks the kernel for it).
    pub fn new(cwd: &str, principal: Principal) -> Self {
        let cwd = absolute_cwd(cwd);
        Self {
            canonical_cwd: CanonicalCwd::of(&cwd),
            fact_cwd: cwd.as_str().into(),
            cwd,
            home: home_dir(),
            principal: Arc::new(principal),
        }
    }

    /// A session asking: its cwd, home and canonical cwd come from its
    /// [`CwdCache`], the canonical form only if a fact needs it.
    pub fn of_session(place: &Arc<CwdCache>, principal: Principal) -> Self {
        Self {
            cwd: place.cwd().to_string(),
            fact_cwd: place.cwd().into(),
            home: place.home().to_string(),
            canonical_cwd: CanonicalCwd::of_session(Arc::clone(place)),
            principal: Arc::new(principal),
        }
    }

    pub fn facts(&self, form: &AskForm) -> FactSet {
        match form {
            AskForm::ToolCall { tool, input } => self.tool_call_facts(tool.trim(), input),
            AskForm::Surface { surface, value } => self.surface_facts(surface.trim(), Some(value)),
            AskForm::SurfaceOnly { surface } => self.surface_facts(surface.trim(), None),
            AskForm::Intents(Ok(intents)) => FactSet {
                tool: None,
                intents: intents
                    .iter()
                    .cloned()
                    .map(|mut intent| {
                        intent.principal = Arc::clone(&self.principal);
                        if intent.requester_cwd.is_empty() {
                            intent.requester_cwd = Arc::clone(&self.fact_cwd);
                        }
                        intent
                    })
                    .collect(),
                unusable: None,
            },
            AskForm::Intents(Err(why)) | AskForm::Unjudgeable(why) => FactSet {
                tool: None,
                intents: Vec::new(),
                unusable: Some(why.clone()),
            },
        }
    }

    /// The facts of a `{surface, value?}` ask.
    ///
    /// Without a value the surface is checked as the reference checks it
    /// (see [`Self::surface_level_intent`]). An extension surface with a
    /// value is checked twice, on `*` (all the reference evaluates: it
    /// ignores the value) and on the value, and the stricter answers: permfs
    /// is then never less restrictive than the reference, and a rule a user
    /// wrote for one value (`deploy: {"prod": "deny"}`) still holds. `mcp`
    /// with a value is checked on the reference's value-less targets and on
    /// `[value, "mcp"]`, for the same reason.
    fn surface_facts(&self, surface: &str, value: Option<&str>) -> FactSet {
        let value = value.filter(|v| !is_absent_value(surface, v));
        let intents = match value {
            None => vec![self.surface_level_intent(surface)],
            Some(value) if is_extension_surface(surface) && value != "*" => vec![
                // `*` first: on a tie it is the reference's own answer.
                self.plain_intent(surface, vec!["*".into()]),
                self.plain_intent(surface, vec![value.to_string()]),
            ],
            Some(value) if surface == "mcp" => {
                // Likewise for `mcp`: the value is the target the asker
                // means, and the reference's own candidates (it ignores the
                // value) are judged as well.
                let asked = self.intent(surface, value);
                let reference = self.surface_level_intent(surface);
                if asked.match_values == reference.match_values {
                    vec![asked]
                } else {
                    vec![reference, asked]
                }
            }
            Some(value) if surface == "bash" => {
                // The line's writes are facts too: the built-in guards and
                // the config's write rules must see `> X` and `--output=X`
                // whichever form asked.
                let (mut intents, floor, spellings) = self.bash_path_intents(value, false);
                let mut values = vec![value.to_string()];
                values.extend(spellings);
                let mut intent = self.plain_intent(surface, values);
                intent.floor = floor;
                intents.push(intent);
                intents
            }
            Some(value) => vec![self.intent(surface, value)],
        };
        FactSet {
            tool: None,
            intents,
            unusable: None,
        }
    }

    /// A surface checked without a value, with the reference's candidates
    /// (`normalizeInput` on an empty input): `bash` the empty line, `mcp`
    /// its status targets, every other surface the literal `*`. A path
    /// surface gets no alias set, cwd or boundary: there is no path.
    fn surface_level_intent(&self, surface: &str) -> AccessIntent {
        match surface {
            "bash" => self.intent("bash", ""),
            "mcp" => self.plain_intent("mcp", mcp_candidates(&Value::Object(Default::default()))),
            _ => self.plain_intent(surface, vec!["*".into()]),
        }
    }

    /// One surface's facts: an alias set for a path surface, the value
    /// itself for anything else.
    pub fn intent(&self, surface: &str, value: &str) -> AccessIntent {
        if is_path_surface(surface) {
            self.path_intent(surface, &AccessPath::for_path(value, &self.cwd, &self.home))
        } else if surface == "mcp" && value != "mcp" {
            // As for a tool call, the bare `mcp` target is the last candidate.
            self.plain_intent(surface, vec![value.to_string(), "mcp".to_string()])
        } else {
            self.plain_intent(surface, vec![value.to_string()])
        }
    }

    fn path_intent(&self, surface: &str, path: &AccessPath) -> AccessIntent {
        AccessIntent {
            surface: surface.to_string(),
            match_values: if path.match_values.is_empty() {
                Arc::new(["*".into()])
            } else {
                Arc::clone(&path.match_values)
            },
            boundary_value: (!path.boundary.is_empty()).then(|| Arc::clone(&path.boundary)),
            requester_cwd: Arc::clone(&self.fact_cwd),
            principal: Arc::clone(&self.principal),
            floor: None,
            word: None,
            bare_word: false,
        }
    }

    fn plain_intent(&self, surface: &str, values: Vec<String>) -> AccessIntent {
        AccessIntent {
            surface: surface.to_string(),
            match_values: values.into(),
            boundary_value: None,
            requester_cwd: Arc::clone(&self.fact_cwd),
            principal: Arc::clone(&self.principal),
            floor: None,
            word: None,
            bare_word: false,
        }
    }

    /// Codex's `apply_patch`: a `path_write` fact (and
    /// `external_directory_write` outside the cwd) for every file its
    /// envelope names, then the `apply_patch` surface. A patch that cannot
    /// be read gives no usable facts: it floors to `ask`.
    fn patch_facts(&self, input: &Value) -> FactSet {
        let text = ["patch", "input", "command"]
            .iter()
            .find_map(|k| input.get(*k).and_then(Value::as_str))
            .or_else(|| input.as_str());
        let files = match text.map(super::patch::written_files) {
            Some(Ok(files)) => files,
            Some(Err(why)) => {
                let mut facts = FactSet::unusable(format!("apply_patch: {why}"));
                facts.tool = Some("apply_patch".into());
                return facts;
            }
            None => return FactSet::unusable("apply_patch: the call carries no patch".into()),
        };
        let mut intents = Vec::with_capacity(2 * files.len() + 1);
        for file in &files {
            let path = AccessPath::for_path(file, &self.cwd, &self.home);
            let mut intent = self.path_intent("path_write", &path);
            intent.word = Some(file.clone());
            intents.push(intent);
            if path.is_outside(self.canonical_cwd.get()) {
                let mut intent = self.path_intent("external_directory_write", &path);
                intent.word = Some(file.clone());
                intents.push(intent);
            }
        }
        intents.push(self.plain_intent("apply_patch", files));
        FactSet {
            tool: Some("apply_patch".into()),
            intents,
            unusable: None,
        }
    }

    /// The built-in gates: which surfaces a tool call raises.
    fn tool_call_facts(&self, tool: &str, input: &Value) -> FactSet {
        if tool == "apply_patch" {
            return self.patch_facts(input);
        }
        let direction = match tool {
            "read" | "grep" | "find" | "ls" => Some("_read"),
            "write" => Some("_write"),
            _ => None,
        };
        let built_in_path_tool = is_built_in_path_tool(tool);
        let path_input = if tool == "mcp" {
            input
                .get("arguments")
                .and_then(|a| non_empty_string(a.get("path")))
        } else if tool == "bash" {
            None
        } else {
            non_empty_string(input.get("path"))
        };
        let mut intents = Vec::new();
        let path = path_input.map(|p| AccessPath::for_path(&p, &self.cwd, &self.home));
        if let Some(path) = &path {
            let suffix = direction.unwrap_or("");
            intents.push(self.path_intent(&format!("path{suffix}"), path));
            if path.is_outside(self.canonical_cwd.get()) {
                intents.push(self.path_intent(&format!("external_directory{suffix}"), path));
            }
        }
        // The reference's gate reads the command trimmed, and a blank one
        // as the empty line (`getNonEmptyString`).
        let command = string_field(input, "command")
            .map(|c| c.trim().to_string())
            .unwrap_or_default();
        let mut bash_floor = None;
        let mut spellings = Vec::new();
        if tool == "bash" {
            let (path_intents, floor, spelled) = self.bash_path_intents(&command, true);
            intents.extend(path_intents);
            bash_floor = floor;
            spellings = spelled;
        }
        let tool_intent = match tool {
            "bash" => {
                let mut values = vec![command];
                values.extend(spellings);
                let mut intent = self.plain_intent("bash", values);
                intent.floor = bash_floor;
                intent
            }
            "mcp" => self.plain_intent("mcp", mcp_candidates(input)),
            "skill" => self.plain_intent(
                "skill",
                vec![string_field(input, "name").unwrap_or_else(|| "*".into())],
            ),
            _ if built_in_path_tool => match &path {
                Some(path) => self.path_intent(tool, path),
                None => self.plain_intent(tool, vec!["*".into()]),
            },
            _ => self.plain_intent(tool, vec!["*".into()]),
        };
        intents.push(tool_intent);
        FactSet {
            tool: Some(tool.to_string()),
            intents,
            unusable: None,
        }
    }
}

impl Requester {
    /// The reference's two bash path gates as facts: every word resolving
    /// outside the cwd on `external_directory`, then every path word (and
    /// bare word, marked) on `path`, each naming its word. Resolved here,
    /// with this session's cwd and symlinks, so ancestors judge the same
    /// paths. A line that cannot be parsed gives none: its `bash` check
    /// floors to `ask` on its own.
    ///
    /// Then what the line reads and writes (redirects, and the operands and
    /// options of the commands in `effects.json`): `path_write` /
    /// `path_read`, and `external_directory_write` / `_read` outside the
    /// cwd, so the config's directional rules and the built-in guards on
    /// the authority see `--output=X`, `dd of=X`, `sed -i X`, `> X`. With
    /// `gates` false (a `{surface: bash}` ask, which the reference judges
    /// on its command alone) only the writes are added: a line is never
    /// allowed to write where a rule or guard would refuse, whichever form
    /// asked (stricter than the reference: docs/reference-divergences.md).
    ///
    /// And the line's commands spelled with their relative path operands
    /// absolute (`rm /repo/secrets/x` for `rm secrets/x`), which a specific
    /// `bash` rule written with an absolute path meets (newer upstream).
    ///
    /// Also returns the floor for the `bash` check when the line writes
    /// where its text does not fix, or uses a known command in a way not
    /// understood: no rule may then allow it alone.
    fn bash_path_intents(
        &self,
        command: &str,
        gates: bool,
    ) -> (Vec<AccessIntent>, Option<String>, Vec<String>) {
        if command.trim().is_empty() {
            return (Vec::new(), None, Vec::new());
        }
        let paths = if gates {
            bash_paths(command, &self.cwd, &self.canonical_cwd, &self.home)
        } else {
            bash_targets(command, &self.cwd, &self.canonical_cwd, &self.home)
        };
        let Some(paths) = paths else {
            return (Vec::new(), None, Vec::new());
        };
        let mut intents = Vec::with_capacity(
            paths.external.len() + paths.rule_words.len() + 2 * paths.targets.len(),
        );
        if gates {
            for (word, path) in &paths.external {
                let mut intent = self.path_intent("external_directory", path);
                intent.word = Some(word.clone());
                intents.push(intent);
            }
            for rule_word in &paths.rule_words {
                let mut intent = self.path_intent("path", &rule_word.path);
                intent.word = Some(rule_word.token.clone());
                intent.bare_word = rule_word.bare;
                intents.push(intent);
            }
        }
        for target in &paths.targets {
            if !gates && !target.write {
                continue;
            }
            let suffix = if target.write { "_write" } else { "_read" };
            let mut intent = self.path_intent(&format!("path{suffix}"), &target.path);
            intent.word = Some(target.token.clone());
            intents.push(intent);
            if target.outside {
                let mut intent =
                    self.path_intent(&format!("external_directory{suffix}"), &target.path);
                intent.word = Some(target.token.clone());
                intents.push(intent);
            }
        }
        let floor = if paths.unresolved_write.is_some() {
            Some(UNRESOLVED_WRITE.to_string())
        } else if paths.not_understood.is_some() {
            Some(UNDERSTOOD_ONLY_IN_PART.to_string())
        } else {
            None
        };
        (intents, floor, paths.spellings.clone())
    }
}

/// The agent's own file tools, whose `path` input the gates read.
pub fn is_built_in_path_tool(tool: &str) -> bool {
    matches!(tool, "read" | "write" | "edit" | "grep" | "find" | "ls")
}

fn non_empty_string(value: Option<&Value>) -> Option<String> {
    value
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn string_field(input: &Value, key: &str) -> Option<String> {
    input.get(key).and_then(Value::as_str).map(str::to_string)
}

/// MCP target candidates, most specific first, as the reference builds
/// them from the call's `tool` / `connect` / `describe` / `search` /
/// `server` fields; `mcp` itself comes last.
pub fn mcp_candidates(input: &Value) -> Vec<String> {
    let field = |key: &str| non_empty_string(input.get(key));
    let mut out: Vec<String> = Vec::new();
    let mut add = |value: String, out: &mut Vec<String>| {
        if !value.is_empty() && !out.contains(&value) {
            out.push(value);
        }
    };
    let server = field("server");
    let push_qualified = |raw: &str,
                          hint: Option<&String>,
                          out: &mut Vec<String>,
                          add: &mut dyn FnMut(String, &mut Vec<String>)| {
        let qualified = raw
            .split_once(':')
            .filter(|(s, t)| !s.trim().is_empty() && !t.trim().is_empty())
            .map(|(s, t)| (s.trim().to_string(), t.trim().to_string()));
        let server = hint
            .cloned()
            .or_else(|| qualified.as_ref().map(|(s, _)| s.clone()));
        let tool = qualified
            .as_ref()
            .map(|(_, t)| t.clone())
            .unwrap_or_else(|| raw.to_string());
        if let Some(server) = server {
            add(format!("{server}_{tool}"), out);
            add(format!("{server}:{tool}"), out);
            add(server, out);
        }
        add(tool, out);
        add(raw.to_string(), out);
    };
    if let Some(tool) = field("tool") {
        push_qualified(&tool, server.as_ref(), &mut out, &mut add);
        add("mcp_call".into(), &mut out);
    } else if let Some(connect) = field("connect") {
        add(format!("mcp_connect_{connect}"), &mut out);
        add(connect, &mut out);
        add("mcp_connect".into(), &mut out);
    } else if let Some(describe) = field("describe") {
        push_qualified(&describe, server.as_ref(), &mut out, &mut add);
        add("mcp_describe".into(), &mut out);
    } else if let Some(search) = field("search") {
        if let Some(server) = &server {
            add(format!("mcp_server_{server}"), &mut out);
            add(server.clone(), &mut out);
        }
        add(search, &mut out);
        add("mcp_search".into(), &mut out);
    } else if let Some(server) = server {
        add(format!("mcp_server_{server}"), &mut out);
        add(server, &mut out);
        add("mcp_list".into(), &mut out);
    } else {
        add("mcp_status".into(), &mut out);
    }
    out.push("mcp".into());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn requester(cwd: &str) -> Requester {
        Requester::new(
            cwd,
            Principal {
                session_id: "s".into(),
                agent_name: None,
            },
        )
    }

    fn surfaces(facts: &FactSet) -> Vec<&str> {
        facts.intents.iter().map(|i| i.surface.as_str()).collect()
    }

    #[test]
    fn a_patch_writes_every_file_its_envelope_names() {
        let r = requester("/nonexistent-w");
        let facts = r.facts(&AskForm::ToolCall {
            tool: "apply_patch".into(),
            input: json!({"patch": "*** Begin Patch\n*** Update File: .env\n@@\n-a\n+b\n*** Add File: /etc/x\n+y\n*** End Patch\n"}),
        });
        assert_eq!(
            surfaces(&facts),
            [
                "path_write",
                "path_write",
                "external_directory_write",
                "apply_patch"
            ]
        );
        assert_eq!(facts.intents[0].match_values[0], "/nonexistent-w/.env");
        let facts = r.facts(&AskForm::ToolCall {
            tool: "apply_patch".into(),
            input: json!({"patch": "rm -rf /"}),
        });
        assert!(facts.unusable.is_some() && facts.intents.is_empty());
    }

    #[test]
    fn tool_calls_raise_the_gate_surfaces() {
        let r = requester("/nonexistent-w");
        let facts = r.facts(&AskForm::ToolCall {
            tool: "read".into(),
            input: json!({"path": "src/a.rs"}),
        });
        assert_eq!(surfaces(&facts), ["path_read", "read"]);
        assert_eq!(
            *facts.intents[1].match_values,
            ["/nonexistent-w/src/a.rs", "src/a.rs"]
        );
        let facts = r.facts(&AskForm::ToolCall {
            tool: "write".into(),
            input: json!({"path": "../x"}),
        });
        assert_eq!(
            surfaces(&facts),
            ["path_write", "external_directory_write", "write"]
        );
        let facts = r.facts(&AskForm::ToolCall {
            tool: "edit".into(),
            input: json!({"path": "/etc/x"}),
        });
        assert_eq!(surfaces(&facts), ["path", "external_directory", "edit"]);
        let facts = r.facts(&AskForm::ToolCall {
            tool: "grep".into(),
            input: json!({"pattern": "x"}),
        });
        assert_eq!(surfaces(&facts), ["grep"]);
        assert_eq!(*facts.intents[0].match_values, ["*"]);
        let facts = r.facts(&AskForm::ToolCall {
            tool: "deploy".into(),
            input: json!({"path": "a"}),
        });
        assert_eq!(surfaces(&facts), ["path", "deploy"]);
        let facts = r.facts(&AskForm::ToolCall {
            tool: "bash".into(),
            input: json!({"command": "ls /etc"}),
        });
        // The bash path gates: `/etc` is outside the cwd and a path word.
        assert_eq!(surfaces(&facts), ["external_directory", "path", "bash"]);
        assert_eq!(facts.intents[0].word.as_deref(), Some("/etc"));
        assert_eq!(facts.intents[2].boundary_value, None);
        let facts = r.facts(&AskForm::ToolCall {
            tool: "bash".into(),
            input: json!({"command": "git status"}),
        });
        assert_eq!(surfaces(&facts), ["path", "bash"]);
        assert!(facts.intents[0].bare_word);
    }

    #[test]
    fn mcp_candidates_follow_the_reference_order() {
        assert_eq!(
            mcp_candidates(&json!({"tool": "exa:search"})),
            [
                "exa_search",
                "exa:search",
                "exa",
                "search",
                "mcp_call",
                "mcp"
            ]
        );
        assert_eq!(
            mcp_candidates(&json!({"server": "fs", "tool": "read"})),
            ["fs_read", "fs:read", "fs", "read", "mcp_call", "mcp"]
        );
        assert_eq!(mcp_candidates(&json!({})), ["mcp_status", "mcp"]);
        assert_eq!(
            mcp_candidates(&json!({"server": "fs"})),
            ["mcp_server_fs", "fs", "mcp_list", "mcp"]
        );
    }

    #[test]
    fn request_forms_parse_and_bad_ones_say_why() {
        let r = Request::parse(r#"{"surface":"bash","value":"git status"}"#).unwrap();
        assert_eq!(
            r.form,
            AskForm::Surface {
                surface: "bash".into(),
                value: "git status".into()
            }
        );
        let r = Request::parse(r#"{"tool":"write","input":{"path":"../x"}}"#).unwrap();
        assert!(matches!(r.form, AskForm::ToolCall { .. }));
        let r = Request::parse(r#"{"accessIntent":{"surface":"bash","matchValues":[1]}}"#).unwrap();
        assert!(matches!(r.form, AskForm::Intents(Err(_))));
        let r = Request::parse(
            r#"{"accessIntent":{"surface":"path_read","matchValues":["/a"],"boundaryValue":"/a","principal":{"sessionId":"root","agentName":"x"}}}"#,
        )
        .unwrap();
        let AskForm::Intents(Ok(intents)) = r.form else {
            panic!("intents expected")
        };
        assert_eq!(
            *intents[0].principal,
            Principal::default(),
            "claimed identity is dropped"
        );
        for (bad, needle) in [
            ("{", "not valid JSON"),
            ("[]", "JSON object"),
            (
                r#"{"surface":"bash","value":3}"#,
                "\"value\" must be a string",
            ),
            (
                r#"{"surface":"deploy","value":["x"]}"#,
                "\"value\" must be a string",
            ),
            (r#"{"surface":"  "}"#, "\"surface\" must not be empty"),
            (r#"{"sufrace":"bash","value":"x"}"#, "unknown request key"),
            (r#"{"tool":"read","input":"x"}"#, "\"input\" must be"),
        ] {
            let error = Request::parse(bad).unwrap_err();
            assert!(error.0.contains(needle), "{bad}: {error}");
        }
    }

    #[test]
    fn the_field_reading_agrees_with_the_tree() {
        for text in [
            r#"{"tool":"bash","input":{"command":"git status"}}"#,
            r#"{"tool":"read","input":{"path":"a\u0000b"},"agent":"x","message":"m"}"#,
            r#"{"tool":"read"}"#,
            r#"{"tool":"read","input":null}"#,
            r#"{"tool":"read","input":[]}"#,
            r#"{"tool":" ","input":{}}"#,
            r#"{"tool":null,"surface":"bash","value":"ls"}"#,
            r#"{"tool":"bash","value":3}"#,
            r#"{"tool":"bash","tool":"read"}"#,
            r#"{"surface":"deploy","value":null,"suggestedPatterns":["a","b"]}"#,
            r#"{"surface":"deploy","suggestedPatterns":null}"#,
            r#"{"surface":"deploy","suggestedPatterns":[1]}"#,
            r#"{"surface":"read","value":" "}"#,
            r#"{"surface":"","value":"x"}"#,
            r#"{"surface":"bash","value":"ls","message":3}"#,
            r#"{"accessIntent":null,"surface":"bash","value":"ls"}"#,
            r#"{"accessIntent":{"surface":"bash","matchValues":["ls"]}}"#,
            r#"{"surface":"bash","value":"ls","extra":1}"#,
            r#"{"agent":"x"}"#,
            r#"{"surface":"bash","value":"ls"} x"#,
            "[]",
            "",
        ] {
            let tree = serde_json::from_str::<Value>(text)
                .map_err(|e| RequestError(format!("request is not valid JSON: {e}")))
                .and_then(|value| Request::from_value(&value));
            assert_eq!(Request::parse(text), tree, "{text}");
        }
        // The common shapes do not need the tree.
        for text in [
            r#"{"tool":"bash","input":{"command":"ls"}}"#,
            r#"{"surface":"bash","value":"ls"}"#,
        ] {
            let fields = serde_json::from_str::<WireRequest>(text).ok();
            assert!(
                fields.and_then(WireRequest::into_request).is_some(),
                "{text}"
            );
        }
    }

    #[test]
    fn a_surface_without_a_value_is_a_surface_level_check() {
        let form = |text: &str| Request::parse(text).map(|r| r.form);
        let only = |surface: &str| AskForm::SurfaceOnly {
            surface: surface.into(),
        };
        assert_eq!(form(r#"{"surface":"deploy"}"#), Ok(only("deploy")));
        assert_eq!(
            form(r#"{"surface":"deploy","value":null}"#),
            Ok(only("deploy"))
        );
        assert_eq!(form(r#"{"surface":"read","value":"  "}"#), Ok(only("read")));
        assert_eq!(form(r#"{"surface":"mcp","value":""}"#), Ok(only("mcp")));
        // An empty line is a bash line and an empty name a skill name.
        for (text, surface, value) in [
            (r#"{"surface":"bash","value":""}"#, "bash", ""),
            (r#"{"surface":"bash","value":" "}"#, "bash", " "),
            (r#"{"surface":"skill","value":""}"#, "skill", ""),
        ] {
            assert_eq!(
                form(text),
                Ok(AskForm::Surface {
                    surface: surface.into(),
                    value: value.into()
                })
            );
        }
        assert_eq!(form(r#"{"surface":"bash"}"#), Ok(only("bash")));
    }

    #[test]
    fn surface_level_candidates_are_the_references() {
        let r = requester("/nonexistent-w");
        let only = |surface: &str| {
            r.facts(&AskForm::SurfaceOnly {
                surface: surface.into(),
            })
        };
        for (surface, values) in [
            ("bash", vec![""]),
            ("skill", vec!["*"]),
            ("mcp", vec!["mcp_status", "mcp"]),
            ("deploy", vec!["*"]),
            ("read", vec!["*"]),
            ("path", vec!["*"]),
            ("path_write", vec!["*"]),
            ("external_directory", vec!["*"]),
        ] {
            let facts = only(surface);
            assert_eq!(facts.tool, None);
            assert_eq!(facts.intents.len(), 1, "{surface}");
            let intent = &facts.intents[0];
            assert_eq!(intent.surface, surface);
            assert_eq!(*intent.match_values, values, "{surface}");
            // No path, so no alias set and no boundary to cross.
            assert_eq!(intent.boundary_value, None, "{surface}");
        }
        // A blank value on a direct form is no value either.
        let facts = r.facts(&AskForm::Surface {
            surface: "read".into(),
            value: " ".into(),
        });
        assert_eq!(*facts.intents[0].match_values, ["*"]);
        assert_eq!(facts.intents[0].boundary_value, None);
    }

    #[test]
    fn an_extension_value_is_judged_with_the_surface_level_check() {
        let r = requester("/nonexistent-w");
        let facts = r.facts(&AskForm::Surface {
            surface: "deploy".into(),
            value: "prod".into(),
        });
        let values: Vec<_> = facts.intents.iter().map(|i| &*i.match_values).collect();
        assert_eq!(values, [["*"], ["prod"]]);
        assert_eq!(surfaces(&facts), ["deploy", "deploy"]);
        let facts = r.facts(&AskForm::Surface {
            surface: "mcp".into(),
            value: "exa".into(),
        });
        let values: Vec<_> = facts.intents.iter().map(|i| &*i.match_values).collect();
        assert_eq!(values, [["mcp_status", "mcp"], ["exa", "mcp"]]);
        // `*` itself, the status target, bash, skill and path surfaces keep
        // one fact.
        for (surface, value) in [
            ("deploy", "*"),
            ("mcp", "mcp_status"),
            ("bash", "ls"),
            ("skill", "x"),
            ("read", "a"),
        ] {
            let facts = r.facts(&AskForm::Surface {
                surface: surface.into(),
                value: value.into(),
            });
            assert_eq!(facts.intents.len(), 1, "{surface}");
        }
    }

    #[test]
    fn surface_level_asks_suggest_the_whole_surface() {
        let grant = |text: &str| Request::parse(text).map(|r| r.form.surface_level_grant());
        let whole = |s: &str| Ok(Some((s.to_string(), "*".to_string())));
        assert_eq!(grant(r#"{"surface":"deploy"}"#), whole("deploy"));
        assert_eq!(grant(r#"{"surface":" bash "}"#), whole("bash"));
        assert_eq!(grant(r#"{"surface":"mcp"}"#), whole("mcp"));
        assert_eq!(grant(r#"{"surface":"read","value":""}"#), whole("read"));
        assert_eq!(
            grant(r#"{"surface":"deploy","value":"prod"}"#),
            whole("deploy")
        );
        assert_eq!(grant(r#"{"surface":"bash","value":"ls"}"#), Ok(None));
        assert_eq!(grant(r#"{"surface":"read","value":"a"}"#), Ok(None));
        assert_eq!(grant(r#"{"tool":"deploy"}"#), Ok(None));
    }

    #[test]
    fn wire_intents_without_match_values_fail_closed() {
        for text in [
            r#"{"accessIntent":{"surface":"deploy","matchValues":null}}"#,
            r#"{"accessIntent":{"surface":"deploy"}}"#,
            r#"{"accessIntent":{"surface":"deploy","matchValues":[]}}"#,
        ] {
            let form = Request::parse(text).map(|r| r.form);
            assert!(matches!(form, Ok(AskForm::Intents(Err(_)))), "{text}");
            let facts =
                requester("/nonexistent-w").facts(&form.unwrap_or(AskForm::Intents(Ok(vec![]))));
            assert!(facts.unusable.is_some(), "{text}");
        }
    }
}
