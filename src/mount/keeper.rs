//! The supervisor keeps the enforcement views' connections too.
//!
//! A view (`src/view/`) is a FUSE mount of its own that the server makes
//! for `permfs run`. Its `/dev/fuse` descriptor used to live only in the
//! server, so a crash of the server ended the connection and the sandbox
//! whose cwd it was saw `ENOTCONN`. Now the server hands a copy of each
//! view's descriptor, with what the view is (its [`definition`]), to the
//! supervisor over a `SOCK_SEQPACKET` pair of its own (`keep`), and says
//! when the view ends (`drop`); the supervisor passes every view it still
//! holds to the next server at its start, which serves each on the same
//! connection as the main mount's is taken over.
//!
//! Why a second socket: the control socket is read line by line through a
//! buffer, and a descriptor attached to bytes a buffered `read` takes
//! would be closed unseen. A sequenced-packet socket keeps each message,
//! and its descriptor, whole; a message sent before the server died is
//! still read after (the supervisor drains the socket then).
//!
//! [`definition`]: crate::view::ViewDefinition

use nix::sys::socket::{
    recvmsg, sendmsg, socketpair, AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags,
    SockFlag, SockType,
};
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

/// The longest message: a definition names a session, a root and a mount
/// point, each a path; 64 KiB is far above any.
const MAX_MESSAGE: usize = 64 * 1024;

/// A new pair: (the supervisor's end, the server's end). Both close on exec.
pub fn pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(std::io::Error::from)
}

/// The server's end: it tells the supervisor which views to keep.
pub struct Keeper {
    socket: Mutex<OwnedFd>,
}

impl Keeper {
    /// The end inherited as descriptor `fd` (named in the supervisor's
    /// `hello`).
    pub fn from_fd(fd: RawFd) -> std::io::Result<Self> {
        // SAFETY: fcntl on a descriptor number only reads its flags.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the supervisor passed this descriptor to this process
        // alone; nothing else here owns it. It is close-on-exec from now
        // on, so no judge or child inherits it.
        let socket = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sets a flag on a descriptor this process owns.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        Ok(Self {
            socket: Mutex::new(socket),
        })
    }

    /// A second handle on the same socket (the kernel mechanism keeps its
    /// descriptors beside the views'; each message is whole either way).
    pub fn try_clone(&self) -> std::io::Result<Self> {
        let socket = self.socket.lock().unwrap_or_else(|p| p.into_inner());
        Ok(Self {
            socket: Mutex::new(socket.try_clone()?),
        })
    }

    /// Hands a copy of view `fd` to the supervisor with its definition.
    /// Returns once the message is in the socket: from then on the
    /// supervisor holds the connection even if this process dies at once.
    pub fn keep(&self, definition: &str, fd: BorrowedFd<'_>) -> std::io::Result<()> {
        self.send(&format!("keep {definition}"), Some(fd))
    }

    /// The view `key` ended: the supervisor lets its connection go.
    pub fn drop_view(&self, key: &str) -> std::io::Result<()> {
        self.send(&format!("drop {key}"), None)
    }

    fn send(&self, message: &str, fd: Option<BorrowedFd<'_>>) -> std::io::Result<()> {
        let socket = self.socket.lock().unwrap_or_else(|p| p.into_inner());
        send(&socket, message, fd)
    }

    /// The `count` views the supervisor handed over before `go`: each
    /// definition with its connection's descriptor.
    pub fn take(&self, count: usize) -> Vec<(String, OwnedFd)> {
        if count == 0 {
            return Vec::new();
        }
        let socket = self.socket.lock().unwrap_or_else(|p| p.into_inner());
        let views: Vec<(String, OwnedFd)> = drain(&socket)
            .into_iter()
            .filter_map(|kept| match kept {
                Kept::Keep { definition, fd } => Some((definition, fd)),
                Kept::Drop { .. } => None,
            })
            .collect();
        if views.len() != count {
            tracing::warn!(
                said = count,
                received = views.len(),
                "the supervisor's views did not all arrive"
            );
        }
        views
    }
}

/// The supervisor hands a view it holds to a new server (before `go`).
pub fn send_keep(socket: &OwnedFd, definition: &str, fd: &OwnedFd) -> std::io::Result<()> {
    use std::os::fd::AsFd;
    send(socket, &format!("keep {definition}"), Some(fd.as_fd()))
}

