//! What a rename means for the names beneath it.
//!
//! A path rule is only as strong as the judgment of every operation that
//! changes which path a file has. `mv private pub` changes the name of
//! every file below `private/` at once, so judging only the two directory
//! names let `cat pub/key.txt` read what `*/private/*: deny` refused.
//!
//! The invariant the view keeps: **a rename is `cp` plus `rm`**. Every
//! name it moves is judged as a read and a write at its old path (the
//! content leaves it) and a write at its new path (the content appears
//! there), for the entry and every descendant; with `RENAME_EXCHANGE` for
//! both entries and both subtrees. A name that no rename, link or create
//! judged cannot appear, so no byte of a file is readable at a name where
//! the policy would not let it be read, and no file reaches a name the
//! policy would not let it be written to.
//!
//! This file knows no FUSE: it lists a subtree through directory
//! descriptors ([`subtree`]) and turns two lists of relative names into
//! the accesses to judge ([`accesses`]). The adapter (`fs.rs`) holds the
//! view's namespace lock while it lists, judges and renames, so no name
//! can be added under a directory between its listing and its move.

use super::sys;
use crate::session::view::opens::Access;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Entries a rename may move at most: past it the rename is refused
/// rather than judged (each entry is three accesses held in memory while
/// the namespace lock is held).
pub const MAX_MOVED: usize = 500_000;

/// The names under `name` in `dir`, relative to it, the entry itself
/// first (as the empty path), parents before children. A symbolic link is
/// an entry, never followed. A directory `enter` refuses (by its relative
/// path: the daemon's own mount and state dir, which it never looks into)
/// is listed as an entry but not entered: its name alone decides (the
/// guards deny it). A directory of another filesystem below: `Err(EXDEV)`.
/// `Ok(None)`: there is no such entry. Past [`MAX_MOVED`] entries:
/// `Err(E2BIG)`.
pub fn subtree(
    dir: &OwnedFd,
    name: &OsStr,
    enter: &dyn Fn(&Path) -> bool,
) -> io::Result<Option<Vec<PathBuf>>> {
    let st = match sys::stat_at(dir.as_raw_fd(), name) {
        Ok(st) => st,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut entries = vec![PathBuf::new()];
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return Ok(Some(entries));
    }
    if !enter(Path::new("")) {
        return Ok(Some(entries));
    }
    let top = sys::open_at(
        dir.as_raw_fd(),
        name,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    )?;
    let device = sys::stat_fd(top.as_raw_fd())?.st_dev;
    let mut stack: Vec<(OwnedFd, PathBuf)> = vec![(top, PathBuf::new())];
    while let Some((fd, rel)) = stack.pop() {
        for (name, is_dir) in sys::list_fd(fd.as_raw_fd())? {
            let child = rel.join(&name);
            if is_dir && enter(&child) {
                let sub = sys::open_at(
                    fd.as_raw_fd(),
                    &name,
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                    0,
                )?;
                if sys::stat_fd(sub.as_raw_fd())?.st_dev != device {
                    // Another filesystem mounted below: what it holds is
                    // not this listing's to judge. `EXDEV`, as for a move
                    // between filesystems: `mv` then copies, and each
                    // file is judged as it is opened.
                    return Err(io::Error::from_raw_os_error(libc::EXDEV));
                }
                stack.push((sub, child.clone()));
            }
            entries.push(child);
            if entries.len() > MAX_MOVED {
                return Err(io::Error::from_raw_os_error(libc::E2BIG));
            }
        }
    }
    Ok(Some(entries))
}

/// The accesses renaming `from` to `to` makes: `moved` are the names under
/// `from` (relative, as [`subtree`] lists them), `swapped` those under
/// `to` when the two are exchanged (empty otherwise). Without an
/// exchange, an existing `to` is replaced: a write of it, which the
/// entry's own write at its new path already is.
pub fn accesses(
    from: &Path,
    to: &Path,
    moved: &[PathBuf],
    swapped: &[PathBuf],
) -> Vec<(PathBuf, Access)> {
    let mut out = Vec::with_capacity(3 * (moved.len() + swapped.len()).max(1));
    let mut add = |old: &Path, new: &Path, names: &[PathBuf]| {
        for rel in names {
            let (old, new) = (join(old, rel), join(new, rel));
            out.push((old.clone(), Access::Read));
            out.push((old, Access::Write));
            out.push((new, Access::Write));
        }
    };
    add(from, to, moved);
    add(to, from, swapped);
    if moved.is_empty() {
        // Nothing found to move (the kernel's rename will fail): the two
        // names are still what the call would write.
        out.push((from.to_path_buf(), Access::Write));
        out.push((to.to_path_buf(), Access::Write));
    }
    out
}

/// `base/rel`, and `base` itself for the empty `rel` (`Path::join` of an
/// empty path would add a trailing `/`).
pub fn join(base: &Path, rel: &Path) -> PathBuf {
    if rel.as_os_str().is_empty() {
        base.to_path_buf()
    } else {
        base.join(rel)
    }
}

