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
//!
//! A client that finds the mount by path trusts what it reads there (the
//! answers) and writes its asks there, so a directory that merely looks
//! like the mount (`sessions/`, `README`, even `session.json` files a
//! project planted at `./mount`) must never pass for it: [`verify_permfs`]
//! asks the kernel, not the directory, what filesystem it is and who
//! mounted it.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// `statfs`'s `f_type` of every FUSE filesystem (`FUSE_SUPER_MAGIC`).
const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;

/// The mount table's type of permfs's mount: FUSE with the subtype
/// `permfs` (`mount/fusermount.rs` mounts it with `fsname=permfs` and
/// `subtype=permfs`, as root and through `fusermount3` alike). An
/// enforcement view is `fuse.permfs-view`, which is not a mount to ask on.
pub const PERMFS_FSTYPE: &str = "fuse.permfs";

/// Ok when `path` lies on a real permfs mount whose owner is root or the
/// caller; else why not, in words a person can act on.
///
/// Three facts, none of which a directory's contents can fake:
/// - `statfs`'s `f_type` is FUSE's;
/// - the mount table's entry of the filesystem holding `path` (found by its
///   device number, so a bind of part of the mount, such as a sandbox's
///   `/permfs`, is found too) has the type `fuse.permfs`;
/// - that entry's `user_id` (who mounted it, in the namespace it was
///   mounted in) is root or the caller. Any user may mount a FUSE
///   filesystem of its own with the subtype `permfs` through `fusermount3`;
///   only root and the caller are trusted to answer the caller's asks.
///
/// `root_owner`: also require `path`'s own owner to be root or the caller
/// (for the mount point, whose owner is the daemon's uid; a session
/// directory inside belongs to its asker or decider instead).
pub fn verify_permfs(path: &Path, root_owner: bool) -> Result<(), String> {
    let refuse = |why: String| {
        tracing::warn!(path = %path.display(), %why, "not a permfs mount: refused");
        Err(format!(
            "{} is not a permfs mount ({why}); refusing it: a directory that only looks like the mount could answer asks itself. Start `permfs mount`, or point --mount / $PERMFS_MOUNT at the real mount",
            path.display()
        ))
    };
    let kind = match filesystem_type(path) {
        Ok(kind) => kind,
        Err(e) => return refuse(format!("cannot tell its filesystem: {e}")),
    };
    if kind != FUSE_SUPER_MAGIC {
        return refuse(format!(
            "its filesystem type is {kind:#x}, not FUSE's {FUSE_SUPER_MAGIC:#x}"
        ));
    }
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) => return refuse(format!("cannot read its attributes: {e}")),
    };
    let table = match std::fs::read_to_string("/proc/self/mountinfo") {
        Ok(table) => table,
        Err(e) => return refuse(format!("cannot read /proc/self/mountinfo: {e}")),
    };
    let Some(entry) = mount_entry(&table, meta.dev()) else {
        return refuse("its filesystem is not in /proc/self/mountinfo".into());
    };
    if entry.fstype != PERMFS_FSTYPE {
        return refuse(format!(
            "the mount table says {} is of type {:?}, not {PERMFS_FSTYPE:?}",
            entry.mountpoint, entry.fstype
        ));
    }
    // SAFETY: geteuid cannot fail.
    let caller = unsafe { libc::geteuid() };
    match entry.owner {
        Some(owner) if owner == 0 || owner == caller => {}
        Some(owner) => {
            return refuse(format!(
                "it was mounted by uid {owner}, neither root nor you (uid {caller})"
            ))
        }
        None => return refuse("the mount table does not say who mounted it".into()),
    }
    if root_owner && meta.uid() != 0 && meta.uid() != caller {
        return refuse(format!(
            "its root belongs to uid {}, neither root nor you (uid {caller})",
            meta.uid()
        ));
    }
    Ok(())
}

/// `statfs(2)`'s `f_type` of the filesystem holding `path`.
fn filesystem_type(path: &Path) -> std::io::Result<i64> {
    use std::os::unix::ffi::OsStrExt;
    let text = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: an all-zero statfs is a valid value to be overwritten.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `text` is NUL-terminated and `st` is a valid out pointer.
    if unsafe { libc::statfs(text.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)] // f_type's width differs by target
    Ok(st.f_type as i64)
}

/// One line of `/proc/self/mountinfo`, as far as the check needs it.
#[derive(Debug, PartialEq, Eq)]
struct MountEntry {
    mountpoint: String,
    fstype: String,
    /// FUSE's `user_id=` super option: who mounted it.
    owner: Option<u32>,
}

