//! The facts of an ask: what is accessed, in every alias form, by whom.
//! Computed once at the asking session and never re-derived downstream.

pub mod access_path;
pub mod bash;
pub mod fence;
pub mod forwarded;
pub mod intent;
pub mod memo;
pub mod patch;
pub mod path_text;
pub mod request;
