//! The sandbox's seccomp filter: what the kernel mechanism takes from the
//! sandbox's own hands.
//!
//! `permfs wall` installs it on itself just before it execs the command,
//! so it binds everything the sandbox ever runs. Three kinds of calls:
//!
//! - **Sent to the daemon** (`SECCOMP_RET_USER_NOTIF`): every call that
//!   changes a path or opens one for writing — `open`/`openat` with a
//!   write, create or truncate flag (flags are a register, so the filter
//!   sees them exactly), `openat2` and `creat` always, and rename, link,
//!   unlink, mkdir, rmdir, symlink, mknod, truncate, chmod, chown, utimes
//!   and the xattr setters in all their forms. The daemon judges the call
//!   as a write and performs it itself (`notify.rs`): the call never
//!   continues in the sandbox, so no second thread can swap the path
//!   between the judgment and the act.
//! - **Refused**: what would walk around the judged mounts — new mount or
//!   user namespaces (`unshare`, `clone` with a namespace flag, `setns`),
//!   `mount` and the new mount API, `open_by_handle_at` (an open by inode,
//!   not by path), fanotify (a group of one's own), `bpf`; and `io_uring`
//!   and `clone3` are `ENOSYS` (their arguments are out of the filter's
//!   sight; libc and the runtimes fall back to the plain calls).
//! - **Allowed**: everything else, read opens included: fanotify judges
//!   those (`fanotify.rs`).
//!
//! A call from another ABI (x32, or `int 0x80`'s i386 table) is refused
//! or kills the process: the numbers above are x86-64's.

/// `seccomp_data` offsets.
const NR: u32 = 0;
const ARCH: u32 = 4;
const fn arg_low(i: u32) -> u32 {
    16 + 8 * i
}

const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const X32_BIT: u32 = 0x4000_0000;

/// Open flags that may write: these opens go to the daemon.
pub const WRITE_FLAGS: u32 = (libc::O_WRONLY
    | libc::O_RDWR
    | libc::O_CREAT
    | libc::O_TRUNC
    | libc::O_APPEND
    | 0o20000000/* __O_TMPFILE */) as u32;

/// The namespace flags of `clone` and `unshare`.
const NAMESPACE_FLAGS: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWCGROUP) as u32;
const CLONE_NEWTIME: u32 = 0x80;

/// Calls the daemon performs (x86-64 numbers).
pub const SENT: &[libc::c_long] = &[
    libc::SYS_creat,
    libc::SYS_openat2,
    libc::SYS_rename,
    libc::SYS_renameat,
    libc::SYS_renameat2,
    libc::SYS_link,
    libc::SYS_linkat,
    libc::SYS_unlink,
    libc::SYS_unlinkat,
    libc::SYS_mkdir,
    libc::SYS_mkdirat,
    libc::SYS_rmdir,
    libc::SYS_symlink,
    libc::SYS_symlinkat,
    libc::SYS_mknod,
    libc::SYS_mknodat,
    libc::SYS_truncate,
    libc::SYS_chmod,
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    libc::SYS_fchmodat2,
    libc::SYS_chown,
    libc::SYS_fchown,
    libc::SYS_lchown,
    libc::SYS_fchownat,
    libc::SYS_utime,
    libc::SYS_utimes,
    libc::SYS_utimensat,
    libc::SYS_futimesat,
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_fremovexattr,
    SYS_SETXATTRAT,
    SYS_REMOVEXATTRAT,
];

const SYS_SETXATTRAT: libc::c_long = 463;
const SYS_REMOVEXATTRAT: libc::c_long = 466;
const SYS_OPEN_TREE_ATTR: libc::c_long = 467;

/// Calls refused with `EPERM`.
const REFUSED: &[libc::c_long] = &[
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_open_tree,
    SYS_OPEN_TREE_ATTR,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_open_by_handle_at,
    libc::SYS_fanotify_init,
    libc::SYS_fanotify_mark,
    libc::SYS_bpf,
    libc::SYS_chroot,
];

/// Calls refused with `ENOSYS` (callers fall back to plain calls).
const MISSING: &[libc::c_long] = &[
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_clone3,
];

fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

const LD_W_ABS: u32 = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
const JEQ: u32 = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
const JGE: u32 = libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K;
const JSET: u32 = libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K;
const RET: u32 = libc::BPF_RET | libc::BPF_K;

