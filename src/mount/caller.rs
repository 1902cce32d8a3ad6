//! Who is calling: the uid FUSE hands us, and whether the calling thread
//! shares the daemon's mount namespace.
//!
//! A sandbox that was given one session directory runs in a mount
//! namespace of its own. Comparing namespaces is what tells such a caller
//! from the person at the terminal when both run as the same uid (see
//! [`crate::session::access`]). The check reads `/proc/<tid>/ns/mnt`,
//! which needs ptrace-read access to the caller: a daemon running as an
//! ordinary user cannot read it for other uids' processes, and an
//! unreadable namespace counts as "elsewhere" (never more standing).

use crate::session::Caller;
use std::path::PathBuf;

/// The daemon's own mount namespace, read once at start.
#[derive(Debug, Clone)]
pub struct Namespaces {
    daemon_mnt: Option<PathBuf>,
}

impl Namespaces {
    pub fn of_daemon() -> Self {
        Self {
            daemon_mnt: std::fs::read_link("/proc/self/ns/mnt").ok(),
        }
    }

    /// The caller behind a FUSE request from thread `pid` with `uid`.
    pub fn caller(&self, uid: u32, pid: u32) -> Caller {
        let in_daemon_namespace = pid != 0
            && self.daemon_mnt.as_ref().is_some_and(|daemon| {
                std::fs::read_link(format!("/proc/{pid}/ns/mnt")).is_ok_and(|mnt| &mnt == daemon)
            });
        Caller {
            uid,
            in_daemon_namespace,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_shares_the_daemons_namespace_and_pid_zero_does_not() {
        let namespaces = Namespaces::of_daemon();
        let me = std::process::id();
        assert!(namespaces.caller(0, me).in_daemon_namespace);
        assert!(!namespaces.caller(0, 0).in_daemon_namespace);
        assert!(!namespaces.caller(0, u32::MAX).in_daemon_namespace);
    }
}
