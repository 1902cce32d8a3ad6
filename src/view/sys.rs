//! The few system calls the view makes on the real directory, each on a
//! directory descriptor and a single name (never a path that could cross
//! a symlink), so what is judged is what is touched.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

pub fn cname(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn check(result: libc::c_int) -> io::Result<libc::c_int> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

/// `openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC, mode)`.
pub fn open_at(dir: RawFd, name: &OsStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    let name = cname(name)?;
    // SAFETY: a valid C string and descriptor; the result is checked.
    let fd = check(unsafe {
        libc::openat(
            dir,
            name.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    })?;
    // SAFETY: a descriptor just returned to us, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An `O_PATH` descriptor of `name` itself (a symlink is not followed).
pub fn path_fd(dir: RawFd, name: &OsStr) -> io::Result<OwnedFd> {
    open_at(dir, name, libc::O_PATH, 0)
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`; an empty name stats `dir`.
pub fn stat_at(dir: RawFd, name: &OsStr) -> io::Result<libc::stat> {
    let cname = cname(name)?;
    let flags = if name.is_empty() {
        libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW
    } else {
        libc::AT_SYMLINK_NOFOLLOW
    };
    // SAFETY: zeroed plain-data struct, filled by the kernel.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    check(unsafe { libc::fstatat(dir, cname.as_ptr(), &mut st, flags) })?;
    Ok(st)
}

/// The access mode a descriptor was opened with (`O_RDONLY`, `O_WRONLY`,
/// `O_RDWR`).
pub fn access_mode(fd: RawFd) -> io::Result<i32> {
    // SAFETY: F_GETFL reads the descriptor's flags; the result is checked.
    check(unsafe { libc::fcntl(fd, libc::F_GETFL) }).map(|flags| flags & libc::O_ACCMODE)
}

pub fn stat_fd(fd: RawFd) -> io::Result<libc::stat> {
    stat_at(fd, OsStr::new(""))
}

/// `/proc/self/fd/N`: names the inode a descriptor holds (an `O_PATH`
/// one included) for the calls that take no descriptor.
pub fn proc_path(fd: &OwnedFd) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap_or_default()
}

pub fn mkdir_at(dir: RawFd, name: &OsStr, mode: u32) -> io::Result<()> {
    let name = cname(name)?;
    // SAFETY: valid C string and descriptor.
    check(unsafe { libc::mkdirat(dir, name.as_ptr(), mode as libc::mode_t) }).map(drop)
}

pub fn mknod_at(dir: RawFd, name: &OsStr, mode: u32, rdev: u32) -> io::Result<()> {
    let name = cname(name)?;
    // SAFETY: valid C string and descriptor.
    check(unsafe {
        libc::mknodat(
            dir,
            name.as_ptr(),
            mode as libc::mode_t,
            rdev as libc::dev_t,
        )
    })
    .map(drop)
}

pub fn symlink_at(target: &OsStr, dir: RawFd, name: &OsStr) -> io::Result<()> {
    let (target, name) = (cname(target)?, cname(name)?);
    // SAFETY: valid C strings and descriptor.
    check(unsafe { libc::symlinkat(target.as_ptr(), dir, name.as_ptr()) }).map(drop)
}

pub fn unlink_at(dir: RawFd, name: &OsStr, flags: i32) -> io::Result<()> {
    let name = cname(name)?;
    // SAFETY: valid C string and descriptor.
    check(unsafe { libc::unlinkat(dir, name.as_ptr(), flags) }).map(drop)
}

pub fn rename_at(
    from: RawFd,
    name: &OsStr,
    to: RawFd,
    new_name: &OsStr,
    flags: u32,
) -> io::Result<()> {
    let (name, new_name) = (cname(name)?, cname(new_name)?);
    // SAFETY: valid C strings and descriptors.
    check(unsafe { libc::renameat2(from, name.as_ptr(), to, new_name.as_ptr(), flags) }).map(drop)
}

/// A hard link of the inode `fd` holds (`AT_EMPTY_PATH` needs
/// `CAP_DAC_READ_SEARCH`; the `/proc` path works for anyone).
pub fn link_fd(fd: &OwnedFd, dir: RawFd, new_name: &OsStr) -> io::Result<()> {
    let (from, to) = (proc_path(fd), cname(new_name)?);
    // SAFETY: valid C strings and descriptor.
    check(unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            dir,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    })
    .map(drop)
}

pub fn readlink_at(dir: RawFd, name: &OsStr) -> io::Result<Vec<u8>> {
    let name = cname(name)?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: the buffer's length is passed; the result is checked.
    let n = unsafe { libc::readlinkat(dir, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

pub fn chown_fd(fd: &OwnedFd, uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: an O_PATH (or any) descriptor with an empty path.
    check(unsafe {
        libc::fchownat(
            fd.as_raw_fd(),
            c"".as_ptr(),
            uid,
            gid,
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
        )
    })
    .map(drop)
}

pub fn chmod_fd(fd: &OwnedFd, mode: u32) -> io::Result<()> {
    let path = proc_path(fd);
    // SAFETY: valid C string.
    check(unsafe { libc::chmod(path.as_ptr(), mode as libc::mode_t) }).map(drop)
}

pub fn truncate_fd(fd: &OwnedFd, size: u64) -> io::Result<()> {
    let path = proc_path(fd);
    // SAFETY: valid C string.
    check(unsafe { libc::truncate(path.as_ptr(), size as libc::off_t) }).map(drop)
}

pub fn ftruncate(fd: RawFd, size: u64) -> io::Result<()> {
    // SAFETY: plain call on a descriptor.
    check(unsafe { libc::ftruncate(fd, size as libc::off_t) }).map(drop)
}

pub fn utimens_fd(fd: &OwnedFd, times: [libc::timespec; 2]) -> io::Result<()> {
    let path = proc_path(fd);
    // SAFETY: valid C string and a two-element array.
    check(unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), times.as_ptr(), 0) }).map(drop)
}

pub fn pread(fd: RawFd, size: usize, offset: u64) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; size];
    // SAFETY: the buffer's length is passed.
    let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), size, offset as libc::off_t) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

pub fn pwrite(fd: RawFd, data: &[u8], offset: u64) -> io::Result<usize> {
    // SAFETY: the data's length is passed.
    let n = unsafe { libc::pwrite(fd, data.as_ptr().cast(), data.len(), offset as libc::off_t) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

pub fn fsync(fd: RawFd, datasync: bool) -> io::Result<()> {
    // SAFETY: plain calls on a descriptor.
    check(unsafe {
        if datasync {
            libc::fdatasync(fd)
        } else {
            libc::fsync(fd)
        }
    })
    .map(drop)
}

pub fn fallocate(fd: RawFd, mode: i32, offset: u64, length: u64) -> io::Result<()> {
    // SAFETY: plain call on a descriptor.
    check(unsafe { libc::fallocate(fd, mode, offset as libc::off_t, length as libc::off_t) })
        .map(drop)
}

pub fn statfs(fd: RawFd) -> io::Result<libc::statvfs> {
    // SAFETY: zeroed plain-data struct filled by the kernel.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    check(unsafe { libc::fstatvfs(fd, &mut st) })?;
    Ok(st)
}

pub fn set_xattr(fd: &OwnedFd, name: &OsStr, value: &[u8], flags: i32) -> io::Result<()> {
    let (path, name) = (proc_path(fd), cname(name)?);
    // SAFETY: valid C strings; the value's length is passed.
    check(unsafe {
        libc::setxattr(
            path.as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            flags,
        )
    })
    .map(drop)
}

pub fn remove_xattr(fd: &OwnedFd, name: &OsStr) -> io::Result<()> {
    let (path, name) = (proc_path(fd), cname(name)?);
    // SAFETY: valid C strings.
    check(unsafe { libc::removexattr(path.as_ptr(), name.as_ptr()) }).map(drop)
}

/// The first bytes of `/proc/<pid>/cmdline`, spaces for NULs: who opened.
pub fn command_line(pid: u32) -> String {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let mut text: String = String::from_utf8_lossy(&bytes)
        .replace('\0', " ")
        .trim()
        .chars()
        .take(200)
        .collect();
    if text.is_empty() {
        text = "(unknown)".into();
    }
    text
}

/// The entries of the directory open at `fd` (`.` and `..` left out):
/// each name and whether it is a directory (by `d_type`, or `fstatat`
/// where the filesystem gives none). Read through a duplicate, so `fd`
/// keeps its position; no path is used (a thread in another mount
/// namespace or root lists the same directory).
pub fn list_fd(fd: RawFd) -> io::Result<Vec<(std::ffi::OsString, bool)>> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: a new descriptor for the same open directory.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `dup` is ours; fdopendir takes it over (closedir closes it).
    let dir = unsafe { libc::fdopendir(dup) };
    if dir.is_null() {
        let error = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so `dup` is still ours to close.
        unsafe { libc::close(dup) };
        return Err(error);
    }
    // SAFETY: `dir` is a valid stream; rewind starts at the first entry.
    unsafe { libc::rewinddir(dir) };
    let mut out = Vec::new();
    let result = loop {
        // SAFETY: errno is cleared to tell the end from an error.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: `dir` is valid until closedir below.
        let entry = unsafe { libc::readdir64(dir) };
        if entry.is_null() {
            let errno = io::Error::last_os_error();
            break if errno.raw_os_error().unwrap_or(0) == 0 {
                Ok(())
            } else {
                Err(errno)
            };
        }
        // SAFETY: readdir returned a valid entry with a NUL-terminated name.
        let (name, kind) = unsafe {
            (
                std::ffi::CStr::from_ptr((*entry).d_name.as_ptr()),
                (*entry).d_type,
            )
        };
        let name = OsStr::from_bytes(name.to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        let is_dir = match kind {
            libc::DT_DIR => true,
            libc::DT_UNKNOWN => stat_at(fd, name)
                .map(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
                .unwrap_or(false),
            _ => false,
        };
        out.push((name.to_os_string(), is_dir));
    };
    // SAFETY: closes the stream and `dup`.
    unsafe { libc::closedir(dir) };
    result.map(|()| out)
}
