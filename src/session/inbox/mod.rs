//! Deciding at an inbox: a person's decision, the grants it records or
//! revokes and the re-walk they start (`deciding.rs`), and the JSON views
//! a mount shows of inboxes and sessions (`views.rs`). Above the walk,
//! which it calls to re-judge a waiting ask.

pub(in crate::session) mod deciding;
pub(in crate::session) mod views;
