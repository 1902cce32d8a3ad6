//! Judging facts against a policy: the reference's gates, with provenance.

pub mod explain;
pub mod judge;

pub use explain::explain;
pub use judge::{judge, Judgment, SurfaceCheck};
