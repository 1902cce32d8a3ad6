//! The facts of an ask: what is accessed, in every alias form, by whom.
//! Computed once at the asking session and never re-derived downstream.

pub mod path_text;
