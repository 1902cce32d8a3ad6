//! The `ctl` language, parsed in one place: one command per write.
//!
//! ```text
//! spawn <child> [agent=NAME] [cwd=/abs/dir] [interactive] [asker=UID] [decider=UID] [lease] [view=/abs/dir ...]
//! end <child>
//! enforce listener=FD [ruleset=FD]
//! ```
//!
//! `kernel` with `view=DIR` serves DIR through the kernel mechanism
//! (`src/kernel/`) instead of a FUSE view: the sandbox binds DIR itself,
//! and its `permfs wall` then says `enforce` from inside, naming its
//! seccomp listener and Landlock ruleset descriptors, which the daemon
//! takes (once per session) and judges the sandbox's opens and writes by.
//!
//! `view=DIR` (repeatable) serves DIR to the child through an enforcement
//! view (`src/view/`): only the operator, from the daemon's own mount
//! namespace, may ask for one, since the view opens files as the daemon.
//!
//! `lease` ties the child to the `ctl` handle that spawned it: when the
//! last descriptor of that handle closes (its process exits, even by
//! SIGKILL), the child is ended as by `end`. It gives the writer nothing
//! it did not have: a spawner may end its children anyway.
//!
//! `mkdir children/<child>` is `spawn <child>` with no options, and
//! `rmdir children/<child>` is `end <child>`, so both paths meet the same
//! spawn rule ([`crate::session::tree::access::check_spawn`]).

use crate::session::tree::SpawnSpec;

/// What a `ctl` write asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlCommand {
    Spawn {
        name: String,
        spec: SpawnSpec,
        /// Ended when the spawning handle closes.
        lease: bool,
        /// Roots to serve through enforcement views.
        views: Vec<String>,
        /// The views by the kernel mechanism, not FUSE.
        kernel: bool,
    },
    End {
        name: String,
    },
    /// From inside a kernel-mechanism sandbox: its seccomp listener and
    /// Landlock ruleset, as descriptor numbers in the writer.
    Enforce {
        listener: i32,
        ruleset: Option<i32>,
    },
}

const USAGE: &str = "spawn <child> [agent=NAME] [cwd=/abs/dir] [interactive] [asker=UID] [decider=UID] [lease] [view=/abs/dir ...] [kernel] | end <child> | enforce listener=FD [ruleset=FD]";

impl ControlCommand {
    /// Parses one command; the error names what was wrong and the usage.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut words = text.split_whitespace();
        match words.next() {
            Some("spawn") => {
                let name = words
                    .next()
                    .ok_or_else(|| format!("spawn needs a child name: {USAGE}"))?
                    .to_string();
                let mut spec = SpawnSpec::default();
                let mut lease = false;
                let mut kernel = false;
                let mut views: Vec<String> = Vec::new();
                for word in words {
                    match word.split_once('=') {
                        Some(("agent", agent)) if !agent.is_empty() => {
                            set_once(&mut spec.agent, agent.to_string(), "agent")?
                        }
                        Some(("cwd", cwd)) if cwd.starts_with('/') => {
                            set_once(&mut spec.cwd, cwd.to_string(), "cwd")?
                        }
                        Some(("cwd", cwd)) => {
                            return Err(format!("cwd {cwd:?} must be an absolute path"))
                        }
                        Some(("view", dir)) if dir.starts_with('/') => {
                            if views.iter().any(|v| v == dir) {
                                return Err(format!("view={dir} is given twice"));
                            }
                            views.push(dir.to_string())
                        }
                        Some(("view", dir)) => {
                            return Err(format!("view {dir:?} must be an absolute path"))
                        }
                        Some(("asker", uid)) => set_once(&mut spec.asker_uid, parse_uid(uid)?, "asker")?,
                        Some(("decider", uid)) => {
                            set_once(&mut spec.decider_uid, parse_uid(uid)?, "decider")?
                        }
                        Some(("uid", _)) => {
                            return Err("uid= is ambiguous: write asker=UID (who may ask as the child) or decider=UID (who may decide there)".into())
                        }
                        None if word == "interactive" => spec.interactive = true,
                        None if word == "lease" && !lease => lease = true,
                        None if word == "lease" => return Err("lease is given twice".into()),
                        None if word == "kernel" => kernel = true,
                        _ => return Err(format!("unknown spawn option {word:?}: {USAGE}")),
                    }
                }
                if kernel && views.is_empty() {
                    return Err("kernel needs view=DIR: it names how the views are served".into());
                }
                Ok(Self::Spawn {
                    name,
                    spec,
                    lease,
                    views,
                    kernel,
                })
            }
            Some("end") => {
                let name = words
                    .next()
                    .ok_or_else(|| format!("end needs a child name: {USAGE}"))?
                    .to_string();
                match words.next() {
                    None => Ok(Self::End { name }),
                    Some(extra) => Err(format!("end takes one child name; {extra:?} is extra")),
                }
            }
            Some("enforce") => {
                let (mut listener, mut ruleset) = (None, None);
                for word in words {
                    let fd = |v: &str| {
                        v.parse::<i32>()
                            .ok()
                            .filter(|n| *n >= 0)
                            .ok_or_else(|| format!("{word:?}: a descriptor number"))
                    };
                    match word.split_once('=') {
                        Some(("listener", v)) => set_once(&mut listener, fd(v)?, "listener")?,
                        Some(("ruleset", v)) => set_once(&mut ruleset, fd(v)?, "ruleset")?,
                        _ => return Err(format!("unknown enforce option {word:?}: {USAGE}")),
                    }
                }
                let listener =
                    listener.ok_or_else(|| format!("enforce needs listener=FD: {USAGE}"))?;
                Ok(Self::Enforce { listener, ruleset })
            }
            _ => Err(format!("unknown command {:?}: {USAGE}", text.trim())),
        }
    }
}

