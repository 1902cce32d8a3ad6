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
}

pub fn run(args: CheckConfigArgs) -> i32 {
    let mut maps = Vec::new();
    let mut failed = false;
    let mut yolo = false;
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
                eprintln!("{}: ok ({origin} layer)", file.display());
                maps.push((origin, map));
            }
            Err(error) => {
                eprintln!("{error}");
                failed = true;
            }
        }
    }
    let set = LayerSet {
        layers: maps.iter().map(|(o, m)| (*o, m)).collect(),
        yolo,
        invalid: Vec::new(),
    };
    let rules = compose_rules(&set);
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
    println!(
        "{}",
        json!({ "rules": rules, "builtInDenies": {"surface": "path_write", "patterns": built_in} })
    );
    i32::from(failed)
}
