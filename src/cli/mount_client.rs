//! The mount as its command-line clients see it: session directories by
//! id, the check that a mount is there, and `ctl` writes.
//!
//! `permfs hook` and `permfs run` both spawn and end sessions through a
//! parent's `ctl`; keeping the path rules and the messages here means a
//! nested id (`main/team/x` is `sessions/main/children/team/children/x`)
//! and a missing mount read the same in both.
//!
//! Inside a sandbox `permfs run` made, the mount is not visible, only one
//! session directory (`$PERMFS_SESSION`, `/permfs`); [`MountClient::inside`]
//! names sessions relative to it: `.` is that session, `./x` its child.

use std::io::Write;
use std::path::PathBuf;

/// A permfs mount, by its mount point, or one session directory of it.
#[derive(Debug, Clone)]
pub struct MountClient {
    /// The mount point (inside a sandbox: the session directory).
    pub mount: PathBuf,
    /// Inside a sandbox: the one session directory there is (id `.`).
    inside: Option<PathBuf>,
}

impl MountClient {
    /// The mount at `mount`.
    pub fn new(mount: PathBuf) -> Self {
        Self {
            mount,
            inside: None,
        }
    }

    /// A sandbox's view: only the session directory `dir`, id `.`.
    pub fn inside(dir: PathBuf) -> Self {
        Self {
            mount: dir.clone(),
            inside: Some(dir),
        }
    }

    /// The mount named by `--mount`, else `$PERMFS_MOUNT`, else `./mount`.
    pub fn from_arg(mount: Option<PathBuf>) -> Self {
        let mount = mount
            .or_else(|| {
                std::env::var_os("PERMFS_MOUNT")
                    .filter(|m| !m.is_empty())
                    .map(PathBuf::from)
            })
            .unwrap_or_else(|| PathBuf::from("mount"));
        Self::new(mount)
    }

    /// A session directory by id (`main`, `main/worker`, …; inside a
    /// sandbox `.`, `./worker`).
    pub fn dir(&self, id: &str) -> PathBuf {
        let mut parts = id.split('/');
        let first = parts.next().unwrap_or("main");
        let mut path = match &self.inside {
            Some(dir) if first == "." => dir.clone(),
            _ => self.mount.join("sessions").join(first),
        };
        for part in parts {
            path = path.join("children").join(part);
        }
        path
    }

    /// Whether session `id` exists (its `session.json` is there).
    pub fn exists(&self, id: &str) -> bool {
        self.dir(id).join("session.json").exists()
    }

    /// Ok when a permfs mount is there; else what to do about it.
    pub fn check_mount(&self) -> Result<(), String> {
        if let Some(dir) = &self.inside {
            if dir.join("session.json").exists() {
                return Ok(());
            }
            return Err(format!(
                "$PERMFS_SESSION is {}, which is not a permfs session directory (no session.json): run inside `permfs run`, or unset it",
                dir.display()
            ));
        }
        let readme = self.mount.join("README");
        match std::fs::metadata(self.mount.join("sessions")) {
            Ok(meta) if meta.is_dir() && readme.exists() => Ok(()),
            Ok(_) | Err(_) => Err(format!(
                "no permfs mount at {} ({}); start `permfs mount {}` or point --mount / $PERMFS_MOUNT at the mount",
                self.mount.display(),
                std::fs::metadata(&self.mount)
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_else(|| "not a permfs mount".into()),
                self.mount.display()
            )),
        }
    }

    /// Writes one command to session `session`'s `ctl`; the daemon's
    /// refusal comes back as the write's errno.
    pub fn control(&self, session: &str, command: &str) -> std::io::Result<()> {
        self.control_kept(session, command).map(drop)
    }

    /// Writes `command` to `session`'s `ctl` and keeps the handle open:
    /// a `spawn … lease` lives as long as the returned file (and every
    /// descriptor duplicated from it).
    pub fn control_kept(&self, session: &str, command: &str) -> std::io::Result<std::fs::File> {
        let mut ctl = std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir(session).join("ctl"))?;
        ctl.write_all(command.as_bytes())?;
        Ok(ctl)
    }

    /// Ends session `id` through its parent's `ctl`; one already gone is
    /// fine.
    pub fn end(&self, id: &str) -> Result<(), String> {
        let Some((parent, name)) = id.rsplit_once('/') else {
            return Ok(());
        };
        match self.control(parent, &format!("end {name}\n")) {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            Err(e) => Err(format!("cannot end session {id}: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_directories_in_the_mount_or_in_the_one_session_inside() {
        let mount = MountClient::new(PathBuf::from("/m"));
        assert_eq!(mount.dir("main"), PathBuf::from("/m/sessions/main"));
        assert_eq!(
            mount.dir("main/a/b"),
            PathBuf::from("/m/sessions/main/children/a/children/b")
        );
        let inside = MountClient::inside(PathBuf::from("/permfs"));
        assert_eq!(inside.dir("."), PathBuf::from("/permfs"));
        assert_eq!(inside.dir("./a"), PathBuf::from("/permfs/children/a"));
    }
}