fn parse_uid(text: &str) -> Result<u32, String> {
    text.parse()
        .map_err(|_| format!("uid {text:?} is not a number"))
}

fn set_once<T>(slot: &mut Option<T>, value: T, what: &str) -> Result<(), String> {
    if slot.replace(value).is_some() {
        return Err(format!("{what}= is given twice"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawn_lines_name_every_binding() {
        let command = ControlCommand::parse(
            "spawn w agent=rev cwd=/tmp interactive asker=7 decider=8 lease\n",
        )
        .expect("valid");
        let ControlCommand::Spawn {
            name,
            spec,
            lease,
            views,
            ..
        } = command
        else {
            panic!("a spawn");
        };
        assert!(lease);
        assert!(views.is_empty());
        assert!(matches!(
            ControlCommand::parse("spawn w view=/a view=/b"),
            Ok(ControlCommand::Spawn { views, .. }) if views == ["/a", "/b"]
        ));
        assert!(matches!(
            ControlCommand::parse("spawn w"),
            Ok(ControlCommand::Spawn { lease: false, .. })
        ));
        assert_eq!(name, "w");
        assert_eq!(spec.agent.as_deref(), Some("rev"));
        assert_eq!(spec.cwd.as_deref(), Some("/tmp"));
        assert!(spec.interactive);
        assert_eq!((spec.asker_uid, spec.decider_uid), (Some(7), Some(8)));
        assert_eq!(
            ControlCommand::parse("end w"),
            Ok(ControlCommand::End { name: "w".into() })
        );
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        for (line, needle) in [
            ("spawn", "needs a child name"),
            ("spawn w uid=5", "asker=UID"),
            ("spawn w cwd=rel", "absolute"),
            ("spawn w asker=x", "not a number"),
            ("spawn w asker=1 asker=2", "twice"),
            ("spawn w frobnicate", "unknown spawn option"),
            ("spawn w lease lease", "twice"),
            ("spawn w lease=1", "unknown spawn option"),
            ("spawn w view=rel", "absolute"),
            ("spawn w view=/a view=/a", "twice"),
            ("end", "needs a child name"),
            ("end a b", "extra"),
            ("reboot", "unknown command"),
        ] {
            let error = ControlCommand::parse(line).expect_err(line);
            assert!(error.contains(needle), "{line}: {error}");
        }
    }
}
