//! The floor under the enforcement view: a FUSE server that judges nothing.
//!
//!     cargo build --release --example fuse_floor
//!     target/release/examples/fuse_floor DIR MOUNTPOINT
//!
//! It serves the regular files directly in `DIR` (one level, no
//! subdirectories) at `MOUNTPOINT` the way the view serves an allowed file,
//! minus everything permfs does: every name and attribute is kept by the
//! kernel for an hour, `FLUSH`, `OPENDIR` and extended attributes are
//! refused once (`ENOSYS`) so the kernel stops sending them, and an open is
//! answered with FUSE passthrough on a backing id kept per inode (the view
//! keeps them too), so reads and writes never reach this process. What is
//! left per `open`+`read`+`close` is what the kernel will not do without a
//! server: one `OPEN` round trip, and the `RELEASE` sent after `close`.
//! `scripts/bench/floor.py` times it against the native directory and the
//! view: the view's small-files figure cannot fall below this one.
//!
//! It runs until SIGINT/SIGTERM, then unmounts. Root only (passthrough needs
//! `CAP_SYS_ADMIN`). A measuring tool, not part of permfs.

use fuser::{
    BackingId, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    LockOwner, OpenFlags, ReplyAttr, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyXattr, Request,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

const TTL: Duration = Duration::from_secs(3600);

struct Floor {
    /// Inode number - 2 indexes this list; 1 is the root.
    files: Vec<(std::ffi::OsString, PathBuf)>,
    backings: Mutex<HashMap<u64, Arc<BackingId>>>,
}

fn attr_of(ino: u64, meta: &std::fs::Metadata) -> FileAttr {
    let at = |secs: i64| UNIX_EPOCH + Duration::from_secs(secs.max(0) as u64);
    FileAttr {
        ino: INodeNo(ino),
        size: meta.size(),
        blocks: meta.blocks(),
        atime: at(meta.atime()),
        mtime: at(meta.mtime()),
        ctime: at(meta.ctime()),
        crtime: at(meta.ctime()),
        kind: if meta.is_dir() {
            FileType::Directory
        } else {
            FileType::RegularFile
        },
        perm: (meta.mode() & 0o7777) as u16,
        nlink: meta.nlink() as u32,
        uid: meta.uid(),
        gid: meta.gid(),
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl Floor {
    fn path(&self, ino: u64) -> Option<&PathBuf> {
        self.files
            .get(usize::try_from(ino).ok()?.checked_sub(2)?)
            .map(|(_, p)| p)
    }
}

impl Filesystem for Floor {
    fn init(&mut self, _req: &Request, config: &mut fuser::KernelConfig) -> std::io::Result<()> {
        config
            .add_capabilities(fuser::InitFlags::FUSE_PASSTHROUGH)
            .map_err(|_| std::io::Error::other("the kernel offers no FUSE passthrough"))?;
        config
            .set_max_stack_depth(2)
            .map_err(|_| std::io::Error::other("max_stack_depth refused"))?;
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent.0 != 1 {
            return reply.error(Errno::ENOENT);
        }
        let Some(index) = self.files.iter().position(|(n, _)| n == name) else {
            return reply.error(Errno::ENOENT);
        };
        match std::fs::metadata(&self.files[index].1) {
            Ok(meta) => reply.entry(&TTL, &attr_of(index as u64 + 2, &meta), Generation(0)),
            Err(_) => reply.error(Errno::EIO),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let meta = if ino.0 == 1 {
            self.files
                .first()
                .and_then(|(_, p)| p.parent())
                .and_then(|dir| std::fs::metadata(dir).ok())
        } else {
            self.path(ino.0).and_then(|p| std::fs::metadata(p).ok())
        };
        match meta {
            Some(meta) => reply.attr(&TTL, &attr_of(ino.0, &meta)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let mut backings = match self.backings.lock() {
            Ok(b) => b,
            Err(_) => return reply.error(Errno::EIO),
        };
        if let Some(id) = backings.get(&ino.0) {
            return reply.opened_passthrough(FileHandle(0), FopenFlags::empty(), id);
        }
        let Some(path) = self.path(ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        let write = flags.0 & libc::O_ACCMODE != libc::O_RDONLY;
        let file = match File::options().read(true).write(write).open(path) {
            Ok(file) => file,
            Err(_) => return reply.error(Errno::EIO),
        };
        match reply.open_backing(&file) {
            Ok(id) => {
                let id = Arc::new(id);
                backings.insert(ino.0, id.clone());
                reply.opened_passthrough(FileHandle(0), FopenFlags::empty(), &id)
            }
            Err(_) => reply.error(Errno::EIO),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::ENOSYS);
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.error(Errno::ENOSYS);
    }

    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: ReplyXattr,
    ) {
        reply.error(Errno::ENOSYS);
    }
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, mountpoint] = args.as_slice() else {
        eprintln!("usage: fuse_floor DIR MOUNTPOINT");
        std::process::exit(2);
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            files.push((entry.file_name(), entry.path()));
        }
    }
    let floor = Floor {
        files,
        backings: Mutex::new(HashMap::new()),
    };
    let mut config = fuser::Config::default();
    config.n_threads = Some(4);
    config
        .mount_options
        .push(fuser::MountOption::FSName("fuse_floor".into()));
    // SIGINT/SIGTERM are blocked before the serving threads start (they
    // inherit the mask), so one of them cannot die of it with the mount
    // left behind; this thread waits for either, then unmounts.
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initializes the set before any other use.
    let set = unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        libc::sigaddset(set.as_mut_ptr(), libc::SIGINT);
        libc::sigaddset(set.as_mut_ptr(), libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, set.as_ptr(), std::ptr::null_mut());
        set.assume_init()
    };
    let session = fuser::spawn_mount(floor, mountpoint, &config)?;
    println!("mounted");
    let mut signal = 0;
    // SAFETY: `set` is initialized; sigwait writes the signal number.
    unsafe { libc::sigwait(&set, &mut signal) };
    eprintln!("fuse_floor: signal {signal}, unmounting");
    drop(session);
    Ok(())
}