fn send(socket: &OwnedFd, message: &str, fd: Option<BorrowedFd<'_>>) -> std::io::Result<()> {
    if message.len() > MAX_MESSAGE {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "a view's definition is too long to keep",
        ));
    }
    let payload = [IoSlice::new(message.as_bytes())];
    let fds: Vec<RawFd> = fd.iter().map(|fd| fd.as_raw_fd()).collect();
    let rights = [ControlMessage::ScmRights(&fds)];
    let control: &[ControlMessage] = if fds.is_empty() { &[] } else { &rights };
    loop {
        match sendmsg::<()>(
            socket.as_raw_fd(),
            &payload,
            control,
            MsgFlags::MSG_NOSIGNAL,
            None,
        ) {
            Ok(_) => return Ok(()),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(error) => return Err(error.into()),
        }
    }
}

/// One message the supervisor read.
#[derive(Debug)]
pub enum Kept {
    /// `keep <definition>`, with the view's descriptor.
    Keep { definition: String, fd: OwnedFd },
    /// `drop <key>`.
    Drop { key: String },
}

/// Reads every message waiting on the supervisor's end without blocking.
/// After the server died, this is what it said before it died.
pub fn drain(socket: &OwnedFd) -> Vec<Kept> {
    let mut messages = Vec::new();
    let mut buffer = vec![0u8; MAX_MESSAGE + 1];
    loop {
        let mut space = nix::cmsg_space!([RawFd; 4]);
        let mut slices = [IoSliceMut::new(&mut buffer)];
        let received = recvmsg::<()>(
            socket.as_raw_fd(),
            &mut slices,
            Some(&mut space),
            MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_CMSG_CLOEXEC,
        );
        let message = match received {
            Ok(message) => message,
            Err(nix::errno::Errno::EINTR) => continue,
            // EAGAIN: nothing more now; anything else: the socket is done.
            Err(_) => break,
        };
        let bytes = message.bytes;
        let mut fds: Vec<OwnedFd> = Vec::new();
        if let Ok(cmsgs) = message.cmsgs() {
            for cmsg in cmsgs {
                if let ControlMessageOwned::ScmRights(received) = cmsg {
                    // SAFETY: the kernel just installed these descriptors
                    // in this process for this message; nothing else owns
                    // them.
                    fds.extend(
                        received
                            .into_iter()
                            .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                    );
                }
            }
        }
        if bytes == 0 && fds.is_empty() {
            // The server's end is closed and everything it sent was read.
            break;
        }
        let text = String::from_utf8_lossy(&buffer[..bytes.min(buffer.len())]).into_owned();
        if let Some(definition) = text.strip_prefix("keep ") {
            match fds.into_iter().next() {
                Some(fd) => messages.push(Kept::Keep {
                    definition: definition.to_string(),
                    fd,
                }),
                None => tracing::warn!("a view to keep came without its descriptor"),
            }
        } else if let Some(key) = text.strip_prefix("drop ") {
            messages.push(Kept::Drop {
                key: key.to_string(),
            });
        } else {
            tracing::warn!(message = %text, "the server said something the keeper does not know");
        }
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_kept_descriptor_survives_its_sender_and_a_drop_follows_in_order() {
        let (ours, theirs) = pair().expect("pair");
        let keeper = Keeper {
            socket: Mutex::new(theirs),
        };
        let file = tempfile::tempfile().expect("file");
        keeper.keep(r#"{"key":"v1"}"#, file.as_fd()).expect("kept");
        keeper.drop_view("v1").expect("dropped");
        // The sender is gone: what it sent is still read.
        drop(keeper);
        drop(file);
        let kept = drain(&ours);
        assert_eq!(kept.len(), 2, "{kept:?}");
        let Kept::Keep { definition, fd } = &kept[0] else {
            panic!("keep first: {kept:?}");
        };
        assert_eq!(definition, r#"{"key":"v1"}"#);
        // The descriptor is open here, close-on-exec.
        // SAFETY: reads the flags of a descriptor this test owns.
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) };
        assert!(flags >= 0 && flags & libc::FD_CLOEXEC != 0);
        assert!(matches!(&kept[1], Kept::Drop { key } if key == "v1"));
        assert!(drain(&ours).is_empty(), "nothing is read twice");
    }
}
