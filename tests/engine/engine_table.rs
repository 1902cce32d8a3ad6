//! Table-driven tests of the engine through the library, with every layer a
//! real file in a temporary directory (loaded by `PolicyLoader`, as the
//! mount and `permfs resolve` load them).
//!
//! Each test is one concern of the reference semantics
//! (/work/notes/spec-config.md, spec-facts.md) and a table of cases; a
//! failing row names its case.

use permfs::engine::{judge, Judgment};
use permfs::facts::intent::Principal;
use permfs::facts::path_text::home_dir;
use permfs::facts::request::{AskForm, Requester};
use permfs::policy::layers::{Policy, PolicyLoader, PolicySources};
use permfs::policy::{CompiledRules, Origin, PermissionState, Rule, RuleLayer};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use tempfile::TempDir;

use Origin::{Agent, Builtin, FailClosed, Global, Project, ProjectAgent, Session, Yolo};
use PermissionState::{Allow, Ask, Deny};

// ---------------------------------------------------------------------------
// Harness

/// A temporary tree: `<root>/work` is the session's cwd, layer files live
/// beside it.
struct Tree {
    _dir: TempDir,
    /// Canonical root (so expectations compare with canonical aliases).
    root: PathBuf,
}

impl Tree {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("create a temp dir");
        let root = std::fs::canonicalize(dir.path()).expect("canonicalize the temp dir");
        std::fs::create_dir_all(root.join("work")).expect("create the cwd");
        Self { _dir: dir, root }
    }

    fn cwd(&self) -> PathBuf {
        self.root.join("work")
    }

    fn cwd_str(&self) -> String {
        self.cwd().to_string_lossy().into_owned()
    }

    fn root_str(&self) -> String {
        self.root.to_string_lossy().into_owned()
    }

    fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.root.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create a parent dir");
        }
        std::fs::write(&path, text).expect("write a layer file");
        path
    }

    fn mkdir(&self, relative: &str) -> PathBuf {
        let path = self.root.join(relative);
        std::fs::create_dir_all(&path).expect("create a dir");
        path
    }
}