/// How an ask names a rename: the directory, how many entries it moves,
/// and the accesses no rule allowed (the first `shown` of them).
pub fn describe(
    from: &Path,
    to: &Path,
    entries: usize,
    pending: &[(PathBuf, Access)],
    shown: usize,
) -> String {
    let mut what: Vec<String> = pending
        .iter()
        .take(shown)
        .map(|(p, a)| {
            format!(
                "{} {}",
                a.word(),
                String::from_utf8_lossy(p.as_os_str().as_bytes())
            )
        })
        .collect();
    if pending.len() > shown {
        what.push(format!("and {} more", pending.len() - shown));
    }
    let noun = if entries == 1 { "entry" } else { "entries" };
    format!(
        "a program in the sandbox renames {} to {} ({entries} {noun} move; not allowed by a rule: {})",
        from.display(),
        to.display(),
        what.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::OwnedFd;

    fn dir_fd(path: &Path) -> OwnedFd {
        std::fs::File::open(path).expect("dir").into()
    }

    #[test]
    fn a_subtree_lists_every_name_beneath_and_follows_no_link() {
        let tmp = tempfile::tempdir().expect("tmp");
        let top = tmp.path().join("private");
        std::fs::create_dir_all(top.join("a/b")).expect("dirs");
        std::fs::write(top.join("key.txt"), "k").expect("file");
        std::fs::write(top.join("a/b/deep"), "d").expect("file");
        std::os::unix::fs::symlink("/etc", top.join("etc")).expect("link");
        let fd = dir_fd(tmp.path());
        let all = |_: &Path| true;
        let mut names = subtree(&fd, OsStr::new("private"), &all)
            .expect("listed")
            .expect("exists");
        assert_eq!(names[0], PathBuf::new(), "the entry itself comes first");
        names.sort();
        let want: Vec<PathBuf> = ["", "a", "a/b", "a/b/deep", "etc", "key.txt"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(names, want);
        assert!(subtree(&fd, OsStr::new("missing"), &all)
            .expect("ok")
            .is_none());
        let not_a = |rel: &Path| rel != Path::new("a");
        let mut kept = subtree(&fd, OsStr::new("private"), &not_a)
            .expect("listed")
            .expect("exists");
        kept.sort();
        assert!(
            kept.contains(&PathBuf::from("a")) && !kept.contains(&PathBuf::from("a/b")),
            "a directory not entered is listed, not walked: {kept:?}"
        );
        let file = subtree(&dir_fd(&top), OsStr::new("key.txt"), &all)
            .expect("ok")
            .expect("exists");
        assert_eq!(file, vec![PathBuf::new()]);
    }

    #[test]
    fn a_rename_reads_and_writes_every_old_name_and_writes_every_new_one() {
        let moved: Vec<PathBuf> = ["", "key.txt"].iter().map(PathBuf::from).collect();
        let got = accesses(Path::new("/w/private"), Path::new("/w/pub"), &moved, &[]);
        let want: Vec<(PathBuf, Access)> = vec![
            ("/w/private".into(), Access::Read),
            ("/w/private".into(), Access::Write),
            ("/w/pub".into(), Access::Write),
            ("/w/private/key.txt".into(), Access::Read),
            ("/w/private/key.txt".into(), Access::Write),
            ("/w/pub/key.txt".into(), Access::Write),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn an_exchange_moves_both_subtrees_both_ways() {
        let a: Vec<PathBuf> = ["", "x"].iter().map(PathBuf::from).collect();
        let b: Vec<PathBuf> = ["", "y"].iter().map(PathBuf::from).collect();
        let got = accesses(Path::new("/w/a"), Path::new("/w/b"), &a, &b);
        assert!(got.contains(&("/w/a/x".into(), Access::Read)));
        assert!(got.contains(&("/w/b/x".into(), Access::Write)));
        assert!(got.contains(&("/w/b/y".into(), Access::Read)));
        assert!(got.contains(&("/w/a/y".into(), Access::Write)));
        assert_eq!(got.len(), 12);
    }

    #[test]
    fn a_missing_source_still_judges_both_names() {
        let got = accesses(Path::new("/w/a"), Path::new("/w/b"), &[], &[]);
        assert_eq!(
            got,
            vec![
                (PathBuf::from("/w/a"), Access::Write),
                (PathBuf::from("/w/b"), Access::Write)
            ]
        );
    }

    #[test]
    fn an_ask_names_the_directory_the_count_and_what_is_not_allowed() {
        let pending: Vec<(PathBuf, Access)> = (0..5)
            .map(|i| (PathBuf::from(format!("/w/s/{i}")), Access::Read))
            .collect();
        let text = describe(Path::new("/w/s"), Path::new("/w/t"), 40, &pending, 3);
        assert!(text.contains("/w/s to /w/t"), "{text}");
        assert!(text.contains("40 entries"), "{text}");
        assert!(text.contains("read /w/s/0"), "{text}");
        assert!(text.contains("and 2 more"), "{text}");
    }
}
