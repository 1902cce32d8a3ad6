//! `permfs check-config`: validate files, show what they compose to.

use crate::policy::config::ConfigFile;
use crate::policy::frontmatter::load_agent_file;
use crate::policy::layers::{compose_rules, hook_settings_files, LayerSet};
use crate::policy::Origin;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct CheckConfigArgs {
    /// Config files (`.json`) or agent files (`.md`), layered in the order
    /// given: the first is global, later JSON files are project layers,
    /// `.md` files are agent layers.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The daemon's state dir, whose `trust.json` says which project
    /// layers may widen (default: as `permfs mount`).
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
}

pub fn run(args: CheckConfigArgs) -> i32 {
    let mut maps = Vec::new();
    let mut failed = false;
    let mut yolo = false;
    // The outside-the-sandbox guards the global config (the first file)
    // lowers; a project layer's `guards` key is ignored, as the daemon
    // ignores it.
    let mut lowered: Vec<(String, crate::policy::outside::Setting)> = Vec::new();
    let state_dir = args
        .state_dir
        .clone()
        .unwrap_or_else(crate::mount::default_state_dir);
    let store = crate::policy::trust::store_file(&state_dir);
    let records = crate::policy::trust::Records::load(&store);
    // (origin, file, trusted, why not) per layer loaded.
    let mut layers: Vec<serde_json::Value> = Vec::new();
    for (index, file) in args.files.iter().enumerate() {
        let is_agent = file.extension().is_some_and(|e| e == "md");
        let loaded = if is_agent {
            match load_agent_file(file) {
                Ok(Some(rules)) => {
                    for note in &rules.notes {
                        eprintln!("{}: note: {note}", file.display());
                    }
                    Ok(rules.permission)
                }
                Ok(None) => Err(format!("{}: no such file", file.display())),
                Err(error) => Err(error),
            }
        } else {
            ConfigFile::load(file)
                .map(|config| {
                    yolo |= index == 0 && config.yolo_mode == Some(true);
                    match (&config.guards, index) {
                        (Some(guards), 0) => lowered.clone_from(guards),
                        (Some(_), _) => eprintln!(
                            "{}: note: guards can be lowered only in the global config; ignored here",
                            file.display()
                        ),
                        (None, _) => {}
                    }
                    config.permission
                })
                .map_err(|e| e.to_string())
        };
        match loaded {
            Ok(map) => {
                let origin = match (is_agent, index) {
                    (true, _) => Origin::Agent,
                    (false, 0) => Origin::Global,
                    (false, _) => Origin::Project,
                };
                // A project layer widens only as trusted (the global and
                // agent layers are the operator's).
                let trust = if origin == Origin::Project {
                    let file = crate::facts::fence::canonicalize(file).unwrap_or(file.clone());
                    match (&records, crate::facts::fence::read(&file)) {
                        (Ok(records), Ok(bytes)) => {
                            records.verdict_for_file(&file, &crate::policy::trust::digest(&bytes))
                        }
                        (Err(error), _) => Err(error.clone()),
                        (_, Err(error)) => Err(format!("{}: {error}", file.display())),
                    }
                } else {
                    Ok(())
                };
                match &trust {
                    Ok(()) => eprintln!("{}: ok ({origin} layer)", file.display()),
                    Err(why) => eprintln!(
                        "{}: ok ({origin} layer), untrusted: it may only narrow ({why})",
                        file.display()
                    ),
                }
                layers.push(json!({
                    "file": file,
                    "origin": origin,
                    "trusted": trust.is_ok(),
                    "whyNot": trust.as_ref().err(),
                }));
                maps.push((origin, map, trust.is_ok()));
            }
            Err(error) => {
                eprintln!("{error}");
                failed = true;
            }
        }
    }
    let set = LayerSet {
        layers: maps.iter().map(|(o, m, _)| (*o, m)).collect(),
        yolo,
        invalid: Vec::new(),
    };
    let rules = compose_rules(&set);
    // What may widen: the trusted layers alone (an untrusted layer's
    // deny and ask still count where they are stricter).
    let trusted_rules = maps.iter().any(|(_, _, trusted)| !trusted).then(|| {
        compose_rules(&LayerSet {
            layers: maps
                .iter()
                .filter(|(_, _, trusted)| *trusted)
                .map(|(o, m, _)| (*o, m))
                .collect(),
            yolo,
            invalid: Vec::new(),
        })
    });
    // The built-in denies that come after every config rule and that no
    // config drops: shown so nobody is surprised by them. The mount point
    // and state dir are added by `permfs mount`; the config files by the
    // daemon from the files it loads.
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let home = PathBuf::from(crate::facts::path_text::home_dir());
    let built_in: Vec<String> = hook_settings_files(&home, &cwd)
        .iter()
        .map(|f| f.to_string_lossy().into_owned())
        .chain([
            "<mount point> and <mount point>/* (permfs mount)".to_string(),
            "<state dir> and <state dir>/* (permfs mount)".to_string(),
            "the global config, the project configs of the cwd, the agent files".to_string(),
        ])
        .collect();
    let outside = outside_guards(&home, &lowered);
    for guard in &outside {
        if guard["state"] == "allow" {
            eprintln!(
                "note: the built-in guard {} (files that run outside the sandbox) is lowered to allow",
                guard["name"]
            );
        }
    }
    println!(
        "{}",
        json!({
            "rules": rules,
            "layers": layers,
            "trustedRules": trusted_rules,
            "builtInDenies": {"surface": "path_write", "patterns": built_in, "final": true},
            "outsideGuards": outside,
        })
    );
    i32::from(failed)
}

/// Each outside-the-sandbox guard (`policy::outside`) as `check-config`
/// shows it: its name, the kind of file, its patterns (`~` is `home`), what
/// is left alone, whether content is judged, and its state: `ask` (every
/// write asks a person, final) or `allow` (lowered by the global config).
fn outside_guards(
    home: &std::path::Path,
    lowered: &[(String, crate::policy::outside::Setting)],
) -> Vec<serde_json::Value> {
    use crate::policy::outside::{entries, Setting};
    let entries = match entries() {
        Ok(entries) => entries,
        Err(error) => {
            eprintln!("error: the built-in guard table does not parse ({error}): every write asks");
            return Vec::new();
        }
    };
    let home = home.to_string_lossy();
    let expand = |p: &String| match p.strip_prefix("~/") {
        Some(rest) => format!("{}/{rest}", home.trim_end_matches('/')),
        None => p.clone(),
    };
    entries
        .iter()
        .map(|entry| {
            let state = lowered
                .iter()
                .rev()
                .find(|(name, _)| *name == entry.name)
                .map_or(Setting::Ask, |(_, s)| *s);
            json!({
                "name": entry.name,
                "kind": entry.kind,
                "patterns": entry.patterns.iter().map(expand).collect::<Vec<_>>(),
                "except": entry.except.iter().map(expand).collect::<Vec<_>>(),
                "contentJudged": entry.content.is_some(),
                "state": state,
                "final": state == Setting::Ask,
            })
        })
        .collect()
}