/// The mount table's entry for device `dev` (the last one, the mount on
/// top, when several show it: they share the superblock, so its type and
/// owner).
fn mount_entry(table: &str, dev: u64) -> Option<MountEntry> {
    let wanted = (libc::major(dev), libc::minor(dev));
    let mut found = None;
    for line in table.lines() {
        // id parent major:minor root mountpoint options [optional...] - type source super-options
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        let device = fields.get(2).and_then(|d| {
            let (major, minor) = d.split_once(':')?;
            Some((major.parse::<u32>().ok()?, minor.parse::<u32>().ok()?))
        });
        if device != Some(wanted) {
            continue;
        }
        let owner = fields.get(dash + 3).and_then(|options| {
            options
                .split(',')
                .find_map(|o| o.strip_prefix("user_id="))
                .and_then(|u| u.parse().ok())
        });
        found = Some(MountEntry {
            mountpoint: fields.get(4).copied().unwrap_or_default().to_string(),
            fstype: fields
                .get(dash + 1)
                .copied()
                .unwrap_or_default()
                .to_string(),
            owner,
        });
    }
    found
}

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

    /// Ok when the mount (inside a sandbox: the session directory) is a
    /// real permfs mount owned by root or the caller ([`verify_permfs`]).
    /// Cheap enough for every hook call: a `statfs` (one request to the
    /// daemon), a `stat` the kernel mostly answers from its cache, and the
    /// mount table.
    pub fn verify(&self) -> Result<(), String> {
        match &self.inside {
            Some(dir) => verify_permfs(dir, false).map_err(|why| format!("$PERMFS_SESSION: {why}")),
            None => verify_permfs(&self.mount, true),
        }
    }

    /// Ok when a permfs mount is there; else what to do about it.
    pub fn check_mount(&self) -> Result<(), String> {
        if let Some(dir) = &self.inside {
            if !dir.join("session.json").exists() {
                return Err(format!(
                    "$PERMFS_SESSION is {}, which is not a permfs session directory (no session.json): run inside `permfs run`, or unset it",
                    dir.display()
                ));
            }
            return self.verify();
        }
        if std::fs::metadata(&self.mount).is_ok() {
            self.verify()?;
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

    const TABLE: &str = "\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
45 27 0:40 / /tmp/mt/m rw,nosuid,nodev,relatime shared:7 - fuse.permfs permfs rw,user_id=0,group_id=0,allow_other
46 27 0:41 / /home/u/look rw,nosuid,nodev - fuse.permfs permfs rw,user_id=4343,group_id=4343
47 27 0:42 / /tmp/v rw - fuse.permfs-view permfs-view rw,user_id=0,group_id=0
95 72 0:40 /sessions/main/children/w /permfs rw,nosuid,nodev,relatime - fuse.permfs permfs rw,user_id=0,group_id=0
";

    #[test]
    fn the_mount_table_names_a_devices_type_and_owner() {
        let entry = mount_entry(TABLE, libc::makedev(0, 40)).expect("found");
        assert_eq!(entry.fstype, "fuse.permfs");
        assert_eq!(entry.owner, Some(0));
        assert_eq!(entry.mountpoint, "/permfs", "the last, the mount on top");
        let other = mount_entry(TABLE, libc::makedev(0, 41)).expect("found");
        assert_eq!(other.owner, Some(4343));
        let view = mount_entry(TABLE, libc::makedev(0, 42)).expect("found");
        assert_eq!(view.fstype, "fuse.permfs-view");
        let disk = mount_entry(TABLE, libc::makedev(254, 0)).expect("found");
        assert_eq!((disk.fstype.as_str(), disk.owner), ("ext4", None));
        assert_eq!(mount_entry(TABLE, libc::makedev(0, 99)), None);
    }

    #[test]
    fn a_plain_directory_that_looks_like_the_mount_is_refused() {
        let dir = tempfile::tempdir().expect("temp");
        std::fs::create_dir_all(dir.path().join("sessions/main")).expect("sessions");
        std::fs::write(dir.path().join("sessions/main/session.json"), "{}").expect("json");
        std::fs::write(dir.path().join("README"), "permfs").expect("readme");
        let client = MountClient::new(dir.path().to_path_buf());
        let why = client.check_mount().expect_err("a lookalike");
        assert!(why.contains("is not a permfs mount"), "{why}");
        assert!(why.contains("not FUSE's"), "{why}");
        let inside = MountClient::inside(dir.path().join("sessions/main"));
        assert!(inside
            .check_mount()
            .is_err_and(|w| w.contains("not a permfs mount")));
    }
}