/// The layers of one case, as JSON values (agent layers become markdown
/// files with YAML frontmatter).
#[derive(Default, Clone)]
struct Layers {
    global: Value,
    project: Option<Value>,
    agents: Vec<(&'static str, Value)>,
    project_agents: Vec<(&'static str, Value)>,
}

fn global(permission: Value) -> Layers {
    Layers {
        global: json!({ "permission": permission }),
        ..Default::default()
    }
}

impl Layers {
    fn project(mut self, permission: Value) -> Self {
        self.project = Some(json!({ "permission": permission }));
        self
    }

    fn agent(mut self, name: &'static str, permission: Value) -> Self {
        self.agents.push((name, permission));
        self
    }

    fn project_agent(mut self, name: &'static str, permission: Value) -> Self {
        self.project_agents.push((name, permission));
        self
    }
}

/// A YAML key or scalar: JSON-quoted, which YAML reads back verbatim.
fn yaml_text(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

fn yaml_block(value: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    let Some(object) = value.as_object() else {
        panic!("frontmatter maps only, got {value}")
    };
    for (key, value) in object {
        match value {
            Value::Object(_) => {
                out.push_str(&format!("{pad}{}:\n", yaml_text(key)));
                yaml_block(value, indent + 2, out);
            }
            Value::String(text) => {
                out.push_str(&format!("{pad}{}: {}\n", yaml_text(key), yaml_text(text)))
            }
            other => out.push_str(&format!("{pad}{}: {other}\n", yaml_text(key))),
        }
    }
}

/// An agent file as a person writes one: frontmatter, then a prompt body.
fn agent_markdown(name: &str, permission: &Value) -> String {
    let mut out = format!("---\nname: {name}\ndescription: test agent\npermission:\n");
    yaml_block(permission, 2, &mut out);
    out.push_str("---\nYou are a test agent.\n");
    out
}

impl Tree {
    /// Writes the layers and returns a loader over them. The project file
    /// sits where the reference looks for it (under the cwd), and the
    /// project agents in `<cwd>/.pi/agents`, so discovery is exercised too.
    fn loader(&self, layers: &Layers) -> PolicyLoader {
        self.try_loader(layers).expect("valid global config")
    }

    fn try_loader(
        &self,
        layers: &Layers,
    ) -> Result<PolicyLoader, permfs::policy::config::ConfigError> {
        let global = self.write("global.json", &layers.global.to_string());
        if let Some(project) = &layers.project {
            self.write(
                "work/.pi/extensions/pi-permission-system/config.json",
                &project.to_string(),
            );
        }
        for (name, permission) in &layers.agents {
            self.write(
                &format!("agents/{name}.md"),
                &agent_markdown(name, permission),
            );
        }
        for (name, permission) in &layers.project_agents {
            self.write(
                &format!("work/.pi/agents/{name}.md"),
                &agent_markdown(name, permission),
            );
        }
        PolicyLoader::new(PolicySources {
            global: Some(global),
            agents_dir: Some(self.root.join("agents")),
            project_file: None,
            project_agents_dir: None,
            authority_dirs: Vec::new(),
            // The reference layers every file: these tests check its semantics.
            trust: permfs::policy::trust::Trust::All,
        })
    }

    fn policy(&self, layers: &Layers, agent: Option<&str>) -> Arc<Policy> {
        self.loader(layers)
            .policy(&self.cwd_str(), agent)
            .expect("policy compiles")
    }

    fn requester(&self, agent: Option<&str>) -> Requester {
        Requester::new(
            &self.cwd_str(),
            Principal {
                session_id: "test".into(),
                agent_name: agent.map(str::to_string),
            },
        )
    }
}

/// What a case asks.
#[derive(Clone, Debug)]
enum Query {
    Surface(&'static str, String),
    Tool(&'static str, Value),
}

fn surface(surface: &'static str, value: impl Into<String>) -> Query {
    Query::Surface(surface, value.into())
}

fn tool(tool: &'static str, input: Value) -> Query {
    Query::Tool(tool, input)
}

fn bash(command: impl Into<String>) -> Query {
    Query::Surface("bash", command.into())
}

fn form(ask: &Query) -> AskForm {
    match ask {
        Query::Surface(surface, value) => AskForm::Surface {
            surface: surface.to_string(),
            value: value.clone(),
        },
        Query::Tool(tool, input) => AskForm::ToolCall {
            tool: tool.to_string(),
            input: input.clone(),
        },
    }
}

fn judge_with(tree: &Tree, stack: &[&CompiledRules], agent: Option<&str>, ask: &Query) -> Judgment {
    let facts = tree.requester(agent).facts(&form(ask));
    judge(stack, &facts).expect("rules evaluate")
}

fn judge_policy(tree: &Tree, policy: &Policy, agent: Option<&str>, ask: &Query) -> Judgment {
    judge_with(tree, &[&policy.rules], agent, ask)
}

/// The parts of a judgment a case states: verdict, matched pattern (`None`
/// for the universal default) and origin of the deciding check.
#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    state: PermissionState,
    pattern: Option<String>,
    origin: Option<Origin>,
}

fn outcome(judgment: &Judgment) -> Outcome {
    let decided = judgment.deciding_check();
    Outcome {
        state: judgment.state,
        pattern: decided.and_then(|c| c.matched_pattern.clone()),
        origin: decided.map(|c| c.origin),
    }
}

fn expect(state: PermissionState, pattern: Option<&str>, origin: Origin) -> Outcome {
    Outcome {
        state,
        pattern: pattern.map(str::to_string),
        origin: Some(origin),
    }
}

/// One row: a name, the layers, the agent, the ask and the expected outcome.
struct Case {
    name: &'static str,
    layers: Layers,
    agent: Option<&'static str>,
    ask: Query,
    want: Outcome,
}

fn run_cases(cases: Vec<Case>) {
    let mut failures = Vec::new();
    for case in &cases {
        let tree = Tree::new();
        let policy = tree.policy(&case.layers, case.agent);
        let judgment = judge_policy(&tree, &policy, case.agent, &case.ask);
        let got = outcome(&judgment);
        if got != case.want {
            failures.push(format!(
                "{}: asked {:?}\n   want {:?}\n    got {:?}\n checks {:#?}",
                case.name, case.ask, case.want, got, judgment.checks
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// Rows against one fixed set of layers: (name, ask, expected).
fn run_table(
    layers: Layers,
    agent: Option<&'static str>,
    rows: Vec<(&'static str, Query, Outcome)>,
) {
    run_cases(
        rows.into_iter()
            .map(|(name, ask, want)| Case {
                name,
                layers: layers.clone(),
                agent,
                ask,
                want,
            })
            .collect(),
    );
}

// ---------------------------------------------------------------------------
// Rule order

#[test]
fn last_match_wins_and_shadowing() {
    let deny_last = global(json!({"read": {"*": "allow", "*.env": "deny"}}));
    let deny_first = global(json!({"read": {"*.env": "deny", "*": "allow"}}));
    let bash_rules = global(json!({"bash": {"*": "ask", "git *": "allow", "git push *": "deny"}}));
    let bash_shadowed =
        global(json!({"bash": {"git push *": "deny", "git *": "allow", "*": "ask"}}));
    let cases = vec![
        Case {
            name: "a later, narrower deny beats the broad allow",
            layers: deny_last.clone(),
            agent: None,
            ask: surface("read", "config/.env"),
            want: expect(Deny, Some("*.env"), Global),
        },
        Case {
            name: "the broad allow still answers what the deny does not match",
            layers: deny_last,
            agent: None,
            ask: surface("read", "config/app.json"),
            want: expect(Allow, Some("*"), Global),
        },
        Case {
            name: "an allow written after the deny shadows it",
            layers: deny_first.clone(),
            agent: None,
            ask: surface("read", "config/.env"),
            want: expect(Allow, Some("*"), Global),
        },
        Case {
            name: "shadowed deny: other files are allowed too",
            layers: deny_first,
            agent: None,
            ask: surface("read", "README.md"),
            want: expect(Allow, Some("*"), Global),
        },
        Case {
            name: "bash: most specific last wins",
            layers: bash_rules.clone(),
            agent: None,
            ask: bash("git push origin main"),
            want: expect(Deny, Some("git push *"), Global),
        },
        Case {
            name: "bash: middle rule",
            layers: bash_rules.clone(),
            agent: None,
            ask: bash("git status"),
            want: expect(Allow, Some("git *"), Global),
        },
        Case {
            name: "bash: the surface's own * (a config rule, so it has a pattern)",
            layers: bash_rules,
            agent: None,
            ask: bash("make"),
            want: expect(Ask, Some("*"), Global),
        },
        Case {
            name: "bash: reverse order, the trailing * shadows everything",
            layers: bash_shadowed,
            agent: None,
            ask: bash("git push origin main"),
            want: expect(Ask, Some("*"), Global),
        },
        Case {
            name: "no rule on the surface: the universal default, no pattern",
            layers: global(json!({"bash": {"git *": "allow"}})),
            agent: None,
            ask: surface("task", "*"),
            want: expect(Ask, None, Builtin),
        },
        Case {
            name: "surface keys are wildcards too, and order still decides",
            layers: global(json!({"mcp_*": "deny", "mcp_fs": "allow"})),
            agent: None,
            ask: surface("mcp_fs", "*"),
            want: expect(Allow, Some("*"), Global),
        },
        Case {
            name: "a wildcard surface key written last shadows the exact one",
            layers: global(json!({"mcp_fs": "allow", "mcp_*": "deny"})),
            agent: None,
            ask: surface("mcp_fs", "*"),
            want: expect(Deny, Some("*"), Global),
        },
    ];
    run_cases(cases);
}

#[test]
fn env_file_families() {
    let layers = global(json!({"read": {
        "*": "allow",
        "*.env": "deny",
        "*.env.*": "deny",
        "*.env.example": "allow",
    }}));
    run_table(
        layers,
        None,
        vec![
            (
                ".env at the root",
                surface("read", ".env"),
                expect(Deny, Some("*.env"), Global),
            ),
            (
                ".env nested",
                surface("read", "config/.env"),
                expect(Deny, Some("*.env"), Global),
            ),
            (
                "a named env file",
                surface("read", "prod.env"),
                expect(Deny, Some("*.env"), Global),
            ),
            (
                ".env.local",
                surface("read", ".env.local"),
                expect(Deny, Some("*.env.*"), Global),
            ),
            (
                ".env.production.local",
                surface("read", "app/.env.production.local"),
                expect(Deny, Some("*.env.*"), Global),
            ),
            (
                ".env.example re-allowed after the deny",
                surface("read", ".env.example"),
                expect(Allow, Some("*.env.example"), Global),
            ),
            (
                "nested .env.example",
                surface("read", "config/.env.example"),
                expect(Allow, Some("*.env.example"), Global),
            ),
            (
                ".env.example.bak is not an example",
                surface("read", ".env.example.bak"),
                expect(Deny, Some("*.env.*"), Global),
            ),
            (
                ".envrc is not an env file",
                surface("read", ".envrc"),
                expect(Allow, Some("*"), Global),
            ),
            (
                "environment.ts",
                surface("read", "src/environment.ts"),
                expect(Allow, Some("*"), Global),
            ),
            (
                "absolute path to .env",
                surface("read", "/srv/app/.env"),
                expect(Deny, Some("*.env"), Global),
            ),
        ],
    );
    // The same three patterns with the example allow first: the denies come
    // after it and win.
    run_table(
        global(
            json!({"read": {"*.env.example": "allow", "*": "allow", "*.env": "deny", "*.env.*": "deny"}}),
        ),
        None,
        vec![(
            "an example allow written before the deny is shadowed",
            surface("read", ".env.example"),
            expect(Deny, Some("*.env.*"), Global),
        )],
    );
}

#[test]
fn alias_matching_rule_order_decides() {
    let tree = Tree::new();
    let cwd = tree.cwd_str();
    let secret_abs = format!("{cwd}/src/secret*");
    let cases: Vec<(&str, Value, Query, PermissionState, &str, String)> = vec![
        (
            "absolute deny after relative allow: deny, reported on the absolute alias",
            json!({"read": {"src/*": "allow", secret_abs.clone(): "deny"}}),
            surface("read", "src/secret.rs"),
            Deny,
            "__ABS__",
            format!("{cwd}/src/secret.rs"),
        ),
        (
            "relative allow after absolute deny: allow, reported on the relative alias",
            json!({"read": {secret_abs.clone(): "deny", "src/*": "allow"}}),
            surface("read", "src/secret.rs"),
            Allow,
            "src/*",
            "src/secret.rs".into(),
        ),
        (
            "an absolute value still meets a relative rule",
            json!({"read": {"src/*": "deny"}}),
            surface("read", format!("{cwd}/src/a.rs")),
            Deny,
            "src/*",
            "src/a.rs".into(),
        ),
        (
            "a relative value still meets an absolute rule",
            json!({"read": {format!("{cwd}/*"): "deny"}}),
            surface("read", "docs/x.md"),
            Deny,
            "__CWDSTAR__",
            format!("{cwd}/docs/x.md"),
        ),
        (
            "dot-dot is resolved before matching",
            json!({"read": {"src/*": "deny"}}),
            surface("read", "docs/../src/a.rs"),
            Deny,
            "src/*",
            "src/a.rs".into(),
        ),
        (
            "the literal as typed is an alias too",
            json!({"read": {"docs/../src/*": "deny"}}),
            surface("read", "docs/../src/a.rs"),
            Deny,
            "docs/../src/*",
            "docs/../src/a.rs".into(),
        ),
        (
            "a stray quote and @ are stripped from the value",
            json!({"read": {"src/*": "deny"}}),
            surface("read", "'@src/a.rs'"),
            Deny,
            "src/*",
            "src/a.rs".into(),
        ),
    ];
    let mut failures = Vec::new();
    for (name, permission, ask, state, pattern, matched_value) in cases {
        let pattern = match pattern {
            "__ABS__" => secret_abs.clone(),
            "__CWDSTAR__" => format!("{cwd}/*"),
            other => other.to_string(),
        };
        let policy = tree.policy(&global(permission), None);
        let judgment = judge_policy(&tree, &policy, None, &ask);
        let check = judgment.deciding_check().expect("a deciding check");
        let got = (
            judgment.state,
            check.matched_pattern.clone(),
            check.matched_value.clone(),
        );
        let want = (state, Some(pattern), matched_value);
        if got != want {
            failures.push(format!(
                "{name}: want {want:?}, got {got:?} ({:?})",
                check.match_values
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn home_on_both_sides() {
    // HOME is never set here (tests run in parallel); expectations are built
    // from the home directory the engine itself uses.
    let home = home_dir();
    let under_home = |rest: &str| {
        if home == "/" {
            format!("/{rest}")
        } else {
            format!("{}/{rest}", home.trim_end_matches('/'))
        }
    };
    let layers = global(json!({
        "read": {"~/notes/*": "deny", "$HOME/public/*": "allow", "~/keys/*": "deny"},
        "write": {under_home("drafts/*"): "allow"},
        "bash": {"~/bin/tool *": "allow"},
    }));
    run_table(
        layers,
        None,
        vec![
            (
                "~ pattern, ~ value",
                surface("read", "~/notes/a.md"),
                expect(Deny, Some("~/notes/*"), Global),
            ),
            (
                "~ pattern, absolute value",
                surface("read", under_home("notes/a.md")),
                expect(Deny, Some("~/notes/*"), Global),
            ),
            (
                "$HOME pattern, ~ value",
                surface("read", "~/public/index.html"),
                expect(Allow, Some("$HOME/public/*"), Global),
            ),
            (
                "~ pattern, $HOME value",
                surface("read", "$HOME/keys/id"),
                expect(Deny, Some("~/keys/*"), Global),
            ),
            (
                "absolute pattern, ~ value",
                surface("write", "~/drafts/today.md"),
                expect(Allow, Some(&under_home("drafts/*")), Global),
            ),
            (
                "~user is not home",
                surface("read", "~someone/notes/a.md"),
                expect(Ask, None, Builtin),
            ),
            (
                "bash patterns expand ~ too, and the command then names the absolute path",
                bash(format!("{} run", under_home("bin/tool"))),
                expect(Allow, Some("~/bin/tool *"), Global),
            ),
            (
                "a bash value is never expanded",
                bash("~/bin/tool run"),
                expect(Ask, None, Builtin),
            ),
        ],
    );
}

#[test]
fn optional_trailing_space_star() {
    run_table(
        global(
            json!({"bash": {"git *": "allow", "npm run *": "allow", "cargo **": "allow", "make*": "deny"}}),
        ),
        None,
        vec![
            (
                "`git *` matches bare `git`",
                bash("git"),
                expect(Allow, Some("git *"), Global),
            ),
            (
                "`git *` matches `git status`",
                bash("git status"),
                expect(Allow, Some("git *"), Global),
            ),
            (
                "`git *` does not match `gitk`",
                bash("gitk"),
                expect(Ask, None, Builtin),
            ),
            (
                "`npm run *` matches `npm run`",
                bash("npm run"),
                expect(Allow, Some("npm run *"), Global),
            ),
            (
                "`npm run *` with a script",
                bash("npm run build"),
                expect(Allow, Some("npm run *"), Global),
            ),
            (
                "`npm run *` does not match `npm runner`",
                bash("npm runner"),
                expect(Ask, None, Builtin),
            ),
            (
                "`npm run *` does not match `npm`",
                bash("npm"),
                expect(Ask, None, Builtin),
            ),
            (
                "`cargo **` keeps its space",
                bash("cargo"),
                expect(Ask, None, Builtin),
            ),
            (
                "`cargo **` with arguments",
                bash("cargo test"),
                expect(Allow, Some("cargo **"), Global),
            ),
            (
                "`make*` needs no space",
                bash("makefile-lint"),
                expect(Deny, Some("make*"), Global),
            ),
        ],
    );
}

#[test]
fn brackets_and_braces_are_literal() {
    run_table(
        global(json!({
            "read": {"src/[a]*": "deny", "{a,b}.txt": "deny", "lib/?.rs": "allow"},
            "bash": {"echo [x]": "allow", "ls {a,b}": "deny", "rm -rf *": "deny"},
        })),
        None,
        vec![
            (
                "[a] matches itself",
                surface("read", "src/[a]b.rs"),
                expect(Deny, Some("src/[a]*"), Global),
            ),
            (
                "[a] is not a class",
                surface("read", "src/ab.rs"),
                expect(Ask, None, Builtin),
            ),
            (
                "{a,b} matches itself",
                surface("read", "{a,b}.txt"),
                expect(Deny, Some("{a,b}.txt"), Global),
            ),
            (
                "{a,b} is not an alternation",
                surface("read", "a.txt"),
                expect(Ask, None, Builtin),
            ),
            (
                "? is one character",
                surface("read", "lib/x.rs"),
                expect(Allow, Some("lib/?.rs"), Global),
            ),
            (
                "? is exactly one",
                surface("read", "lib/xy.rs"),
                expect(Ask, None, Builtin),
            ),
            (
                "bash [x] literal",
                bash("echo [x]"),
                expect(Allow, Some("echo [x]"), Global),
            ),
            (
                "bash [x] not a class",
                bash("echo x"),
                expect(Ask, None, Builtin),
            ),
            (
                "bash {a,b} literal",
                bash("ls {a,b}"),
                expect(Deny, Some("ls {a,b}"), Global),
            ),
            (
                "bash {a,b} not expanded",
                bash("ls a"),
                expect(Ask, None, Builtin),
            ),
            (
                "* crosses slashes",
                bash("rm -rf /srv/app/data"),
                expect(Deny, Some("rm -rf *"), Global),
            ),
        ],
    );
}

#[test]
fn multi_line_values_match_dot_all() {
    run_table(
        global(json!({
            "task": {"*": "allow", "*DROP TABLE*": "deny", "deploy *": "ask"},
            "bash": {"*": "ask", "echo *": "allow", "git *": "allow", "rm *": "deny"},
        })),
        None,
        vec![
            (
                "a tool value: * runs across newlines",
                surface("task", "line one\nplease DROP TABLE users\nthanks"),
                expect(Deny, Some("*DROP TABLE*"), Global),
            ),
            (
                "a tool value: a prefix pattern spans the rest",
                surface("task", "deploy staging\nthen smoke test"),
                expect(Ask, Some("deploy *"), Global),
            ),
            (
                "a multi-line tool value without a hit",
                surface("task", "a\nb\nc"),
                expect(Allow, Some("*"), Global),
            ),
            (
                "bash: each line is its own command, the worst answers",
                bash("git status\nrm -rf build\necho done"),
                expect(Deny, Some("rm *"), Global),
            ),
            (
                "bash: every line allowed",
                bash("git status\necho done"),
                expect(Allow, Some("git *"), Global),
            ),
            (
                "bash: a newline inside quotes stays in one command, matched dot-all",
                bash("echo \"first\nsecond\""),
                expect(Allow, Some("echo *"), Global),
            ),
            (
                "bash: one line asks",
                bash("echo a\nmake"),
                expect(Ask, Some("*"), Global),
            ),
        ],
    );
    // Which unit decided is reported.
    let tree = Tree::new();
    let policy = tree.policy(
        &global(json!({"bash": {"*": "allow", "rm *": "deny"}})),
        None,
    );
    let judgment = judge_policy(&tree, &policy, None, &bash("ls\nrm -rf /tmp/x\npwd"));
    assert_eq!(
        judgment.deciding_check().and_then(|c| c.command.as_deref()),
        Some("rm -rf /tmp/x")
    );
}

#[test]
fn deny_reasons_surface_in_the_judgment() {
    let reason = |text: &str| json!({"action": "deny", "reason": text});
    // (name, layers, agent, query, state, reason)
    type Row = (
        &'static str,
        Layers,
        Option<&'static str>,
        Query,
        PermissionState,
        Option<&'static str>,
    );
    let cases: Vec<Row> = vec![
        (
            "bash deny with a reason",
            global(json!({"bash": {"*": "allow", "rm *": reason("Use trash instead.")}})),
            None,
            bash("rm -rf build"),
            Deny,
            Some("Use trash instead."),
        ),
        (
            "a deny object without a reason",
            global(json!({"bash": {"rm *": {"action": "deny"}}})),
            None,
            bash("rm x"),
            Deny,
            None,
        ),
        (
            "a reason on a rule that is shadowed does not leak",
            global(json!({"bash": {"rm *": reason("no"), "rm -i *": "allow"}})),
            None,
            bash("rm -i x"),
            Allow,
            None,
        ),
        (
            "path reason through a read tool call",
            global(
                json!({"read": "allow", "path": {"*.pem": reason("Keys never leave the box.")}}),
            ),
            None,
            tool("read", json!({"path": "certs/server.pem"})),
            Deny,
            Some("Keys never leave the box."),
        ),
        (
            "project reason",
            global(json!({"bash": "allow"}))
                .project(json!({"bash": {"curl *": reason("No network from this repo.")}})),
            None,
            bash("curl example.com"),
            Deny,
            Some("No network from this repo."),
        ),
        (
            "agent frontmatter reason",
            global(json!({"bash": "allow"})).agent(
                "reviewer",
                json!({"bash": {"git push *": reason("Reviewers do not push.")}}),
            ),
            Some("reviewer"),
            bash("git push origin"),
            Deny,
            Some("Reviewers do not push."),
        ),
        (
            "bash reason from one unit of a chain",
            global(json!({"bash": {"*": "allow", "git push *": reason("Open a PR.")}})),
            None,
            bash("git commit -m x && git push"),
            Deny,
            Some("Open a PR."),
        ),
    ];
    let mut failures = Vec::new();
    for (name, layers, agent, ask, state, want_reason) in cases {
        let tree = Tree::new();
        let policy = tree.policy(&layers, agent);
        let judgment = judge_policy(&tree, &policy, agent, &ask);
        let got = (judgment.state, judgment.reason().map(str::to_string));
        let want = (state, want_reason.map(str::to_string));
        if got != want {
            failures.push(format!("{name}: want {want:?}, got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---------------------------------------------------------------------------
// Layers

#[test]
fn four_layers_in_order() {
    let cases = vec![
        Case {
            name: "project beats global",
            layers: global(json!({"bash": "deny"})).project(json!({"bash": "allow"})),
            agent: None,
            ask: bash("ls"),
            want: expect(Allow, Some("*"), Project),
        },
        Case {
            name: "agent beats project",
            layers: global(json!({"bash": "deny"}))
                .project(json!({"bash": "allow"}))
                .agent("dev", json!({"bash": "ask"})),
            agent: Some("dev"),
            ask: bash("ls"),
            want: expect(Ask, Some("*"), Agent),
        },
        Case {
            name: "project-agent beats agent",
            layers: global(json!({"bash": "deny"}))
                .project(json!({"bash": "allow"}))
                .agent("dev", json!({"bash": "ask"}))
                .project_agent("dev", json!({"bash": {"ls": "allow"}})),
            agent: Some("dev"),
            ask: bash("ls"),
            want: expect(Allow, Some("ls"), ProjectAgent),
        },
        Case {
            name: "project-agent replaces a string surface wholesale",
            layers: global(json!({"bash": "deny"}))
                .agent("dev", json!({"bash": "ask"}))
                .project_agent("dev", json!({"bash": {"ls": "allow"}})),
            agent: Some("dev"),
            ask: bash("make"),
            want: expect(Ask, None, Builtin),
        },
        Case {
            name: "an agent's rules apply only to that agent",
            layers: global(json!({"bash": "deny"})).agent("dev", json!({"bash": "allow"})),
            agent: Some("other"),
            ask: bash("ls"),
            want: expect(Deny, Some("*"), Global),
        },
        Case {
            name: "no agent, no agent layer",
            layers: global(json!({"bash": "deny"})).agent("dev", json!({"bash": "allow"})),
            agent: None,
            ask: bash("ls"),
            want: expect(Deny, Some("*"), Global),
        },
        Case {
            name: "universal * from global",
            layers: global(json!({"*": "deny"})),
            agent: None,
            ask: surface("task", "*"),
            want: expect(Deny, None, Global),
        },
        Case {
            name: "universal * from project beats global's",
            layers: global(json!({"*": "deny"})).project(json!({"*": "allow"})),
            agent: None,
            ask: surface("task", "*"),
            want: expect(Allow, None, Project),
        },
        Case {
            name: "universal * from agent",
            layers: global(json!({"*": "deny"}))
                .project(json!({"*": "allow"}))
                .agent("dev", json!({"*": "ask"})),
            agent: Some("dev"),
            ask: surface("task", "*"),
            want: expect(Ask, None, Agent),
        },
        Case {
            name: "universal * from project-agent",
            layers: global(json!({"*": "deny"}))
                .agent("dev", json!({"*": "ask"}))
                .project_agent("dev", json!({"*": "allow"})),
            agent: Some("dev"),
            ask: surface("task", "*"),
            want: expect(Allow, None, ProjectAgent),
        },
        Case {
            name: "a universal * map is ignored: ask stays, credited to its layer as the reference does",
            layers: global(json!({"*": {"*": "allow"}})),
            agent: None,
            ask: surface("task", "*"),
            want: expect(Ask, None, Global),
        },
        Case {
            name: "an explicit surface rule beats any layer's universal *",
            layers: global(json!({"task": "deny"})).project(json!({"*": "allow"})),
            agent: None,
            ask: surface("task", "*"),
            want: expect(Deny, Some("*"), Global),
        },
        Case {
            name: "maps merge: an overridden pattern keeps its global position",
            layers: global(json!({"bash": {"*": "ask", "git *": "allow"}}))
                .project(json!({"bash": {"*": "deny"}})),
            agent: None,
            ask: bash("git status"),
            want: expect(Allow, Some("git *"), Global),
        },
        Case {
            name: "maps merge: the overriding state and origin are the project's",
            layers: global(json!({"bash": {"*": "ask", "git *": "allow"}}))
                .project(json!({"bash": {"*": "deny"}})),
            agent: None,
            ask: bash("make"),
            want: expect(Deny, Some("*"), Project),
        },
        Case {
            name: "maps merge: new project patterns go after the global ones",
            layers: global(json!({"bash": {"git *": "allow"}}))
                .project(json!({"bash": {"git push *": "deny"}})),
            agent: None,
            ask: bash("git push"),
            want: expect(Deny, Some("git push *"), Project),
        },
        Case {
            name: "maps merge across all four layers",
            layers: global(json!({"bash": {"*": "deny"}}))
                .project(json!({"bash": {"npm *": "ask"}}))
                .agent("dev", json!({"bash": {"npm test": "allow"}}))
                .project_agent("dev", json!({"bash": {"npm *": "allow"}})),
            agent: Some("dev"),
            ask: bash("npm test"),
            want: expect(Allow, Some("npm test"), Agent),
        },
        Case {
            name: "maps merge across all four layers (re-defined pattern)",
            layers: global(json!({"bash": {"*": "deny"}}))
                .project(json!({"bash": {"npm *": "ask"}}))
                .agent("dev", json!({"bash": {"npm test": "allow"}}))
                .project_agent("dev", json!({"bash": {"npm *": "allow"}})),
            agent: Some("dev"),
            ask: bash("npm publish"),
            want: expect(Allow, Some("npm *"), ProjectAgent),
        },
    ];
    run_cases(cases);
}

#[test]
fn inline_agents_in_the_global_config() {
    let layers = Layers {
        global: json!({
            "permission": {"bash": {"*": "ask", "rm *": "deny"}},
            "agents": {
                "reviewer": {"bash": {"git diff *": "allow", "git push *": "deny"}},
                "builder": {"permission": {"bash": "allow"}},
            },
        }),
        ..Default::default()
    }
    .agent("reviewer", json!({"bash": {"git diff --stat": "deny"}}));
    let cases = vec![
        (
            "inline agent rule",
            Some("reviewer"),
            bash("git diff HEAD"),
            expect(Allow, Some("git diff *"), Agent),
        ),
        (
            "inline agent deny",
            Some("reviewer"),
            bash("git push"),
            expect(Deny, Some("git push *"), Agent),
        ),
        (
            "the agent file is layered after the inline map",
            Some("reviewer"),
            bash("git diff --stat"),
            expect(Deny, Some("git diff --stat"), Agent),
        ),
        (
            "global rules still apply",
            Some("reviewer"),
            bash("rm x"),
            expect(Deny, Some("rm *"), Global),
        ),
        (
            "inline agent given as {permission: …}, string replaces the map",
            Some("builder"),
            bash("rm x"),
            expect(Allow, Some("*"), Agent),
        ),
        (
            "another agent sees only global rules",
            Some("nobody"),
            bash("git diff HEAD"),
            expect(Ask, Some("*"), Global),
        ),
    ];
    let mut failures = Vec::new();
    for (name, agent, ask, want) in cases {
        let tree = Tree::new();
        let policy = tree.policy(&layers, agent);
        let got = outcome(&judge_policy(&tree, &policy, agent, &ask));
        if got != want {
            failures.push(format!("{name}: want {want:?}, got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn explicit_project_file_and_agents_dirs() {
    // The loader's overrides: a project file and a project agents dir given
    // explicitly rather than found from the cwd; permfs's own project file
    // (`.permfs/config.json`) is layered after the reference's one.
    let tree = Tree::new();
    let global = tree.write("g.json", r#"{"permission": {"bash": {"*": "deny"}}}"#);
    let project = tree.write(
        "elsewhere/project.json",
        r#"{"permission": {"bash": {"ls": "allow"}}}"#,
    );
    tree.write(
        "pa/dev.md",
        &agent_markdown("dev", &json!({"bash": {"pwd": "allow"}})),
    );
    let loader = PolicyLoader::new(PolicySources {
        global: Some(global.clone()),
        agents_dir: None,
        project_file: Some(project),
        project_agents_dir: Some(tree.root.join("pa")),
        authority_dirs: Vec::new(),
        // The reference layers every file: these tests check its semantics.
        trust: permfs::policy::trust::Trust::All,
    })
    .expect("valid global");
    let policy = loader
        .policy(&tree.cwd_str(), Some("dev"))
        .expect("compiles");
    let rows = [
        ("ls", expect(Allow, Some("ls"), Project)),
        ("pwd", expect(Allow, Some("pwd"), ProjectAgent)),
        ("make", expect(Deny, Some("*"), Global)),
    ];
    for (command, want) in rows {
        let got = outcome(&judge_policy(&tree, &policy, Some("dev"), &bash(command)));
        assert_eq!(got, want, "{command}");
    }

    // Discovery from the cwd: both project files, the permfs one last.
    let tree = Tree::new();
    let global = tree.write("g.json", r#"{"permission": {"bash": "deny"}}"#);
    tree.write(
        "work/.pi/extensions/pi-permission-system/config.json",
        r#"{"permission": {"bash": {"ls": "allow", "make": "allow"}}}"#,
    );
    tree.write(
        "work/.permfs/config.json",
        r#"{"permission": {"bash": {"make": "ask"}}}"#,
    );
    let loader = PolicyLoader::new(PolicySources {
        global: Some(global),
        trust: permfs::policy::trust::Trust::All,
        ..Default::default()
    })
    .expect("valid global");
    let policy = loader.policy(&tree.cwd_str(), None).expect("compiles");
    assert_eq!(
        outcome(&judge_policy(&tree, &policy, None, &bash("ls"))),
        expect(Allow, Some("ls"), Project)
    );
    assert_eq!(
        outcome(&judge_policy(&tree, &policy, None, &bash("make"))),
        expect(Ask, Some("make"), Project)
    );
    assert_eq!(policy.sources.len(), 3, "{:?}", policy.sources);
}

#[test]
fn string_and_map_merge() {
    let cases = vec![
        Case {
            name: "a project string replaces a global map",
            layers: global(json!({"bash": {"git *": "allow", "*": "deny"}}))
                .project(json!({"bash": "ask"})),
            agent: None,
            ask: bash("git status"),
            want: expect(Ask, Some("*"), Project),
        },
        Case {
            name: "a project map replaces a global string",
            layers: global(json!({"bash": "deny"})).project(json!({"bash": {"git *": "allow"}})),
            agent: None,
            ask: bash("make"),
            want: expect(Ask, None, Builtin),
        },
        Case {
            name: "…and its own patterns apply",
            layers: global(json!({"bash": "deny"})).project(json!({"bash": {"git *": "allow"}})),
            agent: None,
            ask: bash("git log"),
            want: expect(Allow, Some("git *"), Project),
        },
        Case {
            name: "string, then map, then string",
            layers: global(json!({"bash": "deny"}))
                .project(json!({"bash": {"git *": "allow"}}))
                .agent("dev", json!({"bash": "ask"})),
            agent: Some("dev"),
            ask: bash("git log"),
            want: expect(Ask, Some("*"), Agent),
        },
        Case {
            name: "other surfaces are untouched by a replacement",
            layers: global(json!({"bash": {"*": "deny"}, "read": {"*": "allow"}}))
                .project(json!({"bash": "ask"})),
            agent: None,
            ask: surface("read", "a.txt"),
            want: expect(Allow, Some("*"), Global),
        },
        Case {
            name: "a global string and a project `*` map: the map replaces, same pattern",
            layers: global(json!({"bash": "deny"})).project(json!({"bash": {"*": "allow"}})),
            agent: None,
            ask: bash("ls"),
            want: expect(Allow, Some("*"), Project),
        },
    ];
    run_cases(cases);
}

#[test]
fn directional_surfaces_and_sugar() {
    // (name, permission, ask, state, pattern, origin, rule surface of the
    // deciding check)
    type Row = (
        &'static str,
        Value,
        Query,
        PermissionState,
        Option<&'static str>,
        &'static str,
    );
    let rows: Vec<Row> = vec![
        (
            "`path` covers reads",
            json!({"read": "allow", "write": "allow", "path": {"*.env": "deny"}}),
            tool("read", json!({"path": "conf/.env"})),
            Deny,
            Some("*.env"),
            "path_read",
        ),
        (
            "`path` covers writes",
            json!({"read": "allow", "write": "allow", "path": {"*.env": "deny"}}),
            tool("write", json!({"path": "conf/.env"})),
            Deny,
            Some("*.env"),
            "path_write",
        ),
        (
            "`path` covers edits",
            json!({"edit": "allow", "path": {"*.env": "deny"}}),
            tool("edit", json!({"path": "conf/.env"})),
            Deny,
            Some("*.env"),
            "path_read",
        ),
        (
            "`path_read` affects reads",
            json!({"read": "allow", "write": "allow", "path_read": {"*.env": "deny"}}),
            tool("read", json!({"path": "conf/.env"})),
            Deny,
            Some("*.env"),
            "path_read",
        ),
        (
            "`path_read` does not affect writes",
            json!({"read": "allow", "write": "allow", "path_read": {"*.env": "deny"}}),
            tool("write", json!({"path": "conf/.env"})),
            Allow,
            Some("*"),
            "write",
        ),
        (
            "`path_read` affects grep, find and ls",
            json!({"grep": "allow", "path_read": {"secret/*": "deny"}}),
            tool("grep", json!({"pattern": "x", "path": "secret/a"})),
            Deny,
            Some("secret/*"),
            "path_read",
        ),
        (
            "`path_write` does not affect reads",
            json!({"read": "allow", "path_write": {"*.lock": "deny"}}),
            tool("read", json!({"path": "Cargo.lock"})),
            Allow,
            Some("*"),
            "read",
        ),
        (
            "edit takes the stricter direction (write denies)",
            json!({"edit": "allow", "path_read": {"*.lock": "ask"}, "path_write": {"*.lock": "deny"}}),
            tool("edit", json!({"path": "Cargo.lock"})),
            Deny,
            Some("*.lock"),
            "path_write",
        ),
        (
            "edit takes the stricter direction (read asks)",
            json!({"edit": "allow", "path_read": {"*.lock": "ask"}, "path_write": {"*.lock": "allow"}}),
            tool("edit", json!({"path": "Cargo.lock"})),
            Ask,
            Some("*.lock"),
            "path_read",
        ),
        (
            "edit: a tie goes to _read",
            json!({"edit": "allow", "path_read": {"*.lock": "deny"}, "path_write": {"Cargo.*": "deny"}}),
            tool("edit", json!({"path": "Cargo.lock"})),
            Deny,
            Some("*.lock"),
            "path_read",
        ),
        (
            "a path rule allowing does not lift the tool's own ask",
            json!({"read": "ask", "path": {"*": "allow"}}),
            tool("read", json!({"path": "src/a.rs"})),
            Ask,
            Some("*"),
            "read",
        ),
        (
            "a `path` ask gates even when the tool allows",
            json!({"write": "allow", "path": {"*": "ask"}}),
            tool("write", json!({"path": "src/a.rs"})),
            Ask,
            Some("*"),
            "path_write",
        ),
        (
            "sugar first, explicit after: path_read:allow re-allows .env reads",
            json!({"read": "allow", "path": {"*": "allow", "*.env": "deny"}, "path_read": "allow"}),
            tool("read", json!({"path": ".env"})),
            Allow,
            Some("*"),
            "path_read",
        ),
        (
            "…while writes of .env stay denied",
            json!({"write": "allow", "path": {"*": "allow", "*.env": "deny"}, "path_read": "allow"}),
            tool("write", json!({"path": ".env"})),
            Deny,
            Some("*.env"),
            "path_write",
        ),
        (
            "explicit keys come after the sugar whatever the file order",
            json!({"read": "allow", "path_read": {"*.env": "allow"}, "path": {"*.env": "deny"}}),
            tool("read", json!({"path": ".env"})),
            Allow,
            Some("*.env"),
            "path_read",
        ),
        (
            "a surface query on bare `path` folds both directions",
            json!({"path_write": {"/srv/*": "deny"}}),
            surface("path", "/srv/app"),
            Deny,
            Some("/srv/*"),
            "path_write",
        ),
        (
            "an extension tool with a path raises the bare family",
            json!({"deploy": "allow", "path_write": {"prod/*": "deny"}}),
            tool("deploy", json!({"path": "prod/app.yaml"})),
            Deny,
            Some("prod/*"),
            "path_write",
        ),
    ];
    let mut failures = Vec::new();
    for (name, permission, ask, state, pattern, rule_surface) in rows {
        let tree = Tree::new();
        let policy = tree.policy(&global(permission), None);
        let judgment = judge_policy(&tree, &policy, None, &ask);
        let check = judgment.deciding_check().expect("a deciding check");
        let got = (
            judgment.state,
            check.matched_pattern.clone(),
            check.rule_surface.clone(),
        );
        let want = (state, pattern.map(str::to_string), rule_surface.to_string());
        if got != want {
            failures.push(format!(
                "{name}: want {want:?}, got {got:?}\n{:#?}",
                judgment.checks
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn external_directory_through_symlinks() {
    let tree = Tree::new();
    let outside = tree.mkdir("outside");
    std::fs::write(outside.join("secret.txt"), "s").expect("write");
    tree.mkdir("work/src");
    std::fs::write(tree.root.join("work/src/a.rs"), "a").expect("write");
    let cwd = tree.cwd();
    std::os::unix::fs::symlink(&outside, cwd.join("out-link")).expect("symlink out");
    std::os::unix::fs::symlink("src", cwd.join("in-link")).expect("symlink in");
    std::os::unix::fs::symlink(cwd.join("src"), tree.root.join("back-link")).expect("symlink back");
    let outside_str = outside.to_string_lossy().into_owned();
    let root = tree.root_str();
    let cwd_str = tree.cwd_str();

    let base =
        json!({"*": "allow", "read": "allow", "write": "allow", "external_directory": "deny"});
    let scoped = json!({
        "*": "allow",
        "read": "allow",
        "write": "allow",
        "external_directory": {"*": "deny", format!("{outside_str}/*"): "allow"},
        "external_directory_write": {format!("{outside_str}/*"): "ask"},
    });
    let relative_rule = json!({
        "*": "allow",
        "read": "allow",
        "external_directory": {"*": "deny", "out-link/*": "allow"},
    });
    // (name, permission, ask, state, pattern, deciding surface)
    type Row = (
        &'static str,
        Value,
        Query,
        PermissionState,
        Option<String>,
        &'static str,
    );
    let rows: Vec<Row> = vec![
        (
            "a symlink inside the cwd pointing outside is external",
            base.clone(),
            tool("read", json!({"path": "out-link/secret.txt"})),
            Deny,
            Some("*".into()),
            "external_directory_read",
        ),
        (
            "a symlink inside the cwd pointing inside is not",
            base.clone(),
            tool("read", json!({"path": "in-link/a.rs"})),
            Allow,
            Some("*".into()),
            "read",
        ),
        (
            "a plain file inside is not",
            base.clone(),
            tool("read", json!({"path": "src/a.rs"})),
            Allow,
            Some("*".into()),
            "read",
        ),
        (
            "dot-dot out of the cwd is external",
            base.clone(),
            tool("read", json!({"path": "../outside/secret.txt"})),
            Deny,
            Some("*".into()),
            "external_directory_read",
        ),
        (
            "a symlink outside the cwd pointing inside is not external",
            base.clone(),
            tool("read", json!({"path": format!("{root}/back-link/a.rs")})),
            Allow,
            Some("*".into()),
            "read",
        ),
        (
            "a path that does not exist yet under an escaping link is external",
            base.clone(),
            tool("write", json!({"path": "out-link/new/file.txt"})),
            Deny,
            Some("*".into()),
            "external_directory_write",
        ),
        (
            "/dev/null is never external",
            base.clone(),
            tool("write", json!({"path": "/dev/null"})),
            Allow,
            Some("*".into()),
            "write",
        ),
        (
            "a rule on the canonical target applies through the link",
            scoped.clone(),
            tool("read", json!({"path": "out-link/secret.txt"})),
            Allow,
            Some(format!("{outside_str}/*")),
            "external_directory_read",
        ),
        (
            "…and the directional rule after the sugar asks for writes",
            scoped.clone(),
            tool("write", json!({"path": "out-link/secret.txt"})),
            Ask,
            Some(format!("{outside_str}/*")),
            "external_directory_write",
        ),
        (
            "…other outside paths stay denied",
            scoped,
            tool("read", json!({"path": "/etc/hostname"})),
            Deny,
            Some("*".into()),
            "external_directory_read",
        ),
        (
            "a rule on the link's relative spelling applies too",
            relative_rule,
            tool("read", json!({"path": "out-link/secret.txt"})),
            Allow,
            Some("out-link/*".into()),
            "external_directory_read",
        ),
        (
            "with no external_directory rule the universal default asks",
            json!({"read": "allow"}),
            tool("read", json!({"path": "out-link/secret.txt"})),
            Ask,
            None,
            "external_directory_read",
        ),
        (
            "edit outside raises the bare family",
            json!({"edit": "allow", "external_directory_write": "deny"}),
            tool("edit", json!({"path": "out-link/secret.txt"})),
            Deny,
            Some("*".into()),
            "external_directory",
        ),
    ];
    let mut failures = Vec::new();
    for (name, permission, ask, state, pattern, deciding_surface) in rows {
        let policy = tree.policy(&global(permission), None);
        let judgment = judge_policy(&tree, &policy, None, &ask);
        let check = judgment.deciding_check().expect("a deciding check");
        let got = (
            judgment.state,
            check.matched_pattern.clone(),
            check.surface.clone(),
        );
        let want = (state, pattern, deciding_surface.to_string());
        if got != want {
            failures.push(format!(
                "{name}: want {want:?}, got {got:?}\n{:#?}",
                judgment.checks
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "cwd {cwd_str}\n{}",
        failures.join("\n")
    );

    // The facts themselves: the canonical alias comes last and is the
    // boundary value.
    let facts = tree
        .requester(None)
        .facts(&form(&tool("read", json!({"path": "out-link/secret.txt"}))));
    let external = facts
        .intents
        .iter()
        .find(|i| i.surface == "external_directory_read")
        .expect("an external_directory_read intent");
    assert_eq!(
        *external.match_values,
        [
            format!("{cwd_str}/out-link/secret.txt"),
            "out-link/secret.txt".to_string(),
            format!("{outside_str}/secret.txt"),
        ]
    );
    assert_eq!(
        external.boundary_value.as_deref(),
        Some(format!("{outside_str}/secret.txt").as_str())
    );
}

// ---------------------------------------------------------------------------
// Session grants, yolo, fail-closed

fn grants(rules: &[(&str, &str)]) -> CompiledRules {
    let rules = rules
        .iter()
        .map(|(surface, pattern)| {
            Rule::new(surface, pattern, Allow, Session).with_layer(RuleLayer::Session)
        })
        .collect();
    CompiledRules::compile(rules, &home_dir()).expect("grants compile")
}

#[test]
fn session_grants_beat_config_on_their_surface_only() {
    let tree = Tree::new();
    let cwd = tree.cwd_str();
    let policy = tree.policy(
        &global(json!({
            "bash": {"*": "ask", "git push *": "deny", "sudo *": "deny"},
            "read": {"*": "allow", format!("{cwd}/secret/*"): "deny"},
            "write": {"*": "deny"},
        })),
        None,
    );
    let granted = grants(&[
        ("bash", "git push *"),
        ("bash", "sudo ls"),
        ("path_read", &format!("{cwd}/*")),
        ("read", &format!("{cwd}/secret/*")),
        ("task", "*"),
    ]);
    type Row = (&'static str, Query, Outcome);
    let rows: Vec<Row> = vec![
        (
            "a bash grant beats the config deny",
            bash("git push origin"),
            expect(Allow, Some("git push *"), Session),
        ),
        (
            "a grant on one command leaves the rest",
            bash("git status"),
            expect(Ask, Some("*"), Global),
        ),
        (
            "a grant is not floored by a wrapper",
            bash("sudo ls"),
            expect(Allow, Some("sudo ls"), Session),
        ),
        (
            "the grant does not widen to other sudo commands",
            bash("sudo rm -rf /"),
            expect(Deny, Some("sudo *"), Global),
        ),
        (
            "a read grant beats the narrower config deny",
            surface("read", "secret/key"),
            expect(Allow, Some("__SECRET__"), Session),
        ),
        (
            "a grant on read does not reach write",
            surface("write", "secret/key"),
            expect(Deny, Some("*"), Global),
        ),
        (
            "a grant for a tool surface",
            surface("task", "anything"),
            expect(Allow, Some("*"), Session),
        ),
        (
            "a grant on path_read does not answer a bash command",
            bash("cat secret/key"),
            expect(Ask, Some("*"), Global),
        ),
    ];
    let secret = format!("{cwd}/secret/*");
    let mut failures = Vec::new();
    for (name, ask, mut want) in rows {
        if want.pattern.as_deref() == Some("__SECRET__") {
            want.pattern = Some(secret.clone());
        }
        let got = outcome(&judge_with(&tree, &[&policy.rules, &granted], None, &ask));
        if got != want {
            failures.push(format!("{name}: want {want:?}, got {got:?}"));
        }
        // Without the grants the config alone answers differently or the
        // same, but never with a session origin.
        let alone = outcome(&judge_with(&tree, &[&policy.rules], None, &ask));
        if alone.origin == Some(Session) {
            failures.push(format!("{name}: a session origin without grants"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // A directional grant answers the path gate of a read tool call.
    let policy = tree.policy(
        &global(json!({"read": "allow", "path": {format!("{cwd}/secret/*"): "deny"}})),
        None,
    );
    let granted = grants(&[("path_read", &secret)]);
    let ask = tool("read", json!({"path": "secret/key"}));
    assert_eq!(
        outcome(&judge_with(&tree, &[&policy.rules], None, &ask)).state,
        Deny
    );
    assert_eq!(
        outcome(&judge_with(&tree, &[&policy.rules, &granted], None, &ask)).state,
        Allow
    );
    let write = tool("write", json!({"path": "secret/key"}));
    assert_eq!(
        outcome(&judge_with(&tree, &[&policy.rules, &granted], None, &write)).state,
        Deny,
        "a path_read grant does not answer path_write"
    );
}

#[test]
fn yolo_turns_asks_into_allows_but_keeps_denies() {
    let yolo = Layers {
        global: json!({
            "yoloMode": true,
            "permission": {"bash": {"*": "ask", "rm *": "deny", "ls": "allow"}, "read": {"*.env": "ask"}},
        }),
        ..Default::default()
    };
    run_table(
        yolo.clone(),
        None,
        vec![
            (
                "an ask rule becomes allow, origin yolo",
                bash("make"),
                expect(Allow, Some("*"), Yolo),
            ),
            (
                "a deny stays",
                bash("rm -rf x"),
                expect(Deny, Some("rm *"), Global),
            ),
            (
                "an allow stays global",
                bash("ls"),
                expect(Allow, Some("ls"), Global),
            ),
            (
                "the universal default ask becomes allow",
                surface("task", "*"),
                expect(Allow, None, Yolo),
            ),
            (
                "path ask rules too",
                surface("read", ".env"),
                expect(Allow, Some("*.env"), Yolo),
            ),
            (
                "a wrapper floor still asks",
                bash("sudo make"),
                expect(Ask, Some("<indirection-bash-wrapper>"), Yolo),
            ),
        ],
    );
    // yoloMode in a project file is not honoured.
    let project_yolo = Layers {
        global: json!({"permission": {"bash": "ask"}}),
        project: Some(json!({"yoloMode": true})),
        ..Default::default()
    };
    let tree = Tree::new();
    let policy = tree.policy(&project_yolo, None);
    assert_eq!(
        outcome(&judge_policy(&tree, &policy, None, &bash("make"))),
        expect(Ask, Some("*"), Global)
    );
    assert!(
        policy.issues.iter().any(|i| i.contains("yoloMode")),
        "{:?}",
        policy.issues
    );
    // yoloMode: false is the default.
    let off = Layers {
        global: json!({"yoloMode": false, "permission": {"bash": "ask"}}),
        ..Default::default()
    };
    let tree = Tree::new();
    let policy = tree.policy(&off, None);
    assert_eq!(
        outcome(&judge_policy(&tree, &policy, None, &bash("make"))),
        expect(Ask, Some("*"), Global)
    );
}

#[test]
fn invalid_layers_fail_closed() {
    let global_rules =
        json!({"*": "allow", "bash": {"git *": "allow", "rm *": "deny", "make": "ask"}});
    // (name, the broken file under the temp root, its text, what the issue
    // must name)
    let breakers: [(&str, &str, &str, &str); 6] = [
        (
            "a misspelt key in the project config",
            "work/.pi/extensions/pi-permission-system/config.json",
            r#"{"permision": {"bash": "allow"}}"#,
            "config.json",
        ),
        (
            "invalid JSON in the project config",
            "work/.pi/extensions/pi-permission-system/config.json",
            r#"{"permission": {"bash": "allow",}}"#,
            "config.json",
        ),
        (
            "a bad state in the project config",
            "work/.pi/extensions/pi-permission-system/config.json",
            r#"{"permission": {"bash": "yes"}}"#,
            "config.json",
        ),
        (
            "an invalid permfs project file",
            "work/.permfs/config.json",
            "[]",
            ".permfs/config.json",
        ),
        (
            "broken frontmatter in the agent file",
            "agents/dev.md",
            "---\npermission: [\n---\n",
            "dev.md",
        ),
        (
            "unterminated frontmatter in the project-agent file",
            "work/.pi/agents/dev.md",
            "---\npermission:\n  bash: allow\n",
            "dev.md",
        ),
    ];
    for (name, broken_file, text, file_hint) in breakers {
        let tree = Tree::new();
        let global_file = tree.write(
            "global.json",
            &json!({"permission": global_rules}).to_string(),
        );
        tree.write(broken_file, text);
        let loader = PolicyLoader::new(PolicySources {
            global: Some(global_file),
            agents_dir: Some(tree.root.join("agents")),
            ..Default::default()
        })
        .expect("the global config is valid");
        let policy = loader
            .policy(&tree.cwd_str(), Some("dev"))
            .expect("compiles");
        assert!(policy.failed_closed, "{name}: should fail closed");
        assert!(
            policy.issues.iter().any(|i| i.contains(file_hint)),
            "{name}: issues should name {file_hint}: {:?}",
            policy.issues
        );
        assert!(
            policy.issues.iter().any(|i| i.contains("failing closed")),
            "{name}: {:?}",
            policy.issues
        );
        assert!(
            policy.rules.rules().iter().all(|r| r.action != Allow),
            "{name}: no allow may survive"
        );
        let rows = [
            ("git status", expect(Ask, Some("git *"), FailClosed)),
            ("rm -rf x", expect(Deny, Some("rm *"), Global)),
            ("make", expect(Ask, Some("make"), Global)),
        ];
        for (command, want) in rows {
            let got = outcome(&judge_policy(&tree, &policy, Some("dev"), &bash(command)));
            assert_eq!(got, want, "{name}: {command}");
        }
        let got = outcome(&judge_policy(
            &tree,
            &policy,
            Some("dev"),
            &surface("task", "*"),
        ));
        assert_eq!(
            got,
            expect(Ask, None, FailClosed),
            "{name}: universal default"
        );
    }

    // The floor also tames yolo: nothing is allowed without a person.
    let tree = Tree::new();
    let global_file = tree.write(
        "global.json",
        r#"{"yoloMode": true, "permission": {"bash": {"*": "ask", "rm *": "deny"}}}"#,
    );
    tree.write("work/.permfs/config.json", r#"{"permission": 3}"#);
    let loader = PolicyLoader::new(PolicySources {
        global: Some(global_file),
        ..Default::default()
    })
    .expect("valid global");
    let policy = loader.policy(&tree.cwd_str(), None).expect("compiles");
    assert_eq!(
        outcome(&judge_policy(&tree, &policy, None, &bash("make"))),
        expect(Ask, Some("*"), FailClosed)
    );

    // A missing project file is no problem at all.
    let tree = Tree::new();
    let policy = tree.policy(&global(json!({"bash": "allow"})), Some("dev"));
    assert!(!policy.failed_closed, "{:?}", policy.issues);
    assert_eq!(
        outcome(&judge_policy(&tree, &policy, Some("dev"), &bash("make"))),
        expect(Allow, Some("*"), Global)
    );

    // An invalid global config is refused outright, naming the file and
    // the problem.
    for (text, needle) in [
        (r#"{"permision": {}}"#, "permission"),
        (r#"{"permission": {"bash": "always"}}"#, "permission.bash"),
        ("{", "invalid JSON"),
    ] {
        let tree = Tree::new();
        let file = tree.write("global.json", text);
        let error = PolicyLoader::new(PolicySources {
            global: Some(file.clone()),
            ..Default::default()
        })
        .expect_err("an invalid global config is refused");
        let message = error.to_string();
        assert!(
            message.contains(&file.display().to_string()),
            "{text}: {message}"
        );
        assert!(message.contains(needle), "{text}: {message}");
    }
}

#[test]
fn a_changed_layer_is_picked_up() {
    let tree = Tree::new();
    let loader = tree.loader(&global(json!({"bash": "ask"})).project(json!({"bash": "allow"})));
    let cwd = tree.cwd_str();
    let first = loader.policy(&cwd, None).expect("compiles");
    assert_eq!(judge_policy(&tree, &first, None, &bash("ls")).state, Allow);
    // A different size guarantees a different stamp even within one mtime tick.
    tree.write(
        "work/.pi/extensions/pi-permission-system/config.json",
        r#"{"permission": {"bash": "deny"}, "debugLog": false}"#,
    );
    // Layer files are re-checked at most every 250 ms.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let second = loader.policy(&cwd, None).expect("compiles");
    assert_eq!(judge_policy(&tree, &second, None, &bash("ls")).state, Deny);
}

// ---------------------------------------------------------------------------
// bash

#[test]
fn bash_splitter_and_wrapper_floor() {
    let layers = global(json!({"bash": {
        "*": "allow",
        "rm *": "deny",
        "curl *": "ask",
        "sudo curl *": "ask",
        "sudo rm *": {"action": "deny", "reason": "never as root"},
    }}));
    let rows: Vec<(&str, Query, Outcome)> = vec![
        (
            "a plain allowed command",
            bash("ls -la"),
            expect(Allow, Some("*"), Global),
        ),
        (
            "a chain takes the worst unit",
            bash("ls && rm -rf x"),
            expect(Deny, Some("rm *"), Global),
        ),
        (
            "|| splits",
            bash("false || rm x"),
            expect(Deny, Some("rm *"), Global),
        ),
        (
            "; splits",
            bash("ls; rm x"),
            expect(Deny, Some("rm *"), Global),
        ),
        (
            "| splits",
            bash("ls | rm x"),
            expect(Deny, Some("rm *"), Global),
        ),
        (
            "& splits",
            bash("sleep 1 & rm x"),
            expect(Deny, Some("rm *"), Global),
        ),
        (
            "ask beats allow",
            bash("ls && curl example.com"),
            expect(Ask, Some("curl *"), Global),
        ),
        (
            "deny beats ask",
            bash("curl x | rm y"),
            expect(Deny, Some("rm *"), Global),
        ),
        (
            "quotes are not split",
            bash("echo 'a && rm -rf /'"),
            expect(Allow, Some("*"), Global),
        ),
        (
            "double quotes are not split",
            bash("echo \"x; rm y\""),
            expect(Allow, Some("*"), Global),
        ),
        (
            "an escaped ; is not split",
            bash("echo a\\; rm b"),
            expect(Allow, Some("*"), Global),
        ),
        (
            "leading assignments are stripped",
            bash("FOO=1 BAR=2 rm x"),
            expect(Deny, Some("rm *"), Global),
        ),
        (
            "a redirect 2>&1 is not a split",
            bash("make 2>&1 | tee log"),
            expect(Allow, Some("*"), Global),
        ),
        (
            "a comment-only command",
            bash("# nothing to do"),
            expect(Allow, Some("*"), Global),
        ),
        (
            "a trailing comment is dropped",
            bash("ls # rm x"),
            expect(Allow, Some("*"), Global),
        ),
        (
            "sudo is an indirection wrapper",
            bash("sudo ls"),
            expect(Ask, Some("<indirection-bash-wrapper>"), Global),
        ),
        (
            "env is an indirection wrapper",
            bash("env A=1 ls"),
            expect(Ask, Some("<indirection-bash-wrapper>"), Global),
        ),
        (
            "xargs in a pipeline",
            bash("ls | xargs cat"),
            expect(Ask, Some("<indirection-bash-wrapper>"), Global),
        ),
        (
            "timeout",
            bash("timeout 5 make"),
            expect(Ask, Some("<indirection-bash-wrapper>"), Global),
        ),
        (
            "find -exec",
            bash("find . -name '*.o' -exec rm {} ;"),
            // The inner `rm` is denied: a deny reaches through the wrapper
            // (upstream wrapper-bypass tests; 20.7.3 asks).
            expect(Deny, Some("rm *"), Global),
        ),
        (
            "find without -exec is plain",
            bash("find . -name x"),
            expect(Allow, Some("*"), Global),
        ),
        (
            "fd -x",
            bash("fd -e o -x rm"),
            expect(Deny, Some("rm *"), Global),
        ),
        (
            "sh -c is opaque",
            bash("sh -c 'ls'"),
            expect(Ask, Some("<opaque-bash-wrapper>"), Global),
        ),
        (
            "bash -ec is opaque",
            bash("/bin/bash -ec 'ls'"),
            expect(Ask, Some("<opaque-bash-wrapper>"), Global),
        ),
        (
            "eval is opaque",
            bash("eval \"$CMD\""),
            expect(Ask, Some("<opaque-bash-wrapper>"), Global),
        ),
        (
            "bash script.sh is not opaque",
            bash("bash script.sh"),
            expect(Allow, Some("*"), Global),
        ),
        (
            "a deny rule on the wrapped form still denies",
            bash("sudo rm -rf /"),
            expect(Deny, Some("sudo rm *"), Global),
        ),
        (
            "an ask on a wrapper is untouched",
            bash("sudo curl x"),
            expect(Ask, Some("sudo curl *"), Global),
        ),
        (
            "unbalanced quotes are not fully read",
            bash("echo 'unterminated && ls"),
            // The grammar marks the rest unread: floored (upstream #840;
            // 20.7.3 allows `echo`).
            expect(Ask, Some("<unparsed-bash-subtree>"), Global),
        ),
        (
            "an unparseable command a deny matches whole stays denied",
            bash("rm 'unterminated"),
            expect(Deny, Some("rm *"), Global),
        ),
        (
            "command substitution",
            bash("echo $(whoami)"),
            // Parsed now, as the reference parses it: every command allowed.
            expect(Allow, Some("*"), Global),
        ),
        (
            "backticks",
            bash("echo `id`"),
            // Parsed now, as the reference parses it: every command allowed.
            expect(Allow, Some("*"), Global),
        ),
        (
            "process substitution",
            bash("diff <(ls a) <(ls b)"),
            // Parsed now, as the reference parses it: every command allowed.
            expect(Allow, Some("*"), Global),
        ),
        (
            "a subshell",
            bash("(cd x && ls)"),
            // Parsed now, as the reference parses it: every command allowed.
            expect(Allow, Some("*"), Global),
        ),
        (
            "a here-document",
            bash("cat <<EOF\nhi\nEOF"),
            // Parsed now, as the reference parses it: every command allowed.
            expect(Allow, Some("*"), Global),
        ),
        (
            "a compound statement",
            bash("for f in *; do echo $f; done"),
            // Parsed now, as the reference parses it: every command allowed.
            expect(Allow, Some("*"), Global),
        ),
        (
            "a single-quoted $( is text",
            bash("echo '$(not run)'"),
            expect(Allow, Some("*"), Global),
        ),
        (
            "a deny in another unit beats a floored wrapper",
            bash("sudo ls && rm x"),
            expect(Deny, Some("rm *"), Global),
        ),
        (
            "a floored ask wins the tie against a later plain ask",
            bash("sudo ls; curl x"),
            expect(Ask, Some("<indirection-bash-wrapper>"), Global),
        ),
        (
            "a bash tool call judges the command",
            tool("bash", json!({"command": "ls && rm -rf /"})),
            expect(Deny, Some("rm *"), Global),
        ),
    ];
    run_table(layers, None, rows);

    // The sentinel is also stamped as the check's floor, and the reason of
    // a wrapped deny is reported.
    let tree = Tree::new();
    let policy = tree.policy(
        &global(json!({"bash": {"*": "allow", "sudo rm *": {"action": "deny", "reason": "never as root"}}})),
        None,
    );
    let judgment = judge_policy(&tree, &policy, None, &bash("sudo ls"));
    let check = judgment.deciding_check().expect("deciding check");
    assert_eq!(check.floor.as_deref(), Some("<indirection-bash-wrapper>"));
    assert_eq!(check.command.as_deref(), Some("sudo ls"));
    let judgment = judge_policy(&tree, &policy, None, &bash("sudo rm -rf /"));
    assert_eq!(judgment.reason(), Some("never as root"));

    // With no bash rules at all, floors still stop a universal allow.
    let tree = Tree::new();
    let policy = tree.policy(&global(json!({"*": "allow"})), None);
    assert_eq!(
        outcome(&judge_policy(&tree, &policy, None, &bash("sh -c ls"))),
        expect(Ask, Some("<opaque-bash-wrapper>"), Global)
    );
    assert_eq!(
        outcome(&judge_policy(&tree, &policy, None, &bash("ls"))),
        expect(Allow, None, Global)
    );
}