const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const NOTIFY: u32 = libc::SECCOMP_RET_USER_NOTIF;
fn errno(e: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (e as u32 & libc::SECCOMP_RET_DATA)
}

/// The filter program.
pub fn program() -> Vec<libc::sock_filter> {
    let mut p = vec![
        stmt(LD_W_ABS, ARCH),
        jump(JEQ, AUDIT_ARCH_X86_64, 1, 0),
        stmt(RET, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(LD_W_ABS, NR),
        jump(JGE, X32_BIT, 0, 1),
        stmt(RET, errno(libc::ENOSYS)),
    ];
    // The hot path first: the calls every program makes all the time
    // (read, write, close, fstat, mmap…: every number below 29 but open's
    // 2, none of them judged) and a few above, allowed after a handful of
    // instructions instead of a walk through every list below.
    p.push(jump(JEQ, libc::SYS_open as u32, 2, 0));
    p.push(jump(JGE, 29, 1, 0));
    p.push(stmt(RET, ALLOW));
    // `openat`, the commonest open: its flags decide at once.
    p.push(jump(JEQ, libc::SYS_openat as u32, 0, 4));
    p.push(stmt(LD_W_ABS, arg_low(2)));
    p.push(jump(JSET, WRITE_FLAGS, 0, 1));
    p.push(stmt(RET, NOTIFY));
    p.push(stmt(RET, ALLOW));
    for hot in [
        libc::SYS_futex,
        libc::SYS_getdents64,
        libc::SYS_newfstatat,
        libc::SYS_statx,
        libc::SYS_getpid,
        libc::SYS_getrandom,
        libc::SYS_epoll_wait,
        libc::SYS_epoll_pwait,
        libc::SYS_ppoll,
        libc::SYS_pselect6,
        libc::SYS_fcntl,
        libc::SYS_getcwd,
        libc::SYS_readlink,
        libc::SYS_faccessat2,
        libc::SYS_clock_nanosleep,
        libc::SYS_wait4,
    ] {
        p.push(jump(JEQ, hot as u32, 0, 1));
        p.push(stmt(RET, ALLOW));
    }
    let mut each = |list: &[libc::c_long], action: u32| {
        for nr in list {
            p.push(jump(JEQ, *nr as u32, 0, 1));
            p.push(stmt(RET, action));
        }
    };
    each(SENT, NOTIFY);
    each(REFUSED, errno(libc::EPERM));
    each(MISSING, errno(libc::ENOSYS));
    // open(path, flags): flags is argument 1; openat(dirfd, path, flags): 2.
    // unshare(flags) and clone(flags, …): argument 0.
    for (nr, arg, flags, yes) in [
        (libc::SYS_open, 1, WRITE_FLAGS, NOTIFY),
        (libc::SYS_openat, 2, WRITE_FLAGS, NOTIFY),
        (libc::SYS_clone, 0, NAMESPACE_FLAGS, errno(libc::EPERM)),
        (
            libc::SYS_unshare,
            0,
            NAMESPACE_FLAGS | CLONE_NEWTIME,
            errno(libc::EPERM),
        ),
    ] {
        p.push(jump(JEQ, nr as u32, 0, 4));
        p.push(stmt(LD_W_ABS, arg_low(arg)));
        p.push(jump(JSET, flags, 0, 1));
        p.push(stmt(RET, yes));
        p.push(stmt(RET, ALLOW));
    }
    p.push(stmt(RET, ALLOW));
    p
}

/// Installs the filter on the calling thread (and what it execs) and
/// returns the listener: the daemon's end, to be handed over and closed
/// here before anything untrusted runs.
pub fn install() -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let filter = program();
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: prctl with constant arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let install = |flags: libc::c_ulong| {
        // SAFETY: `prog` points at `filter`, alive for the call.
        unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                flags,
                std::ptr::addr_of!(prog),
            )
        }
    };
    // Killable: once the daemon holds a call, only a fatal signal ends the
    // wait (no restart that would ask the person twice). Older kernels
    // lack the flag.
    let mut fd = install(
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
    );
    if fd < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        fd = install(libc::SECCOMP_FILTER_FLAG_NEW_LISTENER);
    }
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor (close-on-exec) owned here alone.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jump_lands_inside_the_program() {
        let p = program();
        assert!(p.len() < u16::MAX as usize);
        for (i, ins) in p.iter().enumerate() {
            if u32::from(ins.code) & 0x07 == libc::BPF_JMP {
                assert!(i + 1 + (ins.jt as usize) < p.len());
                assert!(i + 1 + (ins.jf as usize) < p.len());
            }
        }
        assert_eq!(u32::from(p.last().map_or(0, |l| l.code)), RET);
    }

    /// Runs the program on one call, as the kernel's classic BPF would.
    fn verdict(arch: u32, nr: i64, args: [u64; 6]) -> u32 {
        let p = program();
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&(nr as u32).to_le_bytes());
        data[4..8].copy_from_slice(&arch.to_le_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let ins = p[pc];
            let code = u32::from(ins.code);
            pc += 1;
            if code == LD_W_ABS {
                let at = ins.k as usize;
                acc = u32::from_le_bytes(data[at..at + 4].try_into().expect("4 bytes"));
            } else if code == RET {
                return ins.k;
            } else {
                let taken = match code {
                    JEQ => acc == ins.k,
                    JGE => acc >= ins.k,
                    JSET => acc & ins.k != 0,
                    _ => panic!("unknown instruction {code:#x}"),
                };
                pc += usize::from(if taken { ins.jt } else { ins.jf });
            }
        }
    }

    #[test]
    fn the_filter_sends_writes_refuses_escapes_and_allows_the_rest() {
        let x86 = AUDIT_ARCH_X86_64;
        let call = |nr: libc::c_long, args: [u64; 6]| verdict(x86, nr, args);
        let o = |flags: i32| flags as u64;
        assert_eq!(call(libc::SYS_read, [0; 6]), ALLOW);
        assert_eq!(call(libc::SYS_close, [0; 6]), ALLOW);
        assert_eq!(
            call(libc::SYS_open, [0, o(libc::O_RDONLY), 0, 0, 0, 0]),
            ALLOW
        );
        assert_eq!(
            call(libc::SYS_open, [0, o(libc::O_WRONLY), 0, 0, 0, 0]),
            NOTIFY
        );
        assert_eq!(
            call(
                libc::SYS_openat,
                [0, 0, o(libc::O_RDONLY | libc::O_CLOEXEC), 0, 0, 0]
            ),
            ALLOW
        );
        for flags in [
            libc::O_RDWR,
            libc::O_CREAT,
            libc::O_TRUNC,
            libc::O_APPEND,
            libc::O_TMPFILE,
        ] {
            assert_eq!(
                call(libc::SYS_openat, [0, 0, o(flags), 0, 0, 0]),
                NOTIFY,
                "{flags:#o}"
            );
        }
        for nr in [
            libc::SYS_openat2,
            libc::SYS_renameat2,
            libc::SYS_unlinkat,
            libc::SYS_linkat,
            libc::SYS_fchmodat,
            libc::SYS_truncate,
            libc::SYS_mkdir,
        ] {
            assert_eq!(call(nr, [0; 6]), NOTIFY, "{nr}");
        }
        let ns = u64::from(libc::CLONE_NEWNS as u32);
        assert_eq!(
            call(libc::SYS_unshare, [ns, 0, 0, 0, 0, 0]),
            errno(libc::EPERM)
        );
        assert_eq!(
            call(
                libc::SYS_unshare,
                [u64::from(libc::CLONE_FILES as u32), 0, 0, 0, 0, 0]
            ),
            ALLOW
        );
        assert_eq!(
            call(libc::SYS_clone, [ns | 17, 0, 0, 0, 0, 0]),
            errno(libc::EPERM)
        );
        assert_eq!(call(libc::SYS_clone, [17, 0, 0, 0, 0, 0]), ALLOW);
        assert_eq!(call(libc::SYS_clone3, [0; 6]), errno(libc::ENOSYS));
        assert_eq!(call(libc::SYS_io_uring_setup, [0; 6]), errno(libc::ENOSYS));
        assert_eq!(call(libc::SYS_mount, [0; 6]), errno(libc::EPERM));
        assert_eq!(
            call(libc::SYS_open_by_handle_at, [0; 6]),
            errno(libc::EPERM)
        );
        assert_eq!(verdict(x86, 0x4000_0000 | 2, [0; 6]), errno(libc::ENOSYS));
        assert_eq!(
            verdict(0x4000_0003, 5, [0; 6]),
            libc::SECCOMP_RET_KILL_PROCESS
        );
    }
}
