//! Judging facts against a policy: the reference's gates, with provenance.

pub mod judge;

pub use judge::{judge, Judgment, SurfaceCheck};
