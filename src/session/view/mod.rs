//! The questions the mounts' views ask the authority: may this session
//! open this path now (`opens.rs`, for `crate::view`), and the pi view's
//! forwarded requests (`pi_view.rs`). The top of the library: they call
//! the authority and the walk, and nothing in `session/` calls them.

pub mod opens;
pub mod pi_view;
